"""The published measurements: enough rows, sources and GPUs, each row with its source and its half, the halves
fixed by the split rule (by source, never by row), and every row estimated or counted as unanswered (the numbers
themselves are reported in docs/vram.md)."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import pytest

from trainlint.estimator.accuracy import METHODS, SPLITS, published_results, source_group, split_of, summarise
from trainlint.estimator.plan import Interval

DATA = json.loads((Path(__file__).resolve().parent.parent / "estimator" / "calibration" / "published_peaks.json").read_text())
ROWS = DATA["rows"]


def test_the_set_covers_enough_rows_sources_gpus_and_methods():
    assert len(ROWS) >= 463
    assert len({row["source"]["url"] for row in ROWS}) >= 44
    assert len({source_group(row["source"]["url"]) for row in ROWS}) >= 20
    assert len({row["gpu"] for row in ROWS}) >= 10
    assert sum(row["outcome"] == "oom" for row in ROWS) >= 54
    methods = {result["method"] for result in published_results()}
    assert methods >= set(METHODS)


def test_every_row_names_its_source_what_it_measured_and_its_half():
    for row in ROWS:
        assert row["source"]["url"].startswith("https://") and row["source"]["title"] and row["source"]["measured"]
        assert row["outcome"] in ("ran", "oom") and (row["value"] is None) == (row["outcome"] == "oom")
        assert row["measured"] in ("allocated", "reserved", "process") and row["unit"] in ("GB", "GiB", "MiB")
        assert row["split"] in SPLITS
        assert row["notes"]
        unmodelled = row.get("unmodelled", [])
        assert isinstance(unmodelled, list) and all(isinstance(item, str) and item for item in unmodelled)
    assert len({row["id"] for row in ROWS}) == len(ROWS)


def test_the_split_rule_reproduces_every_rows_half():
    assert all(row["split"] == split_of(row["source"]["url"]) for row in ROWS)


# Llama 3 8B's sequence-length sweeps on 8 GPUs (gpjt/fine-tune-2024-04): ZeRO-3 without checkpointing and ZeRO-2
# with the optimizer offloaded and checkpointing, batch 1, the lengths at 300-token steps down from each sweep's
# longest, each the largest of the 8 ranks' peaks.
SEQUENCE_SWEEPS = {
    "gpjt-llama-3-8b-zero3-fp16-8gpu-s": ((2041, 1741, 1441, 1141, 841, 541, 241), "zero3", False),
    "gpjt-llama-3-8b-zero2-offload-fp16-ckpt-8gpu-s": ((2001, 1701, 1401, 1101, 801, 501, 201), "zero2", True),
}


@pytest.mark.parametrize("prefix", SEQUENCE_SWEEPS)
def test_the_8b_sequence_length_sweeps_are_test_rows_whose_peak_grows_with_the_length(prefix):
    lengths, sharding, checkpointing = SEQUENCE_SWEEPS[prefix]
    rows = {int(row["id"].removeprefix(prefix)): row for row in ROWS if row["id"].startswith(prefix)}
    assert sorted(rows, reverse=True) == list(lengths)
    for length, row in rows.items():
        assert row["split"] == "test" and row["gpu"] == "a100-80gb" and row["gpus"] == 8
        assert row["plan"]["seq_len"] == length and row["plan"]["batch_size"] == 1
        assert row["plan"]["sharding"] == sharding
        assert row["plan"].get("gradient_checkpointing", False) == checkpointing
        assert row["source"]["releases"]["transformers"] == "4.40.0"
    peaks = [rows[length]["value"] for length in sorted(rows)]
    assert peaks == sorted(peaks)


# Full fine-tunes that ran out of memory, each a row on the half its group's hash gives: on one GPU, one batch above
# the largest its source states fitted (gpjt/fine-tune-2024-04's first notebook, the HF Trainer with fp16 autocast over
# fp32 Qwen1.5-0.5B on a 24 GiB card: batch 7 at 512 tokens, batch 1 at 2,048) or a run that did not
# (llama-recipes' finetuning.py defaults, fp32 Llama 2 7B on an A100 80GB; Alpaca's train.py under FSDP over one A100
# 80GB); on several GPUs, Alpaca's README command (FSDP, at most 512 tokens) on 8 A100 40GB and 4 A10, and FastChat's
# README command for Vicuna-7B (FSDP, checkpointing, 2,048 tokens) on 4 and 8 A100 40GB.
OUT_OF_MEMORY_RUNS = {
    "gpjt-qwen1.5-0.5b-full-amp-fp16-b8-s512-oom": ("test", "rtx-3090", 1, 8, 512, "amp-fp16", "ddp"),
    "gpjt-qwen1.5-0.5b-full-amp-fp16-b2-s2048-oom": ("test", "rtx-3090", 1, 2, 2048, "amp-fp16", "ddp"),
    "llama-cookbook-issue-llama-2-7b-full-fp32-a100-80gb-oom": ("calibration", "a100-80gb", 1, 4, 4096, "fp32", "ddp"),
    "alpaca-issue-llama-7b-full-fsdp-1xa100-80gb-oom": ("calibration", "a100-80gb", 1, 1, 512, "amp-bf16", "fsdp"),
    "alpaca-issue39-llama-7b-full-fsdp-8xa100-40gb-b4-oom": ("calibration", "a100-40gb", 8, 4, 512, "amp-bf16", "fsdp"),
    "alpaca-issue76-llama-7b-full-fsdp-4xa10-b1-oom": ("calibration", "a10", 4, 1, 512, "amp-bf16", "fsdp"),
    "fastchat-issue407-vicuna-7b-fsdp-4xa100-40gb-b2-oom": ("test", "a100-40gb", 4, 2, 2048, "amp-bf16", "fsdp"),
    "fastchat-issue407-vicuna-7b-fsdp-4xa100-40gb-b1-oom": ("test", "a100-40gb", 4, 1, 2048, "amp-bf16", "fsdp"),
    "fastchat-issue1781-vicuna-7b-fsdp-4xa100-40gb-b2-oom": ("test", "a100-40gb", 4, 2, 2048, "amp-bf16", "fsdp"),
    "fastchat-issue1781-vicuna-7b-fsdp-8xa100-40gb-b2-oom": ("test", "a100-40gb", 8, 2, 2048, "amp-bf16", "fsdp"),
}


@pytest.mark.parametrize("row_id", OUT_OF_MEMORY_RUNS)
def test_the_full_fine_tunes_that_ran_out_of_memory_are_rows(row_id):
    split, gpu, gpus, batch, length, dtype, sharding = OUT_OF_MEMORY_RUNS[row_id]
    row = next(row for row in ROWS if row["id"] == row_id)
    assert (row["split"], row["gpu"], row["gpus"], row["outcome"]) == (split, gpu, gpus, "oom")
    plan = row["plan"]
    assert (plan["batch_size"], plan["seq_len"], plan["dtype"], plan["optimizer"]) == (batch, length, dtype, "adamw")
    assert not plan.get("lora_rank") and plan.get("sharding", "ddp") == sharding


# Per half: sources, groups, GPU types, out-of-memory runs, rows from sources not seen while the estimator was
# built, and the kinds of run (the test half holds every kind the tables report).
FLOORS = {
    "calibration": {"sources": 21, "groups": 9, "gpus": 8, "oom": 19, "unseen rows": 139,
                    "methods": {"full", "lora", "qlora", "sharded", "generation", "diffusion"}},
    "test": {"sources": 23, "groups": 11, "gpus": 7, "oom": 35, "unseen rows": 249, "methods": set(METHODS)},
}


@pytest.mark.parametrize("split", SPLITS)
def test_each_half_holds_enough_sources_gpus_methods_and_out_of_memory_runs(split):
    half = [result for result in published_results() if result["split"] == split]
    rows = [result["row"] for result in half]
    floor = FLOORS[split]
    assert len({row["source"]["url"] for row in rows}) >= floor["sources"]
    assert len({result["group"] for result in half}) >= floor["groups"]
    assert len({row["gpu"] for row in rows}) >= floor["gpus"]
    assert sum(row["outcome"] == "oom" for row in rows) >= floor["oom"]
    assert sum(row["source"]["url"] not in DATA["seen_before_split"] for row in rows) >= floor["unseen rows"]
    assert {result["method"] for result in half} >= floor["methods"]


@pytest.mark.parametrize("split", SPLITS)
def test_no_run_that_did_not_fit_is_called_fits_and_no_completed_run_oom(split):
    """Issue 32's verdict criteria, on each half in aggregate: every observed out-of-memory run (or peak above the
    usable memory) is called `oom` or `tight`, and no run that completed is called `oom`."""
    summary = summarise([result for result in published_results() if result["split"] == split])
    assert summary["did_not_fit"] >= FLOORS[split]["oom"]
    assert (summary["false_fits"], summary["false_ooms"]) == (0, 0)


def test_a_group_is_never_on_both_sides():
    halves = defaultdict(set)
    for row in ROWS:
        halves[source_group(row["source"]["url"])].add(row["split"])
    assert all(len(sides) == 1 for sides in halves.values())


def test_the_sources_seen_before_the_split_are_sources_of_the_set():
    assert set(DATA["seen_before_split"]) <= {row["source"]["url"] for row in ROWS}
    assert "split" in DATA["about"] and "SHA-256" in DATA["about"]


@pytest.mark.parametrize(("url", "group"), [
    ("https://github.com/Lightning-AI/litgpt/blob/main/tutorials/resource-tables.md", "github.com/lightning-ai/litgpt"),
    ("https://github.com/Lightning-AI/litgpt/issues/553", "github.com/lightning-ai/litgpt"),
    ("https://raw.githubusercontent.com/pytorch/ao/abc/README.md", "github.com/pytorch/ao"),
    ("https://huggingface.co/blog/sd3", "huggingface.co/blog/sd3"),
    ("https://huggingface.co/datasets/sayakpaul/sample-datasets/blob/8285f76/x.csv", "huggingface.co/datasets/sayakpaul/sample-datasets"),
    ("https://huggingface.co/Qwen/Qwen3-8B/blob/main/README.md", "huggingface.co/qwen/qwen3-8b"),
    ("https://www.example.org/posts/memory/?utm=1#table", "example.org/posts/memory"),
])
def test_a_sources_group_is_its_repository_or_its_page(url, group):
    assert source_group(url) == group


def test_the_half_is_the_parity_of_the_groups_hash():
    # sha256("github.com/lightning-ai/litgpt") starts with an even byte, sha256("github.com/pytorch/torchtune") with an odd one
    assert split_of("https://github.com/Lightning-AI/litgpt/blob/main/README.md") == "calibration"
    assert split_of("https://github.com/pytorch/torchtune/blob/main/README.md") == "test"
    assert split_of("https://github.com/pytorch/torchtune/issues/961") == "test"
    # a repository that moved to a new owner stays one group: its rows cannot straddle the halves
    assert split_of("https://github.com/meta-pytorch/torchtune/blob/main/README.md") == "test"


def test_every_row_is_estimated_or_reported_unanswered():
    results = published_results()
    assert len(results) == len(ROWS)
    for result in results:
        if result["estimate"] is None:
            assert result["verdict"] == "unanswered" and "model is unknown" in result["unanswered"]
            continue
        assert result["estimate"].low <= result["estimate"].estimate <= result["estimate"].high
        assert result["verdict"] in ("fits", "tight", "oom")
    assert any(result["verdict"] == "unanswered" for result in results)


def _result(outcome, verdict, measured=None, estimate=None, unmodelled=()):
    peak = None if estimate is None else Interval(estimate * 0.9, estimate, estimate * 1.1)
    row = {"outcome": outcome, "unmodelled": list(unmodelled)}
    did_not_fit = outcome == "oom"
    return {"row": row, "estimate": peak, "measured": measured, "verdict": verdict, "did_not_fit": did_not_fit}


def test_the_summary_counts_false_fits_false_ooms_and_unanswered_rows():
    results = [
        _result("oom", "fits", estimate=10.0),                       # a false fit
        _result("oom", "oom", estimate=90.0),
        _result("ran", "oom", measured=50.0, estimate=100.0),        # a false OOM, 100 % over
        _result("ran", "fits", measured=10.0, estimate=10.5, unmodelled=["compile"]),
        _result("ran", "unanswered", measured=10.0),
    ]
    summary = summarise(results)
    assert (summary["rows"], summary["answered"], summary["unanswered"], summary["peaks"]) == (5, 4, 1, 2)
    assert (summary["false_fits"], summary["did_not_fit"]) == (1, 2)
    assert (summary["false_ooms"], summary["completed"]) == (1, 2)
    assert summary["mape"] == pytest.approx((1.0 + 0.05) / 2)
    assert summary["inside"] == 1
    assert (summary["expressed"], summary["expressed_mape"]) == (1, pytest.approx(1.0))
