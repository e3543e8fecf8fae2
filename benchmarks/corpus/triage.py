#!/usr/bin/env python3
"""trainlint's errors and warnings on public code, each one read and judged (benchmarks/corpus/triage.tsv).

    python3 benchmarks/corpus/triage.py run ../corpus          # check every corpus, compare with the triage
    python3 benchmarks/corpus/triage.py run ../corpus diffusers
    python3 benchmarks/corpus/triage.py tables --write          # regenerate docs/real-code.md's tables
    python3 benchmarks/corpus/triage.py fixes ../corpus         # apply --fix to a copy of each corpus

``run`` checks each folder of ../corpus (made by extract.py) with this checkout's trainlint and prints
the findings that are new (not in the triage yet), vanished (triaged, no longer reported) and
changed (another severity); it exits 1 when there is any, so a change to a rule shows what it did
to real code. ``--save DIR`` keeps the JSON reports.

``fixes`` copies each corpus, runs ``trainlint check --fix`` on the copy and reports how many files
were changed, how many of those fail to compile, how many fixed findings are still reported, and
how many findings a fix bred on the lines it wrote (rules that meet on a line must agree on one fix).

The triage file has one row per finding: repo, commit, path, line, code, severity, verdict
(confirmed: a real defect; intentional: the code does it on purpose; limit: the analysis is wrong;
unresolved: not decided), and a one-line reason. Standard library only.
"""

from __future__ import annotations

import argparse
import collections
import csv
import difflib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
TRIAGE = HERE / "triage.tsv"
DOC = ROOT / "docs" / "real-code.md"
VERDICTS = ("confirmed", "intentional", "limit", "unresolved")
COLUMNS = ("repo", "commit", "path", "line", "code", "severity", "verdict", "reason")
REPORTED = ("error", "warning")


@dataclass(frozen=True)
class Row:
    repo: str
    commit: str
    path: str
    line: int
    code: str
    severity: str
    verdict: str
    reason: str

    @property
    def key(self) -> tuple[str, str, int, str]:
        return (self.repo, self.path, self.line, self.code)


def manifest() -> dict:
    return json.loads((HERE / "repos.json").read_text(encoding="utf-8"))


def corpus_names() -> list[str]:
    data = manifest()
    return [entry["name"] for entry in data["repos"]] + [entry["name"] for entry in data["wheels"]]


def commit_of(name: str) -> str:
    data = manifest()
    for entry in data["repos"]:
        if entry["name"] == name:
            return entry["commit"]
    for entry in data["wheels"]:
        if entry["name"] == name:
            return f"{entry['package']}=={entry['version']}"
    raise KeyError(name)


def load_triage(path: Path = TRIAGE) -> list[Row]:
    if not path.exists():
        return []
    with path.open(encoding="utf-8", newline="") as handle:
        reader = csv.DictReader(handle, delimiter="\t")
        rows = [Row(**{**record, "line": int(record["line"])}) for record in reader]
    for row in rows:
        if row.verdict not in VERDICTS:
            raise SystemExit(f"{path}: {row.repo} {row.path}:{row.line} {row.code}: verdict {row.verdict!r} is not one of {VERDICTS}")
    return rows


def write_triage(rows: list[Row], path: Path = TRIAGE) -> None:
    with path.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle, delimiter="\t", lineterminator="\n")
        writer.writerow(COLUMNS)
        for row in sorted(rows, key=lambda r: (r.repo, r.path, r.line, r.code)):
            writer.writerow([getattr(row, column) for column in COLUMNS])


def trainlint_command() -> list[str]:
    return [sys.executable, "-P", "-m", "trainlint"]


def check_corpus(folder: Path, name: str, save: Path | None, options: tuple[str, ...] = ()) -> list[dict]:
    """Errors and warnings trainlint reports in one corpus folder, paths relative to it (``options``: more
    arguments for ``check``, such as ``--isolated``)."""
    with tempfile.TemporaryDirectory() as scratch:
        report = Path(scratch) / "report.json"
        done = subprocess.run(
            [*trainlint_command(), "check", str(folder), *options, "--format", "json", "--output", str(report), "--exit-zero"],
            capture_output=True, text=True,
        )
        if done.returncode != 0 or not report.exists():
            raise SystemExit(f"trainlint failed on {folder}: {done.stderr[-2000:]}")
        data = json.loads(report.read_text(encoding="utf-8"))
        if save is not None:
            save.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(report, save / f"{name}.json")
    found = []
    for finding in data["findings"]:
        if finding["severity"] in REPORTED:
            finding = dict(finding, path=os.path.relpath(finding["path"], folder))
            found.append(finding)
    return found



def print_comparison(label: str, found: list[dict], new: list[dict], vanished: list, changed: list) -> int:
    """One corpus' counts and what differs from its reading; the number of differences."""
    counts = collections.Counter(finding["severity"] for finding in found)
    print(f"{label}: {counts['error']} errors, {counts['warning']} warnings; "
          f"{len(new)} new, {len(vanished)} vanished, {len(changed)} changed")
    for finding in new:
        print(f"  NEW       {finding['path']}:{finding['line']} {finding['code']} {finding['severity']}: {finding['message'][:140]}")
    for row in vanished:
        print(f"  VANISHED  {row.path}:{row.line} {row.code} {row.severity} (read {row.verdict}: {row.reason})")
    for row, finding in changed:
        print(f"  CHANGED   {row.path}:{row.line} {row.code} {row.severity} -> {finding['severity']} (read {row.verdict})")
    return len(new) + len(vanished) + len(changed)

def compare(name: str, found: list[dict], triaged: list[Row]) -> tuple[list[dict], list[Row], list[tuple[Row, dict]]]:
    known = {row.key: row for row in triaged if row.repo == name}
    seen = {}
    for finding in found:
        seen[(name, finding["path"], finding["line"], finding["code"])] = finding
    new = [finding for key, finding in seen.items() if key not in known]
    vanished = [row for key, row in known.items() if key not in seen]
    changed = [(known[key], finding) for key, finding in seen.items() if key in known and known[key].severity != finding["severity"]]
    return new, vanished, changed


def command_run(args) -> int:
    triaged = load_triage()
    names = args.names or corpus_names()
    problems = 0
    for name in names:
        folder = args.corpus / name
        if not folder.is_dir():
            print(f"{name}: {folder} is missing (python3 benchmarks/corpus/extract.py {args.corpus} {name})")
            problems += 1
            continue
        found = check_corpus(folder, name, args.save)
        new, vanished, changed = compare(name, found, triaged)
        problems += print_comparison(name, found, new, vanished, changed)
        if args.add_new:
            triaged += [Row(name, commit_of(name), f["path"], f["line"], f["code"], f["severity"], "unresolved", "") for f in new]
    if args.add_new:
        write_triage(triaged)
    return 1 if problems else 0


def tables(rows: list[Row]) -> str:
    """The per-repository and per-rule tables of docs/real-code.md."""
    lines = []
    for title, key in (("repository", lambda row: row.repo), ("rule", lambda row: row.code)):
        groups: dict[str, list[Row]] = collections.defaultdict(list)
        for row in rows:
            groups[key(row)].append(row)
        lines.append(f"| {title} | errors | confirmed | warnings | confirmed or intentional | not confirmed |")
        lines.append("|---|---|---|---|---|---|")
        order = corpus_names() if title == "repository" else sorted(groups)
        for name in order:
            lines.append(_table_row(name, groups[name]))
        lines.append(_table_row("**all**", rows))
        lines.append("")
    return "\n".join(lines)


def _table_row(name: str, rows: list[Row]) -> str:
    errors = [row for row in rows if row.severity == "error"]
    warnings = [row for row in rows if row.severity == "warning"]
    confirmed_errors = sum(row.verdict == "confirmed" for row in errors)
    accepted_warnings = sum(row.verdict in ("confirmed", "intentional") for row in warnings)
    unconfirmed = sum(row.verdict in ("limit", "unresolved") for row in rows)
    return (
        f"| {name} | {len(errors)} | {confirmed_errors} ({_percent(confirmed_errors, len(errors))}) | {len(warnings)} | "
        f"{accepted_warnings} ({_percent(accepted_warnings, len(warnings))}) | {unconfirmed} |"
    )


def _percent(part: int, whole: int) -> str:
    return f"{100 * part / whole:.0f} %" if whole else "–"


BEGIN, END = "<!-- triage-tables:begin -->", "<!-- triage-tables:end -->"


def command_tables(args) -> int:
    text = tables(load_triage())
    if not args.write:
        print(text)
        return 0
    doc = DOC.read_text(encoding="utf-8")
    start, end = doc.index(BEGIN) + len(BEGIN), doc.index(END)
    DOC.write_text(doc[:start] + "\n" + text + doc[end:], encoding="utf-8")
    print(f"wrote {DOC}")
    return 0


def command_fixes(args) -> int:
    """--fix on a copy of each corpus: files changed, files that no longer compile, findings that stay,
    and findings a fix bred on the lines it wrote."""
    totals = collections.Counter()
    for name in args.names or corpus_names():
        source = args.corpus / name
        with tempfile.TemporaryDirectory() as scratch:
            copy = Path(scratch) / name
            shutil.copytree(source, copy, symlinks=True)
            before = {path: path.read_bytes() for path in copy.rglob("*.py")}
            fixed_report = Path(scratch) / "before.json"
            subprocess.run([*trainlint_command(), "check", str(copy), "--format", "json", "--output", str(fixed_report), "--exit-zero"],
                           check=True, capture_output=True)
            found_before = json.loads(fixed_report.read_text())["findings"]
            fixable = [f for f in found_before if f.get("fix") and f["fix"].get("applicability", "safe") == "safe"]
            unsafe = ["--unsafe-fixes"] if args.unsafe_fixes else []
            subprocess.run([*trainlint_command(), "check", str(copy), "--fix", *unsafe, "--exit-zero", "--quiet"], capture_output=True)
            changed = [path for path, data in before.items() if path.read_bytes() != data]
            broken = []
            for path in changed:
                try:
                    compile(path.read_bytes(), str(path), "exec")
                except SyntaxError as error:
                    broken.append(f"{path.relative_to(copy)}: {error}")
            after_report = Path(scratch) / "after.json"
            subprocess.run([*trainlint_command(), "check", str(copy), "--format", "json", "--output", str(after_report), "--exit-zero"], check=True, capture_output=True)
            after = json.loads(after_report.read_text())["findings"]
            # per file and rule: what is left after the fixes beyond the findings that had none
            still = collections.Counter((f["path"], f["code"]) for f in after)
            had = collections.Counter((f["path"], f["code"]) for f in found_before)
            wanted = collections.Counter((f["path"], f["code"]) for f in fixable)
            kept = sum(max(0, still[key] - (had[key] - count)) for key, count in wanted.items())
            bred = [f"{path.relative_to(copy)}:{line} {code}" for path in changed
                    for line, code in _bred(before[path], path.read_bytes(), found_before, after, str(path))]
        print(f"{name}: {len(fixable)} safe fixes offered, {len(changed)} files changed, {len(broken)} no longer compile, "
              f"{kept} fixed findings still reported, {len(bred)} findings on lines a fix wrote")
        for line in broken:
            print(f"  BROKEN {line}")
        for line in bred:
            print(f"  BRED {line}")
        totals.update(offered=len(fixable), changed=len(changed), broken=len(broken), kept=kept, bred=len(bred))
    print(f"all: {totals['offered']} safe fixes offered, {totals['changed']} files changed, {totals['broken']} no longer compile, "
          f"{totals['kept']} fixed findings still reported, {totals['bred']} findings on lines a fix wrote")
    return 1 if totals["broken"] or totals["kept"] or totals["bred"] else 0


def _bred(old: bytes, new: bytes, before: list[dict], after: list[dict], path: str) -> list[tuple[int, str]]:
    """Findings on the lines a fix wrote that were not reported on the lines it replaced: rules that
    meet on one line must agree on one fix (issue 34)."""
    matcher = difflib.SequenceMatcher(a=old.decode("utf-8", "replace").splitlines(),
                                      b=new.decode("utf-8", "replace").splitlines(), autojunk=False)
    mine_before = [f for f in before if f["path"] == path]
    mine_after = [f for f in after if f["path"] == path]
    bred = []
    for tag, old_start, old_end, new_start, new_end in matcher.get_opcodes():
        if tag == "equal":
            continue
        there = {f["code"] for f in mine_before if old_start < f["line"] <= max(old_end, old_start + 1)}
        bred += [(f["line"], f["code"]) for f in mine_after if new_start < f["line"] <= new_end and f["code"] not in there]
    return bred


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run", help="check the corpora and compare with the triage")
    run.add_argument("corpus", type=Path)
    run.add_argument("names", nargs="*")
    run.add_argument("--save", type=Path, help="keep each corpus's JSON report here")
    run.add_argument("--add-new", action="store_true", help="append new findings to the triage as unresolved")
    run.set_defaults(handler=command_run)
    table = commands.add_parser("tables", help="the per-repository and per-rule tables")
    table.add_argument("--write", action="store_true", help=f"replace the tables in {DOC.relative_to(ROOT)}")
    table.set_defaults(handler=command_tables)
    fixes = commands.add_parser("fixes", help="apply --fix to a copy of each corpus")
    fixes.add_argument("corpus", type=Path)
    fixes.add_argument("names", nargs="*")
    fixes.add_argument("--unsafe-fixes", action="store_true", help="apply the unsafe fixes too")
    fixes.set_defaults(handler=command_fixes)
    args = parser.parse_args(argv)
    return args.handler(args)


if __name__ == "__main__":
    sys.exit(main())
