"""A LoRA training iteration of Phi-1.5 as a script that names no target modules runs it, replayed through the caching
allocator's rules (``lora_peaks.run``: fake tensors, GPU-like dropout masks, ``allocator_replay.py``).

``LoraConfig`` without ``target_modules`` takes peft's default for the model type
(``TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING`` in peft's ``utils/constants.py``): for Phi, the MLP's ``fc1`` and
``fc2`` beside ``q_proj`` and ``v_proj``. Phi-1.5's config is written out below (random weights, nothing downloaded); the
base in bf16, frozen, rank 16, dropout 0.05, the Trainer's ``bf16=True`` autocast (CUDA's policy as
``amp_activations.py`` emulates it), SDPA, 512 tokens, batch 1, 4 and 8, the outputs dropped before the backward (the HF
Trainer's step). Phi-1.5 has no measured layer in the calibration, so the estimator counts its layer by the formula;
``tests/test_estimator_replays.py`` compares the point with each replay.

Runs in the calibration venv (torch, transformers, peft), never the product's:

    python lora_default_peaks.py lora_default_peaks.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import lora_peaks
import peft
import torch
import transformers
from peft.utils.constants import TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING

lora_peaks.MODELS["phi-1.5"] = ("phi", dict(
    hidden_size=2048, intermediate_size=8192, num_hidden_layers=24, num_attention_heads=32, num_key_value_heads=32,
    vocab_size=51200, max_position_embeddings=2048, partial_rotary_factor=0.5, resid_pdrop=0.0, embd_pdrop=0.0,
    attention_dropout=0.0, hidden_act="gelu_new", tie_word_embeddings=False,
))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", type=Path)
    args = parser.parse_args()
    rows = []
    for batch in (1, 4, 8):
        rows.append(lora_peaks.run("phi-1.5", batch, False, autocast=True, targets=None))
        print(rows[-1], flush=True)
    meta = {"torch": torch.__version__, "transformers": transformers.__version__, "peft": peft.__version__,
            "lora_rank": lora_peaks.RANK, "lora_targets": TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING["phi"],
            "lora_dropout": lora_peaks.DROPOUT, "attention": "sdpa",
            "measured_with": "FakeTensorMode, GPU-like dropout masks, allocator_replay.py"}
    args.out.write_text(json.dumps({**meta, "rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
