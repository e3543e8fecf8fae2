"""What one transformer layer keeps for its backward (or holds at its forward's peak), in bytes per token
and hidden unit of 2-byte activations: the formula, and the adjustments for autocast, LoRA adapters,
selective checkpointing, torch.compile and inference. costmodel.py scales them by tokens, width and dtype.
"""

from __future__ import annotations

import math

from .adapters import adapter_dims, adapters_in_model_dtype
from .architectures import LM_HEAD_NAMES, Architecture, Shape
from .plan import Plan

# Model types whose MLP activation is transformers' `gelu_new` (measured for gpt2 and phi).
_PYTHON_GELU_FAMILIES = frozenset({"gpt2", "phi", "gptj"})
# Model types whose eager attention takes the softmax in the activation dtype (measured: gpt2, BERT-likes);
# the others upcast to fp32 and keep both.
_HALF_SOFTMAX_FAMILIES = frozenset({"gpt2", "bert", "roberta", "distilbert"})


# transformers' configuration classes' default dropout probabilities (hidden/residual sites, attention
# probabilities), read from transformers 5.25.0's configuration_*.py: BertConfig, RobertaConfig and XLMRobertaConfig
# (hidden_dropout_prob, attention_probs_dropout_prob 0.1), DistilBertConfig (dropout, attention_dropout 0.1),
# GPT2Config (resid_pdrop, embd_pdrop, attn_pdrop 0.1), T5Config (dropout_rate 0.1, the attention weights' too),
# BartConfig (dropout 0.1, attention_dropout 0.0), OPTConfig (dropout 0.1, attention_dropout 0.0); every other family
# here defaults to 0.0 (ViT's and Whisper's too). A model in train mode (the HF Trainer's, `model.train()`) runs these
# dropouts unless its config says otherwise.
_CONFIG_DROPOUT: dict[str, tuple[float, float]] = {
    "bert": (0.1, 0.1), "roberta": (0.1, 0.1), "xlm-roberta": (0.1, 0.1), "distilbert": (0.1, 0.1), "gpt2": (0.1, 0.1),
    "t5": (0.1, 0.1), "bart": (0.1, 0.0),
    **{family: (0.0, 0.0) for family in (
        "llama", "mistral", "mixtral", "qwen2", "qwen3", "qwen3_moe", "gemma", "gemma2", "gemma3_text", "phi", "phi3",
        "phimoe", "gptj", "gpt_neox", "falcon", "deepseek_v2", "deepseek_v3", "gpt_oss", "whisper", "vit", "clip",
        "starcoder2", "granite", "olmo", "stablelm", "bloom", "gpt_neo",
    )},
    "opt": (0.1, 0.0),
}


def config_dropout(arch: Architecture | None) -> tuple[float | None, float | None]:
    """(hidden, attention) dropout probabilities of a model: what its config.json states, else its config class's
    default; None where neither is known (a family outside the table)."""
    if arch is None:
        return None, None
    hidden, attention = _CONFIG_DROPOUT.get(arch.family, (None, None))
    return (arch.hidden_dropout if arch.hidden_dropout is not None else hidden,
            arch.attention_dropout if arch.attention_dropout is not None else attention)


def training_dropout(plan: Plan) -> tuple[bool | None, bool | None]:
    """Whether a training step's layers run dropout (hidden/residual sites, attention probabilities): what the plan
    says, else, for transformers' code, what the model's config does (dropout with p = 0 keeps nothing: torch returns
    the input); None: unknown. Inference and generation run in eval mode: none."""
    if plan.mode != "train":
        return False, False
    if plan.dropout is None and plan.model_code == "torchtune":  # its builders: attn_dropout=0.0, no residual dropout
        return False, False
    if plan.dropout is not None or plan.model_code != "transformers":
        return plan.dropout, plan.dropout
    hidden, attention = config_dropout(plan.model)
    return (None if hidden is None else hidden > 0), (None if attention is None else attention > 0)


def kv_heads_per_gpu(plan: Plan, geometry: Shape) -> int:
    """The KV heads each GPU caches: its share under tensor parallelism, at least one (a KV head serves the query
    heads of several GPUs where there are fewer KV heads than GPUs, and each of them holds it)."""
    return max(1, math.ceil(geometry.kv_heads / plan.tensor_parallel))


# Norm families that multiply by their weight in fp32 (Gemma's `x * (1 + w.float())`): a frozen weight
# spares 4 bytes; the others 2 (the normalised tensor in the activation dtype). LayerNorm's backward
# recomputes from its input and keeps the same tensors either way.
_FP32_NORM_FAMILIES = frozenset({"gemma", "gemma2", "gemma3_text"})


def autocast_layer_adjustment(plan: Plan, geometry: Shape, seq: int, weights_16bit: bool = False,
                              frozen_linears: bool = False) -> float:
    """Bytes per token and hidden unit (2-byte units) a layer keeps under CUDA autocast with fp32 weights,
    beyond what it keeps in pure 16 bits.

    The residual stream stays fp32 (the embeddings are fp32), so each norm keeps a 4-byte tensor where
    pure 16 bits keeps 2 (Gemma's norms compute in fp32 either way); every linear casts its fp32 input
    anew (autocast caches only parameter casts), so q, k and v, and gate and up, each keep their own
    16-bit copy; `pow` is on autocast's fp32 list, so a Python tanh-GELU runs in fp32 (6 more bytes per
    FFN element); softmax is too, so eager attention in the families that take it in 16 bits keeps the
    fp32 probabilities and their 16-bit cast (4 more bytes per score). Checked against an emulation of
    CUDA's autocast policy under FakeTensorMode for seven architectures (calibration/amp_activations.py).

    ``weights_16bit``: the forward sees 16-bit weights under autocast (FSDP's MixedPrecision(param_dtype=bf16)
    gathers each unit in 16 bits): the embeddings, and so the residual stream, are 16-bit, and a Python RMSNorm
    returns its input's dtype, so a Llama-like layer keeps what pure 16 bits keeps. What stays is what autocast
    itself runs in fp32: `layer_norm` (a LayerNorm keeps a 4-byte input and returns fp32, so the linears that
    read it cast anew, as with fp32 weights), `pow` and softmax. The same emulation with 16-bit weights checks it.

    ``frozen_linears``: the base is frozen (LoRA), so a linear keeps no input and no cast of one; what autocast
    runs in fp32 stays (replayed with peft's adapters, calibration/lora_peaks.py)."""
    arch = plan.model
    hidden = geometry.hidden
    extra = 0.0
    fp32_norm_output = not weights_16bit or (arch is not None and arch.norm == "layernorm")
    if arch is not None and arch.family not in _FP32_NORM_FAMILIES and fp32_norm_output:
        extra += 2.0 * arch.norms_per_layer
    dims = geometry.lora_dims
    casts_kept = fp32_norm_output and not frozen_linears
    if "qkv_proj" not in dims and casts_kept:  # three projections of one fp32 input
        extra += 4.0
    if "gate_proj" in dims and casts_kept:
        extra += 2.0
    if arch is not None and arch.family in _PYTHON_GELU_FAMILIES:
        extra += 6.0 * geometry.intermediate / hidden
    if plan.attention == "eager" and arch is not None and arch.family in _HALF_SOFTMAX_FAMILIES:
        # with dropout on the probabilities, the matmul keeps the 16-bit cast of the fp32 dropout output in place of
        # the dropout output itself, so only the fp32 softmax's 2 extra bytes remain
        extra += (2.0 if training_dropout(plan)[1] else 4.0) * geometry.heads * seq / hidden
    return extra


def kbit_prepared_kept(plan: Plan, geometry: Shape, tokens: int, checkpointed: int, notes: list[str]) -> float:
    """Bytes a 4-bit base's training step keeps because peft's `prepare_model_for_kbit_training` ran, beyond the fp32
    weights it makes (replayed with peft's, transformers' and bitsandbytes' code, calibration/qlora_peaks.py). The
    embeddings and norms in fp32 carry an fp32 hidden stream (each `Linear4bit` casts its input to the compute dtype
    and its output back), so each layer input that gradient checkpointing keeps is 4 bytes, not 2. Under autocast
    (the Trainer's bf16/fp16) the fp32 LM head is cast to 16 bits for its matmul, and the linear keeps that cast for
    its input's gradient (a frozen weight's cast is not cached, but saved): 2 bytes per head parameter until the
    backward reaches the head. Not under DeepSpeed or FSDP: DeepSpeed's engine casts the module to its 16-bit dtype
    (`module.half()`/`bfloat16()` in `_configure_distributed_model`) and FSDP computes with its MixedPrecision
    `param_dtype`, so the stream and the head are 16-bit again."""
    if (not plan.kbit_prepared or plan.quant is None or plan.mode != "train" or plan.model_code == "litgpt"
            or plan.sharding != "ddp"):
        return 0.0
    notes.append("prepare_model_for_kbit_training: an fp32 hidden stream (4-byte checkpointed layer inputs) and the "
                 "fp32 LM head's 16-bit cast kept for the backward")
    stream = 2.0 * tokens * geometry.hidden * checkpointed if plan.gradient_checkpointing else 0.0
    return stream + (2.0 * geometry.vocab * geometry.hidden if plan.head == "lm" else 0.0)


def quantised_linear_inputs(arch: Architecture | None, geometry: Shape) -> float:
    """Bytes per token and hidden unit (2-byte activations) of one layer's distinct 4-bit linear inputs, which
    bitsandbytes before 0.43.2 keeps as an attribute of each matmul's autograd context (MatMul4Bit: ctx.tensors =
    (A, B)): the attention's input, its output (the output projection's input), the MLP's input (the same tensor as the
    attention's where one norm feeds both) and the down projection's FFN-wide input; LitGPT's layer_coefficient counts
    the same four."""
    hidden = geometry.hidden
    width = geometry.heads * geometry.head_dim / hidden
    ffn = geometry.intermediate * (geometry.experts_active or 1) / hidden
    shared_norm = arch is not None and arch.norms_per_layer == 1
    return 2.0 + 2.0 * width + (0.0 if shared_norm else 2.0) + 2.0 * ffn


def adapter_layer_adjustment(plan: Plan, geometry: Shape, keeps_quantised_inputs: bool = False,
                             autocast: bool = False) -> float:
    """Bytes per token and hidden unit (2-byte activations) that a frozen base with LoRA adapters keeps
    in one layer, minus what the same layer keeps when trained in full.

    A frozen linear keeps no input (only its weight's gradient needs it): the attention input, the MLP
    input and the down projection's input go; a frozen RMSNorm weight (the query/key norms too) spares
    the normalised tensor. Each
    adapter keeps its input in its own dtype (peft keeps adapters in fp32: a 4-byte copy per adapter),
    with a 1-byte dropout mask when lora_dropout > 0, and its r-wide inner activation. Checked under
    FakeTensorMode against peft for seven architectures (calibration/adapter_activations.py).

    Under autocast (``autocast``) `lora_A` is on autocast's 16-bit list: it casts the fp32 copy (or the dropout's
    fp32 output) to 16 bits and keeps that cast, and its r-wide output is 16-bit; the fp32 copy itself is freed
    (dropout's backward needs only its mask). bitsandbytes' LoRA layers skip the fp32 copy under autocast: the
    same 16-bit input is kept. Replayed with CUDA's autocast policy (calibration/lora_peaks.py)."""
    assert plan.lora_rank is not None, "a plan with LoRA adapters"
    arch = plan.model
    hidden = geometry.hidden
    ffn = geometry.intermediate * (geometry.experts_active or 1)
    norm_saving = 0.0
    if arch is not None and arch.norm == "rms":
        per_element = 4.0 if arch.family in _FP32_NORM_FAMILIES else 2.0
        norm_saving = per_element * arch.norms_per_layer
        if arch.qk_norm:  # the query and key norms, heads x head_dim wide
            norm_saving += per_element * (geometry.heads + geometry.kv_heads) * geometry.head_dim / hidden
    # bitsandbytes' 4-bit matmul kept its input for the backward whether or not the weight needs a gradient
    # (MatMul4Bit stored (A, B) in ctx.tensors) until 0.43.2, which keeps only B: then no linear input is spared.
    saving = norm_saving + (0.0 if keeps_quantised_inputs else 2.0 + 2.0 + 2.0 * ffn / hidden)
    if adapters_in_model_dtype(plan) and not autocast:
        return _model_dtype_adapters_kept(plan, geometry) - saving
    mask = 0.5 if plan.lora_dropout is None else (1.0 if plan.lora_dropout > 0 else 0.0)
    kept = 0.0
    for target in plan.lora_targets:
        if target in LM_HEAD_NAMES:
            continue  # not a layer's: _head_adapter_kept
        d_in, _ = adapter_dims(geometry, target) or (hidden, hidden)
        adapter_bytes = 2.0 if autocast else 4.0
        kept += (adapter_bytes + mask) * d_in / hidden + adapter_bytes * plan.lora_rank / hidden
    return kept - saving


# The linears of a layer that read one tensor: the attention's projections read the attention norm's output, the
# MLP's gate and up projections the MLP norm's output.
_SHARED_INPUTS = {"q_proj": "attention", "k_proj": "attention", "v_proj": "attention", "qkv_proj": "attention",
                  "gate_proj": "mlp", "up_proj": "mlp", "gate_up_proj": "mlp"}


def _model_dtype_adapters_kept(plan: Plan, geometry: Shape) -> float:
    """Bytes per token and hidden unit that a layer's adapters keep when they are built in the activations' own dtype
    (torchtune's LoRALinear in a bf16 recipe: `lora_b(lora_a(dropout(x)))`, torchtune/modules/peft/lora.py). With
    no dropout (`nn.Identity`, torchtune's default p = 0) `lora_a` keeps `x` itself, no copy: adapters that read one
    tensor (q, k and v; gate and up) keep it once, and the output projection's input is the attention kernel's
    output, which SDPA keeps anyway (eager attention's is a reshaped copy). With dropout each adapter keeps its own
    dropout output and a 1-byte mask. Each keeps its r-wide inner activation. lora_dropout unknown: the mean of both."""
    assert plan.lora_rank is not None, "a plan with LoRA adapters"
    hidden = geometry.hidden
    layer_targets = [target for target in plan.lora_targets if target not in LM_HEAD_NAMES]
    inner = sum(2.0 * plan.lora_rank / hidden for _ in layer_targets)
    widths = {target: (adapter_dims(geometry, target) or (hidden, hidden))[0] / hidden for target in layer_targets}
    with_dropout = sum(3.0 * width for width in widths.values())
    inputs = {_SHARED_INPUTS.get(target, target): width for target, width in widths.items()
              if target != "o_proj" or plan.attention == "eager"}
    without = sum(2.0 * width for width in inputs.values())
    if plan.lora_dropout is None:
        return inner + (with_dropout + without) / 2
    return inner + (with_dropout if plan.lora_dropout > 0 else without)


def selective_coefficient(plan: Plan, geometry: Shape, seq: int) -> float:
    """Bytes per token and hidden unit (2-byte activations) a checkpointed layer keeps when the policy
    saves matmul and attention outputs (torch's selective checkpointing) and recomputes the rest: the layer
    input, the attention output and the matmuls' outputs in the order a layer runs them (q, k, v or a fused
    qkv, the output projection, gate and up or a fused gate_up or the first projection, down). "selective"
    keeps every one; "alternate" (torchtitan's op policy) every other, the first, third, ... of each layer.
    Measured under FakeTensorMode for a Llama layer: 25.03 against 25, and 15.53 against 15.5
    (calibration/step_peaks.py)."""
    hidden = geometry.hidden
    width = geometry.heads * geometry.head_dim / hidden
    kv_width = geometry.kv_heads * geometry.head_dim / hidden
    ffn = geometry.intermediate * (geometry.experts_active or 1) / hidden
    dims = geometry.lora_dims
    matmuls = [2.0 * width + 4.0 * kv_width] if "qkv_proj" in dims else [2.0 * width, 2.0 * kv_width, 2.0 * kv_width]
    matmuls.append(2.0)  # the output projection
    if "gate_up_proj" in dims:
        matmuls.append(4.0 * ffn)
    elif "gate_proj" in dims:
        matmuls += [2.0 * ffn, 2.0 * ffn]
    else:
        matmuls.append(2.0 * ffn)
    matmuls.append(2.0)  # the down projection
    kept = matmuls[::2] if plan.checkpoint_policy == "alternate" else matmuls
    attention = 2.0 * width  # the attention kernel's output
    if plan.attention == "eager":
        attention += 2.0 * geometry.heads * seq / hidden  # the scores are a matmul output too
    return 2.0 + attention + sum(kept)


def compiled_layer_coefficient(plan: Plan, geometry: Shape, seq: int) -> float:
    """Bytes per token and hidden unit (2-byte activations) a layer keeps for its backward under torch.compile:
    AOTAutograd's default partitioner (min_cut_rematerialization_partition, Inductor's) keeps what the matmuls
    and the attention kernel need and recomputes the pointwise work between them (the norms' fp32 copies,
    activation functions, casts) from it.

    Kept: the layer's input, each norm's output and its fp32 statistics; q and k after RoPE, v,
    the attention output and the kernel's fp32 log-sum-exp; in a sequential block the attention's output
    projection (the residual the second norm reads); with query/key norms the projections' outputs they read;
    with a fused qkv projection and RoPE the projection's whole output (v is a view of it); the MLP's matmul
    outputs and, gated, their product (the down projection's input). Eager attention keeps its probabilities.
    For six gated decoders this equals the replay to 0.01 bytes; GPT-2 and Phi-2 keep 7-11 % more there
    (transposed copies of Conv1D inputs, partial RoPE's concatenation), still far below eager
    (calibration/compiled_activations.py). Thunder's rematerialisation is taken alike (not replayed)."""
    hidden = geometry.hidden
    arch = plan.model
    width = geometry.heads * geometry.head_dim / hidden
    kv_width = geometry.kv_heads * geometry.head_dim / hidden
    norms = arch.norms_per_layer if arch is not None else 2
    ffn = geometry.intermediate * (geometry.experts_active or 1) / hidden
    gated = "gate_proj" in geometry.lora_dims or "gate_up_proj" in geometry.lora_dims
    rope = arch is None or not arch.learned_positions
    statistics = 8.0 if arch is not None and arch.norm == "layernorm" else 4.0  # fp32 per token: rstd (and mean)
    kept = 2.0 + (2.0 + statistics / hidden) * norms
    kept += 2.0 * width + 4.0 * kv_width + 2.0 * width + 4.0 * geometry.heads / hidden
    if norms != 1:
        kept += 2.0
    if arch is not None and arch.qk_norm:
        kept += 2.0 * width + 2.0 * kv_width + statistics * (geometry.heads + geometry.kv_heads) / hidden
    if "qkv_proj" in geometry.lora_dims and rope:
        kept += 2.0 * width + 2.0 * kv_width
    kept += (6.0 if gated else 4.0) * ffn
    if plan.attention == "eager":
        kept += 2.0 * geometry.heads * seq / hidden
    return kept


def compiled_lora_layer_coefficient(plan: Plan, geometry: Shape, seq: int) -> float:
    """Bytes per token and hidden unit (2-byte activations) a layer with LoRA adapters on a frozen base keeps for its
    backward under torch.compile (no adapter dropout, no quantised base, no autocast): what the partitioner keeps
    for the layer trained in full (compiled_layer_coefficient) less what only the frozen weights' gradients would
    need, the norms' outputs and the down projection's input, plus the adapters' own.

    An adapter needs its input for its A matrix's gradient and its r-wide inner output for B's. In the model's
    dtype (torchtune's LoRALinear) it keeps the tensor it reads, once for the adapters that read one tensor (q, k
    and v the attention norm's output, gate and up the MLP norm's), nothing more for the output projection's
    (the attention kernel's output, kept anyway). In fp32 (peft's default) it keeps the fp32 cast of its input
    instead, which the partitioner does not recompute, once per tensor read, the output projection's too. Equal to
    the replay to 0.001 bytes for three decoders, three target sets and both adapter dtypes (calibration/compiled_lora_activations.py)."""
    assert plan.lora_rank is not None, "a plan with LoRA adapters"
    hidden = geometry.hidden
    width = geometry.heads * geometry.head_dim / hidden
    ffn = geometry.intermediate * (geometry.experts_active or 1) / hidden
    norms = plan.model.norms_per_layer if plan.model is not None else 2
    kept = compiled_layer_coefficient(plan, geometry, seq) - 2.0 * norms - 2.0 * ffn
    element = 2.0 if adapters_in_model_dtype(plan) else 4.0
    inputs: dict[str, float] = {}
    for target in plan.lora_targets:
        if target in LM_HEAD_NAMES:
            continue  # not a layer's: head_adapter_kept
        d_in, _ = adapter_dims(geometry, target) or (hidden, hidden)
        kept += element * plan.lora_rank / hidden
        if target == "o_proj":
            inputs[target] = 0.0 if element == 2.0 else element * width  # the attention output: kept anyway in 16 bits
        elif target == "down_proj":
            inputs[target] = element * ffn
        else:
            inputs[_SHARED_INPUTS.get(target, target)] = element * d_in / hidden
    return kept + sum(inputs.values())


def inference_layer_coefficient(plan: Plan, geometry: Shape, seq: int) -> float:
    """Bytes per token and hidden unit (2-byte activations) alive at the peak of one layer's forward when
    nothing is kept for a backward (inference, a generation's prompt), beyond the weights and the KV cache.

    Alive through the layer: the embeddings' output (the model's forward keeps its name), the layer's input
    (the caller's loop variable) and, in a sequential block, the residual after attention; RoPE's cos and sin
    for the whole forward. The layer's peak is the larger of its two halves. The MLP: its normed input and,
    gated, act(gate), up and their product (three FFN-wide tensors; the gate's own output is freed once the
    activation returns), plain, the first projection's output and its activation, a GELU written out in
    Python four FFN-wide temporaries; a parallel block (one shared norm) keeps the attention's output beside
    it. Attention: its normed input, q, k and v, and RoPE's temporaries on q; eager attention adds the scores,
    8 bytes per head and pair of positions for fp16 (16-bit scores, fp32 softmax and its 16-bit cast), 10 for bf16
    (torch's softmax(x, dtype=float32) takes its fused half-to-float kernel for CUDA fp16 inputs only and converts
    bf16 scores to an fp32 copy first, aten/src/ATen/native/SoftMax.cpp: scores, copy and fp32 output at once), or 4
    in the families that take the softmax in 16 bits. Checked against fake-tensor replays of transformers' prompt
    forward (calibration/inference_peaks.py) and of transformers 4.35's whole forward
    (calibration/old_release_forward_peaks.py)."""
    hidden = geometry.hidden
    arch = plan.model
    degree = plan.tensor_parallel  # a GPU computes its share of the heads and of the MLP; hidden-wide tensors are whole
    width = geometry.heads * geometry.head_dim / hidden / degree
    kv_width = (kv_heads_per_gpu(plan, geometry) if degree > 1 else geometry.kv_heads) * geometry.head_dim / hidden
    ffn = geometry.intermediate / hidden / degree  # an MoE layer runs one expert at a time
    gated = "gate_proj" in geometry.lora_dims or "gate_up_proj" in geometry.lora_dims
    python_gelu = arch is not None and arch.family in _PYTHON_GELU_FAMILIES
    parallel = arch is not None and arch.norms_per_layer == 1
    held = 4.0 if parallel else 6.0  # a parallel block's residual is its input
    if arch is not None and arch.learned_positions:
        held += 2.0  # the position embeddings' output, kept by name beside the token embeddings'
    rope = 4.0 * geometry.head_dim / hidden if arch is not None and not arch.learned_positions else 0.0
    mlp = 2.0 + (6.0 if gated else 8.0 if python_gelu else 4.0) * ffn + (2.0 * width if parallel else 0.0)
    if geometry.experts:
        mlp += 2.0  # the routed tokens' output, accumulated expert by expert
    attention = 2.0 + 2.0 * (width + 2.0 * kv_width) + 4.0 * width
    if plan.attention == "eager":
        half_softmax = arch is not None and arch.family in _HALF_SOFTMAX_FAMILIES
        per_score = 4.0 if half_softmax else 10.0 if plan.dtype == "bf16" else 8.0
        attention += per_score * geometry.heads / degree * seq / hidden
    return held + rope + max(mlp, attention)


def formula_layer_coefficient(plan: Plan, geometry: Shape, seq: int) -> float:
    """Bytes kept per token and hidden unit by one layer, for 2-byte activations (the formula)."""
    hidden = geometry.hidden
    arch = plan.model
    ffn = geometry.intermediate * (geometry.experts_active or 1)
    # A gated (SwiGLU) MLP keeps the gate and up outputs, the activation and their product: 4 tensors of the
    # FFN width; a plain one keeps the first projection's output and the activation: 2.
    gated = "gate_proj" in geometry.lora_dims or "gate_up_proj" in geometry.lora_dims
    # The tanh GELU these families use is written out in Python: it keeps 5 tensors of the FFN width.
    python_gelu = arch is not None and arch.family in _PYTHON_GELU_FAMILIES
    mlp = 2.0 + (8.0 if gated else 10.0 if python_gelu else 4.0) * ffn / hidden
    # Attention tensors are heads x head_dim wide, which is not always the hidden size (Qwen3, Gemma).
    width = geometry.heads * geometry.head_dim / hidden
    attention = 2.0 + 8.0 * width
    # RMSNorm as transformers writes it keeps an fp32 copy of its input besides the 2-byte output.
    norm_bytes = 6.0 if arch is not None and arch.norm == "rms" else 2.0
    norms = norm_bytes * (arch.norms_per_layer if arch is not None else 2)
    if arch is not None and arch.qk_norm:
        norms += 2 * norm_bytes * width / 2
    # Scores: a softmax taken in 16 bits keeps its output, and dropout on the probabilities its output too (the
    # matmul with the values keeps it); a softmax taken in fp32 keeps its fp32 output and the 16-bit copy the matmul
    # reads, whether that copy is a cast or the dropout's output. Unknown dropout: halfway. Dropout's masks are
    # counted apart, a byte each whatever the activations' dtype (dropout_mask_bytes).
    if arch is not None and arch.family not in _HALF_SOFTMAX_FAMILIES:
        score_bytes = 6.0
    else:
        score_bytes = {True: 4.0, False: 2.0, None: 3.0}[training_dropout(plan)[1]]
    scores = score_bytes * geometry.heads * seq / hidden if plan.attention == "eager" else 0.0
    return attention + norms + mlp + scores


def dropout_mask_bytes(plan: Plan, geometry: Shape, seq: int) -> float:
    """Bytes per token and hidden unit of the 1-byte masks a layer's dropouts keep (CUDA's fused dropout), whatever
    the activations' dtype: after the attention and after the MLP, and with eager attention one per score (SDPA's
    fused kernels keep an RNG state instead). Unknown dropout: halfway."""
    hidden_dropout, attention_dropout = training_dropout(plan)
    masks = {True: 2.0, False: 0.0, None: 1.0}[hidden_dropout]
    if plan.attention == "eager":
        masks += {True: 1.0, False: 0.0, None: 0.5}[attention_dropout] * geometry.heads * seq / geometry.hidden
    return masks
