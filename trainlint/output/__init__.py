"""Report formats: what a run found, rendered for people (terminal) or for tools (JSON, GitHub, SARIF)."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from trainlint.analysis.findings import Finding, Severity

_LINE_BREAK = re.compile(r"\r\n|\r|\n")
# What a terminal acts on instead of showing, and so what the checked code, a file name or a
# configuration value must never reach it as: the C0 controls but the tab (ESC starts a sequence
# that can clear the screen, retitle the window or set the clipboard; CR and BS overwrite what was
# shown), DEL, the C1 controls (U+009B is a CSI to some terminals) and the bidirectional overrides
# and isolates that make a line read otherwise than it is.
_CONTROLS = re.compile(r"[\x00-\x08\x0a-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def visible(text: str) -> str:
    """``text`` with each control character written as an escape (``\\x1b``, ``\\u202e``), as
    JSON and SARIF carry them: for output a terminal shows or a log viewer renders."""
    return _CONTROLS.sub(_escaped, text)


def visible_lines(text: str) -> str:
    """``visible`` for text of several lines: its line breaks kept."""
    return "\n".join(visible(line) for line in text.split("\n"))


def _escaped(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


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
