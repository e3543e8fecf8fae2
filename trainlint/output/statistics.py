"""``--statistics``: how many findings each rule has, most first, instead of the findings."""

from __future__ import annotations

from collections import Counter

import msgspec

from . import Report, visible
from .terminal import summary_line


def _rows(report: Report) -> list[tuple[str, str, int, int]]:
    """(code, name, findings, fixable findings), most findings first, then by code."""
    counts = Counter((finding.code, finding.name) for finding in report.findings)
    fixable = Counter((finding.code, finding.name) for finding in report.findings if finding.fix is not None and (finding.fix.safe or report.unsafe_fixes))
    rows = [(code, name, count, fixable[code, name]) for (code, name), count in counts.items()]
    return sorted(rows, key=lambda row: (-row[2], row[0]))


def render_statistics(report: Report, *, quiet: bool = False) -> str:
    rows = _rows(report)
    width = max((len(str(count)) for _, _, count, _ in rows), default=1)
    lines = [f"{count:>{width}}  {visible(code)}  {'[*]' if fixable else '[ ]'} {visible(name)}" for code, name, count, fixable in rows]
    if any(fixable for *_, fixable in rows):
        lines.append("[*] fixable with --fix")
    if not quiet:
        lines.append(summary_line(report))
    return "\n".join(lines) + "\n" if lines else ""


def render_statistics_json(report: Report) -> str:
    entries = [{"code": code, "name": name, "count": count, "fixable": fixable} for code, name, count, fixable in _rows(report)]
    return msgspec.json.format(msgspec.json.encode(entries), indent=2).decode("utf-8") + "\n"
