"""What a transformer layer keeps for its backward under torch.compile, against eager: measured on the CPU.

torch.compile's training graphs go through AOTAutograd, whose default partitioner
(``min_cut_rematerialization_partition``, the one Inductor uses) chooses which forward values the backward
keeps: it may recompute cheap pointwise work (norms, activation functions, casts) from a smaller set of
saved tensors instead of keeping every intermediate as eager autograd does. The ``aot_eager_decomp_partition``
backend runs that same partitioner, with Inductor's decompositions, and executes the graphs eagerly, so it
needs no GPU and no C compiler.

Method: each catalog model is built with its own structure and proportions (heads, key/value heads, the
ratios of head width and FFN width to the hidden size) at a smaller scale (head width 16, a 1,000-token
vocabulary), in bf16 with real CPU tensors, in training mode with dropout off. One forward runs under
``torch.autograd.graph.saved_tensors_hooks``, counting each saved storage once (parameters excluded), eagerly
and compiled; a layer's share is the difference between 4 and 2 layers, halved, per token and hidden unit.
Those ratios are all a layer's saved bytes depend on (with SDPA; the scores' term of eager attention grows
with the length instead).

Runs in the calibration venv (torch, transformers):

    python compiled_activations.py compiled_activations.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch
import transformers

sys.path.insert(0, str(Path(__file__).resolve().parent))
from activations import _set_dropout  # noqa: E402
from param_counts import DEFAULT_CATALOG, _decoder_config  # noqa: E402

ARCHITECTURES = ("llama-3.2-1b", "tinyllama-1.1b", "mistral-7b-v0.1", "qwen2.5-0.5b", "qwen3-0.6b", "gemma-2b", "phi-2", "gpt2")
HEAD_WIDTH = 16
BATCH, SEQ = 2, 256


def _scaled(a: dict, layers: int) -> dict:
    head_dim = a.get("head_dim") or a["hidden"] // a["heads"]
    factor = head_dim // HEAD_WIDTH
    assert head_dim % HEAD_WIDTH == 0 and a["hidden"] % factor == 0 and a["intermediate"] % factor == 0, a["id"]
    scaled = {**a, "layers": layers, "hidden": a["hidden"] // factor, "intermediate": a["intermediate"] // factor,
              "vocab": 1000, "max_positions": max(SEQ, 1024)}
    if a.get("head_dim"):
        scaled["head_dim"] = HEAD_WIDTH
    if a.get("learned_positions"):
        scaled["learned_positions"] = max(SEQ, 1024)
    return scaled


def _saved_bytes(a: dict, layers: int, compiled: bool) -> int:
    torch.manual_seed(0)
    config = _decoder_config(_scaled(a, layers))
    if a.get("head_dim"):
        config.head_dim = HEAD_WIDTH
    _set_dropout(config, 0.0)
    model = transformers.AutoModelForCausalLM.from_config(config, attn_implementation="sdpa", dtype=torch.bfloat16)
    body = model.base_model  # the layers without the LM head and loss, which compile alike
    return bytes_saved_for_backward(body, compiled)


def bytes_saved_for_backward(body: torch.nn.Module, compiled: bool) -> int:
    """The bytes of the tensors a training-mode forward of ``body`` keeps for its backward (its parameters and
    buffers left out), run eagerly or compiled."""
    body.train()
    excluded = {p.untyped_storage()._cdata for p in body.parameters()} | {b.untyped_storage()._cdata for b in body.buffers()}
    seen: dict[int, int] = {}

    def pack(tensor: torch.Tensor) -> torch.Tensor:
        key = tensor.untyped_storage()._cdata
        if key not in excluded and key not in seen:
            seen[key] = tensor.untyped_storage().nbytes()
        return tensor

    run = torch.compile(body, backend="aot_eager_decomp_partition") if compiled else body
    ids = torch.randint(0, 1000, (BATCH, SEQ))
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        out = run(input_ids=ids).last_hidden_state
    del out
    torch._dynamo.reset()
    return sum(seen.values())


def measure(a: dict) -> dict:
    hidden = _scaled(a, 1)["hidden"]
    unit = BATCH * SEQ * hidden
    row = {"model": a["id"], "scaled_hidden": hidden}
    for name, compiled in (("eager", False), ("compiled", True)):
        two, four = _saved_bytes(a, 2, compiled), _saved_bytes(a, 4, compiled)
        row[name] = round((four - two) / 2 / unit, 3)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", type=Path)
    args = parser.parse_args()
    catalog = {a["id"]: a for a in json.loads(DEFAULT_CATALOG.read_text())}
    rows = []
    for arch_id in ARCHITECTURES:
        row = measure(catalog[arch_id])
        rows.append(row)
        print(json.dumps(row), flush=True)
    args.out.write_text(json.dumps({
        "about": "bytes per token and hidden unit one decoder layer saves for its backward (bf16, SDPA, no dropout), "
                 "eager and under AOTAutograd's default partitioner (torch.compile, backend aot_eager_decomp_partition)",
        "torch": torch.__version__, "transformers": transformers.__version__, "batch": BATCH, "seq": SEQ, "rows": rows,
    }, indent=1) + "\n")


if __name__ == "__main__":
    main()
