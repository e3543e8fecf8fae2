"""Split a module's text into top-level statements without parsing it.

Each chunk is parsed on its own, so an edit re-parses only the chunks it touched and a
syntax error stays inside its statement. The scanner tracks brackets, strings and line
continuations; a line at column 0 can only start a new statement when none of those is
open. Mid-edit text often has an unclosed bracket, which would otherwise swallow the rest
of the file: a column-0 line that can only begin a statement (``def``, ``class``, a
decorator, an import), or any code at column 0 after a bracket opened on an indented line
(``running.append(`` half-typed inside a function), closes whatever was left open.

Line breaks are ``\n`` only: ``ModuleAnalysis`` reads ``\r\n`` and ``\r`` as ``\n`` before splitting.
"""

from __future__ import annotations

import ast
import bisect
import re
import sys
import threading
import warnings
from collections.abc import Iterator

import msgspec

from .lines import indentation_start

_TOKEN = re.compile(r"""\n|#|'''|\"\"\"|'|"|[(\[{]|[)\]}]|\\\r?\n""")
_TRIPLE_END = {"'''": re.compile(r"\\.|'''", re.S), '"""': re.compile(r'\\.|"""', re.S)}
_SINGLE_END = {"'": re.compile(r"\\.|'|\n", re.S), '"': re.compile(r'\\.|"|\n', re.S)}
# Column-0 words that only ever begin a statement: seeing one means an open bracket above is a typo.
_HARD_START = re.compile(r"(?:async\s+def|def|class|import|from\s+\S+\s+import|@)\b|@")
# Code at column 0 (a name, a keyword, a decorator): inside a bracket opened on an indented line, a
# line like this is the next top-level statement, not a continuation (no formatter writes one).
_CODE_AT_COLUMN_0 = re.compile(r"(?!(?:else|elif|except|finally|and|or|not|in|is)\b)[A-Za-z_@]")
# Words that begin a clause continuing the compound statement above (`else:`), not a new statement.
BLOCK_CONTINUATION = re.compile(r"(?:else|elif|except|finally)\b")


class Chunk(msgspec.Struct, frozen=True):
    """One top-level statement with the comments and blank lines just above it."""

    start_line: int  # 0-based index of the chunk's first line in the module
    text: str

    @property
    def line_count(self) -> int:
        return self.text.count("\n") + (0 if self.text.endswith("\n") else 1)


def statement_starts(text: str) -> list[int]:
    """Offsets (into text) of each line that begins at top level, i.e. not inside an open construct."""
    return list(_statement_starts(text))


def _statement_starts(text: str, start: int = 0, top_level: int = 0, marks: _Marks | None = None) -> Iterator[int]:
    """``statement_starts``, from ``start``: 0, or a line the scan reached with no bracket open, with
    ``top_level`` as it was before that line. ``marks`` gets each such line's state (offset, top level,
    open brackets, whether the outermost was opened on an indented line, the last offset given), just
    before it is given, until the scan decides a line by the text after it (``_continues_validly``):
    then it is ``stopped``. With ``marks``, a line reached inside brackets is marked too and given as
    ``-1 - offset``, a line no statement starts at (``first_statement`` joins the scan before there)."""
    yield start
    last = start  # the last offset given
    depth = 0
    pos = line_start = start
    opened_indented = False  # the outermost open bracket was opened on an indented line
    if start and _CODE_AT_COLUMN_0.match(text, indentation_start(text, start)):
        top_level = start  # where the top-level statement being read began
    length = len(text)
    while pos < length:
        match = _TOKEN.search(text, pos)
        if match is None:
            break
        token = match.group()
        pos = match.end()
        if token == "\n":
            line_start = pos
            code = indentation_start(text, pos)
            if depth == 0:
                if marks is not None:
                    marks.append((pos, top_level, 0, False, pos))  # the brackets and last offset given matter no more
                yield pos
                last = pos
                if _CODE_AT_COLUMN_0.match(text, code):
                    top_level = pos
                continue
            if marks is not None:
                marks.append((pos, top_level, depth, opened_indented, last))
                yield -1 - pos
            cut = bool(_HARD_START.match(text, code))
            if not cut and opened_indented and _CODE_AT_COLUMN_0.match(text, code):
                if marks is not None:  # decided by the text after this line: the state of a later line is not of the text before it
                    marks.stopped = True
                marks = None
                cut = not _continues_validly(text, top_level, pos, depth)
            if cut:
                # a bracket left open inside a function does not run on into the code after it; the
                # blank and comment lines just above belong to what follows, as they would at top level
                depth = 0
                yield from _blank_lines_before(text, pos, last)
                yield pos
                last = pos
                top_level = pos
        elif token in "([{":
            if depth == 0:
                start = indentation_start(text, line_start)
                opened_indented = text[start : start + 1] in (" ", "\t")
            depth += 1
        elif token in ")]}":
            depth = max(0, depth - 1)
        else:
            pos = _past_comment_or_string(text, token, pos)
        # a backslash continuation consumes its newline: the next line is not a start


def check_syntax(text: str) -> None:
    """Compile ``text`` to an AST, raising Python's SyntaxError; its warnings about the user's code
    (invalid escapes) are not printed: they are not our output."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compile(text, "<statement>", "exec", ast.PyCF_ONLY_AST)


UNTERMINATED_STRING = "unterminated string literal (detected at line {})"
# letters of a string prefix whose string Python tokenizes to its end as one token; from 3.12 an
# f-string's (and from 3.14 a t-string's) replacement fields are tokenized as code (PEP 701)
_ONE_TOKEN_PREFIX = "rRbBuUfF" if sys.version_info < (3, 12) else "rRbBuU"


def unterminated_string_kept(before: str, line: int, column: int, after: str) -> bool:
    """Whether compiling ``after`` raises what compiling ``before`` raised, an unterminated string
    literal whose token starts at ``line``, ``column`` (1-based, Python's), without compiling it.

    So when ``after`` is ``before`` with only the text between the string's opening quote and the
    end of its line replaced, by text that holds no quote of its kind, no backslash (which would
    carry the string on to the next line) and no line break or null: Python's tokenizer gives the
    parser the same tokens up to the string, the parser asks for them as before, and the string
    still runs to the end of its line, which the tokenizer reports at once (it stops there: neither
    parser pass nor the check for tokenizer errors further on reads past it)."""
    line_start = 0
    for _ in range(line - 1):
        line_start = before.find("\n", line_start) + 1
        if line_start == 0:
            return False
    opening = line_start + column - 1
    while opening < len(before) and before[opening] in _ONE_TOKEN_PREFIX:
        opening += 1
    if opening >= len(before) or before[opening] not in "'\"":
        return False
    line_end = before.find("\n", opening)
    rest = len(before) - line_end if line_end >= 0 else 0
    if len(after) < opening + 1 + rest or not after.startswith(before[: opening + 1]) or not after.endswith(before[len(before) - rest :]):
        return False
    typed = after[opening + 1 : len(after) - rest]
    if any(character in typed for character in (before[opening], "\\", "\n", "\r", "\0")):
        return False
    try:
        typed.encode()
    except UnicodeEncodeError:  # a lone surrogate: Python refuses the whole text
        return False
    return True


def _past_comment_or_string(text: str, token: str, pos: int) -> int:
    """Where a comment or string whose opening ``token`` ends at ``pos`` is over (a backslash
    continuation: ``pos`` itself)."""
    if token == "#":
        newline = text.find("\n", pos)
        return len(text) if newline < 0 else newline
    if token in _TRIPLE_END:
        end = _find_string_end(text, pos, _TRIPLE_END[token], token)
        return len(text) if end < 0 else end
    if token in _SINGLE_END:
        end = _find_string_end(text, pos, _SINGLE_END[token], token)
        return len(text) if end < 0 else end
    return pos


def _continues_validly(text: str, start: int, pos: int, depth: int) -> bool:
    """Whether the statement beginning at ``start``, with ``depth`` brackets open at the column-0 line
    ``pos``, is valid Python if that line continues it (a continuation line written at column 0 is
    legal inside brackets). Asked only then, so that valid code is never split; half-typed code,
    where this is false, is (Python compiles the statement to tell)."""
    end = len(text)
    scan = pos
    while scan < len(text):
        match = _TOKEN.search(text, scan)
        if match is None:
            break
        token = match.group()
        scan = match.end()
        if token == "\n":
            code = indentation_start(text, scan)
            if depth == 0 and text[code : code + 1] not in (" ", "\t", "\n", "#", "") and not BLOCK_CONTINUATION.match(text, code):
                end = scan
                break
        elif token in "([{":
            depth += 1
        elif token in ")]}":
            depth = max(0, depth - 1)
        else:
            scan = _past_comment_or_string(text, token, scan)
    if depth > 0:
        # a bracket still open at the end of the text, which Python refuses: not compiled (a call half
        # typed in a long `main()` followed by `if __name__ == "__main__":` would compile all of `main()`)
        return False
    try:
        check_syntax(text[start:end])
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    return True


def _blank_lines_before(text: str, pos: int, floor: int) -> list[int]:
    """Starts of the blank or comment-only lines right above the line at ``pos`` (not before ``floor``)."""
    found: list[int] = []
    end = pos - 1  # the newline ending the line above
    while end > floor:
        start = text.rfind("\n", 0, end) + 1
        if start <= floor:
            break
        stripped = text[start:end].strip()
        if stripped and not stripped.startswith("#"):
            break
        found.append(start)
        end = start - 1
    return found[::-1]


def _find_string_end(text: str, pos: int, pattern: re.Pattern[str], quote: str) -> int:
    while True:
        match = pattern.search(text, pos)
        if match is None:
            return -1
        if match.group() == quote:
            return match.end()
        if match.group() == "\n":  # an unterminated one-line string ends with its line
            return match.start()
        pos = match.end()


def split_statements(text: str) -> list[Chunk]:
    """Chunks whose texts concatenate back to exactly ``text``."""
    if not text:
        return []
    line_offsets = [0]
    for match in re.finditer("\n", text):
        line_offsets.append(match.end())
    offset_to_line = {offset: index for index, offset in enumerate(line_offsets)}

    boundaries = list(_boundaries(text))
    if not boundaries or boundaries[0] != 0:
        boundaries.insert(0, 0)
    chunks = []
    for index, start in enumerate(boundaries):
        end = boundaries[index + 1] if index + 1 < len(boundaries) else len(text)
        chunks.append(Chunk(start_line=offset_to_line[start], text=text[start:end]))
    return chunks


# The first lines of a definition whose scan ``one_statement`` can vouch for without running it:
# blank lines and comments at column 0, then one-line decorators (balanced, checked apart) and the
# ``def`` or ``class`` keyword; its header is read on by ``_header_end``.
_DEFINITION_START = re.compile(r"(?:[ \t]*(?:#[^\n]*)?\n)*(?:@[^\n'\"#]*\n)*(?:async[ \t]+)?(?:def|class)\b")
_AT_COLUMN_0 = re.compile(r"\n[^ \t\n]")
_ONE_LINE_STRING = re.compile(r"\"[^\"\\\n]*\"|'[^'\\\n]*'")


def one_statement(text: str, edited_from: int) -> bool:
    """Whether ``split_statements(text)`` gives one chunk, for the text of a definition that was one
    statement before an edit from offset ``edited_from`` on.

    Only a line that starts at column 0 can start another statement, so when the definition's first
    lines come before the edit and hold nothing the scanner could carry on (a string, a bracket
    left open) and no later line starts at column 0 (none may hold a form feed, after which Python
    counts columns from 0 again), the definition is one statement still, without scanning its text:
    a key typed in a 3,000-line class otherwise scans all of it (10 ms). Else it is split."""
    end = _header_end(text)
    if end is not None and end <= edited_from and "\f" not in text and _AT_COLUMN_0.search(text, end - 1) is None:
        return True
    return len(split_statements(text)) == 1


def _header_end(text: str) -> int | None:
    """Where the first lines of a definition end (the line break after the colon of its header), when
    the scan reaches that line break with no bracket open and nothing it carries on: the header holds
    no string but one-line ones, no comment, backslash or form feed, its brackets close before its colon, and none of its
    lines inside them starts with what only begins a statement (``_HARD_START``, after which the scan
    would cut). Parameters written over many lines (``def initialize_model_parallel(`` then one per
    line, ``) -> None:`` at column 0) included. Else None."""
    start = _DEFINITION_START.match(text)
    if start is None or not _balanced(text[: text.rfind("\n", 0, start.end()) + 1]):  # its decorators
        return None
    depth, pos = 0, start.end()
    while True:
        end = text.find("\n", pos)
        if end < 0:
            return None
        line = text[pos:end]
        if '"""' in line or "'''" in line:
            return None
        line = _ONE_LINE_STRING.sub("", line)  # a default (`order: str = "tp-dp"`): closed on its line, as the scan reads it
        if any(character in line for character in "'\"#\\\f"):
            return None
        depth = _depth_after(line, depth)
        if depth < 0:
            return None
        if depth == 0:
            return end + 1 if line.rstrip(" \t").endswith(":") else None
        pos = end + 1
        if _HARD_START.match(text, indentation_start(text, pos)):
            return None


def _balanced(code: str) -> bool:
    """Whether every bracket in ``code`` (with no string or comment in it) is closed on its own line."""
    for line in code.split("\n"):
        if line.lstrip(" \t").startswith("#"):
            continue
        if _depth_after(line, 0):
            return False
    return True


def _depth_after(line: str, depth: int) -> int:
    """The bracket depth after ``line`` (no string or comment in it), from ``depth`` before it; -1 once a closing
    bracket has no opening one."""
    for character in line:
        if character in "([{":
            depth += 1
        elif character in ")]}":
            depth -= 1
            if depth < 0:
                return -1
    return depth


def blank_or_comment(line: str) -> bool:
    """A line with no code on it: such lines go with the statement after them."""
    stripped = line.strip()
    return not stripped or stripped.startswith("#")


def first_statement(text: str, start: int = 0) -> str:
    """The text of the first chunk ``split_statements(text[start:])`` gives, read only as far as the
    next top-level statement (an edit checks the statement it touched without splitting the rest
    of the file).

    The scan goes on from the last line that this thread's scan before (``_last_scan``) reached with
    no bracket open and that both texts reach with the same text before it: the scan's state at
    such a line is a function of the text before it (``_statement_starts``' ``marks``), so a key that
    leaves a bracket open in one method of a long class scans from the method's lines on, not from
    the class's first line. It stops at the first line after the edit that it reaches in the state the
    scan before reached it in (moved by the edit; brackets left open included), when no line of the
    scan before was decided by the text after it: from there on both scans read the same text the
    same way, so the statement ends where the one before did, moved by the edit (``_Ahead``)."""
    rest = text[start:]
    resume: _ScanPoint = (0, 0, None, False, 0, False, 0)
    points: list[_ScanPoint] = []
    ahead = None
    before = getattr(_last_scan, "scan", None)
    if before is not None:
        before_rest, before_points, before_end, before_whole = before
        prefix = common_prefix(rest, before_rest)
        kept = bisect.bisect_right(before_points, (prefix + 1,))  # the points where the texts agree before them
        while kept and before_points[kept - 1][4]:  # a scan goes on from a line reached with no bracket open
            kept -= 1
        if kept:
            points = before_points[:kept]
            resume = points[-1]
        if before_whole and prefix > 0:
            suffix = common_suffix(rest, before_rest, min(len(rest), len(before_rest)) - prefix)
            ahead = _Ahead(rest, prefix, len(before_rest) - suffix, len(rest) - len(before_rest), before_points[kept:], before_end)
    marks = _Marks()
    end = len(rest)
    for boundary in _boundaries(rest, resume, points, marks, ahead):
        if boundary > 0:
            end = boundary
            break
    _last_scan.scan = (rest, points, end, not marks.stopped)
    return rest[:end]


class _Marks(list):
    """The state of each line ``_statement_starts`` reached, just before it is given; ``stopped`` once a
    line was decided by the text after it (no line after that is marked)."""

    __slots__ = ("stopped",)

    def __init__(self) -> None:
        super().__init__()
        self.stopped = False


class _Ahead:
    """What the scan before found after an edit (the texts differ in ``[prefix, old_end)`` of the old
    one, by ``shift`` characters): its points from the edit on and its end. A point the new scan
    reaches in the state the one before reached the same text after the edit in is where the two
    scans join (``joined``)."""

    def __init__(self, text: str, prefix: int, old_end: int, shift: int, points: list[_ScanPoint], end: int) -> None:
        self.text, self.prefix, self.old_end, self.shift, self.points = text, prefix, old_end, shift, points
        self.end = self._offset(end)

    def _offset(self, offset: int | None) -> int | None:
        """An offset of the old text in the new one; -1 for one inside the edit (none of the new text)."""
        if offset is None or offset < self.prefix:
            return offset
        return offset + self.shift if offset >= self.old_end else -1

    def joined(self, point: _ScanPoint) -> list[_ScanPoint] | None:
        """The points after ``point`` (the new scan's, just reached) the scan before gave, moved, when
        it reached the same text in the same state; else None. Inside brackets opened before the edit,
        only after a line of code after the edit: a cut further on reads the blank lines above it back
        to the last offset given, and stops at such a line."""
        offset, level, pending, decorator, depth, opened, last = point
        old_offset = offset - self.shift
        if old_offset < self.old_end or self.end == -1:
            return None
        index = bisect.bisect_left(self.points, (old_offset,))
        if index == len(self.points) or self.points[index] != (
            old_offset, *(self._old(value) for value in (level, pending)), decorator, depth, opened, self._old(last),
        ):
            return None
        if last < self.old_end + self.shift and not self._code_above(offset):
            return None
        shift, prefix = self.shift, self.prefix
        return [
            (later + shift, top if top < prefix else top + shift, comment if comment is None or comment < prefix else comment + shift,
             after_decorator, brackets, indented, given if given < prefix else given + shift)
            for later, top, comment, after_decorator, brackets, indented, given in self.points[index + 1:]
        ]

    def _old(self, offset: int | None) -> int | None:
        """An offset of the new text in the old one; -1 for one inside the edit."""
        if offset is None or offset < self.prefix:
            return offset
        return offset - self.shift if offset >= self.old_end + self.shift else -1

    def _code_above(self, offset: int) -> bool:
        """Whether the line above ``offset`` is code (not blank, not only a comment) after the edit."""
        start = self.text.rfind("\n", 0, offset - 1) + 1
        stripped = self.text[start : offset - 1].strip()
        return start >= self.old_end + self.shift and bool(stripped) and not stripped.startswith("#")


# A line a scan of ``_boundaries`` reached, and the scan's state before it: its offset, where the
# top-level statement being read began, the pending comment line, after a decorator, the brackets open,
# whether the outermost was opened on an indented line, and the last offset given (``_statement_starts``).
_ScanPoint = tuple[int, int, "int | None", bool, int, bool, int]
# This thread's last scan: its text, its points, where its first statement ends, and whether no line of
# it was decided by the text after it.
_last_scan = threading.local()


def common_prefix(one: str, other: str) -> int:
    """Length of the longest common prefix, compared in halving slices (C speed, no per-character loop)."""
    low, high = 0, min(len(one), len(other))
    while low < high:
        middle = (low + high + 1) // 2
        if one[low:middle] == other[low:middle]:
            low = middle
        else:
            high = middle - 1
    return low


def common_suffix(one: str, other: str, limit: int) -> int:
    """Length of the longest common suffix, at most ``limit`` characters (so it never overlaps the prefix)."""
    low, high = 0, max(0, limit)
    while low < high:
        middle = (low + high + 1) // 2
        if one[len(one) - middle : len(one) - low] == other[len(other) - middle : len(other) - low]:
            low = middle
        else:
            high = middle - 1
    return low


def _boundaries(
    text: str, resume: _ScanPoint = (0, 0, None, False, 0, False, 0), points: list[_ScanPoint] | None = None,
    marks: _Marks | None = None, ahead: _Ahead | None = None,
) -> Iterator[int]:
    """Where each chunk after the first begins (and 0 when the first begins with a statement): a
    top-level statement, with the comment and blank lines just above it. From ``resume`` on (a point
    a scan of the same text before it recorded), adding to ``points`` each point the scan reaches;
    with ``ahead``, once the scan joins the one before (``first_statement``), the points and the end
    that one found instead of the rest."""
    start, top_level, pending_comment_start, previous_was_decorator = resume[:4]
    if points is not None and marks is None:
        marks = _Marks()
    for offset in _statement_starts(text, start, top_level, marks):
        if marks:
            marked, level, depth, opened, last = marks.pop()
            assert points is not None and marked in (offset, -1 - offset), "marked just before it is given"
            point = (marked, level, pending_comment_start, previous_was_decorator, depth, opened, last)
            points.append(point)
            joined = ahead.joined(point) if ahead is not None else None
            if joined is not None:
                points.extend(joined)
                yield ahead.end  # type: ignore[union-attr,misc]
                return
        if offset < 0 or offset >= len(text):
            continue  # a line inside brackets, or the end
        line_end = text.find("\n", offset)
        line = text[offset : len(text) if line_end < 0 else line_end]
        if blank_or_comment(line):
            if pending_comment_start is None:
                pending_comment_start = offset
            continue
        code = line[indentation_start(line, 0) :]
        first_word = _first_word(text, code, line_end)
        if code[0] in " \t" or BLOCK_CONTINUATION.match(first_word) or previous_was_decorator:
            # indented leftovers, `else:` and decorated definitions stay with what came before
            pending_comment_start = None
            previous_was_decorator = first_word.startswith("@")
            continue
        yield pending_comment_start if pending_comment_start is not None else offset
        pending_comment_start = None
        previous_was_decorator = first_word.startswith("@")


def _first_word(text: str, code: str, line_end: int) -> str:
    """The statement's text from its first word: ``code`` (a line's, after its indentation), or, when
    that is only a backslash, the line it continues on (``\\`` then ``@deco`` is a decorator)."""
    while code.strip(" \t\f") == "\\" and line_end >= 0:
        next_end = text.find("\n", line_end + 1)
        code = text[line_end + 1 : len(text) if next_end < 0 else next_end].lstrip(" \t\f")
        line_end = next_end
    return code
