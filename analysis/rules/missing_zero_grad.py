"""Gradients are never cleared in a training loop, so every step applies the sum of all past gradients.

`.backward()` does not overwrite `.grad`, it adds to it. Unless something clears the gradients
each step (`optimizer.zero_grad()`, `model.zero_grad()`, `p.grad = None`), the update at step
k is the sum of the gradients of steps 1..k: the effective learning rate grows every step, the
loss diverges or plateaus, and the run produces a useless checkpoint after the GPU hours are
spent. Nothing crashes, so the bug usually surfaces as "the model does not learn". Lightning
clears gradients for you, except under manual optimisation (`self.automatic_optimization =
False`), where `training_step` must call `opt.zero_grad()` itself.

A function that runs one whole training step per call (a GAN's `update(batch)`, its loop in another
file) and clears one model's gradients but not those of another model whose optimizer it steps is
reported too (a warning: the loop that repeats it is out of sight).

Clearing after the step is too late when a loss backwarded before it runs through a model that a second
optimizer holds: a generator's adversarial loss through the discriminator (`D(G(z))`, or an autoencoder's
`vae(x, return_loss=True)` that runs its own `vae.discr`), stepped by the generator's optimizer, leaves its
gradients in the discriminator, and the discriminator's step applies them with its own loss's unless
something clears them in between (a warning; quiet when the step sets `requires_grad` anywhere, as freezing
the discriminator for the generator's loss is the other fix, and when that forward's output reaches the
backward only through `.detach()`).

How to fix: call `optimizer.zero_grad()` (set_to_none is the default) once per optimizer step,
either right before the backward or right after `optimizer.step()`. For gradient accumulation,
clear only when you step (`if (i + 1) % accum == 0: optimizer.step(); optimizer.zero_grad()`).
"""

from __future__ import annotations

import builtins
import re
from dataclasses import dataclass

import libcst as cst

from trainlint.analysis.frameworks import manual_optimization
from trainlint.analysis.libraries import LEAVES_GRADIENTS, call_fact
from trainlint.analysis.patterns import is_gradient_key
from trainlint.analysis.stepping import runs_as_an_engine, stepped_optimizer
from trainlint.rules import (
    AssignEvent,
    CallEvent,
    Condition,
    Event,
    Fires,
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
    clears_gradients,
    dotted,
    is_optimizer_step,
    is_test_file,
    is_torch_name,
    ordered_events,
    path_conditions,
    shortened,
    walk,
    written,
)

# torch.Tensor's arithmetic (in place: "Tensor.add_ ... in-place version of add()", it writes the tensor it is called
# on; out of place, it makes a new one) and its copies: called on a parameter (an EMA update, a weight decay by hand)
# none of them touches a `.grad`.
_WRITES_VALUES = frozenset({
    "add_", "sub_", "mul_", "div_", "lerp_", "addcmul_", "addcdiv_", "clamp_", "clamp_min_", "clamp_max_", "mul", "add",
    "sub", "div", "lerp", "copy_", "data_ptr", "detach", "clone",
})
_KNOWN_RECEIVERS = frozenset({Tag.SCALER, Tag.ACCELERATOR, Tag.OPTIMIZER, Tag.MODEL, Tag.ENGINE, Tag.CRITERION})

Item = tuple[Event, tuple[CallEvent, ...]]


def _needed(event: Event) -> bool:
    """What every finding starts from: a backward that adds into ``.grad`` (Lightning's ``manual_backward`` too)."""
    return accumulates_into_grad(event) or (isinstance(event, CallEvent) and event.method == "manual_backward")


class MissingZeroGrad(Rule):
    code = "TL201"
    name = "missing-zero-grad"
    severity = Severity.ERROR
    scope_needs = _needed

    def check_scope(self, ctx: RuleContext, scope: ScopeAnalysis) -> None:
        if is_test_file(ctx.module.path):
            return  # a test's mock training runs a few steps to exercise code, not to train a model
        if scope.function is not None and manual_optimization(ctx.summary, scope.function.owner):
            self._check_manual_step(ctx, scope)
        if ctx.module.framework_runs_loop is None:
            items = list(ordered_events(scope, None))
            self._check_scope(ctx, items)
            self._check_step_function(ctx, scope, items)
            self._check_left_by_another_loss(ctx, scope, items)

    def _check_manual_step(self, ctx: RuleContext, scope) -> None:
        """Lightning with ``automatic_optimization = False``: ``training_step`` runs once per batch and
        nothing clears the gradients for it; ``manual_backward`` adds to them and ``opt.step()`` applies them."""
        if scope.function.name != "training_step":
            return
        items = list(ordered_events(scope, None))
        backwards = [event for event, _ in items if isinstance(event, CallEvent) and event.method == "manual_backward"]
        steps = [event for event, _ in items if isinstance(event, CallEvent) and is_optimizer_step(event)]
        if not backwards or not steps or any(clears_gradients(event) or _may_clear(event, chain) for event, chain in items):
            return
        backward, step = backwards[0], steps[0]
        ctx.report(
            backward.node,
            f"`{_code(backward)}` adds to `.grad` on every batch and `{_code(step)}` applies it, but with "
            "`automatic_optimization = False` Lightning does not clear gradients and nothing in `training_step` "
            "calls `zero_grad()`: each step applies the sum of every gradient since the start",
            evidence=[
                ((backward.chunk, backward.node), "backward accumulates into `.grad`"),
                ((step.chunk, step.node), "the optimizer step that applies the accumulated gradients"),
                ((scope.chunk, scope.function.node.name), "Lightning calls `training_step` once per batch"),
            ],
            help=f"call `{step.receiver_key or 'opt'}.zero_grad()` after `{_code(step)}` (or before `self.manual_backward(...)`)",
        )

    def _check_scope(self, ctx: RuleContext, items: list[Item]) -> None:
        backwards = [(event, chain) for event, chain in items if accumulates_into_grad(event) and _without_inner_loops(event, chain)]
        if not backwards:
            return  # most scopes (a long class's methods): nothing to look further at
        clearing = [(event, chain) for event, chain in items if clears_gradients(event)]
        if any(_conditional(event, chain) for event, chain in clearing if _clears(event, chain)):
            # zeroing on some iterations only is deliberate accumulation, unless the clearing sits on
            # one branch of an `if` and a whole training step on the other (`if use_amp: ... else:
            # optimizer.zero_grad() ...`): that branch's steps never clear
            if not self._check_branch_without_clearing(ctx, items, backwards):
                self._check_setting_gated(ctx, items, backwards)
            return
        reported: set[Loop] = set()
        for event, chain in backwards:
            site = _site(event, chain)
            found = _step_loop(items, site)
            if found is None:
                continue
            loop, in_loop, step = found
            if loop in reported:
                continue
            reported.add(loop)
            if self._handled_elsewhere(ctx, event, in_loop):
                continue
            if any(_clears(event, chain) for event, chain in in_loop):
                uncleared = _uncleared_optimizer(in_loop)
                if uncleared is not None:
                    self._report_other_cleared(ctx, loop, in_loop, *uncleared)
                continue
            self._report(ctx, event, chain, loop, step, clearing)

    def _check_branch_without_clearing(
        self, ctx: RuleContext, items: list[Item], backwards: list[tuple[CallEvent, tuple[CallEvent, ...]]]
    ) -> bool:
        for event, chain, site, loop, in_loop, clears in _clearing_step_loops(items, backwards):
            backward_path = _scoped_path(event, chain, loop)
            steps = [(step, step_chain) for step, step_chain in in_loop if isinstance(step, CallEvent) and is_optimizer_step(step)
                     and not _exclusive(backward_path, _scoped_path(step, step_chain, loop))]
            if not steps or self._handled_elsewhere(ctx, event, in_loop):
                continue
            found_branch = _branch_excluding(backward_path, [_scoped_path(clear, clear_chain, loop) for clear, clear_chain in clears])
            if found_branch is None:
                continue
            branch, branch_scope = found_branch
            step = steps[0][0]
            clear = clears[0][0]
            test = branch.test
            shown = f"`if {shortened(branch_scope.chunk.code_for(test), 40)}:`" if test is not None else "the branch"
            side = "branch" if branch.branch == "if" else "`else` branch"
            ctx.report(
                site.node,
                f"on the {side} of {shown}, `{_code(event)}` adds to `.grad` every iteration and `{_code(step)}` applies it, "
                f"but the loop's only clearing, `{_code(clear)}` on line {ctx.line_of((clear.chunk, clear.node))}, runs on the "
                f"other branch: whenever this branch is taken, each step applies the sum of every gradient since the start",
                evidence=[
                    ((branch_scope.chunk, branch.node), f"the {side} with no gradient clearing"),
                    ((clear.chunk, clear.node), "gradients are cleared only on the other branch"),
                    ((event.chunk, event.node), "backward accumulates into `.grad`"),
                    ((step.chunk, step.node), "the optimizer step that applies the accumulated gradients"),
                ],
                help=f"clear on both branches: call `{_optimizer_of(step) or 'optimizer'}.zero_grad()` before the `if`, or on this branch too",
            )
            return True
        return False

    def _check_setting_gated(
        self, ctx: RuleContext, items: list[Item], backwards: list[tuple[CallEvent, tuple[CallEvent, ...]]]
    ) -> None:
        """Every clearing sits under an `if` on a setting that no iteration changes and that neither the backward
        nor the step waits for (`if self.scheduler:`, `if ema is not None:`): a run with that setting off never
        clears, and each step applies the sum of every gradient since the start."""
        for event, chain, site, loop, in_loop, clears in _clearing_step_loops(items, backwards):
            steps = [(step, step_chain) for step, step_chain in in_loop if isinstance(step, CallEvent) and is_optimizer_step(step)]
            if not steps or self._handled_elsewhere(ctx, event, in_loop):
                continue
            step, step_chain = steps[0]
            waited = (*_scoped_path(event, chain, loop), *_scoped_path(step, step_chain, loop))
            gated = []
            for clear, clear_chain in clears:
                gate = _setting_gate(_scoped_path(clear, clear_chain, loop), waited, in_loop)
                if gate is None:
                    break
                gated.append((clear, *gate))
            if len(gated) != len(clears):
                continue
            shown = "; ".join(
                f"`{_code(clear)}` on line {ctx.line_of((clear.chunk, clear.node))} under "
                f"`if {shortened(gate_scope.chunk.code_for(gate.test), 40)}:`" for clear, gate, gate_scope in gated[:2]
            )
            more = f" and {len(gated) - 2} more" if len(gated) > 2 else ""
            clear = gated[0][0]
            ctx.report(
                site.node,
                f"`{_code(event)}` adds to `.grad` every iteration and `{_code(step)}` applies it, but every clearing waits "
                f"for a setting no iteration changes and the step does not wait for ({shown}{more}): a run with those "
                f"settings off never clears, and each step applies the sum of every gradient since the start",
                evidence=[
                    *(evidence for clear, gate, gate_scope in gated for evidence in (
                        ((gate_scope.chunk, gate.node), "a setting the clearing waits for"),
                        ((clear.chunk, clear.node), "gradients are cleared only when the setting is on"),
                    )),
                    ((event.chunk, event.node), "backward accumulates into `.grad`"),
                    ((step.chunk, step.node), "the optimizer step that applies the accumulated gradients"),
                ],
                help=f"clear whatever the setting: move `{_code(clear)}` out of the `if`, next to `{_code(step)}`",
            )
            return

    def _check_step_function(self, ctx: RuleContext, scope: ScopeAnalysis, items: list[Item]) -> None:
        """A function with no loop that runs one whole training step (`GAN.update(batch)`, called per batch
        from another file): it clears some model's gradients, so clearing is its job, but not those of a
        model whose optimizer it steps."""
        function = scope.function
        if function is None:
            return
        step_items = [(event, chain) for event, chain in items if not _site(event, chain).context.loops]
        if len(step_items) != len(items) or any(_conditional(event, chain) for event, chain in step_items if _clears(event, chain)):
            return
        backwards = [event for event, _ in step_items if accumulates_into_grad(event)]
        if not backwards or self._handled_elsewhere(ctx, backwards[0], step_items):
            return
        uncleared = _uncleared_optimizer(step_items)
        if uncleared is None or ctx.module.calls_of(function):
            return  # (a caller in this file runs it in its loop, and that loop's check judges it)
        step, updated, cleared = uncleared
        backward = next((event for event in backwards if _position(event, step_items) < _position(step, step_items)), None)
        if backward is None:
            return
        optimizer = _optimizer_of(step)
        named = f"`{optimizer}`" if optimizer else "the optimizer"
        first, owner = cleared[0]
        forward = next((
            event for event, _ in step_items
            if isinstance(event, CallEvent) and event.chunk.code_for(event.node.func) == updated.text
        ), None)
        ctx.report(
            backward.node,
            f"`{function.qualified_name}` runs one training step and clears `{owner.text}`'s gradients "
            f"(`{_code(first)}`, line {ctx.line_of((first.chunk, first.node))}), but never those of `{updated.text}`, "
            f"whose parameters {named} updates: each call's `{_code(step)}` applies the sum of every gradient of "
            f"`{updated.text}` since the first call (and what later backward passes of the step leave in it)",
            evidence=[
                ((updated.chunk, updated.node), f"{named} is built over `{updated.text}`'s parameters"),
                *(((event.chunk, event.node), f"clears `{held.text}`'s gradients only") for event, held in cleared),
                ((backward.chunk, backward.node), f"backward accumulates into `{updated.text}`'s `.grad`"),
                ((step.chunk, step.node), "the optimizer step that applies the accumulated gradients"),
                ((forward.chunk, forward.node), f"the step's first pass through `{updated.text}`: its gradients still hold "
                 "the last call's; clearing them before this starts the step from zero") if forward is not None else None,
            ],
            severity=Severity.WARNING,
            help=f"call `{optimizer or 'optimizer'}.zero_grad()` before this backward or right after `{_code(step)}`",
        )

    def _check_left_by_another_loss(self, ctx: RuleContext, scope: ScopeAnalysis, items: list[Item]) -> None:
        """One step backwards a loss through a model whose parameters a second optimizer holds (a generator's
        adversarial loss through the discriminator), steps the first optimizer, then backwards and steps the
        second without clearing it in between: the second step applies its own gradients plus the ones the
        first loss left in its parameters. Clearing it after its step (for the next call) comes too late."""
        function = scope.function
        if function is None or _toggles_requires_grad(scope, function.node, items):
            return  # freezing the second model for the first loss (`set_requires_grad(netD, False)`) leaves it nothing
        direct = [(index, event) for index, (event, chain) in enumerate(items) if not chain and isinstance(event, CallEvent)]
        steps = [(index, event) for index, event in direct if is_optimizer_step(event) and event.receiver_key]
        for later_index, later in steps:
            held = _held_parameters(later)
            if held is None or held.excluded:
                continue
            for backward_index, backward in direct:
                if backward_index >= later_index or not accumulates_into_grad(backward):
                    continue
                between = items[backward_index + 1:later_index]
                first = next((event for event, chain in between if not chain and isinstance(event, CallEvent)
                              and is_optimizer_step(event) and event.receiver_key not in {None, later.receiver_key}), None)
                if first is None or any(_may_reach(event, chain, held.module, steps) for event, chain in between):
                    continue
                forward = _forward_through(items[:backward_index], held.module, backward)
                if forward is None:
                    continue
                self._report_left_by_another_loss(ctx, later, held, backward, first, forward)
                return

    @staticmethod
    def _report_left_by_another_loss(ctx: RuleContext, later: CallEvent, held: _Held, backward: CallEvent,
                                     first: CallEvent, forward: CallEvent) -> None:
        optimizer, module = later.receiver_key, held.module
        called = dotted(forward.node.func) or module
        through = f"`{called}`" if called == module else f"`{called}` (which holds `{module}`)"
        ctx.report(
            later.node,
            f"`{_code(backward)}` backwards a loss computed through {through}, whose parameters `{optimizer}` holds; "
            f"`{_code(first)}` applies that loss, but nothing clears `{module}`'s gradients before `{_code(later)}`, "
            f"which applies its own loss's gradients plus the ones the first loss left in `{module}`",
            evidence=[
                ((held.chunk, held.node), f"`{optimizer}` is built over `{module}`'s parameters"),
                ((forward.chunk, forward.node), f"the first loss's forward runs `{module}`"),
                ((backward.chunk, backward.node), f"backward adds the first loss's gradients to `{module}`'s `.grad`"),
                ((first.chunk, first.node), "another optimizer applies the first loss; the gradients it left stay"),
                ((later.chunk, later.node), "this step applies them along with its own loss's"),
            ],
            severity=Severity.WARNING,
            help=f"call `{optimizer}.zero_grad()` right after `{_code(first)}` (before the second loss's backward)",
        )

    @staticmethod
    def _handled_elsewhere(ctx: RuleContext, backward: CallEvent, in_loop: list[Item]) -> bool:
        """Something other than a visible clearing in the loop takes care of the gradients, or may."""
        steps = [event for event, _ in in_loop if isinstance(event, CallEvent) and is_optimizer_step(event)]
        if any(_is_engine(ctx, call) for call in (backward, *steps)):
            return True  # a DeepSpeed engine's step() zeroes the gradients itself
        if any(_fresh_leaves(step, in_loop) for step in steps):
            return True
        return any(_may_clear(event, chain) for event, chain in in_loop)

    def _report(self, ctx: RuleContext, backward: CallEvent, chain, loop: Loop, step: CallEvent, clearing: list[Item]) -> None:
        site = _site(backward, chain)
        loop_line = ctx.line_of((site.chunk, loop.node))
        through = f" (inside `{_code(chain[-1])}`)" if chain else ""
        elsewhere = [
            (event, "only in an exception handler" if loop in _site(event, chain).context.loops else "outside this loop")
            for event, chain in clearing
        ]
        aside = "".join(
            f"; `{_code(event)}` on line {ctx.line_of((event.chunk, event.node))} runs {where}" for event, where in elsewhere[:1]
        )
        message = (
            f"gradients are never cleared in the loop on line {loop_line}: `{_code(backward)}`{through} adds to "
            f"`.grad` every iteration and `{_code(step)}` applies it, but nothing in the loop or in the local "
            f"functions it calls runs `zero_grad()` or sets `p.grad = None`{aside}, so each step applies the sum "
            f"of every gradient since the start"
        )
        evidence = [*(((event.chunk, event.node), f"gradients are cleared here, {where}") for event, where in elsewhere),
            ((backward.chunk, backward.node), "backward accumulates into `.grad`"),
            ((step.chunk, step.node), "the optimizer step that applies the accumulated gradients"),
            ((site.chunk, loop.node), "the loop with no gradient clearing"),
            ((site.chunk, _first_in_body(loop.node)), "each iteration starts here with the gradients the last one left: "
             "a clearing here, or right after the step, starts every step from zero"),
        ]
        if chain:
            evidence.append(((site.chunk, site.node), f"the loop runs the backward through `{_code(site)}`"))
        ctx.report(
            site.node, message, evidence=evidence,
            help="call `optimizer.zero_grad()` once per step, before the backward or right after `optimizer.step()`",
        )


    def _report_other_cleared(self, ctx: RuleContext, loop: Loop, in_loop: list[Item], step: CallEvent,
                              updated: Owner, cleared: list[tuple[Event, Owner]]) -> None:
        """Gradients are cleared in the loop, but only another model's: ``step``'s optimizer applies its
        parameters' sum of every gradient since the start (a GAN whose discriminator is never cleared)."""
        backwards = [event for event, _ in in_loop if accumulates_into_grad(event)]
        before = [event for event in backwards if _position(event, in_loop) < _position(step, in_loop)]
        backward = before[-1] if before else backwards[0]
        chain = next(chain for event, chain in in_loop if event is backward)
        where = _site(backward, chain)
        optimizer = _optimizer_of(step)
        named = f"`{optimizer}`" if optimizer else "the optimizer"
        first, owner = cleared[0]
        others = " (every other clearing in it is another model's too)" if len(cleared) > 1 else ""
        message = (
            f"{named} updates `{updated.text}`'s parameters, whose gradients nothing in the loop on line "
            f"{ctx.line_of((where.chunk, loop.node))} clears: `{_code(first)}` clears `{owner.text}`'s{others}, so "
            f"each `{_code(step)}` applies the sum of every gradient of `{updated.text}` since the start"
        )
        evidence = [
            ((updated.chunk, updated.node), f"{named} is built over `{updated.text}`'s parameters"),
            *(((event.chunk, event.node), f"clears `{held.text}`'s gradients only") for event, held in cleared),
            ((backward.chunk, backward.node), f"backward accumulates into `{updated.text}`'s `.grad`"),
            ((step.chunk, step.node), "the optimizer step that applies the accumulated gradients"),
        ]
        if chain:
            evidence.append(((where.chunk, where.node), f"the loop runs the backward through `{_code(where)}`"))
        ctx.report(
            where.node, message, evidence=evidence,
            help=f"call `{optimizer or 'optimizer'}.zero_grad()` once per step, before its backward or right after `{_code(step)}`",
        )


@dataclass(frozen=True)
class _Held:
    """The model whose parameters an optimizer holds, as the code that steps it names the model."""

    module: str  # `self.vae.discr`, `netD`
    excluded: bool  # every parameter but the model's: `set(vae.parameters()) - set(vae.discr.parameters())`
    chunk: ParsedChunk
    node: cst.CSTNode  # the construction


def _held_parameters(step: CallEvent) -> _Held | None:
    """``Adam(netD.parameters())``, or a name bound to ``set(vae.discr.parameters())`` beside the construction (the
    construction's own function); a model handed to ``__init__`` and kept as ``self.vae = vae`` is named ``self.vae``."""
    receiver = step.receiver
    if receiver is None or Tag.OPTIMIZER not in receiver.tags:
        return None
    built = _built_in_class(step) or _built_at(receiver)
    if built is None:
        return None
    chunk, function, call = built
    given = [arg for arg in call.args if arg.keyword is None or arg.keyword.value == "params"]
    if not given or given[0].star:
        return None
    found = _parameters_of(given[0].value, function)
    if found is None:
        return None
    module, excluded = found
    root, _, rest = module.partition(".")
    if root != "self" and function is not None and (step.scope.function is None or step.scope.function.node is not function):
        kept = _kept_as(function, root)
        if kept is None:
            return None
        module = f"{kept}.{rest}" if rest else kept
    return _Held(module, excluded, chunk, call)


def _built_in_class(step: CallEvent) -> tuple[ParsedChunk, cst.FunctionDef, cst.Call] | None:
    """Where a method of the step's class binds ``self.opt = <call>`` (a helper such as ``get_optimizer(params)``
    builds it, as the flow sees it, inside the helper): the method and the call."""
    key, function = step.receiver_key, step.scope.function
    owner = function.owner if function is not None else None
    if owner is None or key is None or not key.startswith("self."):
        return None
    found = [(method.chunk, method.node, statement.value) for method in owner.methods.values() for statement in walk(method.node.body)
             if isinstance(statement, cst.Assign) and any(dotted(target.target) == key for target in statement.targets)]
    if len(found) != 1:
        return None
    chunk, method, built = found[0]
    return (chunk, method, built) if isinstance(built, cst.Call) else None


def _built_at(optimizer: Value) -> tuple[ParsedChunk, cst.FunctionDef | None, cst.Call] | None:
    if optimizer.site is None:
        return None
    chunk, call = optimizer.site
    return (chunk, _enclosing_function(chunk, call), call) if isinstance(call, cst.Call) else None


def _parameters_of(node: cst.BaseExpression, function: cst.FunctionDef | None, depth: int = 6) -> tuple[str, bool] | None:
    """(model, excluded) for ``m.parameters()``, ``set(...)``/``list(...)`` of it, a name bound to either in
    ``function``, or ``everything - set(m.parameters())``."""
    if depth == 0:
        return None
    if isinstance(node, cst.Name) and function is not None:
        bound = [statement.value for statement in walk(function.body) if isinstance(statement, cst.Assign)
                 and len(statement.targets) == 1 and isinstance(statement.targets[0].target, cst.Name)
                 and statement.targets[0].target.value == node.value]
        return _parameters_of(bound[0], function, depth - 1) if len(bound) == 1 else None
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Subtract):
        removed = _parameters_of(node.right, function, depth - 1)
        return (removed[0], True) if removed is not None and not removed[1] else None
    if not isinstance(node, cst.Call):
        return None
    if isinstance(node.func, cst.Name) and node.func.value in {"set", "list", "tuple"} and len(node.args) == 1:
        return _parameters_of(node.args[0].value, function, depth - 1)
    if isinstance(node.func, cst.Attribute) and node.func.attr.value == "parameters" and not node.args:
        module = dotted(node.func.value)
        return (module, False) if module is not None else None
    return None


def _enclosing_function(chunk: ParsedChunk, node: cst.CSTNode) -> cst.FunctionDef | None:
    """The innermost function of ``chunk`` whose body holds ``node``."""
    found = None
    for candidate in walk(chunk.module) if chunk.module is not None else ():
        if isinstance(candidate, cst.FunctionDef) and any(inner is node for inner in walk(candidate.body)):
            if found is None or any(inner is candidate for inner in walk(found.body)):
                found = candidate
    return found


def _kept_as(function: cst.FunctionDef, name: str) -> str | None:
    """``self.vae`` for ``self.vae = vae`` in ``function`` (a constructor keeping the model it is handed)."""
    kept = [dotted(target.target) for statement in walk(function.body) if isinstance(statement, cst.Assign)
            and isinstance(statement.value, cst.Name) and statement.value.value == name for target in statement.targets]
    kept = [text for text in kept if text is not None and text.startswith("self.")]
    return kept[0] if len(kept) == 1 else None


def _forward_through(before: list[Item], module: str, backward: CallEvent) -> CallEvent | None:
    """The last call, before the backward, of ``module`` or of a model holding it (`self.vae(...)` runs
    `self.vae.discr`), written in the step itself, whose output reaches the backward undetached as far as the
    step's own lines show (`fake = G(z)` read only as `fake.detach()` until the backward gives ``G`` nothing)."""
    for event, chain in reversed(before):
        if chain or not isinstance(event, CallEvent) or accumulates_into_grad(event):
            continue
        called = dotted(event.node.func)
        if called is not None and (module == called or module.startswith(called + ".")):
            return None if _detached(event, backward) else event
    return None


def _detached(forward: CallEvent, backward: CallEvent) -> bool:
    """``G(z).detach()``, or ``fake = G(z)`` whose every read up to the backward is ``fake.detach()`` / ``fake.data``."""
    function = forward.scope.function
    statement = forward.statement
    if function is None or statement is None:
        return False
    cut = {"detach", "data"}
    if any(isinstance(node, cst.Attribute) and node.value is forward.node and node.attr.value in cut for node in walk(statement)):
        return True
    if not (isinstance(statement, cst.Assign) and len(statement.targets) == 1 and isinstance(statement.targets[0].target, cst.Name)):
        return False
    name = statement.targets[0].target.value
    chunk = forward.chunk
    start, end = chunk.line_of(forward.node), chunk.line_of(backward.node)
    reads = cuts = 0
    for node in walk(function.node.body):  # one pass: the name's reads and its `.detach()`/`.data` in the step's lines
        if isinstance(node, cst.Name) and node.value == name and start < chunk.line_of(node) <= end:
            reads += 1
        elif isinstance(node, cst.Attribute) and node.attr.value in cut and isinstance(node.value, cst.Name) \
                and node.value.value == name and start < chunk.line_of(node) <= end:
            cuts += 1
    return reads > 0 and cuts == reads


def _may_reach(event: Event, chain: tuple[CallEvent, ...], module: str, steps: list[tuple[int, CallEvent]]) -> bool:
    """A clearing that may reach ``module``'s gradients: all but an optimizer's that the step also steps and
    whose parameters are known to leave ``module`` out, or a model's that neither holds nor is part of it."""
    if not (clears_gradients(event) or _may_clear(event, chain)):
        return False
    if not isinstance(event, CallEvent) or event.method != "zero_grad" or event.args or event.receiver_key is None:
        return True
    key = event.receiver_key
    stepped = next((step for _, step in steps if step.receiver_key == key), None)
    if stepped is not None:
        held = _held_parameters(stepped)
        if held is None:
            return True
        return not (held.excluded and held.module == module) and not _apart(held.module, module)
    return not (event.receiver is not None and Tag.MODEL in event.receiver.tags and _apart(key, module))


def _apart(one: str, other: str) -> bool:
    return one != other and not one.startswith(other + ".") and not other.startswith(one + ".")


def _toggles_requires_grad(scope: ScopeAnalysis, function: cst.FunctionDef, items: list[Item]) -> bool:
    """The step sets ``requires_grad`` on something, itself or in a helper it calls (the function's nodes read
    statement by statement, kept with the tree: a key in a long ``main()`` reads those on its path only)."""
    if scope.chunk.facts_under("TL201 requires_grad attributes", function.body, _requires_grad_attribute):
        return True
    return any(isinstance(event, CallEvent) and event.method == "requires_grad_" for event, _ in items) or any(
        isinstance(event, AssignEvent) and any(key.endswith(".requires_grad") for key in event.targets) for event, _ in items
    )


def _requires_grad_attribute(node: cst.CSTNode) -> tuple[bool, ...]:
    return (True,) if isinstance(node, cst.Attribute) and node.attr.value in {"requires_grad", "requires_grad_"} else ()


def _first_in_body(loop: cst.CSTNode) -> cst.CSTNode:
    """The first statement a loop runs each iteration: where a clearing at the start of the step goes."""
    body = getattr(loop, "body", None)
    statements = body.body if isinstance(body, cst.IndentedBlock) else ()
    return statements[0] if statements else loop


@dataclass(frozen=True)
class Owner:
    """The model whose parameters an optimizer updates or a clearing clears, as the code writes it."""

    text: str  # `netD`, `self.discriminator`, `D.net`
    chunk: ParsedChunk
    node: cst.CSTNode  # where the text stands: the optimizer's construction, the clearing call
    built: str | None  # the code that built the model, when the flow saw it (`Discriminator(...).to(device)`)


def _uncleared_optimizer(in_loop: list[Item]) -> tuple[CallEvent, Owner, list[tuple[Event, Owner]]] | None:
    """An optimizer stepped in the loop whose parameters no clearing in it reaches, every clearing being
    known to clear another model's: ``(step, what it updates, the clearings)``. None when any clearing
    or step is of a kind trainlint cannot place (a bare ``p.grad = None``, an optimizer over a chain of
    parameters, a model the flow cannot see), or the models could share parameters."""
    cleared: list[tuple[Event, Owner]] = []
    for event, chain in in_loop:
        if not _clears(event, chain):
            continue
        owner = _cleared_owner(event)
        if owner is None:
            return None
        cleared.append((event, owner))
    if not cleared:
        return None
    for event, _ in in_loop:
        if not isinstance(event, CallEvent) or not is_optimizer_step(event):
            continue
        updated = _with_construction(_updated_owner(event), event)
        if updated is not None and all(_distinct(updated, owner) for _, owner in cleared):
            return event, updated, cleared
    return None


def _cleared_owner(event: Event) -> Owner | None:
    """What ``opt.zero_grad()`` (an optimizer built here over one model) or ``model.zero_grad()`` clears."""
    if not isinstance(event, CallEvent) or event.method != "zero_grad" or event.receiver is None or event.args:
        return None
    receiver = event.receiver
    if Tag.OPTIMIZER in receiver.tags:
        return _parameters_owner(receiver)
    if Tag.MODEL in receiver.tags and event.receiver_key and receiver.site is not None:
        return Owner(event.receiver_key, event.chunk, event.node, receiver.site[0].code_for(receiver.site[1]))
    return None


def _updated_owner(step: CallEvent) -> Owner | None:
    """The model whose parameters the stepped optimizer updates (``opt.step()``, ``scaler.step(opt)``)."""
    receiver = step.receiver
    if receiver is not None and Tag.SCALER in receiver.tags:
        receiver = step.args[0] if step.args else None
    if receiver is not None and not receiver.tags:
        receiver = _held_optimizer(step) or receiver
    if receiver is None or Tag.OPTIMIZER not in receiver.tags or Tag.ENGINE in receiver.tags:
        return None
    owner = _parameters_owner(receiver)
    holder, _, _ = (_optimizer_of(step) or "").rpartition(".")
    if owner is not None and owner.text == "self" and holder not in {"", "self"}:
        # `self.critic.opt`, built as `self.opt = Adam(self.parameters())` in the critic's class: that `self` is the critic
        return Owner(holder, owner.chunk, owner.node, owner.built)
    return owner


def _held_optimizer(step: CallEvent) -> Value | None:
    """``self.critic.opt.step()`` where ``self.critic`` was built from a class of this file whose
    ``__init__`` binds ``self.opt`` to an optimizer: that optimizer's value."""
    func = step.node.func
    held = func.value if isinstance(func, cst.Attribute) else None
    if not isinstance(held, cst.Attribute):
        return None
    holder = step.scope.value_at(held.value)
    if holder is None or Tag.MODEL not in holder.tags or holder.site is None:
        return None
    built = holder.site[1]
    while isinstance(built, cst.Call) and isinstance(built.func, cst.Attribute) and built.func.attr.value in {"to", "cuda", "cpu"}:
        built = built.func.value  # `Critic(...).to(device)`
    name = dotted(built.func) if isinstance(built, cst.Call) else None
    summary = step.scope.summary
    owner = summary.local_class(summary.canonical(name)) if name else None
    init = owner.methods.get("__init__") if owner is not None else None
    analysis = init.analysis(summary) if init is not None else None
    if analysis is None:
        return None
    bound = [event.value for event in analysis.events if isinstance(event, AssignEvent) and f"self.{held.attr.value}" in event.targets]
    return bound[-1] if bound and Tag.OPTIMIZER in bound[-1].tags else None


def _parameters_owner(optimizer: Value) -> Owner | None:
    """``torch.optim.Adam(netD.parameters(), ...)``: ``netD``, when the construction is in sight."""
    if optimizer.site is None:
        return None
    chunk, call = optimizer.site
    if not isinstance(call, cst.Call):
        return None
    given = [arg for arg in call.args if arg.keyword is None or arg.keyword.value == "params"]
    if not given or given[0].star:
        return None
    params = given[0].value
    if not (isinstance(params, cst.Call) and isinstance(params.func, cst.Attribute) and params.func.attr.value == "parameters"):
        return None
    text = dotted(params.func.value)
    if text is None:
        return None
    return Owner(text, chunk, params, None)


def _with_construction(owner: Owner | None, step: CallEvent) -> Owner | None:
    """``owner`` with the code that built it, when a plain name bound in the step's scope."""
    if owner is None or "." in owner.text:
        return owner
    binding = step.scope.last_binding(owner.text)
    if binding is None or binding.value_node is None:
        return owner
    return Owner(owner.text, owner.chunk, owner.node, binding.scope.chunk.code_for(binding.value_node))


def _distinct(updated: Owner, cleared: Owner) -> bool:
    """Two models that cannot share parameters: neither is the other or part of it (`model` and
    `model.encoder`), and neither is built from the other (`DistributedDataParallel(net)`)."""
    a, b = updated.text, cleared.text
    if a == b or a.startswith(b + ".") or b.startswith(a + "."):
        return False
    return not (_mentions(cleared.built, a) or _mentions(updated.built, b))


def _mentions(code: str | None, name: str) -> bool:
    return code is not None and re.search(rf"(?<![\w.]){re.escape(name)}(?!\w)", code) is not None


def _optimizer_of(step: CallEvent) -> str | None:
    if step.receiver is not None and Tag.SCALER in step.receiver.tags:
        return dotted(step.arg_nodes[0].value) if step.arg_nodes else None
    return step.receiver_key


def _position(event: Event, in_loop: list[Item]) -> int:
    return next(index for index, (other, _) in enumerate(in_loop) if other is event)


def _site(event: Event, chain: tuple[CallEvent, ...]) -> Event:
    """The event in the scope being checked: the call site when ``event`` runs inside a local function."""
    return chain[0] if chain else event


def _without_inner_loops(event: Event, chain: tuple[CallEvent, ...]) -> bool:
    """No loop of a called function lies between the call site and ``event`` (that function's own check covers it)."""
    return not any(link.context.loops for link in (*chain[1:], event)) if chain else True


def _clearing_step_loops(items: list[Item], backwards: list[tuple[CallEvent, tuple[CallEvent, ...]]]):
    """(backward, its chain, its site, the loop it runs in, the loop's items, the clearings among them) for
    each backward in a loop that steps an optimizer (``_step_loop``) and clears some gradients."""
    for event, chain in backwards:
        site = _site(event, chain)
        found = _step_loop(items, site)
        if found is None:
            continue
        loop, in_loop, _ = found
        clears = [(clear, clear_chain) for clear, clear_chain in in_loop if _clears(clear, clear_chain)]
        if clears:
            yield event, chain, site, loop, in_loop, clears


def _step_loop(items: list[Item], site: Event) -> tuple[Loop, list[Item], CallEvent] | None:
    """The innermost loop around ``site`` whose iterations also step an optimizer: one training step per iteration.

    A micro-batch loop without a step is skipped, so clearing in the loop that steps is enough.
    """
    for loop in reversed(site.context.loops):
        in_loop = [(event, chain) for event, chain in items if loop in _site(event, chain).context.loops]
        steps = [event for event, _ in in_loop if isinstance(event, CallEvent) and is_optimizer_step(event)]
        if steps:
            return loop, in_loop, steps[0]
    return None


def _fresh_leaves(step: CallEvent, in_loop: list[Item]) -> bool:
    """The stepped optimizer is built in the loop over tensors also created in the loop
    (``x = z.detach().clone(); opt = SGD([x])``): each iteration's gradients land on new leaves."""
    built_here = {key for event, _ in in_loop if isinstance(event, AssignEvent) for key in event.targets}
    for event, _ in in_loop:
        if not isinstance(event, AssignEvent) or step.receiver_key not in event.targets:
            continue
        call = event.value_node
        if not isinstance(call, cst.Call) or not call.args or Tag.OPTIMIZER not in event.value.tags:
            continue
        leaves = call.args[0].value
        if isinstance(leaves, (cst.List, cst.Tuple)) and leaves.elements and all(
            isinstance(element.value, cst.Name) and element.value.value in built_here for element in leaves.elements
        ):
            return True
    return False


def _clears(event: Event, chain: tuple[CallEvent, ...]) -> bool:
    """Gradient clearing on the normal path (an out-of-memory handler that zeroes does not count)."""
    if not clears_gradients(event):
        return False
    return not any(condition.branch == "except" for condition in path_conditions(event, chain, None))


ScopedPath = tuple[tuple[Condition, ScopeAnalysis], ...]


def _scoped_path(event: Event, chain: tuple[CallEvent, ...], loop: Loop | None) -> ScopedPath:
    """``path_conditions``, each condition with the scope whose code tests it."""
    first, *rest = (*chain, event)
    return (
        *((condition, first.scope) for condition in first.context.conditions_inside(loop)),
        *((condition, link.scope) for link in rest for condition in link.context.conditions),
    )


def _exclusive(one: ScopedPath, other: ScopedPath) -> bool:
    """Two paths that never run in the same iteration: opposite branches of one `if`, or of two `if`s testing one setting."""
    return _branch_excluding(one, [other]) is not None


def _branch_excluding(path: ScopedPath, others: list[ScopedPath]) -> tuple[Condition, ScopeAnalysis] | None:
    """The condition on ``path`` whose `if` (or one testing the same setting) each of the ``others`` takes the other way."""
    for condition, scope in path:
        if condition.branch in {"if", "else"} and all(
            any(theirs.branch in {"if", "else"} and theirs.branch != condition.branch and _same_test(condition, scope, theirs, where)
                for theirs, where in other)
            for other in others
        ):
            return condition, scope
    return None


def _same_test(one: Condition, one_scope: ScopeAnalysis, other: Condition, other_scope: ScopeAnalysis) -> bool:
    """One `if`, or two `if`s that test one setting the same way, with no call in the test: `if args.amp:` twice in a
    function, or `if self.use_amp:` in two methods of one class (the backward in one, the step in another)."""
    if one.node is other.node:
        return True
    if one.test is None or other.test is None or any(isinstance(node, cst.Call) for node in (*walk(one.test), *walk(other.test))):
        return False
    text = one_scope.chunk.code_for(one.test)
    if text != other_scope.chunk.code_for(other.test):
        return False
    if one_scope is other_scope:
        return True
    owner = one_scope.function.owner if one_scope.function is not None else None
    return (owner is not None and text.startswith("self.") and other_scope.function is not None
            and other_scope.function.owner is owner)


def _setting_gate(path: ScopedPath, waited: ScopedPath, in_loop: list[Item]) -> tuple[Condition, ScopeAnalysis] | None:
    """The `if` on ``path`` that tests a setting (`if self.scheduler:`, `if not args.frozen:`, `if ema is not None:`)
    which nothing in the loop assigns and none of the ``waited`` conditions tests."""
    assigned = {key for event, _ in in_loop if isinstance(event, AssignEvent) for key in event.targets}
    for condition, scope in path:
        if condition.branch != "if" or condition.test is None:
            continue
        settings = [setting for setting in _settings_tested(condition.test) if setting is not None]
        if not any(setting not in assigned and setting.split(".", 1)[0] not in assigned for setting in settings):
            continue
        if not any(_same_test(condition, scope, theirs, where) for theirs, where in waited):
            return condition, scope
    return None


def _settings_tested(test: cst.BaseExpression) -> list[str | None]:
    """The dotted names a test reads as switches, each of which must hold for it to pass: `x`, `not x`,
    `x is not None`, `x == 1`, and each side of an `and`."""
    if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.And):
        return [*_settings_tested(test.left), *_settings_tested(test.right)]
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        test = test.expression
    if isinstance(test, cst.Comparison) and len(test.comparisons) == 1:
        against = test.comparisons[0].comparator
        if not (isinstance(against, (cst.Integer, cst.SimpleString)) or (isinstance(against, cst.Name) and against.value == "None")):
            return [None]
        test = test.left
    return [dotted(test) if isinstance(test, (cst.Name, cst.Attribute)) else None]


def _conditional(event: Event, chain: tuple[CallEvent, ...]) -> bool:
    return any(condition.branch != "except" for condition in path_conditions(event, chain, None))


def _is_engine(ctx: RuleContext, call: CallEvent) -> bool:
    if call.receiver is not None and Tag.ENGINE in call.receiver.tags or runs_as_an_engine(call):
        return True
    return ctx.module.uses_deepspeed and "engine" in (call.receiver_key or "").lower()


def _may_clear(event: Event, chain: tuple[CallEvent, ...]) -> bool:
    """A call trainlint cannot follow that is handed the optimizer or the model: it may zero them."""
    if not isinstance(event, CallEvent) or event.function is not None or event.method in {"backward", "step"}:
        return False
    if event.callee is not None and (is_torch_name(event.callee) or hasattr(builtins, event.callee)):
        return False
    if call_fact(event.callee, LEAVES_GRADIENTS) is not None:
        return False
    if event.method in _WRITES_VALUES and not is_gradient_key(event.receiver_key):
        return False  # `ema_param.sub_(...)`: a tensor's in-place arithmetic writes its own values, not a `.grad`
    receiver = _handed_receiver(event, chain)
    if receiver is not None and receiver.tags & _KNOWN_RECEIVERS:
        return False
    if any(value is not None and Tag.PIPELINE in value.tags for value in (receiver, event.result)):
        return False  # a diffusers/transformers pipeline is assembled from the models it is handed and runs them without grad
    if any(stepped_optimizer(event.scope, arg.value) for arg in event.arg_nodes):
        return True  # `clip_gradient(o, 5.0)` of the `o` the loop steps: an optimizer by what the code does with it
    return any(_handed(value, chain).tags & {Tag.OPTIMIZER, Tag.MODEL} for value in (*event.args, *event.kwargs.values()))


def _handed(value: Value, chain: tuple[CallEvent, ...], name: str | None = None) -> Value:
    """A helper's parameter as the loop's call hands it: the argument at the call site. The role a
    parameter's name suggests (`generator`: a GAN's, or a `torch.Generator`?), or its lack of one,
    yields to what it is given. ``name``: the parameter, when ``value`` does not say it came from one."""
    while chain:
        param = value.site[1] if value.site is not None and isinstance(value.site[1], cst.Param) else None
        call, function = chain[-1], chain[-1].function
        if function is None:
            break
        params = _parameters(function.node)
        if param is None:
            param = next((candidate for candidate in params if candidate.name.value == name), None)
        if param is None or param not in params:
            break
        name, positional = param.name.value, function.positional_parameters
        if name in call.kwargs:
            value = call.kwargs[name]
        elif name in positional and positional.index(name) < len(call.args) and not any(arg.star for arg in call.arg_nodes):
            value = call.args[positional.index(name)]
        else:
            break
        chain, name = chain[:-1], None
    return value


def _handed_receiver(event: CallEvent, chain: tuple[CallEvent, ...]) -> Value | None:
    """The object a method is called on, followed to the call site when it is a parameter of the helper
    the loop calls (`accelerator.unwrap_model(...)` in `log_validation(..., accelerator, ...)`)."""
    if event.receiver is None or not chain or event.receiver.tags & _KNOWN_RECEIVERS:
        return event.receiver  # nothing to follow (the scan for a rebinding below is linear in the scope)
    key = event.receiver_key
    rebound = key is not None and event.scope.last_binding(key, before=event) is not None
    return _handed(event.receiver, chain, None if rebound or key is None or "." in key else key)


def _parameters(function: cst.FunctionDef) -> list[cst.Param]:
    params = function.params
    return [*params.posonly_params, *params.params, *params.kwonly_params]


def _code(event: Event, limit: int = 60) -> str:
    return written(event, limit)


MissingZeroGrad.MUST_FIRE = (
    Fires(  # the base's loop steps after a hook only a subclass defines, which runs the backward; nothing clears
        """
        import torch


        class Trainer:
            def __init__(self, model, optimizer, device):
                self.model = model.to(device)
                self.optimizer = optimizer
                self.device = device

            def compute_loss(self, batch):
                raise NotImplementedError("subclasses compute the loss")

            def fit(self, loader, epochs):
                for epoch in range(epochs):
                    self.model.train()
                    for batch in loader:
                        self.compute_loss(batch)
                        self.optimizer.step()
        """,
        files={"segmentation.py": """
        import torch.nn.functional as F

        from train import Trainer


        class SegmentationTrainer(Trainer):
            def compute_loss(self, batch):
                images, masks = batch
                logits = self.model(images.to(self.device))
                loss = F.cross_entropy(logits, masks.to(self.device))
                loss.backward()
                return loss.item()
        """},
        no_fix=True,
        at="self.compute_loss(batch)",
    ),
    Fires(  # the clearing sits under the warm-up scheduler's `if`: a run without a scheduler never clears
        """
        import torch


        class Trainer:
            def __init__(self, net, lr, warmup=None):
                self.net = net
                self.optimizer = torch.optim.SGD(net.parameters(), lr=lr, momentum=0.9)
                self.warmup = warmup

            def fit(self, loader, epochs):
                for _ in range(epochs):
                    for x, y in loader:
                        loss = torch.nn.functional.cross_entropy(self.net(x), y)
                        loss.backward()
                        self.optimizer.step()
                        if self.warmup is not None:
                            self.warmup.step()
                            self.optimizer.zero_grad()
        """,
        at="loss.backward()",
    ),
    Fires(  # the clearing is on the full-precision branch only: the mixed-precision steps never clear
        """
        import torch


        class Trainer:
            def __init__(self, model, optimizer, use_amp):
                self.model = model
                self.optimizer = optimizer
                self.use_amp = use_amp
                self.scaler = torch.cuda.amp.GradScaler(enabled=use_amp)

            def fit(self, loader, epochs):
                for epoch in range(epochs):
                    for images, labels in loader:
                        if self.use_amp:
                            with torch.autocast("cuda", dtype=torch.float16):
                                loss = torch.nn.functional.cross_entropy(self.model(images), labels)
                            self.scaler.scale(loss).backward()
                            self.scaler.step(self.optimizer)
                            self.scaler.update()
                        else:
                            self.optimizer.zero_grad()
                            loss = torch.nn.functional.cross_entropy(self.model(images), labels)
                            loss.backward()
                            self.optimizer.step()
        """,
        at="self.scaler.scale(loss).backward()",
    ),
    Fires(  # an EMA helper handed the model writes its shadow weights in place: it clears no gradient
        """
        import torch


        class EMA:
            def __init__(self, parameters, decay=0.999):
                self.shadow = [p.detach().clone() for p in parameters]
                self.decay = decay

            @torch.no_grad()
            def step(self, parameters):
                for s_param, param in zip(self.shadow, parameters):
                    s_param.sub_((1 - self.decay) * (s_param - param))


        def train(model, loader, optimizer, epochs):
            ema = EMA(model.parameters())
            for epoch in range(epochs):
                for images, labels in loader:
                    loss = torch.nn.functional.cross_entropy(model(images), labels)
                    loss.backward()
                    optimizer.step()
                    ema.step(model.parameters())
        """,
        severity=Severity.ERROR,
    ),
    Fires(  # diffusers-style: a nested helper unwraps the model, a pipeline is built from it for validation
        """
        import torch
        from accelerate import Accelerator
        from diffusers import StableDiffusionPipeline, UNet2DConditionModel


        def log_validation(pipeline, prompt, generator):
            return pipeline(prompt, num_inference_steps=20, generator=generator).images


        def main(args):
            accelerator = Accelerator(gradient_accumulation_steps=args.accumulation)
            unet = UNet2DConditionModel.from_pretrained(args.model, subfolder="unet")
            optimizer = torch.optim.AdamW(unet.parameters(), lr=1e-5)
            unet, optimizer, loader = accelerator.prepare(unet, optimizer, make_loader(args))
            generator = torch.Generator(device=accelerator.device).manual_seed(args.seed)

            def unwrap_model(model):
                model = accelerator.unwrap_model(model)
                return model

            for step, batch in enumerate(loader):
                with accelerator.accumulate(unet):
                    loss = unet(batch["latents"], batch["timesteps"], batch["embeddings"]).sample.pow(2).mean()
                    accelerator.backward(loss)
                    optimizer.step()
                if accelerator.sync_gradients and step % args.validation_steps == 0:
                    pipeline = StableDiffusionPipeline.from_pretrained(args.model, unet=unwrap_model(unet))
                    log_validation(pipeline, args.prompt, generator)
        """,
        severity=Severity.ERROR,
    ),
    Fires(
        """
        import torch
        import torch.nn as nn

        model = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 10)).cuda()
        criterion = nn.CrossEntropyLoss()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
        for epoch in range(10):
            for images, labels in train_loader:
                outputs = model(images.cuda())
                loss = criterion(outputs, labels.cuda())
                loss.backward()
                optimizer.step()
        """,
        severity=Severity.ERROR,
    ),
    Fires(
        """
        import torch.nn.functional as F

        def train(model, loader, optimizer, epochs):
            model.train()
            for epoch in range(epochs):
                optimizer.zero_grad()
                for x, y in loader:
                    loss = F.cross_entropy(model(x), y)
                    loss.backward()
                    optimizer.step()
        """
    ),
    Fires(
        """
        import torch
        import torch.nn.functional as F

        def train_amp(model, loader, optimizer):
            scaler = torch.cuda.amp.GradScaler()
            for x, y in loader:
                with torch.autocast("cuda"):
                    loss = F.mse_loss(model(x), y)
                scaler.scale(loss).backward()
                scaler.step(optimizer)
                scaler.update()
        """
    ),
    Fires(
        """
        import torch
        from accelerate import Accelerator

        accelerator = Accelerator()
        model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
        for batch in loader:
            outputs = model(**batch)
            accelerator.backward(outputs.loss)
            optimizer.step()
            lr_scheduler.step()
        """
    ),
    Fires(
        """
        import torch.nn as nn

        criterion = nn.CrossEntropyLoss()

        def train_step(model, optimizer, x, y):
            loss = criterion(model(x), y)
            loss.backward()
            optimizer.step()
            return loss.item()

        def fit(model, optimizer, loader):
            for x, y in loader:
                train_step(model, optimizer, x, y)
        """
    ),
    Fires(
        """
        import torch

        def train(model, loader, optimizer, criterion):
            for x, y in loader:
                try:
                    loss = criterion(model(x), y)
                    loss.backward()
                except torch.cuda.OutOfMemoryError:
                    optimizer.zero_grad()
                    torch.cuda.empty_cache()
                    continue
                optimizer.step()
        """
    ),
    Fires(
        """
        import torch
        import torch.nn as nn

        class Trainer:
            def __init__(self, model):
                self.model = model
                self.criterion = nn.MSELoss()
                self.optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)

            def fit(self, loader):
                for x, y in loader:
                    loss = self.criterion(self.model(x), y)
                    loss.backward()
                    self.optimizer.step()
        """
    ),
    Fires(  # framework hooks: Lightning manual optimisation clears nothing for you
        """
        import torch
        import lightning as L

        class WGAN(L.LightningModule):
            def __init__(self, generator, critic):
                super().__init__()
                self.automatic_optimization = False
                self.generator = generator
                self.critic = critic

            def training_step(self, batch, batch_idx):
                opt_g, opt_d = self.optimizers()
                fake = self.generator(torch.randn(batch.shape[0], 128, device=self.device))
                d_loss = self.critic(fake.detach()).mean() - self.critic(batch).mean()
                self.manual_backward(d_loss)
                opt_d.step()
                g_loss = -self.critic(fake).mean()
                self.manual_backward(g_loss)
                opt_g.step()

            def configure_optimizers(self):
                return (
                    torch.optim.Adam(self.generator.parameters(), lr=1e-4),
                    torch.optim.Adam(self.critic.parameters(), lr=1e-4),
                )
        """
    ),
    Fires(  # objects: the loop is in one method, the backward and the step in the ones it calls
        """
        import torch

        class SFTRecipe:
            def __init__(self, model, optimizer, loss_fn, steps):
                self.model = model
                self.optimizer = optimizer
                self.loss_fn = loss_fn
                self.steps = steps

            def forward_backward(self, batch):
                loss = self.loss_fn(self.model(batch["tokens"]), batch["labels"])
                loss.backward()
                return loss

            def train_step(self, batch):
                loss = self.forward_backward(batch)
                self.optimizer.step()
                return loss

            def train(self, dataloader):
                self.optimizer.zero_grad()
                for step, batch in enumerate(dataloader):
                    if step >= self.steps:
                        break
                    self.train_step(batch)
        """
    ),
    Fires(  # two models: the generator's gradients are cleared every step, the discriminator's never
        """
        import torch
        import torch.nn.functional as F
        from models import Discriminator, Generator

        def train(loader, device, epochs):
            netG = Generator(latent_dim=100).to(device)
            netD = Discriminator().to(device)
            optimizer_G = torch.optim.Adam(netG.parameters(), lr=2e-4, betas=(0.5, 0.999))
            optimizer_D = torch.optim.Adam(netD.parameters(), lr=2e-4, betas=(0.5, 0.999))
            for epoch in range(epochs):
                for real, _ in loader:
                    real = real.to(device)
                    fake = netG(torch.randn(real.size(0), 100, device=device))
                    real_score = netD(real)
                    fake_score = netD(fake.detach())
                    loss_real = F.binary_cross_entropy_with_logits(real_score, torch.ones_like(real_score))
                    loss_fake = F.binary_cross_entropy_with_logits(fake_score, torch.zeros_like(fake_score))
                    loss_D = loss_real + loss_fake
                    loss_D.backward()
                    optimizer_D.step()

                    netG.zero_grad()
                    gen_score = netD(fake)
                    loss_G = F.binary_cross_entropy_with_logits(gen_score, torch.ones_like(gen_score))
                    loss_G.backward()
                    optimizer_G.step()
        """,
        files={"models.py": """
            import torch.nn as nn

            class Generator(nn.Module):
                def __init__(self, latent_dim):
                    super().__init__()
                    self.net = nn.Sequential(nn.Linear(latent_dim, 784), nn.Tanh())

                def forward(self, z):
                    return self.net(z)

            class Discriminator(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.net = nn.Sequential(nn.Linear(784, 1))

                def forward(self, x):
                    return self.net(x.flatten(1))
            """},
        at="loss_D.backward()",
    ),
    Fires(  # the models come in as arguments; their optimizers are built here
        """
        import torch

        def train_encoder(E, D, G, loader, gan_loss, epochs):
            optimizer_E = torch.optim.Adam(E.net.parameters(), lr=1e-4)
            optimizer_D = torch.optim.Adam(D.net.parameters(), lr=1e-4)
            for epoch in range(epochs):
                for x in loader:
                    x = x.cuda()
                    x_rec = G.synthesis(E.net(x))
                    loss_D = gan_loss(D.net(x), real=True) + gan_loss(D.net(x_rec.detach()), real=False)
                    loss_D.backward()
                    optimizer_D.step()

                    loss_E = torch.mean((x - x_rec) ** 2) + gan_loss(D.net(x_rec), real=True)
                    optimizer_E.zero_grad()
                    loss_E.backward()
                    optimizer_E.step()
        """,
        at="loss_D.backward()",
    ),
    Fires(  # one training step per call, its loop in another file: the critic's gradients are never cleared
        """
        import torch
        from torch import nn

        from nets import Critic, Painter


        class AdversarialPair:
            def __init__(self, z_dim, lr, device):
                self.z_dim = z_dim
                self.device = device
                self.painter = Painter(z_dim, lr).to(device)
                self.critic = Critic(lr).to(device)
                self.bce = nn.BCEWithLogitsLoss()

            def update(self, real):
                real = real.to(self.device)
                ones = torch.ones(real.size(0), 1, device=self.device)
                zeros = torch.zeros(real.size(0), 1, device=self.device)
                fake = self.painter(torch.randn(real.size(0), self.z_dim, device=self.device))
                critic_loss = self.bce(self.critic(real), ones) + self.bce(self.critic(fake.detach()), zeros)
                critic_loss.backward()
                self.critic.opt.step()

                self.painter.zero_grad()
                painter_loss = self.bce(self.critic(fake), ones)
                painter_loss.backward()
                self.painter.opt.step()
                return critic_loss.item(), painter_loss.item()
        """,
        files={"nets.py": """
            import torch
            from torch import nn


            class Critic(nn.Module):
                def __init__(self, lr):
                    super().__init__()
                    self.net = nn.Sequential(nn.Linear(784, 256), nn.LeakyReLU(0.2), nn.Linear(256, 1))
                    self.opt = torch.optim.Adam(self.parameters(), lr=lr, betas=(0.5, 0.999))

                def forward(self, x):
                    return self.net(x)


            class Painter(nn.Module):
                def __init__(self, z_dim, lr):
                    super().__init__()
                    self.net = nn.Sequential(nn.Linear(z_dim, 256), nn.ReLU(), nn.Linear(256, 784), nn.Tanh())
                    self.opt = torch.optim.Adam(self.parameters(), lr=lr, betas=(0.5, 0.999))

                def forward(self, z):
                    return self.net(z)
        """},
        severity=Severity.WARNING,
        at="critic_loss.backward()",
    ),
    Fires(  # the AMP path split over a trainer's methods: each tests the same setting, only the fp32 step clears
        """
        import torch


        class Trainer:
            def __init__(self, model, optimizer, args):
                self.model, self.optimizer, self.args = model, optimizer, args
                self.scaler = torch.cuda.amp.GradScaler(enabled=args.amp)

            def backward(self, loss):
                if self.args.amp:
                    self.scaler.scale(loss).backward()
                else:
                    loss.backward()

            def optimizer_step(self):
                if self.args.amp:
                    self.scaler.step(self.optimizer)
                    self.scaler.update()
                else:
                    self.optimizer.step()
                    self.optimizer.zero_grad()

            def train_epoch(self, loader):
                self.model.train()
                for batch in loader:
                    with torch.autocast("cuda", enabled=self.args.amp):
                        loss = self.model(**batch).loss
                    self.backward(loss)
                    self.optimizer_step()
        """,
        no_fix=True,
    ),
    Fires(  # two `if args.amp:` in one loop: the backward's and the step's; the clearing only on the fp32 side
        """
        import torch


        def train(model, loader, optimizer, scaler, args):
            model.train()
            for images, targets in loader:
                with torch.autocast("cuda", enabled=args.amp):
                    loss = torch.nn.functional.cross_entropy(model(images.cuda()), targets.cuda())
                if args.amp:
                    scaler.scale(loss).backward()
                else:
                    loss.backward()
                if args.amp:
                    scaler.step(optimizer)
                    scaler.update()
                else:
                    optimizer.step()
                    optimizer.zero_grad()
        """,
        no_fix=True,
        at="scaler.scale(loss).backward()",
    ),
    # the optimizer known by what the code does with it, whatever it is called (shapes: optproto)
    Fires(  # handed in as a parameter: stepped first after the backward
        """
        import torch.nn.functional as F


        def fit(net, upd, data, epochs):
            net.train()
            for _ in range(epochs):
                for x, y in data:
                    err = F.cross_entropy(net(x), y)
                    err.backward()
                    upd.step()
        """,
    ),
    Fires(  # kept on `self` by a `setup()` from a builder handed in
        """
        import torch.nn.functional as F


        class Runner:
            def setup(self, build_net, build_upd, cfg):
                self.net = build_net(cfg)
                self.upd = build_upd(self.net, cfg)

            def run(self, data):
                for x, y in data:
                    err = F.cross_entropy(self.net(x), y)
                    err.backward()
                    self.upd.step()
        """,
    ),
    Fires(  # the generator's adversarial loss runs through the discriminator; its gradients are cleared only after
        # its own step, so that step applies the generator loss's gradients too
        """
        import torch
        import torch.nn.functional as F

        from models import Discriminator, Generator


        class GANTrainer:
            def __init__(self, generator, discriminator, lr, latent_dim):
                self.generator = generator
                self.discriminator = discriminator
                self.latent_dim = latent_dim
                self.opt_g = torch.optim.Adam(generator.parameters(), lr=lr, betas=(0.5, 0.999))
                self.opt_d = torch.optim.Adam(discriminator.parameters(), lr=lr, betas=(0.5, 0.999))

            def train_step(self, real):
                z = torch.randn(real.size(0), self.latent_dim, device=real.device)
                fake = self.generator(z)
                fake_logits = self.discriminator(fake)
                g_loss = F.binary_cross_entropy_with_logits(fake_logits, torch.ones_like(fake_logits))
                g_loss.backward()
                self.opt_g.step()
                self.opt_g.zero_grad()

                real_logits = self.discriminator(real)
                detached_logits = self.discriminator(fake.detach())
                d_loss = (F.binary_cross_entropy_with_logits(real_logits, torch.ones_like(real_logits))
                          + F.binary_cross_entropy_with_logits(detached_logits, torch.zeros_like(detached_logits)))
                d_loss.backward()
                self.opt_d.step()
                self.opt_d.zero_grad()
                return g_loss.item(), d_loss.item()


        def main(loader, epochs):
            trainer = GANTrainer(Generator(), Discriminator(), 2e-4, 128)
            for _ in range(epochs):
                for real, _ in loader:
                    trainer.train_step(real)
        """,
        files={"models.py": """
        import torch.nn as nn


        class Generator(nn.Sequential):
            def __init__(self):
                super().__init__(nn.Linear(128, 256), nn.ReLU(), nn.Linear(256, 784), nn.Tanh())


        class Discriminator(nn.Sequential):
            def __init__(self):
                super().__init__(nn.Linear(784, 256), nn.LeakyReLU(0.2), nn.Linear(256, 1))
        """},
        no_fix=True,
        severity=Severity.WARNING,
        at="self.opt_d.step()",
    ),
    Fires(  # an autoencoder that holds its own discriminator: the reconstruction loss's adversarial term runs it, the
        # main optimizer holds every parameter but the discriminator's, and the discriminator is cleared after its step only
        """
        import torch

        from autoencoder import AdversarialAutoencoder


        def train(loader, steps, lr=3e-4):
            vae = AdversarialAutoencoder(dim=64)
            discr_params = set(vae.discr.parameters())
            vae_params = set(vae.parameters()) - discr_params
            optim = torch.optim.Adam(vae_params, lr=lr)
            discr_optim = torch.optim.Adam(discr_params, lr=lr)
            for step, images in zip(range(steps), loader):
                loss = vae(images, return_loss=True)
                loss.backward()
                optim.step()
                optim.zero_grad()

                discr_loss = vae(images, return_discr_loss=True)
                discr_loss.backward()
                discr_optim.step()
                discr_optim.zero_grad()
        """,
        files={"autoencoder.py": """
        import torch.nn as nn
        import torch.nn.functional as F


        class AdversarialAutoencoder(nn.Module):
            def __init__(self, dim):
                super().__init__()
                self.encoder = nn.Conv2d(3, dim, 4, stride=2, padding=1)
                self.decoder = nn.ConvTranspose2d(dim, 3, 4, stride=2, padding=1)
                self.discr = nn.Sequential(nn.Conv2d(3, dim, 4, stride=2), nn.LeakyReLU(0.1), nn.Conv2d(dim, 1, 4))

            def forward(self, images, return_loss=False, return_discr_loss=False):
                recon = self.decoder(self.encoder(images))
                if return_discr_loss:
                    return F.relu(1 + self.discr(recon.detach())).mean() + F.relu(1 - self.discr(images)).mean()
                return F.mse_loss(recon, images) - self.discr(recon).mean()
        """},
        no_fix=True,
        severity=Severity.WARNING,
        at="discr_optim.step()",
    ),
    Fires(  # a book's package module calls its own helpers through the module object it binds (`sys.modules[__name__]`)
        """
        import sys

        import torch
        from torch import nn

        book = sys.modules[__name__]


        def grad_clipping(net, theta):
            params = [p for p in net.parameters() if p.requires_grad]
            norm = torch.sqrt(sum(torch.sum(p.grad ** 2) for p in params))
            if norm > theta:
                for param in params:
                    param.grad[:] *= theta / norm


        def train_seq2seq(net, data_iter, lr, num_epochs, device):
            net.to(device)
            optimizer = torch.optim.Adam(net.parameters(), lr=lr)
            loss = nn.CrossEntropyLoss(reduction="none")
            net.train()
            for epoch in range(num_epochs):
                for batch in data_iter:
                    source, target = [x.to(device) for x in batch]
                    l = loss(net(source).permute(0, 2, 1), target)
                    l.sum().backward()
                    book.grad_clipping(net, 1)
                    optimizer.step()
        """,
        at="l.sum().backward()",
    ),
)

MissingZeroGrad.MUST_NOT_FIRE = (
    Quiet(  # the discriminator is cleared right after the generator's step, before its own backward
        """
        import torch
        import torch.nn.functional as F


        class GANTrainer:
            def __init__(self, generator, discriminator, lr, latent_dim):
                self.generator = generator
                self.discriminator = discriminator
                self.latent_dim = latent_dim
                self.opt_g = torch.optim.Adam(generator.parameters(), lr=lr, betas=(0.5, 0.999))
                self.opt_d = torch.optim.Adam(discriminator.parameters(), lr=lr, betas=(0.5, 0.999))

            def train_step(self, real):
                z = torch.randn(real.size(0), self.latent_dim, device=real.device)
                fake = self.generator(z)
                fake_logits = self.discriminator(fake)
                g_loss = F.binary_cross_entropy_with_logits(fake_logits, torch.ones_like(fake_logits))
                g_loss.backward()
                self.opt_g.step()
                self.opt_g.zero_grad()
                self.opt_d.zero_grad()

                real_logits = self.discriminator(real)
                detached_logits = self.discriminator(fake.detach())
                d_loss = (F.binary_cross_entropy_with_logits(real_logits, torch.ones_like(real_logits))
                          + F.binary_cross_entropy_with_logits(detached_logits, torch.zeros_like(detached_logits)))
                d_loss.backward()
                self.opt_d.step()
                self.opt_d.zero_grad()
                return g_loss.item(), d_loss.item()
        """,
    ),
    Quiet(  # the discriminator is frozen while the generator's loss runs through it: that backward leaves it nothing
        """
        import torch
        import torch.nn.functional as F


        def set_requires_grad(net, flag):
            for param in net.parameters():
                param.requires_grad = flag


        class GANTrainer:
            def __init__(self, generator, discriminator, lr, latent_dim):
                self.generator = generator
                self.discriminator = discriminator
                self.latent_dim = latent_dim
                self.opt_g = torch.optim.Adam(generator.parameters(), lr=lr)
                self.opt_d = torch.optim.Adam(discriminator.parameters(), lr=lr)

            def train_step(self, real):
                z = torch.randn(real.size(0), self.latent_dim, device=real.device)
                fake = self.generator(z)
                set_requires_grad(self.discriminator, False)
                fake_logits = self.discriminator(fake)
                g_loss = F.binary_cross_entropy_with_logits(fake_logits, torch.ones_like(fake_logits))
                g_loss.backward()
                self.opt_g.step()
                self.opt_g.zero_grad()

                set_requires_grad(self.discriminator, True)
                real_logits = self.discriminator(real)
                detached_logits = self.discriminator(fake.detach())
                d_loss = (F.binary_cross_entropy_with_logits(real_logits, torch.ones_like(real_logits))
                          + F.binary_cross_entropy_with_logits(detached_logits, torch.zeros_like(detached_logits)))
                d_loss.backward()
                self.opt_d.step()
                self.opt_d.zero_grad()
        """,
    ),
    Quiet(  # the discriminator steps first, on the generator's output detached, so its loss leaves the generator
        # nothing; the generator's loss runs through the discriminator last, and only the generator's step follows it
        """
        import torch
        import torch.nn.functional as F

        from models import Discriminator, Generator


        def train(loader, epochs, device, latent_dim=128):
            netG, netD = Generator().to(device), Discriminator().to(device)
            optG = torch.optim.Adam(netG.parameters(), lr=2e-4)
            optD = torch.optim.Adam(netD.parameters(), lr=2e-4)
            for _ in range(epochs):
                for real, _ in loader:
                    real = real.to(device)
                    fake = netG(torch.randn(real.size(0), latent_dim, device=device))
                    d_loss = F.relu(1 - netD(real)).mean() + F.relu(1 + netD(fake.detach())).mean()
                    d_loss.backward()
                    optD.step()
                    optD.zero_grad()

                    g_loss = -netD(fake).mean()
                    g_loss.backward()
                    optG.step()
                    optG.zero_grad()
        """,
        files={"models.py": """
        import torch.nn as nn


        class Generator(nn.Sequential):
            def __init__(self):
                super().__init__(nn.Linear(128, 784), nn.Tanh())


        class Discriminator(nn.Sequential):
            def __init__(self):
                super().__init__(nn.Linear(784, 1))
        """},
    ),
    Quiet(  # an engine by its protocol (run as the model, `.backward(loss)`, `.step()`), from a wrapper of DeepSpeed's
        # initialize: its step zeroes the gradients
        """
        from msamp import deepspeed as msamp_deepspeed


        def fit(model, optimizer, train_batches, config):
            model, optimizer, _, _ = msamp_deepspeed.initialize(model=model, optimizer=optimizer, config_params=config)
            model.train()
            for _ in range(2):
                for batch in train_batches:
                    outputs = model(**batch)
                    model.backward(outputs.loss)
                    model.step()
            return model
        """
    ),
    Quiet(  # the subclass's hook that the base's loop runs clears before its backward
        """
        import torch


        class Trainer:
            def __init__(self, model, optimizer, device):
                self.model = model.to(device)
                self.optimizer = optimizer
                self.device = device

            def compute_loss(self, batch):
                raise NotImplementedError("subclasses compute the loss")

            def fit(self, loader, epochs):
                for epoch in range(epochs):
                    self.model.train()
                    for batch in loader:
                        self.compute_loss(batch)
                        self.optimizer.step()
        """,
        files={"segmentation.py": """
        import torch.nn.functional as F

        from train import Trainer


        class SegmentationTrainer(Trainer):
            def compute_loss(self, batch):
                self.optimizer.zero_grad(set_to_none=True)
                images, masks = batch
                logits = self.model(images.to(self.device))
                loss = F.cross_entropy(logits, masks.to(self.device))
                loss.backward()
                return loss.item()
        """},
    ),
    Quiet(  # the clearing waits for the same switch as the whole step: with it off nothing trains
        """
        import torch


        def tune(head, loader, optimizer, args):
            for x, y in loader:
                loss = torch.nn.functional.cross_entropy(head(x), y)
                if args.train_head:
                    loss.backward()
                    optimizer.step()
                    optimizer.zero_grad()
        """
    ),
    Quiet(  # the clearing waits only for the accumulation boundary the step waits for
        """
        import torch


        def train(model, loader, optimizer, accumulation, scheduler=None):
            for i, (x, y) in enumerate(loader):
                (torch.nn.functional.mse_loss(model(x), y) / accumulation).backward()
                if (i + 1) % accumulation == 0:
                    optimizer.step()
                    if scheduler is not None:
                        scheduler.step()
                    optimizer.zero_grad()
        """
    ),
    Quiet(  # each branch clears its own steps; and accumulation clears under the same `if` as its step
        """
        import torch


        def fit(model, optimizer, scaler, loader, use_amp, accumulation_steps):
            for step, (images, labels) in enumerate(loader):
                if use_amp:
                    with torch.autocast("cuda", dtype=torch.float16):
                        loss = torch.nn.functional.cross_entropy(model(images), labels)
                    scaler.scale(loss).backward()
                    scaler.step(optimizer)
                    scaler.update()
                    optimizer.zero_grad(set_to_none=True)
                else:
                    loss = torch.nn.functional.cross_entropy(model(images), labels) / accumulation_steps
                    loss.backward()
                    if (step + 1) % accumulation_steps == 0:
                        optimizer.step()
                        optimizer.zero_grad(set_to_none=True)
        """
    ),
    Quiet(  # each optimizer's gradients are cleared, one through the optimizer, one through the model
        """
        import torch
        import torch.nn as nn

        def train(loader, device):
            netG = nn.Sequential(nn.Linear(100, 784), nn.Tanh()).to(device)
            netD = nn.Sequential(nn.Linear(784, 1)).to(device)
            optimizer_G = torch.optim.Adam(netG.parameters(), lr=2e-4)
            optimizer_D = torch.optim.Adam(netD.parameters(), lr=2e-4)
            criterion = nn.BCEWithLogitsLoss()
            for real in loader:
                fake = netG(torch.randn(real.size(0), 100, device=device))
                netD.zero_grad()
                loss_D = criterion(netD(real), torch.ones(real.size(0), 1, device=device))
                loss_D.backward()
                optimizer_D.step()
                optimizer_G.zero_grad()
                loss_G = criterion(netD(fake), torch.ones(real.size(0), 1, device=device))
                loss_G.backward()
                optimizer_G.step()
        """
    ),
    Quiet(  # the cleared wrapper holds the stepped network's parameters
        """
        import torch
        from torch.nn.parallel import DistributedDataParallel as DDP

        def train(net, loader, criterion, rank):
            model = DDP(net.to(rank), device_ids=[rank])
            optimizer = torch.optim.SGD(net.parameters(), lr=0.1)
            for x, y in loader:
                model.zero_grad()
                loss = criterion(model(x.to(rank)), y.to(rank))
                loss.backward()
                optimizer.step()
        """
    ),
    Quiet(  # the cleared model is part of the stepped one
        """
        import torch

        def train(model, loader, criterion):
            optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
            for x, y in loader:
                model.zero_grad()
                loss = criterion(model(x), y)
                loss.backward()
                optimizer.step()
        """
    ),
    Quiet(  # an optimizer over several models: which parameters it holds is not one model's
        """
        import itertools
        import torch

        def train(encoder, decoder, loader, criterion):
            optimizer = torch.optim.Adam(itertools.chain(encoder.parameters(), decoder.parameters()), lr=1e-3)
            optimizer_enc = torch.optim.Adam(encoder.parameters(), lr=1e-3)
            for x in loader:
                optimizer_enc.zero_grad()
                loss = criterion(decoder(encoder(x)), x)
                loss.backward()
                optimizer.step()
        """
    ),
    Quiet(
        """
        import torch.nn.functional as F

        def train(model, loader, optimizer):
            for x, y in loader:
                for p in model.parameters():
                    p.grad = None
                loss = F.cross_entropy(model(x), y)
                loss.backward()
                optimizer.step()
        """
    ),
    Quiet(
        """
        def train(model, loader, optimizer, criterion, accum_steps):
            for i, (x, y) in enumerate(loader):
                loss = criterion(model(x), y) / accum_steps
                loss.backward()
                if (i + 1) % accum_steps == 0:
                    optimizer.step()
                    optimizer.zero_grad()
        """
    ),
    Quiet(
        """
        def train(model, loader, optimizer, criterion):
            for batch in loader:
                optimizer.zero_grad(set_to_none=True)
                micro_batches = zip(batch["x"].chunk(4), batch["y"].chunk(4))
                for x, y in micro_batches:
                    loss = criterion(model(x), y) / 4
                    loss.backward()
                optimizer.step()
        """
    ),
    Quiet(
        """
        import deepspeed

        model_engine, optimizer, train_loader, _ = deepspeed.initialize(
            args=args, model=model, model_parameters=model.parameters(), training_data=dataset
        )
        for step, batch in enumerate(train_loader):
            loss = model_engine(batch)
            model_engine.backward(loss)
            model_engine.step()
        """
    ),
    Quiet(
        """
        from utils import clip_gradient

        def train(model, loader, optimizer, criterion):
            for x, y in loader:
                loss = criterion(model(x), y)
                loss.backward()
                clip_gradient(optimizer, 5.0)
                optimizer.step()
        """
    ),
    Quiet(
        """
        import torch
        import pytorch_lightning as pl

        class Unrolled(pl.LightningModule):
            def __init__(self):
                super().__init__()
                self.automatic_optimization = False
                self.net = torch.nn.Linear(8, 1)

            def training_step(self, batch, batch_idx):
                opt = self.optimizers()
                for x, y in batch:
                    loss = torch.nn.functional.mse_loss(self.net(x), y)
                    loss.backward()
                    opt.step()
        """
    ),
    Quiet(
        """
        from transformers import Trainer

        class ChunkedTrainer(Trainer):
            def training_step(self, model, inputs, num_items_in_batch=None):
                model.train()
                for chunk in self.split_inputs(inputs):
                    loss = self.compute_loss(model, chunk)
                    loss.backward()
                    self.optimizer.step()
                return loss.detach()
        """
    ),
    Quiet(
        """
        import torch.nn as nn

        criterion = nn.CrossEntropyLoss()

        def clear(model):
            for param in model.parameters():
                param.grad = None

        def fit(model, optimizer, loader):
            for x, y in loader:
                loss = criterion(model(x), y)
                loss.backward()
                optimizer.step()
                clear(model)
        """
    ),
    Quiet(
        """
        import torch

        def fit_lbfgs(model, x, y, criterion, steps):
            optimizer = torch.optim.LBFGS(model.parameters())
            for _ in range(steps):
                def closure():
                    optimizer.zero_grad()
                    loss = criterion(model(x), y)
                    loss.backward()
                    return loss
                optimizer.step(closure)
        """
    ),
    Quiet(
        """
        import torch

        class GuidedSampler:
            def refine(self, unet, latents, timesteps, guidance_loss, lr):
                for t in timesteps:
                    x = latents.detach().clone()
                    x.requires_grad = True
                    opt = torch.optim.SGD([x], lr=lr)
                    with torch.enable_grad():
                        guidance_loss(unet(x, t)).backward()
                        opt.step()
                    latents = x.detach()
                return latents
        """
    ),
    Quiet(
        """
        def saliency(model, images):
            maps = []
            for x in images:
                x.requires_grad_(True)
                model(x).max().backward()
                maps.append(x.grad.abs())
            return maps
        """
    ),
    Quiet(  # manual optimisation that clears what it steps
        """
        import torch
        import lightning as L

        class WGAN(L.LightningModule):
            def __init__(self, generator, critic):
                super().__init__()
                self.automatic_optimization = False
                self.generator = generator
                self.critic = critic

            def training_step(self, batch, batch_idx):
                opt_g, opt_d = self.optimizers()
                fake = self.generator(torch.randn(batch.shape[0], 128, device=self.device))
                d_loss = self.critic(fake.detach()).mean() - self.critic(batch).mean()
                opt_d.zero_grad()
                self.manual_backward(d_loss)
                opt_d.step()
                g_loss = -self.critic(fake).mean()
                opt_g.zero_grad()
                self.manual_backward(g_loss)
                opt_g.step()
        """
    ),
    Quiet(  # automatic optimisation: Lightning backwards, steps and clears
        """
        import torch
        import torch.nn.functional as F
        import lightning as L

        class Classifier(L.LightningModule):
            def __init__(self, net):
                super().__init__()
                self.net = net

            def training_step(self, batch, batch_idx):
                x, y = batch
                return F.cross_entropy(self.net(x), y)

            def configure_optimizers(self):
                return torch.optim.AdamW(self.parameters(), lr=1e-3)
        """
    ),
    Quiet(  # Accelerate: the backward goes through the accelerator, the clearing is explicit
        """
        from accelerate import Accelerator

        accelerator = Accelerator(gradient_accumulation_steps=4)
        model, optimizer, train_dataloader = accelerator.prepare(model, optimizer, train_dataloader)
        for batch in train_dataloader:
            with accelerator.accumulate(model):
                loss = model(**batch).loss
                accelerator.backward(loss)
                optimizer.step()
                optimizer.zero_grad()
        """
    ),
    Quiet(  # the same step, clearing each model's gradients through the optimizer it holds
        """
        import torch
        from torch import nn


        class Critic(nn.Module):
            def __init__(self, lr):
                super().__init__()
                self.net = nn.Linear(784, 1)
                self.opt = torch.optim.Adam(self.parameters(), lr=lr)

            def forward(self, x):
                return self.net(x)


        class Painter(nn.Module):
            def __init__(self, z_dim, lr):
                super().__init__()
                self.net = nn.Linear(z_dim, 784)
                self.opt = torch.optim.Adam(self.parameters(), lr=lr)

            def forward(self, z):
                return self.net(z)


        class AdversarialPair:
            def __init__(self, z_dim, lr):
                self.z_dim = z_dim
                self.painter = Painter(z_dim, lr)
                self.critic = Critic(lr)

            def update(self, real):
                fake = self.painter(torch.randn(real.size(0), self.z_dim))
                self.critic.opt.zero_grad()
                critic_loss = self.critic(fake.detach()).mean() - self.critic(real).mean()
                critic_loss.backward()
                self.critic.opt.step()
                self.painter.opt.zero_grad()
                painter_loss = -self.critic(fake).mean()
                painter_loss.backward()
                self.painter.opt.step()
        """
    ),
    Quiet(  # the AMP and fp32 steps under two tests of one setting, both followed by the same clearing
        """
        import torch


        def train(model, loader, optimizer, scaler, args):
            for step, (images, targets) in enumerate(loader):
                with torch.autocast("cuda", enabled=args.amp):
                    loss = torch.nn.functional.cross_entropy(model(images), targets) / args.accum
                if args.amp:
                    scaler.scale(loss).backward()
                else:
                    loss.backward()
                if (step + 1) % args.accum == 0:
                    if args.amp:
                        scaler.step(optimizer)
                        scaler.update()
                    else:
                        optimizer.step()
                    optimizer.zero_grad()
        """,
    ),
    Quiet(  # `opt` counts the images done: no optimizer steps, whatever its name (optproto)
        """
        class RunState:
            def __init__(self, total):
                self.total, self.done = total, 0

            def step(self):
                self.done += 1


        def saliency(model, images):
            opt = RunState(len(images))
            maps = []
            for x in images:
                x = x.clone().requires_grad_(True)
                model(x).max().backward()
                maps.append(x.grad.abs().detach())
                opt.step()
            return maps
        """,
    ),
    Quiet(  # the module's own helper, reached through its module object, is the one that clears the gradients
        """
        import sys

        import torch

        book = sys.modules[__name__]


        def sgd(params, lr, batch_size):
            with torch.no_grad():
                for param in params:
                    param -= lr * param.grad / batch_size
                    param.grad.zero_()


        def train_epoch(net, train_iter, loss, lr, batch_size):
            for X, y in train_iter:
                l = loss(net(X), y)
                l.sum().backward()
                book.sgd(net.parameters(), lr, batch_size)
                optimizer.step()
        """,
    ),
    Quiet(  # `book` is another module loaded at run time, whose `grad_clipping` this file does not show: it may clear
        """
        import importlib

        import torch
        from torch import nn

        book = importlib.import_module("course.torch_utils")


        def train_seq2seq(net, data_iter, lr, num_epochs, device):
            optimizer = torch.optim.Adam(net.parameters(), lr=lr)
            loss = nn.CrossEntropyLoss()
            for epoch in range(num_epochs):
                for source, target in data_iter:
                    loss(net(source.to(device)), target.to(device)).backward()
                    book.grad_clipping(net, 1)
                    optimizer.step()
        """,
    ),
)
