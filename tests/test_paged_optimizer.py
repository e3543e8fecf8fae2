"""bitsandbytes' paged optimizers keep the state of large parameters in CUDA managed memory, which torch's allocator
does not count (estimator/paged.py): not in the allocated and reserved peaks, in the process peak."""

from __future__ import annotations

import pytest

from trainlint.estimator.architectures import find_architecture
from trainlint.estimator.costmodel import mechanism_estimate
from trainlint.estimator.plan import Plan

LLAMA = find_architecture("llama-3.2-1b")
COMMON = dict(model=LLAMA, dtype="bf16", batch_size=1, seq_len=512, attention="sdpa")


def test_a_paged_optimizer_state_is_outside_the_allocator_but_on_the_device():
    paged = mechanism_estimate(Plan(**COMMON, optimizer="paged-adamw-8bit"))
    plain = mechanism_estimate(Plan(**COMMON, optimizer="adamw-8bit"))
    state = plain.breakdown.optimizer.estimate
    assert paged.breakdown.optimizer.estimate == pytest.approx(state), "the same state, elsewhere"
    assert paged.allocated.estimate == pytest.approx(plain.allocated.estimate - state)
    assert paged.process.estimate == pytest.approx(plain.process.estimate - (plain.reserved.estimate - paged.reserved.estimate) + state)
    assert paged.process.low < paged.process.estimate, "the pages may go back to the host under pressure"
    assert any("CUDA managed memory" in note for note in paged.assumptions)


def test_small_adapters_stay_in_the_allocator():
    lora = dict(COMMON, lora_targets=("q_proj", "v_proj"), lora_dropout=0.0)
    small = mechanism_estimate(Plan(**lora, lora_rank=8, optimizer="paged-adamw-8bit"))
    assert small.allocated.estimate == pytest.approx(mechanism_estimate(Plan(**lora, lora_rank=8, optimizer="adamw-8bit")).allocated.estimate), (
        "rank 8 on a 2,048-wide layer: 16,384-element matrices, under bitsandbytes' 100,000"
    )
    large = mechanism_estimate(Plan(**lora, lora_rank=64, optimizer="paged-adamw-8bit"))
    unpaged = mechanism_estimate(Plan(**lora, lora_rank=64, optimizer="adamw-8bit"))
    # rank 64: A (64 x 2,048) is paged on both; B is 2,048 x 64 for q, 512 x 64 (32,768, not paged) for v
    share = (2 * 64 * 2048 + 2048 * 64) / (64 * (2048 + 2048) + 64 * (2048 + 512))
    assert unpaged.allocated.estimate - large.allocated.estimate == pytest.approx(share * unpaged.breakdown.optimizer.estimate)


def test_the_32_bit_paged_adamw_keeps_fp32_state_for_bf16_parameters():
    paged = mechanism_estimate(Plan(**COMMON, optimizer="paged-adamw"))
    torch_adamw = mechanism_estimate(Plan(**COMMON, optimizer="adamw"))
    assert paged.breakdown.optimizer.estimate == pytest.approx(2 * torch_adamw.breakdown.optimizer.estimate), (
        "two fp32 states where torch's AdamW keeps bf16 ones"
    )
    assert paged.allocated.estimate < torch_adamw.allocated.estimate, "all of it outside the allocator"


def test_modules_trained_beside_small_adapters_are_paged():
    lora = dict(COMMON, lora_rank=8, lora_targets=("q_proj", "v_proj"), lora_dropout=0.0, modules_to_save=("embeddings", "lm_head"))
    paged = mechanism_estimate(Plan(**lora, optimizer="paged-adamw-8bit"))
    plain = mechanism_estimate(Plan(**lora, optimizer="adamw-8bit"))
    adapters = mechanism_estimate(Plan(**{**lora, "modules_to_save": ()}, optimizer="adamw-8bit")).breakdown.optimizer.estimate
    # the adapters' 16,384-element matrices stay in the allocator; the embeddings' and head's copies do not
    assert plain.allocated.estimate - paged.allocated.estimate == pytest.approx(plain.breakdown.optimizer.estimate - adapters)
