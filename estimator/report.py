"""An estimate for people (a breakdown with bars, the interval, the verdict, the remedies) and for
programs (JSON), from a plan, a target and where each input came from."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

from .architectures import default_lora_targets, lora_target_linears
from .costmodel import estimate, verdict
from .error_bands import band_of, left_unstated, stored_bands
from .hardware import Target, load_instances
from .plan import Estimate, Plan
from .remedies import MIN_SAVING_BYTES, Remedy, max_batch_size, remedies, smallest_gpu
from .units import gib

BAR_WIDTH = 30
# What the verdicts mean, for people and programs: the process peak (what nvidia-smi shows) against what
# one process can allocate on the device (the vendor's memory less what the driver and ECC keep), without the
# cached segments the allocator frees before it fails a request (peak "needed").
VERDICT_RULE = (
    "fits: the high end of the process peak (without the cache the allocator frees before failing) is within the "
    "usable memory of one device; oom: even its low end is not; tight: in between. The interval reaches at least the "
    "error its kind of run has shown on published measurements (see the assumptions)"
)


@dataclass
class MemoryReport:
    plan: Plan
    target: Target
    result: Estimate
    verdict: str
    inputs: dict[str, tuple[object, str]]  # name -> (value, where it came from)
    remedies: list[Remedy] = field(default_factory=list)
    max_batch_size: int | None = None
    smallest_gpu: str | None = None
    smallest_instances: list[str] = field(default_factory=list)  # cloud instances with one such GPU
    script_notes: list[str] = field(default_factory=list)  # what the script said that could not be used

    @property
    def notes(self) -> list[str]:
        return [*self.script_notes, *self.result.assumptions]


def build(plan: Plan, target: Target, inputs: dict[str, tuple[object, str]], script_notes: list[str] | None = None) -> MemoryReport:
    script_notes = list(script_notes or [])
    if plan.model is not None and plan.model.source.startswith("assumed:"):
        script_notes.append(plan.model.source.removeprefix("assumed: "))
    model = plan.model
    if plan.lora_rank is not None and model is not None:
        if "lora_targets" not in inputs and plan.model_code == "transformers":
            # peft's default for the model's type; LitGPT's and torchtune's defaults are the query and value (Plan's)
            targets, source = default_lora_targets(model)
            plan, inputs = dataclasses.replace(plan, lora_targets=targets), {**inputs, "lora_targets": (targets, source)}
        linears, renamed = lora_target_linears(model, plan.lora_targets)
        plan = dataclasses.replace(plan, lora_targets=linears)
        script_notes += renamed
    context = target.gpu.context_bytes
    result = estimate(plan, context, target.gpu.blas_workspace_bytes, target.gpu.compute_capability,
                      target.usable_bytes_per_device)
    usable = target.usable_bytes_per_device
    outcome = verdict(result, usable)
    report = MemoryReport(plan, target, result, outcome, inputs, script_notes=script_notes)
    if outcome in ("tight", "oom"):
        report.remedies = remedies(plan, result, target, context)
        gpu = smallest_gpu(result, report.target)
        report.smallest_gpu = gpu.id if gpu is not None else None
        if gpu is not None:
            report.smallest_instances = [
                instance.name for instance in load_instances() if instance.gpu == gpu.id and instance.count == 1 and instance.slice_bytes is None
            ][:3]
    if plan.mode in ("train", "infer", "generate") and not math.isinf(result.process.high):
        report.max_batch_size = max_batch_size(plan, target, context)
    return report


def to_json(report: MemoryReport) -> dict:
    result = report.result
    model = report.plan.model
    return {
        "model": {"id": model.id if model else None, "params": result.params, "source": model.source if model else None},
        "inputs": {name: {"value": value, "source": source} for name, (value, source) in report.inputs.items()},
        "breakdown": {name: round(value.estimate) for name, value in result.breakdown.items()},
        "peak": {
            name: {"estimate": _bytes(peak.estimate), "low": _bytes(peak.low), "high": _bytes(peak.high)}
            for name, peak in (("allocated", result.allocated), ("reserved", result.reserved), ("process", result.process),
                               ("cached", result.cached), ("needed", result.needed))
        },
        "gpu": {"name": report.target.gpu.name, "count": report.target.count, "usable_bytes": report.target.usable_bytes_per_device},
        "verdict": report.verdict,
        "remedies": [
            {
                "change": remedy.change, "saving_bytes": round(remedy.saving_bytes), "high_saving_bytes": _bytes(remedy.high_saving_bytes),
                "peak_bytes": round(remedy.result.process.estimate), "peak_high_bytes": _bytes(remedy.result.process.high),
                "verdict": remedy.verdict, "fits": remedy.fits,
            }
            for remedy in report.remedies
        ],
        "verdict_rule": VERDICT_RULE,
        "error_band": error_band(report.plan),
        "max_batch_size": report.max_batch_size,
        "smallest_gpu": report.smallest_gpu,
        "smallest_gpu_instances": report.smallest_instances,
        "notes": report.notes,
    }


def error_band(plan: Plan) -> dict:
    """The error band the peaks' interval reaches (error_bands.py), for programs: which cell it was read from, the factor
    around the estimate, the quantile and the source groups it was measured on, the probability it promises a new
    source (`Band.promised`), and the settings left unstated."""
    bands = stored_bands()
    cell, band = band_of(plan, bands)
    return {"cell": cell, "factor": round(math.exp(band.spread), 4), "quantile": bands.quantile,
            "source_groups": band.groups, "promised": band.promised, "left_unstated": left_unstated(plan)}


def to_text(report: MemoryReport) -> str:
    result = report.result
    model = report.plan.model
    usable = report.target.usable_bytes_per_device
    lines = [
        f"{model.id if model else 'unknown model'}: {params_text(result.params)} parameters"
        + (f", {params_text(result.trainable_params)} trainable" if result.trainable_params and result.trainable_params != result.params else ""),
        "inputs:",
        *(f"  {name.replace('_', ' ')}: {_shown(value)} — {source}" for name, (value, source) in report.inputs.items()),
        "",
    ]
    largest = max((value.estimate for _, value in result.breakdown.items()), default=0.0) or 1.0
    for name, value in result.breakdown.items():
        if value.high == 0:
            continue
        bar = "#" * max(1, round(BAR_WIDTH * value.estimate / largest)) if value.estimate else ""
        spread = "" if value.low == value.high else f"  ({gib(value.low)}–{gib(value.high)})"
        lines.append(f"  {name.replace('_', ' '):<17} {gib(value.estimate):>7} GiB  {bar:<{BAR_WIDTH}}{spread}")
    lines.append("")
    for name, peak in (("allocated", result.allocated), ("reserved", result.reserved), ("process", result.process)):
        lines.append(f"  peak {name:<10} {gib(peak.estimate):>9} GiB  ({gib(peak.low)}–{gib(peak.high)})")
    cached = result.cached
    if cached.high > 0:
        lines.append(f"  of which cached {gib(cached.estimate):>9} GiB  ({gib(cached.low)}–{gib(cached.high)}): segments of "
                     "shorter steps, freed before a request fails; not part of what must fit")
    needed = result.needed
    share = needed.estimate / usable if usable else math.inf
    gpus = f"{report.target.count}x " if report.target.count > 1 else ""
    if report.verdict == "unknown":
        lines += ["", f"{gpus}{report.target.gpu.name}: {gib(usable)} GiB usable per device; verdict UNKNOWN: "
                  f"the interval has no upper end (see the assumptions), so neither fits nor oom can be said"]
    else:
        nominal = gib(report.target.gpu.memory_bytes)
        lines += [
            "", f"{gpus}{report.target.gpu.name}: {gib(usable)} GiB usable per device (of {nominal} GiB); "
            f"verdict {report.verdict.upper()} ({share:.0%} at the estimate)",
            f"  fits = the high end of the process peak{' without the cache' if result.cached.high > 0 else ''} within the "
            f"{gib(usable)} GiB usable; oom = not even its low end; "
            f"tight = in between (here {gib(needed.low)}–{gib(needed.high)} GiB)",
        ]
    if report.remedies:
        lines.append("what would make it fit (each re-estimated, the same rule):")
        for remedy in report.remedies[:12]:
            peak = remedy.result.process
            saving = f"saves {gib(remedy.saving_bytes)} GiB" if remedy.saving_bytes >= MIN_SAVING_BYTES else (
                f"saves {gib(remedy.high_saving_bytes)} GiB at the high end, nothing at the estimate"
            )
            lines.append(f"  - {remedy.change}: {gib(peak.estimate)} GiB (up to {gib(peak.high)}), {saving} — {_remedy_verdict(remedy, usable)}")
    if report.max_batch_size is not None:
        lines.append(f"largest batch size that fits: {report.max_batch_size}")
    elif report.verdict in ("tight", "oom"):
        lines.append("not even batch size 1 fits")
    if report.smallest_gpu:
        instances = f" (e.g. {', '.join(report.smallest_instances)})" if report.smallest_instances else ""
        lines.append(f"smallest catalog GPU that fits: {report.smallest_gpu}{instances}")
    if report.notes:
        lines.append("assumptions:")
        lines += [f"  - {note}" for note in report.notes]
    return "\n".join(lines)


def _remedy_verdict(remedy: Remedy, usable: float) -> str:
    if remedy.verdict == "fits":
        return "fits"
    if remedy.verdict == "oom":
        return "does not fit"
    if remedy.result.needed.estimate <= usable:
        return "tight: the estimate fits, the high end does not"
    return "tight: only the low end fits"


def params_text(count: int) -> str:
    """124.4M, 8.03B, 101,770: a count people read at a glance, never "0.00B"."""
    if count >= 1e9:
        return f"{count / 1e9:.2f}B"
    if count >= 1e6:
        return f"{count / 1e6:.1f}M"
    return f"{count:,}"


def _shown(value: object) -> str:
    return ", ".join(map(str, value)) if isinstance(value, tuple) else str(value)


def _bytes(value: float) -> float | None:
    return None if math.isinf(value) else round(value)
