"""The estimate as the editor shows it: a hover with the breakdown, an inlay hint with the total.

Without a target GPU the breakdown and interval are shown without a verdict (the reference
device only sets the CUDA context size); with one (`targetGpu`, or `target-gpu` in the project's
config), the verdict and the cheapest changes that make the run fit.
"""

from __future__ import annotations

from dataclasses import dataclass

from trainlint.analysis.module import ModuleAnalysis

from .custom_models import resolve_model
from .hardware import UnknownTarget, resolve_target
from .plan import CannotEstimate, Plan
from .reading import read_inputs
from .report import MemoryReport, build, params_text
from .script_plan import plan_settings
from .units import gib

REFERENCE_GPU = "h100-sxm"


# What the user can do, in the editor, when the model cannot be read from the script.
MODEL_HINT = (
    "Name the model in the editor: a `# trainlint: model=NAME` comment in this file, or the `targetModel` "
    "setting; NAME is a Hugging Face id (read from the local cache), a catalog id, or the path of a model "
    "folder or its config.json"
)


@dataclass(frozen=True)
class EditorEstimate:
    report: MemoryReport | None
    reason: str | None  # why there is no estimate
    target_given: bool
    model_unknown: bool = False  # the reason is the model: the hover says how to name it


def estimate_module(module: ModuleAnalysis, target_gpu: str | None, target_model: str | None = None) -> EditorEstimate:
    try:
        target = resolve_target(target_gpu or REFERENCE_GPU)
    except UnknownTarget as error:
        return EditorEstimate(None, f"the target GPU is not known: {error}", bool(target_gpu))
    read = read_inputs(module)
    planned = plan_settings(read, {}, fallback_model=target_model)
    architecture, reason = resolve_model(module, read, planned)
    if architecture is None:
        return EditorEstimate(None, reason, bool(target_gpu), model_unknown=True)
    try:
        report = build(Plan(model=architecture, gpus=target.count, **planned.settings), target, planned.inputs, planned.notes)
    except CannotEstimate as error:
        return EditorEstimate(None, str(error), bool(target_gpu))
    return EditorEstimate(report, None, bool(target_gpu))


def inlay_label(estimate: EditorEstimate) -> str:
    """`≈ 31.2 GiB (24–38) · A100-80GB 39%`, or why there is no number."""
    if estimate.report is None:
        return "VRAM: unknown model (hover for how to name it)" if estimate.model_unknown else "VRAM: no estimate"
    peak = estimate.report.result.needed  # what must fit: the process peak without the cache the allocator gives back
    label = f"≈ {gib(peak.estimate)} GiB ({gib(peak.low, 0)}–{gib(peak.high, 0)})"
    if estimate.target_given:
        target = estimate.report.target
        share = peak.estimate / target.usable_bytes_per_device
        label += f" · {target.gpu.id.upper()} {share:.0%}"
    return label


def hover_text(estimate: EditorEstimate, markdown: bool) -> str:
    bold = (lambda text: f"**{text}**") if markdown else (lambda text: text)
    code = (lambda text: f"`{text}`") if markdown else (lambda text: text)
    if estimate.report is None:
        text = f"{bold('trainlint · VRAM')}\n\nNo estimate: {estimate.reason}."
        if estimate.model_unknown:
            hint = MODEL_HINT if markdown else MODEL_HINT.replace("`", "")
            text += f"\n\n{hint}."
        return text
    report = estimate.report
    assert report is not None and report.plan.model is not None, "no report returned above; a report is of a model"
    result = report.result
    lines = [bold("trainlint · VRAM") + f" — {report.plan.model.id}, {params_text(result.params)} parameters", ""]
    for name, value in result.breakdown.items():
        if value.high:
            spread = "" if value.low == value.high else f" ({gib(value.low)}–{gib(value.high)})"
            lines.append(f"- {name.replace('_', ' ')}: {gib(value.estimate)} GiB{spread}")
    peak = result.needed
    lines += ["", f"Peak per GPU {bold(f'{gib(peak.estimate)} GiB')} ({gib(peak.low)}–{gib(peak.high)}), allocator and CUDA context included."]
    if result.cached.high > 0:
        lines.append(f"Samples of varying length can keep up to {gib(result.cached.high)} GiB more reserved (segments of shorter "
                     "steps, freed before a request fails).")
    if estimate.target_given:
        usable = report.target.usable_bytes_per_device
        lines.append(f"{report.target.gpu.name}: {gib(usable)} GiB usable — {bold(report.verdict.upper())}.")
        if report.verdict == "unknown":
            lines.append("The interval has no upper end (a term is not modelled), so it can say neither fits nor oom.")
        fitting = [remedy for remedy in report.remedies if remedy.fits][:3]
        if fitting:
            lines += ["", "Would fit:"] + [f"- {remedy.change}: {gib(remedy.result.needed.estimate)} GiB" for remedy in fitting]
    else:
        lines.append("Set `targetGpu` for a verdict.")
    lines += ["", "Read from the script:"]
    lines += [f"- {name.replace('_', ' ')}: {code(str(value))} — {source}" for name, (value, source) in report.inputs.items()]
    if report.script_notes:
        lines += ["", "Not used:"] + [f"- {note}" for note in report.script_notes]
    return "\n".join(lines)
