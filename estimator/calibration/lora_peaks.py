"""Whole LoRA training iterations of small models, replayed through the caching allocator's rules.

For TinyLlama 1.1B and Phi-2 (configs written out below, random weights, nothing downloaded): the base in bf16,
frozen, peft LoRA adapters (rank 16 on q_proj and v_proj, dropout 0.05) in peft's default dtype, AdamW on the
adapters, transformers' SDPA, two iterations of forward, backward, step and ``zero_grad`` at 512 tokens and batch 1,
4 and 8, with the model's outputs dropped before the backward (the HF Trainer's step) or held through it (a loop that
keeps them bound); the same step with gradient checkpointing as transformers enables it (batch 1 and 4; TRL's SFTConfig
turns it on by default from 0.22, peft's prepare_model_for_kbit_training too); and the Trainer's step with ``bf16=True`` over the same bf16 base, its forward and loss under
autocast (CUDA's policy as ``amp_activations.py`` emulates it: LayerNorm, ``pow`` and softmax in fp32, linears and
attention in bf16, parameter casts cached only for trainable leaves), and the same step over an fp32 base (what
``from_pretrained`` without a dtype loaded before transformers 5). Each run is recorded under FakeTensorMode with
GPU-like dropout masks (``activations.py``) and replayed through ``allocator_replay.py``: the peaks of live bytes,
allocated blocks and reserved segments. ``tests/test_estimator_replays.py`` compares the estimator's allocated point
with each.

Runs in the calibration venv (torch, transformers, peft), never the product's:

    python lora_peaks.py lora_peaks.json
"""

from __future__ import annotations

import argparse
import contextlib
import json
from pathlib import Path

import activations
import peft
import torch
import transformers
from allocator_replay import Recorder, replay
from amp_activations import CudaAutocast
from fake_peft import lora_model
from torch._subclasses.fake_tensor import FakeTensorMode
from transformers.initialization import no_init_weights

MODELS = {
    "tinyllama-1.1b": ("llama", dict(hidden_size=2048, intermediate_size=5632, num_hidden_layers=22, num_attention_heads=32,
                                      num_key_value_heads=4, vocab_size=32000, max_position_embeddings=2048, rms_norm_eps=1e-5)),
    "phi-2": ("phi", dict(hidden_size=2560, intermediate_size=10240, num_hidden_layers=32, num_attention_heads=32,
                          num_key_value_heads=32, vocab_size=51200, max_position_embeddings=2048, partial_rotary_factor=0.4,
                          resid_pdrop=0.1, embd_pdrop=0.0, attention_dropout=0.0, hidden_act="gelu_new",
                          tie_word_embeddings=False)),
}
RANK, TARGETS, DROPOUT, SEQ = 16, ["q_proj", "v_proj"], 0.05, 512


def run(name: str, batch: int, outputs_held: bool, autocast: bool = False, base: torch.dtype = torch.bfloat16,
        checkpointed: bool = False, targets: list[str] | None = TARGETS) -> dict:
    """One configuration's peaks; ``targets`` None leaves LoraConfig's target_modules to peft's default for the model type."""
    kind, fields = MODELS[name]
    config = transformers.AutoConfig.for_model(kind, **fields)
    recorder = Recorder()
    with FakeTensorMode(allow_non_fake_inputs=False), activations._gpu_like_dropout(), activations._not_tracing(), recorder:
        with no_init_weights():
            model = transformers.AutoModelForCausalLM.from_config(config, attn_implementation="sdpa", dtype=base)
        if checkpointed:  # as TRL's SFTConfig (0.22 on) and prepare_model_for_kbit_training turn it on
            for parameter in model.parameters():
                parameter.requires_grad = False
            model.gradient_checkpointing_enable()
            model.enable_input_require_grads()
        model = lora_model(model, peft.LoraConfig(r=RANK, lora_alpha=2 * RANK, lora_dropout=DROPOUT, target_modules=targets))
        model.train()
        optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-4)
        held = None
        for _ in range(2):
            ids = torch.randint(0, config.vocab_size, (batch, SEQ))
            with CudaAutocast() if autocast else contextlib.nullcontext():
                outputs = model(input_ids=ids, labels=ids, use_cache=False)
            loss = outputs.loss
            held = outputs if outputs_held else None  # noqa: F841 (what a loop keeps bound through the backward)
            del outputs
            loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
    peaks = replay(recorder.events)
    return {"model": name, "batch": batch, "seq": SEQ, "outputs_held": outputs_held, "autocast": "bf16" if autocast else None,
            "base": str(base).removeprefix("torch."), "checkpointed": checkpointed, "live": peaks.live, "allocated": peaks.allocated, "reserved": peaks.reserved}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", type=Path)
    args = parser.parse_args()
    rows = []
    for name in MODELS:
        for batch in (1, 4, 8):
            for held, autocast, base in ((False, False, torch.bfloat16), (True, False, torch.bfloat16),
                                         (False, True, torch.bfloat16), (False, True, torch.float32)):
                rows.append(run(name, batch, held, autocast, base))
                print(rows[-1], flush=True)
    for name in MODELS:  # checkpointed (without autocast: the recomputation runs outside the emulated CUDA policy)
        for batch in (1, 4):
            rows.append(run(name, batch, False, checkpointed=True))
            print(rows[-1], flush=True)
    meta = {"torch": torch.__version__, "transformers": transformers.__version__, "peft": peft.__version__, "dtype": "bf16",
            "lora_rank": RANK, "lora_targets": TARGETS, "lora_dropout": DROPOUT, "attention": "sdpa",
            "measured_with": "FakeTensorMode, GPU-like dropout masks, allocator_replay.py"}
    args.out.write_text(json.dumps({**meta, "rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
