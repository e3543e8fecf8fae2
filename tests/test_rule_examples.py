"""Every registered rule's own examples: each MUST_FIRE fires (and its fix gives the fixed text),
each MUST_NOT_FIRE stays quiet."""

from __future__ import annotations

from pathlib import Path

import libcst
import pytest

from trainlint.analysis.engine import analyze_source
from trainlint.analysis.registry import all_rules
from trainlint.analysis.settings import AnalysisSettings
from trainlint.analysis.workspace import Workspace
from trainlint.fixing import apply_fixes

MIN_EXAMPLES = 6


def _cases(kind: str):
    for rule in all_rules():
        for index, example in enumerate(getattr(rule, kind)):
            yield pytest.param(rule, example, id=f"{rule.code}-{rule.name}-{index}")


def _own_findings(rule, text: str, settings: dict | None = None, files: dict[str, str] | None = None, root: Path | None = None):
    """The rule's findings on the example; with ``files``, the example is ``train.py`` of a project
    holding them (in ``root``), so its imports resolve to them."""
    analysis_settings = AnalysisSettings(**(settings or {}))
    if not files:
        return [f for f in analyze_source(text, "example.py", analysis_settings, rules=[rule]) if f.code == rule.code]
    for relative, content in files.items():
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / relative).write_text(content, encoding="utf-8")
    (root / "train.py").write_text(text, encoding="utf-8")
    found = analyze_source(text, str(root / "train.py"), analysis_settings, rules=[rule], workspace=Workspace([root]))
    return [f for f in found if f.code == rule.code]


@pytest.fixture(autouse=True)
def strict_rules(monkeypatch):
    monkeypatch.setenv("TRAINLINT_STRICT", "1")


@pytest.mark.parametrize("rule", all_rules(), ids=lambda rule: rule.code)
def test_rule_documents_and_tests_itself(rule):
    assert rule.explain().count("\n") >= 3, "the docstring is the `explain` text: what, why it costs money, how to fix"
    assert len(rule.MUST_FIRE) >= MIN_EXAMPLES
    assert len(rule.MUST_NOT_FIRE) >= MIN_EXAMPLES


@pytest.mark.parametrize("rule, example", list(_cases("MUST_FIRE")))
def test_must_fire(rule, example, tmp_path):
    findings = _own_findings(rule, example.code, example.settings, example.files, tmp_path)
    assert len(findings) == example.count, f"expected {example.count} {rule.code} finding(s):\n{example.code}\ngot {findings}"
    for finding in findings:
        assert finding.message and finding.evidence, "every finding says what it saw"
        if example.severity is not None:
            assert finding.severity == example.severity, finding.message
        if example.at is not None:
            reported = example.code.splitlines()[finding.line - 1]
            assert example.at in reported, f"reported on line {finding.line} ({reported.strip()!r}), not at {example.at!r}"
    if example.no_fix:
        assert all(finding.fix is None for finding in findings), "this finding must offer no fix"
    if example.fixed is not None:
        assert all(finding.fix is not None and finding.fix.safe is not example.unsafe for finding in findings), (
            f"every fix must be {'unsafe' if example.unsafe else 'safe'}: {[f.fix for f in findings]}"
        )
        if not example.unsafe:
            assert apply_fixes(example.code, findings, unsafe=False)[0] == example.fixed
        else:
            assert apply_fixes(example.code, findings, unsafe=False) == (example.code, 0), "an unsafe fix is applied only on request"
        fixed, applied = apply_fixes(example.code, findings, unsafe=True)
        assert applied >= 1
        assert fixed == example.fixed
        libcst.parse_module(fixed)
        assert not _own_findings(rule, fixed, example.settings, example.files, tmp_path), "the fix must remove the finding"


@pytest.mark.parametrize("rule, example", list(_cases("MUST_NOT_FIRE")))
def test_must_not_fire(rule, example, tmp_path):
    assert _own_findings(rule, example.code, example.settings, example.files, tmp_path) == []
