"""Gradients are never cleared in a training loop, so every step applies the sum of all past gradients.

`.backward()` does not overwrite `.grad`, it adds to it. Unless something clears the gradients
each step (`optimizer.zero_grad()`, `model.zero_grad()`, `p.grad = None`), the update at step
k is the sum of the gradients of steps 1..k: the effective learning rate grows every step, the
loss diverges or plateaus, and the run produces a useless checkpoint after the GPU hours are
spent. Nothing crashes, so the bug usually surfaces as "the model does not learn". Lightning
clears gradients for you, except under manual optimisation (`self.automatic_optimization =
False`), where `training_step` must call `opt.zero_grad()` itself.

How to fix: call `optimizer.zero_grad()` (set_to_none is the default) once per optimizer step,
either right before the backward or right after `optimizer.step()`. For gradient accumulation,
clear only when you step (`if (i + 1) % accum == 0: optimizer.step(); optimizer.zero_grad()`).
"""

from __future__ import annotations

import builtins

import libcst as cst

from trainlint.analysis.frameworks import manual_optimization
from trainlint.rules import (
    AssignEvent,
    CallEvent,
    Event,
    Fires,
    Loop,
    Quiet,
    Rule,
    RuleContext,
    Severity,
    Tag,
    Value,
    accumulates_into_grad,
    clears_gradients,
    is_optimizer_step,
    is_test_file,
    is_torch_name,
    ordered_events,
    path_conditions,
    written,
)

_KNOWN_RECEIVERS = frozenset({Tag.SCALER, Tag.ACCELERATOR, Tag.OPTIMIZER, Tag.MODEL, Tag.ENGINE, Tag.CRITERION})

Item = tuple[Event, tuple[CallEvent, ...]]


class MissingZeroGrad(Rule):
    code = "TL201"
    name = "missing-zero-grad"
    severity = Severity.ERROR

    def check(self, ctx: RuleContext) -> None:
        if is_test_file(ctx.module.path):
            return  # a test's mock training runs a few steps to exercise code, not to train a model
        for scope in ctx.scopes:
            if scope.function is not None and manual_optimization(ctx.summary, scope.function.owner):
                self._check_manual_step(ctx, scope)
        if ctx.module.framework_runs_loop is not None:
            return
        for scope in ctx.scopes:
            self._check_scope(ctx, list(ordered_events(scope, None)))

    def _check_manual_step(self, ctx: RuleContext, scope) -> None:
        """Lightning with ``automatic_optimization = False``: ``training_step`` runs once per batch and
        nothing clears the gradients for it; ``manual_backward`` adds to them and ``opt.step()`` applies them."""
        if scope.function.name != "training_step":
            return
        items = list(ordered_events(scope, None))
        backwards = [event for event, _ in items if isinstance(event, CallEvent) and event.method == "manual_backward"]
        steps = [event for event, _ in items if isinstance(event, CallEvent) and is_optimizer_step(event)]
        if not backwards or not steps or any(clears_gradients(event) or _may_clear(event, chain) for event, chain in items):
            return
        backward, step = backwards[0], steps[0]
        ctx.report(
            backward.node,
            f"`{_code(backward)}` adds to `.grad` on every batch and `{_code(step)}` applies it, but with "
            "`automatic_optimization = False` Lightning does not clear gradients and nothing in `training_step` "
            "calls `zero_grad()`: each step applies the sum of every gradient since the start",
            evidence=[
                ((backward.chunk, backward.node), "backward accumulates into `.grad`"),
                ((step.chunk, step.node), "the optimizer step that applies the accumulated gradients"),
                ((scope.chunk, scope.function.node.name), "Lightning calls `training_step` once per batch"),
            ],
            help=f"call `{step.receiver_key or 'opt'}.zero_grad()` after `{_code(step)}` (or before `self.manual_backward(...)`)",
        )

    def _check_scope(self, ctx: RuleContext, items: list[Item]) -> None:
        clearing = [(event, chain) for event, chain in items if clears_gradients(event)]
        if any(_conditional(event, chain) for event, chain in clearing if _clears(event, chain)):
            return  # zeroing on some iterations only: deliberate accumulation
        reported: set[Loop] = set()
        for event, chain in items:
            if not accumulates_into_grad(event) or not _without_inner_loops(event, chain):
                continue
            site = _site(event, chain)
            found = _step_loop(items, site)
            if found is None:
                continue
            loop, in_loop, step = found
            if loop in reported:
                continue
            reported.add(loop)
            if self._quiet(ctx, event, in_loop):
                continue
            self._report(ctx, event, chain, loop, step, clearing)

    @staticmethod
    def _quiet(ctx: RuleContext, backward: CallEvent, in_loop: list[Item]) -> bool:
        steps = [event for event, _ in in_loop if isinstance(event, CallEvent) and is_optimizer_step(event)]
        if any(_is_engine(ctx, call) for call in (backward, *steps)):
            return True  # a DeepSpeed engine's step() zeroes the gradients itself
        if any(_clears(event, chain) for event, chain in in_loop):
            return True
        if any(_fresh_leaves(step, in_loop) for step in steps):
            return True
        return any(_may_clear(event, chain) for event, chain in in_loop)

    def _report(self, ctx: RuleContext, backward: CallEvent, chain, loop: Loop, step: CallEvent, clearing: list[Item]) -> None:
        site = _site(backward, chain)
        loop_line = ctx.line_of((site.chunk, loop.node))
        through = f" (inside `{_code(chain[-1])}`)" if chain else ""
        elsewhere = [
            (event, "only in an exception handler" if loop in _site(event, chain).context.loops else "outside this loop")
            for event, chain in clearing
        ]
        aside = "".join(
            f"; `{_code(event)}` on line {ctx.line_of((event.chunk, event.node))} runs {where}" for event, where in elsewhere[:1]
        )
        message = (
            f"gradients are never cleared in the loop on line {loop_line}: `{_code(backward)}`{through} adds to "
            f"`.grad` every iteration and `{_code(step)}` applies it, but nothing in the loop or in the local "
            f"functions it calls runs `zero_grad()` or sets `p.grad = None`{aside}, so each step applies the sum "
            f"of every gradient since the start"
        )
        evidence = [*(((event.chunk, event.node), f"gradients are cleared here, {where}") for event, where in elsewhere),
            ((backward.chunk, backward.node), "backward accumulates into `.grad`"),
            ((step.chunk, step.node), "the optimizer step that applies the accumulated gradients"),
            ((site.chunk, loop.node), "the loop with no gradient clearing"),
        ]
        if chain:
            evidence.append(((site.chunk, site.node), f"the loop runs the backward through `{_code(site)}`"))
        ctx.report(
            site.node, message, evidence=evidence,
            help="call `optimizer.zero_grad()` once per step, before the backward or right after `optimizer.step()`",
        )


def _site(event: Event, chain: tuple[CallEvent, ...]) -> Event:
    """The event in the scope being checked: the call site when ``event`` runs inside a local function."""
    return chain[0] if chain else event


def _without_inner_loops(event: Event, chain: tuple[CallEvent, ...]) -> bool:
    """No loop of a called function lies between the call site and ``event`` (that function's own check covers it)."""
    return not any(link.context.loops for link in (*chain[1:], event)) if chain else True


def _step_loop(items: list[Item], site: Event) -> tuple[Loop, list[Item], CallEvent] | None:
    """The innermost loop around ``site`` whose iterations also step an optimizer: one training step per iteration.

    A micro-batch loop without a step is skipped, so clearing in the loop that steps is enough.
    """
    for loop in reversed(site.context.loops):
        in_loop = [(event, chain) for event, chain in items if loop in _site(event, chain).context.loops]
        steps = [event for event, _ in in_loop if isinstance(event, CallEvent) and is_optimizer_step(event)]
        if steps:
            return loop, in_loop, steps[0]
    return None


def _fresh_leaves(step: CallEvent, in_loop: list[Item]) -> bool:
    """The stepped optimizer is built in the loop over tensors also created in the loop
    (``x = z.detach().clone(); opt = SGD([x])``): each iteration's gradients land on new leaves."""
    built_here = {key for event, _ in in_loop if isinstance(event, AssignEvent) for key in event.targets}
    for event, _ in in_loop:
        if not isinstance(event, AssignEvent) or step.receiver_key not in event.targets:
            continue
        call = event.value_node
        if not isinstance(call, cst.Call) or not call.args or Tag.OPTIMIZER not in event.value.tags:
            continue
        leaves = call.args[0].value
        if isinstance(leaves, (cst.List, cst.Tuple)) and leaves.elements and all(
            isinstance(element.value, cst.Name) and element.value.value in built_here for element in leaves.elements
        ):
            return True
    return False


def _clears(event: Event, chain: tuple[CallEvent, ...]) -> bool:
    """Gradient clearing on the normal path (an out-of-memory handler that zeroes does not count)."""
    if not clears_gradients(event):
        return False
    return not any(condition.branch == "except" for condition in path_conditions(event, chain, None))


def _conditional(event: Event, chain: tuple[CallEvent, ...]) -> bool:
    return any(condition.branch != "except" for condition in path_conditions(event, chain, None))


def _is_engine(ctx: RuleContext, call: CallEvent) -> bool:
    if call.receiver is not None and Tag.ENGINE in call.receiver.tags:
        return True
    return ctx.module.uses_deepspeed and "engine" in (call.receiver_key or "").lower()


def _may_clear(event: Event, chain: tuple[CallEvent, ...]) -> bool:
    """A call trainlint cannot follow that is handed the optimizer or the model: it may zero them."""
    if not isinstance(event, CallEvent) or event.function is not None or event.method in {"backward", "step"}:
        return False
    if event.callee is not None and (is_torch_name(event.callee) or hasattr(builtins, event.callee)):
        return False
    if event.receiver is not None and event.receiver.tags & _KNOWN_RECEIVERS:
        return False
    if any(value is not None and Tag.PIPELINE in value.tags for value in (event.receiver, event.result)):
        return False  # a diffusers/transformers pipeline is assembled from the models it is handed and runs them without grad
    return any(_handed(value, chain).tags & {Tag.OPTIMIZER, Tag.MODEL} for value in (*event.args, *event.kwargs.values()))


def _handed(value: Value, chain: tuple[CallEvent, ...]) -> Value:
    """A helper's parameter as the loop's call hands it: the argument at the call site. The role a
    parameter's name suggests (`generator`: a GAN's, or a `torch.Generator`?) yields to what it is given."""
    while chain and value.site is not None and isinstance(value.site[1], cst.Param):
        call, chain = chain[-1], chain[:-1]
        function = call.function
        name = value.site[1].name.value
        if function is None or value.site[1] not in _parameters(function.node):
            break
        positional = function.positional_parameters
        if name in call.kwargs:
            value = call.kwargs[name]
        elif name in positional and positional.index(name) < len(call.args) and not any(arg.star for arg in call.arg_nodes):
            value = call.args[positional.index(name)]
        else:
            break
    return value


def _parameters(function: cst.FunctionDef) -> list[cst.Param]:
    params = function.params
    return [*params.posonly_params, *params.params, *params.kwonly_params]


def _code(event: Event, limit: int = 60) -> str:
    return written(event, limit)


MissingZeroGrad.MUST_FIRE = (
    Fires(  # diffusers-style: a nested helper unwraps the model, a pipeline is built from it for validation
        """
        import torch
        from accelerate import Accelerator
        from diffusers import StableDiffusionPipeline, UNet2DConditionModel


        def log_validation(pipeline, prompt, generator):
            return pipeline(prompt, num_inference_steps=20, generator=generator).images


        def main(args):
            accelerator = Accelerator(gradient_accumulation_steps=args.accumulation)
            unet = UNet2DConditionModel.from_pretrained(args.model, subfolder="unet")
            optimizer = torch.optim.AdamW(unet.parameters(), lr=1e-5)
            unet, optimizer, loader = accelerator.prepare(unet, optimizer, make_loader(args))
            generator = torch.Generator(device=accelerator.device).manual_seed(args.seed)

            def unwrap_model(model):
                model = accelerator.unwrap_model(model)
                return model

            for step, batch in enumerate(loader):
                with accelerator.accumulate(unet):
                    loss = unet(batch["latents"], batch["timesteps"], batch["embeddings"]).sample.pow(2).mean()
                    accelerator.backward(loss)
                    optimizer.step()
                if accelerator.sync_gradients and step % args.validation_steps == 0:
                    pipeline = StableDiffusionPipeline.from_pretrained(args.model, unet=unwrap_model(unet))
                    log_validation(pipeline, args.prompt, generator)
        """,
        severity=Severity.ERROR,
    ),
    Fires(
        """
        import torch
        import torch.nn as nn

        model = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 10)).cuda()
        criterion = nn.CrossEntropyLoss()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
        for epoch in range(10):
            for images, labels in train_loader:
                outputs = model(images.cuda())
                loss = criterion(outputs, labels.cuda())
                loss.backward()
                optimizer.step()
        """,
        severity=Severity.ERROR,
    ),
    Fires(
        """
        import torch.nn.functional as F

        def train(model, loader, optimizer, epochs):
            model.train()
            for epoch in range(epochs):
                optimizer.zero_grad()
                for x, y in loader:
                    loss = F.cross_entropy(model(x), y)
                    loss.backward()
                    optimizer.step()
        """
    ),
    Fires(
        """
        import torch
        import torch.nn.functional as F

        def train_amp(model, loader, optimizer):
            scaler = torch.cuda.amp.GradScaler()
            for x, y in loader:
                with torch.autocast("cuda"):
                    loss = F.mse_loss(model(x), y)
                scaler.scale(loss).backward()
                scaler.step(optimizer)
                scaler.update()
        """
    ),
    Fires(
        """
        import torch
        from accelerate import Accelerator

        accelerator = Accelerator()
        model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
        for batch in loader:
            outputs = model(**batch)
            accelerator.backward(outputs.loss)
            optimizer.step()
            lr_scheduler.step()
        """
    ),
    Fires(
        """
        import torch.nn as nn

        criterion = nn.CrossEntropyLoss()

        def train_step(model, optimizer, x, y):
            loss = criterion(model(x), y)
            loss.backward()
            optimizer.step()
            return loss.item()

        def fit(model, optimizer, loader):
            for x, y in loader:
                train_step(model, optimizer, x, y)
        """
    ),
    Fires(
        """
        import torch

        def train(model, loader, optimizer, criterion):
            for x, y in loader:
                try:
                    loss = criterion(model(x), y)
                    loss.backward()
                except torch.cuda.OutOfMemoryError:
                    optimizer.zero_grad()
                    torch.cuda.empty_cache()
                    continue
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
                self.criterion = nn.MSELoss()
                self.optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)

            def fit(self, loader):
                for x, y in loader:
                    loss = self.criterion(self.model(x), y)
                    loss.backward()
                    self.optimizer.step()
        """
    ),
    Fires(  # framework hooks: Lightning manual optimisation clears nothing for you
        """
        import torch
        import lightning as L

        class WGAN(L.LightningModule):
            def __init__(self, generator, critic):
                super().__init__()
                self.automatic_optimization = False
                self.generator = generator
                self.critic = critic

            def training_step(self, batch, batch_idx):
                opt_g, opt_d = self.optimizers()
                fake = self.generator(torch.randn(batch.shape[0], 128, device=self.device))
                d_loss = self.critic(fake.detach()).mean() - self.critic(batch).mean()
                self.manual_backward(d_loss)
                opt_d.step()
                g_loss = -self.critic(fake).mean()
                self.manual_backward(g_loss)
                opt_g.step()

            def configure_optimizers(self):
                return (
                    torch.optim.Adam(self.generator.parameters(), lr=1e-4),
                    torch.optim.Adam(self.critic.parameters(), lr=1e-4),
                )
        """
    ),
    Fires(  # objects: the loop is in one method, the backward and the step in the ones it calls
        """
        import torch

        class SFTRecipe:
            def __init__(self, model, optimizer, loss_fn, steps):
                self.model = model
                self.optimizer = optimizer
                self.loss_fn = loss_fn
                self.steps = steps

            def forward_backward(self, batch):
                loss = self.loss_fn(self.model(batch["tokens"]), batch["labels"])
                loss.backward()
                return loss

            def train_step(self, batch):
                loss = self.forward_backward(batch)
                self.optimizer.step()
                return loss

            def train(self, dataloader):
                self.optimizer.zero_grad()
                for step, batch in enumerate(dataloader):
                    if step >= self.steps:
                        break
                    self.train_step(batch)
        """
    ),
)

MissingZeroGrad.MUST_NOT_FIRE = (
    Quiet(
        """
        import torch.nn.functional as F

        def train(model, loader, optimizer):
            for x, y in loader:
                for p in model.parameters():
                    p.grad = None
                loss = F.cross_entropy(model(x), y)
                loss.backward()
                optimizer.step()
        """
    ),
    Quiet(
        """
        def train(model, loader, optimizer, criterion, accum_steps):
            for i, (x, y) in enumerate(loader):
                loss = criterion(model(x), y) / accum_steps
                loss.backward()
                if (i + 1) % accum_steps == 0:
                    optimizer.step()
                    optimizer.zero_grad()
        """
    ),
    Quiet(
        """
        def train(model, loader, optimizer, criterion):
            for batch in loader:
                optimizer.zero_grad(set_to_none=True)
                micro_batches = zip(batch["x"].chunk(4), batch["y"].chunk(4))
                for x, y in micro_batches:
                    loss = criterion(model(x), y) / 4
                    loss.backward()
                optimizer.step()
        """
    ),
    Quiet(
        """
        import deepspeed

        model_engine, optimizer, train_loader, _ = deepspeed.initialize(
            args=args, model=model, model_parameters=model.parameters(), training_data=dataset
        )
        for step, batch in enumerate(train_loader):
            loss = model_engine(batch)
            model_engine.backward(loss)
            model_engine.step()
        """
    ),
    Quiet(
        """
        from utils import clip_gradient

        def train(model, loader, optimizer, criterion):
            for x, y in loader:
                loss = criterion(model(x), y)
                loss.backward()
                clip_gradient(optimizer, 5.0)
                optimizer.step()
        """
    ),
    Quiet(
        """
        import torch
        import pytorch_lightning as pl

        class Unrolled(pl.LightningModule):
            def __init__(self):
                super().__init__()
                self.automatic_optimization = False
                self.net = torch.nn.Linear(8, 1)

            def training_step(self, batch, batch_idx):
                opt = self.optimizers()
                for x, y in batch:
                    loss = torch.nn.functional.mse_loss(self.net(x), y)
                    loss.backward()
                    opt.step()
        """
    ),
    Quiet(
        """
        from transformers import Trainer

        class ChunkedTrainer(Trainer):
            def training_step(self, model, inputs, num_items_in_batch=None):
                model.train()
                for chunk in self.split_inputs(inputs):
                    loss = self.compute_loss(model, chunk)
                    loss.backward()
                    self.optimizer.step()
                return loss.detach()
        """
    ),
    Quiet(
        """
        import torch.nn as nn

        criterion = nn.CrossEntropyLoss()

        def clear(model):
            for param in model.parameters():
                param.grad = None

        def fit(model, optimizer, loader):
            for x, y in loader:
                loss = criterion(model(x), y)
                loss.backward()
                optimizer.step()
                clear(model)
        """
    ),
    Quiet(
        """
        import torch

        def fit_lbfgs(model, x, y, criterion, steps):
            optimizer = torch.optim.LBFGS(model.parameters())
            for _ in range(steps):
                def closure():
                    optimizer.zero_grad()
                    loss = criterion(model(x), y)
                    loss.backward()
                    return loss
                optimizer.step(closure)
        """
    ),
    Quiet(
        """
        import torch

        class GuidedSampler:
            def refine(self, unet, latents, timesteps, guidance_loss, lr):
                for t in timesteps:
                    x = latents.detach().clone()
                    x.requires_grad = True
                    opt = torch.optim.SGD([x], lr=lr)
                    with torch.enable_grad():
                        guidance_loss(unet(x, t)).backward()
                        opt.step()
                    latents = x.detach()
                return latents
        """
    ),
    Quiet(
        """
        def saliency(model, images):
            maps = []
            for x in images:
                x.requires_grad_(True)
                model(x).max().backward()
                maps.append(x.grad.abs())
            return maps
        """
    ),
    Quiet(  # manual optimisation that clears what it steps
        """
        import torch
        import lightning as L

        class WGAN(L.LightningModule):
            def __init__(self, generator, critic):
                super().__init__()
                self.automatic_optimization = False
                self.generator = generator
                self.critic = critic

            def training_step(self, batch, batch_idx):
                opt_g, opt_d = self.optimizers()
                fake = self.generator(torch.randn(batch.shape[0], 128, device=self.device))
                d_loss = self.critic(fake.detach()).mean() - self.critic(batch).mean()
                opt_d.zero_grad()
                self.manual_backward(d_loss)
                opt_d.step()
                g_loss = -self.critic(fake).mean()
                opt_g.zero_grad()
                self.manual_backward(g_loss)
                opt_g.step()
        """
    ),
    Quiet(  # automatic optimisation: Lightning backwards, steps and clears
        """
        import torch
        import torch.nn.functional as F
        import lightning as L

        class Classifier(L.LightningModule):
            def __init__(self, net):
                super().__init__()
                self.net = net

            def training_step(self, batch, batch_idx):
                x, y = batch
                return F.cross_entropy(self.net(x), y)

            def configure_optimizers(self):
                return torch.optim.AdamW(self.parameters(), lr=1e-3)
        """
    ),
    Quiet(  # Accelerate: the backward goes through the accelerator, the clearing is explicit
        """
        from accelerate import Accelerator

        accelerator = Accelerator(gradient_accumulation_steps=4)
        model, optimizer, train_dataloader = accelerator.prepare(model, optimizer, train_dataloader)
        for batch in train_dataloader:
            with accelerator.accumulate(model):
                loss = model(**batch).loss
                accelerator.backward(loss)
                optimizer.step()
                optimizer.zero_grad()
        """
    ),
)
