"""Suppression comments: ``# trainlint: ignore[TL101]``, ``# trainlint: ignore-file[TL401]``,
``# noqa: TL101`` (alone or among other tools' codes, ``# noqa: E501, TL101``) and a bare ``# noqa``.

Comments are found with ``tokenize``, so text that only looks like one (inside a string) is not
taken for a suppression, and lines are counted as Python counts them (``\n``, ``\r\n``, ``\r``).
Each top-level statement is tokenized on its own (none starts inside a string), only when it
holds a candidate, and remembered by its text: an edit costs only the statements it touched.
"""

from __future__ import annotations

import bisect
import functools
import io
import re
import tokenize
from collections.abc import Iterable

import msgspec

from .chunking import split_statements

_INLINE = re.compile(r"#\s*trainlint:\s*ignore(?!-)(?:\[(?P<codes>[^\]]*)\])?", re.I)
_FILE = re.compile(r"#\s*trainlint:\s*ignore-file(?:\[(?P<codes>[^\]]*)\])?", re.I)
# flake8's and ruff's form: codes after a colon, separated by commas or spaces; without them, every rule
_NOQA = re.compile(r"#\s*noqa(?::\s*(?P<codes>[A-Z]+[0-9]+(?:[\s,]+[A-Z]+[0-9]+)*))?(?![\w-])", re.I)
_CANDIDATE = re.compile(r"trainlint:|noqa")  # in lower-cased text
_OUR_CODE = re.compile(r"TL\d+", re.I)
_ANY_CODE = re.compile(r"[A-Z]+\d+", re.I)  # a plugin's too (ACME101): codes are upper case, names lower


class Suppression(msgspec.Struct):
    line: int  # 1-based
    column: int  # 1-based start of the comment
    end_column: int
    tokens: tuple[str, ...]  # empty: every rule
    file_wide: bool = False
    used: bool = False
    # A bare noqa comment (no codes) is as much other tools' as ours: it suppresses, but is never reported unused.
    reportable: bool = True

    def covers(self, code: str, name: str) -> bool:
        return not self.tokens or code in self.tokens or name in self.tokens


def _tokens(raw: str | None) -> tuple[str, ...]:
    if raw is None:
        return ()
    return tuple(token.strip().upper() if _ANY_CODE.fullmatch(token.strip()) else token.strip().lower()
                 for token in re.split(r"[,\s]+", raw) if token.strip())


def find_suppressions(text: str, statements: Iterable[tuple[int, str]] | None = None) -> list[Suppression]:
    """Every suppression comment of a module's text. ``statements`` are its top-level statements,
    (0-based first line, text) each, when the caller has them already."""
    lines = _candidate_lines(text)
    if not lines:
        return []
    if statements is None:
        statements = ((chunk.start_line, chunk.text) for chunk in split_statements(text))
    found: list[Suppression] = []
    for first_line, statement in statements:
        index = bisect.bisect_left(lines, first_line)
        if index < len(lines) and lines[index] <= first_line + statement.count("\n"):
            for line, column, comment in _statement_comments(statement):
                found.extend(_in_comment(first_line + line, column, comment))
    return found


def _candidate_lines(text: str) -> list[int]:
    """0-based lines (counting "\n", as statements' first lines do) where a suppression may be.
    Searched in a lower-cased copy (a case-blind regular expression costs ten times as much on
    every keystroke); lower-casing may change a line's length but never the line breaks."""
    lowered = text.lower()
    if "noqa" not in lowered and "trainlint:" not in lowered:
        return []
    lines: list[int] = []
    line = position = 0
    for match in _CANDIDATE.finditer(lowered):
        line += lowered.count("\n", position, match.start())
        position = match.start()
        if not lines or lines[-1] != line:
            lines.append(line)
    return lines


@functools.lru_cache(maxsize=4096)
def _statement_comments(text: str) -> tuple[tuple[int, int, str], ...]:
    return tuple(_comments(text))


def _in_comment(line: int, column: int, comment: str) -> list[Suppression]:
    """The suppressions one comment holds (a comment may hold several: `# type: ignore  # noqa: TL101`)."""
    found: list[Suppression] = []
    for pattern, file_wide in ((_FILE, True), (_INLINE, False)):
        for match in pattern.finditer(comment):
            found.append(Suppression(
                line, column + match.start() + 1, column + match.end() + 1, _tokens(match.group("codes")), file_wide,
            ))
    for match in _NOQA.finditer(comment):
        start, end = column + match.start() + 1, column + match.end() + 1
        if match.group("codes") is None:
            found.append(Suppression(line, start, end, (), reportable=False))
            continue
        codes = [code.upper() for code in re.split(r"[\s,]+", match.group("codes"))]
        ours = tuple(code for code in codes if _OUR_CODE.fullmatch(code))
        if ours:
            found.append(Suppression(line, start, end, ours))
        others = tuple(code for code in codes if not _OUR_CODE.fullmatch(code))
        if others:  # another tool's (E501) or a trainlint plugin's (ACME101): it suppresses, never reported unused
            found.append(Suppression(line, start, end, others, reportable=False))
    return found


def _comments(text: str):
    """(1-based line, 0-based column, text) of every comment. Code that does not tokenize (being
    typed, or broken) costs only the rest of its line: reading starts again on the next one."""
    lines = io.StringIO(text, newline=None).readlines()
    start = 0  # index of the first line the current tokenizer reads
    while start < len(lines):
        try:
            for token in tokenize.generate_tokens(_reader(lines[start:])):
                if token.type == tokenize.COMMENT:
                    yield token.start[0] + start, token.start[1], token.string
            return
        except tokenize.TokenError:
            return  # an unfinished string or bracket runs to the end of the text
        except SyntaxError as error:  # IndentationError among them
            failed = start + (error.lineno or 1)
            # a bad dedent is fine as the first line of a fresh start; anything else is skipped
            start = max(failed - 1 if isinstance(error, IndentationError) else failed, start + 1)


def _reader(lines: list[str]):
    remaining = iter(lines)
    return lambda: next(remaining, "")


class SuppressionIndex:
    def __init__(self, suppressions: list[Suppression]) -> None:
        self.all = suppressions
        self.by_line: dict[int, list[Suppression]] = {}
        self.file_wide = [s for s in suppressions if s.file_wide]
        for suppression in suppressions:
            if not suppression.file_wide:
                self.by_line.setdefault(suppression.line, []).append(suppression)

    def suppresses(self, code: str, name: str, line: int, end_line: int) -> bool:
        hit = False
        candidates = self.file_wide + self.by_line.get(line, []) + (self.by_line.get(end_line, []) if end_line != line else [])
        for suppression in candidates:
            if suppression.covers(code, name):
                suppression.used = True
                hit = True
        return hit

    def unused(self) -> list[Suppression]:
        return [s for s in self.all if not s.used and s.reportable]
