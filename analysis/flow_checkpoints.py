"""Where a function's walk can go on from after an edit inside its body (issue 31): the walk's state
before each statement of the body (``Checkpoint``, kept in ``ScopeAnalysis.checkpoints`` while the
function is being edited) and the rewind to one of them (``rewind``), after which
``ScopeAnalysis.resumed`` walks the edited body on from there."""

from __future__ import annotations

from itertools import islice
from typing import TYPE_CHECKING

from .summary import FunctionInfo, asked_so_far
from .values import UNKNOWN

if TYPE_CHECKING:
    from .events import Context
    from .flow import ScopeAnalysis


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
        # the functions defined in it whose flow was walked by then (each is walked once, when first asked for)
        self.walked = frozenset(inner for inner in scope.local_functions.values() if inner._analysis is not None)
        self.events, self.loops, self.branch_tests = len(scope.events), len(scope.loops), len(scope.branch_tests)
        self.returns, self.memo, self.reads = len(scope._returns), len(scope._memo), asked_so_far()


def rewind(scope: ScopeAnalysis, start: int) -> None:
    """Go back to the state before statement ``start`` of the function's body, to walk its edited
    body on from there (``resumed``): what the walk of the statements before it did stays as it
    was, which is what a walk of the edited body does (a loop is walked once, in order, and an
    edit inside it changes the statement of the body that holds it). The flows of functions
    defined in this one that were walked after that point are let go of: a closure reads the
    names of this scope as they are when it is first walked."""
    assert scope.checkpoints is not None
    point = scope.checkpoints[start]
    del scope.checkpoints[start + 1:]
    for name, inner in scope.local_functions.items():
        if point.local_functions.get(name) is not inner:
            inner.release()
    for inner in point.local_functions.values():
        if inner not in point.walked:
            FunctionInfo.release(inner)  # its flow only: it is still defined in this scope, which it reads
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
    scope.return_value = UNKNOWN
