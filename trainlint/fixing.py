"""Apply the fixes findings carry, safely: no overlapping edits, and never a file that no longer parses."""

from __future__ import annotations

import difflib
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from trainlint.analysis.engine import read_source
from trainlint.analysis.findings import Finding, TextEdit
from trainlint.analysis.lines import LINE_BREAK, line_starts
from trainlint.analysis.parsing import parse_module

MAX_ROUNDS = 10


@dataclass(frozen=True)
class SourceFile:
    """A file's text and how to write it back byte-for-byte alike (encoding, BOM)."""

    text: str
    encoding: str  # "utf-8-sig" when the file starts with a BOM, so encoding restores it

    @classmethod
    def decode(cls, data: bytes) -> SourceFile:
        """Decoded as the analysis decodes it (``read_source``); raises DecodeError where Python could not read it."""
        return cls(*read_source(data))

    def encode(self, text: str) -> bytes:
        return text.encode(self.encoding)


@dataclass(frozen=True)
class FixOutcome:
    text: str
    applied: int  # groups of edits applied over all rounds
    findings: list[Finding]  # what the final text still reports
    rejected: bool  # a round's result did not parse, so it was dropped
    resolved: int = 0  # problems the fixes made go away: a fix whose finding stays is not counted
    applied_findings: tuple[Finding, ...] = ()  # the findings whose fixes were applied, in each round's positions


def _offset(starts: list[int], text: str, line: int, column: int) -> int | None:
    """Index into text of a 1-based (line, column), None when it lies outside the text."""
    if not 1 <= line <= len(starts) or column < 1:
        return None
    start = starts[line - 1]
    line_break = LINE_BREAK.search(text, start)
    line_end = line_break.start() if line_break else len(text)
    offset = start + column - 1
    return offset if offset <= line_end else None


def _with_line_breaks(text: str, start: int, end: int, new_text: str) -> str:
    """``new_text``, to replace ``text[start:end]``, with line breaks taken from the lines it touches.

    A file may mix ``\\n``, ``\\r\\n`` and ``\\r``. Counted from the end, the new text's line breaks
    take those of the replaced span (a block indented under a new header keeps each line's own);
    the new text's further breaks, the lines it adds, take the ending of the line the edit starts
    on (a decorator or a moved statement ends as the line it joins).
    """
    pieces = LINE_BREAK.split(new_text)
    if len(pieces) == 1:
        return new_text
    old = [match.group() for match in LINE_BREAK.finditer(text, start, end)]
    own = LINE_BREAK.search(text, start)
    if own is not None:
        joining = own.group()
    else:  # the last line, which has no line break: the one above it has
        above = [match.group() for match in LINE_BREAK.finditer(text, 0, start)]
        joining = above[-1] if above else "\n"
    added = len(pieces) - 1 - len(old)
    breaks = [joining] * added + old[max(0, -added):]
    return "".join(piece + line_break for piece, line_break in zip(pieces, breaks)) + pieces[-1]


def _fuses_line_breaks(text: str, start: int, end: int, new_text: str) -> bool:
    """Whether replacing ``text[start:end]`` puts a ``\\r`` right before a ``\\n``: the two would read
    as one ``\\r\\n``, and two lines as one (a line deleted between a ``\\r`` and an empty line)."""
    before, after = text[start - 1 : start] if start else "", text[end : end + 1]
    joined = before + new_text + after
    return (before == "\r" and joined[1:2] == "\n") or (after == "\n" and joined[-2:-1] == "\r")


def apply_edits(text: str, fixes: Iterable[Sequence[TextEdit]]) -> tuple[str, int]:
    """Apply each group of edits whole or not at all; a group touching an earlier one is skipped.

    Returns the new text and how many groups were applied. Line breaks in new text follow the
    lines around them (``_with_line_breaks``): a CRLF file stays CRLF, and in a file that mixes
    them, every line the edits leave alone keeps its own.
    """
    new_text, taken = _apply_groups(text, fixes)
    return new_text, len(taken)


def _apply_groups(text: str, fixes: Iterable[Sequence[TextEdit]]) -> tuple[str, list[int]]:
    """apply_edits, telling which groups (by position in ``fixes``) were applied."""
    starts = line_starts(text)
    taken: list[tuple[int, int]] = []
    accepted: list[tuple[int, int, str]] = []
    applied: list[int] = []
    for index, edits in enumerate(fixes):
        ranges: list[tuple[int, int, str]] = []
        for edit in edits:
            start = _offset(starts, text, edit.line, edit.column)
            end = _offset(starts, text, edit.end_line, edit.end_column)
            if start is None or end is None or end < start:
                break
            new_text = _with_line_breaks(text, start, end, edit.new_text)
            if _fuses_line_breaks(text, start, end, new_text):
                break
            ranges.append((start, end, new_text))
        else:
            spans = [(start, end) for start, end, _ in ranges]
            if ranges and not any(_overlap(a, b) for i, a in enumerate(spans) for b in spans[:i] + taken):
                taken += spans
                accepted += ranges
                applied.append(index)
    pieces: list[str] = []
    position = 0
    for start, end, new_text in sorted(accepted, key=lambda item: (item[0], item[1])):
        pieces += [text[position:start], new_text]
        position = end
    pieces.append(text[position:])
    return "".join(pieces), applied


def _overlap(a: tuple[int, int], b: tuple[int, int]) -> bool:
    # Two edits at one spot (e.g. two insertions) conflict too: their order would be a guess.
    return a[0] == b[0] or (a[0] < b[1] and b[0] < a[1])


def applicable(finding: Finding, unsafe: bool = False) -> bool:
    """The finding has a fix that may be applied: a safe one, or any with ``unsafe``."""
    return finding.fix is not None and (finding.fix.safe or unsafe)


def apply_fixes(text: str, findings: Iterable[Finding], *, unsafe: bool = False) -> tuple[str, int]:
    """Apply the safe fixes of ``findings`` (every fix with ``unsafe``), in position order, that do not
    collide with each other."""
    new_text, applied = _apply_findings(text, findings, unsafe)
    return new_text, len(applied)


def _apply_findings(text: str, findings: Iterable[Finding], unsafe: bool) -> tuple[str, list[Finding]]:
    chosen = [finding for finding in sorted(findings, key=Finding.sort_key) if applicable(finding, unsafe)]
    new_text, applied = _apply_groups(text, [finding.fix.edits for finding in chosen])  # type: ignore[union-attr]
    return new_text, [chosen[index] for index in applied]


def parses(text: str) -> bool:
    """Whether LibCST parses the text; False too for a text nesting too deeply to try (its guard)."""
    try:
        parse_module(text)
    except Exception:  # LibCST raises more than ParserSyntaxError for some invalid text
        return False
    return True


def fix_until_stable(
    text: str,
    analyze: Callable[[str], list[Finding]],
    *,
    findings: list[Finding] | None = None,
    unsafe: bool = False,
    max_rounds: int = MAX_ROUNDS,
) -> FixOutcome:
    """Fix, re-analyse, repeat: one fix can make room for another that collided with it.

    ``findings`` are those of ``text`` when the caller already has them; only safe fixes are
    applied unless ``unsafe``. A round whose result no longer parses is dropped, leaving the text
    of the round before. ``resolved`` counts, per rule whose fixes were applied, how many fewer
    findings the final text has.
    """
    if findings is None:
        findings = analyze(text)
    before = Counter(finding.code for finding in findings)
    fixed_codes: set[str] = set()
    applied_findings: list[Finding] = []
    applied = 0
    rejected = False
    for _ in range(max_rounds):
        new_text, taken = _apply_findings(text, findings, unsafe)
        if not taken or new_text == text:
            break
        if not parses(new_text):
            rejected = True
            break
        fixed_codes.update(finding.code for finding in taken)
        applied_findings.extend(taken)
        text, applied = new_text, applied + len(taken)
        findings = analyze(text)
    after = Counter(finding.code for finding in findings)
    resolved = sum(max(0, before[code] - after[code]) for code in fixed_codes)
    return FixOutcome(text, applied, findings, rejected=rejected, resolved=resolved, applied_findings=tuple(applied_findings))


def unified_diff(old: str, new: str, path: str) -> str:
    """A git-style diff of one file, empty when nothing changed."""
    lines = difflib.unified_diff(_lines(old), _lines(new), fromfile=f"a/{path}", tofile=f"b/{path}")
    output: list[str] = []
    for line in lines:
        if line.endswith(("\n", "\r")):
            output.append(line)
        else:
            output.append(line + "\n\\ No newline at end of file\n")
    return "".join(output)


def _lines(text: str) -> list[str]:
    """Lines with their own line breaks; unlike str.splitlines, only the breaks Python counts."""
    starts = line_starts(text)
    return [text[start:end] for start, end in zip(starts, starts[1:] + [len(text)]) if start < end]
