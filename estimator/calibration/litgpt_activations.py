"""What LitGPT's own model code keeps for the backward, per layer, with its LoRA adapters.

LitGPT does not run transformers' modules: one fused qkv linear, a fused ``F.gelu`` (tanh) MLP or a
SwiGLU one, its own RMSNorm (in the 2023 code, computed in the activation dtype; in today's, in
fp32), its own rotary embedding, LoRA adapters in the model's dtype (``bf16-true`` trains the
adapters in bf16), and a loss over chunks of 128 tokens. Its coefficients are therefore measured on
its own modules, with the method of ``activations.py`` (FakeTensorMode with CPU fake tensors,
saved-tensor hooks, unique storages, the second of three layers, dropout routed to the 1-byte mask a
GPU keeps).

Cases, per model: the base frozen with LoRA on the query and value (``finetune_lora``'s default, r 8,
dropout 0.05), the whole model trained (``finetune_full``), and the LoRA case over a 4-bit base whose
linears keep their inputs (bitsandbytes before 0.43.2, emulated as in ``litgpt_peaks.py``); each at
several batch sizes and sequence lengths; the coefficient is the mean bytes per token and hidden
unit, with its spread. ``tests/test_litgpt.py`` checks ``litgpt.layer_coefficient`` against it.

The LitGPT source is not a dependency of anything: point ``--source`` at a directory holding
``lit_gpt/`` (the October 2023 code, commit 8641822, which the published resource tables ran) or
``litgpt/`` (today's), e.g. ``git archive 8641822 lit_gpt | tar -x -C DIR`` in a LitGPT clone.
Runs in the calibration venv (torch, lightning):

    python litgpt_activations.py --source DIR OUT.json
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
import types
from pathlib import Path

import torch
from torch._subclasses.fake_tensor import FakeTensorMode

sys.path.insert(0, str(Path(__file__).resolve().parent))
import fake_linear4bit  # noqa: E402
from activations import SavedByRegion, _gpu_like_dropout  # noqa: E402

LAYERS = 3
FIT_LAYER = 1
SHAPES = ((1, 256), (1, 1044), (2, 512), (4, 256))
# LitGPT config names (its own catalog) and the estimator's catalog id they stand for.
MODELS = {
    "phi-1_5": "phi-1.5",
    "stablelm-base-alpha-3b": "stablelm-base-alpha-3b",
    "Llama-2-7b-hf": "llama-2-7b",
    "falcon-7b": "falcon-7b",
    "tiny-llama-1.1b": "tinyllama-1.1b",
    "Llama-3-8B": "llama-3-8b",
}


def _import_litgpt(source: Path):
    """(package name, config module, lora module, utils module) of the LitGPT code under ``source``."""
    sys.path.insert(0, str(source))
    if (source / "lit_gpt").is_dir():
        name = "lit_gpt"
    else:
        # today's package __init__ imports its API layer (tokenizers, the LLM class); the model code
        # needs none of it, so the package is stood up without running __init__
        name = "litgpt"
        package = types.ModuleType(name)
        package.__path__ = [str(source / name)]
        sys.modules[name] = package
    importlib.import_module(f"{name}.model")  # before its config, as the package's __init__ does (they import each other)
    config = importlib.import_module(f"{name}.config")
    lora = importlib.import_module(f"{name}.lora")
    utils = importlib.import_module(f"{name}.utils")
    return name, config, lora, utils


def _lora_fields(lora, rank: int) -> dict:
    """LoRA on the query and value (``finetune_lora``'s default), alpha 16, dropout 0.05, in the 2023
    field names (``r``, ``to_query``) or today's (``lora_r``, ``lora_query``)."""
    if hasattr(lora.Config, "to_query"):
        return dict(r=rank, alpha=16, dropout=0.05, to_query=True, to_value=True)
    return dict(lora_r=rank, lora_alpha=16, lora_dropout=0.05, lora_query=True, lora_value=True)


def measure(modules, model_name: str, batch: int, seq: int, adapters: bool, quantise: bool = False) -> dict:
    """``quantise``: every frozen linear replaced by the emulation of bitsandbytes' 4-bit linear before
    0.43.2, which keeps its input for the backward (litgpt_peaks.py)."""
    _, _, lora, utils = modules
    config = lora.Config.from_name(model_name, n_layer=LAYERS, **(_lora_fields(lora, 8) if adapters else {}))
    default_dtype = torch.get_default_dtype()
    with FakeTensorMode(allow_non_fake_inputs=False), _gpu_like_dropout():
        torch.set_default_dtype(torch.bfloat16)  # what Fabric's bf16-true init_module does
        try:
            model = lora.GPT(config)
            model.max_seq_length = seq
        finally:
            torch.set_default_dtype(default_dtype)
        if adapters:
            lora.mark_only_lora_as_trainable(model)
        if quantise:
            fake_linear4bit.quantise(model)
        model.train()
        saved = SavedByRegion(model, model.transformer.h)
        ids = torch.randint(0, config.padded_vocab_size, (batch, seq))
        with saved:
            logits = model(ids, lm_head_chunk_size=128)  # what the fine-tuning scripts call
            loss = utils.chunked_cross_entropy(logits, ids)
        assert loss.requires_grad
    regions = saved.regions()
    tokens = batch * seq
    return {
        "batch": batch, "seq": seq, "adapters": adapters,
        "layer_bytes_per_token_hidden": round(regions.get(f"layer{FIT_LAYER}", 0) / (tokens * config.n_embd), 4),
        "head_bytes_per_logit": round(regions.get("head", 0) / (tokens * config.padded_vocab_size), 4),
    }


def arguments(doc: str):
    """(output path, LitGPT modules) from the command line of a script that measures LitGPT's code."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", type=Path)
    parser.add_argument("--source", type=Path, required=True, help="a directory holding lit_gpt/ or litgpt/")
    args = parser.parse_args()
    return args.out, _import_litgpt(args.source.resolve())


def main() -> None:
    out, modules = arguments(__doc__)
    results: dict[str, dict] = {}
    for litgpt_name, arch_id in MODELS.items():
        try:
            modules[2].Config.from_name(litgpt_name)
        except (KeyError, ValueError):  # not in this version's catalog
            continue
        entry = {"litgpt_name": litgpt_name}
        for case, adapters, quantise in (("lora", True, False), ("full", False, False), ("qlora-keeping-inputs", True, True)):
            rows = [measure(modules, litgpt_name, batch, seq, adapters, quantise) for batch, seq in SHAPES]
            per_token = [row["layer_bytes_per_token_hidden"] for row in rows]
            per_logit = [row["head_bytes_per_logit"] for row in rows]
            entry[case] = {
                "layer": round(sum(per_token) / len(per_token), 3),
                "layer_spread": [min(per_token), max(per_token)],
                "head_per_logit": [min(per_logit), max(per_logit)],
            }
        results[arch_id] = entry
        print(arch_id, entry, flush=True)
    out.write_text(json.dumps({
        "about": "bytes per token and hidden unit one LitGPT layer keeps (bf16, SDPA), base frozen with LoRA "
                 "on query and value (r 8, dropout 0.05), trained in full, and LoRA over a 4-bit base keeping "
                 "its linears' inputs; the loss region per logit",
        "litgpt_package": modules[0], "torch": torch.__version__, "shapes": SHAPES, "models": results,
    }, indent=1) + "\n")


if __name__ == "__main__":
    main()
