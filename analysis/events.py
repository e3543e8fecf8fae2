"""What the dataflow walk records of a scope: its events (calls, stores into containers, assignments,
jumps) and the context each happens in (enclosing loops and conditions, whether grad is off).

The rules read these instead of walking the tree again; the walk itself is flow.py's.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, cast

import libcst as cst

from .names import dotted
from .values import ACCELERATOR, ENGINE, UNKNOWN, Value

if TYPE_CHECKING:
    from .flow import ScopeAnalysis
    from .parsing import ParsedChunk
    from .summary import FunctionInfo


class Loop:
    __slots__ = ("node", "parent", "iterable", "iterable_text", "targets", "_per_step")

    def __init__(self, node, parent: Loop | None, iterable: Value, iterable_text: str, targets: tuple[str, ...]):
        self.node = node
        self.parent = parent
        self.iterable = iterable
        self.iterable_text = iterable_text
        self.targets = targets
        self._per_step: str | None | bool = False  # patterns.repeats_per_step's answer, once asked

    def encloses(self, other: Loop | None) -> bool:
        while other is not None:
            if other is self:
                return True
            other = other.parent
        return False

    @property
    def is_while(self) -> bool:
        return isinstance(self.node, cst.While)


class Condition:
    __slots__ = ("node", "test", "branch", "loop")

    def __init__(self, node: cst.CSTNode, test: cst.BaseExpression | None, branch: str, loop: Loop | None) -> None:
        self.node = node
        self.test = test
        self.branch = branch  # "if", "else", "except", "case"
        self.loop = loop  # innermost loop around the condition itself


class Context:
    """Where an event happens: enclosing loops and conditions, and whether grad is off."""

    __slots__ = ("loops", "conditions", "grad_off", "accumulating")

    def __init__(self, loops=(), conditions=(), grad_off: cst.CSTNode | None = None, accumulating: bool = False):
        self.loops: tuple[Loop, ...] = loops
        self.conditions: tuple[Condition, ...] = conditions
        self.grad_off = grad_off  # the with/decorator node that disabled grad
        self.accumulating = accumulating  # inside accelerator.accumulate / no_sync

    @property
    def loop(self) -> Loop | None:
        return self.loops[-1] if self.loops else None

    def in_loop(self, loop: Loop) -> bool:
        return loop in self.loops

    def entering_loop(self, loop: Loop) -> Context:
        return Context(self.loops + (loop,), self.conditions, self.grad_off, self.accumulating)

    def under(self, condition: Condition) -> Context:
        return Context(self.loops, self.conditions + (condition,), self.grad_off, self.accumulating)

    def without_grad(self, node: cst.CSTNode) -> Context:
        return Context(self.loops, self.conditions, self.grad_off or node, self.accumulating)

    def with_accumulation(self) -> Context:
        return Context(self.loops, self.conditions, self.grad_off, True)

    def conditions_inside(self, loop: Loop | None) -> tuple[Condition, ...]:
        """Conditions entered after ``loop`` began (all of them when loop is None)."""
        if loop is None:
            return self.conditions
        return tuple(c for c in self.conditions if loop.encloses(c.loop))


class Event:
    __slots__ = ("node", "context", "scope")

    def __init__(self, node: cst.CSTNode, context: Context, scope: ScopeAnalysis) -> None:
        self.node = node
        self.context = context
        self.scope = scope

    @property
    def chunk(self) -> ParsedChunk:
        return self.scope.chunk


class CallEvent(Event):
    __slots__ = ("callee", "method", "receiver", "receiver_key", "args", "kwargs", "result", "function", "arg_nodes", "statement")
    node: cst.Call  # Event's slot, narrowed: the call

    def __init__(self, node: cst.Call, context, scope, *, callee, method, receiver, receiver_key, args, kwargs, function, arg_nodes):
        super().__init__(node, context, scope)
        # the small statement (or compound statement's header) whose evaluation ran this call
        self.statement: cst.CSTNode | None = scope._statement
        self.callee: str | None = callee  # canonical dotted name when the callee is not a value
        self.method: str | None = method  # attribute name for ``x.m(...)``
        self.receiver: Value | None = receiver
        self.receiver_key: str | None = receiver_key  # dotted text of the receiver, e.g. "self.model"
        self.args: list[Value] = args
        self.kwargs: dict[str, Value] = kwargs
        self.result: Value = UNKNOWN
        self.function: FunctionInfo | None = function  # a local function this call runs
        self.arg_nodes: list[cst.Arg] = arg_nodes

    def keyword(self, name: str) -> cst.Arg | None:
        for arg in self.arg_nodes:
            if arg.keyword is not None and arg.keyword.value == name:
                return arg
        return None

    def values_given(self, positional_parameters: Sequence[str]) -> dict[str, Value] | None:
        """What the call gives each parameter of the function it calls, by position then by keyword, from
        the function's ``positional_parameters``; None when ``*args`` or ``**kwargs`` hide it."""
        if any(arg.star for arg in self.arg_nodes):
            return None
        given = dict(zip(positional_parameters, self.args))
        given.update(self.kwargs)
        return given

    @property
    def has_star_kwargs(self) -> bool:
        return any(arg.star == "**" for arg in self.arg_nodes)

    @property
    def is_backward(self) -> bool:
        return self.method == "backward"


class StoreEvent(Event):
    """A value put into something that may outlive the current iteration."""

    __slots__ = ("kind", "container", "container_loop", "value", "value_node")

    def __init__(self, node, context, scope, *, kind, container, container_loop, value, value_node):
        super().__init__(node, context, scope)
        self.kind: str = kind  # append | extend | insert | augassign | accumulate | subscript
        self.container: str = container
        self.container_loop: Loop | None | str = container_loop  # loop where bound; "outer" if unbound here
        self.value: Value = value
        self.value_node: cst.BaseExpression = value_node

    def outlives(self, loop: Loop) -> bool:
        """Does the container survive from one iteration of ``loop`` to the next?"""
        if self.container_loop == "outer" or self.container_loop is None:
            return True
        return not loop.encloses(cast(Loop, self.container_loop))  # "outer" is its only string


class AssignEvent(Event):
    __slots__ = ("targets", "value", "value_node")

    def __init__(self, node, context, scope, *, targets, value, value_node):
        super().__init__(node, context, scope)
        self.targets: tuple[str, ...] = targets  # dotted keys: "x", "self.fc", "p.grad"
        self.value: Value = value
        self.value_node: cst.BaseExpression | None = value_node


class JumpEvent(Event):
    __slots__ = ("kind",)

    def __init__(self, node, context, scope, kind: str) -> None:
        super().__init__(node, context, scope)
        self.kind = kind  # continue | break | return | raise


def names_owner(name: str) -> bool:
    """An unknown receiver whose ``backward(loss)`` takes the loss: an accelerator, engine, fabric or trainer."""
    lowered = name.lower()
    return any(word in lowered for word in ("accelerator", "engine", "fabric", "trainer", "deepspeed"))


def backward_target(call: CallEvent) -> Value:
    """The value whose graph a backward call runs through."""
    if call.method != "backward":
        return UNKNOWN
    receiver = call.receiver or UNKNOWN
    if (ACCELERATOR in receiver.tags or ENGINE in receiver.tags) and call.args:
        return call.args[0]
    if call.args and not receiver.tags and call.receiver_key and "." not in call.receiver_key and receiver is UNKNOWN and names_owner(call.receiver_key):
        return call.args[0]
    return receiver


def is_backward(call: CallEvent) -> bool:
    if call.method == "backward":
        return True
    return call.callee in {"torch.autograd.backward", "torch.autograd.grad"}


def modules_looped_over(call: CallEvent) -> tuple[Loop, tuple[str, ...]] | None:
    """For a call on the target of an enclosing ``for`` loop over a literal of modules (``for net in (self.G, self.D):
    net.eval()``, ``for model, path in pairs:`` with ``pairs = [(self.G, "g.png")]`` and ``pairs.append((self.G_ema,
    ...))``): that loop and what each iteration binds the receiver to, as written (``self.G``, ``self.D``), so that a
    mode switch on the loop variable is read as one on each of them. None when the receiver is not such a target,
    or an element is not a plain or dotted name (then what the loop switches is not known here)."""
    receiver = call.receiver_key
    if receiver is None or "." in receiver:
        return None
    for loop in reversed(call.context.loops):
        node = loop.node
        if not isinstance(node, cst.For) or receiver not in loop.targets:
            continue
        target = node.target
        position = None
        if isinstance(target, (cst.Tuple, cst.List)):
            names = [element.value.value if isinstance(element.value, cst.Name) else None for element in target.elements]
            if receiver not in names:
                return None
            position = names.index(receiver)
        elements = _literal_elements(call, node.iter)
        if not elements:
            return None
        bound: list[str] = []
        for element in elements:
            if position is not None:
                if not isinstance(element, (cst.Tuple, cst.List)) or len(element.elements) <= position:
                    return None
                element = element.elements[position].value
            text = dotted(element)
            if text is None:
                return None
            bound.append(text)
        return loop, tuple(dict.fromkeys(bound))
    return None


def _literal_elements(call: CallEvent, iterable: cst.BaseExpression) -> list[cst.BaseExpression] | None:
    """The elements of a list or tuple literal iterated, written there or bound once to a name of the call's scope
    before it (with what that scope's ``name.append(x)`` calls add); None for anything else."""
    if isinstance(iterable, cst.Name):
        name = iterable.value
        binding = call.scope.last_binding(name, before=call)
        bindings = [event for event in call.scope.events if isinstance(event, AssignEvent) and name in event.targets]
        if binding is None or len(bindings) != 1:
            return None
        added = []
        for other in call.scope.calls():
            if other.receiver_key == name and other.method in {"extend", "insert", "__setitem__"}:
                return None  # grown by what the walk does not read element by element
            if other.receiver_key == name and other.method == "append" and len(other.arg_nodes) == 1:
                added.append(other.arg_nodes[0].value)
        found = _literal_elements(call, binding.value_node) if binding.value_node is not None and not isinstance(binding.value_node, cst.Name) else None
        return None if found is None else [*found, *added]
    if isinstance(iterable, (cst.List, cst.Tuple)) and not any(isinstance(element, cst.StarredElement) for element in iterable.elements):
        return [element.value for element in iterable.elements]
    return None

