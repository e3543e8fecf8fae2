"""The script asks for deterministic results and also turns on `cudnn.benchmark`, which undoes it.

`torch.backends.cudnn.deterministic = True` and `torch.use_deterministic_algorithms(True)` ask
for reproducible kernels. `torch.backends.cudnn.benchmark = True` asks cuDNN to time the
candidate convolution algorithms on the first batches and keep the fastest, and which one wins
varies from run to run: results change between runs that were meant to be identical, and the
debugging of "non-reproducible" experiments starts. When both are set on the same path, the
reproducibility request is not met. A request switched off again before benchmark mode is turned
on (`use_deterministic_algorithms(False)` after a reproducibility check) is no longer in force.
A request made in a seeding helper of another file counts where the script calls it, when it is
unconditional there or under `if deterministic:` with the call passing `deterministic=True`.
A framework trainer that sets both from its arguments counts as well: Lightning's
`Trainer(deterministic=True, benchmark=True)` asks for deterministic algorithms and turns benchmark
mode on in one call (analysis/frameworks.py, `TRAINER_CUDNN_SETTINGS`).

How to fix: set `cudnn.benchmark = True` only when determinism is not asked for (in the `else`
branch of the seeding code), or set it to `False` when seeding.
"""

from __future__ import annotations

from typing import TypeGuard

import libcst as cst

from trainlint.analysis.frameworks import trainer_cudnn_argument
from trainlint.rules import (
    AssignEvent,
    CallEvent,
    Condition,
    Event,
    Fires,
    ModuleView,
    Quiet,
    Rule,
    RuleContext,
    ScopeAnalysis,
    Severity,
    ordered_events,
)

_BENCHMARK = "torch.backends.cudnn.benchmark"
_DETERMINISTIC = "torch.backends.cudnn.deterministic"
_ALGORITHMS = "torch.use_deterministic_algorithms"


class ContradictoryDeterminism(Rule):
    code = "TL402"
    name = "contradictory-determinism"
    severity = Severity.WARNING

    def check_scope(self, ctx: RuleContext, scope: ScopeAnalysis) -> None:
        for call in scope.calls():
            self._check_trainer(ctx, call)
        benchmarks = [event for event in scope.events if _sets(event, _BENCHMARK)]
        if not benchmarks:
            return
        requests = ctx.module.module_wide("TL402 determinism requests", _determinism_requests)
        withdrawals = ctx.module.module_wide("TL402 determinism withdrawals", _determinism_withdrawals)
        seen_elsewhere = ctx.module.module_wide("TL402 determinism requests other functions see", _requests_seen_elsewhere)
        for benchmark in benchmarks:
            candidates = [r for r in requests if _same_path(benchmark, r) and not _withdrawn(r, benchmark, withdrawals)]
            # the request on the benchmark's own path first; one in another function only while it stays in
            # force when that function returns, and is not already paired with a benchmark of its own there
            request = next((r for r in candidates if r.scope is scope), None) or next(
                (r for r in candidates if any(r is seen for seen in seen_elsewhere)), None
            )
            if request is not None:
                self._report(ctx, benchmark, request)
            elif (helper := _requested_in_another_file(ctx, scope, benchmark)) is not None:
                self._report(ctx, benchmark, *helper)

    def _check_trainer(self, ctx: RuleContext, call: CallEvent) -> None:
        """A framework trainer built with a literal request for determinism and a literal `benchmark=True` in the same
        call (Lightning's `Trainer(deterministic=True, benchmark=True)`): it applies both to torch when it is built."""
        requested = trainer_cudnn_argument(call.callee, _ALGORITHMS, call.node)
        benchmark = trainer_cudnn_argument(call.callee, _BENCHMARK, call.node)
        if requested is None or benchmark is None or not _literal_true(benchmark[0].value):
            return
        value = requested[0].value
        if not (_literal_true(value) or (isinstance(value, cst.SimpleString) and value.evaluated_value == "warn")):
            return
        asked = call.chunk.code_for(requested[0]).strip().rstrip(",")
        ctx.report(
            benchmark[0],
            f"`benchmark=True` makes the trainer turn `torch.backends.cudnn.benchmark` on, which picks convolution algorithms by "
            f"timing them and differs from run to run, while `{asked}` in the same call asks it for deterministic algorithms: "
            "the runs meant to be reproducible are not",
            evidence=[
                ((call.chunk, requested[0]), f"determinism requested here ({requested[1]})"),
                ((call.chunk, benchmark[0]), f"and benchmark mode turned on in the same call ({benchmark[1]})"),
            ],
            chunk=call.chunk,
            help="leave `benchmark` unset (it is then False under `deterministic=True`) or set it to False",
        )

    def _report(self, ctx: RuleContext, benchmark: AssignEvent, request: Event, call: CallEvent | None = None) -> None:
        asked = " ".join(request.chunk.code_for(request.node).split())
        where = f"line {request.chunk.line_of(request.node)}"
        if call is not None:
            where = f"in `{_code(call)}`, called on line {call.chunk.line_of(call.node)}"
        ctx.report(
            benchmark.node,
            f"`{_code(benchmark)}` lets cuDNN pick convolution algorithms by timing them, which differs from run to "
            f"run, while `{asked}` ({where}) asks for deterministic results on the "
            f"same path: the runs meant to be reproducible are not",
            evidence=[
                ((call.chunk, call.node) if call is not None else None, "runs the helper that requests determinism"),
                ((request.chunk, request.node), "determinism requested here"),
                ((benchmark.chunk, benchmark.node), "and benchmark mode turned on on the same path"),
            ],
            chunk=benchmark.chunk,
            help="turn benchmark mode on only when determinism is not requested (or set it to False when seeding)",
        )


def _requested_in_another_file(ctx: RuleContext, scope: ScopeAnalysis, benchmark: AssignEvent) -> tuple[Event, CallEvent] | None:
    """A request in a helper of another workspace file that this scope calls before turning benchmark mode on
    (`init_seeds(seed, deterministic=True)`, then `cudnn.benchmark = True`), on the benchmark's path: the
    request is unconditional in the helper, or under `if <parameter>:` with the call passing `True` for it."""
    for event, chain in ordered_events(scope, None):
        if not chain or chain[0].chunk.line_of(chain[0].node) >= _line(benchmark) or _switch(event, "True") is None:
            continue
        if not ctx.in_another_file(event.chunk) or not _same_path(benchmark, chain[0]):
            continue
        if all(_given_true(link, condition) for link, condition in _conditions_on_the_way(chain, event)):
            return event, chain[0]
    return None


def _conditions_on_the_way(chain: tuple[CallEvent, ...], event: Event) -> list[tuple[CallEvent, Condition]]:
    """Each condition inside the helpers an event runs under, with the call that entered that helper."""
    return [(link, condition) for link, inner in zip(chain, (*chain[1:], event), strict=True) for condition in inner.context.conditions]


def _given_true(call: CallEvent, condition: Condition) -> bool:
    """`if deterministic:` in the helper, with the call passing the literal `True` for that parameter."""
    test = condition.test
    if condition.branch != "if" or not isinstance(test, cst.Name) or call.function is None:
        return False
    params = call.function.node.params
    names = [param.name.value for param in (*params.posonly_params, *params.params)]
    for position, arg in enumerate(call.arg_nodes):
        if arg.star:
            return False
        given = arg.keyword.value if arg.keyword is not None else (names[position] if position < len(names) else None)
        if given == test.value:
            return isinstance(arg.value, cst.Name) and arg.value.value == "True"
    return False


def _literal_true(node: cst.BaseExpression) -> bool:
    return isinstance(node, cst.Name) and node.value == "True"


def _sets(event: Event, target: str) -> TypeGuard[AssignEvent]:
    """`<target> = True` (the target spelled through any import alias)."""
    if not isinstance(event, AssignEvent) or not isinstance(event.node, cst.Assign):
        return False
    if not (isinstance(event.node.value, cst.Name) and event.node.value.value == "True"):
        return False
    return any(event.scope.summary.canonical(key) == target for key in event.targets)


def _determinism_requests(module: ModuleView) -> list[Event]:
    return [event for scope in module.all_scopes for event in scope.events if _switch(event, "True") is not None]


def _determinism_withdrawals(module: ModuleView) -> list[Event]:
    return [event for scope in module.all_scopes for event in scope.events if _switch(event, "False") is not None]


def _switch(event: Event, value: str) -> str | None:
    """Which determinism switch this event sets to ``value`` (`True`/`False`): `cudnn.deterministic = ...`
    or `torch.use_deterministic_algorithms(...)`; None for any other event."""
    if isinstance(event, AssignEvent) and isinstance(event.node, cst.Assign):
        assigned = event.node.value
        if isinstance(assigned, cst.Name) and assigned.value == value and any(
            event.scope.summary.canonical(key) == _DETERMINISTIC for key in event.targets
        ):
            return _DETERMINISTIC
    elif isinstance(event, CallEvent) and event.callee == _ALGORITHMS and event.arg_nodes:
        first = event.arg_nodes[0].value
        if isinstance(first, cst.Name) and first.value == value:
            return _ALGORITHMS
    return None


def _withdrawn(request: Event, benchmark: Event, withdrawals: list[Event]) -> bool:
    """The same switch is turned off again after the request and before the benchmark, in the same
    function (or both at module level) and on the benchmark's path: determinism was asked for a
    check that ran in between (`use_deterministic_algorithms(True)`, a reproducibility test, then
    `(False)`), not for the run that benchmark mode tunes."""
    switch = _switch(request, "True")
    return any(
        _switch(withdrawal, "False") == switch
        and withdrawal.scope.function is benchmark.scope.function is request.scope.function
        and _line(request) < _line(withdrawal) < _line(benchmark)
        and _branch(withdrawal.context.conditions) <= _branch(benchmark.context.conditions)
        for withdrawal in withdrawals
    )


def _requests_seen_elsewhere(module: ModuleView) -> list[Event]:
    """The requests still in force when their function returns and not already paired with a benchmark of
    their own function: those a benchmark in another function is reported with."""
    withdrawals = _determinism_withdrawals(module)
    return [
        request for request in _determinism_requests(module)
        if not _ends_in_its_function(request, withdrawals) and not _paired_at_home(request)
    ]


def _ends_in_its_function(request: Event, withdrawals: list[Event]) -> bool:
    """The request's own function switches it off again later on the request's path
    (`use_deterministic_algorithms(True)` for a check, then `(False)`): it is not in force after the call."""
    switch = _switch(request, "True")
    return any(
        _switch(withdrawal, "False") == switch and withdrawal.scope is request.scope and _line(request) < _line(withdrawal)
        and _branch(withdrawal.context.conditions) <= _branch(request.context.conditions)
        for withdrawal in withdrawals
    )


def _paired_at_home(request: Event) -> bool:
    """The request's own function turns benchmark mode on after it, on its path: that benchmark is reported
    with it, and a benchmark in another function adds no second report of the same request."""
    return any(
        _sets(event, _BENCHMARK) and _line(request) < _line(event) and _same_path(event, request)
        for event in request.scope.events
    )


def _line(event: Event) -> int:
    return event.chunk.line_of(event.node)


def _same_path(benchmark: Event, request: Event) -> bool:
    """Both run on one path: the benchmark is unconditional in its scope, or both sit in the same branch."""
    conditions = benchmark.context.conditions
    if not conditions:
        return True
    if request.scope is not benchmark.scope:
        return False
    return _branch(conditions) <= _branch(request.context.conditions)


def _branch(conditions: tuple[Condition, ...]) -> set[tuple[int, str]]:
    return {(id(condition.node), condition.branch) for condition in conditions}


def _code(event: Event) -> str:
    return " ".join(event.chunk.code_for(event.node).split())


ContradictoryDeterminism.MUST_FIRE = (
    Fires(
        """
        import torch

        torch.manual_seed(0)
        torch.backends.cudnn.deterministic = True
        torch.backends.cudnn.benchmark = True
        """
    ),
    Fires(
        """
        import random
        import torch
        import torch.backends.cudnn as cudnn

        def main(args):
            if args.seed is not None:
                random.seed(args.seed)
                torch.manual_seed(args.seed)
                cudnn.deterministic = True
            cudnn.benchmark = True
        """
    ),
    Fires(
        """
        import torch

        torch.use_deterministic_algorithms(True)
        torch.backends.cudnn.benchmark = True
        """
    ),
    Fires(
        """
        import torch
        from torch.backends import cudnn

        def seed_all(seed):
            torch.manual_seed(seed)
            cudnn.deterministic = True

        seed_all(1)
        cudnn.benchmark = True
        """
    ),
    Fires(
        """
        import torch

        if args.reproducible:
            torch.backends.cudnn.deterministic = True
            torch.backends.cudnn.benchmark = True
        """
    ),
    Fires(  # a withdrawal of one request leaves the other standing
        """
        import torch


        def main(args):
            torch.backends.cudnn.deterministic = True
            torch.use_deterministic_algorithms(True)
            run_checks()
            torch.use_deterministic_algorithms(False)
            torch.backends.cudnn.benchmark = True
            train(args)
        """,
        at="torch.backends.cudnn.benchmark = True",
    ),
    Fires(  # withdrawn only on one branch: the other path still asks for determinism
        """
        import torch


        def main(args):
            torch.use_deterministic_algorithms(True)
            if args.fast:
                torch.use_deterministic_algorithms(False)
            torch.backends.cudnn.benchmark = True
            train(args)
        """
    ),
    Fires(
        """
        import torch

        class Trainer:
            def setup(self):
                torch.backends.cudnn.benchmark = True

            def seed(self):
                torch.use_deterministic_algorithms(True)
        """
    ),
    Fires(  # the seeding helper lives in another file and is asked for determinism; the script then benchmarks
        """
        import torch
        from utils.general import init_seeds


        def train(opt, model, loader):
            init_seeds(opt.seed + 1, deterministic=True)
            torch.backends.cudnn.benchmark = True
            optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.937)
            for images, targets in loader:
                loss = model(images.cuda(), targets.cuda())
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
        """,
        files={"utils/general.py": """
        import random

        import numpy as np
        import torch


        def init_seeds(seed=0, deterministic=False):
            random.seed(seed)
            np.random.seed(seed)
            torch.manual_seed(seed)
            if deterministic:
                torch.use_deterministic_algorithms(True)
                torch.backends.cudnn.deterministic = True
        """},
        at="torch.backends.cudnn.benchmark = True",
    ),
    Fires(  # Lightning applies both Trainer arguments to torch: determinism asked for and benchmark mode on, in one call
        """
        from pytorch_lightning import Trainer
        from pytorch_lightning.callbacks import ModelCheckpoint

        from models import SegmentationModel


        class ActiveLearningPipeline:
            def __init__(self, data_module, epochs, gpus=1):
                self.data_module = data_module
                self.epochs = epochs
                self.gpus = gpus

            def setup_trainer(self, checkpoint_dir):
                callbacks = [ModelCheckpoint(dirpath=checkpoint_dir, monitor="val/loss")]
                return Trainer(
                    deterministic=True,
                    max_epochs=self.epochs,
                    gpus=self.gpus,
                    benchmark=True,
                    callbacks=callbacks,
                )

            def run(self):
                model = SegmentationModel()
                self.setup_trainer("checkpoints").fit(model, self.data_module)
        """,
        files={"models.py": """
        import pytorch_lightning as pl
        import torch.nn.functional as F
        from torch import nn, optim


        class SegmentationModel(pl.LightningModule):
            def __init__(self):
                super().__init__()
                self.net = nn.Conv2d(1, 2, 3, padding=1)

            def training_step(self, batch, batch_idx):
                images, masks = batch
                return F.cross_entropy(self.net(images), masks)

            def configure_optimizers(self):
                return optim.Adam(self.parameters())
        """},
        at="benchmark=True,",
        no_fix=True,
    ),
    Fires(  # `deterministic="warn"` asks for deterministic algorithms too (warning where one is missing)
        """
        import lightning as L


        def main(model, datamodule):
            trainer = L.Trainer(max_epochs=50, deterministic="warn", benchmark=True)
            trainer.fit(model, datamodule=datamodule)
        """
    ),
)

ContradictoryDeterminism.MUST_NOT_FIRE = (
    Quiet(  # benchmark mode only where determinism is not asked for, both from one option
        """
        from pytorch_lightning import Trainer


        class Pipeline:
            def __init__(self, epochs, deterministic_mode=True):
                self.epochs = epochs
                self.deterministic_mode = deterministic_mode

            def setup_trainer(self):
                return Trainer(
                    deterministic=self.deterministic_mode,
                    max_epochs=self.epochs,
                    benchmark=not self.deterministic_mode,
                )
        """
    ),
    Quiet(  # benchmark mode asked for with determinism off; and a Trainer that is not Lightning's
        """
        import lightning as L
        from trainers import Trainer


        def main(model, datamodule, args):
            L.Trainer(deterministic=False, benchmark=True).fit(model, datamodule=datamodule)
            Trainer(deterministic=True, benchmark=True).train(model, args)
        """
    ),
    Quiet(  # the same helper, not asked for determinism: benchmark mode contradicts nothing
        """
        import torch
        from utils.general import init_seeds


        def train(opt, model):
            init_seeds(opt.seed + 1, deterministic=False)
            torch.backends.cudnn.benchmark = True
        """,
        files={"utils/general.py": """
        import random

        import numpy as np
        import torch


        def init_seeds(seed=0, deterministic=False):
            random.seed(seed)
            np.random.seed(seed)
            torch.manual_seed(seed)
            if deterministic:
                torch.use_deterministic_algorithms(True)
                torch.backends.cudnn.deterministic = True
        """},
    ),
    Quiet(
        """
        import torch

        torch.manual_seed(0)
        torch.backends.cudnn.deterministic = True
        torch.backends.cudnn.benchmark = False
        """
    ),
    Quiet(
        """
        import torch
        import torch.backends.cudnn as cudnn

        if args.seed is not None:
            torch.manual_seed(args.seed)
            cudnn.deterministic = True
        else:
            cudnn.benchmark = True
        """
    ),
    Quiet(
        """
        import torch

        torch.backends.cudnn.benchmark = True
        """
    ),
    Quiet(
        """
        import torch

        if args.deterministic:
            torch.use_deterministic_algorithms(True)
        if not args.deterministic:
            torch.backends.cudnn.benchmark = True
        """
    ),
    Quiet(
        """
        import torch

        torch.backends.cudnn.deterministic = False
        torch.backends.cudnn.benchmark = True
        """
    ),
    Quiet(
        """
        import torch

        torch.use_deterministic_algorithms(False)
        torch.backends.cudnn.benchmark = True
        """
    ),
    Quiet(  # determinism asked for a reproducibility check only, and withdrawn before the run tunes its kernels
        """
        import torch
        from torch.backends import cudnn


        def check_reproducible(model, batch):
            return torch.equal(model(batch), model(batch))


        def main(args, model, batch):
            torch.use_deterministic_algorithms(True)
            cudnn.deterministic = True
            if not check_reproducible(model, batch):
                raise RuntimeError("the model is not deterministic")
            torch.use_deterministic_algorithms(False)
            cudnn.deterministic = False
            cudnn.benchmark = True
            train(args, model)
        """
    ),
    Quiet(  # the check switches deterministic algorithms off again before it returns: the training run is free to benchmark
        """
        import torch
        import torch.nn.functional as F


        def outputs_reproducible(model, batch):
            torch.use_deterministic_algorithms(True)
            first = model(batch)
            second = model(batch)
            torch.use_deterministic_algorithms(False)
            return torch.equal(first, second)


        def train(model, loader, optimizer):
            images, _ = next(iter(loader))
            if not outputs_reproducible(model, images.cuda()):
                print("warning: the model's forward is not reproducible")
            torch.backends.cudnn.benchmark = True
            for images, labels in loader:
                loss = F.cross_entropy(model(images.cuda()), labels.cuda())
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
        """
    ),
)
