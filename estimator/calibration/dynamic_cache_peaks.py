"""Generation with transformers' default cache (DynamicCache), replayed through the caching allocator's rules.

``model.generate`` without a cache implementation grows a DynamicCache: at each decoding step each layer's keys and
values become ``torch.cat([old, new], dim=-2)``, a tensor one token longer, and the old one is freed. Requests of
10 MiB or more take segments of their own, rounded up to 2 MiB, and the allocator never serves a request from two
segments; were every layer's cache tensors alone in such segments, each 2 MiB of growth would leave a segment of the
size before cached for every layer's keys and values (an allocator trace of those tensors alone reserves 1.7 times the
cache beyond it). Whether that happens depends on where the prompt's cache and the grown tensors are carved from,
which only the whole run's order of allocations says: each case runs a whole model on fake tensors (weights, the
prompt's prefill, then greedy decoding steps that feed the cache back, as generate does; generate itself reads the
fake tokens' values to decide when to stop and cannot run here) under ``allocator_replay.Recorder``, replays the
trace and records the peaks of live bytes, allocated blocks and reserved segments, the weights' bytes and the
cache's bytes at the end.

Runs in the calibration venv (torch, transformers):

    python dynamic_cache_peaks.py OUT.json
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

# (catalog id, batch, prompt tokens, new tokens), every layer of the model (what the prefill leaves free is shared by
# every layer's cache, so fewer layers would not say what a whole model keeps). Each layer's keys grow from 16 MiB past
# 2 MiB boundaries in the first two, and stay in the small pool in the third.
CASES = [
    ("llama-2-7b", 4, 512, 128),
    ("llama-3.2-1b", 16, 1024, 128),
    ("llama-3.2-1b", 1, 512, 256),
]


def run(a: dict, batch: int, prompt: int, new_tokens: int) -> dict:
    recorder = Recorder()
    with FakeTensorMode(allow_non_fake_inputs=False), activations._not_tracing(), recorder:
        with no_init_weights():
            model = transformers.AutoModelForCausalLM.from_config(_decoder_config(a), attn_implementation="sdpa",
                                                                  dtype=torch.bfloat16)
        model.eval()
        weights = sum(p.numel() * p.element_size() for p in model.parameters())
        with torch.no_grad():
            ids = torch.randint(0, a["vocab"], (batch, prompt))
            out = model(input_ids=ids, use_cache=True, logits_to_keep=1)
            cache = out.cache if hasattr(out, "cache") else out.past_key_values
            for step in range(new_tokens):
                ids = out.logits[:, -1:].argmax(-1)  # greedy: the next token of each sequence
                out = model(input_ids=ids, cache=cache, use_cache=True,
                            cache_position=torch.tensor([prompt + step]))
            cache_bytes = sum(t.numel() * t.element_size() for layer in cache.layers for t in (layer.keys, layer.values))
    peaks = replay(recorder.events)
    alone = replay(cache_alone(a, batch, prompt, new_tokens, weights))
    return {"model": a["id"], "batch": batch, "prompt": prompt, "new_tokens": new_tokens, "weights": weights,
            "kv_cache": cache_bytes, "live": peaks.live, "allocated": peaks.allocated, "reserved": peaks.reserved,
            "cache_alone_reserved_beyond": alone.reserved - alone.allocated}


def cache_alone(a: dict, batch: int, prompt: int, new_tokens: int, weights: int) -> list[tuple[str, int, int]]:
    """The allocations of the weights and the cache alone, in DynamicCache's order (each layer's keys, then its
    values: the longer tensor allocated, then the old one freed), as if nothing else ran on the device."""
    per_token = batch * (a.get("kv_heads") or a["heads"]) * (a.get("head_dim") or a["hidden"] // a["heads"]) * 2
    events: list[tuple[str, int, int]] = [("alloc", 0, weights)]
    live = {}
    for layer in range(a["layers"]):
        for kind in (0, 1):
            live[layer, kind] = len(events)
            events.append(("alloc", len(events), per_token * prompt))
    for step in range(1, new_tokens + 1):
        for layer in range(a["layers"]):
            for kind in (0, 1):
                handle = len(events)
                events.append(("alloc", handle, per_token * (prompt + step)))
                events.append(("free", live[layer, kind], 0))
                live[layer, kind] = handle
    return events


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", type=Path)
    args = parser.parse_args()
    catalog = {a["id"]: a for a in json.loads(DEFAULT_CATALOG.read_text())}
    rows = []
    for case in CASES:
        row = run(catalog[case[0]], *case[1:])
        rows.append(row)
        print(json.dumps(row), flush=True)
    args.out.write_text(json.dumps({
        "about": "generation with transformers' DynamicCache (the cache grown by torch.cat at each step) replayed from "
                 "fake-tensor traces through the caching allocator's rules (calibration/allocator_replay.py), with what "
                 "the weights and the cache's allocations alone would reserve beyond what they allocate",
        "torch": torch.__version__, "transformers": transformers.__version__, "rows": rows,
    }, indent=1) + "\n")


if __name__ == "__main__":
    main()
