"""Between the engine's positions (1-based lines, 1-based code-point columns) and LSP's
(0-based lines, 0-based columns in the negotiated encoding: UTF-16, UTF-8 or UTF-32)."""

from __future__ import annotations

from pathlib import Path

from lsprotocol import types

from trainlint.analysis.findings import Finding, Severity, TextEdit

from .text import column_at, units

_SEVERITY = {
    Severity.ERROR: types.DiagnosticSeverity.Error,
    Severity.WARNING: types.DiagnosticSeverity.Warning,
    Severity.NOTE: types.DiagnosticSeverity.Information,
}


class Positions:
    """Column conversion for one text (its LSP lines, without breaks: ``split_lines``) in one encoding."""

    def __init__(self, lines: list[str], encoding: str) -> None:
        self.lines = lines
        self.encoding = encoding

    def _units(self, text: str) -> int:
        return units(text, self.encoding)

    def _line(self, index: int) -> str:
        return self.lines[index] if 0 <= index < len(self.lines) else ""

    def to_client(self, line: int, column: int) -> types.Position:
        """Engine (1-based line, 1-based code-point column) to an LSP position."""
        index = max(line - 1, 0)
        text = self._line(index)
        return types.Position(line=index, character=self._units(text[: max(column - 1, 0)]))

    def range_to_client(self, line: int, column: int, end_line: int, end_column: int) -> types.Range:
        return types.Range(start=self.to_client(line, column), end=self.to_client(end_line, end_column))

    def line_range(self, line: int) -> types.Range:
        """The whole of one line (1-based), without its line break."""
        text = self._line(line - 1)
        return types.Range(
            start=types.Position(line=max(line - 1, 0), character=0),
            end=types.Position(line=max(line - 1, 0), character=self._units(text)),
        )

    def end(self) -> types.Position:
        """The end of the text."""
        last = max(len(self.lines) - 1, 0)
        return types.Position(line=last, character=self._units(self._line(last)))

    def from_client(self, position: types.Position) -> tuple[int, int]:
        """An LSP position to (0-based line, 0-based code-point column), clamped into the text."""
        if not self.lines:
            return 0, 0
        line = min(max(position.line, 0), len(self.lines) - 1)
        return line, column_at(self.lines[line], position.character, self.encoding)


def to_diagnostic(finding: Finding, positions: Positions, uri: str, help_uri: str | None) -> types.Diagnostic:
    related = [
        types.DiagnosticRelatedInformation(
            location=types.Location(uri=uri, range=positions.line_range(evidence.line))
            if evidence.path is None
            else types.Location(
                uri=Path(evidence.path).as_uri(),
                range=types.Range(start=types.Position(evidence.line - 1, 0), end=types.Position(evidence.line, 0)),
            ),
            message=evidence.note,
        )
        for evidence in finding.evidence
    ]
    message = finding.message + (f"\n\nFix: {finding.help}" if finding.help else "")
    return types.Diagnostic(
        range=positions.range_to_client(finding.line, finding.column, finding.end_line, finding.end_column),
        severity=_SEVERITY[finding.severity],
        code=finding.code,
        code_description=types.CodeDescription(href=help_uri) if help_uri else None,
        source="trainlint",
        message=message,
        related_information=related or None,
        data={"code": finding.code, "line": finding.line, "fixable": finding.fix is not None},
    )


def to_text_edit(edit: TextEdit, positions: Positions) -> types.TextEdit:
    return types.TextEdit(
        range=positions.range_to_client(edit.line, edit.column, edit.end_line, edit.end_column),
        new_text=edit.new_text,
    )
