"""The same data is copied to the GPU on every iteration of a hot loop although it never changes.

Why it costs money: `w.to(device)` on a CPU tensor allocates GPU memory and copies the data
each time it runs, and `torch.tensor([...]).cuda()` also builds the tensor on the host first;
inside the training or evaluation loop that is one extra host-to-device copy (and a sync
point for pageable memory) per step, for a result that is the same every time.
`model.to(device)` inside the loop walks every parameter and buffer each step and moves
nothing after the first. A constant counts when it is built from literals or from values the
loop never changes (`torch.tensor([10**i for i in range(n)])`). A module's `forward` runs every
step too: `torch.tensor([0.485, 0.456, 0.406], device=x.device)` there is one copy per step.

How to fix: do the transfer once, above the loop (`class_weights = class_weights.to(device)`),
or create constants on the device directly (`torch.tensor([...], device=device)`), and use
the moved tensor inside the loop; in a module, `self.register_buffer(name, tensor,
persistent=False)` in `__init__` copies it once and moves it with the model. Hoisting is a manual change: check the tensor is not
modified in place inside the loop first.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import cast

import libcst as cst

from trainlint.analysis.calls import transfer_destination
from trainlint.analysis.tree import blocks_of
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
    StoreEvent,
    Tag,
    calls_in,
    children,
    dotted,
    events_in,
    is_backward,
    is_test_file,
    last_part,
    loops_running,
    shortened,
    walk,
)

# Factories whose result depends only on their arguments (random ones differ every call).
_DETERMINISTIC_FACTORIES = frozenset(
    {"tensor", "as_tensor", "zeros", "ones", "full", "arange", "linspace", "logspace", "eye", "Tensor", "FloatTensor", "LongTensor"}
)


def _needed(event: Event) -> bool:
    """What every finding is reported at: a ``.to()``/``.cuda()`` call, or a torch factory of host data."""
    return isinstance(event, CallEvent) and (
        event.method in {"to", "cuda"} or ((event.callee or "").startswith("torch.") and last_part(event.callee or "") in _HOST_DATA_FACTORIES)
    )


class RedundantTransfer(Rule):
    code = "TL303"
    name = "redundant-transfer"
    severity = Severity.WARNING
    scope_needs = _needed

    def check_scope(self, ctx: RuleContext, scope: ScopeAnalysis) -> None:
        if is_test_file(ctx.module.path):
            return  # a test's loop runs a few tiny steps: a copy per step costs nothing
        if _is_module_forward(ctx, scope):
            self._check_forward(ctx, scope)
        hot = _hot_loops(scope)
        if not hot:
            return
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

    def _check_transfer(self, ctx: RuleContext, scope: ScopeAnalysis, call: CallEvent, loop: Loop, hot_call: CallEvent | None, changed: set[str]) -> None:
        receiver = call.receiver
        receiver_node = cast(cst.Attribute, call.node.func).value  # a `.to()`/`.cuda()` method call
        transfer = shortened(scope.chunk.code_for(call.node), 48)

        def loop_evidence():  # only for a finding: the reason may name a line (positions)
            return (scope.chunk, loop.node), f"the loop{_over(loop)}: {_why_hot(hot_call)}"

        if receiver is None:
            return
        key = call.receiver_key
        if Tag.MODEL in receiver.tags:
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
        if passed is None and (not receiver.tags & {Tag.TENSOR, Tag.GRAPH} or Tag.ON_DEVICE in receiver.tags):
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
        if factory is None:
            return
        if Tag.CONSTANT in receiver.tags and not _names(receiver_node) & changed:
            built = "built from constants only"
        else:
            reads = _invariant_reads(scope, receiver_node, changed)
            if reads is None:
                return
            built = f"built from {_listed(reads)}, which the loop does not change"
        message = (
            f"`{transfer}` builds the same constant tensor on the host and copies it to the device on every "
            f"iteration of the loop{_over(loop)}"
        )
        evidence = [((scope.chunk, factory), built), loop_evidence()]
        ctx.report(
            call.node, message, evidence=evidence,
            help="create it once above the loop, directly on the device: `torch.tensor([...], device=device)`",
        )

    def _check_forward(self, ctx: RuleContext, scope: ScopeAnalysis) -> None:
        """A module's `forward` runs once per step (twice with a backward through it): a constant tensor built
        on the host there is copied to the device every step, where `register_buffer` in `__init__` would
        copy it once and move it with the model."""
        function = scope.function
        assert function is not None and function.owner is not None, "_is_module_forward: a method"
        per_call = set(scope.params) | _function_bound_names(scope, function.node)
        owner = function.owner.name
        modified = {key for call in scope.calls() for key in _modified_in_place(call)} | _augmented(scope, function.node)
        for call in scope.calls():
            if call.context.conditions or _caches_on_self(call) or _bound_to(call) & modified:
                continue  # built under a condition (once, into a cache), kept on the module, or an accumulator
            factory = _built_on_device(scope, call)
            if factory is not None:  # torch.tensor([...], device=x.device): its data, not the device, must be fixed
                reads = _invariant_reads(scope, factory, per_call, data_only=True)
            elif call.method in {"to", "cuda"} and transfer_destination(call) == "device" and isinstance(call.node.func, cst.Attribute):
                moved = call.node.func.value  # torch.tensor([...]).view(...).to(x.device)
                factory = _constant_factory(scope, moved)
                if factory is None or _device_keyword(factory) is not None:
                    continue
                reads = _invariant_reads(scope, moved, per_call)
            else:
                continue
            if reads is None:
                continue
            what = f"built from {_listed(reads)}" if reads else "built from constants only"
            written_call = shortened(scope.chunk.code_for(call.node), 60)
            ctx.report(
                call.node,
                f"`{written_call}` builds the same tensor on the host and copies it to the device on every call of "
                f"`{owner}.forward`, which runs every training step",
                evidence=[((scope.chunk, factory), what), ((function.chunk, function.node.name), "the forward pass: it runs every step")],
                help="build it once in `__init__` with `self.register_buffer(name, tensor, persistent=False)`, which moves "
                "with the model, and use the buffer in `forward`",
            )


def _tensor_parameter(ctx: RuleContext, scope: ScopeAnalysis, name: str) -> CallEvent | None:
    """For a parameter the function never rebinds: a call site, when every call in the module passes a
    tensor that is not yet on the device for it."""
    if scope.function is None or name not in scope.params or name in _function_bound_names(scope, scope.function.node):
        return None
    passed = ctx.module.arguments_for(scope.function, name)
    if not passed or any(not value.tags & {Tag.TENSOR, Tag.GRAPH} or value.tags & {Tag.MODEL, Tag.ON_DEVICE} for _, value in passed):
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
    if Tag.LOADER in loop.iterable.tags:
        return True
    iterable = loop.node.iter if isinstance(loop.node, cst.For) else None
    if isinstance(iterable, cst.Call):  # tqdm(loader), a wrapper around the loader
        values = (scope.value_at(arg.value) for arg in iterable.args)
        return any(value is not None and Tag.LOADER in value.tags for value in values)
    return False


def _is_model_call(call: CallEvent) -> bool:
    receiver = call.receiver
    if receiver is None or Tag.MODEL not in receiver.tags:
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


# torch factories that copy Python data from the host: with `device=` they copy it to the device
_HOST_DATA_FACTORIES = frozenset({"tensor", "as_tensor", "Tensor", "FloatTensor", "LongTensor", "IntTensor", "BoolTensor", "DoubleTensor"})
_DEVICE_TEXT = re.compile(r"device|cuda|gpu|rank", re.I)
_HOST_TEXT = re.compile(r"""(torch\.device\()?["']cpu["']\)?""")
# Calls whose result depends only on their arguments: what a loop-invariant constant may be built with.
_PURE_BUILTINS = frozenset({"range", "len", "list", "tuple", "reversed", "sorted", "int", "float", "abs", "min", "max", "sum", "round"})


def _is_module_forward(ctx: RuleContext, scope: ScopeAnalysis) -> bool:
    function = scope.function
    return (
        function is not None and function.name == "forward" and function.owner is not None
        and ctx.summary.is_module_class(function.owner)
    )


def _caches_on_self(call: CallEvent) -> bool:
    statement = call.statement
    return isinstance(statement, cst.Assign) and any((dotted(t.target) or "").startswith("self.") for t in statement.targets)


def _device_keyword(call: cst.Call) -> cst.BaseExpression | None:
    return next((arg.value for arg in call.args if arg.keyword is not None and arg.keyword.value == "device"), None)


def _bound_to(call: CallEvent) -> set[str]:
    statement = call.statement
    if not isinstance(statement, cst.Assign):
        return set()
    return {key for target in statement.targets for key in _target_keys(target.target)}


def _function_bound_names(scope: ScopeAnalysis, function: cst.FunctionDef) -> frozenset[str]:
    """``_bound_names`` of a function's body, from its statements', each kept per node: a key typed in
    a long method walks only the statements the edit reached (and their headers), not the method."""
    memo = scope.chunk.node_memo("TL303 body bound names")
    body = function.body
    if isinstance(body, cst.SimpleStatementSuite):
        return frozenset(name for small in body.body for name in _bound_names(small))
    names: set[str] = set()
    for statement in body.body:
        names |= _body_statement_bound_names(memo, statement)
    return frozenset(names)


def _body_statement_bound_names(memo: dict, statement: cst.CSTNode) -> frozenset[str]:
    """As ``_statement_bound_names``, but a nested function or class binds nothing of the function's."""
    known = memo.get(statement)
    if known is None:
        if isinstance(statement, (cst.FunctionDef, cst.ClassDef)):
            known = frozenset()
        elif isinstance(statement, cst.BaseCompoundStatement):
            blocks = [block for _, block in blocks_of(statement)]
            names = set(_bound_names(statement, skip=frozenset(blocks)))
            for block in blocks:
                for inner in block.body:
                    names |= _body_statement_bound_names(memo, inner)
            known = frozenset(names)
        else:
            known = frozenset(_bound_names(statement))
        memo[statement] = known
    return known


def _augmented(scope: ScopeAnalysis, function: cst.FunctionDef) -> frozenset[str]:
    """Names a function updates with `+=` and the like: accumulators, not constants (kept per node)."""
    memo = scope.chunk.node_memo("TL303 augmented")
    known = memo.get(function)
    if known is None:
        known = memo[function] = frozenset(
            key for node in walk(function) if isinstance(node, cst.AugAssign) for key in _target_keys(node.target)
        )
    return known


def _built_on_device(scope: ScopeAnalysis, call: CallEvent) -> cst.Call | None:
    """``torch.tensor([...], device=x.device)``: a sequence of Python values copied to the device as it is
    built. A single number (`torch.tensor(0.0, device=...)`, a dummy metric) is left alone: one scalar."""
    name = call.callee or ""
    if not name.startswith("torch.") or last_part(name) not in _HOST_DATA_FACTORIES or not call.arg_nodes:
        return None
    data = call.arg_nodes[0].value
    if call.arg_nodes[0].keyword is not None or not isinstance(data, (cst.List, cst.Tuple, cst.ListComp)):
        return None
    device = _device_keyword(call.node)
    if device is None:
        return None
    text = scope.chunk.code_for(device)
    return call.node if _DEVICE_TEXT.search(text) and not _HOST_TEXT.fullmatch(text) else None


def _invariant_reads(
    scope: ScopeAnalysis, expression: cst.BaseExpression, changed: set[str], *, data_only: bool = False,
) -> list[str] | None:
    """The names a tensor expression reads, when none of them is in ``changed`` and it calls nothing but
    torch, numpy and math functions, methods chained on its own result and pure builtins (`range`,
    `len`); None otherwise. Names its comprehensions bind (`10**i for i in range(n)`) are its own.
    ``data_only``: read only the factory's data and dtype, not its `device=` (a per-call input's device
    is the same every step)."""
    reads: list[str] = []
    bound: set[str] = set()
    stack: list[cst.CSTNode] = [expression]
    while stack:
        node = stack.pop()
        if isinstance(node, cst.CompFor):
            bound.update(_target_keys(node.target))
        if isinstance(node, cst.Call):
            callee = dotted(node.func)
            canonical = scope.canonical(callee) if callee is not None else ""
            chained = isinstance(node.func, cst.Attribute) and isinstance(node.func.value, cst.Call)
            if not (chained or canonical.split(".", 1)[0] in {"torch", "numpy", "math"} or canonical in _PURE_BUILTINS):
                return None
            stack.extend(arg.value for arg in node.args if not (data_only and arg.keyword is not None and arg.keyword.value == "device"))
            stack.append(node.func.value if isinstance(node.func, cst.Attribute) else node.func)
            continue
        if isinstance(node, (cst.Attribute, cst.Name)):
            key = dotted(node)
            if key is not None:
                root = key.split(".", 1)[0]
                if root not in bound and root not in scope.local_imports and root not in scope.summary.imports:
                    reads.append(key)
                continue
        stack.extend(children(node))
    reads = [key for key in dict.fromkeys(reads) if key.split(".", 1)[0] not in bound]
    return None if any(_mentions_changed(key, changed) for key in reads) else reads


def _listed(reads: list[str]) -> str:
    return ", ".join(f"`{key}`" for key in reads[:3]) + (" and more" if len(reads) > 3 else "")


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


RedundantTransfer.MUST_FIRE = (
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
    Fires(  # an evaluation helper nested in main: the digit-place tensor depends only on values fixed outside its loop
        """
        import torch
        from torch.utils.data import DataLoader


        def main(config, model, trainer, datasets):
            def eval_split(split, max_batches=-1):
                ndigit = config.data.ndigit
                results = []
                loader = DataLoader(datasets[split], batch_size=50, num_workers=0, drop_last=False)
                for b, (x, y) in enumerate(loader):
                    x = x.to(trainer.device)
                    d1d2 = x[:, : ndigit * 2]
                    d3 = model.generate(d1d2, ndigit + 1)[:, -(ndigit + 1):].flip(1)
                    factors = torch.tensor([[10**i for i in range(ndigit + 1)][::-1]]).to(trainer.device)
                    d1i = (d1d2[:, :ndigit] * factors[:, 1:]).sum(1)
                    d2i = (d1d2[:, ndigit : ndigit * 2] * factors[:, 1:]).sum(1)
                    results.append(((d3 * factors).sum(1) == d1i + d2i).cpu())
                    if 0 <= max_batches <= b + 1:
                        break
                return torch.cat(results).float().mean()

            trainer.add_callback("on_batch_end", lambda t: eval_split("test") if t.iter_num % 500 == 0 else None)
            trainer.run()
        """,
        at="factors = torch.tensor([[10**i for i in range(ndigit + 1)][::-1]]).to(trainer.device)",
    ),
    Fires(  # a module's forward runs every step: a constant built on the host there is copied every step
        """
        import torch
        import torch.nn as nn


        class Normalize(nn.Module):
            def __init__(self, backbone):
                super().__init__()
                self.backbone = backbone

            def forward(self, images):
                mean = torch.tensor([0.485, 0.456, 0.406], device=images.device).view(1, 3, 1, 1)
                std = torch.tensor([0.229, 0.224, 0.225]).view(1, 3, 1, 1).to(images.device)
                return self.backbone((images - mean) / std)
        """,
        count=2,
    ),
)

RedundantTransfer.MUST_NOT_FIRE = (
    Quiet(  # forward: data that depends on the input, a device-side fill, a cached buffer, and no module at all
        """
        import torch
        import torch.nn as nn


        class Head(nn.Module):
            def __init__(self, dim):
                super().__init__()
                self.proj = nn.Linear(dim, dim)
                self.register_buffer("scale", torch.tensor([dim ** -0.5]), persistent=False)
                self.positions = None

            def forward(self, x):
                lengths = torch.tensor([len(row) for row in x], device=x.device)
                mask = torch.zeros(x.shape[0], x.shape[1], device=x.device)
                if self.positions is None:
                    self.positions = torch.tensor([0.0, 1.0], device=x.device)
                return self.proj(x) * self.scale + mask.sum() + lengths.sum() + self.positions.sum()


        def forward(images):
            return images - torch.tensor([0.5], device=images.device)
        """
    ),
    Quiet(  # forward: a scalar accumulator, a dummy scalar metric, a counter updated in place: not constants
        """
        import torch
        import torch.nn as nn
        import torch.nn.functional as F


        class ChunkedCrossEntropy(nn.Module):
            def forward(self, logits, targets):
                total = torch.tensor(0.0, device=targets.device)
                counts = torch.tensor([0, 0], device=targets.device)
                for chunk, target in zip(logits.chunk(4), targets.chunk(4)):
                    total += F.cross_entropy(chunk, target, reduction="sum")
                    counts.add_(torch.stack([target.numel(), (target >= 0).sum()]))
                ratios = torch.tensor(1.0, device=targets.device)
                return total / counts[1], ratios
        """
    ),
    Quiet(  # a loop-invariant-looking tensor built from what the loop changes
        """
        import torch


        def evaluate(model, loader, device):
            scale = 1
            for x, y in loader:
                weights = torch.tensor([scale, scale * 2]).to(device)
                model(x.to(device)).mul(weights).sum()
                scale += 1
        """
    ),
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
