"""Which terms are alive at a training step's peak: torch's MemTracker under FakeTensorMode.

For a small Llama-like decoder (bf16, SDPA) this runs one warm-up iteration (the optimizer's state is
created at the first step), then one tracked iteration of forward, backward, ``AdamW.step()`` and
``zero_grad(set_to_none=True)``, and records MemTracker's snapshot at the peak by category (PARAM,
GRAD, ACT, TEMP, OPT). Cases: a step-dominated shape (a few tokens) and an activation-dominated one,
foreach and per-tensor AdamW, with and without gradient accumulation. ``tests/test_costmodel.py``
checks the cost model's phases against it: gradients are absent at the forward/backward peak unless
they accumulate, and the foreach step adds one parameter-sized temporary. Last, the bytes per layer
(per token and hidden unit) alive after the forward without checkpointing, with full checkpointing and
with selective checkpointing that saves the matmul and attention outputs (torch's
``create_selective_checkpoint_contexts``) and recomputes the rest, and with torchtitan's op policy, which
also recomputes every second matmul.

Runs in the calibration venv (torch, transformers):

    python step_peaks.py OUT.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch
import transformers
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.distributed._tools.mem_tracker import MemTracker
from transformers.initialization import no_init_weights

CONFIG = dict(hidden_size=1024, intermediate_size=3584, num_hidden_layers=4, num_attention_heads=8,
              num_key_value_heads=2, vocab_size=32000, max_position_embeddings=2048)
CASES = [
    {"batch": 1, "seq": 16, "foreach": True, "accumulate": 1},
    {"batch": 1, "seq": 16, "foreach": False, "accumulate": 1},
    {"batch": 2, "seq": 512, "foreach": True, "accumulate": 1},
    {"batch": 2, "seq": 512, "foreach": True, "accumulate": 2},
]


def run(batch: int, seq: int, foreach: bool, accumulate: int) -> dict:
    config = transformers.LlamaConfig(**CONFIG)
    with FakeTensorMode():
        with no_init_weights():
            model = transformers.AutoModelForCausalLM.from_config(config, attn_implementation="sdpa", dtype=torch.bfloat16)
        model.train()
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=foreach)

        def iteration(tracker=None):
            for _ in range(accumulate):
                if tracker is not None:
                    tracker.reset_mod_stats()
                ids = torch.randint(0, config.vocab_size, (batch, seq))
                model(input_ids=ids, labels=ids, use_cache=False).loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)

        iteration()
        tracker = MemTracker()
        tracker.track_external(model, optimizer)
        with tracker:
            iteration(tracker)
        peak = tracker.get_tracker_snapshot("peak")
        parameters = [p for p in model.parameters()]
    categories = next(iter(peak.values()))
    return {
        "batch": batch, "seq": seq, "foreach": foreach, "accumulate": accumulate,
        "param_bytes": sum(p.numel() * p.element_size() for p in parameters),
        "largest_param_bytes": max(p.numel() * p.element_size() for p in parameters),
        "peak": {str(name).rsplit(".", 1)[-1]: value for name, value in categories.items()},
    }


def _selective_policy(ctx, op, *args, **kwargs):
    from torch.utils.checkpoint import CheckpointPolicy

    saved = {torch.ops.aten.mm.default, torch.ops.aten.addmm.default, torch.ops.aten.bmm.default,
             torch.ops.aten._scaled_dot_product_flash_attention.default,
             torch.ops.aten._scaled_dot_product_efficient_attention.default,
             torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default}
    return CheckpointPolicy.MUST_SAVE if op in saved else CheckpointPolicy.PREFER_RECOMPUTE


_MATMULS = (torch.ops.aten.mm.default, torch.ops.aten.addmm.default)


def _alternate_policy(meta: dict):
    """torchtitan's op-level selective checkpointing (`selective_ac_option = "op"`): the outputs of matmuls and
    attention are saved, except every second matmul of a layer, counted afresh in each layer's forward and
    recomputation; everything else is recomputed."""
    from torch.utils.checkpoint import CheckpointPolicy

    def policy(ctx, op, *args, **kwargs):
        key = "recompute" if ctx.is_recompute else "forward"
        if op in _MATMULS:
            meta[key] = meta.get(key, 0) + 1
            return CheckpointPolicy.PREFER_RECOMPUTE if meta[key] % 2 == 0 else CheckpointPolicy.MUST_SAVE
        return _selective_policy(ctx, op, *args, **kwargs)

    return policy


def kept_after_forward(checkpointing: str, layers: int, batch: int = 2, seq: int = 1024) -> int:
    """Activation and temporary bytes alive when the forward (with the loss) has returned."""
    import functools

    from torch.utils.checkpoint import create_selective_checkpoint_contexts

    config = transformers.LlamaConfig(**{**CONFIG, "num_hidden_layers": layers, "vocab_size": 1024})
    with FakeTensorMode():
        with no_init_weights():
            model = transformers.AutoModelForCausalLM.from_config(config, attn_implementation="sdpa", dtype=torch.bfloat16)
        model.train()
        if checkpointing != "none":
            kwargs = {"use_reentrant": False}
            if checkpointing == "selective":
                kwargs["context_fn"] = functools.partial(create_selective_checkpoint_contexts, _selective_policy)
            if checkpointing == "alternate":
                kwargs["context_fn"] = lambda: create_selective_checkpoint_contexts(_alternate_policy({}))
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)
        tracker = MemTracker()
        tracker.track_external(model)
        with tracker:
            ids = torch.randint(0, config.vocab_size, (batch, seq))
            model(input_ids=ids, labels=ids, use_cache=False)
            current = next(iter(tracker.get_tracker_snapshot().values()))
    return int(sum(value for name, value in current.items() if str(name).rsplit(".", 1)[-1] in ("ACT", "TEMP")))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", type=Path)
    args = parser.parse_args()
    rows = []
    for case in CASES:
        rows.append(run(**case))
        print(rows[-1], flush=True)
    # Per layer, per token and hidden unit: the difference between 4 and 2 layers, batch 2, 1024 tokens.
    checkpointing = {}
    for mode in ("none", "full", "selective", "alternate"):
        per_layer = (kept_after_forward(mode, 4) - kept_after_forward(mode, 2)) / 2
        checkpointing[mode] = round(per_layer / (2 * 1024 * CONFIG["hidden_size"]), 3)
        print(mode, checkpointing[mode], flush=True)
    meta = {"torch": torch.__version__, "transformers": transformers.__version__, "config": CONFIG, "dtype": "bf16"}
    args.out.write_text(json.dumps({**meta, "rows": rows, "kept_per_layer_after_forward": checkpointing}, indent=1) + "\n")


if __name__ == "__main__":
    main()
