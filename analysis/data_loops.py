"""What a loop walks, read from what its body does with each element rather than from names.

A ``for`` loop whose element (or a part of it: ``images, labels = batch``) is moved to the accelerator
or handed to a model as its input walks batches of data, however its iterable is called:
``for a, b in v2: out = v1(a.cuda())``. A local function the body hands the element to is followed (``eval_step(model, batch, ...)`` moving ``batch`` to the device). A loop over a literal
collection, a dict's entries, a module's parameters or children, a ``range``, the rows or pieces of one
tensor (``x.split(1, dim=1)``: a sequence's time steps) or the modules of a model walks a bounded structure,
not the data, and says nothing here; nor does a loop in a method of a model or of a callable object (a
forward, a loss's `__call__` walks what it is handed).
"""

from __future__ import annotations

from collections.abc import Iterable

import libcst as cst

from . import libraries
from .events import AssignEvent, CallEvent, Loop, StoreEvent
from .flow import ScopeAnalysis
from .names import dotted
from .patterns import argument_passed, events_in, is_optimizer_step, peeled
from .values import CONTAINER, DATASET_ITERABLE, DATASET_MAP, LOADER, MODEL, ON_DEVICE, TENSOR

# Methods whose result is a structure of a bounded size: a dict's entries, a module's parameters or children, the
# pieces of one tensor or string (a sequence's time steps).
_BOUNDED_WALKS = frozenset({
    "items", "values", "keys", "parameters", "named_parameters", "buffers", "named_buffers", "children",
    "named_children", "modules", "named_modules", "state_dict", "split", "chunk", "unbind", "tensor_split",
})
_FOLLOWED_CALLS = 2  # levels of local functions followed from the loop's body


def draws_batches(scope: ScopeAnalysis, loop: Loop) -> str | None:
    """Why ``loop`` walks batches of data (a description naming the element and what is done with it), or
    None: no element of it is moved to the accelerator or fed to a model. A loss computed on each element is
    no such evidence: a detector's loss sums over its heads' predictions (`for pi in p: lobj += bce(pi, t)`)."""
    node = loop.node
    if not isinstance(node, cst.For) or not loop.targets or _inside_a_model(scope):
        return None  # a model's own method loops over its input's pieces, time steps and layers
    if not all(_data_source(scope, part) for part in peeled(node.iter)):
        return None
    calls = [event for event in events_in(scope, loop) if isinstance(event, CallEvent)]
    return _use_of_elements(scope, calls, set(loop.targets), _FOLLOWED_CALLS)


def walks_listed_items(scope: ScopeAnalysis, loop: Loop) -> bool:
    """``loop`` is a ``for`` over items the code lists (`for enc in [a, b]`, `zip(prompts, encoders)` with
    `prompts = [prompt, prompt_2]`: a zip stops at its shortest part), a count the code fixes, whatever its
    iterable is called."""
    node = loop.node
    return isinstance(node, cst.For) and any(
        isinstance(part, _DISPLAYS) or _bound_to_displays(scope, part) for part in peeled(node.iter)
    )


def _inside_a_model(scope: ScopeAnalysis) -> bool:
    """A method of a model, a pipeline or a callable object (a loss or a metric with `__call__`): it walks what
    it is handed, a detector's loss its heads' predictions (`for i, pi in enumerate(p)`), not the data."""
    owner = scope.function.owner if scope.function is not None else None
    return owner is not None and (
        scope.summary.local_class_kind(owner).kind in {libraries.MODULE, libraries.PIPELINE}
        or owner.find_method("__call__", scope.summary) is not None
    )


_DISPLAYS = (cst.List, cst.Tuple, cst.Set, cst.Dict, cst.ListComp, cst.GeneratorExp, cst.SimpleString)


def _data_source(scope: ScopeAnalysis, iterable: cst.BaseExpression) -> bool:
    if isinstance(iterable, _DISPLAYS) or _bound_to_displays(scope, iterable):
        return False
    if isinstance(iterable, cst.Call):
        if isinstance(iterable.func, cst.Attribute) and iterable.func.attr.value in _BOUNDED_WALKS:
            return False
        if dotted(iterable.func) in {"range", "trange", "reversed", "sorted"}:
            return False
    value = scope.value_at(iterable)
    if value is not None and (MODEL in value.tags or (TENSOR in value.tags and CONTAINER not in value.tags)):
        return False  # a ModuleList's modules, the rows of one tensor
    return True


def _bound_to_displays(scope: ScopeAnalysis, iterable: cst.BaseExpression) -> bool:
    """A name the scope binds only to literal collections (`prompts = [prompt, prompt_2]`, `encoders = [a, b] if
    two else [b]`): a loop over it (or over a `zip` with it, which stops at its end) walks a few items the code
    lists, an SDXL pipeline's two text encoders, not the data."""
    name = dotted(iterable)
    return name is not None and "." not in name and _names_bound_to_displays(scope).get(name, False)


def _names_bound_to_displays(scope: ScopeAnalysis) -> dict[str, bool]:
    """Each name the scope binds, and whether every binding is a literal collection: one pass over its events,
    kept with its flow (as `patterns._events_by_loop` keeps its index), not one per loop a rule asks about."""
    kept = scope.followed.get(_DISPLAY_BINDINGS)
    if kept is not None and kept[0][1] == len(scope.events):  # (a scope asked for while it is walked grows)
        return kept[0][0]
    displays: dict[str, bool] = {}
    for event in scope.events:
        if isinstance(event, AssignEvent):
            for target in event.targets:
                displays[target] = displays.get(target, True) and _a_display(event.value_node)
    scope.followed[_DISPLAY_BINDINGS] = ((displays, len(scope.events)), ())  # read no other function's flow
    return displays


# The key of ``_names_bound_to_displays`` in ``ScopeAnalysis.followed``.
_DISPLAY_BINDINGS = "names bound to displays"


def _a_display(node: cst.BaseExpression | None) -> bool:
    if isinstance(node, cst.IfExp):
        return _a_display(node.body) and _a_display(node.orelse)
    return isinstance(node, _DISPLAYS)


def _use_of_elements(scope: ScopeAnalysis, calls: Iterable[CallEvent], elements: set[str], depth: int) -> str | None:
    elements = _with_aliases(scope, elements)
    for call in calls:
        why = _uses_an_element(call, elements)
        if why is not None:
            return why
        function = call.function
        inner = function.analysis(scope.summary) if depth > 0 and function is not None else None
        if function is None or inner is None:
            continue
        handed = {
            parameter for parameter in inner.params
            if (passed := argument_passed(call, function, parameter)) is not None and _root(passed.value) in elements
        }
        if handed:
            why = _use_of_elements(inner, inner.calls(), handed, depth - 1)
            if why is not None:
                return why
    return None


def _uses_an_element(call: CallEvent, elements: set[str]) -> str | None:
    if call.method in {"to", "cuda"} and isinstance(call.node.func, cst.Attribute) and ON_DEVICE in call.result.tags:
        root = _root(call.node.func.value)
        if root in elements:
            return f"each `{root}` it draws is moved to the accelerator"
    receiver = call.receiver
    if receiver is not None and call.method in {None, "forward"} and MODEL in receiver.tags:
        given = next((arg for arg in call.arg_nodes if arg.keyword is None), None)  # the input, or `**batch`
        if given is not None and _root(given.value) in elements:
            return f"each `{_root(given.value)}` it draws is the input of a model's forward"
    return None


def _with_aliases(scope: ScopeAnalysis, elements: set[str]) -> set[str]:
    """The elements and the names unpacked or taken from them (``images, labels = batch``, ``x = batch["x"]``)."""
    names = set(elements)
    for event in scope.events:
        if isinstance(event, AssignEvent) and isinstance(event.node, cst.Assign) and _root(event.node.value) in names:
            names.update(target for target in event.targets if "." not in target)
    return names


def _root(expression: cst.BaseExpression) -> str | None:
    """The name an expression reads its value from: ``batch`` for ``batch["x"].to(device)``, ``x`` for ``x.cuda()``."""
    while True:
        if isinstance(expression, cst.Name):
            return expression.value
        if isinstance(expression, (cst.Attribute, cst.Subscript)):
            expression = expression.value
        elif isinstance(expression, cst.Call) and isinstance(expression.func, cst.Attribute):
            expression = expression.func.value
        else:
            return None


def walks_one_step(store: StoreEvent, loop: Loop) -> bool:
    """``loop`` walks the micro-batches of one optimizer step, by what the function does: the optimizer steps
    once after the loop (at the loop's own depth, none inside it), the container ``store`` fills is bound in the
    function (each call starts a new one), and the loop walks no data loader (a whole epoch before one step is a
    loop over the data, not over a step's pieces)."""
    if store.container_loop == "outer" or loop.iterable.tags & {LOADER, DATASET_MAP, DATASET_ITERABLE}:
        return False
    after = False  # an event of the loop was seen: what comes outside it now comes after it
    for event in store.scope.events:
        inside = loop in event.context.loops
        after = after or inside
        if isinstance(event, CallEvent) and is_optimizer_step(event):
            if inside:
                return False
            if after and event.context.loop is loop.parent:
                return True
    return False
