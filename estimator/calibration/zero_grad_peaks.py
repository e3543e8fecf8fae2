"""Whole training iterations of BERT-large, zero_grad freeing the gradients or zeroing them in place, replayed through the
caching allocator's rules.

torch 2.0 made ``set_to_none=True`` the default of ``Optimizer.zero_grad`` and ``Module.zero_grad``; before, both
zeroed the gradients in place, so every gradient stayed allocated through each later forward and backward. This
replays both on BERT-large for sequence classification (the HF Trainer's classic example; config written out below,
random weights, nothing downloaded): fp32, eager attention, the config's dropout on, AdamW (foreach, its default on a
GPU), three iterations of forward, backward, step and ``model.zero_grad`` at 512 tokens and batch 1 and 4, the outputs
dropped before the backward (the Trainer's step); and at batch 4 the Trainer's ``fp16=True``: the forward and loss under
autocast (CUDA's policy as ``amp_activations.py`` emulates it) over the fp32 weights. Each run is recorded under FakeTensorMode with GPU-like dropout masks
(``activations.py``) and replayed through ``allocator_replay.py``: the peaks of live bytes, allocated blocks and
reserved segments. ``tests/test_estimator_replays.py`` compares the estimator's allocated point with each.

Runs in the calibration venv (torch, transformers), never the product's:

    python zero_grad_peaks.py zero_grad_peaks.json
"""

from __future__ import annotations

import argparse
import contextlib
import json
from pathlib import Path

import activations
import torch
import transformers
from allocator_replay import Recorder, replay
from amp_activations import CudaAutocast
from torch._subclasses.fake_tensor import FakeTensorMode
from transformers.initialization import no_init_weights

MODEL = "bert-large-uncased"
FIELDS = dict(hidden_size=1024, intermediate_size=4096, num_hidden_layers=24, num_attention_heads=16, vocab_size=30522,
              max_position_embeddings=512, type_vocab_size=2, num_labels=2)
SEQ, ITERATIONS = 512, 3


def run(batch: int, set_to_none: bool, autocast: bool = False) -> dict:
    config = transformers.AutoConfig.for_model("bert", **FIELDS)
    recorder = Recorder()
    with FakeTensorMode(allow_non_fake_inputs=False), activations._gpu_like_dropout(), activations._not_tracing(), recorder:
        with no_init_weights():
            model = transformers.AutoModelForSequenceClassification.from_config(config, attn_implementation="eager",
                                                                                 dtype=torch.float32)
        model.train()
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5, foreach=True)  # its default on a GPU
        for _ in range(ITERATIONS):
            ids = torch.randint(0, config.vocab_size, (batch, SEQ))
            labels = torch.randint(0, config.num_labels, (batch,))
            with CudaAutocast() if autocast else contextlib.nullcontext():
                loss = model(input_ids=ids, labels=labels).loss
            loss.backward()
            optimizer.step()
            model.zero_grad(set_to_none=set_to_none)
            del loss
    peaks = replay(recorder.events)
    return {"model": MODEL, "batch": batch, "seq": SEQ, "set_to_none": set_to_none, "autocast": "fp16" if autocast else None,
            "live": peaks.live, "allocated": peaks.allocated, "reserved": peaks.reserved}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", type=Path)
    args = parser.parse_args()
    rows = []
    for batch, autocast in ((1, False), (4, False), (4, True)):
        for set_to_none in (True, False):
            rows.append(run(batch, set_to_none, autocast))
            print(rows[-1], flush=True)
    meta = {"torch": torch.__version__, "transformers": transformers.__version__, "dtype": "fp32", "attention": "eager",
            "head": "classifier", "optimizer": "adamw", "iterations": ITERATIONS,
            "measured_with": "FakeTensorMode, GPU-like dropout masks, allocator_replay.py"}
    args.out.write_text(json.dumps({**meta, "rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
