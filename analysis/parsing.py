"""Parse one top-level statement with LibCST and give positions only when asked.

LibCST's position metadata costs as much as parsing, so a chunk computes it the first time a
rule reports or cites one of its nodes, and keeps it for as long as the chunk lives (the
language server keeps unchanged chunks between edits).
"""

from __future__ import annotations

import ast
import re

import libcst as cst
from libcst.metadata import CodeRange, MetadataWrapper, PositionProvider

from .chunking import Chunk
from .dependencies import note_position

# Every identifier-like word, strings and comments included: a superset of the names a statement uses.
_WORD = re.compile(r"[^\W\d]\w*")


class SyntaxProblem:
    """Where and why a chunk failed to parse, in module coordinates (1-based)."""

    __slots__ = ("line", "column", "message")

    def __init__(self, line: int, column: int, message: str) -> None:
        self.line = line
        self.column = column
        self.message = message


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
            self.module = cst.parse_module(chunk.text)
        except cst.ParserSyntaxError as error:
            self.syntax_error = _python_syntax_error(chunk) or SyntaxProblem(
                chunk.start_line + error.raw_line, error.raw_column + 1, _describe(error)
            )
        except (RecursionError, MemoryError):
            self.syntax_error = SyntaxProblem(
                chunk.start_line + 1, 1, "statement is nested too deeply to analyse"
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
        moved.syntax_error = None if problem is None else SyntaxProblem(
            problem.line - self.chunk.start_line + chunk.start_line, problem.column, problem.message
        )
        return moved

    def relocate(self, chunk: Chunk) -> None:
        """The same statement, same index, moved by whole lines: positions are relative, so only the offset changes."""
        assert chunk.text == self.chunk.text
        problem = self.syntax_error
        if problem is not None:
            self.syntax_error = SyntaxProblem(problem.line - self.chunk.start_line + chunk.start_line, problem.column, problem.message)
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
        """The node's source text; each node's is generated once for as long as the tree lives (the
        flow walk and the rules ask for the same call's text again and again)."""
        assert self.module is not None
        texts: dict = self.memo.setdefault("texts", {})
        text = texts.get(node)
        if text is None:
            text = texts[node] = self.module.code_for_node(node)
        return text


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
    """Python's own account of the error: it points at the unclosed bracket, not the end of input."""
    try:
        compile(chunk.text, "<statement>", "exec", ast.PyCF_ONLY_AST)
    except SyntaxError as error:
        line = chunk.start_line + (error.lineno or 1)
        return SyntaxProblem(line, max(error.offset or 1, 1), f"syntax error: {error.msg}")
    except (ValueError, RecursionError, MemoryError):
        return None
    return None


def _describe(error: cst.ParserSyntaxError) -> str:
    message = error.message.strip().rstrip(".")
    return f"syntax error: {message}" if message else "syntax error"
