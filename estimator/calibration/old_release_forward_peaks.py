"""A causal LM's forward without a loss as transformers wrote it before SDPA, the 16-bit logits and the Cache classes
(4.35.2, the last release whose Llama runs eager attention by default): replayed from fake tensors.

``inference_forward_peaks.py`` replays today's forward (SDPA, 16-bit logits, a DynamicCache). A script run under a
2023 release ran other code: eager attention (``torch.matmul(q, k^T) / sqrt(d)``, the causal mask added, the
softmax taken in fp32 and cast back), a 4-D additive mask built for the whole batch
(``_prepare_4d_causal_attention_mask``), a tuple of ``(key_states, value_states)`` per layer as the cache, and the LM
head's output upcast with ``.float()``. ``allocator_replay.Recorder`` writes every storage's allocation and release
during ``model(input_ids)`` under ``torch.no_grad()``; the peak of live bytes beyond what was alive before (the
weights) is compared with the cost model's forward phase for the same release's settings (eager attention, the
upcast logits, the cache), less its weights (``tests/test_estimator_replays.py``). The trace also goes through the
caching allocator's rules (``allocator_replay.replay``): reserved over allocated at inference. Greedy ``generate``
calls of the same release are replayed whole: the peak beyond the weights, with the previous step's cache tuple held.

The replay runs on the CPU's fake tensors in bf16: ``softmax(x, dim, dtype=torch.float32)`` converts bf16 scores to an
fp32 copy before the softmax on CUDA as on the CPU (``aten/src/ATen/native/SoftMax.cpp``: the fused half-to-float kernel
is taken only for CUDA fp16 inputs), so the trace holds what a GPU holds for a bf16 model.

Runs in a venv of its own (the calibration venv's transformers is today's): torch 2.13 (CPU) and transformers 4.35.2
installed without its dependencies, plus huggingface_hub 0.17.3, tokenizers 0.14.1, safetensors, regex, numpy<2, pyyaml,
tqdm and filelock:

    python old_release_forward_peaks.py ../calibration/old_release_forward_peaks.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch
import transformers
from torch._subclasses.fake_tensor import FakeTensorMode

sys.path.insert(0, str(Path(__file__).resolve().parent))
from allocator_replay import Recorder, live_over_time, replay  # noqa: E402

CATALOG = Path(__file__).resolve().parent.parent / "data" / "architectures.json"

# (catalog id, batch, tokens): a Llama-shaped 7B with multi-head attention, at a short and a long prompt and a batch of
# four, and a small model with grouped KV heads and a large vocabulary, whose logits outweigh its layers.
CASES = [
    ("llama-2-7b", 1, 512),
    ("llama-2-7b", 1, 2048),
    ("llama-2-7b", 4, 1024),
    ("tinyllama-1.1b", 8, 1024),
]


def _config(a: dict) -> transformers.LlamaConfig:
    return transformers.LlamaConfig(
        vocab_size=a["vocab"], hidden_size=a["hidden"], num_hidden_layers=a["layers"], num_attention_heads=a["heads"],
        num_key_value_heads=a.get("kv_heads"), intermediate_size=a["intermediate"],
        max_position_embeddings=a["max_positions"], tie_word_embeddings=a.get("tied_embeddings", False),
        torch_dtype=torch.bfloat16,
    )


def run(a: dict, batch: int, tokens: int) -> dict:
    recorder = Recorder()
    with FakeTensorMode(allow_non_fake_inputs=False), recorder:
        model = transformers.AutoModelForCausalLM.from_config(_config(a), torch_dtype=torch.bfloat16)
        model.eval()
        with torch.no_grad():
            ids = torch.randint(0, a["vocab"], (batch, tokens))
            start = len(recorder.events)
            out = model(input_ids=ids)
            end = len(recorder.events)
            logits = out.logits.numel() * out.logits.element_size()
            kv = sum(t.numel() * t.element_size() for layer in out.past_key_values for t in layer)
    timeline = live_over_time(recorder.events)
    before = timeline[start - 1]
    allocator = replay(recorder.events[: end])
    return {"model": a["id"], "batch": batch, "tokens": tokens, "attention": model.config._attn_implementation
            if hasattr(model.config, "_attn_implementation") else "eager",
            "logits_dtype": str(out.logits.dtype), "peak_beyond_weights": max(timeline[start:end]) - before,
            "logits": logits, "kv_cache": kv,
            "allocated_peak": allocator.allocated, "reserved_peak": allocator.reserved}


# (catalog id, batch, prompt tokens, new tokens): greedy decoding through 4.35's generate (greedy_search), whose
# model_kwargs hold the previous step's cache tuple while the next step's torch.cat builds the longer one: short prompts
# whose peak is at the last step, and a long prompt with two new tokens whose peak is the first step (the prompt's
# cache twice, and its fp32 logits, which `outputs` holds until the step returns).
GENERATE_CASES = [
    ("llama-2-7b", 1, 16, 112),
    ("tinyllama-1.1b", 8, 8, 120),
    ("llama-2-7b", 1, 512, 2),
]


def run_generate(a: dict, batch: int, prompt: int, new_tokens: int) -> dict:
    """The peak of live bytes beyond the weights over a whole greedy generate() call (no EOS token, so that no step
    reads a tensor's value: the loop stops at max_new_tokens)."""
    recorder = Recorder()
    with FakeTensorMode(allow_non_fake_inputs=False), recorder:
        model = transformers.AutoModelForCausalLM.from_config(_config(a), torch_dtype=torch.bfloat16)
        model.eval()
        model.generation_config.eos_token_id = None
        model.generation_config.pad_token_id = None
        with torch.no_grad():
            ids = torch.randint(0, a["vocab"], (batch, prompt))
            start = len(recorder.events)
            out = model.generate(ids, max_new_tokens=new_tokens, do_sample=False)
            end = len(recorder.events)
            assert out.shape[1] == prompt + new_tokens
    timeline = live_over_time(recorder.events)
    kv_per_token = 2 * a["layers"] * (a.get("kv_heads") or a["heads"]) * (a["hidden"] // a["heads"]) * 2 * batch
    return {"model": a["id"], "batch": batch, "prompt": prompt, "new_tokens": new_tokens, "attention": "eager",
            "peak_beyond_weights": max(timeline[start:end]) - timeline[start - 1],
            "kv_cache": kv_per_token * (prompt + new_tokens - 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", type=Path)
    args = parser.parse_args()
    catalog = {a["id"]: a for a in json.loads(CATALOG.read_text())}
    rows = []
    for model_id, *case in CASES:
        rows.append(run(catalog[model_id], *case))
        print(json.dumps(rows[-1]), flush=True)
    generated = []
    for model_id, *case in GENERATE_CASES:
        generated.append(run_generate(catalog[model_id], *case))
        print(json.dumps(generated[-1]), flush=True)
    args.out.write_text(json.dumps({
        "about": "peak bytes of a causal LM's forward without a loss beyond its weights under transformers 4.35 (eager "
                 "attention, the additive 4-D mask, a tuple cache, logits upcast to fp32), bf16, on fake tensors; "
                 "allocated_peak and reserved_peak: the whole trace (weights and forward) through the caching allocator's rules",
        "torch": torch.__version__, "transformers": transformers.__version__, "rows": rows, "generate": generated,
    }, indent=1) + "\n")


if __name__ == "__main__":
    main()
