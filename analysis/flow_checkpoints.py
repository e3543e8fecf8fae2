"""Where a function's walk can go on from after an edit inside its body (issue 31): the walk's state
before each statement of the body (``Checkpoint``, kept in ``ScopeAnalysis.checkpoints`` while the
function is being edited) and the rewind to one of them (``rewind``), after which
``ScopeAnalysis.resumed`` walks the edited body on from there.

Inside the body statement last edited, the state before each statement of its loop and ``with``
bodies is kept too (``ScopeAnalysis.inner_checkpoints``, by path: ``(4, 2, 0)`` is the first
statement of the body of the third statement of the body of the fifth statement of the function's
body), so that a key typed in a long training loop walks on from the statement it changed
(``inner_path``, ``walk_on_inside``). A walk goes through a loop once, in order, as through any
other block: what the loop's statements before the edit did stays as it was."""

from __future__ import annotations

from itertools import islice
from typing import TYPE_CHECKING

import libcst as cst

from .closures import LocalFunctionInfo
from .edit_reuse import same_but
from .summary import asked_so_far
from .values import UNKNOWN

if TYPE_CHECKING:
    from .events import Context
    from .flow import ScopeAnalysis
    from .summary import FunctionInfo


class Checkpoint:
    """A function's walk before one statement of its body (``ScopeAnalysis.checkpoints``): copies of
    what later statements change in place, and how long each list that they add to was."""

    __slots__ = (
        "context", "env", "binding_loop", "dotted_heads", "local_imports", "local_functions", "walked",
        "events", "loops", "branch_tests", "returns", "memo", "reads",
    )

    def __init__(self, scope: ScopeAnalysis, context: Context) -> None:
        self.context = context
        self.env, self.binding_loop, self.dotted_heads = dict(scope.env), dict(scope.binding_loop), frozenset(scope._dotted_heads)
        self.local_imports, self.local_functions = dict(scope.local_imports), dict(scope.local_functions)
        # the functions defined in it whose flow was walked by then (each is walked once, when first asked
        # for; a flow kept from before an edit, not asked for again yet, is not: ``rewind``)
        self.walked = frozenset(
            inner for inner in scope.local_functions.values() if inner._analysis is not None and not inner.pending
        )
        self.events, self.loops, self.branch_tests = len(scope.events), len(scope.loops), len(scope.branch_tests)
        self.returns, self.memo, self.reads = len(scope._returns), len(scope._memo), asked_so_far()


# The statements whose body a walk can go on inside: their body is walked once, with the context
# they were entered with; `if` and `try` merge or branch their blocks' environments.
DESCENDED = (cst.For, cst.While, cst.With)


def walk_body(scope: ScopeAnalysis, body, start: int, context: Context) -> None:
    """``_walk_block`` over a function's body from its statement ``start`` on, keeping the state
    before each statement (``checkpoints``), and inside the statement ``record_inside``. The functions
    defined after a rewound walk's point that it did not meet again are let go of at the end."""
    assert scope.checkpoints is not None and len(scope.checkpoints) == start
    for index in range(start, len(body)):
        statement = body[index]
        scope.checkpoints.append(Checkpoint(scope, context))
        scope._path = (index,) if index == scope.record_inside and type(statement) in DESCENDED else None
        scope._walk_statement(statement, context)
        scope._path = None
        if context.grad_off is None and scope._enters_no_grad(statement):
            context = context.without_grad(statement)
    for unmet in scope.defined_later.values():
        unmet.release()
    scope.defined_later = {}


def defined_function(scope: ScopeAnalysis, statement: cst.FunctionDef) -> FunctionInfo:
    """The function a ``def`` in a function's body defines. A walk going on from an edit (``rewind``) meets
    again the ``def`` statements after its point that the edit did not reach: each keeps the function
    and its flow, checked when it is first asked for again (``LocalFunctionInfo._still_holds``: what it
    read of this scope reads values alike), where a fresh walk would walk it."""
    kept = scope.defined_later.pop(id(statement), None)  # its node, alive while it is kept: no id reused
    if kept is not None:
        kept.pending = True
        return kept
    return LocalFunctionInfo(statement.name.value, statement, scope.chunk, scope)


def walk_recorded(scope: ScopeAnalysis, statements, context: Context, path: tuple[int, ...], start: int = 0) -> None:
    """``_walk_block`` over the block at ``path`` from its statement ``start`` on, keeping the state
    before each statement (``inner_checkpoints``) and, through ``_walk_inner``, inside the loops and
    ``with`` blocks it holds."""
    for index in range(start, len(statements)):
        statement = statements[index]
        here = (*path, index)
        scope.inner_checkpoints[here] = Checkpoint(scope, context)
        scope._path = here if type(statement) in DESCENDED else None
        scope._walk_statement(statement, context)
        if context.grad_off is None and scope._enters_no_grad(statement):
            context = context.without_grad(statement)
    scope._path = None  # an `else:` of the loop that holds this block is not recorded


def inner_path(
    scope: ScopeAnalysis, old: cst.CSTNode, new: cst.CSTNode, start: int,
) -> tuple[tuple[int, ...], dict[int, cst.CSTNode]]:
    """Where the walk of an edited body goes on from: the path of the first statement that differs,
    inside the loops and ``with`` blocks of the body statement ``start`` (``old``, ``new``) that only
    their bodies' statements from there on tell apart; and each of those statements' new node by the
    id of its old one, which the kept events and loops name (``retarget``). Just ``(start,)`` where
    the edit is not inside one, or the walk kept nothing inside it."""
    path: tuple[int, ...] = (start,)
    replaced: dict[int, cst.CSTNode] = {}
    if scope.record_inside != start:
        return path, replaced
    while (
        type(old) in DESCENDED and type(new) is type(old) and same_but(old, new, "body")
        and type(old.body) is cst.IndentedBlock and same_but(old.body, new.body, "body")  # type: ignore[attr-defined]
    ):
        old_block, new_block = old.body.body, new.body.body  # type: ignore[attr-defined]
        index = 0
        while index < min(len(old_block), len(new_block)) and old_block[index] is new_block[index]:
            index += 1
        checkpoint = scope.inner_checkpoints.get((*path, index))
        if checkpoint is None or index >= len(old_block) or index >= len(new_block):
            break  # nothing kept there (a statement added at the end of the block): from the block's statement
        if checkpoint.context.grad_off is not None and id(checkpoint.context.grad_off) in {id(old), *replaced}:
            break  # a `with torch.no_grad():` on the way: its context names the old node
        replaced[id(old)] = new
        path = (*path, index)
        old, new = old_block[index], new_block[index]
    return path, replaced


def retarget(scope: ScopeAnalysis, replaced: dict[int, cst.CSTNode]) -> None:
    """The kept loops and events that name a statement the edit rebuilt (a loop around it) name its
    new node; what a rule concluded about such a loop is asked again."""
    if not replaced:
        return
    for loop in scope.loops:
        if id(loop.node) in replaced:
            loop.node, loop._per_step = replaced[id(loop.node)], False
    for event in scope.events:
        if id(event.node) in replaced:
            event.node = replaced[id(event.node)]
        statement = getattr(event, "statement", None)
        if statement is not None and id(statement) in replaced:
            event.statement = replaced[id(statement)]  # type: ignore[attr-defined]


def walk_on_inside(scope: ScopeAnalysis, statement: cst.CSTNode, path: tuple[int, ...], context: Context) -> None:
    """After ``rewind`` to ``path`` inside the body statement ``statement``: walk the rest of each block
    that holds the edited statement, innermost first, and each loop's ``else:`` after its body, as the
    walk of the whole statement does. ``context``: the one ``statement`` was walked with."""
    holders = [statement]
    for index in path[1:-1]:
        holders.append(holders[-1].body.body[index])  # type: ignore[attr-defined]
    for depth in range(len(holders) - 1, -1, -1):
        holder = holders[depth]
        here = path[: depth + 2]  # the statement of this holder's body the walk goes on at or after
        first = here[-1] if depth == len(holders) - 1 else here[-1] + 1
        walk_recorded(scope, holder.body.body, scope.inner_checkpoints[here].context, here[:-1], first)  # type: ignore[attr-defined]
        orelse = getattr(holder, "orelse", None)
        if orelse is not None:
            outer = context if depth == 0 else scope.inner_checkpoints[path[: depth + 1]].context
            scope._walk_block(orelse.body.body, outer)


def rewind(scope: ScopeAnalysis, path: tuple[int, ...]) -> None:
    """Go back to the state before the statement at ``path`` of the function's body, to walk its edited
    body on from there (``resumed``): what the walk of the statements before it did stays as it
    was, which is what a walk of the edited body does (a loop is walked once, in order). The flows of functions
    defined in this one that were walked after that point are let go of: a closure reads the
    names of this scope as they are when it is first walked; those defined before that point and walked
    after it are kept, checked when they are first asked for again."""
    assert scope.checkpoints is not None
    start = path[0]
    point = scope.checkpoints[start] if len(path) == 1 else scope.inner_checkpoints[path]
    del scope.checkpoints[start + 1:]
    # what was kept inside the statement before the point: the state before the statements that hold it
    scope.inner_checkpoints = {at: kept for at, kept in scope.inner_checkpoints.items() if at[0] == start and at <= path}
    scope.record_inside = start
    for name, inner in scope.local_functions.items():
        if point.local_functions.get(name) is inner:
            continue
        if inner._analysis is not None and inner.resume is None:
            # defined after the point: kept for its `def`, if the walk meets the same node again (``defined_function``)
            scope.defined_later[id(inner.node)] = inner
        else:
            inner.release()
    for inner in point.local_functions.values():
        if inner not in point.walked:
            # walked later (first called after the point, or asked for once the walk was over): kept while
            # what it read of this scope and the flows it asked for are as before when it is first asked
            # for again (``LocalFunctionInfo._still_holds``), where a fresh walk would walk it
            inner.pending = inner._analysis is not None
    scope.env, scope.binding_loop, scope._dotted_heads = dict(point.env), dict(point.binding_loop), set(point.dotted_heads)
    scope.local_imports, scope.local_functions = dict(point.local_imports), dict(point.local_functions)
    del scope.events[point.events:]
    del scope.loops[point.loops:]
    del scope.branch_tests[point.branch_tests:]
    del scope._returns[point.returns:]
    scope._memo = dict(islice(scope._memo.items(), point.memo))
    scope._calls, scope._calls_counted = [], -1
    scope._written = []  # an `if` reads only what was written since it began
    scope.followed = {}
    scope.returned_with_graph = {}  # walks of the body as it was, with graph-carrying parameters
    scope.return_value = UNKNOWN
