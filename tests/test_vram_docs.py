"""docs/vram.md's accuracy tables are generated from the calibration data and must match it."""

from __future__ import annotations

from trainlint.estimator.accuracy import DOCS, rewrite


def test_the_accuracy_tables_match_the_data():
    text = DOCS.read_text(encoding="utf-8")
    assert rewrite(text) == text, "run `.venv/bin/python -P -m trainlint.estimator.accuracy --write`"
    assert "| exact |" in text
