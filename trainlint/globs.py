"""Gitignore-style patterns, matched in time that grows with the path, never exponentially.

The patterns come from the checked folder (``.gitignore`` files, ``exclude`` and
``per-file-ignores`` in its configuration), so they are input like any other. A pattern turned
into a regular expression the plain way (each ``*`` a ``[^/]*``, each ``**`` a ``.*``) makes
Python's backtracking matcher try every way of splitting a path among its wildcards: 16
wildcards in ``*a*a*a…b`` against a name of 30 ``a``'s took 30 s, and ``**/a/**/a/**/b``
against a path of 2,000 ``a`` folders 70 s.

Here each wildcard is matched the one way that can succeed. Within a path segment, the pieces
between stars are fixed-width (literals, ``?``, ``[...]``), so placing each at its leftmost
occurrence leaves the most room for the next, and the last piece sits at the segment's end; the
same holds, one level up, for runs of segments between ``**``. A lookahead that captures the
leftmost placement, followed by a backreference to it, commits to it: the matcher never comes
back to try another.

What a pattern means follows git's gitignore(5) as pathspec's ``GitIgnoreSpec`` reads it
(which trainlint used before): the last pattern that matches a path itself decides, else the
last that matches a folder above it; a pattern without a slash matches at any depth; ``!``
re-includes; ``dir/`` matches folders only. A folder's path is given with a trailing slash.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

# Longer than any path a file system keeps (Linux's PATH_MAX is 4,096 bytes): no such pattern
# can mean anything, and the regular expression of a longer one costs more to build.
MAX_PATTERN_CHARS = 4096

_ANY_FOLDERS = "**"
_WHOLE_SEGMENT = "[^/]+"  # what `*` alone matches


class GlobError(ValueError):
    """A line that is no gitignore pattern; the message says why."""


@dataclass(frozen=True)
class _Pattern:
    excludes: bool  # False for a `!` pattern, which takes a path back in
    itself: re.Pattern[str] | None  # matches (from its start) a path the pattern names
    above: re.Pattern[str] | None  # matches a path inside a folder the pattern names
    above_decides: bool  # a `dir/**` pattern: a path inside the folder counts as named itself


class GlobSpec:
    """Compiled gitignore-style patterns, in their order."""

    def __init__(self, patterns: Sequence[_Pattern]) -> None:
        self._patterns = tuple(patterns)

    def __bool__(self) -> bool:
        return bool(self._patterns)

    def verdict(self, path: str) -> bool | None:
        """True when the patterns exclude ``path`` (relative, forward slashes; a folder's ends in
        a slash), False when a `!` pattern takes it back, None when none matches it."""
        path = _normalized(path)
        inside: bool | None = None
        for pattern in reversed(self._patterns):
            if pattern.itself is not None and pattern.itself.match(path):
                return pattern.excludes
            if pattern.above is not None and pattern.above.match(path):
                if pattern.above_decides:
                    return pattern.excludes
                if inside is None:
                    inside = pattern.excludes
        return inside

    @classmethod
    def joined(cls, specs: Iterable[GlobSpec]) -> GlobSpec:
        """The patterns of ``specs``, in order."""
        return cls([pattern for spec in specs for pattern in spec._patterns])

    def match_file(self, path: str) -> bool:
        """Whether the patterns exclude ``path``."""
        return bool(self.verdict(path))


def compile_patterns(lines: Iterable[str]) -> GlobSpec:
    """The patterns of ``lines`` (blank lines and `#` comments are none); GlobError for a line
    that is no pattern."""
    return GlobSpec([pattern for pattern in map(compile_pattern, lines) if pattern is not None])


def compile_pattern(line: str) -> _Pattern | None:
    """One line as a pattern; None for a blank line, a comment, or a pattern git discards."""
    if len(line) > MAX_PATTERN_CHARS:
        raise GlobError(f"longer than {MAX_PATTERN_CHARS} characters")
    text = line if line.endswith("\\ ") else line.rstrip()  # `\ ` keeps a trailing space
    if not text or text.startswith("#") or text == "/":
        return None
    excludes = not text.startswith("!")
    if not excludes:
        text = text[1:]
    segments = text.split("/")
    folders_only = not segments[-1]
    if not segments[0]:  # a leading slash anchors the pattern to its folder
        del segments[0]
    elif len(segments) == 1 or (len(segments) == 2 and folders_only):  # no other slash: at any depth
        segments.insert(0, _ANY_FOLDERS)
    if not segments:
        raise GlobError("not a gitignore pattern")
    if not segments[-1]:
        segments[-1] = _ANY_FOLDERS  # `dir/`: what lies inside the folder
    names = _Names()
    globs: list[str | None] = []
    for segment in segments:
        if segment != _ANY_FOLDERS:
            try:
                globs.append(_segment_glob(segment, names))
            except _Discarded:
                return None
        elif not globs or globs[-1] is not None:  # `**/**` is `**`
            globs.append(None)
    return _translated(globs, excludes=excludes, folders_only=folders_only, names=names)


class _Discarded(Exception):
    """A bracket that never closes: git discards the pattern."""


class _Names:
    """Group names, unique within one pattern's regular expressions."""

    def __init__(self) -> None:
        self._count = itertools.count()

    def __call__(self) -> str:
        return f"g{next(self._count)}"


def _translated(globs: list[str | None], *, excludes: bool, folders_only: bool, names: _Names) -> _Pattern:
    """``globs``: each segment's regular expression, None for any number of folders (`**`)."""
    if globs == [None]:  # `**` names every file, and what lies in a folder; `**/` only the latter
        itself = None if folders_only else re.compile(r".*[^/]\Z")
        return _Pattern(excludes, itself, re.compile("[^/]*/"), above_decides=False)
    if globs[-1] is None:  # `dir/**` (a path inside the folder is named itself) or `dir/`
        above = re.compile(_runs(globs[:-1], "(?=/)", names))
        return _Pattern(excludes, None, above, above_decides=not folders_only)
    itself = re.compile(_runs(globs, "$", names))
    above = re.compile(_runs(globs, "(?=/)", names))
    return _Pattern(excludes, itself, above, above_decides=False)


def _runs(globs: list[str | None], end: str, names: _Names) -> str:
    """A regular expression for a path's first segments (None: any number of folders, none
    included) up to ``end`` (`$`, or `(?=/)` for a folder above the path). A run of segments
    between `**` is placed where it first fits, and the matcher is held to that placement."""
    pattern = ""  # matched from the path's start
    floating = False  # the run that comes next follows a `**`
    for index, glob in enumerate(globs):
        if glob is None:
            floating = True
            continue
        if index and globs[index - 1] is not None:
            continue  # part of the run that started before
        run = []
        for following in globs[index:]:
            if following is None:
                break
            run.append(following)
        last = index + len(run) == len(globs)
        text = "/".join(run) + (end if last else "(?=/)")
        if floating:
            name = names()
            separator = "/" if index > 1 else ""  # after an earlier run, the slash that ends it
            # the leftmost placement: whole segments skipped lazily, then the run
            text = f"{separator}(?=(?P<{name}>(?:[^/]*/)*?{text}))(?P={name})"
        pattern += text
        floating = False
    return pattern


def _segment_glob(segment: str, names: _Names) -> str:
    """A regular expression that matches one whole path segment as the glob ``segment`` does,
    committed to the one placement of its pieces between stars that can succeed."""
    pieces = [""]  # the fixed-width pieces between stars
    index = 0
    while index < len(segment):
        char = segment[index]
        index += 1
        if char == "*":
            if not pieces[-1] and len(pieces) > 1:
                continue  # `**` inside a segment is `*`
            pieces.append("")
        elif char == "\\":
            if index == len(segment):
                raise GlobError("not a gitignore pattern")
            pieces[-1] += re.escape(segment[index])
            index += 1
        elif char == "?":
            pieces[-1] += "[^/]"
        elif char == "[":
            bracket, index = _bracket(segment, index)
            pieces[-1] += bracket
        else:
            pieces[-1] += re.escape(char)
    if len(pieces) == 1:
        return pieces[0]
    if not any(pieces):  # stars alone: a whole segment, never an empty one
        return _WHOLE_SEGMENT
    first, *middle, last = pieces
    committed = ""
    for piece in middle:
        name = names()
        committed += f"(?=(?P<{name}>[^/]*?{piece}))(?P={name})"
    return f"{first}{committed}[^/]*{last}(?![^/])"


def _bracket(segment: str, start: int) -> tuple[str, int]:
    """The character class of the bracket expression that opens before ``start``, and the index
    past its end; _Discarded when it never closes. A class never matches a slash."""
    index = start
    negated = index < len(segment) and segment[index] in "!^"
    if negated:
        index += 1
    members = ""
    first = True
    while index < len(segment) and (segment[index] != "]" or first):
        first = False
        low, index = _class_character(segment, index)
        if index + 1 < len(segment) and segment[index] == "-" and segment[index + 1] != "]":
            high, index = _class_character(segment, index + 1)
            if low > high:
                raise GlobError(f"bad character range {low}-{high}")
            members += f"{re.escape(low)}-{re.escape(high)}"
        else:
            members += re.escape(low)
    if index >= len(segment):
        raise _Discarded
    return f"(?!/)[{'^' if negated else ''}{members}]", index + 1


def _class_character(segment: str, index: int) -> tuple[str, int]:
    if segment[index] == "\\" and index + 1 < len(segment):
        return segment[index + 1], index + 2
    return segment[index], index + 1


def _normalized(path: str) -> str:
    if path.startswith("/"):
        return path[1:]
    return path[2:] if path.startswith("./") else path
