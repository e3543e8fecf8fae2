"""What a transformer layer with LoRA adapters on a frozen base keeps for its backward under torch.compile, against
eager: measured on the CPU, as ``compiled_activations.py`` measures a layer trained in full.

The method is that script's: each catalog model is built with its own proportions at a smaller scale (head width
16, a 1,000-token vocabulary), in bf16 with real CPU tensors, dropout off; peft wraps the named linears with rank-8
adapters (``lora_dropout=0``, as torchtune's recipes default), either in fp32 (peft's default,
``autocast_adapter_dtype=True``) or cast to the model's dtype afterwards (torchtune's ``LoRALinear`` in a bf16 recipe,
which builds its adapters in the model's dtype). One forward runs under ``saved_tensors_hooks``, eagerly and through
AOTAutograd's default partitioner (``aot_eager_decomp_partition``: Inductor's decompositions and partitioner, graphs
run eagerly, no C compiler needed); parameters are excluded; a layer's share is the difference between 4 and 2
layers, halved, per token and hidden unit.

Runs in the calibration venv (torch, transformers, peft):

    python compiled_lora_activations.py compiled_lora_activations.json
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
from activations import _set_dropout  # noqa: E402
from compiled_activations import BATCH, SEQ, _scaled, bytes_saved_for_backward  # noqa: E402
from param_counts import DEFAULT_CATALOG, _decoder_config  # noqa: E402

ARCHITECTURES = ("llama-3.2-1b", "qwen2.5-0.5b", "qwen3-0.6b")
TARGETS = (("q_proj", "v_proj"), ("q_proj", "k_proj", "v_proj", "o_proj"),
           ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"))
RANK = 8


def _saved_bytes(a: dict, layers: int, targets: tuple[str, ...], model_dtype_adapters: bool, compiled: bool) -> int:
    torch.manual_seed(0)
    config = _decoder_config(_scaled(a, layers))
    if a.get("head_dim"):
        config.head_dim = 16
    _set_dropout(config, 0.0)
    model = transformers.AutoModelForCausalLM.from_config(config, attn_implementation="sdpa", dtype=torch.bfloat16)
    model = peft.get_peft_model(model, peft.LoraConfig(r=RANK, lora_alpha=16, lora_dropout=0.0, target_modules=list(targets)))
    if model_dtype_adapters:
        model.to(torch.bfloat16)
    body = model.base_model.model.model  # the layers without the LM head and loss
    return bytes_saved_for_backward(body, compiled)


def measure(a: dict, targets: tuple[str, ...], model_dtype_adapters: bool) -> dict:
    hidden = _scaled(a, 1)["hidden"]
    unit = BATCH * SEQ * hidden
    row = {"model": a["id"], "scaled_hidden": hidden, "rank": RANK, "targets": list(targets),
           "adapters": "model dtype" if model_dtype_adapters else "fp32"}
    for name, compiled in (("eager", False), ("compiled", True)):
        two, four = (_saved_bytes(a, n, targets, model_dtype_adapters, compiled) for n in (2, 4))
        row[name] = round((four - two) / 2 / unit, 3)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", type=Path)
    args = parser.parse_args()
    catalog = {a["id"]: a for a in json.loads(DEFAULT_CATALOG.read_text())}
    rows = []
    for arch_id in ARCHITECTURES:
        for targets in TARGETS:
            for model_dtype_adapters in (True, False):
                row = measure(catalog[arch_id], targets, model_dtype_adapters)
                rows.append(row)
                print(json.dumps(row), flush=True)
    args.out.write_text(json.dumps({
        "about": "bytes per token and hidden unit one decoder layer with LoRA adapters on a frozen base saves for its "
                 "backward (bf16 base, SDPA, no dropout), eager and under AOTAutograd's default partitioner "
                 "(torch.compile, backend aot_eager_decomp_partition)",
        "torch": torch.__version__, "transformers": transformers.__version__, "peft": peft.__version__,
        "batch": BATCH, "seq": SEQ, "rows": rows,
    }, indent=1) + "\n")


if __name__ == "__main__":
    main()
