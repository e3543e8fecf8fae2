"""The peak of one LitGPT fine-tuning iteration, by category, with torch's MemTracker under FakeTensorMode.

``litgpt_activations.py`` measures what one layer keeps; this runs a whole model (every layer, its
real widths, fake tensors: no storage, no arithmetic) through what ``finetune_lora`` does per
micro-batch (``model(ids, lm_head_chunk_size=128)``, whose output Fabric casts to fp32, the chunked cross-entropy, the backward, the
optimizer step and ``zero_grad``) and records MemTracker's snapshot at the peak (PARAM, BUFFER,
GRAD, ACT, TEMP, OPT). One warm-up iteration first: the optimizer's state is created at the first step.

Each case names the iteration its peak belongs to. ``fit``: a later iteration of LitGPT's ``fit`` loop,
which keeps the previous micro-batch's ``logits`` bound (and with them its graph) until the next
``model(...)`` returns, and rebinds ``loss`` to a float at each log interval (1 in the configuration
hub). ``first``: the first iteration, with no earlier graph alive; it holds the run's peak where the
first batch is the longest (lit-gpt's October 2023 ``finetune/lora.py`` fed the longest sample first,
the resource tables' setting). MemTracker's categories count only what is created while it tracks; the
previous micro-batch's tensors are in the allocator replay, which records from the model's creation on.

With ``--quantize nf4`` every linear is replaced by an emulation of bitsandbytes' ``Linear4bit`` as
far as memory goes, read from bitsandbytes' source (``MatMul4Bit``, 0.41-0.45): a packed 4-bit weight
(half a byte per element) with an fp32 absmax per block of 64; the forward dequantises the weight to
the dtype it was quantised from (fp16: Lightning's plugin quantises ``weight.to(torch.half)``), casts
it to the input's dtype, multiplies, and, before 0.43.2, keeps the input as an attribute of the
autograd context (``ctx.tensors = (A, B)``), not with ``save_for_backward``: the backward does not free
it; it lives as long as the graph does. The backward dequantises and casts again. The optimizer of a quantised run is bitsandbytes'
PagedAdamW, whose state lives in CUDA managed memory, outside torch's allocator: its OPT category is
reported, and left out of ``peak_in_torch_allocator``.

Runs in the calibration venv (torch, lightning), with a LitGPT source tree (see litgpt_activations.py):

    python litgpt_peaks.py --source DIR OUT.json
"""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path

import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.distributed._tools.mem_tracker import MemTracker

sys.path.insert(0, str(Path(__file__).resolve().parent))
from activations import _gpu_like_dropout  # noqa: E402
from allocator_replay import Recorder, replay  # noqa: E402
from fake_linear4bit import quantise  # noqa: E402
from litgpt_activations import _lora_fields, arguments  # noqa: E402

# (LitGPT config name, micro-batch, sequence length, LoRA rank or None for finetune_full, quantisation,
# the iteration of the peak): the shapes of LitGPT's published tables (resource tables: the first
# iteration; configuration hub: a later one of ``fit``).
CASES = [
    ("phi-1_5", 1, 1044, 8, None, "first"), ("phi-1_5", 4, 1044, 8, None, "first"), ("phi-1_5", 1, 1044, 8, "nf4", "first"),
    ("stablelm-base-alpha-3b", 1, 1034, 8, None, "first"), ("stablelm-base-alpha-3b", 1, 1034, 8, "nf4", "first"),
    ("Llama-2-7b-hf", 1, 1304, 8, None, "first"), ("Llama-2-7b-hf", 1, 1304, 8, "nf4", "first"),
    ("Llama-3-8B", 1, 512, 32, None, "fit"), ("Llama-3-8B", 2, 512, 32, "nf4", "fit"),
    ("Llama-2-7b-hf", 2, 512, 32, "nf4", "fit"), ("tiny-llama-1.1b", 4, 512, None, None, "fit"),
]


class _NoHook:
    def remove(self) -> None:
        pass


def run(modules, name: str, batch: int, seq: int, rank: int | None, quantize: str | None, peak_in: str) -> dict:
    """One case; ``rank`` None: ``finetune_full`` (every parameter trained, gradients accumulated over two
    micro-batches, the loss on the whole fp32 logits), else ``finetune_lora``; ``peak_in``: ``fit`` or
    ``first`` (the module's docstring)."""
    package, _, lora, utils = modules
    full = rank is None
    module = importlib.import_module(f"{package}.model") if full else lora
    config = module.Config.from_name(name, **({} if full else _lora_fields(lora, rank)))
    default_dtype = torch.get_default_dtype()
    recorder = Recorder()
    with FakeTensorMode(allow_non_fake_inputs=False), _gpu_like_dropout():
        torch.set_default_dtype(torch.bfloat16)
        try:
            model = module.GPT(config)
            model.max_seq_length = seq
        finally:
            torch.set_default_dtype(default_dtype)
        if not full:
            lora.mark_only_lora_as_trainable(model)
        if quantize:  # Lightning's plugin quantises each linear as it is built: the 16-bit model never exists
            quantise(model)
        # the trace starts with the model's parameters and buffers, in the order they were created
        recorder.track([*model.parameters(), *model.buffers()])
        recorder.__enter__()
        model.train()
        trainable = [p for p in model.parameters() if p.requires_grad]
        optimizer = torch.optim.AdamW(trainable, lr=1e-4)
        micro_batches = 2 if full else 1
        bound = {}  # fit()'s local names, alive from one micro-batch into the next

        def iteration(tracker=None):
            for _ in range(micro_batches):
                if tracker is not None:
                    tracker.reset_mod_stats()  # MemTracker keeps per-module stats of one forward only
                ids = torch.randint(0, config.padded_vocab_size, (batch, seq))
                # Fabric's precision plugins (bf16-true, bitsandbytes) cast a module's floating outputs to
                # the default dtype, fp32 (``convert_output``): the logits the loss sees are fp32 copies
                if full:
                    bound["logits"] = model(ids).float()
                    loss = utils.chunked_cross_entropy(bound["logits"][..., :-1, :], ids[..., 1:])
                else:
                    bound["logits"] = [chunk.float() for chunk in model(ids, lm_head_chunk_size=128)]
                    bound["logits"][-1] = bound["logits"][-1][..., :-1, :]
                    loss = utils.chunked_cross_entropy(bound["logits"], ids[..., 1:])
                (loss / micro_batches).backward()
                del loss  # fit() rebinds it to a float at every log interval
                if peak_in == "first":
                    bound.clear()
            optimizer.step()
            optimizer.zero_grad()

        iteration()
        tracker = MemTracker()
        tracker.track_external(model, optimizer)
        # MemTracker hooks every parameter's gradient; a frozen one takes no hook (torch refuses it)
        for parameter in model.parameters():
            if not parameter.requires_grad:
                tracker._param_to_grad_hook_handles[parameter] = (_NoHook(), _NoHook())
        with tracker:
            iteration(tracker)
        peak = tracker.get_tracker_snapshot("peak")
        recorder.__exit__(None, None, None)
    categories = {str(key).rsplit(".", 1)[-1]: value for key, value in next(iter(peak.values())).items()}
    total = categories.pop("Total", None) or sum(categories.values())
    in_allocator = total - (categories.get("OPT", 0) if quantize else 0)
    replayed = replay(recorder.events)
    return {
        "model": name, "batch": batch, "seq": seq, "lora_rank": rank, "quantize": quantize, "peak_in": peak_in,
        "peak": categories, "peak_in_torch_allocator": in_allocator,
        "replayed": {"live": replayed.live, "allocated": replayed.allocated, "reserved": replayed.reserved},
    }


def main() -> None:
    out, modules = arguments(__doc__)
    rows = []
    for case in CASES:
        try:
            modules[2].Config.from_name(case[0])
        except (KeyError, ValueError):  # not in this version's catalog
            continue
        row = run(modules, *case)
        rows.append(row)
        print(json.dumps(row), flush=True)
    out.write_text(json.dumps({
        "about": "MemTracker's peak of one LitGPT LoRA fine-tuning iteration under FakeTensorMode (bytes by category)",
        "litgpt_package": modules[0], "torch": torch.__version__, "rows": rows,
    }, indent=1) + "\n")


if __name__ == "__main__":
    main()
