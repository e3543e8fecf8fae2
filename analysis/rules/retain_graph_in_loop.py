"""`backward(retain_graph=True)` every iteration, and nothing ever runs a second backward on that graph.

`retain_graph=True` tells autograd to keep the graph's saved activations after the backward, so
that another backward (or `torch.autograd.grad`) can run through it. When nothing does, the
activations are only freed when the graph's last reference goes: at best one step later, which
doubles the activation memory of every step (often the difference between fitting and OOM),
and at worst never, when the loss or an output is kept, so memory grows until the run dies.
It is usually copied from a tutorial or added to silence "Trying to backward through the graph
a second time", which means the real bug (a tensor carried across iterations without
`.detach()`) is still there.

How to fix: drop `retain_graph=True`. If an error about backwarding twice appears, detach the
tensor that carries the graph from one iteration to the next (`hidden = hidden.detach()`).
"""

from __future__ import annotations

import libcst as cst

from trainlint.rules import (
    CallEvent,
    Fires,
    Loop,
    Quiet,
    Rule,
    RuleContext,
    ScopeAnalysis,
    Severity,
    calls_in,
    is_backward,
    is_test_file,
)


class RetainGraphInLoop(Rule):
    code = "TL103"
    name = "retain-graph-in-loop"
    severity = Severity.WARNING

    def check_scope(self, ctx: RuleContext, scope: ScopeAnalysis) -> None:
        if is_test_file(ctx.module.path):
            return  # tests run backward repeatedly on one graph to check gradients and accumulation
        for call in scope.calls():
            if not _retains(call) or not call.context.loops:
                continue
            loop = call.context.loops[-1]
            others = [other for other in calls_in(scope, loop) if is_backward(other) and other is not call]
            if not others:
                self._report(ctx, scope, call, loop)

    def _report(self, ctx: RuleContext, scope: ScopeAnalysis, call: CallEvent, loop: Loop) -> None:
        written = " ".join(scope.chunk.code_for(call.node).split())
        ctx.report(
            call.node,
            f"`{written}` keeps the graph's saved activations after every backward, but nothing in the loop runs a "
            f"second backward or `autograd.grad` through it: each step's activations stay in memory at least until "
            f"the next step, and for as long as anything refers to the graph",
            evidence=[
                ((scope.chunk, loop.node), "the loop: this backward runs every iteration"),
                ((scope.chunk, call.node), "the only backward in the loop, with `retain_graph=True`"),
            ],
            help="remove `retain_graph=True`; if autograd then complains about a second backward, `.detach()` the "
            "tensor that carries the graph into the next iteration",
        )


def _retains(call: CallEvent) -> bool:
    if not is_backward(call) or call.callee == "torch.autograd.grad":
        return False
    argument = call.keyword("retain_graph")
    return argument is not None and isinstance(argument.value, cst.Name) and argument.value.value == "True"


RetainGraphInLoop.MUST_FIRE = (
    Fires(
        """
        for x, y in loader:
            optimizer.zero_grad()
            loss = criterion(model(x), y)
            loss.backward(retain_graph=True)
            optimizer.step()
        """
    ),
    Fires(
        """
        import torch

        def train(model, loader, optimizer, scaler):
            for x, y in loader:
                with torch.autocast("cuda"):
                    loss = model(x, y)
                scaler.scale(loss).backward(retain_graph=True)
                scaler.step(optimizer)
                scaler.update()
                optimizer.zero_grad()
        """
    ),
    Fires(
        """
        hidden = model.init_hidden(batch_size)
        for epoch in range(epochs):
            for inputs, targets in batches:
                output, hidden = model(inputs, hidden)
                loss = criterion(output, targets)
                model.zero_grad()
                loss.backward(retain_graph=True)
                optimizer.step()
        """
    ),
    Fires(
        """
        import torch

        step = 0
        while step < max_steps:
            loss = model(next(data)).mean()
            torch.autograd.backward(loss, retain_graph=True)
            optimizer.step()
            optimizer.zero_grad()
            step += 1
        """
    ),
    Fires(
        """
        def fit(model, loader, optimizer, accelerator):
            for batch in loader:
                outputs = model(**batch)
                outputs.loss.backward(
                    retain_graph=True,
                )
                optimizer.step()
                optimizer.zero_grad()
        """
    ),
    Fires(
        """
        losses = []
        for x, y in loader:
            loss = criterion(model(x), y)
            losses.append(loss.item())
            loss.backward(retain_graph=True)
            optimizer.step()
            optimizer.zero_grad()
        """
    ),
)

RetainGraphInLoop.MUST_NOT_FIRE = (
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
            features = trunk(x)
            loss_a = head_a(features).mean()
            loss_b = head_b(features).mean()
            optimizer.zero_grad()
            loss_a.backward(retain_graph=True)
            loss_b.backward()
            optimizer.step()
        """
    ),
    Quiet(
        """
        for real in loader:
            fake = generator(noise())
            d_loss = discriminator(fake).mean() - discriminator(real).mean()
            opt_d.zero_grad()
            d_loss.backward(retain_graph=True)
            opt_d.step()
            g_loss = -discriminator(fake).mean()
            opt_g.zero_grad()
            g_loss.backward()
            opt_g.step()
        """
    ),
    Quiet(
        """
        import torch

        for x in loader:
            out = model(x)
            loss = out.pow(2).mean()
            loss.backward(retain_graph=True)
            penalty = torch.autograd.grad(out.sum(), x, create_graph=True)[0]
            optimizer.step()
        """
    ),
    Quiet(
        """
        loss = criterion(model(x), y)
        loss.backward(retain_graph=True)
        loss.backward()
        """
    ),
    Quiet(
        """
        for x, y in loader:
            loss = criterion(model(x), y)
            loss.backward(retain_graph=False)
            optimizer.step()
        """
    ),
    Quiet(
        """
        def step(model, x):
            loss = model(x)
            loss.backward(retain_graph=True)
            return loss

        for x in loader:
            loss = step(model, x)
            (loss * 2).backward()
            optimizer.step()
        """
    ),
)
