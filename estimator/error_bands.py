"""How far the point estimate has been off on published measurements, and the interval that follows.

The cost model's own interval (low, estimate, high) covers the alternatives it knows of: a setting nobody stated, a
library release, the allocator's fragmentation. It does not cover what it does not know, and on measurements from
sources it had never seen that was most of the error (issue 32: 32 % of the test half inside it). So every estimate's
peaks are widened to at least the error band of its kind of run: the 90th percentile of |ln(measured / estimate)|
over the calibration half's published measurements, each source group weighing as much as any other, measured
separately for each kind of run (full fine-tuning, LoRA, QLoRA, inference and generation, diffusion) and for plans
that state the settings the point estimate would otherwise choose (`left_unstated`) and plans that leave one of them
to it. The point estimate does not move; the band is `estimate × e^(±spread)` and the interval is the union of it and
the cost model's own. A cell with measurements from fewer than `MIN_GROUPS` source groups takes the band of every kind
pooled (with the same stated-or-not). The bands are derived by `accuracy.py --write` into `data/error_bands.json`;
nothing else is fitted, and the test half is never read to derive them.
"""

from __future__ import annotations

import dataclasses
import math
from collections import defaultdict
from collections.abc import Iterable
from functools import cache
from pathlib import Path

import msgspec

from .architectures import shape
from .plan import Estimate, Interval, Plan
from .unstated import unstated_kbit_preparation, unstated_load_dtype
from .versions import ROTARY_CACHE_UNTIL

BANDS_PATH = Path(__file__).parent / "data" / "error_bands.json"
QUANTILE = 0.9
MIN_GROUPS = 3
KINDS = ("full", "lora", "qlora", "inference", "diffusion")
KIND_NAMES = {
    "full": "full fine-tuning", "lora": "LoRA", "qlora": "QLoRA", "inference": "inference and generation",
    "diffusion": "diffusion", "pooled": "every kind of run",
}
STATED = ("stated", "unstated")


class Band(msgspec.Struct, frozen=True):
    spread: float  # the QUANTILE of |ln(measured / estimate)|, each source group weighing alike
    groups: int  # source groups with a measurement in the cell
    peaks: int  # measurements in the cell


class Bands(msgspec.Struct, frozen=True):
    quantile: float
    min_groups: int
    derived_from: str
    cells: dict[str, Band]  # "KIND/stated" or "KIND/unstated", and "pooled/..."


def kind_of_run(plan: Plan) -> str:
    """The kind of run an error band is measured for: a diffusion pipeline's whatever its mode, a forward without a
    backward, then training by what it trains (a quantised base with adapters, adapters, every parameter)."""
    if plan.model is not None and plan.model.kind == "diffusion":
        return "diffusion"
    if plan.mode != "train":
        return "inference"
    if plan.quant is not None:
        return "qlora"
    return "lora" if plan.lora_rank is not None else "full"


def left_unstated(plan: Plan) -> list[str]:
    """The settings this plan leaves to the estimator's choice that move the point estimate or what is measured
    (the cost model's estimate takes today's releases' behaviour or the usual choice; see unstated.py and the plan's
    fields). The CUDA context's kernel images are left out: they only raise the high end."""
    transformers_layers = (plan.model_code == "transformers" and plan.model is not None and plan.model.kind != "diffusion"
                           and shape(plan.model) is not None)
    unstated = []
    if plan.model_code == "own":
        unstated.append("model code")
    if plan.attention is None and transformers_layers and plan.sdpa_dispatch is None:
        unstated.append("attention kernel")
    if transformers_layers and plan.rotary_cache is None and plan.model is not None and plan.model.family in ROTARY_CACHE_UNTIL:
        unstated.append("per-layer rotary caches (transformers version)")
    if plan.mode == "train":
        if plan.quant is not None and plan.quant_keeps_inputs is None:
            unstated.append("bitsandbytes version")
        if unstated_kbit_preparation(plan):
            unstated.append("peft's kbit preparation")
        if plan.lengths_vary is None:
            unstated.append("whether the samples vary in length")
        if plan.trainer_default_optimizer and plan.trainer_fused_adamw is None:
            unstated.append("the Trainer's default optimizer (torch version)")
        if plan.trl_default_checkpointing and plan.trl_checkpointing is None:
            unstated.append("TRL's default checkpointing (TRL version)")
        if plan.sharding in ("fsdp", "fsdp-grad-op") and plan.dtype.startswith("amp") and plan.fsdp_param_dtype is None:
            unstated.append("FSDP's param_dtype")
    if unstated_load_dtype(plan) and plan.loads_checkpoint_dtype is None:
        unstated.append("the weights' load dtype (transformers version)")
    if plan.mode == "generate" and plan.prompt_logits_whole is None:
        unstated.append("the prompt's logits (transformers version)")
    if plan.mode == "generate" and plan.cache_copied is None and plan.model_code == "transformers":
        unstated.append("generate's cache between steps (transformers version)")
    if plan.mode == "infer" and plan.logits_upcast is None:
        unstated.append("the logits' dtype (transformers version)")
    return unstated


def cell_of(plan: Plan) -> str:
    return f"{kind_of_run(plan)}/{'unstated' if left_unstated(plan) else 'stated'}"


@cache
def stored_bands() -> Bands:
    return msgspec.json.decode(BANDS_PATH.read_bytes(), type=Bands)


def band_of(plan: Plan, bands: Bands) -> tuple[str, Band]:
    """The cell a plan's band is read from: its kind's, or every kind's pooled where its kind has too few sources."""
    cell = cell_of(plan)
    if cell in bands.cells:
        return cell, bands.cells[cell]
    pooled = "pooled/" + cell.split("/")[1]
    return pooled, bands.cells[pooled]


def widened(result: Estimate, bands: Bands | None = None) -> Estimate:
    """``result`` with each peak's interval reaching at least its kind's error band around the point estimate, and a
    note saying what the interval covers."""
    bands = bands or stored_bands()
    cell, band = band_of(result.plan, bands)
    factor = math.exp(band.spread)

    def reaching(peak: Interval) -> Interval:
        return Interval(min(peak.low, peak.estimate / factor), peak.estimate, max(peak.high, peak.estimate * factor))

    kind, stated = cell.split("/")
    own_kind = kind_of_run(result.plan)
    measured_for = (KIND_NAMES[kind] if kind == own_kind
                    else f"every kind of run pooled ({KIND_NAMES[own_kind]} is measured on fewer than {bands.min_groups} groups)")
    unstated = left_unstated(result.plan)
    note = (
        f"the interval covers the cost model's own alternatives and at least ×/÷{factor:.2f} around the estimate: the "
        f"{bands.quantile:.0%} quantile of the estimate's error over {band.groups} calibration source groups of published "
        f"measurements ({band.peaks} estimates) for {measured_for}, "
        + (f"with settings left unstated ({', '.join(unstated)})" if stated == "unstated"
           else "with every setting it depends on stated")
    )
    return dataclasses.replace(
        # the process peak's band applies to what the run needs; the cache it gives back (samples of varying length)
        # is added after, so that whether lengths vary never changes what must fit
        result, allocated=reaching(result.allocated), reserved=reaching(result.reserved),
        process=reaching(result.needed) + result.cached,
        assumptions=[*result.assumptions, note],
    )


def weighted_quantile(values: list[tuple[float, float]], quantile: float) -> float:
    """The smallest value whose (value, weight) pairs at or below it weigh at least ``quantile`` of the whole."""
    ordered = sorted(values)
    total = sum(weight for _, weight in ordered)
    running = 0.0
    for value, weight in ordered:
        running += weight
        if running >= quantile * total - 1e-12:
            return value
    return ordered[-1][0]


def derive(residuals: Iterable[tuple[str, str, float]], derived_from: str) -> Bands:
    """The bands from (cell, source group, ln(measured / estimate)) triples: per cell and per stated-or-not pooled over
    every kind, each group's measurements sharing one unit of weight."""
    by_cell: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for cell, group, residual in residuals:
        by_cell[cell][group].append(abs(residual))
        by_cell["pooled/" + cell.split("/")[1]][group].append(abs(residual))
    cells = {}
    for cell, groups in sorted(by_cell.items()):
        if len(groups) < MIN_GROUPS and not cell.startswith("pooled/"):
            continue
        weighted = [(error, 1.0 / len(errors)) for errors in groups.values() for error in errors]
        cells[cell] = Band(round(weighted_quantile(weighted, QUANTILE), 4), len(groups), len(weighted))
    return Bands(QUANTILE, MIN_GROUPS, derived_from, cells)


def encoded(bands: Bands) -> bytes:
    return msgspec.json.format(msgspec.json.encode(bands), indent=2) + b"\n"
