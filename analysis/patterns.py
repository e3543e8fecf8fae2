"""Questions several rules ask of a scope's events: where are the backward calls, what runs in a loop."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, TypeGuard, TypeVar

import libcst as cst

from . import libraries, stepping, torchapi
from .dependencies import kept_with_scope, note_flows
from .events import AssignEvent, CallEvent, Condition, Event, JumpEvent, Loop, StoreEvent, is_backward
from .flow import ScopeAnalysis
from .names import dotted, last_part
from .quoting import shortened
from .summary import ClassInfo
from .tree import literal_value, walk
from .values import (
    CONTAINER,
    DATASET_ITERABLE,
    DATASET_MAP,
    LOADER,
    LOSS,
    MODEL,
    ON_DEVICE,
    TENSOR,
    Value,
)

MAX_CALL_DEPTH = 4
EventT = TypeVar("EventT", bound=Event)


def accumulates_into_grad(event: Event) -> TypeGuard[CallEvent]:
    """A backward that adds into ``.grad``: not ``torch.autograd.grad``, which returns the gradients, nor
    ``torch.distributed.autograd.backward``, which fills a fresh context every iteration."""
    if not isinstance(event, CallEvent):
        return False
    if event.method != "backward" and event.callee != "torch.autograd.backward":
        return False  # most calls: asked of every event of a long function by several rules
    if event.callee is not None and torchapi.is_torch_name(event.callee):
        return event.callee == "torch.autograd.backward"
    return event.method == "backward"


def is_optimizer_step(call: CallEvent) -> bool:
    """``optimizer.step()``, ``scaler.step(optimizer)``, ``engine.step()``, ``accelerator``-wrapped ones: known by
    the receiver's value or by what the scope does with it (``stepping.step_evidence``); only where nothing says
    either way, by its name."""
    if call.method != "step":
        return False
    if stepping.step_evidence(call) is not None:
        return True
    if stepping.knows_otherwise(call):
        return False
    # an unbound receiver (a global defined elsewhere) comes as callee "optimizer.step"
    key = optimizer_text(call).lower()
    return "optim" in key or key in {"opt", "scaler", "engine", "model_engine"} or key.endswith(("_opt", ".opt"))


optimizer_text = stepping.receiver_text


def events_in(scope: ScopeAnalysis, loop: Loop | None) -> Iterator[Event]:
    """Events in ``loop`` (or the whole scope when None), in program order."""
    if loop is None:
        return iter(scope.events)
    return iter(_events_by_loop(scope).get(loop, ()))


def _events_by_loop(scope: ScopeAnalysis) -> dict[Loop, list[Event]]:
    """Each loop of ``scope`` with the events inside it, in program order: kept with the scope's flow
    (``ScopeAnalysis.followed``, which a new walk or a resumed one starts empty), so that the rules'
    questions about one loop each read its events, not every event of a long ``main()``."""
    kept = scope.followed.get(_EVENTS_BY_LOOP)
    if kept is not None and kept[0][1] == len(scope.events):  # (a scope asked for while it is walked grows)
        return kept[0][0]
    index: dict[Loop, list[Event]] = {}
    for event in scope.events:
        for loop in event.context.loops:
            index.setdefault(loop, []).append(event)
    scope.followed[_EVENTS_BY_LOOP] = ((index, len(scope.events)), ())  # read no other function's flow
    return index


# The key of ``_events_by_loop`` in ``ScopeAnalysis.followed``.
_EVENTS_BY_LOOP = "events by loop"


# torch factories that make a tensor up (random or constant): no data goes in.
_MADE_UP_TENSORS = frozenset({"randn", "rand", "randint", "normal", "zeros", "ones", "empty", "full", "arange"})
# What a method or function that puts trained weights into a model is called.
_LOADS_WEIGHTS = re.compile(r"load|restore|from_pretrained", re.I)


def smoke_test_forward(summary, call: CallEvent) -> bool:
    """A model built in the function and run on tensors made up there, nothing loading weights into it
    (``net = ResNet18(); y = net(torch.randn(1, 3, 32, 32)); print(y.size())``): a check of the
    architecture's shapes, not an evaluation pass over data, whatever the function is called."""
    scope, key = call.scope, call.receiver_key
    if key is None or call.receiver is None or MODEL not in call.receiver.tags:
        return False
    built = [event for event in scope.events if isinstance(event, AssignEvent) and key in event.targets]
    if len(built) != 1 or built[0].targets != (key,) or not isinstance(built[0].value_node, cst.Call):
        return False  # a parameter, or built elsewhere or more than once
    return not loads_weights_into(key, scope.calls()) and made_up_inputs(summary, call)


def script_model_untrained(module, call: CallEvent) -> bool:
    """At a script's module level (``module`` a ``ModuleView``), whose top-level statements are scopes of their own:
    the model the call runs is built by one of them, from a call that asks for no weights (``pretrained=``,
    ``weights=``, a loader's name), and none loads weights into it. What it computes is no trained model's output,
    whatever its inputs (a check of shapes, a tutorial's demo), as ``smoke_test_forward`` says of a function."""
    key = call.receiver_key
    if call.scope.function is not None or key is None or call.receiver is None or MODEL not in call.receiver.tags:
        return False
    scopes = [scope for scope in module.all_scopes if scope.function is None]
    built = [event for scope in scopes for event in scope.events if isinstance(event, AssignEvent) and key in event.targets]
    if len(built) != 1 or built[0].targets != (key,) or not isinstance(built[0].value_node, cst.Call):
        return False
    if _ASKS_FOR_WEIGHTS.search(built[0].chunk.code_for(built[0].value_node)):
        return False
    if isinstance(call.receiver.detail, ClassInfo) and restores_own_weights(module.summary, call.receiver.detail) is not None:
        return False  # its constructor loads a checkpoint itself: every instance is a trained model
    return not loads_weights_into(key, (other for scope in scopes for other in scope.calls()))


# A model built with its trained weights: a loader (``load_model(path)``, ``from_pretrained``) or a constructor asked
# for them (torchvision's ``pretrained=True`` and ``weights=``, timm's ``pretrained=True``, a ``checkpoint=`` path).
_ASKS_FOR_WEIGHTS = re.compile(r"load|restore|pretrained|weights|checkpoint", re.I)


def loads_weights_into(key: str | None, calls: Iterable[CallEvent], loader_names: re.Pattern[str] = _LOADS_WEIGHTS) -> bool:
    """One of the calls loads weights into the model named ``key`` (``key.load_state_dict(...)``, ``load(key, path)``):
    a call whose name ``loader_names`` matches, on the model or handed it."""
    return any(
        loader_names.search(other.method or last_part(other.callee or "")) and (other.receiver_key == key or any(
            isinstance(arg.value, cst.Name) and arg.value.value == key for arg in other.arg_nodes
        ))
        for other in calls
    )


# The calls that put trained weights into a module as its constructor runs: `torch.load` returns the tensors saved
# (libraries.UNPICKLES_OBJECT's source), `load_state_dict` copies them into the module's parameters and buffers,
# `from_pretrained` builds a part with the checkpoint's weights (transformers, diffusers; nn.Embedding's too).
_RESTORING_METHODS = frozenset({"load_state_dict", "from_pretrained"})


def restores_own_weights(summary, info) -> CallEvent | None:
    """The call by which a model class of the workspace gives itself trained weights while it is built: its
    ``__init__`` (its own or a workspace base's), or a method of its own that ``__init__`` calls, loads a checkpoint
    (``torch.load``) or copies one in (``self.load_state_dict(...)``, ``nn.Embedding.from_pretrained(w)``). An
    instance of it holds a trained model however the caller builds it; None when no such call is read."""
    init = info.find_method("__init__", summary)
    return _restoring_call(summary, info, init, 0) if init is not None else None


def _restoring_call(summary, info, function, depth: int) -> CallEvent | None:
    inner = function.analysis(info.home or summary)
    if inner is None:
        return None
    for call in inner.calls():
        if call.method in _RESTORING_METHODS or libraries.call_fact(call.callee, libraries.UNPICKLES_OBJECT) is not None:
            return call
        helper = call.function
        if depth == 0 and helper is not None and helper.owner is not None and call.receiver_key == "self":
            found = _restoring_call(summary, info, helper, depth + 1)
            if found is not None:
                return found
    return None


def made_up_inputs(summary, call: CallEvent) -> bool:
    """Every argument of the call is a tensor a torch factory makes up (random or constant): no data goes in, so
    the forward probes shapes or activations rather than infers anything."""
    inputs = [value.site[1] if value.site is not None else None for value in call.args]
    return bool(inputs) and all(
        isinstance(node, cst.Call) and (name := dotted(node.func)) is not None
        and torchapi.is_torch_name(summary.canonical(name)) and last_part(name) in _MADE_UP_TENSORS
        for node in inputs
    )


def argument_passed(call: CallEvent, function, parameter: str) -> cst.Arg | None:
    """The argument ``call`` writes for ``parameter`` of ``function`` (a ``FunctionInfo``), by keyword or by
    position; None when it passes none there or hides it (``*args``, ``**kwargs``)."""
    if any(arg.star for arg in call.arg_nodes):
        return None
    passed = call.keyword(parameter)
    if passed is None:
        positional = function.positional_parameters
        plain = [arg for arg in call.arg_nodes if arg.keyword is None]
        if parameter not in positional or positional.index(parameter) >= len(plain):
            return None
        passed = plain[positional.index(parameter)]
    return passed


def passed_expression(call: CallEvent, function, parameter: str) -> cst.BaseExpression | None:
    """The expression ``call`` passes for ``parameter`` of ``function`` (a ``FunctionInfo``), by keyword
    or by position; None when it passes none there or hides it (``*args``, ``**kwargs``). A name
    passed stands for what the calling function gave it before the call, when it gave it exactly
    once and outside any loop (``module=partial_module``)."""
    passed = argument_passed(call, function, parameter)
    if passed is None:
        return None
    expression = passed.value
    if isinstance(expression, cst.Name):
        events = call.scope.events
        before = events[: events.index(call)] if call in events else []
        given = [event for event in before if isinstance(event, AssignEvent) and expression.value in event.targets]
        if len(given) == 1 and given[0].targets == (expression.value,) and not given[0].context.loops and given[0].value_node is not None:
            return given[0].value_node
    return expression


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


def ordered_calls(
    scope: ScopeAnalysis, loop: Loop | None, *, depth: int = MAX_CALL_DEPTH,
) -> Iterator[tuple[CallEvent, tuple[CallEvent, ...]]]:
    """Like calls_in, but each call comes with the chain of local calls that led to it (for evidence)."""
    if loop is None and depth == MAX_CALL_DEPTH:
        return iter(_followed(scope, "calls"))
    return _ordered(scope, loop, depth, (), {}, calls_only=True)


def ordered_events(
    scope: ScopeAnalysis, loop: Loop | None, *, depth: int = MAX_CALL_DEPTH,
) -> Iterator[tuple[Event, tuple[CallEvent, ...]]]:
    """Like ordered_calls, but every kind of event (``p.grad = None``, ``continue``), in program order."""
    if loop is None and depth == MAX_CALL_DEPTH:
        return iter(_followed(scope, "events"))
    return _ordered(scope, loop, depth, (), {}, calls_only=False)


def _followed(scope: ScopeAnalysis, kind: str) -> list:
    """``ordered_calls`` or ``ordered_events`` of a whole scope, kept with the scope while the flows of
    the functions it followed are the same (a key in one method of a long class: every rule asked
    this of every method again). The calls are the events' calls: a walk that skips the other events
    follows the same calls, in the same order, into the same flows."""
    kept = scope.followed.get(kind)
    if kept is not None and all(function._analysis is analysis for function, analysis in kept[1]):
        note_flows(kept[1])  # what asking for them again would have recorded
        return kept[0]
    events = _followed(scope, "events") if kind == "calls" else None
    if events is not None:
        items = [item for item in events if isinstance(item[0], CallEvent)]
        scope.followed[kind] = (items, scope.followed["events"][1])
        return items
    reads: dict = {}
    items = []
    _ordered_into(items, scope, MAX_CALL_DEPTH, (), reads)
    scope.followed[kind] = (items, tuple(reads.items()))
    return items


def follows_none(scope: ScopeAnalysis, needs: Callable[[Event], bool]) -> bool:
    """Whether none of the events ``ordered_events(scope, None)`` gives (the scope's own, and those of
    the local functions it calls) is one ``needs`` picks out; kept with the scope's list of them. Those
    events are the own events of the scope and of each flow the list was read from (a flow met again
    inside its own call is one whose events are already there), so the answer is read flow by flow,
    each flow's kept with it: a key in a function that calls thirty others reads only its own events."""
    events = _followed(scope, "events")
    kept = scope.followed.get((follows_none, needs))
    if kept is None or kept[1][0] is not events:  # (the answer, (the list it was read from,))
        flows = scope.followed["events"][1]
        found = _holds_one(scope, needs) or any(flow is not None and _holds_one(flow, needs) for _, flow in flows)
        kept = scope.followed[(follows_none, needs)] = (not found, (events,))
    return kept[0]


def _holds_one(flow: ScopeAnalysis, needs: Callable[[Event], bool]) -> bool:
    """Whether one of the flow's own events is one ``needs`` picks out; kept with the flow (a walk
    resumed from an edit starts its ``followed`` empty)."""
    kept = flow.followed.get((_holds_one, needs))
    if kept is None:
        kept = flow.followed[(_holds_one, needs)] = (any(needs(event) for event in flow.events), ())
    return kept[0]


def _ordered_into(items: list, scope: ScopeAnalysis, depth: int, stack: tuple, reads: dict) -> None:
    """``_ordered`` of a whole scope, every event, appended to ``items``: the same items in the same
    order, without a generator per level of calls for every item (``__init__`` of a long class follows
    hundreds of methods)."""
    summary = scope.summary
    for event in scope.events:
        items.append((event, stack))
        function = event.function if isinstance(event, CallEvent) else None
        if depth > 0 and function is not None:
            inner = reads[function] = function.analysis(summary)
            if inner is not None and all(call.function is not function for call in stack):
                _ordered_into(items, inner, depth - 1, (*stack, event), reads)


def _ordered(
    scope: ScopeAnalysis, loop: Loop | None, depth: int, stack: tuple, reads: dict, *, calls_only: bool,
) -> Iterator[tuple[Any, tuple[CallEvent, ...]]]:
    """The events (only the calls, with ``calls_only``) of ``scope`` in ``loop``, each followed by
    those of the local function it calls, ``depth`` calls deep; the flows it reads go into ``reads``."""
    for event in events_in(scope, loop):
        is_call = isinstance(event, CallEvent)
        if calls_only and not is_call:
            continue
        yield event, stack
        if depth > 0 and is_call and event.function is not None:
            inner = reads[event.function] = event.function.analysis(scope.summary)
            if inner is not None and all(call.function is not event.function for call in stack):
                yield from _ordered(inner, None, depth - 1, (*stack, event), reads, calls_only=calls_only)


def loops_running(scope: ScopeAnalysis, predicate: Callable[[CallEvent], bool]) -> dict[Loop, CallEvent]:
    """Loops of ``scope`` whose own iterations run a call matching ``predicate``, with the first such call.

    The call counts when it sits in the loop's body or in a local function called there without
    another loop in between: a loop that only holds the training loop (an epoch loop) is not one.
    For a predicate defined at a module's top level (``is_backward``) the answer is kept with the
    scope: rules and the script reader ask it of every scope at every key. Callers do not change it.
    """
    qualified = getattr(predicate, "__qualname__", "<>")
    if "<" not in qualified and "." not in qualified:
        # none found: kept while each function walked again follows no matching call either
        matching = _CALLS_MATCHING.get(predicate)
        if matching is None:
            matching = _CALLS_MATCHING[predicate] = lambda event: isinstance(event, CallEvent) and predicate(event)
        return kept_with_scope(
            scope, (loops_running, predicate), lambda: _loops_running(scope, predicate), lambda flow: follows_none(flow, matching),
        )
    return _loops_running(scope, predicate)


# ``loops_running``'s predicates (module-level functions) as questions of any event, one object each: ``follows_none``
# keeps its answer under the question it was asked.
_CALLS_MATCHING: dict[Callable[[CallEvent], bool], Callable[[Event], bool]] = {}


def _loops_running(scope: ScopeAnalysis, predicate: Callable[[CallEvent], bool]) -> dict[Loop, CallEvent]:
    found: dict[Loop, CallEvent] = {}
    for call, chain in ordered_calls(scope, None):
        called_from_loop = (*chain[1:], call) if chain else ()
        if not predicate(call) or any(link.context.loops for link in called_from_loop):
            continue
        loops = (chain[0] if chain else call).context.loops
        if loops:
            found.setdefault(loops[-1], call)
    return found


def path_conditions(event: Event, chain: tuple[CallEvent, ...], loop: Loop | None) -> tuple[Condition, ...]:
    """What must hold, within one iteration of ``loop``, for ``event`` to run: the conditions around
    the call site inside the loop and every condition along the chain of local calls."""
    first, *rest = (*chain, event)
    conditions = list(first.context.conditions_inside(loop))
    for link in rest:
        conditions.extend(link.context.conditions)
    return tuple(conditions)


_TEST_FILE = re.compile(r"(^|[/\\])(tests?[/\\]|testing[/\\]|test_[^/\\]*\.py$|[^/\\]*_test\.py$|conftest\.py$)")


_WORD = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+")
# Words of a function name that mark an evaluation pass.
_EVAL_NAME_WORDS = frozenset(
    {"eval", "evaluate", "evaluation", "evaluating", "validate", "validation", "validating", "val",
     "valid", "test", "testing", "predict", "prediction", "inference"}
)
# "shape inference", "metadata inference", "type inference" work out shapes and types, not predictions
_NOT_EVAL_QUALIFIERS = frozenset({"shape", "shapes", "metadata", "meta", "type", "types", "dtype", "schema", "signature"})


def name_words(text: str) -> set[str]:
    """The lower-cased words of an identifier or expression: ``valLoader`` -> {"val", "loader"}."""
    return {word.lower() for word in _WORD.findall(text)}


def is_eval_name(name: str) -> bool:
    """A function named for an evaluation pass: ``validate``, ``eval_epoch``, ``predict_step``."""
    words = name_words(name)
    return bool(words & _EVAL_NAME_WORDS) and not (words & _NOT_EVAL_QUALIFIERS and "inference" in words)


def is_test_file(path: str) -> bool:
    """A test suite's file (``tests/``, ``testing/``, ``test_*.py``, ``*_test.py``, ``conftest.py``): it exercises
    models with tiny inputs on purpose, it is not a training or evaluation run."""
    return _TEST_FILE.search(path) is not None


_CLEARING_NAME = re.compile(r"^_?(?:zero_?grads?|clear_?grads?|reset_?grads?|_foreach_zero_)$")
_GRADIENT_KEY = re.compile(r"\.grad(?:\.data)?$")


def clears_gradients(event: Event) -> bool:
    """``optimizer.zero_grad()``, ``model.zero_grad()``, ``p.grad = None``, ``p.grad.zero_()``, a
    ``set_to_none=`` call, or a helper named for it (``zero_grads(model)``)."""
    if isinstance(event, AssignEvent):
        # ``p.grad /= n`` and ``p.grad = p.grad / n`` rescale what is there; anything else replaces it
        if isinstance(event.node, cst.AugAssign):
            return False
        replaced = [key for key in event.targets if key.endswith(".grad")]
        return bool(replaced) and not (event.value_node is not None and ".grad" in event.scope.chunk.code_for(event.value_node))
    if not isinstance(event, CallEvent):
        return False
    name = event.method or (event.callee or "").rpartition(".")[2]
    if _CLEARING_NAME.match(name) or event.keyword("set_to_none") is not None:
        return True
    return event.method in {"zero_", "fill_", "copy_"} and is_gradient_key(event.receiver_key)


def is_gradient_key(key: str | None) -> bool:
    """A flow key naming a parameter's gradient: ``p.grad``, ``p.grad.data``."""
    return key is not None and _GRADIENT_KEY.search(key) is not None


def mentions(scope: ScopeAnalysis, node: cst.CSTNode, name: str) -> bool:
    text = scope.chunk.code_for(node)
    return re.search(rf"(?<![\w.]){re.escape(name)}(?!\w)", text) is not None


def comes_from_call(value: Value, node: cst.Call, *, by_site: bool = False) -> bool:
    """Does ``value`` come from the call ``node`` (also through `enumerate`/`zip`)? ``by_site``: a value
    established at that call counts too, not only one whose detail is the call's event."""
    detail = value.detail
    if isinstance(detail, tuple) and detail and detail[0] == "enumerate":
        return comes_from_call(detail[1], node, by_site=by_site)
    if isinstance(detail, tuple) and detail and detail[0] == "zip":
        return any(comes_from_call(item, node, by_site=by_site) for item in detail[1])
    if isinstance(detail, CallEvent) and detail.node is node:
        return True
    return by_site and value.site is not None and value.site[1] is node


def written(event: Event, limit: int = 50) -> str:
    """An event's code as a message quotes it."""
    return shortened(event.chunk.code_for(event.node), limit)


def first_written(events: Sequence[EventT]) -> EventT:
    """The event written first in the file; positions are computed for its statement only."""
    earliest = min(event.chunk.index for event in events)
    return min((event for event in events if event.chunk.index == earliest), key=lambda e: e.chunk.line_of(e.node))


# ---------------------------------------------------------------------------------------------- loops
# What a loop iterates, read from the names of its iterable once wrappers are peeled off.
_PEELED_WRAPPERS = frozenset({
    "enumerate", "zip", "tqdm", "tqdm.tqdm", "tqdm.auto.tqdm", "iter", "itertools.islice", "islice",
    "itertools.cycle", "cycle", "rich.progress.track", "track", "progress_bar", "itertools.chain", "chain",
})
_DATA_WORDS = re.compile(
    r"(?:^|_)(?:loader|dataloader|dl|batches|dataset|ds|data|iterator|stream|episodes|rollouts|epochs)(?:$|_)|(?:loader|batches)$",
    re.I,
)
_COUNT_WORDS = re.compile(
    r"epoch|(?:^|[^a-z])(?:num_|max_|total_|train_|n_)?(?:steps|iters|iterations|updates|episodes|batches)(?:$|[^a-z])"
    r"|len\([^)]*(?:loader|dataset|batches|data)\b",
    re.I,
)
# Loops that count something per step rather than steps: a sampler's denoising steps, a warm-up.
_NOT_STEP_WORDS = re.compile(r"inference|denois|timestep|sampling|warmup|warm_up|generation", re.I)


def repeats_per_step(scope: ScopeAnalysis, loop: Loop) -> str | None:
    """Positive evidence that ``loop`` runs once per training or evaluation step (or epoch), so
    what it keeps grows with the run; a description of that evidence, or None.

    Strong evidence: a backward or optimizer step in its body (also through local functions), or
    an iterable that is a DataLoader or dataset (also inside ``enumerate``/``zip``/``tqdm``).
    Names count too, except in a method of an nn.Module or a pipeline (a model's forward loops
    over its own chunks, tiles and frames; what it keeps is its output): an iterable named like
    data (``train_loader``, ``batches``), a ``range`` over a number of steps or epochs, ``while
    True`` or a ``while`` over steps. A loop over two text encoders, over a tensor's chunks, or
    ``range(args.num_validation_images)`` is no such loop.
    """
    if loop._per_step is False:
        loop._per_step = _per_step_evidence(scope, loop)
    return loop._per_step  # type: ignore[return-value]


# A loop over the micro-batches of one optimizer step: `for microbatches in microbatch_groups`,
# `for micro_batch in micro_batches`, `for _ in range(grad_accum_steps)`.
_ONE_STEP_WORDS = re.compile(r"micro_?batch|accum", re.I)


def kept_for_one_step(store: StoreEvent, loop: Loop) -> bool:
    """``loop`` walks the micro-batches of one optimizer step (gradient accumulation) and the container
    ``store`` fills is bound in this function: each call of the step starts a new one, which grows by
    the number of micro-batches, not with the run. A container that lives on (``self.losses``, a
    parameter, a global) is not: it keeps every step's entries."""
    return store.container_loop != "outer" and _ONE_STEP_WORDS.search(loop.iterable_text or "") is not None


def _inside_model_method(scope: ScopeAnalysis) -> bool:
    owner = scope.function.owner if scope.function is not None else None
    return owner is not None and scope.summary.local_class_kind(owner).kind in {libraries.MODULE, libraries.PIPELINE}


# ``repeats_per_step``'s evidence when the loop's first sign of a step is a backward (TL104 asks whether an
# optimizer steps on it too).
BACKWARD_EVERY_ITERATION = "a backward runs every iteration"


def _per_step_evidence(scope: ScopeAnalysis, loop: Loop) -> str | None:
    for call in calls_in(scope, loop):
        if accumulates_into_grad(call) or call.method == "backward":
            return BACKWARD_EVERY_ITERATION
        if is_optimizer_step(call):
            return "an optimizer steps every iteration"
    node = loop.node
    if isinstance(node, cst.For):
        for part in peeled(node.iter):
            value = scope.value_at(part)
            if value is not None and value.tags & {LOADER, DATASET_MAP, DATASET_ITERABLE}:
                return f"it iterates `{shortened(scope.chunk.code_for(part), 40)}`, a data loader"
    if _inside_model_method(scope):
        return None
    if isinstance(node, cst.While):
        test = node.test
        if isinstance(test, (cst.Name, cst.Integer)) and (getattr(test, "value", "") in {"True", "1"}):
            return "`while True` runs until the run stops"
        text = scope.chunk.code_for(test)
        return f"`while {shortened(text, 40)}` counts steps" if _COUNT_WORDS.search(text) and not _NOT_STEP_WORDS.search(text) else None
    for part in peeled(node.iter):
        value = scope.value_at(part)
        if value is not None and TENSOR in value.tags and CONTAINER not in value.tags:
            continue  # the rows or chunks of one tensor (`torch.split(x, n)`), whatever its name
        if isinstance(part, cst.Call) and dotted(part.func) in {"range", "trange"}:
            text = scope.chunk.code_for(part)
            if _COUNT_WORDS.search(text) and not _NOT_STEP_WORDS.search(text):
                return f"`{shortened(text, 40)}` counts steps or epochs"
            continue
        name = dotted(part.func if isinstance(part, cst.Call) else part)
        if name is not None and _DATA_WORDS.search(last_part(name)) and not _NOT_STEP_WORDS.search(name):
            return f"it iterates `{shortened(scope.chunk.code_for(part), 40)}`, batches of data"
    return None


def peeled(expression: cst.BaseExpression) -> list[cst.BaseExpression]:
    """The iterables under ``enumerate(tqdm(zip(a, b)))``: [a, b]."""
    if isinstance(expression, cst.Call) and dotted(expression.func) in _PEELED_WRAPPERS:
        parts: list[cst.BaseExpression] = []
        for arg in expression.args:
            if arg.keyword is None and not arg.star:
                parts.extend(peeled(arg.value))
        return parts
    return [expression]


_CLEARING = frozenset({"clear", "pop", "popleft"})


def bounded_or_emptied(scope: ScopeAnalysis, container: str, loop: Loop) -> bool:
    """A `deque(maxlen=...)`, a container cleared, rebound or drained inside the loop (every N steps,
    say), or a loop that stops when what it fills reaches a size: what it holds does not grow with the run."""
    for index, expression, _ in scope.summary.bindings.get(container, ()):
        if "maxlen" in scope.summary.chunks[index].code_for(expression):
            return True
    for other in scope.events:
        if isinstance(other, AssignEvent) and container in other.targets:
            if other.value_node is not None and "maxlen" in scope.chunk.code_for(other.value_node):
                return True
            if loop in other.context.loops and not (other.value_node is not None and mentions(scope, other.value_node, container)):
                return True  # rebound each iteration (or every N), not `total = total + x`: it does not grow without bound
        if isinstance(other, CallEvent) and loop in other.context.loops and other.receiver_key == container and other.method in _CLEARING:
            return True
        if isinstance(other.node, cst.Del) and loop in other.context.loops and container in scope.chunk.code_for(other.node):
            return True
    return _stops_at_a_length(scope, loop)


def replaces_a_list_item(scope: ScopeAnalysis, store: StoreEvent) -> bool:
    """``items[i] = x`` into a container last bound to a list (``[v]``, ``[None] * n``, ``list(...)``): the
    item at that place is replaced; the list does not grow (a solver's window of previous steps)."""
    if store.kind != "subscript":
        return False
    binding = scope.last_binding(store.container, before=store)
    bound = binding.value_node if binding is not None else None
    if isinstance(bound, cst.BinaryOperation) and isinstance(bound.operator, cst.Multiply):
        bound = bound.left  # `[None] * n`
    return isinstance(bound, (cst.List, cst.ListComp)) or (isinstance(bound, cst.Call) and dotted(bound.func) == "list")


_KEY_VIEWS = frozenset({"items", "keys"})


def overwrites_its_keys(scope: ScopeAnalysis, store: StoreEvent, loop: Loop) -> bool:
    """``inputs["input_ids"] = ids.to(device)``, or ``data[key] = val.to(device)`` under
    ``for key, val in batch.items():``: the key takes the same few values on every iteration of
    ``loop`` (a literal, a mapping's keys, a collection bound before the loop), so each iteration
    overwrites what the last one wrote and the dict does not grow with the run; so does a rollout buffer's
    ``rewards[step] = r`` under ``for step in range(num_steps):`` nested in it, a count fixed before ``loop``.
    A key counted by the loop (``outputs[step] = ...``, a sample's id) is growth."""
    if store.kind != "subscript" or not isinstance(store.node, cst.Assign) or len(store.node.targets) != 1:
        return False
    target = store.node.targets[0].target
    if not isinstance(target, cst.Subscript) or len(target.slice) != 1 or not isinstance(target.slice[0].slice, cst.Index):
        return False
    key = target.slice[0].slice.value
    if isinstance(key, (cst.SimpleString, cst.ConcatenatedString)):
        return True
    if not isinstance(key, cst.Name):
        return False
    for inner in store.context.loops:
        if inner is loop or not loop.encloses(inner) or key.value not in inner.targets or not isinstance(inner.node, cst.For):
            continue
        iterable = inner.node.iter
        if isinstance(iterable, cst.Call) and isinstance(iterable.func, cst.Name) and iterable.func.value == "range":
            counts = {node.value for arg in iterable.args for node in walk(arg.value) if isinstance(node, cst.Name)}
            return inner.targets == (key.value,) and not counts & set(loop.targets) and not any(
                isinstance(event, AssignEvent) and counts & set(event.targets) for event in events_in(scope, loop))
        if isinstance(iterable, cst.Call) and isinstance(iterable.func, cst.Attribute) and iterable.func.attr.value in _KEY_VIEWS:
            return not iterable.args and len(inner.targets) <= 2 and inner.targets[:1] == (key.value,)
        return isinstance(iterable, cst.Name) and iterable.value not in loop.targets and not any(
            isinstance(event, AssignEvent) and iterable.value in event.targets for event in events_in(scope, loop)
        )
    return False


def _stops_at_a_length(scope: ScopeAnalysis, loop: Loop) -> bool:
    """The loop breaks once a container it fills reaches a size (``if len(images) >= n: break``): it
    collects a few examples, and everything it fills grows in step with that one."""
    in_loop = list(events_in(scope, loop))
    filled = {event.container for event in in_loop if isinstance(event, StoreEvent)}
    for event in in_loop:
        if not (isinstance(event, JumpEvent) and event.kind == "break" and event.context.loop is loop):
            continue
        for condition in event.context.conditions_inside(loop):
            nodes = list(walk(condition.test)) if condition.test is not None else []
            guards = {id(node.left) for node in nodes if isinstance(node, cst.Comparison) and _against_a_few(node)}
            for node in nodes:
                if (
                    isinstance(node, cst.Call) and dotted(node.func) == "len" and len(node.args) == 1
                    and dotted(node.args[0].value) in filled and id(node) not in guards
                ):
                    return True
    return False


def _against_a_few(comparison: cst.Comparison) -> bool:
    """``len(history) > 1``: a guard before reading the last items (a convergence test), not a size the
    loop stops at."""
    return all(
        isinstance(target.comparator, cst.Integer) and int(target.comparator.value) <= 2
        for target in comparison.comparisons
    )


# ------------------------------------------------------------------------------- mode by argument
_MODE_FLAGS = re.compile(r"^(?:is_)?(?:train|training|do_train|train_mode|is_train(?:ing)?|update|backprop|optimi[sz]e)$", re.I)


def mode_parameter(scope: ScopeAnalysis) -> str | None:
    """The parameter that decides whether a shared function trains or evaluates: every backward and
    optimizer step in ``run_epoch(model, loader, optimizer=None)`` or ``run(..., train=True)`` sits
    under a test of it (``if optimizer is not None:``, ``if train:``). None when some backward runs
    unconditionally or no parameter decides."""
    function = scope.function
    if function is None:
        return None
    params = [param for param in (*function.node.params.params, *function.node.params.kwonly_params)]
    candidates = {
        param.name.value for param in params
        if _MODE_FLAGS.match(param.name.value) or (param.default is not None and _is_none(param.default) and "optim" in param.name.value.lower())
    }
    if not candidates:
        return None
    decided: set[str] | None = None
    for call, chain in ordered_calls(scope, None):
        if not (is_backward(call) or is_optimizer_step(call)):
            continue
        tested = {name for condition in path_conditions(call, chain, None) if condition.test is not None
                  for name in candidates if mentions(scope, condition.test, name)}
        decided = tested if decided is None else decided & tested
        if not decided:
            return None
    return next(iter(sorted(decided))) if decided else None


def evaluation_calls(module, scope: ScopeAnalysis, parameter: str) -> list[CallEvent]:
    """Calls of the shared function that leave ``parameter`` off (``None``, ``False``, or its default
    when that is ``None``/``False``): the calls that only evaluate."""
    function = scope.function
    assert function is not None, "mode_parameter names a parameter of a function"
    params = function.node.params
    positional = function.positional_parameters
    declared = next(param for param in (*params.posonly_params, *params.params, *params.kwonly_params) if param.name.value == parameter)
    default_off = declared.default is not None and (_is_none(declared.default) or _is_false(declared.default))
    found = []
    for call in module.calls_of(function):
        if any(arg.star for arg in call.arg_nodes):
            continue
        passed = call.keyword(parameter)
        node = passed.value if passed is not None else None
        if node is None and parameter in positional:
            index = positional.index(parameter)
            plain = [arg for arg in call.arg_nodes if arg.keyword is None]
            node = plain[index].value if index < len(plain) else None
        if (node is None and default_off) or (node is not None and (_is_none(node) or _is_false(node))):
            found.append(call)
    return found


def _is_none(node: cst.BaseExpression) -> bool:
    return isinstance(node, cst.Name) and node.value == "None"


def _is_false(node: cst.BaseExpression) -> bool:
    return isinstance(node, cst.Name) and node.value == "False"


# ---------------------------------------------------------------------------- what a container keeps

_ON_HOST_TEXT = re.compile(r"\.(?:cpu|item|tolist|numpy)\(\)\s*$|^(?:float|int|bool|str)\(")
# Reductions of a whole tensor to one number when called without a dimension.
_FULL_REDUCTIONS = frozenset({"sum", "mean", "max", "min", "norm", "prod", "std", "var", "amax", "amin", "logsumexp"})
# Methods that keep a tensor's shape: `loss.detach()` is as scalar as `loss`.
_SHAPE_KEEPING = frozenset({"detach", "clone", "float", "double", "half", "bfloat16", "contiguous", "requires_grad_"})


def kept_on_the_gpu(module, scope: ScopeAnalysis, store: StoreEvent) -> tuple | None:
    """Evidence that the tensor ``store`` keeps lives on the GPU (its site and a note), or None: on the
    accelerator by the dataflow, what a called value (a model, a module handed in) returns for an input on the
    accelerator, or the model's output or generated ids in a script that runs on CUDA."""
    text = scope.chunk.code_for(store.value_node).strip()
    if _ON_HOST_TEXT.search(text):
        return None
    value = store.value
    if ON_DEVICE in value.tags and MODEL not in value.tags:
        return ((scope.chunk, store.value_node), f"`{text}` is on the accelerator")
    producers = []
    if TENSOR in value.tags and value.site is not None:
        producers.append(_call_at(module, scope, value.site[1]))
    base = _derived_from(store.value_node)
    if base is not None:
        # `ids = model.generate(...)` on a receiver the analysis does not know; `logits.softmax(-1)`, `out.argmax(1)`
        producers.append(_last_assigned_call(scope, store, base))
    producers += [  # through the names it was bound to, only what a model computes
        call for call, followed in _computed_from_calls(scope, store.value_node, store)
        if not followed or call.method in {None, "forward"} or (call.receiver is not None and MODEL in call.receiver.tags)
    ]
    for producer in producers:
        if producer is not None and _runs_on_the_accelerator(producer):
            return ((producer.scope.chunk, producer.node), f"what `{shortened(producer.scope.chunk.code_for(producer.node), 40)}` "
                    "returns for an input on the accelerator, on the GPU")
    if module.cuda_line is None:
        return None
    for producer in producers:
        if producer is not None and (producer.method == "generate" or (producer.receiver is not None and MODEL in producer.receiver.tags)):
            what = "generated ids" if producer.method == "generate" else "the model's output"
            return ((producer.scope.chunk, producer.node), f"{what}, on the GPU (the script runs on CUDA, line {module.cuda_line})")
    return None


def _runs_on_the_accelerator(call: CallEvent) -> bool:
    """A value the code calls (a model, or a module or function it was handed: `net(x)`, `self.teacher(x)`) given a
    tensor on the accelerator as its input: torch computes on the device of its inputs, so what it returns lives there."""
    given = call.args[0] if call.args and call.arg_nodes and call.arg_nodes[0].keyword is None else None
    called = call.method in {None, "forward"} or MODEL in call.receiver.tags if call.receiver is not None else False  # or a model's method
    return called and given is not None and ON_DEVICE in given.tags


def _call_at(module, scope: ScopeAnalysis, node: cst.CSTNode) -> CallEvent | None:
    """The call ``node`` of ``scope``, or of a local function it calls (``obj, out = self.objective(x, y)``
    returns the output of the model call inside ``objective``)."""
    found = next((call for call in scope.calls() if call.node is node), None)
    if found is not None:
        return found
    for call in scope.calls():
        callee = call.function.analysis(module.summary) if call.function is not None else None
        found = next((inner for inner in callee.calls() if inner.node is node), None) if callee is not None else None
        if found is not None:
            return found
    return None


def on_the_host(text: str) -> bool:
    """``x.cpu()``, ``x.item()``, ``x.tolist()``, ``float(x)``: an expression whose value is kept off the GPU."""
    return _ON_HOST_TEXT.search(text.strip()) is not None


def keeps_one_number(scope: ScopeAnalysis, store: StoreEvent) -> bool:
    """The kept tensor holds one number: a loss with a reducing criterion, or a whole-tensor reduction
    (``out.sum()``, ``torch.mean(x)``), directly or through the name it was bound to. Kept every step it
    costs one allocator block (512 bytes), not a batch's worth of activations or outputs."""
    if is_scalar_loss(store.value):
        return True
    expression = _without_shape_keeping(store.value_node)
    if isinstance(expression, cst.Name):
        binding = scope.last_binding(expression.value, before=store)
        if binding is None or binding.value_node is None:
            return False
        if is_scalar_loss(binding.value):
            return True
        expression = _without_shape_keeping(binding.value_node)
    return _is_full_reduction(expression)


def is_scalar_loss(value: Value) -> bool:
    """A loss computed with the default (or a summing) reduction: `.item()` works on it."""
    if LOSS not in value.tags or value.site is None:
        return False
    _, call = value.site
    calls = [call]
    if isinstance(value.detail, Value) and value.detail.site is not None:
        calls.append(value.detail.site[1])  # the criterion's construction: `nn.CrossEntropyLoss(reduction=...)`
    for node in calls:
        if not isinstance(node, cst.Call):
            return False
        for arg in node.args:
            if arg.keyword is not None and arg.keyword.value == "reduction":
                if not (isinstance(arg.value, cst.SimpleString) and literal_value(arg.value) in {"mean", "sum"}):
                    return False
    return True


def _without_shape_keeping(expression: cst.BaseExpression) -> cst.BaseExpression:
    while (
        isinstance(expression, cst.Call) and isinstance(expression.func, cst.Attribute)
        and expression.func.attr.value in _SHAPE_KEEPING
    ):
        expression = expression.func.value
    return expression


def _is_full_reduction(expression: cst.BaseExpression) -> bool:
    if not isinstance(expression, cst.Call):
        return False
    name = dotted(expression.func)
    if isinstance(expression.func, cst.Attribute) and expression.func.attr.value in _FULL_REDUCTIONS:
        method_of_torch = name is not None and name.startswith(("torch.", "th."))
        arguments = expression.args[1:] if method_of_torch else expression.args
        return len(expression.args) >= (1 if method_of_torch else 0) and not arguments
    return False


def _derived_from(expression: cst.BaseExpression) -> str | None:
    """The name a tensor expression is computed from by methods and indexing: ``logits`` in
    ``logits.softmax(-1)[:, 1]``; a host copy (``.cpu()``, ``.item()``) is caught before this."""
    while True:
        if isinstance(expression, cst.Call) and isinstance(expression.func, cst.Attribute):
            expression = expression.func.value
        elif isinstance(expression, (cst.Subscript, cst.Attribute)):
            expression = expression.value
        else:
            return expression.value if isinstance(expression, cst.Name) else None


def _computed_from_calls(scope: ScopeAnalysis, expression: cst.BaseExpression, before: Event) -> list[tuple[CallEvent, bool]]:
    """The calls whose result ``expression`` is computed from by torch functions, methods and indexing:
    ``net(x)`` in ``torch.sigmoid(net(x)).squeeze(1)`` or ``F.softmax(self.net.forward(x), -1)[:, 1]``. A torch
    function computes on the device of the tensor it is given, so the result lives where the call's did. A name it
    is computed from is followed to its binding before ``before``, two bindings back at most and none a host copy
    (``emb = net(x)``; ``emb = F.normalize(emb)``; ``kept.append(torch.sigmoid(emb))``); each call comes with
    whether it was found through such a binding."""
    calls = {id(call.node): call for call in scope.calls()}
    found: list[tuple[CallEvent, bool]] = []
    for hop in range(3):
        while isinstance(expression, (cst.Subscript, cst.Call)):
            call = calls.get(id(expression)) if isinstance(expression, cst.Call) else None
            found += [(call, hop > 0)] if call is not None else []
            if isinstance(expression, cst.Subscript):
                expression = expression.value
            elif call is not None and call.callee is not None and call.callee.startswith("torch."):
                given = expression.args[0] if expression.args and expression.args[0].keyword is None and not expression.args[0].star else None
                if given is None:
                    return found
                expression = given.value  # `torch.sigmoid(net(x))`: what the function was given
            elif isinstance(expression.func, cst.Attribute):
                expression = expression.func.value  # `net(x).squeeze(1)`: the tensor the method runs on
            else:
                return found
        binding = scope.last_binding(expression.value, before=before) if isinstance(expression, cst.Name) else None
        if binding is None or binding.value_node is None or on_the_host(scope.chunk.code_for(binding.value_node)):
            return found
        expression, before = binding.value_node, binding
    return found


def _last_assigned_call(scope: ScopeAnalysis, before: StoreEvent, name: str) -> CallEvent | None:
    assigned = None
    for other in scope.events:
        if other is before:
            break
        if isinstance(other, AssignEvent) and other.targets == (name,) and isinstance(other.value_node, cst.Call):
            assigned = other.value_node
    return next((call for call in scope.calls() if call.node is assigned), None) if assigned is not None else None
