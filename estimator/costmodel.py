"""The memory model: a training (or inference, or generation) configuration in, per-GPU peaks out.

Every term is an interval (low, estimate, high) in bytes, and every assumption the numbers rest
on is returned with them. The three peaks are what different tools show: *allocated* (the sum of
live tensors, `torch.cuda.max_memory_allocated`), *reserved* (what the caching allocator holds,
fragmentation included, `max_memory_reserved`) and *process* (reserved plus the CUDA context,
roughly what `nvidia-smi` shows). The verdict compares the process peak with what one device
can allocate.

Where the constants come from is in docs/vram.md; the published figures they rest on are in
the design notes (Korthikanti et al. 2022 for transformer activations, the ZeRO paper for
sharded model states, measured CE-loss and CNN activation costs).
"""

from __future__ import annotations

import dataclasses
import math

from . import litgpt
from .activation_terms import activation_terms
from .adapters import (
    adapters_in_model_dtype,
    bytes_per_adapter_param,
    head_adapter_params,
    lora_params,
    saved_module_params,
)
from .allocator import BLOCKS_OVER_LIVE, FRAGMENTATION, block_overhead, length_cache
from .architectures import Architecture, Shape, parameter_count, shape
from .cost_constants import (
    DEEPSPEED_REDUCE_BUCKET_ELEMENTS,
    DEEPSPEED_SUB_GROUP_ELEMENTS,
    DEFAULT_BLAS_WORKSPACE_BYTES,
    QUANT_BYTES,
    SHARDED_GRADIENTS,
    SHARDED_OPTIMIZER,
    SHARDED_PARAMETERS,
    TYPICAL_SEQUENCE,
)
from .diffusion import diffusion_terms, pipeline_of
from .error_bands import widened
from .gpt_fast import gpt_fast_terms
from .mixed_precision import fsdp_param_bytes
from .paged import paged_share
from .plan import (
    OPTIMIZER_STATE,
    PRECISION,
    ZERO,
    Breakdown,
    CannotEstimate,
    Estimate,
    Interval,
    Plan,
    larger,
    validate,
)
from .trainer_eval import eval_logits_note
from .units import GIB
from .unstated import covered, cuda_context, unstated_kbit_preparation, unstated_load_dtype, unstated_lora_base
from .versions import ROTARY_CACHE_UNTIL, settled_by


def estimate(plan: Plan, context_bytes: float | Interval = 0.14 * GIB, workspace_bytes: float = DEFAULT_BLAS_WORKSPACE_BYTES,
             compute_capability: str | None = None, usable_bytes: float | None = None) -> Estimate:
    """Per-GPU peaks of one configuration (see `mechanism_estimate` for the arguments), each interval reaching at
    least the error band its kind of run has shown on published measurements (error_bands.py)."""
    return widened(mechanism_estimate(plan, context_bytes, workspace_bytes, compute_capability, usable_bytes))


def mechanism_estimate(plan: Plan, context_bytes: float | Interval = 0.14 * GIB,
                       workspace_bytes: float = DEFAULT_BLAS_WORKSPACE_BYTES, compute_capability: str | None = None,
                       usable_bytes: float | None = None) -> Estimate:
    """Per-GPU peaks of one configuration, the interval covering only the alternatives the cost model knows of. ``context_bytes``: the target device's CUDA context with lazy module
    loading (unstated.cuda_context), or an interval where it was measured for the run; ``workspace_bytes``: torch's cuBLAS
    workspace per handle and stream there; ``compute_capability``: an NVIDIA device's ("7.0"), which decides the
    attention kernels it has (None: not known, or not NVIDIA); ``usable_bytes``: what one process can allocate
    there, which bounds the cache the allocator keeps (None: not known, no bound)."""
    validate(plan)
    arch = plan.model
    if arch is None:
        raise CannotEstimate("the model is unknown: there is nothing to count (name it with --model)")
    trl_default = (plan.trl_default_checkpointing or plan.trl_default_loss) and plan.mode == "train"
    if (plan.model_code == "own" or plan.attention is None or trl_default or unstated_lora_base(plan) or unstated_load_dtype(plan)
            or unstated_kbit_preparation(plan)):
        # an estimate whose interval covers the alternatives
        return covered(plan, mechanism_estimate, context_bytes, workspace_bytes, compute_capability, usable_bytes)
    notes: list[str] = []
    asked = plan
    kernel = attention_kernel(plan, compute_capability, notes)
    if kernel != plan.attention:
        plan = dataclasses.replace(plan, attention=kernel)
    if plan.model_code == "litgpt" and arch.kind == "decoder":
        arch, changes = litgpt.litgpt_architecture(arch)
        plan = dataclasses.replace(plan, model=arch)
        notes += changes
    geometry = shape(arch)
    workspace = _blas_workspace(plan, workspace_bytes)
    pipeline = pipeline_of(arch) if arch.kind == "diffusion" else None
    if pipeline is not None:
        params, trainable, terms = diffusion_terms(plan, arch, pipeline, notes)
        terms.setdefault("gradients", ZERO)
        step, buckets = _step_terms(plan, geometry, trainable, terms["gradients"], notes)
        breakdown = Breakdown(**terms, optimizer_step=step, gradient_buckets=buckets, cublas_workspace=workspace,
                              gradients_in_backward=plan.mode == "train" and (plan.grad_accum > 1 or _zero_grad_frees(plan) is False),
                              gradients_zeroed_high=plan.mode == "train" and _zero_grad_frees(plan) is None)
    else:
        params = parameter_count(arch)
        trainable = _trainable_params(plan, geometry, params, notes)
        weights, gradients, optimizer, cache, gathered_layers = _model_states(plan, geometry, params, trainable, notes)
        weights = weights + _rotary_cache(plan, arch, geometry, notes)
        activations, logits, kv, prompt_kv, prompt_logits, layer_phase, previous_kv = activation_terms(plan, arch, geometry, notes)
        weights = weights + _beyond_the_loss(gathered_layers, layer_phase, logits)
        step, buckets = _step_terms(plan, geometry, trainable, gradients, notes)
        if plan.optimizer_in_backward and plan.mode == "train":
            gradients, step = _optimizer_in_backward(plan, geometry, trainable, notes), ZERO
        breakdown = Breakdown(
            weights, gradients, optimizer, cache, activations, logits, kv, optimizer_step=step, gradient_buckets=buckets,
            cublas_workspace=workspace, dequantised=_dequantised(plan, geometry, notes),
            loss_beside_dequantised=_loss_beside_dequantised(plan, geometry),
            block_rounding=_block_rounding(plan, geometry, trainable == params),
            gradients_in_backward=plan.mode == "train" and (
                plan.grad_accum > 1 or plan.optimizer_in_backward or _zero_grad_frees(plan) is False),
            gradients_zeroed_high=plan.mode == "train" and _zero_grad_frees(plan) is None and not plan.optimizer_in_backward,
            prompt_kv_cache=prompt_kv if plan.mode != "train" and plan.model_code != "litgpt" else None,
            prompt_logits=prompt_logits, previous_kv_cache=previous_kv,
            **gpt_fast_terms(plan, geometry, notes),
        )
    allocated = breakdown.peak()
    paged = breakdown.optimizer.scaled(paged_share(plan, geometry, trainable))
    if paged.high:
        allocated = allocated + paged.scaled(-1.0)
        notes.append(f"paged optimizer: {paged.estimate / GIB:.2f} GiB of its state in CUDA managed memory (bitsandbytes' "
                     "get_paged), outside torch's allocator: on the device while the optimizer touches it (the process "
                     "peak), not in max_memory_allocated or max_memory_reserved")
    if breakdown.causal_mask.estimate:
        # gpt-fast builds its mask as torch.tril(torch.ones(n, n)): both are alive before the KV cache exists
        allocated = larger(allocated, breakdown.weights + breakdown.causal_mask.scaled(2.0))
    if plan.quant is not None and geometry is not None:
        # Quantising a 16-bit checkpoint as it loads: the largest tensor is on the device in 16 bits
        # beside the quantised rest (up to twice, while it is converted). bitsandbytes' int8 (Int8Params.cuda,
        # double_quant) also makes a column-major int8 copy of the weight beside the row-major one it keeps,
        # and frees it after: one more byte per parameter of the largest quantised weight.
        largest = 2.0 * max(geometry.embedding_params, geometry.lm_head_params, geometry.hidden * geometry.intermediate)
        if plan.quant == "int8":
            quantised_head = geometry.lm_head_params if plan.model_code == "litgpt" else 0
            largest += max(quantised_head, geometry.hidden * geometry.intermediate)
        loading = breakdown.weights + Interval(largest, largest, 2 * largest)
        allocated = larger(allocated, loading)
        if loading.estimate >= allocated.estimate:
            notes.append("the peak is reached while the 16-bit checkpoint is quantised on loading")
    if plan.mode == "train":
        phase = "the optimizer step" if breakdown.step().estimate > breakdown.forward_backward().estimate else "the forward and backward"
        notes.append(f"the peak is reached in {phase} ({_gradients_between_steps(plan)}"
                     + (f"; they accumulate over {plan.grad_accum} micro-batches here)" if plan.grad_accum > 1 else ")"))
    allocated = Interval(allocated.low, allocated.estimate, allocated.high * (1 + BLOCKS_OVER_LIVE))
    reserved = Interval(
        allocated.low * (1 + FRAGMENTATION[0]), allocated.estimate * (1 + FRAGMENTATION[1]),
        allocated.high * (1 + FRAGMENTATION[2]),
    )
    notes.append(
        f"allocator overhead (reserved over allocated) {FRAGMENTATION[0]:.0%}–{FRAGMENTATION[2]:.0%}, "
        f"{FRAGMENTATION[1]:.1%} expected (replayed runs); batches of varying length fragment most"
    )
    # Where cuBLAS allocates its workspace itself (the low end), it is outside the allocator's count but on the device.
    outside_allocator = Interval(workspace.high - workspace.low, workspace.high - workspace.estimate, 0.0)
    context = cuda_context(plan, context_bytes, notes)
    room = None if usable_bytes is None else Interval.exact(usable_bytes) + (context + outside_allocator).scaled(-1.0)
    cached = length_cache(plan, allocated, reserved, breakdown, room, notes)
    evaluation = eval_logits_note(plan, geometry, (breakdown.weights + breakdown.optimizer).estimate,
                                  None if room is None else room.estimate)
    notes += [evaluation] if evaluation else []
    reserved = reserved + cached
    process = reserved + context + outside_allocator + Interval(0.0, paged.estimate, paged.high)
    plan = dataclasses.replace(plan, attention=asked.attention)
    return Estimate(plan, params, trainable, breakdown, allocated, reserved, process, list(dict.fromkeys(notes)), cached)


def _beyond_the_loss(gathered_layers: Interval, layer_phase: Interval, logits: Interval) -> Interval:
    """What FSDP's gathered layer units add to the forward and backward's peak (counted with the weights), end by end. The activations count
    the loss phase (the kept activations and the logits) and a layer's backward (the kept activations and, under
    checkpointing, the recomputed layer: ``layer_phase``) as the larger of the two; the layer units are gathered
    only in the second (resharded after their forward, gathered again after the loss's tensors are freed), so the
    peak grows by max(layer + units, logits) - max(layer, logits)."""
    ends = ((gathered_layers.low, layer_phase.low, logits.low), (gathered_layers.estimate, layer_phase.estimate, logits.estimate),
            (gathered_layers.high, layer_phase.high, logits.high))
    return Interval(*(max(layer + units, loss) - max(layer, loss) for units, layer, loss in ends))


def _zero_grad_frees(plan: Plan) -> bool | None:
    """Whether zero_grad frees the gradients (Plan.zero_grad_frees); an Accelerator-prepared optimizer's zero_grad passes
    accelerate's default to torch's, whatever torch's own (Plan.zero_grad_accelerated); LitGPT's loops call
    `optimizer.zero_grad()` and LitGPT has required torch 2 or later (its pyproject), whose default frees them."""
    if plan.zero_grad_accelerated:  # set only where the script gives no set_to_none of its own
        return plan.accelerate_zero_grad_frees
    if plan.zero_grad_frees is None and plan.model_code == "litgpt":
        return True
    return plan.zero_grad_frees


def _gradients_between_steps(plan: Plan) -> str:
    """What happens to the gradients between one step and the next forward, as the plan's torch (or accelerate) release
    decides."""
    frees = _zero_grad_frees(plan)
    if plan.zero_grad_accelerated:  # accelerate's default decides, not torch's
        if frees is False:
            return ("the prepared optimizer's zero_grad zeroes the gradients in place (accelerate before 0.28.0 passes "
                    "set_to_none=False), so they stay allocated through every forward")
        return ("gradients are freed by the prepared optimizer's zero_grad before each forward, as accelerate 0.28.0 and "
                "later do (set_to_none=True)" + ("" if frees else "; before, it zeroed them in place and they stayed "
                                                 "allocated through every forward (the high end); " + settled_by("accelerate")))
    if frees is False:
        return ("zero_grad zeroes the gradients in place (set_to_none=False, its default before torch 2.0), so they stay "
                "allocated through every forward")
    if frees:
        return "gradients are freed by zero_grad before each forward"
    return ("gradients are freed by zero_grad before each forward, as torch 2.0 and later do (set_to_none=True); "
            "before, zero_grad zeroed them in place and they stayed allocated through every forward (the high end); "
            + settled_by("torch"))


def attention_kernel(plan: Plan, compute_capability: str | None, notes: list[str]) -> str | None:
    """The attention a device runs for what was asked, as far as memory goes (torch's sdp_utils: the flash
    kernel needs compute capability 8.0 or newer and 16-bit inputs, the memory-efficient kernel runs from 5.0
    on fp16 and fp32, bf16 from 8.0; otherwise SDPA falls back to the math kernel, which materialises the
    probabilities as eager attention does). FlashAttention-2 (transformers' flash_attention_2) runs from 8.0."""
    if compute_capability is None or plan.attention == "eager" or plan.model is None or plan.model.kind == "diffusion":
        return plan.attention
    try:
        capability = tuple(int(part) for part in compute_capability.split("."))
    except ValueError:
        return plan.attention
    if capability >= (8, 0):
        return plan.attention
    if plan.attention == "flash":
        raise CannotEstimate(f"FlashAttention-2 needs compute capability 8.0 or newer; this GPU has {compute_capability}: "
                             "use --attention sdpa (or eager)")
    if plan.dtype in ("bf16", "amp-bf16"):
        notes.append(f"SDPA on compute capability {compute_capability} with bf16: neither fused kernel takes it (flash needs "
                     "8.0, the memory-efficient kernel bf16 from 8.0); the math kernel keeps the attention probabilities, "
                     "counted as eager attention")
        return "eager"
    notes.append(f"SDPA on compute capability {compute_capability}: no flash kernel (8.0 and newer); the memory-efficient "
                 "kernel keeps what flash keeps (no score matrices)")
    return plan.attention


# ---------------------------------------------------------------------- parameters and states
def _trainable_params(plan: Plan, geometry: Shape | None, params: int, notes: list[str]) -> int:
    if plan.mode != "train":
        return 0
    if plan.lora_rank is not None:
        if geometry is None:
            raise CannotEstimate("LoRA is modelled for transformer models only")
        lora = lora_params(plan, geometry)
        notes.append(f"LoRA rank {plan.lora_rank} on {', '.join(plan.lora_targets)}: {lora:,} trainable parameters, kept in "
                     + ("the model's dtype" if adapters_in_model_dtype(plan) else "fp32"))
        head = head_adapter_params(plan, geometry)
        if head:
            notes.append(f"LoRA on the LM head: one adapter of rank x (hidden + vocabulary) = {head:,} parameters; it keeps a copy "
                         "of the final hidden states for the backward")
        return lora
    return params


def _model_states(plan: Plan, geometry: Shape | None, params: int, trainable: int, notes: list[str]):
    weight_bytes, grad_bytes, _, cache_bytes = PRECISION[plan.dtype]
    shards = plan.gpus if plan.sharding in SHARDED_PARAMETERS else 1
    lora = plan.lora_rank is not None and plan.mode == "train"
    if plan.quant is not None:
        if geometry is None:
            raise CannotEstimate("quantised bases are modelled for transformer models only")
        # transformers keeps the LM head in 16 bits; Fabric's bitsandbytes plugin quantises every linear
        quantised_head = plan.model_code == "litgpt"
        kept = geometry.embedding_params + (0 if quantised_head else geometry.lm_head_params)  # stay in 16-bit
        quantised = params - kept
        kept_bytes = 4 if plan.kbit_prepared else 2
        base = quantised * QUANT_BYTES[plan.quant] + kept * kept_bytes
        unquantised_bytes = kept_bytes
        notes.append(f"{plan.quant}: {quantised:,} parameters quantised, " + ("the LM head too, " if quantised_head else "")
                     + ("embeddings" if quantised_head else "embeddings and LM head") + " kept in "
                     + ("fp32 (prepare_model_for_kbit_training casts them up)" if plan.kbit_prepared else "16-bit"))
    else:
        base_16bit = lora and plan.dtype.startswith("amp") and plan.lora_base_16bit is not False
        base = params * (2 if base_16bit else weight_bytes)
        unquantised_bytes = 2 if base_16bit else weight_bytes
        if lora and plan.dtype.startswith("amp"):
            notes.append(f"LoRA under autocast: the frozen base loaded in {'16 bits' if base_16bit else 'fp32'}")
    if plan.mode != "train":
        whole = _whole_under_tensor_parallel(plan, geometry)
        if plan.tensor_parallel > 1:
            split = "heads and MLP; the embeddings and LM head whole on every GPU (LitGPT's generate/tp.py)" if whole else (
                "heads, MLP, embeddings and LM head")
            notes.append(f"tensor parallel over {plan.tensor_parallel} GPUs: weights split {plan.tensor_parallel} ways ({split}; "
                         "the norms, a fraction of a percent, are counted split too)")
        return Interval.exact((base / shards - whole) / plan.tensor_parallel + whole), ZERO, ZERO, ZERO, ZERO
    adapter_bytes = bytes_per_adapter_param(plan)
    trainable_bytes, state_dtype = (adapter_bytes, adapter_bytes) if lora else (grad_bytes, weight_bytes)
    states, fixed = OPTIMIZER_STATE[plan.optimizer]
    optimizer = trainable * (states * state_dtype + fixed)
    weights = base + (trainable * adapter_bytes if lora else 0)
    gradients = trainable * trainable_bytes
    saved = saved_module_params(plan, geometry)
    if saved:  # trainable copies in the base's 16-bit or fp32 dtype, their gradients and state alike
        copy_bytes = unquantised_bytes
        weights += saved * copy_bytes
        gradients += saved * copy_bytes
        optimizer += saved * (states * copy_bytes + fixed)
        notes.append(f"modules to save ({', '.join(plan.modules_to_save)}): peft trains a copy beside the frozen original, "
                     f"{saved:,} parameters in {copy_bytes * 8}-bit with their gradients and optimizer state")
    cache = params * cache_bytes if not lora and plan.quant is None else 0
    if cache and plan.sharding not in SHARDED_PARAMETERS:
        notes.append("autocast keeps a 16-bit copy of the weights it casts (about 2 bytes per parameter)")
    if lora and plan.quant is None and plan.dtype.startswith("amp") and plan.lora_base_16bit is False:
        cache = _frozen_casts_saved(geometry, params)
        notes.append("autocast over the frozen fp32 base: each linear's backward keeps the 16-bit cast of its weight "
                     "(autocast caches no cast of a frozen weight, the matmul saves it for the input's gradient)")
    if plan.optimizer == "adafactor":
        notes.append("Adafactor's factored state is taken as 0.4 bytes per parameter (it depends on the matrix shapes)")
    # sharding of model states across data-parallel ranks (ZeRO paper's stages)
    weights_high = weights
    weights_low = None
    if plan.sharding in SHARDED_OPTIMIZER:
        optimizer /= plan.gpus
    if plan.sharding in SHARDED_GRADIENTS:
        gradients /= plan.gpus
    if plan.sharding == "zero3":
        # All-gathered: the unit being computed and the next, prefetched; reduce-scattered: one unit's gradient.
        in_flight = _largest_layer_bytes(geometry, weight_bytes) + _layer_bytes_of(geometry, weight_bytes)
        weights = weights_high = weights / plan.gpus + in_flight + _reduce_bucket(plan, DEEPSPEED_REDUCE_BUCKET_ELEMENTS)
        weights_low = weights - _reduce_bucket(plan, DEEPSPEED_REDUCE_BUCKET_ELEMENTS) + _reduce_bucket(
            plan, geometry.hidden ** 2 if geometry is not None else DEEPSPEED_REDUCE_BUCKET_ELEMENTS)
        gradients += _layer_bytes_of(geometry, grad_bytes) if not lora else 0.0
        notes.append(f"{plan.sharding} over {_gpus(plan)}: weights, gradients and optimizer state sharded; "
                     "two units gathered at a time (one prefetched) and one unit's gradient being reduce-scattered; "
                     "DeepSpeed's reduction bucket at its default reduce_bucket_size (5e8 elements; the HF Trainer's "
                     "\"auto\", hidden², at the low end)")
    gathered_layers = ZERO
    if plan.sharding in ("fsdp", "fsdp-grad-op"):
        root, layers = _fsdp_gathered(plan, geometry, params, weight_bytes, notes)
        if plan.sharding == "fsdp":  # resharded after each layer's forward: not alive beside the loss (_beyond_the_loss)
            gathered_layers = layers
        else:
            root = root + layers
        weights, weights_high = weights / plan.gpus + root.estimate, weights / plan.gpus + root.high
        # one unit's unsharded gradient, in the gathered parameters' dtype, being reduce-scattered
        gradients += _layer_bytes_of(geometry, fsdp_param_bytes(plan, grad_bytes, 1)) if not lora else 0.0
    gradients_high = None
    if plan.sharding in SHARDED_PARAMETERS:
        if plan.sharding != "zero3" and plan.grad_accum > 1:
            # unsharded until the last micro-batch (no_sync), in the gathered param_dtype (FSDP2 upcasts to a wider reduce_dtype)
            gradients, gradients_high = (trainable * fsdp_param_bytes(plan, trainable_bytes, end) for end in (1, 2))
            notes.append("FSDP accumulates gradients unsharded between micro-batches (no_sync), in the gathered parameters' dtype")
        if cache:
            cache = 0.0
            notes.append(f"{plan.sharding}: autocast keeps no cast copies of gathered parameters (they are not leaves); casts are per layer")
    elif plan.sharding in ("zero1", "zero2"):
        notes.append(f"{plan.sharding} over {_gpus(plan)}: optimizer state{' and gradients' if plan.sharding == 'zero2' else ''} sharded")
    if "optimizer" in plan.offload:
        optimizer = 0.0
        notes.append("optimizer state offloaded to the CPU")
    if "params" in plan.offload:
        if plan.sharding not in SHARDED_PARAMETERS:
            raise CannotEstimate("parameter offload needs ZeRO-3 or FSDP sharding")
        weights = weights_high = _largest_layer_bytes(geometry, weight_bytes)
        weights_low = None
        gathered_layers = ZERO  # the resident layer stands for what is gathered
        notes.append("parameters offloaded to the CPU: one layer resident at a time")
    return (Interval(weights if weights_low is None else weights_low, weights, weights_high),
            Interval(gradients, gradients, gradients_high or gradients),
            Interval.exact(optimizer), Interval.exact(cache), gathered_layers)


def _reduce_bucket(plan: Plan, elements: float) -> float:
    """Bytes of DeepSpeed ZeRO-3's contiguous gradient bucket of `elements`, in the engine's 16-bit dtype (fp32 without one)."""
    return elements * (4 if plan.dtype == "fp32" else 2)


def _whole_under_tensor_parallel(plan: Plan, geometry: Shape | None) -> float:
    """Bytes of the weights every GPU holds whole under tensor parallelism. LitGPT's generate/tp.py splits only the
    blocks' linears (the fused qkv and MLP inputs by column, the output projections by row), so its token embedding
    and LM head stay whole on each GPU (the head 4-bit where Fabric's bitsandbytes plugin quantises it); the Megatron
    split the plan takes otherwise splits them too."""
    if plan.tensor_parallel == 1 or plan.model_code != "litgpt" or geometry is None:
        return 0.0
    if plan.quant is None:
        return (geometry.embedding_params + geometry.lm_head_params) * PRECISION[plan.dtype][0]
    return geometry.embedding_params * 2.0 + geometry.lm_head_params * QUANT_BYTES[plan.quant]


def _frozen_casts_saved(geometry: Shape | None, params: int) -> float:
    """Bytes of the 16-bit weight casts an fp32 frozen base's linears save for the backward under autocast: every
    linear after the first adapter (whose input needs a gradient) and the LM head (the embedding matrix, where tied),
    2 bytes a weight; the embeddings are looked up, not cast. Replayed with peft on TinyLlama and Phi-2
    (calibration/lora_peaks.py)."""
    if geometry is None:
        return 2.0 * params
    return 2.0 * (params - geometry.embedding_params - geometry.lm_head_params + geometry.vocab * geometry.hidden)


def _rotary_cache(plan: Plan, arch: Architecture, geometry: Shape | None, notes: list[str]) -> Interval:
    """The per-layer cos and sin caches of the families in ROTARY_CACHE_UNTIL under older transformers:
    two tensors of max_position_embeddings x head_dim per layer, in the dtype the model is loaded in
    (from_pretrained sets it as the default while the model is built)."""
    if plan.model_code != "transformers" or geometry is None or arch.family not in ROTARY_CACHE_UNTIL or not arch.max_positions:
        return ZERO
    if plan.rotary_cache is False:
        return ZERO
    dtype_bytes = 2 if plan.dtype in ("bf16", "fp16") else 4
    size = 2.0 * geometry.layers * arch.max_positions * geometry.head_dim * dtype_bytes
    if plan.rotary_cache:
        return Interval.exact(size)
    notes.append(f"transformers before {ROTARY_CACHE_UNTIL[arch.family]} kept a rotary cos/sin cache for "
                 f"{arch.max_positions} positions in every layer of {arch.family} models (the high end); "
                 f"{settled_by('transformers')}")
    return Interval(0.0, 0.0, size)


def _fsdp_root_params(geometry: Shape | None) -> float:
    """The root unit's parameters under the usual wrapping (one unit per transformer layer): the embeddings
    and an untied LM head."""
    return 0.0 if geometry is None else float(geometry.embedding_params + geometry.lm_head_params)


def _fsdp_gathered(plan: Plan, geometry: Shape | None, params: int, weight_bytes: int, notes: list[str]) -> tuple[Interval, Interval]:
    """Gathered (unsharded) parameters under FSDP, (the root unit, the layer units) at the estimate and the high end.

    FULL_SHARD: FSDP (1 and 2) does not reshard the root unit after its forward (`_post_forward_reshard`: not
    `state._is_root`; fully_shard's root: "the parameters would be freed and all-gathered immediately"), so
    the embeddings and LM head stay gathered through the forward and backward; beside them the unit being
    computed and the next one, prefetched (backward_prefetch=BACKWARD_PRE, the default; limit_all_gathers
    allows two in flight). SHARD_GRAD_OP does not reshard any unit after its forward: at the turn from the
    forward to the backward every unit is gathered. Under FULL_SHARD the other units are resharded after their
    forward (fully_shard's reshard_after_forward=True, its default; FSDP1's FULL_SHARD alike): by the time the
    loss is computed only the root is gathered, and the layer units are gathered again in the backward, after the
    loss's tensors are freed (_beyond_the_loss)."""
    per_layer = _layer_bytes_of(geometry, 1)
    root = _fsdp_root_params(geometry)
    layers = (geometry.layers if geometry is not None else 0) if plan.sharding == "fsdp-grad-op" else 2
    if plan.quant is not None:  # the units gather the packed 4-bit (or 8-bit) storage; embeddings and head in 16 bits
        return Interval.exact(root * (4 if plan.kbit_prepared else 2)), Interval.exact(layers * per_layer * QUANT_BYTES[plan.quant])
    if plan.sharding == "fsdp-grad-op" and geometry is None:
        layers, per_layer = 1, float(params)
    if plan.sharding == "fsdp-grad-op":
        notes.append(f"fsdp-grad-op (SHARD_GRAD_OP) over {_gpus(plan)}: gradients and optimizer state sharded; "
                     "every unit stays gathered from its forward to its backward")
    else:
        notes.append(f"fsdp over {_gpus(plan)}: weights, gradients and optimizer state sharded; the root unit "
                     "(embeddings, LM head) stays gathered through the step, beside the unit being computed and the "
                     "next one (prefetched), which are resharded before the loss; one unit's gradient being reduce-scattered")
    if plan.dtype.startswith("amp") and plan.fsdp_param_dtype is None:
        notes.append("FSDP mixed precision: gathered parameters in 16 bits (param_dtype=bf16, accelerate's and "
                     "torchtitan's policy) at the estimate, fp32 (Lightning's, autocast casting) at the high end")
    estimate, high = fsdp_param_bytes(plan, weight_bytes, 1), fsdp_param_bytes(plan, weight_bytes, 2)
    return Interval(root * estimate, root * estimate, root * high), Interval(*(layers * per_layer * width for width in (estimate, estimate, high)))


# torch's optimizers whose foreach implementation (the default on CUDA) computes a temporary the size of
# all parameters in a group (Adam's sqrt of the second moment; RMSprop's and Adagrad's alike); SGD with
# momentum updates its buffers in place. Measured under FakeTensorMode with torch's MemTracker
# (calibration/step_peaks.py): AdamW foreach step peak = params + grads + 2 states + 1 parameter copy.
_FOREACH_TEMPORARY = {"adam": 1.0, "adamw": 1.0, "rmsprop": 1.0, "adagrad": 1.0}


def _step_terms(plan: Plan, geometry: Shape | None, trainable: int, gradients: Interval, notes: list[str]):
    """(the optimizer step's temporaries, DDP's gradient buckets) per GPU."""
    if plan.mode != "train":
        return ZERO, ZERO
    lora = plan.lora_rank is not None
    state_bytes = bytes_per_adapter_param(plan) if lora else PRECISION[plan.dtype][0]
    shards = plan.gpus if plan.sharding in SHARDED_OPTIMIZER else 1
    temporary = ZERO
    share = _FOREACH_TEMPORARY.get(plan.optimizer, 0.0)
    if share and "optimizer" not in plan.offload:
        whole = trainable * state_bytes * share / shards
        largest = _largest_tensor(geometry, trainable)
        one_tensor = Interval.exact(2 * largest * state_bytes)
        if plan.foreach is None and plan.trainer_default_optimizer and plan.optimizer == "adamw":
            if plan.trainer_adamw_torch is False:
                temporary = Interval.exact(largest * state_bytes)
                notes.append("optimizer: the Trainer's default before transformers 4.32, its own AdamW (adamw_hf), steps one "
                             "parameter at a time with one temporary, the square root of that parameter's second moment")
            elif plan.trainer_fused_adamw is None:
                temporary = Interval(one_tensor.low, one_tensor.estimate, whole)
                notes.append("optimizer: the Trainer's default, fused AdamW (adamw_torch_fused) with torch 2.8 and later (the "
                             "estimate); before, torch's foreach AdamW keeps a parameter-sized temporary (the high end); "
                             f"`optim=` in TrainingArguments or {settled_by('torch')}")
            else:
                temporary = one_tensor if plan.trainer_fused_adamw else Interval.exact(whole)
        elif plan.foreach is False:  # the per-tensor loop (or fused): temporaries of one tensor at a time
            temporary = one_tensor
        elif plan.foreach is True:
            temporary = Interval.exact(whole)
            notes.append("foreach optimizer step: one temporary the size of the parameters")
        else:  # torch's default: foreach on CUDA, fused where the script asks for it
            temporary = Interval(0.0, whole, whole)
            notes.append("optimizer step: torch's default (foreach) keeps one parameter-sized temporary; fused=True would not")
    if plan.sharding == "zero3" and "optimizer" not in plan.offload:
        partition = min(trainable / plan.gpus, DEEPSPEED_SUB_GROUP_ELEMENTS)
        temporary = temporary + Interval.exact(4.0 * partition)
        notes.append("zero3 step: DeepSpeed copies each sub-group's gradient partition into fp32 (the master weights' "
                     "gradient) while the optimizer steps it")
    buckets = ZERO
    if plan.sharding == "ddp" and plan.gpus > 1:
        buckets = gradients  # gradient_as_bucket_view=False (the default): the buckets are a second copy
        notes.append("DDP keeps its gradient buckets, a second copy of the gradients")
    return temporary, buckets


def _optimizer_in_backward(plan: Plan, geometry: Shape | None, trainable: int, notes: list[str]) -> Interval:
    """torchtune's optimizer_in_bwd (training.register_optim_in_bwd_hooks): one optimizer per parameter, stepped
    and zeroed (set to None) in the parameter's post-accumulate-grad hook. Gradients never coexist: the largest
    parameter's gradient and its step's temporary are alive during the backward, and there is no step phase."""
    lora = plan.lora_rank is not None
    state_bytes = bytes_per_adapter_param(plan) if lora else PRECISION[plan.dtype][0]
    grad_bytes = bytes_per_adapter_param(plan) if lora else PRECISION[plan.dtype][1]
    largest = _largest_tensor(geometry, trainable) if not lora else trainable / max(1, geometry.layers if geometry else 1)
    temporary = _FOREACH_TEMPORARY.get(plan.optimizer, 0.0) * state_bytes
    notes.append("optimizer step in the backward (one optimizer per parameter, stepped as its gradient is ready): "
                 "one parameter's gradient at a time, no step phase")
    return Interval.exact(largest * (grad_bytes + temporary))


def _block_rounding(plan: Plan, geometry: Shape | None, trains_all: bool) -> Interval:
    """The blocks' rounding over the model's weight matrices (and, in full training, their gradients and
    optimizer states: tensors of the same shapes), each in a fresh segment as when they are created.
    Low end 0: expandable segments (PYTORCH_CUDA_ALLOC_CONF) map memory without these segments."""
    if geometry is None or plan.sharding in SHARDED_PARAMETERS:
        return ZERO
    dims = geometry.lora_dims
    fused = "qkv_proj" in dims  # one matrix where the model fuses them (LitGPT, GPT-NeoX)
    mlp = ("gate_proj", "up_proj", "gate_up_proj", "down_proj")
    per_layer = [(d_in * d_out / plan.tensor_parallel, geometry.layers * ((geometry.experts or 1) if name in mlp else 1))
                 for name, (d_in, d_out) in dims.items() if not (fused and name in ("q_proj", "k_proj", "v_proj"))]
    weight_bytes = PRECISION[plan.dtype][0] if plan.quant is None else 2
    quantised_head = plan.model_code == "litgpt"
    total = 0.0
    for elements, count in per_layer:
        if plan.quant in ("nf4", "nf4-dq"):
            scales = elements / 64 * (4 if plan.quant == "nf4" else 1)
            total += count * (block_overhead(elements / 2) + block_overhead(scales))
        elif plan.quant == "int8":
            total += count * block_overhead(elements)
        else:
            total += count * block_overhead(elements * weight_bytes)
    embedding = geometry.vocab * geometry.hidden / (1 if plan.model_code == "litgpt" else plan.tensor_parallel)
    total += block_overhead(embedding * weight_bytes)
    if geometry.lm_head_params:
        head = block_overhead(embedding / 2) if plan.quant and quantised_head else block_overhead(embedding * weight_bytes)
        total += head
    if plan.mode == "train" and trains_all and plan.quant is None:
        states, _ = OPTIMIZER_STATE[plan.optimizer]
        total *= 2 + states  # gradients and each state: the same shapes, in the parameters' dtype
    return Interval(0.0, total, total)


def _blas_workspace(plan: Plan, per_handle: float) -> Interval:
    """torch's cuBLAS workspaces: one per handle and stream, and handles are per thread; a training step
    runs the forward on the script's thread and the backward on autograd's device thread (two). torch
    takes them from its caching allocator (counted in max_memory_allocated) except in the builds that
    leave them to cuBLAS itself (CUDA 12.2 and later before torch set them again: the low end)."""
    count = 2 if plan.mode == "train" else 1
    return Interval(0.0, count * per_handle, count * per_handle)


def _dequantised(plan: Plan, geometry: Shape | None, notes: list[str]) -> Interval:
    """A 4-bit matmul dequantises its weight for each call (bitsandbytes' MatMul4Bit; one token at a time
    takes the gemv kernel instead, so a generation's prompt does and its new tokens do not): the largest
    quantised weight, dequantised to the dtype it was quantised from and cast to the input's dtype.
    LitGPT: every linear, the LM head too, quantised from fp16 and cast to bf16 (4 bytes per weight);
    transformers: the LM head stays 16-bit, the weight is stored in the loading dtype (2 bytes, 6 when
    bnb_4bit_compute_dtype, fp32 by default, differs)."""
    if plan.quant not in ("nf4", "nf4-dq") or geometry is None:
        return ZERO
    hidden = geometry.hidden
    layer_linear = max(hidden * geometry.intermediate, hidden * geometry.heads * geometry.head_dim) / plan.tensor_parallel
    if plan.model_code == "litgpt":
        largest = max(layer_linear, geometry.vocab * hidden)
        value = Interval.exact(largest * litgpt.DEQUANTISED_BYTES)
    else:  # bnb_4bit_compute_dtype unknown: 16-bit compute at the estimate, fp32 at the high end
        fp32 = plan.quant_compute_fp32
        value = Interval(*(layer_linear * (6.0 if (end == 2 if fp32 is None else fp32) else 2.0) for end in (0, 1, 2)))
    notes.append("each 4-bit matmul dequantises its weight while it runs: the largest one is counted" + (" (and its fp32 cast: bnb_4bit_compute_dtype fp32, transformers' default)" if plan.quant_compute_fp32 else ""))
    return value


def _loss_beside_dequantised(plan: Plan, geometry: Shape | None) -> Interval:
    if plan.quant is None or geometry is None or plan.model_code != "litgpt" or plan.mode != "train":
        return ZERO
    logits = plan.batch_size * (plan.seq_len or TYPICAL_SEQUENCE) * geometry.vocab
    return Interval(*(logits * per_logit for per_logit in litgpt.LOSS_BESIDE_DEQUANTISED_BYTES))


def _largest_tensor(geometry: Shape | None, trainable: int) -> float:
    if geometry is None:
        return float(trainable)
    return float(min(trainable, max(geometry.embedding_params, geometry.lm_head_params, geometry.hidden * geometry.intermediate)))


def _layer_bytes_of(geometry: Shape | None, weight_bytes: int) -> float:
    """One transformer layer's parameters, in bytes."""
    if geometry is None:
        return 0.0
    return (geometry.total_params - geometry.embedding_params - geometry.lm_head_params) / geometry.layers * weight_bytes


def _largest_layer_bytes(geometry: Shape | None, weight_bytes: int) -> float:
    if geometry is None:
        return 0.0
    per_layer = (geometry.total_params - geometry.embedding_params - geometry.lm_head_params) / geometry.layers
    return max(per_layer, geometry.embedding_params, geometry.lm_head_params) * weight_bytes


def _gpus(plan: Plan) -> str:
    """The GPUs a sharded run is spread over, as a note says it: one GPU shards nothing, and the note says how to give more."""
    if plan.gpus == 1:
        return "1 GPU (a single shard saves nothing; give --gpus N or --gpu Nx<gpu> for the run's count)"
    return f"{plan.gpus} GPUs"


# ---------------------------------------------------------------------- verdicts
FITS, TIGHT, OOM, UNKNOWN = "fits", "tight", "oom", "unknown"


def verdict(result: Estimate, usable_bytes: float) -> str:
    """`fits` when even the high end of what the run needs fits, `oom` when even its low end does not, else `tight`
    (the process peak without the cached segments the allocator frees before it fails a request)."""
    needed = result.needed
    if math.isinf(needed.high) and needed.low <= usable_bytes:
        return UNKNOWN
    if needed.high <= usable_bytes:
        return FITS
    if needed.low > usable_bytes:
        return OOM
    return TIGHT
