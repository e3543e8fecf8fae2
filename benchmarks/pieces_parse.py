"""Long top-level statements parsed in pieces give LibCST's own tree (analysis/parsing.py).

    python benchmarks/pieces_parse.py DIR [DIR ...]

For every top-level statement of ``PIECES_FROM_LINES`` lines or more in the ``.py`` files under the
folders: whether it could be cut, whether the tree parsed in pieces deep-equals the tree of one
``libcst.parse_module`` of the same text and generates the same code, and the CPU time of both
ways. A difference is printed with its file and line; the exit status is 1 when there is one.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import libcst as cst

from trainlint.analysis import parsing
from trainlint.analysis.chunking import split_statements
from trainlint.analysis.lines import normalize_line_breaks


def main(folders: list[str]) -> int:
    long = pieced = same = 0
    whole_s = pieces_s = 0.0
    differences: list[str] = []
    for folder in folders:
        for path in sorted(Path(folder).rglob("*.py")):
            try:
                text = normalize_line_breaks(path.read_text(encoding="utf-8"))
            except (OSError, UnicodeDecodeError):
                continue
            for chunk in split_statements(text):
                if chunk.text.count("\n") < parsing.PIECES_FROM_LINES:
                    continue
                long += 1
                started = time.process_time()
                try:
                    whole = cst.parse_module(chunk.text)
                except (cst.ParserSyntaxError, RecursionError):
                    continue
                between = time.process_time()
                pieces = parsing._parse_in_pieces(chunk.text)
                ended = time.process_time()
                if pieces is None:
                    continue
                pieced += 1
                whole_s += between - started
                pieces_s += ended - between
                if pieces.deep_equals(whole) and pieces.code == chunk.text:
                    same += 1
                else:
                    differences.append(f"{path}:{chunk.start_line + 1}")
    print(f"{long} statements of {parsing.PIECES_FROM_LINES}+ lines, {pieced} parsed in pieces, {same} identical to LibCST's tree; "
          f"CPU of those: {whole_s:.2f} s whole, {pieces_s:.2f} s in pieces")
    for difference in differences:
        print("different:", difference)
    return 1 if differences else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
