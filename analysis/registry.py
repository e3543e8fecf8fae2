"""Every rule trainlint runs. Adding a rule is one line here."""

from __future__ import annotations

import importlib

from .rules.base import Rule
from .rules.bce_activation_mismatch import BceActivationMismatch
from .rules.clip_before_unscale import ClipBeforeUnscale
from .rules.contradictory_determinism import ContradictoryDeterminism
from .rules.dataloader_tuning import DataloaderTuning
from .rules.ddp_without_sampler import DdpWithoutSampler
from .rules.device_accumulation import DeviceAccumulation
from .rules.discarded_transfer import DiscardedTransfer
from .rules.dropout_always_on import DropoutAlwaysOn
from .rules.grad_enabled_eval import GradEnabledEval
from .rules.layer_in_forward import LayerInForward
from .rules.missing_eval_mode import MissingEvalMode
from .rules.missing_set_epoch import MissingSetEpoch
from .rules.missing_zero_grad import MissingZeroGrad
from .rules.redundant_transfer import RedundantTransfer
from .rules.retain_graph_in_loop import RetainGraphInLoop
from .rules.retained_graph import RetainedGraph
from .rules.seed_zero_ignored import SeedZeroIgnored
from .rules.softmax_before_cross_entropy import SoftmaxBeforeCrossEntropy
from .rules.stuck_eval_mode import StuckEvalMode
from .rules.sync_in_hot_loop import SyncInHotLoop
from .rules.unscaled_accumulation import UnscaledAccumulation
from .rules.unseeded_run import UnseededRun
from .rules.zero_grad_before_step import ZeroGradBeforeStep

BUILTIN_RULES: tuple[type[Rule], ...] = (
    MissingEvalMode,
    MissingSetEpoch,
    MissingZeroGrad,
    StuckEvalMode,
    UnscaledAccumulation,
    BceActivationMismatch,
    ClipBeforeUnscale,
    ContradictoryDeterminism,
    DataloaderTuning,
    DeviceAccumulation,
    DiscardedTransfer,
    DropoutAlwaysOn,
    GradEnabledEval,
    LayerInForward,
    DdpWithoutSampler,
    RedundantTransfer,
    RetainGraphInLoop,
    SeedZeroIgnored,
    RetainedGraph,
    SoftmaxBeforeCrossEntropy,
    SyncInHotLoop,
    UnseededRun,
    ZeroGradBeforeStep,
)

_extra_rules: list[type[Rule]] = []


def register(rule: type[Rule]) -> None:
    """For rules that live outside `analysis` (the estimator's TL601), which analysis must not import."""
    if rule not in _extra_rules:
        _extra_rules.append(rule)


# Rules that live outside `analysis` and register themselves when imported.
_PLUGINS = ("trainlint.estimator.projected_oom",)


def all_rules() -> list[type[Rule]]:
    for plugin in _PLUGINS:
        importlib.import_module(plugin)
    return sorted((*BUILTIN_RULES, *_extra_rules), key=lambda rule: rule.code)
