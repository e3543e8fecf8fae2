#!/usr/bin/env python3
"""Precision on code no rule was tuned on: public repositories trainlint had never been run on, every error and
warning read by hand once (repos.json: the repositories and their commits; verdicts.tsv: the reading).

    .venv/bin/python benchmarks/unseen/unseen.py fetch ../unseen                  # every repository's tree
    .venv/bin/python benchmarks/unseen/unseen.py run ../unseen                    # check each, compare with the reading
    .venv/bin/python benchmarks/unseen/unseen.py run ../unseen NVIDIA/tacotron2 --save .bench/unseen
    .venv/bin/python benchmarks/unseen/unseen.py summary                          # the verdicts, per rule

``fetch`` writes each repository's Python files, notebooks and configuration at the recorded commit into
TARGET/OWNER+NAME, from a bare mirror (``--mirrors``, the fetch tool's layout, /work/.mirror by default) or
else from a blob-less bare clone it makes under TARGET/.clones. Nothing fetched is run or imported.

``run`` checks each tree as a new user would (``trainlint check . --isolated --no-cache``: the defaults, no
project settings) with this checkout's trainlint, and prints the errors and warnings that are new (not read
yet), vanished (read, no longer reported; with the verdict they had) and changed (another severity); it exits 1
when there is any. A new finding must be read and its verdict added before the change that brought it is done.

Verdicts: true (a real defect of the rule's kind), false (the analysis is wrong), debatable (the code does what
the rule says, but whether it is worth the severity is a judgement), doubtful (the rule's reading may be right,
the evidence is thin). Standard library plus trainlint (``triage.py``'s checking and comparison,
``mined/run.py``'s mirror reading).
"""

from __future__ import annotations

import argparse
import collections
import csv
import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType

HERE = Path(__file__).resolve().parent
MANIFEST = HERE / "repos.json"
VERDICTS_FILE = HERE / "verdicts.tsv"
VERDICTS = ("true", "false", "debatable", "doubtful")
CHECK_OPTIONS = ("--isolated", "--no-cache")


def _module(name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None, path
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


triage = _module("triage", HERE.parent / "corpus" / "triage.py")
sys.path.insert(0, str(HERE.parent / "mined"))  # run.py imports its neighbour split.py
mined = _module("mined_run", HERE.parent / "mined" / "run.py")


def folder_name(repo: str) -> str:
    return repo.replace("/", "+")


def manifest() -> list[dict]:
    return json.loads(MANIFEST.read_text(encoding="utf-8"))["repos"]


def load_verdicts(path: Path = VERDICTS_FILE) -> list:
    """The reading, as triage.py's rows (their repo is the tree's folder name, OWNER+NAME)."""
    with path.open(encoding="utf-8", newline="") as handle:
        records = list(csv.DictReader(handle, delimiter="\t"))
    rows = []
    for record in records:
        if record["verdict"] not in VERDICTS:
            raise SystemExit(f"{path}: {record['repo']} {record['path']}:{record['line']} {record['code']}: "
                             f"verdict {record['verdict']!r} is not one of {VERDICTS}")
        rows.append(triage.Row(**{**record, "repo": folder_name(record["repo"]), "line": int(record["line"])}))
    return rows


def _selected(names: list[str]) -> list[dict]:
    entries = manifest()
    unknown = sorted(set(names) - {entry["repo"] for entry in entries})
    if unknown:
        raise SystemExit(f"not in repos.json: {', '.join(unknown)}")
    return [entry for entry in entries if not names or entry["repo"] in names]


def _repository(entry: dict, mirrors: Path, target: Path) -> Path:
    found = mined.git_dir(mirrors, entry["repo"])
    if found is not None:
        return found
    clone = target / ".clones" / folder_name(entry["repo"])
    if not clone.exists():
        subprocess.run(["git", "clone", "--bare", "--filter=blob:none", f"https://github.com/{entry['repo']}", str(clone)], check=True)
    return clone


def kept(path: str, size: int) -> bool:
    """The files a new user's ``trainlint check .`` reads: mined/run.py's (Python, configuration under 1 MB) and
    notebooks of any size (a demo notebook keeps its output images)."""
    return path.endswith(".ipynb") or mined.wanted(path, size)


def command_fetch(args) -> int:
    for entry in _selected(args.repos):
        destination = args.target / folder_name(entry["repo"])
        tree = mined.extract(_repository(entry, args.mirrors, args.target), entry["commit"], destination, kept)
        count = sum(1 for _ in tree.rglob("*.py"))
        print(f"{entry['repo']}: {count} .py files at {entry['commit'][:12]} in {tree}")
    return 0


def command_run(args) -> int:
    reading = load_verdicts()
    problems = 0
    for entry in _selected(args.repos):
        name = folder_name(entry["repo"])
        folder = args.target / name
        if not folder.is_dir():
            print(f"{entry['repo']}: {folder} is missing (unseen.py fetch {args.target} {entry['repo']})")
            problems += 1
            continue
        found = triage.check_corpus(folder, name, args.save, CHECK_OPTIONS)
        new, vanished, changed = triage.compare(name, found, reading)
        problems += triage.print_comparison(entry["repo"], found, new, vanished, changed)
    return 1 if problems else 0


def summary(rows: list) -> list[str]:
    """Per rule: the findings read and their verdicts."""
    by_rule: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for row in rows:
        by_rule[row.code][row.verdict] += 1
        by_rule["all"][row.verdict] += 1
    lines = ["| rule | read | " + " | ".join(VERDICTS) + " |", "|---|---|" + "---|" * len(VERDICTS)]
    for rule in [*sorted(code for code in by_rule if code != "all"), "all"]:
        counts = by_rule[rule]
        lines.append(f"| {rule} | {sum(counts.values())} | " + " | ".join(str(counts[verdict]) for verdict in VERDICTS) + " |")
    return lines


def command_summary(args) -> int:
    print("\n".join(summary(load_verdicts())))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    fetch = commands.add_parser("fetch", help="write each repository's tree at its recorded commit")
    fetch.add_argument("target", type=Path, help="folder for the trees (outside the checkout)")
    fetch.add_argument("repos", nargs="*", help="only these (owner/name)")
    fetch.add_argument("--mirrors", type=Path, default=Path("/work/.mirror"), help="folder of bare mirrors (OWNER+NAME/...)")
    fetch.set_defaults(handler=command_fetch)
    run = commands.add_parser("run", help="check each tree and compare with the reading")
    run.add_argument("target", type=Path, help="the folder fetch wrote")
    run.add_argument("repos", nargs="*", help="only these (owner/name)")
    run.add_argument("--save", type=Path, help="keep each JSON report here")
    run.set_defaults(handler=command_run)
    commands.add_parser("summary", help="the verdicts per rule").set_defaults(handler=command_summary)
    args = parser.parse_args(argv)
    return args.handler(args)


if __name__ == "__main__":
    sys.exit(main())
