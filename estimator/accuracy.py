"""The accuracy tables of docs/vram.md, generated from the calibration data (never typed): parameter counts,
activations, and the published measurements in two halves split by source (`split_of`), the calibration half
row by row and the test half in aggregate only.

    python -P -m trainlint.estimator.accuracy --write    # rewrite the tables in docs/vram.md
    python -P -m trainlint.estimator.accuracy            # print them

`tests/test_vram_docs.py` fails when the document and the data disagree.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import re
import statistics
from functools import cache
from pathlib import Path
from urllib.parse import urlsplit

from .architectures import find_architecture, is_derivable, load_architectures, parameter_count
from .units import GIB

DOCS = Path(__file__).resolve().parent.parent / "docs" / "vram.md"
_CALIBRATION = Path(__file__).resolve().parent / "calibration"
_BLOCK = re.compile(r"(<!-- (?P<name>[a-z-]+):begin -->\n).*?(<!-- (?P=name):end -->)", re.S)


def parameter_table() -> str:
    measured = json.loads((_CALIBRATION / "param_counts.json").read_text(encoding="utf-8"))
    counts = measured["counts"]
    rows = ["| model | derived | transformers on the meta device | published | |", "|---|---:|---:|---:|---|"]
    exact = 0
    checked = 0
    for arch in load_architectures():
        if not is_derivable(arch) or arch.id not in counts:
            continue
        derived = parameter_count(arch)
        checked += 1
        same = derived == counts[arch.id]
        exact += same
        rows.append(
            f"| {arch.id} | {derived:,} | {counts[arch.id]:,} | {arch.published_params:,} | "
            f"{'exact' if same else 'differs: see the calibration README'} |"
        )
    header = (
        f"{exact} of {checked} derived parameter counts equal transformers' own count for the same fields "
        f"(transformers {measured['transformers']}, torch {measured['torch']}).\n\n"
    )
    return header + "\n".join(rows)


def activation_table() -> str:
    """The per-layer activation formula against the measurements, per architecture and attention kernel."""
    from .activation_data import load_activation_measurements, measured_layer_coefficients
    from .architectures import shape
    from .layer_activations import formula_layer_coefficient
    from .plan import Plan

    sequence = 1024
    rows = [
        f"Bytes kept per token and hidden unit by one layer (2-byte activations, no dropout, sequence {sequence}).",
        "",
        "| model | kernel | measured | formula | error |",
        "|---|---|---:|---:|---:|",
    ]
    for arch_id in sorted(load_activation_measurements()):
        arch = find_architecture(arch_id)
        geometry = shape(arch) if arch is not None else None
        assert arch is not None and geometry is not None, f"{arch_id}: measured, so in the catalog, and a transformer"
        for attention in ("sdpa", "eager"):
            coefficients = measured_layer_coefficients(arch_id, attention)
            if coefficients is None:
                continue
            measured = coefficients[0] + coefficients[1] * geometry.heads * sequence / geometry.hidden
            plan = Plan(model=arch, dtype="bf16", attention=attention, dropout=False, seq_len=sequence)
            formula = formula_layer_coefficient(plan, geometry, sequence)
            rows.append(f"| {arch_id} | {attention} | {measured:.2f} | {formula:.2f} | {(formula - measured) / measured:+.1%} |")
    return "\n".join(rows)


_UNITS = {"GB": 1e9, "GiB": 2**30, "MiB": 2**20}
PUBLISHED = _CALIBRATION / "published_peaks.json"
SPLITS = ("calibration", "test")
METHODS = ("full", "lora", "qlora", "sharded", "generation", "inference", "diffusion")
UNANSWERED = "unanswered"


# Repositories GitHub serves under a new owner: one project, one group, under the name it was split by.
_MOVED_REPOSITORIES = {
    "github.com/meta-pytorch/torchtune": "github.com/pytorch/torchtune",
}


def source_group(url: str) -> str:
    """The unit the published set is split on, read from a source's address: a GitHub repository
    (``github.com/owner/name``) for everything in it (files at any commit, issues, pull requests), a
    Hugging Face Hub repository (``huggingface.co/[datasets/|spaces/]owner/name``) or the first two parts of
    any other huggingface.co path (``huggingface.co/blog/slug``), and any other page by its host and path.
    Rows of one group are all on one side, so that a project's code or a page's setup is never both
    calibrated on and tested."""
    parts = urlsplit(url.strip().lower())
    host = parts.netloc.removeprefix("www.")
    path = [segment for segment in parts.path.split("/") if segment]
    if host in ("github.com", "raw.githubusercontent.com") and len(path) >= 2:
        group = f"github.com/{path[0]}/{path[1]}"
        return _MOVED_REPOSITORIES.get(group, group)
    if host == "huggingface.co" and path:
        kept = 3 if path[0] in ("datasets", "spaces") else 2
        return "/".join([host, *path[:kept]])
    return "/".join([host, *path])


def split_of(url: str) -> str:
    """`test` when the first byte of the SHA-256 of the source's group is odd, else `calibration`: fixed
    before any estimate was compared with a row, and the same for every row of a group."""
    return "test" if hashlib.sha256(source_group(url).encode()).digest()[0] & 1 else "calibration"


def method_of(plan: dict, arch) -> str:
    """The row's kind of run, as the accuracy tables group them: a diffusion pipeline's run whatever its mode,
    then generation and inference, then sharding before quantisation before adapters."""
    if arch is not None and arch.kind == "diffusion":
        return "diffusion"
    if plan.get("mode") == "generate":
        return "generation"
    if plan.get("mode") == "infer":
        return "inference"
    if plan.get("sharding", "ddp") != "ddp":
        return "sharded"
    if plan.get("quant"):
        return "qlora"
    return "lora" if plan.get("lora_rank") else "full"


# What a source settles that a script seldom states: the library versions' behaviours, the training loop's habits,
# the samples' lengths, the attention kernel, and the CUDA context it measured. Each left unstated widens the interval
# to its alternatives (the estimate keeps today's releases' choice; a dated source's fall back on its date's releases,
# estimator/releases.py); `unstated_table` asks whether that covers the
# calibration half's measurements.
UNSTATED = (
    "quant_keeps_inputs", "prompt_logits_whole", "logits_upcast", "trainer_fused_adamw", "lazy_module_loading",
    "rotary_cache", "previous_graph_alive", "lengths_vary", "attention", "sdpa_dispatch", "fsdp_param_dtype", "context_bytes",
    "zero_grad_frees", "vae_upsampling_fp32", "kbit_prepared", "cache_copied", "checkpoint_reentrant",
)


@cache
def _mechanism_results(unstated: tuple[str, ...] = ()) -> list[dict]:
    """Each published measurement beside the cost model's estimate for its configuration (its own interval only, see
    error_bands.py), with its split, source group and method. A configuration the estimator cannot answer (a model
    outside the catalog) is kept, as `unanswered`. ``unstated``: plan settings (and `context_bytes`) to forget, as if
    the source had not stated them."""
    from .costmodel import mechanism_estimate
    from .hardware import resolve_target
    from .model_configs import architecture_from_config
    from .plan import CannotEstimate, Interval, Plan

    data = json.loads(PUBLISHED.read_text(encoding="utf-8"))
    results = []
    for row in data["rows"]:
        row = {key: value for key, value in row.items() if key not in unstated}
        settings = {key: value for key, value in row["plan"].items() if key not in unstated}
        config = settings.pop("config", None)
        name = settings.pop("model", None)
        arch = architecture_from_config(config, row["id"], "the row's config") if config else find_architecture(name)
        for key in ("lora_targets", "offload", "omitted_components", "modules_to_save"):
            if key in settings:
                settings[key] = tuple(settings[key])
        settings.setdefault("attention", None)  # a kernel the row does not state is unknown, as in a script
        for name, value in _source_release_settings(row["source"], arch).items():
            settings.setdefault(name, value)  # what the row's plan states wins over its source's releases
        target = resolve_target(row["gpu"], row["gpus"])
        usable = target.usable_bytes_per_device
        # a context the source measured is the run's; else the device's, its kernel images as the plan says
        context = Interval.exact(row["context_bytes"]) if "context_bytes" in row else target.gpu.context_bytes
        measured = row["value"] * _UNITS[row["unit"]] if row["value"] is not None else None
        try:
            result = mechanism_estimate(Plan(model=arch, gpus=row["gpus"], **settings), context,
                                        target.gpu.blas_workspace_bytes, target.gpu.compute_capability, usable)
        except CannotEstimate as reason:
            result, why = None, str(reason)
        else:
            why = None
        results.append({
            "row": row, "split": row["split"], "group": source_group(row["source"]["url"]),
            "method": method_of(row["plan"], arch), "mechanism": result, "usable": usable, "measured": measured,
            "unanswered": why, "did_not_fit": row["outcome"] == "oom" or (measured is not None and measured > usable),
        })
    return results


def _source_release_settings(source: dict, arch) -> dict[str, bool]:
    """The plan settings of the library releases a source ran (estimator/releases.py): those it states, else the ones
    current on its date; a source without a date, only those it states (the rest, as for a script, today's)."""
    from .releases import dated_settings, source_date
    from .versions import settings_for_versions

    family = arch.family if arch is not None else None
    stated = source.get("releases", {})
    if "date" in source:
        return dated_settings(stated, source_date(source["date"]), family)
    return settings_for_versions(stated, family)


def _judged(r: dict, bands) -> dict:
    """A result of `_mechanism_results` with its interval widened by ``bands`` (error_bands.py) and its verdict."""
    from .costmodel import verdict
    from .error_bands import widened

    if r["mechanism"] is None:
        return {**r, "estimate": None, "verdict": UNANSWERED}
    result = widened(r["mechanism"], bands)
    peak = {"allocated": result.allocated, "reserved": result.reserved, "process": result.process}[r["row"]["measured"]]
    return {**r, "estimate": peak, "verdict": verdict(result, r["usable"])}


def published_results(unstated: tuple[str, ...] = ()) -> list[dict]:
    """Each published measurement beside the estimate for its configuration as `trainlint estimate` gives it (the
    stored error bands), with its split and method; see `_mechanism_results`."""
    from .error_bands import stored_bands

    return [_judged(r, stored_bands()) for r in _mechanism_results(unstated)]


def _residuals(results: list[dict]) -> list[tuple[str, str, float]]:
    """(error band cell, source group, ln(measured / estimate)) of each answered peak among ``results``."""
    from .error_bands import cell_of

    return [
        (cell_of(r["mechanism"].plan), r["group"], math.log(r["measured"] / _peak_of(r).estimate))
        for r in results if r["mechanism"] is not None and r["measured"] is not None
    ]


def _peak_of(r: dict):
    return {"allocated": r["mechanism"].allocated, "reserved": r["mechanism"].reserved,
            "process": r["mechanism"].process}[r["row"]["measured"]]


def _calibration_residuals(leaving_out: str | None = None) -> list[tuple[str, str, float]]:
    """The calibration half's residuals, as its sources state their runs and with UNSTATED forgotten (a row that
    states none of them counted once), without the group ``leaving_out``."""
    stated = [r for r in _mechanism_results() if r["split"] == "calibration" and r["group"] != leaving_out]
    forgotten = [r for r in _mechanism_results(UNSTATED) if r["split"] == "calibration" and r["group"] != leaving_out]
    changed = [b for a, b in zip(stated, forgotten, strict=True)
               if any(name in a["row"] or name in a["row"]["plan"] for name in UNSTATED)]
    return _residuals(stated) + _residuals(changed)


def derived_bands():
    """The error bands of every kind of run, from the calibration half only (error_bands.derive)."""
    from .error_bands import derive

    return derive(_calibration_residuals(), "the calibration half of estimator/calibration/published_peaks.json, as "
                  "published and with the settings of accuracy.UNSTATED forgotten")


def held_out_results() -> list[dict]:
    """The calibration half, each source group's rows judged with the bands derived without that group: how the
    bands cover a source they were not derived from."""
    from .error_bands import derive

    calibration = [r for r in _mechanism_results() if r["split"] == "calibration"]
    judged = []
    for group in sorted({r["group"] for r in calibration}):
        bands = derive(_calibration_residuals(leaving_out=group), f"the calibration half without {group}")
        judged += [_judged(r, bands) for r in calibration if r["group"] == group]
    return judged


def summarise(results: list[dict]) -> dict:
    """Counts and error measures of some of `published_results()`: peaks are answered rows that ran; a row
    did not fit when it ran out of memory or measured above the GPU's usable memory; `expressed_mape` is the
    mean error over the peaks whose source states nothing the plan cannot express (no `unmodelled`)."""
    answered = [r for r in results if r["estimate"] is not None]
    peaks = [r for r in answered if r["measured"] is not None]
    errors = sorted(abs(r["estimate"].estimate - r["measured"]) / r["measured"] for r in peaks)
    expressed = [abs(r["estimate"].estimate - r["measured"]) / r["measured"] for r in peaks if not r["row"].get("unmodelled")]
    inside = sum(r["estimate"].low <= r["measured"] <= r["estimate"].high for r in peaks)
    did_not_fit = [r for r in answered if r["did_not_fit"]]
    completed = [r for r in answered if r["row"]["outcome"] == "ran"]
    return {
        "rows": len(results), "answered": len(answered), "unanswered": len(results) - len(answered),
        "peaks": len(peaks), "oom": sum(r["row"]["outcome"] == "oom" for r in results), "errors": errors,
        "mape": sum(errors) / len(errors) if errors else None, "median": statistics.median(errors) if errors else None,
        "expressed": len(expressed), "expressed_mape": sum(expressed) / len(expressed) if expressed else None,
        "inside": inside, "did_not_fit": len(did_not_fit), "completed": len(completed),
        "false_fits": sum(r["verdict"] == "fits" for r in did_not_fit),
        "false_ooms": sum(r["verdict"] == "oom" for r in completed),
    }


def _share(part: int, whole: int) -> str:
    return f"{part} of {whole} ({100 * part / whole:.0f} %)" if whole else "none"


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}" if number == 1 else f"{number} {noun}s"


def _percent(value: float | None) -> str:
    return "" if value is None else f"{100 * value:.1f} %"


def _cells(summary: dict) -> str:
    return (
        f"{summary['rows']} | {summary['peaks']} | {_percent(summary['mape'])} | {_percent(summary['median'])} | "
        f"{_percent(summary['expressed_mape'])} ({summary['expressed']}) | "
        f"{_share(summary['inside'], summary['peaks'])} | {_share(summary['false_fits'], summary['did_not_fit'])} | "
        f"{_share(summary['false_ooms'], summary['completed'])} | {summary['unanswered']}"
    )


_HEADER = (
    "| rows | peaks | mean abs. error | median | mean abs. error, nothing unmodelled (peaks) | inside the interval | false fits (of runs that did not fit) "
    "| false OOMs (of runs that completed) | unanswered |"
)
_ALIGNMENT = "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
_VERDICT_BANDS = ("fits", "tight", "oom", "unknown", UNANSWERED)


def _summary_rows(label: str, results: list[dict], field: str, values) -> list[str]:
    """A table of ``summarise`` per value of ``field``, in the order of ``values``, leaving out values no row has."""
    lines = [f"| {label} " + _HEADER, _ALIGNMENT]
    for value in values:
        members = [r for r in results if r[field] == value]
        if members:
            lines.append(f"| {value} | {_cells(summarise(members))} |")
    return lines


def published_table(split: str, every_row: bool) -> str:
    """One half of the published set: its totals, then the same figures per verdict band, per method and per
    source, and (``every_row``) each row beside its estimate."""
    data = json.loads(PUBLISHED.read_text(encoding="utf-8"))
    seen = set(data["seen_before_split"])
    results = [r for r in published_results() if r["split"] == split]
    total = summarise(results)
    gpus = sorted({r["row"]["gpu"] for r in results})
    sources = sorted({r["row"]["source"]["url"] for r in results})
    groups = sorted({r["group"] for r in results})
    lines = [
        f"{total['rows']} measurements ({total['peaks']} answered peaks, {total['oom']} out-of-memory runs, "
        f"{total['unanswered']} unanswered) from {_count(len(sources), 'source')} in {_count(len(groups), 'group')}, on "
        f"{_count(len(gpus), 'GPU type')} "
        f"({', '.join(gpus)}).",
        "",
        f"- mean absolute error of the point estimate: **{_percent(total['mape'])}** (median {_percent(total['median'])}, "
        f"worst {_percent(total['errors'][-1] if total['errors'] else None)}); over the {total['expressed']} peaks whose "
        f"source states nothing the plan cannot express: **{_percent(total['expressed_mape'])}**",
        f"- measurements inside the interval: **{_share(total['inside'], total['peaks'])}**",
        f"- false fits (the estimate says `fits`, the run did not fit): **{_share(total['false_fits'], total['did_not_fit'])}** "
        "of the runs that did not fit",
        f"- false OOMs (the estimate says `oom`, the run completed): **{_share(total['false_ooms'], total['completed'])}** "
        "of the runs that completed",
        f"- unanswered (the estimator cannot resolve the model): **{total['unanswered']}**",
        "",
        *_summary_rows("verdict band", results, "verdict", _VERDICT_BANDS),
        "",
        *_summary_rows("method", results, "method", METHODS),
    ]
    lines += ["", "| source " + _HEADER, _ALIGNMENT]
    for url in sources:
        members = [r for r in results if r["row"]["source"]["url"] == url]
        mark = " (seen before the split)" if url in seen else ""
        lines.append(f"| {url}{mark} | {_cells(summarise(members))} |")
    if every_row:
        lines += ["", "| row | method | GPU | measured | estimate (interval) | error | verdict |", "|---|---|---|---:|---:|---:|---|"]
        for r in results:
            lines.append(_row_line(r))
    return "\n".join(lines)


def _row_line(r: dict) -> str:
    row, peak = r["row"], r["estimate"]
    where = f"{row['gpus']}x {row['gpu']}"
    measured = "OOM" if r["measured"] is None else f"{r['measured'] / GIB:.2f} {row['measured']}"
    if peak is None:
        return f"| {row['id']} | {r['method']} | {where} | {measured} | | | unanswered |"
    shown = f"{peak.estimate / GIB:.2f} ({peak.low / GIB:.2f}–{peak.high / GIB:.2f})"
    if r["measured"] is None:
        return f"| {row['id']} | {r['method']} | {where} | {measured} | {shown} | | {r['verdict']} |"
    error = (peak.estimate - r["measured"]) / r["measured"]
    mark = "" if peak.low <= r["measured"] <= peak.high else " (outside)"
    return f"| {row['id']} | {r['method']} | {where} | {measured} | {shown} | {error:+.1%}{mark} | {r['verdict']} |"


def unstated_table() -> str:
    """The calibration half as published and with every setting of UNSTATED forgotten: how many measurements the
    interval still covers, and how many of those only through the widening (outside the interval the plan would
    have with the source's settings). The test half is not asked."""
    stated = [r for r in published_results() if r["split"] == "calibration"]
    forgotten = [r for r in published_results(UNSTATED) if r["split"] == "calibration"]
    lines = [
        f"The calibration half with {', '.join(f'`{name}`' for name in UNSTATED)} forgotten, as a script that states none "
        "of them is estimated; what a library release decides falls back on the source's stated releases, else the ones "
        "current on its date (a script's on today's).",
        "",
        "| source | peaks | inside, as stated | inside, unstated | of those, only through the widening | mean abs. error, as stated | unstated |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for url in sorted({r["row"]["source"]["url"] for r in stated}) + [None]:
        pairs = [(a, b) for a, b in zip(stated, forgotten, strict=True) if url is None or a["row"]["source"]["url"] == url]
        peaks = [(a, b) for a, b in pairs if a["measured"] is not None and a["estimate"] is not None and b["estimate"] is not None]
        if not peaks:
            continue

        def inside(r: dict) -> bool:
            return r["estimate"].low <= r["measured"] <= r["estimate"].high

        wide = sum(inside(b) and not inside(a) for a, b in peaks)
        lines.append(
            f"| {url or '**all**'} | {len(peaks)} | {sum(inside(a) for a, _ in peaks)} | {sum(inside(b) for _, b in peaks)} | {wide} | "
            f"{_percent(summarise([a for a, _ in peaks])['mape'])} | {_percent(summarise([b for _, b in peaks])['mape'])} |"
        )
    return "\n".join(lines)


def bands_table() -> str:
    """The error bands each kind of run's interval reaches, as stored (error_bands.py), and per band how both halves
    fare with it (the test half in aggregate)."""
    from .error_bands import KIND_NAMES, KINDS, STATED, band_of, cell_of, stored_bands

    bands = stored_bands()
    results = published_results()
    lines = [
        f"Each source group's {bands.quantile:.0%} quantile of |ln(measured / estimate)| over {bands.derived_from} is "
        f"its score; a band is the score of rank ceil((n + 1) × {bands.quantile}) of its n groups, which a new source's "
        f"score stays within with probability rank / (n + 1) (promised) if sources are alike; a kind with fewer than "
        f"{bands.min_groups} groups takes every kind's, pooled, and where that has fewer too, every cell's at its largest "
        "score.",
        "",
        "| kind of run | settings | band | its source groups | its estimates | calibration: inside | false fits | false OOMs "
        "| test: inside | false fits | false OOMs |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for kind in KINDS:
        for stated in STATED:
            users = [r for r in results if r["mechanism"] is not None and cell_of(r["mechanism"].plan) == f"{kind}/{stated}"]
            if not users:
                continue
            cell, band = band_of(users[0]["mechanism"].plan, bands)
            shown = (f"×/÷{math.exp(band.spread):.2f} ({'pooled' if cell.startswith('pooled/') else 'its own'}, promised "
                     f"{band.promised:.0%}) | {band.groups} | {band.peaks}")
            halves = []
            for split in SPLITS:
                summary = summarise([r for r in users if r["split"] == split])
                halves.append(f"{_share(summary['inside'], summary['peaks'])} | "
                              f"{_share(summary['false_fits'], summary['did_not_fit'])} | "
                              f"{_share(summary['false_ooms'], summary['completed'])}")
            lines.append(f"| {KIND_NAMES[kind]} | {stated} | {shown} | {' | '.join(halves)} |")
    return "\n".join(lines)


def held_out_table() -> str:
    """The calibration half with each source group judged by bands derived without it (`held_out_results`)."""
    results = held_out_results()
    total = summarise(results)
    lines = [
        f"Each calibration group's rows with the bands derived from the other groups: "
        f"**{_share(total['inside'], total['peaks'])}** inside the interval, false fits "
        f"{_share(total['false_fits'], total['did_not_fit'])}, false OOMs {_share(total['false_ooms'], total['completed'])}.",
        "",
        *_summary_rows("verdict band", results, "verdict", _VERDICT_BANDS),
        "",
        *_summary_rows("source group", results, "group", sorted({r["group"] for r in results})),
    ]
    return "\n".join(lines)


def tables() -> dict[str, str]:
    return {
        "parameter-counts": parameter_table(), "activations": activation_table(),
        "published-calibration": published_table("calibration", every_row=True),
        "published-test": published_table("test", every_row=False),
        "published-unstated": unstated_table(), "error-bands": bands_table(), "published-held-out": held_out_table(),
    }


def rewrite(text: str) -> str:
    generated = tables()

    def replace(match: re.Match) -> str:
        name = match.group("name")
        return f"{match.group(1)}{generated[name]}\n{match.group(3)}" if name in generated else match.group(0)

    return _BLOCK.sub(replace, text)


def main() -> None:
    assert __doc__ is not None, "the module's docstring describes the command"
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", action="store_true", help=f"rewrite the tables in {DOCS}")
    if parser.parse_args().write:
        from .error_bands import BANDS_PATH, encoded, stored_bands

        BANDS_PATH.write_bytes(encoded(derived_bands()))
        stored_bands.cache_clear()
        DOCS.write_text(rewrite(DOCS.read_text(encoding="utf-8")), encoding="utf-8")
    else:
        for name, table in tables().items():
            print(f"## {name}\n\n{table}\n")


if __name__ == "__main__":
    main()
