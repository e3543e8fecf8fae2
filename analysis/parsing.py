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

import ast
import re
import threading
import warnings

import libcst as cst
from libcst.metadata import CodeRange, MetadataWrapper, PositionProvider

from .chunking import Chunk
from .dependencies import note_position

# Every identifier-like word, strings and comments included: a superset of the names a statement uses.
_WORD = re.compile(r"[^\W\d]\w*")

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


def parse_module(text: str) -> cst.Module:
    """``libcst.parse_module``, guarded so that no text can take the process down (see the module's
    docstring). Raises TooDeeplyNested instead of parsing a text nesting deeper than ``MAX_NESTING``."""
    depth = nesting_estimate(text)
    if depth <= INLINE_NESTING:
        return cst.parse_module(text)
    if depth > MAX_NESTING:
        raise TooDeeplyNested(f"nests about {depth:,} levels deep (trainlint parses statements up to {MAX_NESTING} levels)")
    return _on_deep_stack(text, depth)


def _on_deep_stack(text: str, depth: int) -> cst.Module:
    outcome: list = []

    def parse() -> None:
        try:
            outcome.append(cst.parse_module(text))
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

    def moved_to(self, old: Chunk, new: Chunk) -> "SyntaxProblem":
        """The same problem for the same statement text at another line."""
        if self.from_python:
            again = _python_syntax_error(new)
            if again is not None:
                return again
        return SyntaxProblem(
            self.line - old.start_line + new.start_line, self.column, self.message,
            analysed=self.analysed, from_python=self.from_python,
        )


class ParsedChunk:
    __slots__ = ("chunk", "index", "module", "syntax_error", "memo", "origin", "_positions", "_words")

    def __init__(self, chunk: Chunk, index: int) -> None:
        self.chunk = chunk
        self.index = index
        self._positions: dict[cst.CSTNode, CodeRange] | None = None
        self._words: frozenset[str] | None = None
        self.origin: str | None = None  # the file, for statements of another workspace file
        # Facts derived from this statement's tree alone, kept for as long as the tree is.
        self.memo: dict = {}
        self.module: cst.Module | None = None
        self.syntax_error: SyntaxProblem | None = None
        try:
            self.module = parse_module(chunk.text)
            rejected = _rejected_literal(chunk)
            if rejected is not None:
                self.module, self.syntax_error = None, rejected
        except cst.ParserSyntaxError as error:
            self.syntax_error = _python_syntax_error(chunk) or SyntaxProblem(
                chunk.start_line + error.raw_line, error.raw_column + 1, _describe(error)
            )
        except TooDeeplyNested as error:
            self.syntax_error = _python_syntax_error(chunk) or SyntaxProblem(
                _first_code_line(chunk), 1, f"this statement {error}; it was not checked", analysed=False,
            )
        except (RecursionError, MemoryError):
            self.syntax_error = SyntaxProblem(
                _first_code_line(chunk), 1, "statement is nested too deeply to analyse; it was not checked", analysed=False
            )
        except Exception as error:  # LibCST raises plain exceptions for some invalid input
            self.syntax_error = SyntaxProblem(chunk.start_line + 1, 1, f"cannot parse: {error}")

    def moved(self, chunk: Chunk, index: int) -> "ParsedChunk":
        """The same statement at another place in an edited document: no re-parse, positions kept."""
        assert chunk.text == self.chunk.text
        moved = ParsedChunk.__new__(ParsedChunk)
        moved.chunk = chunk
        moved.index = index
        moved.module = self.module
        moved._positions = self._positions
        moved._words = self._words
        moved.memo = self.memo
        moved.origin = self.origin
        problem = self.syntax_error
        moved.syntax_error = None if problem is None else problem.moved_to(self.chunk, chunk)
        return moved

    def relocate(self, chunk: Chunk) -> None:
        """The same statement, same index, moved by whole lines: positions are relative, so only the offset changes."""
        assert chunk.text == self.chunk.text
        if self.syntax_error is not None:
            self.syntax_error = self.syntax_error.moved_to(self.chunk, chunk)
        self.chunk = chunk

    @property
    def words(self) -> frozenset[str]:
        """Every name this statement could refer to (an over-approximation: words in strings count)."""
        if self._words is None:
            self._words = frozenset(_WORD.findall(self.chunk.text))
        return self._words

    @property
    def start_line(self) -> int:
        return self.chunk.start_line

    @property
    def body(self) -> tuple[cst.CSTNode, ...]:
        return tuple(self.module.body) if self.module is not None else ()

    def positions(self) -> dict[cst.CSTNode, CodeRange]:
        if self._positions is None:
            assert self.module is not None
            self._positions = _positions_of(self.module)
        return self._positions

    def range_of(self, node: cst.CSTNode) -> tuple[int, int, int, int]:
        """(line, column, end_line, end_column), 1-based, in module coordinates."""
        note_position(self)
        code_range = self.positions()[node]
        offset = self.chunk.start_line
        return (
            code_range.start.line + offset,
            code_range.start.column + 1,
            code_range.end.line + offset,
            code_range.end.column + 1,
        )

    def start_lines(self, nodes: list[cst.CSTNode]) -> list[int]:
        """First lines of some nodes, in module coordinates, without keeping every node's position.

        For callers that need a few lines of many statements (the editor's VRAM anchors): the
        positions of a whole statement cost more memory than its tree, so unless a rule already
        needed them they are computed, read and dropped; the lines asked for are remembered.
        """
        note_position(self)
        known: dict[int, int] = self.memo.setdefault("relative_lines", {})
        missing = [node for node in nodes if id(node) not in known]
        if missing:
            positions = self._positions if self._positions is not None else _positions_of(self.module)
            for node in missing:
                known[id(node)] = positions[node].start.line
        return [known[id(node)] + self.chunk.start_line for node in nodes]

    def line_of(self, node: cst.CSTNode) -> int:
        note_position(self)
        return self.positions()[node].start.line + self.chunk.start_line

    def code_for(self, node: cst.CSTNode) -> str:
        assert self.module is not None
        return self.module.code_for_node(node)


def _positions_of(module: cst.Module) -> dict[cst.CSTNode, CodeRange]:
    """Positions of every node, from one code-generation pass.

    ``MetadataWrapper.resolve`` also runs a batched visit that rebuilds every node of the tree,
    even when no provider needs it; for PositionProvider that visit cost about 90% of the time
    (bench.py of nanoGPT: 3.1 of 3.2 profiled seconds). The provider's own pass is all we need.
    """
    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
    try:
        return dict(PositionProvider()._gen(wrapper))
    except AttributeError:  # a LibCST without the private entry point: take the slow, public road
        return dict(wrapper.resolve(PositionProvider))


def _python_syntax_error(chunk: Chunk) -> SyntaxProblem | None:
    """Python's own account of the error: it points at the unclosed bracket, not the end of input.

    The statement is compiled at its place in the file (below as many empty lines as precede it),
    so that the lines Python names in its message ("detected at line 12") are the file's."""
    try:
        with warnings.catch_warnings():  # the user's invalid escapes are not our output
            warnings.simplefilter("ignore")
            compile("\n" * chunk.start_line + chunk.text, "<statement>", "exec", ast.PyCF_ONLY_AST)
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


def _rejected_literal(chunk: Chunk) -> SyntaxProblem | None:
    """Python's error for a string literal it cannot evaluate and LibCST parsed anyway (a ``\\N{...}``
    name it does not know, a short ``\\u``, ``\\U`` or ``\\x`` escape, a bytes literal with non-ASCII
    text); the analysis evaluates literals, which would raise. Only a statement that may hold one
    is compiled."""
    text = chunk.text
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
