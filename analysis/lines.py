"""The one line model of the whole product: LSP's, which is also Python's tokenizer's.

A line ends at ``\\n``, ``\\r\\n`` or ``\\r`` and nowhere else. ``str.splitlines()`` also breaks at
form feed, ``\\x0b``, ``\\x1c``-``\\x1e``, ``\\x85``, U+2028 and U+2029, which are ordinary characters
to Python and to every editor's LSP client (a form feed is a common section break in Python
code), so it is never used on source text: a line number counted with it drifts from the
editor's below the first such character.
"""

from __future__ import annotations

import re

LINE_BREAK = re.compile(r"\r\n|\r|\n")
# A line's leading whitespace up to its last form feed: Python counts indentation from there.
_TO_LAST_FORM_FEED = re.compile(r"[ \t\f]*\f")


def normalize_line_breaks(text: str) -> str:
    """Every line break as ``\\n``: the same lines and columns, so positions carry over unchanged."""
    if "\r" not in text:
        return text
    return text.replace("\r\n", "\n").replace("\r", "\n")


def split_lines(text: str) -> list[str]:
    """The lines of ``text`` without their breaks; a text ending in a break has an empty last line,
    as an editor shows it ("a\\n" is two lines)."""
    return normalize_line_breaks(text).split("\n")


def line_starts(text: str) -> list[int]:
    """The offset at which each line begins."""
    return [0] + [match.end() for match in LINE_BREAK.finditer(text)]


def indentation_start(text: str, line_start: int) -> int:
    """Where the indentation of the line at ``line_start`` begins: after the last form feed in its
    leading whitespace, which resets Python's count (``\\f    x`` is indented, ``    \\fx`` is not),
    else at the line's start."""
    match = _TO_LAST_FORM_FEED.match(text, line_start)
    return match.end() if match else line_start


def indentation(line: str) -> str:
    """The spaces and tabs Python reads as the indentation of ``line``, without the form feeds
    (and what comes before them) that a line may start with."""
    code = len(line) - len(line.lstrip(" \t\f"))
    return line[indentation_start(line, 0) : code]
