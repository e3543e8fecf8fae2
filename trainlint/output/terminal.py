"""Findings for people: a headline, the code with the span underlined, the evidence, help and fix."""

from __future__ import annotations

import os
import unicodedata
from pathlib import Path
from typing import IO

from trainlint.analysis.findings import Finding, Severity
from trainlint.config import relative_posix

from . import Report, visible

_TAB_WIDTH = 4
_MAX_FRAME_LINES = 4  # longer spans show their first lines and their last one

_RESET = "\033[0m"
_BOLD = "\033[1m"
_DIM = "\033[2m"
_SEVERITY_COLOURS = {Severity.ERROR: "\033[1;31m", Severity.WARNING: "\033[1;33m", Severity.NOTE: "\033[1;36m"}
_GUTTER_COLOUR = "\033[1;34m"
_FIX_COLOUR = "\033[32m"


COLOR_CHOICES = ("auto", "always", "never")


def wants_colour(stream: IO[str], choice: str = "auto") -> bool:
    """``--color always`` or ``never`` decide; with ``auto``, FORCE_COLOR wins, then NO_COLOR
    (https://no-color.org), then TERM=dumb (a terminal that shows escape codes as text), then
    whether the stream is a terminal."""
    if choice != "auto":
        return choice == "always"
    if os.environ.get("FORCE_COLOR"):
        return True
    if os.environ.get("NO_COLOR") or os.environ.get("TERM") == "dumb":
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


class _Paint:
    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled

    def __call__(self, text: str, style: str) -> str:
        return f"{style}{text}{_RESET}" if self.enabled and text else text


def render_terminal(report: Report, *, colour: bool = False, quiet: bool = False) -> str:
    paint = _Paint(colour)
    blocks = [_render_finding(report, finding, paint) for finding in report.findings]
    if not quiet:
        blocks.append(summary_line(report))
    return "\n\n".join(blocks) + "\n" if blocks else ""


def summary_line(report: Report) -> str:
    lines = []
    if report.fixed:
        lines.append(f"Fixed {_plural(report.fixed, 'problem')}.")
    files = _plural(report.files, "file")
    if not report.findings:
        lines.append(f"All checks passed ({files}).")
    else:
        counts = [
            _plural(report.count(severity), severity.label)
            for severity in (Severity.ERROR, Severity.WARNING, Severity.NOTE)
            if report.count(severity)
        ]
        offered = [f"{report.fixable} fixable with --fix"] if report.fixable else []
        if report.unsafe_fixable:
            offered.append(f"{report.unsafe_fixable} more with --unsafe-fixes")
        fixable = f" ({', '.join(offered)})" if offered else ""
        lines.append(f"Found {', '.join(counts)}{fixable} in {files}.")
    return "\n".join(lines)


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def _render_finding(report: Report, finding: Finding, paint: _Paint) -> str:
    severity = paint(finding.severity.label, _SEVERITY_COLOURS[finding.severity])
    rule = paint(visible(f"{finding.code} {finding.name}"), _BOLD)
    where = f"cell {finding.cell}:{finding.cell_line}:{finding.cell_column}" if finding.cell is not None else f"{finding.line}:{finding.column}"
    location = paint(f"{visible(finding.path)}:{where}:", _BOLD)
    lines = [f"{location} {severity} {rule}: {visible(finding.message)}"]
    frame = _code_frame(report, finding)
    width = max((len(str(number)) for number, _, _ in frame), default=1)
    gutter = " " * (width + 1)
    if frame:
        lines.append(paint(f"{gutter}|", _GUTTER_COLOUR))
        previous = None
        for number, text, underline in frame:
            if previous is not None and number != previous + 1:
                lines.append(paint("...", _GUTTER_COLOUR))
            lines.append(f"{paint(f'{number:>{width}} |', _GUTTER_COLOUR)} {text}".rstrip())
            if underline.strip():
                colour = _SEVERITY_COLOURS[finding.severity]
                lines.append(f"{paint(f'{gutter}|', _GUTTER_COLOUR)} {paint(underline.rstrip(), colour)}")
            previous = number
    for item in finding.evidence:
        if item.path:
            where = f"{visible(relative_posix(Path(item.path), Path.cwd()))}:{item.line}"
        elif item.cell is not None:
            where = f"line {item.cell_line} of cell {item.cell}"
        else:
            where = f"line {item.line}"
        lines.append(f"{gutter}= {paint('note', _BOLD)}: {where}: {visible(item.note)}")
    if finding.help:
        lines.append(f"{gutter}= {paint('help', _BOLD)}: {visible(finding.help)}")
    if finding.fix is not None:
        how = "apply with --fix" if finding.fix.safe else "unsafe: apply with --fix --unsafe-fixes"
        lines.append(f"{gutter}= {paint('fix', _FIX_COLOUR)}: {visible(finding.fix.description)} ({how})")
    return "\n".join(lines)


def _code_frame(report: Report, finding: Finding) -> list[tuple[int, str, str]]:
    """(line number, displayed text, underline) for the lines of the finding's span: in a
    notebook, the cell's own lines, numbered as in the cell. Control characters in a line are
    shown as escapes, and the underline counts the columns the escapes take."""
    if finding.cell is not None and finding.cell_line is not None:
        line, column = finding.cell_line, finding.cell_column or 1
        end_line, end_column = finding.cell_end_line or line, finding.cell_end_column or column + 1
    else:
        line, column, end_line, end_column = finding.line, finding.column, finding.end_line, finding.end_column
    numbers = list(range(line, max(line, end_line) + 1))
    if len(numbers) > _MAX_FRAME_LINES:
        numbers = numbers[: _MAX_FRAME_LINES - 1] + numbers[-1:]
    frame = []
    for number in numbers:
        text = report.code_line(finding, number)
        if text is None:
            continue
        start = column if number == line else len(text) - len(text.lstrip()) + 1
        end = end_column if number == end_line else len(text) + 1
        start = min(start, len(text) + 1)
        end = max(min(end, len(text) + 1), start)
        shown = _displayed(text)
        if not text.strip():
            frame.append((number, shown, ""))
            continue
        before = _width(_displayed(text[: start - 1]))
        span = max(_width(_displayed(text[: end - 1])) - before, 1)
        frame.append((number, shown, " " * before + "^" * span))
    return frame


def _displayed(text: str) -> str:
    """A line of code as the terminal shows it: control characters escaped, then tabs expanded."""
    return visible(text).expandtabs(_TAB_WIDTH)


def _width(text: str) -> int:
    """Terminal columns: wide East Asian characters take two, combining marks none."""
    return sum(
        0 if unicodedata.combining(char) else 2 if unicodedata.east_asian_width(char) in "WF" else 1
        for char in text
    )
