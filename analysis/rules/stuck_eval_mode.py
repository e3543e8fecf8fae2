"""The model is switched to eval mode inside the training loop and never switched back.

`model.eval()` turns dropout off and makes batch-norm normalise with its frozen running
statistics. Called for a validation pass inside the epoch loop (directly, or in a
`validate()`/`evaluate()` helper), it stays in force until something calls `model.train()`.
If nothing does, every epoch after the first validation trains without dropout and with
batch-norm statistics that no longer update: the model overfits or converges to something
worse, and nothing in the logs says why. The compute for those epochs is wasted.

How to fix: call `model.train()` at the start of each epoch (or of `train_one_epoch()`), or at
the end of the validation helper, so the next training step always runs in training mode.
"""

from __future__ import annotations

import re
from typing import TypeGuard

import libcst as cst

from trainlint.analysis.torchapi import NO_GRAD_CONTEXTS
from trainlint.rules import (
    AssignEvent,
    CallEvent,
    Event,
    Fires,
    JumpEvent,
    Loop,
    Quiet,
    Rule,
    RuleContext,
    Severity,
    Tag,
    dotted,
    is_backward,
    is_optimizer_step,
    last_part,
    ordered_events,
    written,
)

Item = tuple[int, Event, tuple[CallEvent, ...]]

_WRAPPERS = re.compile(r"^self\.|(?:\.module|\._orig_mod)+$")


class StuckEvalMode(Rule):
    code = "TL205"
    name = "stuck-eval-mode"
    severity = Severity.ERROR

    def check(self, ctx: RuleContext) -> None:
        if ctx.module.framework_runs_loop is not None:
            return
        for scope in ctx.scopes:
            items = [(index, event, chain) for index, (event, chain) in enumerate(ordered_events(scope, None))]
            reported: set[Loop] = set()
            for index, event, chain in items:
                if not _sets_eval(event) or any(link.context.loops for link in (*chain[1:], event) if chain):
                    continue
                key = _outer_key(_receiver_key(event), chain)
                site = chain[0] if chain else event
                found = _training_loop(items, site, key) if key is not None else None
                if found is None or found[0] in reported or _runs_on_last_iteration(event, chain, found[0]):
                    continue
                loop, in_loop, forward = found
                assert key is not None, "a training loop is looked for with a key only"
                step = _next_training_step(in_loop, index, event, chain, loop)
                if step is not None and not _frozen_by_its_class(ctx, forward) and not _parameters_frozen(scope, key):
                    reported.add(loop)
                    self._report(ctx, event, chain, key, loop, step, forward)

    def _report(self, ctx: RuleContext, event: CallEvent, chain, key: str, loop: Loop, step: tuple[Event, bool], forward: CallEvent) -> None:
        site = chain[0] if chain else event
        training_step, wrapped = step
        reached = "called" if len(chain) == 1 else "reached through the call"
        through = f" (in `{_code(chain[-1])}`, {reached} on line {ctx.line_of((site.chunk, site.node))})" if chain else ""
        when = "in the next iteration" if wrapped else "later in the same iteration"
        message = (
            f"`{_code(event)}`{through} puts `{key}` in eval mode inside the loop on line "
            f"{ctx.line_of((site.chunk, loop.node))}, and no `.train()` runs before the next training step, "
            f"`{_code(training_step)}` on line {ctx.line_of((training_step.chunk, training_step.node))} {when}: "
            f"dropout stays off and batch-norm stops updating its statistics for the rest of training"
        )
        evidence = [
            ((event.chunk, event.node), f"`{key}` switched to eval mode"),
            ((forward.chunk, forward.node), f"`{key}` is the model being trained: it runs with grad enabled here"),
            ((training_step.chunk, training_step.node), "the next training step, still in eval mode"),
            ((site.chunk, loop.node), "the training loop"),
        ]
        if chain:
            evidence.append(((site.chunk, site.node), f"the loop calls `{_code(site)}`, which switches to eval mode"))
        placed = site if ctx.in_another_file(event.chunk) else event  # the helper is in another file: its call site
        ctx.report(
            placed.node, message, evidence=evidence, chunk=placed.chunk,
            help=f"call `{key}.train()` at the start of each epoch or training step (or at the end of the evaluation helper)",
        )


def _sets_eval(event: Event) -> TypeGuard[CallEvent]:
    """``m.eval()`` or ``m.train(False)``."""
    if not isinstance(event, CallEvent) or _receiver_key(event) is None:
        return False
    if event.method == "eval":
        return not event.arg_nodes
    return event.method == "train" and _false_mode(event)


def _sets_train(event: Event) -> TypeGuard[CallEvent]:
    """Any ``.train()`` (conditional or not, whatever its receiver), or a helper or method named ``train...`` we
    cannot see, which may call it."""
    if not isinstance(event, CallEvent):
        return False
    if event.method == "train":
        return not _false_mode(event)
    if event.function is None and event.method is not None and event.method.startswith("train"):
        return True  # `discriminator.train_custom()`, a method we cannot see that may switch its layers back
    return event.function is None and event.callee is not None and last_part(event.callee).startswith("train")


def _false_mode(call: CallEvent) -> bool:
    mode = call.keyword("mode") or next((arg for arg in call.arg_nodes if arg.keyword is None), None)
    return mode is not None and isinstance(mode.value, cst.Name) and mode.value.value == "False"


def _receiver_key(call: CallEvent) -> str | None:
    if call.receiver_key is not None:
        return call.receiver_key
    return dotted(call.node.func.value) if isinstance(call.node.func, cst.Attribute) else None


def _outer_key(key: str | None, chain: tuple[CallEvent, ...]) -> str | None:
    """What ``key`` inside the called functions is called at the outermost call site (``net`` → ``model``)."""
    for call in reversed(chain):
        if key is None:
            return None
        root, dot, rest = key.partition(".")
        if root == "self":
            if call.receiver_key != "self":
                return None  # a method of another object: its ``self`` is not ours
            continue
        argument = _argument_for(call, root)
        if argument is not None:
            outer = dotted(argument)
            key = None if outer is None else outer + dot + rest
        elif _binds_locally(call, root):
            return None  # the helper's own model (cleanrl's `evaluate` builds one from a checkpoint), not ours
    return key


def _binds_locally(call: CallEvent, name: str) -> bool:
    """The function ``call`` runs assigns ``name`` itself: a local of its own, not the caller's object."""
    assert call.function is not None, "a call of the chain that ordered_events followed into a local function"
    callee = call.function.analysis(call.scope.summary)
    return callee is not None and any(isinstance(event, AssignEvent) and name in event.targets for event in callee.events)


def _argument_for(call: CallEvent, parameter: str) -> cst.BaseExpression | None:
    """The expression the call passes for ``parameter`` of the local function it runs."""
    assert call.function is not None, "a call of the chain that ordered_events followed into a local function"
    names = call.function.positional_parameters
    for arg in call.arg_nodes:
        if arg.keyword is not None and arg.keyword.value == parameter:
            return arg.value
    positional = [arg for arg in call.arg_nodes if arg.keyword is None and not arg.star]
    if parameter in names and names.index(parameter) < len(positional):
        return positional[names.index(parameter)].value
    return None


def _normalised(key: str) -> str:
    return _WRAPPERS.sub("", key)


def _training_loop(items: list[Item], site: Event, key: str) -> tuple[Loop, list[Item], CallEvent] | None:
    """The innermost loop around ``site`` that trains ``key``: it runs a backward or an optimizer step,
    and a forward of ``key`` with grad enabled."""
    wanted = _normalised(key)
    for loop in reversed(site.context.loops):
        in_loop = [(i, event, chain) for i, event, chain in items if loop in (chain[0] if chain else event).context.loops]
        if not any(_is_training_step(event) for _, event, _ in in_loop):
            continue
        if not any(isinstance(event, CallEvent) and is_optimizer_step(event) for _, event, _ in in_loop):
            return None  # backward without a step: gradients for importance scores or saliency, nothing trains
        forward = next(
            (event for _, event, chain in in_loop if _is_forward(event) and all(link.context.grad_off is None for link in (*chain, event))
             and _normalised(_outer_key(event.receiver_key, chain) or "") == wanted),
            None,
        )
        return (loop, in_loop, forward) if forward is not None else None
    return None


def _frozen_by_its_class(ctx: RuleContext, forward: CallEvent) -> bool:
    """The model is built from a class whose ``forward`` runs entirely without grad (a frozen feature
    extractor: ``with torch.inference_mode(): return self.backbone(x)``): no gradient reaches it, so
    eval mode is where it belongs, and the model being trained is another one (dinov2's linear
    evaluation trains classifiers on such a wrapper's features). Built in the loop's function, or
    passed to it by every call of that function in this file."""
    receiver, function = forward.receiver, forward.scope.function
    if receiver is None or receiver.site is None:
        return False
    if isinstance(receiver.site[1], cst.Call):
        return _constructs_a_frozen_model(ctx, receiver.site[1])
    if not isinstance(receiver.site[1], cst.Param) or function is None:
        return False
    passed = ctx.module.arguments_for(function, receiver.site[1].name.value)
    return bool(passed) and all(value.site is not None and _constructs_a_frozen_model(ctx, value.site[1]) for _, value in passed)


def _parameters_frozen(scope, key: str) -> bool:
    """The function froze the model's parameters before training (``for name, param in
    model.named_parameters(): ... param.requires_grad = False``, or ``model.requires_grad_(False)``):
    the linear-evaluation protocol of MoCo and SimSiam, which keeps the model in eval mode on
    purpose so that batch-norm's statistics of the frozen layers do not move."""
    wanted = _normalised(key)
    for event in scope.events:
        if isinstance(event, CallEvent) and event.method == "requires_grad_" and _normalised(event.receiver_key or "") == wanted:
            if event.arg_nodes and isinstance(event.arg_nodes[0].value, cst.Name) and event.arg_nodes[0].value.value == "False":
                return True
        if not isinstance(event, AssignEvent) or len(event.targets) != 1 or not event.targets[0].endswith(".requires_grad"):
            continue
        if not (isinstance(event.value_node, cst.Name) and event.value_node.value == "False"):
            continue
        parameter = event.targets[0][: -len(".requires_grad")]
        if any(
            parameter in loop.targets and re.match(rf"{re.escape(key)}\.(?:named_)?parameters\(", loop.iterable_text)
            for loop in event.context.loops
        ):
            return True
    return False


def _constructs_a_frozen_model(ctx: RuleContext, expression: cst.CSTNode | None) -> bool:
    if not isinstance(expression, cst.Call):
        return False
    name = dotted(expression.func)
    info = ctx.summary.local_class(ctx.summary.canonical(name)) if name else None
    forward = info.methods.get("forward") if info is not None else None
    scope = forward.analysis(ctx.summary) if forward is not None else None
    if scope is None:
        return False
    calls = list(scope.calls())
    under_no_grad = [call for call in calls if call.context.grad_off is not None]
    # the with-statement's own `torch.inference_mode()` is called before grad is off
    return bool(under_no_grad) and all(call.context.grad_off is not None or _is_no_grad_context(ctx, call) for call in calls)


def _is_no_grad_context(ctx: RuleContext, call: CallEvent) -> bool:
    return call.callee is not None and last_part(call.callee) in NO_GRAD_CONTEXTS and call.callee.startswith("torch.")


def _is_forward(event: Event) -> TypeGuard[CallEvent]:
    if not isinstance(event, CallEvent) or event.receiver_key is None or event.function is not None:
        return False
    if event.receiver is not None and Tag.CRITERION in event.receiver.tags:
        return False
    return event.method is None or (event.method == "forward" and event.receiver is not None and Tag.MODEL in event.receiver.tags)


def _is_training_step(event: Event) -> TypeGuard[CallEvent]:
    return isinstance(event, CallEvent) and (
        (is_backward(event) and event.callee != "torch.autograd.grad") or is_optimizer_step(event)
    )


def _runs_on_last_iteration(event: Event, chain, loop: Loop) -> bool:
    """Under ``if epoch == epochs - 1``: an equality test picks out single iterations, often the last one."""
    first, *rest = (*chain, event)
    guarded = [(first.chunk, c) for c in first.context.conditions_inside(loop)]
    guarded += [(link.chunk, c) for link in rest for c in link.context.conditions]
    return any(
        condition.branch == "if" and isinstance(condition.test, cst.Comparison)
        and any(isinstance(target.operator, cst.Equal) for target in condition.test.comparisons)
        and "%" not in chunk.code_for(condition.test)
        for chunk, condition in guarded
    )


def _next_training_step(in_loop: list[Item], index: int, eval_call: CallEvent, chain, loop: Loop) -> tuple[Event, bool] | None:
    """The training step that runs next after ``eval_call``, reading on to the end of the loop body and
    wrapping round to its start; None when a ``.train()`` or a way out of the loop comes first."""
    site = chain[0] if chain else eval_call
    site_conditions = site.context.conditions_inside(loop)
    after = [(item, False) for item in in_loop if item[0] > index]
    before = [(item, True) for item in in_loop if item[0] < index]
    for (_, event, event_chain), wrapped in (*after, *before):
        if _sets_train(event):
            return None
        if not wrapped and not event_chain and _leaves_loop(event, loop, site_conditions):
            return None
        if _is_training_step(event):
            return event, wrapped
    return None


def _leaves_loop(event: Event, loop: Loop, site_conditions) -> bool:
    """A ``break``/``return``/``raise`` that runs whenever the eval call ran: no next iteration follows."""
    if not isinstance(event, JumpEvent) or event.kind == "continue":
        return False
    if event.kind == "break" and event.context.loop is not loop:
        return False
    return all(condition in site_conditions for condition in event.context.conditions_inside(loop))


def _code(event: Event, limit: int = 60) -> str:
    return written(event, limit)


StuckEvalMode.MUST_FIRE = (
    Fires(  # the wrapper's forward runs with grad: the backbone is fine-tuned, and stays in eval mode
        """
        import torch
        import torch.nn.functional as F

        from features import Features, evaluate


        def fine_tune(*, feature_model, classifier, train_loader, val_loader, optimizer, eval_every):
            for step, (images, labels) in enumerate(train_loader):
                features = feature_model(images.cuda(non_blocking=True))
                loss = F.cross_entropy(classifier(features), labels.cuda(non_blocking=True))
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                if (step + 1) % eval_every == 0:
                    evaluate(feature_model, classifier, val_loader)
            return classifier


        def run_fine_tuning(backbone, train_loader, val_loader, num_classes, eval_every=1250):
            feature_model = Features(backbone)
            classifier = torch.nn.Linear(backbone.embed_dim, num_classes).cuda()
            params = [*feature_model.parameters(), *classifier.parameters()]
            optimizer = torch.optim.SGD(params, lr=1e-3, momentum=0.9)
            return fine_tune(
                feature_model=feature_model, classifier=classifier, train_loader=train_loader,
                val_loader=val_loader, optimizer=optimizer, eval_every=eval_every,
            )
        """,
        files={
            "features.py": """
                import torch


                class Features(torch.nn.Module):
                    def __init__(self, backbone):
                        super().__init__()
                        self.backbone = backbone

                    def forward(self, images):
                        return self.backbone(images)


                @torch.inference_mode()
                def evaluate(feature_model, classifier, loader):
                    feature_model.eval()
                    return [classifier(feature_model(images.cuda())).argmax(1) for images, _ in loader]
            """,
        },
        at="evaluate(feature_model, classifier, val_loader)",
    ),
    Fires(
        """
        import torch
        import torch.nn as nn
        from torchvision.models import resnet18

        model = resnet18(num_classes=10).cuda()
        criterion = nn.CrossEntropyLoss()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        model.train()
        for epoch in range(90):
            for images, labels in train_loader:
                optimizer.zero_grad()
                loss = criterion(model(images.cuda()), labels.cuda())
                loss.backward()
                optimizer.step()
            model.eval()
            correct = 0
            with torch.no_grad():
                for images, labels in val_loader:
                    correct += (model(images.cuda()).argmax(1) == labels.cuda()).sum().item()
            print(epoch, correct)
        """,
        severity=Severity.ERROR,
    ),
    Fires(
        """
        import torch
        import torch.nn.functional as F

        @torch.no_grad()
        def validate(model, loader):
            model.eval()
            losses = [F.cross_entropy(model(x), y).item() for x, y in loader]
            return sum(losses) / len(losses)

        def fit(model, optimizer, train_loader, val_loader, epochs):
            model.train()
            for epoch in range(epochs):
                for x, y in train_loader:
                    optimizer.zero_grad()
                    F.cross_entropy(model(x), y).backward()
                    optimizer.step()
                print(epoch, validate(model, val_loader))
        """
    ),
    Fires(
        """
        import torch

        def evaluate(net, loader):
            net.eval()
            with torch.no_grad():
                return sum(net(x).sum().item() for x, _ in loader)

        def train(model, optimizer, criterion, train_loader, val_loader, eval_every):
            for epoch in range(10):
                model.train()
                for step, (x, y) in enumerate(train_loader):
                    optimizer.zero_grad()
                    criterion(model(x), y).backward()
                    optimizer.step()
                    if step % eval_every == 0:
                        evaluate(model, val_loader)
        """
    ),
    Fires(
        """
        import torch
        import torch.nn as nn

        class Trainer:
            def __init__(self, model, loader, val_loader):
                self.model = model
                self.loader = loader
                self.val_loader = val_loader
                self.criterion = nn.CrossEntropyLoss()
                self.optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)

            def train_epoch(self):
                for x, y in self.loader:
                    self.optimizer.zero_grad()
                    self.criterion(self.model(x), y).backward()
                    self.optimizer.step()

            @torch.no_grad()
            def validate(self):
                self.model.eval()
                return [self.model(x) for x, _ in self.val_loader]

            def fit(self, epochs):
                self.model.train()
                for epoch in range(epochs):
                    self.train_epoch()
                    self.validate()
        """
    ),
    Fires(
        """
        import torch.nn.functional as F

        def run(model, optimizer, batches, probe):
            for step, (x, y) in enumerate(batches):
                loss = F.mse_loss(model(x), y)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                if step % 500 == 0:
                    model.train(False)
                    probe(model)
        """
    ),
    Fires(
        """
        import torch
        from torch.nn.parallel import DistributedDataParallel as DDP

        def main(model, optimizer, loader, val_loader, criterion, epochs):
            model = DDP(model.cuda())
            for epoch in range(epochs):
                loader.sampler.set_epoch(epoch)
                for x, y in loader:
                    optimizer.zero_grad()
                    criterion(model(x), y).backward()
                    optimizer.step()
                model.module.eval()
                with torch.no_grad():
                    accuracy = sum((model(x).argmax(1) == y).sum().item() for x, y in val_loader)
        """
    ),
    Fires(
        """
        import torch
        from transformers import AutoModelForSequenceClassification

        model = AutoModelForSequenceClassification.from_pretrained("bert-base-uncased", num_labels=2)
        optimizer = torch.optim.AdamW(model.parameters(), lr=2e-5)
        for epoch in range(3):
            for batch in train_dataloader:
                outputs = model(**batch)
                outputs.loss.backward()
                optimizer.step()
                optimizer.zero_grad()
            model.eval()
            for batch in eval_dataloader:
                with torch.no_grad():
                    logits = model(**batch).logits
        """
    ),
)

StuckEvalMode.MUST_NOT_FIRE = (
    Quiet(  # the evaluation helper builds its own model from the checkpoint and puts that one in eval mode (cleanrl)
        """
        import torch
        import torch.nn as nn
        import torch.nn.functional as F

        from utils.evals import evaluate


        class QNetwork(nn.Module):
            def __init__(self, envs):
                super().__init__()
                self.network = nn.Sequential(nn.Linear(4, 120), nn.ReLU(), nn.Dropout(0.1), nn.Linear(120, 2))

            def forward(self, x):
                return self.network(x)


        def train(envs, make_env, replay_buffer, total_steps, device):
            model = QNetwork(envs).to(device)
            optimizer = torch.optim.Adam(model.parameters(), lr=2.5e-4)
            for global_step in range(total_steps):
                data = replay_buffer.sample(32)
                loss = F.mse_loss(model(data.observations).gather(1, data.actions).squeeze(), data.returns)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                if global_step % 100_000 == 0:
                    torch.save(model.state_dict(), "model.pt")
                    evaluate("model.pt", make_env, eval_episodes=10, Model=QNetwork, device=device)
        """,
        files={
            "utils/__init__.py": "",
            "utils/evals.py": """
                import torch


                def evaluate(model_path, make_env, eval_episodes, Model: torch.nn.Module, device=torch.device("cpu")):
                    envs = make_env()
                    model = Model(envs).to(device)
                    model.load_state_dict(torch.load(model_path, map_location=device))
                    model.eval()
                    returns = []
                    obs = envs.reset()
                    while len(returns) < eval_episodes:
                        with torch.no_grad():
                            actions = model(torch.as_tensor(obs, device=device)).argmax(dim=1)
                        obs, reward, done = envs.step(actions.cpu().numpy())
                        if done:
                            returns.append(reward)
                    return returns
            """,
        },
    ),
    Quiet(  # gradients without a step: head importance scores, computed in eval mode on purpose
        """
        import torch


        def compute_heads_importance(model, eval_dataloader, num_layers, num_heads, device):
            head_importance = torch.zeros(num_layers, num_heads, device=device)
            head_mask = torch.ones(num_layers, num_heads, device=device, requires_grad=True)
            for batch in eval_dataloader:
                model.eval()
                outputs = model(**{k: v.to(device) for k, v in batch.items()}, head_mask=head_mask)
                outputs.loss.backward()
                head_importance += head_mask.grad.abs().detach()
                head_mask.grad = None
            return head_importance
        """
    ),
    Quiet(  # the model's own method switches its trainable head back (PPLM's discriminator)
        """
        import torch


        class Discriminator(torch.nn.Module):
            def __init__(self, encoder, class_size):
                super().__init__()
                self.encoder = encoder
                self.classifier_head = torch.nn.Linear(encoder.config.hidden_size, class_size)

            def train_custom(self):
                for param in self.encoder.parameters():
                    param.requires_grad = False
                self.classifier_head.train()

            def forward(self, x):
                hidden = self.encoder(x).last_hidden_state.mean(dim=1)
                return torch.nn.functional.log_softmax(self.classifier_head(hidden), dim=-1)


        def train_epoch(data_loader, discriminator, optimizer):
            discriminator.train_custom()
            for input_t, target_t in data_loader:
                optimizer.zero_grad()
                torch.nn.functional.nll_loss(discriminator(input_t), target_t).backward()
                optimizer.step()


        def evaluate_performance(data_loader, discriminator):
            discriminator.eval()
            with torch.no_grad():
                return sum((discriminator(x).argmax(1) == y).sum().item() for x, y in data_loader)


        def train_discriminator(discriminator, train_loader, test_loader, optimizer, epochs):
            for epoch in range(epochs):
                train_epoch(train_loader, discriminator, optimizer)
                evaluate_performance(test_loader, discriminator)
        """
    ),
    Quiet(  # linear evaluation of frozen features: eval mode on purpose, all but the classifier frozen
        """
        import torch
        import torchvision.models as models


        def train(train_loader, model, criterion, optimizer):
            # the frozen backbone's batch-norm statistics must not move: eval mode, on purpose
            model.eval()
            for images, target in train_loader:
                loss = criterion(model(images.cuda(non_blocking=True)), target.cuda(non_blocking=True))
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()


        def main_worker(args, train_loader):
            model = models.resnet50(num_classes=1000)
            for name, param in model.named_parameters():
                if name not in ["fc.weight", "fc.bias"]:
                    param.requires_grad = False
            model = model.cuda()
            parameters = [p for p in model.parameters() if p.requires_grad]
            optimizer = torch.optim.SGD(parameters, lr=args.lr, momentum=0.9)
            criterion = torch.nn.CrossEntropyLoss().cuda()
            for epoch in range(args.epochs):
                train(train_loader, model, criterion, optimizer)
        """
    ),
    Quiet(  # the model put in eval mode is a frozen feature extractor: its forward runs without grad
        """
        import torch
        import torch.nn.functional as F

        from features import FrozenFeatures, evaluate


        def train_linear_probe(*, feature_model, classifier, train_loader, val_loader, optimizer, eval_every):
            for step, (images, labels) in enumerate(train_loader):
                features = feature_model(images.cuda(non_blocking=True))
                loss = F.cross_entropy(classifier(features), labels.cuda(non_blocking=True))
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                if (step + 1) % eval_every == 0:
                    evaluate(feature_model, classifier, val_loader)
            return classifier


        def run_linear_probe(backbone, train_loader, val_loader, num_classes, eval_every=1250):
            feature_model = FrozenFeatures(backbone)
            classifier = torch.nn.Linear(backbone.embed_dim, num_classes).cuda()
            optimizer = torch.optim.SGD(classifier.parameters(), lr=1e-3, momentum=0.9)
            return train_linear_probe(
                feature_model=feature_model, classifier=classifier, train_loader=train_loader,
                val_loader=val_loader, optimizer=optimizer, eval_every=eval_every,
            )
        """,
        files={
            "features.py": """
                import torch


                class FrozenFeatures(torch.nn.Module):
                    def __init__(self, backbone):
                        super().__init__()
                        self.backbone = backbone
                        self.backbone.eval()

                    def forward(self, images):
                        with torch.inference_mode():
                            features = self.backbone(images)
                        return features


                @torch.inference_mode()
                def evaluate(feature_model, classifier, loader):
                    feature_model.eval()
                    return [classifier(feature_model(images.cuda())).argmax(1) for images, _ in loader]
            """,
        },
    ),
    Quiet(
        """
        import torch
        import torch.nn.functional as F

        def train_one_epoch(model, loader, optimizer):
            model.train()
            for x, y in loader:
                optimizer.zero_grad()
                F.cross_entropy(model(x), y).backward()
                optimizer.step()

        @torch.no_grad()
        def validate(model, loader):
            model.eval()
            return sum(F.cross_entropy(model(x), y).item() for x, y in loader)

        def fit(model, optimizer, train_loader, val_loader, epochs):
            for epoch in range(epochs):
                train_one_epoch(model, train_loader, optimizer)
                validate(model, val_loader)
        """
    ),
    Quiet(
        """
        import torch

        def evaluate(model, loader):
            model.eval()
            with torch.no_grad():
                score = sum(model(x).sum().item() for x in loader)
            model.train()
            return score

        def train(model, optimizer, criterion, loader, val_loader):
            model.train()
            for step, (x, y) in enumerate(loader):
                optimizer.zero_grad()
                criterion(model(x), y).backward()
                optimizer.step()
                if step % 1000 == 0:
                    evaluate(model, val_loader)
        """
    ),
    Quiet(
        """
        import torch

        def train(model, optimizer, criterion, loader, val_loader, args):
            for epoch in range(args.epochs):
                if not args.frozen_bn:
                    model.train()
                for x, y in loader:
                    optimizer.zero_grad()
                    criterion(model(x), y).backward()
                    optimizer.step()
                model.eval()
                with torch.no_grad():
                    val = [model(x) for x, _ in val_loader]
        """
    ),
    Quiet(
        """
        from engine import train_one_epoch, evaluate

        def main(model, optimizer, loader, val_loader, epochs):
            for epoch in range(epochs):
                train_one_epoch(model, optimizer, loader, epoch)
                model.eval()
                evaluate(model, val_loader)
        """
    ),
    Quiet(
        """
        import torch
        import lightning as L

        class LitClassifier(L.LightningModule):
            def __init__(self, net):
                super().__init__()
                self.net = net

            def training_step(self, batch, batch_idx):
                x, y = batch
                return torch.nn.functional.cross_entropy(self.net(x), y)

            def fit_probe(self, loader, optimizer):
                for x, y in loader:
                    optimizer.zero_grad()
                    torch.nn.functional.cross_entropy(self.net(x), y).backward()
                    optimizer.step()
                    self.net.eval()
        """
    ),
    Quiet(
        """
        import torch
        import torch.nn.functional as F

        def distill(student, teacher, optimizer, loader, temperature):
            student.train()
            for x, _ in loader:
                teacher.eval()
                with torch.no_grad():
                    target = F.softmax(teacher(x) / temperature, dim=-1)
                loss = F.kl_div(F.log_softmax(student(x) / temperature, dim=-1), target, reduction="batchmean")
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
        """
    ),
    Quiet(
        """
        import torch

        def train(model, optimizer, criterion, loader, val_loader, max_steps):
            model.train()
            for step, (x, y) in enumerate(loader):
                optimizer.zero_grad()
                criterion(model(x), y).backward()
                optimizer.step()
                if step + 1 >= max_steps:
                    model.eval()
                    with torch.no_grad():
                        print([model(v).mean().item() for v, _ in val_loader])
                    break
        """
    ),
    Quiet(
        """
        import torch

        def train(model, optimizer, criterion, loader, test_loader, epochs):
            model.train()
            for epoch in range(epochs):
                for x, y in loader:
                    optimizer.zero_grad()
                    criterion(model(x), y).backward()
                    optimizer.step()
                if epoch == epochs - 1:
                    model.eval()
                    with torch.no_grad():
                        print([model(x).argmax(1) for x, _ in test_loader])
        """
    ),
    Quiet(
        """
        import torch

        def train(model, optimizer, criterion, loader, val_loader, epochs):
            for epoch in range(epochs):
                model.eval()
                with torch.no_grad():
                    before = [model(x) for x, _ in val_loader]
                model.train()
                for x, y in loader:
                    optimizer.zero_grad()
                    criterion(model(x), y).backward()
                    optimizer.step()
        """
    ),
)
