"""gpt-fast's generation as torchao and others copy its `model.py` and `generate.py` (the plan's `model_code`
"gpt-fast"): the terms its code adds to a generation's peak. The cost model (costmodel.py) adds them.
"""

from __future__ import annotations

import math

from .architectures import Shape
from .plan import Interval, Plan


def gpt_fast_terms(plan: Plan, geometry: Shape | None, notes: list[str]) -> dict[str, Interval]:
    """gpt-fast's generation (model.py and generate.py, as torchao's `_models/llama` copies them): `setup_caches`
    registers a causal mask of the cache's length squared in bools (`torch.tril(torch.ones(n, n))`, n rounded up
    to a multiple of 8), and every decoding step runs under `sdp_kernel(enable_math=True)` only: each layer
    expands the whole static cache to every query head (`repeat_interleave`) and the math kernel copies keys and
    values to fp32 (torch 2.5 and later, unless `allow_fp16_bf16_reduction_math_sdp`; before, no copy: the low
    end)."""
    if plan.model_code != "gpt-fast" or plan.mode != "generate" or geometry is None:
        return {}
    length = plan.kv_cache_len or plan.max_context or plan.seq_len or 0
    length = 8 * math.ceil(length / 8)
    # keys and values, every query head (of this GPU's, under tensor parallelism)
    expanded = 2.0 * plan.batch_size * geometry.heads / plan.tensor_parallel * length * geometry.head_dim
    act_bytes = 2 if plan.dtype != "fp32" else 4
    upcast = 4.0 if act_bytes == 2 else 0.0
    notes.append(f"gpt-fast: a causal mask of {length}x{length} bools; each decoding step expands the cache to every "
                 "query head and the math attention kernel copies it to fp32 (torch 2.5 and later)")
    return {
        "causal_mask": Interval.exact(float(length * length)),
        "decode_attention": Interval(expanded * act_bytes, expanded * (act_bytes + upcast), expanded * (act_bytes + upcast)),
    }
