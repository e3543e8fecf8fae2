"""What the parser guard (analysis/parsing.py) costs on real training scripts: `trainlint check`'s
analysis of each file with the guard, and with LibCST called directly as before it, interleaved so
that a noisy machine's drift hits both alike; and the nesting scan on its own.

    .venv/bin/python benchmarks/parser_guard.py FILE...
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

import libcst

from trainlint.analysis import parsing
from trainlint.analysis.chunking import split_statements
from trainlint.analysis.engine import analyze_source

DEFAULT = Path(__file__).resolve().parents[2] / "corpus" / "diffusers" / "examples" / "dreambooth" / "train_dreambooth_lora.py"
ROUNDS = 15


def timed(data: bytes, path: str) -> float:
    started = time.perf_counter()
    analyze_source(data, path)
    return time.perf_counter() - started


def main(paths: list[Path]) -> None:
    guarded = parsing.parse_module
    for path in paths:
        data = path.read_bytes()
        with_guard, without = [], []
        for _ in range(ROUNDS):
            parsing.parse_module = libcst.parse_module
            without.append(timed(data, str(path)))
            parsing.parse_module = guarded
            with_guard.append(timed(data, str(path)))
        chunks = [chunk.text for chunk in split_statements(data.decode("utf-8"))]
        scans = []
        for _ in range(ROUNDS):
            started = time.perf_counter()
            for chunk in chunks:
                parsing.nesting_estimate(chunk)
            scans.append(time.perf_counter() - started)
        deepest = max(parsing.nesting_estimate(chunk) for chunk in chunks)
        lines = data.count(b"\n")
        print(
            f"{path.name} ({lines:,} lines, deepest statement {deepest} levels): check without the guard "
            f"median {statistics.median(without) * 1000:.0f} ms (min {min(without) * 1000:.0f}), with it median "
            f"{statistics.median(with_guard) * 1000:.0f} ms (min {min(with_guard) * 1000:.0f}); the scan alone "
            f"median {statistics.median(scans) * 1000:.1f} ms"
        )


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: parser_guard.py FILE...  (e.g. ../corpus/diffusers/examples/dreambooth/train_dreambooth_lora.py)")
    main([Path(arg) for arg in sys.argv[1:]])
