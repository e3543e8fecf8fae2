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
        geometry = shape(arch)
        for attention in ("sdpa", "eager"):
            coefficients = measured_layer_coefficients(arch_id, attention)
            if coefficients is None:
                continue
            measured = coefficients[0] + coefficients[1] * geometry.heads * sequence / geometry.hidden
            plan = Plan(model=arch, dtype="bf16", attention=attention, dropout=False, seq_len=sequence)
            formula = formula_layer_coefficient(plan, geometry, sequence)
            rows.append(f"| {arch_id} | {attention} | {measured:.2f} | {formula:.2f} | {(formula - measured) / measured:+.1%} |")
    return "\n".join(rows)


def tables() -> dict[str, str]:
    return {"parameter-counts": parameter_table(), "activations": activation_table()}


def rewrite(text: str) -> str:
    generated = tables()

    def replace(match: re.Match) -> str:
        name = match.group("name")
        return f"{match.group(1)}{generated[name]}\n{match.group(3)}" if name in generated else match.group(0)

    return _BLOCK.sub(replace, text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", action="store_true", help=f"rewrite the tables in {DOCS}")
    if parser.parse_args().write:
        DOCS.write_text(rewrite(DOCS.read_text(encoding="utf-8")), encoding="utf-8")
    else:
        for name, table in tables().items():
            print(f"## {name}\n\n{table}\n")


if __name__ == "__main__":
    main()
