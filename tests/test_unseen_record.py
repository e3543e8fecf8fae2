"""benchmarks/unseen/: the repositories read once as a new user would meet them, and the verdicts of that reading.
Checked without the repositories: the files' format, and that ``run``'s comparison sees what changed."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("unseen", ROOT / "benchmarks" / "unseen" / "unseen.py")
assert _spec is not None and _spec.loader is not None
unseen = importlib.util.module_from_spec(_spec)
sys.modules["unseen"] = unseen
_spec.loader.exec_module(unseen)

_HEADER = "repo\tcommit\tpath\tline\tcode\tseverity\tverdict\treason\n"


def test_every_verdict_names_a_listed_repository_at_its_commit():
    commits = {entry["repo"]: entry["commit"] for entry in unseen.manifest()}
    rows = unseen.load_verdicts()
    assert rows
    for row in rows:
        repo = row.repo.replace("+", "/", 1)
        assert commits.get(repo) == row.commit, f"{repo}: {row.commit} is not the commit in repos.json"
        assert row.severity in ("error", "warning") and row.reason, f"{row.path}:{row.line} {row.code}"
    assert len({row.key for row in rows}) == len(rows), "one row per finding"


def test_no_repository_is_kept_out_or_mined():
    sys.path.insert(0, str(ROOT / "benchmarks" / "mined"))
    import split

    # a pair's file is named OWNER__NAME__COMMIT.toml: the names alone, no pair is opened
    mined = {path.name.rsplit("__", 1)[0].lower() for path in (ROOT / "benchmarks" / "mined" / "pairs").glob("*.toml")}
    for entry in unseen.manifest():
        assert not split.kept_out(entry["repo"]), entry["repo"]
        assert entry["repo"].replace("/", "__").lower() not in mined, f"{entry['repo']} has mined pairs"


def test_a_verdict_outside_the_four_is_refused(tmp_path):
    bad = tmp_path / "verdicts.tsv"
    bad.write_text(_HEADER + "a/b\tc0ffee\ttrain.py\t3\tTL102\terror\tconfirmed\tread\n", encoding="utf-8")
    with pytest.raises(SystemExit, match="not one of"):
        unseen.load_verdicts(bad)


def test_run_compares_the_findings_with_the_reading(tmp_path):
    reading = tmp_path / "verdicts.tsv"
    reading.write_text(
        _HEADER
        + "a/b\tc0ffee\ttrain.py\t3\tTL102\terror\tdebatable\ta stop-gradient pass\n"
        + "a/b\tc0ffee\ttrain.py\t9\tTL104\twarning\tfalse\ta bounded list\n"
        + "a/b\tc0ffee\teval.py\t5\tTL102\terror\ttrue\tgrad on in evaluation\n",
        encoding="utf-8",
    )
    found = [
        {"path": "train.py", "line": 3, "code": "TL102", "severity": "warning"},
        {"path": "eval.py", "line": 5, "code": "TL102", "severity": "error"},
        {"path": "eval.py", "line": 12, "code": "TL101", "severity": "warning"},
    ]
    new, vanished, changed = unseen.triage.compare("a+b", found, unseen.load_verdicts(reading))
    assert [(finding["path"], finding["line"]) for finding in new] == [("eval.py", 12)]
    assert [(row.path, row.line, row.verdict) for row in vanished] == [("train.py", 9, "false")]
    assert [(row.line, finding["severity"]) for row, finding in changed] == [(3, "warning")]


def test_summary_counts_each_verdict_per_rule():
    rows = unseen.load_verdicts()
    lines = unseen.summary(rows)
    assert lines[-1].startswith(f"| all | {len(rows)} |")
