"""The published measurements are a test set: enough rows, GPUs and methods, each with its source,
and every one of them gets an estimate (the numbers themselves are reported in docs/vram.md)."""

from __future__ import annotations

import json
from pathlib import Path

from trainlint.estimator.accuracy import published_results

DATA = json.loads((Path(__file__).resolve().parent.parent / "estimator" / "calibration" / "published_peaks.json").read_text())


def _method(plan: dict) -> str:
    if plan.get("mode") == "generate":
        return "generation"
    if plan.get("mode") == "infer":
        return "inference"
    if plan.get("sharding") in ("fsdp", "zero3"):
        return "sharded"
    if plan.get("quant"):
        return "qlora"
    return "lora" if plan.get("lora_rank") else "full"


def test_the_test_set_covers_gpus_methods_and_names_its_sources():
    rows = DATA["rows"]
    assert len(rows) >= 40 and len({row["gpu"] for row in rows}) >= 4
    assert {_method(row["plan"]) for row in rows} >= {"full", "lora", "qlora", "sharded", "generation", "inference"}
    assert any(row["plan"].get("model", "").startswith("sd") for row in rows), "diffusion"
    for row in rows:
        assert row["source"]["url"].startswith("https://") and row["source"]["title"] and row["source"]["measured"]
        assert row["outcome"] in ("ran", "oom") and (row["value"] is None) == (row["outcome"] == "oom")
        assert row["measured"] in ("allocated", "reserved", "process") and row["unit"] in ("GB", "GiB", "MiB")
    assert len({row["id"] for row in rows}) == len(rows)


def test_every_row_is_estimated():
    results = published_results()
    assert len(results) == len(DATA["rows"])
    for result in results:
        assert result["estimate"].low <= result["estimate"].estimate <= result["estimate"].high
        assert result["verdict"] in ("fits", "tight", "oom")
