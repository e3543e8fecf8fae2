"""What resolving imports of the user's own files changes, and what it costs.

    .venv/bin/python benchmarks/cross_file.py DIR [DIR ...]

For every Python file under each directory (one workspace per directory, as `trainlint check
DIR` uses), runs the analysis twice in this process: with imports resolved (`Workspace([DIR])`)
and without. Prints the findings that appear or disappear with resolution, and the CPU time of
both runs (the resolved run includes parsing the imported files, once per workspace).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from trainlint.analysis.engine import analyze_source
from trainlint.analysis.workspace import Workspace
from trainlint.discovery import Exclusions, discover_files


def run(directory: Path) -> None:
    files = discover_files([str(directory)], Exclusions((), directory))
    alone: dict[str, set] = {}
    resolved: dict[str, set] = {}
    started = time.process_time()
    for path in files:
        alone[path] = {_key(f) for f in analyze_source(Path(path).read_bytes(), path)}
    alone_seconds = time.process_time() - started
    workspace = Workspace([directory])
    started = time.process_time()
    for path in files:
        resolved[path] = {_key(f) for f in analyze_source(Path(path).read_bytes(), path, workspace=workspace)}
    resolved_seconds = time.process_time() - started
    appeared = [(path, key) for path in files for key in sorted(resolved[path] - alone[path])]
    disappeared = [(path, key) for path in files for key in sorted(alone[path] - resolved[path])]
    print(f"{directory}: {len(files)} files; without resolution {alone_seconds:.2f} s CPU, with {resolved_seconds:.2f} s")
    for label, items in (("appeared", appeared), ("disappeared", disappeared)):
        for path, (line, code, message) in items:
            print(f"  {label}: {path}:{line} {code} {message[:110]}")
    if not appeared and not disappeared:
        print("  no finding changed")


def _key(finding) -> tuple[int, str, str]:
    return (finding.line, finding.code, finding.message)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("directories", nargs="+", type=Path)
    for directory in parser.parse_args().directories:
        run(directory)
