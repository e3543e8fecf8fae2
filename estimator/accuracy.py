"""The accuracy tables of docs/vram.md, generated from the calibration data (never typed).

    python -m trainlint.estimator.accuracy --write    # rewrite the tables in docs/vram.md
    python -m trainlint.estimator.accuracy            # print them

`tests/test_vram_docs.py` fails when the document and the data disagree.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

from .architectures import find_architecture, is_derivable, load_architectures, parameter_count
from .costmodel import GIB

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
    from .costmodel import Plan, formula_layer_coefficient

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


def published_results() -> list[dict]:
    """Each published measurement beside the estimate for its configuration (the test set)."""
    from .costmodel import Plan, estimate, verdict
    from .hardware import resolve_target
    from .model_configs import architecture_from_config

    data = json.loads((_CALIBRATION / "published_peaks.json").read_text(encoding="utf-8"))
    results = []
    for row in data["rows"]:
        settings = dict(row["plan"])
        config = settings.pop("config", None)
        name = settings.pop("model", None)
        arch = architecture_from_config(config, row["id"], "the row's config") if config else find_architecture(name)
        for key in ("lora_targets", "offload"):
            if key in settings:
                settings[key] = tuple(settings[key])
        target = resolve_target(row["gpu"], row["gpus"])
        context = row.get("context_bytes", target.gpu.context_bytes)
        result = estimate(Plan(model=arch, gpus=row["gpus"], **settings), context, target.gpu.blas_workspace_bytes)
        peak = {"allocated": result.allocated, "reserved": result.reserved, "process": result.process}[row["measured"]]
        measured = row["value"] * _UNITS[row["unit"]] if row["value"] is not None else None
        results.append({
            "row": row, "estimate": peak, "measured": measured, "verdict": verdict(result, target.usable_bytes_per_device),
        })
    return results


def published_table() -> str:
    """MAPE, interval coverage, and false fits / false OOMs per verdict band, then every row."""
    results = published_results()
    measured = [r for r in results if r["measured"] is not None]
    errors = [abs(r["estimate"].estimate - r["measured"]) / r["measured"] for r in measured]
    inside = [r["estimate"].low <= r["measured"] <= r["estimate"].high for r in measured]
    gpus = sorted({r["row"]["gpu"] for r in results})
    sources = sorted({r["row"]["source"]["url"] for r in results})
    lines = [
        f"{len(results)} published measurements ({len(measured)} peaks, {len(results) - len(measured)} out-of-memory runs) "
        f"on {len(gpus)} GPU types ({', '.join(gpus)}) from {len(sources)} sources; the data, with each row's source, is "
        "`estimator/calibration/published_peaks.json`.",
        "",
        f"- mean absolute percentage error of the point estimate: **{100 * sum(errors) / len(errors):.1f} %** "
        f"(median {100 * sorted(errors)[len(errors) // 2]:.1f} %, worst {100 * max(errors):.1f} %)",
        f"- measurements inside the interval: **{sum(inside)} of {len(inside)} ({100 * sum(inside) / len(inside):.0f} %)**",
        "",
        "| verdict band | rows | ran | out of memory | false fits | false OOMs |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for band in ("fits", "tight", "oom", "unknown"):
        members = [r for r in results if r["verdict"] == band]
        if not members:
            continue
        ran = sum(r["row"]["outcome"] == "ran" for r in members)
        oom = len(members) - ran
        false_fits = oom if band == "fits" else 0
        false_ooms = ran if band == "oom" else 0
        lines.append(f"| {band} | {len(members)} | {ran} | {oom} | {false_fits} | {false_ooms} |")
    lines += ["", "| row | GPU | measured | estimate (interval) | error | verdict |", "|---|---|---:|---:|---:|---|"]
    for r in results:
        peak = r["estimate"]
        shown = f"{peak.estimate / GIB:.2f} ({peak.low / GIB:.2f}–{peak.high / GIB:.2f})"
        if r["measured"] is None:
            lines.append(f"| {r['row']['id']} | {r['row']['gpus']}x {r['row']['gpu']} | OOM | {shown} | | {r['verdict']} |")
            continue
        error = (peak.estimate - r["measured"]) / r["measured"]
        mark = "" if peak.low <= r["measured"] <= peak.high else " (outside)"
        lines.append(
            f"| {r['row']['id']} | {r['row']['gpus']}x {r['row']['gpu']} | {r['measured'] / GIB:.2f} {r['row']['measured']} | "
            f"{shown} | {error:+.1%}{mark} | {r['verdict']} |"
        )
    return "\n".join(lines)


def tables() -> dict[str, str]:
    return {"parameter-counts": parameter_table(), "activations": activation_table(), "published": published_table()}


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
        DOCS.write_text(rewrite(DOCS.read_text(encoding="utf-8")), encoding="utf-8")
    else:
        for name, table in tables().items():
            print(f"## {name}\n\n{table}\n")


if __name__ == "__main__":
    main()
