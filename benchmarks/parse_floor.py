"""The least CPU time any LibCST-based check of a directory can take: start-up plus one parse.

    python benchmarks/parse_floor.py DIR [DIR ...] [--rounds 3] [--peer-json .bench/X.json ...]

For each directory, over the files ``trainlint check`` discovers there:

- **start-up**: CPU seconds of a fresh ``python -P -m trainlint check`` of an empty folder (the
  interpreter, trainlint's imports, the rules' registration, settings and discovery: what every
  check pays before its first file), the fastest of ``--rounds``;
- **LibCST parse**: CPU seconds to parse every file once with the parse trainlint uses (LibCST's
  native parser, node validation off), in this process, the fastest of ``--rounds``; files LibCST
  rejects count with the time they took;
- **ast.parse**: the same texts through CPython's own parser, for scale.

The floor is start-up plus the LibCST parse: a check that analysed nothing after parsing would
still take that long. With ``--peer-json`` (``compare_peer.py`` reports holding the same
directories), the peer's CPU seconds are read from it and the floor is set against the CPU time a
run 20 times faster than the peer may take, beside trainlint's own cold CPU time in that report.
"""

from __future__ import annotations

import argparse
import ast
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from trainlint.analysis import parsing
from trainlint.discovery import Exclusions, discover_files

GOAL_RATIO = 20


def _startup_cpu_s() -> float:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    with tempfile.TemporaryDirectory() as empty:
        subprocess.run([sys.executable, "-P", "-m", "trainlint", "check", empty, "--no-cache", "--format", "json"],
                       check=True, capture_output=True, cwd=empty)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def _cpu_s_to_parse(texts: list[str], parse) -> float:
    started = time.process_time()
    for text in texts:
        try:
            parse(text)
        except Exception:  # a file the parser rejects still cost its time, and is counted so
            pass
    return time.process_time() - started


def _peer_row(reports: list[dict], directory: Path) -> dict | None:
    for report in reports:
        for row in report.get("directories", []):
            if Path(row["directory"]).resolve() == directory.resolve():
                return row
    return None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("directories", nargs="+", type=Path)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--peer-json", type=Path, action="append", default=[],
                        help="a compare_peer.py --json report holding some of the directories (repeatable)")
    args = parser.parse_args()
    reports = [json.loads(path.read_text()) for path in args.peer_json]

    startup = min(_startup_cpu_s() for _ in range(args.rounds))
    print(f"start-up (python -P -m trainlint check on an empty folder): {startup:.2f} CPU s")
    for directory in args.directories:
        files = [Path(name) for name in discover_files([directory], Exclusions([], directory))]
        texts = [path.read_text(encoding="utf-8", errors="replace") for path in files if path.suffix == ".py"]
        libcst_s = min(_cpu_s_to_parse(texts, parsing._parse) for _ in range(args.rounds))
        ast_s = min(_cpu_s_to_parse(texts, ast.parse) for _ in range(args.rounds))
        floor = startup + libcst_s
        print(f"\n{directory}: {len(texts)} .py files, {sum(t.count(chr(10)) for t in texts):,} lines")
        print(f"  LibCST parse {libcst_s:.2f} CPU s, ast.parse {ast_s:.2f}; floor (start-up + LibCST parse) {floor:.2f}")
        row = _peer_row(reports, directory)
        if row is None:
            continue
        peer_cpu = row["peer"]["best_cpu_s"]
        budget = peer_cpu / GOAL_RATIO
        trainlint_cpu = row["trainlint"]["best_cpu_s"]
        print(f"  peer {peer_cpu:.2f} CPU s: {GOAL_RATIO}x the peer allows {budget:.2f}; "
              f"floor is {floor / budget:.0%} of that; trainlint cold took {trainlint_cpu:.2f} ({peer_cpu / trainlint_cpu:.1f}x)")
        print(f"  with only the parse and start-up, trainlint would be {peer_cpu / floor:.1f}x the peer")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
