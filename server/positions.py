"""Between the engine's positions (1-based lines, 1-based code-point columns) and LSP's
(0-based lines, 0-based columns in the negotiated encoding: UTF-16, UTF-8 or UTF-32)."""

from __future__ import annotations

from lsprotocol import types

from trainlint.analysis.findings import TextEdit

from .text import column_at, units


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


def to_text_edit(edit: TextEdit, positions: Positions) -> types.TextEdit:
    """An engine edit (a fix's) as an LSP edit."""
    return types.TextEdit(
        range=positions.range_to_client(edit.line, edit.column, edit.end_line, edit.end_column),
        new_text=edit.new_text,
    )
