"""Questions several rules ask of a scope's events: where are the backward calls, what runs in a loop."""

from __future__ import annotations

import re
from typing import Iterator

import libcst as cst

from .flow import CallEvent, Event, Loop, ScopeAnalysis
from .values import ACCELERATOR, ENGINE, OPTIMIZER, SCALER, UNKNOWN, Value

MAX_CALL_DEPTH = 4
_LOGGING_WORDS = re.compile(r"log|print|freq|interval|every|verbose|debug|display|report|disp", re.I)


def backward_target(call: CallEvent) -> Value:
    """The value whose graph a backward call runs through."""
    if call.method != "backward":
        return UNKNOWN
    receiver = call.receiver or UNKNOWN
    if (ACCELERATOR in receiver.tags or ENGINE in receiver.tags) and call.args:
        return call.args[0]
    if call.args and not receiver.tags and call.receiver_key and "." not in call.receiver_key and receiver is UNKNOWN and _looks_like_owner(call.receiver_key):
        return call.args[0]
    return receiver


def _looks_like_owner(name: str) -> bool:
    lowered = name.lower()
    return any(word in lowered for word in ("accelerator", "engine", "fabric", "trainer", "deepspeed"))


def is_backward(call: CallEvent) -> bool:
    if call.method == "backward":
        return True
    return call.callee in {"torch.autograd.backward", "torch.autograd.grad"}


def is_optimizer_step(call: CallEvent) -> bool:
    """``optimizer.step()``, ``scaler.step(optimizer)``, ``engine.step()``, ``accelerator``-wrapped ones."""
    if call.method != "step":
        return False
    receiver = call.receiver or UNKNOWN
    if OPTIMIZER in receiver.tags or ENGINE in receiver.tags:
        return True
    if SCALER in receiver.tags and call.args:
        return True
    key = (call.receiver_key or "").lower()
    return "optim" in key or key in {"opt", "scaler", "engine", "model_engine"} or key.endswith(("_opt", ".opt"))


def events_in(scope: ScopeAnalysis, loop: Loop | None) -> Iterator[Event]:
    """Events in ``loop`` (or the whole scope when None), in program order."""
    for event in scope.events:
        if loop is None or loop in event.context.loops:
            yield event


def calls_in(scope: ScopeAnalysis, loop: Loop | None, *, depth: int = MAX_CALL_DEPTH, _seen=None) -> Iterator[CallEvent]:
    """Calls that run during ``loop``, following calls into local functions (their events come inline)."""
    seen = _seen if _seen is not None else {id(scope)}
    for event in events_in(scope, loop):
        if not isinstance(event, CallEvent):
            continue
        yield event
        if depth > 0 and event.function is not None:
            inner = event.function.analysis(scope.summary)
            if inner is not None and id(inner) not in seen:
                seen.add(id(inner))
                yield from calls_in(inner, None, depth=depth - 1, _seen=seen)


def ordered_calls(scope: ScopeAnalysis, loop: Loop | None, *, depth: int = MAX_CALL_DEPTH, _stack=()) -> Iterator[tuple[CallEvent, tuple[CallEvent, ...]]]:
    """Like calls_in, but each call comes with the chain of local calls that led to it (for evidence)."""
    for event in events_in(scope, loop):
        if not isinstance(event, CallEvent):
            continue
        yield event, _stack
        if depth > 0 and event.function is not None:
            inner = event.function.analysis(scope.summary)
            if inner is not None and all(call.function is not event.function for call in _stack):
                yield from ordered_calls(inner, None, depth=depth - 1, _stack=_stack + (event,))


def is_logging_condition(test: cst.BaseExpression | None, scope: ScopeAnalysis) -> bool:
    """``if step % log_every == 0``, ``if args.verbose``, ``if i % 100 == 0`` and the like."""
    if test is None:
        return False
    text = scope.chunk.code_for(test)
    return "%" in text or bool(_LOGGING_WORDS.search(text))


def mentions(scope: ScopeAnalysis, node: cst.CSTNode, name: str) -> bool:
    text = scope.chunk.code_for(node)
    return re.search(rf"(?<![\w.]){re.escape(name)}(?!\w)", text) is not None
