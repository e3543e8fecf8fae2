"""LoRA on a fused query/key/value projection (GPT-2's and Qwen 1.0's `c_attn`, Baichuan's `W_pack`) asked of a config
with separate projections: one adapter over the three widths, one copy of its input (adapters.adapter_dims)."""

from __future__ import annotations

import pytest

from trainlint.estimator.adapters import lora_params
from trainlint.estimator.architectures import find_architecture, shape
from trainlint.estimator.layer_activations import adapter_layer_adjustment
from trainlint.estimator.plan import Plan

LLAMA = find_architecture("llama-3.2-1b")


def test_one_fused_adapter_instead_of_three():
    geometry = shape(LLAMA)
    fused = Plan(model=LLAMA, lora_rank=16, lora_targets=("qkv_proj",), lora_dropout=0.0, dtype="bf16")
    separate = Plan(model=LLAMA, lora_rank=16, lora_targets=("q_proj", "k_proj", "v_proj"), lora_dropout=0.0, dtype="bf16")
    widths = sum(geometry.lora_dims[name][1] for name in ("q_proj", "k_proj", "v_proj"))
    assert lora_params(fused, geometry) == geometry.layers * 16 * (geometry.hidden + widths)
    assert lora_params(fused, geometry) < lora_params(separate, geometry)
    # peft's fp32 adapter keeps one 4-byte copy of the attention input and its rank-wide output, not three of each
    difference = adapter_layer_adjustment(separate, geometry) - adapter_layer_adjustment(fused, geometry)
    assert difference == pytest.approx(2 * 4.0 + 2 * 4.0 * 16 / geometry.hidden)
