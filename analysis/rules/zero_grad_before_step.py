"""Gradients are cleared between `backward()` and `step()`: the optimizer steps on zeros.

The order inside a training step matters: `backward()` fills `.grad`, `step()` reads it. Clearing
in between (`optimizer.zero_grad()`, `model.zero_grad()`, `p.grad = None`) throws the fresh
gradients away, so `step()` applies nothing (or only weight decay and momentum from earlier
steps): the loss does not move, the run burns its budget, and nothing crashes.

How to fix: clear before the backward or after the step, e.g. `optimizer.zero_grad()`,
`loss.backward()`, `optimizer.step()`. The quick fix moves the clearing call to just after the step.
"""

from __future__ import annotations

from trainlint.rules import (
    AssignEvent,
    CallEvent,
    Event,
    Fires,
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
    is_optimizer_step,
    ordered_events,
    path_conditions,
    written,
)

Item = tuple[Event, tuple[CallEvent, ...]]


class ZeroGradBeforeStep(Rule):
    code = "TL206"
    name = "zero-grad-before-step"
    severity = Severity.ERROR

    def check(self, ctx: RuleContext) -> None:
        for scope in ctx.scopes:
            for loop in scope.loops:
                items = [item for item in ordered_events(scope, loop) if _runs_in_iteration(item, loop)]
                for backward, clear, step in _cleared_before_step(items, loop):
                    self._report(ctx, scope, loop, backward, clear, step)

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
)

ZeroGradBeforeStep.MUST_NOT_FIRE = (
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
)
