"""What a step holds beside the model's states: the activations a training step keeps for its backward (per
layer, checkpointed, offloaded, with adapters and 4-bit bases), the logits its loss keeps, and what an inference
or a generation holds (one layer's working memory, the prompt's logits, the KV cache). Every term is a point
estimate per end of the interval; the cost model (costmodel.py) adds them to the states."""

from __future__ import annotations

import dataclasses
import math

from . import litgpt
from .activation_data import measured_dropout_bytes, measured_layer_coefficients
from .adapters import adapters_in_model_dtype, head_adapter_kept
from .architectures import Architecture, Shape
from .cost_constants import (
    CHUNKED_LOGIT_BYTES,
    COMPILED_CHUNKED_LOGIT_BYTES,
    FORMULA_SPREAD,
    IMAGE_SPREAD,
    INFERENCE_SPREAD,
    LITGPT_SPREAD,
    LOGIT_BYTES,
    MEASURED_SPREAD,
    PROJECTED_CHUNKED_LOGIT_BYTES,
    SAMPLING_BYTES,
    SHORT_SEQUENCE,
    TRAINER_LOGIT_BYTES,
    TRL_CHUNK_TOKENS,
    TYPICAL_SEQUENCE,
)
from .layer_activations import (
    adapter_layer_adjustment,
    autocast_layer_adjustment,
    compiled_layer_coefficient,
    compiled_lora_layer_coefficient,
    dropout_mask_bytes,
    formula_layer_coefficient,
    inference_layer_coefficient,
    kbit_prepared_kept,
    kv_heads_per_gpu,
    quantised_linear_inputs,
    selective_coefficient,
    training_dropout,
)
from .mixed_precision import forward_weights_16bit, fp32_residual_stream
from .plan import PRECISION, ZERO, CannotEstimate, Interval, Plan
from .versions import settled_by


def activation_terms(plan: Plan, arch: Architecture, geometry: Shape | None, notes: list[str]):
    """(activations, logits, KV cache, the KV cache while a prompt is read, the prompt's logits, the layer a
    checkpointed backward recomputes: counted in the activations, beside which the loss's tensors are gone, the previous
    step's KV cache that generate keeps while a step builds the next)."""
    act_bytes = PRECISION[plan.dtype][2]
    if geometry is None:
        return _image_activations(plan, arch, act_bytes, notes), ZERO, ZERO, ZERO, ZERO, ZERO, ZERO
    if plan.seq_len is not None:
        lengths = (plan.seq_len,) * 3
    else:
        longest = arch.max_positions
        if longest is None:
            raise CannotEstimate("the sequence length is unknown: give --seq-len")
        # Unknown length: the interval spans short sequences to the model's maximum.
        lengths = (min(SHORT_SEQUENCE, longest), min(TYPICAL_SEQUENCE, longest), longest)
        notes.append(
            f"sequence length unknown: {lengths[0]} tokens at the low end, {lengths[1]} for the estimate, "
            f"the model's maximum {lengths[2]} at the high end"
        )
    activations, logits, kv, prompt_kv, prompt_logits, layer_phase, previous_kv = [], [], [], [], [], [], []
    for end, seq in enumerate(lengths):
        value = _activations_at(plan, arch, geometry, seq, act_bytes, notes, end)
        activations.append(value[0])
        logits.append(value[1])
        kv.append(value[2])
        prompt_kv.append(value[3])
        prompt_logits.append(value[4])
        layer_phase.append(value[5])
        previous_kv.append(value[6])
    measured = _measured_dropout(plan) is not None
    spread = LITGPT_SPREAD if plan.model_code == "litgpt" else MEASURED_SPREAD if measured else FORMULA_SPREAD
    if plan.mode != "train":
        spread = (0.5, 1.0, 1.25) if plan.model_code == "litgpt" else INFERENCE_SPREAD
    per_logit = _logit_bytes(plan)
    logit_low, logit_high = (per_logit[0] / per_logit[1], per_logit[2] / per_logit[1]) if plan.mode == "train" else (1.0, 1.0)
    return (
        Interval(activations[0] * spread[0], activations[1], activations[2] * spread[2]),
        Interval(logits[0] * logit_low, logits[1], logits[2] * logit_high),
        Interval(kv[0], kv[1], kv[2]),
        Interval(prompt_kv[0], prompt_kv[1], prompt_kv[2]),
        Interval(prompt_logits[0], prompt_logits[1], prompt_logits[2]),
        Interval(layer_phase[0], layer_phase[1], layer_phase[2]),
        Interval(previous_kv[0], previous_kv[1], previous_kv[2]),
    )


def _logit_bytes(plan: Plan) -> tuple[float, float, float]:
    """Bytes per logit a training step's loss keeps (low, estimate, high)."""
    if plan.model_code == "litgpt":  # Fabric's fp32 outputs; finetune_lora chunks the head, finetune_full does not
        return litgpt.CHUNKED_LOGIT_BYTES if plan.lora_rank is not None else litgpt.WHOLE_LOGIT_BYTES
    if plan.loss == "checkpointed-chunked":  # bytes of one chunk's peak, not per logit (checkpointed_chunks_bytes)
        return (1.0, 1.0, 1.0)
    if plan.loss in ("chunked", "projected-chunked"):
        # torchtune's compile: True compiles each layer and the loss's per-chunk function (training.compile_loss)
        if plan.compiled and plan.model_code == "torchtune":
            return COMPILED_CHUNKED_LOGIT_BYTES
        return PROJECTED_CHUNKED_LOGIT_BYTES if plan.loss == "projected-chunked" else CHUNKED_LOGIT_BYTES
    # a step keeping only the loss (the HF Trainer's: previous_graph_alive False; `del` of the output) drops the outputs
    return TRAINER_LOGIT_BYTES if plan.outputs_freed or _stated_previous_graph(plan) is False else LOGIT_BYTES


def checkpointed_chunks_bytes(geometry: Shape, tokens: int, act_bytes: int) -> float:
    """What a loss taken a chunk at a time under activation checkpointing (TRL's chunked_nll, in fp32) holds at its
    peak: the gathered final hidden states it keeps for the backward, and one chunk's work, the larger of four fp32
    tensors of the chunk's logits in the forward (the logits, their log-softmax, and the entropy's exp and product) and
    three beside the head's fp32 copy (`w.float()`) in the backward. Replayed with TRL 1.7.0's own functions within
    0.1 % (calibration/trl_chunked_loss_peaks.py); the trainer drops the counts returned beside the loss before the
    backward, else every chunk's recomputed entropy operands would stay."""
    chunk = min(TRL_CHUNK_TOKENS, tokens) * geometry.vocab * 4
    return max(4 * chunk, 3 * chunk + geometry.vocab * geometry.hidden * 4) + tokens * geometry.hidden * act_bytes


def _activations_at(plan: Plan, arch: Architecture, geometry: Shape, seq: int, act_bytes: int, notes: list[str], end: int):
    """(activations, logits, KV cache, the KV cache while a generation's prompt is read, the prompt's logits, a
    checkpointed layer's recomputed activations, the previous step's KV cache) point estimates for one sequence length, at one end of the
    interval (0 low, 1 estimate, 2 high: where versions of the code differ, the end picks the variant)."""
    batch = plan.batch_size
    tokens = batch * seq
    per_layer = _layer_bytes(plan, geometry, seq, batch, act_bytes, notes, end)
    if plan.mode == "train":
        if plan.loss == "checkpointed-chunked" and geometry.vocab and plan.head == "lm":
            logits = checkpointed_chunks_bytes(geometry, tokens, act_bytes)
        else:
            logits = tokens * geometry.vocab * _logit_bytes(plan)[1] if geometry.vocab and plan.head == "lm" else 0.0
        if logits and _logit_bytes(plan) is COMPILED_CHUNKED_LOGIT_BYTES and end == 1:
            notes.append("chunked loss, compiled per chunk (torchtune's compile: True): the backward keeps the 16-bit logits "
                         "and recomputes each chunk's fp32 log-softmax; an uncompiled loss's at the high end")
        if plan.gradient_checkpointing:
            checkpointed = geometry.layers // max(1, plan.checkpoint_every)
            per_token = selective_coefficient(plan, geometry, seq) if plan.checkpoint_policy != "full" else 2.0
            if fp32_residual_stream(plan, end):
                per_token += 2.0  # each checkpoint keeps its layer's input: the fp32 residual stream, 4 bytes wide
            kept = per_token * tokens * geometry.hidden * checkpointed * (act_bytes / 2)
            if _keeps_quantised_inputs(plan, end) and _non_reentrant(plan, end):
                # what no saved-tensor hook packs (bitsandbytes' ctx.tensors): every checkpointed layer's 4-bit linears' inputs
                kept += quantised_linear_inputs(plan.model, geometry) * tokens * geometry.hidden * checkpointed * (act_bytes / 2)
                if end == 1:
                    notes.append("non-reentrant checkpointing (use_reentrant=False): bitsandbytes before 0.43.2 keeps each "
                                 "4-bit linear's input on the autograd context, which the checkpoint's hooks do not pack, "
                                 "so every checkpointed layer keeps them through the forward")
            elif end == 1 and plan.quant is not None and plan.quant_keeps_inputs is not False and plan.checkpoint_reentrant is None:
                notes.append("checkpointing taken as reentrant (transformers' default): non-reentrant, bitsandbytes before "
                             "0.43.2 would keep every checkpointed layer's 4-bit linear inputs ("
                             + ("the high end" if plan.quant_keeps_inputs else "not in the interval, which takes only one of "
                                "the two older behaviours") + "); --non-reentrant-checkpointing or --reentrant-checkpointing settles it")
            if plan.checkpoint_policy == "selective":
                notes.append("selective checkpointing: each layer keeps its input and its matmul and attention outputs")
            elif plan.checkpoint_policy == "alternate":
                notes.append("selective checkpointing (torchtitan's op policy): each layer keeps its input, its attention "
                             "output and every other matmul's output")
            # the backward recomputes a layer only after the loss's tensors are freed: the two peaks do not add up
            recomputed = max(0.0, per_layer - logits)
            activations = kept + per_layer * (geometry.layers - checkpointed) + recomputed
            if plan.activation_offloading:
                layer_input = 2.0 * tokens * geometry.hidden * (act_bytes / 2)
                activations = _offloaded(recomputed, min(_OFFLOAD_STASH, geometry.layers) * layer_input, notes)
            if plan.checkpoint_every > 1:
                notes.append(f"activation checkpointing on every {plan.checkpoint_every}th layer ({checkpointed} of "
                             f"{geometry.layers}); the others keep all their activations")
            else:
                notes.append("gradient checkpointing: each layer keeps its input; one layer's activations live at a time")
        elif plan.activation_offloading:
            activations = _offloaded(per_layer, per_layer, notes)
        else:
            activations = per_layer * geometry.layers
            if _keeps_quantised_inputs(plan, end) and _previous_graph_alive(plan, end):
                # what the previous graph holds after its backward: bitsandbytes before 0.43.2 keeps each
                # 4-bit linear's input as an attribute of the autograd context, which the backward does
                # not free (saved tensors it does), so one more copy of every layer's kept inputs
                without = _layer_bytes(dataclasses.replace(plan, quant_keeps_inputs=False), geometry, seq, batch, act_bytes, [], end)
                activations += (per_layer - without) * geometry.layers
                notes.append(_previous_graph_note(plan))
        checkpointed = geometry.layers // max(1, plan.checkpoint_every) if plan.gradient_checkpointing else 0
        activations += head_adapter_kept(plan, geometry, tokens) + kbit_prepared_kept(plan, geometry, tokens, checkpointed, notes)
        if "lm_head" in plan.modules_to_save and plan.lora_rank is not None:  # a trained head keeps its input
            activations += tokens * geometry.hidden * act_bytes
        return activations, logits, 0.0, 0.0, 0.0, per_layer if plan.gradient_checkpointing else 0.0, 0.0
    # inference and generation: nothing is kept for a backward; what one layer's forward holds at once
    prompt = seq if plan.mode == "infer" else min(seq, plan.max_context or seq)
    if plan.model_code == "litgpt":  # about two layers' worth of what LitGPT's modules keep
        live = _layer_bytes(plan, geometry, prompt, batch, act_bytes, [], end) * 2
    else:
        live = prompt * batch * geometry.hidden * inference_layer_coefficient(plan, geometry, prompt) * (act_bytes / 2)
        notes.append("working memory of the forward: the peak of one layer (the MLP's intermediate tensors, or the "
                     "attention scores with eager attention), beside the embeddings and the residual stream")
    prompt_logits = 0.0  # transformers: computed after the layers, not alive beside their working memory
    if plan.model_code == "litgpt":  # every position's logits, 16-bit and Fabric's fp32 copy
        logits_bytes = batch * prompt * geometry.vocab * 6
    elif plan.mode == "generate":
        logits_bytes = batch * geometry.vocab * SAMPLING_BYTES[end]
        whole = plan.prompt_logits_whole if plan.prompt_logits_whole is not None else end == 2
        if whole:  # transformers before 4.45 computed the whole prompt's logits and upcast them to fp32
            prompt_logits = batch * prompt * geometry.vocab * 6
        if plan.prompt_logits_whole is None and prompt > 1:
            notes.append("transformers 4.45 and later compute the logits of the prompt's last position only (the estimate); "
                         f"earlier versions every position's (the high end); {settled_by('transformers')}")
    else:
        logits_bytes, prompt_logits = 0.0, batch * prompt * geometry.vocab * _inference_logit_bytes(plan, act_bytes, end, notes)
    kv = prompt_kv = previous_kv = 0.0
    if plan.mode == "infer" and arch.kind == "decoder" and plan.model_code != "litgpt" and (plan.use_cache or (plan.use_cache is None and end)):
        # a causal LM's forward fills and returns its KV cache (past_key_values) unless use_cache=False: transformers'
        # configs default to True; it grows layer by layer and is whole beside the logits
        kv = prompt_kv = (geometry.kv_cache_bytes_per_token_per_byte * (2 if plan.dtype != "fp32" else 4) * batch
                          * (min(prompt, arch.sliding_window) if arch.sliding_window else prompt) / (plan.tensor_parallel if arch.kv_lora_rank is None else 1))
        if plan.use_cache is None:
            notes.append("the forward returns its KV cache (use_cache, transformers' default: the estimate); use_cache=False "
                         "in the script or --no-use-cache keeps none (the low end)")
    if plan.mode == "generate":
        context = plan.max_context or seq
        static = plan.kv_cache_len is not None
        if static:  # a static cache is allocated whole, whatever is generated
            context = max(context, plan.kv_cache_len or 0)
            notes.append(f"static KV cache allocated for {plan.kv_cache_len} tokens")
        dtype = 2 if plan.dtype != "fp32" else 4
        per_token = geometry.kv_cache_bytes_per_token_per_byte * dtype * batch
        if plan.tensor_parallel > 1 and arch.kv_lora_rank is None:
            per_token *= kv_heads_per_gpu(plan, geometry) / geometry.kv_heads
            notes.append(f"tensor parallel: each GPU caches {kv_heads_per_gpu(plan, geometry)} of {geometry.kv_heads} KV heads"
                         + (" (fewer KV heads than GPUs: each is held by several)" if geometry.kv_heads < plan.tensor_parallel else ""))
        elif plan.tensor_parallel > 1:
            notes.append("tensor parallel: the compressed latent cache (MLA) is not split by heads; every GPU holds all of it")
        if plan.model_code == "litgpt" and end == 2 and arch.kv_lora_rank is None:
            per_token *= geometry.heads / geometry.kv_heads  # LitGPT before December 2024 cached every query head

        def cached(tokens: int) -> float:
            return per_token * (min(tokens, arch.sliding_window) if arch.sliding_window else tokens)

        kv = cached(context)
        prompt_kv = kv if static else cached(prompt)
        notes.append(f"KV cache for {context} tokens of context per sequence")
        if not static and context > prompt and _cache_copied(plan, arch, end, notes):
            previous_kv = cached(context - 1)
    return live, logits_bytes, kv, prompt_kv, prompt_logits, 0.0, previous_kv


def _cache_copied(plan: Plan, arch: Architecture, end: int, notes: list[str]) -> bool:
    """Whether transformers' generate holds the previous step's KV cache while a step builds the next (Plan.cache_copied):
    its decoders before the release that passes one Cache object between steps (4.42, versions.CACHE_OBJECT_SINCE for
    the families that came later; transformers 4.42's generate says why: "back and forth from legacy format ... keeps
    copying the cache thus using much more memory"). Unknown: today's at the estimate, the old at the high end.
    LitGPT's, gpt-fast's and torchtune's caches are allocated once and written in place."""
    if plan.model_code != "transformers" or arch.kind != "decoder":
        return False
    if plan.cache_copied is not None:
        if plan.cache_copied:
            notes.append("generate keeps the previous step's KV cache (tuples of tensors, transformers before 4.42) while "
                         "each step concatenates the next: two caches at the end of a step")
        return plan.cache_copied
    notes.append("generate passes one DynamicCache between steps, whose layers are replaced one at a time (transformers 4.42 "
                 "and later, the estimate); earlier releases kept the previous step's cache tuple beside the new one "
                 f"(the high end); {settled_by('transformers')}")
    return end == 2


def _inference_logit_bytes(plan: Plan, act_bytes: int, end: int, notes: list[str]) -> float:
    """Bytes per logit of a forward without a loss (transformers' causal LMs, every position): before 4.46 the LM
    head's output was upcast (`self.lm_head(...).float()`, with a warning that 4.46 would stop), so the 16-bit logits
    and their fp32 copy were alive at once; from 4.46 (read in 5.25's modeling_llama.py) they stay in the model's
    dtype until a loss asks for fp32."""
    upcast = plan.logits_upcast if plan.logits_upcast is not None else end == 2
    if plan.logits_upcast is None and act_bytes == 2:
        notes.append("transformers 4.46 and later return a forward's logits in the model's dtype (the estimate); earlier "
                     f"versions upcast them to fp32 beside the 16-bit ones (the high end); {settled_by('transformers')}")
    return act_bytes + 4.0 if upcast and act_bytes == 2 else float(act_bytes)


# torchtune's OffloadActivations keeps an offloaded tensor on the device until this many later ones were offloaded
# (max_fwd_stash_size, its default), so that the copy on the side stream can finish.
_OFFLOAD_STASH = 5


def _offloaded(per_layer: float, stash: float, notes: list[str]) -> float:
    """Activations on the device with torchtune's activation offloading (training.OffloadActivations, a
    saved-tensors hook): every saved tensor of 1 KiB or more is copied to pinned CPU memory in the forward and
    brought back when the backward needs it. The device holds one layer's saved tensors (recomputed, or
    brought back) and the forward stash, the last five offloaded tensors kept until their copies finish: with
    checkpointing five layer inputs, without at most a layer's worth (counted whole, an upper bound)."""
    notes.append("activation offloading: saved tensors wait in pinned CPU memory; the device keeps the last "
                 f"{_OFFLOAD_STASH} being copied and one layer's worth")
    return per_layer + stash


def _non_reentrant(plan: Plan, end: int) -> bool:
    """Whether checkpointing runs non-reentrant at this end of the interval: as stated; unknown, at the high end only
    where the plan states a bitsandbytes that keeps its inputs (an unknown one already takes that at the high end, and
    the interval does not stack both older behaviours on a plan that states neither)."""
    if plan.checkpoint_reentrant is not None:
        return not plan.checkpoint_reentrant
    return end == 2 and plan.quant_keeps_inputs is True


def _keeps_quantised_inputs(plan: Plan, end: int) -> bool:
    """Whether the 4-bit linears keep their inputs at this end of the interval (bitsandbytes < 0.43.2 did)."""
    if plan.quant is None:
        return False
    return plan.quant_keeps_inputs if plan.quant_keeps_inputs is not None else end == 2


def _stated_previous_graph(plan: Plan) -> bool | None:
    """Whether the previous micro-batch's graph lives into the next one's forward, where it is known."""
    if plan.previous_graph_alive is not None:
        return plan.previous_graph_alive
    # LitGPT's fit() binds `logits` until the next `model(...)` returns (calibration/litgpt_peaks.py)
    return True if plan.model_code == "litgpt" else None


def _previous_graph_alive(plan: Plan, end: int) -> bool:
    """The same at this end of the interval: where it is unknown, the high end assumes it."""
    stated = _stated_previous_graph(plan)
    return stated if stated is not None else end == 2


def _previous_graph_note(plan: Plan) -> str:
    note = "the previous micro-batch's graph lives until the next forward returns, with a second copy of the 4-bit linears' kept inputs"
    unknown = [what for what, known in (
        ("bitsandbytes before 0.43.2", plan.quant_keeps_inputs is not None),
        ("a loop that keeps the previous step's output or loss bound", _stated_previous_graph(plan) is not None),
    ) if not known]
    return note + (f" (the high end: {' and '.join(unknown)})" if unknown else "")


def _layer_bytes(plan: Plan, geometry: Shape, seq: int, batch: int, act_bytes: int, notes: list[str], end: int = 1) -> float:
    """Retained activations of one transformer layer: measured for the architecture when the
    calibration has it (no dropout), else Korthikanti et al.'s accounting with the config's widths;
    LitGPT's modules by their own accounting (litgpt.layer_coefficient). A compiled full training step keeps
    what AOTAutograd's partitioner keeps (compiled_layer_coefficient), eager's accounting at the high end."""
    if plan.compiled and plan.mode == "train":
        if plan.lora_rank is None and end != 2:
            notes.append("compiled (torch.compile, or Thunder taken alike): the partitioner keeps the matmuls' and attention's "
                         "inputs and outputs and recomputes norms and activation functions; eager's accounting at the high end")
            return seq * batch * geometry.hidden * compiled_layer_coefficient(plan, geometry, seq) * (act_bytes / 2)
        if plan.lora_rank is not None and _compiled_adapters_replayed(plan, geometry):
            if end != 2:
                notes.append("compiled with adapters: the partitioner keeps what the attention kernel, the frozen MLP's "
                             "activation and the adapters need and recomputes the rest; eager's accounting at the high end")
                return seq * batch * geometry.hidden * compiled_lora_layer_coefficient(plan, geometry, seq) * (act_bytes / 2)
        elif plan.lora_rank is not None:
            notes.append("compiled with adapters: replayed only for gated decoders without adapter dropout, autocast or a "
                         "quantised base; eager's accounting (an upper bound)")
    if plan.model_code == "litgpt" and plan.model is not None:
        lora = plan.lora_rank is not None and plan.mode == "train"
        coefficient = litgpt.layer_coefficient(
            plan.model, geometry, trains_base=plan.mode == "train" and not lora,
            keeps_linear_inputs=plan.mode == "train" and _keeps_quantised_inputs(plan, end),
            lora_targets=plan.lora_targets if lora else None, lora_dropout=plan.lora_dropout,
            lora_rank=plan.lora_rank or 0, fp32_norm=end != 0,
        )
        notes.append("activations per layer from LitGPT's modules (fused qkv, its RMSNorm and GELU, adapters in the model's dtype)")
        if plan.quant is not None and plan.mode == "train":
            notes.append(_quant_inputs_note(plan))
        return seq * batch * geometry.hidden * coefficient * (act_bytes / 2)
    measured = measured_layer_coefficients(plan.model.base or plan.model.id, plan.attention) if plan.model is not None else None
    dropout = _measured_dropout(plan)
    if plan.attention == "eager":
        notes.append("eager attention keeps the attention scores (grows with the square of the sequence length)")
    hidden_dropout, attention_dropout = training_dropout(plan)
    if plan.dropout is None and plan.mode == "train" and (hidden_dropout or attention_dropout):
        notes.append("dropout on, as the model's config sets it (training runs in train mode): each dropout keeps a "
                     "1-byte mask, and on the attention probabilities its output")
    masks = 0.0
    if measured is not None and dropout is not None:
        assert plan.model is not None, "measured for a model of the catalog"
        linear, scores = measured
        hidden_masks, score_masks, score_outputs = dropout
        per_score = geometry.heads * seq / geometry.hidden
        coefficient = linear + (scores + score_outputs) * per_score
        masks = hidden_masks + score_masks * per_score  # one byte per element whatever the activations' dtype
        notes.append(f"activations per layer measured for {plan.model.base or plan.model.id} (transformers' modules, saved-tensor hooks)")
    else:
        coefficient = formula_layer_coefficient(plan, geometry, seq)
        masks = dropout_mask_bytes(plan, geometry, seq)
        notes.append("activations per layer from the formula (no measurement for this architecture): less certain")
    if plan.lora_rank is not None and plan.mode == "train":
        autocast = plan.dtype.startswith("amp")
        coefficient += adapter_layer_adjustment(plan, geometry, _keeps_quantised_inputs(plan, end), autocast=autocast)
        if autocast and plan.quant is None:
            # a frozen base keeps the same in 16 bits and in fp32 (replayed, calibration/lora_peaks.py): its linears save
            # no input, and its norms work in fp32 either way; an fp32 base's weight casts are the states' (_model_states)
            coefficient += autocast_layer_adjustment(plan, geometry, seq, weights_16bit=True, frozen_linears=True)
        notes.append("frozen base: its linears keep no inputs, each adapter keeps " + (
            "a 16-bit cast of its input (autocast); LayerNorm, pow and softmax run in fp32" if autocast else
            "its input in the model's dtype, shared by adapters that read one tensor" if adapters_in_model_dtype(plan) else
            "an fp32 copy of its own"))
        if plan.quant is not None:
            notes.append(_quant_inputs_note(plan))
    elif plan.dtype.startswith("amp") and plan.quant is None and plan.mode == "train":
        weights_16bit = forward_weights_16bit(plan, end)
        coefficient += autocast_layer_adjustment(plan, geometry, seq, weights_16bit=weights_16bit)
        if weights_16bit or end != 2:  # the high end of an unstated FSDP policy gathers fp32 (its own note)
            notes.append("autocast over FSDP's 16-bit gathered weights: a 16-bit residual stream, as in pure 16 bits; "
                         "LayerNorm, pow and softmax still run in fp32" if weights_16bit else
                         "autocast: fp32 residual stream and norms, one 16-bit cast per linear, fp32 softmax and pow")
    return seq * batch * geometry.hidden * (coefficient * (act_bytes / 2) + masks)


def _compiled_adapters_replayed(plan: Plan, geometry: Shape) -> bool:
    """Whether a compiled step with adapters is one calibration/compiled_lora_activations.py replayed: adapters with
    no dropout on a 16-bit base that is not quantised, a gated decoder's layers (GPT-2's and Phi-2's keep more under
    the partitioner than its accounting, compiled_layer_coefficient), in transformers' or torchtune's modules."""
    gated = "gate_proj" in geometry.lora_dims or "gate_up_proj" in geometry.lora_dims
    return (gated and plan.lora_dropout == 0.0 and plan.quant is None and plan.dtype in ("bf16", "fp16")
            and plan.model_code in ("transformers", "torchtune"))


def _measured_dropout(plan: Plan) -> tuple[float, float, float] | None:
    """What dropout adds to the model's measured layer (activation_data.measured_dropout_bytes), or None when the layer
    was not measured in that configuration (the formula applies)."""
    if plan.model is None or measured_layer_coefficients(plan.model.base or plan.model.id, plan.attention) is None:
        return None
    hidden, scores = training_dropout(plan)
    if hidden is None or scores is None:  # unknown: the formula takes dropout halfway
        return None
    return measured_dropout_bytes(plan.model.base or plan.model.id, plan.attention, hidden, scores)


def _quant_inputs_note(plan: Plan) -> str:
    if plan.quant_keeps_inputs is not None:
        kept = "keeps each linear's input (before 0.43.2)" if plan.quant_keeps_inputs else "keeps no linear inputs (0.43.2 and later)"
        return f"4-bit base: bitsandbytes {kept}"
    return ("4-bit base: bitsandbytes 0.43.2 and later keep no linear inputs (the estimate), earlier versions kept "
            f"each one (the high end); {settled_by('bitsandbytes')}")


def _image_activations(plan: Plan, arch: Architecture, act_bytes: int, notes: list[str]) -> Interval:
    per_sample = arch.activation_bytes_per_sample
    if per_sample is None:
        notes.append(f"no activation measurement for {arch.id}: activations not counted (the interval is open-ended)")
        return Interval(0.0, 0.0, math.inf)
    reference = arch.image_size or 224
    size = plan.image_size or reference
    scale = (size / reference) ** 2 * (act_bytes / 2) * plan.batch_size
    if plan.mode != "train":
        return Interval.spread(per_sample * scale * 0.2, IMAGE_SPREAD)
    factor = 0.3 if plan.gradient_checkpointing else 1.0
    if plan.image_size is None:
        notes.append(f"image size assumed {reference}x{reference}")
    return Interval.spread(per_sample * scale * factor, IMAGE_SPREAD)
