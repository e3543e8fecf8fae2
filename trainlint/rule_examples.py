"""A rule's own examples, run: each ``Fires`` fires (its fix gives the expected text), each
``Quiet`` stays quiet. The test suite runs them for every registered rule, ``trainlint
test-rule`` for a plugin's, so a rule documents and tests itself.
"""

from __future__ import annotations

import contextlib
import difflib
import os
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import libcst

from trainlint.analysis.engine import analyze_source
from trainlint.analysis.engine_codes import STRICT_ENV
from trainlint.analysis.findings import Finding
from trainlint.analysis.rules.base import Fires, Quiet, Rule
from trainlint.analysis.settings import AnalysisSettings
from trainlint.analysis.workspace import Workspace
from trainlint.fixing import apply_fixes


@dataclass(frozen=True)
class ExampleFailure:
    """One example that does not hold: which (``MUST_FIRE`` 0, ``MUST_NOT_FIRE`` 2) and why."""

    rule: type[Rule]
    kind: str  # "MUST_FIRE" or "MUST_NOT_FIRE"
    index: int
    message: str

    def __str__(self) -> str:
        return f"{self.rule.code} {self.kind}[{self.index}]: {self.message}"


def example_failures(rule: type[Rule]) -> list[ExampleFailure]:
    """Every example of ``rule`` that does not hold (empty: all hold). Rules run strict: an
    exception in ``check`` is a failure that names it, not a silent skip."""
    failures: list[ExampleFailure] = []
    with _strict(), tempfile.TemporaryDirectory(prefix="trainlint-examples-") as folder:
        for kind, examples in (("MUST_FIRE", rule.MUST_FIRE), ("MUST_NOT_FIRE", rule.MUST_NOT_FIRE)):
            for index, example in enumerate(examples):
                root = Path(folder) / f"{kind}-{index}"
                root.mkdir()
                try:
                    problem = fires_problem(rule, example, root) if isinstance(example, Fires) else quiet_problem(rule, example, root)
                except Exception as error:  # a rule's bug is this example's failure
                    problem = f"the rule raised {type(error).__name__}: {error}"
                if problem is not None:
                    failures.append(ExampleFailure(rule, kind, index, problem))
    return failures


def own_findings(rule: type[Rule], code: str, settings: dict | None, files: dict[str, str], root: Path) -> list[Finding]:
    """The rule's findings on an example; with ``files``, the example is ``train.py`` of a project
    holding them (in ``root``), so its imports resolve to them."""
    analysis_settings = AnalysisSettings(**(settings or {}))
    if not files:
        return [f for f in analyze_source(code, "example.py", analysis_settings, rules=[rule]) if f.code == rule.code]
    for relative, content in files.items():
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / relative).write_text(content, encoding="utf-8")
    (root / "train.py").write_text(code, encoding="utf-8")
    found = analyze_source(code, str(root / "train.py"), analysis_settings, rules=[rule], workspace=Workspace([root]))
    return [f for f in found if f.code == rule.code]


def fires_problem(rule: type[Rule], example: Fires, root: Path) -> str | None:
    """Why a ``Fires`` example does not hold, or None."""
    findings = own_findings(rule, example.code, example.settings, example.files, root)
    if len(findings) != example.count:
        return f"expected {example.count} {rule.code} finding(s), got {len(findings)}:\n{example.code}\n{findings}"
    for finding in findings:
        if not (finding.message and finding.evidence):
            return f"a finding on line {finding.line} does not say what it saw (message and evidence)"
        if example.severity is not None and finding.severity != example.severity:
            return f"severity {finding.severity.label}, expected {example.severity.label}: {finding.message}"
        if example.at is not None:
            reported = example.code.splitlines()[finding.line - 1]
            if example.at not in reported:
                return f"reported on line {finding.line} ({reported.strip()!r}), not at {example.at!r}"
    fixes = [finding.fix for finding in findings if finding.fix is not None]
    if example.no_fix:
        return "this finding must offer no fix" if fixes else None
    if example.fixed is None:
        if fixes:
            return ("the rule offers a fix here but the example has no expected result: give `fixed=` "
                    "(with `unsafe=True` for an unsafe fix), or `no_fix=True` if no fix should be offered")
        return None
    if len(fixes) != len(findings) or any(fix.safe is example.unsafe for fix in fixes):
        return f"every fix must be {'unsafe' if example.unsafe else 'safe'}: {fixes}"
    if not example.unsafe:
        safe_text = apply_fixes(example.code, findings, unsafe=False)[0]
        if safe_text != example.fixed:
            return _differs("the fixed text", example.fixed, safe_text)
    elif apply_fixes(example.code, findings, unsafe=False) != (example.code, 0):
        return "an unsafe fix must be applied only on request (--unsafe-fixes)"
    fixed, applied = apply_fixes(example.code, findings, unsafe=True)
    if applied < 1 or fixed != example.fixed:
        return _differs("the fixed text (--unsafe-fixes)", example.fixed, fixed)
    try:
        libcst.parse_module(fixed)
    except libcst.ParserSyntaxError as error:
        return f"the fixed text does not parse: {error}"
    if own_findings(rule, fixed, example.settings, example.files, root):
        return "the fix must remove the finding: the fixed text still has it"
    bred = bred_findings(example.code, fixed, example.settings, example.files, root)
    if bred:
        return ("a fix must not breed another finding: on the lines it wrote, "
                + "; ".join(f"{finding.code} on line {finding.line}: {finding.message}" for finding in bred))
    return None


def bred_findings(before: str, after: str, settings: dict | None, files: dict[str, str], root: Path) -> list[Finding]:
    """Findings of any rule on the lines a fix wrote that were not reported on the lines it replaced:
    where rules meet on a line, their fixes must agree (`.detach()` must not leave TL104 to report)."""
    old, new = _all_findings(before, settings, files, root), _all_findings(after, settings, files, root)
    matcher = difflib.SequenceMatcher(a=before.splitlines(), b=after.splitlines(), autojunk=False)
    bred = []
    for tag, old_start, old_end, new_start, new_end in matcher.get_opcodes():
        if tag == "equal":
            continue
        there_before = {finding.code for finding in old if old_start < finding.line <= max(old_end, old_start + 1)}
        bred += [finding for finding in new if new_start < finding.line <= new_end and finding.code not in there_before]
    return bred


def _all_findings(code: str, settings: dict | None, files: dict[str, str], root: Path) -> list[Finding]:
    """What every rule (trainlint's and the installed ones) reports on an example."""
    analysis_settings = AnalysisSettings(**{**(settings or {}), "select": ()})
    if files:
        (root / "train.py").write_text(code, encoding="utf-8")
        return analyze_source(code, str(root / "train.py"), analysis_settings, workspace=Workspace([root]))
    return analyze_source(code, "example.py", analysis_settings)


def quiet_problem(rule: type[Rule], example: Quiet, root: Path) -> str | None:
    """Why a ``Quiet`` example does not hold, or None."""
    findings = own_findings(rule, example.code, example.settings, example.files, root)
    if findings:
        return f"expected no {rule.code} finding, got {len(findings)}: " + "; ".join(
            f"line {finding.line}: {finding.message}" for finding in findings
        )
    return None


def _differs(what: str, expected: str, got: str) -> str:
    return f"{what} differs from the expected one.\n--- expected\n{expected}\n--- got\n{got}"


@contextlib.contextmanager
def _strict() -> Iterator[None]:
    before = os.environ.get(STRICT_ENV)
    os.environ[STRICT_ENV] = "1"
    try:
        yield
    finally:
        if before is None:
            del os.environ[STRICT_ENV]
        else:
            os.environ[STRICT_ENV] = before
