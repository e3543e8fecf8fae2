"""The estimator against whole LoRA training iterations of small models replayed through the caching allocator's rules
(estimator/calibration/lora_peaks.py): TinyLlama 1.1B and Phi-2 with peft adapters, batch 1 to 8, the outputs
dropped before the backward or held through it. Every term of the estimate is alive in the replay: the point is
within 3 % of each replayed max_memory_allocated, and each replay is inside the interval."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trainlint.estimator.architectures import find_architecture
from trainlint.estimator.costmodel import estimate
from trainlint.estimator.plan import Plan

REPLAYS = json.loads((Path(__file__).resolve().parent.parent / "estimator" / "calibration" / "lora_peaks.json").read_text())


@pytest.mark.parametrize("row", REPLAYS["rows"], ids=lambda row: f"{row['model']}-b{row['batch']}-held{row['outputs_held']}")
def test_small_model_lora_matches_its_replay(row):
    plan = Plan(model=find_architecture(row["model"]), batch_size=row["batch"], seq_len=row["seq"], dtype=REPLAYS["dtype"],
                lora_rank=REPLAYS["lora_rank"], lora_targets=tuple(REPLAYS["lora_targets"]), lora_dropout=REPLAYS["lora_dropout"],
                attention=REPLAYS["attention"], lengths_vary=False, previous_graph_alive=row["outputs_held"])
    allocated = estimate(plan).allocated
    assert allocated.estimate == pytest.approx(row["allocated"], rel=0.03)
    assert allocated.low <= row["allocated"] <= allocated.high
