"""Parse one top-level statement with LibCST and give positions only when asked.

LibCST's position metadata costs as much as parsing, so a chunk computes it the first time a
rule reports or cites one of its nodes, and keeps it for as long as the chunk lives (the
language server keeps unchanged chunks between edits).

LibCST's native parser recurses once per level of nesting and nothing stops it: on an 8 MB
stack, 3,000 nested brackets, a 10,000-term sum or 10,000 ``elif`` branches overflow it and the
process dies (SIGSEGV), and its time grows with the square of the depth (a 1,000-term sum takes
0.15 s, 3,000 terms 1.9 s). ``parse_module`` guards it: a cheap scan estimates how deep a text
nests; past ``MAX_NESTING`` it is not parsed at all, and past ``INLINE_NESTING`` it is parsed on
a thread with a large stack, so that an underestimate cannot crash either. Real code stays far
below (the deepest statement of diffusers' 1,470-line train_dreambooth_lora.py: 19), and
Python itself refuses most of what the guard stops ("too many nested parentheses" past 200
brackets, a recursion limit near 3,000 terms).
"""

from __future__ import annotations

import bisect
import re
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import NamedTuple, TypeVar

import libcst as cst
from libcst._nodes.base import CSTNode

from . import chunking
from .chunking import BLOCK_CONTINUATION, Chunk, check_syntax, common_prefix, common_suffix, statement_starts
from .dependencies import note_position
from .splicing import NodeLines, NodeRanges, all_positions, parse_in_context, spans_inside, splice, unique_span
from .tree import children, facts_by_statement, walk

# Every identifier-like word outside comments and plain strings (f-strings hold code, so their words
# count): a superset of the names a statement uses, without "main" from "the main process".
_WORD = re.compile(
    r"#[^\n]*"
    r"|(?<!\w)[rRbBuU]{0,2}(?:'''(?:\\.|[^\\])*?'''|\"\"\"(?:\\.|[^\\])*?\"\"\"|'(?:\\.|[^\\'\n])*'|\"(?:\\.|[^\\\"\n])*\")"
    r"|([^\W\d]\w*)",
    re.S,
)

T = TypeVar("T")
MAX_NESTING = 500  # deeper statements are not parsed; the analysis' own visitors stop near here anyway
INLINE_NESTING = 100  # up to here LibCST runs on the caller's thread, whatever its stack
_DEEP_STACK_BYTES = 512 << 20  # virtual: only the pages a parse touches are used
_deep_stack_lock = threading.Lock()

# The tokens that make a tree deeper: brackets, operators, strings (adjacent ones nest) and the
# keywords of nested expressions; commas and logical line ends close a run of operators; an
# `elif` at the start of a line nests its branch inside the one above. Comments and words are
# matched only to be skipped whole.
_NESTING_TOKEN = re.compile(
    r"""(?P<comment>\#[^\r\n]*|\\\r?\n)
    |(?P<string>'''(?:\\.|[^\\])*?'''|\"\"\"(?:\\.|[^\\])*?\"\"\"|'(?:\\.|[^\\'\r\n])*'|"(?:\\.|[^\\"\r\n])*")
    |(?P<open>[(\[{])|(?P<close>[)\]}])|(?P<comma>[,;])
    |(?P<newline>(?:\r\n?|\n)(?P<indent>[ \t\f]*)(?:(?P<elif>elif\b)|(?P<quiet>else\b|(?=[#\r\n])|$))?)
    |(?P<operator>[-+*/%@&|^~<>.=!:]+|(?:and|or|not|if|else|lambda|await|yield)\b)
    |[^\W\d]\w*""",
    re.X | re.S,
)


# String literals LibCST accepts and Python rejects; see _rejected_literal.
_RISKY_ESCAPE = re.compile(r"\\[NuUx]")
_BYTES_PREFIX = re.compile(r"(?<!\w)(?:[bB][rR]?|[rR][bB])['\"]")
_LITERAL_ERRORS = ("(unicode error)", "(value error)", "bytes can only contain ASCII")


class TooDeeplyNested(Exception):
    """A text ``parse_module`` does not hand to LibCST; the message says why, after "this statement"."""


def nesting_estimate(text: str) -> int:
    """How deep LibCST's tree of ``text`` nests, estimated from its tokens (an overestimate, mostly)."""
    deepest = 0
    total = 0  # open brackets, plus the operators of each open run, plus the elif branches open
    runs = [0]  # operators since the last comma, per open bracket
    elifs: dict[int, int] = {}  # indentation -> branches of the if-chain open at that indentation
    for match in _NESTING_TOKEN.finditer(text):
        kind = match.lastgroup
        if kind is None or kind == "comment":  # a word, a comment or a line continuation
            continue
        if kind == "operator":
            token = match.group()
            weight = 1 if token[0].isalpha() else len(token)  # `- - -x` and `---x` nest alike
            runs[-1] += weight
            total += weight
        elif kind == "string":
            runs[-1] += 1
            total += 1
        elif kind == "open":
            runs[-1] += 1
            runs.append(0)
            total += 2
        elif kind == "close":
            if len(runs) > 1:
                total -= runs.pop() + 1
            continue
        elif kind == "comma" or len(runs) == 1:  # a comma, or the end of a logical line
            total -= runs[-1]
            runs[-1] = 0
            if kind == "newline" and match.group("quiet") is None:
                width = len(match.group("indent"))
                branch = match.group("elif") is not None
                if elifs:  # a line ends the if-chains indented deeper (an elif) or as deep (anything else)
                    for indent in [indent for indent in elifs if indent > width or (indent == width and not branch)]:
                        total -= elifs.pop(indent)
                if branch:
                    elifs[width] = elifs.get(width, 0) + 1
                    total += 1
                    deepest = max(deepest, total)
            continue
        else:
            continue
        if total > deepest:
            deepest = total
    return deepest


# LibCST validates every node as it is built (``CSTNode.__post_init__`` calls ``_validate``): it
# catches a hand-built node that could not be printed back, and it is 12-15 % of a parse, spent on
# nodes the parser built from text it accepted (LibCST's own comment there says as much). Nodes are
# built unvalidated only on a thread inside ``_parse``; everywhere else, including the fixes built
# on another thread at the same time, validation runs as LibCST wrote it.
_parsing = threading.local()
_validate_node = CSTNode.__post_init__


def _validate_unless_parsing(node: CSTNode) -> None:
    if not getattr(_parsing, "active", False):
        _validate_node(node)


CSTNode.__post_init__ = _validate_unless_parsing  # type: ignore[method-assign]


def _parse(text: str) -> cst.Module:
    _parsing.active = True
    try:
        return cst.parse_module(text)
    finally:
        _parsing.active = False


def parse_module(text: str) -> cst.Module:
    """``libcst.parse_module``, guarded so that no text can take the process down (see the module's
    docstring). Raises TooDeeplyNested instead of parsing a text nesting deeper than ``MAX_NESTING``."""
    depth = nesting_estimate(text)
    if depth <= INLINE_NESTING:
        if text.count("\n") >= PIECES_FROM_LINES:
            in_pieces = _parse_in_pieces(text)
            if in_pieces is not None:
                return in_pieces
        return _parse(text)
    if depth > MAX_NESTING:
        raise TooDeeplyNested(f"nests about {depth:,} levels deep (trainlint parses statements up to {MAX_NESTING} levels)")
    return _on_deep_stack(text, depth)


# A function or class of this many lines is parsed in pieces of about PIECE_LINES lines each.
# LibCST's native parser holds the GIL while it reads a text, for about 30 µs a line: the first
# parse of a 1,000-line main() kept the language server's event loop waiting 32 ms. In pieces, a
# wait is as long as one piece's parse.
PIECES_FROM_LINES = 300
PIECE_LINES = 100


def _parse_in_pieces(text: str) -> cst.Module | None:
    """The tree LibCST gives for ``text``, a top-level ``def`` or ``class`` with a long body, parsed
    piece by piece; None when the text is not that, or has no place to cut.

    The body is cut only before one of its statements whose line follows a line of code: no blank
    or comment line lies at the cut, so no node could own a line across it (LibCST gives such lines
    to the next statement or to a block's footer). The header with the body's first and last
    pieces (and what follows the body) is parsed as one text, the pieces between in the body's
    indentation (``parse_in_context``), and their statements are put in their place. Where the
    statements are is read from the text with the chunker's scanner, which skips strings, brackets
    and continuation lines; the tree is used only if it holds as many statements as the scanner saw.
    """
    lines = _body_statement_lines(text)
    if lines is None:
        return None
    statement_offsets, cut_offsets = lines
    if len(cut_offsets) < 2:
        return None
    statements_before = sum(1 for offset in statement_offsets if offset < cut_offsets[0])
    try:
        outer = _parse(text[: cut_offsets[0]] + text[cut_offsets[-1]:])
        definition = outer.body[0] if len(outer.body) == 1 else None
        if not isinstance(definition, (cst.FunctionDef, cst.ClassDef)) or not isinstance(definition.body, cst.IndentedBlock):
            return None
        block = definition.body
        indent = block.indent if block.indent is not None else outer.default_indent
        middle: list[cst.BaseStatement] = []
        for begin, end in zip(cut_offsets, cut_offsets[1:]):
            piece = parse_in_context(text[begin:end], [indent], _parse)
            if piece is None:
                return None
            middle.extend(piece)
    except cst.ParserSyntaxError:
        return None  # the whole text is parsed next, to raise LibCST's own error
    statements = [*block.body[:statements_before], *middle, *block.body[statements_before:]]
    if len(statements) != len(statement_offsets):
        return None
    return outer.with_changes(body=[definition.with_changes(body=block.with_changes(body=statements))])


def _body_statement_lines(text: str) -> tuple[list[int], list[int]] | None:
    """Offsets of the lines that begin a statement of the body of the one ``def`` or ``class`` in
    ``text`` (decorators begin theirs), and of those where the body may be cut (see above), about
    PIECE_LINES lines apart; None when the text does not look like one definition with a block."""
    starts = statement_starts(text)
    header: int | None = None
    indent: str | None = None
    statements: list[int] = []
    cuts: list[int] = []
    after_decorator = False
    last_cut_line = line_number = counted_to = 0
    for offset in starts:
        end = text.find("\n", offset)
        line = text[offset : len(text) if end < 0 else end]
        stripped = line.lstrip(" \t")
        if not stripped or stripped.startswith("#"):
            continue
        own_indent = line[: len(line) - len(stripped)]
        if header is None:
            if own_indent:
                return None
            if stripped.startswith("@"):
                continue
            header = offset
            continue
        if not own_indent:
            return None  # a second top-level statement, or a one-line definition's next statement
        if indent is None:
            indent = own_indent
        if own_indent != indent or BLOCK_CONTINUATION.match(stripped):
            continue
        if not after_decorator:
            statements.append(offset)
            previous_line_end = offset - 1
            previous = text[text.rfind("\n", 0, previous_line_end) + 1 : previous_line_end].strip()
            line_number += text.count("\n", counted_to, offset)
            counted_to = offset
            if statements[0] != offset and previous and not previous.startswith("#") and line_number - last_cut_line >= PIECE_LINES:
                cuts.append(offset)
                last_cut_line = line_number
        after_decorator = stripped.startswith("@")
    if header is None or indent is None:
        return None
    return statements, cuts


def _on_deep_stack(text: str, depth: int) -> cst.Module:
    outcome: list = []

    def parse() -> None:
        try:
            outcome.append(_parse(text))
        except BaseException as error:  # handed to the caller's thread, re-raised there
            outcome.append(error)

    with _deep_stack_lock:  # the stack size is process-wide: set it only for this thread's start
        try:
            previous = threading.stack_size(_DEEP_STACK_BYTES)
        except (ValueError, RuntimeError):  # a platform that cannot size thread stacks
            previous = None
        try:
            thread = threading.Thread(target=parse, name="trainlint-deep-parse", daemon=True)
            thread.start()
        except (RuntimeError, MemoryError):
            raise TooDeeplyNested(f"nests about {depth:,} levels deep, and no thread to parse it on could start") from None
        finally:
            if previous is not None:
                threading.stack_size(previous)
    thread.join()
    if isinstance(outcome[0], BaseException):
        raise outcome[0]
    return outcome[0]


class SyntaxProblem:
    """Where and why a chunk failed to parse, in module coordinates (1-based).

    ``analysed`` is False for a statement that was not parsed (too deep for LibCST) although Python
    may accept it: reported as "not analysed" (TL002), not as a syntax error."""

    __slots__ = ("line", "column", "message", "analysed", "from_python")

    def __init__(self, line: int, column: int, message: str, *, analysed: bool = True, from_python: bool = False) -> None:
        self.line = line
        self.column = column
        self.message = message
        self.analysed = analysed
        self.from_python = from_python  # Python's message: its line numbers are the file's

    def moved_to(self, old: Chunk, new: Chunk) -> SyntaxProblem:
        """The same problem for the same statement text at another line."""
        if self.from_python:
            again = _python_syntax_error(new)
            if again is not None:
                return again
        return SyntaxProblem(
            self.line - old.start_line + new.start_line, self.column, self.message,
            analysed=self.analysed, from_python=self.from_python,
        )


def _parsed(chunk: Chunk) -> tuple[cst.Module | None, SyntaxProblem | None, tuple[int, int] | None, str | None]:
    """A statement's tree and syntax error; with a broken line inside a function, the lines that
    do not parse (chunk-relative, first and last) and the text with them blanked, which the tree is
    of (see ``localised``: the rest of the function is analysed)."""
    try:
        module = parse_module(chunk.text)
        rejected = _rejected_literal(chunk)
        return (None, rejected, None, None) if rejected is not None else (module, None, None, None)
    except cst.ParserSyntaxError as error:
        recovered = localised(chunk.text)
        if recovered is None:
            problem = _python_syntax_error(chunk) or SyntaxProblem(
                chunk.start_line + error.raw_line, error.raw_column + 1, _describe(error)
            )
            return None, problem, None, None
        blanked, first, last, python_problem = recovered
        try:
            return parse_module(blanked), _problem(chunk, python_problem), (first, last), blanked
        except (cst.ParserSyntaxError, TooDeeplyNested, RecursionError, MemoryError):
            return None, _problem(chunk, python_problem), None, None
    except TooDeeplyNested as error:
        problem = _python_syntax_error(chunk) or SyntaxProblem(
            _first_code_line(chunk), 1, f"this statement {error}; it was not checked", analysed=False,
        )
        return None, problem, None, None
    except (RecursionError, MemoryError):
        problem = SyntaxProblem(
            _first_code_line(chunk), 1, "statement is nested too deeply to analyse; it was not checked", analysed=False
        )
        return None, problem, None, None
    except Exception as error:  # LibCST raises plain exceptions for some invalid input
        return None, SyntaxProblem(chunk.start_line + 1, 1, f"cannot parse: {error}"), None, None


class NodeMemo(NamedTuple):
    """A key of ``ParsedChunk.memo`` whose value maps nodes to facts of their own subtree."""

    name: str


class ParsedChunk:
    __slots__ = (
        "chunk", "index", "module", "syntax_error", "broken", "memo", "origin", "revision", "_positions", "_starts", "_words",
        "_tree_text",
    )

    def __init__(self, chunk: Chunk, index: int) -> None:
        self._unparsed(chunk, index)
        self._parse()

    def _unparsed(self, chunk: Chunk, index: int) -> None:
        """Every field but those the parse sets."""
        self.chunk = chunk
        self.index = index
        self._positions: NodeRanges | None = None
        self._starts: NodeLines | None = None  # each statement's first line, leading lines included
        self._words: frozenset[str] | None = None
        self.origin: str | None = None  # the file, for statements of another workspace file
        # Facts derived from this statement's tree alone, kept for as long as the tree is.
        self.memo: dict = {}
        self.revision = 0  # how many edits this object has taken over (``adopt``)

    def _parse(self) -> None:
        """The tree of the statement's text, or what keeps it from having one (``syntax_error``).
        Each field is set once, to its final value (another thread may read an unparsed chunk's)."""
        self.module, self.syntax_error, self.broken, self._tree_text = _parsed(self.chunk)

    def moved(self, chunk: Chunk, index: int) -> ParsedChunk:
        """The same statement at another place in an edited document: no re-parse, positions kept."""
        assert chunk.text == self.chunk.text
        moved = ParsedChunk.__new__(ParsedChunk)
        moved.chunk = chunk
        moved.index = index
        moved.module = self.module
        moved._positions = self._positions
        moved._starts = self._starts
        moved._words = self._words
        moved.memo = self.memo
        moved.origin = self.origin
        moved.revision = self.revision
        problem = self.syntax_error
        moved.broken, moved._tree_text = self.broken, self._tree_text
        moved.syntax_error = None if problem is None else problem.moved_to(self.chunk, chunk)
        return moved

    def tree_text(self) -> str:
        """The text the tree was parsed from: the chunk's, its broken lines blanked if it has some."""
        return self._tree_text if self._tree_text is not None else self.chunk.text

    def relocate(self, chunk: Chunk) -> None:
        """The same statement, same index, moved by whole lines: positions are relative, so only the offset changes."""
        assert chunk.text == self.chunk.text
        if self.syntax_error is not None:
            self.syntax_error = self.syntax_error.moved_to(self.chunk, chunk)
        self.chunk = chunk

    @property
    def words(self) -> frozenset[str]:
        """Every name this statement could refer to (an over-approximation: words in f-strings count,
        and after ``adopt`` or ``retyped`` the words of the text before the edit)."""
        if self._words is None:
            self._words = words_in(self.chunk.text)
        return self._words

    def refers_to_any(self, names: set[str]) -> bool:
        """Whether the statement's code uses one of ``names``: the words first (cheap), then, when
        one of those matches, the names of its tree (once per tree: an f-string's text does not count).

        The name a top-level ``def`` or ``class`` binds is not a use: a second ``def main()`` (two
        scripts in one file) does not read the first one."""
        if self.words.isdisjoint(names):
            return False
        if self.module is None:
            return True
        used = self.memo.get("names")
        if used is None:
            bound = {id(statement.name) for statement in self.module.body if isinstance(statement, (cst.FunctionDef, cst.ClassDef))}
            used = self.memo["names"] = frozenset(
                node.value for node in walk(self.module) if isinstance(node, cst.Name) and id(node) not in bound
            )
        return not used.isdisjoint(names)

    @property
    def start_line(self) -> int:
        return self.chunk.start_line

    @property
    def body(self) -> tuple[cst.CSTNode, ...]:
        return tuple(self.module.body) if self.module is not None else ()

    def positions(self) -> NodeRanges:
        if self._positions is None:
            assert self.module is not None
            self._positions, self._starts = all_positions(self.module, self.tree_text())
        return self._positions

    def statement_starts(self) -> NodeLines:
        """Each statement's first line (chunk-relative, 1-based), its leading comments and blank lines included."""
        if self._starts is None:
            self.positions()
        return self._starts  # type: ignore[return-value]

    def spliced(self, piece: Chunk) -> ParsedChunk | None:
        """This statement after an edit of its text (``piece``), re-parsing only the innermost
        statement that holds the edit (see splicing.py); None when that cannot be done exactly,
        and the caller parses ``piece`` whole.

        The positions of this chunk are handed over to the new one: this one may not be used after.
        """
        if self.module is None or (self.syntax_error is not None and self.broken is None):
            return None
        tree_text = self.tree_text()
        broken = blanked = problem = None
        try:
            tree = _splice_text(self, tree_text, piece.text)
        except cst.ParserSyntaxError:
            # the edit broke a statement: splice the text with its broken lines blanked, as a fresh parse would
            # a tree of blanked lines was checked to compile when it was made
            recovered = localised(piece.text, compiles=tree_text if self.broken is not None else None, error=self._error_kept(piece))
            if recovered is None:
                return None
            blanked, first, last, problem = recovered
            broken = (first, last)
            if blanked == tree_text:  # typing on a line that stays broken: the tree is the same
                return self._same_tree(piece, broken, blanked, problem)
            try:
                tree = _splice_text(self, tree_text, blanked)
            except cst.ParserSyntaxError:
                return None
        except (TooDeeplyNested, RecursionError, MemoryError, ValueError):
            return None
        if tree is None or (broken is None and _rejected_literal(piece, tree.region) is not None):
            return None  # a string Python rejects: the whole statement is TL000, as a fresh parse says
        result = ParsedChunk.__new__(ParsedChunk)
        result.chunk = piece
        result.index = self.index
        result.module = tree.module
        result.broken, result._tree_text = broken, blanked
        result.syntax_error = _problem(piece, problem) if problem is not None else None  # set with broken
        result.origin = self.origin
        result._positions, result._starts = tree.positions, tree.starts
        result._words = None
        # facts memoised per node stay valid for the nodes both trees share; per-tree facts do not
        result.memo = {key: tree.still_in_tree(kept) for key, kept in self.memo.items() if isinstance(key, NodeMemo) and kept}
        result.revision = self.revision
        self._positions = self._starts = None
        return result

    def adopt(self, edited: ParsedChunk, words: frozenset[str]) -> None:
        """Become ``edited``, this statement after an edit (``spliced``), so that what names this
        object (the flows of the methods an edit of another method left alone, their events and
        values) names the edited statement. ``revision`` tells it apart from what it was; ``words``
        holds at least the words of its new text."""
        for name in ParsedChunk.__slots__:
            setattr(self, name, getattr(edited, name))
        self.revision += 1
        self._words = words

    def retyped(self, edited: ParsedChunk) -> None:
        """Take the text of ``edited``, this statement after a key typed on a line that stays broken
        (``spliced`` gave it this tree, ``_same_tree``): the tree, its positions and every fact read
        from it are this one's, so what names this object (flows, rule results, their line reads)
        stays true. The words are this text's: a superset of the tree's names, all ``words`` is for."""
        assert edited.module is self.module and edited.tree_text() == self.tree_text()
        self.chunk, self.broken, self.syntax_error = edited.chunk, edited.broken, edited.syntax_error

    def _error_kept(self, piece: Chunk) -> SyntaxError | None:
        """Python's error for ``piece``, this statement after a key, when it is this text's error
        for a string left unterminated and the key typed inside the string (``unterminated_string_kept``):
        the error a compile would give (what ``_problem`` reads of it), without the compile."""
        problem = self.syntax_error
        if self.broken is None or problem is None or problem.message != f"syntax error: {chunking.UNTERMINATED_STRING.format(problem.line)}":
            return None
        line = problem.line - self.chunk.start_line
        if not chunking.unterminated_string_kept(self.chunk.text, line, problem.column, piece.text):
            return None
        return SyntaxError(chunking.UNTERMINATED_STRING.format(line), ("<statement>", line, problem.column, None))

    def _same_tree(self, piece: Chunk, broken: tuple[int, int], blanked: str, problem: SyntaxError) -> ParsedChunk:
        """This statement's tree, for a new text whose broken lines blank to the same text."""
        result = ParsedChunk.__new__(ParsedChunk)
        result.chunk, result.index, result.module, result.origin = piece, self.index, self.module, self.origin
        result.revision = self.revision
        result.broken, result._tree_text = broken, blanked
        result.syntax_error = _problem(piece, problem)
        result._positions, result._starts, result._words = self._positions, self._starts, None
        result.memo = self.memo  # facts of the tree, which has not changed
        return result

    def range_of(self, node: cst.CSTNode, within: cst.CSTNode | None = None) -> tuple[int, int, int, int]:
        """(line, column, end_line, end_column), 1-based, in module coordinates. ``within``: a node
        holding ``node`` (the call of an argument): if the text tells where it is (``_text_span``), the
        positions of its code alone are generated, not the whole statement's (``spans_inside``)."""
        offset = self.chunk.start_line
        inside = self._spans_inside(within) if within is not None and self._positions is None else None
        line, column, end_line, end_column = (inside.get(node) if inside else None) or self._span(node)
        note_position(self, line + offset, end_line + offset)
        return line + offset, column + 1, end_line + offset, end_column + 1

    def _span(self, node: cst.CSTNode) -> tuple[int, int, int, int]:
        """The node's chunk-relative (line, column, end_line, end_column) as LibCST's positions
        give it: read off the text where it can be (``_text_span``), or placed inside the small
        statement that holds it (``_spans_inside``: a `DataLoader(...)` written twice, each in its
        own assignment), else from the positions of the whole statement, which are then kept (half
        a second for a 3,700-line class, against a walk of a tenth of that to find the holder)."""
        span = self._text_span(node) if self._positions is None else None
        if span is None and self._positions is None and self.module is not None:
            placed = self.memo.setdefault("spans inside holders", {})  # the walk to the holder: once per node
            if id(node) not in placed:
                holder = _small_statement_holding(self.module, node)
                inside = self._spans_inside(holder) if holder is not None and holder is not node else None
                placed[id(node)] = inside.get(node) if inside else None
            span = placed[id(node)]
        if span is None:
            code_range = self.positions()[node]
            span = (code_range.start.line, code_range.start.column, code_range.end.line, code_range.end.column)
        return span

    def _spans_inside(self, within: cst.CSTNode) -> dict[cst.CSTNode, tuple[int, int, int, int]] | None:
        spans = self.memo.setdefault("spans inside", {})
        if id(within) not in spans:
            outer = self._text_span(within)
            assert self.module is not None
            spans[id(within)] = spans_inside(self.tree_text(), outer, within, self.code_for(within), self.module) if outer else None
        return spans[id(within)]

    def _text_span(self, node: cst.CSTNode) -> tuple[int, int, int, int] | None:
        """The node's (line, column, end_line, end_column), chunk-relative as LibCST's positions are
        (lines from 1, columns from 0), read off the statement's text without generating the
        positions of all of it (a rule that quotes one call of a 1,000-line ``main()``): an
        expression not in parentheses, or a small statement without a semicolon, whose code occurs
        once in the text is at that occurrence, since LibCST's code of such a node is exactly its
        text and its position that text's span. None for any other node."""
        spans: dict[int, tuple[int, int, int, int] | None] = self.memo.setdefault("text spans", {})
        key = id(node)
        if key not in spans:
            spans[key] = unique_span(self.tree_text(), self.code_for(node)) if _spelled_as_its_text(node) else None
        return spans[key]

    def start_lines(self, nodes: list[cst.CSTNode]) -> list[int]:
        """First lines of some nodes, in module coordinates, without keeping every node's position.

        For callers that need a few lines of many statements (the editor's VRAM anchors): the
        positions of a whole statement cost more memory than its tree, so unless a rule already
        needed them they are computed, read and dropped; the lines asked for are remembered.
        """
        known: dict[int, int] = self.memo.setdefault("relative_lines", {})
        missing = [node for node in nodes if id(node) not in known]
        positions = self._positions
        for node in missing:
            span = self._text_span(node) if positions is None else None
            if span is None:
                if positions is None:
                    assert self.module is not None, "lines are asked of a statement that parsed"
                    positions = all_positions(self.module, self.tree_text())[0]
                known[id(node)] = positions[node].start.line
            else:
                known[id(node)] = span[0]
        lines = [known[id(node)] + self.chunk.start_line for node in nodes]
        if lines:
            note_position(self, min(lines), max(lines))
        return lines

    def line_of(self, node: cst.CSTNode) -> int:
        line = self._span(node)[0] + self.chunk.start_line
        note_position(self, line, line)
        return line

    def node_memo(self, name: str) -> dict:
        """Facts memoised per node of this tree under ``name``; an edit's splice hands them on to
        the new tree for every node both trees share (``memo`` holds facts of the whole tree)."""
        return self.memo.setdefault(NodeMemo(name), {})

    def facts_by_statement(self, name: str, fact_of: Callable[[cst.CSTNode], Iterable[T]]) -> list[T]:
        """What ``fact_of`` gives for each node of the tree, in ``walk``'s order, kept with the tree under
        ``name`` and per statement (a node memo): after an edit, only the statements on the edit's path
        are read again, not the whole of a long class or ``main()``. ``fact_of`` must depend on the
        node's subtree alone."""
        found = self.memo.get(name)
        if found is None:
            found = [] if self.module is None else facts_by_statement(
                self.module, self.node_memo(name), fact_of, self.node_memo("statement levels"))
            self.memo[name] = found
        return found

    def facts_under(self, name: str, root: cst.CSTNode, fact_of: Callable[[cst.CSTNode], Iterable[T]]) -> list[T]:
        """``facts_by_statement`` for the nodes under ``root`` (a statement of this tree: a loop, a
        function), each statement's part kept under ``name``: after an edit inside a training loop,
        the loop is a new node, but of its statements only those on the edit's path are read again."""
        return facts_by_statement(root, self.node_memo(name), fact_of, self.node_memo("statement levels"))

    def code_for(self, node: cst.CSTNode) -> str:
        """The node's source text; each node's is generated once for as long as the tree lives (the
        flow walk and the rules ask for the same call's text again and again)."""
        assert self.module is not None
        texts = self.node_memo("texts")
        text = texts.get(node)
        if text is None:
            text = texts[node] = self.module.code_for_node(node)
        return text


def _small_statement_holding(root: cst.CSTNode, node: cst.CSTNode) -> cst.CSTNode | None:
    """The innermost small statement (an assignment, an expression, a ``del``...) under ``root`` that
    holds ``node`` or is it; None when none does (a ``for`` loop's iterable, a decorator)."""
    stack: list[tuple[cst.CSTNode, cst.CSTNode | None]] = [(root, None)]
    while stack:
        current, holder = stack.pop()
        if isinstance(current, cst.BaseSmallStatement):
            holder = current
        if current is node:
            return holder
        stack.extend((child, holder) for child in children(current))
    return None


# The fields ``ParsedChunk._parse`` sets: an UnparsedChunk has none of them until one is read.
_PARSED_FIELDS = frozenset({"module", "syntax_error", "broken", "_tree_text"})
# Held while an UnparsedChunk is parsed, and while a module summary parses the definitions a lookup
# needs (summary.py): two threads reading the same imported file parse each statement once.
DEFERRED_PARSE_LOCK = threading.RLock()


class UnparsedChunk(ParsedChunk):
    """A top-level ``def`` or ``class`` of an imported file, parsed when its tree is first asked for.

    A check of a recipe that imports ``from pkg.modules import Decoder`` needs ``Decoder`` and what
    it reaches, not the other forty definitions of ``pkg/modules.py``: in a pool of workers, each
    parsed every module its files imported whole (torchtune: 76,000 lines a run besides the
    103,000 checked). The parse's fields are missing until then; reading one (``__getattr__`` is
    asked only for a field that is not set) parses the statement and sets them all, so afterwards
    the chunk is read as any other.
    """

    __slots__ = ("defined_name",)

    def __init__(self, chunk: Chunk, index: int, defined_name: str) -> None:
        self._unparsed(chunk, index)
        self.defined_name = defined_name  # what ``definition_name`` read off its text

    def __getattr__(self, name: str):
        if name not in _PARSED_FIELDS:
            raise AttributeError(name)
        with DEFERRED_PARSE_LOCK:
            if not self.parsed:  # else another thread parsed it while this one waited
                self._parse()
        return object.__getattribute__(self, name)

    @property
    def parsed(self) -> bool:
        try:
            object.__getattribute__(self, "_tree_text")  # the last field _parse sets
        except AttributeError:
            return False
        return True


# A top-level definition whose name its text shows: after leading blank and comment lines, and
# decorators of one line each whose call (if any) holds only names, numbers, dots, commas and `=`,
# ``def NAME``, ``async def NAME`` or ``class NAME`` at column 0. A decorator with brackets or
# strings in its arguments could hide such a line inside them, so its statement is not read this way.
_DEFINITION = re.compile(
    r"""(?:[ \t\f]*(?:\#[^\n]*)?\n)*
    (?:@[\w.]+(?:\([\w., =]*\))?[ \t]*(?:\#[^\n]*)?\n(?:[ \t\f]*(?:\#[^\n]*)?\n)*)*
    (?:(?:async[ \t]+)?def|class)[ \t]+([^\W\d]\w*)[ \t]*[(:]""",
    re.X,
)


def words_in(text: str) -> frozenset[str]:
    """Every identifier-like word of a text outside comments and plain strings (see ``_WORD``)."""
    return frozenset(word for word in _WORD.findall(text) if word)


def definition_name(text: str) -> str | None:
    """The name a top-level statement's text defines when it is a ``def`` or ``class`` (see
    ``_DEFINITION``); None for any other statement, and for one this cannot tell."""
    found = _DEFINITION.match(text)
    return found.group(1) if found is not None else None


def _spelled_as_its_text(node: cst.CSTNode) -> bool:
    """Whether LibCST's position of ``node`` is the span of its code: not so for a node in
    parentheses (its position leaves them out), one with a trailing comma or semicolon (its code
    has it), or a compound statement (its code is generated unindented)."""
    if isinstance(node, cst.BaseExpression):
        return not getattr(node, "lpar", ()) and getattr(node, "comma", cst.MaybeSentinel.DEFAULT) is cst.MaybeSentinel.DEFAULT
    if isinstance(node, cst.BaseSmallStatement):
        return node.semicolon is cst.MaybeSentinel.DEFAULT
    return False


def _splice_text(chunk: ParsedChunk, old_text: str, new_text: str):
    """splice() for the difference between the tree's text and a new text of the chunk."""
    start = common_prefix(old_text, new_text)
    suffix = common_suffix(old_text, new_text, min(len(old_text), len(new_text)) - start)
    return splice(chunk, old_text, new_text, start, len(old_text) - suffix, len(new_text) - suffix, parse_module)


def localised(text: str, compiles: str | None = None, error: SyntaxError | None = None) -> tuple[str, int, int, SyntaxError] | None:
    """The text of a statement (a top-level chunk) with the lines of one broken statement inside it
    replaced, when that makes it compile: (text, first line, last line, Python's error), lines 1-based.

    The broken lines are where Python reports the error: that line alone, else the logical line
    holding it (brackets and strings followed across lines). The first of them becomes ``pass`` (or
    ``if 1:`` when the lines after are indented deeper: the header of a block being typed), the
    others empty lines, so every other line keeps its number and text. A function of the text
    alone, so a fresh analysis and an edit-by-edit one blank the same lines. ``compiles`` is a text
    known to compile (the blanked text of the statement before a key typed on its broken line): a
    candidate equal to it is not compiled again. ``error``: Python's error for ``text``, when the
    caller knows it without compiling (``ParsedChunk.spliced``).
    """
    problem = error
    if problem is None:
        try:
            check_syntax(text)
            return None  # Python accepts it: LibCST refused something else, nothing to localise
        except SyntaxError as raised:
            # kept past this frame: without its traceback and the LibCST error it was raised while
            # handling, which would make a reference cycle through the frames (garbage only the
            # cyclic collector frees, and the server runs it only when the user pauses)
            problem = raised.with_traceback(None)
            problem.__context__ = None
        except (ValueError, RecursionError, MemoryError):
            return None
    line = problem.lineno
    lines = text.split("\n")
    if line is None or not 1 < line <= len(lines):
        return None  # the top-level statement's own first line: nothing of it to keep
    for first, last in _broken_line_candidates(text, line):
        if first <= 1:
            continue
        # the placeholder is indented like the broken line, else like the lines around it (a line
        # whose indentation was being edited)
        for indent in dict.fromkeys((_indent(lines[first - 1]), *(_indent(near) for near in _neighbours(lines, first, last)))):
            blanked = _blank(lines, first, last, indent)
            if blanked == compiles:
                return blanked, first, last, problem
            try:
                check_syntax(blanked)
            except (SyntaxError, ValueError, RecursionError, MemoryError):
                continue
            return blanked, first, last, problem
    return None


def _broken_line_candidates(text: str, line: int) -> Iterator[tuple[int, int]]:
    """The line Python names, then the logical line holding it: found only when the line alone
    does not compile blanked (it scans the whole statement, 3 ms in a 1,000-line ``main()``)."""
    yield line, line
    yield _logical_line(text, line)


def _indent(line: str) -> str:
    return line[: len(line) - len(line.lstrip(" \t"))]


def _neighbours(lines: list[str], first: int, last: int) -> list[str]:
    """The nearest non-blank lines before and after lines first..last (1-based)."""
    before = next((text for text in reversed(lines[: first - 1]) if text.strip()), None)
    after = next((text for text in lines[last:] if text.strip()), None)
    return [text for text in (before, after) if text is not None]


def _blank(lines: list[str], first: int, last: int, indent: str) -> str:
    """``lines`` with lines first..last (1-based) replaced by one placeholder statement, indented by
    ``indent``, and empty lines."""
    following = next((text for text in lines[last:] if text.strip()), "")
    deeper = len(following) - len(following.lstrip(" \t")) > len(indent)
    replaced = [indent + ("if 1:" if deeper else "pass"), *([""] * (last - first))]
    return "\n".join([*lines[: first - 1], *replaced, *lines[last:]])


def _logical_line(text: str, line: int) -> tuple[int, int]:
    """The first and last line of the logical line holding ``line`` (brackets and strings followed)."""
    starts = statement_starts(text)
    line_starts = [0]
    position = text.find("\n")
    while position >= 0:
        line_starts.append(position + 1)
        position = text.find("\n", position + 1)
    logical = sorted({bisect.bisect_right(line_starts, offset) for offset in starts})
    index = bisect.bisect_right(logical, line) - 1
    first = logical[index] if index >= 0 else 1
    last = (logical[index + 1] - 1) if index + 1 < len(logical) else len(line_starts)
    return first, max(first, last)


_LINE_IN_MESSAGE = re.compile(r"\b(line )(\d+)")


def _problem(chunk: Chunk, error: SyntaxError) -> SyntaxProblem:
    """Python's error for the statement compiled alone, in file lines (its message's "on line 3" too)."""
    message = _LINE_IN_MESSAGE.sub(lambda match: f"{match.group(1)}{int(match.group(2)) + chunk.start_line}", error.msg)
    return SyntaxProblem(
        chunk.start_line + (error.lineno or 1), max(error.offset or 1, 1), f"syntax error: {message}", from_python=True,
    )


def _python_syntax_error(chunk: Chunk) -> SyntaxProblem | None:
    """Python's own account of the error: it points at the unclosed bracket, not the end of input.

    The statement is compiled at its place in the file (below as many empty lines as precede it),
    so that the lines Python names in its message ("detected at line 12") are the file's."""
    try:
        check_syntax("\n" * chunk.start_line + chunk.text)
    except SyntaxError as error:
        line = error.lineno or chunk.start_line + 1
        return SyntaxProblem(line, max(error.offset or 1, 1), f"syntax error: {error.msg}", from_python=True)
    except (RecursionError, MemoryError):  # Python's parser gives up too: the file cannot run
        return SyntaxProblem(
            _first_code_line(chunk), 1, "syntax error: this statement nests too deeply for Python's parser",
            from_python=True,
        )
    except ValueError:
        return None
    return None


def _rejected_literal(chunk: Chunk, changed: str | None = None) -> SyntaxProblem | None:
    """Python's error for a string literal it cannot evaluate and LibCST parsed anyway (a ``\\N{...}``
    name it does not know, a short ``\\u``, ``\\U`` or ``\\x`` escape, a bytes literal with non-ASCII
    text); the analysis evaluates literals, which would raise. Only a statement that may hold one
    is compiled. ``changed``: the only text of the statement that may hold a new literal (the lines a
    splice parsed again, in a statement whose analysed text held none that Python rejects), so
    that a key in a 1,000-line ``main()`` with a bytes literal and non-ASCII text compiles nothing."""
    text = chunk.text if changed is None else changed
    if not _RISKY_ESCAPE.search(text) and (text.isascii() or not _BYTES_PREFIX.search(text)):
        return None
    problem = _python_syntax_error(chunk)
    if problem is not None and problem.message.removeprefix("syntax error: ").startswith(_LITERAL_ERRORS):
        return problem
    return None


def _first_code_line(chunk: Chunk) -> int:
    """The 1-based file line where the statement begins, below the comments and blank lines it carries."""
    for index, line in enumerate(chunk.text.split("\n")):
        stripped = line.strip()
        if stripped and not stripped.startswith("#"):
            return chunk.start_line + index + 1
    return chunk.start_line + 1


def _describe(error: cst.ParserSyntaxError) -> str:
    message = error.message.strip().rstrip(".")
    return f"syntax error: {message}" if message else "syntax error"
