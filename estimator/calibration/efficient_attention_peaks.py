"""Whole training iterations of BERT-large with SDPA as a V100 runs it, replayed through the caching allocator's rules.

On compute capability 7.0 torch's SDPA has no flash kernel (sm80 and newer), and the memory-efficient (cutlass) kernel
takes fp32 and fp16 inputs, an additive mask and, since torch 2.1, dropout (torch's sdp_utils.cpp,
``use_mem_efficient_attention``); transformers gives BERT SDPA from 4.41 only with torch 2.1.1 or later. A CPU run
cannot take that kernel (the CPU flash kernel refuses dropout, so the math path runs and materialises the scores), so
this replay stands the kernel in for ``F.scaled_dot_product_attention``: its forward allocates what
``_scaled_dot_product_efficient_attention`` returns and its backward keeps (torch's derivatives.yaml): the output, the
log-sum-exp in fp32 over the queries padded to 32, two philox scalars for the fused dropout; q, k and v are the
autograd graph's own. Its backward allocates the three input gradients and the fp32 ``delta`` per query (no score
matrix anywhere: the kernel tiles it in registers and shared memory).

The rest is ``zero_grad_peaks.py``'s run: BERT-large for sequence classification (config written out, random weights,
nothing downloaded), the config's dropout on, AdamW (foreach), three iterations of forward, backward, step and
``model.zero_grad()`` at 512 tokens, outputs dropped before the backward (the HF Trainer's step); fp32 at batch 1 and
4, and the Trainer's ``fp16=True`` (CUDA's autocast emulated) at batch 4, for classification and, at batch 4, the
masked-LM head (every position's logits); and batch 1 with four micro-batches accumulated (the Trainer's
``gradient_accumulation_steps``: the loss divided, the gradients alive through each later forward) under SDPA and
under eager attention. ``tests/test_estimator_replays.py`` compares the estimator's allocated point for a V100
(compute capability 7.0) with each.

Runs in the calibration venv (torch, transformers), never the product's:

    python efficient_attention_peaks.py efficient_attention_peaks.json
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
from pathlib import Path

import activations
import torch
import transformers
from allocator_replay import Recorder, replay
from amp_activations import CudaAutocast
from torch._subclasses.fake_tensor import FakeTensorMode
from transformers.initialization import no_init_weights
from zero_grad_peaks import FIELDS, ITERATIONS, MODEL, SEQ

LSE_ALIGNMENT = 32  # cutlass's kAlignLSE: the log-sum-exp is allocated for the queries rounded up to it


class _EfficientAttention(torch.autograd.Function):
    """The memory-efficient kernel's allocations: what its forward returns and keeps, what its backward returns."""

    @staticmethod
    def forward(ctx, query, key, value, bias):
        batch, heads, queries, _ = query.shape
        # The kernel writes [batch, queries, heads, head_dim] and returns its transpose: transformers' transpose back
        # and .contiguous() copy nothing.
        output = query.new_empty((batch, queries, heads, value.shape[-1])).transpose(1, 2)
        log_sumexp = query.new_empty((batch, heads, math.ceil(queries / LSE_ALIGNMENT) * LSE_ALIGNMENT),
                                     dtype=torch.float32)
        philox_seed, philox_offset = (torch.empty((), dtype=torch.int64) for _ in range(2))
        ctx.save_for_backward(query, key, value, output, log_sumexp, philox_seed, philox_offset)
        ctx.bias = bias
        return output

    @staticmethod
    def backward(ctx, grad_output):
        query, key, value, output, _, _, _ = ctx.saved_tensors
        delta = query.new_empty(query.shape[:-1], dtype=torch.float32)  # rowsum(grad_output * output), per query
        grads = torch.empty_like(query), torch.empty_like(key), torch.empty_like(value)
        del delta
        return (*grads, None)


def _efficient_sdpa(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False):
    return _EfficientAttention.apply(query, key, value, attn_mask)


@contextlib.contextmanager
def _v100_sdpa():
    original = torch.nn.functional.scaled_dot_product_attention
    torch.nn.functional.scaled_dot_product_attention = _efficient_sdpa
    try:
        yield
    finally:
        torch.nn.functional.scaled_dot_product_attention = original


def run(batch: int, autocast: bool = False, head: str = "classifier", accumulation: int = 1,
        attention: str = "sdpa") -> dict:
    config = transformers.AutoConfig.for_model("bert", **FIELDS)
    recorder = Recorder()
    with (FakeTensorMode(allow_non_fake_inputs=False), activations._gpu_like_dropout(), activations._not_tracing(),
          _v100_sdpa(), recorder):
        with no_init_weights():
            auto = transformers.AutoModelForMaskedLM if head == "lm" else transformers.AutoModelForSequenceClassification
            model = auto.from_config(config, attn_implementation=attention, dtype=torch.float32)
        model.train()
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5, foreach=True)  # its default on a GPU
        for _ in range(ITERATIONS):
            for _ in range(accumulation):  # the Trainer's micro-batches: the gradients accumulate between them
                ids = torch.randint(0, config.vocab_size, (batch, SEQ))
                labels = (torch.randint(0, config.vocab_size, (batch, SEQ)) if head == "lm"  # every position's logits
                          else torch.randint(0, config.num_labels, (batch,)))
                with CudaAutocast() if autocast else contextlib.nullcontext():
                    loss = model(input_ids=ids, labels=labels).loss / accumulation
                loss.backward()
            optimizer.step()
            model.zero_grad()
            del loss
    peaks = replay(recorder.events)
    return {"model": MODEL, "head": head, "attention": attention, "batch": batch, "accumulation": accumulation, "seq": SEQ,
            "autocast": "fp16" if autocast else None,
            "live": peaks.live, "allocated": peaks.allocated, "reserved": peaks.reserved}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", type=Path)
    args = parser.parse_args()
    rows = []
    for batch, autocast, head in ((1, False, "classifier"), (4, False, "classifier"), (4, True, "classifier"),
                                  (4, False, "lm"), (4, True, "lm")):
        rows.append(run(batch, autocast, head))
        print(rows[-1], flush=True)
    for attention in ("sdpa", "eager"):  # batch 1 with accumulation: the gradients alive through each forward
        rows.append(run(1, accumulation=4, attention=attention))
        print(rows[-1], flush=True)
    meta = {"torch": torch.__version__, "transformers": transformers.__version__, "dtype": "fp32",
            "gpu": "V100", "optimizer": "adamw", "iterations": ITERATIONS,
            "measured_with": "FakeTensorMode, GPU-like dropout masks, the memory-efficient kernel's allocations, "
                             "allocator_replay.py"}
    args.out.write_text(json.dumps({**meta, "rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
