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
from ..values import Value
from ..model import Severity
from ..patterns import backward_target, calls_in, is_backward, mentions, repeats_per_step
from ..values import CONSTANT, CONTAINER, GRAPH, LOSS, NUMBER, is_known_tensor
from ..tree import literal_value
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
        # The container must outlive a loop that repeats per training or evaluation step: a list of
        # two text encoders' embeddings, or of an image's tiles, is not kept across steps.
        outlived = [loop for loop in reversed(store.context.loops) if store.outlives(loop)]
        if not outlived or _walks_structure(outlived[0]):
            return
        loop, per_step = next(((loop, why) for loop in outlived if (why := repeats_per_step(scope, loop))), (None, None))
        if loop is None:
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
            ((scope.chunk, loop.node), f"the loop it accumulates across, once per step: {per_step}"),
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
        """`.detach()` is safe on a value known to be one tensor, `.item()` on a loss known to be a
        scalar whose running total is only read as a number; a model's output of unknown structure
        gets an unsafe `.detach()`, and a list or tuple of tensors no fix."""
        node, value = store.value_node, store.value
        if CONTAINER in value.tags or value.items is not None:
            return None
        tensor = is_known_tensor(value)
        if _scalar_sink(scope, store):
            return ctx.fix("use `.item()` for the running total", [_append_method(ctx, node, "item")], safe=tensor and _scalar_loss(value))
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value in {"cpu", "to", "numpy"}:
            return ctx.fix("detach before moving to the host", [ctx.edit_insert_after(node.func.value, ".detach()")], safe=tensor)
        return ctx.fix("detach before storing", [_append_method(ctx, node, "detach")], safe=tensor)

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
        Fires(
            """
            import torch

            def train(model, train_loader, optimizer, criterion):
                logged = []
                for step, batch in enumerate(train_loader):
                    outputs = [model(x) for x in batch["views"]]
                    loss = sum(criterion(o, batch["y"]) for o in outputs)
                    loss.backward()
                    optimizer.step()
                    optimizer.zero_grad()
                    logged.append(outputs)
                print(f"kept {len(logged)} steps of outputs")
            """,
            severity=Severity.WARNING,
            no_fix=True,  # a list of tensors has no `.detach()`
        ),
        Fires(
            """
            from transformers import AutoModelForCausalLM

            model = AutoModelForCausalLM.from_pretrained("gpt2")
            kept = []
            for batch in eval_dataloader:
                outputs = model(**batch)
                kept.append(outputs)
            """,
            fixed="""
            from transformers import AutoModelForCausalLM

            model = AutoModelForCausalLM.from_pretrained("gpt2")
            kept = []
            for batch in eval_dataloader:
                outputs = model(**batch)
                kept.append(outputs.detach())
            """,
            unsafe=True,  # a Hugging Face model returns a ModelOutput, which has no `.detach()`
            severity=Severity.ERROR,
        ),
    )

    MUST_NOT_FIRE = (
        Quiet(  # a diffusers pipeline is not an nn.Module and its __call__ runs under no_grad: PIL images
            """
            import torch
            from diffusers import StableDiffusionPipeline

            def log_validation(vae, unet, args, accelerator, weight_dtype, epoch):
                pipeline = StableDiffusionPipeline.from_pretrained(
                    args.pretrained_model_name_or_path, vae=accelerator.unwrap_model(vae),
                    unet=accelerator.unwrap_model(unet), torch_dtype=weight_dtype,
                )
                pipeline = pipeline.to(accelerator.device)
                images = []
                for i in range(len(args.validation_prompts)):
                    with torch.autocast("cuda"):
                        image = pipeline(args.validation_prompts[i], num_inference_steps=20).images[0]
                    images.append(image)
                return images

            def train(unet, vae, train_dataloader, optimizer, args, accelerator, weight_dtype):
                for epoch in range(args.num_train_epochs):
                    for batch in train_dataloader:
                        loss = unet(batch["pixel_values"]).sample.mean()
                        accelerator.backward(loss)
                        optimizer.step()
                        optimizer.zero_grad()
                    log_validation(vae, unet, args, accelerator, weight_dtype, epoch)
            """
        ),
        Quiet(  # two text encoders, each once: the list is concatenated at once and not kept across steps
            """
            import torch

            def encode_prompt(text_encoders, tokenizers, prompt):
                prompt_embeds_list = []
                for tokenizer, text_encoder in zip(tokenizers, text_encoders):
                    ids = tokenizer(prompt, padding="max_length", return_tensors="pt").input_ids
                    prompt_embeds = text_encoder(ids.to(text_encoder.device), output_hidden_states=True)
                    prompt_embeds_list.append(prompt_embeds.hidden_states[-2])
                return torch.concat(prompt_embeds_list, dim=-1)

            def training_step(batch, unet, text_encoders, tokenizers, optimizer):
                embeds = encode_prompt(text_encoders, tokenizers, batch["prompts"])
                unet(batch["latents"], embeds).sample.mean().backward()
                optimizer.step()
            """
        ),
        Quiet(  # a model's tiled decode: the tiles make up this forward's output
            """
            import torch
            import torch.nn as nn

            class TiledDecoder(nn.Module):
                def __init__(self, tile=64):
                    super().__init__()
                    self.tile = tile
                    self.decoder = nn.Conv2d(4, 3, 3, padding=1)

                def forward(self, z):
                    rows = []
                    for i in range(0, z.shape[2], self.tile):
                        row = []
                        for j in range(0, z.shape[3], self.tile):
                            row.append(self.decoder(z[:, :, i : i + self.tile, j : j + self.tile]))
                        rows.append(torch.cat(row, dim=3))
                    return torch.cat(rows, dim=2)
            """
        ),
        Quiet(  # chunks of one tensor, whatever they are called
            """
            import torch

            def encode_in_chunks(motion_encoder, frames, chunk_size):
                face_batches = torch.split(frames, chunk_size)
                encoded = []
                for face_batch in face_batches:
                    encoded.append(motion_encoder(face_batch))
                return torch.cat(encoded)

            def train(motion_encoder, loader, optimizer):
                for frames in loader:
                    encode_in_chunks(motion_encoder, frames, 8).pow(2).mean().backward()
                    optimizer.step()
                    optimizer.zero_grad()
            """
        ),
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
    for event in scope.events:
        if not isinstance(event, CallEvent):
            continue
        if event.receiver_key == store.container:
            return False  # `total.item()`, `total.backward()`: used as a tensor
        called = event.method or (event.callee or "").rpartition(".")[2]
        if called not in _NUMBER_SINKS and any(mentions(scope, arg.value, store.container) for arg in event.arg_nodes):
            return False  # `dist.all_reduce(total)`, `torch.tensor(total)`: a float would not do
    return True


# Calls that read a running total as a number: a float works as well as a tensor there.
_NUMBER_SINKS = frozenset({
    "float", "int", "round", "print", "str", "format", "abs", "max", "min", "append",
    "info", "debug", "warning", "log", "add_scalar", "set_postfix", "set_description", "write",
})


def _scalar_loss(value) -> bool:
    """A loss computed with the default (or a summing) reduction: `.item()` works on it."""
    if LOSS not in value.tags or value.site is None:
        return False
    _, call = value.site
    calls = [call]
    if isinstance(value.detail, Value) and value.detail.site is not None:
        calls.append(value.detail.site[1])  # the criterion's construction: `nn.CrossEntropyLoss(reduction=...)`
    for node in calls:
        if not isinstance(node, cst.Call):
            return False
        for arg in node.args:
            if arg.keyword is not None and arg.keyword.value == "reduction":
                if not (isinstance(arg.value, cst.SimpleString) and literal_value(arg.value) in {"mean", "sum"}):
                    return False
    return True


def _append_method(ctx, node: cst.BaseExpression, method: str):
    simple = isinstance(node, (cst.Name, cst.Attribute, cst.Call, cst.Subscript)) and not node.lpar
    if simple:
        return ctx.edit_insert_after(node, f".{method}()")
    return ctx.edit_replace(node, f"({ctx.chunk.code_for(node).strip()}).{method}()")
