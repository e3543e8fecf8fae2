"""Carrying an analysis' positions through the edits made since its text was read.

An analysis of a long script can take longer than the time between two keys. Meanwhile the
editor is answered from the last finished analysis, its positions moved through the edits
made since (``text.LspTextDocument`` records them as ``TextChange``): a finding after an edit
moves with the text, one before it stays, and one whose span an edit reached into is dropped
(what the edit did to it is unknown until the new analysis says). Lines (evidence, the lines a
VRAM estimate belongs to) survive an edit inside them that adds or removes no line break.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import msgspec

from trainlint.analysis.lines import LINE_BREAK

if TYPE_CHECKING:
    from trainlint.analysis.findings import Evidence, Finding, Fix
    from trainlint.estimator.anchors import Anchor


@dataclass(frozen=True, slots=True)
class TextChange:
    """One edit of a document: the span it replaced, as 0-based lines and code-point columns of
    the text before it, and the shape of what replaced it."""

    start: tuple[int, int]  # (line, column)
    end: tuple[int, int]
    breaks: int  # line breaks in the new text
    last_line: int  # code points after the new text's last line break (all of it when it has none)

    @classmethod
    def of(cls, start: tuple[int, int], end: tuple[int, int], new_text: str) -> TextChange:
        breaks = list(LINE_BREAK.finditer(new_text))
        last_line = len(new_text) - breaks[-1].end() if breaks else len(new_text)
        return cls(start, end, len(breaks), last_line)

    @property
    def inside_one_line(self) -> bool:
        """The edit neither adds nor removes a line break."""
        return self.start[0] == self.end[0] and self.breaks == 0

    def moved(self, point: tuple[int, int]) -> tuple[int, int]:
        """Where a point at or after the edit's end is after the edit."""
        line, column = point
        (start_line, start_column), (end_line, end_column) = self.start, self.end
        if line > end_line:
            return line + self.breaks - (end_line - start_line), column
        first = start_column if self.breaks == 0 else 0
        return start_line + self.breaks, first + self.last_line + column - end_column


Span = tuple[tuple[int, int], tuple[int, int]]


def carry_span(changes: Sequence[TextChange], span: Span, *, whole_lines: bool = False) -> Span | None:
    """A span (0-based, end exclusive) through the changes; None when one reached into it.

    An insertion where the span starts moves it, one where it ends leaves it. With
    ``whole_lines`` the span stands for its lines, which an edit inside one line leaves in place.
    """
    start, end = span
    if all(end < change.start for change in changes):
        return span  # every edit is after it (the common case: findings above the line being typed)
    for change in changes:
        if change.start >= end and not (start == end == change.start):
            continue  # after the span: nothing moves
        if change.end <= start:
            start, end = change.moved(start), change.moved(end)
            continue
        if whole_lines and change.inside_one_line and start[0] <= change.start[0] <= end[0]:
            if change.end <= end:
                end = change.moved(end)
            continue
        return None
    return start, end


def carry_line(changes: Sequence[TextChange], line: int, length: int) -> int | None:
    """A 1-based line of ``length`` code points through the changes; None when an edit changed
    where it begins or ends."""
    carried = carry_span(changes, ((line - 1, 0), (line - 1, length)), whole_lines=True)
    return None if carried is None else carried[0][0] + 1


def carry_finding(changes: Sequence[TextChange], finding: Finding, lines: Sequence[str]) -> Finding | None:
    """A finding of the old text (``lines``) in the new one; None when an edit reached into its span.
    Its evidence lines are carried too (those an edit changed are left out), and its fix only when
    no edit reached into any of its spans."""
    span = carry_span(changes, ((finding.line - 1, finding.column - 1), (finding.end_line - 1, finding.end_column - 1)))
    if span is None:
        return None
    evidence: list[Evidence] = []
    for item in finding.evidence:
        if item.path is not None or item.cell is not None:
            evidence.append(item)
            continue
        line = carry_line(changes, item.line, len(lines[item.line - 1]) if 0 < item.line <= len(lines) else 0)
        if line is not None:
            evidence.append(msgspec.structs.replace(item, line=line))
    return msgspec.structs.replace(
        finding,
        line=span[0][0] + 1, column=span[0][1] + 1, end_line=span[1][0] + 1, end_column=span[1][1] + 1,
        evidence=tuple(evidence), fix=_carry_fix(changes, finding.fix),
    )


def carry_anchor(changes: Sequence[TextChange], anchor: Anchor, lines: Sequence[str]) -> Anchor | None:
    length = len(lines[anchor.line - 1]) if 0 < anchor.line <= len(lines) else 0
    line = carry_line(changes, anchor.line, length)
    return None if line is None else msgspec.structs.replace(anchor, line=line)


def _carry_fix(changes: Sequence[TextChange], fix: Fix | None) -> Fix | None:
    if fix is None:
        return None
    edits = []
    for edit in fix.edits:
        span = carry_span(changes, ((edit.line - 1, edit.column - 1), (edit.end_line - 1, edit.end_column - 1)))
        if span is None:
            return None
        edits.append(msgspec.structs.replace(
            edit, line=span[0][0] + 1, column=span[0][1] + 1, end_line=span[1][0] + 1, end_column=span[1][1] + 1,
        ))
    return msgspec.structs.replace(fix, edits=tuple(edits))
