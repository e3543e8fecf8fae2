"""LoRA adapters built in the model's dtype (torchtune's recipes: `lora_b(lora_a(dropout(x)))` in bf16 beside a
frozen bf16 linear, torchtune/modules/peft/lora.py), replayed with torch on the CPU: the tensors a Llama layer's
adapters keep for the backward, each storage counted once, against the cost model's accounting
(layer_activations._model_dtype_adapters_kept) and against peft's fp32 adapters."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from trainlint.estimator.architectures import find_architecture, shape
from trainlint.estimator.costmodel import mechanism_estimate
from trainlint.estimator.layer_activations import _model_dtype_adapters_kept
from trainlint.estimator.plan import Plan

RANK = 8
TOKENS = 12
ALL_LINEAR = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


class _AdaptedLinear(nn.Module):
    """A frozen linear with an adapter in the same dtype; dropout as CUDA runs it (native_dropout: a 1-byte mask)."""

    def __init__(self, d_in: int, d_out: int, dropout: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(d_out, d_in, dtype=torch.bfloat16), requires_grad=False)
        self.lora_a = nn.Linear(d_in, RANK, bias=False, dtype=torch.bfloat16)
        self.lora_b = nn.Linear(RANK, d_out, bias=False, dtype=torch.bfloat16)
        self.dropout = dropout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        dropped = torch.native_dropout(x, self.dropout, True)[0] if self.dropout > 0 else x
        return F.linear(x, self.weight) + 2.0 * self.lora_b(self.lora_a(dropped))


def _kept_per_token_and_unit(targets: tuple[str, ...], dropout: float) -> float:
    """What the adapters on ``targets`` keep, per token and hidden unit, with each linear fed the tensor it reads in a
    Llama layer: q, k and v the attention norm's output, o the attention kernel's output (which the kernel keeps
    anyway: not counted), gate and up the MLP norm's output, down the gated product."""
    arch = find_architecture("llama-3.2-1b")
    geometry = shape(arch)
    dims = geometry.lora_dims
    inputs = {
        "attention": torch.randn(TOKENS, geometry.hidden, dtype=torch.bfloat16, requires_grad=True),
        "attention output": torch.randn(TOKENS, geometry.hidden, dtype=torch.bfloat16, requires_grad=True),
        "mlp": torch.randn(TOKENS, geometry.hidden, dtype=torch.bfloat16, requires_grad=True),
        "product": torch.randn(TOKENS, geometry.intermediate, dtype=torch.bfloat16, requires_grad=True),
    }
    reads = {"q_proj": "attention", "k_proj": "attention", "v_proj": "attention", "o_proj": "attention output",
             "gate_proj": "mlp", "up_proj": "mlp", "down_proj": "product"}
    saved: dict[int, int] = {}
    parameters = set()
    kept_anyway = inputs["attention output"].untyped_storage().data_ptr()

    def pack(tensor: torch.Tensor) -> torch.Tensor:
        storage = tensor.untyped_storage()
        if storage.data_ptr() not in parameters and storage.data_ptr() != kept_anyway:
            saved[storage.data_ptr()] = storage.nbytes()
        return tensor

    outputs = []
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        for target in targets:
            module = _AdaptedLinear(*dims[target], dropout)
            parameters.update(p.untyped_storage().data_ptr() for p in module.parameters())
            outputs.append(module(inputs[reads[target]]))
    return sum(saved.values()) / (TOKENS * geometry.hidden)


@pytest.mark.parametrize("targets", [("q_proj", "v_proj"), ALL_LINEAR])
@pytest.mark.parametrize("dropout", [0.0, 0.05])
def test_adapters_in_the_model_dtype_keep_what_the_replay_keeps(targets, dropout):
    arch = find_architecture("llama-3.2-1b")
    plan = Plan(model=arch, lora_rank=RANK, lora_targets=targets, lora_dropout=dropout, dtype="bf16",
                model_code="torchtune", attention="sdpa")
    assert _model_dtype_adapters_kept(plan, shape(arch)) == pytest.approx(_kept_per_token_and_unit(targets, dropout), rel=1e-6)


def test_torchtune_adapters_keep_less_than_peft_fp32_ones_and_their_states_are_16_bit():
    arch = find_architecture("llama-3.1-8b")
    common = dict(model=arch, lora_rank=8, lora_targets=ALL_LINEAR, lora_dropout=0.0, dtype="bf16", batch_size=2,
                  seq_len=2048, attention="sdpa", gradient_checkpointing=False)
    peft = mechanism_estimate(Plan(**common)).breakdown
    torchtune = mechanism_estimate(Plan(**common, model_code="torchtune")).breakdown
    assert torchtune.activations.estimate < peft.activations.estimate, "no fp32 copy of each adapter's input"
    assert torchtune.optimizer.estimate == pytest.approx(peft.optimizer.estimate / 2), "AdamW's state in bf16, not fp32"
    assert torchtune.weights.estimate < peft.weights.estimate
