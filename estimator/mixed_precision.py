"""The widths a mixed-precision training step runs in: what FSDP's MixedPrecision policy gathers, and whether
the forward under autocast sees 16-bit weights (and so a 16-bit residual stream) or fp32 ones.

Under autocast the embeddings' output has the embedding weight's dtype (the lookup is on no autocast list), and
the residual additions keep the wider of their operands: fp32 weights give an fp32 residual stream, 16-bit
gathered weights (FSDP's ``MixedPrecision(param_dtype=torch.bfloat16)``, accelerate's and torchtitan's policy) a
16-bit one. ``calibration/amp_activations.py`` counts both.
"""

from __future__ import annotations

from .plan import Plan

# Model types whose layers end in a LayerNorm (post-LN: the norm's output is the next layer's input). Under autocast
# `layer_norm` returns fp32 whatever its weights' width, so their residual stream is fp32 over 16-bit weights too.
_POST_LN_FAMILIES = frozenset({"bert", "roberta", "xlm-roberta", "distilbert", "bart"})


def fsdp_param_bytes(plan: Plan, weight_bytes: int, end: int) -> int:
    """Bytes per gathered parameter under FSDP: the weights' own dtype, or under autocast the MixedPrecision
    policy's param_dtype (16 bits at the estimate, fp32 at the high end where the plan does not say)."""
    if not plan.dtype.startswith("amp"):
        return weight_bytes
    if plan.fsdp_param_dtype is not None:
        return 4 if plan.fsdp_param_dtype == "fp32" else 2
    return 4 if end == 2 else 2


def forward_weights_16bit(plan: Plan, end: int) -> bool:
    """Whether an autocast forward sees 16-bit weights: FSDP gathering each unit in a 16-bit param_dtype."""
    return plan.sharding in ("fsdp", "fsdp-grad-op") and fsdp_param_bytes(plan, 4, end) == 2


def fp32_residual_stream(plan: Plan, end: int) -> bool:
    """Whether a training step's residual stream is fp32: autocast over fp32 weights, whose embeddings are fp32, or
    a post-LN model's, whose LayerNorm outputs are (a frozen base under adapters or quantised is read by its own terms)."""
    post_ln = plan.model is not None and plan.model.family in _POST_LN_FAMILIES
    return (plan.dtype.startswith("amp") and plan.quant is None and plan.lora_rank is None
            and (post_ln or not forward_weights_16bit(plan, end)))
