"""Gradients are cleared between `backward()` and `step()`: the optimizer steps on zeros.

The order inside a training step matters: `backward()` fills `.grad`, `step()` reads it. Clearing
in between (`optimizer.zero_grad()`, `model.zero_grad()`, `p.grad = None`) throws the fresh
gradients away, so `step()` applies nothing (or only weight decay and momentum from earlier
steps): the loss does not move, the run burns its budget, and nothing crashes.

The same happens across iterations under gradient accumulation: a clearing that runs on every
iteration (or in every pass of a micro-batch loop) while the step runs only every N throws away what
the earlier passes accumulated, so each step applies the last backward's gradient alone.

How to fix: clear before the backward or after the step, e.g. `optimizer.zero_grad()`,
`loss.backward()`, `optimizer.step()`. The quick fix moves the clearing call to just after the step.
With accumulation, clear only where you step.
"""

from __future__ import annotations

import builtins

import libcst as cst

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
    Tag,
    TextEdit,
    accumulates_into_grad,
    clears_gradients,
    dotted,
    is_optimizer_step,
    is_torch_name,
    ordered_events,
    path_conditions,
    walk,
    written,
)

Item = tuple[Event, tuple[CallEvent, ...]]


class ZeroGradBeforeStep(Rule):
    code = "TL206"
    name = "zero-grad-before-step"
    severity = Severity.ERROR

    def check_scope(self, ctx: RuleContext, scope: ScopeAnalysis) -> None:
        for loop in scope.loops:
            items = [item for item in ordered_events(scope, loop) if _runs_in_iteration(item, loop)]
            reported = set()
            for backward, clear, step in _cleared_before_step(items, loop):
                self._report(ctx, scope, loop, backward, clear, step)
                reported.add(id(clear[0].node))
            undone = _accumulation_undone(scope, loop)
            if undone is not None and id(undone[1][0].node) not in reported:  # one finding a clearing
                self._report_undone(ctx, scope, loop, *undone)

    def _report_undone(self, ctx: RuleContext, scope: ScopeAnalysis, loop: Loop, backward: CallEvent, cleared: Item,
                       step: CallEvent, accumulation: Loop | Condition, holds: bool) -> None:
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
            where = ((scope.chunk, accumulation.node), "one backward per iteration, one step after the loop")
        else:
            # the test stands in the loop, or in the helper that steps (its chunk is the step's)
            tested = step.chunk if any(condition is accumulation for condition in step.context.conditions) else scope.chunk
            test = " ".join(tested.code_for(accumulation.test).split()) if accumulation.test is not None else "..."
            when = f"when `{test}`" if holds else f"when `{test}` does not hold"
            schedule = f"`{stepping}` runs only {when}, but `{clearing}` runs on every iteration"
            where = ((tested, accumulation.node), "the optimizer steps only on some iterations")
        ctx.report(
            site.node,
            f"{schedule}: each clearing throws away the gradients the earlier backward passes accumulated, so every "
            f"step applies the last backward's gradient alone and the accumulation does nothing",
            evidence=[
                ((clear.chunk, clear.node), "clears the gradients before each backward"),
                *(((link.chunk, link.node), f"`{written(link)}` runs it here, every iteration") for link in chain),
                ((backward.chunk, backward.node), "gradients meant to add up over several passes"),
                where,
                ((step.chunk, step.node), "the step that should apply their sum"),
            ],
            chunk=site.chunk,
            help=f"run `{clearing}` only right after `{stepping}` (in the same block)",
        )

    def _report(self, ctx: RuleContext, scope: ScopeAnalysis, loop: Loop, backward: Item, clear: Item, step: Item) -> None:
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
                ((scope.chunk, loop.node), "in each iteration of this loop"),
            ],
            chunk=site.chunk,
            help=f"move `{clearing}` after `{written(step_event)}` (or before the backward)",
            fix=ctx.fix(f"move `{clearing}` after the step", _move_after(ctx, clear, step), safe=True),
        )


def _accumulation_undone(scope: ScopeAnalysis, loop: Loop) -> tuple[CallEvent, Item, CallEvent, Loop | Condition, bool] | None:
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
        return _stepped_by_helper_every_n(scope, loop)
    if len(steps) != 1 or _handles_gradients_itself(scope, loop):
        return None
    step = steps[0]
    counted = _counted_tests(scope, loop, step)
    every_n = [c for c in step.context.conditions_inside(loop) if c.test is not None and _every_n(c.test, counted)]
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
        # what runs on every iteration, also inside a helper the loop calls (`self.train_step(batch)`)
        unconditional = [
            (event, chain) for event, chain in ordered_events(scope, loop)
            if _runs_in_iteration((event, chain), loop) and not path_conditions(event, chain, loop)
            and (every_iteration is step or _before(scope, chain[0] if chain else event, every_iteration))
        ]
        backward = next((event for event, _ in unconditional if accumulates_into_grad(event)), None)
        clear = next(((event, chain) for event, chain in unconditional if clears_gradients(event)), None)
        if backward is not None and clear is not None and _same_gradients(clear[0], step, [(step, ())]):
            return backward, clear, step, every_n[0], holds
        return None
    for inner in scope.loops:
        if inner.parent is not loop or not _runs_after(scope, step, inner):
            continue
        inside = [event for event in scope.events if inner in event.context.loops]
        if any(isinstance(event, CallEvent) and is_optimizer_step(event) for event in inside):
            continue
        direct = [event for event in inside if event.context.loop is inner and not event.context.conditions_inside(inner)]
        backward = next((e for e in direct if accumulates_into_grad(e)), None)
        clear = next((e for e in direct if clears_gradients(e)), None)
        if backward is not None and clear is not None and _same_gradients(clear, step, [(step, ())]):
            return backward, (clear, ()), step, inner, True
    return None


def _stepped_by_helper_every_n(scope: ScopeAnalysis, loop: Loop) -> tuple[CallEvent, Item, CallEvent, Condition, bool] | None:
    """The loop steps only through a helper it calls every iteration, which steps under an every-N test of
    its own (`self.optimizer_step()`, counting micro-steps on the object), while the clearing and the
    backward run on every iteration."""
    items = [item for item in ordered_events(scope, loop) if _runs_in_iteration(item, loop)]
    steps = [(event, chain) for event, chain in items if chain and isinstance(event, CallEvent) and is_optimizer_step(event)]
    if len(steps) != 1:
        return None
    step, chain = steps[0]
    if chain[0].context.conditions_inside(loop):
        return None  # the helper itself runs on some iterations only: the loop's own test decides
    inside = [condition for link in (*chain[1:], step) for condition in link.context.conditions]
    every_n = [condition for condition in inside if condition.test is not None and _every_n(condition.test)]
    if len(every_n) != 1 or len(inside) != 1:
        return None
    unconditional = [
        (event, event_chain) for event, event_chain in items
        if not path_conditions(event, event_chain, loop) and _before(scope, event_chain[0] if event_chain else event, chain[0])
    ]
    backward = next((event for event, _ in unconditional if accumulates_into_grad(event)), None)
    clear = next(((event, event_chain) for event, event_chain in unconditional if clears_gradients(event)), None)
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
        or (isinstance(node, cst.Name) and node.value in counted)
        for node in walk(test)
    )


def _counted_tests(scope: ScopeAnalysis, loop: Loop, step: CallEvent) -> frozenset[str]:
    """Names the loop's body binds, on every iteration before the step, to a remainder test."""
    counted: set[str] = set()
    for event in scope.events:
        if event is step:
            break
        if not isinstance(event, AssignEvent) or event.context.loop is not loop or event.context.conditions_inside(loop):
            continue
        if len(event.targets) == 1 and event.value_node is not None:
            if _every_n(event.value_node):
                counted.add(event.targets[0])
            else:
                counted.discard(event.targets[0])
    return frozenset(counted)


def _before(scope: ScopeAnalysis, event: Event, later: Event) -> bool:
    """The event comes before ``later`` in the loop's body."""
    for other in scope.events:
        if other is later:
            return False
        if other is event:
            return True
    return False


def _handles_gradients_itself(scope: ScopeAnalysis, loop: Loop) -> bool:
    if _reads_gradients(scope, loop.node):
        return True
    for event in scope.events:
        if loop not in event.context.loops or not isinstance(event, CallEvent) or event.function is not None:
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
    gradients itself. Kept per node: a key reads again only the loops it reached."""
    kept = scope.chunk.node_memo("TL206 reads gradients")
    found = kept.get(loop)
    if found is None:
        found = kept[loop] = any(
            (isinstance(node, cst.Attribute) and node.attr.value == "grad")
            or (isinstance(node, cst.Call) and (dotted(node.func) or "").endswith("autograd.grad"))
            for node in walk(loop)
        )
    return found


def _runs_in_iteration(item: Item, loop: Loop) -> bool:
    """Events of this loop's own iterations, not of loops nested in it."""
    event, chain = item
    site = chain[0] if chain else event
    if not site.context.loops or site.context.loops[-1] is not loop:
        return False
    return not any(link.context.loops for link in (*chain[1:], event)) if chain else True


def _cleared_before_step(items: list[Item], loop: Loop):
    for index, (event, _chain) in enumerate(items):
        if not accumulates_into_grad(event):
            continue
        for later in range(index + 1, len(items)):
            candidate, candidate_chain = items[later]
            if accumulates_into_grad(candidate) or (isinstance(candidate, CallEvent) and is_optimizer_step(candidate)):
                break
            if not clears_gradients(candidate):
                continue
            step = _next_step(items, later)
            if step is not None and _same_gradients(candidate, step[0], items) and _runs_whenever(items[later], step, loop):
                yield items[index], items[later], step
            break


def _next_step(items: list[Item], start: int) -> tuple[CallEvent, tuple[CallEvent, ...]] | None:
    for event, chain in items[start + 1:]:
        if accumulates_into_grad(event):
            return None
        if isinstance(event, CallEvent) and is_optimizer_step(event):
            return event, chain
    return None


def _same_gradients(clear: Event, step: CallEvent, items: list[Item]) -> bool:
    """The clearing call empties the gradients this step reads."""
    cleared = _optimizer_key(clear)
    stepped = _optimizer_key(step)
    if cleared is not None and stepped is not None:
        return cleared == stepped
    # `model.zero_grad()`, `p.grad = None`: the same gradients when the loop steps one optimizer only
    steppers = {_optimizer_key(event) for event, _ in items if isinstance(event, CallEvent) and is_optimizer_step(event)}
    return len(steppers) == 1 and (isinstance(clear, AssignEvent) or _clears_a_model(clear))


def _optimizer_key(event: Event) -> str | None:
    if not isinstance(event, CallEvent):
        return None
    key = event.receiver_key or (event.callee or "").rpartition(".")[0]
    scaler = (event.receiver is not None and Tag.SCALER in event.receiver.tags) or "scaler" in key.lower()
    if event.method == "step" and scaler and event.arg_nodes:
        return event.scope.chunk.code_for(event.arg_nodes[0].value)
    if event.receiver is not None and Tag.MODEL in event.receiver.tags:
        return None
    return key or None


def _clears_a_model(event: Event) -> bool:
    return isinstance(event, CallEvent) and event.receiver is not None and Tag.MODEL in event.receiver.tags


def _runs_whenever(clear: Item, step: Item, loop: Loop) -> bool:
    """The clearing runs on every iteration on which the step runs."""
    needed = set(map(id, path_conditions(*clear, loop)))
    return needed <= set(map(id, path_conditions(*step, loop)))


def _move_after(ctx: RuleContext, clear: Item, step: Item) -> list[TextEdit | None]:
    """Delete the clearing statement's line and put it after the step's, when both are one-line
    statements of the same block."""
    (clear_event, clear_chain), (step_event, step_chain) = clear, step
    if clear_chain or step_chain or clear_event.chunk is not step_event.chunk:
        return [None]
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


ZeroGradBeforeStep.MUST_FIRE = (
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
)

ZeroGradBeforeStep.MUST_NOT_FIRE = (
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
)
