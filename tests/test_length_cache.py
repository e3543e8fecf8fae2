"""Training over samples of varying length: the caching allocator keeps the segments of earlier, shorter steps.

They show in max_memory_reserved and nvidia-smi but the allocator frees them before it fails a request, so they
widen the reserved and process peaks, not the verdict (calibration/varying_length_peaks.py replays such runs).
"""

from __future__ import annotations

import json
import statistics
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest
from cli_process import TRAINLINT

from trainlint.estimator import allocator
from trainlint.estimator.architectures import find_architecture
from trainlint.estimator.costmodel import mechanism_estimate, verdict
from trainlint.estimator.plan import ZERO, Plan
from trainlint.estimator.units import GIB

REPLAYS = json.loads((Path(__file__).resolve().parent.parent / "estimator" / "calibration" / "varying_length_peaks.json").read_text())


def _plan(**changes) -> Plan:
    settings = {
        "model": find_architecture("qwen2.5-1.5b"), "mode": "train", "dtype": "bf16", "batch_size": 1, "seq_len": 2048,
        "gradient_checkpointing": True, "lora_rank": 8, "lora_targets": ("q_proj", "k_proj", "v_proj"), "grad_accum": 16,
    }
    settings.update(changes)
    return Plan(**settings)


def _share(row: dict) -> float:
    whole = row["steps"][str(max(int(count) for count in row["steps"]))]
    return (whole["reserved"] - whole["allocated"]) / (whole["allocated"] - row["model_states"])


def test_the_cache_share_is_read_from_the_replayed_runs():
    shares = {(method, checkpointing): [_share(row) for row in REPLAYS["rows"]
                                        if row["method"] == method and row["checkpointing"] is checkpointing]
              for method in ("lora", "full") for checkpointing in (True, False)}
    every = [share for kind in shares.values() for share in kind]
    expected, high = allocator.LENGTH_CACHE["adapters"]
    assert expected == pytest.approx(statistics.median(shares["lora", True]), abs=0.005)
    assert high == pytest.approx(max(shares["lora", True]), abs=0.005)
    expected, high = allocator.LENGTH_CACHE["adapters, not checkpointed"]
    assert expected == pytest.approx(statistics.median(shares["lora", False]), abs=0.005)
    assert high == pytest.approx(max(every), abs=0.005)
    expected, high = allocator.LENGTH_CACHE["full"]
    assert expected == pytest.approx(statistics.median(shares["full", True]), abs=0.005)
    assert high == pytest.approx(max(every), abs=0.005)


def test_adapters_without_checkpointing_keep_less_of_their_activations_cached():
    """Not checkpointed, every layer's activations stay through the forward: many tensors of a layer's size, which the
    next, longer step's tensors reuse in part (replayed: 0.59 of the activations and loss cached, against 1.87 with
    checkpointing, where the recomputed layer's and the loss's few length-sized tensors each take new segments)."""
    plain = _plan(gradient_checkpointing=False)
    fixed, varying = mechanism_estimate(replace(plain, lengths_vary=False)), mechanism_estimate(replace(plain, lengths_vary=True))
    following_length = fixed.breakdown.activations.estimate + fixed.breakdown.logits.estimate
    share = allocator.LENGTH_CACHE["adapters, not checkpointed"][0]
    assert share < allocator.LENGTH_CACHE["adapters"][0]
    assert varying.reserved.estimate == pytest.approx(fixed.allocated.estimate + share * following_length)


def test_the_replays_reserve_more_as_the_run_goes_on():
    for row in REPLAYS["rows"]:
        reserved = [row["steps"][count]["reserved"] for count in sorted(row["steps"], key=int)]
        assert reserved == sorted(reserved), row


def test_varying_lengths_reserve_a_share_of_the_activations_and_loss_beyond_the_allocated_peak():
    fixed, varying = mechanism_estimate(_plan(lengths_vary=False)), mechanism_estimate(_plan(lengths_vary=True))
    parts = fixed.breakdown
    # the tensors whose size follows the length: activations and the loss over a 151,936-token vocabulary at 2,048 tokens
    following_length = parts.activations.estimate + parts.logits.estimate
    assert following_length > 0.5 * GIB
    assert varying.allocated == fixed.allocated
    # reserved over allocated is the replays' share of them, in place of one shape's fragmentation
    share = allocator.LENGTH_CACHE["adapters"][0]
    assert varying.reserved.estimate == pytest.approx(fixed.allocated.estimate + share * following_length)
    assert varying.cached.estimate == pytest.approx(varying.reserved.estimate - fixed.reserved.estimate)
    assert varying.cached.estimate > 0
    assert varying.process.estimate == pytest.approx(fixed.process.estimate + varying.cached.estimate)
    # what must fit is the same: the allocator frees those segments before it fails a request
    assert varying.needed.estimate == pytest.approx(fixed.process.estimate)
    assert varying.needed.high == pytest.approx(fixed.process.high)
    assert fixed.cached == ZERO
    # the low end: a run whose longest batch comes first reuses its segments
    assert varying.reserved.low == fixed.reserved.low and varying.cached.low == 0


def test_full_training_keeps_its_own_share_cached():
    full = mechanism_estimate(_plan(lora_rank=None, lengths_vary=True))
    parts = full.breakdown
    share = allocator.LENGTH_CACHE["full"][0]
    assert share < allocator.LENGTH_CACHE["adapters"][0]
    expected = max(full.allocated.estimate + share * (parts.activations.estimate + parts.logits.estimate),
                   full.reserved.estimate - full.cached.estimate)
    assert full.reserved.estimate == pytest.approx(expected)


def test_the_cache_never_takes_more_than_the_device_has():
    fixed = mechanism_estimate(_plan(lengths_vary=False))
    unbounded = mechanism_estimate(_plan(lengths_vary=True))
    usable = fixed.process.high + 0.5 * GIB  # less than the cache would take
    assert unbounded.process.high > usable
    bounded = mechanism_estimate(_plan(lengths_vary=True), usable_bytes=usable)
    assert bounded.process.high == pytest.approx(usable)
    assert bounded.needed == unbounded.needed
    assert verdict(bounded, usable) == "fits"


def test_unknown_lengths_widen_only_the_high_end_and_never_the_verdict():
    fixed, unknown = mechanism_estimate(_plan(lengths_vary=False)), mechanism_estimate(_plan())
    assert unknown.reserved.estimate == fixed.reserved.estimate and unknown.reserved.low == fixed.reserved.low
    assert unknown.reserved.high > fixed.reserved.high
    assert any("--lengths-vary" in note for note in unknown.assumptions)
    for usable in (fixed.process.low * 0.99, fixed.process.estimate, fixed.process.high * 1.01):
        assert verdict(unknown, usable) == verdict(fixed, usable)


def test_inference_keeps_no_length_cache():
    result = mechanism_estimate(_plan(mode="infer", lora_rank=None, gradient_checkpointing=False, grad_accum=1, lengths_vary=True))
    assert result.cached == ZERO


def test_the_cli_takes_whether_lengths_vary():
    def report(*flags: str) -> dict:
        result = subprocess.run(
            [*TRAINLINT, "estimate", "--model", "qwen2.5-1.5b", "--dtype", "bf16", "--seq-len", "2048",
             "--lora-rank", "8", "--gradient-checkpointing", "--format", "json", *flags],
            capture_output=True, text=True, check=False,
        )
        return json.loads(result.stdout)

    varying, fixed = report("--lengths-vary"), report("--fixed-lengths")
    assert varying["inputs"]["lengths_vary"] == {"value": True, "source": "command line"}
    assert fixed["inputs"]["lengths_vary"] == {"value": False, "source": "command line"}
    assert varying["peak"]["cached"]["estimate"] > 0 and fixed["peak"]["cached"]["high"] == 0
    assert varying["peak"]["needed"] == fixed["peak"]["needed"]
    assert varying["verdict"] == fixed["verdict"]
