"""The same data is copied to the GPU on every iteration of a hot loop although it never changes.

Why it costs money: `w.to(device)` on a CPU tensor allocates GPU memory and copies the data
each time it runs, and `torch.tensor([...]).cuda()` also builds the tensor on the host first;
inside the training or evaluation loop that is one extra host-to-device copy (and a sync
point for pageable memory) per step, for a result that is the same every time.
`model.to(device)` inside the loop walks every parameter and buffer each step and moves
nothing after the first.

How to fix: do the transfer once, above the loop (`class_weights = class_weights.to(device)`),
or create constants on the device directly (`torch.tensor([...], device=device)`), and use
the moved tensor inside the loop. Hoisting is a manual change: check the tensor is not
modified in place inside the loop first.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import cast

import libcst as cst

from trainlint.rules import (
    CONSTANT,
    GRAPH,
    LOADER,
    MODEL,
    ON_DEVICE,
    TENSOR,
    AssignEvent,
    CallEvent,
    Fires,
    Loop,
    Quiet,
    Rule,
    ScopeAnalysis,
    Severity,
    StoreEvent,
    blocks_of,
    calls_in,
    children,
    dotted,
    events_in,
    is_backward,
    is_test_file,
    last_part,
    loops_running,
    shortened,
    transfer_destination,
)

# Factories whose result depends only on their arguments (random ones differ every call).
_DETERMINISTIC_FACTORIES = frozenset(
    {"tensor", "as_tensor", "zeros", "ones", "full", "arange", "linspace", "logspace", "eye", "Tensor", "FloatTensor", "LongTensor"}
)


class RedundantTransfer(Rule):
    code = "TL303"
    name = "redundant-transfer"
    severity = Severity.WARNING

    def check(self, ctx) -> None:
        if is_test_file(ctx.module.path):
            return  # a test's loop runs a few tiny steps: a copy per step costs nothing
        for scope in ctx.scopes:
            hot = _hot_loops(scope)
            if not hot:
                continue
            changed: dict[Loop, set[str]] = {}
            for call in scope.calls():
                if call.method not in {"to", "cuda"} or transfer_destination(call) != "device":
                    continue
                loop = next((enclosing for enclosing in reversed(call.context.loops) if enclosing in hot), None)
                if loop is None:
                    continue
                if loop not in changed:
                    changed[loop] = _changed_in(scope, loop)
                self._check_transfer(ctx, scope, call, loop, hot[loop], changed[loop])

    def _check_transfer(self, ctx, scope: ScopeAnalysis, call: CallEvent, loop: Loop, hot_call: CallEvent | None, changed: set[str]) -> None:
        receiver = call.receiver
        receiver_node = cast(cst.Attribute, call.node.func).value  # a `.to()`/`.cuda()` method call
        transfer = shortened(scope.chunk.code_for(call.node), 48)

        def loop_evidence():  # only for a finding: the reason may name a line (positions)
            return (scope.chunk, loop.node), f"the loop{_over(loop)}: {_why_hot(hot_call)}"

        if receiver is None:
            return
        key = call.receiver_key
        if MODEL in receiver.tags:
            if key is None or _mentions_changed(key, changed) or call.context.conditions_inside(loop):
                return
            if _moved_back(scope, loop, key):
                return  # swapped between host and device on purpose (offloading)
            message = (
                f"`{transfer}` runs on every iteration of the loop{_over(loop)}: `{key}` is moved in place, so after "
                "the first iteration this only walks all its parameters and buffers again"
            )
            evidence = [(receiver.site, f"`{key}` is a model: {receiver.note or 'an nn.Module'}"), loop_evidence()]
            ctx.report(call.node, message, evidence=evidence, help=f"move `{key}` to the device once, before the loop")
            return
        passed = _tensor_parameter(ctx, scope, key) if not receiver.tags and key is not None else None
        if passed is None and (not receiver.tags & {TENSOR, GRAPH} or ON_DEVICE in receiver.tags):
            return  # of unknown type, or already on the device (then the call copies nothing)
        if key is not None:
            if _mentions_changed(key, changed):
                return
            if passed is not None:
                why = f"is a parameter that every call fills with a host tensor (line {passed.chunk.line_of(passed.node)})"
                evidence = [((passed.chunk, passed.node), f"passes a tensor for `{key}`")]
            else:
                origin = f" ({receiver.note})" if receiver.note else ""
                why = f"{origin} is bound before the loop"
                evidence = [(receiver.site, f"`{key}` is bound here, outside the loop")]
            message = (
                f"`{transfer}` copies `{key}` to the device on every iteration of the loop{_over(loop)}, but `{key}` "
                f"{why.lstrip()} and never changes in it"
            )
            evidence.append(loop_evidence())
            ctx.report(call.node, message, evidence=evidence, help=f"hoist it: `{key} = {key}{_transfer_suffix(scope, call)}` once above the loop, then use `{key}`")
            return
        factory = _constant_factory(scope, receiver_node)
        if factory is None or CONSTANT not in receiver.tags or _names(receiver_node) & changed:
            return
        message = (
            f"`{transfer}` builds the same constant tensor on the host and copies it to the device on every "
            f"iteration of the loop{_over(loop)}"
        )
        evidence = [((scope.chunk, factory), "built from constants only"), loop_evidence()]
        ctx.report(
            call.node, message, evidence=evidence,
            help="create it once above the loop, directly on the device: `torch.tensor([...], device=device)`",
        )

    MUST_FIRE = (
        Fires(
            """
            import torch
            import torch.nn.functional as F

            device = torch.device("cuda")
            class_weights = torch.tensor([0.2, 0.3, 0.5])
            for x, y in train_loader:
                x, y = x.to(device), y.to(device)
                loss = F.cross_entropy(model(x), y, weight=class_weights.to(device))
                loss.backward()
                optimizer.step()
            """
        ),
        Fires(
            """
            import torch

            for images, labels in loader:
                images = images.cuda()
                mean = torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1).cuda()
                outputs = model(images - mean)
                loss = criterion(outputs, labels.cuda())
                loss.backward()
            """
        ),
        Fires(
            """
            import torch
            from torchvision.models import resnet50

            model = resnet50()
            device = "cuda"
            for x, y in loader:
                model.to(device)
                loss = criterion(model(x.to(device)), y.to(device))
                loss.backward()
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
                    self.pos_weight = torch.full((10,), 3.0)
                    self.criterion = nn.BCEWithLogitsLoss()

                def run(self, loader, device):
                    for x, y in loader:
                        logits = self.model(x.to(device))
                        weight = self.pos_weight.to(device)
                        loss = (self.criterion(logits, y.to(device)) * weight).mean()
                        loss.backward()
            """
        ),
        Fires(
            """
            import torch

            std = torch.tensor([0.229, 0.224, 0.225]).view(1, 3, 1, 1)

            @torch.no_grad()
            def evaluate(model, val_loader, device):
                correct = 0
                for x, y in val_loader:
                    x = x.to(device) / std.to(device)
                    correct += (model(x).argmax(1) == y.to(device)).sum().item()
                return correct
            """
        ),
        Fires(
            """
            import numpy as np
            import torch

            anchors = torch.as_tensor(np.load("anchors.npy"))
            model = Detector()
            for step, batch in enumerate(train_loader):
                images = batch["images"].cuda(non_blocking=True)
                preds = model(images)
                loss = detection_loss(preds, batch["boxes"].cuda(), anchors.cuda())
                loss.backward()
            """,
        ),
        Fires(
            """
            import torch

            def train(model, loader, device):
                scale = torch.full((1,), 0.5)
                for x, y in loader:
                    for t in range(4):
                        out = model(x.to(device), scale.to(device, non_blocking=True))
                        out.sum().backward()
            """,
        ),
        Fires(
            """
            import torch
            import torch.nn.functional as F

            def class_weights(labels, num_classes):
                counts = torch.bincount(torch.tensor(labels), minlength=num_classes)
                return counts.sum() / (num_classes * counts.clamp(min=1).float())

            def train_one_epoch(model, loader, optimizer, weights, device):
                for tokens, labels in loader:
                    logits = model(tokens.to(device))
                    loss = F.cross_entropy(logits, labels.to(device), weight=weights.to(device))
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()

            def main(model, loader, optimizer, labels):
                device = torch.device("cuda")
                weights = class_weights(labels, 10)
                for epoch in range(5):
                    train_one_epoch(model, loader, optimizer, weights, device)
            """,
        ),
    )

    MUST_NOT_FIRE = (
        Quiet(
            """
            import torch

            device = torch.device("cuda")
            class_weights = torch.tensor([0.2, 0.8])
            for x, y in train_loader:
                class_weights = class_weights.to(device)
                loss = criterion(model(x.to(device)), y.to(device)) * class_weights[y.to(device)]
                loss.mean().backward()
            """
        ),
        Quiet(
            """
            import torch

            device = torch.device("cuda")
            for batch in loader:
                batch = {k: v.to(device) for k, v in batch.items()}
                inputs, labels = batch["input_ids"], batch["labels"]
                loss = model(inputs.to(device), labels=labels.to(device)).loss
                loss.backward()
            """
        ),
        Quiet(
            """
            import torch

            for epoch in range(10):
                model.to(device)
                train_one_epoch(model, loader)
                model.cpu()
                torch.save(model.state_dict(), f"ckpt_{epoch}.pt")
            """
        ),
        Quiet(
            """
            import torch

            def step_all(models, x, device):
                for model in models:
                    model.to(device)
                    model(x).sum().backward()
                    model.cpu()
            """
        ),
        Quiet(
            """
            import torch

            running = torch.zeros(3)
            for x, y in loader:
                out = model(x.cuda())
                running.mul_(0.9).add_(out.detach().cpu().mean(0))
                target = running.cuda()
                loss = criterion(out, target)
                loss.backward()
            """
        ),
        Quiet(
            """
            import torch

            device = torch.device("cuda")
            weights = torch.tensor([1.0, 2.0]).to(device)
            for x, y in loader:
                loss = criterion(model(x.to(device)), y.to(device), weights.to(device))
                noise = torch.randn(4).to(device)
                half = features.to(torch.float16)
                loss.backward()
            """
        ),
        Quiet(
            """
            import torch

            def train_one_epoch(model, loader, weights, device):
                for x, y in loader:
                    loss = criterion(model(x.to(device)), y.to(device)) * weights.to(device)
                    loss.mean().backward()

            def main(model, loader, device):
                train_one_epoch(model, loader, torch.ones(4).to(device), device)
                train_one_epoch(model, loader, weights=load_weights(), device=device)
            """
        ),
        Quiet(
            """
            import torch

            class Trainer:
                def __init__(self, model):
                    self.model = model
                    self.mask = torch.ones(16)

                def refresh_mask(self, step):
                    self.mask = (torch.rand(16) > 0.1).float()

                def fit(self, loader, device):
                    for step, (x, y) in enumerate(loader):
                        self.refresh_mask(step)
                        out = self.model(x.to(device)) * self.mask.to(device)
                        out.sum().backward()
            """
        ),
        Quiet(
            """
            import torch

            cache = torch.tensor([1.0, 2.0])
            weights = torch.tensor([0.5, 0.5])
            for line in open("log.txt"):
                moved = cache.cuda()
                print(line, weights.cuda())
            """
        ),
        Quiet(
            """
            import torch
            from torchvision.models import resnet18

            teacher = resnet18(weights="DEFAULT")
            for x, y in loader:
                teacher.to("cuda")
                with torch.no_grad():
                    soft = teacher(x.cuda())
                teacher.to("cpu")
                loss = kd_loss(student(x.cuda()), soft)
                loss.backward()
            """
        ),
    )


def _tensor_parameter(ctx, scope: ScopeAnalysis, name: str) -> CallEvent | None:
    """For a parameter the function never rebinds: a call site, when every call in the module passes a
    tensor that is not yet on the device for it."""
    if scope.function is None or name not in scope.params or name in set(_bound_names(scope.function.node)):
        return None
    passed = ctx.module.arguments_for(scope.function, name)
    if not passed or any(not value.tags & {TENSOR, GRAPH} or value.tags & {MODEL, ON_DEVICE} for _, value in passed):
        return None
    return passed[0][0]


def _hot_loops(scope: ScopeAnalysis) -> dict[Loop, CallEvent | None]:
    """Loops that run per batch: None for one that iterates a loader, else the model or backward call
    it runs (see ``_why_hot``)."""
    hot: dict[Loop, CallEvent | None] = {}
    for loop in scope.loops:
        if _iterates_loader(scope, loop):
            hot[loop] = None
    for loop, call in loops_running(scope, lambda c: is_backward(c) or _is_model_call(c)).items():
        hot.setdefault(loop, call)
    return hot


def _why_hot(call: CallEvent | None) -> str:
    """Why a loop runs per batch, as a finding says it (only then are the call's positions computed)."""
    if call is None:
        return "it iterates a DataLoader"
    what = "backward" if is_backward(call) else "the model"
    return f"{what} runs every iteration (line {call.chunk.line_of(call.node)})"


def _iterates_loader(scope: ScopeAnalysis, loop: Loop) -> bool:
    if LOADER in loop.iterable.tags:
        return True
    iterable = loop.node.iter if isinstance(loop.node, cst.For) else None
    if isinstance(iterable, cst.Call):  # tqdm(loader), a wrapper around the loader
        values = (scope.value_at(arg.value) for arg in iterable.args)
        return any(value is not None and LOADER in value.tags for value in values)
    return False


def _is_model_call(call: CallEvent) -> bool:
    receiver = call.receiver
    if receiver is None or MODEL not in receiver.tags:
        return False
    return call.method is None or call.method in {"forward", "generate"}


def _changed_in(scope: ScopeAnalysis, loop: Loop) -> set[str]:
    """Dotted names the loop, or a local function it calls, rebinds, stores into, or modifies in place
    (`w.mul_(...)`, `w[i] = v`, `nn.init.zeros_(w)`, `self.mask = ...` in a helper method)."""
    changed = set(_statement_bound_names(scope.chunk.node_memo("bound_names"), loop.node))
    reached: dict[int, tuple[ScopeAnalysis, Loop | None]] = {id(scope): (scope, loop)}
    for call in calls_in(scope, loop):
        inner = call.function.analysis(scope.summary) if call.function is not None else None
        if inner is not None:
            reached.setdefault(id(inner), (inner, None))
    for owner, within in reached.values():
        for event in events_in(owner, within):
            if isinstance(event, AssignEvent):
                changed.update(event.targets)
            elif isinstance(event, StoreEvent):
                changed.add(event.container)
            elif isinstance(event, CallEvent):
                changed.update(_modified_in_place(event))
    return changed


def _modified_in_place(call: CallEvent) -> Iterator[str]:
    if call.method and call.method.endswith("_") and not call.method.startswith("_"):
        if call.receiver_key:
            yield call.receiver_key  # w.mul_(0.9)
        elif call.callee and call.arg_nodes:
            key = dotted(call.arg_nodes[0].value)
            if key is not None:
                yield key  # torch.nn.init.zeros_(w)


def _statement_bound_names(memo: dict, statement: cst.CSTNode) -> frozenset[str]:
    """``_bound_names`` of a statement, from its own header and its blocks' statements, each kept per
    node: after an edit re-parses one statement, only it and the blocks around it are walked again."""
    known = memo.get(statement)
    if known is None:
        if isinstance(statement, cst.BaseCompoundStatement) and not isinstance(statement, (cst.FunctionDef, cst.ClassDef)):
            blocks = [block for _, block in blocks_of(statement)]
            names = set(_bound_names(statement, skip=frozenset(blocks)))
            for block in blocks:
                for inner in block.body:
                    names |= _statement_bound_names(memo, inner)
            known = frozenset(names)
        else:
            known = frozenset(_bound_names(statement))
        memo[statement] = known
    return known


def _bound_names(root: cst.CSTNode, skip: frozenset = frozenset()) -> Iterator[str]:
    """Every dotted target bound anywhere under ``root`` (not inside nested functions or classes)."""
    stack = [root]
    while stack:
        node = stack.pop()
        if isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.Lambda)) and node is not root or node in skip:
            continue
        targets: list[cst.BaseExpression] = []
        if isinstance(node, cst.Assign):
            targets = [target.target for target in node.targets]
        elif isinstance(node, (cst.AugAssign, cst.AnnAssign, cst.For, cst.NamedExpr, cst.CompFor)):
            targets = [node.target]
        elif isinstance(node, cst.AsName):
            targets = [node.name]
        elif isinstance(node, cst.Del):
            targets = [node.target]
        for target in targets:
            yield from _target_keys(target)
        stack.extend(children(node))


def _target_keys(target: cst.BaseExpression) -> Iterator[str]:
    if isinstance(target, (cst.Tuple, cst.List)):
        for element in target.elements:
            yield from _target_keys(element.value)
    elif isinstance(target, cst.StarredElement):
        yield from _target_keys(target.value)
    else:
        key = dotted(target)
        if key is not None:
            yield key


def _mentions_changed(key: str, changed: set[str]) -> bool:
    """``self.w`` changes when ``self.w`` or ``self`` is rebound, or ``self.w.data`` is written."""
    parts = key.split(".")
    prefixes = {".".join(parts[: index + 1]) for index in range(len(parts))}
    return bool(prefixes & changed) or any(name.startswith(key + ".") for name in changed)


def _moved_back(scope: ScopeAnalysis, loop: Loop, key: str) -> bool:
    return any(
        call.receiver_key == key and loop in call.context.loops and transfer_destination(call) == "host"
        for call in scope.calls()
    )


def _constant_factory(scope: ScopeAnalysis, expression: cst.BaseExpression) -> cst.Call | None:
    """The deterministic torch factory call at the root of a method chain (`torch.tensor([...]).view(...)`)."""
    node = expression
    while isinstance(node, cst.Call):
        name = dotted(node.func)
        if name is not None:
            canonical = scope.canonical(name)
            if canonical.startswith("torch.") and last_part(canonical) in _DETERMINISTIC_FACTORIES:
                return node
        if not isinstance(node.func, cst.Attribute):
            return None
        node = node.func.value
    return None


def _names(expression: cst.BaseExpression) -> set[str]:
    found: set[str] = set()
    stack: list[cst.CSTNode] = [expression]
    while stack:
        node = stack.pop()
        if isinstance(node, cst.Name):
            found.add(node.value)
        stack.extend(children(node))
    return found


def _transfer_suffix(scope: ScopeAnalysis, call: CallEvent) -> str:
    """`.to(device)` of `w.to(device)`, as written."""
    whole = scope.chunk.code_for(call.node)
    receiver = cast(cst.Attribute, call.node.func).value  # a `.to()`/`.cuda()` method call
    return " ".join(whole[len(scope.chunk.code_for(receiver)) :].split())


def _over(loop: Loop) -> str:
    return f" over `{shortened(loop.iterable_text, 48)}`" if not loop.is_while else ""
