"""A shuffling `DistributedSampler` is used for several epochs without `sampler.set_epoch(epoch)`.

`DistributedSampler` shuffles with a seed derived from its epoch counter, and only
`set_epoch(epoch)` advances that counter. Without it every epoch replays the same permutation:
each rank sees the same samples in the same order, epoch after epoch, so shuffling is gone,
the model overfits to the batch order, and the multi-GPU run generalises worse than the
single-GPU one it replaced. Nothing warns.

The loader is followed where trainer classes put it: into a constructor and out of
`self.<attribute>`, into a method an epoch loop calls, into a fresh `iter(loader)` at the top of
each epoch. torchdata's `StatefulDataLoader` and `StatefulDistributedSampler` (torchtune's
recipes) count as the loader and the sampler they replace.

How to fix: call `sampler.set_epoch(epoch)` at the start of every epoch, before iterating the
loader (`loader.sampler.set_epoch(epoch)` works too).
"""

from __future__ import annotations

import libcst as cst

from trainlint.rules import (
    SAMPLER_DISTRIBUTED,
    AssignEvent,
    CallEvent,
    Fires,
    Loop,
    Quiet,
    Rule,
    ScopeAnalysis,
    Severity,
    TextEdit,
    Value,
    calls_in,
    comes_from_call,
    dotted,
    is_dataloader,
    peeled,
    repeats_per_step,
    written,
)


class MissingSetEpoch(Rule):
    code = "TL502"
    name = "missing-set-epoch"
    severity = Severity.WARNING

    def check(self, ctx) -> None:
        for scope in ctx.scopes:
            for call in scope.calls():
                if _imported_loader_factory(ctx, call):
                    self._check_factory(ctx, scope, call)
                if not _builds_shuffling_sampler(call):
                    continue
                if ctx.module.module_fact("TL502 set_epoch anywhere", _sets_epoch_anywhere):
                    return
                for loader in _loaders_using(ctx.module, call):
                    found = _epoch_loop(ctx.module, loader)
                    if found is not None:
                        self._report(ctx, scope, call, loader, *found)
                        break

    def _check_factory(self, ctx, scope: ScopeAnalysis, factory: CallEvent) -> None:
        """`loader = make_loader(...)` from another file, which builds a shuffling DistributedSampler."""
        loader = factory.result.detail
        assert isinstance(loader, CallEvent), "_imported_loader_factory: the factory returns the DataLoader call"
        sampler = loader.kwargs.get("sampler")
        if sampler is None or SAMPLER_DISTRIBUTED not in sampler.tags or sampler.site is None:
            return
        if not isinstance(sampler.site[1], cst.Call) or not _shuffles(sampler.site[1]):
            return
        if ctx.module.module_fact("TL502 set_epoch anywhere", _sets_epoch_anywhere):
            return
        found = _epoch_loop(ctx.module, loader, built_by=factory)
        if found is None:
            return
        (epoch_scope, epoch_loop), (inner_site, inner_note) = found
        name = _bound_name(scope, factory)
        ctx.report(
            factory.node,
            f"`{written(factory)}` returns a DataLoader with a shuffling `DistributedSampler`, and nothing calls "
            f"`set_epoch`: every epoch of the loop on line {ctx.line_of((epoch_scope.chunk, epoch_loop.node))} "
            f"replays the same order on every rank",
            evidence=[
                (sampler.site, "a shuffling DistributedSampler"),
                ((loader.chunk, loader.node), "the DataLoader that draws from it"),
                (inner_site, inner_note),
                ((epoch_scope.chunk, epoch_loop.node), "the epoch loop, with no `set_epoch`"),
            ],
            help=f"call `{name or 'loader'}.sampler.set_epoch(epoch)` {_where_to_set(epoch_scope, epoch_loop, name)}",
            fix=ctx.fix(
                f"call `{name}.sampler.set_epoch(...)` at the top of the epoch loop",
                [_insert_set_epoch(ctx, epoch_scope, epoch_loop, f"{name}.sampler")], safe=True,
            ) if name else None,
        )

    def _report(self, ctx, scope: ScopeAnalysis, sampler: CallEvent, loader: CallEvent, epoch: tuple, inner: tuple) -> None:
        epoch_scope, epoch_loop = epoch
        inner_site, inner_note = inner
        name = _bound_name(scope, sampler)
        ctx.report(
            sampler.node,
            f"`{written(sampler)}` shuffles with a seed that only `set_epoch` changes, and nothing calls "
            f"`set_epoch`: every epoch of the loop on line {ctx.line_of((epoch_scope.chunk, epoch_loop.node))} "
            f"replays the same order on every rank",
            evidence=[
                ((sampler.chunk, sampler.node), "a shuffling DistributedSampler"),
                ((loader.chunk, loader.node), "the DataLoader that draws from it"),
                (inner_site, inner_note),
                ((epoch_scope.chunk, epoch_loop.node), "the epoch loop, with no `set_epoch`"),
            ],
            help=f"call `{name or 'sampler'}.set_epoch(epoch)` {_where_to_set(epoch_scope, epoch_loop, name)}",
            fix=ctx.fix(
                f"call `{name}.set_epoch(...)` at the top of the epoch loop", [_insert_set_epoch(ctx, epoch_scope, epoch_loop, name)], safe=True,
            ) if name else None,
        )


def _builds_shuffling_sampler(call: CallEvent) -> bool:
    result = call.result
    if SAMPLER_DISTRIBUTED not in result.tags or result.site is None or result.site[1] is not call.node:
        return False
    return _shuffles(call.node)


def _imported_loader_factory(ctx, call: CallEvent) -> bool:
    detail = call.result.detail
    return (
        call.function is not None and ctx.summary.defined_elsewhere(call.function) and isinstance(detail, CallEvent)
        and ctx.in_another_file(detail.chunk) and detail.callee is not None and is_dataloader(detail.callee)
    )


def _shuffles(node: cst.Call) -> bool:
    for arg in node.args:
        if arg.keyword is not None and arg.keyword.value == "shuffle":
            return not (isinstance(arg.value, cst.Name) and arg.value.value == "False")
    return True


def _sets_epoch_anywhere(module) -> bool:
    """A `set_epoch` call in this file, or in a helper of the project's other files that it calls
    (pycls' `data_loader.shuffle(loader, cur_epoch)` sets the sampler's epoch in `loader.py`)."""
    for call in module.all_calls():
        if call.method == "set_epoch":
            return True
        if call.function is not None and module.summary.defined_elsewhere(call.function):
            helper = call.function.analysis(module.summary)
            if helper is not None and any(inner.method == "set_epoch" for inner in calls_in(helper, None)):
                return True
    return False


def _loaders_using(module, sampler: CallEvent) -> list[CallEvent]:
    loaders = []
    for call in module.all_calls():
        if call.callee is not None and is_dataloader(call.callee):
            value = call.kwargs.get("sampler") or call.kwargs.get("batch_sampler")
            if value is not None and value.site is not None and value.site[1] is sampler.node:
                loaders.append(call)
    return loaders


def _iterates(value: Value, loader: CallEvent) -> bool:
    return comes_from_call(value, loader.node, by_site=True)


def _epoch_loop(module, loader: CallEvent, built_by: CallEvent | None = None):
    """((scope, epoch loop), (evidence site, note)) when the loader is iterated once per epoch: by a
    loop inside another loop, or by a loop in a function (or method) that a loop calls. ``built_by``:
    the call of another file's factory that builds ``loader``."""
    built = built_by or loader
    for scope in module.all_scopes:
        if built_by is not None and scope is not built_by.scope and any(call.function is built_by.function for call in scope.calls()):
            continue  # a function with its own call of the factory iterates its own loader
        for call in scope.calls():
            # `batches = iter(loader)` at the top of each epoch, drained by `next(batches)` in an inner loop.
            # A refill under a condition (`except StopIteration: batches = iter(loader)`) sits in a step
            # loop, where a `set_epoch(step)` at the top would be no fix to offer: left alone.
            loop = call.context.loop
            if (
                call.callee == "iter" and call.args and loop is not None and not call.context.conditions_inside(loop)
                and _iterates(call.args[0], loader) and not _builds_one_loader_per_iteration(scope, loop, built)
            ):
                return (scope, loop), ((call.chunk, call.node), "a new iterator over it every epoch")
        for loop in scope.loops:
            handed = _iteration_of(module, scope, loop, loader)
            if handed is None:
                continue
            if loop.parent is not None:
                if not _builds_one_loader_per_iteration(scope, loop.parent, built):
                    return (scope, loop.parent), ((scope.chunk, loop.node), "iterated once per epoch")
                continue
            caller = _called_in_loop(module, scope)
            if caller is not None:
                return (caller.scope, caller.context.loops[-1]), (
                    (caller.chunk, caller.node), f"`{written(caller)}` iterates it once per epoch",
                )
    return None


def _builds_one_loader_per_iteration(scope: ScopeAnalysis, loop: Loop, loader: CallEvent) -> bool:
    """The loader (or the factory call that builds it) is built inside ``loop`` and the loop does not
    train: a loop over configurations or datasets that takes a batch from each new loader (nanotron's
    dataloader tests), not epochs of one. A loader rebuilt every epoch of a training loop still
    replays one order, and still counts."""
    return loader.scope is scope and loop in loader.context.loops and repeats_per_step(scope, loop) is None


def _where_to_set(scope: ScopeAnalysis, loop: Loop, name: str | None) -> str:
    if name is not None and _bound_inside(scope, loop, name):
        return "every epoch, right after it is built"
    return "at the top of the epoch loop"


def _bound_inside(scope: ScopeAnalysis, loop: Loop, name: str) -> bool:
    return any(isinstance(event, AssignEvent) and name in event.targets and loop in event.context.loops for event in scope.events)


def _iteration_of(module, scope: ScopeAnalysis, loop: Loop, loader: CallEvent) -> bool | None:
    """Does ``loop`` iterate ``loader``: directly, through a parameter every caller fills with it, or
    through ``self.<attribute>`` that ``__init__`` takes from the constructor's argument."""
    if _iterates(loop.iterable, loader):
        return True
    if scope.function is None or not isinstance(loop.node, cst.For):
        return None
    for part in peeled(loop.node.iter):
        name = dotted(part)
        if name in scope.params:
            passed = module.arguments_for(scope.function, name) or ()
        elif name is not None and name.startswith("self.") and scope.function.owner is not None:
            passed = module.constructor_arguments(scope.function.owner, name) or ()
        else:
            continue
        if any(_iterates(value, loader) for _, value in passed):
            return True
    return None


def _called_in_loop(module, scope: ScopeAnalysis, depth: int = 0) -> CallEvent | None:
    """A call of ``scope``'s function from inside a loop (through at most two plain calls)."""
    if scope.function is None or depth > 2:
        return None
    for caller in module.calls_of(scope.function):
        if caller.context.loops:
            return caller
        outer = _called_in_loop(module, caller.scope, depth + 1)
        if outer is not None:
            return outer
    return None


def _bound_name(scope: ScopeAnalysis, sampler: CallEvent) -> str | None:
    for event in scope.events:
        if isinstance(event, AssignEvent) and event.value_node is sampler.node and len(event.targets) == 1:
            return event.targets[0]
    return None


def _insert_set_epoch(ctx, scope: ScopeAnalysis, loop: Loop, sampler_name: str) -> TextEdit | None:
    node = loop.node
    if not isinstance(node, cst.For) or not isinstance(node.target, cst.Name) or not isinstance(node.body, cst.IndentedBlock):
        return None
    if _bound_inside(scope, loop, sampler_name.split(".", 1)[0]):
        return None  # built anew each epoch: a line at the top of the loop would name it before it exists
    first = node.body.body[0]
    line, column, _, _ = scope.chunk.range_of(first)
    text = ctx.module.line(line)
    indent = text[: column - 1]
    if indent.strip():
        return None
    return TextEdit(line, 1, line, 1, f"{indent}{sampler_name}.set_epoch({node.target.value})\n")


MissingSetEpoch.MUST_FIRE = (
    Fires(
        """
        from torch.utils.data import DataLoader
        from torch.utils.data.distributed import DistributedSampler

        sampler = DistributedSampler(dataset)
        loader = DataLoader(dataset, batch_size=32, sampler=sampler)
        for epoch in range(epochs):
            for x, y in loader:
                train_step(x, y)
        """,
        fixed="""
        from torch.utils.data import DataLoader
        from torch.utils.data.distributed import DistributedSampler

        sampler = DistributedSampler(dataset)
        loader = DataLoader(dataset, batch_size=32, sampler=sampler)
        for epoch in range(epochs):
            sampler.set_epoch(epoch)
            for x, y in loader:
                train_step(x, y)
        """,
    ),
    Fires(
        """
        from torch.utils.data import DataLoader, DistributedSampler

        def main(dataset, model, epochs):
            train_sampler = DistributedSampler(dataset, shuffle=True)
            train_loader = DataLoader(dataset, batch_size=64, sampler=train_sampler, num_workers=4)
            for epoch in range(epochs):
                model.train()
                for step, (x, y) in enumerate(train_loader):
                    model(x)
        """,
        fixed="""
        from torch.utils.data import DataLoader, DistributedSampler

        def main(dataset, model, epochs):
            train_sampler = DistributedSampler(dataset, shuffle=True)
            train_loader = DataLoader(dataset, batch_size=64, sampler=train_sampler, num_workers=4)
            for epoch in range(epochs):
                train_sampler.set_epoch(epoch)
                model.train()
                for step, (x, y) in enumerate(train_loader):
                    model(x)
        """,
    ),
    Fires(
        """
        from torch.utils.data import DataLoader
        from torch.utils.data.distributed import DistributedSampler

        def train_one_epoch(model, loader):
            for x, y in loader:
                model(x)

        sampler = DistributedSampler(dataset)
        loader = DataLoader(dataset, sampler=sampler)
        for epoch in range(10):
            train_one_epoch(model, loader)
        """,
        fixed="""
        from torch.utils.data import DataLoader
        from torch.utils.data.distributed import DistributedSampler

        def train_one_epoch(model, loader):
            for x, y in loader:
                model(x)

        sampler = DistributedSampler(dataset)
        loader = DataLoader(dataset, sampler=sampler)
        for epoch in range(10):
            sampler.set_epoch(epoch)
            train_one_epoch(model, loader)
        """,
    ),
    Fires(
        """
        import torch

        sampler = torch.utils.data.distributed.DistributedSampler(ds, num_replicas=world, rank=rank)
        loader = torch.utils.data.DataLoader(ds, batch_size=8, sampler=sampler)
        epoch = 0
        while epoch < 5:
            for batch in loader:
                step(batch)
            epoch += 1
        """
    ),
    Fires(
        """
        from torch.utils.data import DataLoader
        from torch.utils.data.distributed import DistributedSampler

        loader = DataLoader(dataset, batch_size=32, sampler=DistributedSampler(dataset))
        for epoch in range(3):
            for x in loader:
                step(x)
        """
    ),
    Fires(
        """
        from torch.utils.data import DataLoader
        from torch.utils.data.distributed import DistributedSampler

        sampler = DistributedSampler(dataset, seed=42)
        loader = DataLoader(dataset, sampler=sampler)
        for epoch in range(start_epoch, total_epochs):
            for i, batch in enumerate(loader):
                step(batch)
        """,
        fixed="""
        from torch.utils.data import DataLoader
        from torch.utils.data.distributed import DistributedSampler

        sampler = DistributedSampler(dataset, seed=42)
        loader = DataLoader(dataset, sampler=sampler)
        for epoch in range(start_epoch, total_epochs):
            sampler.set_epoch(epoch)
            for i, batch in enumerate(loader):
                step(batch)
        """
    ),
    Fires(  # objects: the loader reaches the epoch loop through a Trainer's constructor and attribute
        """
        import torch
        import torch.nn.functional as F
        from torch.utils.data import DataLoader
        from torch.utils.data.distributed import DistributedSampler
        from torch.nn.parallel import DistributedDataParallel as DDP

        class Trainer:
            def __init__(self, model, train_data: DataLoader, optimizer, gpu_id: int):
                self.gpu_id = gpu_id
                self.model = DDP(model.to(gpu_id), device_ids=[gpu_id])
                self.train_data = train_data
                self.optimizer = optimizer

            def _run_batch(self, source, targets):
                self.optimizer.zero_grad()
                F.cross_entropy(self.model(source), targets).backward()
                self.optimizer.step()

            def _run_epoch(self, epoch):
                for source, targets in self.train_data:
                    self._run_batch(source.to(self.gpu_id), targets.to(self.gpu_id))

            def train(self, max_epochs):
                for epoch in range(max_epochs):
                    self._run_epoch(epoch)

        def prepare_dataloader(dataset, batch_size):
            return DataLoader(dataset, batch_size=batch_size, shuffle=False, sampler=DistributedSampler(dataset))

        def main(rank, dataset, model, optimizer, epochs):
            trainer = Trainer(model, prepare_dataloader(dataset, 32), optimizer, rank)
            trainer.train(epochs)
        """
    ),
    Fires(  # objects: a recipe class builds its loader in setup() and drains a fresh iterator every epoch
        """
        from torchdata.stateful_dataloader import StatefulDataLoader
        from torchdata.stateful_dataloader.sampler import StatefulDistributedSampler

        class FinetuneRecipe:
            def setup(self, dataset, world_size, rank):
                self._dataloader = self._setup_data(dataset, world_size, rank)

            def _setup_data(self, dataset, world_size, rank):
                sampler = StatefulDistributedSampler(dataset, num_replicas=world_size, rank=rank, shuffle=True, seed=0)
                return StatefulDataLoader(dataset, batch_size=8, sampler=sampler, drop_last=True)

            def train(self, epochs, steps_per_epoch):
                for curr_epoch in range(epochs):
                    batches = iter(self._dataloader)
                    for _ in range(steps_per_epoch):
                        self._step(next(batches))
        """,
        fixed="""
        from torchdata.stateful_dataloader import StatefulDataLoader
        from torchdata.stateful_dataloader.sampler import StatefulDistributedSampler

        class FinetuneRecipe:
            def setup(self, dataset, world_size, rank):
                self._dataloader = self._setup_data(dataset, world_size, rank)

            def _setup_data(self, dataset, world_size, rank):
                sampler = StatefulDistributedSampler(dataset, num_replicas=world_size, rank=rank, shuffle=True, seed=0)
                return StatefulDataLoader(dataset, batch_size=8, sampler=sampler, drop_last=True)

            def train(self, epochs, steps_per_epoch):
                for curr_epoch in range(epochs):
                    sampler.set_epoch(curr_epoch)
                    batches = iter(self._dataloader)
                    for _ in range(steps_per_epoch):
                        self._step(next(batches))
        """
    ),
    Fires(  # a sampler built anew every epoch starts at epoch 0 each time; no fix: the top of the loop comes before it exists
        """
        import torch.distributed as dist
        from torch.utils.data import DataLoader, DistributedSampler


        def train(model, optimizer, dataset, epochs):
            for epoch in range(epochs):
                sampler = DistributedSampler(dataset, num_replicas=dist.get_world_size(), rank=dist.get_rank(), shuffle=True)
                loader = DataLoader(dataset, batch_size=32, sampler=sampler)
                for inputs, targets in loader:
                    loss = model(inputs, targets)
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
        """,
        no_fix=True,
    ),
    Fires(  # the same through a loader factory of another file
        """
        import torch.distributed as dist

        from data import build_dataloader


        def train(model, optimizer, dataset, epochs):
            for epoch in range(epochs):
                dataloader = build_dataloader(dataset, micro_batch_size=4, rank=dist.get_rank(), world_size=dist.get_world_size())
                for batch in dataloader:
                    loss = model(**batch).loss
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
        """,
        files={"data.py": """
            from torch.utils.data import DataLoader, DistributedSampler


            def build_dataloader(dataset, micro_batch_size, rank, world_size, num_workers=0):
                sampler = DistributedSampler(dataset, num_replicas=world_size, rank=rank, shuffle=True, seed=1234)
                return DataLoader(dataset, batch_size=micro_batch_size, sampler=sampler, num_workers=num_workers, drop_last=True)
        """},
        no_fix=True,
    ),
)

MissingSetEpoch.MUST_NOT_FIRE = (
    Quiet(  # the epoch is set by a helper of another file, which the epoch's function calls first (pycls)
        """
        import vision.datasets.loader as data_loader


        def train_epoch(loader, model, loss_fun, optimizer, cur_epoch):
            data_loader.shuffle(loader, cur_epoch)
            model.train()
            for inputs, labels in loader:
                loss = loss_fun(model(inputs.cuda()), labels.cuda())
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()


        def train_model(dataset, model, loss_fun, optimizer, max_epoch, num_gpus):
            train_loader = data_loader.construct_train_loader(dataset, batch_size=128, num_gpus=num_gpus)
            for cur_epoch in range(max_epoch):
                train_epoch(train_loader, model, loss_fun, optimizer, cur_epoch)
        """,
        files={
            "vision/__init__.py": "",
            "vision/datasets/__init__.py": "",
            "vision/datasets/loader.py": """
                import torch
                from torch.utils.data import DistributedSampler, RandomSampler


                def construct_train_loader(dataset, batch_size, num_gpus):
                    sampler = DistributedSampler(dataset) if num_gpus > 1 else None
                    loader = torch.utils.data.DataLoader(
                        dataset, batch_size=batch_size, shuffle=(False if sampler else True), sampler=sampler, drop_last=True,
                    )
                    return loader


                def shuffle(loader, cur_epoch):
                    assert isinstance(loader.sampler, (RandomSampler, DistributedSampler))
                    if isinstance(loader.sampler, DistributedSampler):
                        loader.sampler.set_epoch(cur_epoch)
            """,
        },
    ),
    Quiet(
        """
        from torch.utils.data import DataLoader
        from torch.utils.data.distributed import DistributedSampler

        sampler = DistributedSampler(dataset)
        loader = DataLoader(dataset, sampler=sampler)
        for epoch in range(epochs):
            sampler.set_epoch(epoch)
            for x, y in loader:
                step(x, y)
        """
    ),
    Quiet(
        """
        from torch.utils.data import DataLoader
        from torch.utils.data.distributed import DistributedSampler

        loader = DataLoader(dataset, sampler=DistributedSampler(dataset))
        for epoch in range(epochs):
            loader.sampler.set_epoch(epoch)
            for x, y in loader:
                step(x, y)
        """
    ),
    Quiet(
        """
        from torch.utils.data import DataLoader
        from torch.utils.data.distributed import DistributedSampler

        val_sampler = DistributedSampler(val_set, shuffle=False)
        val_loader = DataLoader(val_set, sampler=val_sampler)
        for epoch in range(epochs):
            for x, y in val_loader:
                evaluate(x, y)
        """
    ),
    Quiet(
        """
        from torch.utils.data import DataLoader
        from torch.utils.data.distributed import DistributedSampler

        sampler = DistributedSampler(dataset)
        loader = DataLoader(dataset, sampler=sampler)
        for x, y in loader:
            step(x, y)
        """
    ),
    Quiet(
        """
        from torch.utils.data import DataLoader

        loader = DataLoader(dataset, batch_size=32, shuffle=True)
        for epoch in range(epochs):
            for x, y in loader:
                step(x, y)
        """
    ),
    Quiet(
        """
        from torch.utils.data import DataLoader
        from torch.utils.data.distributed import DistributedSampler

        def set_epochs(loaders, epoch):
            for loader in loaders:
                loader.sampler.set_epoch(epoch)

        sampler = DistributedSampler(dataset)
        loader = DataLoader(dataset, sampler=sampler)
        for epoch in range(epochs):
            set_epochs([loader], epoch)
            for x, y in loader:
                step(x, y)
        """
    ),
    Quiet(  # the same Trainer, advancing the sampler's epoch through the loader it holds
        """
        import torch.nn.functional as F
        from torch.utils.data import DataLoader
        from torch.utils.data.distributed import DistributedSampler

        class Trainer:
            def __init__(self, model, train_data, optimizer):
                self.model = model
                self.train_data = train_data
                self.optimizer = optimizer

            def _run_epoch(self, epoch):
                self.train_data.sampler.set_epoch(epoch)
                for source, targets in self.train_data:
                    self.optimizer.zero_grad()
                    F.cross_entropy(self.model(source), targets).backward()
                    self.optimizer.step()

            def train(self, max_epochs):
                for epoch in range(max_epochs):
                    self._run_epoch(epoch)

        def main(dataset, model, optimizer, epochs):
            loader = DataLoader(dataset, batch_size=32, sampler=DistributedSampler(dataset))
            Trainer(model, loader, optimizer).train(epochs)
        """
    ),
    Quiet(  # a loop over configurations takes one batch from each new loader: no epochs (nanotron's dataloader tests)
        """
        import torch.distributed as dist

        from data import build_dataloader
        from datasets_lib import TokenDataset


        def test_build_dataloader(dataset_folders, sequence_length):
            configs = [{"folders": dataset_folders[:1]}, {"folders": dataset_folders, "weights": [8, 2]}]
            for config in configs:
                dataset = TokenDataset(sequence_length=sequence_length, **config)
                dataloader = build_dataloader(dataset, micro_batch_size=4, rank=dist.get_rank(), world_size=dist.get_world_size())
                batch = next(iter(dataloader))
                assert batch["input_ids"].shape == (4, sequence_length)
        """,
        files={"data.py": """
            from torch.utils.data import DataLoader, DistributedSampler


            def build_dataloader(dataset, micro_batch_size, rank, world_size, num_workers=0):
                sampler = DistributedSampler(dataset, num_replicas=world_size, rank=rank, shuffle=True, seed=1234)
                return DataLoader(dataset, batch_size=micro_batch_size, sampler=sampler, num_workers=num_workers, drop_last=True)
        """},
    ),
)
