"""What the caching allocator reserves over a long run whose samples differ in length: replayed traces.

A training run over a dataset whose samples vary in length (no packing, each batch padded to its longest
sample, the samples in random order) asks the allocator for tensors of a new size at almost every step.
The caching allocator keeps every segment it has obtained from cudaMalloc until ``empty_cache()`` or a
failed cudaMalloc (torch's "CUDA memory management" notes; ``CUDACachingAllocator.cpp`` releases cached
blocks only then), and it never merges blocks of different segments. A step whose loss tensors are longer
than any before finds no cached block large enough and takes new segments; the older, smaller ones stay
reserved and serve later steps only in part. So ``max_memory_reserved`` over a whole epoch grows beyond
the longest step's allocated peak by more than a run of fixed shapes does, and by an amount that depends on
the order of the lengths, not on the model's arithmetic.

Each case runs a whole model (every layer, fake tensors) over ``STEPS`` micro-batches of lengths drawn
from a stated dataset's length statistics, records the trace (``allocator_replay.Recorder``) and replays it
through the allocator's rules; the peaks are written for the prefixes of the run too, to show where
reserved settles. The lengths: log-normal with the stated mean and standard deviation, samples above the
run's maximum length dropped (not truncated), as swift's default ``truncation_strategy='delete'`` does;
the benchmark the statistics come from (ms-swift's LLM benchmark page: 3234.4 +- 2547.5 tokens, min 91)
states no more of the distribution than that, so the log-normal shape is an assumption, and two seeds of
one case show how much the order alone moves the result.

Runs in the calibration venv (torch, transformers, peft):

    python varying_length_peaks.py OUT.json
"""

from __future__ import annotations

import argparse
import json
import math
import random
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

# The dataset's stated token statistics (ms-swift Benchmark.md, cls-fudan-news-zh with Qwen's tokenizer).
LENGTH_MEAN, LENGTH_STD, LENGTH_MIN = 3234.4, 2547.5, 91
STEPS = 40
ACCUMULATE = 16
# (catalog id, method, maximum length, batch, seed of the lengths' order, gradient checkpointing): LoRA (rank 8 on
# q, k and v) or full fine-tuning, bf16, torch's AdamW, gradient accumulation 16, gradient checkpointing on as the
# benchmark's defaults are, and off as its flash-attention table runs it.
CASES = [
    ("qwen2.5-1.5b", "lora", 2048, 1, 0, True),
    ("qwen2.5-1.5b", "lora", 2048, 1, 1, True),
    ("qwen2.5-1.5b", "lora", 512, 1, 0, True),
    ("qwen2.5-1.5b", "lora", 8192, 1, 0, True),
    ("qwen2.5-1.5b", "full", 2048, 1, 0, True),
    ("llama-3.2-1b", "lora", 2048, 1, 0, True),
    ("qwen2.5-1.5b", "lora", 2048, 1, 0, False),
]


def lengths(seed: int, maximum: int, count: int) -> list[int]:
    """``count`` sample lengths from the stated statistics, those above ``maximum`` dropped."""
    sigma2 = math.log(1 + (LENGTH_STD / LENGTH_MEAN) ** 2)
    mu, sigma = math.log(LENGTH_MEAN) - sigma2 / 2, math.sqrt(sigma2)
    rng = random.Random(seed)
    drawn: list[int] = []
    while len(drawn) < count:
        n = max(LENGTH_MIN, round(rng.lognormvariate(mu, sigma)))
        if n <= maximum:
            drawn.append(n)
    return drawn


def _lora(model: torch.nn.Module) -> torch.nn.Module:
    import peft

    # Under FakeTensorMode peft's moves of modules to their base layer's device (no-ops here: all is on the
    # CPU) cannot swap fake parameters: skipped, as adapter_activations.py does. The adapters stay fp32.
    peft.tuners.tuners_utils.BaseTunerLayer._move_adapter_to_device_of_base_layer = lambda self, *a, **k: None
    config = peft.LoraConfig(r=8, lora_alpha=32, lora_dropout=0.05, target_modules=["q_proj", "k_proj", "v_proj"])
    move = torch.nn.Module.to
    torch.nn.Module.to = lambda self, *args, **kwargs: self
    try:
        return peft.get_peft_model(model, config)
    finally:
        torch.nn.Module.to = move


def run(a: dict, method: str, maximum: int, batch: int, seed: int, checkpointing: bool) -> dict:
    samples = lengths(seed, maximum, STEPS * batch)
    recorder = Recorder()
    marks: list[int] = []
    with FakeTensorMode(allow_non_fake_inputs=False), activations._not_tracing(), recorder:
        with no_init_weights():
            config = _decoder_config(a)
            model = transformers.AutoModelForCausalLM.from_config(config, attn_implementation="sdpa",
                                                                  dtype=torch.bfloat16)
        if checkpointing:
            model.gradient_checkpointing_enable()
        if method == "lora":
            model.enable_input_require_grads()
            model = _lora(model)
        model.train()
        optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-4)
        for step in range(STEPS):
            longest = max(samples[step * batch:(step + 1) * batch])  # padded to the batch's longest
            ids = torch.randint(0, a["vocab"], (batch, longest))
            (model(input_ids=ids, labels=ids, use_cache=False).loss / ACCUMULATE).backward()
            if (step + 1) % ACCUMULATE == 0:
                optimizer.step()
                optimizer.zero_grad(set_to_none=True)
            marks.append(len(recorder.events))
        weights = sum(p.numel() * p.element_size() for p in model.parameters())
        # alive through every forward and backward: weights, optimizer state, gradients (they accumulate)
        state_bytes = sum(t.numel() * t.element_size() for st in optimizer.state.values() for t in st.values()
                          if isinstance(t, torch.Tensor))
        gradient_bytes = sum(p.numel() * p.element_size() for p in model.parameters() if p.requires_grad)
    prefixes = {}
    for count in (STEPS // 4, STEPS // 2, STEPS):
        peaks = replay(recorder.events[:marks[count - 1]])
        prefixes[count] = {"live": peaks.live, "allocated": peaks.allocated, "reserved": peaks.reserved}
    return {
        "model": a["id"], "method": method, "max_length": maximum, "batch": batch, "seed": seed,
        "checkpointing": checkpointing, "longest": max(samples), "model_states": weights + state_bytes + gradient_bytes,
        "steps": prefixes,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", type=Path)
    parser.add_argument("--cases", type=int, default=len(CASES), help="run only the first N cases")
    args = parser.parse_args()
    catalog = {a["id"]: a for a in json.loads(DEFAULT_CATALOG.read_text())}
    rows = []
    for case in CASES[:args.cases]:
        row = run(catalog[case[0]], *case[1:])
        rows.append(row)
        print(json.dumps(row), flush=True)
    args.out.write_text(json.dumps({
        "about": "caching-allocator peaks (live, allocated, reserved bytes) of training runs over samples of varying "
                 "length, replayed from fake-tensor traces (calibration/varying_length_peaks.py)",
        "torch": torch.__version__, "transformers": transformers.__version__,
        "lengths": {"mean": LENGTH_MEAN, "std": LENGTH_STD, "min": LENGTH_MIN, "steps": STEPS,
                    "accumulate": ACCUMULATE},
        "rows": rows,
    }, indent=1) + "\n")


if __name__ == "__main__":
    main()
