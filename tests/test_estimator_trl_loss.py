"""TRL's chunked loss (issue 32: what a PEFT LoRA step under today's TRL holds that the estimator did not model): from
TRL 1.7.0 the SFTTrainer's default loss_type is "chunked_nll", which never materialises the logits of the whole batch.
The cost model's term is checked against a replay of TRL's own functions, and a script that leaves the loss to TRL is
estimated with it, the whole logits' loss at the high end, and a stated TRL release deciding."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import textwrap
from pathlib import Path

import msgspec
import pytest
from cli_process import TRAINLINT

from trainlint.analysis.module import ModuleAnalysis
from trainlint.estimator.activation_terms import checkpointed_chunks_bytes
from trainlint.estimator.architectures import Shape, find_architecture, shape
from trainlint.estimator.costmodel import mechanism_estimate
from trainlint.estimator.plan import Plan
from trainlint.estimator.reading import read_inputs
from trainlint.estimator.script_plan import plan_settings
from trainlint.estimator.versions import settings_for_versions

REPLAY = Path(__file__).resolve().parent.parent / "estimator" / "calibration" / "trl_chunked_loss_peaks.json"
QWEN = find_architecture("qwen2.5-0.5b")

SCRIPT = textwrap.dedent(
    """\
    from peft import LoraConfig
    from transformers import AutoModelForCausalLM
    from trl import SFTConfig, SFTTrainer

    model = AutoModelForCausalLM.from_pretrained("Qwen/Qwen2.5-0.5B", torch_dtype="bfloat16")
    config = SFTConfig(output_dir="out", per_device_train_batch_size=8, max_length=1024,
                       gradient_checkpointing=False{extra})
    trainer = SFTTrainer(model=model, args=config, train_dataset=data, peft_config=LoraConfig(r=8))
    trainer.train()
    """
)


def _shape(vocab: int, hidden: int) -> Shape:
    return msgspec.structs.replace(shape(QWEN), vocab=vocab, hidden=hidden)


@pytest.mark.parametrize("row", json.loads(REPLAY.read_text(encoding="utf-8"))["rows"], ids=lambda row: str(row))
def test_the_chunked_loss_term_is_the_replayed_peak_of_trls_own_functions(row):
    """Within 1 % of the peak TRL 1.7.0's `_chunked_cross_entropy_loss` reached on the CPU, frozen head or trained, for
    several chunks and for fewer tokens than one chunk (calibration/trl_chunked_loss_peaks.py)."""
    tokens = row["batch"] * row["seq"]
    term = checkpointed_chunks_bytes(_shape(row["vocab"], row["hidden"]), tokens, 2)
    assert term == pytest.approx(row["peak_bytes"], rel=0.01)


def _plan(script_extra: str = "", **changes) -> Plan:
    planned = plan_settings(read_inputs(ModuleAnalysis(SCRIPT.format(extra=script_extra), "train.py")), {})
    settings = {**planned.settings, "lengths_vary": False, "attention": "sdpa", "lazy_module_loading": True,
                "trainer_fused_adamw": True, "loads_checkpoint_dtype": True}
    settings.update(changes)
    return Plan(model=QWEN, **settings)


def test_a_script_leaving_the_loss_to_trl_is_estimated_chunked_with_the_whole_logits_at_the_high_end():
    plan = _plan()
    assert plan.trl_default_loss is True and plan.loss == "standard"
    default = mechanism_estimate(plan)
    chunked = mechanism_estimate(dataclasses.replace(plan, trl_default_loss=False, loss="checkpointed-chunked"))
    whole = mechanism_estimate(dataclasses.replace(plan, trl_default_loss=False))
    # Qwen2.5-0.5B, 8 x 1,024 tokens: 12 bytes for each of 1.24 billion logits against one chunk's work
    assert whole.allocated.estimate - chunked.allocated.estimate > 10e9
    assert default.allocated.estimate == chunked.allocated.estimate
    assert default.allocated.high == whole.allocated.high and default.allocated.low == chunked.allocated.low
    assert any("TRL's SFTTrainer takes it 256 tokens at a time by default from TRL 1.7" in note for note in default.assumptions)


def test_a_stated_trl_release_decides_the_loss():
    plan = _plan()
    chunked = mechanism_estimate(dataclasses.replace(plan, trl_default_loss=False, loss="checkpointed-chunked"))
    whole = mechanism_estimate(dataclasses.replace(plan, trl_default_loss=False))
    assert mechanism_estimate(dataclasses.replace(plan, **settings_for_versions({"trl": "1.6.0"}))).allocated == whole.allocated
    assert mechanism_estimate(dataclasses.replace(plan, **settings_for_versions({"trl": "1.7.0"}))).allocated == chunked.allocated


def test_a_stated_loss_type_is_read_as_written():
    assert _plan(', loss_type="chunked_nll"').loss == "checkpointed-chunked"
    for extra in (', loss_type="nll"', ", use_liger_kernel=True"):  # Liger's kernel makes TRL's default "nll"
        plan = _plan(extra)
        assert plan.trl_default_loss is False and plan.loss == "standard"


def test_lora_on_the_head_keeps_the_whole_logits_loss_which_trl_requires_there():
    """TRL 1.7's SFTTrainer raises when its chunked default meets an LM head wrapped by a LoRA adapter (the chunked path
    reads the head's weight and would skip the adapter): such a run states loss_type="nll", estimated so."""
    plan = _plan(lora_targets=("q_proj", "v_proj", "lm_head"))
    default = mechanism_estimate(plan)
    whole = mechanism_estimate(dataclasses.replace(plan, trl_default_loss=False))
    assert default.allocated == whole.allocated
    assert any("refuses an LM head that carries a LoRA adapter" in note for note in default.assumptions)


def test_the_command_line_names_the_loss_a_stated_trl_release_picks(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT.format(extra=""), encoding="utf-8")

    def run(release: str) -> dict:
        result = subprocess.run([*TRAINLINT, "estimate", str(script), "--gpu", "a100-80gb", "--format", "json",
                                 "--library-version", f"trl={release}"], capture_output=True, text=True, check=False)
        assert result.returncode == 0, result.stderr
        return json.loads(result.stdout)

    older, newer = run("1.6.0"), run("1.7.0")
    assert older["inputs"]["loss"] == {"value": "standard", "source": "trl 1.6.0's SFTTrainer default"}
    assert newer["inputs"]["loss"] == {"value": "checkpointed-chunked", "source": "trl 1.7.0's SFTTrainer default"}
    assert older["breakdown"]["logits"] > 10 * newer["breakdown"]["logits"]
