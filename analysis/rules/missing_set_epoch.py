"""A shuffling `DistributedSampler` is used for several epochs without `sampler.set_epoch(epoch)`.

`DistributedSampler` shuffles with a seed derived from its epoch counter, and only
`set_epoch(epoch)` advances that counter. Without it every epoch replays the same permutation:
each rank sees the same samples in the same order, epoch after epoch, so shuffling is gone,
the model overfits to the batch order, and the multi-GPU run generalises worse than the
single-GPU one it replaced. Nothing warns.

The loader is followed where trainer classes put it: into a constructor and out of
`self.<attribute>`, into a method an epoch loop calls, into a fresh `iter(loader)` at the top of
each epoch, and into a dict of loaders a trainer takes (`self.data_loader["train"]`). torchdata's
`StatefulDataLoader` and `StatefulDistributedSampler` (torchtune's recipes) count as the loader and
the sampler they replace. A loader factory of another file is followed when it returns the loader,
alone or in a tuple (`return loader, sampler`). A `set_epoch` call made once, in the function that then hands the loader to a
framework that runs every epoch of it (PyTorch-Ignite's `trainer.run(loader, max_epochs=...)`; analysis/frameworks.py),
and nowhere else, sets the first epoch only. DGL's loaders with `use_ddp=True` build the DistributedSampler themselves
and want `loader.set_epoch(epoch)`. The loader `deepspeed.initialize(..., training_data=dataset)` returns
draws from a shuffling DistributedSampler DeepSpeed builds and never advances (`loader.data_sampler`). A data-parallel trainer (it wraps or unwraps DDP, or averages
with Horovod's optimizer) that is handed its loaders and never sets an epoch gets a note: their
sampler is decided in another file.

How to fix: call `sampler.set_epoch(epoch)` at the start of every epoch, before iterating the
loader (`loader.sampler.set_epoch(epoch)` works too); under ignite, in a handler of
`Events.EPOCH_STARTED`.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import libcst as cst

from trainlint.analysis.frameworks import ignite_engine_runs, ignite_registrations
from trainlint.analysis.libraries import DDP_SAMPLER_WHEN, ShardedLoaderFact, call_fact, sharded_loader
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
    Value,
    calls_in,
    comes_from_call,
    dotted,
    is_backward,
    is_dataloader,
    is_test_file,
    passed_expression,
    peeled,
    repeats_per_step,
    shortened,
    string_value,
    walk,
    written,
)

_REFILLED = "a new iterator over it each time the last one runs out: every refill starts another pass over the same order"


class MissingSetEpoch(Rule):
    code = "TL502"
    name = "missing-set-epoch"
    severity = Severity.WARNING

    def check_scope(self, ctx: RuleContext, scope: ScopeAnalysis) -> None:
        # the call itself, kept while it is the same (an edit elsewhere in the file leaves it be)
        self._check_set_once_before_run(ctx, scope)
        parallel = ctx.module.module_fact("TL502 data-parallel evidence", _data_parallel_evidence)
        if parallel is not None:
            self._check_unseen_loaders(ctx, scope, parallel)
        for call in scope.calls():
            built = _imported_loader_factory(ctx, call)
            if built is not None:
                self._check_factory(ctx, scope, call, built)
            returned = sharded_loader(call.callee)
            if returned is not None and call.keyword(returned.dataset) is not None:
                self._check_returned_loader(ctx, scope, call, returned)
            use_ddp = _shards_with_its_own_sampler(call)
            if use_ddp is not None:
                self._check_sharding_loader(ctx, scope, call, use_ddp)
            if not _builds_shuffling_sampler(call):
                continue
            # (each check of this rule ends here when something calls `set_epoch`)
            if ctx.module.module_fact("TL502 set_epoch anywhere", _sets_epoch_anywhere):
                return
            for loader in _loaders_using(ctx.module, call):
                found = _epoch_loop(ctx.module, loader)
                if found is not None:
                    self._report(ctx, scope, call, loader, *found)
                    break

    def _check_set_once_before_run(self, ctx: RuleContext, scope: ScopeAnalysis) -> None:
        """`loader.sampler.set_epoch(...)` once, before `trainer.run(loader, max_epochs=...)` of an ignite engine in the
        same function, with no other `set_epoch` in the file or in the helpers it calls: epochs after the first replay
        its order."""
        runs = [call for call in scope.calls() if call.method == "run" and call.keyword("max_epochs") is not None]
        if not runs:
            return
        setters = ctx.module.module_wide("TL502 set_epoch calls", _set_epoch_calls)
        if setters is None or any(setter.scope is not scope or setter.context.loop is not None for setter in setters):
            return  # a set_epoch in a handler, a helper or a loop: whether it runs per epoch is theirs to say
        tree = [scope.function.node] if scope.function is not None else [scope.chunk.module] if scope.chunk.module is not None else []
        written_calls = [
            node for root in tree for node in walk(root)
            if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value == "set_epoch"
        ]
        if len(written_calls) > len(setters):
            return  # one the analysis does not follow (in a lambda handed to `add_event_handler`): it may run per epoch
        definitions = (
            [node for node in walk(scope.function.node.body) if isinstance(node, cst.FunctionDef)] if scope.function is not None
            else [statement for chunk in ctx.module.chunks if chunk.module is not None for statement in chunk.module.body]
        )
        registrations = ignite_registrations(scope.calls(), definitions)
        for run in runs:
            engine = ignite_engine_runs(ctx.summary, run, registrations)
            loader = dotted(run.arg_nodes[0].value) if engine is not None else None
            once = next((
                setter for setter in setters
                if loader is not None and setter.receiver_key is not None
                and (setter.receiver_key == loader or setter.receiver_key.startswith(f"{loader}."))
                and setter.chunk.line_of(setter.node) < run.chunk.line_of(run.node)
            ), None)
            if once is None or engine is None:
                continue
            ctx.report(
                once.node,
                f"`{written(once)}` runs once, before `{written(run)}` runs every epoch of `{loader}`: the engine calls "
                "no `set_epoch` between epochs, so every epoch after the first replays the same order on every rank",
                evidence=[
                    ((once.chunk, once.node), "the sampler's epoch, set once"),
                    ((run.chunk, engine), f"an ignite handler registered on `{run.receiver_key}`'s events: an ignite engine"),
                    ((run.chunk, run.node), "which runs `max_epochs` epochs of the loader, calling only its handlers between them"),
                ],
                help=f"set it at the start of every epoch: `@{run.receiver_key}.on(Events.EPOCH_STARTED)` on a function that "
                f"calls `{once.receiver_key}.set_epoch({run.receiver_key}.state.epoch - 1)`",
            )
            return

    def _check_factory(self, ctx: RuleContext, scope: ScopeAnalysis, factory: CallEvent, loader: CallEvent) -> None:
        """`loader = make_loader(...)` (or `loader, sampler = make_loader(...)`) from another file, which
        builds a shuffling DistributedSampler."""
        sampler = loader.kwargs.get("sampler")
        if sampler is None or Tag.SAMPLER_DISTRIBUTED not in sampler.tags or sampler.site is None:
            return
        if not isinstance(sampler.site[1], cst.Call) or not _shuffles(sampler.site[1]):
            return
        if ctx.module.module_fact("TL502 set_epoch anywhere", _sets_epoch_anywhere):
            return
        found = _epoch_loop(ctx.module, loader, built_by=factory)
        if found is None:
            return
        (epoch_scope, epoch_loop), inner = found
        name = next((
            event.targets[0] for event in scope.events
            if isinstance(event, AssignEvent) and isinstance(event.node, (cst.Assign, cst.AnnAssign)) and event.node.value is factory.node
            and len(event.targets) == 1 and _iterates(event.value, loader)
        ), None)  # `loader, sampler = make_loader(...)`: the name the loader is bound to
        ctx.report(
            factory.node,
            f"`{written(factory)}` returns a DataLoader with a shuffling `DistributedSampler`, and nothing calls "
            f"`set_epoch`: {_passes(inner)} the loop on line {ctx.line_of((epoch_scope.chunk, epoch_loop.node))} "
            f"replays the same order on every rank",
            evidence=[
                (sampler.site, "a shuffling DistributedSampler"),
                ((loader.chunk, loader.node), "the DataLoader that draws from it"),
                *inner,
                ((epoch_scope.chunk, epoch_loop.node), "the epoch loop, with no `set_epoch`"),
            ],
            help=f"call `{name or 'loader'}.sampler.set_epoch(epoch)` {_where_to_set(epoch_scope, epoch_loop, name, inner)}",
            fix=ctx.fix(
                f"call `{name}.sampler.set_epoch(...)` at the top of the epoch loop",
                [_insert_set_epoch(ctx, epoch_scope, epoch_loop, f"{name}.sampler")], safe=True,
            ) if name and _offers_fix(inner) else None,
        )

    def _check_returned_loader(self, ctx: RuleContext, scope: ScopeAnalysis, call: CallEvent, fact: ShardedLoaderFact) -> None:
        """`engine, optimizer, loader, _ = deepspeed.initialize(..., training_data=dataset)`: the library builds the
        loader and its shuffling DistributedSampler, and leaves the sampler's epoch to the caller."""
        dataset = call.keyword(fact.dataset)
        if dataset is None or _false(dataset.value) or ctx.module.module_fact("TL502 set_epoch anywhere", _sets_epoch_anywhere):
            return
        name = _unpacked_at(scope, call, fact.position)
        if name is None:
            return
        epoch_loop = next((
            loop.parent for loop in scope.loops
            if loop.parent is not None and isinstance(loop.node, cst.For)
            and any(isinstance(part, cst.Name) and part.value == name for part in peeled(loop.node.iter))
            and not _bound_inside(scope, loop.parent, name)
        ), None)
        if epoch_loop is None:
            return
        epoch_scope = scope
        inner = [((scope.chunk, loop.node), "iterated once per epoch") for loop in scope.loops if loop.parent is epoch_loop][:1]
        library = fact.callee.split(".", 1)[0]
        ctx.report(
            call.node,
            f"`{name}`, the loader `{written(call)}` returns, draws from a shuffling `DistributedSampler` ({library} builds it "
            f"in `{name}.{fact.sampler}`) whose order only `set_epoch` changes, and nothing calls it: every epoch of the "
            f"loop on line {ctx.line_of((epoch_scope.chunk, epoch_loop.node))} replays the same order on every rank",
            evidence=[
                ((call.chunk, dataset), f"the dataset, which {library} loads through a DistributedSampler ({fact.source.split(':', 1)[0]})"),
                *inner,
                ((epoch_scope.chunk, epoch_loop.node), "the epoch loop, with no `set_epoch`"),
            ],
            help=f"call `{name}.{fact.sampler}.set_epoch(epoch)` {_where_to_set(epoch_scope, epoch_loop, name)}",
            fix=ctx.fix(
                f"call `{name}.{fact.sampler}.set_epoch(...)` at the top of the epoch loop",
                [_insert_set_epoch(ctx, epoch_scope, epoch_loop, f"{name}.{fact.sampler}")], safe=True,
            ),
        )

    def _check_unseen_loaders(self, ctx: RuleContext, scope: ScopeAnalysis, parallel: CallEvent) -> None:
        """The uncertain tier: a data-parallel training file that builds no loader and no sampler of its
        own iterates one handed to it (`data.train_loader`) once per epoch, and nothing calls `set_epoch`.
        Whether its sampler is a shuffling DistributedSampler is decided elsewhere: a note that says so."""
        module = ctx.module
        if is_test_file(module.path) or module.module_fact("TL502 builds loaders or samplers", _builds_loaders_or_samplers) or module.module_fact(
            "TL502 set_epoch anywhere", _sets_epoch_anywhere
        ):
            return  # (a test suite's helpers run a few tiny epochs: not a run that an unseen sampler would cost)
        for loop in scope.loops:
            part = _unseen_loader(scope, loop)
            if part is None or loop.parent is None:
                continue
            text = shortened(scope.chunk.code_for(part), 48)
            ctx.report(
                part,
                f"each epoch of the loop on line {ctx.line_of((scope.chunk, loop.parent.node))} trains on `{text}`, whose "
                f"sampler this file cannot see, and {_describe_parallel(parallel)}: if it is a shuffling "
                "`DistributedSampler`, nothing calls `set_epoch` and every epoch replays the same order on every rank",
                evidence=[
                    ((parallel.chunk, parallel.node), "data-parallel training"),
                    ((scope.chunk, loop.parent.node), "the epoch loop, with no `set_epoch`"),
                    ((scope.chunk, loop.node), "iterated once per epoch, with a backward in each step"),
                ],
                severity=Severity.NOTE,
                help=f"if `{text}` has a DistributedSampler, call `{text}.sampler.set_epoch(epoch)` at the top of the epoch loop",
            )

    def _check_sharding_loader(self, ctx: RuleContext, scope: ScopeAnalysis, loader: CallEvent, use_ddp: cst.Arg) -> None:
        """A loader that builds its own shuffling DistributedSampler (DGL's with `use_ddp=True`), iterated
        by an inner loop of the function that builds it: its epoch is the loader's to set."""
        if ctx.module.module_fact("TL502 set_epoch anywhere", _sets_epoch_anywhere):
            return
        name = _bound_name(scope, loader)
        inner = next((loop for loop in scope.loops if loop.parent is not None and name is not None and isinstance(loop.node, cst.For)
                      and any(isinstance(part, cst.Name) and part.value == name for part in peeled(loop.node.iter))), None)
        if inner is None or inner.parent is None:
            return
        epoch = inner.parent
        fact = call_fact(loader.callee, DDP_SAMPLER_WHEN)
        assert fact is not None, "_shards_with_its_own_sampler: a loader of the table"
        always = isinstance(use_ddp.value, cst.Name) and use_ddp.value.value == "True"
        flag = f"{fact.arguments[0]}={' '.join(ctx.chunk.code_for(use_ddp.value).split())}"
        condition = "" if always else f" (under the condition of `{flag}`: the loader allows it only then)"
        ctx.report(
            loader.node,
            f"`{written(loader)}` splits the data across ranks with a shuffling `DistributedSampler` of its own "
            f"(`{flag}`), whose order only `{name}.set_epoch` changes, and nothing calls it: "
            f"every epoch of the loop on line {ctx.line_of((scope.chunk, epoch.node))} replays the same order on every rank",
            evidence=[
                ((loader.chunk, use_ddp), f"when true, a DistributedSampler inside the loader ({fact.source.split(':', 1)[0]})"),
                ((scope.chunk, inner.node), "iterated once per epoch"),
                ((scope.chunk, epoch.node), "the epoch loop, with no `set_epoch`"),
            ],
            help=f"call `{name}.set_epoch(epoch)` at the top of the epoch loop{condition}",
            fix=ctx.fix(
                f"call `{name}.set_epoch(...)` at the top of the epoch loop", [_insert_set_epoch(ctx, scope, epoch, str(name))], safe=True,
            ) if always else None,
        )

    def _report(self, ctx: RuleContext, scope: ScopeAnalysis, sampler: CallEvent, loader: CallEvent, epoch: tuple, inner: list) -> None:
        epoch_scope, epoch_loop = epoch
        name = _bound_name(scope, sampler)
        ctx.report(
            sampler.node,
            f"`{written(sampler)}` shuffles with a seed that only `set_epoch` changes, and nothing calls "
            f"`set_epoch`: {_passes(inner)} the loop on line {ctx.line_of((epoch_scope.chunk, epoch_loop.node))} "
            f"replays the same order on every rank",
            evidence=[
                ((sampler.chunk, sampler.node), "a shuffling DistributedSampler"),
                ((loader.chunk, loader.node), "the DataLoader that draws from it"),
                *inner,
                ((epoch_scope.chunk, epoch_loop.node), "the epoch loop, with no `set_epoch`"),
            ],
            help=f"call `{name or 'sampler'}.set_epoch(epoch)` {_where_to_set(epoch_scope, epoch_loop, name, inner)}",
            fix=ctx.fix(
                f"call `{name}.set_epoch(...)` at the top of the epoch loop", [_insert_set_epoch(ctx, epoch_scope, epoch_loop, name)], safe=True,
            ) if name and _offers_fix(inner) else None,
        )


def _offers_fix(inner: Sequence) -> bool:
    """A line at the top of the loop fixes an epoch loop, not the step loop of a refilled iterator."""
    return all(note != _REFILLED for _, note in inner)


def _builds_shuffling_sampler(call: CallEvent) -> bool:
    result = call.result
    if Tag.SAMPLER_DISTRIBUTED not in result.tags or result.site is None or result.site[1] is not call.node:
        return False
    return _shuffles(call.node)


# Classes whose instances train data-parallel: an `isinstance` check against one says the file's model may be one.
_DATA_PARALLEL_CLASSES = frozenset({"DistributedDataParallel", "FullyShardedDataParallel"})
_DATA_PARALLEL_OPTIMIZERS = frozenset({"horovod.torch.DistributedOptimizer"})


def _data_parallel_evidence(module: ModuleView) -> CallEvent | None:
    """What shows this file trains data-parallel: a DDP/FSDP wrap, an `isinstance(model, DistributedDataParallel)`
    that unwraps one made elsewhere, or Horovod's averaging optimizer."""
    if module.ddp_wraps:
        return module.ddp_wraps[0]
    for call in module.all_calls():
        if call.callee in _DATA_PARALLEL_OPTIMIZERS:
            return call
        if call.callee == "isinstance" and len(call.arg_nodes) == 2:
            checked = dotted(call.arg_nodes[1].value)
            canonical = module.summary.canonical(checked) if checked else ""
            if canonical.startswith(("torch.", "apex.")) and canonical.rsplit(".", 1)[-1] in _DATA_PARALLEL_CLASSES:
                return call
    return None


def _describe_parallel(call: CallEvent) -> str:
    line = call.chunk.line_of(call.node)
    if call.callee == "isinstance":
        return f"the model may be a DistributedDataParallel (line {line})"
    return f"the training is data-parallel (`{shortened(call.chunk.code_for(call.node), 40)}`, line {line})"


def _builds_loaders_or_samplers(module: ModuleView) -> bool:
    return any(
        (call.callee is not None and is_dataloader(call.callee)) or Tag.SAMPLER_DISTRIBUTED in call.result.tags
        or _imported_loader_factory_of(module, call) is not None or call_fact(call.callee, DDP_SAMPLER_WHEN) is not None
        for call in module.all_calls()
    )


def _unseen_loader(scope: ScopeAnalysis, loop: Loop) -> cst.BaseExpression | None:
    """What a training loop nested in another iterates, when nothing is known of it (a loader handed in
    through an object: `data.train_loader`, `self.loaders["train"]`)."""
    if not isinstance(loop.node, cst.For) or not any(is_backward(call) for call in calls_in(scope, loop)):
        return None
    parts = [part for part in peeled(loop.node.iter) if not isinstance(part, (cst.Integer, cst.SimpleString))]
    if len(parts) != 1 or not isinstance(parts[0], (cst.Name, cst.Attribute, cst.Subscript)):
        return None
    value = scope.value_at(parts[0])
    return parts[0] if value is None or not value.tags else None


def _shards_with_its_own_sampler(call: CallEvent) -> cst.Arg | None:
    """The `use_ddp=...` argument of a library loader that then shards through a DistributedSampler it
    builds (analysis/libraries.py's CALL_FACTS), when it may be true and the loader shuffles."""
    fact = call_fact(call.callee, DDP_SAMPLER_WHEN)
    flag = call.keyword(fact.arguments[0]) if fact is not None and fact.arguments else None
    shuffle = call.keyword("shuffle")
    if flag is None or shuffle is None or _false(flag.value) or _false(shuffle.value):
        return None
    return flag


def _false(node: cst.BaseExpression) -> bool:
    return (isinstance(node, cst.Name) and node.value in {"False", "None"}) or (isinstance(node, cst.Integer) and node.value == "0")


def _imported_loader_factory(ctx: RuleContext, call: CallEvent) -> CallEvent | None:
    return _imported_loader_factory_of(ctx.module, call)


def _imported_loader_factory_of(module: ModuleView, call: CallEvent) -> CallEvent | None:
    """The DataLoader call of another file that ``call`` (a function defined there) returns: its result,
    or one element of the tuple it returns (``return loader, sampler``)."""
    if call.function is None or not module.summary.defined_elsewhere(call.function):
        return None
    for returned in (call.result, *(call.result.items or ())):
        detail = returned.detail
        if (
            isinstance(detail, CallEvent) and detail.chunk.origin is not None and detail.chunk.origin != module.origin
            and detail.callee is not None and is_dataloader(detail.callee)
        ):
            return detail
    return None


def _shuffles(node: cst.Call) -> bool:
    for arg in node.args:
        if arg.keyword is not None and arg.keyword.value == "shuffle":
            return not (isinstance(arg.value, cst.Name) and arg.value.value == "False")
    return True


def _sets_epoch_anywhere(module: ModuleView) -> bool:
    """A `set_epoch` call in this file, or in a helper of the project's other files that it calls
    (pycls' `data_loader.shuffle(loader, cur_epoch)` sets the sampler's epoch in `loader.py`)."""
    return next(_epoch_setters(module), False) is not False


def _set_epoch_calls(module: ModuleView) -> list[CallEvent] | None:
    """The file's `set_epoch` calls, or None when a helper of another file it calls sets an epoch too."""
    setters = []
    for setter in _epoch_setters(module):
        if setter is None:
            return None
        setters.append(setter)
    return setters


def _epoch_setters(module: ModuleView) -> Iterator[CallEvent | None]:
    """Each `set_epoch` call of the file, in order, and None for each call of another file's helper that makes one."""
    for call in module.all_calls():
        if call.method == "set_epoch":
            yield call
        elif call.function is not None and module.summary.defined_elsewhere(call.function):
            helper = call.function.analysis(module.summary)
            if helper is not None and any(inner.method == "set_epoch" for inner in calls_in(helper, None)):
                yield None


def _loaders_using(module: ModuleView, sampler: CallEvent) -> list[CallEvent]:
    loaders = []
    for call in module.all_calls():
        if call.callee is not None and is_dataloader(call.callee):
            value = call.kwargs.get("sampler") or call.kwargs.get("batch_sampler")
            if value is not None and value.site is not None and value.site[1] is sampler.node:
                loaders.append(call)
    return loaders


def _iterates(value: Value, loader: CallEvent) -> bool:
    return comes_from_call(value, loader.node, by_site=True)


def _epoch_loop(module: ModuleView, loader: CallEvent, built_by: CallEvent | None = None):
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
            # loop: each refill starts another pass, in the order of the first unless an epoch is set before it,
            # which a line at the top of the step loop would not do (reported, with no fix).
            loop = call.context.loop
            if (
                call.callee == "iter" and call.args and loop is not None and not call.context.conditions_inside(loop)
                and _iterates(call.args[0], loader) and not _builds_one_loader_per_iteration(scope, loop, built)
            ):
                return (scope, loop), [((call.chunk, call.node), "a new iterator over it every epoch")]
            if (
                call.callee == "iter" and call.args and loop is not None and call.context.conditions_inside(loop)
                and _iterates(call.args[0], loader) and repeats_per_step(scope, loop) is not None
                and not _builds_one_loader_per_iteration(scope, loop, built)
            ):
                return (scope, loop), [((call.chunk, call.node), _REFILLED)]
            caller = _called_in_loop(module, scope) if call.callee == "iter" and call.args and loop is None and call.context.conditions else None
            if caller is not None and _iterates(call.args[0], loader) and repeats_per_step(caller.scope, caller.context.loops[-1]) is not None:
                # `except StopIteration: self.batches = iter(self.loader)` in a method a training loop calls every step
                return (caller.scope, caller.context.loops[-1]), [
                    ((call.chunk, call.node), _REFILLED), ((caller.chunk, caller.node), f"`{written(caller)}` runs every step"),
                ]
        for loop in scope.loops:
            handed = _iteration_of(module, scope, loop, loader)
            if handed is None or _runs_without_grad(scope, loop):
                continue  # an evaluation's sums and means do not depend on the order it reads the data in
            if loop.parent is not None:
                if not _builds_one_loader_per_iteration(scope, loop.parent, built):
                    return (scope, loop.parent), [((scope.chunk, loop.node), "iterated once per epoch")]
                continue
            caller = _called_in_loop(module, scope)
            if caller is not None:
                return (caller.scope, caller.context.loops[-1]), [
                    ((caller.chunk, caller.node), f"`{written(caller)}` iterates it once per epoch"),
                    *_pass_counted(scope, loop),
                ]
    return None


def _runs_without_grad(scope: ScopeAnalysis, loop: Loop) -> bool:
    """Every call the loop makes runs under ``no_grad()``/``inference_mode()``: a validation pass, whose loss and
    metrics are sums over the whole shard, whatever order the sampler yields it in."""
    calls = [call for call in scope.calls() if loop in call.context.loops]
    return bool(calls) and all(call.context.grad_off is not None for call in calls)


def _pass_counted(scope: ScopeAnalysis, loop: Loop) -> list:
    """Where the function that iterates the loader once per call counts that pass (`self.epochs += 1` after
    its loop): the epoch number `set_epoch` wants is at hand there."""
    function = scope.function
    if function is None or not isinstance(function.node.body, cst.IndentedBlock):
        return []
    statements = list(function.node.body.body)
    after = statements[statements.index(loop.node) + 1:] if loop.node in statements else []
    for statement in after:
        if not isinstance(statement, cst.SimpleStatementLine):
            continue
        for small in statement.body:
            if (
                isinstance(small, cst.AugAssign) and isinstance(small.operator, cst.AddAssign)
                and isinstance(small.value, cst.Integer) and small.value.value == "1"
                and isinstance(small.target, cst.Attribute)
            ):
                return [((scope.chunk, small), f"`{scope.chunk.code_for(small.target)}` counts each pass over it: the epoch `set_epoch` needs")]
    return []


def _builds_one_loader_per_iteration(scope: ScopeAnalysis, loop: Loop, loader: CallEvent) -> bool:
    """The loader (or the factory call that builds it) is built inside ``loop`` and the loop does not
    train: a loop over configurations or datasets that takes a batch from each new loader (nanotron's
    dataloader tests), not epochs of one. A loader rebuilt every epoch of a training loop still
    replays one order, and still counts."""
    return loader.scope is scope and loop in loader.context.loops and repeats_per_step(scope, loop) is None


def _passes(inner: Sequence) -> str:
    return "every epoch of" if _offers_fix(inner) else "every pass over the loader that a refill starts in"


def _where_to_set(scope: ScopeAnalysis, loop: Loop, name: str | None, inner: Sequence = ()) -> str:
    if not _offers_fix(inner):
        return "with a count of the passes so far, right before each refill's `iter(...)`"
    if name is not None and _bound_inside(scope, loop, name):
        return "every epoch, right after it is built"
    return "at the top of the epoch loop"


def _bound_inside(scope: ScopeAnalysis, loop: Loop, name: str) -> bool:
    return any(isinstance(event, AssignEvent) and name in event.targets and loop in event.context.loops for event in scope.events)


def _iteration_of(module: ModuleView, scope: ScopeAnalysis, loop: Loop, loader: CallEvent) -> bool | None:
    """Does ``loop`` iterate ``loader``: directly, through a parameter every caller fills with it, or
    through ``self.<attribute>`` that ``__init__`` takes from the constructor's argument."""
    if _iterates(loop.iterable, loader):
        return True
    if scope.function is None or not isinstance(loop.node, cst.For):
        return None
    for part in peeled(loop.node.iter):
        if isinstance(part, cst.Subscript):
            if _entry_of_passed_dict(module, scope, part, loader):
                return True
            continue
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


def _entry_of_passed_dict(module: ModuleView, scope: ScopeAnalysis, part: cst.Subscript, loader: CallEvent) -> bool:
    """``self.data_loader["train"]`` (or ``loaders["train"]`` of a parameter) where what fills the attribute
    or the parameter is a dict literal whose ``"train"`` entry is the loader: ParallelWaveGAN's trainer
    takes ``data_loader={"train": DataLoader(...), "dev": DataLoader(...)}``."""
    key = _literal_key(part)
    holder = dotted(part.value)
    function = scope.function
    if key is None or holder is None or function is None:
        return False
    if holder in scope.params:
        target, passes = function, [(call, holder) for call in module.calls_of(function)]
    elif holder.startswith("self.") and function.owner is not None:
        init = function.owner.methods.get("__init__")
        parameter = _parameter_bound_to(module, init, holder) if init is not None else None
        if init is None or parameter is None:
            return False
        constructions = [call for call in module.all_calls() if call.callee and module.summary.local_class(call.callee) is function.owner]
        target, passes = init, [(call, parameter) for call in constructions]
    else:
        return False
    for call, parameter in passes:
        given = passed_expression(call, target, parameter)
        if isinstance(given, cst.Dict) and any(
            isinstance(element, cst.DictElement) and string_value(element.key) == key and element.value is loader.node
            for element in given.elements
        ):
            return True
    return False


def _parameter_bound_to(module: ModuleView, init, attribute: str) -> str | None:
    """The parameter of ``__init__`` that ``self.<attribute> = <parameter>`` binds, if one does."""
    analysis = init.analysis(module.summary)
    if analysis is None:
        return None
    for event in analysis.events:
        if isinstance(event, AssignEvent) and event.targets == (attribute,) and isinstance(event.value_node, cst.Name):
            return event.value_node.value if event.value_node.value in analysis.params else None
    return None


def _literal_key(part: cst.Subscript) -> str | None:
    if len(part.slice) != 1 or not isinstance(part.slice[0].slice, cst.Index):
        return None
    return string_value(part.slice[0].slice.value)


def _called_in_loop(module: ModuleView, scope: ScopeAnalysis, depth: int = 0) -> CallEvent | None:
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


def _unpacked_at(scope: ScopeAnalysis, call: CallEvent, position: int) -> str | None:
    """The name the element ``position`` of ``call``'s returned tuple is unpacked into (`a, b, loader, c = call(...)`)."""
    for event in scope.events:
        node = event.node
        if isinstance(event, AssignEvent) and isinstance(node, cst.Assign) and node.value is call.node and len(node.targets) == 1:
            target = node.targets[0].target
            if isinstance(target, (cst.Tuple, cst.List)) and len(target.elements) > position:
                element = target.elements[position].value
                return element.value if isinstance(element, cst.Name) and element.value != "_" else None
    return None


def _bound_name(scope: ScopeAnalysis, sampler: CallEvent) -> str | None:
    for event in scope.events:
        if isinstance(event, AssignEvent) and event.value_node is sampler.node and len(event.targets) == 1:
            return event.targets[0]
    return None


def _insert_set_epoch(ctx: RuleContext, scope: ScopeAnalysis, loop: Loop, sampler_name: str) -> TextEdit | None:
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


_SPECTROGRAM_LOSSES = """
import torch.nn.functional as F


def spectrogram_loss(predicted, target):
    return F.mse_loss(predicted, target) + F.l1_loss(predicted, target)
"""
_SHARDED_VALIDATION = """
import torch
import torch.distributed as dist
from torch.utils.data import DataLoader
from torch.utils.data.distributed import DistributedSampler

from losses import spectrogram_loss


class SpectrogramTrainer:
    def __init__(self, model, optimizer, train_set, valid_set, batch_size):
        self.model = model
        self.optimizer = optimizer
        self.train_loader = DataLoader(train_set, batch_size=batch_size, sampler=DistributedSampler(train_set, shuffle=False))
        self.valid_set = valid_set
        self.batch_size = batch_size

    def validate(self):
        loader = DataLoader(self.valid_set, batch_size=self.batch_size, sampler=DistributedSampler(self.valid_set))
        self.model.eval()
        total = torch.zeros(2, device="cuda")
{valid_pass}
        dist.all_reduce(total)
        self.model.train()
        return (total[0] / total[1]).item()

    def fit(self, epochs):
        for epoch in range(epochs):
            for inputs, targets in self.train_loader:
                loss = spectrogram_loss(self.model(inputs.cuda()), targets.cuda())
                self.optimizer.zero_grad()
                loss.backward()
                self.optimizer.step()
            print(epoch, self.validate())
"""
_VALIDATION_PASS = """        with torch.no_grad():
            for inputs, targets in loader:
                total[0] += spectrogram_loss(self.model(inputs.cuda()), targets.cuda()) * len(inputs)
                total[1] += len(inputs)"""
_TUNING_PASS = """        for inputs, targets in loader:
            loss = spectrogram_loss(self.model(inputs.cuda()), targets.cuda())
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()
            total[0] += loss.detach() * len(inputs)
            total[1] += len(inputs)"""


MissingSetEpoch.MUST_FIRE = (
    Fires(  # twin: the per-epoch pass over that loader trains (backward and step): its order is the run's
        _SHARDED_VALIDATION.format(valid_pass=_TUNING_PASS),
        files={"losses.py": _SPECTROGRAM_LOSSES},
        at="        loader = DataLoader(self.valid_set, batch_size=self.batch_size, sampler=DistributedSampler(self.valid_set))",
    ),
    Fires(  # each refill of the step loop's iterator starts another pass over the same permutation
        """
        import torch
        from torch.utils.data import DataLoader
        from torch.utils.data.distributed import DistributedSampler

        from losses import consistency_loss


        class SemiSupervisedTrainer:
            def __init__(self, model, unlabeled, optimizer):
                self.model = model
                self.optimizer = optimizer
                self.loader = DataLoader(unlabeled, batch_size=64, sampler=DistributedSampler(unlabeled), drop_last=True)
                self.batches = iter(self.loader)

            def next_batch(self):
                try:
                    return next(self.batches)
                except StopIteration:
                    self.batches = iter(self.loader)
                    return next(self.batches)

            def train(self, steps):
                for step in range(steps):
                    weak, strong = self.next_batch()
                    loss = consistency_loss(self.model(weak), self.model(strong))
                    self.optimizer.zero_grad()
                    loss.backward()
                    self.optimizer.step()
        """,
        files={
            "losses.py": """
                import torch.nn.functional as F


                def consistency_loss(weak_logits, strong_logits):
                    targets = weak_logits.detach().softmax(-1)
                    return F.cross_entropy(strong_logits, targets)
            """,
        },
        no_fix=True,
    ),
    Fires(  # ignite runs every epoch of the loader inside `trainer.run`; the epoch is set once, before it
        """
        import ignite.distributed as idist
        from ignite.engine import Events
        from torch import nn, optim
        from torch.utils.data.distributed import DistributedSampler

        from trainers import setup_trainer


        def run(local_rank, config, model, dataloader_train):
            device = idist.device()
            model = idist.auto_model(model)
            optimizer = idist.auto_optim(optim.Adam(model.parameters(), lr=config.lr))
            trainer = setup_trainer(model, optimizer, nn.CrossEntropyLoss(), device)

            # set epoch for distributed sampler
            if idist.get_world_size() > 1 and isinstance(dataloader_train.sampler, DistributedSampler):
                dataloader_train.sampler.set_epoch(trainer.state.epoch - 1)

            @trainer.on(Events.EPOCH_COMPLETED)
            def log_epoch():
                print(trainer.state.epoch, trainer.state.output)

            trainer.run(dataloader_train, max_epochs=config.max_epochs)
        """,
        files={"trainers.py": """
        from ignite.engine import Engine


        def setup_trainer(model, optimizer, loss_fn, device):
            def train_step(engine, batch):
                model.train()
                images, labels = batch[0].to(device), batch[1].to(device)
                loss = loss_fn(model(images), labels)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                return {"train_loss": loss.item()}

            return Engine(train_step)
        """},
        at="dataloader_train.sampler.set_epoch(trainer.state.epoch - 1)",
    ),
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
    Fires(  # a trainer takes a dict of loaders and walks `self.data_loader["train"]` until it has run enough steps
        """
        import torch
        from torch.utils.data import DataLoader
        from torch.utils.data.distributed import DistributedSampler


        class Trainer:
            def __init__(self, steps, data_loader, model, optimizer, config):
                self.steps = steps
                self.data_loader = data_loader
                self.model = model
                self.optimizer = optimizer
                self.config = config
                self.finish_train = False

            def run(self):
                while True:
                    self._train_epoch()
                    if self.finish_train:
                        break

            def _train_epoch(self):
                for batch in self.data_loader["train"]:
                    loss = self.model(*batch).mean()
                    self.optimizer.zero_grad()
                    loss.backward()
                    self.optimizer.step()
                    self.steps += 1
                    self.finish_train = self.steps >= self.config["train_max_steps"]


        def main(args, config, datasets, model, optimizer):
            train_sampler, dev_sampler = None, None
            if args.distributed:
                train_sampler = DistributedSampler(dataset=datasets["train"], num_replicas=args.world_size, rank=args.rank, shuffle=True)
                dev_sampler = DistributedSampler(dataset=datasets["dev"], num_replicas=args.world_size, rank=args.rank, shuffle=False)
            data_loader = {
                "train": DataLoader(datasets["train"], shuffle=not args.distributed, sampler=train_sampler, batch_size=8),
                "dev": DataLoader(datasets["dev"], shuffle=False, sampler=dev_sampler, batch_size=8),
            }
            trainer = Trainer(steps=0, data_loader=data_loader, model=model, optimizer=optimizer, config=config)
            trainer.run()
        """,
        at="train_sampler = DistributedSampler(dataset=datasets[\"train\"], num_replicas=args.world_size, rank=args.rank, shuffle=True)",
    ),
    Fires(  # DGL's loader with use_ddp=True shards through a DistributedSampler of its own; only loader.set_epoch advances it
        """
        import dgl
        import torch
        import torch.nn.functional as F
        from torch.nn.parallel import DistributedDataParallel


        def run(proc_id, n_gpus, args, graph, train_idx, labels, model):
            sampler = dgl.dataloading.MultiLayerNeighborSampler([10, 25])
            loader = dgl.dataloading.NodeDataLoader(
                graph, train_idx, sampler, use_ddp=n_gpus > 1, batch_size=1024, shuffle=True, drop_last=False,
            )
            model = DistributedDataParallel(model, device_ids=[proc_id])
            optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
            for epoch in range(args.n_epochs):
                model.train()
                for input_nodes, seeds, blocks in loader:
                    loss = F.cross_entropy(model(blocks), labels[seeds])
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
        """,
        no_fix=True,  # set_epoch raises unless use_ddp is true: guarding it like use_ddp is the user's call
    ),
    Fires(
        """
        import dgl


        def train(graph, train_idx, sampler, model, optimizer, epochs):
            loader = dgl.dataloading.DataLoader(graph, train_idx, sampler, use_ddp=True, batch_size=512, shuffle=True)
            for epoch in range(epochs):
                for input_nodes, output_nodes, blocks in loader:
                    model(blocks).sum().backward()
                    optimizer.step()
        """,
        fixed="""
        import dgl


        def train(graph, train_idx, sampler, model, optimizer, epochs):
            loader = dgl.dataloading.DataLoader(graph, train_idx, sampler, use_ddp=True, batch_size=512, shuffle=True)
            for epoch in range(epochs):
                loader.set_epoch(epoch)
                for input_nodes, output_nodes, blocks in loader:
                    model(blocks).sum().backward()
                    optimizer.step()
        """,
    ),
    Fires(  # the uncertain tier: a trainer that unwraps a DDP model is handed its loaders; their sampler is unseen here
        """
        import torch


        class SimpleTrainer:
            def __init__(self, package):
                self.elements, self.params = package

            def init_training(self):
                model = self.elements["model"]
                if isinstance(model, torch.nn.parallel.DistributedDataParallel):
                    self.elements["model"] = model.module
                    self.elements["model_forward"] = model

            def train_one_batch(self, batch):
                inputs, targets = batch
                optimizer = self.elements["optimizer"]
                optimizer.zero_grad()
                loss = self.elements["model"].get_loss(self.elements["model_forward"](inputs), targets)
                loss.backward()
                optimizer.step()
                return loss.item()

            def run(self):
                self.init_training()
                data = self.elements["data"]
                for this_epoch in range(self.params["start_epoch"], self.params["epochs"]):
                    for this_iter, batch in enumerate(data.train_loader, 0):
                        self.train_one_batch(batch)
        """,
        severity=Severity.NOTE,
        at="for this_iter, batch in enumerate(data.train_loader, 0):",
    ),
    Fires(  # the data module hands back the sampler beside the loader; the epoch loop uses the loader only
        """
        import torch
        import torch.distributed as dist
        import torch.nn.functional as F
        from torch.nn.parallel import DistributedDataParallel

        from data import get_dataloader


        def train(model, dataset, args):
            dist.init_process_group("nccl")
            rank = dist.get_rank()
            model = DistributedDataParallel(model.cuda(rank), device_ids=[rank])
            train_loader, train_sampler = get_dataloader(dataset, args.batch_size, rank, dist.get_world_size())
            optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
            for epoch in range(args.epochs):
                for images, labels in train_loader:
                    loss = F.cross_entropy(model(images.cuda(rank)), labels.cuda(rank))
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
        """,
        files={"data.py": """
            from torch.utils.data import DataLoader
            from torch.utils.data.distributed import DistributedSampler


            def get_dataloader(dataset, batch_size, rank, world_size):
                sampler = DistributedSampler(dataset, num_replicas=world_size, rank=rank, shuffle=True)
                loader = DataLoader(dataset, batch_size=batch_size, sampler=sampler, pin_memory=True, num_workers=4)
                return loader, sampler
        """},
        fixed="""
        import torch
        import torch.distributed as dist
        import torch.nn.functional as F
        from torch.nn.parallel import DistributedDataParallel

        from data import get_dataloader


        def train(model, dataset, args):
            dist.init_process_group("nccl")
            rank = dist.get_rank()
            model = DistributedDataParallel(model.cuda(rank), device_ids=[rank])
            train_loader, train_sampler = get_dataloader(dataset, args.batch_size, rank, dist.get_world_size())
            optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
            for epoch in range(args.epochs):
                train_loader.sampler.set_epoch(epoch)
                for images, labels in train_loader:
                    loss = F.cross_entropy(model(images.cuda(rank)), labels.cuda(rank))
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
        """,
        at="get_dataloader(dataset, args.batch_size, rank, dist.get_world_size())",
    ),
    Fires(  # DeepSpeed builds the loader from `training_data`, with a DistributedSampler whose epoch it never sets
        """
        import argparse

        import deepspeed
        import torch

        from models import ResNet18
        from data import cifar10


        def main():
            parser = argparse.ArgumentParser()
            parser.add_argument("--local_rank", type=int, default=-1)
            parser.add_argument("--epochs", type=int, default=30)
            parser = deepspeed.add_config_arguments(parser)
            args = parser.parse_args()
            net = ResNet18()
            engine, optimizer, trainloader, _ = deepspeed.initialize(
                args=args, model=net, model_parameters=net.parameters(), training_data=cifar10(train=True)
            )
            criterion = torch.nn.CrossEntropyLoss()
            for epoch in range(args.epochs):
                for images, labels in trainloader:
                    loss = criterion(engine(images.to(engine.local_rank)), labels.to(engine.local_rank))
                    engine.backward(loss)
                    engine.step()
        """,
        fixed="""
        import argparse

        import deepspeed
        import torch

        from models import ResNet18
        from data import cifar10


        def main():
            parser = argparse.ArgumentParser()
            parser.add_argument("--local_rank", type=int, default=-1)
            parser.add_argument("--epochs", type=int, default=30)
            parser = deepspeed.add_config_arguments(parser)
            args = parser.parse_args()
            net = ResNet18()
            engine, optimizer, trainloader, _ = deepspeed.initialize(
                args=args, model=net, model_parameters=net.parameters(), training_data=cifar10(train=True)
            )
            criterion = torch.nn.CrossEntropyLoss()
            for epoch in range(args.epochs):
                trainloader.data_sampler.set_epoch(epoch)
                for images, labels in trainloader:
                    loss = criterion(engine(images.to(engine.local_rank)), labels.to(engine.local_rank))
                    engine.backward(loss)
                    engine.step()
        """,
    ),
)

MissingSetEpoch.MUST_NOT_FIRE = (
    Quiet(  # a validation loader read under no_grad(): a loss summed over the shard does not depend on its order
        _SHARDED_VALIDATION.format(valid_pass=_VALIDATION_PASS),
        files={"losses.py": _SPECTROGRAM_LOSSES},
    ),
    Quiet(  # the same trainer counts its passes and sets the sampler's epoch before each refill
        """
        import torch
        from torch.utils.data import DataLoader
        from torch.utils.data.distributed import DistributedSampler

        from losses import consistency_loss


        class SemiSupervisedTrainer:
            def __init__(self, model, unlabeled, optimizer):
                self.model = model
                self.optimizer = optimizer
                self.loader = DataLoader(unlabeled, batch_size=64, sampler=DistributedSampler(unlabeled), drop_last=True)
                self.batches = iter(self.loader)
                self.passes = 0

            def next_batch(self):
                try:
                    return next(self.batches)
                except StopIteration:
                    self.passes += 1
                    self.loader.sampler.set_epoch(self.passes)
                    self.batches = iter(self.loader)
                    return next(self.batches)

            def train(self, steps):
                for step in range(steps):
                    weak, strong = self.next_batch()
                    loss = consistency_loss(self.model(weak), self.model(strong))
                    self.optimizer.zero_grad()
                    loss.backward()
                    self.optimizer.step()
        """,
        files={
            "losses.py": """
                import torch.nn.functional as F


                def consistency_loss(weak_logits, strong_logits):
                    targets = weak_logits.detach().softmax(-1)
                    return F.cross_entropy(strong_logits, targets)
            """,
        },
    ),
    Quiet(  # the epoch is set once for the start, and again by a handler at the start of every epoch
        """
        from ignite.engine import Events


        def run(config, loader, trainer):
            loader.sampler.set_epoch(0)
            trainer.add_event_handler(Events.EPOCH_STARTED, lambda engine: loader.sampler.set_epoch(engine.state.epoch - 1))
            trainer.run(loader, max_epochs=config.max_epochs)
        """
    ),
    Quiet(  # the fix: a handler of EPOCH_STARTED sets the epoch at the start of every epoch
        """
        import ignite.distributed as idist
        from ignite.engine import Events
        from torch import nn, optim
        from torch.utils.data.distributed import DistributedSampler

        from trainers import setup_trainer


        def run(local_rank, config, model, dataloader_train):
            device = idist.device()
            model = idist.auto_model(model)
            optimizer = idist.auto_optim(optim.Adam(model.parameters(), lr=config.lr))
            trainer = setup_trainer(model, optimizer, nn.CrossEntropyLoss(), device)

            @trainer.on(Events.EPOCH_STARTED)
            def set_epoch():
                if idist.get_world_size() > 1 and isinstance(dataloader_train.sampler, DistributedSampler):
                    dataloader_train.sampler.set_epoch(trainer.state.epoch - 1)

            trainer.run(dataloader_train, max_epochs=config.max_epochs)
        """,
        files={"trainers.py": """
        from ignite.engine import Engine


        def setup_trainer(model, optimizer, loss_fn, device):
            def train_step(engine, batch):
                model.train()
                images, labels = batch[0].to(device), batch[1].to(device)
                loss = loss_fn(model(images), labels)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                return {"train_loss": loss.item()}

            return Engine(train_step)
        """},
    ),
    Quiet(  # one epoch only: setting it once is setting it every epoch
        """
        from ignite.engine import Engine, Events


        def fine_tune(model, train_step, loader, epoch):
            trainer = Engine(train_step)
            trainer.add_event_handler(Events.ITERATION_COMPLETED(every=100), lambda engine: print(engine.state.output))
            loader.sampler.set_epoch(epoch)
            trainer.run(loader, max_epochs=1)
        """
    ),
    Quiet(  # the same trainer setting the epoch of the sampler it is handed; and one with no data parallelism in sight
        """
        import torch


        class SimpleTrainer:
            def __init__(self, package):
                self.elements, self.params = package

            def run(self, model, optimizer):
                if isinstance(model, torch.nn.parallel.DistributedDataParallel):
                    model = model.module
                data = self.elements["data"]
                for this_epoch in range(self.params["epochs"]):
                    if isinstance(data.train_loader.sampler, torch.utils.data.distributed.DistributedSampler):
                        data.train_loader.sampler.set_epoch(this_epoch)
                    for batch in data.train_loader:
                        model(batch).mean().backward()
                        optimizer.step()
        """
    ),
    Quiet(  # no data parallelism in sight: a loader handed in needs no set_epoch
        """
        class Trainer:
            def run(self, model, optimizer, data, epochs):
                for epoch in range(epochs):
                    for batch in data.train_loader:
                        model(batch).mean().backward()
                        optimizer.step()
        """
    ),
    Quiet(  # the epoch set on the loader, as DGL wants it, under the condition use_ddp has
        """
        import dgl


        def train(graph, train_idx, sampler, model, optimizer, epochs, n_gpus):
            loader = dgl.dataloading.NodeDataLoader(graph, train_idx, sampler, use_ddp=n_gpus > 1, batch_size=512, shuffle=True)
            for epoch in range(epochs):
                if n_gpus > 1:
                    loader.set_epoch(epoch)
                for input_nodes, seeds, blocks in loader:
                    model(blocks).sum().backward()
                    optimizer.step()
        """
    ),
    Quiet(  # no use_ddp: DGL shuffles like a plain DataLoader; use_ddp without shuffle: one fixed order is wanted
        """
        import dgl


        def train(graph, train_idx, val_idx, sampler, model, optimizer, epochs):
            loader = dgl.dataloading.NodeDataLoader(graph, train_idx, sampler, use_ddp=False, batch_size=512, shuffle=True)
            val_loader = dgl.dataloading.NodeDataLoader(graph, val_idx, sampler, use_ddp=True, batch_size=512, shuffle=False)
            for epoch in range(epochs):
                for input_nodes, seeds, blocks in loader:
                    model(blocks).sum().backward()
                    optimizer.step()
                for input_nodes, seeds, blocks in val_loader:
                    model(blocks)
        """
    ),
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
    Quiet(  # the DeepSpeed loader's sampler gets its epoch; a second script hands DeepSpeed no dataset and builds its own loader
        """
        import deepspeed
        import torch


        def train(args, net, dataset, epochs):
            engine, optimizer, trainloader, _ = deepspeed.initialize(args=args, model=net, training_data=dataset)
            for epoch in range(epochs):
                trainloader.data_sampler.set_epoch(epoch)
                for batch in trainloader:
                    engine.backward(engine(batch))
                    engine.step()
        """,
    ),
    Quiet(
        """
        import deepspeed
        import torch
        from torch.utils.data import DataLoader


        def train(args, net, dataset, epochs):
            engine, optimizer, _, _ = deepspeed.initialize(args=args, model=net, model_parameters=net.parameters())
            loader = DataLoader(dataset, batch_size=8, shuffle=True)
            for epoch in range(epochs):
                for batch in loader:
                    engine.backward(engine(batch))
                    engine.step()
        """,
    ),
)
