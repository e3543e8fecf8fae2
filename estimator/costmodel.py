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
from dataclasses import dataclass, field

from . import litgpt
from .activation_data import measured_layer_coefficients
from .architectures import LM_HEAD_NAMES, Architecture, Shape, parameter_count, shape
from .diffusion import diffusion_terms, pipeline_of
from .units import GIB

DTYPES = ("fp32", "amp-fp16", "amp-bf16", "fp16", "bf16")
OPTIMIZERS = (
    "sgd", "sgd-momentum", "adam", "adamw", "adamw-8bit", "paged-adamw-8bit", "adafactor", "lion", "rmsprop", "adagrad",
)
QUANTS = ("nf4", "nf4-dq", "int8")
ATTENTIONS = ("eager", "sdpa", "flash")
MODES = ("train", "infer", "generate")
SHARDINGS = ("ddp", "fsdp", "fsdp-grad-op", "zero1", "zero2", "zero3")
# Shardings that divide the parameters across GPUs and gather each unit's while it runs (ZeRO-3 and FSDP's
# FULL_SHARD; FSDP's SHARD_GRAD_OP keeps a unit gathered from its forward to its backward)
_SHARDED_PARAMETERS = ("fsdp", "fsdp-grad-op", "zero3")
_SHARDED_GRADIENTS = ("zero2", *_SHARDED_PARAMETERS)
_SHARDED_OPTIMIZER = ("zero1", *_SHARDED_GRADIENTS)
OFFLOADS = ("optimizer", "params")
HEADS = ("lm", "classifier")
LOSSES = ("standard", "chunked")
CHECKPOINT_POLICIES = ("full", "selective", "alternate")
MODEL_CODES = ("transformers", "litgpt", "gpt-fast")

# bytes per element: (weights, gradients, activations, autocast cast cache per parameter)
_PRECISION = {
    "fp32": (4, 4, 4, 0),
    "amp-fp16": (4, 4, 2, 2),
    "amp-bf16": (4, 4, 2, 2),
    "fp16": (2, 2, 2, 0),
    "bf16": (2, 2, 2, 0),
}
# Optimizer state per trainable parameter: (number of states kept in the parameter's dtype, fixed bytes).
# torch's optimizers keep their states in the parameter's dtype; bitsandbytes' 8-bit ones 1 byte each.
_OPTIMIZER_STATE = {
    "sgd": (0, 0.0), "sgd-momentum": (1, 0.0), "adam": (2, 0.0), "adamw": (2, 0.0),
    "adamw-8bit": (0, 2.0), "paged-adamw-8bit": (0, 2.0), "adafactor": (0, 0.4), "lion": (1, 0.0),
    "rmsprop": (1, 0.0), "adagrad": (1, 0.0),
}
# Quantized base weights: bytes per quantized parameter (4-bit packed + fp32 absmax per 64-block; double
# quantization stores the absmax in 8 bits with a second-level constant).
_QUANT_BYTES = {"nf4": 0.5 + 4 / 64, "nf4-dq": 0.5 + 0.0159, "int8": 1.0 + 4 / 4096}
# Retained activation bytes per (token x hidden) per layer, 2-byte activations, excluding the
# attention-score term; the MLP part is derived from the FFN width (see _layer_coefficient).
_ATTENTION_LINEAR = 10.0  # q/k/v input, q and k, v, output-projection input
_NORMS = 4.0
# Loss over the vocabulary: bytes per logit (fp32 logits kept for the loss, plus the backward's transients).
_LOGIT_BYTES = (14.0, 16.0, 20.0)
# A chunked loss (litgpt's chunked_cross_entropy, fused/Liger-style kernels) keeps the 16-bit logits and
# one fp32 log-softmax per chunk (6 bytes per logit), and its backward works a chunk at a time.
_CHUNKED_LOGIT_BYTES = (6.0, 7.0, 8.0)
# Generation with transformers (generate's _sample and its logits processors), bytes per vocabulary entry and
# sequence at a step: greedy keeps the next-token logits in fp32 and their scores (8); sampling with top-k and
# top-p adds the processors' copies, top-p's sorted values and int64 indices, softmax, cumulative sum, masks
# and the probabilities (38). The prompt's own logits: since transformers 4.42 only the last position's.
_SAMPLING_BYTES = (8.0, 38.0, 38.0)
# torch's default cuBLAS workspace of one handle and stream on an A100 (hardware.Gpu.blas_workspace_bytes
# gives each device's): CUBLAS_WORKSPACE_CONFIG unset, ":4096:2:16:8".
DEFAULT_BLAS_WORKSPACE_BYTES = 4096 * 1024 * 2 + 16 * 1024 * 8
# Caching-allocator overhead, reserved / allocated - 1, from whole runs replayed through the allocator's rules
# (calibration/allocator_replay.py; allocator_peaks.json, litgpt_peaks.json): 0.7-16.5 % with fixed shapes
# (21 runs: training full, LoRA, QLoRA, checkpointed, accumulating; inference; a generation with a static cache,
# whose allocations are almost all its weights, taken once: 0.7 %), 5.5-30.5 % with batches of varying length;
# the estimate is the median of all 24, 5.2 %.
_FRAGMENTATION = (0.0067, 0.052, 0.305)
# A training run over samples of varying length (no packing: each batch padded to its own longest, the samples in
# random order) reserves more than that. The caching allocator gives a segment back only on empty_cache() or when
# cudaMalloc fails (torch's "CUDA memory management" notes, CUDACachingAllocator.cpp's release_cached_blocks), and it
# never serves a request from two segments: a step longer than every step before finds no cached block large enough
# and takes new segments, while the older, smaller ones stay reserved. Replayed over runs of lengths drawn from a
# dataset's stated statistics (calibration/varying_length_peaks.py), reserved minus allocated as a share of the
# activations and the loss, the tensors whose size follows the length (what is not a model state in the replayed runs,
# whose allocated peak is in the forward and backward): the median and the largest of the replays, for training
# adapters over a frozen base and for full training apart (full training's parameter-sized gradients and step
# temporaries take and free whole segments of their own between the steps: it kept less cached; one replay, so its
# high end is the largest of all). A
# run whose longest batch comes first takes its segments at once and reuses them (the low end: one shape's
# fragmentation, as allocator_peaks.json's runs of varying length, longest first, show). The segments that hold no
# live tensor are what the allocator frees before it fails a request: they show in max_memory_reserved and
# nvidia-smi but do not decide whether a run fits.
_LENGTH_CACHE = {"adapters": (1.869, 2.350), "full": (0.545, 2.350)}
# Allocated blocks over live tensors in the same replays: at most +0.63 % (the high end; the estimate
# counts the weights' rounding, _block_rounding).
_BLOCKS_OVER_LIVE = 0.0063
# Interval around activation estimates. Measured coefficients (transformers' modules on the CPU) still
# leave the GPU kernels' choices open; the formula is within 15 % of 21 of 22 measured architectures
# and 28 % off the worst (an MoE). CNN figures are per-sample measurements at one resolution.
_IMAGE_SPREAD = (0.8, 1.0, 1.25)
_MEASURED_SPREAD = (0.9, 1.0, 1.15)
_FORMULA_SPREAD = (0.8, 1.0, 1.4)
# The working memory of a forward without a backward (inference, a generation's prompt): the accounting of
# inference_layer_coefficient equals a fake-tensor replay of transformers' generate path within 5 % for 13
# models (calibration/inference_peaks.py); GPU kernels' workspaces (flash attention's) are left to the high end.
_INFERENCE_SPREAD = (0.9, 1.0, 1.15)
# LitGPT's layers: the formula equals what its modules keep under FakeTensorMode to within 0.2 % for six
# models (calibration/litgpt_activations.py); the caching allocator's block rounding adds up to 0.5 %
# (calibration/allocator_replay.py over whole LitGPT runs). Its versions' differences are the interval's
# ends instead (see litgpt.layer_coefficient's fp32_norm, the cached heads, bitsandbytes' kept inputs).
_LITGPT_SPREAD = (0.99, 1.0, 1.02)
# Model types whose MLP activation is transformers' `gelu_new` (measured for gpt2 and phi).
_PYTHON_GELU_FAMILIES = frozenset({"gpt2", "phi", "gptj"})
# Model types whose eager attention takes the softmax in the activation dtype (measured: gpt2, BERT-likes);
# the others upcast to fp32 and keep both.
_HALF_SOFTMAX_FAMILIES = frozenset({"gpt2", "bert", "roberta", "distilbert"})
# Sequence lengths used when the script does not say: low end, estimate (the high end is the model's maximum).
_SHORT_SEQUENCE = 256
_TYPICAL_SEQUENCE = 2048


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
    quant: str | None = None
    gradient_checkpointing: bool = False
    checkpoint_every: int = 1  # with checkpointing: every N-th layer is checkpointed (1: all of them)
    # "selective": matmul and attention outputs kept, the rest recomputed; "alternate": the same but every second
    # matmul of a layer recomputed too (torchtitan's op-level policy)
    checkpoint_policy: str = "full"
    kbit_prepared: bool = False  # peft's prepare_model_for_kbit_training: the unquantised parameters in fp32
    attention: str = "sdpa"
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
    omitted_components: tuple[str, ...] = ()  # diffusion: components left out of the pipeline (text_encoder_3=None)
    # torch.compile (or Lightning Thunder) around the model: the partitioner keeps fewer tensors for the backward
    compiled: bool = False
    # torchtune's recipe features: each parameter's optimizer step runs in a hook as soon as its gradient is ready
    # (optimizer_in_bwd), and saved activations go to pinned CPU memory (enable_activation_offloading)
    optimizer_in_backward: bool = False
    activation_offloading: bool = False
    head: str = "lm"  # "lm": a loss over the vocabulary; "classifier": a few labels (no vocabulary logits)
    loss: str = "standard"  # "chunked": the loss over the vocabulary is taken a chunk of tokens at a time
    # whose modules run the model: "transformers", "litgpt" (see litgpt.py) or "gpt-fast" (gpt-fast's model.py and
    # generate.py as torchao and others copy them: a causal-mask buffer, decoding on the math SDPA kernel)
    model_code: str = "transformers"
    # FSDP's MixedPrecision(param_dtype=...) under autocast: the dtype of the gathered units ("bf16" or "fp16": 16-bit;
    # "fp32"). None: unknown; the estimate takes 16 bits (accelerate's and torchtitan's policy), the high end fp32
    # (Lightning's mixed precision keeps fp32 parameters and lets autocast cast).
    fsdp_param_dtype: str | None = None
    # bitsandbytes before 0.43.2 kept each 4-bit linear's input for the backward (MatMul4Bit's ctx.tensors),
    # 0.43.2 and later keep none. None: the version is unknown; the estimate takes today's, the high end the old.
    quant_keeps_inputs: bool | None = None
    # Whether the previous micro-batch's graph is still alive while the next one runs: a loop whose output
    # or loss stays bound to a name until the next forward returns (LitGPT's fit, most hand-written loops)
    # keeps it; a step inside a function (transformers' Trainer) or `del loss` frees it. It holds memory only
    # where a tensor outlives the backward (bitsandbytes' kept inputs, ctx attributes rather than saved
    # tensors). None: unknown; LitGPT's loop keeps it, elsewhere the high end assumes it.
    previous_graph_alive: bool | None = None
    # Generation: transformers before 4.42 computed the logits of every prompt position (and upcast them to fp32),
    # 4.42 and later the last one's only. None: the version is unknown; the estimate takes today's, the high end the old.
    prompt_logits_whole: bool | None = None
    # Inference and generation over N GPUs with tensor parallelism (Megatron's split, as vLLM and transformers' tp_plan
    # apply it): every layer's heads and MLP, the embeddings and the LM head split N ways; each GPU caches its own KV
    # heads, one replicated where there are fewer KV heads than N.
    tensor_parallel: int = 1
    # The HF Trainer chooses the optimizer (TrainingArguments without `optim`): "adamw_torch_fused" where torch is 2.8 or
    # later (transformers since July 2025, PR 37358), "adamw_torch" (torch's foreach AdamW) before. trainer_fused_adamw
    # None: the version is unknown; the estimate takes fused, the high end foreach.
    trainer_default_optimizer: bool = False
    trainer_fused_adamw: bool | None = None
    # Training over samples of varying length (no packing, each batch padded to its own longest, `seq_len` the longest):
    # the allocator keeps the segments of earlier, shorter steps (_LENGTH_CACHE). False: every batch has the same shape
    # (packing, padding to a fixed length). None: unknown; the high end of the reserved peak counts the cache.
    lengths_vary: bool | None = None
    # transformers' Qwen2, Phi, Starcoder2 (before 4.45) and Mistral (before 4.42) build a rotary embedding per
    # layer with a cos and sin cache for the model's maximum length. None: unknown; the high end counts it.
    rotary_cache: bool | None = None


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

    NAMES = ("weights", "gradients", "optimizer", "autocast_cache", "activations", "prompt_logits", "logits", "kv_cache",
             "causal_mask", "decode_attention", "dequantised", "optimizer_step", "gradient_buckets",
             "cublas_workspace", "block_rounding")

    def items(self) -> list[tuple[str, Interval]]:
        return [(name, getattr(self, name)) for name in self.NAMES]

    def forward_backward(self) -> Interval:
        """Alive while the forward and backward run: the model states without the step's temporaries,
        the autocast cache, activations, logits and KV cache; gradients only when they accumulate
        (otherwise they appear as the activations they replace are freed, and are released by
        zero_grad(set_to_none=True) before the next forward)."""
        loss = _larger(self.logits, self.dequantised + self.loss_beside_dequantised)
        if self.prompt_kv_cache is None:
            working = self.activations + self.kv_cache
        else:  # reading the prompt (its layers, then its logits), or generating with the whole cache
            prompt = self.prompt_kv_cache + _larger(self.activations, self.prompt_logits)
            working = _larger(prompt, self.kv_cache + self.decode_attention)
        total = self.weights + self.optimizer + self.autocast_cache + working + loss + self.causal_mask
        total = total + self.gradient_buckets + self.cublas_workspace + self.block_rounding
        return total + self.gradients if self.gradients_in_backward else total

    def step(self) -> Interval:
        """Alive during the optimizer step: weights, gradients, optimizer state and its temporaries."""
        total = self.weights + self.gradients + self.optimizer + self.optimizer_step + self.gradient_buckets
        return total + self.cublas_workspace + self.block_rounding

    def peak(self) -> Interval:
        """The larger phase, end by end."""
        return _larger(self.forward_backward(), self.step())


def _larger(first: Interval, second: Interval) -> Interval:
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


def estimate(plan: Plan, context_bytes: float = 0.14 * GIB, workspace_bytes: float = DEFAULT_BLAS_WORKSPACE_BYTES,
             compute_capability: str | None = None, usable_bytes: float | None = None) -> Estimate:
    """Per-GPU peaks of one configuration. ``context_bytes``: the CUDA context of the target device;
    ``workspace_bytes``: torch's cuBLAS workspace per handle and stream there; ``compute_capability``: an
    NVIDIA device's ("7.0"), which decides the attention kernels it has (None: not known, or not NVIDIA);
    ``usable_bytes``: what one process can allocate there, which bounds the cache the allocator keeps (None: not
    known, no bound)."""
    _validate(plan)
    arch = plan.model
    if arch is None:
        raise CannotEstimate("the model is unknown: there is nothing to count (name it with --model)")
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
                              gradients_in_backward=plan.mode == "train" and plan.grad_accum > 1)
    else:
        params = parameter_count(arch)
        trainable = _trainable_params(plan, geometry, params, notes)
        weights, gradients, optimizer, cache = _model_states(plan, geometry, params, trainable, notes)
        weights = weights + _rotary_cache(plan, arch, geometry, notes)
        activations, logits, kv, prompt_kv, prompt_logits = _activations(plan, arch, geometry, notes)
        step, buckets = _step_terms(plan, geometry, trainable, gradients, notes)
        if plan.optimizer_in_backward and plan.mode == "train":
            gradients, step = _optimizer_in_backward(plan, geometry, trainable, notes), ZERO
        breakdown = Breakdown(
            weights, gradients, optimizer, cache, activations, logits, kv, optimizer_step=step, gradient_buckets=buckets,
            cublas_workspace=workspace, dequantised=_dequantised(plan, geometry, notes),
            loss_beside_dequantised=_loss_beside_dequantised(plan, geometry),
            block_rounding=_block_rounding(plan, geometry, trainable == params),
            gradients_in_backward=plan.mode == "train" and (plan.grad_accum > 1 or plan.optimizer_in_backward),
            prompt_kv_cache=prompt_kv if plan.mode != "train" and plan.model_code != "litgpt" else None,
            prompt_logits=prompt_logits,
            **_gpt_fast_terms(plan, geometry, notes),
        )
    allocated = breakdown.peak()
    if breakdown.causal_mask.estimate:
        # gpt-fast builds its mask as torch.tril(torch.ones(n, n)): both are alive before the KV cache exists
        allocated = _larger(allocated, breakdown.weights + breakdown.causal_mask.scaled(2.0))
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
        allocated = _larger(allocated, loading)
        if loading.estimate >= allocated.estimate:
            notes.append("the peak is reached while the 16-bit checkpoint is quantised on loading")
    if plan.mode == "train":
        phase = "the optimizer step" if breakdown.step().estimate > breakdown.forward_backward().estimate else "the forward and backward"
        notes.append(f"the peak is reached in {phase} (gradients are freed by zero_grad before each forward"
                     + (f"; they accumulate over {plan.grad_accum} micro-batches here)" if plan.grad_accum > 1 else ")"))
    allocated = Interval(allocated.low, allocated.estimate, allocated.high * (1 + _BLOCKS_OVER_LIVE))
    reserved = Interval(
        allocated.low * (1 + _FRAGMENTATION[0]), allocated.estimate * (1 + _FRAGMENTATION[1]),
        allocated.high * (1 + _FRAGMENTATION[2]),
    )
    notes.append(
        f"allocator overhead (reserved over allocated) {_FRAGMENTATION[0]:.0%}–{_FRAGMENTATION[2]:.0%}, "
        f"{_FRAGMENTATION[1]:.1%} expected (replayed runs); batches of varying length fragment most"
    )
    # Where cuBLAS allocates its workspace itself (the low end), it is outside the allocator's count but on the device.
    outside_allocator = Interval(workspace.high - workspace.low, workspace.high - workspace.estimate, 0.0)
    room = None if usable_bytes is None else usable_bytes - context_bytes - outside_allocator.high
    cached = length_cache(plan, allocated, reserved, breakdown, room, notes)
    reserved = reserved + cached
    process = reserved + Interval.exact(context_bytes) + outside_allocator
    plan = dataclasses.replace(plan, attention=asked.attention)
    return Estimate(plan, params, trainable, breakdown, allocated, reserved, process, list(dict.fromkeys(notes)), cached)


def length_cache(plan: Plan, allocated: Interval, reserved: Interval, breakdown: Breakdown, room: float | None,
                 notes: list[str]) -> Interval:
    """What a training run over samples of varying length reserves beyond one shape's fragmentation: the replayed
    runs' reserved-over-allocated as a share of the activations and loss, the tensors whose size follows the length
    (_LENGTH_CACHE), less `reserved` (one shape's), end by end; with `lengths_vary` unknown, at the high end only.
    The allocator never reserves more than the device lets it (``room``: what it can reserve beside the context): it
    frees its cache when cudaMalloc fails."""
    if plan.mode != "train" or plan.lengths_vary is False:
        return ZERO
    varying = breakdown.activations + breakdown.logits

    def beyond(end: str, share: float) -> float:
        cache = max(0.0, getattr(allocated, end) + share * getattr(varying, end) - getattr(reserved, end))
        return cache if room is None else max(0.0, min(cache, room - getattr(reserved, end)))

    expected, high = _LENGTH_CACHE["adapters" if plan.lora_rank is not None else "full"]
    if plan.lengths_vary:
        notes.append(
            f"samples of varying length: the allocator keeps segments of earlier, shorter steps cached; reserved over "
            f"allocated {expected:.0%} (up to {high:.0%}) of the activations and loss (replayed runs; none where the "
            "longest batch comes first), at most what the device has; the cache counts in the reserved and process "
            "peaks, not in whether the run fits"
        )
        return Interval(0.0, beyond("estimate", expected), beyond("high", high))
    notes.append(
        "whether the samples vary in length is not known: the high end of the reserved peak counts the segments a run "
        f"over varying lengths keeps cached (reserved over allocated up to {high:.0%} of the activations and loss); "
        "--lengths-vary or --fixed-lengths settles it"
    )
    return Interval(0.0, 0.0, beyond("high", high))


def attention_kernel(plan: Plan, compute_capability: str | None, notes: list[str]) -> str:
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


def _validate(plan: Plan) -> None:
    for value, allowed, what in (
        (plan.mode, MODES, "mode"), (plan.dtype, DTYPES, "dtype"), (plan.optimizer, OPTIMIZERS, "optimizer"),
        (plan.attention, ATTENTIONS, "attention"), (plan.sharding, SHARDINGS, "sharding"),
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
    if geometry is None or plan.model is None or plan.model.kind == "diffusion" or plan.model_code == "litgpt":
        raise CannotEstimate("a tensor-parallel degree is modelled for transformers' and gpt-fast's decoders")
    if geometry.heads % degree:
        raise CannotEstimate(f"{geometry.heads} attention heads do not split {degree} ways (tensor parallelism needs a divisor)")


def _kv_heads_per_gpu(plan: Plan, geometry: Shape) -> int:
    """The KV heads each GPU caches: its share under tensor parallelism, at least one (a KV head serves the query
    heads of several GPUs where there are fewer KV heads than GPUs, and each of them holds it)."""
    return max(1, math.ceil(geometry.kv_heads / plan.tensor_parallel))


# ---------------------------------------------------------------------- parameters and states
def _lora_params(plan: Plan, geometry: Shape | None) -> int:
    if plan.lora_rank is None or geometry is None:
        return 0
    per_layer = 0
    for target in plan.lora_targets:
        if target in LM_HEAD_NAMES:
            continue  # once, not per layer: _head_adapter_params
        dims = geometry.lora_dims.get(target)
        if dims is None:
            raise CannotEstimate(f"LoRA target {target!r} is not a linear of this model: {', '.join(sorted(geometry.lora_dims))}")
        per_layer += plan.lora_rank * (dims[0] + dims[1])
    return geometry.layers * per_layer + _head_adapter_params(plan, geometry)


def _targets_the_head(plan: Plan) -> bool:
    return plan.lora_rank is not None and any(target in LM_HEAD_NAMES for target in plan.lora_targets)


def _head_adapter_params(plan: Plan, geometry: Shape) -> int:
    """LoRA on the LM head (`lm_head`, GPT-NeoX's `embed_out`): one adapter from the hidden size to the vocabulary,
    A (rank x hidden) and B (vocab x rank)."""
    if not _targets_the_head(plan):
        return 0
    kind = plan.model.kind if plan.model is not None else None
    if not geometry.vocab or kind not in ("decoder", "encoder-decoder") or plan.head != "lm":
        raise CannotEstimate("LoRA on the LM head: this model has no LM head over a vocabulary")
    assert plan.lora_rank is not None, "a plan with adapters"
    return plan.lora_rank * (geometry.hidden + geometry.vocab)


def _head_adapter_kept(plan: Plan, geometry: Shape, tokens: int) -> float:
    """What the LM head's adapter keeps for the backward, as a layer's adapters do: its input (the final norm's
    output) cast to the adapter's dtype (peft: fp32), a dropout mask of a byte per element when lora_dropout > 0,
    and its rank-wide inner activation. Its vocabulary-wide output is added to the frozen head's logits and freed."""
    if not _targets_the_head(plan) or plan.mode != "train":
        return 0.0
    assert plan.lora_rank is not None, "a plan with adapters"
    adapter = _adapter_bytes(plan)
    mask = 0.5 if plan.lora_dropout is None else (1.0 if plan.lora_dropout > 0 else 0.0)
    return tokens * ((adapter + mask) * geometry.hidden + adapter * plan.lora_rank)


def _trainable_params(plan: Plan, geometry: Shape | None, params: int, notes: list[str]) -> int:
    if plan.mode != "train":
        return 0
    if plan.lora_rank is not None:
        if geometry is None:
            raise CannotEstimate("LoRA is modelled for transformer models only")
        lora = _lora_params(plan, geometry)
        notes.append(f"LoRA rank {plan.lora_rank} on {', '.join(plan.lora_targets)}: {lora:,} trainable parameters, kept in fp32")
        head = _head_adapter_params(plan, geometry)
        if head:
            notes.append(f"LoRA on the LM head: one adapter of rank x (hidden + vocabulary) = {head:,} parameters; it keeps a copy "
                         "of the final hidden states for the backward")
        return lora
    return params


def _model_states(plan: Plan, geometry: Shape | None, params: int, trainable: int, notes: list[str]):
    weight_bytes, grad_bytes, _, cache_bytes = _PRECISION[plan.dtype]
    shards = plan.gpus if plan.sharding in _SHARDED_PARAMETERS else 1
    lora = plan.lora_rank is not None and plan.mode == "train"
    if plan.quant is not None:
        if geometry is None:
            raise CannotEstimate("quantised bases are modelled for transformer models only")
        # transformers keeps the LM head in 16 bits; Fabric's bitsandbytes plugin quantises every linear
        quantised_head = plan.model_code == "litgpt"
        kept = geometry.embedding_params + (0 if quantised_head else geometry.lm_head_params)  # stay in 16-bit
        quantised = params - kept
        kept_bytes = 4 if plan.kbit_prepared else 2
        base = quantised * _QUANT_BYTES[plan.quant] + kept * kept_bytes
        notes.append(f"{plan.quant}: {quantised:,} parameters quantised, " + ("the LM head too, " if quantised_head else "")
                     + ("embeddings" if quantised_head else "embeddings and LM head") + " kept in "
                     + ("fp32 (prepare_model_for_kbit_training casts them up)" if plan.kbit_prepared else "16-bit"))
    else:
        base_bytes = 2 if lora and plan.dtype.startswith("amp") else weight_bytes
        base = params * base_bytes
        if lora and plan.dtype.startswith("amp"):
            notes.append("LoRA under autocast: the frozen base is assumed loaded in 16-bit")
    if plan.mode != "train":
        if plan.tensor_parallel > 1:
            notes.append(f"tensor parallel over {plan.tensor_parallel} GPUs: weights split {plan.tensor_parallel} ways (heads, MLP, "
                         "embeddings and LM head; the norms, a fraction of a percent, are counted split too)")
        return Interval.exact(base / shards / plan.tensor_parallel), ZERO, ZERO, ZERO
    adapter_bytes = _adapter_bytes(plan)
    trainable_bytes = adapter_bytes if lora else grad_bytes
    state_dtype = adapter_bytes if lora else weight_bytes
    states, fixed = _OPTIMIZER_STATE[plan.optimizer]
    optimizer = trainable * (states * state_dtype + fixed)
    weights = base + (trainable * adapter_bytes if lora else 0)
    gradients = trainable * trainable_bytes
    cache = params * cache_bytes if not lora and plan.quant is None else 0
    if cache and plan.sharding not in _SHARDED_PARAMETERS:
        notes.append("autocast keeps a 16-bit copy of the weights it casts (about 2 bytes per parameter)")
    if plan.optimizer == "paged-adamw-8bit":
        notes.append("paged optimizer: its state may move to host memory under pressure; counted on the GPU here")
    if plan.optimizer == "adafactor":
        notes.append("Adafactor's factored state is taken as 0.4 bytes per parameter (it depends on the matrix shapes)")
    # sharding of model states across data-parallel ranks (ZeRO paper's stages)
    weights_high = weights
    unsharded_gradients = gradients
    if plan.sharding in _SHARDED_OPTIMIZER:
        optimizer /= plan.gpus
    if plan.sharding in _SHARDED_GRADIENTS:
        gradients /= plan.gpus
    if plan.sharding == "zero3":
        # All-gathered: the unit being computed and the next, prefetched; reduce-scattered: one unit's gradient.
        in_flight = _largest_layer_bytes(geometry, weight_bytes) + _layer_bytes_of(geometry, weight_bytes)
        weights = weights_high = weights / plan.gpus + in_flight
        gradients += _layer_bytes_of(geometry, grad_bytes) if not lora else 0.0
        notes.append(f"{plan.sharding} over {plan.gpus} GPUs: weights, gradients and optimizer state sharded; "
                     "two units gathered at a time (one prefetched) and one unit's gradient being reduce-scattered")
    if plan.sharding in ("fsdp", "fsdp-grad-op"):
        low, high = _fsdp_gathered(plan, geometry, params, weight_bytes, notes)
        weights, weights_high = weights / plan.gpus + low, weights / plan.gpus + high
        # one unit's unsharded gradient, in the gathered parameters' dtype, being reduce-scattered
        gradients += _layer_bytes_of(geometry, _fsdp_param_bytes(plan, grad_bytes, 1)) if not lora else 0.0
    if plan.sharding in _SHARDED_PARAMETERS:
        if plan.sharding != "zero3" and plan.grad_accum > 1:
            gradients = unsharded_gradients  # accumulated under no_sync: unsharded until the last micro-batch
            notes.append("FSDP accumulates gradients unsharded between micro-batches (no_sync)")
        if cache:
            cache = 0.0
            notes.append(f"{plan.sharding}: autocast keeps no cast copies of gathered parameters (they are not leaves); casts are per layer")
    elif plan.sharding in ("zero1", "zero2"):
        notes.append(f"{plan.sharding} over {plan.gpus} GPUs: optimizer state{' and gradients' if plan.sharding == 'zero2' else ''} sharded")
    if "optimizer" in plan.offload:
        optimizer = 0.0
        notes.append("optimizer state offloaded to the CPU")
    if "params" in plan.offload:
        if plan.sharding not in _SHARDED_PARAMETERS:
            raise CannotEstimate("parameter offload needs ZeRO-3 or FSDP sharding")
        weights = weights_high = _largest_layer_bytes(geometry, weight_bytes)
        notes.append("parameters offloaded to the CPU: one layer resident at a time")
    return (Interval(weights, weights, weights_high), Interval.exact(gradients), Interval.exact(optimizer),
            Interval.exact(cache))


# transformers' model families whose attention layers each built a rotary embedding with cos and sin caches
# for max_position_embeddings positions (register_buffer("cos_cached", ...)), and the first release without
# them (read from the releases' modeling files: 4.38.2 to 4.46.0).
_ROTARY_CACHE_UNTIL = {"qwen2": "4.45.0", "qwen2_moe": "4.45.0", "phi": "4.45.0", "starcoder2": "4.45.0", "mistral": "4.42.0"}


def _rotary_cache(plan: Plan, arch: Architecture, geometry: Shape | None, notes: list[str]) -> Interval:
    """The per-layer cos and sin caches of the families in _ROTARY_CACHE_UNTIL under older transformers:
    two tensors of max_position_embeddings x head_dim per layer, in the dtype the model is loaded in
    (from_pretrained sets it as the default while the model is built)."""
    if plan.model_code != "transformers" or geometry is None or arch.family not in _ROTARY_CACHE_UNTIL or not arch.max_positions:
        return ZERO
    if plan.rotary_cache is False:
        return ZERO
    dtype_bytes = 2 if plan.dtype in ("bf16", "fp16") else 4
    size = 2.0 * geometry.layers * arch.max_positions * geometry.head_dim * dtype_bytes
    if plan.rotary_cache:
        return Interval.exact(size)
    notes.append(f"transformers before {_ROTARY_CACHE_UNTIL[arch.family]} kept a rotary cos/sin cache for "
                 f"{arch.max_positions} positions in every layer of {arch.family} models (the high end); "
                 f"{_settled_by('transformers')}")
    return Interval(0.0, 0.0, size)


def _fsdp_param_bytes(plan: Plan, weight_bytes: int, end: int) -> int:
    """Bytes per gathered parameter under FSDP: the weights' own dtype, or under autocast the MixedPrecision
    policy's param_dtype (16 bits at the estimate, fp32 at the high end where the plan does not say)."""
    if not plan.dtype.startswith("amp"):
        return weight_bytes
    if plan.fsdp_param_dtype is not None:
        return 4 if plan.fsdp_param_dtype == "fp32" else 2
    return 4 if end == 2 else 2


def _fsdp_root_params(geometry: Shape | None) -> float:
    """The root unit's parameters under the usual wrapping (one unit per transformer layer): the embeddings
    and an untied LM head."""
    return 0.0 if geometry is None else float(geometry.embedding_params + geometry.lm_head_params)


def _fsdp_gathered(plan: Plan, geometry: Shape | None, params: int, weight_bytes: int, notes: list[str]) -> tuple[float, float]:
    """Gathered (unsharded) parameters alive at the peak under FSDP, at the estimate and the high end.

    FULL_SHARD: FSDP (1 and 2) does not reshard the root unit after its forward (`_post_forward_reshard`: not
    `state._is_root`; fully_shard's root: "the parameters would be freed and all-gathered immediately"), so
    the embeddings and LM head stay gathered through the forward and backward; beside them the unit being
    computed and the next one, prefetched (backward_prefetch=BACKWARD_PRE, the default; limit_all_gathers
    allows two in flight). SHARD_GRAD_OP does not reshard any unit after its forward: at the turn from the
    forward to the backward every unit is gathered."""
    per_layer = _layer_bytes_of(geometry, 1)
    root = _fsdp_root_params(geometry)
    layers = (geometry.layers if geometry is not None else 0) if plan.sharding == "fsdp-grad-op" else 2
    if plan.quant is not None:  # the units gather the packed 4-bit (or 8-bit) storage; embeddings and head in 16 bits
        gathered = root * (4 if plan.kbit_prepared else 2) + layers * per_layer * _QUANT_BYTES[plan.quant]
        return gathered, gathered
    if plan.sharding == "fsdp-grad-op" and geometry is None:
        layers, per_layer = 1, float(params)
    gathered = root + layers * per_layer
    if plan.sharding == "fsdp-grad-op":
        notes.append(f"fsdp-grad-op (SHARD_GRAD_OP) over {plan.gpus} GPUs: gradients and optimizer state sharded; "
                     "every unit stays gathered from its forward to its backward")
    else:
        notes.append(f"fsdp over {plan.gpus} GPUs: weights, gradients and optimizer state sharded; the root unit "
                     "(embeddings, LM head) stays gathered through the step, beside the unit being computed and the "
                     "next one (prefetched); one unit's gradient being reduce-scattered")
    if plan.dtype.startswith("amp") and plan.fsdp_param_dtype is None:
        notes.append("FSDP mixed precision: gathered parameters in 16 bits (param_dtype=bf16, accelerate's and "
                     "torchtitan's policy) at the estimate, fp32 (Lightning's, autocast casting) at the high end")
    return (gathered * _fsdp_param_bytes(plan, weight_bytes, 1), gathered * _fsdp_param_bytes(plan, weight_bytes, 2))


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
    state_bytes = _adapter_bytes(plan) if lora else _PRECISION[plan.dtype][0]
    shards = plan.gpus if plan.sharding in _SHARDED_OPTIMIZER else 1
    temporary = ZERO
    share = _FOREACH_TEMPORARY.get(plan.optimizer, 0.0)
    if share and "optimizer" not in plan.offload:
        whole = trainable * state_bytes * share / shards
        largest = _largest_tensor(geometry, trainable)
        one_tensor = Interval.exact(2 * largest * state_bytes)
        if plan.foreach is None and plan.trainer_default_optimizer and plan.optimizer == "adamw":
            if plan.trainer_fused_adamw is None:
                temporary = Interval(one_tensor.low, one_tensor.estimate, whole)
                notes.append("optimizer: the Trainer's default, fused AdamW (adamw_torch_fused) with torch 2.8 and later (the "
                             "estimate); before, torch's foreach AdamW keeps a parameter-sized temporary (the high end); "
                             f"`optim=` in TrainingArguments or {_settled_by('torch')}")
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
    state_bytes = _adapter_bytes(plan) if lora else _PRECISION[plan.dtype][0]
    grad_bytes = _adapter_bytes(plan) if lora else _PRECISION[plan.dtype][1]
    largest = _largest_tensor(geometry, trainable) if not lora else trainable / max(1, geometry.layers if geometry else 1)
    temporary = _FOREACH_TEMPORARY.get(plan.optimizer, 0.0) * state_bytes
    notes.append("optimizer step in the backward (one optimizer per parameter, stepped as its gradient is ready): "
                 "one parameter's gradient at a time, no step phase")
    return Interval.exact(largest * (grad_bytes + temporary))


# torch's CUDA caching allocator (c10/cuda/CUDACachingAllocator.cpp): blocks are multiples of 512 bytes;
# a request of 10 MiB or more gets a segment of its size rounded up to 2 MiB, and a block is not split
# when 1 MiB or less would be left over: the block, counted in max_memory_allocated, is the whole segment.
_MIN_BLOCK = 512
_SMALL_REQUEST = 1 << 20
_LARGE_SEGMENT_FROM = 10 << 20
_LARGE_ROUNDING = 2 << 20


def block_overhead(size: float) -> float:
    """Bytes the caching allocator's block adds to one tensor of ``size`` bytes in a fresh segment."""
    rounded = _MIN_BLOCK * math.ceil(size / _MIN_BLOCK)
    if rounded >= _LARGE_SEGMENT_FROM:
        segment = _LARGE_ROUNDING * math.ceil(rounded / _LARGE_ROUNDING)
        if segment - rounded <= _SMALL_REQUEST:
            return segment - size
    return rounded - size


def _block_rounding(plan: Plan, geometry: Shape | None, trains_all: bool) -> Interval:
    """The blocks' rounding over the model's weight matrices (and, in full training, their gradients and
    optimizer states: tensors of the same shapes), each in a fresh segment as when they are created.
    Low end 0: expandable segments (PYTORCH_CUDA_ALLOC_CONF) map memory without these segments."""
    if geometry is None or plan.sharding in _SHARDED_PARAMETERS:
        return ZERO
    dims = geometry.lora_dims
    fused = "qkv_proj" in dims  # one matrix where the model fuses them (LitGPT, GPT-NeoX)
    mlp = ("gate_proj", "up_proj", "gate_up_proj", "down_proj")
    per_layer = [(d_in * d_out / plan.tensor_parallel, geometry.layers * ((geometry.experts or 1) if name in mlp else 1))
                 for name, (d_in, d_out) in dims.items() if not (fused and name in ("q_proj", "k_proj", "v_proj"))]
    weight_bytes = _PRECISION[plan.dtype][0] if plan.quant is None else 2
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
    embedding = geometry.vocab * geometry.hidden / plan.tensor_parallel
    total += block_overhead(embedding * weight_bytes)
    if geometry.lm_head_params:
        head = block_overhead(embedding / 2) if plan.quant and quantised_head else block_overhead(embedding * weight_bytes)
        total += head
    if plan.mode == "train" and trains_all and plan.quant is None:
        states, _ = _OPTIMIZER_STATE[plan.optimizer]
        total *= 2 + states  # gradients and each state: the same shapes, in the parameters' dtype
    return Interval(0.0, total, total)


def _blas_workspace(plan: Plan, per_handle: float) -> Interval:
    """torch's cuBLAS workspaces: one per handle and stream, and handles are per thread; a training step
    runs the forward on the script's thread and the backward on autograd's device thread (two). torch
    takes them from its caching allocator (counted in max_memory_allocated) except in the builds that
    leave them to cuBLAS itself (CUDA 12.2 and later before torch set them again: the low end)."""
    count = 2 if plan.mode == "train" else 1
    return Interval(0.0, count * per_handle, count * per_handle)


def _adapter_bytes(plan: Plan) -> int:
    """Bytes per adapter parameter: peft keeps adapters in fp32; LitGPT builds them in the model's dtype."""
    return _PRECISION[plan.dtype][0] if plan.model_code == "litgpt" else 4


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
    else:
        value = Interval(2.0 * layer_linear, 2.0 * layer_linear, 6.0 * layer_linear)
    notes.append("each 4-bit matmul dequantises its weight while it runs: the largest one is counted")
    return value


def _loss_beside_dequantised(plan: Plan, geometry: Shape | None) -> Interval:
    if plan.quant is None or geometry is None or plan.model_code != "litgpt" or plan.mode != "train":
        return ZERO
    logits = plan.batch_size * (plan.seq_len or _TYPICAL_SEQUENCE) * geometry.vocab
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


# ---------------------------------------------------------------------- activations
def _activations(plan: Plan, arch: Architecture, geometry: Shape | None, notes: list[str]):
    act_bytes = _PRECISION[plan.dtype][2]
    if geometry is None:
        return _image_activations(plan, arch, act_bytes, notes), ZERO, ZERO, ZERO, ZERO
    if plan.seq_len is not None:
        lengths = (plan.seq_len,) * 3
    else:
        longest = arch.max_positions
        if longest is None:
            raise CannotEstimate("the sequence length is unknown: give --seq-len")
        # Unknown length: the interval spans short sequences to the model's maximum.
        lengths = (min(_SHORT_SEQUENCE, longest), min(_TYPICAL_SEQUENCE, longest), longest)
        notes.append(
            f"sequence length unknown: {lengths[0]} tokens at the low end, {lengths[1]} for the estimate, "
            f"the model's maximum {lengths[2]} at the high end"
        )
    activations, logits, kv, prompt_kv, prompt_logits = [], [], [], [], []
    for end, seq in enumerate(lengths):
        value = _activations_at(plan, arch, geometry, seq, act_bytes, notes, end)
        activations.append(value[0])
        logits.append(value[1])
        kv.append(value[2])
        prompt_kv.append(value[3])
        prompt_logits.append(value[4])
    measured = plan.dropout is not True and measured_layer_coefficients(arch.base or arch.id, plan.attention) is not None
    spread = _LITGPT_SPREAD if plan.model_code == "litgpt" else _MEASURED_SPREAD if measured else _FORMULA_SPREAD
    if plan.mode != "train":
        spread = (0.5, 1.0, 1.25) if plan.model_code == "litgpt" else _INFERENCE_SPREAD
    per_logit = _logit_bytes(plan)
    logit_low, logit_high = (per_logit[0] / per_logit[1], per_logit[2] / per_logit[1]) if plan.mode == "train" else (1.0, 1.0)
    return (
        Interval(activations[0] * spread[0], activations[1], activations[2] * spread[2]),
        Interval(logits[0] * logit_low, logits[1], logits[2] * logit_high),
        Interval(kv[0], kv[1], kv[2]),
        Interval(prompt_kv[0], prompt_kv[1], prompt_kv[2]),
        Interval(prompt_logits[0], prompt_logits[1], prompt_logits[2]),
    )


def _logit_bytes(plan: Plan) -> tuple[float, float, float]:
    """Bytes per logit a training step's loss keeps (low, estimate, high)."""
    if plan.model_code == "litgpt":  # Fabric's fp32 outputs; finetune_lora chunks the head, finetune_full does not
        return litgpt.CHUNKED_LOGIT_BYTES if plan.lora_rank is not None else litgpt.WHOLE_LOGIT_BYTES
    return _CHUNKED_LOGIT_BYTES if plan.loss == "chunked" else _LOGIT_BYTES


def _activations_at(plan: Plan, arch: Architecture, geometry: Shape, seq: int, act_bytes: int, notes: list[str], end: int):
    """(activations, logits, KV cache, the KV cache while a generation's prompt is read) point estimates for
    one sequence length, at one end of the interval (0 low, 1 estimate, 2 high: where versions of the code
    differ, the end picks the variant)."""
    batch = plan.batch_size
    tokens = batch * seq
    per_layer = _layer_bytes(plan, geometry, seq, batch, act_bytes, notes, end)
    if plan.mode == "train":
        if plan.gradient_checkpointing:
            checkpointed = geometry.layers // max(1, plan.checkpoint_every)
            per_token = selective_coefficient(plan, geometry, seq) if plan.checkpoint_policy != "full" else 2.0
            kept = per_token * tokens * geometry.hidden * checkpointed * (act_bytes / 2)
            if plan.checkpoint_policy == "selective":
                notes.append("selective checkpointing: each layer keeps its input and its matmul and attention outputs")
            elif plan.checkpoint_policy == "alternate":
                notes.append("selective checkpointing (torchtitan's op policy): each layer keeps its input, its attention "
                             "output and every other matmul's output")
            activations = kept + per_layer * (geometry.layers - checkpointed) + per_layer
            if plan.activation_offloading:
                layer_input = 2.0 * tokens * geometry.hidden * (act_bytes / 2)
                activations = _offloaded(per_layer, min(_OFFLOAD_STASH, geometry.layers) * layer_input, notes)
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
        logits = tokens * geometry.vocab * _logit_bytes(plan)[1] if geometry.vocab and plan.head == "lm" else 0.0
        return activations + _head_adapter_kept(plan, geometry, tokens), logits, 0.0, 0.0, 0.0
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
        logits_bytes = batch * geometry.vocab * _SAMPLING_BYTES[end]
        whole = plan.prompt_logits_whole if plan.prompt_logits_whole is not None else end == 2
        if whole:  # transformers before 4.42 computed the whole prompt's logits and upcast them to fp32
            prompt_logits = batch * prompt * geometry.vocab * 6
        if plan.prompt_logits_whole is None and prompt > 1:
            notes.append("transformers 4.42 and later compute the logits of the prompt's last position only (the estimate); "
                         f"earlier versions every position's (the high end); {_settled_by('transformers')}")
    else:
        logits_bytes, prompt_logits = 0.0, batch * prompt * geometry.vocab * 4
    kv = prompt_kv = 0.0
    if plan.mode == "generate":
        context = plan.max_context or seq
        static = plan.kv_cache_len is not None
        if static:  # a static cache is allocated whole, whatever is generated
            context = max(context, plan.kv_cache_len or 0)
            notes.append(f"static KV cache allocated for {plan.kv_cache_len} tokens")
        dtype = 2 if plan.dtype != "fp32" else 4
        per_token = geometry.kv_cache_bytes_per_token_per_byte * dtype * batch
        if plan.tensor_parallel > 1 and arch.kv_lora_rank is None:
            per_token *= _kv_heads_per_gpu(plan, geometry) / geometry.kv_heads
            notes.append(f"tensor parallel: each GPU caches {_kv_heads_per_gpu(plan, geometry)} of {geometry.kv_heads} KV heads"
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
    return live, logits_bytes, kv, prompt_kv, prompt_logits


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


def _gpt_fast_terms(plan: Plan, geometry: Shape | None, notes: list[str]) -> dict[str, Interval]:
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
        if plan.lora_rank is not None:
            notes.append("compiled with adapters: not modelled, eager's accounting (an upper bound)")
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
    if plan.attention == "eager":
        notes.append("eager attention keeps the attention scores (grows with the square of the sequence length)")
    if measured is not None and plan.dropout is not True:
        assert plan.model is not None, "measured for a model of the catalog"
        linear, scores = measured
        coefficient = linear + scores * geometry.heads * seq / geometry.hidden
        notes.append(f"activations per layer measured for {plan.model.base or plan.model.id} (transformers' modules, saved-tensor hooks)")
    else:
        coefficient = formula_layer_coefficient(plan, geometry, seq)
        notes.append("activations per layer from the formula (no measurement for this architecture): less certain")
    if plan.lora_rank is not None and plan.mode == "train":
        coefficient += adapter_layer_adjustment(plan, geometry, _keeps_quantised_inputs(plan, end))
        notes.append("frozen base: its linears keep no inputs, each adapter keeps an fp32 copy of its own")
        if plan.quant is not None:
            notes.append(_quant_inputs_note(plan))
    elif plan.dtype.startswith("amp") and plan.quant is None and plan.mode == "train":
        coefficient += autocast_layer_adjustment(plan, geometry, seq)
        notes.append("autocast: fp32 residual stream and norms, one 16-bit cast per linear, fp32 softmax and pow")
    return seq * batch * geometry.hidden * coefficient * (act_bytes / 2)


# Norm families that multiply by their weight in fp32 (Gemma's `x * (1 + w.float())`): a frozen weight
# spares 4 bytes; the others 2 (the normalised tensor in the activation dtype). LayerNorm's backward
# recomputes from its input and keeps the same tensors either way.
_FP32_NORM_FAMILIES = frozenset({"gemma", "gemma2", "gemma3_text"})


def autocast_layer_adjustment(plan: Plan, geometry: Shape, seq: int) -> float:
    """Bytes per token and hidden unit (2-byte units) a layer keeps under CUDA autocast with fp32 weights,
    beyond what it keeps in pure 16 bits.

    The residual stream stays fp32 (the embeddings are fp32), so each norm keeps a 4-byte tensor where
    pure 16 bits keeps 2 (Gemma's norms compute in fp32 either way); every linear casts its fp32 input
    anew (autocast caches only parameter casts), so q, k and v, and gate and up, each keep their own
    16-bit copy; `pow` is on autocast's fp32 list, so a Python tanh-GELU runs in fp32 (6 more bytes per
    FFN element); softmax is too, so eager attention in the families that take it in 16 bits keeps the
    fp32 probabilities and their 16-bit cast (4 more bytes per score). Checked against an emulation of
    CUDA's autocast policy under FakeTensorMode for seven architectures (calibration/amp_activations.py)."""
    arch = plan.model
    hidden = geometry.hidden
    extra = 0.0
    if arch is not None and arch.family not in _FP32_NORM_FAMILIES:
        extra += 2.0 * arch.norms_per_layer
    dims = geometry.lora_dims
    if "qkv_proj" not in dims:  # three projections of one fp32 input
        extra += 4.0
    if "gate_proj" in dims:
        extra += 2.0
    if arch is not None and arch.family in _PYTHON_GELU_FAMILIES:
        extra += 6.0 * geometry.intermediate / hidden
    if plan.attention == "eager" and arch is not None and arch.family in _HALF_SOFTMAX_FAMILIES:
        extra += 4.0 * geometry.heads * seq / hidden
    return extra


def _quant_inputs_note(plan: Plan) -> str:
    if plan.quant_keeps_inputs is not None:
        kept = "keeps each linear's input (before 0.43.2)" if plan.quant_keeps_inputs else "keeps no linear inputs (0.43.2 and later)"
        return f"4-bit base: bitsandbytes {kept}"
    return ("4-bit base: bitsandbytes 0.43.2 and later keep no linear inputs (the estimate), earlier versions kept "
            f"each one (the high end); {_settled_by('bitsandbytes')}")


# Behaviours that changed in a library's release, as plan settings: (library, the first release with today's
# behaviour, the plan field, its value before that release, its value from it on). Where neither the script nor
# the command line says, the estimate takes today's behaviour and the interval's other end the older one.
VERSIONED_BEHAVIOURS = (
    ("bitsandbytes", "0.43.2", "quant_keeps_inputs", True, False),
    ("transformers", "4.42.0", "prompt_logits_whole", True, False),
    ("torch", "2.8.0", "trainer_fused_adamw", False, True),
)
LIBRARY_VERSION_FLAG = "--library-version"


def _settled_by(library: str) -> str:
    return f"{LIBRARY_VERSION_FLAG} {library}=VERSION settles it"


def _release(text: str) -> tuple[int, ...]:
    """The numeric release of a version string: "0.41.1" -> (0, 41, 1); "2.5.0+cu121", "4.46.0.dev0" alike."""
    parts = []
    for part in text.strip().split("+")[0].split("."):
        digits = "".join(char for char in part if char.isdigit()) if part[:1].isdigit() else ""
        if not digits:
            break
        parts.append(int(digits))
        if not part.isdigit():
            break
    if not parts:
        raise CannotEstimate(f"not a version number: {text!r} (e.g. 0.43.2)")
    return tuple(parts)


def settings_for_versions(versions: dict[str, str], family: str | None = None) -> dict[str, bool]:
    """The plan settings that the given library versions decide (see VERSIONED_BEHAVIOURS; with the model's
    family, transformers' per-layer rotary caches too); a library the estimator does not follow is refused,
    so that a misspelt name is not silently ignored."""
    known = {library for library, *_ in VERSIONED_BEHAVIOURS}
    unknown = sorted(set(versions) - known)
    if unknown:
        raise CannotEstimate(f"no memory behaviour of {', '.join(unknown)} depends on its version here: "
                             f"one of {', '.join(sorted(known))}")
    settings = {}
    for library, changed_in, name, before, after in VERSIONED_BEHAVIOURS:
        if library in versions:
            settings[name] = before if _release(versions[library]) < _release(changed_in) else after
    if "transformers" in versions and family is not None:
        until = _ROTARY_CACHE_UNTIL.get(family)
        settings["rotary_cache"] = until is not None and _release(versions["transformers"]) < _release(until)
    return settings


def adapter_layer_adjustment(plan: Plan, geometry: Shape, keeps_quantised_inputs: bool = False) -> float:
    """Bytes per token and hidden unit (2-byte activations) that a frozen base with LoRA adapters keeps
    in one layer, minus what the same layer keeps when trained in full.

    A frozen linear keeps no input (only its weight's gradient needs it): the attention input, the MLP
    input and the down projection's input go; a frozen RMSNorm weight (the query/key norms too) spares
    the normalised tensor. Each
    adapter keeps its input in its own dtype (peft keeps adapters in fp32: a 4-byte copy per adapter),
    with a 1-byte dropout mask when lora_dropout > 0, and its r-wide inner activation. Checked under
    FakeTensorMode against peft for seven architectures (calibration/adapter_activations.py)."""
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
    mask = 0.5 if plan.lora_dropout is None else (1.0 if plan.lora_dropout > 0 else 0.0)
    kept = 0.0
    for target in plan.lora_targets:
        if target in LM_HEAD_NAMES:
            continue  # not a layer's: _head_adapter_kept
        d_in, _ = geometry.lora_dims.get(target, (hidden, hidden))
        kept += (4.0 + mask) * d_in / hidden + 4.0 * plan.lora_rank / hidden
    return kept - saving


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
    8 bytes per head and pair of positions (16-bit scores, fp32 softmax and its 16-bit cast) or 4 in the
    families that take the softmax in 16 bits. Checked against fake-tensor replays of transformers' prompt
    forward (calibration/inference_peaks.py)."""
    hidden = geometry.hidden
    arch = plan.model
    degree = plan.tensor_parallel  # a GPU computes its share of the heads and of the MLP; hidden-wide tensors are whole
    width = geometry.heads * geometry.head_dim / hidden / degree
    kv_width = (_kv_heads_per_gpu(plan, geometry) if degree > 1 else geometry.kv_heads) * geometry.head_dim / hidden
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
        attention += (4.0 if half_softmax else 8.0) * geometry.heads / degree * seq / hidden
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
    # Dropout adds a 1-byte mask after attention and after the MLP, and keeps the scores' mask and output.
    # Unknown dropout: halfway.
    masks, score_bytes = {True: (2.0, 5.0), False: (0.0, 2.0), None: (1.0, 3.5)}[plan.dropout]
    if arch is not None and arch.family not in _HALF_SOFTMAX_FAMILIES:
        score_bytes += 4.0  # softmax taken in fp32: its fp32 output is kept beside the 2-byte copy
    scores = score_bytes * geometry.heads * seq / hidden if plan.attention == "eager" else 0.0
    return attention + norms + mlp + masks + scores


def _image_activations(plan: Plan, arch: Architecture, act_bytes: int, notes: list[str]) -> Interval:
    per_sample = arch.activation_bytes_per_sample
    if per_sample is None:
        notes.append(f"no activation measurement for {arch.id}: activations not counted (the interval is open-ended)")
        return Interval(0.0, 0.0, math.inf)
    reference = arch.image_size or 224
    size = plan.image_size or reference
    scale = (size / reference) ** 2 * (act_bytes / 2) * plan.batch_size
    if plan.mode != "train":
        return Interval.spread(per_sample * scale * 0.2, _IMAGE_SPREAD)
    factor = 0.3 if plan.gradient_checkpointing else 1.0
    if plan.image_size is None:
        notes.append(f"image size assumed {reference}x{reference}")
    return Interval.spread(per_sample * scale * factor, _IMAGE_SPREAD)


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
