"""Where the output of a model class goes: the losses in the workspace's other files that it feeds.

TL202 and TL203 read a loss call forward, to what produced its input. When the model is a class of
another file (``model.py``'s ``Classifier`` ending its ``forward`` in ``F.softmax``) the fix belongs
in that file, at the activation; this is the reverse question, asked from the class's file: which
loss calls of the workspace get this class's output. It starts at the class's constructions in the
other files (``callers.constructions_elsewhere``), takes the name each is bound to
(``classifier = model.Classifier().cuda()``), and looks in the scope that built it and in the
functions that scope hands the name to (``train.dann(encoder, classifier, ...)``, by position or
keyword, in whichever file defines them) and, for a model built by a module-level statement, in the functions of
that file the later statements call which read the global without binding it (``model = RNNModel(...)`` then
``train()``) for a loss call whose input is that model's output: the
model called (``m(x)``, ``m.forward(x)``), maybe through names, tuple unpacking of a ``forward``
that returns several tensors, reshapes and casts. A name built from this class in one branch and
another class in the next still feeds the loss this class's output whenever this class was built.

Computed once per class and file (``module_fact``): the answer reads other files, never the checked
file's other statements.
"""

from __future__ import annotations

import os
from functools import partial
from typing import TYPE_CHECKING

import libcst as cst

from .activations import LossCall, called_name, loss_calls, spine
from .callers import constructions_elsewhere
from .events import AssignEvent
from .names import dotted, last_part
from .quoting import quoted
from .statement_shapes import target_names
from .summary import ClassInfo
from .values import OUTPUT_KINDS, Value

if TYPE_CHECKING:
    from .context import ModuleView, RuleContext
    from .events import CallEvent, Event
    from .flow import ScopeAnalysis
    from .summary import FunctionInfo

# Torch functions that reshape or cast a tensor, called with the tensor first (``torch.squeeze(pred)``).
_SHAPE_FUNCTIONS = frozenset({"squeeze", "unsqueeze", "flatten", "reshape"})
# How far a loss input is followed back through names and reshapes.
_MAX_STEPS = 8


class Consumer:
    """A loss call of another file fed the output of the class (the element ``index`` of a tuple it returns)."""

    __slots__ = ("loss", "index", "built")

    def __init__(self, loss: LossCall, index: int | None, built: CallEvent) -> None:
        self.loss = loss
        self.index = index
        self.built = built  # the construction of the class that leads there

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Consumer) and (self.loss.event.node, self.index, self.built.node) == (
            other.loss.event.node, other.index, other.built.node)

    def __hash__(self) -> int:
        return hash((id(self.loss.event.node), self.index))


def losses_fed_by(module: ModuleView, owner: ClassInfo, losses: frozenset[str]) -> tuple[Consumer, ...]:
    """The loss calls (of the named losses) in the workspace's other files that get ``owner``'s output."""
    return module.module_fact(("TL202/TL203 losses fed by", owner.name, losses), partial(_losses_fed_by, owner.name, losses))


def _losses_fed_by(name: str, losses: frozenset[str], module: ModuleView) -> tuple[Consumer, ...]:
    owner = module.summary.classes.get(name)
    if owner is None:
        return ()

    def read(other: ModuleView, call: CallEvent) -> list[Consumer]:
        return _fed_from_construction(other, call, losses)

    return tuple(consumer for found in constructions_elsewhere(module.summary, owner, read) for consumer in found)


def _fed_from_construction(module: ModuleView, built: CallEvent, losses: frozenset[str]) -> list[Consumer]:
    scope = built.scope
    bound = _bound_to(scope, built.node)
    if bound is None:
        return []
    # module-level code: every later statement's too (`model = Net()` then `train(model, loader)`)
    scopes = [scope] if scope.function is not None else module.scopes_from(scope)
    found = [Consumer(loss, index, built) for later in scopes for loss, index in _fed_in(module, later, bound, losses)]
    for call in (call for later in scopes for call in later.calls()):
        function = call.function
        if function is None or call.node is built.node:
            continue
        same_file = function.home is None or function.home.path == module.path
        if scope.function is None and same_file and bound not in function.positional_parameters:
            found.extend(Consumer(loss, index, built) for loss, index in _reading_global(module, function, bound, losses))
        for parameter in _parameters_handed(call, bound, function.positional_parameters):
            home = module
            if function.home is not None and function.home.path != module.path:
                workspace = module.summary.workspace
                other = workspace.analysis_of(function.home.path) if workspace is not None else None
                if other is None:
                    continue
                home = other
            analysis = function.analysis(home.summary)
            if analysis is not None:
                found.extend(Consumer(loss, index, built) for loss, index in _fed_in(home, analysis, parameter, losses))
    return found


def _reading_global(module: ModuleView, function: FunctionInfo, name: str, losses: frozenset[str]) -> list[tuple[LossCall, int | None]]:
    """The loss calls of a function of this file, called after the module-level statement that bound the model to
    ``name``, that feed on that global (``train()`` running ``output = model(data)``): it never binds the name itself."""
    analysis = function.analysis(module.summary)
    if analysis is None or any(isinstance(event, AssignEvent) and name in event.targets for event in analysis.events):
        return []
    return _fed_in(module, analysis, name, losses)


def _bound_to(scope: ScopeAnalysis, node: cst.Call) -> str | None:
    """The one name the model ``node`` builds is bound to (``m = Net().cuda()``)."""
    for event in scope.events:
        if isinstance(event, AssignEvent) and event.value_node is not None and len(event.targets) == 1:
            expression: cst.BaseExpression = event.value_node
            while isinstance(expression, cst.Call) and isinstance(expression.func, cst.Attribute) and expression is not node:
                expression = expression.func.value  # `Net().to(device)`, `Net().cuda()`
            if expression is node:
                return event.targets[0]
    return None


def _parameters_handed(call: CallEvent, name: str, positional: list[str]) -> list[str]:
    """The parameters of the called function that ``call`` hands the model bound to ``name``, directly or as
    ``copy.deepcopy(name)``, ``name.to(device)``."""
    handed = []
    position = 0
    offset = 1 if call.method is not None and positional[:1] == ["self"] else 0
    for arg in call.node.args:
        if arg.star:
            return handed
        if arg.keyword is None:
            parameter = positional[position + offset] if position + offset < len(positional) else None
            position += 1
        else:
            parameter = arg.keyword.value
        if parameter is not None and _refers_to(arg.value, name):
            handed.append(parameter)
    return handed


def _refers_to(expression: cst.BaseExpression, name: str) -> bool:
    while isinstance(expression, cst.Call):
        func = expression.func
        if isinstance(func, cst.Attribute) and func.attr.value in {"to", "cuda", "train"}:
            expression = func.value
        elif dotted(func) in {"copy.deepcopy", "deepcopy"} and expression.args:
            expression = expression.args[0].value
        else:
            return False
    return dotted(expression) == name


def _fed_in(module: ModuleView, scope: ScopeAnalysis, model: str, losses: frozenset[str]) -> list[tuple[LossCall, int | None]]:
    """The loss calls in ``scope`` whose input is the output of calling ``model`` (and which element of it)."""
    found = []
    for loss in loss_calls(module, scope, losses):
        produced = _producer(scope, loss.event, loss.input_node)
        if produced is not None and produced[0] == model:
            found.append((loss, produced[1]))
    return found


def _producer(scope: ScopeAnalysis, before: Event, expression: cst.BaseExpression) -> tuple[str, int | None] | None:
    """The name of the module whose call produced ``expression`` (followed back through the names assigned
    before ``before``, reshapes and casts), and which element of a returned tuple, or None."""
    index: int | None = None
    for _ in range(_MAX_STEPS):
        raw = dotted(expression.func) if isinstance(expression, cst.Call) else None
        if raw is not None and isinstance(expression, cst.Call) and expression.args and last_part(raw) in _SHAPE_FUNCTIONS \
                and scope.canonical(raw).startswith("torch."):
            expression = expression.args[0].value  # `torch.squeeze(pred)`
            continue
        expression = spine(expression)
        if isinstance(expression, cst.Call):
            name = called_name(expression)
            return (name, index) if name is not None else None
        if not isinstance(expression, cst.Name):
            return None
        assigned = _last_assignment(scope, before, expression.value)
        if assigned is None:
            return None
        before, expression, element = assigned  # `pred = torch.squeeze(pred)`: the `pred` before this one
        if element is not None:
            if index is not None:
                return None
            index = element
    return None


def _last_assignment(scope: ScopeAnalysis, before: Event, name: str) -> tuple[AssignEvent, cst.BaseExpression, int | None] | None:
    """The assignment to ``name`` last before the event, its value, and its position when unpacked from a tuple."""
    last = None
    for event in scope.events:
        if event is before:
            break
        if isinstance(event, AssignEvent) and name in event.targets:
            last = event
    if last is None:
        return None
    if last.value_node is not None:
        return last, last.value_node, None
    node = last.node  # an element of an unpacked tuple (`pred, map_y = model(images)`): the statement's value
    target = node.targets[0].target if isinstance(node, cst.Assign) and len(node.targets) == 1 else None
    if isinstance(node, cst.Assign) and isinstance(target, (cst.Tuple, cst.List)):
        names = [target_names(element.value) for element in target.elements]
        position = next((i for i, found in enumerate(names) if found == (name,)), None)
        return (last, node.value, position) if position is not None else None
    return None


def activations_consumed(module: ModuleView, scope: ScopeAnalysis, kind: str, losses: frozenset[str]) -> list[tuple[Value, list[Consumer]]]:
    """For the ``forward`` of a class of this file: each tensor it returns of ``kind`` (the whole output, or an
    element of a returned tuple) that reaches one of ``losses`` in another file, with the loss calls it feeds."""
    function = scope.function
    owner = function.owner if function is not None else None
    if function is None or owner is None or function.name != "forward" or module.summary.classes.get(owner.name) is not owner:
        return []
    output = owner.forward_output(module.summary)
    if output.items:
        returned = [(index, item) for index, item in enumerate(output.items) if kind in item.tags]
    else:
        returned = [(None, output)] if kind in output.tags and len(output.tags & OUTPUT_KINDS) == 1 else []
    if not returned:
        return []
    consumers = losses_fed_by(module, owner, losses)
    found = []
    for index, value in returned:
        fed = [consumer for consumer in consumers if consumer.index == index]
        if fed and value.site is not None:
            found.append((value, fed))
    return found


def report_consumed(ctx: RuleContext, scope: ScopeAnalysis, value: Value, consumers: list[Consumer], words: str,
                    consequence: str, help: str) -> None:
    """One finding at the activation a class's ``forward`` returns, citing the loss calls of other files it feeds."""
    assert value.site is not None, "activations_consumed gives returned values with a site"
    chunk, node = value.site
    if ctx.in_another_file(chunk):
        return
    owner = scope.function.owner if scope.function is not None else None
    first = consumers[0].loss
    where = os.path.basename(first.chunk.origin or "") or "another file"
    wrapper = first.criterion.detail if first.criterion is not None and isinstance(first.criterion.detail, ClassInfo) else None
    applied = f"`{wrapper.name}`, whose forward calls {first.loss}," if wrapper is not None else first.loss
    message = (
        f"`{quoted(chunk, node)}` makes `{owner.name if owner else 'the model'}.forward` return {words}, and "
        f"`{quoted(first.chunk, first.event.node)}` in {where} feeds them to {applied} which {consequence}"
    )
    evidence = list(first.passed[:1])
    for consumer in consumers[:3]:
        loss = consumer.loss
        evidence.append(((loss.chunk, loss.event.node), f"{loss.loss} gets this output here"))
        evidence.append(((consumer.built.chunk, consumer.built.node), "the model is built here"))
    ctx.report(node, message, evidence=evidence, help=help)
