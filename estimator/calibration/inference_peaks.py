"""What transformers keeps on the device while it reads a prompt and generates: replayed from fake tensors.

For each case a whole model (every layer, bf16 weights, fake tensors) reads a prompt under ``torch.no_grad()``
the way ``generate`` does since transformers 4.45 (a ``DynamicCache``, ``logits_to_keep=1``: the LM head sees
the last position only), then takes one decoding step. ``allocator_replay.Recorder`` writes every storage's
allocation and release; the peak of live bytes during the prompt's forward, minus the weights and the KV cache
it leaves behind (complete by the last layer, where every layer's working memory is the same), is the
prefill's working memory, reported per token and hidden unit beside the model's widths. The cost model's
inference term (``layer_activations.inference_layer_coefficient``) is checked against these rows
(``tests/test_costmodel.py``).

Runs in the calibration venv (torch, transformers):

    python inference_peaks.py ../calibration/inference_peaks.json
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

# (catalog id, attention implementation, prompt tokens): the Qwen2.5 sizes of the published speed benchmark,
# and one model of each other MLP and attention shape the catalog holds. Not Falcon: its SDPA call passes an
# explicit mask, which the CPU's flash kernel does not take, so a fake run takes the math path (the s x s
# probabilities) where a GPU takes the memory-efficient kernel. Eager attention on the CPU upcasts the scores
# to an fp32 copy before the softmax, which CUDA's half-to-float softmax does not make: its peak is 10 bytes
# per head and pair of positions (16-bit scores, the copy, the fp32 output), a GPU's 8 (the cast back).
CASES = [
    ("qwen2.5-0.5b", "sdpa", 4096),
    ("qwen2.5-1.5b", "sdpa", 4096),
    ("qwen2.5-7b", "sdpa", 4096),
    ("qwen2.5-14b", "sdpa", 2048),
    ("qwen2.5-32b", "sdpa", 2048),
    ("llama-3.2-1b", "sdpa", 4096),
    ("llama-2-7b", "sdpa", 2048),
    ("mistral-7b-v0.1", "sdpa", 2048),
    ("qwen3-0.6b", "sdpa", 4096),
    ("gemma-2b", "sdpa", 4096),
    ("phi-2", "sdpa", 2048),
    ("gpt2", "sdpa", 1024),
    ("qwen2.5-0.5b", "eager", 2048),
    ("llama-3.2-1b", "eager", 2048),
]


def run(a: dict, attention: str, prompt: int) -> dict:
    recorder = Recorder()
    with FakeTensorMode(allow_non_fake_inputs=False), activations._not_tracing(), recorder:
        with no_init_weights():
            model = transformers.AutoModelForCausalLM.from_config(
                _decoder_config(a), attn_implementation=attention, dtype=torch.bfloat16)
        model.eval()
        weights = sum(p.numel() * p.element_size() for p in model.parameters())
        weights += sum(b.numel() * b.element_size() for b in model.buffers())
        with torch.no_grad():
            cache = transformers.DynamicCache(config=model.config)
            ids = torch.randint(0, a["vocab"], (1, prompt))
            before_prefill = len(recorder.events)
            out = model(input_ids=ids, past_key_values=cache, use_cache=True, logits_to_keep=1)
            before_decode = len(recorder.events)
            kv = sum(t.numel() * t.element_size() for layer in cache.layers for t in (layer.keys, layer.values))
            logits = out.logits.numel() * out.logits.element_size()
            step = model(input_ids=ids[:, -1:], past_key_values=cache, use_cache=True, logits_to_keep=1)
            after_decode = len(recorder.events)
            del step
    timeline = live_over_time(recorder.events)
    prefill = max(timeline[before_prefill:before_decode]) - weights - kv
    decode = max(timeline[before_decode:after_decode]) - timeline[before_decode - 1]
    hidden = a["hidden"]
    return {
        "model": a["id"], "attention": attention, "prompt": prompt, "hidden": hidden,
        "intermediate": a["intermediate"], "heads": a["heads"], "kv_heads": a.get("kv_heads") or a["heads"],
        "weights": weights, "kv_cache": kv, "last_logits": logits, "prefill_working": prefill,
        "prefill_working_per_token_hidden": round(prefill / (prompt * hidden), 3), "decode_working": decode,
    }


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
        "about": "working memory of a prompt's forward (bytes beyond the weights and the KV cache it leaves) and of "
                 "one decoding step, transformers' generate path (DynamicCache, logits_to_keep=1), bf16, batch 1",
        "torch": torch.__version__, "transformers": transformers.__version__, "rows": rows,
    }, indent=1) + "\n")


if __name__ == "__main__":
    main()
