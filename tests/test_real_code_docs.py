"""docs/real-code.md shows what benchmarks/corpus/triage.tsv says: its tables are generated from
the triage file, and every row of that file is a judged finding of a corpus in repos.json."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("triage", ROOT / "benchmarks" / "corpus" / "triage.py")
triage = importlib.util.module_from_spec(_spec)
sys.modules["triage"] = triage  # its dataclasses look their module up while the class is built
_spec.loader.exec_module(triage)


def test_the_tables_in_the_doc_are_the_triage_files():
    doc = (ROOT / "docs" / "real-code.md").read_text(encoding="utf-8")
    start = doc.index(triage.BEGIN) + len(triage.BEGIN)
    end = doc.index(triage.END)
    assert doc[start:end].strip() == triage.tables(triage.load_triage()).strip(), (
        "regenerate with: python3 benchmarks/corpus/triage.py tables --write"
    )


def test_every_row_is_judged_and_names_a_corpus_at_its_commit():
    rows = triage.load_triage()
    assert rows
    names = set(triage.corpus_names())
    for row in rows:
        assert row.repo in names
        assert row.commit == triage.commit_of(row.repo)
        assert row.severity in ("error", "warning")
        assert row.verdict != "unresolved" and row.reason, f"{row.path}:{row.line} {row.code} needs a verdict and a reason"
    assert len({row.key for row in rows}) == len(rows), "one row per finding"
