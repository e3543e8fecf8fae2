"""A tensor that carries its autograd graph is kept across loop iterations.

Why it costs money: every stored graph pins the activations it was built from. A history list
fed `loss` instead of `loss.item()` grows by one forward pass of activations per step, and the
run dies with CUDA out-of-memory hundreds of steps in — after the GPU hours are spent. When a
backward already ran on the stored value its activations are freed, but the graph's nodes
still pile up in host memory for the whole run. The same holds for a running total returned to
the caller (`return total / n`), a running average (`avg = 0.98 * avg + 0.02 * loss`), a list
kept in an attribute by a Lightning `training_step` (or by a method of the class it hands a dict of
stats to, `self.store_metrics(metrics)` appending each entry to `self._stored_metrics`), and a
recurrent state carried from one batch to the next (`out, hidden = model(x, hidden)` without
`hidden.detach()`): each new value is built on the previous one, so it holds the graph of every
step since the loop began. What a loop backwards carries a graph whatever produced it: a history whose
last item is backwarded (`history.append(objective(*params))`, `history[-1].backward()`), a name appended and then
backwarded in the same iteration (`value = summarize(self.loss())`, `history.append(value)`, `value.backward()`,
with `summarize` a callable the caller hands in), and the value a
Lightning `training_step` keeps and also returns (Lightning backwards it, or its "loss" entry). Values
are followed through helpers: a dict of statistics that
`compute_stats(logits, ...)` (in this file or another) builds from the graph-carrying tensor it is
handed, also when the loop walks it entry by entry (`for name, value in stats.items(): totals[name] += value`),
and a running average kept by a smoothing helper (`avg = smooth(avg, loss)`).

How to fix: store `loss.item()` (a Python float) for logging, or `tensor.detach()` when you
need the tensor; `.cpu()` alone keeps the graph. It is fine to keep graph-carrying values on
purpose when a backward later runs through them (`torch.stack(losses).mean().backward()`).
"""

from __future__ import annotations

import libcst as cst

from trainlint.analysis.callers import constructions_elsewhere
from trainlint.analysis.data_loops import draws_batches, walks_one_step
from trainlint.analysis.dependencies import kept_with_scope
from trainlint.analysis.frameworks import manual_optimization, training_step_hook
from trainlint.analysis.libraries import MODULE
from trainlint.analysis.patterns import (
    bounded_or_emptied,
    is_scalar_loss,
    keeps_one_number,
    kept_for_one_step,
    kept_on_the_gpu,
    overwrites_its_keys,
    replaces_a_list_item,
)
from trainlint.rules import (
    AssignEvent,
    CallEvent,
    Fires,
    JumpEvent,
    Loop,
    ModuleView,
    Quiet,
    Rule,
    RuleContext,
    ScopeAnalysis,
    Severity,
    StoreEvent,
    Tag,
    Value,
    backward_target,
    calls_in,
    dotted,
    events_in,
    is_backward,
    is_eval_name,
    is_known_tensor,
    is_test_file,
    mentions,
    ordered_events,
    quoted,
    repeats_per_step,
    string_value,
    written,
)
from trainlint.rules import walk as _walk


class RetainedGraph(Rule):
    code = "TL101"
    name = "retained-graph"
    severity = Severity.ERROR

    def check_scope(self, ctx: RuleContext, scope: ScopeAnalysis) -> None:
        if is_test_file(ctx.module.path):
            return  # a test keeps a few steps' losses to compare them, on purpose
        buffers = _registered_buffers(ctx, scope)
        for event in scope.events:
            if isinstance(event, StoreEvent):
                self._check_store(ctx, scope, event)
            elif isinstance(event, AssignEvent):
                self._check_carried_state(ctx, scope, event)
            if buffers and event.context.grad_off is None:
                self._check_buffer_update(ctx, scope, event, buffers)
        for loop in scope.loops:
            if _per_step(scope, loop) is not None:
                for call, store, container, carried in _kept_by_a_helper(scope, loop):
                    self._report_helper(ctx, scope, loop, call, store, container, carried)

    def _report_helper(self, ctx: RuleContext, scope: ScopeAnalysis, loop: Loop, call: CallEvent, store: StoreEvent, container: str, carried: Value) -> None:
        """``record(history, loss)`` every step, where ``record`` appends its argument to the list it is
        handed: the caller's list keeps every step's graph."""
        backwards = [event for event in calls_in(scope, loop) if is_backward(event)]
        named = "" if store.container == container else f" (its `{store.container}`)"
        consequence = (
            "a backward already ran on it, so its activations are freed, but every step's graph nodes stay referenced "
            "in host memory for the rest of the run" if backwards else
            "nothing runs backward through it, so each iteration's activations stay in GPU memory until the run runs out of it"
        )
        ctx.report(
            call.node,
            f"`{container}` keeps the autograd graph of every iteration alive: `{written(call)}` puts "
            f"{carried.note or 'a graph-carrying value'}, which carries a graph, into it{named} each time "
            f"round the loop on line {ctx.line_of((scope.chunk, loop.node))}; {consequence}",
            evidence=[
                (carried.site, f"{carried.note or 'the value'} carries the autograd graph"),
                ((store.chunk, store.node), f"kept in `{store.container}`, the caller's `{container}`"),
                ((scope.chunk, loop.node), "the loop it accumulates across"),
            ],
            severity=Severity.WARNING if backwards else Severity.ERROR,
            help=f"pass `.item()` (for logging) or `.detach()` to `{written(call)}`, or keep a detached copy in the helper",
        )

    def _check_buffer_update(self, ctx: RuleContext, scope: ScopeAnalysis, event, buffers: dict[str, cst.CSTNode]) -> None:
        """``self.running_mean = 0.9 * self.running_mean + 0.1 * h.mean(0)`` (or ``.mul_(0.9).add_(...)``,
        ``.lerp_(...)``, ``.copy_(...)``) in a module's ``forward``, from a value that carries the step's graph:
        the buffer's new value is built on its previous one, so it chains every step's graph onto the
        last and the module keeps them all for its lifetime; with grad on, nothing frees them."""
        update = _buffer_update(scope, event)
        if update is None:
            self._check_input_fold(ctx, scope, event, buffers)
            return
        if update[0] not in buffers:
            return
        buffer, graph_node, value = update
        if _detached_before(scope, event, buffer):
            return  # `self.memory = self.memory.detach()` first: truncated, as truncated BPTT does on purpose
        name = buffer.partition(".")[2]
        ctx.report(
            event.node,
            f"`{buffer}`, a buffer of the module, is updated from its own previous value and from "
            f"{value.note or 'a graph-carrying value'}, which carries the autograd graph, in every forward with grad "
            f"enabled: each step's graph is chained onto the previous ones and the module keeps them all, so memory "
            f"grows with every training step",
            evidence=[
                (value.site, f"{value.note or 'the new value'} carries the autograd graph"),
                ((scope.chunk, graph_node), f"folded into `{buffer}`"),
                ((scope.chunk, buffers[buffer]), f"`{name}` registered as a buffer: it lives as long as the module"),
            ],
            severity=Severity.ERROR,
            help=f"update `{buffer}` under `with torch.no_grad():` (or from `.detach()`ed values), as batch-norm "
                 "does with its running statistics",
        )

    def _check_input_fold(self, ctx: RuleContext, scope: ScopeAnalysis, event, buffers: dict[str, cst.CSTNode]) -> None:
        """The same fold from what the forward computes of its own input (``self.cov.mul_(0.9).add_(x.t() @ x)``): the
        input carries the graph of every trained layer before this one. A class that another module's ``__init__``
        builds is such a layer (a warning); one whose callers are not in view may be given plain data (a note)."""
        found = _input_fold(scope, event)
        if found is None or found[0] not in buffers or _detached_before(scope, event, found[0]):
            return
        buffer, node, parameter = found
        info = scope.function
        assert info is not None and info.owner is not None, "a module's forward"
        owner = info.owner
        held_by = next(iter(_held_by_modules(ctx, owner)), None)
        name = buffer.partition(".")[2]
        evidence = [
            ((scope.chunk, node), f"folded into `{buffer}`, computed from `{parameter}`, the forward's input"),
            ((scope.chunk, buffers[buffer]), f"`{name}` registered as a buffer: it lives as long as the module"),
        ]
        if held_by is not None:
            evidence.append((held_by, f"`{owner.name}` built as a layer of another module: its input is what the layers before it compute"))
            why = (
                f"`{owner.name}` is a layer of another module, so `{parameter}` carries the graph of the trained layers before it"
            )
        else:
            why = (
                f"whether `{parameter}` carries a graph depends on what feeds `{owner.name}` (no module in view builds it as a "
                "layer): it does whenever a trained layer runs before it"
            )
        ctx.report(
            event.node,
            f"`{buffer}`, a buffer of the module, is updated from its own previous value and from `{parameter}`, the "
            f"forward's input, in every forward with grad enabled; {why}. Each step's graph is then chained onto the previous "
            "ones and the module keeps them all, so memory grows with every training step",
            evidence=evidence,
            severity=Severity.WARNING if held_by is not None else Severity.NOTE,
            help=f"update `{buffer}` under `with torch.no_grad():` (or from `.detach()`ed values), as batch-norm "
                 "does with its running statistics",
        )

    def _check_carried_state(self, ctx: RuleContext, scope: ScopeAnalysis, assign: AssignEvent) -> None:
        """``out, hidden = model(x, hidden)`` every step with no ``hidden.detach()``: the new state is built
        on the old one, so it holds the graph of every step since the loop began (truncated BPTT
        without the truncation). With a plain backward each step the second one fails loudly; with
        ``retain_graph=True``, or no backward at all, the graph silently grows with the run."""
        if len(assign.targets) != 1 or Tag.GRAPH not in assign.value.tags or assign.context.grad_off is not None:
            return
        if not isinstance(assign.node, cst.Assign):
            return
        name = assign.targets[0]  # one element of `out, hidden = model(x, hidden)` is one event
        if "." in name or not mentions(scope, assign.node.value, name):
            return
        if any(isinstance(event, StoreEvent) and event.node is assign.node for event in scope.events):
            return  # `total = total + loss`: a running sum, reported as a store
        loop = assign.context.loop
        if loop is None or _per_step(scope, loop) is None:
            return
        backwards = [call for call in calls_in(scope, loop) if is_backward(call)]
        if backwards and not any(_retains_graph(call) for call in backwards):
            return
        if any(_rebinds_before(scope, loop, name, assign)):
            return  # `hidden = repackage_hidden(hidden)` / `hidden = hidden.detach()` first
        # last: it compares lines, and the positions of a whole function cost more than the rest
        if name not in _bound_before(scope, loop):
            return
        consequence = (
            "`retain_graph=True` keeps every step's graph, so each backward runs through all previous steps: "
            "time and memory grow with every batch" if backwards else
            "nothing runs backward through it, so the activations of every step stay in GPU memory until the run "
            "runs out of it"
        )
        ctx.report(
            assign.node,
            f"`{name}` is computed from its own previous value every iteration and never detached: it carries the "
            f"autograd graph of every step since the loop began; {consequence}",
            evidence=[
                (assign.value.site, f"{assign.value.note or 'the new value'} carries the autograd graph"),
                ((scope.chunk, assign.node), f"and is fed back as `{name}` in the next iteration"),
                ((scope.chunk, loop.node), "the loop it is carried across"),
                *(((call.chunk, call.node), "backward keeps the graph") for call in backwards[:1]),
            ],
            severity=Severity.ERROR,
            help=f"detach the carried state at the start of each step (`{name} = {name}.detach()`, or a "
            "`repackage_hidden` helper for tuples of tensors)",
        )

    def _check_store(self, ctx: RuleContext, scope: ScopeAnalysis, store: StoreEvent) -> None:
        value = store.value
        if store.context.grad_off is not None:
            return
        if not store.context.loops:
            if Tag.GRAPH in value.tags or (scope.function is not None and isinstance(store.value_node, cst.Name)):
                self._check_hook_store(ctx, scope, store)  # a name the hook returns carries the framework's graph
            return
        item_backward = None
        if Tag.GRAPH not in value.tags and store.kind in ("append", "insert"):
            # `history.append(objective(*params))` then `history[-1].backward()`: whatever the analysis could not
            # tell of the objective, what the loop backwards through the list's last item carries a graph
            item_backward = _item_backwarded(scope, store)
            if item_backward is not None:
                value = Value(
                    value.tags | {Tag.GRAPH}, site=(scope.chunk, item_backward.node),
                    note=f"what `{store.container}` receives (`{written(item_backward)}` runs backward through it)",
                )
        if Tag.GRAPH not in value.tags or replaces_a_list_item(scope, store):
            return
        # The container must outlive a loop that repeats per training or evaluation step: a list of
        # two text encoders' embeddings, or of an image's tiles, is not kept across steps.
        outlived = [loop for loop in reversed(store.context.loops) if store.outlives(loop)]
        while len(outlived) > 1 and _walks_entries_of_a_step(scope, outlived[0], outlived[1:]):
            outlived = outlived[1:]  # `for name, value in stats.items()`: each step's dict of statistics, kept entry by entry
        if not outlived or _walks_structure(outlived[0]):
            return
        loop, per_step = next(
            ((loop, why) for loop in outlived if not kept_for_one_step(store, loop) and not walks_one_step(store, loop) and (why := _per_step(scope, loop))),
            (None, None),
        )
        if loop is None or overwrites_its_keys(scope, store, loop) or bounded_or_emptied(scope, store.container, loop):
            return  # `last["loss"] = loss` holds one step's graph, replaced by the next
        backward_in_loop = [call for call in calls_in(scope, loop) if is_backward(call)]
        later_scopes = ctx.module.scopes_from(scope)
        if any(_consumed(ctx.module, later, store.container, backward_in_loop) for later in later_scopes):
            return
        if value.roots and any(_backward_after_reaches(later, loop, value) for later in later_scopes):
            return
        backwarded = any(
            not value.roots or value.roots & backward_target(call).roots or not backward_target(call).roots
            for call in backward_in_loop
        )
        container = store.container
        origin = value.note or "a graph-carrying value"
        if backwarded and any(_retains_graph(call) for call in backward_in_loop):
            severity = Severity.ERROR
            consequence = (
                "the backward keeps the graph's saved activations (`retain_graph=True`), so every iteration's "
                "activations stay in GPU memory and the run grows until it hits out-of-memory"
            )
        elif backwarded:
            severity = Severity.WARNING
            consequence = (
                "a backward already ran on it, so its activations are freed, but every step's graph "
                "nodes stay referenced in host memory for the rest of the run"
            )
        else:
            severity = Severity.ERROR
            consequence = (
                "nothing runs backward through it, so each iteration's activations stay in GPU "
                "memory and the run grows until it hits out-of-memory"
            )
        verb = {"augassign": "accumulated into", "accumulate": "accumulated into", "subscript": "stored in"}.get(store.kind, "appended to")
        evidence = [
            (value.site, f"{origin} carries the autograd graph"),
            (( scope.chunk, store.node), f"{verb} `{container}`, which outlives the loop"),
            ((scope.chunk, loop.node), f"the loop it accumulates across, once per step: {per_step}"),
        ]
        if backwarded:
            evidence.append(((backward_in_loop[0].chunk, backward_in_loop[0].node), "backward runs here"))
        message = (
            f"`{container}` keeps the autograd graph of every iteration alive: {origin} carries a graph and "
            f"is {verb} `{container}` each time round the loop; {consequence}"
        )
        if item_backward is not None and _backwards_an_item(item_backward, container):
            # the backward runs through the list's item, so it needs the graph: keep a detached copy after it instead
            fix, advice = None, f"backward the value itself and keep `.item()` (or `.detach()`) of it in `{container}`"
        else:
            fix, advice = self._fix(ctx, scope, store), "store `.item()` for logging or `.detach()` the tensor before keeping it"
        ctx.report(store.value_node, message, evidence=evidence, severity=severity, help=advice, fix=fix)

    def _check_hook_store(self, ctx: RuleContext, scope: ScopeAnalysis, store: StoreEvent) -> None:
        """``self.train_losses.append(loss)`` in a Lightning ``training_step`` (or a Trainer's
        ``compute_loss``): the framework's loop calls the method once per step, and the attribute keeps
        every step's graph after the framework has run backward on it."""
        hook = training_step_hook(ctx.summary, scope.function)
        if hook is None or not store.container.startswith("self."):
            return
        assert scope.function is not None, "training_step_hook names a method"
        returned = _returned_to_the_framework(ctx, scope, store)
        if not _known_to_hold_a_graph(store.value) and returned is None:
            return
        container = store.container
        origin = store.value.note or "a graph-carrying value"
        verb = {"augassign": "accumulated into", "accumulate": "accumulated into", "subscript": "stored in"}.get(store.kind, "appended to")
        evidence = [(store.value.site, f"{origin} carries the autograd graph")]
        fix = ctx.fix("detach before storing", [_append_method(ctx, store.value_node, "detach")], safe=True)
        if returned is not None and not _known_to_hold_a_graph(store.value):
            # The framework backwards what the step returns (the loss, or a dict's "loss"): whatever the
            # analysis could not tell of the loss function, the value kept is the one the backward runs on.
            held = quoted(scope.chunk, store.value_node)
            origin = f"`{held}`, the value `{scope.function.name}` returns for the framework's backward,"
            evidence = [((scope.chunk, returned), "returned: the framework runs backward on it (or on its \"loss\" entry)")]
            fix = None
        elif not is_known_tensor(store.value):  # a dict of stats: its entries are kept, and no `.detach()` fits it
            held = quoted(scope.chunk, store.value_node)
            origin = f"`{held}`, which holds {origin},"
            evidence += [(site, f"a graph-carrying entry of `{held}`") for site in _graph_entries(ctx, scope, store)[:1]]
            fix = None
        ctx.report(
            store.value_node,
            f"`{container}` keeps the autograd graph of every training step alive: {origin} carries a graph and is "
            f"{verb} `{container}` each step; the framework runs backward on the step's loss, so the activations "
            "are freed, but every step's graph nodes stay referenced in host memory until the attribute is emptied",
            evidence=[
                *evidence,
                ((scope.chunk, store.node), f"{verb} `{container}`, which outlives the step"),
                ((scope.chunk, scope.function.node.name), hook),
            ],
            severity=Severity.WARNING,
            help="store `.detach()` (or `.item()` for logging) in the attribute",
            fix=fix,
        )

    def _fix(self, ctx: RuleContext, scope: ScopeAnalysis, store: StoreEvent):
        """`.detach()` is safe on a value known to be one tensor, `.item()` on a loss known to be a
        scalar whose running total is only read as a number; a model's output of unknown structure
        gets an unsafe `.detach()`, and a list or tuple of tensors no fix."""
        node, value = store.value_node, store.value
        if Tag.CONTAINER in value.tags or value.items is not None:
            return None
        tensor = is_known_tensor(value)
        if _scalar_sink(scope, store):
            if ctx.module.cuda_line is not None:
                # On the GPU `.item()` is a host sync every step (TL302): the rules agree on summing on the
                # device, unsafe because the total is then a tensor (printing or saving it changes).
                return ctx.fix("keep the running total on the device (`.item()` it where it is read)",
                               [_append_method(ctx, node, "detach")], safe=False)
            return ctx.fix("use `.item()` for the running total", [_append_method(ctx, node, "item")], safe=tensor and is_scalar_loss(value))
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value in {"cpu", "to", "numpy"}:
            return ctx.fix("detach before moving to the host", [ctx.edit_insert_after(node.func.value, ".detach()")], safe=tensor)
        grows = store.kind in ("append", "extend", "insert", "subscript")  # a container, not a running sum
        if grows and not keeps_one_number(scope, store) and kept_on_the_gpu(ctx.module, scope, store) is not None:
            # Detached but left on the GPU, a batch-sized tensor kept every step is TL104's leak: the rules
            # agree on a host copy, unsafe because later code may expect the tensors on the device.
            return ctx.fix("detach and keep a host copy", [_append_method(ctx, node, "detach().cpu")], safe=False)
        return ctx.fix("detach before storing", [_append_method(ctx, node, "detach")], safe=tensor)


def _per_step(scope: ScopeAnalysis, loop: Loop) -> str | None:
    """Why ``loop`` runs once per training or evaluation step: a backward or a data loader in it, or each element
    it draws used as a batch (moved to the accelerator, fed to a model). The last only where grad is known to be
    on: not in a function a decorator wraps (yolov5's `@smart_inference_mode()` turns it off in a project helper)."""
    why = repeats_per_step(scope, loop)
    if why is not None:
        return why
    function = scope.function.node if scope.function is not None else None
    if function is not None and any(dotted(decorator.decorator) not in {"staticmethod", "classmethod"} for decorator in function.decorators):
        return None
    return draws_batches(scope, loop)


def _kept_by_a_helper(scope: ScopeAnalysis, loop: Loop):
    """(call, store, container, value) for each function the loop calls directly that appends one of its
    parameters, given a graph-carrying value by the call, to another parameter, given a container the
    caller binds before the loop and does not empty or run backward through (``record(history, loss)``)."""
    for event, chain in ordered_events(scope, loop):
        if len(chain) != 1 or not isinstance(event, StoreEvent) or event.kind not in ("append", "extend", "insert"):
            continue
        call, params = chain[0], event.scope.params
        if call.context.loop is not loop or call.context.grad_off is not None or event.context.loops or call.function is None:
            continue
        if event.container not in params or not isinstance(event.value_node, cst.Name) or event.value_node.value not in params:
            continue
        container = _name_passed(call, event.container)
        carried = _value_passed(call, event.value_node.value)
        if container is None or carried is None or Tag.GRAPH not in carried.tags:
            continue
        bindings = [other for other in scope.events if isinstance(other, AssignEvent) and container in other.targets]
        if not bindings or any(loop in binding.context.loops for binding in bindings) or bounded_or_emptied(scope, container, loop):
            continue
        if any(is_backward(other) and mentions(scope, other.node, container) for other in scope.calls()):
            continue  # `torch.stack(history).mean().backward()`: kept for a backward on purpose
        yield call, event, container, carried


def _argument(call: CallEvent, parameter: str) -> tuple[cst.Arg, Value | None] | None:
    """The argument ``call`` passes for ``parameter`` of its local function, and its value."""
    assert call.function is not None, "asked of calls of local functions"
    if any(arg.star for arg in call.arg_nodes):
        return None
    passed = call.keyword(parameter)
    if passed is not None:
        return passed, call.kwargs.get(parameter)
    positional = call.function.positional_parameters
    plain = [arg for arg in call.arg_nodes if arg.keyword is None]
    if parameter not in positional or positional.index(parameter) >= len(plain):
        return None
    index = positional.index(parameter)
    return plain[index], call.args[index] if index < len(call.args) else None


def _name_passed(call: CallEvent, parameter: str) -> str | None:
    found = _argument(call, parameter)
    return found[0].value.value if found is not None and isinstance(found[0].value, cst.Name) else None


def _value_passed(call: CallEvent, parameter: str) -> Value | None:
    found = _argument(call, parameter)
    return found[1] if found is not None else None


def _registered_buffers(ctx: RuleContext, scope: ScopeAnalysis) -> dict[str, cst.CSTNode]:
    """``self.<name>`` -> its ``register_buffer`` call, for the buffers the module's ``__init__`` registers
    by a literal name, when ``scope`` is the ``forward`` of a module class (it runs every training step)."""
    function = scope.function
    owner = function.owner if function is not None else None
    if function is None or owner is None or function.name != "forward" or scope.summary.local_class_kind(owner).kind != MODULE:
        return {}
    init = owner.find_method("__init__", scope.summary)
    analysis = init.analysis(scope.summary) if init is not None else None
    if analysis is None:
        return {}
    return {
        f"self.{string_value(call.arg_nodes[0].value)}": call.node for call in analysis.calls()
        if call.method == "register_buffer" and call.receiver_key == "self" and call.arg_nodes
        and string_value(call.arg_nodes[0].value) is not None
    }


def _detached_before(scope: ScopeAnalysis, update, buffer: str) -> bool:
    """Earlier in the function, ``buffer`` is rebound to a value without a graph or detached in place."""
    for event in scope.events:
        if event is update:
            return False
        if isinstance(event, AssignEvent) and event.targets == (buffer,) and Tag.GRAPH not in event.value.tags:
            return True
        if isinstance(event, CallEvent) and event.receiver_key == buffer and event.method in {"detach_", "zero_", "fill_"}:
            return True
    return False


# In-place updates that fold their arguments into the tensor (its old value stays in the graph).
_FOLDING_METHODS = frozenset({"add_", "sub_", "mul_", "div_", "lerp_", "addcmul_", "addcdiv_"})


def _buffer_update(scope: ScopeAnalysis, event) -> tuple[str, cst.CSTNode, Value] | None:
    """(buffer, node, graph-carrying value) when ``event`` rebinds or updates ``self.<attribute>`` in place
    from its own previous value and a value that carries a graph; None otherwise."""
    if isinstance(event, AssignEvent):
        if len(event.targets) != 1 or not event.targets[0].startswith("self.") or event.value_node is None:
            return None
        buffer = event.targets[0]
        if Tag.GRAPH not in event.value.tags or not mentions(scope, event.value_node, buffer):
            return None
        return buffer, event.value_node, event.value
    if not isinstance(event, CallEvent) or not isinstance(event.node.func, cst.Attribute):
        return None
    method = event.method
    receiver = event.node.func.value
    while isinstance(receiver, cst.Call) and isinstance(receiver.func, cst.Attribute) and receiver.func.attr.value in _FOLDING_METHODS:
        receiver = receiver.func.value  # `self.avg.mul_(0.9).add_(x)`: the buffer at the chain's root
    buffer = dotted(receiver)
    if buffer is None or not buffer.startswith("self.") or buffer.count(".") != 1:
        return None
    graph = next(((arg, value) for arg, value in zip(event.arg_nodes, event.args) if Tag.GRAPH in value.tags), None)
    if graph is None:
        return None
    if method in _FOLDING_METHODS or (method == "copy_" and mentions(scope, graph[0].value, buffer)):
        return buffer, graph[0].value, graph[1]
    return None


def _input_fold(scope: ScopeAnalysis, event) -> tuple[str, cst.CSTNode, str] | None:
    """(buffer, node, parameter) when ``event`` folds into ``self.<attribute>`` (in place, or rebinding it from its
    own value) an expression computed from a tensor parameter of the forward, not detached on the way."""
    derived = _derived_from_inputs(scope).get(id(event))
    if not derived:
        return None
    if isinstance(event, AssignEvent):
        if len(event.targets) != 1 or not event.targets[0].startswith("self.") or event.value_node is None:
            return None
        if not mentions(scope, event.value_node, event.targets[0]):
            return None
        source = _undetached_source(event.value_node, derived)
        return (event.targets[0], event.value_node, derived[source]) if source is not None else None
    if not isinstance(event, CallEvent) or not isinstance(event.node.func, cst.Attribute) or event.method not in _FOLDING_METHODS:
        return None
    receiver = event.node.func.value
    while isinstance(receiver, cst.Call) and isinstance(receiver.func, cst.Attribute) and receiver.func.attr.value in _FOLDING_METHODS:
        receiver = receiver.func.value
    buffer = dotted(receiver)
    if buffer is None or not buffer.startswith("self.") or buffer.count(".") != 1:
        return None
    for arg in event.arg_nodes:
        source = _undetached_source(arg.value, derived)
        if source is not None:
            return buffer, arg.value, derived[source]
    return None


def _derived_from_inputs(scope: ScopeAnalysis) -> dict[int, dict[str, str]]:
    """For each event of the forward (by ``id``), its local names computed from one of its tensor parameters (name ->
    that parameter) as the bindings before it in source order left them: ``x = x @ self.weight.t()``,
    ``f = x.reshape(-1, d)``; a name rebound from a detached value is not, and a binding after the event does not
    count for it (``x_min = x.data.min()`` folded, then ``x_min = specified_min`` below for another use). Kept with the
    scope: every event of a forward that updates no buffer asks it (``_input_fold``)."""
    return kept_with_scope(scope, ("tl101 derived from inputs",), lambda: _names_derived_from_inputs(scope))


def _names_derived_from_inputs(scope: ScopeAnalysis) -> dict[int, dict[str, str]]:
    function = scope.function
    if function is None:
        return {}
    derived = {name: name for name in function.positional_parameters if name != "self"}
    before: dict[int, dict[str, str]] = {}
    for event in scope.events:
        before[id(event)] = derived
        if not isinstance(event, AssignEvent) or event.value_node is None:
            continue
        source = _undetached_source(event.value_node, derived)
        targets = [target for target in event.targets if "." not in target]
        if not targets:
            continue
        derived = dict(derived)  # the events before this one keep the names as they were
        for target in targets:
            if source is None:
                derived.pop(target, None)
            else:
                derived[target] = derived[source]
    return before


# What keeps no graph of the value it is called on.
_CUTTING_METHODS = frozenset({"detach", "detach_", "item", "tolist", "numpy"})
# What describes a tensor without reading its values (read or called: `x.size(0)`).
_DESCRIBING_ATTRIBUTES = frozenset({"dtype", "device", "shape", "ndim", "size", "dim", "is_cuda", "requires_grad"})


def _undetached_source(expression: cst.BaseExpression, derived: dict[str, str]) -> str | None:
    """A name of ``derived`` that ``expression`` computes from, when nothing in it detaches (``.detach()``, ``.data``,
    ``.item()``); None otherwise."""
    nodes = list(_walk(expression))
    # `k.dtype`, `h.device`, `x.size(0)`: what a tensor is, not its values; an attribute's name is not a local
    described = {id(node.value) for node in nodes if isinstance(node, cst.Attribute) and node.attr.value in _DESCRIBING_ATTRIBUTES}
    described |= {id(node.attr) for node in nodes if isinstance(node, cst.Attribute)}
    names = []
    for node in nodes:
        if isinstance(node, cst.Attribute) and node.attr.value == "data":
            return None
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value in _CUTTING_METHODS:
            return None
        if isinstance(node, cst.Name) and node.value in derived and id(node) not in described:
            names.append(node.value)
    return names[0] if names else None


def _held_by_modules(ctx: RuleContext, owner) -> list:
    """Where another module class's ``__init__`` (of this file or another) builds ``owner``: each a site."""
    def read(module, call: CallEvent):
        function = call.scope.function
        holder = function.owner if function is not None else None
        if function is None or holder is None or function.name != "__init__" or holder is owner:
            return None
        if module.summary.local_class_kind(holder).kind != MODULE:
            return None
        return (call.chunk, call.node)

    here = [
        site for call in ctx.module.all_calls() if call.function is None and call.callee == owner.name
        and (site := read(ctx.module, call)) is not None
    ]
    return here + [site for site in constructions_elsewhere(ctx.summary, owner, read) if site is not None]


def _graph_entries(ctx: RuleContext, scope: ScopeAnalysis, store: StoreEvent) -> list:
    """Where a graph-carrying entry went into the dict a store keeps, when a function of this file
    called before the store filled and returned it (``metrics["nll"] = nll.cpu().mean()``)."""
    sites = []
    for call in scope.calls():
        if call.function is None or call.chunk.line_of(call.node) > scope.chunk.line_of(store.node):
            continue
        inner = call.function.analysis(ctx.summary)
        if inner is None or Tag.GRAPH not in inner.return_value.tags:
            continue
        sites += [
            (inner.chunk, event.value_node) for event in inner.events
            if isinstance(event, StoreEvent) and event.kind == "subscript" and "." not in event.container
            and Tag.GRAPH in event.value.tags and event.context.grad_off is None
        ]
    return sites


def _returned_to_the_framework(ctx: RuleContext, scope: ScopeAnalysis, store: StoreEvent) -> cst.Return | None:
    """The ``return`` of a training-step hook that hands back the very name the store keeps
    (``self.outputs.append(log)`` then ``return log``), unless the module steps its own optimizers
    (Lightning's manual optimization: then nothing backwards what the step returns)."""
    function = scope.function
    if function is None or not isinstance(store.value_node, cst.Name) or manual_optimization(ctx.summary, function.owner):
        return None
    name = store.value_node.value
    return next(
        (statement for statement in _returns_of(function.node.body)
         if isinstance(statement.value, cst.Name) and statement.value.value == name),
        None,
    )


def _returns_of(node: cst.CSTNode):
    """The ``return`` statements of a function's body, not of the functions and classes it defines."""
    for child in node.children:
        if isinstance(child, cst.Return):
            yield child
        elif not isinstance(child, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            yield from _returns_of(child)


def _known_to_hold_a_graph(value) -> bool:
    """One tensor, or a dict or list of them that the analysis saw a graph-carrying entry put into
    (``metrics["nll_loss"] = nll_loss.cpu().mean()``); a model's output of unknown structure is neither."""
    tags = value.tags
    return is_known_tensor(value) or (Tag.CONTAINER in tags and Tag.GRAPH in tags and Tag.STRUCTURED not in tags)


def _consumed(module: ModuleView, scope: ScopeAnalysis, container: str, backward_in_loop: list) -> bool:
    """A backward runs through the container later, or it is handed back to a caller that runs one."""
    for event in scope.events:
        if isinstance(event, CallEvent) and is_backward(event) and mentions(scope, event.node, container) and not _backwards_an_item(event, container):
            return True
        if isinstance(event, JumpEvent) and isinstance(event.node, cst.Return) and event.node.value is not None:
            returned = scope.evaluate(event.node.value, event.context)
            if Tag.GRAPH in returned.tags and mentions(scope, event.node, container) and _returned_for_backward(module, scope, backward_in_loop):
                return True
        if isinstance(event, CallEvent) and event.function is not None and any(
            mentions(scope, arg.value, container) for arg in event.arg_nodes
        ):
            inner = event.function.analysis(scope.summary)
            if inner is not None and any(is_backward(call) for call in calls_in(inner, None)):
                return True
    return False


def _item_backwarded(scope: ScopeAnalysis, store: StoreEvent) -> CallEvent | None:
    """A backward the store's innermost loop runs through what it appends: an item of the list
    (``losses[-1].backward()``), or the name appended, bound once in the loop (``history.append(loss)``
    then ``loss.backward()``, ``scaler.scale(loss).backward()``, ``accelerator.backward(loss)``). A value
    that is backwarded carries a graph, whatever made it (an objective handed in as a parameter)."""
    loop = store.context.loop
    if loop is None:
        return None
    if any(
        isinstance(other, StoreEvent) and other.kind == "subscript" and other.container == store.container
        and loop in other.context.loops for other in scope.events
    ):
        return None  # `losses[-1] = losses[-1].item()` after the backward: the list keeps numbers
    appended = store.value_node.value if isinstance(store.value_node, cst.Name) else None
    if appended is not None and sum(
        1 for event in events_in(scope, loop) if isinstance(event, AssignEvent) and appended in event.targets
    ) != 1:
        appended = None  # rebound in the loop (`loss = loss.item()`): which binding the backward ran on is not known
    return next((
        call for call in calls_in(scope, loop, depth=0)
        if is_backward(call) and (_backwards_an_item(call, store.container) or (appended is not None and _backwards_name(call, appended)))
    ), None)


def _backwards_name(call: CallEvent, name: str) -> bool:
    """``name.backward()``, ``scaler.scale(name).backward()``, or an owner's ``backward(name)``."""
    func = call.node.func if isinstance(call.node, cst.Call) else None
    if isinstance(func, cst.Attribute) and func.attr.value == "backward":
        receiver = func.value
        if isinstance(receiver, cst.Call) and receiver.args:  # `scaler.scale(loss)`: the scaled loss's graph
            receiver = receiver.args[0].value
        if isinstance(receiver, cst.Name) and receiver.value == name:
            return True
    owner_backward = call.callee == "torch.autograd.backward" or (bool(call.args) and backward_target(call) is call.args[0])
    first = call.node.args[0].value if call.node.args else None
    return owner_backward and isinstance(first, cst.Name) and first.value == name


def _backwards_an_item(call: CallEvent, container: str) -> bool:
    """``container[i].backward(...)``: one step's item, not the whole container, is backwarded."""
    func = call.node.func if isinstance(call.node, cst.Call) else None
    return (
        isinstance(func, cst.Attribute) and func.attr.value == "backward"
        and isinstance(func.value, cst.Subscript) and dotted(func.value.value) == container
    )


def _returned_for_backward(module: ModuleView, scope: ScopeAnalysis, backward_in_loop: list) -> bool:
    """Returning the graph-carrying container is handing it on for a backward (``return losses`` to a
    caller that stacks and backwards them) unless the loop already backwarded what it kept (the
    graphs are spent; only the leak is returned), the function is an evaluation pass (named so, or
    switching a model to eval mode with no backward of its own), or no caller in this module runs a backward."""
    if backward_in_loop or scope.function is None or is_eval_name(scope.function.name) or _evaluation_pass(scope):
        return False
    callers = module.calls_of(scope.function)
    return not callers or any(is_backward(call) for caller in callers for call in calls_in(caller.scope, None))


def _evaluation_pass(scope: ScopeAnalysis) -> bool:
    """The function switches a model to eval mode (``net.eval()``, nn.Module's method: no argument) and runs no
    backward: it evaluates."""
    calls = list(calls_in(scope, None))
    return any(call.method == "eval" and call.receiver is not None and not call.arg_nodes for call in calls) and not any(
        is_backward(call) for call in calls
    )


def _bound_before(scope: ScopeAnalysis, loop: Loop) -> set[str]:
    """Names with a value when the loop starts: parameters and names assigned before it."""
    names = set(scope.params)
    start = scope.chunk.line_of(loop.node)
    for event in scope.events:
        if isinstance(event, AssignEvent) and not event.context.in_loop(loop) and scope.chunk.line_of(event.node) < start:
            names.update(event.targets)
    return names


def _rebinds_before(scope: ScopeAnalysis, loop: Loop, name: str, assign: AssignEvent):
    """Assignments of ``name`` inside the loop that run before ``assign``."""
    for event in scope.events:
        if event is assign:
            return
        if isinstance(event, AssignEvent) and event.context.in_loop(loop) and name in event.targets:
            yield event


def _retains_graph(call: CallEvent) -> bool:
    keyword = call.keyword("retain_graph")
    return keyword is not None and isinstance(keyword.value, cst.Name) and keyword.value.value == "True"


def _backward_after_reaches(scope: ScopeAnalysis, loop: Loop, value) -> bool:
    """A backward outside the loop runs through what was stored: ``stack(losses).sum()`` folded
    into a total loss, or a per-layer sum added to the step's loss, before one backward."""
    return any(
        is_backward(event) and not event.context.in_loop(loop) and value.roots & backward_target(event).roots
        for event in scope.calls()
    )


# Iterating a model's structure or a dict's entries is bounded by the model, not by the run:
# a sum over layers or heads is one step's loss, freed when the step ends.
_STRUCTURE_METHODS = frozenset({
    "items", "values", "keys", "children", "named_children", "modules", "named_modules",
    "parameters", "named_parameters",
})


def _walks_entries_of_a_step(scope: ScopeAnalysis, loop: Loop, outer: list[Loop]) -> bool:
    """``loop`` walks the entries of a dict bound anew in one of the ``outer`` loops (`for name, value in
    stats.items()` under `stats = compute_stats(...)`): what it keeps, it keeps once per outer iteration."""
    iterable = loop.node.iter if isinstance(loop.node, cst.For) else None
    if not (isinstance(iterable, cst.Call) and isinstance(iterable.func, cst.Attribute) and not iterable.args
            and iterable.func.attr.value in {"items", "values"} and isinstance(iterable.func.value, cst.Name)):
        return False
    name = iterable.func.value.value
    return any(
        isinstance(event, AssignEvent) and name in event.targets and any(enclosing in event.context.loops for enclosing in outer)
        for event in scope.events
    )


def _walks_structure(loop: Loop) -> bool:
    iterable = loop.node.iter if isinstance(loop.node, cst.For) else None
    if isinstance(iterable, cst.Call) and isinstance(iterable.func, cst.Name) and iterable.func.value in {"enumerate", "zip"}:
        iterable = iterable.args[0].value if iterable.args else None
    return (
        isinstance(iterable, cst.Call)
        and isinstance(iterable.func, cst.Attribute)
        and iterable.func.attr.value in _STRUCTURE_METHODS
    )


def _scalar_sink(scope: ScopeAnalysis, store: StoreEvent) -> bool:
    """A running total started as a Python number and never used as a tensor: `.item()` keeps it one."""
    if store.kind not in {"augassign", "accumulate"}:
        return False
    initial = [e for e in scope.events if isinstance(e, AssignEvent) and e.targets == (store.container,)]
    if not initial or not (initial[0].value.tags & {Tag.NUMBER, Tag.CONSTANT}):
        return False
    for event in scope.events:
        if not isinstance(event, CallEvent):
            continue
        if event.receiver_key == store.container:
            return False  # `total.item()`, `total.backward()`: used as a tensor
        called = event.method or (event.callee or "").rpartition(".")[2]
        if called not in _NUMBER_SINKS and any(mentions(scope, arg.value, store.container) for arg in event.arg_nodes):
            return False  # `dist.all_reduce(total)`, `torch.tensor(total)`: a float would not do
    return True


# Calls that read a running total as a number: a float works as well as a tensor there.
_NUMBER_SINKS = frozenset({
    "float", "int", "round", "print", "str", "format", "abs", "max", "min", "append",
    "info", "debug", "warning", "log", "add_scalar", "set_postfix", "set_description", "write",
})


def _append_method(ctx: RuleContext, node: cst.BaseExpression, method: str):
    simple = isinstance(node, (cst.Name, cst.Attribute, cst.Call, cst.Subscript)) and not node.lpar
    if simple:
        return ctx.edit_insert_after(node, f".{method}()")
    return ctx.edit_replace(node, f"({ctx.chunk.code_for(node).strip()}).{method}()")


_COVARIANCE_LAYER = """
import torch
import torch.nn as nn


class FeatureRotation(nn.Module):
    def __init__(self, channels, beta=0.9):
        super().__init__()
        self.register_buffer("rotation", torch.eye(channels))
        self.register_buffer("feature_cov", torch.eye(channels))
        self.beta = beta
        self.calls = 0

    def forward(self, x):
        x = torch.matmul(x, self.rotation.t())
        if self.training and self.calls % 10 == 0:
            flat = x.reshape(-1, x.shape[-1]){detach}
{update}
        self.calls += 1
        return x
"""
_COVARIANCE_UPDATE = "            self.feature_cov.mul_(self.beta).add_(flat.t() @ flat, alpha=1 - self.beta)"
_COVARIANCE_BLOCK = """

class EncoderBlock(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.ff = nn.Sequential(nn.Linear(channels, 4 * channels), nn.ReLU(), nn.Linear(4 * channels, channels))
        self.rotate = FeatureRotation(channels)

    def forward(self, x):
        return self.rotate(x + self.ff(x))
"""

RetainedGraph.MUST_FIRE = (
    Fires(  # covariance statistics folded from the layer's input, which carries the graph of the block's trained layers
        _COVARIANCE_LAYER.format(detach="", update=_COVARIANCE_UPDATE) + _COVARIANCE_BLOCK,
        no_fix=True,
        at=_COVARIANCE_UPDATE.strip(),
        severity=Severity.WARNING,
    ),
    Fires(  # the same layer with no module in view that builds it: what feeds it is not known, a note
        _COVARIANCE_LAYER.format(detach="", update=_COVARIANCE_UPDATE),
        no_fix=True,
        at=_COVARIANCE_UPDATE.strip(),
        severity=Severity.NOTE,
    ),
    Fires(  # the objective comes from a callable the caller hands in; the loop backwards what it appends
        """
        import torch


        def negative_mean(activations):
            return -activations.mean()


        class FeatureVisualizer:
            def __init__(self, model, image):
                self.model = model
                self.image = image

            def objective(self):
                return self.model(self.image)

            def run(self, steps=256, summarize=negative_mean, optimizer=None):
                optimizer = optimizer or torch.optim.Adam([self.image], lr=0.05)
                history = []
                step = 0
                while step < steps:
                    optimizer.zero_grad()
                    value = summarize(self.objective())
                    history.append(value)
                    value.backward()
                    optimizer.step()
                    step += 1
                return torch.stack(history)
        """,
        at="history.append(value)",
        fixed="""
        import torch


        def negative_mean(activations):
            return -activations.mean()


        class FeatureVisualizer:
            def __init__(self, model, image):
                self.model = model
                self.image = image

            def objective(self):
                return self.model(self.image)

            def run(self, steps=256, summarize=negative_mean, optimizer=None):
                optimizer = optimizer or torch.optim.Adam([self.image], lr=0.05)
                history = []
                step = 0
                while step < steps:
                    optimizer.zero_grad()
                    value = summarize(self.objective())
                    history.append(value.detach())
                    value.backward()
                    optimizer.step()
                    step += 1
                return torch.stack(history)
        """,
        unsafe=True,  # what the summarize callable returns is not known to be a tensor: `.detach()` may not exist on it
    ),
    Fires(  # each element drawn is run through the network with the state it carries: a loop over batches
        """
        import torch.nn.functional as F


        def replay(net, source, width):
            net.eval()
            state = net.init_hidden(width)
            total = 0.0
            for a, b in source:
                out, state = net(a, state)
                total += F.cross_entropy(out.flatten(0, 1), b.flatten()).item()
            return total / len(source)
        """,
        severity=Severity.ERROR,
    ),
    Fires(  # a helper appends the step's loss to the list the loop hands it: the caller's list keeps every graph
        """
        import torch
        import torch.nn as nn


        def remember(losses, loss):
            losses.append(loss)


        def train(model, loader, optimizer, epochs):
            criterion = nn.CrossEntropyLoss()
            losses = []
            for epoch in range(epochs):
                for images, labels in loader:
                    logits = model(images)
                    loss = criterion(logits, labels)
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
                    remember(losses, loss)
            return losses
        """,
        no_fix=True,
        at="remember(losses, loss)",
    ),
    Fires(  # running statistics folded from the layer's output with grad on: each step's graph chains onto the last
        """
        import torch
        import torch.nn as nn


        class AdaptiveNorm(nn.Module):
            def __init__(self, dim, momentum=0.01):
                super().__init__()
                self.project = nn.Linear(dim, dim)
                self.momentum = momentum
                self.register_buffer("running_mean", torch.zeros(dim))

            def forward(self, x):
                h = self.project(x)
                if self.training:
                    self.running_mean.mul_(1 - self.momentum).add_(h.mean(0), alpha=self.momentum)
                return h - self.running_mean
        """,
        no_fix=True,
        at="self.running_mean.mul_(1 - self.momentum).add_(h.mean(0), alpha=self.momentum)",
    ),
    Fires(
        """
        import torch
        import torch.nn as nn

        model = nn.Linear(10, 2)
        criterion = nn.CrossEntropyLoss()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        losses = []
        for x, y in loader:
            optimizer.zero_grad()
            loss = criterion(model(x), y)
            loss.backward()
            optimizer.step()
            losses.append(loss)
        """,
        fixed="""
        import torch
        import torch.nn as nn

        model = nn.Linear(10, 2)
        criterion = nn.CrossEntropyLoss()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        losses = []
        for x, y in loader:
            optimizer.zero_grad()
            loss = criterion(model(x), y)
            loss.backward()
            optimizer.step()
            losses.append(loss.detach())
        """,
        severity=Severity.WARNING,
    ),
    Fires(
        """
        import torch.nn.functional as F

        def evaluate_all(model, batches):
            total = 0.0
            for x, y in batches:
                total += F.cross_entropy(model(x), y)
            return float(total) / len(batches)
        """,
        fixed="""
        import torch.nn.functional as F

        def evaluate_all(model, batches):
            total = 0.0
            for x, y in batches:
                total += F.cross_entropy(model(x), y).item()
            return float(total) / len(batches)
        """,
        severity=Severity.ERROR,
    ),
    Fires(
        """
        import torch

        def collect(net_g, noise_batches):
            samples = {}
            for step, z in enumerate(noise_batches):
                fake = net_g(z)
                samples[step] = fake.cpu()
            torch.save(samples, "samples.pt")
        """,
        fixed="""
        import torch

        def collect(net_g, noise_batches):
            samples = {}
            for step, z in enumerate(noise_batches):
                fake = net_g(z)
                samples[step] = fake.detach().cpu()
            torch.save(samples, "samples.pt")
        """,
        severity=Severity.ERROR,
    ),
    Fires(  # a running total on the GPU: `.item()` would sync every step (TL302), so the fix sums on the device
        """
        import torch
        import torch.nn.functional as F


        def train(model, loader, optimizer, epochs, device="cuda"):
            model.to(device)
            for epoch in range(epochs):
                running = 0.0
                for images, labels in loader:
                    optimizer.zero_grad()
                    loss = F.cross_entropy(model(images.to(device)), labels.to(device))
                    loss.backward()
                    optimizer.step()
                    running += loss
                print(f"epoch {epoch}: mean loss {running / len(loader):.4f}")
        """,
        fixed="""
        import torch
        import torch.nn.functional as F


        def train(model, loader, optimizer, epochs, device="cuda"):
            model.to(device)
            for epoch in range(epochs):
                running = 0.0
                for images, labels in loader:
                    optimizer.zero_grad()
                    loss = F.cross_entropy(model(images.to(device)), labels.to(device))
                    loss.backward()
                    optimizer.step()
                    running += loss.detach()
                print(f"epoch {epoch}: mean loss {running / len(loader):.4f}")
        """,
        severity=Severity.WARNING,
        unsafe=True,  # `running` becomes a tensor: code that prints or saves it as a float sees the change
    ),
    Fires(  # on the GPU: a detached loss is one number a step, so `.detach()` ends the leak and TL104 agrees
        """
        import torch

        torch.manual_seed(0)
        device = torch.device("cuda")
        model = torch.nn.Linear(10, 2).to(device)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        losses = []
        for x, y in loader:
            optimizer.zero_grad()
            loss = model(x.to(device)).sum()
            loss.backward()
            optimizer.step()
            losses.append(loss)
        """,
        fixed="""
        import torch

        torch.manual_seed(0)
        device = torch.device("cuda")
        model = torch.nn.Linear(10, 2).to(device)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        losses = []
        for x, y in loader:
            optimizer.zero_grad()
            loss = model(x.to(device)).sum()
            loss.backward()
            optimizer.step()
            losses.append(loss.detach())
        """,
        severity=Severity.WARNING,
    ),
    Fires(
        """
        import torch
        from torchvision.models import resnet18

        encoder = resnet18()
        features = []
        for images, _ in loader:
            features.append(encoder(images.cuda()))
        torch.save(features, "feats.pt")
        """,
        fixed="""
        import torch
        from torchvision.models import resnet18

        encoder = resnet18()
        features = []
        for images, _ in loader:
            features.append(encoder(images.cuda()).detach().cpu())
        torch.save(features, "feats.pt")
        """,
        severity=Severity.ERROR,
        unsafe=True,  # on the GPU a detached batch of features would still grow (TL104): a host copy, which later code may not expect
    ),
    Fires(
        """
        import torch.nn as nn

        class Trainer:
            def __init__(self, model):
                self.model = model
                self.criterion = nn.MSELoss()
                self.history = []

            def fit(self, loader, optimizer):
                for x, y in loader:
                    optimizer.zero_grad()
                    loss = self.criterion(self.model(x), y)
                    loss.backward()
                    optimizer.step()
                    self.history.append(loss)
        """,
        fixed="""
        import torch.nn as nn

        class Trainer:
            def __init__(self, model):
                self.model = model
                self.criterion = nn.MSELoss()
                self.history = []

            def fit(self, loader, optimizer):
                for x, y in loader:
                    optimizer.zero_grad()
                    loss = self.criterion(self.model(x), y)
                    loss.backward()
                    optimizer.step()
                    self.history.append(loss.detach())
        """,
        severity=Severity.WARNING,
    ),
    Fires(
        """
        import torch.nn as nn

        criterion = nn.CrossEntropyLoss()

        def train_step(model, optimizer, x, y):
            optimizer.zero_grad()
            loss = criterion(model(x), y)
            loss.backward()
            optimizer.step()
            return loss

        def train(model, optimizer, loader):
            epoch_loss = 0
            for x, y in loader:
                step_loss = train_step(model, optimizer, x, y)
                epoch_loss = epoch_loss + step_loss
            print(epoch_loss)
        """,
        fixed="""
        import torch.nn as nn

        criterion = nn.CrossEntropyLoss()

        def train_step(model, optimizer, x, y):
            optimizer.zero_grad()
            loss = criterion(model(x), y)
            loss.backward()
            optimizer.step()
            return loss

        def train(model, optimizer, loader):
            epoch_loss = 0
            for x, y in loader:
                step_loss = train_step(model, optimizer, x, y)
                epoch_loss = epoch_loss + step_loss.item()
            print(epoch_loss)
        """,
        severity=Severity.WARNING,
    ),
    Fires(
        """
        import torch

        w = torch.randn(3, requires_grad=True)
        trace = []
        for x in data:
            y = (w * x).sum()
            trace.append(y)
        print(len(trace))
        """,
        fixed="""
        import torch

        w = torch.randn(3, requires_grad=True)
        trace = []
        for x in data:
            y = (w * x).sum()
            trace.append(y.detach())
        print(len(trace))
        """,
        severity=Severity.ERROR,
    ),
    Fires(
        """
        import torch

        def train(model, train_loader, optimizer, criterion):
            logged = []
            for step, batch in enumerate(train_loader):
                outputs = [model(x) for x in batch["views"]]
                loss = sum(criterion(o, batch["y"]) for o in outputs)
                loss.backward()
                optimizer.step()
                optimizer.zero_grad()
                logged.append(outputs)
            print(f"kept {len(logged)} steps of outputs")
        """,
        severity=Severity.WARNING,
        no_fix=True,  # a list of tensors has no `.detach()`
    ),
    Fires(
        """
        from transformers import AutoModelForCausalLM

        model = AutoModelForCausalLM.from_pretrained("gpt2")
        kept = []
        for batch in eval_dataloader:
            outputs = model(**batch)
            kept.append(outputs)
        """,
        fixed="""
        from transformers import AutoModelForCausalLM

        model = AutoModelForCausalLM.from_pretrained("gpt2")
        kept = []
        for batch in eval_dataloader:
            outputs = model(**batch)
            kept.append(outputs.detach())
        """,
        unsafe=True,  # a Hugging Face model returns a ModelOutput, which has no `.detach()`
        severity=Severity.ERROR,
    ),
    Fires(  # objects: `self(votes)` in a method of an nn.Module is its forward
        """
        import torch
        import torch.nn as nn

        class LabelModel(nn.Module):
            def __init__(self, num_sources):
                super().__init__()
                self.accuracy = nn.Parameter(torch.zeros(num_sources))

            def forward(self, votes):
                return torch.log_softmax(votes * self.accuracy, dim=1).sum(dim=1)

            def estimate(self, batches, epochs=5, lr=0.1):
                optimizer = torch.optim.SGD(self.parameters(), lr=lr)
                for epoch in range(epochs):
                    running_loss = 0.0
                    for votes in batches:
                        optimizer.zero_grad()
                        loss = -torch.mean(self(votes))
                        loss.backward()
                        optimizer.step()
                        running_loss += loss
                    print(f"epoch {epoch}: {float(running_loss) / len(batches):.4f}")
        """,
        fixed="""
        import torch
        import torch.nn as nn

        class LabelModel(nn.Module):
            def __init__(self, num_sources):
                super().__init__()
                self.accuracy = nn.Parameter(torch.zeros(num_sources))

            def forward(self, votes):
                return torch.log_softmax(votes * self.accuracy, dim=1).sum(dim=1)

            def estimate(self, batches, epochs=5, lr=0.1):
                optimizer = torch.optim.SGD(self.parameters(), lr=lr)
                for epoch in range(epochs):
                    running_loss = 0.0
                    for votes in batches:
                        optimizer.zero_grad()
                        loss = -torch.mean(self(votes))
                        loss.backward()
                        optimizer.step()
                        running_loss += loss.item()
                    print(f"epoch {epoch}: {float(running_loss) / len(batches):.4f}")
        """,
        unsafe=True,
        severity=Severity.WARNING,
    ),
    Fires(  # objects: a value something calls `backward` on carries a graph, whatever produced it
        """
        class Trainer:
            def __init__(self, max_epochs):
                self.max_epochs = max_epochs

            def train_epoch(self, module, dataloader, optimizer):
                outputs = []
                for i, batch in enumerate(dataloader):
                    optimizer.zero_grad()
                    output = module.training_step(batch, i)
                    output["loss"].backward()
                    optimizer.step()
                    outputs.append(output)
                return module.training_epoch_end(outputs)
        """,
        severity=Severity.WARNING,
        no_fix=True,  # a dict of results has no `.detach()`
    ),
    Fires(  # returns: an accumulator handed back to the caller outlives the loop just the same
        """
        import torch

        def train_epoch(model, loader, optimizer, criterion):
            model.train()
            epoch_loss = 0.0
            for inputs, targets in loader:
                optimizer.zero_grad()
                loss = criterion(model(inputs), targets)
                loss.backward()
                optimizer.step()
                epoch_loss += loss
            return epoch_loss / len(loader)

        def fit(model, loader, optimizer, criterion, epochs):
            for epoch in range(epochs):
                print(f"epoch {epoch}: {train_epoch(model, loader, optimizer, criterion):.3f}")
        """,
        fixed="""
        import torch

        def train_epoch(model, loader, optimizer, criterion):
            model.train()
            epoch_loss = 0.0
            for inputs, targets in loader:
                optimizer.zero_grad()
                loss = criterion(model(inputs), targets)
                loss.backward()
                optimizer.step()
                epoch_loss += loss.item()
            return epoch_loss / len(loader)

        def fit(model, loader, optimizer, criterion, epochs):
            for epoch in range(epochs):
                print(f"epoch {epoch}: {train_epoch(model, loader, optimizer, criterion):.3f}")
        """,
        unsafe=True,  # a criterion passed in may not reduce to a scalar: `.item()` could raise
        severity=Severity.WARNING,
    ),
    Fires(  # returns: inside a tuple, from an evaluation that never backwards
        """
        import torch.nn.functional as F

        def evaluate(model, loader):
            model.eval()
            total_loss, correct = 0.0, 0
            for images, labels in loader:
                logits = model(images)
                total_loss += F.cross_entropy(logits, labels)
                correct += (logits.argmax(dim=1) == labels).sum().item()
            return total_loss / len(loader), correct / len(loader.dataset)
        """,
        fixed="""
        import torch.nn.functional as F

        def evaluate(model, loader):
            model.eval()
            total_loss, correct = 0.0, 0
            for images, labels in loader:
                logits = model(images)
                total_loss += F.cross_entropy(logits, labels).item()
                correct += (logits.argmax(dim=1) == labels).sum().item()
            return total_loss / len(loader), correct / len(loader.dataset)
        """,
        severity=Severity.ERROR,
    ),
    Fires(  # state across steps: a running average of the loss tensor is a running sum of graphs
        """
        def train(model, loader, optimizer, criterion, log_every=100):
            smoothed = 0.0
            for step, (x, y) in enumerate(loader):
                optimizer.zero_grad()
                loss = criterion(model(x), y)
                loss.backward()
                optimizer.step()
                smoothed = 0.98 * smoothed + 0.02 * loss
                if step % log_every == 0:
                    print(f"step {step}: smoothed loss {float(smoothed):.4f}")
        """,
        fixed="""
        def train(model, loader, optimizer, criterion, log_every=100):
            smoothed = 0.0
            for step, (x, y) in enumerate(loader):
                optimizer.zero_grad()
                loss = criterion(model(x), y)
                loss.backward()
                optimizer.step()
                smoothed = 0.98 * smoothed + (0.02 * loss).item()
                if step % log_every == 0:
                    print(f"step {step}: smoothed loss {float(smoothed):.4f}")
        """,
        unsafe=True,
        severity=Severity.WARNING,
    ),
    Fires(  # state across steps: truncated BPTT without the truncation, kept alive by retain_graph
        """
        import torch.nn as nn

        class CharRNN(nn.Module):
            def __init__(self, vocab, hidden=256):
                super().__init__()
                self.embed = nn.Embedding(vocab, hidden)
                self.rnn = nn.LSTM(hidden, hidden, batch_first=True)
                self.head = nn.Linear(hidden, vocab)

            def forward(self, tokens, state):
                out, state = self.rnn(self.embed(tokens), state)
                return self.head(out), state

        def train(model, batches, optimizer, criterion):
            state = None
            for inputs, targets in batches:
                optimizer.zero_grad()
                logits, state = model(inputs, state)
                loss = criterion(logits.flatten(0, 1), targets.flatten())
                loss.backward(retain_graph=True)
                optimizer.step()
        """,
        severity=Severity.ERROR,
    ),
    Fires(  # state across steps: the hidden state of an evaluation with grad on grows every batch
        """
        def evaluate(model, batches, criterion, batch_size):
            model.eval()
            hidden = model.init_hidden(batch_size)
            total = 0.0
            for inputs, targets in batches:
                output, hidden = model(inputs, hidden)
                total += criterion(output.view(-1, output.size(-1)), targets.view(-1)).item()
            return total / len(batches)
        """,
        severity=Severity.ERROR,
    ),
    Fires(  # framework hooks: Lightning calls training_step once per batch; the attribute keeps every graph
        """
        import torch
        import torch.nn.functional as F
        import lightning as L

        class Classifier(L.LightningModule):
            def __init__(self):
                super().__init__()
                self.net = torch.nn.Linear(128, 10)
                self.train_losses = []

            def training_step(self, batch, batch_idx):
                x, y = batch
                loss = F.cross_entropy(self.net(x), y)
                self.train_losses.append(loss)
                self.log("train_loss", loss)
                return loss

            def on_train_epoch_end(self):
                self.log("epoch_loss", torch.stack(self.train_losses).mean())
                self.train_losses.clear()
        """,
        fixed="""
        import torch
        import torch.nn.functional as F
        import lightning as L

        class Classifier(L.LightningModule):
            def __init__(self):
                super().__init__()
                self.net = torch.nn.Linear(128, 10)
                self.train_losses = []

            def training_step(self, batch, batch_idx):
                x, y = batch
                loss = F.cross_entropy(self.net(x), y)
                self.train_losses.append(loss.detach())
                self.log("train_loss", loss)
                return loss

            def on_train_epoch_end(self):
                self.log("epoch_loss", torch.stack(self.train_losses).mean())
                self.train_losses.clear()
        """,
        severity=Severity.WARNING,
    ),
    Fires(  # frameworks: a DeepSpeed engine's forward carries a graph; its backward and step run through the engine
        """
        import deepspeed


        class Trainer:
            def __init__(self, args, model, train_loader):
                self.engine, self.optimizer, _, _ = deepspeed.initialize(args=args, model=model, model_parameters=model.parameters())
                self.train_loader = train_loader

            def train_epoch(self):
                epoch_loss = 0.0
                for batch in self.train_loader:
                    loss = self.engine(batch["input_ids"], labels=batch["labels"])
                    self.engine.backward(loss)
                    self.engine.step()
                    epoch_loss += loss
                return epoch_loss / len(self.train_loader)
        """,
        fixed="""
        import deepspeed


        class Trainer:
            def __init__(self, args, model, train_loader):
                self.engine, self.optimizer, _, _ = deepspeed.initialize(args=args, model=model, model_parameters=model.parameters())
                self.train_loader = train_loader

            def train_epoch(self):
                epoch_loss = 0.0
                for batch in self.train_loader:
                    loss = self.engine(batch["input_ids"], labels=batch["labels"])
                    self.engine.backward(loss)
                    self.engine.step()
                    epoch_loss += loss.item()
                return epoch_loss / len(self.train_loader)
        """,
        unsafe=True,
        severity=Severity.WARNING,
    ),
    Fires(  # the project's tracker keeps the tensor it is handed: every step's graph stays referenced
        """
        import torch

        from utils import LossTracker


        def train(train_loader, model, criterion, optimizer, epoch):
            model.train()
            tracker = LossTracker(len(train_loader), prefix=f"Epoch: [{epoch}]")
            for images, target in train_loader:
                output = model(images.cuda(non_blocking=True))
                loss = criterion(output, target.cuda(non_blocking=True))
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                tracker.update(loss, output.size(0))
            return tracker.history
        """,
        files={
            "utils.py": """
                class LossTracker:
                    def __init__(self, num_batches, prefix=""):
                        self.num_batches, self.prefix = num_batches, prefix
                        self.history = []

                    def update(self, loss, n):
                        self.history.append(loss)
            """,
        },
        fixed="""
        import torch

        from utils import LossTracker


        def train(train_loader, model, criterion, optimizer, epoch):
            model.train()
            tracker = LossTracker(len(train_loader), prefix=f"Epoch: [{epoch}]")
            for images, target in train_loader:
                output = model(images.cuda(non_blocking=True))
                loss = criterion(output, target.cuda(non_blocking=True))
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                tracker.update(loss.detach(), output.size(0))
            return tracker.history
        """,
        severity=Severity.WARNING,
    ),
    Fires(  # the project's averager sums the loss itself: `self.sum` carries every step's graph until reset
        """
        import torch

        from utils import Averager


        def train(model, criterion, optimizer, train_dataset, device, num_iter):
            loss_avg = Averager()
            for iteration in range(num_iter):
                image_tensors, labels = train_dataset.get_batch()
                preds = model(image_tensors.to(device)).log_softmax(2).permute(1, 0, 2)
                cost = criterion(preds, labels.to(device))
                model.zero_grad()
                cost.backward()
                optimizer.step()
                loss_avg.add(cost)
                if (iteration + 1) % 500 == 0:
                    print(f"[{iteration + 1}/{num_iter}] train loss: {loss_avg.val():0.5f}")
                    loss_avg.reset()
        """,
        files={
            "utils.py": """
                class Averager:
                    def __init__(self):
                        self.reset()

                    def add(self, v):
                        count = v.data.numel()
                        v = v.sum()
                        self.n_count += count
                        self.sum += v

                    def reset(self):
                        self.n_count = 0
                        self.sum = 0

                    def val(self):
                        return self.sum / float(self.n_count) if self.n_count else 0
            """,
        },
        fixed="""
        import torch

        from utils import Averager


        def train(model, criterion, optimizer, train_dataset, device, num_iter):
            loss_avg = Averager()
            for iteration in range(num_iter):
                image_tensors, labels = train_dataset.get_batch()
                preds = model(image_tensors.to(device)).log_softmax(2).permute(1, 0, 2)
                cost = criterion(preds, labels.to(device))
                model.zero_grad()
                cost.backward()
                optimizer.step()
                loss_avg.add(cost.detach())
                if (iteration + 1) % 500 == 0:
                    print(f"[{iteration + 1}/{num_iter}] train loss: {loss_avg.val():0.5f}")
                    loss_avg.reset()
        """,
        severity=Severity.WARNING,
    ),
    Fires(  # a list that lives on the trainer keeps every step's micro-batch losses
        """
        import torch


        class Trainer:
            def __init__(self, model, optimizer):
                self.model, self.optimizer = model.cuda(), optimizer
                self.losses = []

            def train_step(self, micro_batches):
                for micro_batch in micro_batches:
                    loss = self.model(**micro_batch).loss / len(micro_batches)
                    loss.backward()
                    self.losses.append(loss)
                self.optimizer.step()
                self.optimizer.zero_grad()
        """,
        fixed="""
        import torch


        class Trainer:
            def __init__(self, model, optimizer):
                self.model, self.optimizer = model.cuda(), optimizer
                self.losses = []

            def train_step(self, micro_batches):
                for micro_batch in micro_batches:
                    loss = self.model(**micro_batch).loss / len(micro_batches)
                    loss.backward()
                    self.losses.append(loss.detach())
                self.optimizer.step()
                self.optimizer.zero_grad()
        """,
        severity=Severity.WARNING,
    ),
    Fires(  # `dict(...)` holds what its entries hold: the policy loss's graph is kept with every mini-batch's stats
        """
        import torch
        import torch.nn.functional as F


        class PolicyTrainer:
            def __init__(self, policy, optimizer, epochs):
                self.policy = policy
                self.optimizer = optimizer
                self.epochs = epochs

            def train_minibatch(self, states, actions, advantages, old_logprobs):
                logprobs = F.log_softmax(self.policy(states), dim=-1).gather(1, actions).squeeze(1)
                ratio = torch.exp(logprobs - old_logprobs)
                loss = -torch.min(ratio * advantages, torch.clamp(ratio, 0.8, 1.2) * advantages).mean()
                self.optimizer.zero_grad()
                loss.backward()
                self.optimizer.step()
                return dict(loss=loss.detach(), ratio=ratio, clipped=(ratio - 1).abs().gt(0.2).float().mean().item())

            def step(self, loader):
                all_stats = []
                for _ in range(self.epochs):
                    for states, actions, advantages, old_logprobs in loader:
                        all_stats.append(self.train_minibatch(states, actions, advantages, old_logprobs))
                return {key: torch.stack([stats[key] for stats in all_stats]).mean() for key in ("loss", "ratio")}
        """,
        severity=Severity.WARNING,
        at="all_stats.append(self.train_minibatch(states, actions, advantages, old_logprobs))",
    ),
    Fires(  # the step's metrics dict goes to a helper of the class that appends its entries to an attribute
        """
        from collections import defaultdict

        import torch.nn.functional as F
        from transformers import Trainer


        class DistillTrainer(Trainer):
            def __init__(self, *args, teacher=None, **kwargs):
                super().__init__(*args, **kwargs)
                self.teacher = teacher
                self._stored_metrics = defaultdict(lambda: defaultdict(list))

            def batch_metrics(self, model, inputs):
                outputs = model(**inputs)
                kd_loss = F.kl_div(F.log_softmax(outputs.logits, -1), inputs["teacher_probs"], reduction="batchmean")
                metrics = {}
                metrics["kd_loss"] = kd_loss.cpu()
                metrics["ce_loss"] = outputs.loss.detach().cpu()
                return outputs.loss + kd_loss, metrics

            def compute_loss(self, model, inputs, return_outputs=False, **kwargs):
                loss, metrics = self.batch_metrics(model, inputs)
                self.store_metrics(metrics, split="train")
                return loss

            def store_metrics(self, metrics, split="train"):
                for key, value in metrics.items():
                    self._stored_metrics[split][key].append(value)
        """,
        severity=Severity.WARNING,
        at='self.store_metrics(metrics, split="train")',
    ),
    Fires(  # the statistics helper is handed the policy's log-probabilities: the dict it returns holds their graph
        """
        import torch

        from ppo_utils import policy_stats


        class PPOTrainer:
            def __init__(self, policy, optimizer, ppo_epochs=4):
                self.policy = policy
                self.optimizer = optimizer
                self.ppo_epochs = ppo_epochs

            def train_minibatch(self, batch):
                logprobs = self.policy(batch["input_ids"]).log_softmax(-1)
                loss, stats = policy_stats(logprobs, batch["old_logprobs"], batch["advantages"])
                self.optimizer.zero_grad()
                loss.backward()
                self.optimizer.step()
                return stats

            def step(self, minibatches):
                all_stats = []
                for _ in range(self.ppo_epochs):
                    for batch in minibatches:
                        all_stats.append(self.train_minibatch(batch))
                return all_stats
        """,
        files={
            "ppo_utils.py": """
                import torch


                def policy_stats(logprobs, old_logprobs, advantages, clip=0.2):
                    ratio = torch.exp(logprobs - old_logprobs)
                    clipped = torch.clamp(ratio, 1 - clip, 1 + clip)
                    loss = -torch.min(advantages * ratio, advantages * clipped).mean()
                    stats = dict(policy_loss=loss, ratio=ratio.mean(), clipfrac=(ratio != clipped).float().mean())
                    return loss, stats
            """,
        },
        no_fix=True,
        severity=Severity.WARNING,
        at="self.train_minibatch(batch)",
    ),
    Fires(  # a smoothing helper returns a running average of its first argument: the average chains every step's loss
        """
        import torch.nn.functional as F


        def smooth(average, value, beta=0.98):
            return value if average is None else beta * average + (1 - beta) * value


        def train(model, loader, optimizer, log_every=100):
            running_loss = None
            for step, (images, labels) in enumerate(loader):
                loss = F.cross_entropy(model(images), labels)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                running_loss = smooth(running_loss, loss)
                if step % log_every == 0:
                    print(f"step {step}: loss {float(running_loss):.4f}")
        """,
        severity=Severity.WARNING,
        at="loss",
        fixed="""
        import torch.nn.functional as F


        def smooth(average, value, beta=0.98):
            return value if average is None else beta * average + (1 - beta) * value


        def train(model, loader, optimizer, log_every=100):
            running_loss = None
            for step, (images, labels) in enumerate(loader):
                loss = F.cross_entropy(model(images), labels)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                running_loss = smooth(running_loss, loss.detach())
                if step % log_every == 0:
                    print(f"step {step}: loss {float(running_loss):.4f}")
        """,
    ),
    Fires(  # log-probabilities gathered per token keep the graph, and a flattening helper that fills the dict it
        # builds through a nested function keeps the ratio's graph in the stats kept for every mini-batch
        """
        import torch

        from core import flatten_dict, logprobs_from_logits


        class PPOTrainer:
            def __init__(self, model, optimizer, loader):
                self.model = model
                self.optimizer = optimizer
                self.loader = loader

            def step(self):
                all_stats = []
                for batch in self.loader:
                    logits = self.model(batch["input_ids"])
                    logprobs = logprobs_from_logits(logits[:, :-1, :], batch["input_ids"][:, 1:])
                    all_stats.append(self.train_minibatch(batch["old_logprobs"], logprobs))
                return all_stats

            def train_minibatch(self, old_logprobs, logprobs):
                ratio = torch.exp(logprobs - old_logprobs)
                loss = -ratio.mean()
                self.optimizer.zero_grad()
                loss.backward()
                self.optimizer.step()
                stats = dict(loss=dict(policy=loss.detach()), policy=dict(ratio=ratio, approxkl=(logprobs - old_logprobs).detach()))
                return flatten_dict(stats)
        """,
        files={
            "core.py": """
                from collections.abc import Mapping

                import torch
                import torch.nn.functional as F


                def flatten_dict(nested, sep="/"):
                    def rec(nest, prefix, into):
                        for key, value in nest.items():
                            if isinstance(value, Mapping):
                                rec(value, prefix + key + sep, into)
                            else:
                                into[prefix + key] = value

                    flat = {}
                    rec(nested, "", flat)
                    return flat


                def logprobs_from_logits(logits, labels):
                    logp = F.log_softmax(logits, dim=2)
                    return torch.gather(logp, 2, labels.unsqueeze(2)).squeeze(-1)
            """,
        },
        no_fix=True,
        severity=Severity.WARNING,
        at='self.train_minibatch(batch["old_logprobs"], logprobs)',
    ),
    Fires(  # what the loop backwards through the history's last item carries a graph, whatever the objective is
        """
        import torch

        from energies import pair_energy


        def relax(positions, steps=5000, tol=1e-7):
            positions.requires_grad_(True)
            optimizer = torch.optim.Adam([positions], lr=1e-3)
            energies = []
            for _ in range(steps):
                optimizer.zero_grad()
                energies.append(pair_energy(positions))
                if len(energies) > 1 and abs(energies[-2] - energies[-1]) < tol:
                    break
                energies[-1].backward(retain_graph=True)
                optimizer.step()
            return positions.detach()
        """,
        files={
            "energies.py": """
                def pair_energy(positions):
                    distances = (positions[:, None] - positions[None]).norm(dim=-1) + 1e-3
                    return (1.0 / distances).triu(1).sum()
            """,
        },
        severity=Severity.ERROR,
        at="pair_energy(positions)",
    ),
    Fires(  # Lightning backwards what training_step returns: the dict it also keeps holds that graph
        """
        import lightning.pytorch as pl


        class SequenceForecaster(pl.LightningModule):
            def __init__(self, encoder, objective):
                super().__init__()
                self.encoder = encoder
                self.objective = objective
                self.epoch_logs = []

            def shared_step(self, batch):
                window, target = batch
                prediction = self.encoder(window)
                return {"loss": self.objective(prediction, target), "count": len(window)}, prediction

            def training_step(self, batch, batch_idx):
                log, _ = self.shared_step(batch)
                self.epoch_logs.append(log)
                return log

            def on_train_epoch_end(self):
                self.epoch_logs.clear()
        """,
        severity=Severity.WARNING,
        no_fix=True,
        at="log",
    ),
    Fires(  # the loss helper of another file returns its parts in a dict; the trainer sums each entry over the epoch
        """
        from collections import defaultdict

        from losses import detection_loss


        class Trainer:
            def __init__(self, model, optimizer, loader):
                self.model = model
                self.optimizer = optimizer
                self.loader = loader

            def train_epoch(self):
                totals = defaultdict(float)
                for images, targets in self.loader:
                    loss, parts = detection_loss(self.model(images), targets)
                    self.optimizer.zero_grad()
                    loss.backward()
                    self.optimizer.step()
                    for name, value in parts.items():
                        totals[name] += value
                return {name: total / len(self.loader) for name, total in totals.items()}
        """,
        fixed="""
        from collections import defaultdict

        from losses import detection_loss


        class Trainer:
            def __init__(self, model, optimizer, loader):
                self.model = model
                self.optimizer = optimizer
                self.loader = loader

            def train_epoch(self):
                totals = defaultdict(float)
                for images, targets in self.loader:
                    loss, parts = detection_loss(self.model(images), targets)
                    self.optimizer.zero_grad()
                    loss.backward()
                    self.optimizer.step()
                    for name, value in parts.items():
                        totals[name] += value.detach()
                return {name: total / len(self.loader) for name, total in totals.items()}
        """,
        files={
            "losses.py": """
                import torch.nn.functional as F


                def detection_loss(outputs, targets, box_weight=5.0):
                    cls_loss = F.cross_entropy(outputs["logits"], targets["labels"])
                    box_loss = F.l1_loss(outputs["boxes"], targets["boxes"])
                    total = cls_loss + box_weight * box_loss
                    return total, {"cls": cls_loss, "box": box_loss, "total": total}
            """,
        },
    ),
    Fires(  # the objective computed by a helper handed the criterion, backwarded by another helper, the history kept raw
        """
        import torch
        from torch import nn


        def objective(net, crit, x, y):
            return crit(net(x), y)


        def backprop(obj):
            obj.backward()


        def run(net, loader, epochs):
            crit = nn.MSELoss()
            opt = torch.optim.SGD(net.parameters(), lr=0.1)
            hist = []
            for epoch in range(epochs):
                for x, y in loader:
                    obj = objective(net, crit, x, y)
                    backprop(obj)
                    opt.step()
                    opt.zero_grad()
                    hist.append(obj)
            return hist
        """,
        fixed="""
        import torch
        from torch import nn


        def objective(net, crit, x, y):
            return crit(net(x), y)


        def backprop(obj):
            obj.backward()


        def run(net, loader, epochs):
            crit = nn.MSELoss()
            opt = torch.optim.SGD(net.parameters(), lr=0.1)
            hist = []
            for epoch in range(epochs):
                for x, y in loader:
                    obj = objective(net, crit, x, y)
                    backprop(obj)
                    opt.step()
                    opt.zero_grad()
                    hist.append(obj.detach())
            return hist
        """,
        at="hist.append(obj)",
    ),
)

RetainedGraph.MUST_NOT_FIRE = (
    Quiet(  # twin: the statistics are folded under `no_grad()`
        _COVARIANCE_LAYER.format(detach="", update="            with torch.no_grad():\n    " + _COVARIANCE_UPDATE) + _COVARIANCE_BLOCK,
    ),
    Quiet(  # twin: the features are detached before the statistics are taken
        _COVARIANCE_LAYER.format(detach=".detach()", update=_COVARIANCE_UPDATE) + _COVARIANCE_BLOCK,
    ),
    Quiet(  # the range is folded from `.data` values; the same name is bound to the caller's range only further down
        """
        import torch
        import torch.nn as nn


        class RangeObserver(nn.Module):
            def __init__(self, momentum=0.95):
                super().__init__()
                self.momentum = momentum
                self.register_buffer("low", torch.zeros(1))
                self.register_buffer("high", torch.zeros(1))

            def forward(self, x, fixed_low=None, fixed_high=None):
                if self.training:
                    low = x.data.min()
                    high = x.data.max()
                    self.low = self.low * self.momentum + low * (1 - self.momentum)
                    self.high = self.high * self.momentum + high * (1 - self.momentum)
                low = self.low if fixed_low is None else fixed_low
                high = self.high if fixed_high is None else fixed_high
                scale = (high - low).clamp(min=1e-8) / 255
                return torch.round((x - low) / scale) * scale + low


        class QuantizedBlock(nn.Module):
            def __init__(self, width):
                super().__init__()
                self.dense = nn.Linear(width, width)
                self.observe = RangeObserver()

            def forward(self, x):
                return self.observe(torch.relu(self.dense(x)))
        """
    ),
    Quiet(  # a key/value cache cast to its input's dtype: `keys.dtype` describes the input, none of its values go in
        """
        import torch
        import torch.nn as nn


        class RollingCache(nn.Module):
            def __init__(self, shape):
                super().__init__()
                self.register_buffer("keys", torch.zeros(shape), persistent=False)
                self.register_buffer("values", torch.zeros(shape), persistent=False)

            def forward(self, positions, keys, values):
                if self.keys.dtype != keys.dtype:
                    self.keys = self.keys.to(keys.dtype)
                    self.values = self.values.to(device=values.device, dtype=values.dtype)
                batch = keys.size(0)
                return (self.keys[:batch].index_copy(2, positions, keys), self.values[:batch].index_copy(2, positions, values))
        """
    ),
    Quiet(  # the same loop keeps a detached copy of what it backwards
        """
        import torch


        def negative_mean(activations):
            return -activations.mean()


        class FeatureVisualizer:
            def __init__(self, model, image):
                self.model = model
                self.image = image

            def objective(self):
                return self.model(self.image)

            def run(self, steps=256, summarize=negative_mean, optimizer=None):
                optimizer = optimizer or torch.optim.Adam([self.image], lr=0.05)
                history = []
                step = 0
                while step < steps:
                    optimizer.zero_grad()
                    value = summarize(self.objective())
                    history.append(value.detach())
                    value.backward()
                    optimizer.step()
                    step += 1
                return torch.stack(history)
        """
    ),
    Quiet(  # the name appended is rebound to a number before it is kept: the list holds floats
        """
        def fit(objective, params, optimizer, steps):
            history = []
            for _ in range(steps):
                optimizer.zero_grad()
                value = objective(*params)
                value.backward()
                optimizer.step()
                value = value.item()
                history.append(value)
            return history
        """
    ),
    Quiet(  # a model's forward walks the time steps of its input: the state it carries is one sequence's
        """
        import torch
        import torch.nn as nn


        class Stepper(nn.Module):
            def __init__(self):
                super().__init__()
                self.cell = nn.LSTMCell(1, 16)
                self.head = nn.Linear(16, 1)

            def forward(self, x):
                h = torch.zeros(x.size(0), 16)
                c = torch.zeros(x.size(0), 16)
                outs = []
                for piece in x.split(1, dim=1):
                    h, c = self.cell(piece, (h, c))
                    outs.append(self.head(h))
                return torch.cat(outs, dim=1)
        """
    ),
    Quiet(  # the pieces of one optimizer step: the list is new on each call, and the step follows the loop
        """
        class Stepper:
            def __init__(self, net, optimizer):
                self.net, self.optimizer = net.cuda(), optimizer

            def run(self, pieces):
                kept = []
                for piece in pieces:
                    part = self.net(**piece).loss / len(pieces)
                    part.backward()
                    kept.append(part)
                self.optimizer.step()
                self.optimizer.zero_grad()
                return sum(part.item() for part in kept)
        """
    ),
    Quiet(  # the history's last item becomes a number once it is backwarded: the list keeps floats
        """
        import torch


        def minimise(objective, params, iterations=200):
            optimizer = torch.optim.SGD(params, lr=0.01)
            trace = []
            for _ in range(iterations):
                optimizer.zero_grad()
                trace.append(objective(*params))
                trace[-1].backward()
                optimizer.step()
                trace[-1] = trace[-1].item()
            return trace
        """
    ),
    Quiet(  # a module that steps its own optimizers: what training_step returns is not backwarded by Lightning
        """
        import lightning.pytorch as pl


        class TwoPlayer(pl.LightningModule):
            def __init__(self, generator, critic, objective):
                super().__init__()
                self.automatic_optimization = False
                self.generator, self.critic, self.objective = generator, critic, objective
                self.history = []

            def training_step(self, batch, batch_idx):
                g_opt, c_opt = self.optimizers()
                stats = self.objective.summary(self.generator, self.critic, batch)
                self.history.append(stats)
                return stats
        """
    ),
    Quiet(  # the helper is handed a number; the second keeps the micro-batch losses for one backward through them
        """
        import torch
        import torch.nn as nn


        def remember(losses, loss):
            losses.append(loss)


        def train(model, loader, optimizer, epochs):
            criterion = nn.CrossEntropyLoss()
            losses = []
            for epoch in range(epochs):
                for images, labels in loader:
                    logits = model(images)
                    loss = criterion(logits, labels)
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
                    remember(losses, loss.item())
            return losses


        def accumulate(model, micro_batches, optimizer):
            criterion = nn.CrossEntropyLoss()
            micro_losses = []
            for images, labels in micro_batches:
                remember(micro_losses, criterion(model(images), labels))
            torch.stack(micro_losses).mean().backward()
            optimizer.step()
        """
    ),
    Quiet(  # the running statistics updated without a graph: under no_grad, from detached values, through `.data`
        """
        import torch
        import torch.nn as nn


        class CodebookEMA(nn.Module):
            def __init__(self, num_codes, dim, decay=0.99):
                super().__init__()
                self.project = nn.Linear(dim, dim)
                self.decay = decay
                self.register_buffer("cluster_size", torch.zeros(num_codes))
                self.register_buffer("feature_mean", torch.zeros(dim))
                self.register_buffer("feature_scale", torch.ones(dim))

            def forward(self, x):
                z = self.project(x)
                if self.training:
                    with torch.no_grad():
                        self.feature_mean.mul_(self.decay).add_(z.mean(0), alpha=1 - self.decay)
                    self.feature_scale.lerp_(z.detach().std(0), 1 - self.decay)
                    self.cluster_size.data.mul_(self.decay).add_(z.sum(0).mean(), alpha=1 - self.decay)
                return (z - self.feature_mean) / self.feature_scale
        """
    ),
    Quiet(  # the latest step's losses under fixed keys: each step replaces the last one's, so one graph is held
        """
        import torch


        class Trainer:
            def __init__(self, model, optimizer, criterion):
                self.model = model
                self.optimizer = optimizer
                self.criterion = criterion

            def fit(self, loader):
                latest = {}
                for images, labels in loader:
                    loss = self.criterion(self.model(images), labels)
                    latest["loss"] = loss
                    loss.backward()
                    self.optimizer.step()
                    self.optimizer.zero_grad()
                return latest
        """
    ),
    Quiet(  # a parameter named `make_net` builds the model: calling it runs no forward (cifar10-airbench)
        """
        import torch
        import torch.nn.functional as F


        class LookaheadState:
            def __init__(self, net):
                self.net_ema = {k: v.clone() for k, v in net.state_dict().items()}

            def update(self, net, decay):
                for ema_param, net_param in zip(self.net_ema.values(), net.state_dict().values()):
                    ema_param.lerp_(net_param, 1 - decay)
                    net_param.copy_(ema_param)


        def train(train_loader, make_net, epochs):
            model = make_net()
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.85, nesterov=True)
            lookahead_state = LookaheadState(model)
            step = 0
            for epoch in range(epochs):
                for inputs, labels in train_loader:
                    loss = F.cross_entropy(model(inputs), labels)
                    optimizer.zero_grad(set_to_none=True)
                    loss.backward()
                    optimizer.step()
                    step += 1
                    if step % 5 == 0:
                        lookahead_state.update(model, decay=0.95)
            return model
        """
    ),
    Quiet(  # one optimizer step's micro-batch losses, in a list the step starts afresh: it never outgrows the accumulation count
        """
        import torch


        class Trainer:
            def __init__(self, model, optimizer):
                self.model, self.optimizer = model.cuda(), optimizer

            def train_step(self, micro_batches):
                losses = []
                for micro_batch in micro_batches:
                    loss = self.model(**micro_batch).loss / len(micro_batches)
                    loss.backward()
                    losses.append(loss)
                self.optimizer.step()
                self.optimizer.zero_grad()
                return sum(loss.item() for loss in losses)
        """
    ),
    Quiet(  # the project's averager sums `v.data.sum()`: a detached copy (deep-text-recognition-benchmark)
        """
        import torch

        from utils import Averager


        def train(model, criterion, optimizer, train_dataset, device, num_iter):
            loss_avg = Averager()
            for iteration in range(num_iter):
                image_tensors, labels = train_dataset.get_batch()
                preds = model(image_tensors.to(device)).log_softmax(2).permute(1, 0, 2)
                cost = criterion(preds, labels.to(device))
                model.zero_grad()
                cost.backward()
                optimizer.step()
                loss_avg.add(cost)
                if (iteration + 1) % 500 == 0:
                    print(f"[{iteration + 1}/{num_iter}] train loss: {loss_avg.val():0.5f}")
                    loss_avg.reset()
        """,
        files={
            "utils.py": """
                class Averager:
                    def __init__(self):
                        self.reset()

                    def add(self, v):
                        count = v.data.numel()
                        v = v.data.sum()
                        self.n_count += count
                        self.sum += v

                    def reset(self):
                        self.n_count = 0
                        self.sum = 0

                    def val(self):
                        return self.sum / float(self.n_count) if self.n_count else 0
            """,
        },
    ),
    Quiet(  # the project's tracker keeps only `loss.item()` of the loss it is handed (DeepSpeed's ViT example)
        """
        import torch

        from utils import LossTracker


        def train(train_loader, model, criterion, optimizer, epoch):
            model.train()
            tracker = LossTracker(len(train_loader), prefix=f"Epoch: [{epoch}]")
            for images, target in train_loader:
                output = model(images.cuda(non_blocking=True))
                loss = criterion(output, target.cuda(non_blocking=True))
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                tracker.update(loss, output.size(0))
            return tracker.average
        """,
        files={
            "utils.py": """
                class LossTracker:
                    def __init__(self, num_batches, prefix=""):
                        self.num_batches, self.prefix = num_batches, prefix
                        self.total, self.count = 0.0, 0

                    def update(self, loss, n):
                        self.total += loss.detach().item() * n
                        self.count += n

                    @property
                    def average(self):
                        return self.total / max(self.count, 1)
            """,
        },
    ),
    Quiet(  # fairseq's criterion returns (loss, sample_size, logging_output): only the loss has a graph
        """
        from collections import defaultdict


        class MultilingualTranslationTask:
            def train_step(self, samples, model, criterion, optimizer):
                model.train()
                agg_loss, agg_sample_size, agg_logging_output = 0.0, 0.0, defaultdict(float)
                for lang_pair, sample in samples.items():
                    loss, sample_size, logging_output = criterion(model.models[lang_pair], sample)
                    optimizer.backward(loss)
                    agg_loss += loss.detach().item()
                    agg_sample_size += sample_size
                    for k in logging_output:
                        agg_logging_output[k] += logging_output[k]
                return agg_loss, agg_sample_size, agg_logging_output
        """
    ),
    Quiet(  # the auxiliary loss is logged as a number: `.item()` unless it already is a float
        """
        import torch

        class AverageMeter:
            def __init__(self):
                self.total, self.count = 0.0, 0

            def update(self, value, n=1):
                self.total += value * n
                self.count += n

        def train_one_epoch(model, criterion, data_loader, optimizer):
            loss_aux_meter = AverageMeter()
            for samples, targets in data_loader:
                outputs, l_aux = model(samples.cuda(non_blocking=True))
                loss = criterion(outputs, targets.cuda()) + l_aux
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                loss_aux_meter.update(l_aux if isinstance(l_aux, float) else l_aux.item(), targets.size(0))
        """
    ),
    Quiet(  # a diffusers pipeline is not an nn.Module and its __call__ runs under no_grad: PIL images
        """
        import torch
        from diffusers import StableDiffusionPipeline

        def log_validation(vae, unet, args, accelerator, weight_dtype, epoch):
            pipeline = StableDiffusionPipeline.from_pretrained(
                args.pretrained_model_name_or_path, vae=accelerator.unwrap_model(vae),
                unet=accelerator.unwrap_model(unet), torch_dtype=weight_dtype,
            )
            pipeline = pipeline.to(accelerator.device)
            images = []
            for i in range(len(args.validation_prompts)):
                with torch.autocast("cuda"):
                    image = pipeline(args.validation_prompts[i], num_inference_steps=20).images[0]
                images.append(image)
            return images

        def train(unet, vae, train_dataloader, optimizer, args, accelerator, weight_dtype):
            for epoch in range(args.num_train_epochs):
                for batch in train_dataloader:
                    loss = unet(batch["pixel_values"]).sample.mean()
                    accelerator.backward(loss)
                    optimizer.step()
                    optimizer.zero_grad()
                log_validation(vae, unet, args, accelerator, weight_dtype, epoch)
        """
    ),
    Quiet(  # two text encoders, each once: the list is concatenated at once and not kept across steps
        """
        import torch

        def encode_prompt(text_encoders, tokenizers, prompt):
            prompt_embeds_list = []
            for tokenizer, text_encoder in zip(tokenizers, text_encoders):
                ids = tokenizer(prompt, padding="max_length", return_tensors="pt").input_ids
                prompt_embeds = text_encoder(ids.to(text_encoder.device), output_hidden_states=True)
                prompt_embeds_list.append(prompt_embeds.hidden_states[-2])
            return torch.concat(prompt_embeds_list, dim=-1)

        def training_step(batch, unet, text_encoders, tokenizers, optimizer):
            embeds = encode_prompt(text_encoders, tokenizers, batch["prompts"])
            unet(batch["latents"], embeds).sample.mean().backward()
            optimizer.step()
        """
    ),
    Quiet(  # a model's tiled decode: the tiles make up this forward's output
        """
        import torch
        import torch.nn as nn

        class TiledDecoder(nn.Module):
            def __init__(self, tile=64):
                super().__init__()
                self.tile = tile
                self.decoder = nn.Conv2d(4, 3, 3, padding=1)

            def forward(self, z):
                rows = []
                for i in range(0, z.shape[2], self.tile):
                    row = []
                    for j in range(0, z.shape[3], self.tile):
                        row.append(self.decoder(z[:, :, i : i + self.tile, j : j + self.tile]))
                    rows.append(torch.cat(row, dim=3))
                return torch.cat(rows, dim=2)
        """
    ),
    Quiet(  # chunks of one tensor, whatever they are called
        """
        import torch

        def encode_in_chunks(motion_encoder, frames, chunk_size):
            face_batches = torch.split(frames, chunk_size)
            encoded = []
            for face_batch in face_batches:
                encoded.append(motion_encoder(face_batch))
            return torch.cat(encoded)

        def train(motion_encoder, loader, optimizer):
            for frames in loader:
                encode_in_chunks(motion_encoder, frames, 8).pow(2).mean().backward()
                optimizer.step()
                optimizer.zero_grad()
        """
    ),
    Quiet(
        """
        import torch.nn as nn

        criterion = nn.CrossEntropyLoss()
        losses = []
        for x, y in loader:
            optimizer.zero_grad()
            loss = criterion(model(x), y)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        """
    ),
    Quiet(
        """
        import torch
        import torch.nn as nn

        criterion = nn.CrossEntropyLoss()
        preds = []
        with torch.no_grad():
            for x, y in loader:
                outputs = model(x)
                preds.append(outputs.argmax(dim=1))
                preds.append(outputs.detach().cpu())
        """
    ),
    Quiet(
        """
        import torch
        import torch.nn.functional as F

        def chunked_loss(model, chunks, targets):
            losses = []
            for x, y in zip(chunks, targets):
                losses.append(F.cross_entropy(model(x), y))
            torch.stack(losses).mean().backward()
        """
    ),
    Quiet(
        """
        import torch.nn as nn

        criterion = nn.MSELoss()
        for x, y in loader:
            losses = []
            for head in heads:
                losses.append(criterion(head(model(x)), y))
            sum(losses).backward()
        """
    ),
    Quiet(
        """
        import torch.nn as nn

        criterion = nn.CrossEntropyLoss()
        total = 0.0
        for x, y in loader:
            loss = criterion(model(x), y)
            loss.backward()
            total += float(loss)
            correct = (model(x).argmax(1) == y).sum()
        """
    ),
    Quiet(
        """
        import torch

        @torch.no_grad()
        def evaluate(model, loader):
            outputs = []
            for x, _ in loader:
                outputs.append(model(x))
            return torch.cat(outputs)
        """
    ),
    Quiet(
        """
        import torch.nn.functional as F

        def micro_losses(model, micro_batches):
            parts = []
            for x, y in micro_batches:
                parts.append(F.cross_entropy(model(x), y))
            return parts
        """
    ),
    Quiet(
        """
        import torch.nn as nn

        criterion = nn.CrossEntropyLoss()
        accumulated = 0
        for x, y in micro_batches:
            accumulated = accumulated + criterion(model(x), y)
        accumulated.backward()
        """
    ),
    Quiet(
        """
        import torch
        import torch.nn.functional as F

        def finish_episode(policy, optimizer, transitions, returns):
            critic_terms = []
            for (log_prob, estimate), target in zip(transitions, returns):
                critic_terms.append(F.mse_loss(estimate, target))
            optimizer.zero_grad()
            total = torch.stack(critic_terms).sum() * 0.5
            total.backward()
            optimizer.step()
        """
    ),
    Quiet(
        """
        import torch.nn.functional as F

        def train(extractor, decoder, loader, optimizer, targets):
            for images, _ in loader:
                optimizer.zero_grad()
                feats = extractor(decoder(images))
                layer_loss = 0.0
                for feat, target in zip(feats, targets):
                    layer_loss += F.mse_loss(feat, target)
                (layer_loss * 10.0).backward()
                optimizer.step()
        """
    ),
    Quiet(
        """
        import torch.nn.functional as F

        def test_mean_of_exit_losses(head, hidden_by_layer, labels):
            summed = 0.0
            for layer, hidden in hidden_by_layer.items():
                summed += F.cross_entropy(head(hidden), labels)
            assert summed / len(hidden_by_layer) > 0
        """
    ),
    Quiet(  # the part that carried the graph is detached before the results are kept
        """
        class Trainer:
            def train_epoch(self, module, dataloader, optimizer):
                outputs = []
                for i, batch in enumerate(dataloader):
                    optimizer.zero_grad()
                    output = module.training_step(batch, i)
                    output["loss"].backward()
                    optimizer.step()
                    output["loss"] = output["loss"].detach()
                    outputs.append(output)
                return module.training_epoch_end(outputs)
        """
    ),
    Quiet(  # the running loss is logged and reset at every optimizer step: it never grows with the run
        """
        def train(model, loader, optimizer, criterion, accumulation_steps, log):
            running_loss = 0
            for idx, (x, y) in enumerate(loader):
                loss = criterion(model(x), y) / accumulation_steps
                running_loss += loss
                loss.backward()
                if (idx + 1) % accumulation_steps == 0:
                    optimizer.step()
                    optimizer.zero_grad()
                    log(running_loss.item())
                    running_loss = 0
        """
    ),
    Quiet(  # truncated BPTT done right: the carried state is detached before each step
        """
        import torch

        def repackage_hidden(h):
            if isinstance(h, torch.Tensor):
                return h.detach()
            return tuple(repackage_hidden(v) for v in h)

        def train(model, batches, optimizer, criterion, batch_size):
            hidden = model.init_hidden(batch_size)
            for data, targets in batches:
                hidden = repackage_hidden(hidden)
                model.zero_grad()
                output, hidden = model(data, hidden)
                loss = criterion(output, targets)
                loss.backward()
                optimizer.step()
        """
    ),
    Quiet(  # a carried state with a plain backward every step fails at once ("backward through the graph a second time"): loud, not silent
        """
        def train(model, batches, optimizer, criterion):
            hidden = None
            for inputs, targets in batches:
                optimizer.zero_grad()
                output, hidden = model(inputs, hidden)
                criterion(output, targets).backward()
                optimizer.step()
        """
    ),
    Quiet(  # Lightning runs validation_step under no_grad: the predictions kept carry no graph
        """
        import torch
        import lightning as L

        class Classifier(L.LightningModule):
            def __init__(self, net):
                super().__init__()
                self.net = net
                self.val_preds = []

            def validation_step(self, batch, batch_idx):
                x, y = batch
                self.val_preds.append(self.net(x).argmax(dim=1))

            def training_step(self, batch, batch_idx):
                x, y = batch
                loss = torch.nn.functional.cross_entropy(self.net(x), y)
                self.log("train_loss", loss.detach())
                return loss
        """
    ),
    Quiet(  # the losses are handed back to a caller that backwards through them
        """
        import torch
        import torch.nn.functional as F

        def micro_batch_losses(model, micro_batches):
            losses = []
            for x, y in micro_batches:
                losses.append(F.cross_entropy(model(x), y))
            return losses

        def train_step(model, optimizer, micro_batches):
            optimizer.zero_grad()
            torch.stack(micro_batch_losses(model, micro_batches)).mean().backward()
            optimizer.step()
        """
    ),
    Quiet(  # every entry is detached before the helper keeps it
        """
        from collections import defaultdict

        import torch.nn.functional as F
        from transformers import Trainer


        class DistillTrainer(Trainer):
            def __init__(self, *args, **kwargs):
                super().__init__(*args, **kwargs)
                self._stored_metrics = defaultdict(lambda: defaultdict(list))

            def batch_metrics(self, model, inputs):
                outputs = model(**inputs)
                kd_loss = F.kl_div(F.log_softmax(outputs.logits, -1), inputs["teacher_probs"], reduction="batchmean")
                metrics = {}
                metrics["kd_loss"] = kd_loss.detach().cpu()
                metrics["ce_loss"] = outputs.loss.detach().cpu()
                return outputs.loss + kd_loss, metrics

            def compute_loss(self, model, inputs, return_outputs=False, **kwargs):
                loss, metrics = self.batch_metrics(model, inputs)
                self.store_metrics(metrics, split="train")
                return loss

            def store_metrics(self, metrics, split="train"):
                for key, value in metrics.items():
                    self._stored_metrics[split][key].append(value)
        """
    ),
    Quiet(  # the helper keeps numbers, not the tensors it is handed
        """
        import torch.nn.functional as F
        from transformers import Trainer


        class LoggingTrainer(Trainer):
            def __init__(self, *args, **kwargs):
                super().__init__(*args, **kwargs)
                self.history = {"kd_loss": []}

            def compute_loss(self, model, inputs, return_outputs=False, **kwargs):
                outputs = model(**inputs)
                kd_loss = F.kl_div(F.log_softmax(outputs.logits, -1), inputs["teacher_probs"], reduction="batchmean")
                self.remember(kd_loss)
                return outputs.loss + kd_loss

            def remember(self, kd_loss):
                self.history["kd_loss"].append(kd_loss.item())
        """
    ),
    Quiet(  # the statistics helper detaches what it returns: the list keeps numbers
        """
        import torch

        from ppo_utils import policy_stats


        class PPOTrainer:
            def __init__(self, policy, optimizer, ppo_epochs=4):
                self.policy = policy
                self.optimizer = optimizer
                self.ppo_epochs = ppo_epochs

            def train_minibatch(self, batch):
                logprobs = self.policy(batch["input_ids"]).log_softmax(-1)
                loss, stats = policy_stats(logprobs, batch["old_logprobs"], batch["advantages"])
                self.optimizer.zero_grad()
                loss.backward()
                self.optimizer.step()
                return stats

            def step(self, minibatches):
                all_stats = []
                for _ in range(self.ppo_epochs):
                    for batch in minibatches:
                        all_stats.append(self.train_minibatch(batch))
                return all_stats
        """,
        files={
            "ppo_utils.py": """
                import torch


                def policy_stats(logprobs, old_logprobs, advantages, clip=0.2):
                    ratio = torch.exp(logprobs - old_logprobs)
                    clipped = torch.clamp(ratio, 1 - clip, 1 + clip)
                    loss = -torch.min(advantages * ratio, advantages * clipped).mean()
                    stats = dict(policy_loss=loss.detach(), ratio=ratio.mean().item(), clipfrac=(ratio != clipped).float().mean().item())
                    return loss, stats
            """,
        },
    ),
    Quiet(  # the same parts, each entry overwritten by the next step's (the last step's values kept for a log line)
        """
        from losses import detection_loss


        def train_epoch(model, optimizer, loader):
            last = {}
            for images, targets in loader:
                loss, parts = detection_loss(model(images), targets)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                for name, value in parts.items():
                    last[name] = value
            return last
        """,
        files={
            "losses.py": """
                import torch.nn.functional as F


                def detection_loss(outputs, targets, box_weight=5.0):
                    cls_loss = F.cross_entropy(outputs["logits"], targets["labels"])
                    box_loss = F.l1_loss(outputs["boxes"], targets["boxes"])
                    total = cls_loss + box_weight * box_loss
                    return total, {"cls": cls_loss, "box": box_loss, "total": total}
            """,
        },
    ),
    Quiet(  # the helper handed the criterion returns the loss's number: the history keeps floats
        """
        import torch
        from torch import nn


        def objective(net, crit, x, y):
            obj = crit(net(x), y)
            obj.backward()
            return obj.item()


        def run(net, loader, epochs):
            crit = nn.MSELoss()
            opt = torch.optim.SGD(net.parameters(), lr=0.1)
            hist = []
            for epoch in range(epochs):
                for x, y in loader:
                    hist.append(objective(net, crit, x, y))
                    opt.step()
                    opt.zero_grad()
            return hist
        """
    ),
)
