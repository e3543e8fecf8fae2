"""The interval every estimate reaches: its kind of run's error on published calibration sources (error_bands.py)."""

from __future__ import annotations

import math

from trainlint.estimator import accuracy
from trainlint.estimator.architectures import find_architecture
from trainlint.estimator.costmodel import FITS, OOM, TIGHT, estimate, mechanism_estimate, verdict
from trainlint.estimator.error_bands import (
    EVERY_CELL,
    QUANTILE,
    Band,
    band_of,
    cell_of,
    conformal_band,
    derive,
    groups_needed,
    left_unstated,
    stored_bands,
    weighted_quantile,
)
from trainlint.estimator.hardware import resolve_target
from trainlint.estimator.plan import Plan
from trainlint.estimator.report import build, to_json

LLAMA = find_architecture("llama-3.2-1b")
QWEN = find_architecture("qwen2.5-7b")


def _stated_lora(**changes) -> Plan:
    settings = {"model": LLAMA, "batch_size": 4, "seq_len": 1024, "dtype": "bf16", "lora_rank": 16, "attention": "sdpa",
                "lengths_vary": False, "lazy_module_loading": True}
    return Plan(**{**settings, **changes})


def test_the_stored_bands_are_the_ones_the_calibration_half_gives():
    assert accuracy.derived_bands() == stored_bands(), "run `.venv/bin/python -P -m trainlint.estimator.accuracy --write`"


def test_the_bands_are_derived_from_calibration_sources_only():
    groups = {group for _, group, _ in accuracy._calibration_residuals()}
    assert groups and all(accuracy.split_of(f"https://{group}") == "calibration" for group in groups)
    held_out = "github.com/modelscope/ms-swift"
    assert held_out in groups
    assert held_out not in {group for _, group, _ in accuracy._calibration_residuals(leaving_out=held_out)}


def test_every_source_group_weighs_alike_in_the_quantile():
    # one group of a hundred exact estimates and two groups of one estimate off by half: the groups, not the rows, count
    residuals = [("lora/stated", "many", 0.0)] * 100 + [("lora/stated", "one", 0.5), ("lora/stated", "other", -0.5)]
    bands = derive(residuals, "test")
    assert "lora/stated" not in bands.cells  # three groups are too few for the rank
    assert bands.cells[EVERY_CELL] == Band(0.5, 3, 102, 0.75)  # their largest score, a new group within it 3 times in 4
    assert weighted_quantile([(0.0, 1.0), (1.0, 1.0)], 0.5) == 0.0
    assert weighted_quantile([(0.0, 1.0), (1.0, 1.0)], QUANTILE) == 1.0


def test_a_band_is_the_score_of_the_conformal_rank_among_the_groups():
    # each group's score is its own 90 % quantile: four exact rows and one off by `k` percent score k percent
    residuals = [("lora/stated", f"g{k}", 0.0) for k in range(1, 20) for _ in range(4)]
    residuals += [("lora/stated", f"g{k}", k / 100) for k in range(1, 20)]
    assert groups_needed(QUANTILE) == 9
    band = derive(residuals, "test").cells["lora/stated"]
    # 19 groups: rank ceil(20 × 0.9) = 18, so a new group's score is below the 18th smallest 18 times in 20
    assert band == Band(0.18, 19, 95, 0.9)
    assert conformal_band([0.1] * 8 + [0.4], 9, QUANTILE) == Band(0.4, 9, 9, 0.9)
    assert conformal_band([0.1] * 8, 8, QUANTILE).promised == round(8 / 9, 4)  # too few: the largest, promising less


def test_a_kind_measured_on_too_few_sources_takes_every_kinds_band():
    residuals = [("full/stated", "a", 0.3)] + [("lora/stated", f"g{k}", 0.1) for k in range(9)]
    bands = derive(residuals, "test")
    assert "full/stated" not in bands.cells and bands.cells["pooled/stated"].groups == 10
    full = _stated_lora(lora_rank=None)
    assert band_of(full, bands) == ("pooled/stated", bands.cells["pooled/stated"])
    assert band_of(_stated_lora(), bands) == ("lora/stated", bands.cells["lora/stated"])
    few = derive(residuals[:3], "test")  # no pooled cell has enough groups: every cell's, at its largest score
    assert band_of(_stated_lora(), few) == (EVERY_CELL, Band(0.3, 3, 3, 0.75))


def test_a_plan_that_leaves_a_setting_to_the_estimator_is_banded_as_unstated():
    assert left_unstated(_stated_lora()) == [] and cell_of(_stated_lora()) == "lora/stated"
    assert left_unstated(_stated_lora(attention=None)) == ["attention kernel"]
    assert "whether the samples vary in length" in left_unstated(_stated_lora(lengths_vary=None))
    assert cell_of(_stated_lora(quant="nf4")) == "qlora/unstated"  # the bitsandbytes release decides its kept inputs
    assert cell_of(_stated_lora(quant="nf4", quant_keeps_inputs=False)) == "qlora/unstated"  # peft's kbit preparation
    assert left_unstated(_stated_lora(quant="nf4", quant_keeps_inputs=False)) == ["peft's kbit preparation"]
    assert cell_of(_stated_lora(quant="nf4", quant_keeps_inputs=False, kbit_prepared=False)) == "qlora/stated"
    assert cell_of(Plan(model=QWEN, mode="generate", seq_len=512, attention="sdpa", rotary_cache=False)) == "inference/unstated"
    assert cell_of(Plan(model=QWEN, mode="generate", seq_len=512, attention="sdpa", rotary_cache=False,
                        prompt_logits_whole=False)) == "inference/unstated"  # generate's cache between steps
    assert cell_of(Plan(model=QWEN, mode="generate", seq_len=512, attention="sdpa", rotary_cache=False,
                        prompt_logits_whole=False, cache_copied=False)) == "inference/stated"


def test_the_interval_reaches_the_band_and_the_point_estimate_stays():
    plan = _stated_lora(attention=None)
    mechanisms, widened = mechanism_estimate(plan), estimate(plan)
    cell, band = band_of(plan, stored_bands())
    factor = math.exp(band.spread)
    for name in ("allocated", "reserved", "process"):
        before, after = getattr(mechanisms, name), getattr(widened, name)
        assert after.estimate == before.estimate
        assert after.high == max(before.high, before.estimate * factor)
        assert after.low == min(before.low, before.estimate / factor)
    assert widened.breakdown == mechanisms.breakdown
    assert any(note.startswith("the interval covers") and "attention kernel" in note for note in widened.assumptions), cell


def test_the_verdict_judges_the_widened_interval():
    plan = _stated_lora(batch_size=1, seq_len=512)
    mechanisms, widened = mechanism_estimate(plan), estimate(plan)
    between = (mechanisms.needed.low + widened.needed.low) / 2  # where the cost model's own low end would not fit
    assert widened.needed.low < between < mechanisms.needed.low
    assert verdict(mechanisms, between) == OOM and verdict(widened, between) == TIGHT
    assert verdict(widened, widened.needed.high * 1.01) == FITS


def test_the_json_report_names_the_band_and_what_was_left_unstated():
    plan = _stated_lora(attention=None)
    shown = to_json(build(plan, resolve_target("a10g", 1), {}))["error_band"]
    cell, band = band_of(plan, stored_bands())
    assert shown == {"cell": cell, "factor": round(math.exp(band.spread), 4), "quantile": QUANTILE,
                     "source_groups": band.groups, "promised": band.promised, "left_unstated": ["attention kernel"]}
