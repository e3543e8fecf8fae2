"""bitsandbytes' paged optimizers: state outside torch's caching allocator.

A paged optimizer (`PagedAdamW8bit`, `paged_adamw_8bit`, `PagedAdamW`, `paged_adamw_32bit`) allocates the state of every parameter of at least 100,000
elements with `F.get_paged` (bitsandbytes/optim/optimizer.py, `Optimizer8bit.get_state_buffer`: `p.numel() < 1e5`
stays `torch.zeros_like`), which takes CUDA managed memory from the library's own `cget_managed_ptr`
(`cudaMallocManaged(&ptr, bytes, cudaMemAttachHost)`, csrc/pythonInterface.cpp) and wraps it with
`torch.frombuffer`: torch's allocator never sees it, so `max_memory_allocated` and `max_memory_reserved` leave it
out. The device holds its pages once the optimizer's kernels touch them, and gives them up to the host under
pressure: the process peak counts them at its estimate and high end, not at its low end.
"""

from __future__ import annotations

from .adapters import adapter_dims, saved_module_params
from .architectures import LM_HEAD_NAMES, Shape
from .plan import Plan

PAGED_OPTIMIZERS = ("paged-adamw-8bit", "paged-adamw")
# bitsandbytes pages the state of a parameter of this many elements or more (get_state_buffer)
PAGED_MIN_ELEMENTS = 100_000


def paged_share(plan: Plan, geometry: Shape | None, trainable: int) -> float:
    """The share of the optimizer's state that a paged optimizer keeps in managed memory: that of the trainable
    tensors of at least PAGED_MIN_ELEMENTS elements. An adapter's two matrices (rank x in, out x rank) are
    counted one by one, modules trained whole beside them (`modules_to_save`) are paged; a model trained in full is
    taken as all paged (its norms and biases are a fraction of
    a percent)."""
    if plan.optimizer not in PAGED_OPTIMIZERS or plan.mode != "train" or trainable <= 0:
        return 0.0
    if plan.lora_rank is None or geometry is None:
        return 1.0
    rank = plan.lora_rank
    paged = 0
    for target in plan.lora_targets:
        if target in LM_HEAD_NAMES:
            matrices, count = (rank * geometry.hidden, geometry.vocab * rank), 1
        else:
            d_in, d_out = adapter_dims(geometry, target) or (geometry.hidden, geometry.hidden)
            matrices, count = (rank * d_in, d_out * rank), geometry.layers
        paged += count * sum(size for size in matrices if size >= PAGED_MIN_ELEMENTS)
    saved = saved_module_params(plan, geometry)  # whole embeddings and LM heads trained beside the adapters: paged
    return min(1.0, (paged + saved) / (trainable + saved))
