"""How far the point estimate has been off on published measurements, and the interval that follows.

The cost model's own interval (low, estimate, high) covers the alternatives it knows of: a setting nobody stated, a
library release, the allocator's fragmentation. It does not cover what it does not know, and on measurements from
sources it had never seen that was most of the error (issue 32: 32 % of the test half inside it). So every estimate's
peaks are widened to at least the error band of its kind of run, derived from the calibration half's published
measurements by source group, because a script the estimator is asked about is one more source: each group's
`QUANTILE` of |ln(measured / estimate)| is its score, and a cell's band is the score of rank ceil((n + 1) × QUANTILE)
among its n groups (split conformal prediction with the source group as the exchangeable unit). Under that
exchangeability, a new source's own `QUANTILE` of errors falls inside the band with probability at least rank / (n + 1)
(`Band.promised`). A cell needs `groups_needed(QUANTILE)` groups (9 for 0.9) before its rank exists; with fewer it takes
the band of every kind pooled with the same stated-or-not, and where that too has fewer, every cell's groups pooled at
their largest score, promising n / (n + 1) only. Cells: per kind of run (full fine-tuning, LoRA, QLoRA, inference and
generation, diffusion) and per whether the plan states the settings the point estimate would otherwise choose
(`left_unstated`). The point estimate does not move; the band is `estimate × e^(±spread)` and the interval is the union
of it and the cost model's own. The bands are derived by `accuracy.py --write` into `data/error_bands.json`; nothing
else is fitted, and the test half is never read to derive them.
"""

from __future__ import annotations

import dataclasses
import math
from collections import defaultdict
from collections.abc import Iterable
from functools import cache
from pathlib import Path

import msgspec

from .adapters import targets_the_head
from .architectures import shape
from .plan import Estimate, Interval, Plan
from .unstated import unstated_kbit_preparation, unstated_load_dtype
from .versions import ROTARY_CACHE_UNTIL

BANDS_PATH = Path(__file__).parent / "data" / "error_bands.json"
QUANTILE = 0.9
KINDS = ("full", "lora", "qlora", "inference", "diffusion")
KIND_NAMES = {
    "full": "full fine-tuning", "lora": "LoRA", "qlora": "QLoRA", "inference": "inference and generation",
    "diffusion": "diffusion", "pooled": "every kind of run",
}
STATED = ("stated", "unstated")
EVERY_CELL = "pooled/any"  # every kind, stated or not


class Band(msgspec.Struct, frozen=True):
    spread: float  # the score (a group's QUANTILE of |ln(measured / estimate)|) of the conformal rank among the groups
    groups: int  # source groups with a measurement in the cell
    peaks: int  # measurements in the cell
    # the probability, with source groups exchangeable, that a new source's QUANTILE of errors is within the band
    promised: float


class Bands(msgspec.Struct, frozen=True):
    quantile: float
    min_groups: int  # the groups a cell needs for the conformal rank (groups_needed)
    derived_from: str
    cells: dict[str, Band]  # "KIND/stated" or "KIND/unstated", "pooled/stated" or "pooled/unstated", and EVERY_CELL


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
        if plan.trl_default_loss and plan.trl_chunked_loss is None and not targets_the_head(plan):
            unstated.append("TRL's default loss (TRL version)")
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
    if pooled in bands.cells:
        return pooled, bands.cells[pooled]
    return EVERY_CELL, bands.cells[EVERY_CELL]


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
                    else f"every kind of run pooled ({KIND_NAMES[own_kind]} is measured on fewer than {bands.min_groups} "
                    "groups, too few for the rank)")
    unstated = left_unstated(result.plan)
    settings = ("with settings left unstated" if stated == "unstated" else "with every setting stated" if stated == "stated"
                else "stated or not")
    note = (
        f"the interval covers the cost model's own alternatives and at least ×/÷{factor:.2f} around the estimate: of "
        f"{band.groups} calibration source groups of published measurements ({band.peaks} estimates) for {measured_for}, "
        f"{settings}, the score of a new source (the {bands.quantile:.0%} quantile of its errors) is within it with "
        f"probability {band.promised:.0%} if sources are alike"
        + (f"; left unstated here: {', '.join(unstated)}" if unstated else "; every setting it depends on is stated here")
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


def groups_needed(quantile: float) -> int:
    """The fewest source groups whose conformal rank ceil((n + 1) × quantile) is one of them."""
    return math.ceil(quantile / (1.0 - quantile) - 1e-9)


def conformal_band(scores: list[float], peaks: int, quantile: float) -> Band:
    """The band of some groups' scores: the one of rank ceil((n + 1) × quantile), or the largest where n is too few for
    that rank, with the probability it promises a new group."""
    ordered = sorted(scores)
    rank = min(math.ceil((len(ordered) + 1) * quantile - 1e-9), len(ordered))
    return Band(round(ordered[rank - 1], 4), len(ordered), peaks, round(rank / (len(ordered) + 1), 4))


def derive(residuals: Iterable[tuple[str, str, float]], derived_from: str) -> Bands:
    """The bands from (cell, source group, ln(measured / estimate)) triples: per cell, per stated-or-not pooled over
    every kind, and over every cell, each group scored by its own QUANTILE of errors there (`conformal_band`). A cell is
    kept only where its groups are enough for the rank, save the last (every cell pooled: its largest score where they
    are not). A group is scored over all its rows, as a new source is one more group with all of its rows."""
    by_cell: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for cell, group, residual in residuals:
        for name in (cell, "pooled/" + cell.split("/")[1], EVERY_CELL):
            by_cell[name][group].append(abs(residual))
    needed = groups_needed(QUANTILE)
    cells = {}
    for cell, groups in sorted(by_cell.items()):
        if len(groups) < needed and cell != EVERY_CELL:
            continue
        scores = [weighted_quantile([(error, 1.0) for error in errors], QUANTILE) for errors in groups.values()]
        cells[cell] = conformal_band(scores, sum(len(errors) for errors in groups.values()), QUANTILE)
    return Bands(QUANTILE, needed, derived_from, cells)


def encoded(bands: Bands) -> bytes:
    return msgspec.json.format(msgspec.json.encode(bands), indent=2) + b"\n"
