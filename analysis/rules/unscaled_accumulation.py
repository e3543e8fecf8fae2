"""Gradient accumulation sums N losses' gradients without dividing by N.

With accumulation the optimizer steps once every N backward passes (`if (i + 1) % N == 0`,
a `continue` that skips the step, or a micro-batch loop before the step). `.backward()` adds
into `.grad`, so unless each loss is divided by N the step applies N times the gradient of
one batch: the effective learning rate is N times what was tuned, which destabilises or
silently degrades training, and changing N changes the results of a run that should be the
same model with a smaller memory footprint. The GPU hours of every such run are wasted. Adam-like
optimizers normalise the step, so the sum mostly cancels (a note), unless the summed gradient is
clipped with a threshold meant for one batch's (a warning: the clip cuts N times harder).

How to fix: divide the loss you backward by the number of accumulated batches,
`(loss / N).backward()` or `scaler.scale(loss / N).backward()`, or rescale the gradients once
before the step (`p.grad /= N`). `accelerator.accumulate`, the Hugging Face `Trainer`,
Lightning and DeepSpeed engines do this for you, with one catch: the `Trainer` skips the division
when the model takes loss keywords, trusting the loss to be normalised by `num_items_in_batch`, so a
subclass whose own `compute_loss` ignores that count must set `self.model_accepts_loss_kwargs = False`.
The reverse trap: an `Accelerator(gradient_accumulation_steps=N)` divides every loss its `backward`
is given by N, but its prepared optimizer skips steps only inside `with accelerator.accumulate(model):`;
a loop that never enters it steps on every batch with 1/N of the gradient, and accumulates nothing.
And the trap the other way round: an `Accelerator()` built without a count divides by 1, so a loop that
counts the accumulation itself and hands `accelerator.backward` the undivided loss sums N batches (a
warning: an `accelerate launch` DeepSpeed config can still set the count).
A training class whose stepping method returns early on all but every N-th call while its `backward`
method backwards the loss it is handed undivided gets a note: its callers may divide the loss.
The step may be split: a method backwards the loss its caller computed and hands it (`self.backprop(obj)`: the
caller's loss is the one read, divided or not), a loop steps each of several optimizers
(`for opt in optimizers: opt.step()` under the every-N test), and a GAN's discriminator may clear and step
its own optimizer every iteration while the generator accumulates (that clearing is not the generator's).
"""

from __future__ import annotations

import re
from typing import TypeGuard, cast

import libcst as cst

from trainlint.analysis.libraries import ACCUMULATES_ONLY_INSIDE, MODULE, call_fact, trainer_trusting_loss
from trainlint.analysis.patterns import is_gradient_key
from trainlint.rules import (
    AssignEvent,
    CallEvent,
    Condition,
    Event,
    Fires,
    JumpEvent,
    Loop,
    ParsedChunk,
    Quiet,
    Rule,
    RuleContext,
    ScopeAnalysis,
    Severity,
    Tag,
    Value,
    accumulates_into_grad,
    backward_target,
    clears_gradients,
    dotted,
    is_optimizer_step,
    last_part,
    ordered_events,
    path_conditions,
    string_value,
)
from trainlint.rules import walk as _walk

Item = tuple[Event, tuple[CallEvent, ...]]

# ``range(accum_steps)``, ``batch.chunk(4)``, ``torch.split(x, n)``, ``split_batch(...)``; not ``train_split``
_MICRO_BATCHES = re.compile(r"micro|accum|sub_?batch|chunk|split\(|split_batch", re.I)
_RESCALING_HELPER = re.compile(r"^_?(?:re)?(?:scale|normali[sz]e|divide)_?(?:grads?|gradients?)_?$")
_ATOMIC = (cst.Name, cst.Attribute, cst.Integer, cst.Float, cst.Call, cst.Subscript)


class Accumulation:
    """One loop that steps once per several backward passes."""

    __slots__ = ("kind", "loop", "step", "guard", "guard_chunk", "divisor", "backwards", "in_loop", "named_test")

    def __init__(self, kind: str, loop: Loop, step: CallEvent, guard: JumpEvent | Condition | Loop, guard_chunk, divisor, backwards, in_loop):
        self.kind = kind  # modulus | continue | micro-batch
        self.loop = loop
        self.step = step
        self.guard = guard  # the condition, the continue, or the micro-batch loop
        self.guard_chunk = guard_chunk  # the chunk the guard's node lives in
        self.divisor: cst.BaseExpression | None = divisor  # N, when the text shows it
        self.backwards: list[tuple[int, CallEvent, tuple[CallEvent, ...]]] = backwards
        self.in_loop: list[tuple[int, Event, tuple[CallEvent, ...]]] = in_loop
        self.named_test: AssignEvent | None = None  # where the step's test was computed, when it names it


class UnscaledAccumulation(Rule):
    code = "TL204"
    name = "unscaled-accumulation"
    severity = Severity.ERROR

    def check_scope(self, ctx: RuleContext, scope: ScopeAnalysis) -> None:
        self._check_trainer_loss(ctx, scope)
        self._check_accumulate_missing(ctx, scope)
        self._check_stepped_every_n_calls(ctx, scope)
        if ctx.module.framework_runs_loop is not None:
            return
        items = list(ordered_events(scope, None))
        reported: set[Loop] = set()
        for index, (event, _chain) in enumerate(items):
            if not (isinstance(event, CallEvent) and is_optimizer_step(event)):
                continue
            accumulation = _accumulation(items, index)
            if accumulation is None or accumulation.loop in reported or not accumulation.backwards:
                continue
            reported.add(accumulation.loop)
            self._check(ctx, scope, accumulation)

    def _check_trainer_loss(self, ctx: RuleContext, scope: ScopeAnalysis) -> None:
        """A Trainer subclass whose ``compute_loss`` takes ``num_items_in_batch`` and never reads it: the
        base class trusts the model to normalise the loss by the batch's item count and skips the
        division by the accumulation count, so this per-batch loss is summed over the accumulated batches."""
        function = scope.function
        if function is None or function.name != "compute_loss" or function.owner is None:
            return
        owner = function.owner
        fact = next((row for base in owner.bases if (row := trainer_trusting_loss(ctx.summary.canonical(base))) is not None), None)
        parameter = next((p for p in _all_parameters(function.node.params) if p.name.value == _ITEM_COUNT), None)
        if fact is None or parameter is None or _reads_name(function.node.body, _ITEM_COUNT):
            return
        if any(isinstance(node, cst.Attribute) and node.attr.value in _SCALING_ATTRIBUTES for node in _walk(owner.node)):
            return  # the class sets `model_accepts_loss_kwargs` or `compute_loss_func`, or divides by the count itself
        init = owner.methods.get("__init__")
        where = _after_base_init(init.node) if init is not None and init.chunk is owner.chunk else owner.node
        trainer = last_part(fact.trainer)
        loaded = None if fact.transformers_models_only else _transformers_model_load(ctx, owner.node)
        if fact.transformers_models_only:
            models = "its model is a transformers model, whose `forward` takes `**kwargs`"
        elif loaded is not None:
            models = ("the model's `forward` takes `**kwargs`, as the transformers model this class loads with "
                      f"`{dotted(loaded.func) or 'from_pretrained'}` does")
        else:
            models = "the model's `forward` takes `**kwargs` (transformers' models do)"
        loading = [((owner.chunk, loaded), "a transformers model loaded here: its `forward` takes `**kwargs`")] if loaded else []
        ctx.report(
            function.node.name,
            f"`compute_loss` overrides `{trainer}`'s and never reads `{_ITEM_COUNT}`: `{trainer}` divides the loss by "
            f"`gradient_accumulation_steps` only when `model_accepts_loss_kwargs` is False, and it is True when "
            f"{models}, trusting `compute_loss` to normalise by the item count; this override does not, so with gradient "
            "accumulation each step applies the sum of the accumulated batches' gradients (the learning rate "
            "multiplied by the accumulation count, and the Trainer's default clipping cuts it that much harder)",
            evidence=[
                ((scope.chunk, parameter), f"`{_ITEM_COUNT}` is given and never read"),
                ((owner.chunk, where), "`self.model_accepts_loss_kwargs = False` here would let the Trainer divide the loss"),
                *loading,
            ],
            chunk=scope.chunk,
            severity=Severity.WARNING if fact.transformers_models_only or loaded is not None else Severity.NOTE,
            help=f"set `self.model_accepts_loss_kwargs = False` in `__init__` (after `super().__init__`), or divide the "
                 f"summed loss by `{_ITEM_COUNT}`",
        )

    def _check_stepped_every_n_calls(self, ctx: RuleContext, scope: ScopeAnalysis) -> None:
        """A class whose stepping method returns early on all but every N-th call (`self.accum = (self.accum + 1)
        % n; if self.accum != 0: return`), while its backward method backwards the loss it is handed undivided:
        whoever calls the two once per batch sums N batches' gradients into each step. A note: the callers, in
        any file, may divide the loss before they hand it over."""
        function = scope.function
        if function is None or function.owner is None or ctx.module.framework_runs_loop is not None:
            return
        parameters = {param.name.value for param in _all_parameters(function.node.params)}
        backward = next((
            event for event in scope.events
            if not event.context.loops and isinstance(event, CallEvent) and accumulates_into_grad(event)
            and not _runs_local_function(event) and not _scaled(event) and not _scales_for_you(ctx, event)
            and isinstance(loss := (_loss_node(event) or _handed_loss(event)), cst.Name) and loss.value in parameters
            and scope.last_binding(loss.value, before=event) is None
        ), None)
        if backward is None:
            return
        for name, method in function.owner.methods.items():
            if method is function or method.chunk is not function.chunk:
                continue
            stepping = method.analysis(ctx.summary)
            gated = _stepped_every_n_calls(stepping) if stepping is not None else None
            if stepping is None or gated is None:
                continue
            early_return, condition, step = gated
            loss = _code(scope, cast(cst.BaseExpression, _loss_node(backward) or _handed_loss(backward)))
            test = _code(stepping, cast(cst.BaseExpression, condition.test))
            ctx.report(
                backward.node,
                f"`{name}` steps the optimizer only on every N-th call (it returns early while `{test}`), so the "
                f"gradients of N calls of `{function.name}` are summed into each step; `{_code(scope, backward.node)}` "
                f"backwards `{loss}` as it is handed over, undivided, so unless every caller divides it by N each "
                "update is N times too large (as if the learning rate were multiplied by it)",
                evidence=[
                    ((backward.chunk, backward.node), f"backward of the loss `{function.name}` is given, not divided here"),
                    ((early_return.chunk, early_return.node), "returns before the step on all but every N-th call"),
                    ((step.chunk, step.node), "the optimizer applies the summed gradients here"),
                ],
                severity=Severity.NOTE,
                help=f"divide the loss by the accumulation count in `{function.name}` before the backward, as the "
                     "stepping method counts the calls",
            )
            return

    def _check_accumulate_missing(self, ctx: RuleContext, scope: ScopeAnalysis) -> None:
        """An `Accelerator(gradient_accumulation_steps=N)` whose loop never enters `accelerator.accumulate`:
        `accelerator.backward` divides every loss by N, while the prepared optimizer steps whenever
        `sync_gradients` is true, which only `accumulate` ever makes false: it steps every batch on a
        gradient N times too small, and nothing accumulates."""
        if not ctx.module.uses_accelerate or ctx.module.uses_deepspeed:
            return  # under DeepSpeed the engine, stepped inside `backward`, accumulates by itself
        if ctx.module.module_fact("TL204 enters accumulate", _enters_accumulate):
            return
        reported: set[int] = set()
        for loop in scope.loops:
            # both in this loop's own iterations: a backward in a micro-batch loop before the step accumulates by hand
            items = [
                (event, chain) for event, chain in ordered_events(scope, loop)
                if _site(event, chain).context.loop is loop and not any(link.context.loops for link in (*chain[1:], event) if chain)
            ]
            backward = next((event for event, _ in items if _accelerator_backward(event)), None)
            if backward is None or id(backward.node) in reported:
                continue
            steps = _accumulation_steps_given(ctx, backward)
            step = next((
                event for event, chain in items
                if isinstance(event, CallEvent) and is_optimizer_step(event) and not path_conditions(event, chain, loop)
            ), None)
            if steps is None or step is None:
                continue
            reported.add(id(backward.node))
            accelerator, given = steps
            code = _code(scope, given)
            ctx.report(
                backward.node,
                f"`{_code(scope, backward.node)}` divides the loss by `gradient_accumulation_steps` (`{code}`), but "
                f"no `with {accelerator}.accumulate(model):` wraps this loop's step, so `{_code(scope, step.node)}` "
                f"on line {ctx.line_of((step.chunk, step.node))} runs on every batch: nothing accumulates, and each "
                f"step applies 1/`{code}` of one batch's gradient (with SGD, the learning rate divided by it)",
                evidence=[
                    (_accelerator_site(backward), f"`gradient_accumulation_steps={code}`: `backward` divides every loss by it"),
                    ((step.chunk, step.node), "steps on every batch: only `accumulate` lets the prepared optimizer skip"),
                ],
                chunk=backward.chunk,
                severity=Severity.WARNING,
                help=f"put the forward, backward and step under `with {accelerator}.accumulate(model):`",
            )

    def _check(self, ctx: RuleContext, scope: ScopeAnalysis, accumulation: Accumulation) -> None:
        calls = [accumulation.step, *(call for _, call, _ in accumulation.backwards)]
        if any(_scales_for_you(ctx, call) for call in calls):
            return
        if any(_rescales_gradients(event) for _, event, _ in accumulation.in_loop):
            return
        unscaled = [
            (call, chain) for _, call, chain in accumulation.backwards
            if not _scaled(call) and Tag.SCALED not in (_handed_to_backward(call, chain) or Value(())).tags
        ]
        if not unscaled:
            return
        optimizer = _stepped_optimizer(accumulation.step)
        if optimizer is not None and _learning_rate_divided(optimizer, accumulation):
            return  # `SGD(params, lr=lr / accum_steps)`: the step is scaled instead of the loss
        backward, chain = unscaled[0]
        site = chain[0] if chain else backward
        divisor = accumulation.divisor
        n = _divisor_text(scope, divisor) if divisor is not None else None
        handed = _handed_to_backward(backward, chain)
        loss = handed if handed is not None and Tag.GRAPH in handed.tags else backward_target(backward)
        loss_text = _loss_node(backward) or _handed_loss(backward)
        loss_name = f"`{_code(backward.scope, loss_text)}`" if loss_text is not None else "the loss"
        batches = "micro-batches" if accumulation.kind == "micro-batch" else "accumulated batches"
        how_many = f"`{n}`" if n else f"the number of {batches}"
        times = f"`{n}` times" if n else "that many times"
        message = (
            f"{_schedule(accumulation, backward, ctx.line_of)}, so their gradients are summed; {loss_name} is not divided by "
            f"{how_many} and no `p.grad /= ...` rescales the gradients before the step, so each update is "
            f"{times} too large (as if the learning rate were multiplied by it)"
        )
        severity = Severity.ERROR
        adaptive = _adaptive_name(optimizer)
        clip = next((event for _, event, _ in accumulation.in_loop if _clips_gradients(event)), None)
        if adaptive is not None and clip is not None:
            # the normalised step barely changes, but a fixed clipping threshold now cuts a gradient N times too large
            severity = Severity.WARNING
            message = (
                f"{_schedule(accumulation, backward, ctx.line_of)}, so their gradients are summed and {loss_name} is not "
                f"divided by {how_many}; `{adaptive}` normalises the step, but `{_code(clip.scope, clip.node)}` clips "
                f"a gradient {times} as large as one batch's, so the threshold cuts every update {times} harder than "
                "configured, and changing the accumulation count changes the training"
            )
        elif adaptive is not None:
            # Adam-like optimizers divide the update by the gradient's running scale: the sum mostly cancels
            severity = Severity.NOTE
            message = (
                f"{_schedule(accumulation, backward, ctx.line_of)}, so their gradients are summed and {loss_name} is not "
                f"divided by {how_many}; `{adaptive}` normalises each update by the gradients' running scale, so "
                f"the step is barely changed, but gradient clipping and `eps` see a gradient {times} as large as one "
                "batch's, and the result depends on the accumulation count"
            )
        elif Tag.GRAPH not in loss.tags:
            # the loss comes from something the analysis cannot see into: it may be divided there
            severity = Severity.NOTE
            message += f"; trainlint cannot see how {loss_name} is computed, so check that it is not already divided"
        built_without = _accelerator_site(backward) if _accelerator_backward(backward) and _divides_by_one(ctx, backward) else None
        if built_without is not None:
            # the count could still come from an `accelerate launch` DeepSpeed config, which the text does not show
            severity = min(severity, Severity.WARNING)
            message += (
                f"; `{_code(backward.scope, backward.node.func)}` divides by the accelerator's `gradient_accumulation_steps`, "
                "and this `Accelerator` is built without one, so it divides by 1"
            )
        evidence = [
            (loss.site, f"the loss comes from {loss.note}" if loss.site and loss.note else ""),
            (built_without, "built without `gradient_accumulation_steps`: its `backward` divides by 1"),
            ((backward.chunk, backward.node), "backward of the undivided loss, every accumulation step"),
            (_guard_site(accumulation), _GUARD_NOTES[accumulation.kind]),
            *(
                [((named.chunk, named.node), f"`{named.targets[0]}` tests the iteration count, every iteration")]
                if (named := accumulation.named_test) is not None else []
            ),
            ((accumulation.step.chunk, accumulation.step.node), "the optimizer applies the summed gradients here"),
        ]
        if chain:
            evidence.append(((site.chunk, site.node), f"the loop runs the backward through `{_code(site.scope, site.node)}`"))
        if adaptive is not None and clip is not None:
            evidence.append(((clip.chunk, clip.node), "clips the summed gradients with a threshold meant for one batch's"))
        ctx.report(
            site.node, message, evidence=[item for item in evidence if item[1]], severity=severity,
            help=f"divide the loss by {how_many} before the backward: `(loss / N).backward()`",
            fix=self._fix(ctx, scope, accumulation, unscaled, n),
        )

    @staticmethod
    def _fix(ctx: RuleContext, scope: ScopeAnalysis, accumulation: Accumulation, unscaled, n: str | None):
        if n is None or any(chain for _, chain in unscaled) or not _divisor_stable(scope, accumulation, unscaled):
            return None
        edits = []
        for call, _ in unscaled:
            target = _loss_node(call)
            if target is None:
                return None
            text = _code_exact(scope, target)
            if not isinstance(target, _ATOMIC) and not target.lpar:
                text = f"({text})"
            scaled = f"{text} / {n}"
            edits.append(ctx.edit_replace(target, scaled if _inside_scale(call) else f"({scaled})"))
        # the backward proves the loss is a tensor, and the divisor is the one the step condition uses
        return ctx.fix(f"divide the loss by `{n}` before the backward", edits, safe=True)


_ITEM_COUNT = "num_items_in_batch"
# Attributes through which a Trainer subclass restores the division by the accumulation count, or does it itself.
_SCALING_ATTRIBUTES = frozenset({
    "model_accepts_loss_kwargs", "compute_loss_func", "gradient_accumulation_steps", "current_gradient_accumulation_steps",
})


def _all_parameters(params: cst.Parameters) -> list[cst.Param]:
    return [*params.posonly_params, *params.params, *params.kwonly_params]


def _after_base_init(init: cst.FunctionDef) -> cst.CSTNode:
    """Where a Trainer subclass's ``__init__`` can override what the base's ``__init__`` set: the statement
    after its ``super().__init__(...)`` (that call itself when it comes last), else the ``def``."""
    body = list(init.body.body) if isinstance(init.body, cst.IndentedBlock) else []
    for index, statement in enumerate(body):
        if any(isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value == "__init__"
               and isinstance(node.func.value, cst.Call) and dotted(node.func.value.func) == "super"
               for node in _walk(statement)):
            return body[index + 1] if index + 1 < len(body) else statement
    return init


def _transformers_model_load(ctx: RuleContext, owner: cst.ClassDef) -> cst.Call | None:
    """A ``X.from_pretrained(...)`` in the class whose X is a transformers model class (an nn.Module by
    the library's source or the table, ``AutoModelForCausalLM`` included): the model the class trains may
    be that one, and transformers' models take loss keywords (``**kwargs``) in their ``forward``."""
    for node in _walk(owner):
        if not (isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value == "from_pretrained"):
            continue
        name = dotted(node.func.value)
        canonical = ctx.summary.canonical(name) if name else None
        if not canonical or canonical.partition(".")[0] != "transformers":
            continue
        kind = ctx.summary.library_class_kind(canonical)
        if kind is not None and kind.kind == MODULE:
            return node
    return None


def _reads_name(body: cst.CSTNode, name: str) -> bool:
    return any(isinstance(node, cst.Name) and node.value == name for node in _walk(body))


def _site(event: Event, chain: tuple[CallEvent, ...]) -> Event:
    return chain[0] if chain else event


def _accumulation(items: list[Item], index: int) -> Accumulation | None:
    """How the step at ``items[index]`` accumulates, if it does: under an every-N condition, after a
    ``continue`` that skips it on the other iterations, or after a micro-batch loop."""
    step, step_chain = items[index]
    assert isinstance(step, CallEvent), "check() passes the index of an optimizer step"
    site = _site(step, step_chain)
    loop = site.context.loop
    while loop is not None and loop.parent is not None and not step_chain and _steps_each_optimizer(items, step, loop):
        loop = loop.parent  # `for opt in optimizers: opt.step()`: the loop over batches is the one that accumulates
    if loop is None:
        return None
    in_loop = [(i, event, chain) for i, (event, chain) in enumerate(items) if loop in _site(event, chain).context.loops]
    backwards = [
        (i, event, chain) for i, event, chain in in_loop
        if accumulates_into_grad(event) and not _runs_local_function(event)
        and not any(link.context.loops for link in (*chain[1:], event) if chain)
    ]
    for condition in path_conditions(step, step_chain, loop):
        owner = next(link for link in (*step_chain, step) if condition in link.context.conditions)
        named = _named_tests(owner, loop)
        test = _modulus_test(condition.test, named.get) or _counter_reset_test(condition, loop)
        if test is None or test[0] != (condition.branch == "if"):
            continue
        if any(_unconditional_clearing(event, chain, loop, step) for _, event, chain in in_loop):
            return None  # gradients are dropped every iteration: nothing accumulates
        divisor = test[1] if owner is site else None  # N is spelled in the checked scope only then
        accumulating = [
            b for b in backwards
            if not _under(b[1], b[2], loop, condition.node, condition.branch) and not _apart(b[1], b[2], step, step_chain, loop)
            and not _stepped_by_another(items, b[0], step, loop)
        ]
        accumulation = Accumulation("modulus", loop, step, condition, owner.chunk, divisor, accumulating, in_loop)
        accumulation.named_test = next((named[name.value] for name in _names_in(condition.test) if name.value in named), None) \
            if condition.test is not None else None
        return accumulation
    for position, event, chain in in_loop:
        if position >= index or not isinstance(event, JumpEvent) or event.kind != "continue" or chain:
            continue
        if event.context.loop is not loop:
            continue
        for condition in event.context.conditions_inside(loop):
            test = _modulus_test(condition.test)
            if test is None or test[0] == (condition.branch == "if"):
                continue
            if any(p < position and _unconditional_clearing(e, c, loop, step) for p, e, c in in_loop):
                return None
            accumulating = [
                b for b in backwards
                if b[0] < position and not _under(b[1], b[2], loop, condition.node, "else" if condition.branch == "if" else "if")
            ]
            return Accumulation("continue", loop, step, event, event.chunk, test[1], accumulating, in_loop)
    return _micro_batches(step, index, loop, backwards, in_loop)


def _handed_to_backward(backward: CallEvent, chain: tuple[CallEvent, ...]) -> Value | None:
    """What the call into the backward's function hands the parameter it backwards as it is
    (``self.backprop(obj)`` into ``def backprop(self, obj): obj.backward()``): the caller's loss."""
    loss = _loss_node(backward) or _handed_loss(backward)
    function = backward.scope.function
    if not chain or function is None or not isinstance(loss, cst.Name) or loss.value not in backward.scope.params:
        return None
    if backward.scope.last_binding(loss.value, before=backward) is not None:
        return None
    call = chain[-1]
    if call.function is None or call.function.node is not function.node:
        return None
    given = call.values_given(call.function.positional_parameters)
    return given.get(loss.value) if given is not None else None


def _steps_each_optimizer(items: list[Item], step: CallEvent, loop: Loop) -> bool:
    """``loop`` walks several optimizers and steps the one it binds (``for opt in optimizers: opt.step()``,
    ``scaler.step(opt)``), with no backward of its own: one step of the loop around it, not a loop of steps."""
    stepped = {step.receiver_key, *(dotted(arg.value) for arg in step.arg_nodes if arg.keyword is None)}
    if not stepped & set(loop.targets):
        return False
    return not any(accumulates_into_grad(event) for event, chain in items if loop in _site(event, chain).context.loops)


def _stepped_every_n_calls(scope: ScopeAnalysis) -> tuple[JumpEvent, Condition, CallEvent] | None:
    """(the early return, its condition, the step) when a method with no loop around its one optimizer step
    returns before it under a test of a call count: a remainder (`if self.calls % n != 0: return`), or a key the
    method bound to one just before (`self.accum = (self.accum + 1) % n; if self.accum != 0: return`). None when
    the method rescales the gradients itself."""
    outside = [event for event in scope.events if not event.context.loops]
    steps = [event for event in outside if isinstance(event, CallEvent) and is_optimizer_step(event)]
    if len(steps) != 1 or steps[0].context.conditions or any(_rescales_gradients(event) for event in scope.events):
        return None
    step = steps[0]
    counted: set[str] = set()
    for event in outside:
        if event is step:
            return None
        if isinstance(event, AssignEvent) and len(event.targets) == 1 and event.value_node is not None:
            if any(isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Modulo) for node in _walk(event.value_node)):
                counted.add(event.targets[0])
            else:
                counted.discard(event.targets[0])
        if not isinstance(event, JumpEvent) or event.kind != "return" or not event.context.conditions:
            continue
        condition = event.context.conditions[-1]  # the test right around the return
        if condition.branch == "if" and condition.test is not None and (_modulus_test(condition.test) is not None or any(
            isinstance(node, (cst.Name, cst.Attribute)) and dotted(node) in counted for node in _walk(condition.test)
        )):
            return event, condition, step
    return None


def _micro_batches(step: CallEvent, index: int, loop: Loop, backwards, in_loop) -> Accumulation | None:
    """Backward passes in a micro-batch loop inside ``loop`` that runs before the step and never steps itself."""
    stepping = {
        inner for _, event, chain in in_loop
        if isinstance(event, CallEvent) and is_optimizer_step(event)
        for inner in _site(event, chain).context.loops
    }
    for position, event, chain in backwards:
        if position > index:
            continue
        inner_loops = [inner for inner in _site(event, chain).context.loops if inner is not loop and loop.encloses(inner)]
        micro = next((inner for inner in inner_loops if inner not in stepping and _MICRO_BATCHES.search(inner.iterable_text)), None)
        if micro is None:
            continue
        if any(clears_gradients(e) and micro in _site(e, c).context.loops for _, e, c in in_loop):
            return None
        accumulating = [b for b in backwards if b[0] < index and micro in _site(b[1], b[2]).context.loops]
        guard_chunk = _site(event, chain).chunk
        return Accumulation("micro-batch", loop, step, micro, guard_chunk, _range_count(micro), accumulating, in_loop)
    return None


def _modulus_test(test: cst.BaseExpression | None, named=None) -> tuple[bool, cst.BaseExpression] | None:
    """(True, N) for a test that holds once every N iterations (``(i + 1) % N == 0``),
    (False, N) for one that holds on the others (``i % N != 0``, ``i % N``). ``named`` gives the
    assignment of a name the iteration computes the test into (``is_accumulating = (i + 1) % N != 0``)."""
    if test is None:
        return None
    if isinstance(test, cst.Name) and named is not None:
        assignment = named(test.value)
        return _modulus_test(assignment.value_node) if assignment is not None else None
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        inner = _modulus_test(test.expression, named)
        return (not inner[0], inner[1]) if inner else None
    if isinstance(test, cst.BooleanOperation):
        sides = [side for side in (_modulus_test(test.left, named), _modulus_test(test.right, named)) if side]
        return sides[0] if len(sides) == 1 else None
    if isinstance(test, cst.BinaryOperation) and isinstance(test.operator, cst.Modulo):
        return False, test.right
    if isinstance(test, cst.Comparison) and len(test.comparisons) == 1:
        left, target = test.left, test.comparisons[0]
        zero = isinstance(target.comparator, cst.Integer) and target.comparator.value == "0"
        if zero and isinstance(left, cst.BinaryOperation) and isinstance(left.operator, cst.Modulo):
            if isinstance(target.operator, cst.Equal):
                return True, left.right
            if isinstance(target.operator, cst.NotEqual):
                return False, left.right
    return None


def _counter_reset_test(condition: Condition, loop: Loop) -> tuple[bool, cst.BaseExpression] | None:
    """(True, N) for a branch taken once a counter the loop adds to reaches N and set back there:
    `self.count += 1`, then `if self.count == self.accum: ...; self.count = 0` holds every N iterations."""
    test = condition.test
    if not isinstance(condition.node, cst.If) or not isinstance(test, cst.Comparison) or len(test.comparisons) != 1:
        return None
    comparison = test.comparisons[0]
    counter = dotted(test.left)
    if counter is None or not isinstance(comparison.operator, (cst.Equal, cst.GreaterThanEqual)):
        return None
    counted = any(
        isinstance(node, cst.AugAssign) and isinstance(node.operator, cst.AddAssign) and dotted(node.target) == counter
        and isinstance(node.value, cst.Integer) and node.value.value == "1"
        for node in _walk(loop.node.body)
    )
    reset = any(
        isinstance(node, cst.Assign) and isinstance(node.value, cst.Integer) and node.value.value == "0"
        and any(dotted(target.target) == counter for target in node.targets)
        for node in _walk(condition.node.body)
    )
    return (True, comparison.comparator) if counted and reset else None


def _named_tests(event: Event, loop: Loop) -> dict[str, AssignEvent]:
    """Names the loop's body binds, on every iteration and before ``event``, to a test of the
    iteration count (``is_accumulating = (iter_num + 1) % accum_iters != 0``), by name."""
    named: dict[str, AssignEvent] = {}
    for other in event.scope.events:
        if other is event:
            break
        if not isinstance(other, AssignEvent) or loop not in other.context.loops or other.context.conditions_inside(loop):
            continue
        if len(other.targets) == 1 and other.value_node is not None and isinstance(other.node, (cst.Assign, cst.AnnAssign)):
            key = other.targets[0]
            if _modulus_test(other.value_node) is not None:
                named[key] = other
            else:
                named.pop(key, None)
    return named


def _apart(event: Event, chain, other: Event, other_chain, loop: Loop) -> bool:
    """The two never run in the same loop: they sit in different branches of an `if` whose test no
    iteration changes (Swin's `if config.ACCUMULATION_STEPS > 1:` accumulates, its `else:` steps
    after every backward). A test that changes between iterations (`if (i + 1) % n:` around a
    `no_sync()` backward, its `else:` stepping) takes both branches in one loop, and accumulates."""
    branches = {id(c.node): c.branch for c in path_conditions(other, other_chain, loop)}
    return any(
        branches.get(id(c.node), c.branch) != c.branch and _same_every_iteration(c.test, _site(event, chain).scope, loop)
        for c in path_conditions(event, chain, loop)
    )


def _same_every_iteration(test: cst.BaseExpression | None, scope: ScopeAnalysis, loop: Loop) -> bool:
    """No call in the test, and none of its names is bound inside the loop."""
    if test is None or any(isinstance(node, cst.Call) for node in _walk(test)):
        return False
    bound = set(loop.targets)
    for event in scope.events:
        if isinstance(event, AssignEvent) and loop in event.context.loops:
            bound.update(target.split(".", 1)[0] for target in event.targets)
    return not any(isinstance(node, cst.Name) and node.value in bound for node in _walk(test))


def _under(event: Event, chain, loop: Loop, node: cst.CSTNode, branch: str) -> bool:
    return any(c.node is node and c.branch == branch for c in path_conditions(event, chain, loop))


def _unconditional_clearing(event: Event, chain, loop: Loop, step: CallEvent) -> bool:
    return clears_gradients(event) and not path_conditions(event, chain, loop) and not _clears_another_optimizer(event, step)


def _clears_another_optimizer(event: Event, step: CallEvent) -> bool:
    """``opt_d.zero_grad()`` every iteration beside ``opt_g.step()`` every N: the clearing empties the gradients
    of another optimizer's parameters (a GAN's other model), not those the accumulating step applies."""
    if not isinstance(event, CallEvent) or event.method != "zero_grad" or event.receiver is None:
        return False
    if Tag.OPTIMIZER not in event.receiver.tags or event.receiver_key is None:
        return False
    stepped = _stepped_key(step)
    return stepped is not None and stepped != event.receiver_key


def _stepped_key(step: CallEvent) -> str | None:
    """How the code names the optimizer a step applies: ``opt_g`` of ``opt_g.step()`` or ``scaler.step(opt_g)``."""
    receiver = step.receiver
    if receiver is not None and Tag.OPTIMIZER in receiver.tags:
        return step.receiver_key
    return next((dotted(arg.value) for arg, value in zip(step.arg_nodes, step.args) if Tag.OPTIMIZER in value.tags), None)


def _stepped_by_another(items: list[Item], position: int, step: CallEvent, loop: Loop) -> bool:
    """The first optimizer step after the backward at ``position`` runs on every iteration and applies another
    optimizer (a GAN's discriminator step after its own loss's backward): that backward's gradients are its."""
    stepped = _stepped_key(step)
    for event, chain in items[position + 1:]:
        if isinstance(event, CallEvent) and is_optimizer_step(event) and loop in _site(event, chain).context.loops:
            other = _stepped_key(event)
            return event is not step and other is not None and other != stepped and not chain and not path_conditions(event, chain, loop)
    return False


def _range_count(loop: Loop) -> cst.BaseExpression | None:
    """``N`` of ``for _ in range(N)``: the number of micro-batches, when the text says it."""
    iterable = loop.node.iter if isinstance(loop.node, cst.For) else None
    if isinstance(iterable, cst.Call) and dotted(iterable.func) == "range" and len(iterable.args) == 1:
        return iterable.args[0].value
    return None


def _scales_for_you(ctx: RuleContext, call: CallEvent) -> bool:
    """Accelerate (`accumulate`, `accelerator.backward`) and DeepSpeed engines divide by N themselves."""
    receiver = call.receiver
    if receiver is not None and Tag.ENGINE in receiver.tags:
        return True
    if ctx.module.uses_deepspeed and "engine" in (call.receiver_key or "").lower():
        return True
    if ctx.module.uses_accelerate:
        return call.context.accumulating or (
            receiver is not None and Tag.ACCELERATOR in receiver.tags and not _divides_by_one(ctx, call)
        )
    return False


# What else sets an `accelerate.Accelerator`'s accumulation count (its `gradient_accumulation_plugin`, a DeepSpeed
# plugin's config) or hands the constructor keywords the text does not show.
_ACCUMULATION_SOURCES = frozenset({"gradient_accumulation_plugin", "deepspeed_plugin", "deepspeed_plugins"})


def _divides_by_one(ctx: RuleContext, backward: CallEvent) -> bool:
    """`accelerator.backward(loss)` of an `Accelerator(...)` built in sight with no accumulation count: it divides
    the loss by the default count, 1 (unless `accelerate launch` sets one in the environment), and its optimizer
    steps on every call outside `accumulate`, so a loop that steps every N itself gets the loss undivided.
    Quiet when the scope sets `accelerator.gradient_accumulation_steps`, or the module runs DeepSpeed."""
    site = _accelerator_site(backward)
    if site is None or not isinstance(site[1], cst.Call) or ctx.module.uses_deepspeed:
        return False
    call = site[1]
    fact = call_fact(ctx.summary.canonical(dotted(call.func) or ""), ACCUMULATES_ONLY_INSIDE)
    if fact is None or any(arg.star for arg in call.args):
        return False
    keywords = {arg.keyword.value for arg in call.args if arg.keyword is not None}
    if keywords & (set(fact.arguments) | _ACCUMULATION_SOURCES):
        return False
    return not any(
        isinstance(event, AssignEvent) and any(target.endswith(".gradient_accumulation_steps") for target in event.targets)
        for event in backward.scope.events
    )


def _runs_local_function(event: Event) -> bool:
    """A call of the project's own `backward` method (`self.backward(loss)`): the backward it runs is
    followed into its body, where the loss it differentiates is written."""
    return isinstance(event, CallEvent) and event.function is not None


def _enters_accumulate(module) -> bool:
    """Whether any code of the file enters an accelerator's `accumulate` (or `no_sync`): then the
    file manages accumulation through the accelerator, perhaps in a helper this walk does not follow."""
    return any(
        call.method in {"accumulate", "no_sync"} or call.context.accumulating for call in module.all_calls()
    )


def _accelerator_backward(event: Event) -> TypeGuard[CallEvent]:
    return (
        isinstance(event, CallEvent) and event.method == "backward" and not event.context.accumulating
        and event.receiver is not None and Tag.ACCELERATOR in event.receiver.tags
    )


def _accelerator_site(backward: CallEvent) -> tuple[ParsedChunk, cst.CSTNode] | None:
    receiver = backward.receiver
    return receiver.site if receiver is not None else None


def _accumulation_steps_given(ctx: RuleContext, backward: CallEvent) -> tuple[str, cst.BaseExpression] | None:
    """The accelerator's name and the `gradient_accumulation_steps` its `accelerate.Accelerator(...)`
    was built with, when that is not the literal 1."""
    site = _accelerator_site(backward)
    if site is None or not isinstance(site[1], cst.Call):
        return None
    call = site[1]
    fact = call_fact(ctx.summary.canonical(dotted(call.func) or ""), ACCUMULATES_ONLY_INSIDE)
    if fact is None:
        return None
    keywords = {arg.keyword.value: arg.value for arg in call.args if arg.keyword is not None}
    given = next((keywords[name] for name in fact.arguments if name in keywords), None)
    if "deepspeed_plugin" in keywords or given is None or (isinstance(given, cst.Integer) and given.value == "1"):
        return None
    func = backward.node.func
    return (backward.chunk.code_for(func.value) if isinstance(func, cst.Attribute) else "accelerator"), given


def _rescales_gradients(event: Event) -> bool:
    """``p.grad /= N``, ``p.grad = p.grad / N``, ``p.grad.div_(N)``, ``torch._foreach_div_(grads, N)``,
    or a helper named for it (``training.scale_grads(model, 1 / num_tokens)``)."""
    if isinstance(event, AssignEvent):
        return any(is_gradient_key(key) for key in event.targets) and not clears_gradients(event)
    if not isinstance(event, CallEvent):
        return False
    name = event.method or (last_part(event.callee) if event.callee else "")
    if name in {"_foreach_div_", "_foreach_mul_"} or _RESCALING_HELPER.match(name):
        return True
    return event.method in {"div_", "mul_"} and is_gradient_key(event.receiver_key)


def _loss_node(call: CallEvent) -> cst.BaseExpression | None:
    """The loss expression a backward runs on: ``loss`` in ``loss.backward()`` and ``scaler.scale(loss).backward()``."""
    func = call.node.func
    if call.method != "backward" or not isinstance(func, cst.Attribute):
        return None
    if call.receiver is not None and (Tag.ACCELERATOR in call.receiver.tags or Tag.ENGINE in call.receiver.tags):
        return None
    receiver = func.value
    if _is_scale_call(receiver):
        return receiver.args[0].value
    return receiver


def _handed_loss(call: CallEvent) -> cst.BaseExpression | None:
    """The loss handed to an accelerator's backward: ``loss`` in ``fabric.backward(loss)``."""
    if call.receiver is None or Tag.ACCELERATOR not in call.receiver.tags:
        return None
    positional = [arg for arg in call.arg_nodes if arg.keyword is None and not arg.star]
    return positional[0].value if positional else None


def _is_scale_call(node: cst.BaseExpression) -> TypeGuard[cst.Call]:
    return (
        isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value == "scale"
        and len(node.args) == 1 and node.args[0].keyword is None and not node.args[0].star
    )


def _inside_scale(call: CallEvent) -> bool:
    return _is_scale_call(cast(cst.Attribute, call.node.func).value)  # a backward _loss_node found: `x.backward()`


def _scaled(call: CallEvent) -> bool:
    """The loss was divided (or multiplied by a factor) somewhere before this backward."""
    if Tag.SCALED in backward_target(call).tags:
        return True
    node = _loss_node(call)
    handed = _handed_loss(call)
    if any(isinstance(loss, cst.BinaryOperation) and isinstance(loss.operator, (cst.Multiply, cst.Divide)) for loss in (node, handed)):
        return True
    key = dotted(node) if node is not None else None
    if key is None:
        return False
    for event in call.scope.events:
        if event is call:
            return False
        if isinstance(event, AssignEvent) and key in event.targets and isinstance(event.value_node, cst.BinaryOperation) \
                and isinstance(event.value_node.operator, (cst.Multiply, cst.Divide)):
            return True  # (`loss = loss / n` before `scaler.scale(loss).backward()`, whose target carries no tag of it)
    return False


# Optimizers that divide each update by a running estimate of the gradient's scale.
_ADAPTIVE = re.compile(r"Adam|Adagrad|Adadelta|RMSprop|Adafactor|Lamb|LAMB|Lion|Sophia|AdEMAMix", re.I)


def _clips_gradients(event) -> bool:
    """``torch.nn.utils.clip_grad_norm_(...)`` / ``clip_grad_value_``: a fixed threshold on the gradients."""
    return isinstance(event, CallEvent) and event.callee is not None and last_part(event.callee) in {"clip_grad_norm_", "clip_grad_value_"}


def _stepped_optimizer(step: CallEvent) -> Value | None:
    """The optimizer a step applies: the receiver of ``optimizer.step()``, the argument of ``scaler.step(optimizer)``."""
    receiver = step.receiver
    if receiver is not None and Tag.OPTIMIZER in receiver.tags:
        return receiver
    return next((arg for arg in step.args if Tag.OPTIMIZER in arg.tags), None)


def _adaptive_name(optimizer: Value | None) -> str | None:
    """``AdamW`` when the optimizer was built here from an Adam-like class."""
    if optimizer is None or optimizer.site is None or not isinstance(optimizer.site[1], cst.Call):
        return None
    name = dotted(optimizer.site[1].func)
    return last_part(name) if name is not None and _ADAPTIVE.search(last_part(name)) else None


def _learning_rate_divided(optimizer: Value, accumulation: Accumulation) -> bool:
    """A plain (not Adam-like) optimizer whose every learning rate is a quotient by N (N the accumulation
    count or named for it), written in the call (``lr=args.lr / accum_steps``) or reaching it through names
    bound in the function that builds the optimizer (``lr = base_lr / accum_steps``), through products of
    the quotient (``lr * 0.1``) and through the ``"lr"`` entries of the parameter groups it is given."""
    if _adaptive_name(optimizer) is not None or optimizer.site is None or not isinstance(optimizer.site[1], cst.Call):
        return False
    chunk, call = optimizer.site[0], cast(cst.Call, optimizer.site[1])  # tested above
    if chunk.module is None:
        return False
    divisor = accumulation.divisor
    wanted = " ".join(accumulation.guard_chunk.code_for(divisor).split()) if divisor is not None else None
    bindings = _bindings_around(chunk.module, call)
    default = next((arg.value for arg in call.args if arg.keyword is not None and arg.keyword.value == "lr"), None)
    groups = _parameter_groups(call, bindings)
    rates = [] if groups is None else [rate for group in groups if (rate := _group_rate(group)) is not None]
    if groups is None or any(_group_rate(group) is None for group in groups):
        if default is None:
            return False
        rates.append(default)
    return all(_divided_by(chunk, rate, bindings, wanted, 0) for rate in rates)


def _divided_by(chunk: ParsedChunk, rate: cst.BaseExpression, bindings: dict[str, cst.BaseExpression],
                wanted: str | None, depth: int) -> bool:
    """``rate`` is a quotient by N, a product with one, or a name bound to either (a few names deep)."""
    if depth > 4:
        return False
    if isinstance(rate, cst.Name) and rate.value in bindings:
        return _divided_by(chunk, bindings[rate.value], bindings, wanted, depth + 1)
    if isinstance(rate, cst.BinaryOperation) and isinstance(rate.operator, cst.Divide):
        by = " ".join(chunk.code_for(rate.right).split())
        if by == wanted or _MICRO_BATCHES.search(by) is not None:
            return True
        return _divided_by(chunk, rate.left, bindings, wanted, depth + 1)
    if isinstance(rate, cst.BinaryOperation) and isinstance(rate.operator, cst.Multiply):
        return any(_divided_by(chunk, side, bindings, wanted, depth + 1) for side in (rate.left, rate.right))
    return False


def _parameter_groups(call: cst.Call, bindings: dict[str, cst.BaseExpression]) -> list[cst.Dict] | None:
    """The dict literals of the parameter groups the optimizer is given (``SGD([{"params": ..., "lr": ...}])``),
    also through a name bound to the list; None when its parameters are not such a list."""
    first = call.args[0].value if call.args and call.args[0].keyword is None else None
    if isinstance(first, cst.Name):
        first = bindings.get(first.value)
    if not isinstance(first, (cst.List, cst.Tuple)) or not first.elements:
        return None
    groups = [element.value for element in first.elements]
    return [group for group in groups if isinstance(group, cst.Dict)] if all(isinstance(g, cst.Dict) for g in groups) else None


def _group_rate(group: cst.Dict) -> cst.BaseExpression | None:
    return next((
        element.value for element in group.elements
        if isinstance(element, cst.DictElement) and string_value(element.key) == "lr"
    ), None)


def _bindings_around(module: cst.Module, call: cst.Call) -> dict[str, cst.BaseExpression]:
    """The names the innermost function holding ``call`` (else the module) binds by plain assignment
    outside its loops, each to the last value bound."""
    holder: cst.CSTNode = module
    for node in _walk(module):
        if isinstance(node, cst.FunctionDef) and any(inner is call for inner in _walk(node.body)):
            holder = node  # later in the walk is deeper
    bindings: dict[str, cst.BaseExpression] = {}
    # in source order through a stack (last child on top), not a nested function calling itself: a reference cycle
    unread = list(reversed((holder.body if isinstance(holder, cst.FunctionDef) else holder).children))
    while unread:
        node = unread.pop()
        if isinstance(node, (cst.For, cst.While, cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            continue
        if isinstance(node, cst.Assign) and len(node.targets) == 1 and isinstance(node.targets[0].target, cst.Name):
            bindings[node.targets[0].target.value] = node.value
        unread.extend(reversed(node.children))
    return bindings


def _divisor_text(scope: ScopeAnalysis, divisor: cst.BaseExpression) -> str:
    text = _code_exact(scope, divisor)
    return text if isinstance(divisor, _ATOMIC) or divisor.lpar else f"({text})"


def _divisor_stable(scope: ScopeAnalysis, accumulation: Accumulation, unscaled) -> bool:
    """Every name in N is bound before the first backward, so ``loss / N`` there means what the step test means."""
    divisor = accumulation.divisor
    assert divisor is not None, "_fix runs when the divisor is written out"
    names = {node.value for node in _names_in(divisor)}
    first = min(call_index for call_index, call, _ in accumulation.backwards if any(call is u for u, _ in unscaled))
    return not any(
        position > first and isinstance(event, AssignEvent) and names & {key.split(".", 1)[0] for key in event.targets}
        for position, event, _ in accumulation.in_loop
    )


def _names_in(node: cst.CSTNode):
    if isinstance(node, cst.Name):
        yield node
    for child in node.children:
        yield from _names_in(child)


def _schedule(accumulation: Accumulation, backward: CallEvent, line_of) -> str:
    step = f"`{_code(accumulation.step.scope, accumulation.step.node)}`"
    backward_text = f"`{_code(backward.scope, backward.node)}`"
    guard = accumulation.guard
    if isinstance(guard, Loop):
        return (
            f"{backward_text} runs once per micro-batch of the loop on line {line_of(_guard_site(accumulation))} "
            f"(`for ... in {guard.iterable_text}`) before the single {step}"
        )
    if isinstance(guard, JumpEvent):
        condition = next(c for c in reversed(guard.context.conditions) if _modulus_test(c.test))
        assert condition.test is not None, "a modulus test was found in it"
        when = "whenever" if condition.branch == "if" else "unless"
        return f"{backward_text} runs every iteration but a `continue` skips {step} {when} `{_code(guard.scope, condition.test)}`"
    test = " ".join(accumulation.guard_chunk.code_for(guard.test).split())
    negated = " is false" if guard.branch == "else" else ""
    return f"{backward_text} runs every iteration but {step} only when `{test}`{negated}"


def _guard_site(accumulation: Accumulation):
    return (accumulation.guard_chunk, accumulation.guard.node)


_GUARD_NOTES = {
    "modulus": "the optimizer steps only once every N iterations",
    "continue": "`continue` skips the optimizer step on the other iterations",
    "micro-batch": "the micro-batch loop: one backward per micro-batch, one step after it",
}


def _code(scope: ScopeAnalysis, node: cst.CSTNode, limit: int = 60) -> str:
    text = " ".join(scope.chunk.code_for(node).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _code_exact(scope: ScopeAnalysis, node: cst.CSTNode) -> str:
    return scope.chunk.code_for(node)


UnscaledAccumulation.MUST_FIRE = (
    Fires(  # parameter groups whose rates are products of the base rate, none divided by the count
        """
        import torch


        def train(model, loader, args):
            base_lr = args.lr * args.batch_size / 256
            optimizer = torch.optim.SGD(
                [{"params": model.backbone.parameters(), "lr": base_lr * 0.1}, {"params": model.head.parameters()}],
                lr=base_lr,
                momentum=0.9,
            )
            for i, (x, y) in enumerate(loader):
                loss = torch.nn.functional.cross_entropy(model(x), y)
                loss.backward()
                if (i + 1) % args.grad_accum == 0:
                    optimizer.step()
                    optimizer.zero_grad()
        """,
        fixed="""
        import torch


        def train(model, loader, args):
            base_lr = args.lr * args.batch_size / 256
            optimizer = torch.optim.SGD(
                [{"params": model.backbone.parameters(), "lr": base_lr * 0.1}, {"params": model.head.parameters()}],
                lr=base_lr,
                momentum=0.9,
            )
            for i, (x, y) in enumerate(loader):
                loss = torch.nn.functional.cross_entropy(model(x), y)
                (loss / args.grad_accum).backward()
                if (i + 1) % args.grad_accum == 0:
                    optimizer.step()
                    optimizer.zero_grad()
        """,
        at="loss.backward()",
        severity=Severity.ERROR,
    ),
    Fires(  # the step's test named in an annotated assignment
        """
        import torch


        class Runner:
            def __init__(self, net, cfg):
                self.net = net
                self.accum = cfg.effective_batch // cfg.batch
                self.optimizer = torch.optim.SGD(net.parameters(), lr=cfg.lr, momentum=0.9)

            def run_epoch(self, loader):
                for index, (x, y) in enumerate(loader):
                    update_now: bool = (index + 1) % self.accum == 0
                    loss = torch.nn.functional.cross_entropy(self.net(x), y)
                    loss.backward()
                    if update_now:
                        self.optimizer.step()
                        self.optimizer.zero_grad()
        """,
        fixed="""
        import torch


        class Runner:
            def __init__(self, net, cfg):
                self.net = net
                self.accum = cfg.effective_batch // cfg.batch
                self.optimizer = torch.optim.SGD(net.parameters(), lr=cfg.lr, momentum=0.9)

            def run_epoch(self, loader):
                for index, (x, y) in enumerate(loader):
                    update_now: bool = (index + 1) % self.accum == 0
                    loss = torch.nn.functional.cross_entropy(self.net(x), y)
                    (loss / self.accum).backward()
                    if update_now:
                        self.optimizer.step()
                        self.optimizer.zero_grad()
        """,
        at="loss.backward()",
    ),
    Fires(  # apex without the division: the scaled loss is the undivided one, times the loss scale
        """
        import torch
        from apex import amp

        def train(model, train_dataloader, optimizer, accumulation_steps):
            model.train()
            for step, (x, y) in enumerate(train_dataloader):
                loss = torch.nn.functional.cross_entropy(model(x), y)
                with amp.scale_loss(loss, optimizer) as scaled_loss:
                    scaled_loss.backward()
                if (step + 1) % accumulation_steps == 0:
                    optimizer.step()
                    optimizer.zero_grad()
        """,
        fixed="""
        import torch
        from apex import amp

        def train(model, train_dataloader, optimizer, accumulation_steps):
            model.train()
            for step, (x, y) in enumerate(train_dataloader):
                loss = torch.nn.functional.cross_entropy(model(x), y)
                with amp.scale_loss(loss, optimizer) as scaled_loss:
                    (scaled_loss / accumulation_steps).backward()
                if (step + 1) % accumulation_steps == 0:
                    optimizer.step()
                    optimizer.zero_grad()
        """,
        at="scaled_loss.backward()",
    ),
    Fires(  # AdamW normalises the update: the sum mostly cancels, so a note, not an error (a clip makes it a warning, below)
        """
        import torch
        import torch.nn.functional as F

        def train(model, loader, accumulation_steps):
            optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)
            for i, (x, y) in enumerate(loader):
                F.cross_entropy(model(x), y).backward()
                if (i + 1) % accumulation_steps == 0:
                    optimizer.step()
                    optimizer.zero_grad()
        """,
        fixed="""
        import torch
        import torch.nn.functional as F

        def train(model, loader, accumulation_steps):
            optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)
            for i, (x, y) in enumerate(loader):
                (F.cross_entropy(model(x), y) / accumulation_steps).backward()
                if (i + 1) % accumulation_steps == 0:
                    optimizer.step()
                    optimizer.zero_grad()
        """,
        severity=Severity.NOTE,
    ),
    Fires(  # the loss comes from a helper in a package trainlint cannot read: it may divide, so a note
        """
        from my_lib.losses import compute_loss

        def train(model, loader, optimizer, accumulation_steps):
            for i, batch in enumerate(loader):
                loss = compute_loss(model, batch)
                loss.backward()
                if (i + 1) % accumulation_steps == 0:
                    optimizer.step()
                    optimizer.zero_grad()
        """,
        fixed="""
        from my_lib.losses import compute_loss

        def train(model, loader, optimizer, accumulation_steps):
            for i, batch in enumerate(loader):
                loss = compute_loss(model, batch)
                (loss / accumulation_steps).backward()
                if (i + 1) % accumulation_steps == 0:
                    optimizer.step()
                    optimizer.zero_grad()
        """,
        severity=Severity.NOTE,
    ),
    Fires(
        """
        def train(model, loader, optimizer, criterion, accum_steps):
            model.train()
            for i, (x, y) in enumerate(loader):
                loss = criterion(model(x), y)
                loss.backward()
                if (i + 1) % accum_steps == 0:
                    optimizer.step()
                    optimizer.zero_grad()
        """,
        fixed="""
        def train(model, loader, optimizer, criterion, accum_steps):
            model.train()
            for i, (x, y) in enumerate(loader):
                loss = criterion(model(x), y)
                (loss / accum_steps).backward()
                if (i + 1) % accum_steps == 0:
                    optimizer.step()
                    optimizer.zero_grad()
        """,
        severity=Severity.ERROR,
    ),
    Fires(
        """
        import torch

        scaler = torch.cuda.amp.GradScaler()
        for step, batch in enumerate(train_loader):
            with torch.autocast("cuda", dtype=torch.float16):
                loss = model(**batch).loss
            scaler.scale(loss).backward()
            if (step + 1) % args.gradient_accumulation_steps != 0:
                continue
            scaler.step(optimizer)
            scaler.update()
            optimizer.zero_grad(set_to_none=True)
        """,
        fixed="""
        import torch

        scaler = torch.cuda.amp.GradScaler()
        for step, batch in enumerate(train_loader):
            with torch.autocast("cuda", dtype=torch.float16):
                loss = model(**batch).loss
            scaler.scale(loss / args.gradient_accumulation_steps).backward()
            if (step + 1) % args.gradient_accumulation_steps != 0:
                continue
            scaler.step(optimizer)
            scaler.update()
            optimizer.zero_grad(set_to_none=True)
        """,
    ),
    Fires(
        """
        import torch.nn.functional as F

        def train_epoch(model, loader, optimizer, accum_steps=4):
            for batch in loader:
                for micro in range(accum_steps):
                    x, y = batch[micro]
                    F.cross_entropy(model(x), y).backward()
                optimizer.step()
                optimizer.zero_grad()
        """,
        fixed="""
        import torch.nn.functional as F

        def train_epoch(model, loader, optimizer, accum_steps=4):
            for batch in loader:
                for micro in range(accum_steps):
                    x, y = batch[micro]
                    (F.cross_entropy(model(x), y) / accum_steps).backward()
                optimizer.step()
                optimizer.zero_grad()
        """,
    ),
    Fires(
        """
        import torch.nn as nn

        criterion = nn.CrossEntropyLoss()

        def fit(model, optimizer, loader, update_freq):
            for i, (x, y) in enumerate(loader):
                logits = model(x)
                loss = criterion(logits, y) + 0.01 * logits.pow(2).mean()
                loss.backward()
                if (i + 1) % update_freq == 0 or (i + 1) == len(loader):
                    optimizer.step()
                    model.zero_grad()
        """,
        fixed="""
        import torch.nn as nn

        criterion = nn.CrossEntropyLoss()

        def fit(model, optimizer, loader, update_freq):
            for i, (x, y) in enumerate(loader):
                logits = model(x)
                loss = criterion(logits, y) + 0.01 * logits.pow(2).mean()
                (loss / update_freq).backward()
                if (i + 1) % update_freq == 0 or (i + 1) == len(loader):
                    optimizer.step()
                    model.zero_grad()
        """,
    ),
    Fires(
        """
        import torch.nn.functional as F

        def compute_loss(model, batch):
            return F.cross_entropy(model(batch["x"]), batch["y"])

        def train(model, loader, optimizer):
            for batch in loader:
                for chunk in split_batch(batch, 4):
                    compute_loss(model, chunk).backward()
                optimizer.step()
                optimizer.zero_grad()
        """,
    ),
    Fires(
        """
        from torch.nn.parallel import DistributedDataParallel as DDP

        def train(model, loader, optimizer, criterion, accum):
            model = DDP(model)
            for i, (x, y) in enumerate(loader):
                if (i + 1) % accum != 0:
                    with model.no_sync():
                        criterion(model(x), y).backward()
                else:
                    criterion(model(x), y).backward()
                    optimizer.step()
                    optimizer.zero_grad()
        """,
        fixed="""
        from torch.nn.parallel import DistributedDataParallel as DDP

        def train(model, loader, optimizer, criterion, accum):
            model = DDP(model)
            for i, (x, y) in enumerate(loader):
                if (i + 1) % accum != 0:
                    with model.no_sync():
                        (criterion(model(x), y) / accum).backward()
                else:
                    criterion(model(x), y).backward()
                    optimizer.step()
                    optimizer.zero_grad()
        """,
    ),
    Fires(  # AdamW normalises the step, but a fixed clipping threshold now cuts a gradient N times too large
        """
        import torch
        from torch.cuda.amp import GradScaler

        def finetune(model, loss_fn, loader, args):
            params = [p for p in model.parameters() if p.requires_grad]
            optimizer = torch.optim.AdamW(params, lr=args.lr, weight_decay=args.wd)
            scaler = GradScaler()
            for epoch in range(args.epochs):
                for i, batch in enumerate(loader):
                    with torch.autocast(device_type="cuda", dtype=torch.float16):
                        loss = loss_fn(model(batch["images"].cuda()), batch["labels"].cuda())
                    scaler.scale(loss).backward()
                    if (i + 1) % args.num_grad_accumulation == 0:
                        scaler.unscale_(optimizer)
                        torch.nn.utils.clip_grad_norm_(params, 1.0)
                        scaler.step(optimizer)
                        scaler.update()
                        optimizer.zero_grad()
        """,
        fixed="""
        import torch
        from torch.cuda.amp import GradScaler

        def finetune(model, loss_fn, loader, args):
            params = [p for p in model.parameters() if p.requires_grad]
            optimizer = torch.optim.AdamW(params, lr=args.lr, weight_decay=args.wd)
            scaler = GradScaler()
            for epoch in range(args.epochs):
                for i, batch in enumerate(loader):
                    with torch.autocast(device_type="cuda", dtype=torch.float16):
                        loss = loss_fn(model(batch["images"].cuda()), batch["labels"].cuda())
                    scaler.scale(loss / args.num_grad_accumulation).backward()
                    if (i + 1) % args.num_grad_accumulation == 0:
                        scaler.unscale_(optimizer)
                        torch.nn.utils.clip_grad_norm_(params, 1.0)
                        scaler.step(optimizer)
                        scaler.update()
                        optimizer.zero_grad()
        """,
        severity=Severity.WARNING,
    ),
    Fires(  # Fabric runs no loop for you; the step's test is computed into a name first
        """
        import lightning as L
        import torch

        from model import GPT


        def train(fabric: L.Fabric, model, optimizer, get_batch, max_iters, accumulation_iters):
            model.train()
            for iter_num in range(max_iters):
                is_accumulating = (iter_num + 1) % accumulation_iters != 0
                with fabric.no_backward_sync(model, enabled=is_accumulating):
                    input_ids, targets = get_batch()
                    logits = model(input_ids)
                    loss = torch.nn.functional.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))
                    fabric.backward(loss)
                if not is_accumulating:
                    optimizer.step()
                    optimizer.zero_grad()


        def main():
            fabric = L.Fabric(accelerator="cuda", devices=4, strategy="fsdp")
            fabric.launch()
            model = fabric.setup_module(GPT())
            optimizer = fabric.setup_optimizers(torch.optim.SGD(model.parameters(), lr=0.1))
        """,
        files={"model.py": """
            import torch.nn as nn

            class GPT(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.head = nn.Linear(64, 100)

                def forward(self, x):
                    return self.head(x)
            """},
        at="fabric.backward(loss)",
        no_fix=True,
    ),
    Fires(  # trl's SFTTrainer trusts the model to normalise the loss; this override returns a per-batch mean
        """
        import torch
        import torch.nn.functional as F
        from trl import SFTConfig, SFTTrainer


        class MaskedSFTTrainer(SFTTrainer):
            def __init__(self, *args, mask_prob=0.15, **kwargs):
                super().__init__(*args, **kwargs)
                self.mask_prob = mask_prob

            def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
                labels = inputs.pop("labels")
                outputs = model(**inputs)
                logits = outputs.logits[:, :-1]
                loss = F.cross_entropy(logits.flatten(0, 1), labels[:, 1:].flatten(), ignore_index=-100)
                return (loss, outputs) if return_outputs else loss


        def main(dataset):
            args = SFTConfig(output_dir="out", gradient_accumulation_steps=8, per_device_train_batch_size=2)
            MaskedSFTTrainer(model="Qwen/Qwen2.5-0.5B", args=args, train_dataset=dataset).train()
        """,
        at="compute_loss",
        severity=Severity.WARNING,
        no_fix=True,
    ),
    Fires(  # transformers' Trainer is given any nn.Module: whether it divides depends on the model's forward, a note
        """
        import torch
        from transformers import Trainer


        class ContrastiveTrainer(Trainer):
            def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
                anchors = model(input_ids=inputs["anchor_ids"]).pooler_output
                positives = model(input_ids=inputs["positive_ids"]).pooler_output
                scores = anchors @ positives.T / 0.05
                loss = torch.nn.functional.cross_entropy(scores, torch.arange(len(scores), device=scores.device))
                return (loss, scores) if return_outputs else loss
        """,
        at="compute_loss",
        severity=Severity.NOTE,
        no_fix=True,
    ),
    Fires(  # a Trainer subclass that loads a transformers model itself: that model's forward takes **kwargs
        """
        import torch
        from transformers import AutoModelForCausalLM, Trainer


        class PairwiseTrainer(Trainer):
            def __init__(self, model, args, margin=0.5, **kwargs):
                if isinstance(model, str):
                    model = AutoModelForCausalLM.from_pretrained(model, torch_dtype=torch.bfloat16)
                super().__init__(model=model, args=args, **kwargs)
                self.margin = margin

            def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
                chosen = model(input_ids=inputs["chosen_ids"], attention_mask=inputs["chosen_mask"]).logits.mean(-1)
                rejected = model(input_ids=inputs["rejected_ids"], attention_mask=inputs["rejected_mask"]).logits.mean(-1)
                loss = torch.relu(self.margin - (chosen - rejected).mean(-1)).mean()
                return (loss, {"margin": (chosen - rejected).mean()}) if return_outputs else loss
        """,
        at="compute_loss",
        severity=Severity.WARNING,
        no_fix=True,
    ),
    Fires(  # what it loads with transformers is a tokenizer, not a model: the model is anyone's, a note
        """
        import torch
        from transformers import AutoTokenizer, Trainer


        class PromptTrainer(Trainer):
            def __init__(self, model, args, tokenizer_name="gpt2", **kwargs):
                super().__init__(model=model, args=args, **kwargs)
                self.prompt_tokenizer = AutoTokenizer.from_pretrained(tokenizer_name)

            def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
                scores = model(inputs["features"])
                loss = torch.nn.functional.mse_loss(scores, inputs["targets"])
                return (loss, scores) if return_outputs else loss
        """,
        at="compute_loss",
        severity=Severity.NOTE,
        no_fix=True,
    ),
    Fires(  # accumulation configured on the Accelerator, the trainer class never enters `accumulate`
        """
        from accelerate import Accelerator
        from torch.optim import AdamW


        class Finetuner:
            def __init__(self, model, train_loader, config):
                self.accelerator = Accelerator(
                    mixed_precision="bf16", gradient_accumulation_steps=config.accumulation_steps,
                )
                optimizer = AdamW(model.parameters(), lr=config.lr)
                self.model, self.optimizer, self.train_loader = self.accelerator.prepare(model, optimizer, train_loader)

            def train_epoch(self):
                self.model.train()
                for batch in self.train_loader:
                    outputs = self.model(**batch)
                    self.accelerator.backward(outputs.loss)
                    self.accelerator.clip_grad_norm_(self.model.parameters(), 1.0)
                    self.optimizer.step()
                    self.optimizer.zero_grad()
        """,
        severity=Severity.WARNING,
        at="self.accelerator.backward(outputs.loss)",
    ),
    Fires(  # a training API split across methods: one counts the calls and steps every N-th, the other backwards as given
        """
        import torch


        class BaseLearner:
            def __init__(self, model, config):
                self.model = model
                self.config = config
                self.optimizer = torch.optim.SGD(model.parameters(), lr=config["lr"], momentum=0.9)
                self.pending = 0

            def backward(self, loss):
                loss.backward()

            def optimizer_step(self):
                accumulate = self.config.get("accumulate", 1)
                if accumulate > 1:
                    self.pending = (self.pending + 1) % accumulate
                    if self.pending:
                        return
                self.optimizer.step()
                self.optimizer.zero_grad()


        class Classifier(BaseLearner):
            def train_batch(self, images, labels):
                loss = torch.nn.functional.cross_entropy(self.model(images), labels)
                self.backward(loss)
                self.optimizer_step()
        """,
        severity=Severity.NOTE,
        at="loss.backward()",
    ),
    Fires(  # every N by a counter the trainer resets, not by a remainder
        """
        import torch


        class Trainer:
            def __init__(self, model, optimizer, accumulation_steps):
                self.model, self.optimizer = model, optimizer
                self.accumulation_steps = accumulation_steps
                self.micro_steps = 0

            def train_epoch(self, loader):
                self.model.train()
                for images, labels in loader:
                    loss = torch.nn.functional.cross_entropy(self.model(images), labels)
                    loss.backward()
                    self.micro_steps += 1
                    if self.micro_steps == self.accumulation_steps:
                        self.optimizer.step()
                        self.optimizer.zero_grad()
                        self.micro_steps = 0
        """,
        no_fix=True,
        at="loss.backward()",
    ),
    Fires(  # accumulation counted by the trainer while its `Accelerator` is built without a count: `backward` divides by 1
        """
        from accelerate import Accelerator


        class Trainer:
            def __init__(self, model, optimizer, loader, config):
                self.accelerator = Accelerator(mixed_precision=config.mixed_precision)
                self.model, self.optimizer, self.loader = self.accelerator.prepare(model, optimizer, loader)
                self.grad_accum = config.grad_accum

            def train_epoch(self):
                self.model.train()
                for step, batch in enumerate(self.loader):
                    outputs = self.model(**batch)
                    self.accelerator.backward(outputs.loss)
                    if (step + 1) % self.grad_accum == 0:
                        self.optimizer.step()
                        self.optimizer.zero_grad()
        """,
        severity=Severity.WARNING,
        at="self.accelerator.backward(outputs.loss)",
        no_fix=True,
    ),
    Fires(  # two optimizers stepped by a loop over them, under the accumulation test: the loop over batches accumulates
        """
        import torch


        def main(net, loader, k):
            opts = [
                torch.optim.SGD(net.body.parameters(), lr=0.1, momentum=0.9),
                torch.optim.SGD(net.head.parameters(), lr=0.01, momentum=0.9),
            ]
            for epoch in range(10):
                for i, (x, y) in enumerate(loader):
                    obj = torch.nn.functional.mse_loss(net(x), y)
                    obj.backward()
                    if (i + 1) % k == 0:
                        for o in opts:
                            o.step()
                            o.zero_grad()
        """,
        fixed="""
        import torch


        def main(net, loader, k):
            opts = [
                torch.optim.SGD(net.body.parameters(), lr=0.1, momentum=0.9),
                torch.optim.SGD(net.head.parameters(), lr=0.01, momentum=0.9),
            ]
            for epoch in range(10):
                for i, (x, y) in enumerate(loader):
                    obj = torch.nn.functional.mse_loss(net(x), y)
                    (obj / k).backward()
                    if (i + 1) % k == 0:
                        for o in opts:
                            o.step()
                            o.zero_grad()
        """,
        at="obj.backward()",
        severity=Severity.ERROR,
    ),
    Fires(  # the step split into methods: the objective returned by one, backwarded by another; the loss it is handed is the objective's
        """
        import torch
        from torch import nn


        class Fitter:
            def __init__(self, net, loader, k):
                self.net = net
                self.loader = loader
                self.k = k
                self.crit = nn.MSELoss()
                self.opt = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)

            def objective(self, x, y):
                return self.crit(self.net(x), y)

            def backprop(self, obj):
                obj.backward()

            def update(self):
                self.opt.step()
                self.opt.zero_grad()

            def fit_epoch(self):
                for i, (x, y) in enumerate(self.loader):
                    obj = self.objective(x, y)
                    self.backprop(obj)
                    if (i + 1) % self.k == 0:
                        self.update()
        """,
        no_fix=True,
        at="self.backprop(obj)",
        severity=Severity.ERROR,
    ),
    Fires(  # a GAN whose generator accumulates: the discriminator's clearing and step every iteration leave its gradients alone
        """
        import torch
        import torch.nn.functional as F


        def run(gen, disc, loader, k, device):
            opt_g = torch.optim.SGD(gen.parameters(), lr=0.01, momentum=0.9)
            opt_d = torch.optim.SGD(disc.parameters(), lr=0.01, momentum=0.9)
            for epoch in range(100):
                for i, (real, _) in enumerate(loader):
                    real = real.to(device)
                    z = torch.randn(real.shape[0], 128, device=device)
                    fake = gen(z)
                    opt_d.zero_grad()
                    d_real, d_fake = disc(real), disc(fake.detach())
                    d_obj = F.binary_cross_entropy_with_logits(d_real, torch.ones_like(d_real)) + F.binary_cross_entropy_with_logits(d_fake, torch.zeros_like(d_fake))
                    d_obj.backward()
                    opt_d.step()
                    d_gen = disc(fake)
                    g_obj = F.binary_cross_entropy_with_logits(d_gen, torch.ones_like(d_gen))
                    g_obj.backward()
                    if (i + 1) % k == 0:
                        opt_g.step()
                        opt_g.zero_grad()
        """,
        fixed="""
        import torch
        import torch.nn.functional as F


        def run(gen, disc, loader, k, device):
            opt_g = torch.optim.SGD(gen.parameters(), lr=0.01, momentum=0.9)
            opt_d = torch.optim.SGD(disc.parameters(), lr=0.01, momentum=0.9)
            for epoch in range(100):
                for i, (real, _) in enumerate(loader):
                    real = real.to(device)
                    z = torch.randn(real.shape[0], 128, device=device)
                    fake = gen(z)
                    opt_d.zero_grad()
                    d_real, d_fake = disc(real), disc(fake.detach())
                    d_obj = F.binary_cross_entropy_with_logits(d_real, torch.ones_like(d_real)) + F.binary_cross_entropy_with_logits(d_fake, torch.zeros_like(d_fake))
                    d_obj.backward()
                    opt_d.step()
                    d_gen = disc(fake)
                    g_obj = F.binary_cross_entropy_with_logits(d_gen, torch.ones_like(d_gen))
                    (g_obj / k).backward()
                    if (i + 1) % k == 0:
                        opt_g.step()
                        opt_g.zero_grad()
        """,
        at="g_obj.backward()",
        severity=Severity.ERROR,
    ),
)

UnscaledAccumulation.MUST_NOT_FIRE = (
    Quiet(  # the loss divided by a reassignment, then handed to the AMP scaler on one branch
        """
        import torch
        from torch import nn


        class Classifier(nn.Module):
            def forward_batch(self, batch):
                logits = self(batch["x"])
                return logits, nn.functional.cross_entropy(logits, batch["y"])

            def learn(self, batch):
                _, loss = self.forward_batch(batch)
                loss = loss / self.accum
                if self.amp:
                    self.scaler.scale(loss).backward()
                else:
                    loss.backward()
                if (self.seen + 1) % self.accum == 0:
                    self.optimizer.step()
                    self.optimizer.zero_grad()
                return loss

            def run(self, loader):
                for index, batch in enumerate(loader):
                    self.seen = index
                    self.learn(batch)
        """
    ),
    Quiet(  # the subclass tells the Trainer that its loss needs the division; another normalises by the item count
        """
        import torch.nn.functional as F
        from trl import SFTTrainer


        class MaskedSFTTrainer(SFTTrainer):
            def __init__(self, *args, **kwargs):
                super().__init__(*args, **kwargs)
                self.model_accepts_loss_kwargs = False

            def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
                labels = inputs.pop("labels")
                logits = model(**inputs).logits[:, :-1]
                return F.cross_entropy(logits.flatten(0, 1), labels[:, 1:].flatten(), ignore_index=-100)


        class SummedSFTTrainer(SFTTrainer):
            def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
                labels = inputs.pop("labels")
                logits = model(**inputs).logits[:, :-1]
                loss = F.cross_entropy(logits.flatten(0, 1), labels[:, 1:].flatten(), ignore_index=-100, reduction="sum")
                return loss / num_items_in_batch
        """
    ),
    Quiet(  # trl's DPOTrainer sets model_accepts_loss_kwargs = False itself: the Trainer divides
        """
        from trl import DPOTrainer


        class WeightedDPOTrainer(DPOTrainer):
            def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
                loss, metrics = self.get_batch_loss_metrics(model, inputs, train_eval="train")
                return (loss * inputs["weight"].mean(), metrics) if return_outputs else loss * inputs["weight"].mean()
        """
    ),
    Quiet(  # the same Fabric loop, with the loss divided by the number of micro-batches
        """
        import lightning as L
        import torch


        def train(fabric: L.Fabric, model, optimizer, get_batch, max_iters, accumulation_iters):
            for iter_num in range(max_iters):
                is_accumulating = (iter_num + 1) % accumulation_iters != 0
                with fabric.no_backward_sync(model, enabled=is_accumulating):
                    input_ids, targets = get_batch()
                    loss = torch.nn.functional.cross_entropy(model(input_ids), targets)
                    fabric.backward(loss / accumulation_iters)
                if not is_accumulating:
                    optimizer.step()
                    optimizer.zero_grad()
        """
    ),
    Quiet(  # a flag that does not follow the iteration count
        """
        import torch


        def train(model, optimizer, loader, criterion, warmup_steps):
            for step, (x, y) in enumerate(loader):
                in_warmup = step < warmup_steps
                loss = criterion(model(x), y)
                loss.backward()
                if not in_warmup:
                    optimizer.step()
                optimizer.zero_grad()
        """
    ),
    Quiet(  # apex: the loss is divided, and `amp.scale_loss` hands back that loss times the loss scale
        """
        from apex import amp

        def train(args, model, train_dataloader, optimizer, scheduler):
            model.train()
            for step, batch in enumerate(train_dataloader):
                loss = model(**batch)[0]
                if args.gradient_accumulation_steps > 1:
                    loss = loss / args.gradient_accumulation_steps
                with amp.scale_loss(loss, optimizer) as scaled_loss:
                    scaled_loss.backward()
                if (step + 1) % args.gradient_accumulation_steps == 0:
                    optimizer.step()
                    scheduler.step()
                    model.zero_grad()
        """
    ),
    Quiet(  # accumulation in one branch, a step after every backward in the other (Swin's SimMIM)
        """
        import torch

        def train_one_epoch(config, model, criterion, data_loader, optimizer, scaler):
            model.train()
            optimizer.zero_grad()
            for idx, (samples, targets) in enumerate(data_loader):
                outputs = model(samples.cuda(non_blocking=True))
                if config.ACCUMULATION_STEPS > 1:
                    loss = criterion(outputs, targets.cuda()) / config.ACCUMULATION_STEPS
                    scaler.scale(loss).backward()
                    if (idx + 1) % config.ACCUMULATION_STEPS == 0:
                        scaler.step(optimizer)
                        optimizer.zero_grad()
                        scaler.update()
                else:
                    loss = criterion(outputs, targets.cuda())
                    optimizer.zero_grad()
                    scaler.scale(loss).backward()
                    scaler.step(optimizer)
                    scaler.update()
        """
    ),
    Quiet(  # SGD built in another file's helper, every parameter group's rate a product of the divided rate
        """
        import torch

        from optim_factory import build_sgd


        class Runner:
            def __init__(self, model, cfg):
                self.model = model
                self.cfg = cfg
                self.optimizer = build_sgd(model, cfg)

            def train_epoch(self, loader):
                self.model.train()
                for i, (x, y) in enumerate(loader):
                    loss = torch.nn.functional.cross_entropy(self.model(x), y)
                    loss.backward()
                    if (i + 1) % self.cfg.grad_accum == 0:
                        self.optimizer.step()
                        self.optimizer.zero_grad()
        """,
        files={
            "optim_factory.py": """
                import torch


                def build_sgd(model, cfg):
                    effective_lr = cfg.lr / cfg.grad_accum
                    groups = [
                        {"params": model.backbone.parameters(), "lr": effective_lr * cfg.backbone_lr_mult},
                        {"params": model.head.parameters(), "lr": effective_lr},
                    ]
                    return torch.optim.SGD(groups, momentum=0.9, weight_decay=1e-4)
            """,
        },
    ),
    Quiet(  # the same, with the divided learning rate computed into a name first
        """
        import torch


        def train(model, loader, args):
            base_lr = args.lr * args.batch_size / 256
            lr = base_lr / args.accum_steps
            optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9, weight_decay=1e-4)
            model.train()
            for i, (images, target) in enumerate(loader):
                loss = torch.nn.functional.cross_entropy(model(images.cuda()), target.cuda())
                loss.backward()
                if (i + 1) % args.accum_steps == 0:
                    optimizer.step()
                    optimizer.zero_grad()
        """
    ),
    Quiet(  # plain SGD with the learning rate divided by the accumulation count: the step is scaled instead
        """
        import torch
        import torch.nn.functional as F

        def train(model, loader, args):
            optimizer = torch.optim.SGD(model.parameters(), lr=args.lr / args.accum_steps, momentum=0.9)
            for i, (x, y) in enumerate(loader):
                F.cross_entropy(model(x), y).backward()
                if (i + 1) % args.accum_steps == 0:
                    optimizer.step()
                    optimizer.zero_grad()
        """
    ),
    Quiet(  # a summed loss divided by the tokens of the whole accumulation window, in a helper
        """
        import torch.nn.functional as F

        def token_mean(logits, labels, tokens_in_window):
            return F.cross_entropy(logits.flatten(0, 1), labels.flatten(), reduction="sum") / tokens_in_window

        def train(model, loader, optimizer, accum):
            for step, batch in enumerate(loader):
                window_tokens = batch["window_tokens"]
                loss = token_mean(model(batch["input_ids"]), batch["labels"], window_tokens)
                loss.backward()
                if (step + 1) % accum == 0:
                    optimizer.step()
                    optimizer.zero_grad()
        """
    ),
    Quiet(
        """
        def train(model, loader, optimizer, criterion, args):
            n = args.accum
            for i, (x, y) in enumerate(loader):
                loss = criterion(model(x), y)
                loss = loss / n
                loss.backward()
                if (i + 1) % n == 0:
                    optimizer.step()
                    optimizer.zero_grad()
        """
    ),
    Quiet(
        """
        import torch

        def train(model, loader, optimizer, criterion, accum_steps):
            for i, (x, y) in enumerate(loader):
                criterion(model(x), y).backward()
                if (i + 1) % accum_steps == 0:
                    for p in model.parameters():
                        if p.grad is not None:
                            p.grad /= accum_steps
                    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                    optimizer.step()
                    optimizer.zero_grad()
        """
    ),
    Quiet(
        """
        from mylib import utils

        def fit(model, loader, optimizer, loss_fn, accumulate):
            tokens = 0
            for i, batch in enumerate(loader):
                tokens += batch["mask"].sum()
                loss_fn(model(batch["ids"]), batch["labels"]).backward()
                if (i + 1) % accumulate == 0:
                    utils.scale_grads(model, 1 / tokens)
                    optimizer.step()
                    optimizer.zero_grad()
                    tokens = 0
        """
    ),
    Quiet(
        """
        import torch.nn.functional as F

        def micro_loss(model, x, y, accum):
            return F.cross_entropy(model(x), y) / accum

        def train(model, loader, optimizer, accum):
            for step, (x, y) in enumerate(loader):
                loss = micro_loss(model, x, y, accum)
                loss.backward()
                if (step + 1) % accum == 0:
                    optimizer.step()
                    optimizer.zero_grad()
        """
    ),
    Quiet(
        """
        from accelerate import Accelerator

        accelerator = Accelerator(gradient_accumulation_steps=8)
        model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
        for step, batch in enumerate(loader):
            with accelerator.accumulate(model):
                loss = model(**batch).loss
                accelerator.backward(loss)
                if (step + 1) % 8 == 0:
                    optimizer.step()
                    optimizer.zero_grad()
        """
    ),
    Quiet(
        """
        import deepspeed

        engine, optimizer, loader, _ = deepspeed.initialize(model=model, model_parameters=model.parameters(), config=cfg)
        for step, batch in enumerate(loader):
            loss = engine(batch)
            engine.backward(loss)
            if (step + 1) % cfg["gradient_accumulation_steps"] == 0:
                engine.step()
        """
    ),
    Quiet(
        """
        from transformers import Trainer, TrainingArguments

        class WeightedTrainer(Trainer):
            def training_step(self, model, inputs, num_items_in_batch=None):
                for i, chunk in enumerate(self.split(inputs)):
                    loss = self.compute_loss(model, chunk)
                    loss.backward()
                    if (i + 1) % self.args.gradient_accumulation_steps == 0:
                        self.optimizer.step()
                return loss.detach()
        """
    ),
    Quiet(
        """
        import lightning as L

        class Model(L.LightningModule):
            def training_step(self, batch, batch_idx):
                opt = self.optimizers()
                loss = self.loss(batch)
                loss.backward()
                if (batch_idx + 1) % 4 == 0:
                    opt.step()
                    opt.zero_grad()
        """
    ),
    Quiet(
        """
        def train(model, loader, optimizer, criterion, log_every):
            for i, (x, y) in enumerate(loader):
                optimizer.zero_grad()
                loss = criterion(model(x), y)
                loss.backward()
                optimizer.step()
                if i % log_every == 0:
                    print(i, loss.item())
        """
    ),
    Quiet(
        """
        def train(model, loaders, optimizer, criterion):
            for batches in zip(*loaders):
                optimizer.zero_grad()
                for task, (x, y) in enumerate(batches):
                    criterion(model(x, task), y).backward()
                optimizer.step()
        """
    ),
    Quiet(
        """
        import torch

        def train(model, loader, optimizer, criterion, accum):
            for i, (x, y) in enumerate(loader):
                criterion(model(x), y).backward()
                if (i + 1) % accum == 0:
                    grads = [p.grad for p in model.parameters() if p.grad is not None]
                    torch._foreach_div_(grads, accum)
                    optimizer.step()
                    optimizer.zero_grad()
        """
    ),
    Quiet(  # the same trainer, its step under `accumulate`
        """
        from accelerate import Accelerator


        class Finetuner:
            def __init__(self, model, optimizer, train_loader, accumulation_steps):
                self.accelerator = Accelerator(gradient_accumulation_steps=accumulation_steps)
                self.model, self.optimizer, self.train_loader = self.accelerator.prepare(model, optimizer, train_loader)

            def train_epoch(self):
                for batch in self.train_loader:
                    with self.accelerator.accumulate(self.model):
                        loss = self.model(**batch).loss
                        self.accelerator.backward(loss)
                        self.optimizer.step()
                        self.optimizer.zero_grad()
        """
    ),
    Quiet(  # stepping gated by hand on the accumulation count: accumulates, on losses accelerate divided
        """
        from accelerate import Accelerator

        def train(model, optimizer, loader, accumulation_steps):
            accelerator = Accelerator(gradient_accumulation_steps=accumulation_steps)
            model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
            for step, batch in enumerate(loader):
                accelerator.backward(model(**batch).loss)
                if (step + 1) % accumulation_steps == 0:
                    optimizer.step()
                    optimizer.zero_grad()
        """
    ),
    Quiet(  # the backward method divides what it is handed by the count its stepping method uses
        """
        import torch


        class BaseLearner:
            def __init__(self, model, config):
                self.model = model
                self.accumulate = config.get("accumulate", 1)
                self.optimizer = torch.optim.SGD(model.parameters(), lr=config["lr"])
                self.pending = 0

            def backward(self, loss):
                if self.accumulate > 1:
                    loss = loss / self.accumulate
                loss.backward()

            def optimizer_step(self):
                self.pending = (self.pending + 1) % self.accumulate
                if self.pending != 0:
                    return
                self.optimizer.step()
                self.optimizer.zero_grad()
        """
    ),
    Quiet(  # the stepping method returns early on a flag, not on a count: it steps whenever it is called
        """
        import torch


        class BaseLearner:
            def __init__(self, model, lr, frozen=False):
                self.model, self.frozen = model, frozen
                self.optimizer = torch.optim.SGD(model.parameters(), lr=lr)

            def backward(self, loss):
                loss.backward()

            def optimizer_step(self):
                if self.frozen:
                    return
                self.optimizer.step()
                self.optimizer.zero_grad()
        """
    ),
    Quiet(  # the project's own `backward` method divides the loss before its backward
        """
        class Learner:
            def __init__(self, model, optimizer, accumulation_steps):
                self.model, self.optimizer = model, optimizer
                self.accumulation_steps = accumulation_steps
                self.micro_steps = 0

            def backward(self, loss):
                (loss / self.accumulation_steps).backward()

            def fit(self, loader, criterion):
                for inputs, labels in loader:
                    self.backward(criterion(self.model(inputs), labels))
                    self.micro_steps += 1
                    if self.micro_steps % self.accumulation_steps == 0:
                        self.optimizer.step()
                        self.optimizer.zero_grad()
        """
    ),
    Quiet(  # micro-batches accumulated by hand in an inner loop, one step after it
        """
        from accelerate import Accelerator

        def train(model, optimizer, loader, accumulation_steps, updates):
            accelerator = Accelerator(gradient_accumulation_steps=accumulation_steps)
            model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
            batches = iter(loader)
            for update in range(updates):
                for _ in range(accumulation_steps):
                    accelerator.backward(model(**next(batches)).loss)
                optimizer.step()
                optimizer.zero_grad()
        """
    ),
    Quiet(  # the counter form with the loss divided by the count it waits for
        """
        import torch


        class Trainer:
            def __init__(self, model, optimizer, accumulation_steps):
                self.model, self.optimizer = model, optimizer
                self.accumulation_steps = accumulation_steps
                self.micro_steps = 0

            def train_epoch(self, loader):
                for images, labels in loader:
                    loss = torch.nn.functional.cross_entropy(self.model(images), labels)
                    (loss / self.accumulation_steps).backward()
                    self.micro_steps += 1
                    if self.micro_steps == self.accumulation_steps:
                        self.optimizer.step()
                        self.optimizer.zero_grad()
                        self.micro_steps = 0
        """,
    ),
    Quiet(  # the same `Accelerator` with no count, the loss divided by the trainer's own count before `backward`
        """
        from accelerate import Accelerator


        def main(args, model, optimizer, loader):
            accelerator = Accelerator()
            model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
            for step, batch in enumerate(loader):
                loss = model(**batch).loss
                accelerator.backward(loss / args.gradient_accumulation_steps)
                if (step + 1) % args.gradient_accumulation_steps == 0:
                    optimizer.step()
                    optimizer.zero_grad()
        """
    ),
    Quiet(  # the count given to the `Accelerator`, whose `backward` divides by it; the loop steps every N itself
        """
        from accelerate import Accelerator


        def main(args, model, optimizer, loader):
            accelerator = Accelerator(gradient_accumulation_steps=args.gradient_accumulation_steps)
            model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
            for step, batch in enumerate(loader):
                loss = model(**batch).loss
                accelerator.backward(loss)
                if (step + 1) % args.gradient_accumulation_steps == 0:
                    optimizer.step()
                    optimizer.zero_grad()
        """
    ),
    Quiet(  # the caller divides the objective before it hands it to the method that backwards it
        """
        import torch
        from torch import nn


        class Fitter:
            def __init__(self, net, loader, k):
                self.net = net
                self.loader = loader
                self.k = k
                self.crit = nn.MSELoss()
                self.opt = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)

            def objective(self, x, y):
                return self.crit(self.net(x), y)

            def backprop(self, obj):
                obj.backward()

            def fit_epoch(self):
                for i, (x, y) in enumerate(self.loader):
                    obj = self.objective(x, y)
                    self.backprop(obj / self.k)
                    if (i + 1) % self.k == 0:
                        self.opt.step()
                        self.opt.zero_grad()
        """
    ),
    Quiet(  # a GAN whose generator divides its accumulated loss; the discriminator steps after each of its own backwards
        """
        import torch
        import torch.nn.functional as F


        def run(gen, disc, loader, k, device):
            opt_g = torch.optim.SGD(gen.parameters(), lr=0.01, momentum=0.9)
            opt_d = torch.optim.SGD(disc.parameters(), lr=0.01, momentum=0.9)
            for epoch in range(100):
                for i, (real, _) in enumerate(loader):
                    real = real.to(device)
                    fake = gen(torch.randn(real.shape[0], 128, device=device))
                    opt_d.zero_grad()
                    d_real, d_fake = disc(real), disc(fake.detach())
                    d_obj = F.binary_cross_entropy_with_logits(d_real, torch.ones_like(d_real)) + F.binary_cross_entropy_with_logits(d_fake, torch.zeros_like(d_fake))
                    d_obj.backward()
                    opt_d.step()
                    d_gen = disc(fake)
                    g_obj = F.binary_cross_entropy_with_logits(d_gen, torch.ones_like(d_gen)) / k
                    g_obj.backward()
                    if (i + 1) % k == 0:
                        opt_g.step()
                        opt_g.zero_grad()
        """
    ),
    Quiet(  # each optimizer of the list steps after its own backward on every batch: nothing accumulates
        """
        import torch


        def main(nets, loader):
            opts = [torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9) for net in nets]
            for epoch in range(10):
                for i, (x, y) in enumerate(loader):
                    for net, o in zip(nets, opts):
                        obj = torch.nn.functional.mse_loss(net(x), y)
                        obj.backward()
                        o.step()
                        o.zero_grad()
        """
    ),
)
