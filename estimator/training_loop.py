"""The training loop of a script: the loader it iterates and the autocast its forward runs under.

A script builds more than one loader and may enter more than one autocast: diffusers' DreamBooth
scripts sample class images through a loader of ``--sample_batch_size`` and generate validation
images under an autocast, before and between training steps. What the training step holds in
memory is set by the loader the loop with the backward iterates and by the autocast around that
loop's forward, whatever either is called. A loop trains when its own iterations run a backward
(in its body or in a local function called there); a loader or an autocast is the training one by
what the dataflow says it does, never by its name.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TypeVar

import libcst as cst

from trainlint.analysis.dependencies import kept_with_scope
from trainlint.analysis.module import ModuleAnalysis
from trainlint.analysis.tree import facts_by_statement, in_source_order
from trainlint.rules import (
    CallEvent,
    Loop,
    ParsedChunk,
    ScopeAnalysis,
    Tag,
    Value,
    is_backward,
    loops_running,
    ordered_events,
    walk,
)

_Node = TypeVar("_Node", bound=cst.CSTNode)
# Kept with each scope across keys elsewhere in the file (``kept_with_scope``).
_AUTOCASTS = "torch's autocast calls"
_PREPARED = "the optimizers an Accelerator prepares"
# Calls that hand their first argument's items through: `enumerate(loader)`, `tqdm(loader)`, `iter(loader)`.
_PASSES_ITEMS_THROUGH = frozenset({"enumerate", "tqdm", "iter", "zip", "islice", "trange", "track", "progress"})


@dataclass
class TrainingLoop:
    """What the script's training loops say: empty lists when it has none that can be read."""

    loaders: list[CallEvent] = field(default_factory=list)  # DataLoader constructions a training loop iterates
    other_loaders: set[int] = field(default_factory=set)  # id() of constructions only other loops iterate
    autocasts: list[CallEvent] = field(default_factory=list)  # autocast calls around a training forward
    other_autocasts: set[int] = field(default_factory=set)  # id() of autocast calls around no training forward
    # `del` statements that drop the model's output before the backward (`del pred` before `loss.backward()`), with
    # their scope: the loss then holds only its own tensors, not the logits beside them
    outputs_freed: list[tuple[cst.Del, ScopeAnalysis]] = field(default_factory=list)

    @property
    def found(self) -> bool:
        return bool(self.loaders or self.autocasts or self.other_loaders or self.other_autocasts)


def training_loop(module: ModuleAnalysis) -> TrainingLoop:
    """The loaders and autocasts of the script's training loops, and those that belong to other loops."""
    found = TrainingLoop()
    training: list[tuple[ScopeAnalysis, Loop]] = []
    for scope in module.all_scopes:
        training += [(scope, loop) for loop in loops_running(scope, is_backward)]
    if not training:
        return found
    trained_loops = {id(loop) for _, loop in training}
    for scope, loop in training:
        for loader in _loaders_iterated(module, scope, loop):
            if all(loader is not known for known in found.loaders):
                found.loaders.append(loader)
    trained = {id(loader.node) for loader in found.loaders}
    for scope in module.all_scopes:
        for loop in scope.loops:
            if id(loop) not in trained_loops:
                found.other_loaders |= {id(loader.node) for loader in _loaders_iterated(module, scope, loop)} - trained
    for scope, loop in training:
        found.outputs_freed += _outputs_deleted(scope, loop)
    steps = _training_nodes(training)
    for scope in module.all_scopes:
        autocasts = kept_with_scope(scope, _AUTOCASTS, lambda scope=scope: [event for event in scope.calls() if _is_autocast(event)])
        for call in autocasts:
            if _wraps_any(scope, call, steps):
                found.autocasts.append(call)
            else:
                found.other_autocasts.add(id(call.node))
    return found


def _is_forward(call: CallEvent) -> bool:
    return call.receiver is not None and Tag.MODEL in call.receiver.tags and call.method in (None, "forward")


def _outputs_deleted(scope: ScopeAnalysis, loop: Loop) -> list[tuple[cst.Del, ScopeAnalysis]]:
    """The ``del NAME`` statements of a training step that drop what its model's forward returned before the
    backward runs: the forward's result bound to NAME alone (``pred = model(x)``), the ``del`` after the forward in a
    block that holds the backward (or, in a helper the step calls, the ``return`` of the loss: torchtune's
    ``_loss_step``), and NAME read into no other name than the loss (``loss = loss_fn(pred, y)``, ``loss =
    outputs.loss``; ``logits = outputs.logits`` or ``history.append(pred)`` would keep them)."""
    found: list[tuple[cst.Del, ScopeAnalysis]] = []
    homes: dict[int, tuple[ScopeAnalysis, cst.CSTNode, list[CallEvent], list[CallEvent]]] = {}
    for event, chain in ordered_events(scope, loop):
        if not isinstance(event, CallEvent) or not (is_backward(event) or _is_forward(event)):
            continue
        home = loop.node if not chain else (event.scope.function.node if event.scope.function is not None else None)
        if home is None:
            continue
        _, _, forwards, backwards = homes.setdefault(id(home), (event.scope, home, [], []))
        (backwards if is_backward(event) else forwards).append(event)
    for event_scope, home, forwards, backwards in homes.values():
        deleted = {name for small in _nodes_under(event_scope.chunk, home, cst.Del) for name in _deleted_names(small.target)}
        if not deleted:
            continue
        order: dict[int, int] | None = None
        # where the loss goes next: its backward, or (a helper with none) the return that hands it to the caller
        sinks: list[cst.CSTNode] = [event.node for event in backwards]
        losses = {event.node.func.value.value for event in backwards
                  if isinstance(event.node.func, cst.Attribute) and isinstance(event.node.func.value, cst.Name)}
        if not backwards and home is not loop.node:
            sinks = [node for node in walk(home) if isinstance(node, cst.Return) and isinstance(node.value, cst.Name)]
            losses = {node.value.value for node in sinks}  # type: ignore[union-attr]
        for forward in forwards:
            statement = forward.statement
            if not (isinstance(statement, cst.Assign) and len(statement.targets) == 1
                    and isinstance(statement.targets[0].target, cst.Name) and _output_of(statement.value) is forward.node):
                continue
            name = statement.targets[0].target.value
            if name not in deleted or not _read_only_into(home, name, losses):
                continue
            if order is None:
                order = {id(node): index for index, node in enumerate(in_source_order(home))}
            for block in walk(home):
                if not isinstance(block, cst.IndentedBlock):
                    continue
                deletes = [small for line in block.body if isinstance(line, cst.SimpleStatementLine) for small in line.body
                           if isinstance(small, cst.Del) and name in _deleted_names(small.target)
                           and order.get(id(small), -1) > order.get(id(forward.node), len(order))]
                inside = {id(node) for node in walk(block)} if deletes else set()
                found += [(small, event_scope) for small in deletes
                          if any(id(sink) in inside and order[id(sink)] > order[id(small)] for sink in sinks)]
    return found


def _nodes_under(chunk: ParsedChunk, home: cst.CSTNode, kind: type[_Node]) -> list[_Node]:
    """The ``kind`` nodes under ``home`` (its ``del`` or ``with`` statements), read per statement and kept
    with the tree: after a key only the edited statement is read again, not the whole training loop
    (the script is read at every key where the editor has a target GPU, for TL601)."""
    return facts_by_statement(home, chunk.node_memo(f"{kind.__name__} nodes"),
                              lambda node: [node] if isinstance(node, kind) else [], chunk.node_memo("statement levels"))


def _output_of(value: cst.BaseExpression) -> cst.BaseExpression:
    """The call whose output an expression is, through attributes and subscripts (``model(x).logits``)."""
    while isinstance(value, (cst.Attribute, cst.Subscript)):
        value = value.value
    return value


def _deleted_names(target: cst.BaseDelTargetExpression) -> set[str]:
    if isinstance(target, cst.Name):
        return {target.value}
    if isinstance(target, cst.Tuple):
        return {element.value.value for element in target.elements if isinstance(element.value, cst.Name)}
    return set()


def _read_only_into(home: cst.CSTNode, name: str, losses: set[str]) -> bool:
    """Whether ``name`` is read in ``home`` only where an assignment binds one of ``losses`` or ``name`` itself (and
    nothing else: ``outputs = outputs.reshape(...)``) and in ``del``: read anywhere else (appended to a list, passed to
    a logger, bound to another name) it may be kept."""
    allowed: set[int] = set()
    for node in walk(home):
        if isinstance(node, cst.Assign):
            binds = {target.target.value for target in node.targets if isinstance(target.target, cst.Name)}
            if len(binds) == len(node.targets) and binds <= losses | {name}:
                allowed |= {id(inner) for inner in walk(node.value)}
            allowed |= {id(target.target) for target in node.targets}  # rebinding a name reads nothing
        elif isinstance(node, cst.Del):
            allowed |= {id(inner) for inner in walk(node.target)}
    return all(id(node) in allowed for node in walk(home) if isinstance(node, cst.Name) and node.value == name)


def _is_autocast(call: CallEvent) -> bool:
    """torch's autocast context (``torch.autocast``, ``torch.cuda.amp.autocast``); an Accelerator's
    ``accelerator.autocast()`` takes the Accelerator's own mixed precision instead."""
    if call.receiver is not None and Tag.ACCELERATOR in call.receiver.tags:
        return False
    name = call.callee or ""
    return (call.method or name.rsplit(".", 1)[-1]) == "autocast" and (name.startswith("torch") or name == "autocast")


def _training_nodes(training: list[tuple[ScopeAnalysis, Loop]]) -> set[int]:
    """id() of the syntax that makes up a training step: each training loop, and the backward and
    model forwards with gradients on that its iterations run (in helpers they call too)."""
    nodes: set[int] = set()
    for scope, loop in training:
        nodes.add(id(loop.node))
        for call, _ in ordered_events(scope, loop):
            if not isinstance(call, CallEvent):
                continue
            forward = call.receiver is not None and Tag.MODEL in call.receiver.tags and call.method in (None, "forward")
            if is_backward(call) or (forward and call.context.grad_off is None):
                nodes.add(id(call.node))
    return nodes


def _wraps_any(scope: ScopeAnalysis, call: CallEvent, nodes: set[int]) -> bool:
    """Whether the ``with`` statement that enters this autocast call (directly, or through the name it
    is bound to first: ``ctx = torch.autocast(...)``, ``with ctx:``) holds any of ``nodes``."""
    statement = call.statement
    if isinstance(statement, cst.With):
        blocks = [statement.body]
    elif isinstance(statement, cst.Assign) and len(statement.targets) == 1 and isinstance(statement.targets[0].target, cst.Name):
        name = statement.targets[0].target.value
        home = scope.function.node if scope.function is not None else scope.chunk.module
        withs = _nodes_under(scope.chunk, home, cst.With) if home is not None else []
        blocks = [node.body for node in withs
                  if any(isinstance(item.item, cst.Name) and item.item.value == name for item in node.items)]
    else:
        return False
    return any(id(node) in nodes for block in blocks for node in walk(block))


def _loaders_iterated(module: ModuleAnalysis, scope: ScopeAnalysis, loop: Loop) -> list[CallEvent]:
    """The DataLoader constructions a ``for`` loop iterates (through enumerate, tqdm, zip, an
    Accelerator's prepare, or a parameter every caller passes a loader for)."""
    if not isinstance(loop.node, cst.For):
        return []
    found = _loaders_of(loop.iterable)
    if found:
        return found
    return _loaders_in_expression(module, scope, loop.node.iter, depth=0)


def _loaders_of(value: Value | None) -> list[CallEvent]:
    if value is None:
        return []
    detail = value.detail
    if isinstance(detail, tuple) and detail and detail[0] == "enumerate":
        return _loaders_of(detail[1])
    if isinstance(detail, tuple) and detail and detail[0] == "zip":
        return [loader for inner in detail[1] for loader in _loaders_of(inner)]
    if Tag.LOADER in value.tags and isinstance(detail, CallEvent):
        return [detail]
    return []


def _loaders_in_expression(module: ModuleAnalysis, scope: ScopeAnalysis, expression: cst.BaseExpression, depth: int) -> list[CallEvent]:
    if depth > 4:
        return []
    found = _loaders_of(scope.value_at(expression))
    if found:
        return found
    if isinstance(expression, cst.Call):
        name = expression.func.attr.value if isinstance(expression.func, cst.Attribute) else (
            expression.func.value if isinstance(expression.func, cst.Name) else ""
        )
        if name in _PASSES_ITEMS_THROUGH:
            positional = [arg.value for arg in expression.args if arg.keyword is None and not arg.star]
            return [loader for arg in (positional if name == "zip" else positional[:1])
                    for loader in _loaders_in_expression(module, scope, arg, depth + 1)]
    if isinstance(expression, cst.Name) and scope.function is not None and expression.value in scope.function.positional_parameters:
        passed = module.arguments_for(scope.function, expression.value) or []
        return [loader for _, value in passed for loader in _loaders_of(value)]
    return []


def clears_through_accelerate(module: ModuleAnalysis, call: CallEvent) -> bool:
    """``call`` is ``optimizer.zero_grad()`` on an optimizer an Accelerator's ``prepare`` (or ``prepare_optimizer``)
    was given, in this scope or passed in by every caller of this function: accelerate's AcceleratedOptimizer runs it,
    with its own default for ``set_to_none`` (Plan.zero_grad_accelerated)."""
    receiver = call.receiver
    if call.method != "zero_grad" or receiver is None or Tag.OPTIMIZER not in receiver.tags:
        return False
    prepared = module.module_wide(_PREPARED, _optimizers_prepared)  # once per text, whatever the number of `zero_grad`s
    candidates = [receiver]
    function = call.scope.function
    if isinstance(call.node.func, cst.Attribute) and isinstance(call.node.func.value, cst.Name) and function is not None \
            and call.node.func.value.value in function.positional_parameters:
        candidates = [value for _, value in module.arguments_for(function, call.node.func.value.value) or []]
    return bool(candidates) and all(value.site is not None and id(value.site[1]) in prepared for value in candidates)


def _optimizers_prepared(module: ModuleAnalysis) -> set[int]:
    """The nodes (ids) where the optimizers an Accelerator's ``prepare`` is given were built; each scope's kept with
    it, so that a key in one method reads again that method's events only."""
    return {site for scope in module.all_scopes for site in kept_with_scope(scope, _PREPARED, lambda scope=scope: _prepared_in(scope))}


def _prepared_in(scope: ScopeAnalysis) -> list[int]:
    return [
        id(value.site[1]) for event in scope.events
        if isinstance(event, CallEvent) and event.method in ("prepare", "prepare_optimizer")
        and event.receiver is not None and Tag.ACCELERATOR in event.receiver.tags
        for value in event.args if Tag.OPTIMIZER in value.tags and value.site is not None
    ]
