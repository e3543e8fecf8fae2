"""Gradients are cleared between `backward()` and `step()`: the optimizer steps on zeros.

The order inside a training step matters: `backward()` fills `.grad`, `step()` reads it. Clearing
in between (`optimizer.zero_grad()`, `model.zero_grad()`, `p.grad = None`) throws the fresh
gradients away, so `step()` applies nothing (or only weight decay and momentum from earlier
steps): the loss does not move, the run burns its budget, and nothing crashes.

The same happens across iterations under gradient accumulation: a clearing that runs on every
iteration (or in every pass of a micro-batch loop) while the step runs only every N throws away what
the earlier passes accumulated, so each step applies the last backward's gradient alone (so does a clearing
under the step's own every-N test placed before the backward, `if i % N == 0: opt.zero_grad()` ... `if i % N == 0:
opt.step()`: the iteration that steps clears first; the test may be a method that returns a remainder test,
`if self.should_step():`) (also on one side
of a setting's test, `if fp16: scaler.step(opt)` / `else: opt.step()`, when that side clears on every
iteration and the other does not); the backward may sit
in a loop each iteration runs whole (truncated backpropagation over a sequence's slices), and rescaling the
gradients in place (`p.grad /= n`) keeps nothing aside. A step
function with no loop of its own (`training_step(self, batch)`, run per batch by a loop elsewhere
or by a framework) is read the same way, one call for one iteration, and so is the closure an
`optimizer.step(closure)` runs before it reads the gradients. A clearing between two backward passes
of one iteration, with nothing stepping or reading `.grad` in between, throws the first pass away: the
step applies the second loss alone (a warning; with several optimizers only when every step after the
first backward follows a clearing of its own gradients, as two may clear each other's share on purpose).
The body of a loop or a step function is read round: a clearing right before the step with the
backward after it (`optimizer.zero_grad(); optimizer.step(); loss.backward()`) hands each step the
gradients it has just cleared. A model's `zero_grad()` clears what the optimizer built over its
parameters steps, and a loop over several optimizers clears or steps each of them once. Zeroing each
parameter's gradient in a loop over them all (`for p in model.parameters(): p.grad = None`, over an
optimizer's `param_groups`, over a list of every trainable parameter (`[p for p in model.parameters() if
p.requires_grad]`), in a helper the step calls) is one `zero_grad()`; a loop over a part of the
model (`model.embeddings.parameters()`) or one that picks parameters by name holds that part still on
purpose, and writing other gradients in (`p.grad.div_(world_size)`) is not clearing. A `.step()` of the
project's own (a trainer's `self.step()`, an optimizer wrapper's `step`) that steps an optimizer inside is read
through: what it clears before its inner step counts. A helper's branch is read as the call picks it when the
call hands the tested parameter a literal (`compute_forward(..., eval=False)` backwards under `if not eval:`;
analysis/helper_branches.py).
Inside Accelerate's `accumulate` with `gradient_accumulation_steps` other than 1, the prepared optimizer steps and
clears only on every N-th pass (library fact): a model's own `zero_grad()` there runs on every pass and undoes the
accumulation. A framework runs some
methods between the backward and the step (framework facts): Lightning's `on_after_backward`,
`on_before_optimizer_step` and `configure_gradient_clipping` (a `Callback`'s first two), a Hugging
Face `TrainerCallback`'s `on_pre_optimizer_step`, and an HF Trainer's `training_step` after its own
backward, as the Trainer steps once it returns: clearing all the gradients there (the module's, the
model or optimizer it is handed) leaves the framework's step nothing.

How to fix: clear before the backward or after the step, e.g. `optimizer.zero_grad()`,
`loss.backward()`, `optimizer.step()`. The quick fix moves the clearing call to just after the step.
With accumulation, clear only where you step.
"""

from __future__ import annotations

import builtins
import re
from typing import TypeGuard

import libcst as cst

from trainlint.analysis.frameworks import runs_between_backward_and_step, stepped_after_return
from trainlint.analysis.helper_branches import branch_as_called
from trainlint.analysis.libraries import PREPARED_CLEARS_WITH_STEP, call_fact
from trainlint.analysis.patterns import is_gradient_key
from trainlint.analysis.stepping import clears_a_module, optimizer_protocol
from trainlint.rules import (
    AssignEvent,
    CallEvent,
    Condition,
    Event,
    Fires,
    JumpEvent,
    Loop,
    Quiet,
    Rule,
    RuleContext,
    ScopeAnalysis,
    Severity,
    StoreEvent,
    Tag,
    TextEdit,
    accumulates_into_grad,
    backward_target,
    clears_gradients,
    dotted,
    is_optimizer_step,
    is_torch_name,
    optimizer_text,
    ordered_events,
    path_conditions,
    walk,
    written,
)

Item = tuple[Event, tuple[CallEvent, ...]]
Chains = tuple[tuple[CallEvent, ...], tuple[CallEvent, ...]]  # the calls that run a clearing, and a step
StepItem = tuple[CallEvent, tuple[CallEvent, ...]]  # an optimizer step, and the calls that run it
# (backward, clearing, step, what spreads the step over several backwards, whether the step runs when its test holds),
# and the side of a setting's test that all of it runs on, when only one side's run undoes the accumulation
Undone = tuple[CallEvent, Item, CallEvent, "Loop | Condition", bool, "Condition | None"]


def _needed(event: Event) -> bool:
    """What every finding needs: a clearing of gradients, or the optimizer step a closure is handed to."""
    return clears_gradients(event) or (isinstance(event, CallEvent) and is_optimizer_step(event))


class ZeroGradBeforeStep(Rule):
    code = "TL206"
    name = "zero-grad-before-step"
    severity = Severity.ERROR
    scope_needs = _needed

    def check_scope(self, ctx: RuleContext, scope: ScopeAnalysis) -> None:
        for loop in scope.loops:
            every = list(ordered_events(scope, loop))
            items = [item for item in every if _runs_in_iteration(item, loop)]
            reported = set()
            accumulated = [item for item in every if _runs_in_iteration(item, loop) or _accumulated_by_inner_loop(scope, item, loop)]
            for backward, clear, step in _cleared_before_step(accumulated, loop):
                reported.add(id(clear[0].node))
                if not _inside_one_helper(ctx, backward, clear, step):  # that helper's own check reports it
                    self._report(ctx, scope, loop, backward, clear, step)
            undone = _accumulation_undone(scope, loop)
            if undone is not None and id(undone[1][0].node) not in reported:  # one finding a clearing
                self._report_undone(ctx, scope, *undone)
                reported.add(id(undone[1][0].node))
            prepared = _cleared_past_accumulate(ctx, scope, loop, items)
            if prepared is not None and id(prepared[1][0].node) not in reported:
                self._report_past_accumulate(ctx, scope, loop, *prepared)
                reported.add(id(prepared[1][0].node))
            wasted = _cleared_between_backwards(scope, items, loop)
            if wasted is not None and id(wasted[1][0].node) not in reported:
                self._report_wasted(ctx, scope, loop, *wasted)
                reported.add(id(wasted[1][0].node))
            gated = _cleared_under_the_steps_test(scope, loop, items)
            if gated is not None and id(gated[1][0].node) not in reported:
                self._report_cleared_with_step(ctx, scope, *gated)
        # a step function with no loop of its own (`train_step(batch)`, called by a loop elsewhere or by a
        # framework): between its backward and its step nothing may clear either
        whole = list(ordered_events(scope, None))
        straight = [item for item in whole if _runs_outside_loops(item)]
        reported = set()
        accumulated = [item for item in whole if _runs_outside_loops(item) or _accumulated_by_inner_loop(scope, item, None)]
        for backward, clear, step in _cleared_before_step(accumulated, None):
            self._report(ctx, scope, None, backward, clear, step)
            reported.add(id(clear[0].node))
        undone = _micro_batches_of_step_function(scope)
        if undone is not None and id(undone[1][0].node) not in reported:
            self._report_undone(ctx, scope, *undone)
            reported.add(id(undone[1][0].node))
        wasted = _cleared_between_backwards(scope, straight, None)
        if wasted is not None and id(wasted[1][0].node) not in reported:
            self._report_wasted(ctx, scope, None, *wasted)
        self._check_framework_order(ctx, scope, straight)
        gated = _every_n_calls_undone(scope)
        if gated is not None and id(gated[1][0].node) not in reported:
            self._report_undone(ctx, scope, *gated, unit="call")
            reported.add(id(gated[1][0].node))
        with_step = _cleared_under_the_steps_test(scope, None, straight)
        if with_step is not None and id(with_step[1][0].node) not in reported:
            self._report_cleared_with_step(ctx, scope, *with_step, unit="call")
        for step, backward, clear in _closures_cleared_last(scope):
            self._report_closure(ctx, step, backward, clear)

    def _check_framework_order(self, ctx: RuleContext, scope: ScopeAnalysis, straight: list[Item]) -> None:
        """A method the framework runs between the backward and the step (Lightning's `on_after_backward`, an HF
        `training_step` after its own backward) that clears all the gradients on every call: the framework's step
        then applies zeros. Clearing a part of the model (holding it still) is left alone."""
        hook = runs_between_backward_and_step(ctx.summary, scope.function)
        after_return = None if hook is not None else stepped_after_return(ctx.summary, scope.function)
        if hook is None and after_return is None:
            return
        assert scope.function is not None, "the framework's facts name a method"
        why = hook or after_return or ""
        if after_return is not None:  # only what is cleared after the method's own last backward
            backwards = [index for index, (event, _) in enumerate(straight) if _adds_to_grad(event)]
            if not backwards:
                return
            straight = straight[backwards[-1] + 1:]
            if any(isinstance(event, CallEvent) and is_optimizer_step(event) for event, _ in straight):
                return
        for event, chain in straight:
            if not clears_gradients(event) or _followed_helper(event) or not _clears_everything(scope, (event, chain)):
                continue
            if any(not _guards_the_gradient(condition) for condition in path_conditions(event, chain, None)):
                continue
            site = chain[0] if chain and ctx.in_another_file(event.chunk) else event
            ctx.report(
                site.node,
                f"`{written(event)}` clears every gradient where {why}: the step applies zeros, so the "
                "model does not learn",
                evidence=[
                    ((scope.chunk, scope.function.node.name), why),
                    ((event.chunk, event.node), "the gradients cleared here"),
                    *(((link.chunk, link.node), f"`{written(link)}` runs it here") for link in chain),
                ],
                chunk=site.chunk,
                help="clear the gradients after the optimizer step (the framework does it itself), or drop the clearing",
            )
            return

    def _report_wasted(self, ctx: RuleContext, scope: ScopeAnalysis, loop: Loop | None, first: Item, clear: Item, second: Item,
                       step: Item) -> None:
        """A clearing between two backward passes of one iteration, with no step and no read of `.grad` before it:
        the first pass's gradients are thrown away, and the step applies the second's alone (in a loop, or in a step function with no loop of its own)."""
        clear_event, clear_chain = clear
        site = clear_chain[0] if clear_chain and ctx.in_another_file(clear_event.chunk) else clear_event
        clearing, dropped, kept = written(clear_event), written(first[0]), written(second[0])
        ctx.report(
            site.node,
            f"`{clearing}` clears the gradients that `{dropped}` computed before anything reads them: nothing steps "
            f"or reads `.grad` in between, so `{written(step[0])}` applies the gradients of `{kept}` alone, and the "
            f"backward pass of `{dropped}` is computed and thrown away on every iteration",
            evidence=[
                ((first[0].chunk, first[0].node), "gradients computed here"),
                ((clear_event.chunk, clear_event.node), "cleared here, before any step or read"),
                *[((link.chunk, link.node), f"`{written(link)}` runs it here") for link in clear_chain],
                ((second[0].chunk, second[0].node), "only these gradients remain"),
                ((step[0].chunk, step[0].node), "the step applies them"),
                ((scope.chunk, loop.node) if loop is not None else None, "in each iteration of this loop"),
            ],
            chunk=site.chunk,
            severity=Severity.WARNING,
            help=f"clear once, before `{dropped}`, so that both backward passes add into the step (or drop the first "
                 "backward if its gradients are not wanted)",
        )

    def _report_past_accumulate(self, ctx: RuleContext, scope: ScopeAnalysis, loop: Loop, backward: CallEvent, clear: Item,
                                step: CallEvent, accumulate: CallEvent, count: str) -> None:
        """Inside an Accelerator's `accumulate`, a module's own clearing runs on every micro-step while the prepared
        optimizer steps (and clears) only on every N-th: each step applies the last micro-step's gradient alone."""
        clear_event, chain = clear
        site = chain[0] if chain and ctx.in_another_file(clear_event.chunk) else clear_event
        clearing, stepping = written(clear_event), written(step)
        ctx.report(
            site.node,
            f"`{clearing}` clears the gradients on every pass of `{written(accumulate)}`, but the prepared optimizer's "
            f"`{stepping}` steps only once every `{count}` passes (accelerate skips the others, and the prepared optimizer's own "
            f"`zero_grad()` with them; a module's clearing is not skipped): each step applies the last micro-batch's "
            "gradient alone and the accumulation does nothing",
            evidence=[
                ((backward.chunk, backward.node), "gradients meant to add up over the accumulated micro-batches"),
                ((clear_event.chunk, clear_event.node), "cleared here on every micro-batch"),
                *(((link.chunk, link.node), f"`{written(link)}` runs it here") for link in chain),
                ((accumulate.chunk, accumulate.node), f"the accumulation context: `gradient_accumulation_steps={count}`"),
                ((step.chunk, step.node), "the prepared optimizer, which steps only when the gradients sync"),
                ((scope.chunk, loop.node), "in each iteration of this loop"),
            ],
            chunk=site.chunk,
            help=f"clear through the prepared optimizer (`{_optimizer_key(step) or 'optimizer'}.zero_grad()`), which "
                 "accelerate runs only on the micro-steps it steps",
        )

    def _report_closure(self, ctx: RuleContext, step: CallEvent, backward: CallEvent, clear: Event) -> None:
        """`optimizer.step(closure)` runs the closure and then reads `.grad`: a closure that clears after its
        backward hands the step zeros."""
        clearing = written(clear)
        ctx.report(
            clear.node,
            f"`{clearing}` runs after `{written(backward)}` in the closure that `{written(step)}` calls: the step "
            f"reads the gradients once the closure returns, so it applies zero gradients and the model does not learn",
            evidence=[
                ((backward.chunk, backward.node), "gradients computed here"),
                ((clear.chunk, clear.node), "and cleared here, before the closure returns"),
                ((step.chunk, step.node), "the step runs the closure, then reads the gradients"),
            ],
            chunk=clear.chunk,
            help=f"move `{clearing}` to the start of the closure, before the forward pass",
        )

    def _report_undone(self, ctx: RuleContext, scope: ScopeAnalysis, backward: CallEvent, cleared: Item, step: CallEvent,
                       accumulation: Loop | Condition, holds: bool, side: Condition | None = None, unit: str = "iteration") -> None:
        """Gradients meant to add up over several backward passes are cleared before each of them."""
        clear, chain = cleared
        # reported at the clearing, also inside a helper of this file; at the call of a helper in another file
        site = chain[0] if chain and ctx.in_another_file(clear.chunk) else clear
        clearing, stepping = written(clear), written(step)
        if isinstance(accumulation, Loop):
            schedule = (
                f"`{stepping}` runs once after the loop on line {ctx.line_of((scope.chunk, accumulation.node))}, whose "
                f"every iteration runs `{clearing}` and then `{written(backward)}`"
            )
            if side is not None and side.test is not None:
                shown = " ".join(clear.chunk.code_for(side.test).split()) if side in clear.context.conditions else None
                shown = shown or " ".join(scope.chunk.code_for(side.test).split())
                schedule += f" when `{shown}` {'holds' if side.branch == 'if' else 'does not hold'}"
            where = ((scope.chunk, accumulation.node), "one backward per iteration, one step after the loop")
        else:
            # the test stands in the loop, or in the helper that steps (its chunk is the step's)
            tested = step.chunk if any(condition is accumulation for condition in step.context.conditions) else scope.chunk
            test = " ".join(tested.code_for(accumulation.test).split()) if accumulation.test is not None else "..."
            when = f"when `{test}`" if holds else f"when `{test}` does not hold"
            schedule = f"`{stepping}` runs only {when}, but `{clearing}` runs on every {unit}"
            if side is not None and side.test is not None:
                shown = " ".join(scope.chunk.code_for(side.test).split())
                schedule += f" on which `{shown}` {'holds' if side.branch == 'if' else 'does not hold'}"
            where = ((tested, accumulation.node), f"the optimizer steps only on some {unit}s")
        ctx.report(
            site.node,
            f"{schedule}: each clearing throws away the gradients the earlier backward passes accumulated, so every "
            f"step applies the last backward's gradient alone and the accumulation does nothing",
            evidence=[
                ((clear.chunk, clear.node), "clears the gradients before each backward"),
                *(((link.chunk, link.node), f"`{written(link)}` runs it here, every {unit}") for link in chain),
                ((backward.chunk, backward.node), "gradients meant to add up over several passes"),
                where,
                ((step.chunk, step.node), "the step that should apply their sum"),
            ],
            chunk=site.chunk,
            help=f"run `{clearing}` only right after `{stepping}` (in the same block)",
        )

    def _report_cleared_with_step(self, ctx: RuleContext, scope: ScopeAnalysis, backward: CallEvent, cleared: Item, step: CallEvent,
                                  test: Condition, unit: str = "iteration") -> None:
        """The clearing and the step share one every-N test, the clearing before the backward: the passes that do
        not step accumulate, and the pass that steps clears them before its own backward."""
        clear, chain = cleared
        site = chain[0] if chain and ctx.in_another_file(clear.chunk) else clear
        clearing, stepping = written(clear), written(step)
        shown = " ".join(clear.chunk.code_for(test.test).split()) if test.test is not None else "..."
        when = f"when `{shown}` {'holds' if test.branch == 'if' else 'does not hold'}"
        ctx.report(
            site.node,
            f"`{clearing}` and `{stepping}` both run only {when}, the clearing before `{written(backward)}`: the "
            f"{unit}s that do not step add their gradients up, and the {unit} that steps clears them before its own "
            "backward, so every step applies one backward's gradient alone and the accumulation does nothing",
            evidence=[
                ((backward.chunk, backward.node), f"gradients meant to add up over several {unit}s"),
                ((clear.chunk, clear.node), "cleared here, before the backward, on the stepping " + unit),
                *(((link.chunk, link.node), f"`{written(link)}` runs it here") for link in chain),
                ((step.chunk, step.node), "the step, under the same test, after the backward"),
            ],
            chunk=site.chunk,
            help=f"run `{clearing}` right after `{stepping}` (in the same block), or test the {unit} after the step "
                 "(`(i + 1) % N == 0` for the step where the clearing tests `i % N == 0`)",
        )

    def _report(self, ctx: RuleContext, scope: ScopeAnalysis, loop: Loop | None, backward: Item, clear: Item, step: Item) -> None:
        clear_event, clear_chain = clear
        step_event, _ = step
        backward_event, _ = backward
        # the statement that is wrong is the clearing itself, also inside a helper of this file; the
        # call that runs the helper there is evidence (a helper in another file: the call is reported)
        site = clear_chain[0] if clear_chain and ctx.in_another_file(clear_event.chunk) else clear_event
        clearing = written(clear_event)
        through = f" (through `{written(clear_chain[0])}`)" if clear_chain and site is not clear_event else ""
        called = [((link.chunk, link.node), f"`{written(link)}` runs it here") for link in clear_chain]
        ctx.report(
            site.node,
            f"`{clearing}`{through} clears the gradients after `{written(backward_event)}` computed them and before "
            f"`{written(step_event)}` uses them: every step applies zero gradients, so the model does not learn",
            evidence=[
                ((backward_event.chunk, backward_event.node), "gradients computed here"),
                ((clear_event.chunk, clear_event.node), "and cleared here"),
                *called,
                ((step_event.chunk, step_event.node), "before the step reads them"),
                ((scope.chunk, loop.node) if loop is not None else None, "in each iteration of this loop"),
            ],
            chunk=site.chunk,
            help=f"move `{clearing}` after `{written(step_event)}` (or before the backward)",
            fix=ctx.fix(f"move `{clearing}` after the step", _move_after(ctx, clear, step), safe=True),
        )


def _accumulation_undone(scope: ScopeAnalysis, loop: Loop) -> Undone | None:
    """(backward, clearing, step, what spreads the step over several backwards) when the loop accumulates
    gradients over several backward passes for one step and clears them before each pass: either a
    micro-batch loop inside ``loop`` that runs the clearing and the backward on every iteration and no
    step, with the step after it; or a step under an every-N test (``if (i + 1) % N == 0``, a name bound to
    one, or a ``continue`` under one that skips the step) with the clearing and the backward on every
    iteration; the last item says whether the step runs when the test holds. Quiet when anything in the loop reads or sets `.grad`
    itself (gradient surgery keeps each pass's gradient before clearing), or calls what it cannot follow
    with the model or the optimizer."""
    own = [event for event in scope.events if event.context.loop is loop]
    steps = [event for event in own if isinstance(event, CallEvent) and is_optimizer_step(event)]
    if not steps and not _handles_gradients_itself(scope, loop):
        helper = _stepped_by_helper_every_n(scope, loop)
        if helper is not None:
            return (*helper, None)
        run = _steps_run_from(scope, loop)  # `self.optim_step()` after the micro-batch loop
        return _micro_batches_undone(scope, loop, run[0]) if len(run) == 1 else None
    if len(steps) == 2 and not _handles_gradients_itself(scope, loop):
        # one step per side of a setting (`if fp16: scaler.step(opt)` / `else: opt.step()`): each side's run is read alone
        setting = _setting_sides(scope, loop, steps)
        if setting is None:
            return None
        for step, side in zip(steps, setting):
            found = _every_n_undone(scope, loop, step, side)
            if found is not None:
                return found
        for step, side in zip(steps, setting):  # the side's micro-batch loop clears on every pass, its step after it
            micro = _micro_batches_undone(scope, loop, (step, ()))
            if micro is not None and (micro[5] is None or _same_side(micro[5], side, scope)):
                return micro
        return None
    if len(steps) != 1 or _handles_gradients_itself(scope, loop):
        return None
    step = steps[0]
    counted = _counted_tests(scope, loop, step)
    every_n = [
        c for c in step.context.conditions_inside(loop)
        if c.test is not None and (_every_n(c.test, counted) or _counter_reset(c, loop))
    ]
    holds = bool(every_n) and every_n[0].branch == "if"
    every_iteration = step  # what runs on every iteration comes before this
    if not every_n:
        # `if (i + 1) % N != 0: continue` before the step: the step runs on the other iterations only
        skips = [
            (event, c) for event in own if isinstance(event, JumpEvent) and event.kind == "continue" and _before(scope, event, step)
            for c in event.context.conditions_inside(loop) if c.test is not None and _every_n(c.test, counted)
        ]
        if skips:
            every_iteration, condition = skips[0]
            every_n, holds = [condition], condition.branch != "if"
    if every_n:
        return _cleared_every_iteration(scope, loop, step, every_iteration, every_n[0], holds, None)
    return _micro_batches_undone(scope, loop, (step, ()))


def _cleared_under_the_steps_test(scope: ScopeAnalysis, loop: Loop | None, items: list[Item]) -> tuple[CallEvent, Item, CallEvent, Condition] | None:
    """(backward, clearing, step, test) when the one step runs under an every-N test (``if i % N == 0``, a name bound
    to one, a counter on the object) and the clearing of its gradients under the same test, before a backward that
    runs whatever the test says, with nothing the test reads changed between the clearing and the step: the
    iteration that steps clears first, so the passes since the last step are thrown away and each step applies
    its own pass alone. With the counter moved on in between (``self.micro += 1``), or the step testing the next
    iteration (``(i + 1) % N``), the clearing follows a step and nothing is lost."""
    steps = [(event, chain) for event, chain in items if isinstance(event, CallEvent) and is_optimizer_step(event)]
    if len(steps) != 1 or _handles_gradients_itself(scope, loop):
        return None
    step, step_chain = steps[0]
    counted = _counted_tests(scope, loop, step_chain[0] if step_chain else step)
    tests = [c for c in path_conditions(step, step_chain, loop)
             if c.test is not None and (_every_n(c.test, counted) or _counter_reset(c, loop, scope))]
    position = items.index(steps[0])
    for index, (event, chain) in enumerate(items[:position]):
        if not clears_gradients(event) or _followed_helper(event) or not _same_gradients(event, step, items, chains=(chain, step_chain)):
            continue
        shared = [test for test in tests for c in path_conditions(event, chain, loop) if _same_side(c, test, scope)]
        if not shared:
            continue
        backward = next((candidate for candidate, candidate_chain in items[index + 1:position] if _adds_to_grad(candidate)
                         and not any(_same_test(c, shared[0], scope) for c in path_conditions(candidate, candidate_chain, loop))),
                        None)
        if backward is None or _test_moves(scope, shared[0], chain[0] if chain else event, step_chain[0] if step_chain else step):
            continue
        return backward, (event, chain), step, shared[0]
    return None


def _test_moves(scope: ScopeAnalysis, test: Condition, start: Event, end: Event) -> bool:
    """Something between ``start`` and ``end`` assigns a name the test reads (the counter moved on)."""
    assert test.test is not None
    read = {dotted(node) for node in walk(test.test) if isinstance(node, (cst.Name, cst.Attribute))} - {None}
    between = False
    for event in scope.events:
        if event is start:
            between = True
        elif event is end:
            return False
        elif between and isinstance(event, AssignEvent) and any(target in read for target in event.targets):
            return True
        elif between and isinstance(event, StoreEvent) and event.kind == "augassign" and event.container in read:
            return True  # `self.micro += 1`
    return True  # the order is not the one expected: say nothing


def _cleared_every_iteration(scope: ScopeAnalysis, loop: Loop, step: CallEvent, every_iteration: Event, every_n: Condition,
                             holds: bool, side: Condition | None) -> Undone | None:
    """The backward and the clearing that run on every iteration before ``every_iteration`` (the step, or the
    ``continue`` that skips it), also inside a helper the loop calls (`self.train_step(batch)`); with ``side``,
    those that run on that side of a setting's test as well."""
    candidates = [
        (event, chain) for event, chain in ordered_events(scope, loop)
        if _runs_in_iteration((event, chain), loop) and _on_side(path_conditions(event, chain, loop), side, scope)
        and (every_iteration is step or _before(scope, chain[0] if chain else event, every_iteration))
    ]
    backward = next((event for event, _ in candidates if _adds_to_grad(event)), None)
    if backward is None and side is None:
        backward = _backward_of_inner_loop(scope, loop, None if every_iteration is step else every_iteration)
    clear = next(((event, chain) for event, chain in candidates if clears_gradients(event) and not _followed_helper(event)), None)
    if backward is None or clear is None or not _same_gradients(clear[0], step, [(step, ())]):
        return None
    if side is not None and not any(_same_side(condition, side, scope) for condition in path_conditions(*clear, loop)):
        return None  # a clearing on both sides is the single-step reading's; this one is about one side's
    return backward, clear, step, every_n, holds, side


def _every_n_undone(scope: ScopeAnalysis, loop: Loop, step: CallEvent, side: Condition) -> Undone | None:
    counted = _counted_tests(scope, loop, step)
    every_n = [c for c in step.context.conditions_inside(loop)
               if c.test is not None and (_every_n(c.test, counted) or _counter_reset(c, loop))]
    if not every_n:
        return None
    return _cleared_every_iteration(scope, loop, step, step, every_n[0], every_n[0].branch == "if", side)


def _setting_sides(scope: ScopeAnalysis, loop: Loop, steps: list[CallEvent]) -> tuple[Condition, Condition] | None:
    """The two steps' own sides of one setting's test (`if fp16:` ... `else:`, or two `if`s testing it): a test
    with no call of names no iteration assigns."""
    assigned = {key.split(".", 1)[0] for event in scope.events if loop in event.context.loops and isinstance(event, AssignEvent)
                for key in event.targets}
    for one in steps[0].context.conditions_inside(loop):
        if one.branch not in {"if", "else"} or one.test is None or any(isinstance(node, cst.Call) for node in walk(one.test)):
            continue
        if any(isinstance(node, cst.Name) and node.value in assigned for node in walk(one.test)):
            continue
        for other in steps[1].context.conditions_inside(loop):
            if other.branch in {"if", "else"} and other.branch != one.branch and _same_test(one, other, scope):
                return one, other
    return None


def _on_side(conditions, side: Condition | None, scope: ScopeAnalysis) -> bool:
    return all(side is not None and _same_side(condition, side, scope) for condition in conditions)


def _same_side(condition: Condition, side: Condition, scope: ScopeAnalysis) -> bool:
    return condition.branch == side.branch and _same_test(condition, side, scope)


def _same_test(one: Condition, other: Condition, scope: ScopeAnalysis) -> bool:
    if one.node is other.node:
        return True
    return one.test is not None and other.test is not None and scope.chunk.code_for(one.test) == scope.chunk.code_for(other.test)


def _backward_of_inner_loop(scope: ScopeAnalysis, loop: Loop, until: Event | None) -> CallEvent | None:
    """A backward in a loop that each iteration of ``loop`` runs whole, under no test (truncated backpropagation over a
    sequence's slices, `for i in range(slices): ... loss.backward()`): the gradient it adds, pass by pass, is that
    iteration's, and a clearing on every iteration throws the earlier iterations' away as it would a plain backward's."""
    for event in scope.events:
        loops = event.context.loops
        if (
            _adds_to_grad(event) and len(loops) >= 2 and loops[-2] is loop and not event.context.conditions_inside(loop)
            and (until is None or _before(scope, event, until))
        ):
            return event
    return None


def _cleared_past_accumulate(ctx: RuleContext, scope: ScopeAnalysis, loop: Loop,
                             items: list[Item]) -> tuple[CallEvent, Item, CallEvent, CallEvent, str] | None:
    """(backward, clearing, step, the `accumulate` call, the count) when the iteration runs an Accelerator's
    `accumulate` (the Accelerator built in sight with a `gradient_accumulation_steps` other than 1), the backward and the
    step of an optimizer that accelerator prepared inside it, and on every pass a clearing of the model's own
    (`model.zero_grad()`, `p.grad = None` over every parameter): accelerate runs the prepared optimizer's step and its
    `zero_grad` only when the gradients sync (libraries: PREPARED_CLEARS_WITH_STEP), the model's clearing always."""
    accumulate = next((event for event, chain in items if not chain and isinstance(event, CallEvent)
                       and event.method == "accumulate" and event.receiver is not None
                       and Tag.ACCELERATOR in event.receiver.tags), None)
    count = _accumulation_count(ctx, accumulate) if accumulate is not None else None
    steps = [event for event, _ in items if isinstance(event, CallEvent) and is_optimizer_step(event)]
    if accumulate is None or count is None or len(steps) != 1 or not steps[0].context.accumulating:
        return None
    step = steps[0]
    backward = next((event for event, _ in items if _adds_to_grad(event) and event.context.accumulating), None)
    # module-level code binds the optimizer in an earlier statement, whose own scope holds that binding
    binders = [scope] if scope.function is not None else [other for other in ctx.module.all_scopes if other.function is None]
    if backward is None or not any(_prepared_by_accelerator(binder, _optimizer_key(step)) for binder in binders):
        return None
    clear = next((
        item for item in items
        if clears_gradients(item[0]) and not _followed_helper(item[0]) and not path_conditions(*item, loop)
        and (_clears_a_model(item[0]) or _zeroes_every_parameter(item, loop))
    ), None)
    if clear is None or _reads_gradients(scope, loop.node):
        return None
    return backward, clear, step, accumulate, count


def _accumulation_count(ctx: RuleContext, accumulate: CallEvent) -> str | None:
    """The `gradient_accumulation_steps` the accelerator of `accelerator.accumulate(...)` was built with, as written,
    when the flow saw it built and it is not a literal 1 or less."""
    site = accumulate.receiver.site if accumulate.receiver is not None else None
    call = site[1] if site is not None else None
    if site is None or not isinstance(call, cst.Call):
        return None
    chunk = site[0]
    fact = call_fact(ctx.summary.canonical(dotted(call.func) or ""), PREPARED_CLEARS_WITH_STEP)
    if fact is None or any(arg.star for arg in call.args):
        return None
    given = next((arg.value for arg in call.args if arg.keyword is not None and arg.keyword.value in fact.arguments), None)
    if given is None or (isinstance(given, cst.Integer) and int(given.value) <= 1):
        return None
    return " ".join(chunk.code_for(given).split())


def _prepared_by_accelerator(scope: ScopeAnalysis, name: str | None) -> bool:
    """`name` is bound in the scope, among others or alone, to what an accelerator's `prepare(...)` (or
    `prepare_optimizer(...)`) returns."""
    for event in scope.events:
        if not isinstance(event, AssignEvent) or name not in event.targets:
            continue
        call = event.value_node  # (a tuple unpacked binds each name alone, with the statement as the node)
        if call is None and isinstance(event.node, (cst.Assign, cst.AnnAssign)):
            call = event.node.value
        if not isinstance(call, cst.Call) or not isinstance(call.func, cst.Attribute):
            continue
        if call.func.attr.value in {"prepare", "prepare_optimizer"}:
            owner = scope.value_at(call.func.value)
            if owner is not None and Tag.ACCELERATOR in owner.tags:
                return True
    return False


def _micro_batches_undone(
    scope: ScopeAnalysis, outer: Loop | None, step: StepItem,
) -> tuple[CallEvent, Item, CallEvent, Loop, bool, Condition | None] | None:
    """A micro-batch loop directly inside ``outer`` (or at the scope's top, ``None``) that runs the clearing
    and the backward on every iteration and no step, with ``step`` after it (the scope's own, or run by a
    helper it calls there: `self.optim_step()`). Both may run in a helper the loop calls
    (`forward_backward(model, micro, optimizer, scaler)`), and the clearing may be a loop over the parameters
    (`for p in model.parameters(): p.grad = None`). Both may also run on one side of a setting that no pass
    changes (`if use_amp:` around the clearing and the scaled backward): whenever that side runs, it runs on
    every pass; the last item is that side."""
    site = step[1][0] if step[1] else step[0]
    for inner in scope.loops:
        if inner.parent is not outer or not _runs_after(scope, site, inner):
            continue
        items = list(ordered_events(scope, inner))
        if any(isinstance(event, CallEvent) and is_optimizer_step(event) for event, _ in items):
            continue
        rebound = _bound_in(inner.node)
        every_pass = [item for item in items if _runs_every_pass(item, inner, rebound)]
        clear = next((item for item in every_pass if clears_gradients(item[0])), None)
        if clear is None:
            continue
        sides = _sides(clear, inner)
        backward = next((
            event for event, chain in every_pass
            if _adds_to_grad(event) and _sides((event, chain), inner) <= sides
        ), None)
        if backward is not None and _clears_what_steps(clear, step):
            side = next(iter(_site(clear).context.conditions_inside(inner)), None)
            return backward, clear, step[0], inner, True, side
    return None


def _site(item: Item) -> Event:
    """Where an event runs in the scope: the call of the helper that runs it, or itself."""
    return item[1][0] if item[1] else item[0]


def _sides(item: Item, inner: Loop) -> set[tuple[int, str]]:
    """The sides of the tests in ``inner`` that the event runs on."""
    return {(id(condition.node), condition.branch) for condition in _site(item).context.conditions_inside(inner)}


def _runs_every_pass(item: Item, inner: Loop, rebound: frozenset[str] | None = None) -> bool:
    """An event that runs on every iteration of ``inner``: in its body or in a helper called there, under
    no test (or, given the names the loop binds, ``rebound``, only under settings no pass changes); a clearing of
    `.grad` may also sit in a loop over the parameters in that body."""
    event, chain = item
    site = chain[0] if chain else event
    links = (*chain[1:], event) if chain else ()
    if any(not _a_setting(condition, rebound) for condition in site.context.conditions_inside(inner)) or any(
        link.context.loops or not all(branch_as_called(test, caller) is True for test in link.context.conditions)
        for link, caller in zip(links, chain)
    ):
        return False
    if site.context.loop is inner:
        return True
    loops = site.context.loops
    return (
        not chain and len(loops) >= 2 and loops[-2] is inner and not site.context.conditions_inside(loops[-1])
        and _iterates_parameters(site.scope, loops[-1]) and clears_gradients(event)
    )


def _a_setting(condition: Condition, rebound: frozenset[str] | None) -> bool:
    """A test that holds the same on every pass of a loop: it calls nothing, counts nothing, and reads no name
    the loop binds (``rebound``), as `if use_amp:` or `if args.fp16:` (none: a loop's tests are not settings)."""
    test = condition.test
    if test is None or rebound is None or _every_n(test):
        return False
    read = {node.value for node in walk(test) if isinstance(node, cst.Name)}
    return not read & rebound and not any(isinstance(node, cst.Call) for node in walk(test))


def _bound_in(loop: cst.CSTNode) -> frozenset[str]:
    """The names a loop binds: its targets and what its body assigns (the first name of an attribute set there)."""
    bound: set[str] = set()
    for node in walk(loop):
        targets: list[cst.CSTNode] = []
        if isinstance(node, (cst.For, cst.CompFor)):
            targets.append(node.target)
        elif isinstance(node, cst.Assign):
            targets.extend(target.target for target in node.targets)
        elif isinstance(node, (cst.AugAssign, cst.AnnAssign)):
            targets.append(node.target)
        elif isinstance(node, cst.NamedExpr):
            targets.append(node.target)
        elif isinstance(node, cst.AsName):
            targets.append(node.name)
        for target in targets:
            bound.update(inner.value for inner in walk(target) if isinstance(inner, cst.Name))
    return frozenset(bound)


def _iterates_parameters(scope: ScopeAnalysis, loop: Loop) -> bool:
    """A `for` over a module's parameters (`model.parameters()`, `named_parameters()`): its body runs for each."""
    return isinstance(loop.node, cst.For) and any(
        isinstance(node, cst.Call) and (dotted(node.func) or "").rpartition(".")[2] in _PARAMETER_LISTS
        for node in walk(loop.node.iter)
    )


# torch.nn.Module's methods that yield every parameter ("Returns an iterator over module parameters").
_PARAMETER_LISTS = frozenset({"parameters", "named_parameters"})


def _clears_what_steps(cleared: Item, step: StepItem) -> bool:
    """The clearing empties the gradients ``step`` reads, each named as the loop names it (a helper's
    `optimizer.zero_grad()` whose `optimizer` is its parameter is compared as the call hands it,
    `forward_backward(model, micro, opt)`; a method's `self.optimizer` as the receiver's)."""
    return _same_gradients(cleared[0], step[0], [cleared, step], chains=(cleared[1], step[1]))


def _argument_for(call: CallEvent, name: str) -> str | None:
    """What ``call`` hands the parameter ``name`` of the function it runs, as the caller writes it."""
    function = call.function
    if function is None:
        return None
    handed = call.keyword(name)
    if handed is None and name in function.positional_parameters:
        index = function.positional_parameters.index(name)
        plain = [arg for arg in call.arg_nodes if arg.keyword is None]
        if index < len(plain) and not any(arg.star for arg in call.arg_nodes):
            handed = plain[index]
    return dotted(handed.value) if handed is not None else None


def _key_in_caller(item: Item) -> str | None:
    """The optimizer a clearing or a step works on, named as the outermost scope of its chain of calls names it:
    through each call, a method's `self.optimizer` is the receiver's (`worker.forward_backward()` runs on
    `worker.optimizer`) and a helper's parameter is the argument the call hands it. Two methods of one object
    then name one optimizer, and the same method run on two objects two; a name the helper binds itself stays
    its own."""
    event, chain = item
    key = _optimizer_key(event)
    scope = event.scope
    for link in reversed(chain):
        if key is None:
            return None
        head, dot, rest = key.partition(".")
        function = link.function
        if head == "self" and function is not None and function.owner is not None and link.receiver_key not in (None, "self"):
            key = f"{link.receiver_key}{dot}{rest}"
        elif head in scope.params and head != "self" and scope.last_binding(head) is None:
            handed = _argument_for(link, head)
            if handed is None:  # handed by a star or not at all: compared as the helper writes it
                return _optimizer_key(event)
            key = f"{handed}{dot}{rest}"
        scope = link.scope
    return key


def _every_n_calls_undone(scope: ScopeAnalysis) -> tuple[CallEvent, Item, CallEvent, Condition, bool] | None:
    """A step function with no loop (`training_step(self, batch)`) that steps only on every N-th call
    (`if self.calls % self.accumulation == 0:`, or an early `return` under such a test), while it clears
    and runs the backward on every call: each clearing throws the earlier calls' gradients away."""
    own = [event for event in scope.events if not event.context.loops]
    steps = [event for event in own if isinstance(event, CallEvent) and is_optimizer_step(event)]
    if len(steps) != 1:
        return None
    step = steps[0]
    gated = [(step, c) for c in step.context.conditions if c.test is not None and (_every_n(c.test) or _counter_reset(c, None, scope))]
    if not gated:
        gated = [
            (event, c) for event in own if isinstance(event, JumpEvent) and event.kind == "return" and _before(scope, event, step)
            for c in event.context.conditions if c.test is not None and _every_n(c.test, _counted_tests(scope, None, event))
        ]
    if len(gated) != 1 or _handles_gradients_itself(scope, None):
        return None
    until, condition = gated[0]
    holds = condition.branch == "if" if until is step else condition.branch != "if"
    unconditional = [
        (event, chain) for event, chain in ordered_events(scope, None)
        if _runs_outside_loops((event, chain)) and not path_conditions(event, chain, None)
        and (until is step or _before(scope, chain[0] if chain else event, until))  # after an early return: not every call
    ]
    backward = next((event for event, _ in unconditional if _adds_to_grad(event)), None)
    clear = next(((event, chain) for event, chain in unconditional if clears_gradients(event) and not _followed_helper(event)), None)
    if backward is None or clear is None or not _same_gradients(clear[0], step, [(step, ())]):
        return None
    return backward, clear, step, condition, holds


def _micro_batches_of_step_function(scope: ScopeAnalysis) -> tuple[CallEvent, Item, CallEvent, Loop, bool, Condition | None] | None:
    """A step function with no outer loop (`train_step(self, micro_batches)`): its micro-batch loop clears
    before each backward and its one step after the loop applies the last pass alone. Quiet when the
    micro-batch loop reads or sets `.grad` itself, or hands the model or the optimizer to what it cannot follow."""
    steps = _steps_run_from(scope, None)
    if len(steps) != 1:
        return None
    undone = _micro_batches_undone(scope, None, steps[0])
    if undone is None or _handles_gradients_itself(scope, undone[3]):
        return None
    return undone


def _steps_run_from(scope: ScopeAnalysis, loop: Loop | None) -> list[StepItem]:
    """The optimizer steps a statement directly in ``loop`` (or at the scope's top, ``None``) runs: its own, or one a
    helper called there runs outside any loop of its own (`self.optim_step()` stepping `self.optimizer`); a
    project's own `.step()` that wraps a step counts as the step inside it."""
    return [
        (event, chain) for event, chain in ordered_events(scope, loop)
        if isinstance(event, CallEvent) and is_optimizer_step(event) and not _wraps_a_step(event)
        and (chain[0] if chain else event).context.loop is loop
        and not any(link.context.loops for link in (*chain[1:], event) if chain)
    ]


def _stepped_by_helper_every_n(scope: ScopeAnalysis, loop: Loop) -> tuple[CallEvent, Item, CallEvent, Condition, bool] | None:
    """The loop steps only through a helper, which steps under an every-N test of its own
    (`self.optimizer_step()`, counting micro-steps on the object) or which the loop calls under one, while
    the clearing and the backward run on every iteration."""
    items = [item for item in ordered_events(scope, loop) if _runs_in_iteration(item, loop)]
    steps = [(event, chain) for event, chain in items if chain and isinstance(event, CallEvent) and is_optimizer_step(event)]
    if len(steps) != 1:
        return None
    step, chain = steps[0]
    # the helper runs under the loop's every-N test (`if (i + 1) % accum == 0: self.optimizer_step()`),
    # or steps under one of its own
    counted = _counted_tests(scope, loop, chain[0])
    inside = [
        *chain[0].context.conditions_inside(loop),
        *(condition for link in (*chain[1:], step) for condition in link.context.conditions),
    ]
    every_n = [condition for condition in inside if condition.test is not None and _every_n(condition.test, counted)]
    if len(every_n) != 1 or len(inside) != 1:
        return None
    unconditional = [
        (event, event_chain) for event, event_chain in items
        if not path_conditions(event, event_chain, loop) and _before(scope, event_chain[0] if event_chain else event, chain[0])
    ]
    backward = next((event for event, _ in unconditional if _adds_to_grad(event)), None)
    clear = next(((event, event_chain) for event, event_chain in unconditional
                  if clears_gradients(event) and not _followed_helper(event)), None)
    if backward is None or clear is None or not _same_gradients(clear[0], step, [(step, ())]):
        return None
    return backward, clear, step, every_n[0], every_n[0].branch == "if"


def _runs_after(scope: ScopeAnalysis, step: CallEvent, inner: Loop) -> bool:
    """The step comes after the inner loop in the iteration: the loop's backward passes feed it."""
    for event in scope.events:
        if event is step:
            return False
        if inner in event.context.loops:
            return True
    return False


def _every_n(test, counted: frozenset[str] = frozenset()) -> bool:
    """A test that holds on some iterations only, by counting: it computes a remainder (``(i + 1) % N == 0``),
    or reads a name the iteration binds to one (``is_accumulating = (step + 1) % N != 0``)."""
    return any(
        (isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Modulo))
        or (isinstance(node, (cst.Name, cst.Attribute)) and dotted(node) in counted)
        for node in walk(test)
    )


def _counter_reset(condition: Condition, loop: Loop | None, scope: ScopeAnalysis | None = None) -> bool:
    """A branch taken once a counter reaches a bound: its test reads a name the loop adds to (``count += 1``)
    and the branch sets back to a number (``if count == accum: ...; count = 0``), so it holds every N
    iterations. In a step function with no loop (``loop`` None, ``scope`` the function), the count is one the
    object keeps between calls (``self.micro_step += 1``; a local name starts again on every call)."""
    if condition.branch != "if" or not isinstance(condition.node, cst.If):
        return False
    body = loop.node.body if loop is not None else scope.function.node.body if scope is not None and scope.function else None
    if body is None:
        return False
    named = (cst.Name, cst.Attribute)
    tested = {dotted(node) for node in walk(condition.test) if isinstance(node, named)} if condition.test is not None else set()
    reset = {
        dotted(target.target) for node in walk(condition.node.body) if isinstance(node, cst.Assign)
        and isinstance(node.value, cst.Integer) for target in node.targets if isinstance(target.target, named)
    }
    counted = {
        dotted(node.target) for node in walk(body) if isinstance(node, cst.AugAssign)
        and isinstance(node.operator, cst.AddAssign) and isinstance(node.target, named)
    }
    kept = {name for name in tested & reset & counted if name is not None and (loop is not None or "." in name)}
    return bool(kept)


def _counted_tests(scope: ScopeAnalysis, loop: Loop | None, step: Event) -> frozenset[str]:
    """Names (and `self.` attributes) the loop's body (the function's, ``None``) binds to a remainder test before
    the step, wherever the step runs (`self.micro = (self.micro + 1) % n`)."""
    counted: set[str] = set()
    around_step = set(map(id, step.context.conditions_inside(loop)))
    for event in scope.events:
        if event is step:
            break
        if isinstance(event, CallEvent) and event.function is not None and _returns_every_n(event.function.node):
            counted.add(dotted(event.node.func) or "")  # `if self.should_step():`, a method returning `self.micro % n == 0`
        if not isinstance(event, AssignEvent) or event.context.loop is not loop:
            continue
        if not set(map(id, event.context.conditions_inside(loop))) <= around_step:
            continue
        if len(event.targets) == 1 and event.value_node is not None:
            if _every_n(event.value_node):
                counted.add(event.targets[0])
            else:
                counted.discard(event.targets[0])
    return frozenset(counted)


def _returns_every_n(function: cst.FunctionDef) -> bool:
    """Every value the function returns is a remainder test (``return self.micro_steps % self.accum == 0``)."""
    returned = [node.value for node in walk(function.body) if isinstance(node, cst.Return)]
    return bool(returned) and all(value is not None and _every_n(value) for value in returned)


def _before(scope: ScopeAnalysis, event: Event, later: Event) -> bool:
    """The event comes before ``later`` in the loop's body."""
    for other in scope.events:
        if other is later:
            return False
        if other is event:
            return True
    return False


def _handles_gradients_itself(scope: ScopeAnalysis, loop: Loop | None) -> bool:
    """Whether the loop (the whole function, ``None``) reads or sets `.grad`, or hands the model or the
    optimizer to a call it cannot follow."""
    node = loop.node if loop is not None else (scope.function.node if scope.function is not None else None)
    if node is None or _reads_gradients(scope, node):
        return True
    for event in scope.events:
        if (loop is not None and loop not in event.context.loops) or not isinstance(event, CallEvent) or event.function is not None:
            continue
        if event.callee is not None and (is_torch_name(event.callee) or hasattr(builtins, event.callee)):
            continue
        if event.receiver is not None and event.receiver.tags & {Tag.OPTIMIZER, Tag.SCALER, Tag.MODEL, Tag.CRITERION}:
            continue
        if any(value.tags & {Tag.OPTIMIZER, Tag.MODEL} for value in (*event.args, *event.kwargs.values())):
            return True
    return False


def _reads_gradients(scope: ScopeAnalysis, loop: cst.CSTNode) -> bool:
    """Whether a loop reads or sets `p.grad`, or calls `autograd.grad`: it works on each pass's
    gradients itself. Clearing them (`p.grad = None`, `p.grad.zero_()`), rescaling them where they are (`p.grad /= n`,
    `p.grad.div_(n)`) or asking whether there is one (`p.grad is not None`) keeps nothing of a pass aside.
    Kept per node, read statement by statement: a key reads again only the statements it reached."""
    kept = scope.chunk.node_memo("TL206 reads gradients")
    found = kept.get(loop)
    if found is None:
        marks = scope.chunk.facts_under("TL206 gradient marks", loop, _gradient_marks)
        cleared = {id(node) for kind, node in marks if kind in {"clears", "scales"}}
        found = kept[loop] = any(kind == "autograd" or (kind == "grad" and id(node) not in cleared) for kind, node in marks)
    return found


def _gradient_marks(node: cst.CSTNode) -> list[tuple[str, cst.CSTNode]]:
    """What one node says about gradients: a `x.grad` (``grad``), a call of `autograd.grad` (``autograd``),
    and the `x.grad` that a `p.grad = None`, `p.grad.zero_()` or `p.grad.data.zero_()` only clears
    (``clears``: the same statements `clears_gradients` reads as clearing)."""
    if isinstance(node, cst.Attribute):
        return [("grad", node)] if node.attr.value == "grad" else []
    if isinstance(node, cst.Assign) and isinstance(node.value, cst.Name) and node.value.value == "None":
        return [("clears", target.target) for target in node.targets if _names_grad(target.target)]
    if isinstance(node, cst.AugAssign) and isinstance(node.operator, (cst.DivideAssign, cst.MultiplyAssign)) and _names_grad(node.target):
        return [("scales", node.target)]  # `p.grad /= n`: rescaled where it is, nothing kept aside
    if isinstance(node, cst.Comparison) and _names_grad(node.left) and all(
        isinstance(target.operator, (cst.Is, cst.IsNot)) and isinstance(target.comparator, cst.Name) and target.comparator.value == "None"
        for target in node.comparisons
    ):
        return [("scales", node.left)]  # `if p.grad is not None:` only asks whether there is one
    if not isinstance(node, cst.Call):
        return []
    marks: list[tuple[str, cst.CSTNode]] = [("autograd", node)] if (dotted(node.func) or "").endswith("autograd.grad") else []
    if isinstance(node.func, cst.Attribute) and node.func.attr.value in _IN_PLACE_SCALINGS and _names_grad(node.func.value):
        marks.append(("scales", node.func.value))
    if isinstance(node.func, cst.Attribute) and node.func.attr.value == "zero_":
        receiver = node.func.value
        if isinstance(receiver, cst.Attribute) and receiver.attr.value == "data":
            receiver = receiver.value
        if _names_grad(receiver):
            marks.append(("clears", receiver))
    return marks


# torch.Tensor's in-place rescalings (`p.grad.div_(n)`, `p.grad.mul_(c)`): the gradient stays where it is.
_IN_PLACE_SCALINGS = frozenset({"div_", "mul_"})


def _names_grad(node: cst.CSTNode) -> bool:
    return isinstance(node, cst.Attribute) and node.attr.value == "grad"


def _inside_one_helper(ctx: RuleContext, backward: Item, clear: Item, step: Item) -> bool:
    """The backward, the clearing and the step all run inside one helper of this file that the loop calls,
    outside its loops: the helper's own scope reports them once, whoever calls it."""
    chains = [chain for _, chain in (backward, clear, step)]
    if not all(chains) or len({id(chain[0].node) for chain in chains}) != 1:
        return False
    return not ctx.in_another_file(clear[0].chunk)


def _closures_cleared_last(scope: ScopeAnalysis):
    """(step, backward, clearing) for each `optimizer.step(closure)` of the scope whose closure, a function of
    defined in the scope, clears the gradients after its last backward on the way out (outside loops and branches)."""
    for step in scope.events:
        if not isinstance(step, CallEvent) or not is_optimizer_step(step) or not step.arg_nodes:
            continue
        given = step.keyword("closure") or step.arg_nodes[0]
        if not isinstance(given.value, cst.Name) or (given.keyword is not None and given.keyword.value != "closure"):
            continue
        function = scope.local_functions.get(given.value.value)
        closure = function.analysis(scope.summary) if function is not None else None
        if closure is None:
            continue
        last_backward = None
        for event in closure.events:
            if event.context.loop is not None or event.context.conditions:
                continue
            if _adds_to_grad(event):
                last_backward = event
            elif last_backward is not None and clears_gradients(event) and _same_gradients(event, step, [(step, ())]):
                yield step, last_backward, event
                break


def _adds_to_grad(event: Event) -> TypeGuard[CallEvent]:
    """A backward that adds into `.grad`, also Lightning's `self.manual_backward(loss)` under manual
    optimisation ("Call this directly from your training_step() when doing optimizations manually":
    it runs the loss's backward, through the precision plugin's scaling)."""
    return accumulates_into_grad(event) or (
        isinstance(event, CallEvent) and event.method == "manual_backward" and event.receiver_key == "self"
    )


def _accumulated_by_inner_loop(scope: ScopeAnalysis, item: Item, loop: Loop | None) -> bool:
    """A backward in a loop nested in ``loop`` (in a loop at the scope's top, ``None``) that steps nothing and
    leaves `.grad` alone: a micro-batch loop adding its passes' gradients up for the step after it, so its
    backward is one of the iteration's (`for micro in chunks: loss.backward()`, then `optimizer.step()`)."""
    event, chain = item
    if not _adds_to_grad(event) or (chain and any(link.context.loops for link in (*chain[1:], event))):
        return False
    loops = (chain[0] if chain else event).context.loops
    if loop is not None and loop not in loops:
        return False
    depth = loops.index(loop) + 1 if loop is not None else 0
    if len(loops) <= depth:
        return False
    inner = loops[depth]
    return not _handles_gradients_itself(scope, inner) and not any(_steps(other) for other, _ in ordered_events(scope, inner))


def _runs_outside_loops(item: Item) -> bool:
    """Events the scope runs once per call: outside its loops and the loops of the helpers it calls (but for a
    clearing that zeroes every parameter's gradient one by one)."""
    event, chain = item
    return (not event.context.loops and not any(link.context.loops for link in chain)) or _zeroes_every_parameter(item, None)


def _zeroes_every_parameter(item: Item, loop: Loop | None) -> bool:
    """A gradient zeroed in loops over the parameters, here or in a helper the iteration calls (`for p in
    model.parameters(): p.grad = None`, `for group in optimizer.param_groups: for p in group["params"]:
    p.grad.data.zero_()`): the loops run for every parameter, so the clearing is one `zero_grad()`. Only
    zeroing counts (`None`, `zero_()`, `fill_(0)`): writing other gradients in (`p.grad = synced`) is how
    gradients are set by hand, not cleared."""
    event, chain = item
    if not _zeroes_a_gradient(event):
        return False
    site = chain[0] if chain else event
    outer = site.context.loops
    if loop is not None:
        outer = outer[outer.index(loop) + 1:] if loop in outer else ()
    links = (*chain[1:], event) if chain else ()
    inner = (*outer, *(nested for link in links for nested in link.context.loops))
    scopes = (*(site.scope for _ in outer), *(link.scope for link in links for _ in link.context.loops))
    if not inner or not all(_over_parameters(nested, scope) for nested, scope in zip(inner, scopes)):
        return False
    tests = [*site.context.conditions, *(condition for link in links for condition in link.context.conditions)]
    return all(_guards_the_gradient(condition) for condition in tests if condition.loop in inner)


def _zeroes_a_gradient(event: Event) -> bool:
    if isinstance(event, AssignEvent):
        return (any(key.endswith(".grad") for key in event.targets) and isinstance(event.value_node, cst.Name)
                and event.value_node.value == "None")
    if not isinstance(event, CallEvent) or not is_gradient_key(event.receiver_key):
        return False
    if event.method == "zero_":
        return True
    zero = event.arg_nodes[0].value if event.method == "fill_" and len(event.arg_nodes) == 1 else None
    return isinstance(zero, (cst.Integer, cst.Float)) and float(zero.value) == 0


def _over_parameters(loop: Loop, scope: ScopeAnalysis | None = None) -> bool:
    """A `for` whose body runs for every parameter: over `parameters()`, `named_parameters()`, an optimizer's
    `param_groups` or a group's `["params"]` (torch.optim's layout: each group a dict holding its "params"), or a
    name of ``scope`` bound to every trainable one of them (``_trainable_parameters``)."""
    return _parameters_of(loop, scope) is not None


def _parameters_of(loop: Loop, scope: ScopeAnalysis | None = None) -> tuple[str, str] | None:
    """For a loop over every parameter, whose parameters and how: ("module", `model`) for `model.parameters()`,
    ("optimizer", `optimizer`) for `optimizer.param_groups`, ("group", `group`) for a group's `["params"]`."""
    if not isinstance(loop.node, cst.For):
        return None
    iterated = loop.iterable_text
    if scope is not None and isinstance(loop.node.iter, cst.Name):
        iterated = _trainable_parameters(scope, loop.node.iter.value) or iterated
    match = _PARAMETER_ITERABLE.search(iterated)
    if match is None:
        return None
    kind = "module" if match.group("module") else "optimizer" if match.group("optimizer") else "group"
    return kind, iterated[:match.start()]


def _trainable_parameters(scope: ScopeAnalysis, name: str) -> str | None:
    """`model.parameters()` when ``name`` is bound once in the scope, outside its loops, to every parameter of
    `model` that takes a gradient: `[p for p in model.parameters() if p.requires_grad]`, `list(model.parameters())`,
    `filter(lambda p: p.requires_grad, model.parameters())` (a parameter with `requires_grad=False` has no `.grad`
    to clear, so the list holds every gradient the model has). A list that picks parameters by name or by part is not."""
    bindings = [event for event in scope.events if type(event) is AssignEvent and name in event.targets]
    if len(bindings) != 1 or bindings[0].targets != (name,) or bindings[0].context.loops:
        return None
    bound = bindings[0].value_node
    source: cst.BaseExpression | None = None
    if isinstance(bound, (cst.ListComp, cst.GeneratorExp)):
        clause = bound.for_in
        if (clause.inner_for_in is None and isinstance(clause.target, cst.Name) and isinstance(bound.elt, cst.Name)
                and bound.elt.value == clause.target.value
                and all(_asks_requires_grad(test.test, clause.target.value) for test in clause.ifs)):
            source = clause.iter
    elif isinstance(bound, cst.Call) and isinstance(bound.func, cst.Name) and bound.func.value in {"list", "tuple"}:
        source = bound.args[0].value if len(bound.args) == 1 else None
    elif isinstance(bound, cst.Call) and isinstance(bound.func, cst.Name) and bound.func.value == "filter" and len(bound.args) == 2:
        test = bound.args[0].value
        if (isinstance(test, cst.Lambda) and len(test.params.params) == 1
                and _asks_requires_grad(test.body, test.params.params[0].name.value)):
            source = bound.args[1].value
    if source is None:
        return None
    text = scope.chunk.code_for(source)
    match = _PARAMETER_ITERABLE.search(text)
    return text if match is not None and match.group("module") and "named_" not in match.group("module") else None


def _asks_requires_grad(test: cst.BaseExpression, name: str) -> bool:
    """`p.requires_grad` of the parameter named ``name``."""
    return (isinstance(test, cst.Attribute) and test.attr.value == "requires_grad" and isinstance(test.value, cst.Name)
            and test.value.value == name)


def _parameters_around(event: Event) -> tuple[str, str] | None:
    """What the outermost loop over every parameter around ``event`` iterates (``_parameters_of``), if any."""
    return next((found for loop in event.context.loops if (found := _parameters_of(loop, event.scope)) is not None), None)


_PARAMETER_ITERABLE = re.compile(
    r"""((?P<module>\.(named_)?parameters\([^()]*\))|(?P<optimizer>\.param_groups)|\[\s*["']params["']\s*\])\s*$"""
)


def _iterates_what_steps(parameters: tuple[str, str], step: CallEvent, trained: str | None) -> bool:
    """The loop goes over all the parameters the step updates: the stepped optimizer's `param_groups`, or the
    parameters of the model it was built over (when the flow saw it built), of a whole model otherwise
    (`model.parameters()`, `self.net.module.parameters()`; not a part, `model.encoder.parameters()`, which a
    script may clear on purpose to hold that part still)."""
    kind, owner = parameters
    if kind == "optimizer":
        stepped = _optimizer_key(step)
        return stepped is None or owner == stepped
    if kind == "group":
        return True  # a group's `["params"]`, inside a loop over `param_groups` that was read above
    owner = owner.removesuffix(".module")
    return owner == trained if trained is not None else re.fullmatch(r"(self\.)?\w+", owner) is not None


def _clears_everything(scope: ScopeAnalysis, item: Item) -> bool:
    """A clearing of all the gradients a framework steps: the module's own (`self.zero_grad()`), the model or
    optimizer the method is handed or holds (`model.zero_grad()`, `self.optimizer.zero_grad()`,
    `self.optimizers().zero_grad()`), or every parameter of one of them one by one; not a part of the model."""
    event, _ = item
    function = scope.function
    handed = set(function.positional_parameters) if function is not None else set()
    whole = {"self", "self.model", "self.optimizer", "self.optimizers()", *handed}
    over = _parameters_around(event)
    if over is not None:
        kind, owner = over
        return _zeroes_a_gradient(event) and kind != "group" and owner in whole
    if not isinstance(event, CallEvent) or event.context.loops:
        return False
    func = event.node.func
    return isinstance(func, cst.Attribute) and event.scope.chunk.code_for(func.value) in whole


def _guards_the_gradient(condition: Condition) -> bool:
    """`if p.grad is not None:` inside a loop over the parameters: it skips parameters that have no gradient to
    clear, so the clearing still runs wherever there is one."""
    return (condition.loop is not None and _over_parameters(condition.loop) and condition.branch == "if"
            and condition.test is not None
            and any(isinstance(node, cst.Attribute) and node.attr.value == "grad" for node in walk(condition.test)))


def _runs_in_iteration(item: Item, loop: Loop) -> bool:
    """Events of this loop's own iterations, not of loops nested in it, but for the clearing or the step
    of a loop over several optimizers (`for opt in optimizers: opt.zero_grad()`), which runs once too, and
    a clearing that zeroes every parameter's gradient one by one."""
    event, chain = item
    site = chain[0] if chain else event
    if loop in site.context.loops and _zeroes_every_parameter(item, loop):
        return True
    loops = site.context.loops
    if loops and loops[-1] is not loop and len(loops) >= 2 and loops[-2] is loop and isinstance(site, CallEvent):
        return not chain and _over_optimizers(loops[-1], site)
    if not loops or loops[-1] is not loop:
        return False
    return not any(link.context.loops for link in (*chain[1:], event)) if chain else True


def _over_optimizers(loop: Loop, call: CallEvent) -> bool:
    """A `for` over several optimizers whose pass clears or steps the one it holds (`for opt in self.optimizers:
    opt.zero_grad()`, `for name, opt in optimizers.items()`, `for opt in (opt_g, opt_d)`, `for name in optimizers:
    optimizers[name].step()`): the iterable is named for optimizers, as `is_optimizer_step` reads a receiver's name,
    or what the pass holds is an optimizer to the flow."""
    if not isinstance(loop.node, cst.For) or not (call.method == "step" or clears_gradients(call)):
        return False
    if call.receiver_key in loop.targets:
        held = (call.receiver is not None and Tag.OPTIMIZER in call.receiver.tags) or optimizer_protocol(call)
        return held or "optim" in loop.iterable_text.lower()
    return _indexed_by_pass(loop, call) and ("optim" in loop.iterable_text.lower() or optimizer_protocol(call))


def _indexed_by_pass(loop: Loop, call: CallEvent) -> bool:
    """`optimizers[name].step()` in `for name in optimizers:`: the container iterated over, indexed by the pass's key."""
    func = call.node.func
    if type(func) is not cst.Attribute or type(func.value) is not cst.Subscript:
        return False
    indexed = func.value
    if len(indexed.slice) != 1 or type(indexed.slice[0].slice) is not cst.Index:
        return False
    key = indexed.slice[0].slice.value
    container = call.scope.chunk.code_for(indexed.value)
    iterated = loop.iterable_text.removesuffix(".keys()")
    return type(key) is cst.Name and key.value in loop.targets and container == iterated


def _cleared_before_step(items: list[Item], loop: Loop | None):
    """(backward, clearing, step) where the clearing runs after the backward and before the step reads its gradients.
    The body of a loop or of a step function runs again and again, so the order is read round it: a step at the top
    of the body after a clearing at its bottom (or a clearing at the top and the step before the backward) reads
    what the clearing left, nothing."""
    for index, (event, _chain) in enumerate(items):
        if not _adds_to_grad(event):
            continue
        around = items[index + 1:] + items[:index]  # the rest of this pass, then the next pass up to the backward
        for later, (candidate, _) in enumerate(around):
            if _adds_to_grad(candidate) or (_steps(candidate) and not _wraps_a_step(candidate)):
                break
            if not clears_gradients(candidate) or _followed_helper(candidate):
                continue
            step = _next_step(around, later)
            if step is not None and _clears_for(candidate, step[0], items, chains=(around[later][1], step[1])) and _runs_whenever(
                around[later], step, loop,
            ):
                yield items[index], around[later], step
            break


def _followed_helper(event: Event) -> bool:
    """A call of a local function named for clearing (`self.zero_grad()` of a trainer whose method clears its
    optimizer): what it clears is read from its body, whose events follow it."""
    return isinstance(event, CallEvent) and event.function is not None


def _cleared_between_backwards(scope: ScopeAnalysis, items: list[Item], loop: Loop | None) -> tuple[Item, Item, Item, Item] | None:
    """(first backward, clearing, second backward, step) when one iteration runs a backward, clears the gradients
    with nothing stepping in between, runs another backward and then steps; the loop steps one optimizer only
    (with two, a clearing between backward passes drops one network's share of the other's loss on purpose), and
    nothing in it reads or sets `.grad` or hands the model or the optimizer to a call it cannot follow."""
    steppers = {_key_in_caller(item) for item in items if isinstance(item[0], CallEvent) and is_optimizer_step(item[0])}
    if not steppers:
        return None
    first: Item | None = None
    clear: Item | None = None
    for item in items:
        event = item[0]
        if isinstance(event, CallEvent) and is_optimizer_step(event):
            return None
        if _adds_to_grad(event):
            if first is not None and clear is not None:
                step = _next_step(items, items.index(item))
                if step is None or not _clears_for(clear[0], step[0], items, chains=(clear[1], step[1])) or _handles_gradients_itself(scope, loop):
                    return None
                if not _runs_whenever(clear, step, loop):
                    return None
                if len(steppers) > 1 and not _lost_to_every_step(items, items.index(first)):
                    return None
                if _fill_other_networks(scope, first, item) or _optimizer_set_for_the_pass(first, clear):
                    return None
                return first, clear, item, step
            first, clear = item, None
        elif first is not None and clears_gradients(event):
            clear = item
    return None


def _fill_other_networks(scope: ScopeAnalysis, first: Item, second: Item) -> bool:
    """The two backward passes run through different networks, each stepped by an optimizer of its own in the scope:
    the first fills the backbone's gradients, the second a probe's or a discriminator's, whose optimizer clears and
    steps only its own (``probe_optimizer.zero_grad()`` between them empties nothing the first computed). Which
    parameters a backward fills is read from the forwards its loss's graph comes from; a backward in a helper, or a
    graph that leaves the scope, is not known, and neither is a scope that steps one optimizer for both."""
    first_networks, second_networks = _networks_reached(scope, first), _networks_reached(scope, second)
    if not first_networks or not second_networks or first_networks & second_networks:
        return False
    stepped = {optimizer_text(call) for call in scope.calls() if is_optimizer_step(call)}
    return len(stepped) > 1


def _optimizer_set_for_the_pass(first: Item, clear: Item) -> bool:
    """The code sets state on the optimizer it then clears around the first backward (``optimizer.acc_stats = True``
    before a Fisher backward, ``False`` after): the optimizer takes part in that pass itself (K-FAC's module hooks
    gather its statistics), so clearing `.grad` afterwards throws away nothing the code wanted from it."""
    backward, clearing = first[0], clear[0]
    if not isinstance(backward, CallEvent) or not isinstance(clearing, CallEvent) or not clearing.receiver_key:
        return False
    where = clearing.scope  # the method that runs both, when a helper does (`agent.update(rollouts)`)
    if backward.scope is not where:
        return False
    start, end = where.chunk.line_of(backward.node) - 1, where.chunk.line_of(clearing.node)
    prefix = clearing.receiver_key + "."
    return any(
        isinstance(event, AssignEvent) and start <= where.chunk.line_of(event.node) < end
        and any(target.startswith(prefix) and not target.startswith(prefix + "param_groups") for target in event.targets)
        for event in where.events
    )


def _networks_reached(scope: ScopeAnalysis, backward: Item) -> frozenset[str]:
    """The models whose forwards the backward's graph comes from, as receiver keys; empty when any of its seeds is not
    a call of this scope (a helper's backward, a graph handed in)."""
    event, chain = backward
    if chain or not isinstance(event, CallEvent):
        return frozenset()
    calls = {id(call.node): call for call in scope.calls()}
    networks: set[str] = set()
    for root in backward_target(event).roots:
        call = calls.get(id(root))
        if call is None:
            return frozenset()
        if call.receiver is not None and Tag.MODEL in call.receiver.tags and call.receiver_key:
            networks.add(call.receiver_key)
    return frozenset(networks)


def _clears_for(clear: Event, step: CallEvent, items: list[Item], chains: Chains = ((), ())) -> bool:
    """The clearing empties the gradients the step reads: the same optimizer, or with one optimizer stepped, any
    clearing of a model; or the model whose parameters the stepped optimizer was built over (`netD.zero_grad()` and
    `optimizerD = Adam(netD.parameters())`)."""
    trained = _model_stepped(step)
    over = _parameters_around(clear)
    if over is not None and _zeroes_a_gradient(clear):  # every parameter of what, the stepped model's or a part's?
        return _iterates_what_steps(over, step, trained) and _same_gradients(clear, step, items, chains)
    if _same_gradients(clear, step, items, chains):
        return True
    return trained is not None and _clears_a_model(clear) and isinstance(clear, CallEvent) and clear.receiver_key == trained


def _model_stepped(step: CallEvent) -> str | None:
    """`netD` for a step of `torch.optim.Adam(netD.parameters(), ...)` (also through `scaler.step(optimizerD)`),
    when the flow saw the optimizer built."""
    optimizer = step.args[0] if step.receiver is not None and Tag.SCALER in step.receiver.tags and step.args else step.receiver
    site = optimizer.site if optimizer is not None and Tag.OPTIMIZER in optimizer.tags else None
    built = site[1] if site is not None else None
    if not isinstance(built, cst.Call) or not built.args or built.args[0].keyword is not None:
        return None
    given = built.args[0].value
    if isinstance(given, cst.Call) and isinstance(given.func, cst.Attribute) and given.func.attr.value == "parameters":
        return dotted(given.func.value)
    return None


def _lost_to_every_step(items: list[Item], first: int) -> bool:
    """With several optimizers: no step comes before the backward at ``first`` in the iteration, and each step after
    it runs after a clearing of its own gradients that follows that backward, so none applies what it computed (not
    the generator's share of a loss whose discriminator share is cleared on purpose)."""
    if any(isinstance(event, CallEvent) and is_optimizer_step(event) for event, _ in items[:first]):
        return False
    clearings = [event for event, _ in items[first + 1:] if clears_gradients(event)]
    for position, (event, _) in enumerate(items[first + 1:], start=first + 1):
        if isinstance(event, CallEvent) and is_optimizer_step(event) and not any(
            _clears_for(clear, event, items) and _before_in(items, clear, position) for clear in clearings
        ):
            return False
    return True


def _before_in(items: list[Item], event: Event, position: int) -> bool:
    return any(other is event for other, _ in items[:position])


def _next_step(items: list[Item], start: int) -> tuple[CallEvent, tuple[CallEvent, ...]] | None:
    for event, chain in items[start + 1:]:
        if _adds_to_grad(event):
            return None
        if _steps(event) and not _wraps_a_step(event):  # (a wrapper's own step comes next, through it)
            return event, chain
    return None


def _steps(event: Event) -> TypeGuard[CallEvent]:
    return isinstance(event, CallEvent) and is_optimizer_step(event)


def _wraps_a_step(call: CallEvent, depth: int = 3, seen: frozenset = frozenset()) -> bool:
    """``call`` (a ``.step()``) runs a function of the workspace (a trainer's ``self.step()``, an optimizer wrapper's
    ``step``) whose own body steps an optimizer: that inner step, whose events follow the call's, is the one that reads
    the gradients, and what clears them in between (inside the wrapper too) runs before it."""
    function = call.function
    if function is None or depth == 0 or function in seen:
        return False
    inner = function.analysis(call.scope.summary)
    return inner is not None and any(
        type(event) is CallEvent and event.method == "step"
        and (_wraps_a_step(event, depth - 1, seen | {function}) if event.function is not None else is_optimizer_step(event))
        for event in inner.events
    )


def _same_gradients(clear: Event, step: CallEvent, items: list[Item], chains: Chains = ((), ())) -> bool:
    """The clearing call empties the gradients this step reads; ``chains``, the calls that run each (none: the
    scope's own), name their optimizers as the scope does."""
    if _engines_optimizer(clear, step, items):
        return True
    # `p.grad.zero_()` names no optimizer
    cleared = None if _zeroes_a_gradient(clear) else _key_in_caller((clear, chains[0]))
    stepped = _key_in_caller((step, chains[1]))
    if cleared is not None and stepped is not None:
        return cleared == stepped
    # `model.zero_grad()`, `p.grad = None`, `p.grad.zero_()`: the same gradients when the loop steps one optimizer only
    steppers = {_key_in_caller(item) for item in items if isinstance(item[0], CallEvent) and is_optimizer_step(item[0])}
    return len(steppers) == 1 and (isinstance(clear, AssignEvent) or _clears_a_model(clear) or _zeroes_a_gradient(clear))


def _engines_optimizer(clear: Event, step: CallEvent, items: list[Item]) -> bool:
    """The optimizer an engine was built with (`engine, optimizer, _, _ = deepspeed.initialize(...)`) cleared while
    the engine steps, and nothing else steps in the loop: `engine.step()` steps that optimizer."""
    if not isinstance(clear, CallEvent) or clear.receiver is None or step.receiver is None:
        return False
    if not {Tag.ENGINE, Tag.OPTIMIZER} <= clear.receiver.tags or Tag.ENGINE not in step.receiver.tags:
        return False
    steppers = {_key_in_caller(item) for item in items if isinstance(item[0], CallEvent) and is_optimizer_step(item[0])}
    return len(steppers) == 1


def _optimizer_key(event: Event) -> str | None:
    if not isinstance(event, CallEvent):
        return None
    key = optimizer_text(event)
    loops = event.context.loops
    if key and loops and _over_optimizers(loops[-1], event):
        return loops[-1].iterable_text  # `for opt in optimizers: opt.step()` steps the whole list
    scaler = (event.receiver is not None and Tag.SCALER in event.receiver.tags) or "scaler" in key.lower()
    if event.method == "step" and scaler and event.arg_nodes:
        return event.scope.chunk.code_for(event.arg_nodes[0].value)
    if event.receiver is not None and Tag.MODEL in event.receiver.tags or clears_a_module(event):
        return None
    return key or None


def _clears_a_model(event: Event) -> bool:
    return isinstance(event, CallEvent) and clears_a_module(event)


def _runs_whenever(clear: Item, step: Item, loop: Loop | None) -> bool:
    """The clearing runs on every iteration on which the step runs."""
    needed = {id(condition) for condition in path_conditions(*clear, loop) if not _guards_the_gradient(condition)}
    return needed <= set(map(id, path_conditions(*step, loop)))


def _move_after(ctx: RuleContext, clear: Item, step: Item) -> list[TextEdit | None]:
    """Delete the clearing statement's line and put it after the step's, when both are one-line
    statements of the same block."""
    (clear_event, clear_chain), (step_event, step_chain) = clear, step
    if clear_chain or step_chain or clear_event.chunk is not step_event.chunk:
        return [None]
    if clear_event.context.loop is not step_event.context.loop:
        return [None]  # each in a loop over the optimizers of its own: moving one line would empty a loop's body
    line, _, end_line, _ = clear_event.chunk.range_of(clear_event.node)
    step_line, _, step_end_line, _ = step_event.chunk.range_of(step_event.node)
    clear_text, step_text = ctx.module.line(line), ctx.module.line(step_end_line)
    clearing = clear_event.chunk.code_for(clear_event.node)
    if line != end_line or step_line != step_end_line or clear_text.strip() != clearing:
        return [None]
    indent = clear_text[: len(clear_text) - len(clear_text.lstrip())]
    if not step_text.startswith(indent) or step_text[len(indent):len(indent) + 1].isspace():
        return [None]
    return [
        TextEdit(line, 1, line + 1, 1, ""),
        TextEdit(step_line, len(step_text) + 1, step_line, len(step_text) + 1, f"\n{indent}{clearing}"),
    ]


# A recurrent language model trained by truncated backpropagation over each document's slices, stepping every
# `accumulation` documents; `{clear_every}` is where the per-document clearing goes.
_SLICED_TRAINER = """
        import torch
        from torch import nn

        from lm import RecurrentLM


        class SlicedTrainer:
            def __init__(self, vocab, accumulation=8, slice_len=128):
                self.model = RecurrentLM(vocab).cuda()
                self.optimizer = torch.optim.Adam(self.model.parameters(), lr=3e-4)
                self.criterion = nn.CrossEntropyLoss()
                self.accumulation = accumulation
                self.slice_len = slice_len

            def train_epoch(self, documents):
                self.model.train()
                for step, (tokens, targets) in enumerate(documents, start=1):
                    state = self.model.initial_state()
{clear_every}                    for start in range(0, tokens.shape[1], self.slice_len):
                        logits, state = self.model(tokens[:, start:start + self.slice_len], state)
                        state = state.detach()
                        loss = self.criterion(logits[0], targets[0, start:start + self.slice_len])
                        (loss * logits.shape[1] / tokens.shape[1]).backward()
                    for param in self.model.parameters():
                        if param.grad is not None:
                            param.grad /= self.accumulation
                    if step % self.accumulation == 0:
                        self.optimizer.step()
{clear_after_step}
        """
_SLICED_FILES = {"lm.py": """
            import torch
            from torch import nn


            class RecurrentLM(nn.Module):
                def __init__(self, vocab, dim=256):
                    super().__init__()
                    self.dim = dim
                    self.embed = nn.Embedding(vocab, dim)
                    self.cell = nn.GRU(dim, dim, batch_first=True)
                    self.head = nn.Linear(dim, vocab)

                def initial_state(self):
                    return torch.zeros(1, 1, self.dim, device="cuda")

                def forward(self, tokens, state):
                    output, state = self.cell(self.embed(tokens), state)
                    return self.head(output), state
        """}
_CLEAR_EVERY_DOCUMENT = "                    self.optimizer.zero_grad()\n"
_CLEAR_AFTER_STEP = "                        self.optimizer.zero_grad()"

_LINEAR_PROBE = """
import torch.nn as nn


class LinearProbe(nn.Module):
    def __init__(self, dim, classes):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, classes)

    def forward(self, features):
        return self.head(self.norm(features))
"""
_PROBED_JOINT = """
import torch
import torch.nn.functional as F

from probes import LinearProbe


class ProbedTrainer:
    def __init__(self, backbone, dim, classes):
        self.backbone = backbone
        self.probe = LinearProbe(dim, classes)
        self.optimizer = torch.optim.AdamW([*backbone.parameters(), *self.probe.parameters()], lr=1e-4)

    def train_step(self, micro_batches):
        for images, labels in micro_batches:
            features = self.backbone(images)
            F.cross_entropy(features, labels).backward()
            self.optimizer.zero_grad()
            F.cross_entropy(self.probe(features.detach()), labels).backward()
            self.optimizer.step()
"""
_PROBED_SEPARATE = """
import torch
import torch.nn.functional as F

from probes import LinearProbe


class ProbedTrainer:
    def __init__(self, backbone, dim, classes):
        self.backbone = backbone
        self.probe = LinearProbe(dim, classes)
        self.optimizer = torch.optim.AdamW(backbone.parameters(), lr=1e-4)
        self.probe_optimizer = torch.optim.SGD(self.probe.parameters(), lr=0.1)

    def train_step(self, micro_batches):
        self.optimizer.zero_grad()
        for images, labels in micro_batches:
            features = self.backbone(images)
            F.cross_entropy(features, labels).backward()
            self.probe_optimizer.zero_grad()
            F.cross_entropy(self.probe(features.detach()), labels).backward()
            self.probe_optimizer.step()
        self.optimizer.step()
"""


_CURVATURE_OPTIMIZER = """
import torch


class CurvatureSGD(torch.optim.Optimizer):
    def __init__(self, model, lr=0.25):
        super().__init__(model.parameters(), {"lr": lr})
        self.collect_stats = False
        self.factors = {}
        for module in model.modules():
            if isinstance(module, torch.nn.Linear):
                module.register_full_backward_hook(self._record_output_grad)

    def _record_output_grad(self, module, grad_input, grad_output):
        if self.collect_stats:
            grad = grad_output[0].detach()
            self.factors[module] = grad.t() @ grad / grad.size(0)

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            for param in group["params"]:
                if param.grad is not None:
                    param.add_(param.grad, alpha=-group["lr"])
"""
_FISHER_WITH_STATS = """
import torch

from curvature import CurvatureSGD


class ActorCritic:
    def __init__(self, policy, value_coef=0.5):
        self.policy = policy
        self.value_coef = value_coef
        self.optimizer = CurvatureSGD(policy)

    def update(self, observations, actions, returns):
        log_probs, values = self.policy.evaluate(observations, actions)
        advantages = returns - values
        fisher_loss = -log_probs.mean() - (values - (values + torch.randn_like(values)).detach()).pow(2).mean()
        self.optimizer.collect_stats = True
        fisher_loss.backward(retain_graph=True)
        self.optimizer.collect_stats = False
        self.optimizer.zero_grad()
        loss = -(advantages.detach() * log_probs).mean() + self.value_coef * advantages.pow(2).mean()
        loss.backward()
        self.optimizer.step()
        return loss.item()
"""
_FISHER_UNREAD = """
import torch

from curvature import CurvatureSGD


class ActorCritic:
    def __init__(self, policy, value_coef=0.5):
        self.policy = policy
        self.value_coef = value_coef
        self.optimizer = CurvatureSGD(policy)

    def update(self, observations, actions, returns):
        log_probs, values = self.policy.evaluate(observations, actions)
        advantages = returns - values
        fisher_loss = -log_probs.mean() - (values - (values + torch.randn_like(values)).detach()).pow(2).mean()
        fisher_loss.backward(retain_graph=True)
        self.optimizer.zero_grad()
        loss = -(advantages.detach() * log_probs).mean() + self.value_coef * advantages.pow(2).mean()
        loss.backward()
        self.optimizer.step()
        return loss.item()
"""


ZeroGradBeforeStep.MUST_FIRE = (
    Fires(  # twin: nothing tells the optimizer to read the Fisher pass: its gradients are cleared unread
        _FISHER_UNREAD,
        files={"curvature.py": _CURVATURE_OPTIMIZER},
        at="        self.optimizer.zero_grad()",
        severity=Severity.WARNING,
    ),
    Fires(  # one optimizer holds the backbone and the probe: clearing it between their backward passes loses the backbone's
        _PROBED_JOINT,
        files={"probes.py": _LINEAR_PROBE},
        at="            self.optimizer.zero_grad()",
        severity=Severity.WARNING,
    ),
    Fires(  # accumulation on both precisions, but the full-precision side clears before every backward: on a run
        # without AMP each step applies the last micro-batch's gradient alone
        """
        import torch

        from losses import lm_loss


        class Trainer:
            def __init__(self, model, optimizer, accum_steps, fp16):
                self.model = model
                self.optimizer = optimizer
                self.accum_steps = accum_steps
                self.fp16 = fp16
                self.scaler = torch.cuda.amp.GradScaler(enabled=fp16)

            def train_epoch(self, loader):
                self.model.train()
                for step, batch in enumerate(loader):
                    if self.fp16:
                        with torch.autocast("cuda", dtype=torch.float16):
                            loss = lm_loss(self.model, batch) / self.accum_steps
                        self.scaler.scale(loss).backward()
                    else:
                        self.optimizer.zero_grad()
                        loss = lm_loss(self.model, batch) / self.accum_steps
                        loss.backward()
                    if (step + 1) % self.accum_steps == 0:
                        if self.fp16:
                            self.scaler.step(self.optimizer)
                            self.scaler.update()
                            self.optimizer.zero_grad()
                        else:
                            self.optimizer.step()
        """,
        files={"losses.py": """
        import torch.nn.functional as F


        def lm_loss(model, batch):
            logits = model(batch["input_ids"].cuda())
            return F.cross_entropy(logits.flatten(0, 1), batch["labels"].cuda().flatten(), ignore_index=-100)
        """},
        at="self.optimizer.zero_grad()",
    ),
    Fires(  # the backward runs in the loop over a document's slices, the clearing at the top of every document, the step
        # every `accumulation` documents: each step applies the last document's gradient alone
        _SLICED_TRAINER.format(clear_every=_CLEAR_EVERY_DOCUMENT, clear_after_step=_CLEAR_AFTER_STEP),
        files=_SLICED_FILES,
        no_fix=True,
        at="self.optimizer.zero_grad()",
    ),
    Fires(  # the base trainer's loop steps every N batches; the one subclass's hook it runs clears on every batch
        """
        import torch


        class BaseTrainer:
            def __init__(self, model, optimizer, accumulation_steps=1):
                self.model = model
                self.optimizer = optimizer
                self.accumulation_steps = accumulation_steps

            def training_step(self, batch):
                raise NotImplementedError

            def train_epoch(self, loader):
                self.model.train()
                for index, batch in enumerate(loader):
                    self.training_step(batch)
                    if (index + 1) % self.accumulation_steps == 0:
                        torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
                        self.optimizer.step()
        """,
        files={"classifier.py": """
        import torch.nn.functional as F

        from train import BaseTrainer


        class ClassifierTrainer(BaseTrainer):
            def training_step(self, batch):
                images, labels = batch
                self.optimizer.zero_grad()
                loss = F.cross_entropy(self.model(images.cuda()), labels.cuda()) / self.accumulation_steps
                loss.backward()
                return loss.detach()
        """},
        no_fix=True,
        at="self.training_step(batch)",
    ),
    Fires(  # the Trainer steps after training_step returns: the override clears what its backward left
        """
        from transformers import Trainer


        class DistillationTrainer(Trainer):
            def __init__(self, *args, teacher=None, **kwargs):
                super().__init__(*args, **kwargs)
                self.teacher = teacher

            def training_step(self, model, inputs, num_items_in_batch=None):
                model.train()
                inputs = self._prepare_inputs(inputs)
                loss = self.compute_loss(model, inputs)
                self.accelerator.backward(loss)
                model.zero_grad()
                return loss.detach()
        """
    ),
    Fires(  # Lightning runs the callback's hook between the backward and the step
        """
        import lightning.pytorch as pl


        class GradientNoise(pl.Callback):
            def __init__(self, scale):
                self.scale = scale

            def on_after_backward(self, trainer, pl_module):
                for param in pl_module.parameters():
                    param.grad = None
        """
    ),
    Fires(  # a trainer's own helper zeroes each parameter's gradient: one `zero_grad()` between backward and step
        """
        import torch


        class Trainer:
            def __init__(self, model, optimizer):
                self.model = model
                self.optimizer = optimizer
                self.scaler = torch.cuda.amp.GradScaler()

            def clear_gradients(self):
                for group in self.optimizer.param_groups:
                    for param in group["params"]:
                        if param.grad is not None:
                            param.grad.detach_()
                            param.grad.zero_()

            def train_epoch(self, loader):
                for images, targets in loader:
                    with torch.autocast("cuda"):
                        loss = torch.nn.functional.cross_entropy(self.model(images), targets)
                    self.scaler.scale(loss).backward()
                    self.clear_gradients()
                    self.scaler.step(self.optimizer)
                    self.scaler.update()
        """
    ),
    Fires(
        """
        def train(model, optimizer, loader):
            for x, y in loader:
                loss = (model(x) - y).pow(2).mean()
                loss.backward()
                for p in model.parameters():
                    p.grad = None
                optimizer.step()
        """
    ),
    Fires(
        """
        for x, y in loader:
            loss = criterion(model(x), y)
            loss.backward()
            optimizer.zero_grad()
            optimizer.step()
        """,
        fixed="""
        for x, y in loader:
            loss = criterion(model(x), y)
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
        """,
    ),
    Fires(
        """
        import torch

        def train(model, loader, optimizer):
            for x, y in loader:
                loss = torch.nn.functional.mse_loss(model(x), y)
                loss.backward()
                model.zero_grad()
                optimizer.step()
        """,
        fixed="""
        import torch

        def train(model, loader, optimizer):
            for x, y in loader:
                loss = torch.nn.functional.mse_loss(model(x), y)
                loss.backward()
                optimizer.step()
                model.zero_grad()
        """,
    ),
    Fires(
        """
        for x, y in loader:
            loss = criterion(model(x), y)
            scaler.scale(loss).backward()
            optimizer.zero_grad(set_to_none=True)
            scaler.step(optimizer)
            scaler.update()
        """,
        fixed="""
        for x, y in loader:
            loss = criterion(model(x), y)
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            optimizer.zero_grad(set_to_none=True)
            scaler.update()
        """
    ),
    Fires(
        """
        def reset(optimizer):
            optimizer.zero_grad()

        for epoch in range(10):
            for x, y in loader:
                loss = criterion(model(x), y)
                loss.backward()
                reset(optimizer)
                optimizer.step()
        """
    ),
    Fires(
        """
        def fit(model, loader, optimizer, epochs):
            for epoch in range(epochs):
                for step, batch in enumerate(loader):
                    loss = model(**batch).loss
                    loss.backward()
                    model.zero_grad(set_to_none=True)
                    optimizer.step()
        """,
        fixed="""
        def fit(model, loader, optimizer, epochs):
            for epoch in range(epochs):
                for step, batch in enumerate(loader):
                    loss = model(**batch).loss
                    loss.backward()
                    optimizer.step()
                    model.zero_grad(set_to_none=True)
        """
    ),
    Fires(
        """
        step = 0
        while step < 1000:
            loss = model(next(batches)).mean()
            loss.backward()
            opt.zero_grad()
            opt.step()
            step += 1
        """,
        fixed="""
        step = 0
        while step < 1000:
            loss = model(next(batches)).mean()
            loss.backward()
            opt.step()
            opt.zero_grad()
            step += 1
        """
    ),
    Fires(
        """
        for x, y in loader:
            loss = criterion(model(x), y)
            loss.backward()
            if clip:
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.zero_grad()
            optimizer.step()
        """,
        fixed="""
        for x, y in loader:
            loss = criterion(model(x), y)
            loss.backward()
            if clip:
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            optimizer.zero_grad()
        """
    ),
    Fires(  # where it is reported: at the `zero_grad` inside the helper, with the helper's call as evidence
        """
        class Trainer:
            def __init__(self, model, optimizer, criterion):
                self.model = model
                self.optimizer = optimizer
                self.criterion = criterion

            def reset_gradients(self):
                self.optimizer.zero_grad(set_to_none=True)

            def fit(self, loader):
                for x, y in loader:
                    self.criterion(self.model(x), y).backward()
                    self.reset_gradients()
                    self.optimizer.step()
        """,
        at="self.optimizer.zero_grad(set_to_none=True)",
    ),
    Fires(  # accumulation added to a loop that still clears every iteration: each step sees one batch
        """
        import torch


        def train_epoch(model, loader, optimizer, criterion, accumulation_steps, device):
            scaler = torch.cuda.amp.GradScaler()
            model.train()
            for i, (images, targets) in enumerate(loader):
                optimizer.zero_grad()
                with torch.autocast("cuda"):
                    loss = criterion(model(images.to(device)), targets.to(device)) / accumulation_steps
                scaler.scale(loss).backward()
                if (i + 1) % accumulation_steps == 0:
                    scaler.step(optimizer)
                    scaler.update()
        """,
        at="optimizer.zero_grad()",
        no_fix=True,
    ),
    Fires(  # micro-batches: the clearing sits inside the micro-step loop
        """
        import torch


        class Trainer:
            def __init__(self, model, optimizer, micro_batches):
                self.model = model
                self.optimizer = optimizer
                self.micro_batches = micro_batches
                self.scaler = torch.cuda.amp.GradScaler()

            def fit(self, loader):
                for inputs, labels in loader:
                    for x, y in zip(inputs.chunk(self.micro_batches), labels.chunk(self.micro_batches)):
                        self.optimizer.zero_grad(set_to_none=True)
                        with torch.autocast("cuda", dtype=torch.float16):
                            loss = torch.nn.functional.cross_entropy(self.model(x), y) / self.micro_batches
                        self.scaler.scale(loss).backward()
                    self.scaler.step(self.optimizer)
                    self.scaler.update()
        """,
        at="self.optimizer.zero_grad(set_to_none=True)",
        no_fix=True,
    ),
    Fires(  # the every-N test computed into a name first, as nanoGPT-style scripts write it
        """
        import torch


        def train(model, optimizer, get_batch, max_iters, accumulation_iters):
            scaler = torch.cuda.amp.GradScaler()
            model.train()
            for iter_num in range(max_iters):
                optimizer.zero_grad(set_to_none=True)
                is_accumulating = (iter_num + 1) % accumulation_iters != 0
                x, y = get_batch("train")
                with torch.autocast("cuda", dtype=torch.bfloat16):
                    logits, loss = model(x, y)
                scaler.scale(loss / accumulation_iters).backward()
                if not is_accumulating:
                    scaler.step(optimizer)
                    scaler.update()
        """,
        at="optimizer.zero_grad(set_to_none=True)",
        no_fix=True,
    ),
    Fires(  # a `continue` skips the step on the accumulating iterations; the clearing runs before it every time
        """
        import torch


        class Trainer:
            def __init__(self, model, optimizer, scheduler, grad_accum_steps):
                self.model = model
                self.optimizer = optimizer
                self.scheduler = scheduler
                self.grad_accum_steps = grad_accum_steps
                self.scaler = torch.cuda.amp.GradScaler()

            def train_epoch(self, loader):
                self.model.train()
                for step, batch in enumerate(loader):
                    self.optimizer.zero_grad()
                    with torch.autocast("cuda", dtype=torch.float16):
                        loss = self.model(**batch).loss / self.grad_accum_steps
                    self.scaler.scale(loss).backward()
                    if (step + 1) % self.grad_accum_steps != 0:
                        continue
                    self.scaler.unscale_(self.optimizer)
                    torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
                    self.scaler.step(self.optimizer)
                    self.scaler.update()
                    self.scheduler.step()
        """,
        at="self.optimizer.zero_grad()",
        no_fix=True,
    ),
    Fires(  # the clearing and the backward sit in a method the loop calls; the loop steps every N
        """
        import torch


        class Learner:
            def __init__(self, model, optimizer, accumulate):
                self.model = model
                self.optimizer = optimizer
                self.accumulate = accumulate

            def training_pass(self, images, labels):
                self.optimizer.zero_grad()
                logits = self.model(images)
                loss = torch.nn.functional.cross_entropy(logits, labels) / self.accumulate
                loss.backward()
                return loss.item()

            def fit(self, loader):
                for it, (images, labels) in enumerate(loader):
                    self.training_pass(images.cuda(), labels.cuda())
                    if (it + 1) % self.accumulate == 0:
                        torch.nn.utils.clip_grad_norm_(self.model.parameters(), 5.0)
                        self.optimizer.step()
        """,
        at="self.optimizer.zero_grad()",
        no_fix=True,
    ),
    Fires(  # the step is gated in a helper that counts micro-steps on the object; the clearing runs every batch
        """
        import torch.nn.functional as F


        class Learner:
            def __init__(self, model, optimizer, accumulation_steps):
                self.model = model
                self.optimizer = optimizer
                self.accumulation_steps = accumulation_steps
                self.micro_steps = 0

            def backward(self, loss):
                self.optimizer.zero_grad(set_to_none=True)
                (loss / self.accumulation_steps).backward()

            def maybe_step(self):
                self.micro_steps += 1
                if self.micro_steps % self.accumulation_steps == 0:
                    self.optimizer.step()

            def fit(self, loader):
                for inputs, labels in loader:
                    self.backward(F.cross_entropy(self.model(inputs), labels))
                    self.maybe_step()
        """,
        at="self.optimizer.zero_grad(set_to_none=True)",
    ),
    Fires(  # a step method with no loop of its own: the trainer's loop, or a framework, calls it per batch
        """
        import torch.nn.functional as F


        class SegmentationTask:
            def __init__(self, network, optimizer, class_weights):
                self.network = network
                self.optimizer = optimizer
                self.class_weights = class_weights

            def training_step(self, images, masks):
                self.network.train()
                logits = self.network(images)
                loss = F.cross_entropy(logits, masks, weight=self.class_weights)
                loss.backward()
                self.network.zero_grad(set_to_none=True)
                self.optimizer.step()
                return {"loss": loss.item()}
        """,
        fixed="""
        import torch.nn.functional as F


        class SegmentationTask:
            def __init__(self, network, optimizer, class_weights):
                self.network = network
                self.optimizer = optimizer
                self.class_weights = class_weights

            def training_step(self, images, masks):
                self.network.train()
                logits = self.network(images)
                loss = F.cross_entropy(logits, masks, weight=self.class_weights)
                loss.backward()
                self.optimizer.step()
                self.network.zero_grad(set_to_none=True)
                return {"loss": loss.item()}
        """,
    ),
    Fires(  # the step method splits its batch into micro-batches and clears before each one's backward
        """
        import torch


        class Engine:
            def __init__(self, model, optimizer, chunks):
                self.model = model
                self.optimizer = optimizer
                self.chunks = chunks
                self.scaler = torch.cuda.amp.GradScaler()

            def train_batch(self, tokens, targets):
                for part, part_targets in zip(tokens.chunk(self.chunks), targets.chunk(self.chunks)):
                    self.optimizer.zero_grad(set_to_none=True)
                    with torch.autocast("cuda", dtype=torch.float16):
                        loss = self.model(part, labels=part_targets).loss / self.chunks
                    self.scaler.scale(loss).backward()
                self.scaler.step(self.optimizer)
                self.scaler.update()
        """,
        at="self.optimizer.zero_grad(set_to_none=True)",
        no_fix=True,
    ),
    Fires(  # the step waits for a counter that the branch resets: every `accum` batches
        """
        import torch


        def train(model, optimizer, loader, accum, device):
            pending = 0
            for waveform, target in loader:
                optimizer.zero_grad()
                loss = torch.nn.functional.l1_loss(model(waveform.to(device)), target.to(device)) / accum
                loss.backward()
                pending += 1
                if pending == accum:
                    optimizer.step()
                    pending = 0
        """,
        at="optimizer.zero_grad()",
        no_fix=True,
    ),
    Fires(  # the loop calls the stepping helper every N batches and clears on every batch
        """
        import torch


        class Trainer:
            def __init__(self, model, optimizer, accumulation, max_norm):
                self.model = model
                self.optimizer = optimizer
                self.accumulation = accumulation
                self.max_norm = max_norm

            def apply_gradients(self):
                torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.max_norm)
                self.optimizer.step()

            def train_epoch(self, loader):
                for index, (features, labels) in enumerate(loader):
                    self.optimizer.zero_grad()
                    loss = torch.nn.functional.mse_loss(self.model(features), labels) / self.accumulation
                    loss.backward()
                    if (index + 1) % self.accumulation == 0:
                        self.apply_gradients()
        """,
        at="self.optimizer.zero_grad()",
        no_fix=True,
    ),
    Fires(  # L-BFGS: `step` runs the closure, then reads the gradients it left
        """
        import torch


        def fit_style(image, target_features, extractor, steps):
            optimizer = torch.optim.LBFGS([image.requires_grad_()])
            for _ in range(steps):
                def closure():
                    loss = torch.nn.functional.mse_loss(extractor(image), target_features)
                    loss.backward()
                    optimizer.zero_grad()
                    return loss

                optimizer.step(closure)
        """,
        at="optimizer.zero_grad()",
        no_fix=True,
    ),
    Fires(  # a step method that steps on every N-th call counts the calls on the object, yet clears on every call
        """
        import torch.nn.functional as F


        class DialogueAgent:
            def __init__(self, model, optimizer, update_freq):
                self.model = model
                self.optimizer = optimizer
                self.update_freq = update_freq
                self.pending_updates = 0

            def train_step(self, batch):
                self.model.train()
                self.optimizer.zero_grad()
                scores = self.model(batch["text"])
                loss = F.cross_entropy(scores.view(-1, scores.size(-1)), batch["labels"].view(-1)) / self.update_freq
                loss.backward()
                if self.update_freq > 1:
                    self.pending_updates = (self.pending_updates + 1) % self.update_freq
                    if self.pending_updates != 0:
                        return
                self.optimizer.step()
        """,
        at="self.optimizer.zero_grad()",
        no_fix=True,
    ),
    Fires(  # a clearing left between the two halves of the discriminator's loss: the real half never trains it
        """
        import torch
        from torch import nn


        class GANTrainer:
            def __init__(self, generator, discriminator, latent_dim):
                self.generator, self.discriminator = generator, discriminator
                self.latent_dim = latent_dim
                self.criterion = nn.BCEWithLogitsLoss()
                self.d_optimizer = torch.optim.Adam(discriminator.parameters(), lr=2e-4, betas=(0.5, 0.999))

            def discriminator_epoch(self, loader):
                for images in loader:
                    images = images.cuda()
                    self.d_optimizer.zero_grad()
                    real = self.criterion(self.discriminator(images), torch.ones(len(images), 1, device="cuda"))
                    real.backward()
                    self.d_optimizer.zero_grad()
                    noise = torch.randn(len(images), self.latent_dim, device="cuda")
                    fake_images = self.generator(noise).detach()
                    fake = self.criterion(self.discriminator(fake_images), torch.zeros(len(images), 1, device="cuda"))
                    fake.backward()
                    self.d_optimizer.step()
        """,
        severity=Severity.WARNING,
        at="self.d_optimizer.zero_grad()",
        no_fix=True,
    ),
    Fires(  # AMP accumulation: a helper in another file clears at the start of each micro-batch's forward-backward
        """
        import torch
        from engine import forward_backward


        def train(model, loader, optimizer, args):
            scaler = torch.cuda.amp.GradScaler()
            model.train()
            for batch in loader:
                for micro in batch.chunk(args.grad_accum):
                    forward_backward(model, micro.cuda(), optimizer, scaler, args.grad_accum)
                scaler.unscale_(optimizer)
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                scaler.step(optimizer)
                scaler.update()
        """,
        files={"engine.py": """
        import torch


        def forward_backward(model, micro, opt, scaler, accum):
            opt.zero_grad(set_to_none=True)
            with torch.autocast("cuda", dtype=torch.float16):
                loss = model(micro).mean() / accum
            scaler.scale(loss).backward()
            return loss.detach()
        """},
        no_fix=True,
        at="forward_backward(model, micro.cuda()",
    ),
    Fires(  # the clearing a loop over the parameters, in every micro-batch of the accumulation
        """
        import torch


        def main(args):
            model = build_model(args).cuda()
            optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)
            scaler = torch.cuda.amp.GradScaler()
            for batch in get_loader(args):
                for i in range(args.grad_accum):
                    inputs = batch[i::args.grad_accum].cuda()
                    for param in model.parameters():
                        param.grad = None
                    with torch.cuda.amp.autocast():
                        loss = model(inputs).mean() / args.grad_accum
                    scaler.scale(loss).backward()
                scaler.step(optimizer)
                scaler.update()
        """,
        no_fix=True,
        at="param.grad = None",
    ),
    Fires(  # Lightning manual optimisation: `manual_backward` fills the gradients the clearing then drops
        """
        import lightning as L
        import torch


        class GAN(L.LightningModule):
            def __init__(self, generator, discriminator):
                super().__init__()
                self.generator, self.discriminator = generator, discriminator
                self.automatic_optimization = False

            def training_step(self, batch, batch_idx):
                opt_g, opt_d = self.optimizers()
                fake = self.generator(torch.randn(batch.size(0), 128, device=self.device))
                d_loss = self.discriminator(fake.detach()).mean() - self.discriminator(batch).mean()
                opt_d.zero_grad()
                self.manual_backward(d_loss)
                opt_d.step()
                g_loss = -self.discriminator(fake).mean()
                self.manual_backward(g_loss)
                opt_g.zero_grad()
                opt_g.step()

            def configure_optimizers(self):
                return torch.optim.Adam(self.generator.parameters()), torch.optim.Adam(self.discriminator.parameters())
        """,
        fixed="""
        import lightning as L
        import torch


        class GAN(L.LightningModule):
            def __init__(self, generator, discriminator):
                super().__init__()
                self.generator, self.discriminator = generator, discriminator
                self.automatic_optimization = False

            def training_step(self, batch, batch_idx):
                opt_g, opt_d = self.optimizers()
                fake = self.generator(torch.randn(batch.size(0), 128, device=self.device))
                d_loss = self.discriminator(fake.detach()).mean() - self.discriminator(batch).mean()
                opt_d.zero_grad()
                self.manual_backward(d_loss)
                opt_d.step()
                g_loss = -self.discriminator(fake).mean()
                self.manual_backward(g_loss)
                opt_g.step()
                opt_g.zero_grad()

            def configure_optimizers(self):
                return torch.optim.Adam(self.generator.parameters()), torch.optim.Adam(self.discriminator.parameters())
        """,
        at="opt_g.zero_grad()",
    ),
    Fires(  # clearing, then stepping, then the forward and backward: each step reads the gradients just cleared
        """
        import torch


        class Trainer:
            def __init__(self, model, optimizer, loader):
                self.model = model
                self.optimizer = optimizer
                self.loader = loader
                self.scaler = torch.cuda.amp.GradScaler()

            def train_step(self, batch):
                self.optimizer.zero_grad()
                self.scaler.step(self.optimizer)
                self.scaler.update()
                with torch.autocast("cuda", dtype=torch.float16):
                    loss = self.model(**batch).loss
                self.scaler.scale(loss).backward()
                return loss.detach()

            def fit(self):
                for batch in self.loader:
                    self.train_step(batch)
        """,
        fixed="""
        import torch


        class Trainer:
            def __init__(self, model, optimizer, loader):
                self.model = model
                self.optimizer = optimizer
                self.loader = loader
                self.scaler = torch.cuda.amp.GradScaler()

            def train_step(self, batch):
                self.scaler.step(self.optimizer)
                self.optimizer.zero_grad()
                self.scaler.update()
                with torch.autocast("cuda", dtype=torch.float16):
                    loss = self.model(**batch).loss
                self.scaler.scale(loss).backward()
                return loss.detach()

            def fit(self):
                for batch in self.loader:
                    self.train_step(batch)
        """,
    ),
    Fires(  # the same order in a loop of main(): the backward's gradients wait for the next pass, which clears them first
        """
        def main(model, loader, optimizer, criterion, epochs):
            for epoch in range(epochs):
                for images, targets in loader:
                    optimizer.zero_grad()
                    optimizer.step()
                    loss = criterion(model(images.cuda()), targets.cuda())
                    loss.backward()
        """,
        fixed="""
        def main(model, loader, optimizer, criterion, epochs):
            for epoch in range(epochs):
                for images, targets in loader:
                    optimizer.step()
                    optimizer.zero_grad()
                    loss = criterion(model(images.cuda()), targets.cuda())
                    loss.backward()
        """,
    ),
    Fires(  # several optimizers kept in a dict, each cleared and stepped by a loop over them
        """
        def train_epoch(model, loader, optimizers, criterion):
            model.train()
            for inputs, labels in loader:
                loss = criterion(model(inputs), labels)
                loss.backward()
                for optimizer in optimizers.values():
                    optimizer.zero_grad()
                for optimizer in optimizers.values():
                    optimizer.step()
        """,
        at="optimizer.zero_grad()",
        no_fix=True,
    ),
    Fires(  # one optimizer of a dict, reached by its key
        """
        class MultiTaskRunner:
            def __init__(self, model, optimizers):
                self.model = model
                self.optimizers = optimizers

            def run_epoch(self, loader):
                for batch in loader:
                    loss = self.model(batch["x"], batch["y"])
                    loss.backward()
                    self.optimizers["backbone"].zero_grad()
                    self.optimizers["backbone"].step()
        """,
        fixed="""
        class MultiTaskRunner:
            def __init__(self, model, optimizers):
                self.model = model
                self.optimizers = optimizers

            def run_epoch(self, loader):
                for batch in loader:
                    loss = self.model(batch["x"], batch["y"])
                    loss.backward()
                    self.optimizers["backbone"].step()
                    self.optimizers["backbone"].zero_grad()
        """,
    ),
    Fires(  # DCGAN: the discriminator cleared again between its real and its fake half, then the generator's turn
        """
        import torch
        import torch.nn as nn
        import torch.optim as optim


        def train(netG, netD, dataloader, nz, epochs, device):
            criterion = nn.BCELoss()
            optimizerD = optim.Adam(netD.parameters(), lr=2e-4, betas=(0.5, 0.999))
            optimizerG = optim.Adam(netG.parameters(), lr=2e-4, betas=(0.5, 0.999))
            for epoch in range(epochs):
                for real, _ in dataloader:
                    real = real.to(device)
                    netD.zero_grad()
                    output = netD(real).view(-1)
                    errD_real = criterion(output, torch.ones_like(output))
                    errD_real.backward()
                    fake = netG(torch.randn(real.size(0), nz, 1, 1, device=device))
                    netD.zero_grad()
                    output = netD(fake.detach()).view(-1)
                    errD_fake = criterion(output, torch.zeros_like(output))
                    errD_fake.backward()
                    optimizerD.step()
                    netG.zero_grad()
                    output = netD(fake).view(-1)
                    errG = criterion(output, torch.ones_like(output))
                    errG.backward()
                    optimizerG.step()
        """,
        at="netD.zero_grad()",
        severity=Severity.WARNING,
        no_fix=True,
    ),
    Fires(  # a GAN's generator cleared through its model after its backward; the optimizer was built over that model
        """
        import torch


        class GAN:
            def __init__(self, generator, discriminator, lr):
                self.netG = generator
                self.netD = discriminator
                self.optimizer_G = torch.optim.Adam(self.netG.parameters(), lr=lr)
                self.optimizer_D = torch.optim.Adam(self.netD.parameters(), lr=lr)

            def train(self, loader, nz):
                for real in loader:
                    fake = self.netG(torch.randn(real.size(0), nz))
                    self.netD.zero_grad()
                    loss_d = self.netD(fake.detach()).mean() - self.netD(real).mean()
                    loss_d.backward()
                    self.optimizer_D.step()
                    loss_g = -self.netD(fake).mean()
                    loss_g.backward()
                    self.netG.zero_grad()
                    self.optimizer_G.step()
        """,
        fixed="""
        import torch


        class GAN:
            def __init__(self, generator, discriminator, lr):
                self.netG = generator
                self.netD = discriminator
                self.optimizer_G = torch.optim.Adam(self.netG.parameters(), lr=lr)
                self.optimizer_D = torch.optim.Adam(self.netD.parameters(), lr=lr)

            def train(self, loader, nz):
                for real in loader:
                    fake = self.netG(torch.randn(real.size(0), nz))
                    self.netD.zero_grad()
                    loss_d = self.netD(fake.detach()).mean() - self.netD(real).mean()
                    loss_d.backward()
                    self.optimizer_D.step()
                    loss_g = -self.netD(fake).mean()
                    loss_g.backward()
                    self.optimizer_G.step()
                    self.netG.zero_grad()
        """,
    ),
    Fires(  # a step method gated on every N-th call that clears after the gate, on every call
        """
        import torch


        class Trainer:
            def __init__(self, model, optimizer, args):
                self.model = model
                self.optimizer = optimizer
                self.args = args
                self.global_step = 0
                self.scaler = torch.cuda.amp.GradScaler()

            def training_step(self, batch):
                with torch.autocast("cuda", dtype=torch.float16):
                    loss = self.model(**batch).loss / self.args.gradient_accumulation_steps
                self.scaler.scale(loss).backward()
                self.global_step += 1
                if self.global_step % self.args.gradient_accumulation_steps == 0:
                    self.scaler.step(self.optimizer)
                    self.scaler.update()
                self.optimizer.zero_grad()
                return loss.detach()
        """,
        at="self.optimizer.zero_grad()",
        no_fix=True,
    ),
    Fires(  # a joint loss trains an encoder and a decoder, each pass of the loop clears then steps one of them
        """
        import torch


        def train(encoder, decoder, loader, epochs):
            enc_opt = torch.optim.Adam(encoder.parameters(), lr=1e-3)
            dec_opt = torch.optim.Adam(decoder.parameters(), lr=1e-3)
            for _ in range(epochs):
                for images in loader:
                    loss = torch.nn.functional.mse_loss(decoder(encoder(images)), images)
                    loss.backward()
                    for opt in (enc_opt, dec_opt):
                        opt.zero_grad()
                        opt.step()
        """,
        fixed="""
        import torch


        def train(encoder, decoder, loader, epochs):
            enc_opt = torch.optim.Adam(encoder.parameters(), lr=1e-3)
            dec_opt = torch.optim.Adam(decoder.parameters(), lr=1e-3)
            for _ in range(epochs):
                for images in loader:
                    loss = torch.nn.functional.mse_loss(decoder(encoder(images)), images)
                    loss.backward()
                    for opt in (enc_opt, dec_opt):
                        opt.step()
                        opt.zero_grad()
        """,
    ),
    Fires(  # optimizers kept by name, cleared and stepped by their key
        """
        import torch


        def fit(nets, batches, lr):
            optimizers = {key: torch.optim.SGD(net.parameters(), lr=lr) for key, net in nets.items()}
            for x, y in batches:
                loss = torch.nn.functional.cross_entropy(nets["head"](nets["body"](x)), y)
                loss.backward()
                for key in optimizers:
                    optimizers[key].zero_grad()
                for key in optimizers:
                    optimizers[key].step()
        """,
        at="optimizers[key].zero_grad()",
        no_fix=True,
    ),
    Fires(  # the trainer's own `zero_grad` method clears its optimizer between the backward and the update
        """
        import torch


        class Learner:
            def __init__(self, net, lr):
                self.net = net
                self.optimizer = torch.optim.AdamW(net.parameters(), lr=lr)

            def zero_grad(self):
                self.optimizer.zero_grad()

            def update(self):
                torch.nn.utils.clip_grad_norm_(self.net.parameters(), 1.0)
                self.optimizer.step()

            def learn(self, batch):
                loss = self.net(batch).mean()
                loss.backward()
                self.zero_grad()
                self.update()
                return loss.item()
        """,
        at="self.optimizer.zero_grad()",
        no_fix=True,
    ),
    Fires(  # DeepSpeed: the optimizer `initialize` hands back is the one `engine.step()` steps
        """
        import deepspeed


        def main(args, net, loader):
            engine, optimizer, _, _ = deepspeed.initialize(args=args, model=net, model_parameters=net.parameters())
            for batch in loader:
                loss = engine(batch)
                engine.backward(loss)
                optimizer.zero_grad()
                engine.step()
        """,
        fixed="""
        import deepspeed


        def main(args, net, loader):
            engine, optimizer, _, _ = deepspeed.initialize(args=args, model=net, model_parameters=net.parameters())
            for batch in loader:
                loss = engine(batch)
                engine.backward(loss)
                engine.step()
                optimizer.zero_grad()
        """,
    ),
    # the optimizer known by what the code does with it, whatever it is called (shapes: optproto)
    Fires(  # built by a factory handed the model's parameters
        """
        from torch import nn
        from toolkit.optim import create


        def fit(net, data, lr):
            upd = create(net.parameters(), lr=lr)
            for x, y in data:
                err = nn.functional.mse_loss(net(x), y)
                err.backward()
                net.zero_grad()
                upd.step()
        """,
        fixed="""
        from torch import nn
        from toolkit.optim import create


        def fit(net, data, lr):
            upd = create(net.parameters(), lr=lr)
            for x, y in data:
                err = nn.functional.mse_loss(net(x), y)
                err.backward()
                upd.step()
                net.zero_grad()
        """,
    ),
    Fires(  # kept on `self` by a `setup()` from builders handed in: cleared and stepped, an optimizer's protocol
        """
        import torch.nn.functional as F


        class Runner:
            def __init__(self, cfg):
                self.cfg = cfg

            def setup(self, build_net, build_upd):
                self.net = build_net(self.cfg)
                self.upd = build_upd(self.net, self.cfg)

            def run(self, data):
                for x, y in data:
                    err = F.cross_entropy(self.net(x), y)
                    err.backward()
                    self.upd.zero_grad()
                    self.upd.step()
        """,
        fixed="""
        import torch.nn.functional as F


        class Runner:
            def __init__(self, cfg):
                self.cfg = cfg

            def setup(self, build_net, build_upd):
                self.net = build_net(self.cfg)
                self.upd = build_upd(self.net, self.cfg)

            def run(self, data):
                for x, y in data:
                    err = F.cross_entropy(self.net(x), y)
                    err.backward()
                    self.upd.step()
                    self.upd.zero_grad()
        """,
    ),
    Fires(  # one of a dict of optimizers
        """
        import torch.nn.functional as F
        from toolkit.optim import create


        def fit(gen, disc, data):
            ups = {"gen": create(gen.parameters()), "disc": create(disc.parameters())}
            for real, noise in data:
                err = F.softplus(-disc(gen(noise))).mean()
                err.backward()
                ups["gen"].zero_grad()
                ups["gen"].step()
        """,
        fixed="""
        import torch.nn.functional as F
        from toolkit.optim import create


        def fit(gen, disc, data):
            ups = {"gen": create(gen.parameters()), "disc": create(disc.parameters())}
            for real, noise in data:
                err = F.softplus(-disc(gen(noise))).mean()
                err.backward()
                ups["gen"].step()
                ups["gen"].zero_grad()
        """,
    ),
    Fires(  # returned by a factory of another file: the first step after the backward
        """
        import torch.nn.functional as F

        from parts import make_updater


        def fit(net, data):
            upd = make_updater(net)
            for x, y in data:
                err = F.cross_entropy(net(x), y)
                err.backward()
                net.zero_grad()
                upd.step()
        """,
        fixed="""
        import torch.nn.functional as F

        from parts import make_updater


        def fit(net, data):
            upd = make_updater(net)
            for x, y in data:
                err = F.cross_entropy(net(x), y)
                err.backward()
                upd.step()
                net.zero_grad()
        """,
        files={"parts.py": """
        from toolkit.optim import Lion


        def make_updater(net):
            return Lion(net.parameters(), lr=1e-4)
        """},
    ),
    Fires(  # the trainer's own `step()` clears, then steps: called after the backward, the step applies zeros
        """
        import torch
        import torch.nn.functional as F


        class Trainer:
            def __init__(self, model, lr, max_norm):
                self.model = model
                self.optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
                self.max_norm = max_norm

            def step(self):
                self.optimizer.zero_grad(set_to_none=True)
                torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.max_norm)
                self.optimizer.step()

            def fit(self, loader):
                for images, labels in loader:
                    loss = F.cross_entropy(self.model(images), labels)
                    loss.backward()
                    self.step()
        """,
        no_fix=True,
        at="self.optimizer.zero_grad(set_to_none=True)",
    ),
    Fires(  # a project's optimizer wrapper, in another file, whose methods clear and step the optimizer it holds
        """
        import torch.nn.functional as F

        from optim_utils import ScheduledOptim


        def train(model, optimizer, loader, warmup):
            sched = ScheduledOptim(optimizer, warmup)
            for src, tgt in loader:
                loss = F.cross_entropy(model(src), tgt)
                loss.backward()
                sched.zero_grad()
                sched.step_and_update_lr()
        """,
        files={"optim_utils.py": """
        class ScheduledOptim:
            def __init__(self, optimizer, warmup):
                self._optimizer = optimizer
                self.warmup = warmup
                self.steps = 0

            def zero_grad(self):
                self._optimizer.zero_grad()

            def step_and_update_lr(self):
                self.steps += 1
                for group in self._optimizer.param_groups:
                    group["lr"] = min(1.0, self.steps / self.warmup) * 1e-3
                self._optimizer.step()
        """},
        no_fix=True,
        at="sched.zero_grad()",
    ),
    Fires(  # `set_to_none` by hand over every trainable parameter, between the backward and the step
        """
        import torch
        import torch.nn.functional as F


        def train(model, loader, lr):
            params = [p for p in model.parameters() if p.requires_grad]
            optimizer = torch.optim.SGD(params, lr=lr, momentum=0.9)
            for x, y in loader:
                loss = F.cross_entropy(model(x), y)
                loss.backward()
                for p in params:
                    p.grad = None
                optimizer.step()
        """,
        no_fix=True,
        at="p.grad = None",
    ),
    Fires(  # inside accelerate's `accumulate`, the model's own zero_grad clears every micro-batch; the prepared optimizer steps every N
        """
        import argparse

        from accelerate import Accelerator


        def main():
            parser = argparse.ArgumentParser()
            parser.add_argument("--gradient_accumulation_steps", type=int, default=4)
            args = parser.parse_args()
            accelerator = Accelerator(gradient_accumulation_steps=args.gradient_accumulation_steps, mixed_precision="bf16")
            model, optimizer, train_dataloader, lr_scheduler = accelerator.prepare(*build(args))
            model.train()
            for batch in train_dataloader:
                with accelerator.accumulate(model):
                    outputs = model(**batch)
                    accelerator.backward(outputs.loss)
                    if accelerator.sync_gradients:
                        accelerator.clip_grad_norm_(model.parameters(), 1.0)
                    optimizer.step()
                    lr_scheduler.step()
                    model.zero_grad(set_to_none=True)


        if __name__ == "__main__":
            main()
        """,
        no_fix=True,
        at="model.zero_grad(set_to_none=True)",
    ),
    Fires(  # the shared train/eval helper backwards on the branch the call picks (`eval=False`); each shard clears first
        """
        import torch


        def compute_forward(model, criterion, src, tgt, eval=False, normalization=1.0):
            if not eval:
                model.train()
                with torch.enable_grad():
                    loss = criterion(model(src, tgt[:, :-1]), tgt[:, 1:]).sum() / normalization
                torch.autograd.backward(loss)
                return loss.item()
            model.eval()
            with torch.no_grad():
                return (criterion(model(src, tgt[:, :-1]), tgt[:, 1:]).sum() / normalization).item()


        def train(model, criterion, optimizer, batches, update_cycle):
            for src, tgt in batches:
                for src_t, tgt_t in zip(src.chunk(update_cycle), tgt.chunk(update_cycle)):
                    model.zero_grad()
                    compute_forward(model, criterion, src_t, tgt_t, eval=False, normalization=len(src))
                optimizer.step()
        """,
        no_fix=True,
        at="model.zero_grad()",
    ),
    Fires(  # the micro-batch loop accumulates, then the clearing lands between it and the step (shapes zg14)
        """
        import torch

        from model import GPT


        def train(config, get_batch, max_iters):
            model = GPT(config).cuda()
            optimizer = torch.optim.AdamW(model.parameters(), lr=config.lr)
            scaler = torch.cuda.amp.GradScaler()
            x, y = get_batch("train")
            for _ in range(max_iters):
                for _micro_step in range(config.accumulation_steps):
                    with torch.autocast("cuda", dtype=torch.float16):
                        _, loss = model(x, y)
                        loss = loss / config.accumulation_steps
                    x, y = get_batch("train")
                    scaler.scale(loss).backward()
                scaler.unscale_(optimizer)
                torch.nn.utils.clip_grad_norm_(model.parameters(), config.grad_clip)
                optimizer.zero_grad(set_to_none=True)
                scaler.step(optimizer)
                scaler.update()
        """,
        files={"model.py": """
        import torch.nn as nn
        import torch.nn.functional as F


        class GPT(nn.Module):
            def __init__(self, config):
                super().__init__()
                self.head = nn.Linear(config.width, config.vocab)

            def forward(self, x, y):
                logits = self.head(x)
                return logits, F.cross_entropy(logits.flatten(0, 1), y.flatten())
        """},
        fixed="""
        import torch

        from model import GPT


        def train(config, get_batch, max_iters):
            model = GPT(config).cuda()
            optimizer = torch.optim.AdamW(model.parameters(), lr=config.lr)
            scaler = torch.cuda.amp.GradScaler()
            x, y = get_batch("train")
            for _ in range(max_iters):
                for _micro_step in range(config.accumulation_steps):
                    with torch.autocast("cuda", dtype=torch.float16):
                        _, loss = model(x, y)
                        loss = loss / config.accumulation_steps
                    x, y = get_batch("train")
                    scaler.scale(loss).backward()
                scaler.unscale_(optimizer)
                torch.nn.utils.clip_grad_norm_(model.parameters(), config.grad_clip)
                scaler.step(optimizer)
                optimizer.zero_grad(set_to_none=True)
                scaler.update()
        """,
        at="optimizer.zero_grad(set_to_none=True)",
    ),
    Fires(  # a worker object in another file: its forward_backward clears what the earlier micro-batches left, and its
            # optim_step (the same object's optimizer) steps once after the loop
        """
        from worker import PolicyWorker


        def train(policy, batches, micro_batches, lr):
            worker = PolicyWorker(policy, lr)
            for batch in batches:
                for micro in batch.chunk(micro_batches):
                    worker.forward_backward(micro)
                worker.optim_step()
        """,
        files={"worker.py": """
        import torch


        class PolicyWorker:
            def __init__(self, policy, lr):
                self.policy = policy
                self.optimizer = torch.optim.AdamW(policy.parameters(), lr=lr)

            def forward_backward(self, micro):
                self.optimizer.zero_grad(set_to_none=True)
                loss = -self.policy(micro).mean()
                loss.backward()
                return loss.item()

            def optim_step(self):
                torch.nn.utils.clip_grad_norm_(self.policy.parameters(), 1.0)
                self.optimizer.step()
        """},
        no_fix=True,
        at="worker.forward_backward(micro)",
    ),
    Fires(  # the same split inside one trainer: train_step's micro-batch loop runs a method that clears, then steps
        """
        import torch
        import torch.nn.functional as F


        class Trainer:
            def __init__(self, model, lr):
                self.model = model
                self.optimizer = torch.optim.AdamW(model.parameters(), lr=lr)

            def forward_backward(self, inputs, labels):
                self.optimizer.zero_grad()
                loss = F.cross_entropy(self.model(inputs), labels)
                loss.backward()
                return loss.item()

            def optim_step(self):
                self.optimizer.step()

            def train_step(self, inputs, labels, micro_batches):
                for x, y in zip(inputs.chunk(micro_batches), labels.chunk(micro_batches)):
                    self.forward_backward(x, y)
                self.optim_step()
        """,
        no_fix=True,
        at="self.optimizer.zero_grad()",
    ),
    Fires(  # a trainer built from another file: its reset() clears the optimizer that `trainer.optimizer` names
        """
        import torch.nn.functional as F

        from trainer_lib import Trainer


        def main(model, loader):
            trainer = Trainer(model)
            for images, labels in loader:
                loss = F.cross_entropy(model(images), labels)
                loss.backward()
                trainer.reset()
                trainer.optimizer.step()
        """,
        files={"trainer_lib.py": """
        import torch


        class Trainer:
            def __init__(self, model):
                self.model = model
                self.optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

            def reset(self):
                self.optimizer.zero_grad()
        """},
        no_fix=True,
        at="trainer.reset()",
    ),
    Fires(  # AMP gradient accumulation: only the AMP side of the micro-batch loop clears, on every pass
        """
        import torch


        def train(model, loader, optimizer, scaler, accumulation_steps, use_amp):
            for batch in loader:
                for micro in batch.chunk(accumulation_steps):
                    if use_amp:
                        optimizer.zero_grad()
                        with torch.autocast("cuda", dtype=torch.float16):
                            loss = model(micro).mean() / accumulation_steps
                        scaler.scale(loss).backward()
                    else:
                        loss = model(micro).mean() / accumulation_steps
                        loss.backward()
                if use_amp:
                    scaler.step(optimizer)
                    scaler.update()
                else:
                    optimizer.step()
                optimizer.zero_grad()
        """,
        no_fix=True,
        at="optimizer.zero_grad()",
    ),
    Fires(  # a step function counting its calls on the object: it steps once the count reaches N, clears on every call
        """
        import torch.nn.functional as F


        class Learner:
            def __init__(self, model, optimizer, accumulation_steps):
                self.model = model
                self.optimizer = optimizer
                self.accumulation_steps = accumulation_steps
                self.micro_step = 0

            def train_step(self, inputs, labels):
                self.optimizer.zero_grad()
                loss = F.cross_entropy(self.model(inputs), labels) / self.accumulation_steps
                loss.backward()
                self.micro_step += 1
                if self.micro_step >= self.accumulation_steps:
                    self.optimizer.step()
                    self.micro_step = 0
                return loss.item()
        """,
        no_fix=True,
        at="self.optimizer.zero_grad()",
    ),
    Fires(  # the clearing and the step share one every-N test on the object's counter, the clearing before the backward:
        # the call that steps clears the N - 1 calls' gradients first
        """
        class CausalLMTrainer:
            def __init__(self, model, optimizer, scaler, gradient_accumulation_steps):
                self.model = model
                self.optimizer = optimizer
                self.scaler = scaler
                self.gradient_accumulation_steps = gradient_accumulation_steps
                self.global_step = 0

            def training_step(self, batch):
                if self.global_step % self.gradient_accumulation_steps == 0:
                    self.optimizer.zero_grad(set_to_none=True)
                loss = self.model(**batch).loss / self.gradient_accumulation_steps
                self.scaler.scale(loss).backward()
                if self.global_step % self.gradient_accumulation_steps == 0:
                    self.scaler.step(self.optimizer)
                    self.scaler.update()
                self.global_step += 1
                return loss.detach()
        """,
        no_fix=True,
        at="self.optimizer.zero_grad(set_to_none=True)",
    ),
    Fires(  # the same in a loop, the test bound to a name once per iteration, the model from another file
        """
        import torch
        import torch.nn.functional as F

        from models import Classifier


        def fit(loader, grad_accum, lr):
            model = Classifier().cuda()
            optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
            scaler = torch.cuda.amp.GradScaler()
            for i, (images, labels) in enumerate(loader):
                accumulating = (i + 1) % grad_accum != 0
                if not accumulating:
                    optimizer.zero_grad()
                with torch.autocast("cuda"):
                    loss = F.cross_entropy(model(images.cuda()), labels.cuda()) / grad_accum
                scaler.scale(loss).backward()
                if not accumulating:
                    scaler.step(optimizer)
                    scaler.update()
        """,
        files={"models.py": """
        import torch.nn as nn


        class Classifier(nn.Module):
            def __init__(self):
                super().__init__()
                self.net = nn.Sequential(nn.Flatten(), nn.Linear(784, 10))

            def forward(self, x):
                return self.net(x)
        """},
        no_fix=True,
        at="optimizer.zero_grad()",
    ),
    Fires(  # the trainer clears through a method of its own on every batch and steps when a method of its own says the
        # count is due: the step applies the last batch's gradient alone
        """
        import torch

        from schedule import build_optimizer


        class Trainer:
            def __init__(self, model, cfg):
                self.model = model
                self.optimizer = build_optimizer(model, cfg)
                self.accum = cfg.accum
                self.scaler = torch.cuda.amp.GradScaler(enabled=cfg.amp)
                self.micro_steps = 0

            def zero_grad(self):
                self.optimizer.zero_grad(set_to_none=True)

            def backward(self, loss):
                self.scaler.scale(loss / self.accum).backward()

            def should_step(self):
                return self.micro_steps % self.accum == 0

            def optimizer_step(self):
                self.scaler.step(self.optimizer)
                self.scaler.update()

            def train_epoch(self, loader):
                for batch in loader:
                    self.zero_grad()
                    self.backward(self.model(**batch).loss)
                    self.micro_steps += 1
                    if self.should_step():
                        self.optimizer_step()
        """,
        files={"schedule.py": """
        import torch


        def build_optimizer(model, cfg):
            return torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
        """},
        no_fix=True,
        at="self.optimizer.zero_grad(set_to_none=True)",
    ),
)

ZeroGradBeforeStep.MUST_NOT_FIRE = (
    Quiet(  # the optimizer is set to collect statistics around the Fisher pass (its own backward hooks read it)
        _FISHER_WITH_STATS,
        files={"curvature.py": _CURVATURE_OPTIMIZER},
    ),
    Quiet(  # twin: the probe has its own optimizer; clearing it between the passes leaves the backbone's gradients alone
        _PROBED_SEPARATE,
        files={"probes.py": _LINEAR_PROBE},
    ),
    Quiet(  # Swin-style: the accumulating side clears where it steps; the other side steps every iteration, so
        # clearing before each backward there is the plain order
        """
        import torch


        def train_one_epoch(model, criterion, loader, optimizer, scaler, accumulation_steps):
            model.train()
            optimizer.zero_grad()
            for idx, (samples, targets) in enumerate(loader):
                outputs = model(samples.cuda(non_blocking=True))
                if accumulation_steps > 1:
                    loss = criterion(outputs, targets.cuda(non_blocking=True)) / accumulation_steps
                    scaler.scale(loss).backward()
                    if (idx + 1) % accumulation_steps == 0:
                        scaler.step(optimizer)
                        optimizer.zero_grad()
                        scaler.update()
                else:
                    loss = criterion(outputs, targets.cuda(non_blocking=True))
                    optimizer.zero_grad()
                    scaler.scale(loss).backward()
                    scaler.step(optimizer)
                    scaler.update()
        """,
    ),
    Quiet(  # both precisions accumulate and each side clears only right after its own step
        """
        import torch


        def train(model, optimizer, loader, accum_steps, fp16):
            scaler = torch.cuda.amp.GradScaler(enabled=fp16)
            for step, batch in enumerate(loader):
                if fp16:
                    with torch.autocast("cuda"):
                        loss = model(**batch).loss / accum_steps
                    scaler.scale(loss).backward()
                else:
                    loss = model(**batch).loss / accum_steps
                    loss.backward()
                if (step + 1) % accum_steps == 0:
                    if fp16:
                        scaler.step(optimizer)
                        scaler.update()
                    else:
                        optimizer.step()
                    optimizer.zero_grad()
        """,
    ),
    Quiet(  # twin: the gradients are cleared only after the step, so the slices of every document accumulate
        _SLICED_TRAINER.format(clear_every="", clear_after_step=_CLEAR_AFTER_STEP),
        files=_SLICED_FILES,
    ),
    Quiet(  # twin: a step after every document, so clearing at its top throws nothing away
        _SLICED_TRAINER.format(clear_every=_CLEAR_EVERY_DOCUMENT, clear_after_step="").replace(
            "if step % self.accumulation == 0:\n                        self.optimizer.step()", "self.optimizer.step()"
        ),
        files=_SLICED_FILES,
    ),
    Quiet(  # the base trainer's loop steps on every batch: the subclass's hook may clear before its backward
        """
        import torch


        class BaseTrainer:
            def __init__(self, model, optimizer):
                self.model = model
                self.optimizer = optimizer

            def training_step(self, batch):
                raise NotImplementedError

            def train_epoch(self, loader):
                self.model.train()
                for batch in loader:
                    self.training_step(batch)
                    torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
                    self.optimizer.step()
        """,
        files={"classifier.py": """
        import torch.nn.functional as F

        from train import BaseTrainer


        class ClassifierTrainer(BaseTrainer):
            def training_step(self, batch):
                images, labels = batch
                self.optimizer.zero_grad()
                loss = F.cross_entropy(self.model(images.cuda()), labels.cuda())
                loss.backward()
                return loss.detach()
        """},
    ),
    Quiet(  # Lightning: the encoder held still after each backward; an HF override clearing before its backward
        """
        import lightning.pytorch as pl
        from transformers import Trainer


        class Classifier(pl.LightningModule):
            def __init__(self, encoder, head):
                super().__init__()
                self.encoder = encoder
                self.head = head

            def training_step(self, batch, batch_idx):
                images, labels = batch
                return self.head(self.encoder(images)).cross_entropy(labels)

            def on_after_backward(self):
                if self.current_epoch < 2:  # a frozen backbone for the first epochs
                    self.encoder.zero_grad()


        class ResetFirst(Trainer):
            def training_step(self, model, inputs, num_items_in_batch=None):
                model.zero_grad()
                loss = self.compute_loss(model, inputs)
                self.accelerator.backward(loss)
                return loss.detach()
        """
    ),
    Quiet(  # part of the model held still on purpose: its gradients zeroed, the rest stepped
        """
        import torch


        def finetune(model, loader, epochs, freeze_embeddings=True):
            optimizer = torch.optim.AdamW(model.parameters(), lr=2e-5)
            for epoch in range(epochs):
                for batch in loader:
                    loss = model(**batch).loss
                    loss.backward()
                    if freeze_embeddings:
                        for param in model.embeddings.parameters():
                            param.grad = None
                    for name, param in model.named_parameters():
                        if "lm_head" in name:
                            param.grad.zero_()
                    optimizer.step()
                    optimizer.zero_grad()
        """
    ),
    Quiet(  # gradients averaged by hand across ranks: written, not cleared
        """
        import torch.distributed as dist


        def train(model, optimizer, loader, world_size):
            for x, y in loader:
                loss = model(x, y)
                loss.backward()
                for param in model.parameters():
                    dist.all_reduce(param.grad)
                    param.grad.div_(world_size)
                optimizer.step()
                optimizer.zero_grad()
        """
    ),
    Quiet(  # optimizers kept by name: all cleared before the backward, all stepped after it
        """
        import torch


        def fit(nets, batches, lr):
            optimizers = {key: torch.optim.SGD(net.parameters(), lr=lr) for key, net in nets.items()}
            for x, y in batches:
                for key in optimizers:
                    optimizers[key].zero_grad()
                loss = torch.nn.functional.cross_entropy(nets["head"](nets["body"](x)), y)
                loss.backward()
                for key in optimizers:
                    optimizers[key].step()
        """
    ),
    Quiet(  # the class's `zero_grad` clears the critic's optimizer; the actor's gradients reach its step
        """
        import torch


        class ActorCritic:
            def __init__(self, actor, critic):
                self.actor, self.critic = actor, critic
                self.actor_opt = torch.optim.Adam(actor.parameters())
                self.critic_opt = torch.optim.Adam(critic.parameters())

            def zero_grad(self):
                self.critic_opt.zero_grad()

            def update_actor(self, states):
                loss = -self.critic(states, self.actor(states)).mean()
                loss.backward()
                self.zero_grad()
                self.actor_opt.step()
        """
    ),
    Quiet(  # DeepSpeed: the engine steps, then the optimizer it handed back is cleared
        """
        import deepspeed


        def main(args, net, loader):
            engine, optimizer, _, _ = deepspeed.initialize(args=args, model=net, model_parameters=net.parameters())
            for batch in loader:
                loss = engine(batch)
                engine.backward(loss)
                engine.step()
                optimizer.zero_grad()
        """
    ),
    Quiet(  # two optimizers: clearing the discriminator's share of the generator's loss before its own backward
        """
        import torch


        def adversarial_step(generator, discriminator, g_optimizer, d_optimizer, real, noise):
            fake = generator(noise)
            g_optimizer.zero_grad()
            g_loss = -discriminator(fake).mean()
            g_loss.backward()
            d_optimizer.zero_grad()
            d_loss = discriminator(fake.detach()).mean() - discriminator(real).mean()
            d_loss.backward()
            d_optimizer.step()
            g_optimizer.step()
        """
    ),
    Quiet(  # the first backward's gradients are read (their norm logged) before the clearing
        """
        import torch


        def train(model, loader, optimizer, log):
            for inputs, aux_inputs in loader:
                optimizer.zero_grad()
                model(aux_inputs).mean().backward()
                log(sum(p.grad.norm() for p in model.parameters() if p.grad is not None))
                optimizer.zero_grad()
                model(inputs).mean().backward()
                optimizer.step()
        """
    ),
    Quiet(  # the same agent clearing only once it has stepped
        """
        import torch.nn.functional as F


        class DialogueAgent:
            def __init__(self, model, optimizer, update_freq):
                self.model = model
                self.optimizer = optimizer
                self.update_freq = update_freq
                self.pending_updates = 0

            def train_step(self, batch):
                self.model.train()
                scores = self.model(batch["text"])
                loss = F.cross_entropy(scores.view(-1, scores.size(-1)), batch["labels"].view(-1)) / self.update_freq
                loss.backward()
                if self.update_freq > 1:
                    self.pending_updates = (self.pending_updates + 1) % self.update_freq
                    if self.pending_updates != 0:
                        return
                self.optimizer.step()
                self.optimizer.zero_grad()
        """
    ),
    Quiet(  # the same step method, closure, counter and helper, each clearing where it should
        """
        import torch
        import torch.nn.functional as F


        class SegmentationTask:
            def __init__(self, network, optimizer, accumulation):
                self.network = network
                self.optimizer = optimizer
                self.accumulation = accumulation

            def training_step(self, images, masks):
                self.optimizer.zero_grad(set_to_none=True)
                loss = F.cross_entropy(self.network(images), masks)
                loss.backward()
                self.optimizer.step()
                return loss.item()

            def apply_gradients(self):
                self.optimizer.step()
                self.optimizer.zero_grad()

            def train_epoch(self, loader):
                for index, (images, masks) in enumerate(loader):
                    (F.cross_entropy(self.network(images), masks) / self.accumulation).backward()
                    if (index + 1) % self.accumulation == 0:
                        self.apply_gradients()


        def fit_style(image, target_features, extractor, steps):
            optimizer = torch.optim.LBFGS([image.requires_grad_()])
            for _ in range(steps):
                def closure():
                    optimizer.zero_grad()
                    loss = F.mse_loss(extractor(image), target_features)
                    loss.backward()
                    return loss

                optimizer.step(closure)


        def train(model, optimizer, loader, accum):
            pending = 0
            for waveform, target in loader:
                (F.l1_loss(model(waveform), target) / accum).backward()
                pending += 1
                if pending == accum:
                    optimizer.step()
                    optimizer.zero_grad()
                    pending = 0
        """
    ),
    Quiet(  # the method only runs the backward; the loop clears where it steps
        """
        import torch


        class Learner:
            def __init__(self, model, optimizer, accumulate):
                self.model = model
                self.optimizer = optimizer
                self.accumulate = accumulate

            def training_pass(self, images, labels):
                loss = torch.nn.functional.cross_entropy(self.model(images), labels) / self.accumulate
                loss.backward()
                return loss.item()

            def fit(self, loader):
                for it, (images, labels) in enumerate(loader):
                    self.training_pass(images.cuda(), labels.cuda())
                    if (it + 1) % self.accumulate == 0:
                        self.optimizer.step()
                        self.optimizer.zero_grad()
        """
    ),
    Quiet(  # the same two loops, clearing only where they step
        """
        import torch


        def train(model, optimizer, get_batch, max_iters, accumulation_iters):
            scaler = torch.cuda.amp.GradScaler()
            model.train()
            for iter_num in range(max_iters):
                is_accumulating = (iter_num + 1) % accumulation_iters != 0
                x, y = get_batch("train")
                with torch.autocast("cuda", dtype=torch.bfloat16):
                    logits, loss = model(x, y)
                scaler.scale(loss / accumulation_iters).backward()
                if not is_accumulating:
                    scaler.step(optimizer)
                    scaler.update()
                    optimizer.zero_grad(set_to_none=True)


        def train_epoch(model, optimizer, loader, grad_accum_steps):
            for step, batch in enumerate(loader):
                loss = model(**batch).loss / grad_accum_steps
                loss.backward()
                if (step + 1) % grad_accum_steps != 0:
                    continue
                optimizer.step()
                optimizer.zero_grad()
        """
    ),
    Quiet(  # clearing right after the every-N step; a critic stepped every iteration, the generator every N
        """
        import torch


        def train(model, loader, optimizer, criterion, accumulation_steps):
            for i, (x, y) in enumerate(loader):
                loss = criterion(model(x), y) / accumulation_steps
                loss.backward()
                if (i + 1) % accumulation_steps == 0:
                    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                    optimizer.step()
                    optimizer.zero_grad()


        def train_wgan(generator, critic, loader, opt_g, opt_c, n_critic, z_dim):
            for i, real in enumerate(loader):
                opt_c.zero_grad()
                fake = generator(torch.randn(real.size(0), z_dim))
                loss_c = critic(fake.detach()).mean() - critic(real).mean()
                loss_c.backward()
                opt_c.step()
                if i % n_critic == 0:
                    opt_g.zero_grad()
                    loss_g = -critic(generator(torch.randn(real.size(0), z_dim))).mean()
                    loss_g.backward()
                    opt_g.step()
        """
    ),
    Quiet(  # gradient surgery: each task's gradient is kept before the next clearing, then written back
        """
        import torch


        def train(model, loader, optimizer, task_losses):
            params = [p for p in model.parameters() if p.requires_grad]
            for batch in loader:
                grads = []
                for task_loss in task_losses:
                    optimizer.zero_grad()
                    task_loss(model, batch).backward()
                    grads.append([p.grad.detach().clone() for p in params])
                for p, task_grads in zip(params, zip(*grads)):
                    p.grad = torch.stack(task_grads).mean(0)
                optimizer.step()
        """
    ),
    Quiet(
        """
        for x, y in loader:
            optimizer.zero_grad()
            loss = criterion(model(x), y)
            loss.backward()
            optimizer.step()
        """
    ),
    Quiet(
        """
        for x, y in loader:
            loss = criterion(model(x), y)
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
        """
    ),
    Quiet(
        """
        for real in loader:
            loss_d = d_loss(real)
            loss_d.backward()
            opt_g.zero_grad()
            opt_d.step()
            opt_d.zero_grad()
        """
    ),
    Quiet(
        """
        for i, (x, y) in enumerate(loader):
            loss = criterion(model(x), y) / accum
            loss.backward()
            if (i + 1) % accum == 0:
                optimizer.step()
                optimizer.zero_grad()
        """
    ),
    Quiet(
        """
        for x, y in loader:
            loss = criterion(model(x), y)
            loss.backward()
            if torch.isnan(loss):
                optimizer.zero_grad()
                continue
            optimizer.step()
        """
    ),
    Quiet(
        """
        for x, y in loader:
            loss = criterion(model(x), y)
            loss.backward()
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad()
        """
    ),
    Quiet(
        """
        for x in loader:
            encoder_loss = enc(x)
            encoder_loss.backward()
            enc_opt.step()
            dec_opt.zero_grad()
            decoder_loss = dec(x)
            decoder_loss.backward()
            dec_opt.step()
        """
    ),
    Quiet(  # the same learner clearing where it steps
        """
        import torch.nn.functional as F


        class Learner:
            def __init__(self, model, optimizer, accumulation_steps):
                self.model = model
                self.optimizer = optimizer
                self.accumulation_steps = accumulation_steps
                self.micro_steps = 0

            def backward(self, loss):
                (loss / self.accumulation_steps).backward()

            def maybe_step(self):
                self.micro_steps += 1
                if self.micro_steps % self.accumulation_steps == 0:
                    self.optimizer.step()
                    self.optimizer.zero_grad(set_to_none=True)

            def fit(self, loader):
                for inputs, labels in loader:
                    self.backward(F.cross_entropy(self.model(inputs), labels))
                    self.maybe_step()
        """
    ),
    Quiet(  # each micro-batch's gradient is kept before the next pass clears it (per-sample clipping by hand)
        """
        import torch


        def train(model, loader, optimizer, scaler, accum, max_norm):
            for batch in loader:
                summed = [torch.zeros_like(p) for p in model.parameters()]
                for micro in batch.chunk(accum):
                    for p in model.parameters():
                        p.grad = None
                    scaler.scale(model(micro).mean()).backward()
                    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
                    for total, p in zip(summed, model.parameters()):
                        total.add_(p.grad)
                for total, p in zip(summed, model.parameters()):
                    p.grad = total / accum
                scaler.step(optimizer)
                scaler.update()
        """,
    ),
    Quiet(  # the helper the micro-batch loop calls clears and steps the critic's optimizer, not the one stepped after the loop
        """
        import torch
        from engine import critic_pass


        def train(actor, critic, loader, actor_opt, critic_opt, scaler, accum):
            for batch in loader:
                for micro in batch.chunk(accum):
                    critic_pass(critic, micro, critic_opt, scaler)
                    scaler.scale(actor(micro).mean() / accum).backward()
                scaler.step(actor_opt)
                scaler.update()
        """,
        files={"engine.py": """
        def critic_pass(critic, micro, optimizer, scaler):
            optimizer.zero_grad()
            scaler.scale(critic(micro).mean()).backward()
            scaler.step(optimizer)
        """},
    ),
    Quiet(  # several optimizers in a dict, each cleared before the backward and stepped after it, in loops over them
        """
        def train_epoch(model, loader, optimizers, criterion):
            for inputs, labels in loader:
                for optimizer in optimizers.values():
                    optimizer.zero_grad()
                loss = criterion(model(inputs), labels)
                loss.backward()
                for optimizer in optimizers.values():
                    optimizer.step()
        """
    ),
    Quiet(  # a GAN's two optimizers by key, each cleared before its own network's backward
        """
        def train(generator, discriminator, optimizers, loader, noise_dim):
            for real in loader:
                fake = generator(torch.randn(real.size(0), noise_dim))
                optimizers["D"].zero_grad()
                d_loss = discriminator(fake.detach()).mean() - discriminator(real).mean()
                d_loss.backward()
                optimizers["D"].step()
                optimizers["G"].zero_grad()
                g_loss = -discriminator(fake).mean()
                g_loss.backward()
                optimizers["G"].step()
        """
    ),
    Quiet(  # a step on empty gradients before training, to build the optimizer's state before loading a checkpoint
        """
        import torch


        def resume(model, optimizer, loader, path):
            optimizer.zero_grad()
            optimizer.step()
            optimizer.load_state_dict(torch.load(path)["optimizer"])
            for x, y in loader:
                optimizer.zero_grad()
                model(x, y).backward()
                optimizer.step()
        """
    ),
    Quiet(  # the step at the top of each pass applies what the previous pass's backward left, then clears
        """
        def train(model, loader, optimizer):
            for step, batch in enumerate(loader):
                if step > 0:
                    optimizer.step()
                    optimizer.zero_grad()
                loss = model(**batch).loss
                loss.backward()
        """
    ),
    Quiet(  # DCGAN as written: the discriminator cleared once before both halves, the generator before its own backward
        """
        import torch
        import torch.optim as optim


        def train(netG, netD, dataloader, criterion, nz):
            optimizerD = optim.Adam(netD.parameters(), lr=2e-4)
            optimizerG = optim.Adam(netG.parameters(), lr=2e-4)
            for real, _ in dataloader:
                netD.zero_grad()
                output = netD(real).view(-1)
                criterion(output, torch.ones_like(output)).backward()
                fake = netG(torch.randn(real.size(0), nz, 1, 1))
                output = netD(fake.detach()).view(-1)
                criterion(output, torch.zeros_like(output)).backward()
                optimizerD.step()
                netG.zero_grad()
                output = netD(fake).view(-1)
                criterion(output, torch.ones_like(output)).backward()
                optimizerG.step()
        """
    ),
    Quiet(  # `opt` holds the run's options and counts its iterations: no optimizer, whatever its name (optproto)
        """
        import torch
        import torch.nn.functional as F


        class TrainState:
            def __init__(self, base_lr, warmup):
                self.base_lr, self.warmup, self.iteration = base_lr, warmup, 0

            def step(self):
                self.iteration += 1

            def lr(self):
                return self.base_lr * min(1.0, (self.iteration + 1) / self.warmup)


        def fit(model, data, base_lr):
            opt = TrainState(base_lr, warmup=1000)
            for x, y in data:
                loss = F.cross_entropy(model(x), y)
                loss.backward()
                with torch.no_grad():
                    for p in model.parameters():
                        p -= opt.lr() * p.grad
                model.zero_grad()
                opt.step()
        """
    ),
    Quiet(  # a scheduler named for the optimizer it is built on: the weights were updated by hand before the clearing
        """
        import torch
        import torch.nn.functional as F


        def fit(model, data, optimizer, lr_lambda):
            optim_schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda)
            for x, y in data:
                loss = F.cross_entropy(model(x), y)
                loss.backward()
                with torch.no_grad():
                    for p in model.parameters():
                        p -= 0.01 * p.grad
                model.zero_grad()
                optim_schedule.step()
        """
    ),
    Quiet(  # the trainer's own `step()` steps, then clears: called after the backward (twin of the firing one)
        """
        import torch
        import torch.nn.functional as F


        class Trainer:
            def __init__(self, model, lr, max_norm):
                self.model = model
                self.optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
                self.max_norm = max_norm

            def step(self):
                torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.max_norm)
                self.optimizer.step()
                self.optimizer.zero_grad(set_to_none=True)

            def fit(self, loader):
                for images, labels in loader:
                    loss = F.cross_entropy(self.model(images), labels)
                    loss.backward()
                    self.step()
        """
    ),
    Quiet(  # the optimizer wrapper cleared before the backward, stepped after it
        """
        import torch.nn.functional as F

        from optim_utils import ScheduledOptim


        def train(model, optimizer, loader, warmup):
            sched = ScheduledOptim(optimizer, warmup)
            for src, tgt in loader:
                sched.zero_grad()
                loss = F.cross_entropy(model(src), tgt)
                loss.backward()
                sched.step_and_update_lr()
        """,
        files={"optim_utils.py": """
        class ScheduledOptim:
            def __init__(self, optimizer, warmup):
                self._optimizer = optimizer
                self.warmup = warmup
                self.steps = 0

            def zero_grad(self):
                self._optimizer.zero_grad()

            def step_and_update_lr(self):
                self.steps += 1
                for group in self._optimizer.param_groups:
                    group["lr"] = min(1.0, self.steps / self.warmup) * 1e-3
                self._optimizer.step()
        """},
    ),
    Quiet(  # every trainable gradient set to None before the backward; after it, only a frozen part picked by name
        """
        import torch
        import torch.nn.functional as F


        def train(model, loader, lr):
            params = [p for p in model.parameters() if p.requires_grad]
            frozen = [p for n, p in model.named_parameters() if n.startswith("encoder.")]
            optimizer = torch.optim.SGD(params, lr=lr, momentum=0.9)
            for x, y in loader:
                for p in params:
                    p.grad = None
                loss = F.cross_entropy(model(x), y)
                loss.backward()
                for p in frozen:
                    p.grad = None
                optimizer.step()
        """
    ),
    Quiet(  # the same loop clearing through the prepared optimizer, which accelerate skips with its step
        """
        import argparse

        from accelerate import Accelerator


        def main():
            parser = argparse.ArgumentParser()
            parser.add_argument("--gradient_accumulation_steps", type=int, default=4)
            args = parser.parse_args()
            accelerator = Accelerator(gradient_accumulation_steps=args.gradient_accumulation_steps, mixed_precision="bf16")
            model, optimizer, train_dataloader, lr_scheduler = accelerator.prepare(*build(args))
            model.train()
            for batch in train_dataloader:
                with accelerator.accumulate(model):
                    outputs = model(**batch)
                    accelerator.backward(outputs.loss)
                    if accelerator.sync_gradients:
                        accelerator.clip_grad_norm_(model.parameters(), 1.0)
                    optimizer.step()
                    lr_scheduler.step()
                    optimizer.zero_grad(set_to_none=True)


        if __name__ == "__main__":
            main()
        """
    ),
    Quiet(  # no accumulation: the accelerator steps on every pass, so the model's clearing after the step is fine
        """
        from accelerate import Accelerator


        def train(model, optimizer, loader):
            accelerator = Accelerator(gradient_accumulation_steps=1)
            model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
            for batch in loader:
                with accelerator.accumulate(model):
                    accelerator.backward(model(**batch).loss)
                    optimizer.step()
                    model.zero_grad()
        """
    ),
    Quiet(  # the same helper, the batch cleared once before its shards (twin of the firing one)
        """
        import torch


        def compute_forward(model, criterion, src, tgt, eval=False, normalization=1.0):
            if not eval:
                model.train()
                with torch.enable_grad():
                    loss = criterion(model(src, tgt[:, :-1]), tgt[:, 1:]).sum() / normalization
                torch.autograd.backward(loss)
                return loss.item()
            model.eval()
            with torch.no_grad():
                return (criterion(model(src, tgt[:, :-1]), tgt[:, 1:]).sum() / normalization).item()


        def train(model, criterion, optimizer, batches, update_cycle):
            for src, tgt in batches:
                model.zero_grad()
                for src_t, tgt_t in zip(src.chunk(update_cycle), tgt.chunk(update_cycle)):
                    compute_forward(model, criterion, src_t, tgt_t, eval=False, normalization=len(src))
                optimizer.step()
        """
    ),
    Quiet(  # which branch the helper takes is the caller's run-time flag: nothing says it backwards on every shard
        """
        import torch


        def compute_forward(model, criterion, src, tgt, eval=False, normalization=1.0):
            if not eval:
                model.train()
                with torch.enable_grad():
                    loss = criterion(model(src, tgt[:, :-1]), tgt[:, 1:]).sum() / normalization
                torch.autograd.backward(loss)
                return loss.item()
            model.eval()
            with torch.no_grad():
                return (criterion(model(src, tgt[:, :-1]), tgt[:, 1:]).sum() / normalization).item()


        def train(model, criterion, optimizer, batches, update_cycle, frozen):
            for src, tgt in batches:
                for src_t, tgt_t in zip(src.chunk(update_cycle), tgt.chunk(update_cycle)):
                    model.zero_grad()
                    compute_forward(model, criterion, src_t, tgt_t, eval=frozen, normalization=len(src))
                optimizer.step()
        """
    ),
    Quiet(  # the micro-batch loop accumulates, the step applies the sum, the clearing follows it (twin of the firing one)
        """
        import torch


        def train(model, optimizer, scaler, get_batch, max_iters, accumulation_steps, grad_clip):
            x, y = get_batch("train")
            for _ in range(max_iters):
                for _micro_step in range(accumulation_steps):
                    with torch.autocast("cuda", dtype=torch.float16):
                        _, loss = model(x, y)
                    x, y = get_batch("train")
                    scaler.scale(loss / accumulation_steps).backward()
                scaler.unscale_(optimizer)
                torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
                scaler.step(optimizer)
                scaler.update()
                optimizer.zero_grad(set_to_none=True)
        """
    ),
    Quiet(  # each micro-batch loop runs a training loop of its own, stepping inside: nothing adds up for the outer step
        """
        import torch.nn.functional as F


        def train(model, tasks, inner_optimizer, meta_optimizer, meta_loss):
            for task in tasks:
                for x, y in task:
                    inner_optimizer.zero_grad()
                    F.cross_entropy(model(x), y).backward()
                    inner_optimizer.step()
                meta_optimizer.zero_grad()
                meta_loss(model).backward()
                meta_optimizer.step()
        """
    ),
    Quiet(  # two workers of one class: the actor's forward_backward clears the actor's optimizer, not the critic's
        """
        from worker import PolicyWorker


        def train(actor_net, critic_net, batches, micro_batches, lr):
            actor = PolicyWorker(actor_net, lr)
            critic = PolicyWorker(critic_net, lr)
            for batch in batches:
                for micro in batch.chunk(micro_batches):
                    actor.forward_backward(micro)
                    actor.optim_step()
                    critic.accumulate(micro)
                critic.optim_step()
        """,
        files={"worker.py": """
        import torch


        class PolicyWorker:
            def __init__(self, policy, lr):
                self.policy = policy
                self.optimizer = torch.optim.AdamW(policy.parameters(), lr=lr)

            def forward_backward(self, micro):
                self.optimizer.zero_grad(set_to_none=True)
                loss = -self.policy(micro).mean()
                loss.backward()
                return loss.item()

            def accumulate(self, micro):
                self.policy(micro).mean().backward()

            def optim_step(self):
                self.optimizer.step()
                self.optimizer.zero_grad(set_to_none=True)
        """},
    ),
    Quiet(  # the worker cleared before the micro-batch loop, stepped after it (twin of the firing one)
        """
        from worker import PolicyWorker


        def train(policy, batches, micro_batches, lr):
            worker = PolicyWorker(policy, lr)
            for batch in batches:
                worker.zero_grads()
                for micro in batch.chunk(micro_batches):
                    worker.forward_backward(micro)
                worker.optim_step()
        """,
        files={"worker.py": """
        import torch


        class PolicyWorker:
            def __init__(self, policy, lr):
                self.policy = policy
                self.optimizer = torch.optim.AdamW(policy.parameters(), lr=lr)

            def zero_grads(self):
                self.optimizer.zero_grad(set_to_none=True)

            def forward_backward(self, micro):
                loss = -self.policy(micro).mean()
                loss.backward()
                return loss.item()

            def optim_step(self):
                self.optimizer.step()
        """},
    ),
    Quiet(  # the other trainer's reset() clears the other model's optimizer: the student's gradients stay
        """
        import torch
        import torch.nn.functional as F


        class Trainer:
            def __init__(self, model):
                self.model = model
                self.optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

            def reset(self):
                self.optimizer.zero_grad()


        def main(student_net, teacher_net, loader):
            student = Trainer(student_net)
            teacher = Trainer(teacher_net)
            for x, y in loader:
                student.reset()
                loss = F.cross_entropy(student_net(x), y)
                loss.backward()
                teacher.reset()
                student.optimizer.step()
        """
    ),
    Quiet(  # the AMP side of the micro-batch loop clears only on its first pass (the pass index is the loop's own)
        """
        import torch


        def train(model, loader, optimizer, scaler, accumulation_steps, use_amp):
            for batch in loader:
                for index, micro in enumerate(batch.chunk(accumulation_steps)):
                    if use_amp and index == 0:
                        optimizer.zero_grad()
                    with torch.autocast("cuda", dtype=torch.float16, enabled=use_amp):
                        loss = model(micro).mean() / accumulation_steps
                    scaler.scale(loss).backward()
                scaler.step(optimizer)
                scaler.update()
        """
    ),
    Quiet(  # the step function clears where it steps, once the count on the object reaches N (twin of the firing one)
        """
        import torch.nn.functional as F


        class Learner:
            def __init__(self, model, optimizer, accumulation_steps):
                self.model = model
                self.optimizer = optimizer
                self.accumulation_steps = accumulation_steps
                self.micro_step = 0

            def train_step(self, inputs, labels):
                loss = F.cross_entropy(self.model(inputs), labels) / self.accumulation_steps
                loss.backward()
                self.micro_step += 1
                if self.micro_step >= self.accumulation_steps:
                    self.optimizer.step()
                    self.optimizer.zero_grad()
                    self.micro_step = 0
                return loss.item()
        """
    ),
    Quiet(  # twin: the counter moves on between the clearing and the step, so the clearing follows the last step
        """
        class CausalLMTrainer:
            def __init__(self, model, optimizer, gradient_accumulation_steps):
                self.model = model
                self.optimizer = optimizer
                self.gradient_accumulation_steps = gradient_accumulation_steps
                self.global_step = 0

            def training_step(self, batch):
                if self.global_step % self.gradient_accumulation_steps == 0:
                    self.optimizer.zero_grad(set_to_none=True)
                loss = self.model(**batch).loss / self.gradient_accumulation_steps
                loss.backward()
                self.global_step += 1
                if self.global_step % self.gradient_accumulation_steps == 0:
                    self.optimizer.step()
                return loss.detach()
        """
    ),
    Quiet(  # twin: the clearing tests this iteration, the step the next one (`(i + 1) % N`): it clears after each step
        """
        import torch
        import torch.nn.functional as F

        from models import Classifier


        def fit(loader, grad_accum, lr):
            model = Classifier().cuda()
            optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
            for i, (images, labels) in enumerate(loader):
                if i % grad_accum == 0:
                    optimizer.zero_grad()
                loss = F.cross_entropy(model(images.cuda()), labels.cuda()) / grad_accum
                loss.backward()
                if (i + 1) % grad_accum == 0:
                    optimizer.step()
        """,
        files={"models.py": """
        import torch.nn as nn


        class Classifier(nn.Module):
            def __init__(self):
                super().__init__()
                self.net = nn.Sequential(nn.Flatten(), nn.Linear(784, 10))

            def forward(self, x):
                return self.net(x)
        """},
    ),
    Quiet(  # twin: the trainer clears through its own method right after the step its own method says is due
        """
        import torch

        from schedule import build_optimizer


        class Trainer:
            def __init__(self, model, cfg):
                self.model = model
                self.optimizer = build_optimizer(model, cfg)
                self.accum = cfg.accum
                self.scaler = torch.cuda.amp.GradScaler(enabled=cfg.amp)
                self.micro_steps = 0

            def zero_grad(self):
                self.optimizer.zero_grad(set_to_none=True)

            def backward(self, loss):
                self.scaler.scale(loss / self.accum).backward()

            def should_step(self):
                return self.micro_steps % self.accum == 0

            def optimizer_step(self):
                self.scaler.step(self.optimizer)
                self.scaler.update()

            def train_epoch(self, loader):
                for batch in loader:
                    self.backward(self.model(**batch).loss)
                    self.micro_steps += 1
                    if self.should_step():
                        self.optimizer_step()
                        self.zero_grad()
        """,
        files={"schedule.py": """
        import torch


        def build_optimizer(model, cfg):
            return torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
        """},
    ),
)
