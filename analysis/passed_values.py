"""What a call of a local function returns, its graph seeds traced to the call (``calls.call_result``).

A graph-carrying value that a call hands to a parameter of unknown role flows into what the function
returns from it (``compute_stats(logits, labels)`` returning a dict of statistics built from the
logits): the function is walked once more with those parameters bound, once per flow and set of
parameters, and kept with the flow (``ScopeAnalysis.returned_with_graph``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from .events import CallEvent, backward_target, is_backward
from .names import dotted
from .statement_shapes import accumulating_parameters
from .summary import note_text_read
from .tree import children, facts_by_statement
from .values import CONTAINER, CRITERION, GRAPH, LOSS, MODEL, STRUCTURED, TENSOR, UNKNOWN, Value, join

if TYPE_CHECKING:
    from .flow import ScopeAnalysis


def returned_by_call(callee: ScopeAnalysis, call: CallEvent) -> Value:
    """What one call of a local function returns. The graph seeds the function creates (its
    forwards, its losses) are new on every call, so this call stands for them: seen as the
    function's own nodes they would be shared by every call, and a validation call of the loss
    helper would look backwarded by the training call's backward. Seeds the function runs a
    backward through itself stay: that backward runs in the same call. A graph-carrying value the
    call hands to a parameter of unknown role flows on into what the function returns from it
    (``compute_stats(logits, labels)`` returning a dict of statistics built from ``logits``): the
    function is walked once more with those parameters bound, and what it then returns stands, its
    seeds the caller's argument's. So does a model or a criterion the call hands such a parameter
    (``objective(net, crit, x, y)`` returning ``crit(net(x), y)``): what the function computes with
    it is a forward or a loss whatever the parameter is called."""
    passed = _graph_arguments(callee, call) if call.context.grad_off is None else {}
    walked = _returned_with_graph(callee, passed) if passed else None
    if walked is not None:
        value, created = walked
        parameters = dict(_parameter_nodes(callee, passed))
        given = next((passed[name] for name, node in parameters.items() if value.site is not None and value.site[1] is node), None)
        if given is not None:  # what the function returns is what the call handed it: the caller's evidence stands
            value = Value(value.tags, site=given.site, note=given.note, roots=value.roots, items=value.items, detail=value.detail)
        return _with_roots_at(value, created, call.node, {root: passed[name].roots for name, root in parameters.items()})
    value = callee.return_value
    if not value.roots and value.items is None:
        return value
    return _with_roots_at(value, _created_seeds(callee), call.node, {})


def _created_seeds(callee: ScopeAnalysis) -> set:
    backwarded = frozenset().union(*(backward_target(event).roots for event in callee.calls() if is_backward(event)))
    return {event.node for event in callee.calls()} - backwarded


def _graph_arguments(callee: ScopeAnalysis, call: CallEvent) -> dict[str, Value]:
    """The parameters of the called function whose role is not known (``ROLE_VALUES``) and that the call
    hands a graph-carrying value, a model or a criterion, each with that value."""
    function = callee.function
    given = call.values_given(function.positional_parameters) if function is not None else None
    if given is None:
        return {}
    return {
        name: value for name, value in given.items()
        if (GRAPH in value.tags or value.tags & _HANDED_ROLES) and name in callee.params and not callee.params[name].tags
    }


# (flow, parameters) walked with a graph-carrying value bound to those parameters right now: a call of
# the function in its own walk (recursion) gets what it returns without them
_WALKING_WITH_GRAPH: set[tuple[int, frozenset[str]]] = set()
# What a parameter bound by such a walk holds: the tags a caller's value keeps in the callee
_PASSED_TAGS = frozenset({GRAPH, TENSOR, STRUCTURED, CONTAINER, LOSS})
# What a caller's model or criterion is in the callee: the caller's own value (its construction, its reduction)
_HANDED_ROLES = frozenset({MODEL, CRITERION})


def _returned_with_graph(callee: ScopeAnalysis, passed: dict[str, Value]) -> tuple[Value, set] | None:
    """(what the function returns, the graph seeds it creates) when the parameters in ``passed`` hold
    graph-carrying values, computed once per flow and set of parameters; None while that walk runs."""
    key = frozenset(  # a model or criterion by its construction: what the walk reads of it (a loss's reduction)
        (name, value.site[1] if value.site is not None and GRAPH not in value.tags else None, value.tags & _PASSED_TAGS)
        for name, value in passed.items()
    )
    names = frozenset(passed)
    found = callee.returned_with_graph.get(key)
    if found is not None:
        return found
    function = callee.function
    if function is None or (id(callee), names) in _WALKING_WITH_GRAPH:
        return None
    bound = {
        name: Value(value.tags & _PASSED_TAGS, site=(callee.chunk, node), note=f"parameter `{name}` (given a graph-carrying value)", roots=frozenset({node}))
        if GRAPH in value.tags else value
        for (name, node), value in zip(_parameter_nodes(callee, passed), passed.values())
    }
    _WALKING_WITH_GRAPH.add((id(callee), names))
    try:
        walked = type(callee).of_function(function, callee.summary, bound)
    finally:
        _WALKING_WITH_GRAPH.discard((id(callee), names))
    found = (walked.return_value, _created_seeds(walked))
    walked.release(whole=False)
    callee.returned_with_graph[key] = found
    return found


def _parameter_nodes(callee: ScopeAnalysis, passed: dict[str, Value]) -> list[tuple[str, cst.Param]]:
    """Each parameter of ``passed``, in its order, with its node in the function's definition."""
    assert callee.function is not None, "asked of a function's flow"
    params = callee.function.node.params
    nodes = {param.name.value: param for param in (*params.posonly_params, *params.params, *params.kwonly_params)}
    return [(name, nodes[name]) for name in passed]


def _with_roots_at(value: Value, created: set, call_node: cst.Call, replaced: dict) -> Value:
    """``value`` as one call returns it: the seeds in ``created`` become the call, each seed in ``replaced``
    (a parameter) what the call passed it."""
    roots = value.roots - created - replaced.keys()
    items = None if value.items is None else tuple(_with_roots_at(item, created, call_node, replaced) for item in value.items)
    if roots == value.roots and items == value.items:
        return value
    if value.roots & created:
        roots = roots | {call_node}
    roots = roots.union(*(replaced[root] for root in value.roots & replaced.keys()))
    return Value(value.tags, site=value.site, note=value.note, roots=roots, items=items, detail=value.detail)


def accumulated_by_helper(call: CallEvent, name: str) -> tuple[cst.BaseExpression, Value] | None:
    """(the argument, its value) that ``name = helper(name, term)`` accumulates into ``name``, when the local
    helper returns a running total or average of the parameter ``name`` fills
    (``statement_shapes.accumulating_parameters``): ``avg = ema(avg, loss)`` keeps ``loss`` like
    ``avg = 0.98 * avg + 0.02 * loss`` does."""
    if call.function is None or any(arg.star for arg in call.arg_nodes):
        return None
    note_text_read(call.function)
    found = accumulating_parameters(call.function.node)
    if found is None:
        return None
    total, term = found
    plain = [arg for arg in call.arg_nodes if arg.keyword is None]
    passed = dict(zip(call.function.positional_parameters, zip(plain, call.args)))
    passed.update({arg.keyword.value: (arg, call.kwargs.get(arg.keyword.value, UNKNOWN)) for arg in call.arg_nodes if arg.keyword is not None})
    given = passed.get(total)
    if given is None or not isinstance(given[0].value, cst.Name) or given[0].value.value != name:
        return None
    mentioned = [(arg.value, value) for param, (arg, value) in passed.items() if param != total and _reads_name(term, param)]
    return mentioned[0] if len(mentioned) == 1 else None


def _reads_name(node: cst.CSTNode, name: str) -> bool:
    return (isinstance(node, cst.Name) and node.value == name) or any(_reads_name(child, name) for child in children(node))


# Methods that return a copy on the host (or a Python number): what they return no longer holds device memory.
_OFF_THE_DEVICE = frozenset({"cpu", "item", "tolist", "numpy"})
# The torch functions that join tensors end to end: `x = torch.cat([x, y])` grows `x` by `y`.
_CONCATENATING = frozenset({"torch.cat", "torch.concat", "torch.concatenate", "torch.vstack", "torch.hstack", "torch.row_stack"})


def kept_by_instance(call: CallEvent) -> list[tuple[str, Value, cst.BaseExpression]]:
    """``tracker.update(logits, labels)`` on an instance of a workspace class (this file's or another's)
    whose method appends what it is handed, or a tensor computed from it on the device
    (``self.preds.append(logits.argmax(-1))``), to an attribute the class binds once and never empties:
    (``tracker.preds``, the argument's value, its node) for each argument so kept, as if the caller had
    appended it. Graph-carrying arguments are left to what follows graphs (``kept_by_own_method``)."""
    function = call.function
    if function is None or function.owner is None or call.receiver_key is None or "." in call.receiver_key:
        return []
    if any(arg.star for arg in call.arg_nodes):
        return []
    positional = [arg.value for arg in call.arg_nodes if arg.keyword is None]
    handed = list(zip(function.positional_parameters, call.args, positional))
    handed += [(arg.keyword.value, call.kwargs.get(arg.keyword.value, UNKNOWN), arg.value) for arg in call.arg_nodes if arg.keyword is not None]
    kept = []
    for name, value, node in handed:
        attribute = _attribute_growing_with(function, name)
        if attribute is not None and GRAPH not in value.tags:
            kept.append((f"{call.receiver_key}.{attribute}", value, node))
    return kept


def _attribute_growing_with(function, parameter: str) -> str | None:
    """The attribute (``preds`` of ``self.preds``) a method appends ``parameter`` to, as it is or as a
    tensor computed from it by methods and indexing that stay on its device, when the class binds that
    attribute once and never clears, pops or deletes from it. Read once per method and parameter."""
    memo = function.chunk.node_memo("attributes growing with a parameter").setdefault(function.node, {})
    if parameter not in memo:
        memo[parameter] = _growing_attribute(function, parameter)
    attribute, read_class = memo[parameter]
    for read in function.owner.methods.values() if read_class else (function,):
        note_text_read(read)
    return attribute


def _growing_attribute(function, parameter: str) -> tuple[str | None, bool]:
    """``_attribute_growing_with``'s answer, and whether finding it read the whole class's text."""
    for node in _nodes_of(function.node.body):
        if not (isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value in {"append", "extend"}):
            continue
        target = node.func.value
        attribute = target.attr.value if isinstance(target, cst.Attribute) and isinstance(target.value, cst.Name) and target.value.value == "self" else None
        if attribute is None or len(node.args) != 1 or _device_source(node.args[0].value) != parameter:
            continue
        bound, emptied = _attribute_handling(function.owner.node, attribute)  # every method's text
        return (attribute if bound <= 1 and not emptied else None), True
    return None, False


def _device_source(expression: cst.BaseExpression) -> str | None:
    """The name a tensor expression is computed from by methods and indexing that keep it on its device
    (``logits`` in ``logits.detach().argmax(-1)``); None through a host copy (``.cpu()``, ``.item()``)."""
    while True:
        if isinstance(expression, cst.Call) and isinstance(expression.func, cst.Attribute):
            if expression.func.attr.value in _OFF_THE_DEVICE or (expression.func.attr.value == "to" and expression.args):
                return None
            expression = expression.func.value
        elif isinstance(expression, cst.Subscript):
            expression = expression.value
        else:
            return expression.value if isinstance(expression, cst.Name) else None


def _attribute_handling(owner: cst.ClassDef | cst.FunctionDef, attribute: str) -> tuple[int, bool]:
    """How many times a class's methods (or one method) bind ``self.<attribute>``, and whether any clears
    it, pops or deletes from it, or assigns into it by index or slice."""
    bound, emptied = 0, False
    for node in _nodes_of(owner.body, into_functions=True):
        if isinstance(node, (cst.Assign, cst.AnnAssign, cst.AugAssign)):
            targets = [target.target for target in node.targets] if isinstance(node, cst.Assign) else [node.target]
            for target in targets:
                if isinstance(target, cst.Subscript):
                    emptied = emptied or dotted(target.value) == f"self.{attribute}"
                elif dotted(target) == f"self.{attribute}":
                    bound += 1
        elif isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value in {"clear", "pop", "popleft"}:
            emptied = emptied or dotted(node.func.value) == f"self.{attribute}"
        elif isinstance(node, cst.Del):
            emptied = emptied or f"self.{attribute}" in {dotted(target) for target in _nodes_of(node) if isinstance(target, cst.Attribute)}
    return bound, emptied


def _nodes_of(node: cst.CSTNode, *, into_functions: bool = False):
    """The nodes under ``node``, in no particular order; those of nested functions, classes and lambdas only with
    ``into_functions``. By ``tree.children``: LibCST's own ``children`` visits each node, 20 times slower on the
    1,000-line ``main()`` a key in it reads again."""
    stack = list(children(node))
    while stack:
        current = stack.pop()
        if not into_functions and type(current) in _DEFINITIONS:
            continue
        yield current
        stack.extend(children(current))


_DEFINITIONS = frozenset({cst.FunctionDef, cst.ClassDef, cst.Lambda})


def joined_onto(target: cst.BaseExpression, value: cst.BaseExpression, canonical) -> cst.BaseExpression | None:
    """For ``preds = torch.cat([preds, out])`` (``torch.cat((preds, out), dim=0)``, ``torch.vstack``), the
    ``out`` joined onto ``preds``: every run of the statement makes ``preds`` longer, as an append does."""
    if not isinstance(target, cst.Name) or not isinstance(value, cst.Call) or not value.args:
        return None
    name = dotted(value.func)
    joined = value.args[0].value
    if name is None or canonical(name) not in _CONCATENATING or not isinstance(joined, (cst.List, cst.Tuple)):
        return None
    parts = [element.value for element in joined.elements]
    others = [part for part in parts if not (isinstance(part, cst.Name) and part.value == target.value)]
    return others[0] if len(parts) == 2 and len(others) == 1 else None


def holder_of_item(func: cst.BaseExpression) -> str | None:
    """``history`` for the method ``history["logits"].append`` (``self.stats[mode][key].append``): an item of
    a container of lists, which the container keeps as long as it lives."""
    if not isinstance(func, cst.Attribute) or not isinstance(func.value, cst.Subscript):
        return None
    target = func.value
    while isinstance(target, cst.Subscript):
        target = target.value
    return dotted(target)


def empties_attribute(call: CallEvent, attribute: str) -> bool:
    """The method ``call`` runs (``tracker.reset()``) binds ``self.<attribute>`` afresh or empties it."""
    function = call.function
    if function is None or function.owner is None:
        return False
    note_text_read(function)
    bound, emptied = _attribute_handling(function.node, attribute)
    return bound > 0 or emptied


def filled_by_call(call: CallEvent) -> list[tuple[str, Value]]:
    """(the caller's name, what it now holds) for each container a call of a function (a plain one or a
    nested one) hands over and the function fills with another argument or its entries: a stats helper's
    ``rec(nested, "", flat)`` that sets ``into[prefix + k] = v`` for ``for k, v in nest.items()`` leaves
    ``flat`` holding what ``nested`` held (its graph too)."""
    function = call.function
    if function is None or call.receiver is not None or any(arg.star for arg in call.arg_nodes):
        return []
    plain = [arg.value for arg in call.arg_nodes if arg.keyword is None]
    given = dict(zip(function.positional_parameters, zip(plain, call.args)))
    given.update({arg.keyword.value: (arg.value, call.kwargs.get(arg.keyword.value, UNKNOWN)) for arg in call.arg_nodes if arg.keyword is not None})
    if not any(isinstance(node, cst.Name) for node, _ in given.values()) or not any(value.tags for _, value in given.values()):
        return []  # no name handed over to be filled, or nothing known to fill it with: the body is not read
    filled = []
    for container, sources in _parameters_filled(function).items():
        target = given.get(container)
        values = [given[source][1] for source in sources if source in given and given[source][1].tags]
        if target is not None and isinstance(target[0], cst.Name) and values:
            filled.append((target[0].value, join(values)))
    return filled


def _parameters_filled(function) -> dict[str, tuple[str, ...]]:
    """Each parameter of ``function`` that its body stores another parameter into (``into[k] = v``,
    ``into.append(v)``), as it is or as its entries (``for k, v in nest.items()``), with those parameters.
    Read once per function."""
    note_text_read(function)
    memo = function.chunk.node_memo("parameters filled from others")
    if function.node not in memo:
        params = function.node.params
        names = [param.name.value for param in (*params.posonly_params, *params.params, *params.kwonly_params)]
        holders = {name: {name} for name in names}
        facts = facts_by_statement(  # per statement, kept with the tree: a key in a long function reads its own again
            function.node.body, function.chunk.node_memo("loops and stores that may fill a parameter"), _may_fill,
            function.chunk.node_memo("statement levels"),
        ) if len(names) > 1 else []  # one parameter fills no other
        loops = [fact for fact in facts if isinstance(fact, cst.For)]
        grown = True
        while grown:  # to a fixed point: a loop over what an outer loop's target holds, in any order
            grown = False
            for loop in loops:
                for held in holders.values():
                    if _entries_iterated(loop.iter, held) and not _names_in(loop.target) <= held:
                        held.update(_names_in(loop.target))
                        grown = True
        filled: dict[str, set[str]] = {}
        for fact in facts:
            if isinstance(fact, cst.For):
                continue
            target, stored = fact
            if not (isinstance(target, cst.Name) and target.value in holders and isinstance(stored, cst.Name)):
                continue
            for name, held in holders.items():
                if name != target.value and stored.value in held:
                    filled.setdefault(target.value, set()).add(name)
        memo[function.node] = {container: tuple(sorted(sources)) for container, sources in filled.items()}
    return memo[function.node]


def _may_fill(node: cst.CSTNode) -> list[cst.For | tuple[cst.BaseExpression, cst.BaseExpression]]:
    """A ``for`` loop as it is; for ``into[k] = v`` or a one-argument ``into.append(v)`` (``extend``), what is
    stored into (``into``) and what is stored (``v``)."""
    if isinstance(node, cst.For):
        return [node]
    if isinstance(node, cst.Assign) and len(node.targets) == 1 and isinstance(node.targets[0].target, cst.Subscript):
        return [(node.targets[0].target.value, node.value)]
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value in {"append", "extend"} \
            and len(node.args) == 1:
        return [(node.func.value, node.args[0].value)]
    return []


def _entries_iterated(iterable: cst.BaseExpression, held: set[str]) -> bool:
    """``nest``, ``nest.items()``, ``nest.values()`` for a name in ``held``: iterating it yields what it holds."""
    if isinstance(iterable, cst.Call) and isinstance(iterable.func, cst.Attribute) and not iterable.args \
            and iterable.func.attr.value in {"items", "values"}:
        iterable = iterable.func.value
    return isinstance(iterable, cst.Name) and iterable.value in held


def _names_in(target: cst.BaseExpression) -> set[str]:
    if isinstance(target, cst.Name):
        return {target.value}
    if isinstance(target, (cst.Tuple, cst.List)):
        return set().union(*(_names_in(element.value) for element in target.elements))
    return set()
