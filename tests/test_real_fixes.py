"""Bugs fixed in public repositories, each as a pair: the parent of the fixing commit must be
flagged by the rule for that bug class, and the fixed code must be quiet for it.

Every pair is one file in tests/real_fixes/: the upstream repository, the fixing commit, the rule,
and a few lines around the change for each file it touched, written as a diff with full context
(a line starting with ``-`` is only in the parent, ``+`` only in the fix, a space in both). The
excerpts keep what the analysis needs to see (imports, the class, the loop) and drop the rest.

A pair the analysis cannot see yet says so (``missed = "why"``): the test then checks that it is
still missed, so a change that starts catching it has to update the file and the table in
docs/real-code.md (a test compares them). Run this file as a script for the table per rule:

    .venv/bin/python tests/test_real_fixes.py
"""

from __future__ import annotations

import ast
import collections
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import tomllib

from trainlint.analysis.findings import Severity

HERE = Path(__file__).resolve().parent
PAIRS = HERE / "real_fixes"
# At least this share of the parents must be flagged by the right rule (issue 19).
MIN_RECALL = 0.8


@dataclass(frozen=True)
class Pair:
    name: str
    repository: str
    commit: str
    rule: str
    bug: str
    files: dict[str, tuple[str, str]]  # path -> (parent text, fixed text)
    missed: str | None
    also_in_fix: tuple[str, ...]  # other rules the fixed code rightly triggers (a bug the fix introduced)

    @property
    def main_path(self) -> str:
        return next(iter(self.files))


def _split(excerpt: str) -> tuple[str, str]:
    parent: list[str] = []
    fixed: list[str] = []
    for number, line in enumerate(excerpt.splitlines(), 1):
        marker, text = line[:1], line[1:]
        if marker not in {" ", "-", "+"} and line:
            raise ValueError(f"line {number} starts with {marker!r}, not one of ' ', '-', '+'")
        if marker in {" ", "-", ""}:
            parent.append(text)
        if marker in {" ", "+", ""}:
            fixed.append(text)
    return "\n".join(parent) + "\n", "\n".join(fixed) + "\n"


def load_pairs() -> list[Pair]:
    pairs = []
    for path in sorted(PAIRS.glob("*.toml")):
        data = tomllib.loads(path.read_text(encoding="utf-8"))
        files = {entry["path"]: _split(entry["excerpt"]) for entry in data["files"]}
        pairs.append(Pair(
            path.stem, data["repository"], data["commit"], data["rule"], data["bug"], files,
            data.get("missed"), tuple(data.get("also_in_fix", ())),
        ))
    return pairs


def _findings(pair: Pair, side: int, root: Path):
    from trainlint.analysis.engine import analyze_source
    from trainlint.analysis.workspace import Workspace

    for relative, texts in pair.files.items():
        target = root / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(texts[side], encoding="utf-8")
    workspace = Workspace([root])
    found = []
    for relative, texts in pair.files.items():
        found.extend(analyze_source(texts[side], str(root / relative), workspace=workspace))
    return found


def _rules_flagged(pair: Pair, side: int, root: Path) -> set[str]:
    return {finding.code for finding in _findings(pair, side, root) if finding.severity > Severity.NOTE}


ALL = load_pairs()
# Kept out of the pairs: these repositories are held back for independent measurement.
HELD_OUT = ("pytorch-lightning", "trl", "llama-factory", "torchtitan", "mingpt")


@pytest.mark.parametrize("pair", ALL, ids=lambda pair: pair.name)
def test_pair_is_well_formed(pair: Pair):
    assert pair.rule.startswith("TL") and len(pair.commit) == 40
    assert pair.repository.lower().split("/")[1] not in HELD_OUT, pair.repository
    for path, sides in pair.files.items():
        for text in sides:
            ast.parse(text, filename=path)  # an excerpt must stay valid Python on both sides
    assert any(parent != fixed for parent, fixed in pair.files.values()), "the fix must change something"


def test_enough_pairs_and_recall():
    assert len(ALL) >= 20
    caught = sum(pair.missed is None for pair in ALL)
    assert caught / len(ALL) >= MIN_RECALL, f"{caught} of {len(ALL)} parents flagged"


@pytest.mark.parametrize("pair", ALL, ids=lambda pair: pair.name)
def test_parent_flagged_fix_quiet(pair: Pair, tmp_path: Path):
    parent = _rules_flagged(pair, 0, tmp_path / "parent")
    fixed = _rules_flagged(pair, 1, tmp_path / "fixed")
    if pair.missed is None:
        assert pair.rule in parent, f"{pair.repository}@{pair.commit[:8]}: {pair.bug}; got {sorted(parent)}"
    else:
        assert pair.rule not in parent, f"now caught: drop `missed` from {pair.name}.toml ({pair.missed})"
    assert pair.rule not in fixed, f"the fix {pair.repository}@{pair.commit[:8]} still reports {pair.rule}"
    assert fixed - parent <= set(pair.also_in_fix), f"the fix reports what its parent did not: {sorted(fixed - parent)}"


DOC = HERE.parent / "docs" / "real-code.md"
BEGIN, END = "<!-- real-fixes:begin -->", "<!-- real-fixes:end -->"


def table(scratch: Path, log=None) -> str:
    """Per rule: how many pairs, how many parents it flags, how many fixes stay quiet for it."""
    per_rule: dict[str, list[int]] = collections.defaultdict(lambda: [0, 0, 0])
    for index, pair in enumerate(ALL):
        root = scratch / str(index)
        counts = per_rule[pair.rule]
        counts[0] += 1
        flagged = pair.rule in _rules_flagged(pair, 0, root / "parent")
        counts[1] += flagged
        counts[2] += pair.rule not in _rules_flagged(pair, 1, root / "fixed")
        if log is not None:
            log(f"{pair.name:48} {pair.rule}  parent {'flagged' if flagged else 'missed '}")
    lines = ["| rule | pairs | parents flagged | fixes quiet |", "|---|---|---|---|"]
    for rule in sorted(per_rule):
        pairs, flagged, quiet = per_rule[rule]
        lines.append(f"| {rule} | {pairs} | {flagged} | {quiet} |")
    total = [sum(column) for column in zip(*per_rule.values())]
    lines.append(f"| **all** | {total[0]} | {total[1]} ({100 * total[1] // max(total[0], 1)} %) | {total[2]} |")
    return "\n".join(lines)


def test_the_doc_shows_the_table(tmp_path: Path):
    doc = DOC.read_text(encoding="utf-8")
    shown = doc[doc.index(BEGIN) + len(BEGIN):doc.index(END)].strip()
    assert shown == table(tmp_path), "paste the table printed by: .venv/bin/python tests/test_real_fixes.py"


def main() -> None:
    """Print each pair's result and the table per rule that docs/real-code.md shows."""
    import tempfile

    with tempfile.TemporaryDirectory() as scratch:
        print("\n" + table(Path(scratch), log=print))


if __name__ == "__main__":
    sys.path.insert(0, str(HERE.parent))
    main()
