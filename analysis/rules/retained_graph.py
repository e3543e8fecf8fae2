"""A tensor that carries its autograd graph is kept across loop iterations.

Why it costs money: every stored graph pins the activations it was built from. A history list
fed `loss` instead of `loss.item()` grows by one forward pass of activations per step, and the
run dies with CUDA out-of-memory hundreds of steps in — after the GPU hours are spent. When a
backward already ran on the stored value its activations are freed, but the graph's nodes
still pile up in host memory for the whole run.

How to fix: store `loss.item()` (a Python float) for logging, or `tensor.detach()` when you
need the tensor; `.cpu()` alone keeps the graph. It is fine to keep graph-carrying values on
purpose when a backward later runs through them (`torch.stack(losses).mean().backward()`).
"""

from __future__ import annotations

import libcst as cst

from ..flow import CallEvent, JumpEvent, Loop, ScopeAnalysis, StoreEvent
from ..model import Severity
from ..patterns import backward_target, calls_in, is_backward, mentions
from ..values import CONSTANT, GRAPH, NUMBER
from .base import Fires, Quiet, Rule


class RetainedGraph(Rule):
    code = "TL101"
    name = "retained-graph"
    severity = Severity.ERROR
    fixable = True

    def check(self, ctx) -> None:
        for scope in ctx.scopes:
            for event in scope.events:
                if isinstance(event, StoreEvent):
                    self._check_store(ctx, scope, event)

    def _check_store(self, ctx, scope: ScopeAnalysis, store: StoreEvent) -> None:
        value = store.value
        if GRAPH not in value.tags or store.context.grad_off is not None:
            return
        loop = next((loop for loop in reversed(store.context.loops) if store.outlives(loop)), None)
        if loop is None or _walks_structure(loop):
            return
        later_scopes = ctx.module.scopes_from(scope)
        if any(_consumed(later, store.container) for later in later_scopes):
            return
        if value.roots and any(_backward_after_reaches(later, loop, value) for later in later_scopes):
            return
        backward_in_loop = [call for call in calls_in(scope, loop) if is_backward(call)]
        backwarded = any(
            not value.roots or value.roots & backward_target(call).roots or not backward_target(call).roots
            for call in backward_in_loop
        )
        container = store.container
        origin = value.note or "a graph-carrying value"
        if backwarded:
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
            (( scope.chunk, loop.node), "the loop it accumulates across"),
        ]
        if backwarded:
            evidence.append(((backward_in_loop[0].chunk, backward_in_loop[0].node), "backward runs here"))
        message = (
            f"`{container}` keeps the autograd graph of every iteration alive: {origin} carries a graph and "
            f"is {verb} `{container}` each time round the loop; {consequence}"
        )
        fix = self._fix(ctx, scope, store)
        ctx.report(
            store.value_node, message, evidence=evidence, severity=severity,
            help="store `.item()` for logging or `.detach()` the tensor before keeping it", fix=fix,
        )

    def _fix(self, ctx, scope: ScopeAnalysis, store: StoreEvent):
        node = store.value_node
        if _scalar_sink(scope, store):
            return ctx.fix("use `.item()` for the running total", [_append_method(ctx, node, "item")])
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value in {"cpu", "to", "numpy"}:
            return ctx.fix("detach before moving to the host", [ctx.edit_insert_after(node.func.value, ".detach()")])
        return ctx.fix("detach before storing", [_append_method(ctx, node, "detach")])

    MUST_FIRE = (
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
            severity=Severity.ERROR,
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
            severity=Severity.ERROR,
        ),
    )

    MUST_NOT_FIRE = (
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
    )


def _consumed(scope: ScopeAnalysis, container: str) -> bool:
    """A backward runs through the container later, or it is handed back to the caller."""
    for event in scope.events:
        if isinstance(event, CallEvent) and is_backward(event) and mentions(scope, event.node, container):
            return True
        if isinstance(event, JumpEvent) and event.kind == "return" and event.node.value is not None:
            returned = scope.evaluate(event.node.value, event.context)
            if GRAPH in returned.tags and mentions(scope, event.node, container):
                return True
        if isinstance(event, CallEvent) and event.function is not None and any(
            mentions(scope, arg.value, container) for arg in event.arg_nodes
        ):
            inner = event.function.analysis(scope.summary)
            if inner is not None and any(is_backward(call) for call in calls_in(inner, None)):
                return True
    return False


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
    initial = [e for e in scope.events if getattr(e, "targets", None) == (store.container,)]
    if not initial or not (initial[0].value.tags & {NUMBER, CONSTANT}):
        return False
    return not any(
        isinstance(event, CallEvent) and event.receiver_key == store.container for event in scope.events
    )


def _append_method(ctx, node: cst.BaseExpression, method: str):
    simple = isinstance(node, (cst.Name, cst.Attribute, cst.Call, cst.Subscript)) and not node.lpar
    if simple:
        return ctx.edit_insert_after(node, f".{method}()")
    return ctx.edit_replace(node, f"({ctx.chunk.code_for(node).strip()}).{method}()")
