"""Which branch of a local helper a call runs: the call hands the tested parameter a literal, or the caller set the
tested attribute of `self` to one before calling a method on `self`. A step helper that backwards only when its flag
says so (`if backward: loss.backward()`), called with the flag turned off, trains nothing there (TL102, TL205, TL206
read it alike)."""

from __future__ import annotations

import libcst as cst

from .events import AssignEvent, CallEvent, Condition, Event, JumpEvent
from .names import dotted
from .patterns import argument_passed
from .tree import literal_value


def branch_as_called(condition: Condition, call: CallEvent) -> bool | None:
    """Whether the call running a helper always takes (True) or never takes (False) the helper's branch
    ``condition`` of `if flag:` / `if not flag:` / `if mode == "train":`: the call hands the tested parameter a
    literal (`apply_model_and_loss(x, y, backward=False)`, `run_batch(batch, mode="eval")`) or leaves it at a
    literal default; or the helper is a method the caller runs on `self` and tests an attribute of `self` that the
    caller set to a literal before the call (`self.state = "valid"`, then `self._fit_batch(b)` under
    `if self.state != "train":`). None when the call does not decide it (a run-time value, a global)."""
    test = condition.test
    if call.function is None or test is None or condition.branch not in {"if", "else"}:
        return None
    negated = isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not)
    tested = test.expression if isinstance(test, cst.UnaryOperation) and negated else test
    compared: object = True  # `if flag:` holds when the flag is True
    if isinstance(tested, cst.Comparison) and len(tested.comparisons) == 1:
        target = tested.comparisons[0]
        if not isinstance(target.comparator, cst.SimpleString) or not isinstance(target.operator, (cst.Equal, cst.NotEqual)):
            return None
        negated = negated != isinstance(target.operator, cst.NotEqual)
        compared, tested = literal_value(target.comparator), tested.left
    given = _literal(_given_by_call(tested, call))
    if given is None or (compared is True) != isinstance(given, bool):
        return None
    holds = (given == compared) != negated
    return holds == (condition.branch == "if")


def _given_by_call(tested: cst.BaseExpression, call: CallEvent) -> cst.BaseExpression | None:
    """What ``call`` makes the helper's tested name or `self` attribute hold: the argument it hands the parameter (or
    the parameter's default), or the value the caller last set the attribute to before a call on `self`."""
    function = call.function
    assert function is not None, "asked of a call into a local function"
    if isinstance(tested, cst.Name):
        parameter = next((param for param in function.node.params.params if param.name.value == tested.value), None)
        if parameter is None or any(arg.star for arg in call.arg_nodes):
            return None  # a name the helper binds itself or a global; or what `*args` / `**kwargs` hand it
        handed = argument_passed(call, function, tested.value)
        return handed.value if handed is not None else parameter.default
    path = dotted(tested)
    if path is None or not path.startswith("self.") or call.receiver_key != "self":
        return None
    events = call.scope.events
    before = events[: events.index(call)] if call in events else []
    set_to = [event for event in before if isinstance(event, AssignEvent) and event.targets == (path,)]
    last = set_to[-1] if set_to else None
    if last is None or last.context.loops != call.context.loops[: len(last.context.loops)] or any(
        condition not in call.context.conditions for condition in last.context.conditions
    ) or any(isinstance(event, AssignEvent) and path in event.targets and event.context.loops for event in events[events.index(call):]):
        return None  # set on some paths only, or set again by a later pass of a loop around the call
    return last.value_node


def _literal(node: cst.BaseExpression | None) -> bool | str | None:
    """A literal `True`/`False` (`None` read as false) or a plain string."""
    if isinstance(node, cst.Name) and node.value in {"True", "False", "None"}:
        return node.value == "True"
    value = literal_value(node) if isinstance(node, cst.SimpleString) else None
    return value if isinstance(value, str) else None


def runs_as_called(event: Event, chain: tuple[CallEvent, ...]) -> bool:
    """Whether ``event``, reached through ``chain`` of calls into local functions, can run as those calls run
    them: not when it sits in a helper's branch that the call into that helper rules out with a literal
    (`loss.backward()` under `if backward:` of a helper called with `backward=False`), nor after a `return` of the
    helper that the call always takes (`if self.state != "train": return` while the caller set `"valid"`)."""
    links = (*chain[1:], event)
    return not any(
        any(branch_as_called(condition, caller) is False for condition in link.context.conditions)
        or _returned_before(link, caller)
        for link, caller in zip(links, chain)
    )


def _returned_before(event: Event, call: CallEvent) -> bool:
    """A `return` of the helper, outside its loops and before ``event``, that ``call`` always takes."""
    events = event.scope.events
    for other in events[: events.index(event)] if event in events else ():
        if isinstance(other, JumpEvent) and other.kind == "return" and not other.context.loops and all(
            branch_as_called(condition, call) is True for condition in other.context.conditions
        ):
            return True
    return False
