"""Re-parse only the innermost statement an edit touched, and splice it into the kept tree.

Real training scripts put the whole run in one 1,000–2,000-line ``main()``: re-parsing that
top-level statement on every keystroke costs 50 ms of parsing and as much again for positions.
Here, an edit inside a function re-parses the innermost statement whose lines hold it (a line of
the training loop, or the ``if`` around it when the edit touches its header; a line and the
next one after Enter), in the same
indentation context as in the file: the statement's lines are parsed under a few ``if 1:``
lines indented like its enclosing blocks, so LibCST sees exactly the whitespace it would see in
the whole file. The new statements replace the old ones in their block and the blocks and
statements around it are rebuilt (``with_changes``), sharing every other node with the old tree.

Positions are kept rather than recomputed: the new statements' positions come from generating
their code with the enclosing blocks' indentation (which is checked to reproduce the edited text
exactly, else nothing is spliced), statements after them move by the lines the edit added or
removed (a move recorded once and applied to a position when it is read, ``NodeRanges``), and the
blocks around them end where their new last statement ends.

A statement that no longer parses raises LibCST's error: the caller then blanks the broken lines
(parsing.localised, the same whatever the edit history) and splices that text instead.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, NamedTuple

import libcst as cst
from libcst._position import CodePosition, CodeRange
from libcst.metadata.position_provider import PositionProvidingCodegenState

from .chunking import blank_or_comment
from .tree import blocks_of, walk

if TYPE_CHECKING:
    from .parsing import ParsedChunk

# A statement this many lines long is re-parsed whole rather than searched for a smaller part.
_COMPOUND_STATEMENTS = (cst.BaseCompoundStatement,)
# Moves kept pending before they are applied to every position at once: reading a position applies
# the moves recorded since it was last read, so a long run of Enters costs each read this many steps at most.
_PENDING_MOVES = 32
_ABSENT = object()


class _MovedByLines:
    """Per node, a value that an edit moves by whole lines when it starts after the edit's last line.

    Enter in a 1,000-line ``main()`` moves every later node: rewriting each position was 15 ms of a
    58 ms key. A move is recorded instead (``move``) and applied to a value when it is read, which
    is then stored moved; every ``_PENDING_MOVES`` moves all values are brought up to date at once.
    """

    __slots__ = ("_values", "_applied", "_moves")

    def __init__(self, values: dict) -> None:
        self._values = values
        self._applied: dict[cst.CSTNode, int] = {}  # moves already in the stored value (absent: none)
        self._moves: list[tuple[int, int]] = []  # (line, delta): values starting after line moved by delta

    def _line(self, value) -> int:
        raise NotImplementedError

    def _shifted(self, value, delta: int):
        raise NotImplementedError

    def _caught_up(self, value, applied: int):
        for after, delta in self._moves[applied:]:
            if self._line(value) > after:
                value = self._shifted(value, delta)
        return value

    def __getitem__(self, node: cst.CSTNode):
        value = self._values[node]
        if not self._moves:
            return value
        applied = self._applied.get(node, 0)
        if applied == len(self._moves):
            return value
        value = self._values[node] = self._caught_up(value, applied)
        self._applied[node] = len(self._moves)
        return value

    def get(self, node: cst.CSTNode):
        return self[node] if node in self._values else None

    def pop(self, node: cst.CSTNode):
        value = self._values.pop(node, _ABSENT)
        applied = self._applied.pop(node, 0)
        return None if value is _ABSENT else self._caught_up(value, applied)

    def __setitem__(self, node: cst.CSTNode, value) -> None:
        self._values[node] = value
        if self._moves:
            self._applied[node] = len(self._moves)

    def update(self, values: dict) -> None:
        self._values.update(values)
        if self._moves:
            self._applied.update(dict.fromkeys(values, len(self._moves)))

    def __len__(self) -> int:
        return len(self._values)

    def move(self, after: int, delta: int) -> None:
        """Values starting after line ``after`` (in the coordinates of now) move by ``delta`` lines."""
        self._moves.append((after, delta))
        if len(self._moves) >= _PENDING_MOVES:
            applied = self._applied
            self._values = {node: self._caught_up(value, applied.get(node, 0)) for node, value in self._values.items()}
            self._applied, self._moves = {}, []


class NodeRanges(_MovedByLines):
    """Each node's range in its statement (LibCST's positions)."""

    __slots__ = ()

    def _line(self, value: CodeRange) -> int:
        return value.start.line

    def _shifted(self, value: CodeRange, delta: int) -> CodeRange:
        return CodeRange(CodePosition(value.start.line + delta, value.start.column), CodePosition(value.end.line + delta, value.end.column))


class NodeLines(_MovedByLines):
    """Each statement's first line, its leading comments and blank lines included."""

    __slots__ = ()

    def _line(self, value: int) -> int:
        return value

    def _shifted(self, value: int, delta: int) -> int:
        return value + delta


@dataclasses.dataclass
class Located:
    """The innermost statements holding an edit (one, or a run of one block's statements), and
    the path of nodes from the chunk's module to their block."""

    statements: tuple[cst.BaseStatement, ...]
    path: list[cst.CSTNode]  # module ... parent block, not including the statements
    block: cst.IndentedBlock  # the block whose body holds the statements
    indents: list[str]  # each enclosing block's own indentation, outermost first
    first_line: int  # the first statement's first line, its leading comments and blank lines included
    last_line: int  # the last statement's last line


def locate(chunk: ParsedChunk, first: int, last: int) -> Located | None:
    """The innermost statement inside a function or class body whose lines hold lines first..last
    (1-based, chunk-relative), or the run of one block's statements from the one holding ``first``
    to the one holding ``last`` (Enter leaves a blank line that belongs to the next statement: the
    two are re-parsed, not the block around them); None when the edit touches a top-level
    statement's own lines."""
    module = chunk.module
    positions, starts = chunk.positions(), chunk.statement_starts()
    found: Located | None = None
    if module is None or len(module.body) != 1 or not isinstance(module.body[0], _COMPOUND_STATEMENTS):
        return None
    node: cst.CSTNode = module.body[0]
    path: list[cst.CSTNode] = [module, node]
    indents: list[str] = []
    while True:
        inner = None
        for between, block in blocks_of(node):
            held = _run_holding(block, first, last, positions, starts)
            if held is not None:
                inner = (between, block, held)
                break
        if inner is None:
            return found
        between, block, held = inner
        if held is _POSITION_MISSING:
            return None
        block_path = [*path, *between, block]
        block_indents = [*indents, block.indent if block.indent is not None else module.default_indent]
        found = Located(held.statements, block_path, block, block_indents, held.first_line, held.last_line)
        if len(held.statements) != 1 or not isinstance(held.statements[0], _COMPOUND_STATEMENTS):
            return found
        statement = held.statements[0]
        node, path, indents = statement, [*block_path, statement], block_indents


class _Run(NamedTuple):
    """Consecutive statements of one block, from the first one's first line to the last one's last."""

    statements: tuple[cst.BaseStatement, ...]
    first_line: int
    last_line: int


_POSITION_MISSING = _Run((), 0, 0)  # a statement without a position: nothing can be spliced


def _run_holding(
    block: cst.IndentedBlock, first: int, last: int, positions: NodeRanges, starts: NodeLines,
) -> _Run | None:
    """The statements of ``block`` from the one whose lines hold ``first`` to the one holding
    ``last``; None when no statement of it holds both ends."""
    body = block.body
    for index, statement in enumerate(body):
        start, span = starts.get(statement), positions.get(statement)
        if start is None or span is None:
            return _POSITION_MISSING
        if first < start:
            return None
        if first > span.end.line:
            continue
        for stop in range(index, len(body)):
            stop_span = positions.get(body[stop])
            if stop_span is None or starts.get(body[stop]) is None:
                return _POSITION_MISSING
            if last <= stop_span.end.line:
                return _Run(tuple(body[index:stop + 1]), start, stop_span.end.line)
        return None
    return None


def _replace_children(parent: cst.CSTNode, old: tuple[cst.CSTNode, ...], new: cst.CSTNode | list[cst.CSTNode]) -> cst.CSTNode:
    """``parent`` with one child, or a run of a block's statements, replaced (by several statements,
    inside a block's body)."""
    for field in dataclasses.fields(parent):
        value = getattr(parent, field.name)
        if len(old) == 1 and value is old[0] and not isinstance(new, list):
            return parent.with_changes(**{field.name: new})
        if isinstance(value, (list, tuple)):
            index = next((index for index, item in enumerate(value) if item is old[0]), None)
            if index is None:
                continue
            assert all(item is kept for item, kept in zip(value[index:index + len(old)], old, strict=True)), "a run of siblings"
            replaced = [*value[:index], *(new if isinstance(new, list) else [new]), *value[index + len(old):]]
            return parent.with_changes(**{field.name: tuple(replaced)})
    raise ValueError("not a child")  # the path was built from this tree: cannot happen


class _RecordingState(PositionProvidingCodegenState):
    """Code generation that records positions, and where each statement starts with its leading lines."""

    __slots__ = ("statement_starts",)

    def before_codegen(self, node: cst.CSTNode) -> None:
        super().before_codegen(node)
        if isinstance(node, cst.BaseStatement):
            self.statement_starts[node] = self.line


class _Recorder:
    """Stands in for the position provider during code generation (LibCST writes ``_computed``)."""

    def __init__(self) -> None:
        self._computed: dict[cst.CSTNode, CodeRange] = {}


def generate_positions(
    nodes: Sequence[cst.CSTNode], default_indent: str, default_newline: str, indents: list[str], first_line: int,
) -> tuple[str, dict[cst.CSTNode, CodeRange], dict[cst.CSTNode, int]]:
    """The code of ``nodes`` generated under blocks indented by ``indents``, starting at line
    ``first_line``, with every node's position and every statement's first line."""
    recorder = _Recorder()
    state = _RecordingState(
        default_indent=default_indent, default_newline=default_newline, provider=recorder,  # type: ignore[arg-type]
        indent_tokens=list(indents), line=first_line,
    )
    state.statement_starts = {}
    for node in nodes:
        node._codegen(state)
    return "".join(state.tokens), recorder._computed, state.statement_starts


def all_positions(module: cst.Module, text: str) -> tuple[NodeRanges, NodeLines]:
    """Positions of every node of a module parsed from ``text`` and first lines of its statements,
    from one code generation, counted in ``text`` (``_as_written``)."""
    code, positions, starts = generate_positions([module], module.default_indent, module.default_newline, [], 1)
    if code != text:
        lines = _as_written(code, text)
        if lines is not None:
            positions = {node: _range_as_written(lines, code_range) for node, code_range in positions.items()}
            starts = {node: lines[line - 1][0] for node, line in starts.items()}
    return NodeRanges(positions), NodeLines(starts)


def unique_span(text: str, code: str) -> tuple[int, int, int, int] | None:
    """Where ``code`` occurs in ``text`` if it occurs exactly once: (line, column, end_line,
    end_column), lines from 1, columns from 0.

    A node's code spanning lines is generated without the indentation of the blocks around it (a
    call inside a method, one argument a line: LibCST adds the block's indentation to such lines
    only when it prints the whole statement), so its later lines are looked for with any run of
    spaces and tabs before them. The node's own text always matches; a single match is the node."""
    if not code:
        return None
    if "\n" in code:
        lines = code.split("\n")
        pattern = re.compile(re.escape(lines[0]) + "".join("\n[ \t]*" + re.escape(line) for line in lines[1:]))
        found = pattern.search(text)
        if found is None or pattern.search(text, found.start() + 1) is not None:
            return None
        at, end = found.span()
    else:
        at = text.find(code)
        if at < 0 or text.find(code, at + 1) >= 0:
            return None
        end = at + len(code)
    line = text.count("\n", 0, at) + 1
    return line, at - (text.rfind("\n", 0, at) + 1), line + code.count("\n"), end - (text.rfind("\n", 0, end) + 1)


def spans_inside(
    text: str, outer: tuple[int, int, int, int], container: cst.CSTNode, code: str, module: cst.Module,
) -> dict[cst.CSTNode, tuple[int, int, int, int]] | None:
    """The span of every node inside ``container``, a node whose code ``code`` is at ``outer`` in
    ``text`` (``unique_span``), as the positions of the whole statement give it (lines from 1,
    columns from 0), from the positions of ``container``'s code alone. Its later lines are
    generated with the indentation of the blocks around it, which a node's code leaves out (read
    off the text: what its lines have before their code), so that they are printed as the whole
    statement prints them; None unless what is printed is the text."""
    code_lines, text_lines = code.split("\n"), text.split("\n")[outer[0] - 1 : outer[2]]
    written = [text_lines[0][outer[1] :], *text_lines[1:-1], text_lines[-1][: outer[3]]] if len(text_lines) > 1 else [code]
    indents = {line[: len(line) - len(printed)] for line, printed in zip(written[1:], code_lines[1:])} - {""}
    if len(indents) > 1:
        return None
    generated, positions, _ = generate_positions([container], module.default_indent, module.default_newline, [*indents], 1)
    if generated.split("\n") != written:
        return None
    first = outer[0] - 1
    return {
        node: (first + at.start.line, at.start.column + (outer[1] if at.start.line == 1 else 0),
               first + at.end.line, at.end.column + (outer[1] if at.end.line == 1 else 0))
        for node, at in positions.items()
    }


def _as_written(code: str, text: str) -> list[tuple[int, int, int]] | None:
    """Per line of the code LibCST prints for a tree of ``text``: the line of ``text`` it stands
    for, the width of its leading whitespace, and what to add to a column past it; None when the
    two differ otherwise than LibCST makes them differ.

    LibCST's positions count the code it prints, which is not always the text it parsed, though
    Python reads both alike: it leaves out a line holding only a backslash before a statement (all
    later lines then one line short), and prints each line of a block with the block's indentation,
    so a form feed in the leading whitespace of one line of a block (``\\fdef`` between two
    functions) is left out there, and that of the block's first line is added to the others."""
    written, printed = text.split("\n"), code.split("\n")
    lines: list[tuple[int, int, int]] = []
    index = 0
    for line in printed:
        printed_indent = len(line) - len(line.lstrip(" \t\f"))
        while index < len(written) and written[index].lstrip(" \t\f") != line[printed_indent:]:
            if written[index].strip(" \t\f") != "\\":
                return None
            index += 1
        if index == len(written):
            return None
        written_indent = len(written[index]) - len(written[index].lstrip(" \t\f"))
        lines.append((index + 1, printed_indent, written_indent - printed_indent))
        index += 1
    return lines


def _range_as_written(lines: list[tuple[int, int, int]], code_range: CodeRange) -> CodeRange:
    return CodeRange(_position_as_written(lines, code_range.start), _position_as_written(lines, code_range.end))


def _position_as_written(lines: list[tuple[int, int, int]], position: CodePosition) -> CodePosition:
    line, printed_indent, shift = lines[position.line - 1]
    return CodePosition(line, position.column + shift if position.column >= printed_indent else position.column)


class SplicedTree:
    """A chunk's tree after an edit: the new module and its maintained positions."""

    __slots__ = ("module", "positions", "starts", "removed", "region")

    def __init__(self, module, positions, starts, removed, region: str) -> None:
        self.module = module
        self.positions = positions
        self.starts = starts
        self.removed = removed  # nodes no longer in the tree (their memoised facts must go)
        # the new text's lines that were parsed again: every difference from the old text lies in them
        self.region = region

    def still_in_tree(self, memo: dict) -> dict:
        """The entries of a per-node memo of the tree before the edit whose node this tree still holds.
        An edit removes the nodes of one statement or so: the memo (a node's text for every node a
        rule quoted, each statement's facts) is copied and those taken out, not read entry by entry."""
        removed = self.removed
        if len(removed) > len(memo):
            return {node: value for node, value in memo.items() if node not in removed}
        kept = dict(memo)
        for node in removed:
            kept.pop(node, None)
        return kept


def splice(chunk: ParsedChunk, old_text: str, new_text: str, start: int, old_end: int, new_end: int, parse) -> SplicedTree | None:
    """The tree of ``new_text``, which is the text of the chunk's tree ``old_text`` with
    ``[start, old_end)`` replaced by ``new_text[start:new_end]``, re-parsing one statement; None
    when that cannot be done exactly. ``parse`` is the guarded ``parse_module``; a statement that
    does not parse raises LibCST's error.
    """
    # lines are counted (C speed) and the new text's line starts found from the edit's line, step by
    # step: a list of every line's start, twice per key, was 0.5 ms of a key in a 1,000-line main()
    first = old_text.count("\n", 0, start) + 1
    # the line holding the first character after the replaced text too: text inserted at the start
    # of a line is not part of the line before it
    last = old_text.count("\n", 0, min(max(start, old_end), len(old_text) - 1)) + 1 if old_text else first
    old_line_count = old_text.count("\n") + 1
    delta = new_text.count("\n", start, new_end) - old_text.count("\n", start, old_end)
    edit_line, edit_line_start = first, new_text.rfind("\n", 0, start) + 1  # the texts agree up to start
    module = chunk.module
    if module is None:
        return None  # nothing was parsed: nothing to splice into
    for _ in range(3):
        located = locate(chunk, first, last)
        if located is None:
            return None
        region_start = _line_start(new_text, located.first_line, edit_line, edit_line_start)
        end_line = located.last_line + _footer_lines_after(located.statements[-1], chunk.positions()) + delta
        after_region = _line_start(new_text, end_line + 1, edit_line, edit_line_start)
        if region_start is None:
            return None
        region_end = len(new_text) if after_region is None else after_region
        region = new_text[region_start:region_end]
        if region_end < len(new_text) and not region.endswith("\n"):
            return None
        if not region_start <= start or new_end > region_end:
            return None  # the region must hold all the new text, or the tree would not be the text's
        owner = _owner_of_leading_lines(region, located, module.default_indent)
        if owner is not None:  # re-parse that statement too (Enter at the end of a block's last line)
            first = chunk.statement_starts()[owner]
            continue
        statements = parse_in_context(region, located.indents, parse) if _holds_code(region) else None
        if statements is not None:
            break
        if located.last_line >= old_line_count:
            return None
        # blank lines at the end of the region (Enter, then nothing typed yet; a line whose text
        # was deleted) are the next statement's leading lines: re-parse the two (the statement
        # holding both, when the next one is not in the same block)
        last = located.last_line + 1
    else:
        return None
    generated, positions, starts = generate_positions(
        statements, module.default_indent, module.default_newline, located.indents, located.first_line,
    )
    if generated != region:
        return None  # LibCST would not give this tree for the whole text: parse the chunk instead
    return _spliced_tree(chunk, located, statements, positions, starts, delta, region)


def _footer_lines_after(statement: cst.BaseStatement, positions: NodeRanges) -> int:
    """The blank and comment lines after ``statement``'s last line that it owns: the footers of its
    last block, of that block's last statement's last block, and so on (LibCST gives a block the
    lines after its last statement that are indented as deep as it). Re-parsed without them, the
    statement would lose them from the tree."""
    lines = 0
    while isinstance(statement, cst.BaseCompoundStatement):
        blocks = [block for _, block in blocks_of(statement)]
        if not blocks:
            break
        last = max(blocks, key=lambda block: (positions[block].start.line, positions[block].start.column))
        lines += len(last.footer)
        if not last.body:
            break
        statement = last.body[-1]
    return lines


def _owner_of_leading_lines(region: str, located: Located, default_indent: str) -> cst.BaseStatement | None:
    """The statement just before the located ones when ``region`` begins with blank or comment lines
    indented at least as deep as one of its blocks: LibCST puts the lines after a block's last
    statement that are indented that deep in the block's footer, so parsed alone they would be the
    wrong statement's leading lines. A tab in such a line's indentation counts as deep (its width is
    the tokenizer's business). None when nothing above owns them."""
    body = located.block.body
    index = next(index for index, statement in enumerate(body) if statement is located.statements[0])
    blocks = [block for _, block in blocks_of(body[index - 1])] if index else []
    if not blocks:
        return None
    outer = sum(len(indent) for indent in located.indents)
    depth = min(outer + len(block.indent if block.indent is not None else default_indent) for block in blocks)
    for line in region.split("\n"):
        if not blank_or_comment(line):
            return None
        indentation = line if not line.strip() else line[: len(line) - len(line.lstrip())]
        if "\t" in indentation or len(indentation) >= depth:
            return body[index - 1]
    return None


def _holds_code(region: str) -> bool:
    """Whether some line of ``region`` is neither blank nor a comment: lines of only those belong
    to the statement after them and do not parse alone."""
    return not all(blank_or_comment(line) for line in region.split("\n"))


def _wrapper(indents: list[str]) -> str:
    """``if 1:`` lines that open blocks indented like ``indents``."""
    return "".join(f"{''.join(indents[:depth])}if 1:\n" for depth in range(len(indents)))


def parse_in_context(region: str, indents: list[str], parse) -> list[cst.BaseStatement] | None:
    """The statements of ``region`` parsed under ``if 1:`` lines indented like their blocks."""
    tree = parse(_wrapper(indents) + region)
    node: cst.Module | cst.If = tree
    if tree.header or tree.footer:
        return None
    for depth in range(len(indents)):
        body = node.body if isinstance(node, cst.Module) else node.body.body
        only = body[0] if len(body) == 1 else None
        if not isinstance(only, cst.If) or only.orelse is not None:
            return None
        node = only
        block = node.body
        if not isinstance(block, cst.IndentedBlock) or (block.indent if block.indent is not None else tree.default_indent) != indents[depth]:
            return None
        if depth < len(indents) - 1 and block.footer:
            return None
    assert isinstance(node, cst.If), "a statement in a block has at least one indent"
    block = node.body
    assert isinstance(block, cst.IndentedBlock), "the loop checked each block"
    if block.footer or not block.body:
        return None  # trailing lines belong to what follows: a bigger statement re-parses them right
    return list(block.body)


def _line_start(text: str, line: int, known_line: int, known_start: int) -> int | None:
    """Where 1-based ``line`` of ``text`` starts (None past its last line), stepping from
    ``known_start``, where line ``known_line`` starts: as many steps as lines between the two."""
    offset = known_start
    for _ in range(known_line - line):
        offset = text.rfind("\n", 0, offset - 1) + 1
    for _ in range(line - known_line):
        found = text.find("\n", offset)
        if found < 0:
            return None
        offset = found + 1
    return offset


def _spliced_tree(
    chunk: ParsedChunk, located: Located, statements, new_positions, new_starts, delta: int, region: str,
) -> SplicedTree:
    olds = located.statements
    positions, starts = chunk.positions(), chunk.statement_starts()
    old_range = CodeRange(positions[olds[0]].start, positions[olds[-1]].end)
    removed = {node for old in olds for node in walk(old)}
    for node in removed:
        positions.pop(node)
        starts.pop(node)
    # rebuild the path from the statement's block up to the module, child by child
    new_first, new_last = new_positions[statements[0]], new_positions[statements[-1]]
    replacement: cst.CSTNode | list[cst.CSTNode] = list(statements)
    children: tuple[cst.CSTNode, ...] = olds
    rebuilt: dict[cst.CSTNode, cst.CSTNode] = {}
    for parent in reversed(located.path):
        new_parent = _replace_children(parent, children, replacement)
        rebuilt[parent] = new_parent
        children, replacement = (parent,), new_parent
    old_end = old_range.end
    # the rebuilt blocks' positions, in the new text's coordinates: the later lines' move is not theirs
    # (a block whose first statement now starts after the old last line, Enter after its header, moved twice)
    rebuilt_positions: dict[cst.CSTNode, CodeRange] = {}
    rebuilt_starts: dict[cst.CSTNode, int] = {}
    for old_node, new_node in rebuilt.items():
        removed.add(old_node)
        span = positions.pop(old_node)
        if span is not None:
            start = new_first.start if span.start == old_range.start else span.start
            if span.end == old_end:
                end = new_last.end
            elif (span.end.line, span.end.column) > (old_end.line, old_end.column):
                end = CodePosition(span.end.line + delta, span.end.column)
            else:
                end = span.end
            rebuilt_positions[new_node] = CodeRange(start, end)
        line = starts.pop(old_node)
        if line is not None:
            rebuilt_starts[new_node] = line  # an enclosing statement starts before the edit: not moved
    if delta:
        positions.move(old_end.line, delta)
        starts.move(old_end.line, delta)
    positions.update(rebuilt_positions)
    starts.update(rebuilt_starts)
    positions.update(new_positions)
    starts.update(new_starts)
    new_module = rebuilt[located.path[0]]
    return SplicedTree(new_module, positions, starts, removed, region)

