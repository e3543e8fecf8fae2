"""What the caching allocator adds on top of live tensors, for transformers workloads: replayed traces.

For each case a whole model (every layer, fake tensors) runs what a training script, an inference or a generation
does, from the model's creation on (fixed shapes, or batches of varying length), under ``allocator_replay.Recorder``; the trace is replayed through
the allocator's rules. Recorded per case: the peak of live bytes, of allocated blocks
(``max_memory_allocated``) and of reserved segments (``max_memory_reserved``), and the bytes of the
model states (weights, gradients, optimizer state) at the end. The cost model's fragmentation term
(``allocator.FRAGMENTATION``) is read from these: reserved minus allocated, against what is not a
model state (activations, the loss, the step's temporaries), over these cases and LitGPT's
(``litgpt_peaks.json``). Training cases run two iterations (the optimizer's state appears at the first
step), accumulating gradients where the case says so.

Runs in the calibration venv (torch, transformers):

    python allocator_peaks.py OUT.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch
import transformers
from torch._subclasses.fake_tensor import FakeTensorMode
from transformers.initialization import no_init_weights

sys.path.insert(0, str(Path(__file__).resolve().parent))
import activations  # noqa: E402
from allocator_replay import Recorder, replay  # noqa: E402
from param_counts import DEFAULT_CATALOG, _decoder_config  # noqa: E402

# (catalog id, mode, dtype, batch, seq, gradient accumulation, checkpointing, foreach AdamW); a tuple of
# sequence lengths: one micro-batch of each in turn (padded to each batch's longest sample, as a collator does).
# "generate": a prompt of `seq` tokens, then NEW_TOKENS decoding steps with a static cache allocated for all of
# them (a run whose allocations are almost all its weights, as gpt-fast's and torchao's generation is).
VARIABLE = (512, 137, 389, 61, 512, 244, 455, 301)
NEW_TOKENS = 200
CASES = [
    ("bert-large-uncased", "train", "fp32", 4, 512, 1, False, False),
    ("bert-large-uncased", "train", "fp32", 1, 512, 4, False, False),
    ("bert-large-uncased", "train", "fp32", 1, 512, 4, True, False),
    ("gpt2", "train", "fp32", 8, 1024, 1, False, True),
    ("llama-3.2-1b", "train", "bf16", 2, 1024, 1, False, True),
    ("llama-3.2-1b", "train", "bf16", 4, 512, 2, True, True),
    ("qwen2.5-0.5b", "train", "bf16", 8, 512, 1, False, False),
    ("llama-3.2-1b", "infer", "bf16", 1, 2048, 1, False, True),
    ("qwen2.5-0.5b", "infer", "bf16", 8, 512, 1, False, True),
    ("bert-large-uncased", "train", "fp32", 4, VARIABLE, 1, False, False),
    ("llama-3.2-1b", "train", "bf16", 4, VARIABLE, 2, False, True),
    ("qwen2.5-0.5b", "train", "bf16", 8, VARIABLE, 1, True, False),
    ("llama-3.2-1b", "generate", "bf16", 1, 8, 1, False, True),
]
_DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}


def _model(a: dict, dtype: torch.dtype, dropout: float) -> torch.nn.Module:
    if a["kind"] == "decoder":
        config = _decoder_config(a)
        activations._set_dropout(config, dropout)
        return transformers.AutoModelForCausalLM.from_config(config, attn_implementation="sdpa", dtype=dtype)
    config = activations._config(a, a["layers"], dropout, None)
    return transformers.AutoModelForSequenceClassification.from_config(config, attn_implementation="eager", dtype=dtype)


def run(a: dict, mode: str, dtype: str, batch: int, seq, accumulate: int, checkpointing: bool, foreach: bool) -> dict:
    lengths = list(seq) if isinstance(seq, tuple) else [seq] * 2 * accumulate
    recorder = Recorder()
    with FakeTensorMode(allow_non_fake_inputs=False), activations._gpu_like_dropout(), activations._not_tracing(), recorder:
        with no_init_weights():
            model = _model(a, _DTYPES[dtype], 0.1 if a["kind"] != "decoder" else 0.0)
        weights = sum(p.numel() * p.element_size() for p in model.parameters())
        states = weights
        if mode == "generate":
            model.eval()
            with torch.no_grad():
                cache = transformers.StaticCache(config=model.config, max_cache_len=seq + NEW_TOKENS)
                ids = torch.randint(0, a["vocab"], (batch, seq))
                out = model(input_ids=ids, past_key_values=cache, use_cache=True, cache_position=torch.arange(seq))
                for step in range(NEW_TOKENS):
                    ids = out.logits[:, -1:].argmax(-1)  # greedy: the next token of each sequence
                    out = model(input_ids=ids, past_key_values=cache, use_cache=True,
                                cache_position=torch.tensor([seq + step]))
        elif mode == "infer":
            model.eval()
            with torch.no_grad():
                ids = torch.randint(0, a["vocab"], (batch, seq))
                model(input_ids=ids, use_cache=False)
        else:
            model.train()
            if checkpointing:
                model.gradient_checkpointing_enable()
            optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=foreach)
            for step in range(len(lengths) // accumulate):
                for micro in range(accumulate):
                    ids = torch.randint(0, a["vocab"], (batch, lengths[step * accumulate + micro]))
                    labels = ids if a["kind"] == "decoder" else torch.randint(0, 2, (batch,))
                    kwargs = {"use_cache": False} if a["kind"] == "decoder" else {}
                    (model(input_ids=ids, labels=labels, **kwargs).loss / accumulate).backward()
                optimizer.step()
                optimizer.zero_grad(set_to_none=True)
            # alive through the forward and backward: weights, optimizer state, gradients while they accumulate
            state_bytes = sum(t.numel() * t.element_size() for st in optimizer.state.values() for t in st.values()
                              if isinstance(t, torch.Tensor))
            states = weights + state_bytes + (weights if accumulate > 1 else 0)
    peaks = replay(recorder.events)
    return {
        "model": a["id"], "mode": mode, "dtype": dtype, "batch": batch, "seq": seq, "accumulate": accumulate,
        "checkpointing": checkpointing, "foreach": foreach, "model_states": states,
        "live": peaks.live, "allocated": peaks.allocated, "reserved": peaks.reserved,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", type=Path)
    parser.add_argument("--missing", action="store_true", help="keep OUT's rows and run only the cases it lacks")
    args = parser.parse_args()
    catalog = {a["id"]: a for a in json.loads(DEFAULT_CATALOG.read_text())}
    kept = json.loads(args.out.read_text())["rows"] if args.missing and args.out.exists() else []

    def key(model, mode, dtype, batch, seq, accumulate, checkpointing, foreach) -> str:
        return json.dumps([model, mode, dtype, batch, list(seq) if isinstance(seq, tuple) else seq, accumulate,
                           checkpointing, foreach])

    done = {key(*(row[name] for name in ("model", "mode", "dtype", "batch", "seq", "accumulate", "checkpointing",
                                           "foreach"))): row for row in kept}
    rows = []
    for case in CASES:
        row = done.get(key(*case)) or run(catalog[case[0]], *case[1:])
        rows.append(row)
        print(json.dumps(row), flush=True)
    args.out.write_text(json.dumps({
        "about": "caching-allocator peaks (live, allocated, reserved bytes) of whole transformers runs replayed from "
                 "fake-tensor traces (calibration/allocator_replay.py), with the bytes of their model states",
        "torch": torch.__version__, "transformers": transformers.__version__, "rows": rows,
    }, indent=1) + "\n")


if __name__ == "__main__":
    main()
