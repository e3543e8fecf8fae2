"""Every rule trainlint runs. Adding a rule is one line here."""

from __future__ import annotations

from .rules.base import Rule
from .rules.missing_zero_grad import MissingZeroGrad
from .rules.stuck_eval_mode import StuckEvalMode
from .rules.unscaled_accumulation import UnscaledAccumulation
from .rules.bce_activation_mismatch import BceActivationMismatch
from .rules.dataloader_tuning import DataloaderTuning
from .rules.grad_enabled_eval import GradEnabledEval
from .rules.ddp_without_sampler import DdpWithoutSampler
from .rules.redundant_transfer import RedundantTransfer
from .rules.retained_graph import RetainedGraph
from .rules.softmax_before_cross_entropy import SoftmaxBeforeCrossEntropy
from .rules.sync_in_hot_loop import SyncInHotLoop
from .rules.unseeded_run import UnseededRun

BUILTIN_RULES: tuple[type[Rule], ...] = (
    MissingZeroGrad,
    StuckEvalMode,
    UnscaledAccumulation,
    BceActivationMismatch,
    DataloaderTuning,
    GradEnabledEval,
    DdpWithoutSampler,
    RedundantTransfer,
    RetainedGraph,
    SoftmaxBeforeCrossEntropy,
    SyncInHotLoop,
    UnseededRun,
)

_extra_rules: list[type[Rule]] = []


def register(rule: type[Rule]) -> None:
    """For rules that live outside `analysis` (the estimator's TL601), which analysis must not import."""
    if rule not in _extra_rules:
        _extra_rules.append(rule)


def all_rules() -> list[type[Rule]]:
    return sorted((*BUILTIN_RULES, *_extra_rules), key=lambda rule: rule.code)
