"""The HF Trainer's evaluation with `compute_metrics`: every evaluation batch's logits stay on the device.

transformers' `Trainer.evaluate` asks its evaluation loop for predictions only where a `compute_metrics` was given
(`prediction_loss_only=True if self.compute_metrics is None else None`, trainer.py line 2920 in transformers 5.25.0).
`evaluation_loop` then adds each batch's logits, padded to the longest batch, to an `EvalLoopContainer`
(trainer.py 3019 and 3060-3067), whose `add` concatenates them with what it holds (`nested_concat`, a new tensor
beside the old one: trainer_pt_utils.py 371-378 and `torch_pad_and_concatenate`). They leave the device every
`eval_accumulation_steps` batches (trainer.py 3090-3092); unset, its default, "the whole predictions are accumulated
on the device accelerator before being moved to the CPU" (training_args.py, the field's documentation). A language
model's logits are the sequence times the vocabulary per sample, in the dtype of its LM head's output (16 bits under
the Trainer's bf16/fp16 autocast or a 16-bit model; fp32 otherwise, and in transformers before 4.46, which upcast
them). The evaluation's size is seldom in the script (a dataset split), so the cost model says what each evaluation
sample adds and how many fit beside the weights and optimizer state; it does not add them to the training peak.
"""

from __future__ import annotations

from typing import Any

from .architectures import Shape
from .cost_constants import TYPICAL_SEQUENCE
from .plan import Plan
from .units import GIB

# TrainingArguments' settings that keep the logits off the device or out of the evaluation: any of them stated (or
# not known) leaves the Trainer's evaluation alone
_SETTLING_ARGUMENTS = ("eval_accumulation_steps", "prediction_loss_only", "batch_eval_metrics", "predict_with_generate")


def keeps_eval_logits(reader: Any, trainer: tuple[Any, Any], arguments: tuple[Any, Any] | None) -> bool:
    """Whether a Trainer construction (``trainer``: its call and chunk) with its training arguments' call
    (``arguments``; None: the Trainer's defaults) keeps the evaluation's logits on the device: a `compute_metrics`, no
    `preprocess_logits_for_metrics`, and arguments that leave every setting of `_SETTLING_ARGUMENTS` at its default.
    ``reader``: the script reader (reading._Reader: its `keyword` and `value`), as lora_config.py takes it, so that this
    module stays in the memory model without syntax trees. Anything unpacked or not known: False."""
    node, chunk = trainer
    metrics = reader.keyword(node, "compute_metrics")
    preprocess = reader.keyword(node, "preprocess_logits_for_metrics")
    if metrics is None or reader.value(metrics, chunk) is None:
        return False
    if preprocess is not None and reader.value(preprocess, chunk) is not None:
        return False
    if any(arg.star == "**" for arg in node.args):
        return False
    if arguments is None:
        return True
    call, home = arguments
    if any(arg.star == "**" for arg in call.args):
        return False
    for name in _SETTLING_ARGUMENTS:
        stated = reader.keyword(call, name)
        if stated is not None and reader.value(stated, home) not in (None, False):
            return False
    return True


def eval_logits_note(plan: Plan, geometry: Shape | None, resident: float, room: float | None) -> str | None:
    """What the Trainer's evaluation keeps on the device per evaluation sample (Plan.trainer_eval_logits), and about
    how many samples fit in ``room`` (what one device can allocate beyond the CUDA context) beside ``resident`` (the
    weights and optimizer state, alive through the evaluation): the last concatenation holds the logits twice."""
    if not plan.trainer_eval_logits or plan.mode != "train" or plan.head != "lm" or geometry is None or not geometry.vocab:
        return None
    tokens = plan.seq_len or TYPICAL_SEQUENCE
    assumed = "" if plan.seq_len else " (the length assumed above)"
    width = 4 if plan.dtype == "fp32" else 2
    per_sample = tokens * geometry.vocab * width
    older = "" if width == 4 else " (16-bit logits; twice that in transformers before 4.46, which upcast them to fp32)"
    fitting = ""
    if room is not None and room > resident:
        fitting = f"; about {int((room - resident) / (2 * per_sample)):,} evaluation samples fit beside the weights and optimizer state"
    return (
        f"evaluation: the Trainer keeps every evaluation batch's logits on the device until the evaluation ends "
        f"(compute_metrics given, eval_accumulation_steps not set): {per_sample / GIB * 1024:.0f} MiB per evaluation sample "
        f"of {tokens:,} tokens{assumed} over the {geometry.vocab:,}-entry vocabulary{older}, twice what it holds while it concatenates "
        f"the last batch{fitting}; not in the training peak above, since the evaluation's size is not in the script; "
        "eval_accumulation_steps= moves them to the CPU every N batches, preprocess_logits_for_metrics= can shrink them "
        "(an argmax keeps one token id per position)"
    )
