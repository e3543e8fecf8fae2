"""What each key of a statement typed in real Neovim costs in process, and which of them parse.

    .venv/bin/python -P benchmarks/parsing_keys.py FILE MARKER [--rounds 2]

Replays the keys of ``nvim_typing.py`` without an editor: FILE opened as a document of the language
server (``DocumentState.analyse``, with the positions warmed as the server does after the first
report), then Enter below the first line after the middle of the file that starts with MARKER (with
its indentation, one level deeper after a block's header) and ``nvim_typing.lua``'s statement typed a
character a key. Prints each key's CPU milliseconds (``P``: the line parses, so the key's tree differs
from the last one's), then the median of the keys on which the line parses (after the first two: the
Enter and the first edit since opening pay for more), the median of the others and the mean of all,
over ``--rounds`` fresh documents. The last text's findings are checked against a fresh analysis.
"""

from __future__ import annotations

import argparse
import ast
import statistics
import time
from pathlib import Path

from trainlint.analysis.settings import AnalysisSettings
from trainlint.server.documents import DocumentState
from trainlint.settings import EffectiveSettings

TEXT = 'print(f"step={step} loss={loss.item():.4f} lr={lr}")'  # nvim_typing.lua's TYPED_TEXT


def parses(line: str) -> bool:
    try:
        ast.parse(line.strip())
    except SyntaxError:
        return False
    return True


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("file", type=Path)
    parser.add_argument("marker")
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args()
    settings = EffectiveSettings(AnalysisSettings(target_gpu="a100-80gb"))
    lines = args.file.read_text(encoding="utf-8").split("\n")
    target = next(i for i in range(len(lines) // 2 - 1, len(lines)) if lines[i].strip().startswith(args.marker))
    indent = lines[target][: len(lines[target]) - len(lines[target].lstrip())]
    if lines[target].rstrip().endswith(":"):
        indent += "    "
    typed = [indent] + [indent + TEXT[:count] for count in range(1, len(TEXT) + 1)]
    parsing: list[float] = []
    others: list[float] = []
    for _ in range(args.rounds):
        document = DocumentState(args.file.as_uri(), args.file)
        document.analyse("\n".join(lines), 0, settings)
        document.warm_positions(document.edits)
        costs = []
        for version, line in enumerate(typed, 1):
            text = "\n".join(lines[: target + 1] + [line] + lines[target + 1:])
            started = time.process_time()
            document.analyse(text, version, settings)
            cost = (time.process_time() - started) * 1000
            parsed = parses(line) if line.strip() else True
            costs.append(f"{'P' if parsed else ''}{cost:.0f}")
            (parsing if parsed and version > 2 else others).append(cost)
        fresh = DocumentState(args.file.as_uri(), args.file).analyse(text, 0, settings)
        agrees = document.latest is not None and document.latest.findings == fresh.findings
        print(" ".join(costs), "| same findings as a fresh analysis:", agrees)
    print(f"{args.file.name}: keys that parse (after the first two) median {statistics.median(parsing):.1f} ms, "
          f"n={len(parsing)}; the others median {statistics.median(others):.1f} ms; all keys mean "
          f"{statistics.mean(parsing + others):.1f} ms")


if __name__ == "__main__":
    main()
