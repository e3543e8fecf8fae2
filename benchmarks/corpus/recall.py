#!/usr/bin/env python3
"""Recall on real training code: bugs planted into the corpora's own files, one mutant at a time.

    .venv/bin/python benchmarks/corpus/recall.py ../corpus                 # every operator, every corpus
    .venv/bin/python benchmarks/corpus/recall.py ../corpus --json out.json
    OTHER/.venv/bin/python benchmarks/corpus/recall.py ../corpus           # another checkout's trainlint

Precision alone can be bought with silence; this measures what the rules still catch. Each
operator finds the places where a real file does the right thing and undoes it: a
``zero_grad()`` becomes ``pass``, ``total += loss.item()`` loses its ``.item()``, a ``with
torch.no_grad():`` around an evaluation becomes ``if True:`` (the block stays as it was), a
division by the accumulation steps goes, a ``set_epoch`` goes, ``if args.seed is not None:``
becomes ``if args.seed:``. A mutant is caught when the mutated file reports the operator's rule
at least once more than the original does. Operators are applied mechanically (no mutant is
picked by hand), so a few mutants are not bugs (a second clearing elsewhere, Accelerate scaling
the loss itself): the numbers compare versions of trainlint on the same mutants; they are not a
claim that every mutant is a defect. Mutants in test suites (``tests/``, ``test_*.py``, ...: what
``is_test_file`` calls one) are counted apart: they exercise models with tiny inputs on purpose,
most rules leave them alone by design, and half of all mutants fall there; the headline recall is
over the training code, and the table shows both.

The analysis runs in this process with the trainlint of the interpreter that runs the script (the
workspace is the corpus folder, as ``trainlint check FOLDER`` would have it). Standard library
plus that trainlint.
"""

from __future__ import annotations

import argparse
import collections
import json
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from trainlint.analysis.engine import analyze_source
from trainlint.analysis.patterns import is_test_file
from trainlint.analysis.workspace import Workspace

SKIPPED_CORPORA = {"torch"}  # the torch package is library code, not training scripts


@dataclass(frozen=True)
class Operator:
    name: str
    code: str  # the rule that must report the planted bug
    pattern: re.Pattern[str]  # one line to rewrite (multiline mode)
    replace: str  # the replacement, with the pattern's groups
    needs: re.Pattern[str] | None = None  # the file must also contain this (where the bug makes sense)


OPERATORS = (
    Operator("drop zero_grad", "TL201", re.compile(r"^([ \t]*)[\w.\[\]()]+\.zero_grad\([^()\n]*\)[ \t]*$", re.M), r"\1pass",
             re.compile(r"\.backward\(")),
    Operator("drop .item() from a running total", "TL101",
             re.compile(r"^([ \t]*[\w.]+\s*\+=\s*)(\w+)\.item\(\)[ \t]*$", re.M), r"\1\2", re.compile(r"\.backward\(")),
    Operator("drop .item() from a logged list", "TL101",
             re.compile(r"^([ \t]*[\w.]+\.append\()(\w+)\.item\(\)\)[ \t]*$", re.M), r"\1\2)", re.compile(r"\.backward\(")),
    Operator("no_grad block becomes if True", "TL102",
             re.compile(r"^([ \t]*)with torch\.(?:no_grad|inference_mode)\(\)\s*:[ \t]*$", re.M), r"\1if True:",
             re.compile(r"\.eval\(\)")),
    Operator("drop @torch.no_grad()", "TL102",
             re.compile(r"^([ \t]*)@torch\.(?:no_grad|inference_mode)\(\)[ \t]*\n(?=[ \t]*def \w*(?:eval|valid|test|predict|infer))", re.M | re.I), r"",
             re.compile(r"\.eval\(\)")),
    Operator("drop the division by the accumulation steps", "TL204",
             re.compile(r"^([ \t]*)(\w+)\s*=\s*\2\s*/\s*[\w.]*(?:accum|grad_acc)\w*[ \t]*$", re.M | re.I), r"\1pass"),
    Operator("drop set_epoch", "TL502", re.compile(r"^([ \t]*)[\w.]+\.set_epoch\([^()\n]*\)[ \t]*$", re.M), r"\1pass",
             re.compile(r"DistributedSampler")),
    Operator("seed tested for truthiness", "TL403", re.compile(r"^([ \t]*)if ([\w.]*seed) is not None:", re.M), r"\1if \2:"),
)


def corpora(root: Path, names: list[str]) -> list[Path]:
    folders = [root / name for name in names] if names else sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))
    return [folder for folder in folders if folder.name not in SKIPPED_CORPORA]


def count(findings, code: str) -> int:
    return sum(1 for finding in findings if finding.code == code)


def run(root: Path, names: list[str]) -> dict:
    results: dict[str, dict] = {}
    mutants = []
    started = time.process_time()
    for folder in corpora(root, names):
        workspace = Workspace([folder])
        for path in sorted(folder.rglob("*.py")):
            try:
                text = path.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError):
                continue
            original_findings = None
            for operator in OPERATORS:
                if operator.needs is not None and not operator.needs.search(text):
                    continue
                for match in operator.pattern.finditer(text):
                    mutated = text[: match.start()] + match.expand(operator.replace) + text[match.end():]
                    if original_findings is None:
                        original_findings = analyze_source(text, str(path), workspace=workspace)
                    findings = analyze_source(mutated, str(path), workspace=workspace)
                    caught = count(findings, operator.code) > count(original_findings, operator.code)
                    line = text.count("\n", 0, match.start()) + 1
                    relative = str(path.relative_to(folder))
                    mutants.append({
                        "corpus": folder.name, "path": relative, "line": line, "operator": operator.name,
                        "code": operator.code, "caught": caught, "test_suite": is_test_file(relative),
                    })
    # per operator: [caught, mutants] in training code, then in test suites
    by_operator = collections.defaultdict(lambda: [0, 0, 0, 0])
    for mutant in mutants:
        entry = by_operator[(mutant["code"], mutant["operator"])]
        offset = 2 if mutant["test_suite"] else 0
        entry[offset] += mutant["caught"]
        entry[offset + 1] += 1
    results["mutants"] = mutants
    results["by_operator"] = {
        f"{code} {name}": {"caught": caught, "mutants": total, "caught_in_tests": caught_in_tests, "mutants_in_tests": in_tests}
        for (code, name), (caught, total, caught_in_tests, in_tests) in sorted(by_operator.items())
    }
    results["cpu_seconds"] = round(time.process_time() - started, 1)
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("corpus", type=Path)
    parser.add_argument("names", nargs="*")
    parser.add_argument("--json", type=Path, help="write every mutant and whether it was caught")
    args = parser.parse_args(argv)
    results = run(args.corpus, args.names)
    totals = [0, 0, 0, 0]
    print("| rule | operator | training code: caught / mutants | recall | test suites: caught / mutants | all files: recall |")
    print("|---|---|---|---|---|---|")
    for key, entry in results["by_operator"].items():
        code, name = key.split(" ", 1)
        row = [entry["caught"], entry["mutants"], entry["caught_in_tests"], entry["mutants_in_tests"]]
        totals = [a + b for a, b in zip(totals, row)]
        print(_row(code, name, row))
    if totals[1] + totals[3]:
        print(_row("**all**", "", totals))
    print(f"({results['cpu_seconds']} CPU seconds)")
    if args.json:
        args.json.write_text(json.dumps(results, indent=1), encoding="utf-8")
    return 0


def _row(code: str, name: str, counts: list[int]) -> str:
    caught, total, caught_in_tests, in_tests = counts
    return (f"| {code} | {name} | {caught} / {total} | {_percent(caught, total)} | {caught_in_tests} / {in_tests} "
            f"| {_percent(caught + caught_in_tests, total + in_tests)} |")


def _percent(part: int, whole: int) -> str:
    return f"{100 * part / whole:.0f} %" if whole else "–"


if __name__ == "__main__":
    sys.exit(main())
