"""The HF Trainer's evaluation with compute_metrics keeps every batch's logits on the device (estimator/trainer_eval.py)."""

from __future__ import annotations

import dataclasses
import textwrap

import pytest

from trainlint.analysis.module import ModuleAnalysis
from trainlint.estimator.architectures import find_architecture, shape
from trainlint.estimator.costmodel import mechanism_estimate
from trainlint.estimator.hardware import resolve_target
from trainlint.estimator.plan import Plan
from trainlint.estimator.reading import read_inputs
from trainlint.estimator.script_plan import plan_settings

# the shape of transformers' run_clm-style fine-tuning script: a metric over the evaluation split's predictions
_CAUSAL_LM = textwrap.dedent(
    """\
    import evaluate
    import numpy as np
    from transformers import AutoModelForCausalLM, Trainer, TrainingArguments

    metric = evaluate.load("accuracy")


    def compute_metrics(eval_preds):
        logits, labels = eval_preds
        predictions = np.argmax(logits, axis=-1)
        return metric.compute(predictions=predictions[:, :-1].reshape(-1), references=labels[:, 1:].reshape(-1))


    model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.2-1B")
    training_args = TrainingArguments(
        output_dir="llama-clm",
        per_device_train_batch_size=4,
        per_device_eval_batch_size=4,
        eval_strategy="epoch",
        bf16=True,
    )
    trainer = Trainer(
        model=model,
        args=training_args,
        train_dataset=tokenized["train"],
        eval_dataset=tokenized["validation"],
        compute_metrics=compute_metrics,
    )
    trainer.train()
    """
)


def _found(text: str):
    return read_inputs(ModuleAnalysis(text, "train.py")).found()


def test_a_trainer_with_compute_metrics_keeps_the_evaluations_logits():
    found = _found(_CAUSAL_LM)
    assert found["trainer_eval_logits"].value is True and found["trainer_eval_logits"].line == 22
    assert plan_settings(read_inputs(ModuleAnalysis(_CAUSAL_LM, "train.py")), {}).settings["trainer_eval_logits"] is True


@pytest.mark.parametrize("change", [
    ('    bf16=True,\n', '    bf16=True,\n    eval_accumulation_steps=8,\n'),
    ('    bf16=True,\n', '    bf16=True,\n    prediction_loss_only=True,\n'),
    ('    bf16=True,\n', '    bf16=True,\n    batch_eval_metrics=True,\n'),
    ('    compute_metrics=compute_metrics,\n',
     '    compute_metrics=compute_metrics,\n    preprocess_logits_for_metrics=lambda logits, labels: logits.argmax(-1),\n'),
    ('    compute_metrics=compute_metrics,\n', '    compute_metrics=None,\n'),
    ('    compute_metrics=compute_metrics,\n', ''),
    ('    bf16=True,\n', '    bf16=True,\n    **extra,\n'),
], ids=["accumulation-steps", "loss-only", "batch-metrics", "preprocessed", "metrics-none", "no-metrics", "unpacked"])
def test_settings_that_move_or_drop_the_logits_leave_the_evaluation_alone(change):
    old, new = change
    assert old in _CAUSAL_LM
    assert "trainer_eval_logits" not in _found(_CAUSAL_LM.replace(old, new))


def test_an_accumulation_left_at_an_options_none_default_still_keeps_them():
    script = "import argparse\nparser = argparse.ArgumentParser()\n" \
             "parser.add_argument('--eval_accumulation_steps', type=int, default=None)\nargs = parser.parse_args()\n"
    script += _CAUSAL_LM.replace("    bf16=True,\n", "    bf16=True,\n    eval_accumulation_steps=args.eval_accumulation_steps,\n")
    assert _found(script)["trainer_eval_logits"].value is True


LLAMA = find_architecture("llama-3.2-1b")


def _plan(**changes) -> Plan:
    settings = {"model": LLAMA, "batch_size": 4, "seq_len": 512, "dtype": "amp-bf16", "attention": "sdpa",
                "trainer_eval_logits": True}
    return Plan(**{**settings, **changes})


def test_the_note_says_what_each_evaluation_sample_adds_and_how_many_fit():
    target = resolve_target("a10g", 1)
    usable = target.usable_bytes_per_device
    result = mechanism_estimate(_plan(), target.gpu.context_bytes, target.gpu.blas_workspace_bytes,
                                target.gpu.compute_capability, usable)
    geometry = shape(LLAMA)
    assert geometry is not None and geometry.vocab == 128_256
    per_sample = 512 * 128_256 * 2  # 16-bit logits under the Trainer's bf16 autocast
    [note] = [note for note in result.assumptions if note.startswith("evaluation:")]
    assert f"{per_sample / 2**20:.0f} MiB per evaluation sample of 512 tokens" in note
    resident = (result.breakdown.weights + result.breakdown.optimizer).estimate
    fitting = int((usable - target.gpu.context_bytes - resident) / (2 * per_sample))
    assert f"about {fitting:,} evaluation samples fit" in note
    # the training peak does not move: the evaluation's size is not in the script
    without = mechanism_estimate(dataclasses.replace(_plan(), trainer_eval_logits=False), target.gpu.context_bytes,
                                 target.gpu.blas_workspace_bytes, target.gpu.compute_capability, usable)
    assert (result.allocated, result.reserved, result.process) == (without.allocated, without.reserved, without.process)
    assert not any(note.startswith("evaluation:") for note in without.assumptions)


def test_fp32_logits_take_four_bytes_and_a_classifier_has_no_vocabulary_to_keep():
    [note] = [note for note in mechanism_estimate(_plan(dtype="fp32")).assumptions if note.startswith("evaluation:")]
    assert f"{512 * 128_256 * 4 / 2**20:.0f} MiB per evaluation sample" in note and "16-bit logits" not in note
    classifier = mechanism_estimate(_plan(head="classifier"))
    assert not any(note.startswith("evaluation:") for note in classifier.assumptions)


def test_an_unknown_length_takes_the_one_the_estimate_assumed():
    [note] = [note for note in mechanism_estimate(_plan(seq_len=None)).assumptions if note.startswith("evaluation:")]
    assert f"{2048 * 128_256 * 2 / 2**20:.0f} MiB per evaluation sample of 2,048 tokens (the length assumed above)" in note
    assert "samples fit" not in note  # no target GPU: nothing to fit them in
