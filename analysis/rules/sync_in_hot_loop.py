"""The training step makes the CPU wait for the GPU: a host sync runs every step, or many times per step.

Why it costs money: CUDA work is queued asynchronously, so the CPU normally runs ahead
preparing the next kernels while the GPU computes. `.item()`, `.cpu()`, `.numpy()`,
`.tolist()`, `float(t)`, `print(t)` or an f-string of a tensor need the value on the host, so
the CPU stops until the GPU has finished everything queued, and the GPU then idles while the
CPU catches up. Once per step (a progress bar showing `loss.item()`) this costs a little; in a
loop over parameters or metrics it stalls the pipeline dozens of times per step, and
`torch.cuda.synchronize()` every step removes the overlap entirely.

A loop that copies its batches with `non_blocking=True` asks the CPU to run ahead of the GPU; a sync
every iteration takes that away, in a training step or in an evaluation pass (both notes: the cost
depends on how long each step keeps the GPU busy, which the code does not say; small models can lose
most of their GPU time).

How to fix: read values only every N steps (`if step % log_every == 0:`), keep running sums on
the device (`running += loss.detach()`) and call `.item()` once per epoch, and gather many
values into one tensor (`torch.stack([...]).tolist()`) so they cross in a single sync.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import NamedTuple

import libcst as cst

from trainlint.analysis.patterns import MAX_CALL_DEPTH
from trainlint.analysis.torchapi import HOST_SYNC_METHODS
from trainlint.rules import (
    UNKNOWN,
    AssignEvent,
    CallEvent,
    Condition,
    Event,
    Evidence,
    Fires,
    Loop,
    ModuleView,
    ParsedChunk,
    Quiet,
    Rule,
    RuleContext,
    ScopeAnalysis,
    Severity,
    Tag,
    Value,
    calls_in,
    children,
    events_in,
    is_backward,
    is_optimizer_step,
    is_test_file,
    loops_running,
    shortened,
    walk,
)

# Tensors; not ON_DEVICE alone, which `model.cuda()` of a model the analysis cannot see also carries.
_DEVICE_VALUE = frozenset({Tag.TENSOR, Tag.GRAPH, Tag.LOSS})
_HOST_VALUE = frozenset({Tag.NUMBER, Tag.CONSTANT, Tag.CONTAINER})
# Tensor methods that answer from metadata (no sync), though the engine keeps their result a tensor.
_METADATA_METHODS = frozenset({"size", "dim", "numel", "nelement", "stride", "element_size", "data_ptr", "get_device", "is_contiguous"})
_COMPREHENSIONS = (cst.ListComp, cst.SetComp, cst.GeneratorExp, cst.DictComp)
# `val_loader`, `self.test_dl`, `eval_dataloader`; not `metrics.values()` or `interval`.
_EVALUATION_WORDS = re.compile(r"(?<![a-z])(val|valid|validation|test|eval|evaluation)(?![a-z])", re.I)


class Sync(NamedTuple):
    """One host sync reached from a training-step loop, with the local calls that lead to it."""

    node: cst.CSTNode
    what: str  # how to name it in a message
    event: Event
    chain: tuple[CallEvent, ...]  # calls in the step loop's scope (and deeper) that reach the sync
    is_barrier: bool  # torch.cuda.synchronize()

    @property
    def chunk(self):
        return self.event.chunk

    @property
    def outer(self) -> Event:
        """The event in the step loop's own scope: the sync itself or the first call leading to it."""
        return self.chain[0] if self.chain else self.event

    def contexts_inside(self) -> Iterator[tuple[Event, tuple[Loop, ...], tuple[Condition, ...]]]:
        """For every link after the outer one: its event and all its loops and conditions."""
        for link in (*self.chain[1:], self.event) if self.chain else ():
            yield link, link.context.loops, link.context.conditions


class SyncInHotLoop(Rule):
    code = "TL302"
    name = "sync-in-hot-loop"
    severity = Severity.WARNING

    def check_scope(self, ctx: RuleContext, scope: ScopeAnalysis) -> None:
        if is_test_file(ctx.module.path):
            return  # a test's loop runs a few tiny steps: a sync per step costs it nothing
        copies = [call for call in scope.calls() if _asks_for_overlap(call)]
        steps = loops_running(scope, is_backward) if ctx.module.cuda_line is not None else {}
        trains: bool | None = None  # asked once per function, when it has a loop that runs backward
        for loop, backward in steps.items():
            if trains is None:
                trains = _trains(ctx.module, scope)
            if trains:
                self._check_step_loop(ctx, scope, loop, backward, steps, _copy_in(copies, loop))
        for loop in scope.loops if copies else ():
            copy = _copy_in(copies, loop)
            if copy is not None and copy.context.loop is loop and not _inside_any(loop, steps):
                self._check_copy_loop(ctx, scope, loop, copy)

    def _check_copy_loop(self, ctx: RuleContext, scope: ScopeAnalysis, loop: Loop, copy: CallEvent) -> None:
        """A loop that is no training step (an evaluation or inference pass) but copies each batch with
        `non_blocking`: it asks the CPU to run ahead of the GPU, and a sync every iteration stops it. A
        note, as for a training step: the cost depends on how long each batch keeps the GPU busy."""
        syncs = [
            sync for sync in _syncs(scope, loop, (), MAX_CALL_DEPTH, {id(scope)})
            if sync.outer.context.loop is loop and not sync.is_barrier  # outside training, a barrier times a benchmark
            and not self._quietened(sync, loop) and self._inner_loop(sync, loop) is None
        ]
        if not syncs:
            return
        first = syncs[0]
        message = (
            f"{first.what} makes the CPU wait for the GPU on every iteration of the loop{_over(loop)}, which copies its "
            f"batches with `non_blocking` (line {copy.chunk.line_of(copy.node)}): such a copy only pays while the CPU "
            f"queues the next batch ahead of the GPU, and this sync stops it every iteration{_others(syncs)}; how much "
            "that costs depends on how long a batch keeps the GPU busy"
        )
        evidence = [
            ((copy.chunk, copy.node), "a non-blocking copy to the device: asks for overlap"),
            ((scope.chunk, loop.node), "the loop"),
            *[((s.chunk, s.node), f"also syncs every iteration: {s.what}") for s in syncs[1:]],
        ]
        ctx.report(
            first.node, message, evidence=evidence, chunk=first.chunk, severity=Severity.NOTE,
            help="keep running sums on the device (`total += loss.detach()`) and read them once after the loop",
        )

    def _check_step_loop(
        self, ctx: RuleContext, scope: ScopeAnalysis, loop: Loop, backward: CallEvent, steps: dict[Loop, CallEvent], copy: CallEvent | None,
    ) -> None:
        every_step: list[Sync] = []
        per_inner_loop: dict[int, tuple[str, tuple, list[Sync]]] = {}  # id(loop node) -> (label, site, syncs)
        for sync in _syncs(scope, loop, (), MAX_CALL_DEPTH, {id(scope)}):
            innermost_step = next((enclosing for enclosing in reversed(sync.outer.context.loops) if enclosing in steps), None)
            if innermost_step is not loop or self._quietened(sync, loop):
                continue
            inner = self._inner_loop(sync, loop)
            if inner is None:
                if sync.is_barrier:
                    conditional = sync.outer.context.conditions_inside(loop) or any(c for _, _, c in sync.contexts_inside())
                    if not conditional:
                        self._report_barrier(ctx, sync, loop, backward)
                    continue
                every_step.append(sync)
            elif inner is not False:
                label, site = inner
                per_inner_loop.setdefault(id(site[1]), (label, site, []))[2].append(sync)
        for label, site, syncs in per_inner_loop.values():
            self._report_inner(ctx, syncs, label, site, loop, backward)
        if every_step:
            self._report_every_step(ctx, every_step, loop, backward, copy)

    # ------------------------------------------------------------------ where a sync sits
    @staticmethod
    def _quietened(sync: Sync, loop: Loop) -> bool:
        """In an except handler, or under a logging interval, anywhere between the step loop and the sync."""
        conditions = [(sync.outer.scope, c) for c in sync.outer.context.conditions_inside(loop)]
        conditions += [(link.scope, c) for link, _, inner in sync.contexts_inside() for c in inner]
        for owner, condition in conditions:
            if condition.branch == "except":
                return True
            if condition.branch == "if" and _is_logging_condition(condition.test, owner):
                return True
        return False

    def _inner_loop(self, sync: Sync, loop: Loop):
        """The loop nested in the step that repeats the sync, as (label, site); None when the sync runs
        once per step; False when that loop is an evaluation pass, which this rule leaves alone."""
        nested = [(inner, sync.outer.scope) for inner in sync.outer.context.loops if loop.encloses(inner) and inner is not loop]
        nested += [(inner, link.scope) for link, loops, _ in sync.contexts_inside() for inner in loops]
        if any(Tag.LOADER in inner.iterable.tags or _EVALUATION_WORDS.search(inner.iterable_text) for inner, _ in nested):
            return False
        if nested:
            first, owner = nested[0]
            return f"the loop over `{shortened(first.iterable_text, 48)}`", (owner.chunk, first.node)
        comprehension = self._comprehension_around(sync.chunk, sync.node)
        if comprehension is not None:
            return "the comprehension around it", (sync.chunk, comprehension)
        return None

    @staticmethod
    def _comprehension_around(chunk, node: cst.CSTNode) -> cst.CSTNode | None:
        members = chunk.memo.get("comprehension_members")
        if members is None:
            # kept per statement: after an edit only the statements on its path are walked again
            members = chunk.memo["comprehension_members"] = dict(chunk.facts_by_statement("comprehension_members", _repeated_by))
        return members.get(id(node))

    # ------------------------------------------------------------------ reporting
    def _report_inner(self, ctx: RuleContext, syncs: list[Sync], label: str, loop_site, step: Loop, backward: CallEvent) -> None:
        first = syncs[0]
        others = _others(syncs)
        message = (
            f"{first.what} makes the CPU wait for the GPU on every iteration of {label} inside the training step "
            f"(backward on line {backward.chunk.line_of(backward.node)}), so each step stalls the GPU pipeline "
            f"once per element{others}"
        )
        evidence = [
            (loop_site, f"{label}, run every step"),
            *[((s.chunk, s.node), f"also syncs: {s.what}") for s in syncs[1:]],
            *_step_evidence(ctx, first, step, backward),
        ]
        ctx.report(
            first.node, message, evidence=evidence, chunk=first.chunk,
            help="gather the values on the device (`torch.stack([...])`) and read them with one `.tolist()`, "
            "or only every N steps (`if step % log_every == 0:`)",
        )

    def _report_every_step(self, ctx: RuleContext, syncs: list[Sync], step: Loop, backward: CallEvent, copy: CallEvent | None) -> None:
        """A note: what one sync a step costs depends on how long the step keeps the GPU busy, which the
        code does not say (a small model can lose most of its GPU time to it). When the loop copies its
        batches with `non_blocking`, the note says that the sync takes that overlap away."""
        first = syncs[0]
        others = _others(syncs)
        overlap = (
            f"; the loop copies its batches with `non_blocking` (line {copy.chunk.line_of(copy.node)}), which only pays "
            "while the CPU runs ahead, and this sync stops it every step" if copy is not None else ""
        )
        message = (
            f"{first.what} copies a value to the host on every training step (backward on line "
            f"{backward.chunk.line_of(backward.node)}), so the CPU waits for the GPU each step instead of queueing "
            f"the next one{overlap}{others}"
        )
        evidence = [
            *[((s.chunk, s.node), f"also syncs every step: {s.what}") for s in syncs[1:]],
            *_step_evidence(ctx, first, step, backward),
            *([((copy.chunk, copy.node), "a non-blocking copy to the device: asks for overlap")] if copy is not None else []),
        ]
        ctx.report(
            first.node, message, evidence=evidence, severity=Severity.NOTE, chunk=first.chunk,
            help="read values every N steps (`if step % log_every == 0:`), or keep running sums on the device "
            "(`running += loss.detach()`) and call `.item()` once per epoch",
        )

    def _report_barrier(self, ctx: RuleContext, sync: Sync, step: Loop, backward: CallEvent) -> None:
        message = (
            f"{sync.what} runs on every training step (backward on line {backward.chunk.line_of(backward.node)}): "
            "the CPU stops queueing work until the GPU is idle, so CPU and GPU never overlap"
        )
        ctx.report(
            sync.node, message, evidence=_step_evidence(ctx, sync, step, backward), chunk=sync.chunk,
            help="drop it, or run it only when timing a few steps (`if step % profile_every == 0:`); "
            "use CUDA events or the profiler to time kernels",
        )


def _asks_for_overlap(call: CallEvent) -> bool:
    """``x.to(device, non_blocking=True)`` / ``x.cuda(non_blocking=...)``: a copy that lets the CPU go on
    (from pinned memory), unless it says ``non_blocking=False``."""
    if call.method not in {"to", "cuda"}:
        return False
    flag = call.keyword("non_blocking")
    return flag is not None and not (isinstance(flag.value, cst.Name) and flag.value.value in {"False", "None"})


def _copy_in(copies: list[CallEvent], loop: Loop) -> CallEvent | None:
    return next((copy for copy in copies if loop in copy.context.loops), None)


def _inside_any(loop: Loop, steps: dict[Loop, CallEvent]) -> bool:
    """The loop is a training-step loop or runs inside one (its syncs are the step loop's to report)."""
    current: Loop | None = loop
    while current is not None:
        if current in steps:
            return True
        current = current.parent
    return False


def _over(loop: Loop) -> str:
    return f" over `{shortened(loop.iterable_text, 48)}`" if not loop.is_while else ""


def _trains(module: ModuleView, scope: ScopeAnalysis) -> bool:
    """An optimizer steps somewhere in the function of the loop (gradient accumulation steps after its
    micro-batch loop), in what it calls, or in a function that calls it. A backward with no step
    anywhere times kernels or probes gradients: a benchmark that synchronizes to read its clock, not
    a training run losing its overlap."""
    if _steps_an_optimizer(calls_in(scope, None)):
        return True
    function = scope.function
    return function is not None and any(_steps_an_optimizer(calls_in(caller.scope, None)) for caller in module.calls_of(function))


def _steps_an_optimizer(calls: Iterator[CallEvent]) -> bool:
    """``optimizer.step()``, or ``model.step()`` on what a backward is called on (a DeepSpeed engine
    handed in as ``model``: ``model.backward(loss)``, then ``model.step()``)."""
    engines: set[str | None] = set()
    steps: list[CallEvent] = []
    for call in calls:
        if is_optimizer_step(call):
            return True
        if call.method == "backward" and call.args:
            engines.add(call.receiver_key)
        elif call.method == "step":
            steps.append(call)
    return any(call.receiver_key in engines - {None} for call in steps)


def _step_evidence(ctx: RuleContext, sync: Sync, step: Loop, backward: CallEvent) -> list:
    cuda_line = ctx.module.cuda_line
    assert cuda_line is not None, "step loops are looked for only in a script that runs on CUDA"
    evidence = [
        ((sync.outer.chunk, step.node), "the training-step loop"),
        ((backward.chunk, backward.node), "backward runs every iteration"),
        Evidence(cuda_line, f"runs on CUDA: `{shortened(ctx.module.cuda_line_text.strip(), 48)}`"),
    ]
    if sync.chain:
        evidence.append(((sync.outer.chunk, sync.outer.node), f"called every step: `{shortened(sync.outer.chunk.code_for(sync.outer.node), 48)}`"))
    return evidence


def _others(syncs: list[Sync]) -> str:
    if len(syncs) == 1:
        return ""
    listed = ", ".join(f"{s.what} (line {s.chunk.line_of(s.node)})" for s in syncs[1:4])
    more = f" and {len(syncs) - 4} more" if len(syncs) > 4 else ""
    return f"; also {listed}{more}"


# ---------------------------------------------------------------------- finding syncs
def _syncs(scope: ScopeAnalysis, loop: Loop | None, chain: tuple[CallEvent, ...], depth: int, seen: set[int]) -> Iterator[Sync]:
    """Host syncs that run during ``loop`` (the whole scope when None), following local calls."""
    for event in events_in(scope, loop):
        if isinstance(event, CallEvent):
            yield from _call_syncs(scope, event, chain)
            if depth > 0 and event.function is not None:
                inner = event.function.analysis(scope.summary)
                if inner is not None and id(inner) not in seen:
                    inner_steps = loops_running(inner, is_backward)
                    for sync in _syncs(inner, None, chain + (event,), depth - 1, seen | {id(inner)}):
                        in_inner = sync.chain[len(chain) + 1] if len(sync.chain) > len(chain) + 1 else sync.event
                        if not any(enclosing in inner_steps for enclosing in in_inner.context.loops):
                            yield sync  # a training loop of the callee's own is judged in its own scope
        elif isinstance(event, AssignEvent) and event.value_node is not None:
            for part in _formatted_parts(scope.chunk, event.value_node):
                if _holds_device_tensor(scope, part.expression, event.context.loops):
                    yield Sync(part, _describe_fstring(scope, part), event, chain, False)


def _call_syncs(scope: ScopeAnalysis, call: CallEvent, chain: tuple[CallEvent, ...]) -> Iterator[Sync]:
    node = call.node
    loops = call.context.loops
    if call.callee == "torch.cuda.synchronize":
        yield Sync(node, "`torch.cuda.synchronize()`", call, chain, True)
        return
    if call.method in HOST_SYNC_METHODS and isinstance(node.func, cst.Attribute):
        receiver_node = node.func.value
        receiver = call.receiver if call.receiver is not None else _unbound_receiver(scope, receiver_node)
        on_host = Tag.ON_HOST in receiver.tags and Tag.ON_DEVICE not in receiver.tags if receiver is not None else False
        if receiver is not None and not on_host and not _already_on_host(receiver_node) and not _host_batch(scope, receiver_node, loops):
            known_tensor = bool(receiver.tags & _DEVICE_VALUE) and not receiver.tags & {Tag.NUMBER}
            unknown = not receiver.tags
            if known_tensor or (call.method == "item" and unknown):
                yield Sync(node, f"`{shortened(scope.chunk.code_for(node), 48)}`", call, chain, False)
    if call.callee in {"print", "float", "int"}:
        for arg in call.arg_nodes:
            if arg.keyword is None and not arg.star and _holds_device_tensor(scope, arg.value, loops):
                what = f"`{shortened(scope.chunk.code_for(node), 48)}`"
                yield Sync(node, what + " (prints a tensor)" if call.callee == "print" else what, call, chain, False)
                break
    for arg in call.arg_nodes:
        for part in _formatted_parts(scope.chunk, arg.value):
            if _holds_device_tensor(scope, part.expression, loops):
                yield Sync(part, _describe_fstring(scope, part), call, chain, False)


def _unbound_receiver(scope: ScopeAnalysis, receiver_node: cst.BaseExpression) -> Value | None:
    """A receiver the walk did not bind (a comprehension variable, a global set elsewhere) is of unknown
    type; one rooted in an import is a module, not a value."""
    root = receiver_node
    while isinstance(root, cst.Attribute):
        root = root.value
    if not isinstance(root, cst.Name) or root.value in scope.local_imports or root.value in scope.summary.imports:
        return None
    return UNKNOWN


def _holds_device_tensor(scope: ScopeAnalysis, expression: cst.BaseExpression, loops: tuple[Loop, ...]) -> bool:
    value = scope.value_at(expression)
    if value is None or not value.tags & _DEVICE_VALUE or value.tags & _HOST_VALUE:
        return False
    return not _already_on_host(expression) and not _host_batch(scope, expression, loops)


def _already_on_host(expression: cst.BaseExpression) -> bool:
    """A chain that already went through a sync (`x.cpu().numpy()`) or asks only for metadata (`x.size(0)`)."""
    node = expression
    while True:
        if isinstance(node, cst.Call):
            if isinstance(node.func, cst.Attribute) and node.func.attr.value in HOST_SYNC_METHODS | _METADATA_METHODS:
                return True
            node = node.func.value if isinstance(node.func, cst.Attribute) else node.func
        elif isinstance(node, (cst.Attribute, cst.Subscript)):
            node = node.value
        else:
            return False


def _host_batch(scope: ScopeAnalysis, expression: cst.BaseExpression, loops: tuple[Loop, ...]) -> bool:
    """A batch straight from a `DataLoader` loop, not moved to the device: reading it needs no GPU."""
    root = expression
    while isinstance(root, (cst.Call, cst.Attribute, cst.Subscript)):
        root = root.func if isinstance(root, cst.Call) else root.value
    if not isinstance(root, cst.Name):
        return False
    value = scope.value_at(root)
    if value is not None and value.tags & {Tag.GRAPH, Tag.ON_DEVICE}:
        return False
    return any(root.value in candidate.targets and (Tag.LOADER in candidate.iterable.tags or "loader" in candidate.iterable_text.lower()) for candidate in loops)


def _formatted_parts(chunk: ParsedChunk, expression: cst.BaseExpression) -> tuple[cst.FormattedStringExpression, ...]:
    """The `{...}` parts of f-strings in an expression, not looking into calls (they are events of their
    own); kept per node, so a key typed elsewhere in the training loop does not walk every call's
    arguments again."""
    memo = chunk.node_memo("TL302 f-string fields")
    known = memo.get(expression)
    if known is None:
        found = []
        stack: list[cst.CSTNode] = [expression]
        while stack:
            node = stack.pop()
            if isinstance(node, (cst.Call, cst.Lambda)):
                continue
            if isinstance(node, cst.FormattedStringExpression):
                found.append(node)
            stack.extend(children(node))
        known = memo[expression] = tuple(found)
    return known


def _describe_fstring(scope: ScopeAnalysis, part: cst.FormattedStringExpression) -> str:
    return f"the f-string field `{{{shortened(scope.chunk.code_for(part.expression), 48)}}}` (formats a tensor)"


def _repeated_by(comprehension: cst.CSTNode) -> list[tuple[int, cst.CSTNode]]:
    """(id, comprehension) for every node a comprehension repeats (none for any other node). Its first
    iterable runs once, so it is not part of the repetition. Nodes come in ``walk``'s order, where
    ancestors come first: in a dict of these, an inner comprehension overwrites the outer one."""
    if not isinstance(comprehension, _COMPREHENSIONS):
        return []
    once = {id(node) for node in walk(comprehension.for_in.iter)}
    return [(id(node), comprehension) for node in walk(comprehension) if node is not comprehension and id(node) not in once]


def _walk(root: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """Nodes in pre-order, without recursion."""
    stack = [root]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(reversed(node.children))


_LOGGING_WORDS = re.compile(r"log|print|freq|interval|every|verbose|debug|display|report|disp", re.I)


def _is_logging_condition(test: cst.BaseExpression | None, scope: ScopeAnalysis) -> bool:
    """``if step % log_every == 0``, ``if args.verbose``, ``if i % 100 == 0`` and the like."""
    if test is None:
        return False
    text = scope.chunk.code_for(test)
    return "%" in text or bool(_LOGGING_WORDS.search(text))


SyncInHotLoop.MUST_FIRE = (
    Fires(
        """
        import torch

        model = Net().cuda()
        for x, y in loader:
            optimizer.zero_grad()
            loss = criterion(model(x.cuda()), y.cuda())
            loss.backward()
            total_norm = 0.0
            for p in model.parameters():
                total_norm += p.grad.norm().item() ** 2
            optimizer.step()
        """,
        severity=Severity.WARNING,
    ),
    Fires(
        """
        import torch
        from tqdm import tqdm

        device = torch.device("cuda")
        running_loss = 0.0
        pbar = tqdm(train_loader)
        for x, y in pbar:
            x, y = x.to(device), y.to(device)
            optimizer.zero_grad()
            loss = criterion(model(x), y)
            loss.backward()
            optimizer.step()
            running_loss += loss.item()
            pbar.set_postfix(loss=loss.item())
        """,
        severity=Severity.NOTE,
    ),
    Fires(
        """
        import time
        import torch

        for step, (x, y) in enumerate(loader):
            start = time.time()
            loss = model(x.cuda(), labels=y.cuda()).loss
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            torch.cuda.synchronize()
            step_times.append(time.time() - start)
        """,
        severity=Severity.WARNING,
    ),
    Fires(
        """
        import torch.nn.functional as F

        def grad_norms(model):
            return [p.grad.norm().item() for p in model.parameters() if p.grad is not None]

        def train(model, loader, optimizer):
            model.cuda()
            for x, y in loader:
                loss = F.cross_entropy(model(x.cuda()), y.cuda())
                optimizer.zero_grad()
                loss.backward()
                norms = grad_norms(model)
                optimizer.step()
        """,
        severity=Severity.WARNING,
    ),
    Fires(
        """
        import torch.nn as nn

        criterion = nn.CrossEntropyLoss()
        model = model.to("cuda")
        for step, (x, y) in enumerate(loader):
            out = model(x.to("cuda"))
            loss = criterion(out, y.to("cuda"))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            print(f"step {step}: loss {loss:.4f}")
        """,
        severity=Severity.NOTE,
    ),
    Fires(
        """
        import torch.nn as nn

        criterion = nn.MSELoss()

        def train_step(model, optimizer, x, y):
            optimizer.zero_grad()
            loss = criterion(model(x), y)
            loss.backward()
            optimizer.step()
            return loss.item()

        def fit(model, optimizer, loader, epochs):
            model.cuda()
            for epoch in range(epochs):
                for x, y in loader:
                    history.append(train_step(model, optimizer, x.cuda(), y.cuda()))
        """,
        severity=Severity.NOTE,
    ),
    Fires(
        """
        import torch

        model = model.cuda()
        for batch in train_loader:
            out = model(batch["x"].cuda())
            loss = criterion(out, batch["y"].cuda())
            acc = (out.argmax(1) == batch["y"].cuda()).float().mean()
            loss.backward()
            optimizer.step()
            metrics = {"loss": loss, "acc": acc}
            logger.log({name: value.item() for name, value in metrics.items()})
        """,
        severity=Severity.WARNING,
    ),
    Fires(
        """
        import torch

        model.cuda()
        for x, y in loader:
            loss = criterion(model(x.cuda()), y.cuda())
            loss.backward()
            optimizer.step()
            for name, p in model.named_parameters():
                writer.add_scalar(f"grad/{name}", p.grad.norm().item(), step)
            writer.add_scalar("loss", loss.item(), step)
        """,
        count=2,
    ),
    Fires(  # gradient accumulation: the optimizer steps in the loop around the micro-batches
        """
        import torch

        model = torch.nn.Linear(64, 1).cuda()
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
        for step, batch in enumerate(loader):
            for micro_batch in batch.split(4):
                loss = model(micro_batch.cuda()).mean() / 4
                loss.backward()
                torch.cuda.synchronize()
            optimizer.step()
            optimizer.zero_grad()
        """,
        severity=Severity.WARNING,
    ),
    Fires(  # gradient accumulation: the optimizer steps after the micro-batch loop, in the same function
        """
        import torch

        device = torch.device("cuda")


        def train_step(model, optimizer, micro_batches, accumulate_every):
            optimizer.zero_grad()
            total = 0.0
            for batch in micro_batches:
                loss = model(batch.to(device)).mean() / accumulate_every
                loss.backward()
                total += loss.item()
            optimizer.step()
            return total
        """,
        severity=Severity.NOTE,
    ),
    Fires(  # a DeepSpeed engine handed in as `model`: `model.backward(loss)` then `model.step()`
        """
        import torch

        device = torch.device("cuda")


        def train(train_loader, model, criterion, losses):
            model.train()
            for images, target in train_loader:
                output = model(images.to(device, non_blocking=True))
                loss = criterion(output, target.to(device, non_blocking=True))
                losses.update(loss.item(), images.size(0))
                model.backward(loss)
                model.step()
        """,
        severity=Severity.NOTE,
    ),
    Fires(  # the loop asks for overlap (pinned batches copied with non_blocking) and a sync every step undoes it: the note says so
        """
        import torch


        class MLPTrainer:
            def __init__(self, model, train_dl, loss_fun, optimizer, dev, pin_memory=True):
                self.model, self.train_dl, self.loss_fun = model, train_dl, loss_fun
                self.optimizer, self.dev, self.pin_memory = optimizer, dev, pin_memory

            def train(self, n_epochs):
                for epoch in range(n_epochs):
                    epoch_loss_sum = 0.0
                    for xb, yb in self.train_dl:
                        if self.pin_memory and str(self.dev) == "cuda":
                            xb, yb = xb.cuda(non_blocking=True), yb.cuda(non_blocking=True)
                        else:
                            xb, yb = xb.to(self.dev), yb.to(self.dev)
                        loss = self.loss_fun(self.model(xb), yb)
                        loss.backward()
                        self.optimizer.step()
                        self.optimizer.zero_grad()
                        epoch_loss_sum += float(loss)
                    print(epoch, epoch_loss_sum)
        """,
        severity=Severity.NOTE,
        at="epoch_loss_sum += float(loss)",
    ),
    Fires(  # an evaluation loop that copies with non_blocking and reads two numbers back every batch
        """
        import torch
        import torch.nn.functional as F


        def evaluate_model(model, loader, device, criterion=F.nll_loss):
            model.eval()
            loss, correct, total = 0, 0, 0
            async_gpu = loader.pin_memory
            with torch.no_grad():
                for batch_idx, (data, target) in enumerate(loader):
                    data = data.to(device, non_blocking=async_gpu)
                    target = target.to(device, non_blocking=async_gpu)
                    output = model(data)
                    loss += criterion(output, target, reduction="sum").item()
                    pred = output.max(1, keepdim=True)[1]
                    correct += pred.eq(target.view_as(pred)).sum().item()
                    total += len(data)
            return {"mean_loss": loss / total, "mean_accuracy": correct / total}
        """,
        severity=Severity.NOTE,
        at='loss += criterion(output, target, reduction="sum").item()',
    ),
)

SyncInHotLoop.MUST_NOT_FIRE = (
    Quiet(  # a throughput benchmark synchronizes to read its clock; no value crosses to the host
        """
        import time

        import torch


        @torch.no_grad()
        def throughput(data_loader, model):
            model.eval()
            for images, _ in data_loader:
                images = images.cuda(non_blocking=True)
                for _ in range(50):
                    model(images)
                torch.cuda.synchronize()
                start = time.time()
                for _ in range(30):
                    model(images)
                torch.cuda.synchronize()
                print(30 * images.shape[0] / (time.time() - start))
        """
    ),
    Quiet(  # evaluation: a sync per batch with plain copies is left alone; with non_blocking, sums kept on the device
        """
        import torch


        @torch.no_grad()
        def evaluate(model, loader, device):
            correct = 0
            for images, labels in loader:
                images, labels = images.to(device), labels.to(device)
                correct += (model(images).argmax(1) == labels).sum().item()
            return correct


        @torch.no_grad()
        def evaluate_async(model, loader, device):
            correct = torch.zeros((), device=device)
            for images, labels in loader:
                images, labels = images.to(device, non_blocking=True), labels.to(device, non_blocking=True)
                correct += (model(images).argmax(1) == labels).sum()
            return correct.item()
        """
    ),
    Quiet(  # a benchmark of attention kernels: backward with no optimizer step, synchronized to read CUDA events (LLMs-from-scratch)
        """
        import numpy as np
        import torch

        device = torch.device("cuda")


        def forward_backward(func, embeddings):
            if embeddings.grad is not None:
                embeddings.grad.zero_()
            output = func(embeddings)
            loss = output.sum()
            loss.backward()


        def time_forward_backward(func, *inputs, num_repeats=1_000):
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            times = []
            for _ in range(num_repeats):
                start.record()
                forward_backward(func, *inputs)
                end.record()
                torch.cuda.synchronize()
                times.append(start.elapsed_time(end))
            return np.mean(times), np.std(times)
        """
    ),
    Quiet(  # a random shift drawn on the CPU: `.item()` of a host tensor waits for no GPU
        """
        import torch

        def roll_noise(noise, generator=None):
            for _ in range(noise.shape[0]):
                shift = torch.randint(noise.shape[2] // 2, (1,), generator=generator).item()
                noise = torch.roll(noise, shifts=shift, dims=2)
            return noise

        def invert(unet, latents, timesteps, optimizer):
            latents = latents.to("cuda")
            for t in timesteps:
                loss = roll_noise(unet(latents, t)).pow(2).mean()
                loss.backward()
                optimizer.step()
                optimizer.zero_grad()
        """
    ),
    Quiet(
        """
        import torch

        model.cuda()
        for step, (x, y) in enumerate(loader):
            loss = criterion(model(x.cuda()), y.cuda())
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            if step % log_every == 0:
                print(f"step {step} loss {loss.item():.4f}")
                for p in model.parameters():
                    norms.append(p.grad.norm().item())
        """
    ),
    Quiet(
        """
        import torch

        model.cuda()
        for epoch in range(epochs):
            running = torch.zeros((), device="cuda")
            for x, y in train_loader:
                loss = criterion(model(x.cuda()), y.cuda())
                loss.backward()
                optimizer.step()
                running += loss.detach()
            print(f"epoch {epoch}: {running.item() / len(train_loader):.4f}")
            with torch.no_grad():
                correct = 0
                for x, y in val_loader:
                    correct += (model(x.cuda()).argmax(1) == y.cuda()).sum().item()
        """
    ),
    Quiet(
        """
        import torch

        model.cuda()
        for x, y in loader:
            try:
                loss = criterion(model(x.cuda()), y.cuda())
                loss.backward()
            except RuntimeError:
                print("failed at loss", loss.item())
                raise
            optimizer.step()
        """
    ),
    Quiet(
        """
        # CPU-only example: the host already has every value
        for x, y in loader:
            loss = criterion(model(x), y)
            loss.backward()
            optimizer.step()
            pbar.set_postfix(loss=loss.item())
        """
    ),
    Quiet(
        """
        import torch

        model.cuda()
        seen = 0
        all_labels = []
        for x, y in train_loader:
            loss = criterion(model(x.cuda()), y.cuda())
            loss.backward()
            optimizer.step()
            seen += float(x.size(0))
            all_labels.extend(y.tolist())
        """
    ),
    Quiet(
        """
        import torch

        model.cuda()
        for x, y in loader:
            loss = criterion(model(x.cuda()), y.cuda())
            loss.backward()
            if args.verbose:
                for name, p in model.named_parameters():
                    print(name, p.grad.norm().item())
            optimizer.step()
        """
    ),
    Quiet(
        """
        import torch

        model.cuda()
        for step, (x, y) in enumerate(train_loader):
            loss = criterion(model(x.cuda()), y.cuda())
            loss.backward()
            optimizer.step()
            if args.profile:
                torch.cuda.synchronize()
            for vx, vy in val_loader:
                val_losses.append(criterion(model(vx.cuda()), vy.cuda()).item())
        """
    ),
)
