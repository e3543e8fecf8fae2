"""A configuration to estimate (``Plan``), the choices it is made of, and what an estimate is made of:
intervals of bytes (low, estimate, high), a breakdown of them by term, the three peaks.

The cost model (costmodel.py) turns a plan into an estimate; the readers of scripts, configurations and
the command line build plans, and the reports read estimates.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .architectures import Architecture, shape

DTYPES = ("fp32", "amp-fp16", "amp-bf16", "fp16", "bf16")
OPTIMIZERS = (
    "sgd", "sgd-momentum", "adam", "adamw", "adamw-8bit", "paged-adamw-8bit", "paged-adamw", "adafactor", "lion", "rmsprop", "adagrad",
)
QUANTS = ("nf4", "nf4-dq", "int8")
ATTENTIONS = ("eager", "sdpa", "flash")
MODES = ("train", "infer", "generate")
SHARDINGS = ("ddp", "fsdp", "fsdp-grad-op", "zero1", "zero2", "zero3")
OFFLOADS = ("optimizer", "params")
HEADS = ("lm", "classifier")
LOSSES = ("standard", "chunked", "projected-chunked", "checkpointed-chunked")
CHECKPOINT_POLICIES = ("full", "selective", "alternate")
SAVED_MODULES = ("embeddings", "lm_head")
MODEL_CODES = ("transformers", "litgpt", "gpt-fast", "torchtune", "own")

# bytes per element: (weights, gradients, activations, autocast cast cache per parameter)
PRECISION = {
    "fp32": (4, 4, 4, 0),
    "amp-fp16": (4, 4, 2, 2),
    "amp-bf16": (4, 4, 2, 2),
    "fp16": (2, 2, 2, 0),
    "bf16": (2, 2, 2, 0),
}
# Optimizer state per trainable parameter: (number of states kept in the parameter's dtype, fixed bytes).
# torch's optimizers keep their states in the parameter's dtype; bitsandbytes' 8-bit ones 1 byte each, its 32-bit paged
# AdamW two fp32 states whatever the parameter's dtype (Optimizer2State.init_state: optim_bits 32 is torch.float32).
OPTIMIZER_STATE = {
    "sgd": (0, 0.0), "sgd-momentum": (1, 0.0), "adam": (2, 0.0), "adamw": (2, 0.0),
    "adamw-8bit": (0, 2.0), "paged-adamw-8bit": (0, 2.0), "paged-adamw": (0, 8.0), "adafactor": (0, 0.4), "lion": (1, 0.0),
    "rmsprop": (1, 0.0), "adagrad": (1, 0.0),
}


@dataclass(frozen=True)
class Interval:
    low: float
    estimate: float
    high: float

    @staticmethod
    def exact(value: float) -> Interval:
        return Interval(value, value, value)

    @staticmethod
    def spread(value: float, factors: tuple[float, float, float]) -> Interval:
        return Interval(value * factors[0], value * factors[1], value * factors[2])

    def __add__(self, other: Interval) -> Interval:
        return Interval(self.low + other.low, self.estimate + other.estimate, self.high + other.high)

    def scaled(self, factor: float) -> Interval:
        return Interval(self.low * factor, self.estimate * factor, self.high * factor)


ZERO = Interval.exact(0.0)


@dataclass(frozen=True)
class Plan:
    """A configuration to estimate: what the script says (or the command line overrides), per run."""

    model: Architecture | None
    mode: str = "train"
    batch_size: int = 1
    seq_len: int | None = None  # tokens per sample; None: the model's maximum
    image_size: int | None = None
    dtype: str = "fp32"
    optimizer: str = "adamw"
    lora_rank: int | None = None
    lora_targets: tuple[str, ...] = ("q_proj", "v_proj")
    # LoraConfig(modules_to_save=[...]): whole modules trained beside the adapters, "embeddings" and/or "lm_head" (peft's
    # ModulesToSaveWrapper keeps the frozen original and a trainable copy)
    modules_to_save: tuple[str, ...] = ()
    quant: str | None = None
    gradient_checkpointing: bool = False
    checkpoint_every: int = 1  # with checkpointing: every N-th layer is checkpointed (1: all of them)
    # "selective": matmul and attention outputs kept, the rest recomputed; "alternate": the same but every second
    # matmul of a layer recomputed too (torchtitan's op-level policy)
    checkpoint_policy: str = "full"
    # torch.utils.checkpoint's use_reentrant. Non-reentrant checkpointing runs the forward with autograd on and packs what
    # it saves through saved-tensor hooks; a tensor an autograd Function keeps as an attribute of its context is not
    # packed (bitsandbytes before 0.43.2 keeps each 4-bit linear's input so), so every checkpointed layer keeps those
    # inputs through the forward. None: not stated (transformers' gradient_checkpointing_enable passes use_reentrant=True
    # where its kwargs do not say, and torch's own default is True): the estimate reentrant, the high end not.
    checkpoint_reentrant: bool | None = None
    kbit_prepared: bool | None = None  # peft's prepare_model_for_kbit_training (unquantised parameters in fp32); None: not stated
    # The attention kernel. None: not stated (no attn_implementation, no --attention); transformers then picks SDPA where
    # the model and torch have it and eager attention elsewhere (and in its releases before SDPA): the estimate takes SDPA,
    # the high end eager, which keeps the attention scores.
    attention: str | None = "sdpa"
    max_context: int | None = None  # generation: prompt + new tokens
    kv_cache_len: int | None = None  # generation with a static cache: the tokens it is allocated for
    gpus: int = 1
    sharding: str = "ddp"
    offload: tuple[str, ...] = ()
    dropout: bool | None = None  # None: unknown
    lora_dropout: float | None = None  # LoraConfig(lora_dropout=...); None: unknown
    grad_accum: int = 1  # micro-batches whose gradients add up before each optimizer step
    foreach: bool | None = None  # torch optimizer implementation: None = torch's default (foreach on CUDA)
    cpu_offload: bool = False  # diffusion: enable_model_cpu_offload (one component on the device at a time)
    vae_tiling: bool = False  # diffusion: enable_vae_tiling (the decode works one tile at a time)
    vae_slicing: bool = False  # diffusion: enable_vae_slicing (the decode works one image at a time)
    attention_slicing: bool = False  # diffusion: enable_attention_slicing (a UNet's sliced attention processor)
    omitted_components: tuple[str, ...] = ()  # diffusion: components left out of the pipeline (text_encoder_3=None)
    # torch.compile (or Lightning Thunder) around the model: the partitioner keeps fewer tensors for the backward
    compiled: bool = False
    # torchtune's recipe features: each parameter's optimizer step runs in a hook as soon as its gradient is ready
    # (optimizer_in_bwd), and saved activations go to pinned CPU memory (enable_activation_offloading)
    optimizer_in_backward: bool = False
    activation_offloading: bool = False
    head: str = "lm"  # "lm": a loss over the vocabulary; "classifier": a few labels (no vocabulary logits)
    # "chunked": the loss over the vocabulary is taken a chunk of tokens at a time; "projected-chunked": the loss also
    # applies the output projection to each chunk itself, so no logits exist outside it; "checkpointed-chunked": that,
    # each chunk of 256 tokens under activation checkpointing, in fp32 (TRL's SFTTrainer, loss_type="chunked_nll")
    loss: str = "standard"
    # whose modules run the model: "transformers", "litgpt" (see litgpt.py) or "gpt-fast" (gpt-fast's model.py and
    # generate.py as torchao and others copy them: a causal-mask buffer, decoding on the math SDPA kernel), "torchtune"
    # (torchtune's TransformerDecoder: transformers' layers for memory, no dropout unless stated, LoRA adapters built in
    # the model's dtype) or "own" (the model's own code, trust_remote_code, or another framework's: not modelled;
    # unstated.unmodelled_code covers it)
    model_code: str = "transformers"
    # FSDP's MixedPrecision(param_dtype=...) under autocast: the dtype of the gathered units ("bf16" or "fp16": 16-bit;
    # "fp32"). None: unknown; the estimate takes 16 bits (accelerate's and torchtitan's policy), the high end fp32
    # (Lightning's mixed precision keeps fp32 parameters and lets autocast cast).
    fsdp_param_dtype: str | None = None
    # bitsandbytes before 0.43.2 kept each 4-bit linear's input for the backward (MatMul4Bit's ctx.tensors),
    # 0.43.2 and later keep none. None: the version is unknown; the estimate takes today's, the high end the old.
    quant_keeps_inputs: bool | None = None
    # bitsandbytes' 4-bit linears compute in BitsAndBytesConfig's bnb_4bit_compute_dtype, fp32 where the config leaves it
    # out (transformers' default): each matmul's dequantised 16-bit weight is cast to fp32 beside it. None: not known
    # (the estimate 16-bit compute, the high end fp32).
    quant_compute_fp32: bool | None = None
    # Whether the previous micro-batch's graph is still alive while the next one runs: a loop whose output
    # or loss stays bound to a name until the next forward returns (LitGPT's fit, most hand-written loops)
    # keeps it; a step inside a function (transformers' Trainer) or `del loss` frees it. It holds memory only
    # where a tensor outlives the backward (bitsandbytes' kept inputs, ctx attributes rather than saved
    # tensors). None: unknown; LitGPT's loop keeps it, elsewhere the high end assumes it.
    previous_graph_alive: bool | None = None
    # Whether the training step drops the model's output (the logits) before its backward and keeps only the loss
    # (`del pred` before `loss.backward()`): the loss's peak then holds its own tensors alone. None: not stated (a
    # loop that binds the outputs holds them through the backward; the HF Trainer's step is read as
    # previous_graph_alive False, which drops them too).
    outputs_freed: bool | None = None
    # Generation: transformers before 4.45 computed the logits of every prompt position (and upcast them to fp32),
    # 4.45 and later the last one's only (a few families later: versions.PROMPT_LOGITS_LAST_SINCE). None: the version is unknown; the estimate takes today's, the high end the old.
    prompt_logits_whole: bool | None = None
    # Generation (transformers' generate): before 4.42 (versions.CACHE_OBJECT_SINCE for the families that came to it
    # later) generate kept the KV cache as tuples of tensors between steps, and a step's torch.cat built each layer's
    # longer keys and values while the previous step's tuple was still held (model_kwargs["past_key_values"]): two
    # caches alive at the end of every step. From then on generate passes one DynamicCache object, whose layers are
    # replaced one at a time. None: the version is unknown; the estimate takes today's, the high end the old.
    cache_copied: bool | None = None
    # Inference (a forward without a loss): transformers before 4.46 upcast the LM head's output to fp32 (`.float()`), so
    # the 16-bit logits and their fp32 copy were alive at once; 4.46 and later return them in the model's dtype. None:
    # the version is unknown; the estimate takes today's, the high end the old.
    logits_upcast: bool | None = None
    # LoRA under autocast (amp-*): whether the frozen base is loaded in 16 bits. `from_pretrained` without a dtype loads
    # the checkpoint's own dtype from transformers 5 on (dtype="auto", its default; 16 bits for a 16-bit checkpoint) and
    # fp32 before (torch's default dtype). None: neither the script's dtype= nor the release is known; the estimate
    # takes today's 16 bits, the high end an fp32 base (fp32 weights, an fp32 residual stream and norms).
    lora_base_16bit: bool | None = None
    # A model the script loads with `from_pretrained` and no dtype (nor a quantisation, nor a later cast): transformers 5
    # loads the checkpoint's own dtype (dtype="auto", its default; the model's checkpoint_dtype), so a 16-bit checkpoint
    # trains or runs in 16 bits even under an autocast; earlier releases load fp32 (torch's default dtype).
    # loads_checkpoint_dtype: the stated release's behaviour. None: the version is unknown (the estimate the checkpoint's
    # dtype where the model's is known, the other end fp32). Adapters have their own setting (lora_base_16bit).
    default_load_dtype: bool = False
    loads_checkpoint_dtype: bool | None = None
    # Inference and generation over N GPUs with tensor parallelism (Megatron's split, as vLLM and transformers' tp_plan
    # apply it): every layer's heads and MLP, the embeddings and the LM head split N ways; each GPU caches its own KV
    # heads, one replicated where there are fewer KV heads than N. LitGPT's generate/tp.py splits the blocks' linears
    # only: its embeddings and LM head are whole on every GPU (litgpt.TP_REPLICATES_EMBEDDINGS).
    tensor_parallel: int = 1
    # The HF Trainer chooses the optimizer (TrainingArguments without `optim`): "adamw_torch_fused" where torch is 2.8 or
    # later (transformers since July 2025, PR 37358), "adamw_torch" (torch's foreach AdamW) before. trainer_fused_adamw
    # None: the version is unknown; the estimate takes fused, the high end foreach.
    trainer_default_optimizer: bool = False
    trainer_fused_adamw: bool | None = None
    # Before transformers 4.32 (PR 25109) the Trainer's default optim was its own AdamW ("adamw_hf", optimization.AdamW),
    # which steps one parameter at a time with one temporary (the square root of its second moment); trainer_adamw_torch
    # False: that release. None: unknown (the estimate today's torch AdamW).
    trainer_adamw_torch: bool | None = None
    # Training over samples of varying length (no packing, each batch padded to its own longest, `seq_len` the longest):
    # the allocator keeps the segments of earlier, shorter steps (allocator.LENGTH_CACHE). False: every batch has the
    # same shape (packing, padding to a fixed length). None: unknown; the high end of the reserved peak counts the cache.
    lengths_vary: bool | None = None
    # transformers' Qwen2, Phi, Starcoder2 (before 4.45) and Mistral (before 4.42) build a rotary embedding per
    # layer with a cos and sin cache for the model's maximum length. None: unknown; the high end counts it.
    rotary_cache: bool | None = None
    # Inference (a forward without a loss) of a causal LM: whether the forward fills and returns its KV cache
    # (transformers' use_cache, True in its configs by default). None: unknown; the estimate counts it, the low end not.
    use_cache: bool | None = None
    # The CUDA context's kernel images: torch from 1.13 sets CUDA_MODULE_LOADING=LAZY where the user has not (PR 86509),
    # so a kernel is loaded onto the device when first used; before, or with EAGER, every kernel of torch and its CUDA
    # libraries is loaded when the context is made. None: the torch version is unknown; the high end loads them all.
    lazy_module_loading: bool | None = None
    # transformers' choice of attention kernel where nobody states one: SDPA from its 4.36 release (the dispatch in
    # `_autoset_attn_implementation`, transformers PR #27940, cherry-picked into 4.36: SDPA where the model has it and
    # torch is 2.1.1 or later), eager attention before. None: the version is unknown (the estimate SDPA, the high end eager).
    sdpa_dispatch: bool | None = None
    # TRL's training configs (SFTConfig) turn gradient checkpointing on by default from TRL 0.22 (PR 3510); before, off
    # as in TrainingArguments. trl_default_checkpointing: the script's SFTConfig leaves it to that default;
    # trl_checkpointing: the default of the stated TRL release. None: the version is unknown (the estimate on, the high end off).
    trl_default_checkpointing: bool = False
    trl_checkpointing: bool | None = None
    # TRL's SFTTrainer takes its loss a chunk at a time (loss_type="chunked_nll") by default from TRL 1.7.0, the whole
    # logits' cross-entropy before. trl_default_loss: the script's SFTConfig leaves loss_type (and use_liger_kernel) to
    # that default; trl_chunked_loss: the default of the stated TRL release. None: unknown (the estimate chunked).
    trl_default_loss: bool = False
    trl_chunked_loss: bool | None = None
    # The HF Trainer given a compute_metrics, with eval_accumulation_steps unset: every evaluation batch's logits stay on
    # the device until the evaluation ends (trainer_eval.py); a note says what each evaluation sample adds.
    trainer_eval_logits: bool = False
    # What zero_grad does with the gradients: torch 2.0 made set_to_none=True the default of Optimizer.zero_grad and
    # Module.zero_grad (PR 92731), so they are freed before the next forward; before, both zeroed them in place and
    # every gradient stayed allocated through each later forward and backward (the HF Trainer's `model.zero_grad()`,
    # most hand-written loops). None: the torch version is unknown (the estimate frees them, the high end keeps them).
    zero_grad_frees: bool | None = None
    # The loop clears the gradients with the zero_grad() of an optimizer an Accelerator prepared, set_to_none not given:
    # accelerate's AcceleratedOptimizer.zero_grad passes its own default to torch's, set_to_none=False before accelerate
    # 0.28.0 (PR 2472: the gradients zeroed in place, allocated through every forward), True from it on, whatever torch's
    # default. accelerate_zero_grad_frees: that default for the stated accelerate release; None: unknown (the estimate
    # frees them, the high end keeps them).
    zero_grad_accelerated: bool = False
    accelerate_zero_grad_frees: bool | None = None
    # diffusers before 0.31 cast a bf16 tensor to fp32 around each Upsample2D's nearest-neighbour interpolation (and
    # back), so a bf16 VAE decode held its upsampled maps in fp32 (0.31: only under torch older than 2.1, PR 9480).
    # None: the diffusers version is unknown (the estimate today's, the high end the cast).
    vae_upsampling_fp32: bool | None = None


@dataclass(frozen=True)
class Breakdown:
    weights: Interval = ZERO
    gradients: Interval = ZERO
    optimizer: Interval = ZERO
    autocast_cache: Interval = ZERO
    activations: Interval = ZERO
    logits: Interval = ZERO
    kv_cache: Interval = ZERO
    optimizer_step: Interval = ZERO  # the step's temporaries (foreach AdamW: one parameter-sized buffer)
    cublas_workspace: Interval = ZERO  # torch's cuBLAS workspaces, from its caching allocator (see _blas_workspace)
    gradient_buckets: Interval = ZERO  # DDP's bucketed copy of the gradients
    dequantised: Interval = ZERO  # a 4-bit matmul's weight, dequantised while it runs (forward and backward)
    block_rounding: Interval = ZERO  # what the caching allocator's blocks add to the model states' tensors
    # What of the loss is still alive while the largest weight is dequantised (LitGPT: its fp32 logits, which
    # the training loop holds through the backward, and a chunk's gradients); the rest is gone by then.
    loss_beside_dequantised: Interval = ZERO
    # Which terms are alive during the forward and backward (the optimizer step has weights, gradients,
    # optimizer state, its temporaries and DDP's buckets): gradients only while they accumulate.
    gradients_in_backward: bool = False
    # zero_grad may zero the gradients in place rather than free them (Plan.zero_grad_frees unknown): the high end of
    # the forward and backward keeps them.
    gradients_zeroed_high: bool = False
    # A forward without backward (inference, generation; transformers' code): the KV cache while the prompt is
    # read (its own tokens only). The prompt's working memory (`activations`), then the logits its LM head
    # computes (`prompt_logits`, after the layers are done), are alive then, not while the new tokens are
    # generated with the whole cache; `logits` holds what sampling keeps at every step.
    prompt_kv_cache: Interval | None = None
    prompt_logits: Interval = ZERO
    # gpt-fast: its causal-mask buffer (cache length squared, one byte each) and what a decoding step's attention
    # holds at once (the whole static cache expanded to every query head, and the math kernel's fp32 copies)
    causal_mask: Interval = ZERO
    decode_attention: Interval = ZERO
    # transformers' generate before 4.42 (Plan.cache_copied): the previous step's KV cache, alive while a step builds
    # the next one, one token shorter
    previous_kv_cache: Interval = ZERO

    NAMES = ("weights", "gradients", "optimizer", "autocast_cache", "activations", "prompt_logits", "logits", "kv_cache",
             "previous_kv_cache", "causal_mask", "decode_attention", "dequantised", "optimizer_step", "gradient_buckets",
             "cublas_workspace", "block_rounding")

    def items(self) -> list[tuple[str, Interval]]:
        return [(name, getattr(self, name)) for name in self.NAMES]

    def forward_backward(self) -> Interval:
        """Alive while the forward and backward run: the model states without the step's temporaries,
        the autocast cache, activations, logits and KV cache; gradients only when they accumulate
        (otherwise they appear as the activations they replace are freed, and are released by
        zero_grad(set_to_none=True) before the next forward) or while zero_grad keeps them (torch before 2.0)."""
        loss = larger(self.logits, self.dequantised + self.loss_beside_dequantised)
        if self.prompt_kv_cache is None:
            working = self.activations + self.kv_cache
        else:  # reading the prompt (its layers, then its logits), or generating with the whole cache
            prompt = self.prompt_kv_cache + larger(self.activations, self.prompt_logits)
            working = larger(prompt, larger(self.kv_cache + self.previous_kv_cache + self.decode_attention, self._first_step()))
        total = self.weights + self.optimizer + self.autocast_cache + working + loss + self.causal_mask
        total = total + self.gradient_buckets + self.cublas_workspace + self.block_rounding
        if self.gradients_in_backward:
            return total + self.gradients
        return total + Interval(0.0, 0.0, self.gradients.high) if self.gradients_zeroed_high else total

    def _first_step(self) -> Interval:
        """generate before 4.42 (previous_kv_cache), end by end: its first decoding step holds the prompt's cache twice
        (the tuple it keeps and the one the step builds, a token longer) and the prompt's fp32 logits, which the prefill's
        output (`outputs`, with `next_token_logits` a view of it) keeps until the step returns: 4 of the 6 bytes per logit
        that the upcast prompt logits take."""
        prompt_kv = self.prompt_kv_cache or ZERO
        ends = zip((prompt_kv.low, prompt_kv.estimate, prompt_kv.high),
                   (self.prompt_logits.low, self.prompt_logits.estimate, self.prompt_logits.high),
                   (self.previous_kv_cache.low, self.previous_kv_cache.estimate, self.previous_kv_cache.high))
        return Interval(*(2.0 * kv + logits * 4.0 / 6.0 if previous else 0.0 for kv, logits, previous in ends))

    def step(self) -> Interval:
        """Alive during the optimizer step: weights, gradients, optimizer state and its temporaries."""
        total = self.weights + self.gradients + self.optimizer + self.optimizer_step + self.gradient_buckets
        return total + self.cublas_workspace + self.block_rounding

    def peak(self) -> Interval:
        """The larger phase, end by end."""
        return larger(self.forward_backward(), self.step())


def larger(first: Interval, second: Interval) -> Interval:
    return Interval(max(first.low, second.low), max(first.estimate, second.estimate), max(first.high, second.high))


@dataclass(frozen=True)
class Estimate:
    plan: Plan
    params: int
    trainable_params: int
    breakdown: Breakdown
    allocated: Interval
    reserved: Interval
    process: Interval
    assumptions: list[str] = field(default_factory=list)
    # Of the reserved (and process) peak: cached segments holding no live tensor, which the allocator frees before it
    # fails a request (runs over samples of varying length). They do not decide whether the run fits.
    cached: Interval = ZERO

    @property
    def needed(self) -> Interval:
        """What the device must hold for the run to complete: the process peak without the cache it gives back."""
        return Interval(self.process.low - self.cached.low, self.process.estimate - self.cached.estimate,
                        self.process.high - self.cached.high)


class CannotEstimate(ValueError):
    """The configuration lacks something the model needs (an unknown model, no sequence length)."""


def validate(plan: Plan) -> None:
    """Refuse a plan the cost model cannot read: an unknown choice, a count below one, a combination not modelled."""
    for value, allowed, what in (
        (plan.mode, MODES, "mode"), (plan.dtype, DTYPES, "dtype"), (plan.optimizer, OPTIMIZERS, "optimizer"),
        (plan.attention or "sdpa", ATTENTIONS, "attention"), (plan.sharding, SHARDINGS, "sharding"),
    ):
        if value not in allowed:
            raise CannotEstimate(f"unknown {what} {value!r}: one of {', '.join(allowed)}")
    if plan.fsdp_param_dtype is not None and plan.fsdp_param_dtype not in ("fp32", "bf16", "fp16"):
        raise CannotEstimate(f"unknown FSDP param_dtype {plan.fsdp_param_dtype!r}: fp32, bf16 or fp16")
    if plan.checkpoint_policy not in CHECKPOINT_POLICIES:
        raise CannotEstimate(f"unknown checkpoint policy {plan.checkpoint_policy!r}: one of {', '.join(CHECKPOINT_POLICIES)}")
    if plan.loss not in LOSSES:
        raise CannotEstimate(f"unknown loss {plan.loss!r}: one of {', '.join(LOSSES)}")
    if plan.head not in HEADS:
        raise CannotEstimate(f"unknown head {plan.head!r}: one of {', '.join(HEADS)}")
    if set(plan.modules_to_save) - set(SAVED_MODULES):
        raise CannotEstimate(f"modules to save: {', '.join(SAVED_MODULES)} (got {', '.join(plan.modules_to_save)})")
    if plan.model_code not in MODEL_CODES:
        raise CannotEstimate(f"unknown model code {plan.model_code!r}: one of {', '.join(MODEL_CODES)}")
    if plan.quant is not None and plan.quant not in QUANTS:
        raise CannotEstimate(f"unknown quantisation {plan.quant!r}: one of {', '.join(QUANTS)}")
    if plan.batch_size < 1 or plan.gpus < 1 or plan.grad_accum < 1 or plan.checkpoint_every < 1:
        raise CannotEstimate("batch size, gradient accumulation steps and GPU count must be at least 1")
    if plan.quant is not None and plan.lora_rank is None and plan.mode == "train":
        raise CannotEstimate("a quantised base model trains only through adapters: give --lora-rank")
    if plan.tensor_parallel < 1:
        raise CannotEstimate("the tensor-parallel degree must be at least 1")
    if plan.tensor_parallel > 1:
        _validate_tensor_parallel(plan)
    if plan.optimizer_in_backward and plan.grad_accum > 1:
        raise CannotEstimate("an optimizer step in the backward frees each gradient at once: it cannot accumulate micro-batches")


def _validate_tensor_parallel(plan: Plan) -> None:
    """Tensor parallelism as modelled: a transformer's inference or generation, its query heads split evenly."""
    degree = plan.tensor_parallel
    if plan.mode == "train":
        raise CannotEstimate("a tensor-parallel degree is modelled for inference and generation only; for training, use --sharding")
    if degree > plan.gpus:
        raise CannotEstimate(f"tensor parallelism over {degree} GPUs needs {degree} GPUs; the run has {plan.gpus}")
    geometry = shape(plan.model) if plan.model is not None else None
    if geometry is None or plan.model is None or plan.model.kind == "diffusion":
        raise CannotEstimate("a tensor-parallel degree is modelled for transformers', gpt-fast's and LitGPT's decoders")
    if geometry.heads % degree:
        raise CannotEstimate(f"{geometry.heads} attention heads do not split {degree} ways (tensor parallelism needs a divisor)")
