"""A GPU training script feeds its model from a `DataLoader` with default host-side settings.

Why it costs money: with `num_workers=0` every batch is read, decoded and collated in the
training process, between steps, while the GPU waits; on image or text pipelines that idle
time is often a large share of the step. Without `pin_memory=True` each host-to-device copy
goes through an extra staging copy and cannot overlap with compute (`non_blocking=True` only
helps from pinned memory). Either way you pay for GPU hours the GPU spends waiting.

How to fix: give the loader worker processes (`num_workers=4`, or about the number of CPU
cores per GPU) and `pin_memory=True`; pair the latter with `.to(device, non_blocking=True)`.
This is a note, not a defect: stay at `num_workers=0` on purpose when the dataset already
lives on the GPU, or say `pin_memory=False` to record that you chose it. A loader that only an
evaluation or generation pass walks (no backward in the loops over it) and test suites are left
alone.
"""

from __future__ import annotations

import libcst as cst

from trainlint.rules import (
    UNKNOWN,
    AssignEvent,
    CallEvent,
    Evidence,
    Fires,
    Quiet,
    Rule,
    RuleContext,
    Severity,
    Tag,
    TextEdit,
    calls_in,
    comes_from_call,
    is_backward,
    is_dataloader,
    is_test_file,
    literal_value,
    peeled,
    shortened,
)

# Positions in `DataLoader(dataset, batch_size, shuffle, sampler, batch_sampler, num_workers, collate_fn, pin_memory, ...)`.
_POSITIONS = {"num_workers": 5, "pin_memory": 7}


class DataloaderTuning(Rule):
    code = "TL301"
    name = "dataloader-tuning"
    severity = Severity.NOTE

    def check(self, ctx: RuleContext) -> None:
        if is_test_file(ctx.module.path):
            return  # a test's loader feeds a few tiny batches: its tuning costs nothing
        loaders = [
            call for scope in ctx.scopes for call in scope.calls()
            if call.callee is not None and is_dataloader(call.callee)
        ]
        loaders = [call for call in loaders if _may_want_tuning(call)]
        if not loaders:
            return  # the evidence below locates a backward call, which costs positions; skip it when idle
        training = self._training_evidence(ctx)
        if training is None:
            return
        for call in loaders:
            if not _only_inference_iterates(ctx, call):
                self._check_loader(ctx, call, training)

    @staticmethod
    def _training_evidence(ctx: RuleContext) -> list[Evidence] | None:
        """The CUDA line and what shows the script trains, when it trains on a GPU."""
        module = ctx.module
        if module.cuda_line is None:
            return None
        cuda_text = shortened(module.cuda_line_text, 60)
        backward_line = module.first_backward_line
        if backward_line is not None:
            return [
                Evidence(module.cuda_line, f"runs on CUDA: `{cuda_text}`"),
                Evidence(backward_line, "it trains: backward runs here"),
            ]
        if module.framework_runs_loop is not None:
            return [Evidence(module.cuda_line, f"{module.framework_runs_loop} trains on the GPU: `{cuda_text}`")]
        return None

    def _check_loader(self, ctx: RuleContext, call: CallEvent, training: list[Evidence]) -> None:
        workers = _argument(call, "num_workers")
        no_workers = _without_workers(workers)
        pin = _argument(call, "pin_memory")
        missing, problems, wanted = [], [], []
        if no_workers:
            missing.append("`num_workers`" if workers is None else "`num_workers=0`")
            said = "leaves `num_workers` at its default 0" if workers is None else "sets `num_workers=0`"
            problems.append(f"{said}, so batches are loaded in the training process while the GPU waits")
            wanted.append("`num_workers=<CPU cores per GPU>`")
        fix = None
        if pin is None:
            missing.append("`pin_memory`")
            problems.append("has no `pin_memory=True`, so host-to-device copies are staged and cannot overlap compute")
            wanted.append("`pin_memory=True` (then `.to(device, non_blocking=True)`)")
            if not no_workers:
                # how many workers a machine wants is the user's call: with that missing too, the fix
                # would leave the finding in place, so there is none
                fix = ctx.fix("add `pin_memory=True`", _append_keyword(ctx, call.node, "pin_memory=True"), safe=True)
        loader = " ".join(ctx.chunk.code_for(call.node.func).split())
        message = f"`{loader}(...)` feeds a CUDA training run but " + "; it also ".join(problems)
        evidence = [*training, ((call.chunk, call.node), "the loader, missing " + " and ".join(missing))]
        ctx.report(call.node, message, evidence=evidence, help="pass " + " and ".join(wanted), fix=fix)


def _may_want_tuning(call: CallEvent) -> bool:
    """A loader that leaves a worker count or pinning unset, passes no ``*args``/``**kwargs`` (which may
    set either) and does not slice its batches from GPU tensors (no host work to speed up)."""
    if any(arg.star for arg in call.arg_nodes):
        return False
    if _argument(call, "pin_memory") is not None and not _without_workers(_argument(call, "num_workers")):
        return False
    return Tag.ON_DEVICE not in _dataset_value(call).tags


def _without_workers(workers: cst.Arg | None) -> bool:
    return workers is None or (isinstance(workers.value, cst.Integer) and literal_value(workers.value) == 0)


def _only_inference_iterates(ctx: RuleContext, loader: CallEvent) -> bool:
    """Loops of the function that builds the loader iterate it (under the name it is bound to, through
    `accelerator.prepare` too), and none of them runs a backward: an evaluation or generation pass, whose
    loader does not hold the training back. A loader iterated nowhere in sight stays reported."""
    scope = loader.scope
    names = {target for event in scope.events if isinstance(event, AssignEvent) and event.value_node is loader.node for target in event.targets}
    loops = [
        loop for loop in scope.loops
        if comes_from_call(loop.iterable, loader.node) or (
            isinstance(loop.node, cst.For) and any(isinstance(part, cst.Name) and part.value in names for part in peeled(loop.node.iter))
        )
    ]
    return bool(loops) and not any(is_backward(call) for loop in loops for call in calls_in(scope, loop))


def _argument(call: CallEvent, name: str) -> cst.Arg | None:
    keyword = call.keyword(name)
    if keyword is not None:
        return keyword
    positional = [arg for arg in call.arg_nodes if arg.keyword is None]
    position = _POSITIONS[name]
    return positional[position] if len(positional) > position else None


def _dataset_value(call: CallEvent):
    if call.args and call.arg_nodes and call.arg_nodes[0].keyword is None:
        return call.args[0]
    return call.kwargs.get("dataset", UNKNOWN)


def _append_keyword(ctx: RuleContext, call: cst.Call, keyword: str) -> list[TextEdit]:
    """Add ``keyword`` after the call's last argument, in the layout the call already uses."""
    chunk = ctx.chunk
    last = call.args[-1]
    # read inside the call: the positions of its code alone, not of a 1,000-line main() around it
    first_line = chunk.range_of(call.func, within=call)[2]
    start_line, start_column, end_line, end_column = chunk.range_of(last, within=call)
    comma = last.comma if isinstance(last.comma, cst.Comma) else None
    if start_line == first_line:
        if comma is not None:
            return [ctx.edit_insert_after(comma, f" {keyword},")]
        return [ctx.edit_insert_after(last, f", {keyword}")]
    # One argument per line (or a hanging indent): the new keyword gets its own line, aligned.
    line_text = ctx.module.line(start_line)
    prefix = line_text[: start_column - 1]
    indent = prefix if not prefix.strip() else line_text[: len(line_text) - len(line_text.lstrip())]
    if comma is not None:
        comma_line, _, _, comma_end = chunk.range_of(comma, within=call)
        rest = ctx.module.line(comma_line)[comma_end - 1 :]
        if not rest.strip() or rest.strip().startswith("#"):
            line_end = len(ctx.module.line(comma_line)) + 1
            return [_insert_at(comma_line, line_end, f"\n{indent}{keyword},")]
        return [ctx.edit_insert_after(comma, f" {keyword},")]
    rest = ctx.module.line(end_line)[end_column - 1 :]
    if rest.strip().startswith("#"):
        # keep the comment on the argument it describes: the comma goes before it, the keyword after it
        line_end = len(ctx.module.line(end_line)) + 1
        return [ctx.edit_insert_after(last, ","), _insert_at(end_line, line_end, f"\n{indent}{keyword}")]
    return [ctx.edit_insert_after(last, f",\n{indent}{keyword}")]


def _insert_at(line: int, column: int, text: str) -> TextEdit:
    return TextEdit(line, column, line, column, text)


DataloaderTuning.MUST_FIRE = (
    Fires(
        """
        import torch
        from torch.utils.data import DataLoader

        device = torch.device("cuda")
        loader = DataLoader(train_set, batch_size=64, shuffle=True, num_workers=8)
        for x, y in loader:
            x, y = x.to(device), y.to(device)
            optimizer.zero_grad()
            loss = criterion(model(x), y)
            loss.backward()
            optimizer.step()
        """,
        fixed="""
        import torch
        from torch.utils.data import DataLoader

        device = torch.device("cuda")
        loader = DataLoader(train_set, batch_size=64, shuffle=True, num_workers=8, pin_memory=True)
        for x, y in loader:
            x, y = x.to(device), y.to(device)
            optimizer.zero_grad()
            loss = criterion(model(x), y)
            loss.backward()
            optimizer.step()
        """,
    ),
    Fires(
        """
        import torch

        def build_loaders(train_set, args):
            train_loader = torch.utils.data.DataLoader(
                train_set,
                batch_size=args.batch_size,
                shuffle=True,
                num_workers=args.workers,  # from the command line
            )
            return train_loader

        def train(model, loader, optimizer):
            model.cuda()
            for images, labels in loader:
                loss = torch.nn.functional.cross_entropy(model(images.cuda()), labels.cuda())
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
        """,
        fixed="""
        import torch

        def build_loaders(train_set, args):
            train_loader = torch.utils.data.DataLoader(
                train_set,
                batch_size=args.batch_size,
                shuffle=True,
                num_workers=args.workers,  # from the command line
                pin_memory=True,
            )
            return train_loader

        def train(model, loader, optimizer):
            model.cuda()
            for images, labels in loader:
                loss = torch.nn.functional.cross_entropy(model(images.cuda()), labels.cuda())
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
        """,
    ),
    Fires(
        """
        from torch.utils.data import DataLoader

        val_loader = DataLoader(val_set, batch_size=256,
                                num_workers=4)
        model = model.to("cuda")
        for batch in train_loader:
            model(batch).mean().backward()
        """,
        fixed="""
        from torch.utils.data import DataLoader

        val_loader = DataLoader(val_set, batch_size=256,
                                num_workers=4,
                                pin_memory=True)
        model = model.to("cuda")
        for batch in train_loader:
            model(batch).mean().backward()
        """,
    ),
    Fires(  # both missing: how many workers is the user's call, so no fix that would leave the finding
        """
        import torch
        from torch.utils.data import DataLoader

        def make_loader(dataset, batch_size):
            return DataLoader(dataset, batch_size=batch_size, shuffle=True)

        def train(model, dataset, criterion, optimizer):
            model.cuda()
            for x, y in make_loader(dataset, 32):
                optimizer.zero_grad()
                criterion(model(x.cuda()), y.cuda()).backward()
                optimizer.step()
        """,
        no_fix=True,
    ),
    Fires(
        """
        import torch
        from torch.utils.data import DataLoader

        loader = DataLoader(dataset, batch_size=32, num_workers=0, pin_memory=True)
        model.cuda()
        for x, y in loader:
            loss = criterion(model(x.cuda()), y.cuda())
            loss.backward()
        """,
    ),
    Fires(
        """
        import lightning as L
        from torch.utils.data import DataLoader

        class Data(L.LightningDataModule):
            def train_dataloader(self):
                return DataLoader(self.train_set, batch_size=32, shuffle=True, num_workers=4)

        trainer = L.Trainer(accelerator="gpu", devices=1, max_epochs=10)
        trainer.fit(Model(), datamodule=Data())
        """,
        fixed="""
        import lightning as L
        from torch.utils.data import DataLoader

        class Data(L.LightningDataModule):
            def train_dataloader(self):
                return DataLoader(self.train_set, batch_size=32, shuffle=True, num_workers=4, pin_memory=True)

        trainer = L.Trainer(accelerator="gpu", devices=1, max_epochs=10)
        trainer.fit(Model(), datamodule=Data())
        """,
    ),
    Fires(
        """
        import torch
        from torch.utils.data import DataLoader, TensorDataset

        x_train = torch.load("x.pt")
        y_train = torch.load("y.pt")
        loader = DataLoader(TensorDataset(x_train, y_train), batch_size=128, shuffle=True, num_workers=2,)
        model = Net().cuda()
        for xb, yb in loader:
            loss = loss_fn(model(xb.cuda()), yb.cuda())
            loss.backward()
        """,
        fixed="""
        import torch
        from torch.utils.data import DataLoader, TensorDataset

        x_train = torch.load("x.pt")
        y_train = torch.load("y.pt")
        loader = DataLoader(TensorDataset(x_train, y_train), batch_size=128, shuffle=True, num_workers=2, pin_memory=True,)
        model = Net().cuda()
        for xb, yb in loader:
            loss = loss_fn(model(xb.cuda()), yb.cuda())
            loss.backward()
        """,
    ),
    Fires(
        """
        import torch
        from torch.utils.data import DataLoader

        device = "cuda"
        train_loader = DataLoader(train_set, batch_size=64, shuffle=True, num_workers=4)
        test_loader = DataLoader(test_set, batch_size=64, num_workers=4)
        for x, y in train_loader:
            loss = criterion(model(x.to(device)), y.to(device))
            loss.backward()
        """,
        fixed="""
        import torch
        from torch.utils.data import DataLoader

        device = "cuda"
        train_loader = DataLoader(train_set, batch_size=64, shuffle=True, num_workers=4, pin_memory=True)
        test_loader = DataLoader(test_set, batch_size=64, num_workers=4, pin_memory=True)
        for x, y in train_loader:
            loss = criterion(model(x.to(device)), y.to(device))
            loss.backward()
        """,
        count=2,
    ),
)

DataloaderTuning.MUST_NOT_FIRE = (
    Quiet(  # a loader of prompts that only an inference pass walks: it does not feed the training
        """
        import torch
        from torch.utils.data import DataLoader


        def main(args, accelerator, pipeline, model, train_loader, optimizer):
            sample_dataloader = DataLoader(PromptDataset(args.class_prompt, args.num_class_images), batch_size=4)
            sample_dataloader = accelerator.prepare(sample_dataloader)
            pipeline.to("cuda")
            for example in sample_dataloader:
                for i, image in enumerate(pipeline(example["prompt"]).images):
                    image.save(f"{args.class_dir}/{example['index'][i]}.jpg")
            for batch in train_loader:
                loss = model(**batch).loss
                accelerator.backward(loss)
                optimizer.step()
                optimizer.zero_grad()
        """
    ),
    Quiet(
        """
        import torch
        from torch.utils.data import DataLoader

        loader = DataLoader(train_set, batch_size=64, shuffle=True, num_workers=8, pin_memory=True)
        model.cuda()
        for x, y in loader:
            loss = criterion(model(x.cuda(non_blocking=True)), y.cuda(non_blocking=True))
            loss.backward()
        """
    ),
    Quiet(
        """
        from torch.utils.data import DataLoader

        def make_loader(dataset, **loader_kwargs):
            return DataLoader(dataset, batch_size=32, **loader_kwargs)

        model.to("cuda")
        for x, y in make_loader(train_set, num_workers=4, pin_memory=True):
            criterion(model(x.cuda()), y.cuda()).backward()
        """
    ),
    Quiet(
        """
        import torch
        from torch.utils.data import DataLoader

        # CPU-only smoke test: no GPU anywhere
        loader = DataLoader(train_set, batch_size=8)
        for x, y in loader:
            loss = criterion(model(x), y)
            loss.backward()
            optimizer.step()
        """
    ),
    Quiet(
        """
        import torch
        from torch.utils.data import DataLoader, TensorDataset

        device = torch.device("cuda")
        features = torch.load("features.pt").to(device)
        labels = torch.load("labels.pt").to(device)
        loader = DataLoader(TensorDataset(features, labels), batch_size=1024, shuffle=True)
        for x, y in loader:
            loss = criterion(probe(x), y)
            loss.backward()
        """
    ),
    Quiet(
        """
        import torch
        from torch.utils.data import DataLoader

        loader = DataLoader(train_set, batch_size=64, num_workers=cfg.workers, pin_memory=False)
        for x, y in loader:
            loss = criterion(model(x.cuda()), y.cuda())
            loss.backward()
        """
    ),
    Quiet(
        """
        import torch
        from torch.utils.data import DataLoader

        # inference only: no training step anywhere in the script
        model = model.cuda().eval()
        loader = DataLoader(test_set, batch_size=64)
        with torch.no_grad():
            for x, _ in loader:
                preds = model(x.cuda()).argmax(1)
        """
    ),
    Quiet(
        """
        import torch
        from torch.utils.data import DataLoader

        pin = torch.cuda.is_available()
        loader = DataLoader(train_set, batch_size=64, num_workers=n_workers, pin_memory=pin)
        for x, y in loader:
            criterion(model(x.cuda()), y.cuda()).backward()
        """
    ),
)
