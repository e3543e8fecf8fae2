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
