"""A causal LM's plain forward without a loss (``model(input_ids)`` under ``torch.no_grad()``): replayed from fake tensors.

Where ``inference_peaks.py`` replays ``generate``'s prompt (the last position's logits only, one layer's working memory
measured alone), this replays what a script's inference pass keeps as a whole: every layer's working memory, the KV
cache the forward fills layer by layer (transformers' ``use_cache``, True in its configs) or none (``use_cache=False``),
and the logits of every position, which the LM head computes after the layers. ``allocator_replay.Recorder`` writes
every storage's allocation and release; the peak of live bytes during the forward beyond what was alive before it (the
weights) is compared with the cost model's forward phase less its weights (``tests/test_estimator_replays.py``).

Runs in the calibration venv (torch, transformers):

    python inference_forward_peaks.py ../calibration/inference_forward_peaks.json
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
from allocator_replay import Recorder, live_over_time  # noqa: E402
from param_counts import DEFAULT_CATALOG, _decoder_config  # noqa: E402

# (catalog id, batch, tokens, use_cache): a Llama-shaped 7B whose cache outweighs its logits, the same without a cache
# (the logits alone after the layers), and a small model with a large vocabulary, whose logits outweigh its cache.
CASES = [
    ("llama-2-7b", 1, 2048, True),
    ("llama-2-7b", 4, 2048, True),
    ("llama-2-7b", 4, 2048, False),
    ("qwen2.5-1.5b", 2, 4096, True),
    ("qwen2.5-1.5b", 2, 4096, False),
]


def run(a: dict, batch: int, tokens: int, use_cache: bool) -> dict:
    recorder = Recorder()
    with FakeTensorMode(allow_non_fake_inputs=False), activations._not_tracing(), recorder:
        with no_init_weights():
            model = transformers.AutoModelForCausalLM.from_config(_decoder_config(a), attn_implementation="sdpa", dtype=torch.bfloat16)
        model.eval()
        with torch.no_grad():
            ids = torch.randint(0, a["vocab"], (batch, tokens))
            start = len(recorder.events)
            out = model(input_ids=ids, use_cache=use_cache)
            end = len(recorder.events)
            logits = out.logits.numel() * out.logits.element_size()
            cache = out.past_key_values
            kv = 0 if cache is None else sum(t.numel() * t.element_size() for layer in cache.layers for t in (layer.keys, layer.values))
    timeline = live_over_time(recorder.events)
    return {"model": a["id"], "batch": batch, "tokens": tokens, "use_cache": use_cache, "attention": "sdpa",
            "peak_beyond_weights": max(timeline[start:end]) - timeline[start - 1], "logits": logits, "kv_cache": kv}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", type=Path)
    args = parser.parse_args()
    catalog = {a["id"]: a for a in json.loads(DEFAULT_CATALOG.read_text())}
    rows = []
    for model_id, *case in CASES:
        rows.append(run(catalog[model_id], *case))
        print(json.dumps(rows[-1]), flush=True)
    args.out.write_text(json.dumps({
        "about": "peak bytes of a causal LM's forward without a loss beyond its weights (all positions' logits), bf16, SDPA",
        "torch": torch.__version__, "transformers": transformers.__version__, "rows": rows,
    }, indent=1) + "\n")


if __name__ == "__main__":
    main()
