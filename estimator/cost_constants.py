"""The cost model's constants, each with where it comes from: which shardings divide what, bytes per
quantised parameter, bytes per logit at a loss's peak and a generation step's, the cuBLAS workspace,
the intervals around activation estimates, and the sequence lengths assumed where nothing says."""

from __future__ import annotations

# Shardings that divide the parameters across GPUs and gather each unit's while it runs (ZeRO-3 and FSDP's
# FULL_SHARD; FSDP's SHARD_GRAD_OP keeps a unit gathered from its forward to its backward)
SHARDED_PARAMETERS = ("fsdp", "fsdp-grad-op", "zero3")
SHARDED_GRADIENTS = ("zero2", *SHARDED_PARAMETERS)
SHARDED_OPTIMIZER = ("zero1", *SHARDED_GRADIENTS)
# DeepSpeed ZeRO-3's step (deepspeed/runtime/zero/stage3.py, _prepare_fp32_grad_for_sub_group, read at 0.14.2): each
# optimizer sub-group's gradient partition is flattened and copied into the fp32 master weights' dtype, and that copy
# is the master's .grad while the optimizer steps it. A sub-group holds at most sub_group_size elements (its config
# default, runtime/zero/config.py: 1e9).
DEEPSPEED_SUB_GROUP_ELEMENTS = 1e9
# DeepSpeed ZeRO-3's gradient reduction bucket (stage3.py, _setup_for_real_optimizer, 0.14.2): with contiguous_gradients
# (its default) a flat buffer of reduce_bucket_size elements in the 16-bit dtype, allocated when the optimizer is built
# and kept through training. reduce_bucket_size's config default is 5e8; the HF Trainer's "auto" fills hidden^2
# (transformers' integrations/deepspeed.py).
DEEPSPEED_REDUCE_BUCKET_ELEMENTS = 5e8

# Quantized base weights: bytes per quantized parameter (4-bit packed + fp32 absmax per 64-block; double
# quantization stores the absmax in 8 bits with a second-level constant).
QUANT_BYTES = {"nf4": 0.5 + 4 / 64, "nf4-dq": 0.5 + 0.0159, "int8": 1.0 + 4 / 4096}
# Retained activation bytes per (token x hidden) per layer, 2-byte activations, excluding the
# attention-score term; the MLP part is derived from the FFN width (see _layer_coefficient).
ATTENTION_LINEAR = 10.0  # q/k/v input, q and k, v, output-projection input
NORMS = 4.0
# Loss over the vocabulary, bytes per logit at its peak, the start of the backward: cross-entropy's fp32 log-softmax
# output and, in its backward, the incoming gradient and the one it computes (12). A caller that still holds the
# model's outputs then holds the logits too: fp32 (transformers before 4.46 upcast them, accelerate's autocast wrapper
# converts them) 4 more. Replayed under FakeTensorMode with torch's MemTracker for transformers' three loss codes (the
# upcast and shifted copy before 4.46, a remote-code model's 16-bit shift under autocast, today's padded labels):
# 11.96-11.98 with the outputs dropped, 13.96-15.98 with them held (calibration/loss_peaks.py). The HF Trainer keeps
# only the loss (compute_loss returns it alone), so its step is at 12; an unknown loop at 16 (the outputs bound).
LOGIT_BYTES = (12.0, 16.0, 16.0)
TRAINER_LOGIT_BYTES = (12.0, 12.0, 16.0)
# A chunked loss (litgpt's chunked_cross_entropy, fused/Liger-style kernels) keeps the 16-bit logits and
# one fp32 log-softmax per chunk (6 bytes per logit), and its backward works a chunk at a time.
CHUNKED_LOGIT_BYTES = (6.0, 7.0, 8.0)
# Its per-chunk function compiled (torchtune's recipes with compile: True; the class's documentation recommends it):
# AOTAutograd's partitioner keeps the 16-bit chunk and a log-sum-exp per token and recomputes the softmax in the
# backward, 2.00 bytes per logit against eager's 6.00 (calibration/compiled_loss_activations.py); one chunk's
# backward as above; eager's at the high end, where the loss is not compiled.
COMPILED_CHUNKED_LOGIT_BYTES = (2.0, 3.0, 8.0)
# A chunked loss that applies the output projection to each chunk itself (torchtune's LinearCrossEntropyLoss), eager:
# no logits outside it, each chunk's 16-bit logits freed once upcast, its fp32 log-softmax kept, 4.00 bytes per logit
# (the same replay); one chunk's backward as above; the other chunked loss's 8 at the high end.
PROJECTED_CHUNKED_LOGIT_BYTES = (4.0, 5.0, 8.0)
# TRL's chunked loss (the SFTTrainer's loss_type="chunked_nll", trl/trainer/sft_trainer.py from 1.4.0, its default from
# 1.7.0): the final hidden states of the labelled positions are gathered into one copy kept for the backward, and this
# many at a time (_CHUNKED_LM_HEAD_CHUNK_SIZE) go through the head and the cross-entropy in fp32 under activation
# checkpointing, so no logits outlive their chunk (activation_terms.checkpointed_chunks_bytes).
TRL_CHUNK_TOKENS = 256
# Generation with transformers (generate's _sample and its logits processors), bytes per vocabulary entry and
# sequence at a step: greedy keeps the next-token logits in fp32 and their scores (8); sampling with top-k and
# top-p adds the processors' copies, top-p's sorted values and int64 indices, softmax, cumulative sum, masks
# and the probabilities (38). The prompt's own logits: since transformers 4.45 only the last position's.
SAMPLING_BYTES = (8.0, 38.0, 38.0)
# torch's default cuBLAS workspace of one handle and stream on an A100 (hardware.Gpu.blas_workspace_bytes
# gives each device's): CUBLAS_WORKSPACE_CONFIG unset, ":4096:2:16:8".
DEFAULT_BLAS_WORKSPACE_BYTES = 4096 * 1024 * 2 + 16 * 1024 * 8
# Interval around activation estimates. Measured coefficients (transformers' modules on the CPU) still
# leave the GPU kernels' choices open; the formula is within 15 % of 21 of 22 measured architectures
# and 28 % off the worst (an MoE). CNN figures are per-sample measurements at one resolution.
IMAGE_SPREAD = (0.8, 1.0, 1.25)
MEASURED_SPREAD = (0.9, 1.0, 1.15)
FORMULA_SPREAD = (0.8, 1.0, 1.4)
# The working memory of a forward without a backward (inference, a generation's prompt): the accounting of
# inference_layer_coefficient equals a fake-tensor replay of transformers' generate path within 5 % for 13
# models (calibration/inference_peaks.py); GPU kernels' workspaces (flash attention's) are left to the high end.
INFERENCE_SPREAD = (0.9, 1.0, 1.15)
# LitGPT's layers: the formula equals what its modules keep under FakeTensorMode to within 0.2 % for six
# models (calibration/litgpt_activations.py); the caching allocator's block rounding adds up to 0.5 %
# (calibration/allocator_replay.py over whole LitGPT runs). Its versions' differences are the interval's
# ends instead (see litgpt.layer_coefficient's fp32_norm, the cached heads, bitsandbytes' kept inputs).
LITGPT_SPREAD = (0.99, 1.0, 1.02)
# Sequence lengths used when the script does not say: low end, estimate (the high end is the model's maximum).
SHORT_SEQUENCE = 256
TYPICAL_SEQUENCE = 2048
