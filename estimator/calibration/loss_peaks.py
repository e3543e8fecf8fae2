"""Bytes per logit at the peak of a causal LM's loss: torch's MemTracker under FakeTensorMode.

The LM head's output and the cross-entropy over it are replayed in the three forms transformers' models
have taken, each written from the model code it stands for:

- ``upcast_shift``: transformers before 4.46 (Llama-family ``forward``): the head's output upcast with
  ``.float()``, the last position dropped with a contiguous copy (``logits[..., :-1, :].contiguous()``), then
  ``CrossEntropyLoss``;
- ``remote_autocast``: a remote-code model of 2023 (Qwen 1.0's and Baichuan 2's ``modeling_*.py``): the
  16-bit head output shifted with a contiguous copy, the loss under CUDA autocast, whose fp32 list holds
  ``cross_entropy`` (its input cast to fp32, written out here since CPU autocast follows another policy);
- ``padded_labels``: today's ``ForCausalLMLoss``: the labels padded and shifted instead of the logits, the
  logits upcast once.

Each runs with the model's outputs converted to fp32 after the forward (accelerate's
``convert_outputs_to_fp32`` under mixed precision) or not, and with the caller dropping the outputs before the
backward (the HF Trainer: ``compute_loss`` returns the loss alone) or holding them through it (a loop that
binds ``outputs = model(...)``). The peak over forward and backward, less the head's weight, its input and
that input's gradient and the labels, divided by the logits, is what ``cost_constants.LOGIT_BYTES`` and
``_TRAINER_LOGIT_BYTES`` take. Needs torch only (no transformers):

    python loss_peaks.py OUT.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch
import torch.nn.functional as F
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.distributed._tools.mem_tracker import MemTracker

BATCH, SEQ, HIDDEN, VOCAB = 2, 512, 256, 32000


def upcast_shift(hidden, weight, labels):
    logits = F.linear(hidden, weight).float()
    shifted = logits[..., :-1, :].contiguous()
    loss = F.cross_entropy(shifted.view(-1, VOCAB), labels[..., 1:].contiguous().view(-1))
    return loss, logits


def remote_autocast(hidden, weight, labels):
    logits = F.linear(hidden, weight)
    shifted = logits[..., :-1, :].contiguous()
    loss = F.cross_entropy(shifted.view(-1, VOCAB).float(), labels[..., 1:].contiguous().view(-1))
    return loss, logits


def padded_labels(hidden, weight, labels):
    logits = F.linear(hidden, weight)
    upcast = logits.float()
    target = F.pad(labels, (0, 1), value=-100)[..., 1:].contiguous()
    loss = F.cross_entropy(upcast.view(-1, VOCAB), target.view(-1), ignore_index=-100, reduction="sum") / SEQ
    return loss, logits


FORMS = {"upcast_shift": upcast_shift, "remote_autocast": remote_autocast, "padded_labels": padded_labels}


def bytes_per_logit(form, convert_outputs: bool, outputs_held: bool) -> float:
    with FakeTensorMode():
        weight = torch.empty(VOCAB, HIDDEN, dtype=torch.bfloat16)
        hidden = torch.empty(BATCH, SEQ, HIDDEN, dtype=torch.bfloat16, requires_grad=True)
        labels = torch.randint(0, VOCAB, (BATCH, SEQ))
        tracker = MemTracker()
        tracker.track_external(weight, hidden, labels)
        with tracker:
            loss, logits = form(hidden, weight, labels)
            if convert_outputs and logits.dtype != torch.float32:
                logits = logits.float()
            if not outputs_held:
                del logits
            loss.backward()
        peak = sum(device.get("Total", 0) for device in tracker.get_tracker_snapshot("peak").values())
    baseline = weight.numel() * 2 + 2 * hidden.numel() * 2 + labels.numel() * 8  # the input's gradient too
    return round((peak - baseline) / (BATCH * SEQ * VOCAB), 3)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path)
    args = parser.parse_args()
    rows = [
        {"form": name, "outputs_converted_to_fp32": convert, "outputs_held_through_backward": held,
         "bytes_per_logit": bytes_per_logit(form, convert, held)}
        for name, form in FORMS.items() for convert in (False, True) for held in (False, True)
    ]
    args.out.write_text(json.dumps({
        "torch": torch.__version__, "shape": {"batch": BATCH, "seq": SEQ, "hidden": HIDDEN, "vocab": VOCAB},
        "unit": "peak bytes per logit over the loss's forward and backward, beyond the head's weight and input",
        "rows": rows,
    }, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
