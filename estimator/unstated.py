"""Settings a run depends on that nobody stated, and how the estimate covers their alternatives: the estimate takes
one (today's releases, the usual choice), the interval's ends the others, and a note names the assumption and what
settles it. The cost model (costmodel.py) asks these for the attention kernel and the CUDA context.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from .adapters import targets_the_head
from .architectures import shape
from .plan import Estimate, Interval, Plan
from .units import GIB
from .versions import SDPA_SINCE, settled_by

# What the CUDA context adds without lazy module loading: every kernel image of torch and of the CUDA libraries it
# loads goes onto the device when the context is made. torch's PR 86509 (1.13, which made lazy loading its default)
# measured 287 MB with lazy loading against 667 MB without for one small tensor; torch's CUDA maintainer puts the
# context "above 1000 MB" when all kernels were loaded (before CUDA 11.7), about 300-400 MB with lazy loading
# (pytorch/pytorch#107667, #109888). The high end adds the larger difference to the device's lazy-loaded context.
EAGER_KERNEL_IMAGES_BYTES = 700e6


def cuda_context(plan: Plan, context_bytes: float | Interval, notes: list[str]) -> Interval:
    """The CUDA context beside the allocator's memory: measured for the run (an interval), else the device's
    lazy-loaded context, plus every kernel image without lazy loading (torch before 1.13): at the high end where the
    torch version is not known."""
    if isinstance(context_bytes, Interval):
        return context_bytes
    if plan.lazy_module_loading is None:
        notes.append(f"CUDA context {context_bytes / GIB:.2f} GiB with lazy module loading (torch 1.13 and later, the "
                     f"estimate); before, every kernel image is loaded with it, about {EAGER_KERNEL_IMAGES_BYTES / GIB:.1f} GiB "
                     f"more (the high end); {settled_by('torch')}")
        return Interval(context_bytes, context_bytes, context_bytes + EAGER_KERNEL_IMAGES_BYTES)
    return Interval.exact(context_bytes + (0.0 if plan.lazy_module_loading else EAGER_KERNEL_IMAGES_BYTES))


def released_kernel(sdpa_dispatch: bool) -> str:
    """The attention kernel transformers picks where nobody names one, by whether its release dispatches to SDPA."""
    return "sdpa" if sdpa_dispatch else "eager"


def unstated_attention(plan: Plan, estimate: Callable[..., Estimate], *device) -> Estimate:
    """An attention kernel nobody stated: transformers picks SDPA where the model and torch have it (the estimate)
    and eager attention otherwise, as its releases before SDPA did (the high end, which keeps every head's scores).
    LitGPT's and gpt-fast's code call SDPA themselves. ``estimate``: the cost model's, with the device's ``device``
    arguments."""
    transformers_layers = not (
        plan.model_code != "transformers" or plan.model is None or shape(plan.model) is None or plan.model.kind == "diffusion"
    )
    if transformers_layers and plan.sdpa_dispatch is not None:  # a stated transformers release decides it
        kernel = released_kernel(plan.sdpa_dispatch)
        result = estimate(dataclasses.replace(plan, attention=kernel), *device)
        if kernel == "eager" and plan.model is not None:
            family = plan.model.family
            note = (f"attention: eager, which keeps the attention scores: the stated transformers release runs "
                    f"{family} models with SDPA only from {SDPA_SINCE.get(family, '4.36.0')}")
            result = dataclasses.replace(result, assumptions=[*result.assumptions, note])
        return dataclasses.replace(result, plan=plan)
    chosen = estimate(dataclasses.replace(plan, attention="sdpa"), *device)
    if not transformers_layers:
        return dataclasses.replace(chosen, plan=plan)
    eager = estimate(dataclasses.replace(plan, attention="eager"), *device)
    since = SDPA_SINCE.get(plan.model.family, "4.36") if plan.model is not None else "4.36"
    note = (f"attention kernel not stated: SDPA at the estimate (transformers' default from {since} where the model and torch "
            "have it), eager attention at the high end (older releases, models without SDPA), which keeps the attention "
            f"scores; attn_implementation= in the script, --attention, or {settled_by('transformers')}")
    return covering(chosen, [eager], plan, note)


def covering(chosen: Estimate, alternatives: list[Estimate], plan: Plan, note: str) -> Estimate:
    """``chosen``'s estimate in an interval that covers the alternatives of a setting nobody stated: at each end, the
    peaks of whichever alternative needs the least (low) or the most (high), so that each end stays one run's."""
    candidates = [chosen, *alternatives]
    low = min(candidates, key=lambda result: result.needed.low)
    high = max(candidates, key=lambda result: result.needed.high)

    def spanning(name: str) -> Interval:
        middle = getattr(chosen, name).estimate
        return Interval(min(getattr(low, name).low, middle), middle, max(getattr(high, name).high, middle))

    terms = {name: Interval(min(getattr(c.breakdown, name).low for c in candidates), value.estimate,
                            max(getattr(c.breakdown, name).high for c in candidates))
             for name, value in chosen.breakdown.items()}
    return dataclasses.replace(
        chosen, plan=plan, breakdown=dataclasses.replace(chosen.breakdown, **terms),
        allocated=spanning("allocated"), reserved=spanning("reserved"), process=spanning("process"), cached=spanning("cached"),
        assumptions=list(dict.fromkeys([*chosen.assumptions, note])),
    )


def unmodelled_code(plan: Plan, estimate: Callable[..., Estimate], *device) -> Estimate:
    """A model run by code the cost model does not read (its own, loaded with trust_remote_code, or another
    framework's): the weights, gradients and optimizer state are the same whoever writes the layers; what the layers
    keep is not. The estimate takes transformers' layers for the same shapes. Another implementation keeps at least
    what its matmuls and attention kernel need (the compiled accounting, which recomputes everything else: the low end)
    and, written plainly, up to transformers' eager layers with their attention scores (the high end)."""
    usual = dataclasses.replace(plan, model_code="transformers")
    chosen = estimate(dataclasses.replace(usual, attention=usual.attention or "sdpa"), *device)
    alternatives = [estimate(dataclasses.replace(usual, attention="eager"), *device)]
    if plan.mode == "train":
        alternatives.append(estimate(dataclasses.replace(usual, attention="sdpa", compiled=True), *device))
    note = ("the model's own code (not transformers', LitGPT's or gpt-fast's) is not read: its layers are estimated as "
            "transformers' for the same shapes, between what the matmuls need (low) and eager layers keeping the attention "
            "scores (high)")
    return covering(chosen, alternatives, plan, note)


def trl_default_checkpointing(plan: Plan, estimate: Callable[..., Estimate], *device) -> Estimate:
    """A TRL SFTConfig that leaves gradient checkpointing to TRL: on from TRL 0.22 (PR 3510 made it the default of its
    training configs; the estimate), off before, as in TrainingArguments (the high end); a stated release decides."""
    settled = dataclasses.replace(plan, trl_default_checkpointing=False)
    if plan.trl_checkpointing is not None:
        return dataclasses.replace(estimate(dataclasses.replace(settled, gradient_checkpointing=plan.trl_checkpointing), *device),
                                   plan=plan)
    chosen = estimate(dataclasses.replace(settled, gradient_checkpointing=True), *device)
    older = estimate(dataclasses.replace(settled, gradient_checkpointing=False), *device)
    note = ("gradient checkpointing: TRL's SFTConfig turns it on by default from TRL 0.22 (the estimate); before, off "
            f"(the high end); gradient_checkpointing= in the SFTConfig or {settled_by('trl')}")
    return covering(chosen, [older], plan, note)


def trl_default_loss(plan: Plan, estimate: Callable[..., Estimate], *device) -> Estimate:
    """A TRL SFTConfig that leaves its loss to TRL: from TRL 1.7.0 the SFTTrainer's default `loss_type` is
    "chunked_nll", which applies the LM head and the cross-entropy 256 tokens at a time under activation checkpointing
    (the estimate); before, "nll", the whole logits' cross-entropy (the high end); a stated release decides."""
    settled = dataclasses.replace(plan, trl_default_loss=False)
    if targets_the_head(plan):  # TRL 1.7's SFTTrainer refuses its chunked default when the head carries an adapter
        note = ("loss: over the whole logits; TRL's chunked default (loss_type=\"chunked_nll\", from TRL 1.7) refuses an "
                "LM head that carries a LoRA adapter, so such a run states loss_type=\"nll\"")
        result = estimate(settled, *device)
        return dataclasses.replace(result, plan=plan, assumptions=list(dict.fromkeys([*result.assumptions, note])))
    if plan.trl_chunked_loss is not None:
        loss = "checkpointed-chunked" if plan.trl_chunked_loss else plan.loss
        return dataclasses.replace(estimate(dataclasses.replace(settled, loss=loss), *device), plan=plan)
    chosen = estimate(dataclasses.replace(settled, loss="checkpointed-chunked"), *device)
    older = estimate(settled, *device)
    note = ("loss: TRL's SFTTrainer takes it 256 tokens at a time by default from TRL 1.7 (loss_type=\"chunked_nll\", the "
            "estimate), no logits outliving their chunk; before, over the whole logits (the high end); loss_type= in the "
            f"SFTConfig or {settled_by('trl')}")
    return covering(chosen, [older], plan, note)


def unstated_lora_base(plan: Plan) -> bool:
    """Whether a LoRA run under autocast leaves the dtype its frozen base is loaded in unstated (Plan.lora_base_16bit)."""
    return (plan.mode == "train" and plan.lora_rank is not None and plan.dtype.startswith("amp") and plan.quant is None
            and plan.model_code == "transformers" and plan.lora_base_16bit is None)


def lora_base(plan: Plan, estimate: Callable[..., Estimate], *device) -> Estimate:
    """A LoRA run under autocast whose base's load dtype nobody stated: `from_pretrained` loads the checkpoint's dtype
    from transformers 5 on (dtype="auto", 16 bits for the usual checkpoint: the estimate) and fp32 before (the high end:
    fp32 weights, and the fp32 residual stream and norms autocast leaves them)."""
    chosen = estimate(dataclasses.replace(plan, lora_base_16bit=True), *device)
    older = estimate(dataclasses.replace(plan, lora_base_16bit=False), *device)
    note = ("LoRA base's load dtype not stated: the checkpoint's own, 16 bits, as `from_pretrained` loads it from "
            "transformers 5 on (dtype=\"auto\"; the estimate); fp32 before 5, or for an fp32 checkpoint (the high end); "
            f"dtype= in from_pretrained or {settled_by('transformers')}")
    return covering(chosen, [older], plan, note)


def unstated_load_dtype(plan: Plan) -> bool:
    """Whether the script loads a transformers model (no adapters, no quantisation) with `from_pretrained` and no dtype,
    and nothing else makes its weights 16-bit: their dtype is the release's default (Plan.default_load_dtype)."""
    return (plan.default_load_dtype and plan.lora_rank is None and plan.quant is None and plan.model_code == "transformers"
            and plan.model is not None and plan.model.kind != "diffusion" and plan.dtype in ("fp32", "amp-bf16", "amp-fp16"))


def load_dtype(plan: Plan, estimate: Callable[..., Estimate], *device) -> Estimate:
    """A model loaded by `from_pretrained` without a dtype: transformers 5 loads the checkpoint's own (dtype="auto", its
    default), so a 16-bit checkpoint's weights, gradients and optimizer states are 16-bit and an autocast over them
    keeps what pure 16 bits keeps; earlier releases load fp32, which the script's autocast (or none) then runs on. The
    estimate takes transformers 5 where the checkpoint's dtype is known, the interval's other end the fp32 load; where
    the checkpoint's dtype is not known, the estimate keeps fp32 and the low end takes a 16-bit checkpoint."""
    assert plan.model is not None, "unstated_load_dtype asks for a model"
    settled = dataclasses.replace(plan, default_load_dtype=False)  # loaded in fp32
    checkpoint = plan.model.checkpoint_dtype
    sixteen = dataclasses.replace(settled, dtype=checkpoint or "bf16")  # loaded in the checkpoint's 16 bits
    if checkpoint == "fp32" or plan.loads_checkpoint_dtype is False:
        return dataclasses.replace(estimate(settled, *device), plan=plan)
    if plan.loads_checkpoint_dtype and checkpoint is not None:
        return dataclasses.replace(estimate(sixteen, *device), plan=plan)
    flags = f"dtype= in from_pretrained or {settled_by('transformers')}"
    if checkpoint is None:
        note = ("weights' dtype not stated and the checkpoint's not known: fp32, as `from_pretrained` loads before "
                f"transformers 5 (the estimate); transformers 5 loads the checkpoint's own, 16 bits for most (the low end); {flags}")
        return covering(estimate(settled, *device), [estimate(sixteen, *device)], plan, note)
    under = f", and the autocast over them keeps what pure {checkpoint} keeps" if plan.dtype.startswith("amp") else ""
    note = (f"weights' dtype not stated: the checkpoint's {checkpoint}, as `from_pretrained` loads it from transformers 5 on "
            f"(dtype=\"auto\"; the estimate: weights{', gradients and optimizer state' if plan.mode == 'train' else ''} in 16 "
            f"bits{under}); fp32 before 5 (the high end); {flags}")
    result = covering(estimate(sixteen, *device), [estimate(settled, *device)], plan, note)
    if plan.mode == "train" and checkpoint == "fp16" and plan.dtype == "amp-fp16":
        # torch's GradScaler.unscale_ raises on fp16 gradients (_unscale_grads_ with allow_fp16=False)
        stop = ("an fp16 checkpoint loaded as transformers 5 loads it and trained under fp16 mixed precision stops at the "
                "first optimizer step: torch's GradScaler refuses fp16 gradients (\"Attempting to unscale FP16 gradients\"); "
                "load it with dtype=torch.float32")
        result = dataclasses.replace(result, assumptions=[*result.assumptions, stop])
    return result


def unstated_kbit_preparation(plan: Plan) -> bool:
    """Whether adapters trained over a quantised transformers (or own-code) base leave peft's
    prepare_model_for_kbit_training unstated (Plan.kbit_prepared); LitGPT's and gpt-fast's code never call it."""
    return (plan.mode == "train" and plan.quant is not None and plan.lora_rank is not None and plan.kbit_prepared is None
            and plan.model_code in ("transformers", "own"))


def kbit_preparation(plan: Plan, estimate: Callable[..., Estimate], *device) -> Estimate:
    """Adapters over a quantised base with no word on peft's prepare_model_for_kbit_training, which casts every
    unquantised parameter (embeddings, LM head, norms) to fp32 and keeps the checkpointed layers' inputs in fp32. A
    script that wraps the model with get_peft_model alone, LitGPT and torchtune keep them in 16 bits (the estimate);
    TRL's SFTTrainer called it, up to TRL 0.26, for a model loaded in 4 or 8 bits that it wrapped with a peft config,
    as peft's QLoRA guide does (the high end; huggingface/trl#4704 moved it to trl.experimental in 0.27)."""
    chosen = estimate(dataclasses.replace(plan, kbit_prepared=False), *device)
    prepared = estimate(dataclasses.replace(plan, kbit_prepared=True), *device)
    note = ("peft's prepare_model_for_kbit_training not stated: not called (the estimate), the unquantised parameters "
            "in 16 bits; called (TRL's SFTTrainer did up to 0.26 for a quantised model with a peft config), they and the "
            "checkpointed layers' inputs are fp32 (the high end); --kbit-prepared or --no-kbit-prepared settles it")
    return covering(chosen, [prepared], plan, note)


def covered(plan: Plan, estimate: Callable[..., Estimate], *device) -> Estimate:
    """The estimate of a plan that leaves a choice to code nobody stated (the model's own code, the attention kernel,
    TRL's default gradient checkpointing and loss, a LoRA base's load dtype, peft's kbit preparation), its interval covering the
    alternatives."""
    if plan.trl_default_checkpointing and plan.mode == "train":
        return trl_default_checkpointing(plan, estimate, *device)
    if plan.trl_default_loss and plan.mode == "train":
        return trl_default_loss(plan, estimate, *device)
    if unstated_kbit_preparation(plan):
        return kbit_preparation(plan, estimate, *device)
    if unstated_lora_base(plan):
        return lora_base(plan, estimate, *device)
    if unstated_load_dtype(plan):
        return load_dtype(plan, estimate, *device)
    if plan.model_code == "own":
        return unmodelled_code(plan, estimate, *device)
    return unstated_attention(plan, estimate, *device)
