"""Measures what a transformer layer keeps for the backward when its weights are frozen, with and
without LoRA adapters (peft), against the same layer trained in full.

Same method as ``activations.py`` (FakeTensorMode, saved-tensor hooks, unique storages, the second
of three layers), with the model's parameters frozen and ``peft.get_peft_model`` applied for each
target set. A frozen linear does not keep its input (only its weight's gradient needs it), nor does
a frozen norm weight keep the normalised tensor; an adapter keeps its own input (a dropout copy and
mask when ``lora_dropout`` > 0). ``layer_activations.adapter_layer_adjustment`` derives that accounting
from the config; this script checks it. Runs in the calibration venv (torch, transformers, peft):

    python adapter_activations.py OUT.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import peft
import torch
import transformers

sys.path.insert(0, str(Path(__file__).resolve().parent))
import activations  # noqa: E402
from fake_peft import lora_model  # noqa: E402
from param_counts import DEFAULT_CATALOG  # noqa: E402

ARCHITECTURES = ("llama-3.2-1b", "llama-3-8b", "mistral-7b-v0.1", "qwen2.5-0.5b", "qwen3-0.6b", "tinyllama-1.1b", "gemma-2b")
TARGETS = {
    "q,v": ["q_proj", "v_proj"],
    "all-linear": ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"],
}
SHAPES = ((1, 256), (2, 512))
RANK = 16



def _adapters(targets: list[str] | None, dropout: float):
    def transform(model: torch.nn.Module) -> torch.nn.Module:
        for parameter in model.parameters():
            parameter.requires_grad_(False)
        # The measured layer's input carries a gradient (in a LoRA model, from the adapters below it).
        model.enable_input_require_grads()
        if targets is None:
            return model
        # the adapters keep peft's default dtype, fp32
        return lora_model(model, peft.LoraConfig(r=RANK, lora_alpha=2 * RANK, target_modules=targets, lora_dropout=dropout))
    return transform


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", type=Path)
    args = parser.parse_args()
    catalog = {a["id"]: a for a in json.loads(DEFAULT_CATALOG.read_text())}
    results: dict[str, dict] = {}
    for arch_id in ARCHITECTURES:
        a = catalog[arch_id]
        cases = {"full": None, "frozen": (None, 0.0)}
        for name, targets in TARGETS.items():
            cases[f"lora {name}"] = (targets, 0.0)
            cases[f"lora {name} dropout"] = (targets, 0.05)
        entry = {}
        for case, spec in cases.items():
            transform = None if spec is None else _adapters(*spec)
            rows = [activations.measure(a, "sdpa", batch, seq, 0.0, transform=transform) for batch, seq in SHAPES]
            per_token = [activations._per_token(row, a["hidden"]) for row in rows]
            entry[case] = round(sum(per_token) / len(per_token), 3)
        results[arch_id] = entry
        print(arch_id, entry, flush=True)
    meta = {"torch": torch.__version__, "transformers": transformers.__version__, "peft": peft.__version__,
            "rank": RANK, "attention": "sdpa", "shapes": SHAPES, "unit": "bytes per token and hidden unit, one layer"}
    args.out.write_text(json.dumps({**meta, "layers": results}, indent=1) + "\n")


if __name__ == "__main__":
    main()
