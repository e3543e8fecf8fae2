"""Walking LibCST trees quickly.

``CSTNode.children`` rebuilds the node through a visitor to find its children, which made tree
walks the largest cost of the rules that search subtrees. Reading the dataclass fields directly
gives the same nodes, but not in source order: use these walks only where order does not matter.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import warnings
from collections.abc import Callable, Iterable, Iterator
from typing import TypeVar

import libcst as cst

T = TypeVar("T")
_FIELDS: dict[type, tuple[str, ...]] = {}


def literal_value(node: cst.Integer | cst.Float | cst.Imaginary | cst.SimpleString):
    """The value of a literal (LibCST's ``evaluated_value``), without Python's warnings about the
    user's code: an invalid escape such as ``"\\s"`` warns while it is evaluated, and that is theirs
    to hear from their own linter, not ours to print.

    A plain string without escapes and a decimal integer are read directly; the rest through
    ``evaluate_literal``, not ``ast.literal_eval`` (which LibCST uses)."""
    if isinstance(node, cst.SimpleString) and node.prefix == "" and "\\" not in node.value:
        quote = node.quote
        return node.value[len(quote) : -len(quote)]
    if isinstance(node, cst.Integer) and node.value.isdigit() and (node.value == "0" or node.value[0] != "0"):
        return int(node.value)
    return evaluate_literal(node.value)


def string_value(node: cst.CSTNode | None) -> str | None:
    """The text a string literal holds (``"--lr"``, ``r"\\d+"``); None for anything else (bytes, an
    f-string, a name) and for a literal Python rejects (an unknown ``\\N{...}`` name)."""
    if not isinstance(node, cst.SimpleString):
        return None
    try:
        value = literal_value(node)
    except (ValueError, SyntaxError, MemoryError):
        return None
    return value if isinstance(value, str) else None


@functools.lru_cache(maxsize=4096)  # a script's literals are read again at every key; their values are immutable
def evaluate_literal(code: str):
    """What ``ast.literal_eval`` gives for the code of a literal (a number, a string or bytes, strings
    written one after another), raising what it raises (ValueError when the code is something else).

    ``ast.literal_eval`` defines its helpers as nested functions that call each other, so each call
    leaves a reference cycle for the cyclic collector, which the language server runs only when the
    user pauses: 1,600 objects for each fresh analysis of a 1,000-line diffusers script, read for its
    argparse options. Python's warnings about the code (an invalid escape) are not printed either."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expression = ast.parse(code.lstrip(" \t"), mode="eval").body
    if not isinstance(expression, ast.Constant):
        raise ValueError(f"not a literal: {code[:40]!r}")
    return expression.value


def children(node: cst.CSTNode) -> list[cst.CSTNode]:
    """The node's children (whitespace and comments included), in no particular order."""
    names = _FIELDS.get(type(node))
    if names is None:
        names = _FIELDS[type(node)] = tuple(field.name for field in dataclasses.fields(node))
    found: list[cst.CSTNode] = []
    for name in names:
        value = getattr(node, name)
        kind = _KINDS.get(type(value)) or _kind_of(type(value))
        if kind is _NODE:
            found.append(value)
        elif kind is _SEQUENCE:
            found.extend(item for item in value if (_KINDS.get(type(item)) or _kind_of(type(item))) is _NODE)
    return found


# What a field's value is, by its exact type: LibCST's node classes are ABCs, so each isinstance test
# that fails runs ABCMeta's check in Python (about a million of them in a fresh analysis of a
# 2,000-line script); a look-up by type answers the same.
_NODE, _SEQUENCE, _OTHER = "node", "sequence", "other"
_KINDS: dict[type, str] = {}


def _kind_of(kind: type) -> str:
    found = _NODE if issubclass(kind, cst.CSTNode) else _SEQUENCE if issubclass(kind, (list, tuple)) else _OTHER
    _KINDS[kind] = found
    return found


# What a per-statement memo is kept for (``ParsedChunk.facts_by_statement``): every statement.
STATEMENT_NODES = (cst.SimpleStatementLine, cst.BaseCompoundStatement)
_IS_STATEMENT: dict[type, bool] = {}


def is_statement(node: cst.CSTNode) -> bool:
    """``isinstance(node, STATEMENT_NODES)``, answered by the node's type."""
    found = _IS_STATEMENT.get(type(node))
    if found is None:
        found = _IS_STATEMENT[type(node)] = isinstance(node, STATEMENT_NODES)
    return found


def statement_level(statement: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """``statement`` and the nodes under it that are not inside a statement nested in it, in ``walk``'s
    order; a nested statement is given itself, not entered."""
    stack = [statement]
    while stack:
        current = stack.pop()
        yield current
        if current is statement or not is_statement(current):
            stack.extend(children(current))


def facts_by_statement(
    root: cst.CSTNode, memo: dict, fact_of: Callable[[cst.CSTNode], Iterable[T]], levels: dict | None = None,
) -> list[T]:
    """What ``fact_of`` gives for each node under ``root``, in ``walk``'s order; each nested statement's
    part is taken from ``memo`` (node -> its facts) or computed and kept there, and so is each part of a
    compound statement that is not a statement (a ``def``'s parameters, a loop's iterable, its block): a
    ``def`` on an edit's path is a new node at each key, its thirty annotated parameters are not. With
    ``levels`` (node -> its ``statement_level`` nodes, shared by the facts of every name) a statement's
    nodes are listed once for all the names asked of it, not walked again for each."""
    if isinstance(root, cst.BaseCompoundStatement):
        # ``walk``'s order: the node, then each child's nodes, the last child's first
        parts: list[T] = list(fact_of(root))
        for child in reversed(children(root)):
            kept = memo.get(child)
            if kept is None:
                kept = memo[child] = facts_by_statement(child, memo, fact_of, levels)
            parts.extend(kept)
        return parts
    found: list[T] = []
    nodes = statement_level(root) if levels is None else levels.get(root)
    if nodes is None:
        nodes = levels[root] = list(statement_level(root))  # type: ignore[index]
    for node in nodes:
        if node is not root and is_statement(node):
            kept = memo.get(node)
            if kept is None:
                kept = memo[node] = facts_by_statement(node, memo, fact_of, levels)
            found.extend(kept)
        else:
            found.extend(fact_of(node))
    return found


def walk(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """The node and everything under it, in no particular order."""
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        stack.extend(children(current))


# What holds statements: blocks, statements (a compound one holds blocks) and the clauses of compound ones.
_HOLDS_STATEMENTS = (
    cst.BaseSuite, cst.BaseStatement, cst.Else, cst.ExceptHandler, cst.ExceptStarHandler, cst.Finally, cst.MatchCase,
)


def in_source_order(node: cst.CSTNode) -> list[cst.CSTNode]:
    """The node and everything under it, in source order (LibCST's ``children``: slower than ``walk``, for
    where order matters)."""
    ordered: list[cst.CSTNode] = []
    stack = [node]
    while stack:
        current = stack.pop()
        ordered.append(current)
        stack.extend(reversed(current.children))
    return ordered


def small_statements(node: cst.CSTNode) -> Iterator[cst.BaseSmallStatement]:
    """Every simple statement (an assignment, a call, a ``return``...) in the blocks under ``node``,
    nested blocks and definitions included, in no particular order. Expressions are not entered:
    no statement can be inside one, and they hold most of a tree's nodes."""
    stack = [node]
    while stack:
        for child in children(stack.pop()):
            if isinstance(child, cst.BaseSmallStatement):
                yield child
            elif isinstance(child, _HOLDS_STATEMENTS):
                stack.append(child)


def small_statement_facts(node: cst.CSTNode, memo: dict, fact_of: Callable[[cst.BaseSmallStatement], Iterable[T]]) -> tuple[T, ...]:
    """What ``fact_of`` gives for each simple statement under ``node`` (those of ``small_statements``, in a fixed
    order), each compound statement's part kept in ``memo`` (node -> its facts): after an edit, only the compound
    statements on its path are read again, and no expression is entered."""
    found: list[T] = []
    for child in children(node):
        if isinstance(child, cst.BaseSmallStatement):
            found.extend(fact_of(child))
        elif isinstance(child, cst.BaseCompoundStatement):
            kept = memo.get(child)
            if kept is None:
                kept = memo[child] = small_statement_facts(child, memo, fact_of)
            found.extend(kept)
        elif isinstance(child, _HOLDS_STATEMENTS):
            found.extend(small_statement_facts(child, memo, fact_of))
    return tuple(found)


def blocks_of(statement: cst.CSTNode) -> list[tuple[list[cst.CSTNode], cst.IndentedBlock]]:
    """The indented blocks a statement owns directly (its body, ``else``, ``except``, ``finally``,
    ``elif`` chains, ``case``s), each with the nodes between the statement and the block."""
    found: list[tuple[list[cst.CSTNode], cst.IndentedBlock]] = []
    stack: list[tuple[list[cst.CSTNode], cst.CSTNode]] = [([], child) for child in children(statement)]
    while stack:
        between, child = stack.pop()
        if isinstance(child, cst.IndentedBlock):
            found.append((between, child))
        elif isinstance(child, (cst.Else, cst.ExceptHandler, cst.ExceptStarHandler, cst.Finally, cst.MatchCase, cst.If)):
            stack.extend(([*between, child], inner) for inner in children(child))
    return found
