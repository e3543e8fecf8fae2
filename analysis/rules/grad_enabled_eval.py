"""An evaluation or inference pass runs the model with autograd on.

`model.eval()` switches dropout and batch-norm to inference behaviour; it does not stop autograd.
Without `torch.no_grad()` (or `inference_mode()`), every validation forward records the graph
and keeps each layer's activations alive until the output is dropped: the pass needs the memory
of a training step — evaluation at a larger batch size is where runs die of out-of-memory — and
runs measurably slower, every epoch, for gradients nobody uses. It also applies to one function
used for both (`run_epoch(model, loader, optimizer=None)`, `train=False`) when the evaluation
call leaves grad on, and to an overridden `Trainer.prediction_step`, which the Hugging Face
`evaluation_loop` calls with grad enabled (the base method disables it itself).

How to fix: decorate the evaluation function with `@torch.no_grad()` (or
`@torch.inference_mode()`), or wrap the validation loop in `with torch.no_grad():`. Leave grad
on only where the evaluation needs gradients (adversarial attacks, saliency, test-time
adaptation) — those call `backward`/`autograd.grad`, which keeps this rule quiet.
"""

from __future__ import annotations

from typing import TypeGuard

import libcst as cst

from trainlint.analysis.frameworks import grad_handled_by_framework
from trainlint.analysis.patterns import evaluation_calls, mode_parameter, name_words, smoke_test_forward
from trainlint.analysis.torchapi import is_parameterless_layer
from trainlint.rules import (
    AssignEvent,
    CallEvent,
    Fires,
    Loop,
    ModuleView,
    Quiet,
    Rule,
    RuleContext,
    ScopeAnalysis,
    Severity,
    Tag,
    TextEdit,
    backward_target,
    calls_in,
    dotted,
    indentation,
    is_backward,
    is_eval_name,
    is_optimizer_step,
    is_test_file,
    last_part,
    ordered_events,
    passed_expression,
    quoted,
)
from trainlint.rules import walk as _walk

# Words of a loop's iterable that mark held-out data.
_EVAL_DATA_WORDS = frozenset(
    {"val", "valid", "validation", "test", "testing", "eval", "evaluation", "dev", "holdout"}
)
# Decorators known not to change grad mode; any other decorator may, so the rule stays quiet.
_NEUTRAL_DECORATORS = frozenset({"staticmethod", "classmethod", "torch.compile", "functools.wraps", "wraps"})


class GradEnabledEval(Rule):
    code = "TL102"
    name = "grad-enabled-eval"
    severity = Severity.ERROR

    def check(self, ctx: RuleContext) -> None:
        module = ctx.module
        if is_test_file(module.path):
            return
        for scope in ctx.scopes:
            if scope.function is not None and is_eval_name(scope.function.name):
                self._check_eval_function(ctx, scope)
            else:
                self._check_eval_loops(ctx, scope)
                self._check_shared_function(ctx, scope)

    # ------------------------------------------------------------------ (c) one function for both
    def _check_shared_function(self, ctx: RuleContext, scope: ScopeAnalysis) -> None:
        """``run_epoch(model, loader, optimizer=None)`` used for training and, without an optimizer, for
        evaluation: the evaluation call runs every forward with autograd on."""
        parameter = mode_parameter(scope)
        if parameter is None or _framework_hook(ctx, scope.function):
            return
        assert scope.function is not None, "mode_parameter names a parameter of a function"
        evaluations = [call for call in evaluation_calls(ctx.module, scope, parameter) if call.context.grad_off is None]
        if not evaluations:
            return
        calls = list(calls_in(scope, None))
        forwards = [call for call in calls if _is_model_forward(call, set()) and call.context.grad_off is None]
        if not forwards or _grad_off_anywhere(scope, calls) or _grad_disabled_globally(ctx.module):
            return
        forward, call = forwards[0], evaluations[0]
        guarded = next(c for c in calls if is_backward(c) or is_optimizer_step(c))
        ctx.report(
            forward.node,
            f"`{_text(forward)}` records the autograd graph even when `{scope.function.qualified_name}()` only evaluates: "
            f"`{_text(call)}` on line {call.chunk.line_of(call.node)} leaves `{parameter}` off, so nothing backwards, "
            "yet every batch keeps its activations for a graph nobody uses",
            evidence=[
                ((forward.chunk, forward.node), f"`{_text(forward)}` records the autograd graph here"),
                ((guarded.chunk, guarded.node), f"training happens only when `{parameter}` is given"),
                ((call.chunk, call.node), "called here to evaluate, with grad enabled"),
            ],
            help=f"run the forward under `torch.set_grad_enabled(...)` on `{parameter}` (or `torch.no_grad()` "
            "at the evaluation call)",
        )

    # ------------------------------------------------------------------ (a) evaluation functions
    def _check_eval_function(self, ctx: RuleContext, scope: ScopeAnalysis) -> None:
        info = scope.function
        assert info is not None, "check() looks at a function's scope here"
        node = info.node
        if _framework_hook(ctx, info) or _test_function(info) or any(not _neutral(d, scope) for d in node.decorators):
            return
        calls = list(calls_in(scope, None))
        eval_calls = [call for call in calls if _is_mode_switch(call) and _mode(call) == "eval"]
        switched = {_switched_model(call) for call in eval_calls}
        forwards = [
            call for call in calls
            if _is_model_forward(call, switched) and call.context.grad_off is None and not _builds_a_module(ctx, call, calls)
            and not smoke_test_forward(ctx.summary, call)
        ]
        if not forwards or _grad_off_anywhere(scope, calls) or _trains(calls):
            return
        if any(call.scope is not scope for call in forwards):
            with_grad = _reached_with_grad(scope)
            forwards = [call for call in forwards if call.scope is scope or id(call) in with_grad]
        if forwards:
            decorated = _decorated_reach(ctx, calls)
            forwards = [call for call in forwards if call.scope not in decorated]
        if not forwards:
            return
        if info.owner is not None and ctx.summary.is_module_class(info.owner) and not eval_calls:
            return  # a model's own method: its caller decides the grad mode
        sites = _call_sites(ctx.module, info)
        if any(site.context.grad_off is not None for site in sites) or _passed_around(ctx.module, info):
            return
        returned = scope.return_value.roots | {site.node for site in sites}
        if _output_backwarded(ctx.module, forwards, returned) or _grad_disabled_globally(ctx.module):
            return
        forward = forwards[0]
        evidence = [((forward.chunk, forward.node), f"`{_text(forward)}` records the autograd graph here")]
        if eval_calls:
            evidence.append(((eval_calls[0].chunk, eval_calls[0].node), f"`{_text(eval_calls[0])}` does not turn autograd off"))
        evidence.extend(((site.chunk, site.node), "called here with grad enabled") for site in sites[:2])
        called = f"; it is called on line {sites[0].chunk.line_of(sites[0].node)} with grad enabled" if sites else ""
        message = (
            f"`{info.qualified_name}()` looks like an evaluation pass but runs `{_text(forward)}` with autograd on: "
            f"no `no_grad()`/`inference_mode()` and no backward or optimizer step{called}. Each forward keeps its "
            "activations for a graph nobody uses: training-step memory and extra time on every evaluation"
        )
        ctx.report(
            node.name, message, evidence=evidence,
            help="decorate the function with `@torch.no_grad()` (or `@torch.inference_mode()`)",
            # safe when what it returns carries no graph, or its callers (all in this file) backward
            # through none of it; a caller in another file might need the graph it returns
            fix=ctx.fix("decorate with torch.no_grad()", [_decorate(ctx, node)], safe=Tag.GRAPH not in scope.return_value.tags or bool(sites)),
        )

    # ------------------------------------------------------------------ (b) validation loops
    def _check_eval_loops(self, ctx: RuleContext, scope: ScopeAnalysis) -> None:
        candidates = [loop for loop in scope.loops if _is_eval_data(loop.iterable_text)]
        if not candidates or scope.function is not None and (
            _framework_hook(ctx, scope.function)
            or any(site.context.grad_off is not None for site in _call_sites(ctx.module, scope.function))
        ):
            return
        reported: list[Loop] = []
        for loop in candidates:
            if not any(outer.encloses(loop) for outer in reported) and self._check_loop(ctx, scope, loop):
                reported.append(loop)

    def _check_loop(self, ctx: RuleContext, scope: ScopeAnalysis, loop: Loop) -> bool:
        inside = [event for event in scope.events if loop in event.context.loops]
        if not inside or any(event.context.grad_off is not None for event in inside):
            return False
        mode = _mode_before(ctx.module, scope, loop, inside[0])
        if mode is None or _mode(mode) != "eval":
            return False
        calls = list(calls_in(scope, loop))
        forwards = [call for call in calls if _is_model_forward(call, {_switched_model(mode)}) and call.context.grad_off is None]
        if not forwards or _trains(calls) or _disables_grad(scope, list(scope.calls())):
            return False
        if _output_backwarded(ctx.module, forwards, frozenset()) or _grad_disabled_globally(ctx.module):
            return False
        forward = forwards[0]
        header = quoted(scope.chunk, loop.node.iter) if isinstance(loop.node, cst.For) else loop.iterable_text
        message = (
            f"the loop over `{header}` runs `{_text(forward)}` after `{_text(mode)}` with autograd on and no "
            "backward: `eval()` does not turn autograd off, so every batch records a graph and keeps its "
            "activations — training-step memory and extra time on every validation pass"
        )
        evidence = [
            ((mode.chunk, mode.node), f"`{_text(mode)}` switches layers to inference, not autograd"),
            ((forward.chunk, forward.node), f"`{_text(forward)}` records the autograd graph here"),
        ]
        no_grad = ctx.name_for("torch.no_grad")
        edit = ctx.indent_block(loop.node, f"with {no_grad}()") if no_grad else None
        ctx.report(
            loop.node.iter if isinstance(loop.node, cst.For) else loop.node.test, message, evidence=evidence,
            help="wrap the loop in `with torch.no_grad():` (or `torch.inference_mode()`)",
            fix=ctx.fix("wrap the loop in torch.no_grad()", [edit], safe=True),
        )
        return True


# ---------------------------------------------------------------------- helpers
def _is_eval_data(iterable_text: str) -> bool:
    return bool(name_words(iterable_text) & _EVAL_DATA_WORDS)


def _is_model_forward(call: CallEvent, switched: set[str | None]) -> bool:
    """A forward of a known model, or a call of something that was switched to ``eval()`` (so a module)."""
    receiver = call.receiver
    if receiver is not None and Tag.MODEL in receiver.tags:
        if isinstance(receiver.detail, str) and is_parameterless_layer(receiver.detail):
            return False  # `nn.CosineSimilarity()(a, b)` records a graph only if `a` or `b` came from a forward
        return call.method is None or call.method == "forward"
    return call.method is None and (call.receiver_key or call.callee) in switched - {None}


def _builds_a_module(ctx: RuleContext, forward: CallEvent, calls: list[CallEvent]) -> bool:
    """The "model" a helper calls is its parameter (a model by its name only: ``module``, ``net``)
    and every call into the helper passes a class there, or a ``functools.partial`` of one: calling
    it builds a module and runs no forward (dinov2's k-NN evaluation hands
    ``partial(KnnModule, ...)`` to the helper that builds one per try)."""
    receiver, helper = forward.receiver, forward.scope.function
    if receiver is None or receiver.site is None or not isinstance(receiver.site[1], cst.Param) or helper is None:
        return False
    links = [call for call in calls if call.function is helper]
    return bool(links) and all(_passes_a_class(ctx, link, helper, receiver.site[1]) for link in links)


def _passes_a_class(ctx: RuleContext, link: CallEvent, helper, param: cst.Param) -> bool:
    expression = passed_expression(link, helper, param.name.value)
    if isinstance(expression, cst.Call) and ctx.summary.canonical(dotted(expression.func) or "") == "functools.partial":
        expression = expression.args[0].value if expression.args and expression.args[0].keyword is None else None
    return expression is not None and _names_a_class(ctx, expression)


def _names_a_class(ctx: RuleContext, expression: cst.BaseExpression) -> bool:
    raw = dotted(expression)
    if raw is None:
        return False
    target = ctx.summary.canonical(raw)
    if target.startswith("torch.nn.") and last_part(target)[:1].isupper():
        return True
    return ctx.summary.local_class(target) is not None


def _reached_with_grad(scope: ScopeAnalysis) -> set[int]:
    """The calls of helpers the function reaches through a chain of calls with grad on at every
    link: a helper called under `torch.no_grad()` runs its forward without grad, however the helper
    reads alone (an old `Trainer.prediction_step` calls `compute_loss` inside `no_grad()`)."""
    return {
        id(event) for event, chain in ordered_events(scope, None)
        if isinstance(event, CallEvent) and all(link.context.grad_off is None for link in chain)
    }


def _decorated_reach(ctx: RuleContext, calls: list[CallEvent]) -> set[ScopeAnalysis]:
    """The helpers the evaluation reaches through one with a decorator that may change the grad mode
    (yolov5's `export.run` under its own `@smart_inference_mode()`), and what they call: how grad
    stands in them is not known."""
    reach: set[ScopeAnalysis] = set()
    for call in calls:
        helper = call.function
        inner = helper.analysis(ctx.summary) if helper is not None else None
        if helper is None or inner is None or inner in reach:
            continue
        if all(_neutral(decorator, inner) for decorator in helper.node.decorators):  # read in the helper's own file
            continue
        reach.add(inner)
        reach.update(reached.scope for reached in calls_in(inner, None))
    return reach


def _trains(calls: list[CallEvent]) -> bool:
    return any(is_backward(call) or is_optimizer_step(call) for call in calls)


def _grad_off_anywhere(scope: ScopeAnalysis, calls: list[CallEvent]) -> bool:
    """The function disables grad somewhere (a block, a decorator, a call): its author chose where."""
    return any(event.context.grad_off is not None for event in scope.events) or _disables_grad(scope, calls)


def _disables_grad(scope: ScopeAnalysis, calls: list[CallEvent]) -> bool:
    """Grad turned off (or frozen) by a call rather than a with-block: ``set_grad_enabled(False)``, ``requires_grad_(False)``."""
    for call in calls:
        if call.callee is not None and last_part(call.callee) == "set_grad_enabled" and not _is_with_item(call):
            return True
        if call.method == "requires_grad_" and call.arg_nodes and _is_false(call.arg_nodes[0].value):
            return True
    return any(
        target.endswith(".requires_grad") and _is_false(event.value_node)
        for event in scope.events
        if isinstance(event, AssignEvent)  # the events with targets
        for target in event.targets
    )


def _is_with_item(call: CallEvent) -> bool:
    """``with torch.set_grad_enabled(...):`` (already seen as the block's context), not a bare call."""
    scope = call.scope
    root = scope.function.node if scope.function is not None else scope.chunk.module
    assert root is not None, "a scope is of a statement that parsed"
    return any(
        item.item is call.node for node in _walk(root) if isinstance(node, cst.With) for item in node.items
    )


def _is_false(node) -> bool:
    return isinstance(node, cst.Name) and node.value == "False"


def _grad_disabled_globally(module: ModuleView) -> bool:
    """An inference script that turns grad off for the whole process at module level."""
    return any(
        call.callee is not None and last_part(call.callee) == "set_grad_enabled" and call.scope.function is None
        and call.context.grad_off is None and not call.context.loops
        for call in module.all_calls()
    )


def _framework_hook(ctx: RuleContext, info) -> bool:
    """A method whose grad mode the framework decides: LightningModule methods, Trainer overrides
    other than the evaluation ones (`prediction_step` runs with grad on when overridden)."""
    return info.owner is not None and grad_handled_by_framework(ctx.summary, info)


def _test_function(info) -> bool:
    """A test: `test_*` with an `assert` (pytest), or a `test_*` method of a `Test*` class (unittest's
    `self.assertEqual`), wherever its file is (`_test_seq2seq_examples.py`)."""
    node = info.node
    if not node.name.value.startswith("test_"):
        return False
    if info.owner is not None and info.owner.name.startswith("Test"):
        return True
    return any(isinstance(inner, cst.Assert) for inner in _walk(node))


def _neutral(decorator: cst.Decorator, scope: ScopeAnalysis) -> bool:
    expression = decorator.decorator
    name = dotted(expression.func if isinstance(expression, cst.Call) else expression)
    return name is not None and scope.canonical(name) in _NEUTRAL_DECORATORS


def _call_sites(module: ModuleView, info) -> list[CallEvent]:
    """Where the function is called in this module (by identity, or by name for methods)."""
    return [
        call for call in module.all_calls()
        if call.function is info
        or (info.owner is not None and call.method == info.name and call.function is None)
    ]


def _passed_around(module: ModuleView, info) -> bool:
    """The function is referenced without being called (a callback, a registry): its caller is unknown."""
    return any(info.name in _names_not_called(chunk) for chunk in module.chunks if chunk.module is not None)


def _names_not_called(chunk) -> frozenset[str]:
    """Names a statement uses as values: not as the function of a call, a definition, a parameter,
    a keyword, an import or another object's attribute."""
    cached = chunk.memo.get("names_not_called")
    if cached is None:
        excluded: set[int] = set()
        nodes = list(_walk(chunk.module))
        for node in nodes:
            if isinstance(node, cst.Call):
                excluded.add(id(node.func))
                if isinstance(node.func, cst.Attribute):
                    excluded.add(id(node.func.attr))
            elif isinstance(node, (cst.FunctionDef, cst.ClassDef)):
                excluded.add(id(node.name))
            elif isinstance(node, cst.Param):
                excluded.add(id(node.name))
            elif isinstance(node, cst.Arg) and node.keyword is not None:
                excluded.add(id(node.keyword))
            elif isinstance(node, (cst.Import, cst.ImportFrom)):
                excluded.update(id(inner) for inner in _walk(node))
            elif isinstance(node, cst.Attribute):
                self_reference = isinstance(node.value, cst.Name) and node.value.value in {"self", "cls"}
                if not self_reference:
                    excluded.add(id(node.attr))
        cached = frozenset(node.value for node in nodes if isinstance(node, cst.Name) and id(node) not in excluded)
        chunk.memo["names_not_called"] = cached
    return cached


def _output_backwarded(module: ModuleView, forwards: list[CallEvent], returned_roots: frozenset) -> bool:
    """A backward somewhere runs through these forwards (or what the function returns, or one of
    its calls: a call's result stands for the graph the function builds)."""
    roots = returned_roots | {call.node for call in forwards}
    return any(backward_target(call).roots & roots for call in module.backward_calls)


def _mode_before(module: ModuleView, scope: ScopeAnalysis, loop: Loop, first_inside) -> CallEvent | None:
    """The last ``x.train()``/``x.eval()`` before the loop's body starts (in earlier top-level
    statements too, for module-level code), else the first one inside the loop."""
    earlier = []
    if scope.function is None:
        for chunk in module.chunks[: scope.chunk.index]:
            earlier.extend(event for other in module.scopes_of(chunk) if other.function is None for event in other.events)
    mode = None
    for event in [*earlier, *scope.events]:
        if event is first_inside:
            break
        if _is_mode_switch(event):
            mode = event
    if mode is None:
        for event in scope.events:
            if loop in event.context.loops and _is_mode_switch(event):
                return event
    return mode


def _is_mode_switch(event) -> TypeGuard[CallEvent]:
    """``model.eval()``, ``model.train()``, ``model.train(False)`` (the model may be an unbound global)."""
    if not isinstance(event, CallEvent) or event.method not in {"train", "eval"} or len(event.arg_nodes) > 1:
        return False
    if event.callee is not None:
        return "." in event.callee and not event.callee.startswith("torch.")
    return event.receiver is not None


def _mode(event: CallEvent) -> str:
    assert event.method is not None, "a mode switch (_is_mode_switch) is a method call"
    if event.method == "train" and event.arg_nodes and _is_false(event.arg_nodes[0].value):
        return "eval"
    return event.method


def _switched_model(event: CallEvent) -> str | None:
    """The dotted name of what a mode switch was called on."""
    if event.callee is not None:
        return event.callee.rpartition(".")[0]
    return event.receiver_key


def _decorate(ctx: RuleContext, node: cst.FunctionDef) -> TextEdit | None:
    if node.asynchronous is not None:
        return None  # torch.no_grad() as a decorator does not cover a coroutine's body
    spelled = ctx.name_for("torch.no_grad")
    if spelled is None:
        return None
    # Right above `def`, below any decorator already there (outside `@staticmethod` it would turn the
    # method into a plain function). `def` begins its line, which may be above the name's (`def \`);
    # a form feed in front of it stays in front, and the decorator gets the indentation Python reads.
    line = ctx.chunk.range_of(node.name)[0] - node.whitespace_after_def.value.count("\n")
    text = ctx.module.line(line)
    column = len(text) - len(text.lstrip(" \t\f")) + 1
    return TextEdit(line, column, line, column, f"@{spelled}()\n{indentation(text)}")


def _text(call: CallEvent) -> str:
    return quoted(call.chunk, call.node)


GradEnabledEval.MUST_FIRE = (
    Fires(  # trained weights go into the freshly built model: running it is inference
        """
        import torch

        from model import ResNet18


        def test(checkpoint):
            net = ResNet18()
            net.load_state_dict(torch.load(checkpoint, map_location="cpu"))
            net.eval()
            return net(torch.randn(1, 3, 32, 32)).softmax(-1)
        """,
        files={
            "model.py": """
                import torch.nn as nn


                def ResNet18():
                    return nn.Sequential(nn.Conv2d(3, 64, 3), nn.BatchNorm2d(64), nn.Flatten(), nn.LazyLinear(10))
            """,
        },
        fixed="""
        import torch

        from model import ResNet18


        @torch.no_grad()
        def test(checkpoint):
            net = ResNet18()
            net.load_state_dict(torch.load(checkpoint, map_location="cpu"))
            net.eval()
            return net(torch.randn(1, 3, 32, 32)).softmax(-1)
        """,
        unsafe=True,
    ),
    Fires(  # the helper's `module` is handed the model itself: its call is a forward
        """
        import torch

        def collect_outputs(*, module, loader):
            return [module(x).argmax(1) for x, _ in loader]

        def eval_classifier(model, val_loader):
            model.eval()
            predictions = collect_outputs(module=model, loader=val_loader)
            return sum((p == y).sum().item() for p, (_, y) in zip(predictions, val_loader))
        """,
        fixed="""
        import torch

        def collect_outputs(*, module, loader):
            return [module(x).argmax(1) for x, _ in loader]

        @torch.no_grad()
        def eval_classifier(model, val_loader):
            model.eval()
            predictions = collect_outputs(module=model, loader=val_loader)
            return sum((p == y).sum().item() for p, (_, y) in zip(predictions, val_loader))
        """,
        at="def eval_classifier(model, val_loader):",
    ),
    Fires(
        """
        import torch
        import torch.nn as nn

        def validate(model, loader, criterion):
            model.eval()
            total, correct = 0.0, 0
            for x, y in loader:
                out = model(x.cuda())
                total += criterion(out, y.cuda()).item()
                correct += (out.argmax(1) == y.cuda()).sum().item()
            return total / len(loader), correct

        def train_one_epoch(model, loader, criterion, optimizer):
            model.train()
            for x, y in loader:
                optimizer.zero_grad()
                criterion(model(x.cuda()), y.cuda()).backward()
                optimizer.step()

        model = nn.Linear(10, 2).cuda()
        criterion = nn.CrossEntropyLoss()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for epoch in range(10):
            train_one_epoch(model, train_loader, criterion, optimizer)
            val_loss, val_correct = validate(model, val_loader, criterion)
        """,
        fixed="""
        import torch
        import torch.nn as nn

        @torch.no_grad()
        def validate(model, loader, criterion):
            model.eval()
            total, correct = 0.0, 0
            for x, y in loader:
                out = model(x.cuda())
                total += criterion(out, y.cuda()).item()
                correct += (out.argmax(1) == y.cuda()).sum().item()
            return total / len(loader), correct

        def train_one_epoch(model, loader, criterion, optimizer):
            model.train()
            for x, y in loader:
                optimizer.zero_grad()
                criterion(model(x.cuda()), y.cuda()).backward()
                optimizer.step()

        model = nn.Linear(10, 2).cuda()
        criterion = nn.CrossEntropyLoss()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for epoch in range(10):
            train_one_epoch(model, train_loader, criterion, optimizer)
            val_loss, val_correct = validate(model, val_loader, criterion)
        """,
    ),
    Fires(
        """
        import torch

        class Trainer:
            def __init__(self, model, val_loader):
                self.model = model
                self.val_loader = val_loader

            def evaluate(self):
                self.model.eval()
                preds = []
                for batch in self.val_loader:
                    preds.append(self.model(batch["x"]).argmax(-1).cpu())
                return torch.cat(preds)
        """,
        fixed="""
        import torch

        class Trainer:
            def __init__(self, model, val_loader):
                self.model = model
                self.val_loader = val_loader

            @torch.no_grad()
            def evaluate(self):
                self.model.eval()
                preds = []
                for batch in self.val_loader:
                    preds.append(self.model(batch["x"]).argmax(-1).cpu())
                return torch.cat(preds)
        """,
    ),
    Fires(
        """
        import torch
        import torch.nn.functional as F

        def test(model, device, test_loader):
            model.eval()
            test_loss = 0
            for data, target in test_loader:
                data, target = data.to(device), target.to(device)
                output = model(data)
                test_loss += F.nll_loss(output, target, reduction="sum").item()
            print(test_loss / len(test_loader.dataset))
        """,
        fixed="""
        import torch
        import torch.nn.functional as F

        @torch.no_grad()
        def test(model, device, test_loader):
            model.eval()
            test_loss = 0
            for data, target in test_loader:
                data, target = data.to(device), target.to(device)
                output = model(data)
                test_loss += F.nll_loss(output, target, reduction="sum").item()
            print(test_loss / len(test_loader.dataset))
        """,
    ),
    Fires(
        """
        import torch

        def train(model, ema, train_loader, val_loader, optimizer, criterion, epochs):
            for epoch in range(epochs):
                model.train()
                for x, y in train_loader:
                    optimizer.zero_grad()
                    loss = criterion(model(x), y)
                    loss.backward()
                    optimizer.step()
                    with torch.no_grad():
                        ema.update_parameters(model)
                model.eval()
                val_loss = 0.0
                for x, y in val_loader:
                    val_loss += criterion(model(x), y).item()
                print(epoch, val_loss)
        """,
        fixed="""
        import torch

        def train(model, ema, train_loader, val_loader, optimizer, criterion, epochs):
            for epoch in range(epochs):
                model.train()
                for x, y in train_loader:
                    optimizer.zero_grad()
                    loss = criterion(model(x), y)
                    loss.backward()
                    optimizer.step()
                    with torch.no_grad():
                        ema.update_parameters(model)
                model.eval()
                val_loss = 0.0
                with torch.no_grad():
                    for x, y in val_loader:
                        val_loss += criterion(model(x), y).item()
                print(epoch, val_loss)
        """,
    ),
    Fires(
        """
        import torch
        from torchvision.models import resnet50

        model = resnet50().cuda()
        model.eval()
        correct = 0
        for images, labels in test_dataloader:
            logits = model(images.cuda())
            correct += (logits.argmax(1) == labels.cuda()).sum().item()
        print(correct)
        """,
        fixed="""
        import torch
        from torchvision.models import resnet50

        model = resnet50().cuda()
        model.eval()
        correct = 0
        with torch.no_grad():
            for images, labels in test_dataloader:
                logits = model(images.cuda())
                correct += (logits.argmax(1) == labels.cuda()).sum().item()
        print(correct)
        """,
    ),
    Fires(
        """
        from transformers import AutoModelForSequenceClassification

        model = AutoModelForSequenceClassification.from_pretrained("distilbert-base-uncased")

        def run_inference(batches):
            model.eval()
            return [model(**batch).logits.argmax(-1).tolist() for batch in batches]
        """,
    ),
    Fires(
        """
        from torch import no_grad

        def val_epoch(net, loader, loss_fn):
            net.eval()
            losses = []
            for inputs, targets in loader:
                losses.append(loss_fn(net(inputs), targets).item())
            return sum(losses) / len(losses)
        """,
        fixed="""
        from torch import no_grad

        @no_grad()
        def val_epoch(net, loader, loss_fn):
            net.eval()
            losses = []
            for inputs, targets in loader:
                losses.append(loss_fn(net(inputs), targets).item())
            return sum(losses) / len(losses)
        """,
    ),
    Fires(  # objects: the module lives in an attribute bound outside __init__, called through a helper method
        """
        import torch

        class NeuralNet:
            def __init__(self, module, criterion):
                self.module = module
                self.criterion = criterion

            def initialize_module(self):
                self.module_ = self.module().to("cuda")

            def infer(self, x):
                return self.module_(x.to("cuda"))

            def validation_step(self, Xi, yi):
                self.module_.eval()
                y_pred = self.infer(Xi)
                return {"loss": self.criterion(y_pred, yi.to("cuda")), "y_pred": y_pred}

            def fit_loop(self, train_batches, valid_batches, optimizer, epochs):
                for _ in range(epochs):
                    for Xi, yi in train_batches:
                        self.module_.train()
                        optimizer.zero_grad()
                        self.criterion(self.infer(Xi), yi.to("cuda")).backward()
                        optimizer.step()
                    for Xi, yi in valid_batches:
                        step = self.validation_step(Xi, yi)
                        print(step["loss"].item())
        """,
        fixed="""
        import torch

        class NeuralNet:
            def __init__(self, module, criterion):
                self.module = module
                self.criterion = criterion

            def initialize_module(self):
                self.module_ = self.module().to("cuda")

            def infer(self, x):
                return self.module_(x.to("cuda"))

            @torch.no_grad()
            def validation_step(self, Xi, yi):
                self.module_.eval()
                y_pred = self.infer(Xi)
                return {"loss": self.criterion(y_pred, yi.to("cuda")), "y_pred": y_pred}

            def fit_loop(self, train_batches, valid_batches, optimizer, epochs):
                for _ in range(epochs):
                    for Xi, yi in train_batches:
                        self.module_.train()
                        optimizer.zero_grad()
                        self.criterion(self.infer(Xi), yi.to("cuda")).backward()
                        optimizer.step()
                    for Xi, yi in valid_batches:
                        step = self.validation_step(Xi, yi)
                        print(step["loss"].item())
        """
    ),
    Fires(  # mode by argument: one function trains with an optimizer and evaluates without one
        """
        import torch
        import torch.nn as nn

        def run_epoch(model, loader, criterion, optimizer=None):
            total = 0.0
            for x, y in loader:
                loss = criterion(model(x), y)
                if optimizer is not None:
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
                total += loss.item()
            return total / len(loader)

        def main(model, train_loader, val_loader, epochs):
            criterion = nn.CrossEntropyLoss()
            optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
            for epoch in range(epochs):
                train_loss = run_epoch(model, train_loader, criterion, optimizer)
                val_loss = run_epoch(model, val_loader, criterion)
                print(epoch, train_loss, val_loss)
        """
    ),
    Fires(  # framework hooks: the Trainer's evaluation_loop calls an overridden prediction_step with grad on
        """
        import torch
        from transformers import Trainer

        class RankingTrainer(Trainer):
            def prediction_step(self, model, inputs, prediction_loss_only, ignore_keys=None):
                inputs = self._prepare_inputs(inputs)
                outputs = model(**inputs)
                loss = outputs.loss.mean().detach()
                return (loss, outputs.logits, inputs["labels"])
        """,
        fixed="""
        import torch
        from transformers import Trainer

        class RankingTrainer(Trainer):
            @torch.no_grad()
            def prediction_step(self, model, inputs, prediction_loss_only, ignore_keys=None):
                inputs = self._prepare_inputs(inputs)
                outputs = model(**inputs)
                loss = outputs.loss.mean().detach()
                return (loss, outputs.logits, inputs["labels"])
        """,
        unsafe=True
    ),
    Fires(  # the loss helper the training step backwards through, called again to validate (litgpt)
        """
        import torch
        from models import GPT
        from losses import chunked_cross_entropy

        def fit(model, optimizer, train_loader, val_loader, max_iters):
            for step, (input_ids, targets) in enumerate(train_loader):
                logits = model(input_ids)
                loss = chunked_cross_entropy(logits, targets)
                loss.backward()
                optimizer.step()
                optimizer.zero_grad()
                if step % 100 == 0:
                    print(validate(model, val_loader, max_iters).item())

        def validate(model: GPT, val_loader, max_iters: int) -> torch.Tensor:
            model.eval()
            losses = torch.zeros(max_iters)
            for k, (input_ids, targets) in enumerate(val_loader):
                if k >= max_iters:
                    break
                logits = model(input_ids)
                losses[k] = chunked_cross_entropy(logits, targets)
            model.train()
            return losses.mean()
        """,
        fixed="""
        import torch
        from models import GPT
        from losses import chunked_cross_entropy

        def fit(model, optimizer, train_loader, val_loader, max_iters):
            for step, (input_ids, targets) in enumerate(train_loader):
                logits = model(input_ids)
                loss = chunked_cross_entropy(logits, targets)
                loss.backward()
                optimizer.step()
                optimizer.zero_grad()
                if step % 100 == 0:
                    print(validate(model, val_loader, max_iters).item())

        @torch.no_grad()
        def validate(model: GPT, val_loader, max_iters: int) -> torch.Tensor:
            model.eval()
            losses = torch.zeros(max_iters)
            for k, (input_ids, targets) in enumerate(val_loader):
                if k >= max_iters:
                    break
                logits = model(input_ids)
                losses[k] = chunked_cross_entropy(logits, targets)
            model.train()
            return losses.mean()
        """,
        files={
            "models.py": """
                import torch.nn as nn

                class GPT(nn.Module):
                    def __init__(self, vocab_size=256, n_embd=64):
                        super().__init__()
                        self.wte = nn.Embedding(vocab_size, n_embd)
                        self.lm_head = nn.Linear(n_embd, vocab_size, bias=False)

                    def forward(self, idx):
                        return self.lm_head(self.wte(idx))
            """,
            "losses.py": """
                import torch

                def chunked_cross_entropy(logits, targets, chunk_size=128):
                    logit_chunks = logits.reshape(-1, logits.size(-1)).split(chunk_size)
                    target_chunks = targets.reshape(-1).split(chunk_size)
                    loss_chunks = [
                        torch.nn.functional.cross_entropy(logit_chunk, target_chunk, reduction="none")
                        for logit_chunk, target_chunk in zip(logit_chunks, target_chunks)
                    ]
                    return torch.cat(loss_chunks).mean()
            """,
        },
    ),
    Fires(  # the same evaluation with embeddings made with autograd on: the encoder's forward is the one quoted
        """
        import torch
        import torch.nn as nn


        def embed(encoder, batch):
            return encoder(batch)


        def report_cosine_sims(encoder, loader):
            cos = nn.CosineSimilarity(dim=1)
            sims = []
            for images, texts in loader:
                sims.append(cos(embed(encoder, images), embed(encoder, texts)).mean().item())
            return sum(sims) / len(sims)


        def eval_model(encoder, loader):
            encoder.eval()
            return report_cosine_sims(encoder, loader)
        """,
        fixed="""
        import torch
        import torch.nn as nn


        def embed(encoder, batch):
            return encoder(batch)


        def report_cosine_sims(encoder, loader):
            cos = nn.CosineSimilarity(dim=1)
            sims = []
            for images, texts in loader:
                sims.append(cos(embed(encoder, images), embed(encoder, texts)).mean().item())
            return sum(sims) / len(sims)


        @torch.no_grad()
        def eval_model(encoder, loader):
            encoder.eval()
            return report_cosine_sims(encoder, loader)
        """,
    ),
)

GradEnabledEval.MUST_NOT_FIRE = (
    Quiet(  # `Model` is a class handed in (annotated as a module): calling it builds the agent, it runs no forward (cleanrl)
        """
        from typing import Callable

        import torch


        def evaluate(model_path: str, make_env: Callable, eval_episodes: int, Model: torch.nn.Module, device=torch.device("cpu")):
            envs = make_env()
            agent = Model(envs).to(device)
            agent.load_state_dict(torch.load(model_path, map_location=device))
            agent.eval()
            obs = envs.reset()
            episodic_returns = []
            while len(episodic_returns) < eval_episodes:
                actions, _, _, _ = agent.get_action_and_value(torch.Tensor(obs).to(device))
                obs, reward, done = envs.step(actions.cpu().numpy())
                if done:
                    episodic_returns.append(reward)
            return episodic_returns
        """
    ),
    Quiet(  # a cosine similarity of embeddings made under no_grad: a layer without parameters records nothing (DALLE2-pytorch)
        """
        import torch
        import torch.nn as nn


        @torch.no_grad()
        def embed(encoder, batch):
            return encoder(batch)


        def report_cosine_sims(encoder, loader):
            cos = nn.CosineSimilarity(dim=1)
            sims = []
            for images, texts in loader:
                sims.append(cos(embed(encoder, images), embed(encoder, texts)).mean().item())
            return sum(sims) / len(sims)


        def eval_model(encoder, loader):
            encoder.eval()
            return report_cosine_sims(encoder, loader)
        """
    ),
    Quiet(  # fairseq's trainer calls a task's valid_step inside torch.no_grad()
        """
        from fairseq.tasks import FairseqTask


        class UnpairedAudioText(FairseqTask):
            def valid_step(self, sample, model, criterion):
                res = model(**sample["net_input"], dense_x_only=True)
                predictions = res["logits"].argmax(-1)
                correct = (predictions == sample["target"]).sum().item()
                return correct, sample["target"].numel(), {"correct": correct}
        """
    ),
    Quiet(  # a unittest case, in a file whose name does not say so
        """
        import unittest

        import torch
        from transformers import AutoModelForSeq2SeqLM


        class TestSummarizationDistiller(unittest.TestCase):
            def test_loss_fn(self):
                model = AutoModelForSeq2SeqLM.from_pretrained("sshleifer/bart-tiny-random")
                target_ids = torch.tensor([[0, 4, 8, 2], [0, 8, 2, 1]], dtype=torch.long)
                outputs = model(target_ids, labels=target_ids)
                self.assertGreater(outputs.loss.item(), 0)
        """
    ),
    Quiet(  # the forward runs in a helper that the evaluation calls under `no_grad()`
        """
        import torch


        class Trainer:
            def __init__(self, model, eval_dataloader):
                self.model = model
                self.eval_dataloader = eval_dataloader

            def compute_loss(self, model, inputs):
                outputs = model(**inputs)
                return outputs["loss"]

            def prediction_step(self, model, inputs):
                with torch.no_grad():
                    loss = self.compute_loss(model, inputs)
                return loss.detach()

            def evaluate(self):
                model = self.model
                model.eval()
                losses = [self.prediction_step(model, inputs) for inputs in self.eval_dataloader]
                return torch.stack(losses).mean().item()
        """
    ),
    Quiet(  # a model file's shape check: a freshly built model on a made-up batch is no evaluation
        """
        import torch
        import torch.nn as nn
        import torch.nn.functional as F


        class ResNet(nn.Module):
            def __init__(self, widths, num_classes=10):
                super().__init__()
                self.stem = nn.Conv2d(3, widths[0], 3, padding=1, bias=False)
                self.bn = nn.BatchNorm2d(widths[0])
                self.fc = nn.Linear(widths[0], num_classes)

            def forward(self, x):
                out = F.relu(self.bn(self.stem(x)))
                return self.fc(F.adaptive_avg_pool2d(out, 1).flatten(1))


        def ResNet18():
            return ResNet([64, 128, 256, 512])


        def test():
            net = ResNet18()
            y = net(torch.randn(1, 3, 32, 32))
            print(y.size())

        # test()
        """
    ),
    Quiet(  # the forward runs in a helper under the project's own grad-off decorator
        """
        import torch

        from utils import smart_inference_mode


        @smart_inference_mode()
        def export_and_check(model, im, path):
            for _ in range(2):
                y = model(im)  # dry runs
            torch.jit.trace(model, im).save(path)
            return y


        def test(model, im, formats):
            return {f: export_and_check(model, im, f"model.{f}") for f in formats}
        """,
        files={
            "utils.py": """
                import torch


                def smart_inference_mode(torch_1_9=True):
                    def decorate(fn):
                        return (torch.inference_mode if torch_1_9 else torch.no_grad)()(fn)

                    return decorate
            """,
        },
    ),
    Quiet(  # `module` is handed a factory (a partial of a module class): calling it builds, no forward
        """
        from functools import partial

        import torch

        from .utils import evaluate


        class KnnModule(torch.nn.Module):
            def __init__(self, train_features, train_labels, k, temperature):
                super().__init__()
                self.register_buffer("train_features", train_features)
                self.train_labels = train_labels
                self.k = k
                self.temperature = temperature

            def forward(self, features):
                similarity = (features @ self.train_features.T) / self.temperature
                return self.train_labels[similarity.topk(self.k).indices]


        def create_module_dict(*, module, k_values, train_features, train_labels):
            modules = {str(k): module(train_features=train_features, train_labels=train_labels, k=k) for k in k_values}
            return torch.nn.ModuleDict(modules)


        def eval_knn(model, train_features, train_labels, val_loader, k_values):
            partial_module = partial(KnnModule, temperature=0.07)
            knn_modules = create_module_dict(
                module=partial_module, k_values=k_values, train_features=train_features, train_labels=train_labels
            )
            return evaluate(torch.nn.Sequential(model, knn_modules), val_loader)
        """,
        files={
            "utils.py": """
                import torch

                @torch.inference_mode()
                def evaluate(model, loader):
                    model.eval()
                    return [model(x) for x, _ in loader]
            """,
        },
    ),
    Quiet(  # "metadata inference" works out output shapes, it is no evaluation pass
        """
        import torch

        class PipelineStage:
            def __init__(self, submod: torch.nn.Module):
                self.submod = submod

            def _forward_metadata_inference(self, args):
                outputs = self.submod(*args)
                return [(o.shape, o.dtype) for o in outputs]

            def step(self, args):
                return self._forward_metadata_inference(args)
        """
    ),
    Quiet(  # decorated
        """
        import torch

        @torch.no_grad()
        def evaluate(model, loader):
            model.eval()
            return sum((model(x).argmax(1) == y).sum().item() for x, y in loader)
        """
    ),
    Quiet(  # the only call site is already under no_grad
        """
        import torch

        def validate(model, loader, criterion):
            model.eval()
            return sum(criterion(model(x), y).item() for x, y in loader)

        for epoch in range(10):
            train(model)
            with torch.no_grad():
                val = validate(model, val_loader, criterion)
        """
    ),
    Quiet(  # adversarial evaluation needs input gradients
        """
        import torch.nn.functional as F

        def evaluate_fgsm(model, test_loader, eps):
            model.eval()
            correct = 0
            for data, target in test_loader:
                data.requires_grad = True
                loss = F.cross_entropy(model(data), target)
                model.zero_grad()
                loss.backward()
                adv = data + eps * data.grad.sign()
                correct += (model(adv).argmax(1) == target).sum().item()
            return correct
        """
    ),
    Quiet(  # Hugging Face generate() turns grad off itself
        """
        def predict(model, tokenizer, prompts):
            model.eval()
            inputs = tokenizer(prompts, return_tensors="pt", padding=True)
            out = model.generate(**inputs, max_new_tokens=32)
            return tokenizer.batch_decode(out, skip_special_tokens=True)
        """
    ),
    Quiet(  # "test" only inside a longer word
        """
        import torch

        def warmup_latest(model, path):
            model.load_state_dict(torch.load(path))
            model.eval()
            return model(torch.zeros(1, 3, 224, 224))
        """
    ),
    Quiet(  # set_grad_enabled by phase, as in the transfer-learning tutorial
        """
        import torch

        for phase in ["train", "val"]:
            model.train() if phase == "train" else model.eval()
            for inputs, labels in dataloaders[phase]:
                with torch.set_grad_enabled(phase == "train"):
                    outputs = model(inputs)
                    loss = criterion(outputs, labels)
                    if phase == "train":
                        loss.backward()
                        optimizer.step()
        """
    ),
    Quiet(  # test-time adaptation trains on the test stream
        """
        import torch

        model.eval()
        for x, _ in test_loader:
            loss = entropy(model(x)).mean()
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
        """
    ),
    Quiet(  # an eval-named helper whose output is trained on
        """
        import torch.nn as nn

        criterion = nn.CrossEntropyLoss()

        def predict_logits(model, x):
            return model(x)

        for x, y in train_loader:
            loss = criterion(predict_logits(model, x), y)
            loss.backward()
            optimizer.step()
        """
    ),
    Quiet(  # grad turned off through an ExitStack, as detectron2's inference_on_dataset does
        """
        from contextlib import ExitStack

        import torch
        from torch import nn

        def inference_on_dataset(model, data_loader, evaluator):
            evaluator.reset()
            with ExitStack() as stack:
                if isinstance(model, nn.Module):
                    model.eval()
                stack.enter_context(torch.no_grad())
                for idx, inputs in enumerate(data_loader):
                    outputs = model(inputs)
                    evaluator.process(inputs, outputs)
            return evaluator.evaluate()

        def do_test(cfg, model, build_test_loader, evaluator):
            return inference_on_dataset(model, build_test_loader(cfg), evaluator)
        """
    ),
    Quiet(  # a model's inference branch (the model subclasses an nn.Module): its caller decides
        """
        from torch import nn

        class GeneralizedRCNN(nn.Module):
            def __init__(self, channels=256, classes=54):
                super().__init__()
                self.backbone = nn.Conv2d(3, channels, 3, padding=1)
                self.sem_seg_head = nn.Conv2d(channels, classes, 1)

        class PanopticFPN(GeneralizedRCNN):
            def forward(self, images):
                if not self.training:
                    return self.inference(images)
                return self.sem_seg_head(self.backbone(images)).mean()

            def inference(self, images):
                features = self.backbone(images)
                return self.sem_seg_head(features)
        """
    ),
    Quiet(  # Lightning runs validation_step under no_grad
        """
        import lightning as L
        import torch.nn.functional as F

        class LitModel(L.LightningModule):
            def __init__(self, net):
                super().__init__()
                self.net = net

            def validation_step(self, batch, batch_idx):
                x, y = batch
                self.log("val_loss", F.cross_entropy(self.net(x), y))
        """
    ),
    Quiet(  # a pytest unit test of the model
        """
        import torch
        import torch.nn as nn

        def test_forward_shape():
            model = nn.Linear(8, 4)
            model.eval()
            out = model(torch.zeros(2, 8))
            assert out.shape == (2, 4)
        """
    ),
    Quiet(  # mode by argument done right: grad follows the argument
        """
        import torch

        def run_epoch(model, loader, criterion, optimizer=None):
            training = optimizer is not None
            model.train(training)
            total = 0.0
            with torch.set_grad_enabled(training):
                for x, y in loader:
                    loss = criterion(model(x), y)
                    if optimizer is not None:
                        optimizer.zero_grad()
                        loss.backward()
                        optimizer.step()
                    total += loss.item()
            return total / len(loader)

        def main(model, train_loader, val_loader, criterion, optimizer, epochs):
            for epoch in range(epochs):
                run_epoch(model, train_loader, criterion, optimizer)
                run_epoch(model, val_loader, criterion)
        """
    ),
    Quiet(  # the Trainer calls compute_loss with grad on to train and under no_grad from its own prediction_step
        """
        from transformers import Trainer

        class WeightedLossTrainer(Trainer):
            def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
                labels = inputs.pop("labels")
                outputs = model(**inputs)
                loss = self.loss_fct(outputs.logits.view(-1, self.model.config.num_labels), labels.view(-1))
                return (loss, outputs) if return_outputs else loss
        """
    ),
    Quiet(  # an overridden prediction_step that disables grad itself, as the base class does
        """
        import torch
        from transformers import Trainer

        class RankingTrainer(Trainer):
            def prediction_step(self, model, inputs, prediction_loss_only, ignore_keys=None):
                inputs = self._prepare_inputs(inputs)
                with torch.no_grad():
                    outputs = model(**inputs)
                return (outputs.loss.detach(), outputs.logits, inputs["labels"])
        """
    ),
)
