"""GPU tensors kept every iteration in a container that outlives the loop: VRAM grows until the run dies.

Outputs, generated token ids, rewards or logits appended to a list for later metrics stay on the
GPU as long as the list holds them. Without a graph each is small, but the list grows every step:
memory climbs for hours and the run dies with CUDA out-of-memory near the end of an epoch (or of
the first evaluation), after the GPU time is spent. It is the device cousin of the retained-graph
leak and just as silent: probabilities kept for a whole validation set, Accelerate's
`gather_for_metrics` results (they live on the device), rewards of an RL rollout. A method the loop
calls every batch that appends to a list the object keeps (`self.outputs.append(logits)`) grows it
for the object's lifetime, unless the class empties it somewhere. A method Lightning calls once per batch
(`validation_step`, a callback's `on_predict_batch_end`) that keeps what it is handed in an attribute
gathers a whole epoch on the module's device before the epoch-end hook empties it: a note, or a warning
where the file shows CUDA. A `while` loop that backwards or steps an optimizer is a training loop whatever its
test says, and a tensor a local function made and returned (`obj, pred = self.objective(x, y)`) is the model's
output when the call inside it is. A `for` loop walks batches when each element it draws is moved to the
accelerator, fed to a model or to a loss, whatever its iterable is called; what a called model or helper returns
for an input on the accelerator lives there.

How to fix: keep host copies, `preds.append(out.detach().cpu())` (or `.item()`, `.tolist()` for
scalars and ids), or reduce on the GPU as you go (`total += out.sum()`), or clear the container
every N steps.
"""

from __future__ import annotations

import re

import libcst as cst

from trainlint.analysis.data_loops import draws_batches, walks_listed_items, walks_one_step
from trainlint.analysis.frameworks import per_batch_hook
from trainlint.analysis.passed_values import empties_attribute
from trainlint.analysis.patterns import (
    BACKWARD_EVERY_ITERATION,
    bounded_or_emptied,
    keeps_one_number,
    kept_for_one_step,
    kept_on_the_gpu,
    on_the_host,
    overwrites_its_keys,
    replaces_a_list_item,
)
from trainlint.rules import (
    UNKNOWN,
    AssignEvent,
    CallEvent,
    Fires,
    Loop,
    Quiet,
    Rule,
    RuleContext,
    ScopeAnalysis,
    Severity,
    StoreEvent,
    Tag,
    calls_in,
    dotted,
    is_backward,
    is_known_tensor,
    is_optimizer_step,
    is_test_file,
    mentions,
    ordered_events,
    repeats_per_step,
    walk,
    written,
)

_DATA_WORDS = re.compile(r"loader|batches|dataset|\bdata\b|eval_sets|prompts|episodes|rollouts|env", re.I)
_STEP_WORDS = re.compile(r"step|epoch|True", re.I)
# A container named as a cache holds one entry per sample on purpose (precomputed embeddings).
_CACHE_NAME = re.compile(r"cache", re.I)


def _with_added_items(scope: ScopeAnalysis):
    """The scope's events, where `kept += [out]` (or `+= (out, y)`) stands for an append of each item written in
    the list: adding a list to a list extends it in place, as `kept.extend([out])` would."""
    for event in scope.events:
        written_out = event.value_node if isinstance(event, StoreEvent) and event.kind == "augassign" else None
        if not isinstance(event, StoreEvent) or not isinstance(written_out, (cst.List, cst.Tuple)) or not written_out.elements:
            yield event
            continue
        for element in written_out.elements:
            if isinstance(element, cst.Element):
                value = scope.value_at(element.value) or UNKNOWN
                yield StoreEvent(event.node, event.context, scope, kind="append", container=event.container,
                                 container_loop=event.container_loop, value=value, value_node=element.value)


class DeviceAccumulation(Rule):
    code = "TL104"
    name = "device-accumulation"
    severity = Severity.WARNING

    def check_scope(self, ctx: RuleContext, scope: ScopeAnalysis) -> None:
        if is_test_file(ctx.module.path):
            return  # a test collects a few tiny batches on purpose
        hook = per_batch_hook(ctx.summary, scope.function)
        for event in _with_added_items(scope):
            if not isinstance(event, StoreEvent) or event.kind not in ("append", "extend", "insert", "subscript"):
                continue
            if hook is not None and not any(_steps_through_data(scope, loop) for loop in event.context.loops):
                self._check_hook_store(ctx, scope, event, hook)
                continue
            loop = next(
                (enclosing for enclosing in event.context.loops
                 if not kept_for_one_step(event, enclosing) and not walks_one_step(event, enclosing) and _steps_through_data(scope, enclosing)),
                None,
            )
            if loop is None or not event.outlives(loop) or Tag.GRAPH in event.value.tags:
                continue  # graph-carrying values are TL101's
            if event.kind == "subscript" and (
                _writes_into_tensor(scope, event) or replaces_a_list_item(scope, event) or overwrites_its_keys(scope, event, loop)
            ):
                continue  # `buffer[i:j] = x` fills a preallocated tensor, `window[-1] = x` replaces an item, `data[key] = x`
                # under `for key, val in batch.items()` overwrites last step's entry: none grows
            why = kept_on_the_gpu(ctx.module, scope, event)
            if why is None or bounded_or_emptied(scope, event.container, loop) or _CACHE_NAME.search(event.container):
                continue
            if keeps_one_number(scope, event):
                continue  # a loss kept per step costs one 512-byte block a step, not a batch of outputs
            if _reset_by_its_object(scope, event, loop) or _drained_by_a_slice(scope, event.container, loop):
                continue
            self._report(ctx, scope, event, loop, why)
        for loop in scope.loops:
            if _steps_through_data(scope, loop):
                for store, chain, why in _kept_by_a_method(ctx, scope, loop):
                    self._report_method(ctx, scope, loop, store, chain, why)
                for store, call, passed, why in _kept_by_a_helper(ctx, scope, loop):
                    self._report_helper(ctx, scope, loop, store, call, passed, why)
                for stores, call, why in _kept_by_a_held_object(ctx, scope, loop):
                    self._report_held(ctx, scope, loop, stores, call, why)

    def _check_hook_store(self, ctx: RuleContext, scope: ScopeAnalysis, store: StoreEvent, hook: str) -> None:
        """``self.predictions.append(outputs)`` in a method Lightning calls once per batch (a step method, a
        batch-end hook of the module or of a callback): the attribute gathers the whole epoch's tensors, on
        the device Lightning moved the batch to, until an epoch-end hook empties it. A warning where the
        file shows the GPU, a note where only the framework does (the Trainer may run on the CPU)."""
        if store.kind not in ("append", "extend", "insert") or Tag.GRAPH in store.value.tags:
            return  # graph-carrying values are TL101's
        container = store.container
        if not container.startswith("self.") or _CACHE_NAME.search(container) or keeps_one_number(scope, store):
            return
        if _emptied_in_the_hook(scope, container.partition("[")[0]):
            return
        stored = " ".join(scope.chunk.code_for(store.value_node).split())
        if _TO_THE_HOST.search(stored):
            return  # `move_to_device(out, "cpu")`: a host copy, whatever the helper's name says of devices
        why = kept_on_the_gpu(ctx.module, scope, store)
        severity = Severity.WARNING
        if why is None:
            handed = _handed_by_the_framework(scope, store)
            if handed is None:
                return
            why = ((scope.chunk, handed), f"`{stored}` comes from what Lightning hands the hook, on the module's device")
            severity = Severity.NOTE
        where = "on the GPU" if severity is Severity.WARNING else "on the module's device (the GPU when the Trainer runs on one)"
        ctx.report(
            store.node,
            f"`{stored}` is kept {where} in `{container}` every batch: {hook}, so the attribute gathers the "
            f"tensors of every batch until it is emptied, and VRAM grows with the size of the dataset",
            evidence=[why, ((scope.chunk, store.node), f"kept in `{container}`, which outlives the batch"),
                      ((scope.chunk, scope.function.node.name), hook)] if scope.function is not None else [why],
            severity=severity,
            help=f"keep a host copy (`{_without_host_copy_suffix(stored)}.detach().cpu()`, or `.item()` / `.tolist()`), "
                 "or reduce each batch to the numbers you need (a torchmetrics metric's `update`)",
        )

    def _report_held(self, ctx: RuleContext, scope: ScopeAnalysis, loop: Loop, stores: list[StoreEvent], call, why: tuple) -> None:
        """``self.tracker.add_batch(logits, labels)`` every batch, where the object the trainer holds appends what
        it is handed to lists of its own: they grow with every batch of every pass."""
        holders = ", ".join(f"`{call.receiver_key}.{store.container.partition('.')[2]}`" for store in stores)
        stored = ", ".join(f"`{' '.join(store.chunk.code_for(store.value_node).split())}`" for store in stores)
        ctx.report(
            call.node,
            f"{holders} {'grows' if len(stores) == 1 else 'grow'} every iteration of the loop on line "
            f"{ctx.line_of((scope.chunk, loop.node))}: `{written(call)}` appends {stored}, made from what it is handed, "
            f"which stays on the GPU: VRAM use climbs until the run runs out of memory",
            evidence=[
                why,
                *(((store.chunk, store.node), f"kept in `{store.container}` of the object `{call.receiver_key}` holds")
                  for store in stores),
                ((scope.chunk, call.node), f"`{written(call)}` runs it on every iteration"),
                ((scope.chunk, loop.node), "the loop"),
            ],
            help=f"pass host copies (`.detach().cpu()`) to `{written(call)}`, or have it keep them",
        )

    def _report_method(self, ctx: RuleContext, scope: ScopeAnalysis, loop: Loop, store: StoreEvent, chain: tuple, why: tuple) -> None:
        """A method the loop calls every iteration appends to a list the object keeps for its lifetime."""
        stored = " ".join(store.chunk.code_for(store.value_node).split())
        ctx.report(
            store.node,
            f"`{stored}` stays on the GPU in `{store.container}`, which `{written(chain[0])}` adds to on every "
            f"iteration of the loop on line {ctx.line_of((scope.chunk, loop.node))}, and which nothing in the class "
            f"empties: VRAM use climbs until the run runs out of memory",
            evidence=[
                why,
                ((scope.chunk, chain[0].node), f"`{written(chain[0])}` runs it on every iteration"),
                ((scope.chunk, loop.node), "the loop"),
                ((store.chunk, store.node), f"kept in `{store.container}`, an attribute bound once"),
            ],
            chunk=store.chunk,
            help=f"store a host copy (`{_without_host_copy_suffix(stored)}.detach().cpu()`, or `.item()` / `.tolist()`), "
                 f"or empty `{store.container}` where its contents are used",
        )

    def _report_helper(self, ctx: RuleContext, scope: ScopeAnalysis, loop: Loop, store: StoreEvent, call, passed: str, why: tuple) -> None:
        """A function the loop calls every iteration appends to a container the caller handed it, bound
        before the loop: the caller's container grows with the run."""
        stored = " ".join(store.chunk.code_for(store.value_node).split())
        named = "" if store.container == passed else f" (its `{store.container}`)"
        ctx.report(
            call.node,
            f"`{passed}` grows every iteration of the loop on line {ctx.line_of((scope.chunk, loop.node))} and outlives it: "
            f"`{written(call)}` appends `{stored}`, which stays on the GPU, to it{named}: VRAM use climbs until the "
            f"run runs out of memory",
            evidence=[
                why,
                ((store.chunk, store.node), f"kept in `{store.container}`, the caller's `{passed}`"),
                ((scope.chunk, call.node), f"`{written(call)}` runs it on every iteration"),
                ((scope.chunk, loop.node), "the loop"),
            ],
            help=f"store a host copy (`{_without_host_copy_suffix(stored)}.detach().cpu()`, or `.item()` / `.tolist()`) "
                 f"in the helper, or clear `{passed}` periodically",
        )

    def _report(self, ctx: RuleContext, scope: ScopeAnalysis, event: StoreEvent, loop: Loop, why: tuple) -> None:
        stored = " ".join(scope.chunk.code_for(event.value_node).split())
        ctx.report(
            event.node,
            f"`{stored}` stays on the GPU in `{event.container}`, which grows every iteration of the loop on line "
            f"{ctx.line_of((scope.chunk, loop.node))} and outlives it: VRAM use climbs until the run runs out of memory",
            evidence=[why, ((scope.chunk, loop.node), "the loop"), ((scope.chunk, event.node), f"kept in `{event.container}`")],
            help=f"store a host copy (`{_without_host_copy_suffix(stored)}.detach().cpu()`, or `.item()` / `.tolist()`), "
                 f"or clear `{event.container}` periodically",
        )


_TO_THE_HOST = re.compile(r"""["']cpu["']""")  # `.to("cpu")`, `move_to_device(x, "cpu")`
# Parameters of Lightning's hooks that hold no batch data.
_HOOK_BOOKKEEPING = frozenset({"self", "trainer", "pl_module", "batch_idx", "dataloader_idx", "optimizer_idx"})


def _handed_by_the_framework(scope: ScopeAnalysis, store: StoreEvent) -> cst.CSTNode | None:
    """The expression that makes what ``store`` keeps from the batch or outputs Lightning hands the hook
    (``x, y = batch`` then ``append(y)``, ``logits = self.net(x)`` then ``append(logits.argmax(1))``),
    followed back through the names it reads, or None; a host copy is neither."""
    data = {name for name in scope.params if name not in _HOOK_BOOKKEEPING}
    pending: list[cst.CSTNode] = [store.value_node]
    seen: set[str] = set()
    while pending:
        node = pending.pop()
        text = scope.chunk.code_for(node)
        if on_the_host(text) or _TO_THE_HOST.search(text):
            continue
        names = {child.value for child in walk(node) if isinstance(child, cst.Name)}
        if names & data:
            return node
        for name in names - seen:
            seen.add(name)
            binding = _bound_last(scope, name, store)
            if binding is not None and len(seen) < 12:
                pending.append(binding)
    return None


def _bound_last(scope: ScopeAnalysis, name: str, before) -> cst.CSTNode | None:
    """The value last assigned to ``name`` (alone or unpacked with others) before ``before``."""
    found = None
    for event in scope.events:
        if event is before:
            break
        if isinstance(event, AssignEvent) and name in event.targets:
            # an unpacking (`image, mask = batch`) records no value node of its own: the statement's value
            found = event.value_node if event.value_node is not None else (event.node.value if isinstance(event.node, cst.Assign) else None)
    return found


def _emptied_in_the_hook(scope: ScopeAnalysis, container: str) -> bool:
    """The method rebinds or clears the attribute (a hook that keeps one batch at a time, a reset)."""
    return any(
        (isinstance(event, AssignEvent) and container in event.targets)
        or (isinstance(event, CallEvent) and event.receiver_key == container and event.method in {"clear", "pop"})
        for event in scope.events
    )


def _steps_through_data(scope: ScopeAnalysis, loop: Loop) -> bool:
    """A loop over batches or steps, whose length grows with the data or the run (``range(n_steps)`` of
    a rollout): a loop over a dict's items or over a fixed number of generated tokens builds a bounded result, and
    one over items the code lists (an SDXL pipeline's two text encoders, zipped with their prompts) a list that long."""
    if walks_listed_items(scope, loop):
        return False
    if Tag.LOADER in loop.iterable.tags or (_DATA_WORDS.search(loop.iterable_text) and not _each_a_whole_pass(scope, loop)):
        return True
    if draws_batches(scope, loop) is not None and _runs_a_step(scope, loop):
        return True  # not a walk of one batch's images, each moved to the device (detectron2's per-image targets)
    node = loop.node
    if isinstance(node, cst.While):
        if _STEP_WORDS.search(loop.iterable_text or "") is not None:
            return _runs_a_step(scope, loop)
        # `while i < n:` that backwards or steps an optimizer is a training loop, whatever its test says
        return any(is_backward(call) or is_optimizer_step(call) for call in calls_in(scope, loop))
    return isinstance(node, cst.For) and repeats_per_step(scope, loop) is not None and _runs_a_step(scope, loop) and not _steers_inputs(scope, loop)


def _each_a_whole_pass(scope: ScopeAnalysis, loop: Loop) -> bool:
    """Each element the loop draws (`for block in dataset.query_blocks`) is handed to a local function that runs its
    own loop over batches (`extract_features(dataset.get_block(block), model)` walks a DataLoader of it): an
    iteration is a whole pass over one part of the data, so the loop walks parts (splits, blocks), not steps,
    whatever its iterable is called."""
    elements = set(loop.targets)
    handed = [
        call for call in calls_in(scope, loop)
        if call.function is not None
        and any(isinstance(name, cst.Name) and name.value in elements for arg in call.arg_nodes for name in walk(arg.value))
    ]
    if not handed:
        return False
    for call in handed:
        inner = call.function.analysis(scope.summary) if call.function is not None else None
        if inner is not None and any(
            Tag.LOADER in inner_loop.iterable.tags or draws_batches(inner, inner_loop) is not None for inner_loop in inner.loops
        ):
            return True
    return False


def _steers_inputs(scope: ScopeAnalysis, loop: Loop) -> bool:
    """A loop whose only sign of a step is a backward that no optimizer step uses: the gradients steer an input (a
    perturbation of a generator's past, an adversarial example, a saliency map), so an iteration is one sample made,
    not a training step, and a ``range(num_samples)`` of them collects that many results."""
    if repeats_per_step(scope, loop) != BACKWARD_EVERY_ITERATION:
        return False
    return not any(is_optimizer_step(call) or call.method == "step" for call in calls_in(scope, loop))


def _runs_a_step(scope: ScopeAnalysis, loop: Loop) -> bool:
    """The loop does the work of a step: a forward, a backward, an optimizer or environment step, a
    batch drawn with ``next``. A loop over ``range(total_steps)`` that precomputes a schedule's
    tensors (modded-nanogpt's weights for every step) keeps a fixed table, not the run's outputs."""
    for call in calls_in(scope, loop):
        if is_backward(call) or call.method in {"step", "generate"} or call.callee == "next":
            return True
        if call.receiver is not None and Tag.MODEL in call.receiver.tags and call.method in {None, "forward"}:
            return True
        if call.method == "forward" and call.args and Tag.ON_DEVICE in call.args[0].tags:
            return True  # `self.model.forward(x)` on a batch on the accelerator: a module's forward, called by its name
    return False


def _kept_by_a_method(ctx: RuleContext, scope: ScopeAnalysis, loop: Loop):
    """(store, chain, evidence) for each append to an attribute of the object (`self.outputs.append(...)`) made
    by a method of this class that the loop calls, outside that method's own loops, of a tensor on the GPU,
    where the class binds the attribute once and never clears it: it grows for the object's lifetime."""
    for event, chain in ordered_events(scope, loop):
        if not chain or not isinstance(event, StoreEvent) or event.kind not in ("append", "extend", "insert"):
            continue
        if chain[0].context.loop is not loop or any(link.context.loops for link in (*chain[1:], event)):
            continue  # a nested loop's, or the helper's own loop: the checks above see those
        if not event.container.startswith("self.") or event.container.count(".") != 1 or event.chunk is not ctx.chunk:
            continue
        if Tag.GRAPH in event.value.tags or _CACHE_NAME.search(event.container):
            continue
        why = kept_on_the_gpu(ctx.module, event.scope, event)
        if why is None or keeps_one_number(event.scope, event) or _emptied_by_the_class(ctx, event.container):
            continue
        yield event, chain, why


def _kept_by_a_helper(ctx: RuleContext, scope: ScopeAnalysis, loop: Loop):
    """(store, call, container, evidence) for each append of a tensor on the GPU, by a function the loop
    calls directly (outside that function's own loops), to a container it was handed as an argument
    (``eval_step(model, batch, outputs)`` appending to ``outputs``) that the caller binds before the loop
    and never empties in it: the caller's container grows with the run."""
    for event, chain in ordered_events(scope, loop):
        if len(chain) != 1 or not isinstance(event, StoreEvent) or event.kind not in ("append", "extend", "insert"):
            continue
        call = chain[0]
        function = call.function
        if call.context.loop is not loop or event.context.loops or function is None or event.container not in event.scope.params:
            continue
        name = _name_passed(call, function, event.container)
        if name is None or any(loop in binding.context.loops for binding in _bindings(scope, name)) or not _bindings(scope, name):
            continue  # not a container of the caller's that lives across the loop
        if Tag.GRAPH in event.value.tags or _CACHE_NAME.search(name) or bounded_or_emptied(scope, name, loop):
            continue
        why = kept_on_the_gpu(ctx.module, event.scope, event)
        if why is None or keeps_one_number(event.scope, event):
            continue
        yield event, call, name, why


def _kept_by_a_held_object(ctx: RuleContext, scope: ScopeAnalysis, loop: Loop):
    """(store, call, evidence) for ``self.tracker.add_batch(out, y)`` called directly in ``loop``, where this
    class's ``__init__`` binds ``self.tracker`` to an instance of a workspace class (not a module) whose
    method appends a parameter it is handed to a list of its own, and the caller hands a tensor on the GPU
    for it; the caller does not empty the object in the loop."""
    owner = scope.function.owner if scope.function is not None else None
    if owner is None:
        return
    for call in calls_in(scope, loop, depth=0):
        key = call.receiver_key
        if call.function is not None or call.method is None or key is None or not key.startswith("self.") or key.count(".") != 1:
            continue
        method = _method_of_held(ctx, owner, key, call.method)
        inner = method.analysis(ctx.summary) if method is not None else None
        if inner is None:
            continue
        resets = [
            flow for other in calls_in(scope, loop, depth=0)
            if other.receiver_key == key and other.method is not None and other.method != call.method
            and (flow := _flow_of(ctx, _method_of_held(ctx, owner, key, other.method))) is not None
        ]
        kept = []
        for store in inner.events:
            if not isinstance(store, StoreEvent) or store.kind not in ("append", "extend", "insert") or store.context.loops:
                continue
            if not store.container.startswith("self.") or store.container.count(".") != 1 or _CACHE_NAME.search(store.container):
                continue
            if Tag.ON_HOST in store.value.tags or keeps_one_number(inner, store):
                continue  # the object keeps host copies, or one number a batch
            if any(_emptied_in_the_hook(flow, store.container) for flow in resets):
                continue  # `self.tracker.reset()` in the loop empties it (every N batches, say)
            parameter = next((name for name in inner.params if mentions(inner, store.value_node, name)), None)
            why = _handed_on_the_gpu(ctx, scope, call, method, parameter) if parameter is not None else None
            if why is not None and not on_the_host(store.chunk.code_for(store.value_node)):
                kept.append((store, why))
        if kept:
            yield [store for store, _ in kept], call, kept[0][1]


def _flow_of(ctx: RuleContext, method):
    return method.analysis(ctx.summary) if method is not None else None


def _method_of_held(ctx: RuleContext, owner, attribute: str, name: str):
    """The method ``name`` of the workspace class (not an nn.Module) that ``owner.__init__`` binds ``attribute`` to."""
    init = owner.find_method("__init__", ctx.summary)
    flow = init.analysis(ctx.summary) if init is not None else None
    if flow is None:
        return None
    built = next((event.value_node for event in flow.events if isinstance(event, AssignEvent) and event.targets == (attribute,)), None)
    if not isinstance(built, cst.Call) or dotted(built.func) is None:
        return None
    info = ctx.summary.local_class(ctx.summary.canonical(dotted(built.func) or ""))
    if info is None or ctx.summary.is_module_class(info):
        return None
    return info.find_method(name, ctx.summary)


def _handed_on_the_gpu(ctx: RuleContext, scope: ScopeAnalysis, call, method, parameter: str) -> tuple | None:
    """Evidence that the argument ``call`` passes for ``parameter`` lives on the GPU: moved there, or the
    model's output in a script that runs on CUDA."""
    positional = method.positional_parameters
    if any(arg.star for arg in call.arg_nodes):
        return None
    plain = [arg for arg in call.arg_nodes if arg.keyword is None]
    if call.keyword(parameter) is not None:
        node, value = call.keyword(parameter).value, call.kwargs.get(parameter)
    elif parameter in positional and positional.index(parameter) < len(plain):
        index = positional.index(parameter)
        node, value = plain[index].value, call.args[index] if index < len(call.args) else None
    else:
        return None
    text = scope.chunk.code_for(node).strip()
    if on_the_host(text) or _TO_THE_HOST.search(text):
        return None
    if value is not None and Tag.ON_DEVICE in value.tags and Tag.MODEL not in value.tags:
        return ((scope.chunk, node), f"`{text}` is on the accelerator")
    if ctx.module.cuda_line is None or not isinstance(node, cst.Name):
        return None
    producer = _bound_last(scope, node.value, call)
    if isinstance(producer, cst.Call):
        made = next((other for other in scope.calls() if other.node is producer), None)
        if made is not None and made.receiver is not None and Tag.MODEL in made.receiver.tags:
            return ((scope.chunk, producer), f"the model's output, on the GPU (the script runs on CUDA, line {ctx.module.cuda_line})")
    return None


def _name_passed(call, function, parameter: str) -> str | None:
    """The caller's name that ``call`` passes for ``parameter`` of ``function``, by keyword or position."""
    if any(arg.star for arg in call.arg_nodes):
        return None
    passed = call.keyword(parameter)
    plain = [arg for arg in call.arg_nodes if arg.keyword is None]
    positional = function.positional_parameters
    if passed is None and parameter in positional and positional.index(parameter) < len(plain):
        passed = plain[positional.index(parameter)]
    return passed.value.value if passed is not None and isinstance(passed.value, cst.Name) else None


def _reset_by_its_object(scope: ScopeAnalysis, store: StoreEvent, loop: Loop) -> bool:
    """A list an object of the workspace keeps (``tracker.preds``, filled by ``tracker.update(...)``) that a
    method the loop calls on the same object binds afresh or empties (``tracker.reset()`` every epoch)."""
    owner, _, attribute = store.container.partition(".")
    if not attribute or "." in attribute or owner == "self":
        return False
    return any(call.receiver_key == owner and empties_attribute(call, attribute) for call in calls_in(scope, loop, depth=0))


def _drained_by_a_slice(scope: ScopeAnalysis, container: str, loop: Loop) -> bool:
    """The loop rebinds the container to a slice of itself (`buffer = buffer[n:]` once a batch's worth was
    handed on): what it holds is drained as it fills."""
    return any(
        isinstance(event, AssignEvent) and event.targets == (container,) and loop in event.context.loops
        and isinstance(event.value_node, cst.Subscript) and dotted(event.value_node.value) == container
        for event in scope.events
    )


def _bindings(scope: ScopeAnalysis, name: str) -> list[AssignEvent]:
    return [event for event in scope.events if isinstance(event, AssignEvent) and name in event.targets]


def _emptied_by_the_class(ctx: RuleContext, container: str) -> bool:
    """The class rebinds the attribute besides binding it (`self.outputs = []` at each epoch's start, in a hook),
    clears it, or deletes from it: what it holds does not grow for the object's lifetime."""
    handled = ctx.chunk.facts_by_statement("TL104 attribute bindings", _attribute_binding)
    return handled.count((container, "bound")) > 1 or (container, "emptied") in handled


def _attribute_binding(node: cst.CSTNode):
    """``(self.x, "bound")`` for an assignment to ``self.x``; ``(self.x, "emptied")`` for ``self.x.clear()``,
    ``self.x.pop(...)``, ``del self.x[...]`` or a slice assignment."""
    if isinstance(node, (cst.Assign, cst.AnnAssign, cst.AugAssign)):
        targets = [target.target for target in node.targets] if isinstance(node, cst.Assign) else [node.target]
        for target in targets:
            if isinstance(target, cst.Subscript):
                yield dotted(target.value), "emptied"
            elif isinstance(target, cst.Attribute):
                yield dotted(target), "bound"
    elif isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value in {"clear", "pop", "popleft"}:
        yield dotted(node.func.value), "emptied"
    elif isinstance(node, cst.Del):
        for target in walk(node.target):
            if isinstance(target, cst.Subscript):
                yield dotted(target.value), "emptied"


def _writes_into_tensor(scope: ScopeAnalysis, store: StoreEvent) -> bool:
    """The container was last bound, before this store, to one tensor (``torch.stack(...)``, ``torch.zeros(...)``)."""
    binding = scope.last_binding(store.container, before=store)
    return binding is not None and is_known_tensor(binding.value)


def _without_host_copy_suffix(text: str) -> str:
    """``loss.detach()`` less its trailing ``.detach()``: what to write ``.detach().cpu()`` after."""
    return text[: -len(".detach()")] if text.endswith(".detach()") else text


_STEERED_SAMPLER = """
import torch

def steer_and_generate(model, attribute_head, prompt_ids, device, steps=3, step_size=0.02):
    prompt = torch.tensor([prompt_ids], device=device, dtype=torch.long)
{optimizer}    delta = torch.zeros_like(model.embed(prompt), requires_grad=True)
    for _ in range(steps):
        hidden = model.decode(model.embed(prompt) + delta)
        loss = -attribute_head(hidden[:, -1]).log_softmax(-1)[:, 0].mean()
        loss.backward()
{update}    with torch.no_grad():
        logits = model.decode(model.embed(prompt) + delta)[:, -1]
    next_token = torch.multinomial(logits.softmax(-1), 1)
    return torch.cat([prompt, next_token], dim=1)


def sample_steered(model, attribute_head, prompt_ids, num_samples, device):
    samples = []
    for _ in range(num_samples):
        tokens = steer_and_generate(model, attribute_head, prompt_ids, device)
        samples.append(tokens)
    return samples


if __name__ == "__main__":
    model = torch.load("lm.pt").cuda()
    head = torch.load("head.pt").cuda()
    for tokens in sample_steered(model, head, [50256, 464, 3290], 10, "cuda"):
        print(tokens.tolist())
"""
_STEER_INPUT = """        with torch.no_grad():
            delta -= step_size * delta.grad / (delta.grad.norm() + 1e-10)
            delta.grad.zero_()
"""
_ADAPT_HEAD = """        optimizer.step()
        optimizer.zero_grad()
"""


_ROLLOUT_STORAGE = """
import torch


class RolloutStorage:
    def __init__(self, num_steps, num_envs, obs_dim):
        self.obs = torch.zeros(num_steps + 1, num_envs, obs_dim)
        self.rewards = torch.zeros(num_steps, num_envs, 1)

    def to(self, device):
        self.obs = self.obs.to(device)
        self.rewards = self.rewards.to(device)


class Discriminator(torch.nn.Module):
    def __init__(self, obs_dim, hidden=64):
        super().__init__()
        self.trunk = torch.nn.Sequential(torch.nn.Linear(obs_dim, hidden), torch.nn.Tanh(), torch.nn.Linear(hidden, 1))

    def forward(self, obs):
        return self.trunk(obs)
"""
_RELABELLED_ROLLOUTS = """
import torch

from storage import Discriminator, RolloutStorage


def main(envs, agent, expert_obs, num_updates, num_steps):
    device = torch.device("cuda")
    discriminator = Discriminator(envs.obs_dim).to(device)
    optimizer = torch.optim.Adam(discriminator.parameters(), lr=1e-3)
    rollouts = RolloutStorage(num_steps, envs.num_envs, envs.obs_dim)
    rollouts.to(device)
    rewards = {{}}
    for update in range(num_updates):
        for step in range(num_steps):
            with torch.no_grad():
                action = agent.act(rollouts.obs[step])
            obs, reward, done, infos = envs.step(action)
            rollouts.obs[step + 1].copy_(obs)
        loss = discriminator(rollouts.obs[:-1]).mean() - discriminator(expert_obs.to(device)).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        for step in range(num_steps):
            with torch.no_grad():
                rewards[{key}] = discriminator(rollouts.obs[step])
        agent.update(rollouts, rewards)
"""


DeviceAccumulation.MUST_FIRE = (
    Fires(  # twin: the rewards keyed by the update counter: a new entry on the GPU every update
        _RELABELLED_ROLLOUTS.format(key="update"),
        files={"storage.py": _ROLLOUT_STORAGE},
        at="                rewards[update] = discriminator(rollouts.obs[step])",
    ),
    Fires(  # twin: each sample adapts the attribute head with an optimizer step: the loop trains, and what it keeps grows
        _STEERED_SAMPLER.format(
            optimizer="    optimizer = torch.optim.SGD(attribute_head.parameters(), lr=step_size)\n", update=_ADAPT_HEAD),
        at="        samples.append(tokens)",
    ),
    Fires(  # an evaluator keeps each batch's probabilities, computed from the model's output through a name, on the object
        """
        import torch

        from models import TaggingNet


        class Evaluator:
            def __init__(self, checkpoint):
                self.model = TaggingNet(128, 20)
                self.model.load_state_dict(torch.load(checkpoint))
                self.model = self.model.cuda().eval()
                self.all_scores = []

            @torch.no_grad()
            def run(self, loader):
                for batch in loader:
                    images = batch["image"].cuda(non_blocking=True)
                    hidden = self.model(images)
                    scores = torch.sigmoid(hidden)
                    self.all_scores.append(scores)
                return torch.cat(self.all_scores)
        """,
        files={
            "models.py": """
                from torch import nn


                class TaggingNet(nn.Module):
                    def __init__(self, features, tags):
                        super().__init__()
                        self.head = nn.Sequential(nn.Flatten(), nn.LazyLinear(features), nn.ReLU(), nn.Linear(features, tags))

                    def forward(self, images):
                        return self.head(images)
            """,
        },
        at="self.all_scores.append(scores)",
    ),
    Fires(  # a feature bank grown by adding a one-item list: `+=` on a list extends it in place
        """
        import torch
        import torch.nn.functional as F


        def build_bank(encoder, loader):
            encoder = encoder.cuda().eval()
            bank = []
            with torch.no_grad():
                for images, _ in loader:
                    feats = encoder(images.cuda(non_blocking=True))
                    feats = F.normalize(feats, dim=1)
                    bank += [feats]
            return torch.cat(bank)
        """,
        at="bank += [feats]",
    ),
    Fires(  # a model's own scoring method, handed queries on the GPU, returns scores there; kept per split for the whole test
        """
        import torch


        class LinkPredictionTest:
            def __init__(self, model, device):
                self.model = model.to(device)
                self.device = device

            def test(self, loaders):
                logs = {"valid": [], "test": []}
                with torch.no_grad():
                    for split, loader in loaders.items():
                        for query, candidates in loader:
                            score = self.model.score_candidates(query.to(self.device), candidates.to(self.device))
                            logs[split].append(score)
                return logs
        """,
        at="logs[split].append(score)",
    ),
    Fires(  # each element the loop draws is moved to the GPU and run through the network: a loop over batches
        """
        import torch


        class Scorer:
            def __init__(self, net):
                self.net = net.cuda()

            @torch.no_grad()
            def score(self, source):
                kept = []
                for inputs, _ in source:
                    out = self.net(inputs.cuda(non_blocking=True))
                    kept.append(out.softmax(-1))
                return torch.cat(kept).cpu()
        """
    ),
    Fires(  # the helper appends each batch's probabilities, on the GPU, to the list the loop hands it
        """
        import torch


        def eval_step(model, batch, device, probabilities):
            images, _ = batch
            with torch.no_grad():
                logits = model(images.to(device))
            probabilities.append(logits.softmax(-1))


        def evaluate(model, loader, device):
            model.eval()
            probabilities = []
            for batch in loader:
                eval_step(model, batch, device, probabilities)
            return torch.cat(probabilities)


        def main():
            device = torch.device("cuda")
            model = torch.nn.Linear(32, 10).to(device)
            evaluate(model, torch.utils.data.DataLoader(range(8)), device)
        """,
        no_fix=True,
    ),
    Fires(
        """
        import torch

        model = torch.nn.Linear(16, 4).cuda()
        predictions = []
        with torch.no_grad():
            for x, y in loader:
                predictions.append(model(x.cuda()))
        """
    ),
    Fires(
        """
        import torch

        def collect_rewards(policy, env_batches):
            rewards = []
            for batch in env_batches:
                scores = torch.zeros(len(batch), device="cuda")
                rewards.append(scores)
            return rewards
        """
    ),
    Fires(
        """
        import torch

        device = torch.device("cuda")
        responses = []
        for step, prompts in enumerate(loader):
            with torch.no_grad():
                ids = model.generate(prompts.to(device), max_new_tokens=64)
            responses.append(ids)
        """
    ),
    Fires(
        """
        import torch

        model = torch.nn.Linear(32, 8).cuda()
        all_logits = {}
        with torch.no_grad():
            for name, x in eval_sets:
                all_logits[name] = model(x.to("cuda")).detach()
        """
    ),
    Fires(
        """
        import torch

        model = torch.nn.Sequential(torch.nn.Linear(32, 8), torch.nn.ReLU()).cuda()
        outputs = []
        for epoch in range(10):
            for x in loader:
                out = model(x.cuda())
                loss = out.mean()
                loss.backward()
                outputs.append(out.detach())
        """
    ),
    Fires(
        """
        import torch

        buffer = []
        for x in loader:
            embedding = encoder(x).detach().to("cuda")
            buffer.extend(embedding)
        """
    ),
    Fires(  # state across steps: probabilities kept on the GPU for the whole validation set
        """
        import torch

        @torch.no_grad()
        def predict(model, val_loader):
            model.eval()
            probabilities = []
            for images, _ in val_loader:
                logits = model(images.cuda(non_blocking=True))
                probabilities.append(logits.softmax(dim=-1))
            return torch.cat(probabilities).cpu().numpy()
        """
    ),
    Fires(  # frameworks: Accelerate's gather_for_metrics returns tensors on this process's device
        """
        import torch
        from accelerate import Accelerator

        accelerator = Accelerator()
        model, eval_dataloader = accelerator.prepare(model, eval_dataloader)
        model.eval()
        all_predictions = []
        for batch in eval_dataloader:
            with torch.no_grad():
                outputs = model(**batch)
            all_predictions.append(accelerator.gather_for_metrics(outputs.logits.argmax(dim=-1)))
        """
    ),
    Fires(  # state across steps: an RL rollout keeps one device tensor per environment step
        """
        import torch

        def collect_rollout(policy, env, num_steps):
            rewards = []
            obs = env.reset()
            for step in range(num_steps):
                with torch.no_grad():
                    action = policy(torch.as_tensor(obs, device="cuda")).sample()
                obs, reward, done, _ = env.step(action.item())
                rewards.append(torch.tensor(reward, device="cuda"))
                if done:
                    obs = env.reset()
            return rewards
        """
    ),
    Fires(  # a cap on the steps is no cap on the list: it holds every step's embeddings up to it
        """
        import torch


        def collect_embeddings(dataloader, device, max_steps):
            images = []
            embeddings = []
            for step, (img, emb) in enumerate(dataloader):
                embeddings.extend(list(emb.to(device=device, dtype=torch.float)))
                images.extend(list(img.to(device=device, dtype=torch.float)))
                if step >= max_steps:
                    break
            return images, embeddings
        """,
        count=2,
    ),
    Fires(  # micro-batch inputs kept in a list that lives on the trainer: it grows every step
        """
        import torch


        class PipelineTrainer:
            def __init__(self, schedule, optimizer):
                self.schedule, self.optimizer = schedule, optimizer
                self.device = torch.device("cuda")
                self.seen_inputs = []

            def train_step(self, microbatches):
                self.optimizer.zero_grad()
                for input_ids, labels in microbatches:
                    self.seen_inputs.append(input_ids.to(self.device))
                    self.schedule.step(input_ids.to(self.device), target=labels.to(self.device))
                self.optimizer.step()
        """
    ),
    Fires(  # a method the loop calls per batch keeps its outputs on the object, and nothing in the class empties them
        """
        import torch


        class Distiller:
            def __init__(self, student, teacher, optimizer, temperature):
                self.student = student
                self.teacher = teacher
                self.optimizer = optimizer
                self.temperature = temperature
                self.teacher_scores = []

            def distill_batch(self, images):
                images = images.cuda(non_blocking=True)
                with torch.no_grad():
                    teacher_logits = self.teacher(images)
                soft_targets = teacher_logits.div(self.temperature).softmax(-1)
                log_probs = self.student(images).div(self.temperature).log_softmax(-1)
                loss = torch.nn.functional.kl_div(log_probs, soft_targets, reduction="batchmean")
                self.optimizer.zero_grad()
                loss.backward()
                self.optimizer.step()
                self.teacher_scores.append(teacher_logits.amax(-1))
                return loss.item()

            def fit(self, loader, epochs):
                for epoch in range(epochs):
                    for images, _ in loader:
                        self.distill_batch(images)
        """,
        at="self.teacher_scores.append(teacher_logits.amax(-1))",
    ),
    Fires(  # a metrics object of another file keeps each batch's predictions, on the GPU, for the whole run
        """
        import torch
        from metrics import Accuracy


        def train(model, loader, optimizer, device):
            accuracy = Accuracy()
            for images, labels in loader:
                logits = model(images.to(device))
                loss = torch.nn.functional.cross_entropy(logits, labels.to(device))
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                accuracy.add_batch(logits.detach())
            return accuracy.compute()


        def main():
            device = torch.device("cuda")
            model = torch.nn.Linear(32, 10).to(device)
            train(model, torch.utils.data.DataLoader(range(8)), torch.optim.SGD(model.parameters(), lr=0.1), device)
        """,
        files={"metrics.py": """
            import torch


            class Accuracy:
                def __init__(self):
                    self.predictions = []

                def add_batch(self, logits):
                    self.predictions.append(logits.argmax(-1))

                def compute(self):
                    return torch.cat(self.predictions).float().mean().item()
            """},
        no_fix=True,
    ),
    Fires(  # a dict of lists, one per kind of output: each list grows every batch
        """
        import torch
        from collections import defaultdict


        def evaluate(model, loader, device):
            outputs = defaultdict(list)
            with torch.no_grad():
                for batch in loader:
                    logits = model(batch["input_ids"].to(device))
                    outputs["logits"].append(logits)
            return outputs


        model = torch.nn.Linear(32, 10).to(torch.device("cuda"))
        """,
    ),
    Fires(  # the concatenation grows by a batch of outputs, on the GPU, every iteration
        """
        import torch


        def predict(model, loader, device):
            predictions = torch.empty(0, 10, device=device)
            with torch.no_grad():
                for x, _ in loader:
                    out = model(x.to(device))
                    predictions = torch.cat([predictions, out])
            return predictions


        model = torch.nn.Linear(32, 10).to(torch.device("cuda"))
        """,
        no_fix=True,
    ),
    Fires(  # the metrics object a trainer holds keeps every batch's probabilities on the GPU
        """
        import torch

        from metrics import CalibrationMeter


        class Trainer:
            def __init__(self, model, val_loader):
                self.model = model.cuda()
                self.val_loader = val_loader
                self.calibration = CalibrationMeter(bins=15)

            def validate(self):
                self.model.eval()
                with torch.no_grad():
                    for batch in self.val_loader:
                        logits = self.model(batch["pixels"].cuda())
                        self.calibration.update(logits, batch["label"].cuda())
                return self.calibration.error()
        """,
        files={
            "metrics.py": """
                import torch


                class CalibrationMeter:
                    def __init__(self, bins):
                        self.bins = bins
                        self.probs, self.labels = [], []

                    def update(self, logits, labels):
                        self.probs.append(logits.softmax(-1))
                        self.labels.append(labels)

                    def error(self):
                        probs, labels = torch.cat(self.probs), torch.cat(self.labels)
                        confidence, predicted = probs.max(-1)
                        return (confidence - (predicted == labels).float()).abs().mean().item()
            """,
        },
        at='self.calibration.update(logits, batch["label"].cuda())',
    ),
    Fires(  # a callback's batch-end hook keeps what Lightning hands it: a whole prediction epoch on the device
        """
        import torch
        from lightning.pytorch.callbacks import BasePredictionWriter

        from postprocess import to_quantiles


        class QuantileWriter(BasePredictionWriter):
            def __init__(self, path):
                super().__init__(write_interval="epoch")
                self.path = path
                self.quantiles = []

            def on_predict_batch_end(self, trainer, pl_module, outputs, batch, batch_idx, dataloader_idx=0):
                self.quantiles.append(to_quantiles(outputs["prediction"]))

            def write_on_epoch_end(self, trainer, pl_module, predictions, batch_indices):
                torch.save(torch.cat(self.quantiles), self.path)
                self.quantiles = []
        """,
        files={
            "postprocess.py": """
                def to_quantiles(prediction, levels=(0.1, 0.5, 0.9)):
                    return prediction.quantile(prediction.new_tensor(levels), dim=-1)
            """,
        },
        severity=Severity.NOTE,
        at="self.quantiles.append(to_quantiles(outputs[\"prediction\"]))",
    ),
    Fires(  # a LightningModule's validation_step keeps every batch's masks for the epoch-end metric
        """
        import torch
        import lightning as L


        class Segmenter(L.LightningModule):
            def __init__(self, backbone):
                super().__init__()
                self.backbone = backbone
                self.masks = []

            def validation_step(self, batch, batch_idx):
                image, target = batch
                logits = self.backbone(image)
                self.masks.append((logits.argmax(1), target))

            def on_validation_epoch_end(self):
                iou = torch.stack([(p == t).float().mean() for p, t in self.masks]).mean()
                self.log("val_iou", iou)
                self.masks.clear()
        """,
        severity=Severity.NOTE,
        at="self.masks.append((logits.argmax(1), target))",
    ),
    Fires(  # a `while` loop over a counter that draws each batch with `next`, backwards and steps: a training loop
        """
        import torch


        def main(net, loader, opt, total):
            dev = torch.device("cuda")
            net.to(dev)
            outs = []
            it = iter(loader)
            i = 0
            while i < total:
                try:
                    x, y = next(it)
                except StopIteration:
                    it = iter(loader)
                    x, y = next(it)
                x, y = x.to(dev), y.to(dev)
                pred = net(x)
                obj = torch.nn.functional.mse_loss(pred, y)
                obj.backward()
                opt.step()
                opt.zero_grad()
                outs.append(pred.detach())
                i += 1
            return torch.cat(outs)
        """,
        at="outs.append(pred.detach())",
    ),
    Fires(  # the prediction comes back from a method of the trainer, beside its objective
        """
        import torch


        class Fitter:
            def __init__(self, net, loader):
                self.dev = torch.device("cuda")
                self.net = net.to(self.dev)
                self.loader = loader
                self.opt = torch.optim.SGD(net.parameters(), lr=0.1)
                self.outs = []

            def objective(self, x, y):
                pred = self.net(x)
                return torch.nn.functional.mse_loss(pred, y), pred

            def fit_epoch(self):
                for x, y in self.loader:
                    obj, pred = self.objective(x.to(self.dev), y.to(self.dev))
                    obj.backward()
                    self.opt.step()
                    self.opt.zero_grad()
                    self.outs.append(pred.detach())
        """,
        at="self.outs.append(pred.detach())",
    ),
    Fires(  # a torch function of the network's output computes on the output's device: the scores stay on the GPU
        """
        import torch

        from tagging.heads import MultiLabelHead


        class Tagger:
            def __init__(self, features: int, labels: int):
                self.device = torch.device("cuda")
                self.head = MultiLabelHead(features, labels).to(self.device)

            @torch.no_grad()
            def tag(self, loader):
                self.head.eval()
                scores = []
                for features, _ in loader:
                    scores.append(torch.sigmoid(self.head(features.to(self.device))))
                return torch.vstack(scores)
        """,
        files={"tagging/heads.py": """
            import torch


            class MultiLabelHead(torch.nn.Module):
                def __init__(self, features: int, labels: int):
                    super().__init__()
                    self.proj = torch.nn.Linear(features, labels)

                def forward(self, x):
                    return self.proj(x)
            """},
        at="scores.append(torch.sigmoid(self.head(features.to(self.device))))",
    ),
    Fires(  # a model the registry builds, run by its `forward` on each batch moved to the GPU: the loop walks the data
        """
        import torch

        from ranking.registry import build


        class Ranker:
            def __init__(self, name: str, device: torch.device):
                self.device = device
                self.model = build(name)

            def rank(self, teams):
                ranked = []
                with torch.no_grad():
                    for skills, _ in teams:
                        skills = skills.squeeze(1).to(self.device)
                        ranked.append(self.model.forward(skills).squeeze(1))
                return torch.vstack(ranked)
        """,
        files={"ranking/registry.py": """
            MODELS = {}


            def build(name: str):
                return MODELS[name]()
            """},
        at="ranked.append(self.model.forward(skills).squeeze(1))",
    ),
)

DeviceAccumulation.MUST_NOT_FIRE = (
    Quiet(  # each iteration embeds a whole split (the helper walks its own loader): a few splits' features, kept for the GPU search
        """
        import torch
        import torch.nn.functional as F

        from embed import embed_images
        from retrieval_data import RetrievalSet


        def main():
            encoder = torch.hub.load("facebookresearch/dino:main", "dino_vits16").cuda().eval()
            dataset = RetrievalSet("data/holidays")
            queries = []
            for split in dataset.query_splits:
                queries.append(embed_images(dataset.images_of(split), encoder))
            database = []
            for split in dataset.database_splits:
                database.append(embed_images(dataset.images_of(split), encoder))
            queries = F.normalize(torch.cat(queries), dim=1)
            database = F.normalize(torch.cat(database), dim=1)
            scores, ranked = (queries @ database.T).topk(10, dim=1)
            print(dataset.mean_average_precision(ranked.cpu()))


        if __name__ == "__main__":
            main()
        """,
        files={
            "embed.py": """
                import torch
                from torch.utils.data import DataLoader

                from retrieval_data import ImageList


                @torch.no_grad()
                def embed_images(paths, encoder, batch_size=64):
                    loader = DataLoader(ImageList(paths), batch_size=batch_size, num_workers=8)
                    features = torch.empty(len(paths), encoder.embed_dim, device="cuda")
                    start = 0
                    for images in loader:
                        features[start:start + len(images)] = encoder(images.cuda(non_blocking=True))
                        start += len(images)
                    return features
            """,
            "retrieval_data.py": """
                import torch
                from PIL import Image
                from torch.utils.data import Dataset
                from torchvision import transforms

                TO_TENSOR = transforms.Compose([transforms.Resize((224, 224)), transforms.ToTensor()])


                class ImageList(Dataset):
                    def __init__(self, paths):
                        self.paths = paths

                    def __len__(self):
                        return len(self.paths)

                    def __getitem__(self, index):
                        return TO_TENSOR(Image.open(self.paths[index]).convert("RGB"))


                class RetrievalSet:
                    def __init__(self, root):
                        self.root = root
                        self.query_splits = ["original", "strong"]
                        self.database_splits = ["database", "distractors"]

                    def images_of(self, split):
                        return sorted(f"{self.root}/{split}/{name}" for name in open(f"{self.root}/{split}.txt").read().split())

                    def mean_average_precision(self, ranked):
                        return float(torch.rand(()))
            """,
        },
    ),
    Quiet(  # rewards relabelled by step of a fixed-length rollout: the same keys are written on every update
        _RELABELLED_ROLLOUTS.format(key="step"),
        files={"storage.py": _ROLLOUT_STORAGE},
    ),
    Quiet(  # a backward that steers a perturbation of the input, no optimizer stepped: each iteration is one sample made
        _STEERED_SAMPLER.format(optimizer="", update=_STEER_INPUT),
    ),
    Quiet(  # the same shapes keeping host copies: the binding is a `.cpu()` copy, the list added to holds numbers
        """
        import torch
        import torch.nn.functional as F


        def collect(model, encoder, loader):
            model = model.cuda()
            kept, feats, losses, ids = [], [], [], []
            with torch.no_grad():
                for x, y in loader:
                    probs = model(x.cuda()).softmax(-1).cpu()
                    kept.append(probs)
                    emb = encoder(x.cuda())
                    emb = emb.cpu()
                    feats.append(F.normalize(emb))
                    loss = F.cross_entropy(model(x.cuda()), y.cuda())
                    losses += [loss.item()]
                    out = model.score(x.cuda())
                    ids += out.argmax(-1).tolist()
            return kept, feats, losses, ids
        """
    ),
    Quiet(  # a window of the last outputs: grown by `+=`, but trimmed to four every iteration
        """
        import torch


        class Runner:
            def __init__(self, model):
                self.model = model.cuda()
                self.recent = []

            def run(self, loader):
                for x, _ in loader:
                    out = self.model(x.cuda())
                    self.recent += [out]
                    if len(self.recent) > 4:
                        self.recent.pop(0)
        """
    ),
    Quiet(  # the pieces of one optimizer step, moved to the GPU: the list is new on each call, the step follows the loop
        """
        import torch


        class Stepper:
            def __init__(self, pipeline, optimizer):
                self.pipeline, self.optimizer = pipeline, optimizer
                self.device = torch.device("cuda")

            def run(self, pieces):
                self.optimizer.zero_grad()
                moved = []
                for a, b in pieces:
                    moved.append((a.to(self.device), b.to(self.device)))
                self.pipeline.step(moved)
                self.optimizer.step()
        """
    ),
    Quiet(  # a loop over the two text encoders the code lists, zipped with their prompts: a list of two, not of the data
        """
        import torch
        from diffusers import DiffusionPipeline


        class TwoEncoderPipeline(DiffusionPipeline):
            def encode_prompt(self, prompt: str, prompt_2: str | None = None, device: torch.device | None = None,
                              prompt_embeds: torch.Tensor | None = None):
                device = device or self._execution_device
                tokenizers = [self.tokenizer, self.tokenizer_2] if self.tokenizer is not None else [self.tokenizer_2]
                text_encoders = [self.text_encoder, self.text_encoder_2] if self.text_encoder is not None else [self.text_encoder_2]
                if prompt_embeds is None:
                    prompt_embeds_list = []
                    prompts = [prompt, prompt_2 or prompt]
                    for prompt, tokenizer, text_encoder in zip(prompts, tokenizers, text_encoders):
                        text_input_ids = tokenizer(prompt, padding="max_length", return_tensors="pt").input_ids
                        prompt_embeds = text_encoder(text_input_ids.to(device), output_hidden_states=True)
                        prompt_embeds = prompt_embeds.hidden_states[-2]
                        prompt_embeds_list.append(prompt_embeds)
                    prompt_embeds = torch.concat(prompt_embeds_list, dim=-1)
                return prompt_embeds
        """
    ),
    Quiet(  # a walk of the network's parameters is bounded, whatever is moved to the GPU in it
        """
        import torch


        def snapshot(net):
            device = torch.device("cuda")
            copies = []
            for weight in net.parameters():
                copies.append(weight.detach().to(device))
            return copies
        """
    ),
    Quiet(  # the metrics object the trainer holds keeps host copies, or one count a batch
        """
        import torch

        from scoring import TopKScorer


        class Evaluator:
            def __init__(self, model, loader):
                self.model = model.cuda()
                self.loader = loader
                self.scorer = TopKScorer(k=5)

            @torch.no_grad()
            def run(self):
                for images, labels in self.loader:
                    logits = self.model(images.cuda())
                    self.scorer.add(logits, labels.cuda())
                return self.scorer.result()
        """,
        files={
            "scoring.py": """
                class TopKScorer:
                    def __init__(self, k):
                        self.k = k
                        self.hits = []
                        self.ranks = []

                    def add(self, logits, labels):
                        top = logits.topk(self.k, dim=-1).indices
                        self.hits.append((top == labels[:, None]).any(-1).sum())
                        self.ranks.append(top.cpu())

                    def result(self):
                        return sum(int(h) for h in self.hits)
            """,
        },
    ),
    Quiet(  # host copies, or one number per batch, kept by Lightning hooks; a callback that keeps only the last batch
        """
        import lightning as L
        from lightning.pytorch.callbacks import Callback


        class Tagger(L.LightningModule):
            def __init__(self, encoder):
                super().__init__()
                self.encoder = encoder
                self.tags = []
                self.losses = []

            def validation_step(self, batch, batch_idx):
                tokens, labels = batch
                logits = self.encoder(tokens)
                self.tags.append(logits.argmax(-1).cpu())
                self.losses.append(logits.logsumexp(-1).mean())


        class LastBatch(Callback):
            def __init__(self):
                self.latest = []

            def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
                self.latest = [outputs["loss"].detach()]
                self.latest.append(batch[0].to("cpu"))
        """
    ),
    Quiet(  # the helper keeps host copies in the caller's list; the second caller's list is emptied every 50 batches
        """
        import torch


        def eval_step(model, batch, device, predictions):
            images, _ = batch
            with torch.no_grad():
                logits = model(images.to(device))
            predictions.append(logits.argmax(-1).cpu())


        def score_step(model, batch, device, scores):
            images, _ = batch
            with torch.no_grad():
                scores.append(model(images.to(device)).softmax(-1))


        def evaluate(model, loader, device):
            model.eval()
            predictions, scores = [], []
            for index, batch in enumerate(loader):
                eval_step(model, batch, device, predictions)
                score_step(model, batch, device, scores)
                if index % 50 == 0:
                    print(torch.cat(scores).mean().item())
                    scores.clear()
            return torch.cat(predictions)


        def main():
            device = torch.device("cuda")
            model = torch.nn.Linear(32, 10).to(device)
            evaluate(model, torch.utils.data.DataLoader(range(8)), device)
        """
    ),
    Quiet(  # the batch's fields moved into a dict bound once: each step overwrites the same keys
        """
        import torch


        class Finetuner:
            def __init__(self, model, optimizer, device):
                self.model = model.to(device)
                self.optimizer = optimizer
                self.device = device

            def fit(self, loader, text_fields):
                inputs = {}
                for batch in loader:
                    for key, value in batch.items():
                        inputs[key] = value.to(self.device)
                    for field in text_fields:
                        inputs[field] = batch[field].to(self.device)
                    inputs["labels"] = batch["labels"].to(self.device)
                    loss = self.model(**inputs).loss
                    self.optimizer.zero_grad()
                    loss.backward()
                    self.optimizer.step()
        """
    ),
    Quiet(  # the same distiller, emptying its list at each epoch's end, or keeping host copies
        """
        import torch


        class Distiller:
            def __init__(self, student, teacher, optimizer):
                self.student = student
                self.teacher = teacher
                self.optimizer = optimizer
                self.teacher_scores = []
                self.confidences = []

            def distill_batch(self, images):
                images = images.cuda(non_blocking=True)
                with torch.no_grad():
                    teacher_logits = self.teacher(images)
                soft_targets = teacher_logits.softmax(-1)
                loss = torch.nn.functional.kl_div(self.student(images).log_softmax(-1), soft_targets, reduction="batchmean")
                self.optimizer.zero_grad()
                loss.backward()
                self.optimizer.step()
                self.teacher_scores.append(teacher_logits.amax(-1))
                self.confidences.append(teacher_logits.amax(-1).cpu())

            def end_epoch(self):
                mean_score = torch.cat(self.teacher_scores).mean().item()
                self.teacher_scores = []
                return mean_score

            def fit(self, loader, epochs):
                for epoch in range(epochs):
                    for images, _ in loader:
                        self.distill_batch(images)
                    print(epoch, self.end_epoch())
        """
    ),
    Quiet(  # one detached loss a step: a 512-byte block each, what TL101's fix writes; TL104 must not report it
        """
        import torch


        class Trainer:
            def __init__(self, model, optimizer, device="cuda"):
                self.model, self.optimizer, self.device = model.to(device), optimizer, device
                self.step_losses = []

            def train_epoch(self, loader):
                self.model.train()
                for batch in loader:
                    inputs, targets = (t.to(self.device) for t in batch)
                    self.optimizer.zero_grad(set_to_none=True)
                    loss = self.model(inputs, targets=targets).mean()  # the model returns each sample's loss
                    loss.backward()
                    self.optimizer.step()
                    self.step_losses.append(loss.detach())
                return torch.stack(self.step_losses).mean().item()
        """
    ),
    Quiet(  # a whole-batch reduction kept per step: one number, on the device until the epoch's end
        """
        import torch

        model = torch.nn.Linear(32, 8).cuda()
        norms = []
        with torch.no_grad():
            for x, _ in loader:
                out = model(x.cuda())
                norms.append(out.norm())
        print(torch.stack(norms).mean().item())
        """
    ),
    Quiet(  # a schedule's tensors precomputed for every step: the loop runs no step, it fills a table (modded-nanogpt)
        """
        import torch


        class TrainingSchedule:
            def __init__(self, stages, total_steps, device):
                self.stages, self.total_steps = stages, total_steps
                # precomputed once, so that no tensor is allocated during training
                self.mtp_weights = []
                for step in range(self.total_steps + 1):
                    stage, t = self.lookup(step)
                    weights = [a + (b - a) * t for a, b in zip(stage.weights_start, stage.weights_end)]
                    self.mtp_weights.append(torch.tensor(weights, device=device))

            def lookup(self, step):
                for stage in self.stages:
                    if step < stage.end:
                        return stage, (step - stage.start) / (stage.end - stage.start)
                return self.stages[-1], 1.0
        """
    ),
    Quiet(  # a multistep solver's window of previous steps: items replaced in place, the list never grows (stable-diffusion's DPM-Solver)
        """
        import torch


        def multistep_sample(model_fn, update, x, steps, order=2):
            timesteps = torch.linspace(1.0, 1e-3, steps + 1, device="cuda")
            with torch.no_grad():
                vec_t = timesteps[0].expand(x.shape[0])
                model_prev_list = [model_fn(x, vec_t)]
                t_prev_list = [vec_t]
                for step in range(order, steps + 1):
                    vec_t = timesteps[step].expand(x.shape[0])
                    x = update(x, model_prev_list, t_prev_list, vec_t)
                    for i in range(order - 1):
                        t_prev_list[i] = t_prev_list[i + 1]
                        model_prev_list[i] = model_prev_list[i + 1]
                    t_prev_list[-1] = vec_t
                    model_prev_list[-1] = model_fn(x, vec_t)
            return x
        """
    ),
    Quiet(  # a few examples for sampling: the loop stops once it holds n of them (DALLE2-pytorch)
        """
        import torch


        def get_example_data(dataloader, device, n=5):
            images = []
            embeddings = []
            for img, emb in dataloader:
                embeddings.extend(list(emb.to(device=device, dtype=torch.float)))
                images.extend(list(img.to(device=device, dtype=torch.float)))
                if len(images) >= n:
                    break
            return list(zip(images[:n], embeddings[:n]))
        """
    ),
    Quiet(  # a pipeline step's micro-batches, gathered on the GPU to hand to the schedule: a new list every step (torchtitan)
        """
        import torch


        class PipelineTrainer:
            def __init__(self, schedule, optimizer):
                self.schedule, self.optimizer = schedule, optimizer
                self.device = torch.device("cuda")

            def train_step(self, microbatches):
                self.optimizer.zero_grad()
                input_mbs = []
                label_mbs = []
                for input_ids, labels in microbatches:
                    input_mbs.append(input_ids.to(self.device))
                    label_mbs.append(labels.to(self.device))
                losses = []
                self.schedule.step(input_mbs, target=label_mbs, losses=losses)
                self.optimizer.step()
                return torch.stack(losses).sum().item()
        """
    ),
    Quiet(  # a cache of per-sample text embeddings, filled once before training on purpose
        """
        import torch
        from tqdm import tqdm

        def cache_prompt_embeddings(train_dataloader, text_encoder, tokenizer, device):
            cached_text_embeddings = []
            for batch in tqdm(train_dataloader, desc="Embedding prompts"):
                ids = tokenizer(batch["prompts"], return_tensors="pt").input_ids.to(device)
                with torch.no_grad():
                    embeds = text_encoder(ids)[0]
                cached_text_embeddings.append(embeds.to(device))
            return cached_text_embeddings
        """
    ),
    Quiet(
        """
        import torch

        model = torch.nn.Linear(16, 4).cuda()
        predictions = []
        with torch.no_grad():
            for x, y in loader:
                predictions.append(model(x.cuda()).cpu())
        """
    ),
    Quiet(
        """
        import torch

        losses = []
        for x, y in loader:
            loss = criterion(model(x.cuda()), y.cuda())
            losses.append(loss.item())
        """
    ),
    Quiet(
        """
        from collections import deque
        import torch

        recent = deque(maxlen=100)
        for x in loader:
            recent.append(torch.zeros(4, device="cuda"))
        """
    ),
    Quiet(
        """
        import torch

        window = []
        for step, x in enumerate(loader):
            window.append(torch.ones(8, device="cuda"))
            if step % 100 == 0:
                log(torch.stack(window).mean())
                window.clear()
        """
    ),
    Quiet(
        """
        import torch

        for x in loader:
            batch_outputs = []
            batch_outputs.append(torch.ones(8, device="cuda"))
        """
    ),
    Quiet(
        """
        predictions = []
        for x in loader:
            predictions.append(model(x))
        """
    ),
    Quiet(
        """
        import torch

        ids = []
        for prompts in loader:
            generated = model.generate(prompts.cuda())
            ids.extend(generated.tolist())
        """
    ),
    Quiet(  # host copies of what was gathered
        """
        import torch
        from accelerate import Accelerator

        accelerator = Accelerator()
        model, eval_dataloader = accelerator.prepare(model, eval_dataloader)
        all_predictions = []
        for batch in eval_dataloader:
            with torch.no_grad():
                outputs = model(**batch)
            all_predictions.append(accelerator.gather_for_metrics(outputs.logits.argmax(dim=-1)).cpu())
        """
    ),
    Quiet(  # the metrics object keeps host copies; the other one is reset every epoch by the loop
        """
        import torch
        from metrics import HostAccuracy, Accuracy


        def train(model, loader, optimizer, device, epochs):
            on_host, on_device = HostAccuracy(), Accuracy()
            for epoch in range(epochs):
                on_device.reset()
                for step in range(len(loader)):
                    images, labels = next(iter(loader))
                    logits = model(images.to(device))
                    loss = torch.nn.functional.cross_entropy(logits, labels.to(device))
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
                    on_host.add_batch(logits.detach())
                    on_device.add_batch(logits.detach())
                    on_device.reset()


        model = torch.nn.Linear(32, 10).to(torch.device("cuda"))
        """,
        files={"metrics.py": """
            class HostAccuracy:
                def __init__(self):
                    self.predictions = []

                def add_batch(self, logits):
                    self.predictions.append(logits.argmax(-1).cpu())


            class Accuracy:
                def __init__(self):
                    self.reset()

                def reset(self):
                    self.predictions = []

                def add_batch(self, logits):
                    self.predictions.append(logits.argmax(-1))
            """},
    ),
    Quiet(  # features joined on the host with numpy; a sequence built from one batch's pieces
        """
        import numpy as np
        import torch


        def features(model, loader, device):
            found = np.zeros((0, 10))
            with torch.no_grad():
                for x, _ in loader:
                    found = np.concatenate([found, model(x.to(device)).cpu().numpy()])
                    pair = torch.cat([x.to(device), x.to(device)])
                    pair = torch.cat([pair, x.to(device)])
            return found


        model = torch.nn.Linear(32, 10).to(torch.device("cuda"))
        """,
    ),
    Quiet(  # the same `while` loop keeps host copies
        """
        import torch


        def main(net, loader, opt, total):
            dev = torch.device("cuda")
            net.to(dev)
            outs = []
            it = iter(loader)
            i = 0
            while i < total:
                x, y = next(it)
                x, y = x.to(dev), y.to(dev)
                pred = net(x)
                obj = torch.nn.functional.mse_loss(pred, y)
                obj.backward()
                opt.step()
                opt.zero_grad()
                outs.append(pred.detach().cpu())
                i += 1
            return torch.cat(outs)
        """
    ),
    Quiet(  # a `while` loop that generates tokens and trains nothing keeps a bounded sequence
        """
        import torch


        @torch.no_grad()
        def sample(net, ids, n):
            ids = ids.cuda()
            out = []
            while len(out) < n:
                logits = net(ids)
                ids = logits[:, -1:].argmax(-1)
                out.append(ids)
            return torch.cat(out, dim=1)
        """
    ),
    Quiet(  # the fix: a host copy of each batch's scores, and the head run once per batch
        """
        import torch

        from tagging.heads import MultiLabelHead


        class Tagger:
            def __init__(self, features: int, labels: int):
                self.device = torch.device("cuda")
                self.head = MultiLabelHead(features, labels).to(self.device)

            @torch.no_grad()
            def tag(self, loader):
                self.head.eval()
                scores = []
                for features, _ in loader:
                    scores.append(torch.sigmoid(self.head(features.to(self.device))).detach().cpu())
                return torch.vstack(scores)
        """,
        files={"tagging/heads.py": """
            import torch


            class MultiLabelHead(torch.nn.Module):
                def __init__(self, features: int, labels: int):
                    super().__init__()
                    self.proj = torch.nn.Linear(features, labels)

                def forward(self, x):
                    return self.proj(x)
            """},
    ),
    Quiet(  # the fix: each batch's ranking moved to the host before it is kept
        """
        import torch

        from ranking.registry import build


        class Ranker:
            def __init__(self, name: str, device: torch.device):
                self.device = device
                self.model = build(name)

            def rank(self, teams):
                ranked = []
                with torch.no_grad():
                    for skills, _ in teams:
                        skills = skills.squeeze(1).to(self.device)
                        ranked.append(self.model.forward(skills).squeeze(1).cpu())
                return torch.vstack(ranked)
        """,
        files={"ranking/registry.py": """
            MODELS = {}


            def build(name: str):
                return MODELS[name]()
            """},
    ),
    Quiet(  # a bounded window of the last scores, on the GPU: a deque with a maxlen does not grow
        """
        import collections

        import torch

        from ranking.registry import build


        class Ranker:
            def __init__(self, name: str, device: torch.device):
                self.device = device
                self.model = build(name)

            def rank(self, teams):
                recent = collections.deque(maxlen=4)
                with torch.no_grad():
                    for skills, _ in teams:
                        skills = skills.squeeze(1).to(self.device)
                        recent.append(torch.sigmoid(self.model.forward(skills)))
                return torch.vstack(list(recent))
        """,
        files={"ranking/registry.py": """
            MODELS = {}


            def build(name: str):
                return MODELS[name]()
            """},
    ),
)
