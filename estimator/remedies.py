"""What would make a configuration fit: single changes and combinations, cheapest first.

Each candidate is re-estimated with the same model, so a remedy's saving is what the memory model
says, not a rule of thumb. "Cheap" is the order a practitioner would try them in: changes that
keep the training the same (checkpointing, a fused attention kernel, micro-batches with
accumulation) before changes that alter it (8-bit optimizer state, pure bf16, adapters).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, replace

from .costmodel import FITS, estimate, verdict
from .hardware import Gpu, Target, smallest_fitting
from .plan import CannotEstimate, Estimate, Plan
from .units import GIB
from .versions import SDPA_SINCE

MAX_COMBINED = 3
MAX_BATCH = 1 << 16
# A saving the report would print as 0.0 GiB, at the estimate and at the high end alike, is no remedy.
MIN_SAVING_BYTES = 0.05 * GIB


@dataclass(frozen=True)
class Remedy:
    change: str
    plan: Plan
    result: Estimate
    saving_bytes: float  # process peak, point estimate: base minus remedy
    high_saving_bytes: float  # the same at the interval's high end
    verdict: str  # fits (even the high end fits), tight or oom, as for the configuration itself

    @property
    def fits(self) -> bool:
        return self.verdict == FITS


def candidates(plan: Plan, target: Target) -> list[tuple[str, dict]]:
    """(description, Plan changes) for every change that applies to this plan, in the order to try them."""
    found: list[tuple[str, dict]] = []
    training = plan.mode == "train"
    transformer = plan.model is not None and plan.model.kind != "cnn" and plan.model.kind != "diffusion"
    if training and not plan.gradient_checkpointing:
        found.append(("gradient checkpointing", {"gradient_checkpointing": True}))
    if training and plan.batch_size > 1:
        found.append((
            f"micro-batch 1 with gradient accumulation x{plan.batch_size} (same effective batch)",
            {"batch_size": 1, "grad_accum": plan.grad_accum * plan.batch_size},
        ))
    if training and plan.optimizer in ("adam", "adamw") and plan.foreach is not False and plan.lora_rank is None:
        found.append(("fused AdamW (fused=True: no parameter-sized temporary in the step)", {"foreach": False}))
    if plan.attention == "eager" and transformer:
        found.append(("SDPA / flash attention", {"attention": "sdpa"}))
    elif plan.attention is None and transformer and plan.sdpa_dispatch is False:  # the stated release runs eager attention
        since = SDPA_SINCE.get(plan.model.family, "4.36.0") if plan.model is not None else "4.36.0"
        found.append((f"SDPA (transformers {since} or later runs this model with it)", {"attention": "sdpa"}))
    elif plan.attention is None and transformer and plan.sdpa_dispatch is None:  # the high end is eager: stating it settles it
        found.append(("attn_implementation='sdpa' stated (the high end assumes eager attention)", {"attention": "sdpa"}))
    if training and plan.optimizer in ("adam", "adamw") and plan.lora_rank is None:
        found.append(("8-bit AdamW", {"optimizer": "adamw-8bit"}))
    if training and plan.dtype in ("fp32", "amp-fp16", "amp-bf16") and target.gpu.bf16 and plan.lora_rank is None:
        found.append(("pure bf16 weights and optimizer state", {"dtype": "bf16"}))
    if training and transformer and plan.lora_rank is None:
        found.append(("LoRA (rank 16 on q_proj, v_proj)", {"lora_rank": 16, "lora_targets": ("q_proj", "v_proj")}))
        found.append(("QLoRA (4-bit NF4 base, rank 16)", {"lora_rank": 16, "lora_targets": ("q_proj", "v_proj"), "quant": "nf4"}))
    diffusion = plan.model is not None and plan.model.pipeline is not None
    if diffusion and not training and not plan.vae_tiling:
        found.append(("VAE tiling (pipe.enable_vae_tiling())", {"vae_tiling": True}))
    if diffusion and not training and not plan.vae_slicing and plan.batch_size > 1:
        found.append(("VAE slicing (pipe.enable_vae_slicing())", {"vae_slicing": True}))
    if diffusion and not training and not plan.cpu_offload:
        found.append(("model CPU offload (pipe.enable_model_cpu_offload())", {"cpu_offload": True}))
    if diffusion and plan.dtype == "fp32":
        found.append(("16-bit weights (torch_dtype=torch.float16 or bfloat16)", {"dtype": "bf16" if target.gpu.bf16 else "fp16"}))
    if diffusion and training and plan.lora_rank is None:
        found.append(("LoRA on the denoiser (rank 16)", {"lora_rank": 16}))
    if training and target.count > 1 and plan.sharding in ("ddp", "zero1", "zero2"):
        found.append((f"ZeRO-3 / FSDP across the {target.count} GPUs", {"sharding": "zero3", "gpus": target.count}))
    if training and plan.sharding in ("zero3", "fsdp") and "optimizer" not in plan.offload:
        found.append(("offload the optimizer state to the CPU", {"offload": (*plan.offload, "optimizer")}))
    return found


def remedies(plan: Plan, base: Estimate, target: Target, context_bytes: float) -> list[Remedy]:
    """Single changes, then combinations of up to three, that fit; each fitting set only once (its smallest form)."""
    usable = target.usable_bytes_per_device
    options = candidates(plan, target)
    found: list[Remedy] = []
    fitting_sets: list[frozenset[int]] = []
    for size in range(1, MAX_COMBINED + 1):
        for combination in itertools.combinations(range(len(options)), size):
            chosen = frozenset(combination)
            if any(earlier <= chosen for earlier in fitting_sets):
                continue  # a subset already fits: the extra changes cost without need
            changes: dict = {}
            for index in combination:
                changes.update(options[index][1])
            try:
                result = estimate(replace(plan, **changes), context_bytes, target.gpu.blas_workspace_bytes,
                                  target.gpu.compute_capability, usable)
            except CannotEstimate:
                continue
            outcome = verdict(result, usable)
            fits = outcome == FITS
            saving = base.process.estimate - result.process.estimate
            high_saving = base.process.high - result.process.high
            if (size == 1 or fits) and max(saving, high_saving) >= MIN_SAVING_BYTES:
                description = " + ".join(options[index][0] for index in combination)
                found.append(Remedy(description, result.plan, result, saving, high_saving, outcome))
            if fits:
                fitting_sets.append(chosen)
    singles = [remedy for remedy in found if " + " not in remedy.change]
    combined = [remedy for remedy in found if " + " in remedy.change]
    return singles + combined


def max_batch_size(plan: Plan, target: Target, context_bytes: float) -> int | None:
    """The largest batch size whose whole interval fits on one device; None when not even 1 does."""
    usable = target.usable_bytes_per_device

    def fits(batch: int) -> bool:
        result = estimate(replace(plan, batch_size=batch), context_bytes, target.gpu.blas_workspace_bytes,
                          target.gpu.compute_capability, usable)
        return verdict(result, usable) == FITS

    if not fits(1):
        return None
    low, high = 1, 2
    while high <= MAX_BATCH and fits(high):
        low, high = high, high * 2
    if high > MAX_BATCH:
        return low
    while high - low > 1:
        middle = (low + high) // 2
        if fits(middle):
            low = middle
        else:
            high = middle
    return low


def smallest_gpu(base: Estimate, target: Target) -> Gpu | None:
    """The smallest catalog GPU of the target's vendor whose usable memory holds the high end of what the run needs
    (the process peak without the cache the allocator gives back)."""
    fitting = smallest_fitting(base.needed.high, vendor=target.gpu.vendor)
    return fitting[0] if fitting else None
