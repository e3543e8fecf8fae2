"""A model is trained with DistributedDataParallel/FSDP, but its DataLoader gives every rank the whole dataset.

DDP does not split the data: each process builds its own DataLoader, and without a
`DistributedSampler` (or some other per-rank split) every one of them iterates the full
dataset. With the same seed they even draw the same batches in the same order, so the
gradients DDP averages are copies of one another.

Why it costs money: eight GPUs do the work of one. Each epoch takes as long as on a single
GPU (every rank walks the whole dataset), the effective batch is one batch repeated, and a
learning rate scaled for the larger batch is simply too high. The run finishes, the loss
curve looks plausible, and the compute bill is multiplied by the number of GPUs for nothing.

Data parallelism written by hand (each rank backwards its own batches and `dist.all_reduce(p.grad)`
sums the gradients) needs the same split as DDP. A DistributedSampler replaced by a local one on
the data-parallel path (`if args.deepspeed: eval_sampler = SequentialSampler(...)`) is reported
too: a warning for an evaluation loader (every rank evaluates every example), an error for a
training one.

How to fix: pass `sampler=DistributedSampler(dataset)` to the training DataLoader (drop
`shuffle=True`; the sampler shuffles) and call `sampler.set_epoch(epoch)` each epoch. A
`RandomSampler` is not distributed: replace it. Splitting the data yourself is fine too —
`dataset[rank::world_size]`, an `IterableDataset` that strides by rank, HF
`dataset.shard(num_shards=world_size, index=rank)`/`split_dataset_by_node`, or
`accelerator.prepare`/`fabric.setup_dataloaders`, which add the sampler for you.
"""

from __future__ import annotations

import re
from typing import cast

import libcst as cst

from trainlint.analysis.stepping import hands_parameters
from trainlint.analysis.torchapi import mentions_rank
from trainlint.rules import (
    UNKNOWN,
    AssignEvent,
    CallEvent,
    ClassInfo,
    Fires,
    Loop,
    ModuleView,
    Quiet,
    Rule,
    RuleContext,
    ScopeAnalysis,
    Severity,
    Tag,
    Value,
    calls_in,
    children,
    comes_from_call,
    dotted,
    first_written,
    is_backward,
    is_dataloader,
    mentions,
    quoted,
    shortened,
)

# DataLoader(dataset, batch_size, shuffle, sampler, batch_sampler, ...)
_POSITIONS = {"dataset": 0, "shuffle": 2, "sampler": 3, "batch_sampler": 4}
# Samplers that are about training order (an evaluation loader has no reason to use them).
_TRAINING_SAMPLERS = frozenset({"RandomSampler", "WeightedRandomSampler", "SubsetRandomSampler"})
# Conditions that choose between single-process and distributed set-ups.
_MODE_WORDS = re.compile(r"distributed|ddp|fsdp|world|rank|is_initialized|gpus\b|parallel", re.I)
# Collectives that sum a tensor across ranks; on gradients, they make the training data-parallel.
_ALL_REDUCES = frozenset({"torch.distributed.all_reduce", "torch.distributed.all_reduce_coalesced"})
_GRADIENT = re.compile(r"\.grad\b(?!_)")
# Methods that hand a loader to something that shards it (accelerate, Fabric).
_SHARDING_METHODS = frozenset({"prepare", "prepare_data_loader", "setup_dataloaders"})


class DdpWithoutSampler(Rule):
    code = "TL501"
    name = "ddp-without-sampler"
    severity = Severity.ERROR

    def check(self, ctx: RuleContext) -> None:
        module = ctx.module
        if module.framework_runs_loop:
            return  # Lightning and the HF Trainer add the DistributedSampler themselves
        loaders = [
            (call, None) for scope in ctx.scopes for call in scope.calls()
            if call.callee is not None and is_dataloader(call.callee)
        ] + [(cast(CallEvent, factory.result.detail), factory) for factory in _loader_factories(ctx)]  # the DataLoader call
        if not loaders:
            return
        wraps = [wrap for wrap in module.ddp_wraps if wrap.keyword("training_data") is None]
        wraps += module.module_wide("TL501 gradient all-reduces", _gradient_all_reduces)
        if not wraps:
            return  # (deepspeed.initialize(training_data=...) builds the sharded loader itself)
        for loader, factory in loaders:
            self._check_loader(ctx, module, loader, wraps, factory)

    def _check_loader(self, ctx: RuleContext, module: ModuleView, loader: CallEvent, wraps: list[CallEvent], factory: CallEvent | None = None) -> None:
        if any(arg.star == "*" for arg in loader.arg_nodes) or _built_per_mode(loader):
            return
        _, dataset = _argument(loader, "dataset")
        shuffle_node, _ = _argument(loader, "shuffle")
        shuffles = isinstance(shuffle_node, cst.Name) and shuffle_node.value == "True"
        if loader.has_star_kwargs and not shuffles:
            return  # the sampler may come in through **kwargs (shuffle=True cannot go with one)
        if dataset.tags & {Tag.SHARDED, Tag.DATASET_ITERABLE} or _class_mentions_rank(dataset) or _random_tensors(module, dataset):
            return
        local_sampler = None
        for keyword in ("sampler", "batch_sampler"):
            node, sampler = _argument(loader, keyword)
            if node is None or (isinstance(node, cst.Name) and node.value == "None"):
                continue
            replaced = _distributed_sampler_replaced(loader, node) if Tag.SAMPLER_DISTRIBUTED in sampler.tags else None
            if replaced is not None:
                self._report_replaced(ctx, module, loader, wraps, factory, *replaced)
                return
            if Tag.SAMPLER_LOCAL not in sampler.tags or Tag.SAMPLER_DISTRIBUTED in sampler.tags:
                return  # distributed, or something this analysis cannot see into
            local_sampler = sampler
        names = _names_bound_to(module, loader.node)
        if _handed_to_sharding(module, loader.node, names):
            return
        loops = _training_loops(module, loader.node, names)
        if any(_strides_by_rank(scope, loop) for scope, loop in loops):
            return
        if loops and not module.module_wide("TL501 may step an optimizer", _may_step_an_optimizer):
            return  # backwards for gradients only (a head-importance or saliency pass): every rank gets the same answer
        # what shows the loader is a map-style training loader: (evidence site, its note, the message's words)
        if shuffles:
            why = ((loader.chunk, shuffle_node), "`shuffle=True`: a map-style dataset", "it shuffles (`shuffle=True`), so its dataset is map-style")
        elif local_sampler is not None and (local_sampler.detail in _TRAINING_SAMPLERS or loops):
            note = local_sampler.note
            why = (local_sampler.site, f"{note} is not a distributed sampler", f"its sampler {note} is the same on every rank")
        elif Tag.DATASET_MAP in dataset.tags and loops:
            why = (dataset.site, f"{dataset.note}: a map-style dataset", f"its dataset {dataset.note} is map-style")
        else:
            return  # maybe an evaluation loader, or a dataset that shards itself
        wrap = first_written(wraps)
        wrapped, wrap_note = _describe_wrap(wrap)
        evidence = [
            ((wrap.chunk, wrap.node), wrap_note),
            ((loader.chunk, loader.node), "this DataLoader has no DistributedSampler"),
            (why[0], why[1]),
        ]
        if loops:
            scope, loop = loops[0]
            evidence.append(((scope.chunk, loop.node), "the training loop iterates it"))
        where = (
            f"the DataLoader that `{shortened(factory.chunk.code_for(factory.node), 40)}` builds (line {loader.chunk.line_of(loader.node)} "
            f"of its file)" if factory is not None else f"the DataLoader on line {loader.chunk.line_of(loader.node)}"
        )
        message = (
            f"every rank trains on the same batches: {wrapped}, but {where} has no `DistributedSampler` and nothing "
            f"else splits the data across ranks — {why[2]}; each process walks the whole dataset, so the GPUs repeat "
            "each other's work instead of dividing it"
        )
        anchor = factory or loader
        ctx.report(
            anchor.node, message, evidence=evidence, chunk=anchor.chunk,
            help="pass `sampler=DistributedSampler(dataset)` (instead of `shuffle=True`) and call "
            "`sampler.set_epoch(epoch)` every epoch",
        )

    def _report_replaced(
        self, ctx: RuleContext, module: ModuleView, loader: CallEvent, wraps: list[CallEvent], factory: CallEvent | None,
        distributed: AssignEvent, local: AssignEvent,
    ) -> None:
        """The DistributedSampler built for the loader is replaced by a local sampler on a path the
        data-parallel run takes (`if args.deepspeed: eval_sampler = SequentialSampler(...)`)."""
        names = _names_bound_to(module, loader.node)
        training = bool(_training_loops(module, loader.node, names))
        wrap = first_written(wraps)
        wrapped, wrap_note = _describe_wrap(wrap)
        test = next((c.test for c in local.context.conditions if c.test is not None), None)
        when = f" under `if {shortened(local.chunk.code_for(test), 40)}:`" if test is not None else ""
        anchor = factory or loader
        ctx.report(
            anchor.node,
            f"every rank walks the whole dataset: {wrapped}, and the `DistributedSampler` built on line "
            f"{distributed.chunk.line_of(distributed.node)} for the DataLoader on line {loader.chunk.line_of(loader.node)} is replaced by "
            f"`{quoted(local.chunk, cast(cst.CSTNode, local.value_node), 40)}` on line {local.chunk.line_of(local.node)}{when} "
            f"before it is used; each process {'trains on' if training else 'evaluates'} every example, repeating the others' work",
            evidence=[
                ((wrap.chunk, wrap.node), wrap_note),
                ((distributed.chunk, distributed.node), "a DistributedSampler for this loader"),
                ((local.chunk, local.node), "replaced by a sampler that is the same on every rank"),
                ((loader.chunk, loader.node), "the DataLoader that uses it"),
            ],
            chunk=anchor.chunk, severity=Severity.ERROR if training else Severity.WARNING,
            help="keep the DistributedSampler on the data-parallel path (drop the replacement, or make it the "
            "single-process branch)",
        )


def _argument(call: CallEvent, keyword: str) -> tuple[cst.BaseExpression | None, Value]:
    """The node and value passed for a DataLoader parameter, by keyword or position."""
    arg = call.keyword(keyword)
    if arg is not None:
        return arg.value, call.kwargs.get(keyword, UNKNOWN)
    positional = [arg for arg in call.arg_nodes if arg.keyword is None and not arg.star]
    position = _POSITIONS[keyword]
    if position < len(positional):
        return positional[position].value, call.args[position] if position < len(call.args) else UNKNOWN
    return None, UNKNOWN


def _gradient_all_reduces(module: ModuleView) -> list[CallEvent]:
    """``dist.all_reduce(p.grad)``: data parallelism written by hand (each rank computes gradients on
    its own batches and they are summed across ranks), which needs each rank to read other batches
    just as DDP does. An all-reduce of a metric or a loss for logging is not one."""
    return [call for call in module.all_calls() if call.callee in _ALL_REDUCES and _reduces_gradients(call)]


def _reduces_gradients(call: CallEvent) -> bool:
    tensor = next((arg.value for arg in call.arg_nodes if arg.keyword is None or arg.keyword.value == "tensor"), None)
    if tensor is None:
        return False
    if isinstance(tensor, cst.Name):
        binding = call.scope.last_binding(tensor.value, before=call)
        tensor = binding.value_node if binding is not None and binding.value_node is not None else tensor
    return _GRADIENT.search(call.chunk.code_for(tensor)) is not None


def _distributed_sampler_replaced(loader: CallEvent, node: cst.BaseExpression) -> tuple[AssignEvent, AssignEvent] | None:
    """The name passed as the sampler was bound to a DistributedSampler and later rebound to a local one,
    not in the other branch of the same `if` (that would be the single-process branch)."""
    if not isinstance(node, cst.Name):
        return None
    line = loader.chunk.line_of(loader.node)
    bindings = [
        event for event in loader.scope.events
        if isinstance(event, AssignEvent) and event.targets == (node.value,) and event.chunk.line_of(event.node) < line
    ]
    distributed = [event for event in bindings if Tag.SAMPLER_DISTRIBUTED in event.value.tags]
    local = [event for event in bindings if Tag.SAMPLER_LOCAL in event.value.tags and Tag.SAMPLER_DISTRIBUTED not in event.value.tags]
    for first in distributed:
        for later in local:
            if later.chunk.line_of(later.node) > first.chunk.line_of(first.node) and not _exclusive(first, later):
                return first, later
    return None


def _exclusive(one: AssignEvent, other: AssignEvent) -> bool:
    return any(
        mine.node is theirs.node and mine.branch != theirs.branch
        for mine in one.context.conditions for theirs in other.context.conditions
    )


def _describe_wrap(wrap: CallEvent) -> tuple[str, str]:
    """How the message and the evidence name the data-parallel wrap."""
    line = wrap.chunk.line_of(wrap.node)
    if wrap.callee in _ALL_REDUCES:
        return (
            f"the gradients are summed across ranks by hand (`{quoted(wrap.chunk, wrap.node, 40)}` on line {line})",
            "gradients all-reduced across ranks: data parallelism",
        )
    if wrap.callee == "deepspeed.initialize":
        return f"the model is a DeepSpeed engine (`deepspeed.initialize` on line {line})", "the model becomes a data-parallel DeepSpeed engine here"
    assert wrap.callee is not None, "ModuleAnalysis.ddp_wraps are calls of named wrappers"
    wrapper = wrap.callee.rsplit(".", 1)[-1]
    return f"the model is wrapped in `{wrapper}` on line {line}", f"the model is wrapped in {wrapper} here"


def _built_per_mode(loader: CallEvent) -> bool:
    """Built under ``if args.distributed:``/``else:`` — likely the single-process branch of a
    script that builds a sharded loader in the other one."""
    return any(
        condition.test is not None and _MODE_WORDS.search(loader.chunk.code_for(condition.test))
        for condition in loader.context.conditions
    )


_RANDOM_FILL = re.compile(r"\btorch\.(?:rand|randn|randint|rand_like|randn_like|randint_like|normal)\(|\.(?:random_|normal_|uniform_)\(")


def _random_tensors(module: ModuleView, dataset: Value) -> bool:
    """A ``TensorDataset`` whose inputs (its first tensor) are drawn at random where it is built: a
    benchmark's synthetic data (DeepSpeed's offload example, opacus' vision benchmark), which every
    rank draws for itself; there is no dataset to divide."""
    site = dataset.site
    if site is None or not isinstance(site[1], cst.Call) or not (dotted(site[1].func) or "").endswith("TensorDataset"):
        return False
    built = site[1]
    scope = next((scope for scope in module.all_scopes if any(call.node is built for call in scope.calls())), None)
    if scope is None or not built.args:
        return False
    inputs: cst.BaseExpression | None = built.args[0].value
    if isinstance(inputs, cst.Name):
        binding = scope.last_binding(inputs.value)
        inputs = binding.value_node if binding is not None else None
    return inputs is not None and _RANDOM_FILL.search(scope.chunk.code_for(inputs)) is not None


def _class_mentions_rank(dataset: Value) -> bool:
    """A local Dataset class that reads its rank (``dist.get_rank()``) picks its own share."""
    info = dataset.detail
    return isinstance(info, ClassInfo) and mentions_rank(info.chunk.code_for(info.node))


def _is_loader(value: Value, node: cst.Call) -> bool:
    """Does this value come from the DataLoader call ``node`` (also through enumerate/zip)?"""
    return comes_from_call(value, node)


def _names_bound_to(module: ModuleView, node: cst.Call) -> dict[int, set[str]]:
    """Per scope (by id), the names that hold the loader: assignments, and parameters of local
    functions it is passed to. Module-level names are shared by every scope (key 0)."""
    names: dict[int, set[str]] = {}
    for scope, event in module.module_wide("TL501 assignments", _assignments):
        if _is_loader(event.value, node):
            key = 0 if scope.function is None else id(scope)
            names.setdefault(key, set()).update(event.targets)
    local_calls = module.module_wide("TL501 local calls", _local_function_calls)
    for _ in range(3):  # a loader handed down through up to three helper calls
        changed = False
        for call in local_calls:
            scope = call.scope
            held = names.get(id(scope), set()) | names.get(0, set())
            assert call.function is not None, "_local_function_calls are calls of local functions"
            inner = call.function.analysis(module.summary)
            if inner is None:
                continue
            for parameter in _parameters_receiving(scope, call, node, held):
                if parameter not in names.setdefault(id(inner), set()):
                    names[id(inner)].add(parameter)
                    changed = True
        if not changed:
            break
    return names


def _loader_factories(ctx: RuleContext) -> list[CallEvent]:
    """Calls of functions from another workspace file that return a DataLoader they build."""
    return [
        call for scope in ctx.scopes for call in scope.calls()
        if call.function is not None and ctx.summary.defined_elsewhere(call.function)
        and isinstance(call.result.detail, CallEvent) and ctx.in_another_file(call.result.detail.chunk)
        and call.result.detail.callee is not None and is_dataloader(call.result.detail.callee)
    ]


def _assignments(module: ModuleView) -> list[tuple[ScopeAnalysis, AssignEvent]]:
    return [(scope, event) for scope in module.all_scopes for event in scope.events if isinstance(event, AssignEvent)]


def _local_function_calls(module: ModuleView) -> list[CallEvent]:
    return [call for call in module.all_calls() if call.function is not None]


def _sharding_calls(module: ModuleView) -> list[CallEvent]:
    return [call for call in module.all_calls() if call.method in _SHARDING_METHODS]


def _may_step_an_optimizer(module: ModuleView) -> bool:
    """Whether anything in the file may update weights from the gradients: a ``.step()`` (an optimizer's, a
    scaler's, an engine's), a model's parameters handed to a call (an optimizer built here, or a helper that may
    build one), or a loop over them (an update or a gradient all-reduce written by hand)."""
    if any(call.method == "step" or any(hands_parameters(arg.value) for arg in call.arg_nodes) for call in module.all_calls()):
        return True
    return any(isinstance(loop.node, cst.For) and hands_parameters(loop.node.iter)
               for scope in module.all_scopes for loop in scope.loops)


def _loops_with_backward(module: ModuleView) -> list[tuple[ScopeAnalysis, Loop]]:
    return [
        (scope, loop) for scope in module.all_scopes for loop in scope.loops
        if any(is_backward(call) for call in calls_in(scope, loop))
    ]


def _parameters_receiving(scope: ScopeAnalysis, call: CallEvent, node: cst.Call, held: set[str]) -> list[str]:
    assert call.function is not None, "_local_function_calls are calls of local functions"
    function = call.function.node
    parameters = [p.name.value for p in (*function.params.posonly_params, *function.params.params)]
    if call.function.owner is not None and call.method is not None and parameters[:1] in (["self"], ["cls"]):
        parameters = parameters[1:]
    received = []
    positional = [arg for arg in call.arg_nodes if arg.keyword is None and not arg.star]
    for arg in call.arg_nodes:
        if arg.star:
            continue
        value = scope.value_at(arg.value) or UNKNOWN
        if not (_is_loader(value, node) or any(mentions(scope, arg.value, name) for name in held)):
            continue
        if arg.keyword is not None:
            received.append(arg.keyword.value)
        elif positional.index(arg) < len(parameters):
            received.append(parameters[positional.index(arg)])
    return received


def _handed_to_sharding(module: ModuleView, node: cst.Call, names: dict[int, set[str]]) -> bool:
    """``accelerator.prepare(..., loader)`` / ``fabric.setup_dataloaders(loader)``: they add the sampler."""
    for call in module.module_wide("TL501 sharding calls", _sharding_calls):
        scope = call.scope
        held = names.get(id(scope), set()) | names.get(0, set())
        if any(_is_loader(value, node) for value in call.args) or any(
            mentions(scope, arg.value, name) for arg in call.arg_nodes for name in held
        ):
            return True
    return False


def _training_loops(module: ModuleView, node: cst.Call, names: dict[int, set[str]]) -> list[tuple[ScopeAnalysis, Loop]]:
    """Loops that iterate the loader and run a backward each time round."""
    found = []
    for scope, loop in module.module_wide("TL501 loops with backward", _loops_with_backward):
        held = names.get(id(scope), set()) | names.get(0, set())
        if _is_loader(loop.iterable, node) or (
            isinstance(loop.node, cst.For) and any(mentions(scope, loop.node.iter, name) for name in held)
        ):
            found.append((scope, loop))
    return found


def _strides_by_rank(scope: ScopeAnalysis, loop: Loop) -> bool:
    """``if step % world_size != rank: continue`` or ``batch[rank::world_size]`` inside the loop; kept
    per loop (a node memo): each loader asks of the same loops, and after a key typed elsewhere in
    a long class its loops are still the same nodes."""
    strides = scope.chunk.node_memo("TL501 strides by rank")
    found = strides.get(loop.node)
    if found is None:
        found = strides[loop.node] = _strides_in(scope.chunk, loop.node.body)
    return found


def _strides_in(chunk, body: cst.CSTNode) -> bool:
    stack = [body]
    while stack:
        current = stack.pop()
        if isinstance(current, cst.If) and "%" in chunk.code_for(current.test) and mentions_rank(chunk.code_for(current.test)):
            return True
        if isinstance(current, cst.Slice) and mentions_rank(chunk.code_for(current)):
            return True
        stack.extend(children(current))
    return False


DdpWithoutSampler.MUST_FIRE = (
    Fires(
        """
        import torch
        import torch.distributed as dist
        from torch.nn.parallel import DistributedDataParallel as DDP
        from torch.utils.data import DataLoader
        from torchvision import datasets, transforms

        def main():
            dist.init_process_group("nccl")
            rank = dist.get_rank()
            model = DDP(Net().cuda(rank), device_ids=[rank])
            train_set = datasets.CIFAR10("data", train=True, transform=transforms.ToTensor())
            loader = DataLoader(train_set, batch_size=128, shuffle=True, num_workers=4)
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            for epoch in range(10):
                for x, y in loader:
                    optimizer.zero_grad()
                    loss = torch.nn.functional.cross_entropy(model(x.cuda()), y.cuda())
                    loss.backward()
                    optimizer.step()
        """,
        severity=Severity.ERROR,
    ),
    Fires(
        # a RandomSampler is not distributed
        """
        import torch
        from torch.utils.data import DataLoader, RandomSampler, TensorDataset

        model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(16, 1).cuda())
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
        dataset = TensorDataset(features, targets)
        loader = DataLoader(dataset, batch_size=32, sampler=RandomSampler(dataset))
        for x, y in loader:
            torch.nn.functional.mse_loss(model(x), y).backward()
            optimizer.step()
            optimizer.zero_grad()
        """,
        severity=Severity.ERROR,
    ),
    Fires(
        # a local map-style Dataset, no shuffle, iterated by the training loop in another function
        """
        import torch
        from torch.utils.data import DataLoader, Dataset
        from torch.nn.parallel import DistributedDataParallel

        class TokenDataset(Dataset):
            def __init__(self, path):
                self.tokens = torch.load(path)

            def __len__(self):
                return len(self.tokens) // 512

            def __getitem__(self, i):
                return self.tokens[i * 512:(i + 1) * 512]

        def train_epoch(model, train_loader, optimizer):
            for batch in tqdm(train_loader):
                loss = model(batch).loss
                loss.backward()
                optimizer.step()
                optimizer.zero_grad()

        def main(local_rank):
            model = DistributedDataParallel(build_model().to(local_rank), device_ids=[local_rank])
            optimizer = torch.optim.AdamW(model.parameters())
            train_loader = DataLoader(TokenDataset("train.pt"), batch_size=8)
            for epoch in range(3):
                train_epoch(model, train_loader, optimizer)
        """,
        severity=Severity.ERROR,
    ),
    Fires(
        # FSDP, and a DistributedSampler that was built but never passed
        """
        import torch
        from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
        from torch.utils.data import DataLoader
        from torch.utils.data.distributed import DistributedSampler

        def train(args, model, train_ds):
            model = FSDP(model)
            sampler = DistributedSampler(train_ds)
            loader = DataLoader(train_ds, batch_size=args.batch_size, shuffle=True)
            opt = torch.optim.AdamW(model.parameters())
            for epoch in range(args.epochs):
                sampler.set_epoch(epoch)
                for batch in loader:
                    model(**batch).loss.backward()
                    opt.step()
        """,
        severity=Severity.ERROR,
    ),
    Fires(
        # wrapped only when distributed; the loader is the same either way
        """
        import torch
        import torch.nn as nn
        from torch.utils.data import DataLoader, TensorDataset

        model = nn.Linear(4, 2).cuda()
        if args.distributed:
            model = nn.parallel.DistributedDataParallel(model, device_ids=[args.gpu])
        optimizer = torch.optim.Adam(model.parameters())
        train_loader = DataLoader(TensorDataset(x, y), batch_size=64, shuffle=True)
        val_loader = DataLoader(TensorDataset(vx, vy), batch_size=64)
        for xb, yb in train_loader:
            nn.functional.cross_entropy(model(xb), yb).backward()
            optimizer.step()
            optimizer.zero_grad()
        """,
        severity=Severity.ERROR,
    ),
    Fires(
        # DeepSpeed engine with a hand-built loader
        """
        import deepspeed
        from torch.utils.data import DataLoader

        engine, optimizer, _, _ = deepspeed.initialize(args=args, model=model, model_parameters=model.parameters())
        loader = DataLoader(train_dataset, batch_size=16, shuffle=True)
        for batch in loader:
            loss = engine(batch)
            engine.backward(loss)
            engine.step()
        """,
        severity=Severity.ERROR,
    ),
    Fires(  # a DeepSpeed run on features loaded from disk: every rank walks all of them
        """
        import deepspeed
        import torch
        import torch.distributed as dist


        def cached_dataset(path, device, dtype):
            train_data = torch.load(f"{path}/features.pt").to(device, dtype)
            train_label = torch.load(f"{path}/labels.pt").to(device)
            return torch.utils.data.TensorDataset(train_data, train_label)


        def run_model(model, config_dict, path, dtype):
            model, _, _, _ = deepspeed.initialize(model=model, model_parameters=model.parameters(), config=config_dict)
            dataset = cached_dataset(path, model.device, dtype)
            data_loader = torch.utils.data.DataLoader(dataset, batch_size=model.train_micro_batch_size_per_gpu())
            dist.barrier()
            for batch in data_loader:
                loss = model(batch[0], batch[1])
                model.backward(loss)
                model.step()
        """
    ),
    Fires(  # hand-written data parallelism: gradients all-reduced across ranks, every rank reading the whole set
        """
        import torch
        import torch.nn.functional as F
        from torch import distributed
        from torch.utils import data
        from torchvision import datasets, transforms


        class Trainer:
            def __init__(self, net, optimizer, train_loader, device):
                self.net = net
                self.optimizer = optimizer
                self.train_loader = train_loader
                self.device = device

            def train(self):
                for images, labels in self.train_loader:
                    loss = F.cross_entropy(self.net(images.to(self.device)), labels.to(self.device))
                    self.optimizer.zero_grad()
                    loss.backward()
                    self.average_gradients()
                    self.optimizer.step()

            def average_gradients(self):
                world_size = distributed.get_world_size()
                for p in self.net.parameters():
                    grad = p.grad.data
                    distributed.all_reduce(grad, op=distributed.ReduceOp.SUM)
                    grad /= world_size


        def get_dataloader(root, batch_size):
            train_set = datasets.MNIST(root, train=True, transform=transforms.ToTensor(), download=True)
            return data.DataLoader(train_set, batch_size=batch_size, shuffle=True)


        def solve(args, net, optimizer):
            trainer = Trainer(net, optimizer, get_dataloader(args.root, args.batch_size), args.device)
            for epoch in range(args.epochs):
                trainer.train()
        """,
        severity=Severity.ERROR,
        at="return data.DataLoader(train_set, batch_size=batch_size, shuffle=True)",
    ),
    Fires(  # the evaluation set's DistributedSampler is replaced on the DeepSpeed path: every rank evaluates all of it
        """
        import deepspeed
        import torch
        from torch.utils.data import DataLoader, DistributedSampler, SequentialSampler


        def evaluate(args, engine, eval_dataset):
            eval_sampler = DistributedSampler(eval_dataset, shuffle=False)
            if args.deepspeed:
                eval_sampler = SequentialSampler(eval_dataset)
            eval_loader = DataLoader(eval_dataset, sampler=eval_sampler, batch_size=args.eval_batch_size)
            losses = []
            with torch.no_grad():
                for batch in eval_loader:
                    losses.append(engine(batch).loss.item())
            return sum(losses) / len(losses)


        def main(args, model, eval_dataset):
            engine, _, _, _ = deepspeed.initialize(args=args, model=model, model_parameters=model.parameters())
            return evaluate(args, engine, eval_dataset)
        """,
        severity=Severity.WARNING,
        at="eval_loader = DataLoader(eval_dataset, sampler=eval_sampler, batch_size=args.eval_batch_size)",
    ),
)

DdpWithoutSampler.MUST_NOT_FIRE = (
    Quiet(  # a backward for the gradients of a head mask only: nothing steps, so every rank computes the same scores
        """
        import torch
        from torch.utils.data import DataLoader, RandomSampler, TensorDataset

        from heads import load_tokens, prune_below


        def head_importance(model, loader, layers, heads, device):
            mask = torch.ones(layers, heads, device=device, requires_grad=True)
            scores = torch.zeros(layers, heads, device=device)
            for (tokens,) in loader:
                tokens = tokens.to(device)
                loss = model(tokens, labels=tokens, head_mask=mask).loss
                loss.backward()
                scores += mask.grad.abs().detach()
                mask.grad = None
            return scores / len(loader)


        def main(args, model):
            model = torch.nn.parallel.DistributedDataParallel(model.to(args.device), device_ids=[args.local_rank])
            data = TensorDataset(load_tokens(args.data_file))
            loader = DataLoader(data, sampler=RandomSampler(data), batch_size=args.batch_size)
            scores = head_importance(model, loader, args.layers, args.heads, args.device)
            prune_below(model.module, scores, args.threshold)
        """,
        files={
            "heads.py": """
                import numpy as np
                import torch


                def load_tokens(path):
                    return torch.from_numpy(np.loadtxt(path, dtype=np.int64))


                def prune_below(model, scores, threshold):
                    weak = {layer: (scores[layer] < threshold).nonzero().flatten().tolist() for layer in range(len(scores))}
                    model.prune_heads(weak)
            """,
        },
    ),
    Quiet(  # the local sampler is the single-process branch of the same `if`
        """
        import deepspeed
        from torch.utils.data import DataLoader, DistributedSampler, SequentialSampler


        def evaluate(args, engine, eval_dataset):
            if args.local_rank != -1:
                eval_sampler = DistributedSampler(eval_dataset, shuffle=False)
            else:
                eval_sampler = SequentialSampler(eval_dataset)
            eval_loader = DataLoader(eval_dataset, sampler=eval_sampler, batch_size=args.eval_batch_size)
            return [engine(batch) for batch in eval_loader]


        def main(args, model, eval_dataset):
            engine, _, _, _ = deepspeed.initialize(args=args, model=model, model_parameters=model.parameters())
            return evaluate(args, engine, eval_dataset)
        """
    ),
    Quiet(  # gradients all-reduced by hand, and each rank reads its own share through a DistributedSampler
        """
        import torch
        import torch.distributed as dist
        from torch.utils.data import DataLoader, DistributedSampler


        def average_gradients(model):
            for p in model.parameters():
                dist.all_reduce(p.grad, op=dist.ReduceOp.SUM)
                p.grad /= dist.get_world_size()


        def train(model, optimizer, train_set, epochs):
            sampler = DistributedSampler(train_set)
            loader = DataLoader(train_set, batch_size=64, sampler=sampler)
            for epoch in range(epochs):
                sampler.set_epoch(epoch)
                for x, y in loader:
                    loss = torch.nn.functional.cross_entropy(model(x), y)
                    optimizer.zero_grad()
                    loss.backward()
                    average_gradients(model)
                    optimizer.step()
        """
    ),
    Quiet(  # an all-reduce of metrics, not of gradients: no data parallelism to see here
        """
        import torch
        import torch.distributed as dist
        from torch.utils.data import DataLoader


        def train(model, optimizer, train_set):
            loader = DataLoader(train_set, batch_size=64, shuffle=True)
            for x, y in loader:
                loss = torch.nn.functional.cross_entropy(model(x), y)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                reported = loss.detach().clone()
                dist.all_reduce(reported)
        """
    ),
    Quiet(  # random images with made-up labels: the benchmark's inputs are drawn on each rank (opacus' vision benchmark)
        """
        import torch
        import torch.distributed as dist
        import torchvision.models as models
        from torch.nn.parallel import DistributedDataParallel as DDP
        from torch.utils.data import TensorDataset


        def main(args):
            dist.init_process_group("nccl")
            B, H, W = args.batch_size, args.height, args.width
            images = torch.randn(args.steps * B, 3, H, W)
            labels = torch.arange(B).repeat(args.steps)
            train_loader = torch.utils.data.DataLoader(TensorDataset(images, labels), batch_size=B, pin_memory=True)
            model = DDP(models.resnet18().to(args.device), device_ids=[args.device])
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            for x, y in train_loader:
                loss = torch.nn.functional.cross_entropy(model(x.to(args.device)), y.to(args.device))
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
        """
    ),
    Quiet(  # a benchmark's synthetic data, drawn at random by every rank for itself (DeepSpeed's offload example)
        """
        import deepspeed
        import torch
        import torch.distributed as dist


        def random_dataset(total_samples, hidden_dim, device, dtype):
            train_data = torch.randn(total_samples, hidden_dim, device=device, dtype=dtype)
            train_label = torch.empty(total_samples, dtype=torch.long, device=device).random_(hidden_dim)
            return torch.utils.data.TensorDataset(train_data, train_label)


        def run_model(model, config_dict, hidden_dim, dtype, iterations):
            model, _, _, _ = deepspeed.initialize(model=model, model_parameters=model.parameters(), config=config_dict)
            dataset = random_dataset(iterations, hidden_dim, model.device, dtype)
            data_loader = torch.utils.data.DataLoader(dataset, batch_size=model.train_micro_batch_size_per_gpu())
            dist.barrier()
            for batch in data_loader:
                loss = model(batch[0], batch[1])
                model.backward(loss)
                model.step()
        """
    ),
    Quiet(
        """
        import torch
        from torch.nn.parallel import DistributedDataParallel as DDP
        from torch.utils.data import DataLoader
        from torch.utils.data.distributed import DistributedSampler

        def main(rank, world_size):
            model = DDP(Net().to(rank), device_ids=[rank])
            sampler = DistributedSampler(train_set, num_replicas=world_size, rank=rank, shuffle=True)
            loader = DataLoader(train_set, batch_size=64, sampler=sampler)
            for epoch in range(5):
                sampler.set_epoch(epoch)
                for x, y in loader:
                    loss_fn(model(x), y).backward()
        """
    ),
    Quiet(
        # the sampler is chosen by a condition; shuffle only when there is none
        """
        import torch
        from torch.utils.data import DataLoader, DistributedSampler

        model = torch.nn.parallel.DistributedDataParallel(model)
        train_sampler = DistributedSampler(train_dataset) if args.distributed else None
        train_loader = DataLoader(train_dataset, batch_size=32, shuffle=(train_sampler is None), sampler=train_sampler)
        for x, y in train_loader:
            criterion(model(x), y).backward()
        """
    ),
    Quiet(
        # the classic transformers-examples shape: RandomSampler only when not distributed
        """
        import torch
        from torch.utils.data import DataLoader, DistributedSampler, RandomSampler

        def train(args, train_dataset, model):
            train_sampler = RandomSampler(train_dataset) if args.local_rank == -1 else DistributedSampler(train_dataset)
            train_dataloader = DataLoader(train_dataset, sampler=train_sampler, batch_size=args.train_batch_size)
            if args.local_rank != -1:
                model = torch.nn.parallel.DistributedDataParallel(model, device_ids=[args.local_rank])
            for batch in train_dataloader:
                model(**batch)[0].backward()
        """
    ),
    Quiet(
        # explicit rank/world_size slicing, and HF dataset sharding
        """
        import torch
        from torch.nn.parallel import DistributedDataParallel as DDP
        from torch.utils.data import DataLoader, Subset, TensorDataset

        model = DDP(model)
        rank, world = torch.distributed.get_rank(), torch.distributed.get_world_size()
        shard = Subset(full_dataset, list(range(len(full_dataset)))[rank::world])
        loader = DataLoader(shard, batch_size=8, shuffle=True)
        texts = load_dataset("c4", split="train").shard(num_shards=world, index=rank).with_format("torch")
        text_loader = DataLoader(texts, batch_size=8, shuffle=True)
        for batch in loader:
            model(batch).sum().backward()
        """
    ),
    Quiet(
        # accelerate prepares the loader (adds the sampler)
        """
        import torch
        from accelerate import Accelerator
        from torch.nn.parallel import DistributedDataParallel
        from torch.utils.data import DataLoader

        accelerator = Accelerator()
        model = DistributedDataParallel(model)
        loader = DataLoader(dataset, batch_size=16, shuffle=True)
        model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
        for batch in loader:
            accelerator.backward(model(batch).loss)
        """
    ),
    Quiet(
        # an evaluation loader: no shuffle, only iterated without backward
        """
        import torch
        from torch.nn.parallel import DistributedDataParallel as DDP
        from torch.utils.data import DataLoader, DistributedSampler
        from torchvision import datasets

        model = DDP(model)
        train_loader = DataLoader(train_set, batch_size=64, sampler=DistributedSampler(train_set))
        val_loader = DataLoader(datasets.MNIST("data", train=False), batch_size=256)
        for x, y in train_loader:
            loss_fn(model(x), y).backward()
        with torch.no_grad():
            for x, y in val_loader:
                correct += (model(x).argmax(1) == y).sum()
        """
    ),
    Quiet(
        # a rank-strided IterableDataset shards itself; an unknown sampler may be distributed
        """
        import torch
        from torch.nn.parallel import DistributedDataParallel as DDP
        from torch.utils.data import DataLoader, IterableDataset

        class Shards(IterableDataset):
            def __iter__(self):
                rank, world = torch.distributed.get_rank(), torch.distributed.get_world_size()
                for i, sample in enumerate(read_stream()):
                    if i % world == rank:
                        yield sample

        model = DDP(model)
        loader = DataLoader(Shards(), batch_size=32)
        other = DataLoader(ds, batch_size=32, sampler=make_sampler(ds))
        for batch in loader:
            model(batch).loss.backward()
        for batch in other:
            model(batch).loss.backward()
        """
    ),
    Quiet(
        # Lightning adds the DistributedSampler itself
        """
        import lightning as L
        from torch.nn.parallel import DistributedDataParallel
        from torch.utils.data import DataLoader

        class Data(L.LightningDataModule):
            def train_dataloader(self):
                return DataLoader(self.train_set, batch_size=32, shuffle=True)

        trainer = L.Trainer(strategy="ddp", devices=8)
        trainer.fit(LitModel(), datamodule=Data())
        """
    ),
    Quiet(
        # an unknown dataset with no sign of being map-style, iterated by the training loop
        """
        from torch.nn.parallel import DistributedDataParallel as DDP
        from torch.utils.data import DataLoader

        model = DDP(model)
        loader = DataLoader(build_dataset(cfg), batch_size=4)
        for batch in loader:
            model(batch).loss.backward()
        """
    ),
    Quiet(
        # the shuffled loader is the single-process branch
        """
        import torch
        from torch.utils.data import DataLoader, DistributedSampler

        def build(args, model, train_set):
            if args.distributed:
                model = torch.nn.parallel.DistributedDataParallel(model, device_ids=[args.local_rank])
                loader = DataLoader(train_set, batch_size=32, sampler=DistributedSampler(train_set))
            else:
                loader = DataLoader(train_set, batch_size=32, shuffle=True)
            return model, loader
        """
    ),
    Quiet(
        # no DDP: a single-process script with a shuffled loader
        """
        import torch
        from torch.utils.data import DataLoader

        model = torch.nn.DataParallel(model)
        loader = DataLoader(train_set, batch_size=64, shuffle=True)
        for x, y in loader:
            loss_fn(model(x), y).backward()
        """
    ),
)
