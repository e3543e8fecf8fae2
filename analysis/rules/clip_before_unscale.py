"""With a `GradScaler`, gradients are clipped while they are still scaled: the clip does almost nothing.

Under mixed precision, `scaler.scale(loss).backward()` leaves the gradients multiplied by the
loss scale (65,536 at the start, and it grows). `clip_grad_norm_(params, 1.0)` then measures
and clips those inflated gradients, so the threshold is off by that factor: the clip either
never triggers (gradient explosions go through and the run diverges) or, with a value clip,
cuts every gradient to almost nothing. The training looks like it has clipping and does not.

So does a gradient hook that clamps (`param.register_hook(lambda g: g.clamp(-c, c))`): it runs inside
the backward of the scaled loss. The same holds in a step helper that clips and then calls `scaler.step(optimizer)` on gradients its
caller scaled (an `Updater.step(grad_scaler)` whose training loop is in another file).

How to fix: unscale first, in the same iteration: `scaler.unscale_(optimizer)`, then clip, then
`scaler.step(optimizer)` (which knows the gradients are already unscaled). Not needed with bf16
autocast and no scaler, nor with `accelerator.clip_grad_norm_`, which unscales for you.
"""

from __future__ import annotations

from typing import TypeGuard

import libcst as cst

from trainlint.rules import (
    CallEvent,
    Event,
    Fires,
    Quiet,
    Rule,
    RuleContext,
    ScopeAnalysis,
    Severity,
    Tag,
    TextEdit,
    accumulates_into_grad,
    dotted,
    ordered_events,
    walk,
    written,
)

_CLIPS = frozenset({"torch.nn.utils.clip_grad_norm_", "torch.nn.utils.clip_grad_value_", "torch.nn.utils.clip_grad_norm"})
Item = tuple[Event, tuple[CallEvent, ...]]
# Tensor methods and torch functions that clamp a gradient to fixed bounds.
_CLAMPS = frozenset({"clamp", "clamp_", "clip", "clip_"})


def _needed(event: Event) -> bool:
    """What every finding needs: a backward of a scaled loss, a clip, or a gradient hook."""
    return accumulates_into_grad(event) or (isinstance(event, CallEvent) and (event.callee in _CLIPS or event.method == "register_hook"))


class ClipBeforeUnscale(Rule):
    code = "TL207"
    name = "clip-before-unscale"
    severity = Severity.ERROR
    scope_needs = _needed

    def check_scope(self, ctx: RuleContext, scope: ScopeAnalysis) -> None:
        items = list(ordered_events(scope, None))
        scaled = None
        for event, chain in items:
            if accumulates_into_grad(event):
                scaled = (event, chain) if _scaler_of(event) is not None else None
            elif _is_scaler_call(event, "unscale_"):
                scaled = None
            elif isinstance(event, CallEvent) and event.callee in _CLIPS and scaled is not None:
                # both inside one helper: the helper's own scope reports it
                if not (chain and scaled[1] and chain[0] is scaled[1][0]):
                    step = _later_scaler_step(items, event)
                    self._report(ctx, scaled[0], (event, chain), step, _unscaled_between(items, event, step))
                scaled = None
        self._check_stepping_helper(ctx, scope, items)
        self._check_clipping_hooks(ctx, scope)

    def _check_clipping_hooks(self, ctx: RuleContext, scope: ScopeAnalysis) -> None:
        """`p.register_hook(lambda g: g.clamp(-c, c))` on each parameter, in a file whose backward runs on
        `scaler.scale(loss)`: the hook runs during that backward, on the gradient still multiplied by the
        loss scale, so it clamps at c / scale of the true gradient."""
        for call in scope.calls():
            if call.method != "register_hook" or not call.arg_nodes or not _clamps(call.arg_nodes[0].value):
                continue
            loop = next((loop for loop in reversed(call.context.loops) if _iterates_parameters(loop.node, call.receiver_key)), None)
            if loop is None:
                continue
            scaled = next((backward for backward in ctx.module.backward_calls if _scaler_of(backward) is not None), None)
            if scaled is None:
                continue
            scaler = _scaler_of(scaled)
            ctx.report(
                call.node,
                f"`{written(call)}` clamps each parameter's gradient while backward computes it, and the backward on "
                f"line {ctx.line_of((scaled.chunk, scaled.node))} runs on `{scaler}.scale(...)`: the hook sees the gradient "
                f"still multiplied by the loss scale (65,536 at first), so its bound cuts the true gradient that many times "
                "below the bound meant",
                evidence=[
                    ((scope.chunk, loop.node), "a hook on every parameter: it runs inside each backward"),
                    ((scaled.chunk, scaled.node), f"backward of the scaled loss: gradients multiplied by `{scaler}`'s scale"),
                ],
                severity=Severity.WARNING,
                help=f"clip after `{scaler}.unscale_(optimizer)`, before `{scaler}.step(optimizer)` "
                     "(`torch.nn.utils.clip_grad_value_`), instead of in a gradient hook",
            )

    def _check_stepping_helper(self, ctx: RuleContext, scope: ScopeAnalysis, items: list[Item]) -> None:
        """A function that clips and then calls ``scaler.step(...)`` on gradients its caller computed
        (``Updater.step(grad_scaler)``): ``GradScaler.step`` unscales them itself only when no
        ``unscale_`` ran, so the clip between saw them still scaled."""
        if scope.function is None:
            return
        for index, (event, chain) in enumerate(items):
            if accumulates_into_grad(event) or _is_scaler_call(event, "unscale_"):
                return  # gradients made or unscaled here: the walk in check_scope judges them
            if chain or not isinstance(event, CallEvent) or event.callee not in _CLIPS:
                continue
            step = _stepping_scaler_after(items[index + 1:])
            if step is not None and not ctx.module.calls_of(scope.function):
                self._report_helper(ctx, event, step)  # (with a caller here, the caller's scope judges it)
            return

    def _report_helper(self, ctx: RuleContext, clip: CallEvent, step: CallEvent) -> None:
        scaler = _receiver(step)
        optimizer = step.chunk.code_for(step.arg_nodes[0].value) if step.arg_nodes else "optimizer"
        ctx.report(
            clip.node,
            f"`{written(clip)}` clips gradients that `{scaler}.step(...)` on line {ctx.line_of((step.chunk, step.node))} "
            f"then unscales: they reach this function still multiplied by the loss scale of `{scaler}` (no "
            f"`unscale_` runs before the clip), so the threshold is off by that factor (65,536 at first)",
            evidence=[
                ((clip.chunk, clip.node), f"clipped with no `{scaler}.unscale_(...)` before it in this function"),
                ((step.chunk, step.node), f"`{scaler}` steps the optimizer here: it unscales only the gradients no `unscale_` reached"),
            ],
            severity=Severity.WARNING,
            help=f"call `{scaler}.unscale_({optimizer})` just before the clip",
        )

    def _report(self, ctx: RuleContext, backward: CallEvent, clip: Item, step: CallEvent | None, unscaled_later: bool) -> None:
        clip_event, chain = clip
        # the clip itself is what is wrong, also inside a helper of this file; its call is evidence
        site = chain[0] if chain and ctx.in_another_file(clip_event.chunk) else clip_event
        scaler = _scaler_of(backward)
        optimizer = step.chunk.code_for(step.arg_nodes[0].value) if step is not None and step.arg_nodes else None
        unscale = f"{scaler}.unscale_({optimizer or 'optimizer'})"
        evidence = [
            ((backward.chunk, backward.node), f"gradients computed from `{scaler}.scale(...)`: multiplied by the loss scale"),
            ((clip_event.chunk, clip_event.node), f"clipped with no `{scaler}.unscale_(...)` in between"),
        ]
        evidence.extend(((link.chunk, link.node), f"`{written(link)}` runs the clip here") for link in chain)
        if step is not None:
            evidence.append(((step.chunk, step.node), f"`{scaler}` steps the optimizer here"))
        ctx.report(
            site.node,
            f"`{written(clip_event)}` clips the gradients while they are still multiplied by the loss scale of "
            f"`{scaler}`: the threshold is off by that factor (65,536 at first), so the clip does not do what it says",
            evidence=evidence,
            chunk=site.chunk,
            help=f"call `{unscale}` just before the clip",
            # a second unscale_ before the step raises, so the fix is safe only when none follows the clip
            fix=ctx.fix(
                f"unscale before clipping: `{unscale}`", [_insert_unscale(ctx, clip, unscale)], safe=not unscaled_later,
            ) if optimizer else None,
        )


def _scaler_of(backward: CallEvent) -> str | None:
    """`scaler` for `scaler.scale(loss).backward()`, else None."""
    func = backward.node.func
    if not isinstance(func, cst.Attribute) or not isinstance(func.value, cst.Call):
        return None
    inner = func.value.func
    if not isinstance(inner, cst.Attribute) or inner.attr.value != "scale":
        return None
    receiver = backward.chunk.code_for(inner.value)
    return receiver if "scaler" in receiver.lower() or _scale_call_on_scaler(backward, func.value) else None


def _scale_call_on_scaler(backward: CallEvent, node: cst.Call) -> bool:
    for call in backward.scope.calls():
        if call.node is node:
            return call.receiver is not None and Tag.SCALER in call.receiver.tags
    return False


def _later_scaler_step(items: list[Item], clip: CallEvent) -> CallEvent | None:
    seen = False
    for event, _ in items:
        if event is clip:
            seen = True
        elif seen and _is_scaler_call(event, "step"):
            return event
    return None


def _clamps(hook: cst.BaseExpression) -> bool:
    """A lambda whose result clamps its argument: `lambda g: g.clamp(-1, 1)`, `lambda g: torch.clamp(g, -c, c)`."""
    if not isinstance(hook, cst.Lambda):
        return False
    return any(
        isinstance(node, cst.Call) and (dotted(node.func) or "").rpartition(".")[2] in _CLAMPS for node in walk(hook.body)
    )


def _iterates_parameters(loop: cst.CSTNode, name: str | None) -> bool:
    """`for p in model.parameters():` (or `for n, p in model.named_parameters():`) binding ``name``."""
    if name is None or not isinstance(loop, cst.For) or not isinstance(loop.iter, cst.Call):
        return False
    func = loop.iter.func
    if not isinstance(func, cst.Attribute) or func.attr.value not in {"parameters", "named_parameters"}:
        return False
    target = loop.target
    if isinstance(target, cst.Tuple) and target.elements:
        target = target.elements[-1].value
    return isinstance(target, cst.Name) and target.value == name


def _stepping_scaler_after(items: list[Item]) -> CallEvent | None:
    """The first ``scaler.step(...)`` of ``items`` on a value known to be a GradScaler, unless an
    ``unscale_`` or a backward runs before it."""
    for event, _ in items:
        if accumulates_into_grad(event) or _is_scaler_call(event, "unscale_"):
            return None
        if _is_scaler_call(event, "step") and event.receiver is not None and Tag.SCALER in event.receiver.tags:
            return event
    return None


def _unscaled_between(items: list[Item], clip: CallEvent, step: CallEvent | None) -> bool:
    """An ``unscale_`` after the clip and before the step (or anywhere after it, with no step)."""
    seen = False
    for event, _ in items:
        if event is clip:
            seen = True
        elif event is step:
            return False
        elif seen and _is_scaler_call(event, "unscale_"):
            return True
    return False


def _receiver(call: CallEvent) -> str:
    return call.receiver_key or (call.callee or "").rpartition(".")[0] or "scaler"


def _is_scaler_call(event: Event, method: str) -> TypeGuard[CallEvent]:
    if not isinstance(event, CallEvent) or event.method != method:
        return False
    if event.receiver is not None and Tag.SCALER in event.receiver.tags:
        return True
    return "scaler" in _receiver(event).lower()


def _insert_unscale(ctx: RuleContext, clip: Item, unscale: str) -> TextEdit | None:
    event, chain = clip
    if chain:
        return None
    line, _, _, _ = event.chunk.range_of(event.node)
    text = ctx.module.line(line)
    indent = text[: len(text) - len(text.lstrip())]
    if not text.strip().startswith(event.chunk.code_for(event.node).split("(", 1)[0]):
        return None
    return TextEdit(line, 1, line, 1, f"{indent}{unscale}\n")


ClipBeforeUnscale.MUST_FIRE = (
    Fires(
        """
        import torch

        scaler = torch.cuda.amp.GradScaler()
        for x, y in loader:
            optimizer.zero_grad()
            with torch.autocast("cuda", dtype=torch.float16):
                loss = criterion(model(x), y)
            scaler.scale(loss).backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            scaler.step(optimizer)
            scaler.update()
        """,
        fixed="""
        import torch

        scaler = torch.cuda.amp.GradScaler()
        for x, y in loader:
            optimizer.zero_grad()
            with torch.autocast("cuda", dtype=torch.float16):
                loss = criterion(model(x), y)
            scaler.scale(loss).backward()
            scaler.unscale_(optimizer)
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            scaler.step(optimizer)
            scaler.update()
        """,
    ),
    Fires(
        """
        from torch.cuda.amp import GradScaler
        from torch.nn.utils import clip_grad_value_

        def train(model, loader, opt):
            scaler = GradScaler()
            for batch in loader:
                loss = model(batch)
                scaler.scale(loss).backward()
                clip_grad_value_(model.parameters(), 0.5)
                scaler.step(opt)
                scaler.update()
                opt.zero_grad()
        """,
        fixed="""
        from torch.cuda.amp import GradScaler
        from torch.nn.utils import clip_grad_value_

        def train(model, loader, opt):
            scaler = GradScaler()
            for batch in loader:
                loss = model(batch)
                scaler.scale(loss).backward()
                scaler.unscale_(opt)
                clip_grad_value_(model.parameters(), 0.5)
                scaler.step(opt)
                scaler.update()
                opt.zero_grad()
        """,
    ),
    Fires(
        """
        import torch

        def fit(model, loader, optimizer, scaler, max_norm):
            for epoch in range(10):
                for x, y in loader:
                    loss = model(x, y)
                    scaler.scale(loss).backward()
                    if max_norm:
                        torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
                    scaler.step(optimizer)
                    scaler.update()
                    optimizer.zero_grad()
        """,
        fixed="""
        import torch

        def fit(model, loader, optimizer, scaler, max_norm):
            for epoch in range(10):
                for x, y in loader:
                    loss = model(x, y)
                    scaler.scale(loss).backward()
                    if max_norm:
                        scaler.unscale_(optimizer)
                        torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
                    scaler.step(optimizer)
                    scaler.update()
                    optimizer.zero_grad()
        """
    ),
    Fires(
        """
        import torch

        amp_scaler = torch.amp.GradScaler("cuda")
        for step, batch in enumerate(loader):
            loss = model(**batch).loss
            amp_scaler.scale(loss).backward()
            grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            amp_scaler.step(optimizer)
            amp_scaler.update()
            optimizer.zero_grad(set_to_none=True)
        """
    ),
    Fires(  # where it is reported: at the clip inside the helper, with the helper's call as evidence
        """
        import torch

        def clip(model):
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)

        scaler = torch.cuda.amp.GradScaler()
        for x in loader:
            scaler.scale(model(x)).backward()
            clip(model)
            scaler.step(optimizer)
            scaler.update()
        """,
        at="torch.nn.utils.clip_grad_norm_",
    ),
    Fires(
        """
        import torch

        class Trainer:
            def _run_batch(self, source, targets):
                with torch.autocast("cuda", dtype=torch.float16, enabled=self.use_amp):
                    _, loss = self.model(source, targets)
                self.optimizer.zero_grad(set_to_none=True)
                if self.use_amp:
                    self.scaler.scale(loss).backward()
                    torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
                    self.scaler.step(self.optimizer)
                    self.scaler.update()
                else:
                    loss.backward()
                    torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
                    self.optimizer.step()
        """,
        fixed="""
        import torch

        class Trainer:
            def _run_batch(self, source, targets):
                with torch.autocast("cuda", dtype=torch.float16, enabled=self.use_amp):
                    _, loss = self.model(source, targets)
                self.optimizer.zero_grad(set_to_none=True)
                if self.use_amp:
                    self.scaler.scale(loss).backward()
                    self.scaler.unscale_(self.optimizer)
                    torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
                    self.scaler.step(self.optimizer)
                    self.scaler.update()
                else:
                    loss.backward()
                    torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
                    self.optimizer.step()
        """,
    ),
    Fires(
        """
        import torch

        scaler = torch.cuda.amp.GradScaler()
        while True:
            loss = model(next(data))
            scaler.scale(loss).backward()
            torch.nn.utils.clip_grad_norm_(params, 5.0)
            scaler.step(opt)
            scaler.update()
        """,
        fixed="""
        import torch

        scaler = torch.cuda.amp.GradScaler()
        while True:
            loss = model(next(data))
            scaler.scale(loss).backward()
            scaler.unscale_(opt)
            torch.nn.utils.clip_grad_norm_(params, 5.0)
            scaler.step(opt)
            scaler.update()
        """
    ),
    Fires(  # the step lives in a class of its own; the loop that scales the loss is in another file
        """
        from typing import Optional

        import torch


        class OptimizerStep:
            def __init__(self, network, max_grad_norm):
                self.network = network
                self.max_grad_norm = max_grad_norm
                self.optimizer = torch.optim.AdamW(network.parameters(), lr=3e-4)

            def apply(self, grad_scaler: Optional[torch.amp.GradScaler] = None):
                if self.max_grad_norm:
                    torch.nn.utils.clip_grad_norm_(self.network.parameters(), self.max_grad_norm)
                if grad_scaler is not None:
                    grad_scaler.step(self.optimizer)
                    grad_scaler.update()
                else:
                    self.optimizer.step()
                self.optimizer.zero_grad(set_to_none=True)
        """,
        files={"engine.py": """
            import torch

            from train import OptimizerStep


            class Engine:
                def __init__(self, network, use_amp):
                    self.network = network
                    self.grad_scaler = torch.amp.GradScaler("cuda") if use_amp else None
                    self.stepper = OptimizerStep(network, max_grad_norm=1.0)

                def train_epoch(self, batches):
                    for inputs, targets in batches:
                        with torch.autocast("cuda", enabled=self.grad_scaler is not None):
                            loss = torch.nn.functional.cross_entropy(self.network(inputs), targets)
                        if self.grad_scaler is not None:
                            self.grad_scaler.scale(loss).backward()
                        else:
                            loss.backward()
                        self.stepper.apply(self.grad_scaler)
        """},
        severity=Severity.WARNING,
        at="torch.nn.utils.clip_grad_norm_",
    ),
    Fires(  # gradient clipping by hooks on the parameters, with a GradScaler in the loop
        """
        import torch
        import torch.nn.functional as F


        class MixedPrecisionTrainer:
            def __init__(self, model, optimizer, grad_clip=1.0):
                self.model = model
                self.optimizer = optimizer
                self.scaler = torch.cuda.amp.GradScaler()
                for name, param in model.named_parameters():
                    if param.requires_grad:
                        param.register_hook(lambda grad: grad.clamp(-grad_clip, grad_clip))

            def train_epoch(self, loader):
                for images, labels in loader:
                    self.optimizer.zero_grad(set_to_none=True)
                    with torch.autocast("cuda", dtype=torch.float16):
                        loss = F.cross_entropy(self.model(images), labels)
                    self.scaler.scale(loss).backward()
                    self.scaler.step(self.optimizer)
                    self.scaler.update()
        """,
        severity=Severity.WARNING,
        at="param.register_hook(lambda grad: grad.clamp(-grad_clip, grad_clip))",
    ),
)

ClipBeforeUnscale.MUST_NOT_FIRE = (
    Quiet(
        """
        import torch

        scaler = torch.cuda.amp.GradScaler()
        for x, y in loader:
            loss = criterion(model(x), y)
            scaler.scale(loss).backward()
            scaler.unscale_(optimizer)
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            scaler.step(optimizer)
            scaler.update()
        """
    ),
    Quiet(
        """
        import torch

        for x, y in loader:
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = criterion(model(x), y)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
        """
    ),
    Quiet(
        """
        for batch in loader:
            with accelerator.accumulate(model):
                loss = model(**batch).loss
                accelerator.backward(loss)
                accelerator.clip_grad_norm_(model.parameters(), 1.0)
                optimizer.step()
        """
    ),
    Quiet(
        """
        import torch

        scaler = torch.cuda.amp.GradScaler()
        for i, (x, y) in enumerate(loader):
            scaler.scale(criterion(model(x), y) / 4).backward()
            if (i + 1) % 4 == 0:
                scaler.unscale_(optimizer)
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                scaler.step(optimizer)
                scaler.update()
                optimizer.zero_grad()
        """
    ),
    Quiet(
        """
        import torch

        scaler = torch.cuda.amp.GradScaler()
        for x, y in loader:
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            loss = criterion(model(x), y)
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
        """
    ),
    Quiet(
        """
        import torch

        def unscale_and_clip(scaler, optimizer, model):
            scaler.unscale_(optimizer)
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)

        scaler = torch.cuda.amp.GradScaler()
        for x in loader:
            scaler.scale(model(x)).backward()
            unscale_and_clip(scaler, optimizer, model)
            scaler.step(optimizer)
            scaler.update()
        """
    ),
    Quiet(  # the helper that clips and steps is called after the caller unscaled
        """
        import torch

        def step_with_clipping(model, optimizer, scaler, max_norm):
            torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
            scaler.step(optimizer)
            scaler.update()
            optimizer.zero_grad()

        def train(model, loader, optimizer):
            scaler = torch.cuda.amp.GradScaler()
            for x, y in loader:
                with torch.autocast("cuda", dtype=torch.float16):
                    loss = torch.nn.functional.mse_loss(model(x), y)
                scaler.scale(loss).backward()
                scaler.unscale_(optimizer)
                step_with_clipping(model, optimizer, scaler, 1.0)
        """
    ),
    Quiet(  # a step helper that unscales before it clips
        """
        import torch

        class Stepper:
            def __init__(self, model, optimizer, scaler):
                self.model, self.optimizer, self.scaler = model, optimizer, scaler

            def step(self):
                self.scaler.unscale_(self.optimizer)
                torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
                self.scaler.step(self.optimizer)
                self.scaler.update()
        """
    ),
    Quiet(  # the same hooks in full precision: the gradients they see are the true ones
        """
        import torch.nn.functional as F


        class Trainer:
            def __init__(self, model, optimizer, grad_clip=1.0):
                self.model = model
                self.optimizer = optimizer
                for param in model.parameters():
                    param.register_hook(lambda grad: grad.clamp(-grad_clip, grad_clip))

            def train_epoch(self, loader):
                for images, labels in loader:
                    self.optimizer.zero_grad(set_to_none=True)
                    F.cross_entropy(self.model(images), labels).backward()
                    self.optimizer.step()
        """
    ),
)
