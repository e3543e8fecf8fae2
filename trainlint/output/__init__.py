"""Report formats: what a run found, rendered for people (terminal) or for tools (JSON, GitHub, SARIF)."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from trainlint.analysis.findings import Finding, Severity

_LINE_BREAK = re.compile(r"\r\n|\r|\n")


@dataclass(frozen=True)
class Report:
    findings: list[Finding]  # in output order: by file, then position
    files: int  # how many files were checked
    sources: Mapping[str, str] = field(default_factory=dict)  # path -> text, for files with findings
    fixed: int = 0  # problems --fix resolved
    unsafe_fixes: bool = False  # --unsafe-fixes: unsafe fixes count as fixable too
    cells: Mapping[str, Mapping[int, str]] = field(default_factory=dict)  # a notebook's path -> cell -> code
    _lines: dict[str, list[str]] = field(default_factory=dict, init=False, repr=False, compare=False)

    def count(self, severity: Severity) -> int:
        return sum(1 for finding in self.findings if finding.severity == severity)

    @property
    def fixable(self) -> int:
        """Findings --fix would fix (with --unsafe-fixes, the unsafe ones too)."""
        return sum(1 for finding in self.findings if finding.fix is not None and (finding.fix.safe or self.unsafe_fixes))

    @property
    def unsafe_fixable(self) -> int:
        """Findings only --unsafe-fixes would fix."""
        return 0 if self.unsafe_fixes else sum(1 for finding in self.findings if finding.fix is not None and not finding.fix.safe)

    def source_line(self, path: str, line: int) -> str | None:
        """One line of a file's text without its line break; None when unknown."""
        if path not in self._lines:
            text = self.sources.get(path)
            self._lines[path] = _LINE_BREAK.split(text) if text is not None else []
        lines = self._lines[path]
        return lines[line - 1] if 1 <= line <= len(lines) else None

    def code_line(self, finding: Finding, line: int) -> str | None:
        """Line ``line`` of the code a finding is in: its notebook cell's (``line`` counted in
        the cell), else its file's."""
        if finding.cell is None:
            return self.source_line(finding.path, line)
        code = self.cells.get(finding.path, {}).get(finding.cell)
        lines = _LINE_BREAK.split(code) if code is not None else []
        return lines[line - 1] if 1 <= line <= len(lines) else None


def repository_root(cwd: Path) -> Path:
    """Where the paths of GitHub annotations and SARIF start, as GitHub resolves them: the git
    repository holding ``cwd``, else ``$GITHUB_WORKSPACE`` when it holds ``cwd``, else ``cwd``."""
    cwd = Path(os.path.abspath(cwd))
    for folder in (cwd, *cwd.parents):
        if (folder / ".git").exists():
            return folder
    workspace = os.environ.get("GITHUB_WORKSPACE")
    if workspace and (Path(os.path.abspath(workspace)) == cwd or Path(os.path.abspath(workspace)) in cwd.parents):
        return Path(os.path.abspath(workspace))
    return cwd
