"""Measured GPU peaks (``gpu_peaks.py``'s JSON) beside trainlint's estimates for the same configurations.

Runs with the product's venv (it imports trainlint, never torch):

    .venv/bin/python estimator/calibration/compare_gpu_peaks.py estimator/calibration/gpu_peaks.json \\
        [--markdown TABLE.md] [--json COMPARISON.json] [--context catalog|measured]

For each measured run it builds the ``Plan`` the run corresponds to, estimates it, and prints one
row per run: measured allocated / reserved / process peaks, the estimate for each, the error of
the point estimate in per cent of the measurement, and whether the measurement lies inside the
estimate's interval. The process peak adds the CUDA context: by default the figure the GPU
catalog holds for the measured device (what a user of trainlint gets), with ``--context measured``
the context the run measured. Failed and skipped runs are listed, not compared.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

from trainlint.estimator.architectures import find_architecture
from trainlint.estimator.costmodel import estimate
from trainlint.estimator.hardware import find_gpu
from trainlint.estimator.plan import CannotEstimate, Estimate, Interval, Plan
from trainlint.estimator.units import GIB

PEAKS = ("allocated", "reserved", "process")


def plan_for(run: dict) -> Plan:
    """The configuration a measured run trained, as trainlint would read it from a script."""
    arch = find_architecture(run["model"])
    if arch is None:
        raise CannotEstimate(f"{run['model']!r} is not in the catalog")
    seq = run.get("seq_len")
    if arch.kind == "vision-transformer" and seq is None:  # patches plus the class token
        size = run.get("image_size") or arch.image_size
        seq = (size // arch.patch_size) ** 2 + 1
    lora = run.get("lora")
    extra = {"lora_rank": lora["rank"], "lora_targets": tuple(lora["targets"])} if lora else {}
    if lora:
        extra["lora_dropout"] = lora.get("dropout", 0.0)
    if run.get("mode") == "generate":
        new_tokens = run.get("new_tokens") or 0
        extra.update(max_context=seq + new_tokens)
    if run.get("fsdp"):
        extra.update(sharding="fsdp", gpus=1)
    return Plan(
        model=arch, mode=run.get("mode", "train"), batch_size=run["batch_size"], seq_len=seq, image_size=run.get("image_size"),
        dtype=run["dtype"], optimizer=run["optimizer"], quant=run.get("quant"),
        gradient_checkpointing=bool(run.get("gradient_checkpointing")), attention=run.get("attention") or "sdpa",
        dropout=run.get("dropout"), grad_accum=run.get("accumulate", 1), foreach=False if run.get("fused") else None,
        **extra,
    )


def context_for(data: dict, which: str) -> tuple[float | None, str]:
    """CUDA context bytes for the estimate's process peak, and where the figure came from."""
    if which == "measured":
        if data.get("context_bytes") is None:
            raise SystemExit("the measurements carry no context_bytes: use --context catalog")
        return float(data["context_bytes"]), "measured by gpu_peaks.py"
    gpu = find_gpu(data.get("device") or "")
    if gpu is not None:
        return float(gpu.context_bytes), f"GPU catalog ({gpu.id})"
    return None, "trainlint's default (device not in the GPU catalog)"


def _compare(measured: float, interval: Interval) -> dict:
    return {
        "measured": measured, "low": interval.low, "estimate": interval.estimate, "high": interval.high,
        "error_pct": round(100.0 * (interval.estimate - measured) / measured, 1) if measured else None,
        "inside": interval.low <= measured <= interval.high,
    }


def compare(data: dict, context_bytes: float | None) -> list[dict]:
    rows = []
    for run in data.get("runs", []):
        row = {"id": run["id"], "model": run["model"]}
        if run.get("error") or run.get("skipped") or run.get("allocated") is None:
            row["status"] = ("error: " + run["error"]) if run.get("error") else (
                ("skipped: " + run["skipped"]) if run.get("skipped") else "not measured")
            rows.append(row)
            continue
        try:
            plan = plan_for(run)
            result: Estimate = estimate(plan, context_bytes) if context_bytes is not None else estimate(plan)
        except CannotEstimate as error:
            row["status"] = f"no estimate: {error}"
            rows.append(row)
            continue
        row["status"] = "compared"
        for peak in PEAKS:
            value = run.get(peak)
            if value is not None:
                row[peak] = _compare(float(value), getattr(result, peak))
        row["breakdown"] = {name: interval.estimate for name, interval in result.breakdown.items()}
        row["params"] = {"measured": run.get("params"), "estimated": result.params}
        row["trainable_params"] = {"measured": run.get("trainable_params"), "estimated": result.trainable_params}
        rows.append(row)
    return rows


def _gib(value: float) -> str:
    return f"{value / GIB:.2f}"


def _cell(entry: dict | None) -> tuple[str, str, str, str]:
    if entry is None:
        return "-", "-", "-", "-"
    return (
        _gib(entry["measured"]),
        f"{_gib(entry['estimate'])} ({_gib(entry['low'])}–{_gib(entry['high'])})",
        f"{entry['error_pct']:+.1f} %" if entry["error_pct"] is not None else "-",
        "yes" if entry["inside"] else "**no**",
    )


def markdown(data: dict, rows: list[dict], context_source: str) -> str:
    lines = [
        f"Measured on {data.get('device')} (torch {data.get('torch')}, CUDA {data.get('cuda')}); "
        f"{data.get('steps', 3)} training steps per configuration; sizes in GiB; error: (estimate − measured) / "
        f"measured; *in*: the measurement lies inside the estimate's interval. Process peaks add the CUDA "
        f"context from the {context_source}.",
        "",
        "| configuration | allocated | estimate | error | in | reserved | estimate | error | in "
        "| process | estimate | error | in |",
        "|---|---:|---:|---:|---|---:|---:|---:|---|---:|---:|---:|---|",
    ]
    others = []
    for row in rows:
        if row["status"] != "compared":
            others.append(f"- {row['id']}: {row['status'][:200]}")
            continue
        cells = [c for peak in PEAKS for c in _cell(row.get(peak))]
        lines.append(f"| {row['id']} | " + " | ".join(cells) + " |")
    lines += ["", summary(rows)]
    if others:
        lines += ["", "Not compared:", "", *others]
    return "\n".join(lines) + "\n"


def summary(rows: list[dict]) -> str:
    compared = [r for r in rows if r["status"] == "compared"]
    if not compared:
        return "No measured configuration to compare."
    parts = []
    for peak in PEAKS:
        entries = [r[peak] for r in compared if peak in r and r[peak]["error_pct"] is not None]
        if not entries:
            continue
        errors = [abs(e["error_pct"]) for e in entries]
        inside = sum(e["inside"] for e in entries)
        parts.append(f"{peak}: {inside} of {len(entries)} inside the interval, median |error| "
                     f"{statistics.median(errors):.1f} %, worst {max(errors):.1f} %")
    return f"{len(compared)} configurations compared. " + "; ".join(parts) + "."


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("measurements", type=Path)
    parser.add_argument("--markdown", type=Path, help="also write the table here")
    parser.add_argument("--json", type=Path, help="write the comparison, per run, as JSON")
    parser.add_argument("--context", choices=("catalog", "measured"), default="catalog")
    args = parser.parse_args(argv)
    data = json.loads(args.measurements.read_text(encoding="utf-8"))
    if data.get("dry_run"):
        print("note: a dry run (tiny models on the CPU) measures no GPU memory; nothing to compare", file=sys.stderr)
    context_bytes, context_source = context_for(data, args.context)
    rows = compare(data, context_bytes)
    table = markdown(data, rows, context_source)
    print(table, end="")
    if args.markdown:
        args.markdown.write_text(table, encoding="utf-8")
    if args.json:
        payload = {"device": data.get("device"), "context_bytes": context_bytes, "context_source": context_source,
                   "rows": rows}
        args.json.write_text(json.dumps(payload, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
