"""Measured per-layer activation coefficients, per architecture and attention implementation.

``data/activation_coefficients.json`` is written by ``calibration/activations.py`` (torch and
transformers, in the calibration venv; see ``calibration/ACTIVATIONS.md``). Each entry holds the
bytes one transformer layer keeps for the backward, per token and hidden unit, for 2-byte
activations: ``bytes = seq * batch * hidden * (linear + scores * heads * seq / hidden)``. SDPA
(fused flash kernel) has no ``scores`` term. This module never imports torch.
"""

from __future__ import annotations

import functools
from pathlib import Path

import msgspec

_DATA_PATH = Path(__file__).parent / "data" / "activation_coefficients.json"


class SdpaCoefficients(msgspec.Struct, frozen=True):
    linear: float


class EagerCoefficients(msgspec.Struct, frozen=True):
    linear: float
    scores: float


class AttentionCoefficients(msgspec.Struct, frozen=True):
    sdpa: SdpaCoefficients | None = None
    eager: EagerCoefficients | None = None


class ActivationMeasurement(msgspec.Struct, frozen=True, kw_only=True):
    """One architecture's measurement (no dropout unless a ``dropout_*`` field says otherwise)."""

    family: str
    gated: bool
    attention: AttentionCoefficients
    measured_with: str
    torch: str
    transformers: str
    dropout_linear: float | None = None  # eager, dropout_p on every dropout site
    dropout_scores: float | None = None
    dropout_p: float | None = None
    sdpa_use_cache_linear: float | None = None  # SDPA with the config's default use_cache=True
    eager_batch1_offset: float = 0.0  # eager at batch 1 minus the batch >= 2 fit, per token and hidden unit
    layers_measured: int | None = None


@functools.cache
def load_activation_measurements() -> dict[str, ActivationMeasurement]:
    return msgspec.json.decode(_DATA_PATH.read_bytes(), type=dict[str, ActivationMeasurement])


def measured_layer_coefficients(arch_id: str, attention: str | None) -> tuple[float, float] | None:
    """(linear, scores) for 2-byte activations without dropout, or None when not measured.

    ``attention`` is "sdpa", "flash" (the SDPA measurement: it ran the fused flash kernel, which
    keeps the same q, k, v, output and log-sum-exp) or "eager". SDPA's scores term is 0.
    """
    entry = load_activation_measurements().get(arch_id)
    if entry is None:
        return None
    if attention in ("sdpa", "flash"):
        sdpa = entry.attention.sdpa
        return None if sdpa is None else (sdpa.linear, 0.0)
    if attention == "eager":
        eager = entry.attention.eager
        return None if eager is None else (eager.linear, eager.scores)
    return None


def measured_dropout_bytes(arch_id: str, attention: str | None, hidden: bool, scores: bool) -> tuple[float, float, float] | None:
    """What dropout adds to a measured layer: (1-byte masks per token and hidden unit, 1-byte masks per score, bytes per
    score of the dropout's output in 2-byte activations), from the measurement with dropout on every site (eager,
    ``dropout_p``); None when dropout is on and was not measured. Each dropout keeps a 1-byte mask (CUDA's fused kernel);
    on the hidden sites nothing else (the next linear keeps its input either way), on the attention probabilities
    also its output, which the matmul with the values keeps. SDPA's fused kernels with dropout keep an RNG state,
    not a mask (calibration/ACTIVATIONS.md), so only the hidden sites' masks count there."""
    entry = load_activation_measurements().get(arch_id)
    if entry is None or entry.attention.eager is None:
        return None
    if not (hidden or scores):
        return 0.0, 0.0, 0.0
    if entry.dropout_linear is None or entry.dropout_scores is None:
        return None
    masks = entry.dropout_linear - entry.attention.eager.linear if hidden else 0.0
    if not scores or attention != "eager":
        return masks, 0.0, 0.0
    return masks, 1.0, entry.dropout_scores - entry.attention.eager.scores - 1.0
