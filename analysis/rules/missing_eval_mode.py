"""An evaluation pass runs a model that has dropout or batch-norm, and nothing puts it in eval mode.

A module starts in training mode and stays there until `.eval()` is called. Evaluated in training
mode, dropout keeps dropping units (scores are noisy and pessimistic) and batch-norm normalises
with the statistics of each evaluation batch while also updating its running averages with
evaluation data: validation numbers are wrong, checkpoint selection picks on noise, and the
saved model's batch-norm statistics are polluted by the validation set. A function used for both
(`run_epoch(model, loader, optimizer=None)`) that starts with `model.train()` does this to every
evaluation call. An evaluation pass is a function named for one (`evaluate`, `validate`), a no-grad
loop over held-out data (`val_loader`, `testloader`), or, in a file that trains, a loop over held-out
data that trains nothing (code written before `no_grad`, or that forgot it). The layers are read from
the model's class, in whichever workspace file defines it, or from what a library documents for what
built it, with the checkpoint or dropout rate it was given as a literal, a module constant or a
command-line option's default.

How to fix: call `model.eval()` before the evaluation loop and `model.train()` before training
resumes. Models without dropout or batch-norm layers behave the same in both modes, so they are
not reported.
"""

from __future__ import annotations

import re

import libcst as cst

from trainlint.analysis.libraries import torch_layer_dropout
from trainlint.analysis.patterns import (
    evaluation_calls,
    library_model_facts,
    mode_parameter,
    name_words,
    smoke_test_forward,
)
from trainlint.rules import (
    CallEvent,
    ClassInfo,
    Fires,
    ModuleView,
    Quiet,
    Rule,
    RuleContext,
    ScopeAnalysis,
    Severity,
    Tag,
    Value,
    calls_in,
    dotted,
    is_backward,
    is_optimizer_step,
    is_test_file,
    last_part,
    literal_value,
    mentions,
    shortened,
    walk,
)

_EVALUATION_FUNCTION = re.compile(
    r"^_?(?:evaluate|evaluation|eval|validate|validation|valid|val|test|testing|predict|inference|infer)(?:_|$)"
    r"|_(?:eval|evaluate|evaluation|validate|validation|val|test)$",
    re.I,
)
# At the start of a word (`val_loader`, `testloader`, `dataloaders['val']`): not `interval`, `latest`, `device`.
_EVALUATION_DATA = re.compile(r"(?<![a-z])(?:val|valid|test|eval|holdout|dev(?!ice))", re.I)
# A word naming held-out data, alone or fused with what holds it (`val`, `testloader`, `devset`).
_HELD_OUT_WORD = re.compile(r"(?:val|valid|validation|test|testing|eval|evaluation|dev|holdout)(?:loader|set|data|dl|iter|batches)?s?")
_MODE_LAYERS = re.compile(r"Dropout|BatchNorm|dropout\(|batch_norm\(")


class MissingEvalMode(Rule):
    code = "TL208"
    name = "missing-eval-mode"
    severity = Severity.WARNING

    def check_scope(self, ctx: RuleContext, scope: ScopeAnalysis) -> None:
        if ctx.module.framework_runs_loop is not None or is_test_file(ctx.module.path):
            return
        self._check_shared_function(ctx, scope)
        for call in scope.calls():
            if call.function is not None and ctx.summary.defined_elsewhere(call.function):
                self._check_imported_evaluation(ctx, scope, call)
            if call.method is not None or call.receiver is None or not _runs_a_model(ctx, scope, call):
                continue
            why = _evaluation_pass(ctx.module, scope, call)
            if why is None or smoke_test_forward(ctx.summary, call):
                continue
            layers = _mode_layers(ctx, scope, call)
            if layers is None or _switched_to_eval(ctx.module, call) or _loaded_in_eval_mode(ctx, scope, call):
                continue
            self._report(ctx, scope, call, why, layers)
            break  # one finding per evaluation pass

    def _check_shared_function(self, ctx: RuleContext, scope: ScopeAnalysis) -> None:
        """``run_epoch(model, loader, optimizer=None)`` that starts with ``model.train()``, called without an
        optimizer to evaluate: the evaluation runs in training mode."""
        parameter = mode_parameter(scope)
        if parameter is None:
            return
        assert scope.function is not None, "mode_parameter names a parameter of a function"
        evaluations = evaluation_calls(ctx.module, scope, parameter)
        if not evaluations:
            return
        calls = list(scope.calls())
        if any(call.method == "eval" for call in calls):
            return
        for switch in calls:
            key = switch.receiver_key
            if switch.method != "train" or key not in scope.params or not _sets_train_mode(switch):
                continue
            if any(condition.test is not None and mentions(scope, condition.test, parameter) for condition in switch.context.conditions):
                continue
            evaluation = evaluations[0]
            passed = _passed_for(evaluation, scope.function, key)
            layers = _layers_of(ctx.summary, passed[0], ctx.module) if passed is not None else None
            if layers is None:
                return
            ctx.report(
                switch.node,
                f"`{shortened(scope.chunk.code_for(switch.node), 50)}` also runs when `{scope.function.name}()` only evaluates: "
                f"`{shortened(evaluation.chunk.code_for(evaluation.node), 50)}` on line {evaluation.chunk.line_of(evaluation.node)} "
                f"leaves `{parameter}` off, so the evaluation runs with dropout on and batch-norm updating its statistics "
                "on evaluation data",
                evidence=[
                    layers,
                    ((switch.chunk, switch.node), "switches to training mode on every call"),
                    ((evaluation.chunk, evaluation.node), "called here to evaluate"),
                ],
                help=f"switch the mode on `{parameter}`: `{key}.train({parameter} is not None)` (or `{key}.train(train)`)",
            )
            return

    def _check_imported_evaluation(self, ctx: RuleContext, scope: ScopeAnalysis, call: CallEvent) -> None:
        """``evaluate(model, val_loader)`` where `evaluate` comes from another file of the workspace."""
        function = call.function
        assert function is not None, "check() passes a call of a function from another file"
        if not _EVALUATION_FUNCTION.search(function.name):
            return
        inner = function.analysis(ctx.summary)
        if inner is None:
            return
        for parameter, forward in _forwards_on_parameters(inner).items():
            passed = _passed_for(call, function, parameter)
            if passed is None:
                continue
            value, text = passed
            layers = _layers_of(ctx.summary, value, ctx.module)
            if layers is None or _switched_to_eval_named(ctx.module, text):
                continue
            ctx.report(
                call.node,
                f"`{shortened(scope.chunk.code_for(call.node), 50)}` evaluates `{text}` in training mode: neither this file nor "
                f"`{function.name}` calls `{text}.eval()`, and it has dropout or batch-norm layers, so the scores are "
                f"computed with dropout on and batch-norm updating its statistics on evaluation data",
                evidence=[
                    layers,
                    ((forward.chunk, function.node.name), f"`{function.name}` is an evaluation function"),
                    ((forward.chunk, forward.node), f"it runs `{parameter}` without `.eval()`"),
                ],
                help=f"call `{text}.eval()` before `{function.name}(...)` (and `{text}.train()` after it)",
            )
            return

    def _report(self, ctx: RuleContext, scope: ScopeAnalysis, call: CallEvent, why: tuple, layers: tuple) -> None:
        key = call.receiver_key or "the model"
        ctx.report(
            call.node,
            f"`{key}` runs an evaluation pass in training mode: nothing in this file calls `{key}.eval()`, and it has "
            f"dropout or batch-norm layers, so the scores are computed with dropout on and batch-norm updating its "
            f"statistics on evaluation data",
            evidence=[why, layers, ((scope.chunk, call.node), "the forward of the evaluation pass")],
            help=f"call `{key}.eval()` before evaluating and `{key}.train()` before training again",
        )


def _runs_a_model(ctx: RuleContext, scope: ScopeAnalysis, call: CallEvent) -> bool:
    """A call of a model: the callee is known to be one, or it is a parameter every call of the function in
    this file passes a model for (``test(model, predictor, ...)``)."""
    assert call.receiver is not None, "check() passes a call on a value"
    if Tag.MODEL in call.receiver.tags:
        return True
    key = call.receiver_key
    if scope.function is None or key not in scope.params:
        return False
    passed = ctx.module.arguments_for(scope.function, key)
    return bool(passed) and all(Tag.MODEL in value.tags for _, value in passed)


def _loaded_in_eval_mode(ctx, scope: ScopeAnalysis, call: CallEvent) -> bool:
    """The model came from a loader that returns it in eval mode (``from_pretrained``) and nothing in the
    file switches it to training mode: it is still in eval mode."""
    assert call.receiver is not None, "check() passes a call on a model"
    values = [call.receiver]
    if call.receiver.detail is None and scope.function is not None and call.receiver_key in scope.params:
        values = [value for _, value in ctx.module.arguments_for(scope.function, call.receiver_key) or []]
    if not values or not all(library_model_facts(value)[0] is not None for value in values):
        return False
    key = (call.receiver_key or "").rpartition(".")[2]
    return not any(
        other.method == "train" and (other.receiver_key or "").rpartition(".")[2] == key for other in ctx.module.all_calls()
    )


def _sets_train_mode(call: CallEvent) -> bool:
    """``model.train()`` or ``model.train(True)``."""
    args = [arg for arg in call.arg_nodes if arg.keyword is None or arg.keyword.value == "mode"]
    return not args or (isinstance(args[0].value, cst.Name) and args[0].value.value == "True")


def _forwards_on_parameters(scope: ScopeAnalysis) -> dict[str, CallEvent]:
    """The first forward of each model parameter of an evaluation function, unless it switches that model to eval."""
    forwards: dict[str, CallEvent] = {}
    switched: set[str] = set()
    for call in scope.calls():
        key = call.receiver_key
        if key is None or key not in scope.params:
            continue
        if call.method == "eval" or (call.method == "train" and call.arg_nodes):
            switched.add(key)
        elif call.method is None and call.receiver is not None and Tag.MODEL in call.receiver.tags:
            forwards.setdefault(key, call)
    return {key: call for key, call in forwards.items() if key not in switched}


def _passed_for(call: CallEvent, function, parameter: str) -> tuple[Value, str | None] | None:
    """The value (and the text) a call passes for one parameter of the function it runs."""
    if parameter in call.kwargs:
        argument = call.keyword(parameter)
        assert argument is not None, "call.kwargs holds the keyword arguments"
        return call.kwargs[parameter], call.chunk.code_for(argument.value)
    params = [p.name.value for p in (*function.node.params.posonly_params, *function.node.params.params)]
    positional = [arg for arg in call.arg_nodes if arg.keyword is None and not arg.star]
    if parameter in params and params.index(parameter) < len(positional) <= len(call.args):
        index = params.index(parameter)
        return call.args[index], call.chunk.code_for(positional[index].value)
    return None


def _evaluation_pass(module: ModuleView, scope: ScopeAnalysis, call: CallEvent) -> tuple | None:
    function = scope.function
    if function is not None and function.owner is None and _EVALUATION_FUNCTION.search(function.name):
        return ((scope.chunk, function.node.name), f"`{function.name}` is an evaluation function")
    if call.context.grad_off is None:
        return _scoring_loop(module, scope, call)
    for loop in reversed(call.context.loops):
        if _EVALUATION_DATA.search(loop.iterable_text):
            return ((scope.chunk, loop.node), f"a no-grad loop over `{loop.iterable_text}`: evaluation data")
    return None


def _scoring_loop(module: ModuleView, scope: ScopeAnalysis, call: CallEvent) -> tuple | None:
    """A loop over held-out data (`test_loader`, `testloader`) that runs the forward with grad on (code
    written before `no_grad`, or that forgot it) and trains nothing, in a file that trains: the loop
    scores the trained model. A loop over such data that backwards or steps is training on it (test-time
    adaptation), and a file that trains nothing may be a feature extractor: both stay quiet."""
    if not module.backward_calls:
        return None
    for loop in reversed(call.context.loops):
        if not isinstance(loop.node, cst.For) or not _names_held_out_data(loop.iterable_text):
            continue
        if any(is_backward(inner) or is_optimizer_step(inner) for inner in calls_in(scope, loop)):
            return None
        trained = module.backward_calls[0]
        return ((scope.chunk, loop.node), f"a loop over `{loop.iterable_text}` that trains nothing: it scores the model "
                f"this file trains (backward on line {trained.chunk.line_of(trained.node)})")
    return None


def _names_held_out_data(text: str) -> bool:
    """`test_loader`, `testloader`, `dataloaders["val"]`: a word of the iterable names held-out data
    (`values`, `device`, `latest` do not)."""
    return any(_HELD_OUT_WORD.fullmatch(word) for word in name_words(text))


def _mode_layers(ctx: RuleContext, scope: ScopeAnalysis, call: CallEvent) -> tuple | None:
    """Where the model's dropout or batch-norm is visible, or None."""
    assert call.receiver is not None, "check() passes a call on a model"
    values = [call.receiver]
    key = call.receiver_key
    if call.receiver.detail is None and scope.function is not None and key in scope.params:
        passed = ctx.module.arguments_for(scope.function, key) or []
        values = [value for _, value in passed]
    for value in values:
        found = _layers_of(ctx.summary, value, ctx.module)
        if found is not None:
            return found
    return None


def _layers_of(summary, value: Value, module: ModuleView) -> tuple | None:
    detail = value.detail
    if isinstance(detail, ClassInfo):
        holder = _class_with_layers(summary, detail, depth=0)
        if holder is None:
            return None
        default = _dropping_torch_layer(summary, holder) if not _MODE_LAYERS.search(holder.chunk.code_for(holder.node)) else None
        if default is not None:
            return ((holder.chunk, holder.node.name), f"`{holder.name}` builds `{default[0]}`, which drops out by default; {default[1]}")
        return ((holder.chunk, holder.node.name), f"`{holder.name}` has dropout or batch-norm layers")
    if isinstance(detail, str):
        _, layers = library_model_facts(value, module)
        return (value.site, layers.says) if layers is not None else None
    if isinstance(detail, tuple) and detail and detail[0] == "sequential" and value.site is not None:
        chunk, node = value.site
        if _MODE_LAYERS.search(chunk.code_for(node)):
            return (value.site, "this `nn.Sequential` has dropout or batch-norm layers")
    return None


def _class_with_layers(summary, info: ClassInfo, depth: int) -> ClassInfo | None:
    code = info.chunk.code_for(info.node)
    if _MODE_LAYERS.search(code) or _dropping_torch_layer(summary, info) is not None:
        return info
    if depth >= 3:
        return None
    for name, other in summary.classes.items():  # local classes it builds or derives from
        if other is not info and re.search(rf"\b{re.escape(name)}\b", code):
            found = _class_with_layers(summary, other, depth + 1)
            if found is not None:
                return found
    return None


def _dropping_torch_layer(summary, info: ClassInfo) -> tuple[str, str] | None:
    """A torch.nn layer the class builds that drops out by default (``nn.TransformerEncoderLayer(512, 8)``,
    whose dropout is 0.1 unless given 0), read in the class's own file, and where PyTorch says so."""
    home = info.home or summary
    for node in walk(info.node):
        if not isinstance(node, cst.Call) or any(arg.star for arg in node.args):  # `**kwargs` may carry the rate
            continue
        raw = dotted(node.func)
        target = home.canonical(raw) if raw is not None else ""
        if not target.startswith("torch.nn."):
            continue
        keyword = next((arg for arg in node.args if arg.keyword is not None and arg.keyword.value == "dropout"), None)
        positional = [_number(arg.value) for arg in node.args if arg.keyword is None]
        source = torch_layer_dropout(last_part(target), _number(keyword.value) if keyword else None, positional, keyword is not None)
        if source is not None:
            return f"nn.{last_part(target)}", source
    return None


def _number(node: cst.BaseExpression) -> float | None:
    if isinstance(node, (cst.Integer, cst.Float)):
        held = literal_value(node)
        return float(held) if isinstance(held, (int, float)) else None
    return None


def _switched_to_eval(module: ModuleView, forward: CallEvent) -> bool:
    return _switched_to_eval_named(module, forward.receiver_key)


def _switched_to_eval_named(module: ModuleView, name: str | None) -> bool:
    """`.eval()`, or `.train(x)` with anything but a literal True, on the same name anywhere in the module."""
    key = (name or "").rpartition(".")[2]
    for call in module.all_calls():
        receiver = (call.receiver_key or (call.callee or "").rpartition(".")[0]).rpartition(".")[2]
        if receiver == key and _sets_eval_mode(call):
            return True
        if call.function is not None and _helper_sets_eval_mode(call, key, module.summary):
            return True  # `set_eval(model)`, `freeze(model)`: a helper that switches what it is given
    return False


def _sets_eval_mode(call: CallEvent) -> bool:
    if call.method == "eval" and not call.arg_nodes:
        return True
    return call.method == "train" and bool(call.arg_nodes) and call.chunk.code_for(call.arg_nodes[0].value) not in {"True", "mode=True"}


def _helper_sets_eval_mode(call: CallEvent, key: str, summary) -> bool:
    """The local function ``call`` runs switches to eval mode the parameter it is passed ``key`` for (any of
    its parameters, when where ``key`` goes cannot be told)."""
    function = call.function
    assert function is not None, "_switched_to_eval_named passes a call of a local function"
    inner = function.analysis(summary)
    if inner is None:
        return False
    switched = {other.receiver_key for other in inner.calls() if _sets_eval_mode(other) and other.receiver_key in inner.params}
    receiving = [
        parameter for parameter in inner.params
        if (passed := _passed_for(call, function, parameter)) is not None and (passed[1] or "").rpartition(".")[2] == key
    ]
    if receiving:
        return any(parameter in switched for parameter in receiving)
    passes_it = any(call.chunk.code_for(arg.value).rpartition(".")[2] == key for arg in call.arg_nodes)
    return passes_it and bool(switched)


MissingEvalMode.MUST_FIRE = (
    Fires(
        """
        import torch
        import torch.nn as nn

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc1 = nn.Linear(784, 256)
                self.drop = nn.Dropout(0.5)
                self.fc2 = nn.Linear(256, 10)

            def forward(self, x):
                return self.fc2(self.drop(torch.relu(self.fc1(x))))

        def evaluate(model, loader):
            correct = 0
            with torch.no_grad():
                for x, y in loader:
                    correct += (model(x).argmax(1) == y).sum().item()
            return correct

        model = Net()
        evaluate(model, val_loader)
        """
    ),
    Fires(
        """
        import torch
        from torchvision import models

        model = models.resnet50(num_classes=10)
        with torch.no_grad():
            for images, labels in val_loader:
                outputs = model(images)
        """
    ),
    Fires(
        """
        import torch
        import torch.nn as nn

        model = nn.Sequential(nn.Linear(20, 64), nn.BatchNorm1d(64), nn.ReLU(), nn.Linear(64, 2))
        with torch.no_grad():
            for x, y in test_loader:
                preds = model(x)
        """
    ),
    Fires(
        """
        import torch
        import torch.nn as nn

        class Block(nn.Module):
            def __init__(self, c):
                super().__init__()
                self.conv = nn.Conv2d(c, c, 3, padding=1)
                self.bn = nn.BatchNorm2d(c)

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.blocks = nn.Sequential(Block(16), Block(16))

        def validate(net, loader):
            for x, y in loader:
                out = net(x)

        net = Net()
        for epoch in range(10):
            validate(net, val_loader)
        """
    ),
    Fires(
        """
        import torch
        from torchvision import models

        def test(model, loader):
            with torch.no_grad():
                return [model(x) for x, _ in loader]

        test(models.vgg16(), test_loader)
        """
    ),
    Fires(
        """
        import torch
        import torch.nn as nn
        import torch.nn.functional as F

        class Net(nn.Module):
            def forward(self, x):
                return F.dropout(x, 0.2, training=self.training)

        model = Net()
        model.train()
        with torch.no_grad():
            for x, y in eval_loader:
                model(x)
        """
    ),
    Fires(  # mode by argument: the shared function switches to training mode for the evaluation call too
        """
        import torch
        import torch.nn as nn

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.features = nn.Sequential(nn.Linear(64, 128), nn.BatchNorm1d(128), nn.ReLU(), nn.Dropout(0.3))
                self.head = nn.Linear(128, 10)

            def forward(self, x):
                return self.head(self.features(x))

        def run_epoch(model, loader, criterion, optimizer=None):
            model.train()
            total = 0.0
            with torch.set_grad_enabled(optimizer is not None):
                for x, y in loader:
                    loss = criterion(model(x), y)
                    if optimizer is not None:
                        optimizer.zero_grad()
                        loss.backward()
                        optimizer.step()
                    total += loss.item()
            return total / len(loader)

        model = Net()
        criterion = nn.CrossEntropyLoss()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for epoch in range(10):
            run_epoch(model, train_loader, criterion, optimizer)
            run_epoch(model, val_loader, criterion)
        """
    ),
    Fires(  # objects: the dropout sits in an nn.ModuleDict attribute; evaluation is a helper the epoch loop calls
        """
        import torch
        from torch import nn

        class Tagger(nn.Module):
            def __init__(self, vocab, tags):
                super().__init__()
                self.parts = nn.ModuleDict({
                    "embed": nn.Embedding(vocab, 64),
                    "drop": nn.Dropout(0.3),
                    "out": nn.Linear(64, tags),
                })

            def forward(self, tokens):
                return self.parts["out"](self.parts["drop"](self.parts["embed"](tokens)))

        def evaluate(model, loader):
            correct = 0
            with torch.no_grad():
                for tokens, tags in loader:
                    correct += (model(tokens).argmax(-1) == tags).sum().item()
            return correct

        def main(train_loader, val_loader):
            model = Tagger(1000, 12)
            optimizer = torch.optim.Adam(model.parameters())
            for epoch in range(5):
                model.train()
                for tokens, tags in train_loader:
                    optimizer.zero_grad()
                    nn.functional.cross_entropy(model(tokens).flatten(0, 1), tags.flatten()).backward()
                    optimizer.step()
                print(evaluate(model, val_loader))
        """
    ),
    Fires(  # a no-grad loop over a dev set, with dropout left on
        """
        import torch
        import torch.nn as nn


        class Classifier(nn.Module):
            def __init__(self, dim, classes):
                super().__init__()
                self.drop = nn.Dropout(0.3)
                self.head = nn.Linear(dim, classes)

            def forward(self, features):
                return self.head(self.drop(features))


        model = Classifier(64, 10).cuda()
        model.load_state_dict(torch.load("classifier.pt"))
        correct = 0
        with torch.no_grad():
            for features, labels in dev_loader:
                logits = model(features.cuda())
                correct += (logits.argmax(-1) == labels.cuda()).sum().item()
        print(correct)
        """,
    ),
    Fires(  # the test function switches the encoder to eval mode, not the link predictor it is also handed
        """
        import torch
        import torch.nn.functional as F


        class LinkPredictor(torch.nn.Module):
            def __init__(self, channels, dropout):
                super().__init__()
                self.hidden = torch.nn.Linear(channels, channels)
                self.out = torch.nn.Linear(channels, 1)
                self.dropout = dropout

            def forward(self, x_i, x_j):
                x = F.relu(self.hidden(x_i * x_j))
                x = F.dropout(x, p=self.dropout, training=self.training)
                return torch.sigmoid(self.out(x))


        @torch.no_grad()
        def test(model, predictor, data, edges):
            model.eval()
            h = model(data.x, data.adj_t)
            return predictor(h[edges[0]], h[edges[1]]).squeeze().cpu()


        def main(model, data, edges, train_step, epochs):
            predictor = LinkPredictor(256, 0.5)
            for epoch in range(epochs):
                train_step(model, predictor)
                print(test(model, predictor, data, edges))
        """,
        at="return predictor(h[edges[0]], h[edges[1]]).squeeze().cpu()",
    ),
    Fires(  # switched to training mode for fine-tuning, then evaluated with BERT's dropout still on
        """
        import torch
        from transformers import AutoModelForSequenceClassification

        model = AutoModelForSequenceClassification.from_pretrained("bert-base-uncased", num_labels=2)
        optimizer = torch.optim.AdamW(model.parameters(), lr=2e-5)


        def evaluate(loader):
            correct = 0
            with torch.no_grad():
                for batch in loader:
                    logits = model(**batch).logits
                    correct += (logits.argmax(-1) == batch["labels"]).sum().item()
            return correct


        for epoch in range(3):
            model.train()
            for batch in train_loader:
                model(**batch).loss.backward()
                optimizer.step()
                optimizer.zero_grad()
            print(evaluate(eval_loader))
        """,
    ),
    Fires(  # FID features from pytorch_fid's Inception network, whose batch-norm runs on batch statistics
        """
        import numpy as np
        import torch
        from pytorch_fid.inception import InceptionV3

        inception = InceptionV3([InceptionV3.BLOCK_INDEX_BY_DIM[2048]]).cuda()


        def evaluate_fid_features(loader):
            features = []
            with torch.no_grad():
                for images in loader:
                    features.append(inception(images.cuda())[0].squeeze(-1).squeeze(-1).cpu().numpy())
            return np.concatenate(features)
        """,
    ),

    Fires(  # written before no_grad existed: the test loop runs with grad on, and scores the model trained above
        """
        import torch
        import torch.nn as nn

        from model import ConvNet

        model = ConvNet(num_classes=10)
        criterion = nn.CrossEntropyLoss()
        optimizer = torch.optim.Adam(model.parameters(), lr=0.001)

        for epoch in range(5):
            for images, labels in train_loader:
                loss = criterion(model(images), labels)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()

        correct = 0
        for images, labels in testloader:
            outputs = model(images)
            correct += (outputs.argmax(1) == labels).sum().item()
        print(correct)
        """,
        files={
            "model.py": """
                import torch.nn as nn


                class ConvNet(nn.Module):
                    def __init__(self, num_classes):
                        super().__init__()
                        self.features = nn.Sequential(nn.Conv2d(1, 16, 5, padding=2), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2))
                        self.fc = nn.Linear(14 * 14 * 16, num_classes)

                    def forward(self, x):
                        return self.fc(self.features(x).flatten(1))
            """,
        },
        at="outputs = model(images)",
    ),
    Fires(  # a trainer class holds a timm model whose stochastic depth comes from the command line's default
        """
        import argparse

        import timm
        import torch
        import torch.nn.functional as F


        class Trainer:
            def __init__(self, args, train_loader, val_loader):
                self.model = timm.create_model(args.arch, num_classes=100, drop_path_rate=args.drop_path).cuda()
                self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=args.lr)
                self.train_loader = train_loader
                self.val_loader = val_loader

            def train_one_epoch(self):
                self.model.train()
                for images, targets in self.train_loader:
                    loss = F.cross_entropy(self.model(images.cuda()), targets.cuda())
                    self.optimizer.zero_grad()
                    loss.backward()
                    self.optimizer.step()

            @torch.no_grad()
            def validate(self):
                correct = 0
                for images, targets in self.val_loader:
                    correct += (self.model(images.cuda()).argmax(1) == targets.cuda()).sum().item()
                return correct


        if __name__ == "__main__":
            parser = argparse.ArgumentParser()
            parser.add_argument("--arch", default="vit_small_patch16_224")
            parser.add_argument("--drop-path", type=float, default=0.1)
            parser.add_argument("--lr", type=float, default=5e-4)
            args = parser.parse_args()
            trainer = Trainer(args, train_loader, val_loader)
            for epoch in range(100):
                trainer.train_one_epoch()
                print(epoch, trainer.validate())
        """,
        at="correct += (self.model(images.cuda()).argmax(1) == targets.cuda()).sum().item()",
    ),
    Fires(  # the model class comes in through a star import of the project's own module
        """
        import torch

        from models import *

        model = SpeechClassifier(n_mels=80, n_classes=35).cuda()
        model.load_state_dict(torch.load("speech.pt"))
        with torch.no_grad():
            for mels, labels in val_loader:
                predictions = model(mels.cuda()).argmax(-1)
        """,
        files={
            "models.py": """
                import torch.nn as nn

                __all__ = ["SpeechClassifier"]


                class SpeechClassifier(nn.Module):
                    def __init__(self, n_mels, n_classes):
                        super().__init__()
                        self.rnn = nn.GRU(n_mels, 256, batch_first=True)
                        self.drop = nn.Dropout(0.2)
                        self.out = nn.Linear(256, n_classes)

                    def forward(self, mels):
                        hidden, _ = self.rnn(mels)
                        return self.out(self.drop(hidden[:, -1]))
            """,
        },
    ),
    Fires(  # PyTorch's transformer layer drops out 0.1 unless told otherwise: the class never says "Dropout"
        """
        import math

        import torch
        import torch.nn.functional as F

        from model import TinyLM


        def evaluate(model, loader):
            total = 0.0
            with torch.no_grad():
                for tokens in loader:
                    logits = model(tokens[:, :-1])
                    total += F.cross_entropy(logits.flatten(0, 1), tokens[:, 1:].flatten()).item()
            return math.exp(total / len(loader))


        model = TinyLM(vocab=32000)
        model.load_state_dict(torch.load("lm.pt"))
        print(evaluate(model, val_loader))
        """,
        files={
            "model.py": """
                import torch.nn as nn


                class TinyLM(nn.Module):
                    def __init__(self, vocab, d_model=256, dropout=None):
                        super().__init__()
                        self.embed = nn.Embedding(vocab, d_model)
                        layer = nn.TransformerEncoderLayer(d_model, nhead=4, batch_first=True)
                        self.encoder = nn.TransformerEncoder(layer, num_layers=4)
                        self.head = nn.Linear(d_model, vocab)

                    def forward(self, tokens):
                        return self.head(self.encoder(self.embed(tokens)))
            """,
        },
    ),
)

MissingEvalMode.MUST_NOT_FIRE = (
    Quiet(  # a model's own decoding method under no_grad: `device=` in its loop is not a dev set, and the caller sets the mode (audiocraft's MAGNeT)
        """
        import math

        import torch
        import torch.nn as nn


        class MaskedLM(nn.Module):
            def __init__(self, dim, vocab):
                super().__init__()
                self.embed = nn.Embedding(vocab, dim)
                self.drop = nn.Dropout(0.1)
                self.head = nn.Linear(dim, vocab)

            def forward(self, tokens):
                return self.head(self.drop(self.embed(tokens)))

            @torch.no_grad()
            def decode(self, tokens, timesteps, mask_id, device):
                model = self
                for timestep in torch.linspace(0, 1, timesteps, device=device):
                    num_masked = max(int(math.cos(timestep.item() * math.pi / 2) * tokens.shape[-1]), 1)
                    scores = model(tokens).max(-1).values
                    tokens = tokens.scatter(1, scores.topk(num_masked, dim=-1).indices, mask_id)
                return tokens
        """
    ),
    Quiet(  # a shape check at the end of a model file: a fresh model on a made-up batch evaluates nothing
        """
        import torch
        import torch.nn as nn


        class VGG(nn.Module):
            def __init__(self, num_classes=10):
                super().__init__()
                self.features = nn.Sequential(nn.Conv2d(3, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU())
                self.classifier = nn.Sequential(nn.Dropout(0.5), nn.Linear(64 * 32 * 32, num_classes))

            def forward(self, x):
                return self.classifier(self.features(x).flatten(1))


        def test():
            net = VGG()
            x = torch.randn(2, 3, 32, 32)
            y = net(x)
            print(y.size())
        """
    ),
    Quiet(
        """
        import torch
        from torchvision import models

        model = models.resnet50()
        model.eval()
        with torch.no_grad():
            for images, labels in val_loader:
                outputs = model(images)
        """
    ),
    Quiet(
        """
        import torch
        import torch.nn as nn

        model = nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 2))
        with torch.no_grad():
            for x, y in val_loader:
                preds = model(x)
        """
    ),
    Quiet(
        """
        import torch
        from torchvision import models

        def evaluate(model, loader):
            model.eval()
            with torch.no_grad():
                for x, y in loader:
                    model(x)
            model.train()

        evaluate(models.resnet18(), val_loader)
        """
    ),
    Quiet(
        """
        import torch
        from torchvision import models

        model = models.resnet18()
        with torch.no_grad():
            for x, y in train_loader:
                features = model(x)
        """
    ),
    Quiet(
        """
        import pytorch_lightning as pl
        import torch.nn as nn

        class Lit(pl.LightningModule):
            def __init__(self):
                super().__init__()
                self.net = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.1))

            def validation_step(self, batch, batch_idx):
                return self.net(batch[0])
        """
    ),
    Quiet(
        """
        import torch
        from torchvision import models

        def set_mode(model, training):
            model.train(training)

        model = models.resnet18()
        set_mode(model, False)
        with torch.no_grad():
            for x, y in val_loader:
                model(x)
        """
    ),
    Quiet(
        """
        import torch
        from torchvision import models

        def freeze(net):
            net.eval()
            for p in net.parameters():
                p.requires_grad_(False)

        model = models.resnet18()
        freeze(model)
        with torch.no_grad():
            for x, y in val_loader:
                model(x)
        """
    ),
    Quiet(
        """
        import torch
        from transformers import AutoModelForSequenceClassification

        model = AutoModelForSequenceClassification.from_pretrained("bert-base-uncased")
        with torch.no_grad():
            for batch in val_loader:
                model(**batch)
        """
    ),
    Quiet(  # the mode follows the argument
        """
        import torch
        import torch.nn as nn

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.body = nn.Sequential(nn.Linear(64, 128), nn.Dropout(0.3), nn.Linear(128, 10))

            def forward(self, x):
                return self.body(x)

        def run_epoch(model, loader, criterion, optimizer=None):
            model.train(optimizer is not None)
            with torch.set_grad_enabled(optimizer is not None):
                for x, y in loader:
                    loss = criterion(model(x), y)
                    if optimizer is not None:
                        optimizer.zero_grad()
                        loss.backward()
                        optimizer.step()

        model = Net()
        criterion = nn.CrossEntropyLoss()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for epoch in range(10):
            run_epoch(model, train_loader, criterion, optimizer)
            run_epoch(model, val_loader, criterion)
        """
    ),
    Quiet(  # timm's ViT has no batch-norm, and its dropout rates default to 0: the mode changes nothing
        """
        import timm
        import torch

        model = timm.create_model("vit_base_patch16_224", num_classes=10)
        model.train()
        with torch.no_grad():
            for images, labels in val_loader:
                model(images)
        """
    ),
    Quiet(  # test-time adaptation: the loop over the test set trains on it (batch-norm statistics adapt on purpose)
        """
        import torch
        import torch.nn.functional as F

        from model import ConvNet

        model = ConvNet(num_classes=10)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.001)
        model.load_state_dict(torch.load("source.pt"))
        for images, _ in test_loader:
            probs = model(images).softmax(1)
            entropy = -(probs * probs.log()).sum(1).mean()
            optimizer.zero_grad()
            entropy.backward()
            optimizer.step()
        """,
        files={
            "model.py": """
                import torch.nn as nn


                class ConvNet(nn.Module):
                    def __init__(self, num_classes):
                        super().__init__()
                        self.features = nn.Sequential(nn.Conv2d(1, 16, 5, padding=2), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2))
                        self.fc = nn.Linear(14 * 14 * 16, num_classes)

                    def forward(self, x):
                        return self.fc(self.features(x).flatten(1))
            """,
        },
    ),
    Quiet(  # the loop is over a dictionary's values, not a validation set, in a file that trains
        """
        import torch
        import torch.nn as nn

        heads = {name: nn.Sequential(nn.Linear(64, 64), nn.Dropout(0.1), nn.Linear(64, 2)) for name in ("a", "b")}
        optimizer = torch.optim.Adam([p for head in heads.values() for p in head.parameters()])
        for x, y in train_loader:
            loss = sum(nn.functional.cross_entropy(head(x), y) for head in heads.values())
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        for head in heads.values():
            print(head(torch.zeros(1, 64)))
        """
    ),
    Quiet(  # the same trainer with stochastic depth off by default: a ViT without dropout computes the same in both modes
        """
        import argparse

        import timm
        import torch
        import torch.nn.functional as F


        class Trainer:
            def __init__(self, args, train_loader, val_loader):
                self.model = timm.create_model(args.arch, num_classes=100, drop_path_rate=args.drop_path).cuda()
                self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=args.lr)
                self.train_loader = train_loader
                self.val_loader = val_loader

            def train_one_epoch(self):
                self.model.train()
                for images, targets in self.train_loader:
                    loss = F.cross_entropy(self.model(images.cuda()), targets.cuda())
                    self.optimizer.zero_grad()
                    loss.backward()
                    self.optimizer.step()

            @torch.no_grad()
            def validate(self):
                correct = 0
                for images, targets in self.val_loader:
                    correct += (self.model(images.cuda()).argmax(1) == targets.cuda()).sum().item()
                return correct


        if __name__ == "__main__":
            parser = argparse.ArgumentParser()
            parser.add_argument("--arch", default="vit_small_patch16_224")
            parser.add_argument("--drop-path", type=float, default=0.0)
            parser.add_argument("--lr", type=float, default=5e-4)
            args = parser.parse_args()
            trainer = Trainer(args, train_loader, val_loader)
            for epoch in range(100):
                trainer.train_one_epoch()
                print(epoch, trainer.validate())
        """
    ),
    Quiet(  # after the star import the file defines its own class of that name, without dropout: that one is built
        """
        import torch
        import torch.nn as nn

        from models import *


        class SpeechClassifier(nn.Module):
            def __init__(self, n_mels, n_classes):
                super().__init__()
                self.out = nn.Linear(n_mels, n_classes)

            def forward(self, mels):
                return self.out(mels.mean(1))


        model = SpeechClassifier(n_mels=80, n_classes=35)
        model.load_state_dict(torch.load("speech.pt"))
        with torch.no_grad():
            for mels, labels in val_loader:
                predictions = model(mels).argmax(-1)
        """,
        files={
            "models.py": """
                import torch.nn as nn

                __all__ = ["SpeechClassifier"]


                class SpeechClassifier(nn.Module):
                    def __init__(self, n_mels, n_classes):
                        super().__init__()
                        self.rnn = nn.GRU(n_mels, 256, batch_first=True)
                        self.drop = nn.Dropout(0.2)
                        self.out = nn.Linear(256, n_classes)

                    def forward(self, mels):
                        hidden, _ = self.rnn(mels)
                        return self.out(self.drop(hidden[:, -1]))
            """,
        },
    ),
    Quiet(  # the transformer layer is built with dropout 0: nothing in the model depends on the mode
        """
        import torch

        from model import TinyLM


        def evaluate(model, loader):
            with torch.no_grad():
                return [model(tokens).argmax(-1) for tokens in loader]


        print(evaluate(TinyLM(vocab=32000), val_loader))
        """,
        files={
            "model.py": """
                import torch.nn as nn


                class TinyLM(nn.Module):
                    def __init__(self, vocab, d_model=256, dropout=None):
                        super().__init__()
                        self.embed = nn.Embedding(vocab, d_model)
                        layer = nn.TransformerEncoderLayer(d_model, nhead=4, dropout=0.0, batch_first=True)
                        self.encoder = nn.TransformerEncoder(layer, num_layers=4)
                        self.head = nn.Linear(d_model, vocab)

                    def forward(self, tokens):
                        return self.head(self.encoder(self.embed(tokens)))
            """,
        },
    ),
    Quiet(  # from_pretrained returned it in eval mode and nothing switches it back
        """
        import torch
        from transformers import BertForSequenceClassification

        model = BertForSequenceClassification.from_pretrained("bert-base-uncased").cuda()


        def predict(loader):
            with torch.no_grad():
                return [model(**batch).logits.argmax(-1).cpu() for batch in loader]
        """
    ),
)
