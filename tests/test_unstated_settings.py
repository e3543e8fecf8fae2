"""Settings nobody stated widen the interval to their alternatives, keep today's choice as the estimate, and the
report names the assumption and what settles it (issue 32): the attention kernel, the CUDA context's kernel images,
a model run by its own code, the KV cache an inference forward returns, and the dtype `from_pretrained` loads."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import textwrap

import msgspec
import pytest
from cli_process import TRAINLINT

from trainlint.analysis.module import ModuleAnalysis
from trainlint.estimator.architectures import find_architecture
from trainlint.estimator.costmodel import mechanism_estimate
from trainlint.estimator.model_configs import architecture_from_config
from trainlint.estimator.plan import Interval, Plan
from trainlint.estimator.reading import read_inputs
from trainlint.estimator.script_plan import plan_settings
from trainlint.estimator.units import GIB
from trainlint.estimator.unstated import EAGER_KERNEL_IMAGES_BYTES
from trainlint.estimator.versions import settings_for_versions

QWEN = find_architecture("qwen2.5-7b")


def read_script(text: str):
    return read_inputs(ModuleAnalysis(text, "train.py"))


def _plan(**changes) -> Plan:
    settings = {"model": QWEN, "batch_size": 1, "seq_len": 4096, "dtype": "bf16", "lora_rank": 8, "lengths_vary": False,
                "lazy_module_loading": True}
    settings.update(changes)
    return Plan(**settings)


def test_an_unstated_attention_kernel_keeps_sdpa_at_the_estimate_and_eager_at_the_high_end():
    sdpa, eager, unstated = (mechanism_estimate(_plan(attention=kernel)) for kernel in ("sdpa", "eager", None))
    assert unstated.process.estimate == sdpa.process.estimate
    assert unstated.process.low == sdpa.process.low
    assert unstated.process.high == eager.process.high > sdpa.process.high + 10 * GIB  # 28 heads' scores at 4,096 tokens
    assert unstated.breakdown.activations.high == eager.breakdown.activations.high
    assert any("attention kernel not stated" in note and "--attention" in note for note in unstated.assumptions)
    assert not any("attention kernel not stated" in note for note in sdpa.assumptions)


def test_a_stated_transformers_release_picks_the_attention_kernel_nobody_named():
    sdpa, eager = (mechanism_estimate(_plan(attention=kernel)) for kernel in ("sdpa", "eager"))
    current = mechanism_estimate(_plan(attention=None, **settings_for_versions({"transformers": "4.40.0"})))
    older = mechanism_estimate(_plan(attention=None, **settings_for_versions({"transformers": "4.35.2"})))
    assert current.process == sdpa.process  # SDPA by default from 4.36: nothing left to cover
    assert older.process == eager.process  # before, eager attention with every head's scores
    assert not any("attention kernel not stated" in note for note in (*current.assumptions, *older.assumptions))


def test_a_family_whose_sdpa_came_later_runs_eager_attention_on_the_releases_before():
    """BERT's modeling file has SDPA from transformers 4.41.0: a BERT under 4.40.2 keeps every head's attention
    probabilities (batch x heads x seq^2, with its dropout's output and mask), and the remedy names the release."""
    from trainlint.estimator.hardware import resolve_target
    from trainlint.estimator.report import build

    bert = find_architecture("bert-large-uncased")
    settings = {"model": bert, "batch_size": 4, "seq_len": 512, "dtype": "fp32", "attention": None, "lengths_vary": False}
    assert settings_for_versions({"transformers": "4.40.2"}, "bert")["sdpa_dispatch"] is False
    assert settings_for_versions({"transformers": "4.41.0"}, "bert")["sdpa_dispatch"] is True
    assert settings_for_versions({"transformers": "4.40.2"}, "llama")["sdpa_dispatch"] is True  # from 4.36
    older = mechanism_estimate(Plan(**settings, **settings_for_versions({"transformers": "4.40.2"}, "bert")))
    newer = mechanism_estimate(Plan(**settings, **settings_for_versions({"transformers": "4.41.0"}, "bert")))
    assert older.process == mechanism_estimate(Plan(**{**settings, "attention": "eager"})).process
    assert newer.process == mechanism_estimate(Plan(**{**settings, "attention": "sdpa"})).process
    probabilities = 4 * 16 * 512 * 512 * 24  # batch x heads x seq^2 x layers
    assert older.breakdown.activations.estimate - newer.breakdown.activations.estimate > 8 * probabilities
    assert any("SDPA only from 4.41.0" in note for note in older.assumptions)
    report = build(Plan(**settings, **settings_for_versions({"transformers": "4.40.2"}, "bert")), resolve_target("v100-16gb"), {})
    assert any(remedy.change.startswith("SDPA (transformers 4.41.0 or later") for remedy in report.remedies)


def test_the_estimate_command_names_the_kernel_the_stated_release_picks():
    shown = subprocess.run(
        [*TRAINLINT, "estimate", "--model", "qwen2.5-7b", "--seq-len", "4096", "--lora-rank", "8", "--dtype", "bf16",
         "--gpu", "H100-80GB", "--library-version", "transformers=4.30.0"],
        capture_output=True, text=True, check=False,
    ).stdout
    assert "attention: eager — transformers 4.30.0's default" in shown, shown


def test_a_script_that_names_no_attention_kernel_leaves_it_unstated_and_one_that_does_is_read():
    unstated = plan_settings(read_script("model = AutoModelForCausalLM.from_pretrained('Qwen/Qwen2.5-7B')\n"), {})
    assert unstated.settings["attention"] is None
    assert unstated.inputs["attention"] == ("sdpa", "assumed")  # the estimate's note says the high end is eager
    stated = plan_settings(read_script(
        "model = AutoModelForCausalLM.from_pretrained('Qwen/Qwen2.5-7B', attn_implementation='sdpa')\n"), {})
    assert stated.settings["attention"] == "sdpa"
    assert plan_settings(read_script("x = 1\n"), {"attention": "eager"}).settings["attention"] == "eager"


def test_the_cuda_context_loads_every_kernel_image_at_the_high_end_until_torch_says_it_loads_them_lazily():
    context = 0.14 * GIB
    unknown = mechanism_estimate(_plan(lazy_module_loading=None, zero_grad_frees=True), context)  # torch 2.x's zero_grad
    lazy = mechanism_estimate(_plan(**settings_for_versions({"torch": "2.1.0"})), context)
    eager = mechanism_estimate(_plan(**settings_for_versions({"torch": "1.12.1"})), context)
    assert settings_for_versions({"torch": "2.1.0"})["lazy_module_loading"] is True
    assert lazy.process.high - lazy.reserved.high == pytest.approx(context)
    assert eager.process.estimate - eager.reserved.estimate == pytest.approx(context + EAGER_KERNEL_IMAGES_BYTES)
    assert unknown.process.estimate == lazy.process.estimate
    assert unknown.process.high == pytest.approx(lazy.process.high + EAGER_KERNEL_IMAGES_BYTES)
    assert any("lazy module loading" in note and "--library-version torch=VERSION" in note for note in unknown.assumptions)
    # a context measured for the run is the run's, whatever the torch version
    measured = mechanism_estimate(_plan(lazy_module_loading=None), Interval.exact(1.3 * GIB))
    assert measured.process.high - measured.reserved.high == pytest.approx(1.3 * GIB)


def test_a_model_running_its_own_code_spans_a_lean_implementation_and_eager_layers_around_transformers():
    full = {"lora_rank": None, "seq_len": 2048}
    transformers = mechanism_estimate(_plan(**full))
    own = mechanism_estimate(_plan(model_code="own", **full))
    compiled = mechanism_estimate(_plan(compiled=True, **full))
    eager = mechanism_estimate(_plan(attention="eager", **full))
    assert own.process.estimate == transformers.process.estimate
    assert own.process.low == compiled.process.low < transformers.process.low
    assert own.process.high == eager.process.high > transformers.process.high
    assert any("own code" in note for note in own.assumptions)


def test_an_inference_forward_keeps_the_kv_cache_it_returns_unless_use_cache_is_false():
    infer = {"mode": "infer", "lora_rank": None, "seq_len": 4096, "batch_size": 8}
    cached = mechanism_estimate(_plan(use_cache=True, **infer))
    uncached = mechanism_estimate(_plan(use_cache=False, **infer))
    unknown = mechanism_estimate(_plan(**infer))
    # Qwen2.5 7B: 28 layers x 4 KV heads x 128 x 2 (keys, values) x 2 bytes per token
    per_token = 28 * 4 * 128 * 2 * 2
    assert cached.allocated.estimate - uncached.allocated.estimate == pytest.approx(per_token * 4096 * 8, rel=0.01)
    assert unknown.allocated.estimate == cached.allocated.estimate and unknown.allocated.low == uncached.allocated.low
    assert any("--no-use-cache" in note for note in unknown.assumptions)
    script = textwrap.dedent("""\
        model = AutoModelForCausalLM.from_pretrained('Qwen/Qwen2.5-7B', use_cache=False)
        """)
    assert plan_settings(read_script(script), {}).settings["use_cache"] is False


def test_the_command_line_reports_the_unstated_settings_and_settles_them():
    def run(*flags: str) -> dict:
        result = subprocess.run(
            [*TRAINLINT, "estimate", "--model", "qwen2.5-0.5b", "--mode", "infer", "--seq-len", "4096", "--batch-size", "8",
             "--dtype", "bf16", "--gpu", "a100-80gb", "--format", "json", *flags],
            capture_output=True, text=True, check=False,
        )
        assert result.returncode == 0, result.stderr
        return json.loads(result.stdout)

    unstated = run()
    settled = run("--no-use-cache", "--attention", "sdpa", "--library-version", "torch=2.4.0")
    assert unstated["breakdown"]["kv_cache"] > 0 and settled["breakdown"]["kv_cache"] == 0
    assert any("attention kernel not stated" in note for note in unstated["notes"])
    assert any("--library-version torch=VERSION" in note and "lazy module loading" in note for note in unstated["notes"])
    assert not any("attention kernel not stated" in note or "lazy module loading" in note or "--no-use-cache" in note
                   for note in settled["notes"])
    assert settled["peak"]["process"]["high"] < unstated["peak"]["process"]["high"]


TRL_SCRIPT = textwrap.dedent(
    """\
    from peft import LoraConfig
    from transformers import AutoModelForCausalLM
    from trl import SFTConfig, SFTTrainer

    model = AutoModelForCausalLM.from_pretrained("Qwen/Qwen2.5-7B", torch_dtype="bfloat16")
    config = SFTConfig(output_dir="out", per_device_train_batch_size=4, max_length=2048{extra})
    trainer = SFTTrainer(model=model, args=config, train_dataset=data, peft_config=LoraConfig(r=8))
    trainer.train()
    """
)


def test_trls_sft_config_checkpoints_by_default_from_0_22_and_the_high_end_does_not():
    """TRL 0.22 made gradient_checkpointing=True the default of its SFTConfig: a config that leaves it out is
    checkpointed at the estimate and not at the high end, and a stated TRL release decides; a config that states it,
    or transformers' TrainingArguments (default off), is read as written."""
    planned = plan_settings(read_script(TRL_SCRIPT.format(extra="")), {})
    assert planned.settings["gradient_checkpointing"] is True and planned.settings["trl_default_checkpointing"] is True
    # TRL's default loss, also left to TRL here, is settled to the whole logits' (test_estimator_trl_loss.py)
    plan = Plan(model=QWEN, **{**planned.settings, "lengths_vary": False, "attention": "sdpa", "trl_default_loss": False})
    default = mechanism_estimate(plan)
    on = mechanism_estimate(dataclasses.replace(plan, trl_default_checkpointing=False))
    off = mechanism_estimate(dataclasses.replace(plan, trl_default_checkpointing=False, gradient_checkpointing=False))
    assert default.allocated.estimate == on.allocated.estimate < off.allocated.estimate
    assert default.allocated.high == off.allocated.high and default.allocated.low == on.allocated.low
    assert any("TRL's SFTConfig turns it on by default from TRL 0.22" in note for note in default.assumptions)
    older = mechanism_estimate(dataclasses.replace(plan, **settings_for_versions({"trl": "0.21.0"})))
    newer = mechanism_estimate(dataclasses.replace(plan, **settings_for_versions({"trl": "0.22.0"})))
    assert older.allocated == off.allocated and newer.allocated == on.allocated
    stated = plan_settings(read_script(TRL_SCRIPT.format(extra=", gradient_checkpointing=False")), {}).settings
    assert stated["gradient_checkpointing"] is False and "trl_default_checkpointing" not in stated
    transformers_args = TRL_SCRIPT.format(extra="").replace("SFTConfig(", "TrainingArguments(")
    assert "gradient_checkpointing" not in plan_settings(read_script(transformers_args), {}).settings



def test_trls_sft_config_trains_in_bf16_on_samples_truncated_at_1024_tokens_by_default():
    """An SFTConfig that names neither bf16 nor fp16 trains under bf16 autocast (TRL 0.19 on), and one without max_length
    truncates its samples at 1,024 tokens: read so, each with a note saying it is TRL's default; stated values win, and
    transformers' TrainingArguments keeps its own defaults (fp32, no length); a batch size stated nowhere is the
    default per_device_train_batch_size, 8."""
    script = TRL_SCRIPT.replace(", max_length=2048{extra}", "{extra}")
    planned = plan_settings(read_script(script.format(extra="")), {})
    assert planned.settings["seq_len"] == 1024 and planned.settings["dtype"] == "amp-bf16"
    assert planned.settings["lora_base_16bit"] is True  # the bf16 load under TRL's autocast
    assert any("TRL's SFTConfig truncates samples at max_length=1024" in note for note in planned.notes)
    assert any("bf16 autocast: TRL's SFTConfig default" in note for note in planned.notes)
    stated = plan_settings(read_script(script.format(extra=", bf16=False, fp16=False, max_length=512")), {}).settings
    assert stated["seq_len"] == 512 and stated["dtype"] == "bf16"  # the load's dtype, no autocast
    transformers_args = plan_settings(read_script(script.format(extra="").replace("SFTConfig(", "TrainingArguments(")), {})
    assert "seq_len" not in transformers_args.settings and transformers_args.settings["dtype"] == "bf16"
    assert planned.settings["batch_size"] == 4 and transformers_args.settings["batch_size"] == 4
    unbatched = script.format(extra="").replace(", per_device_train_batch_size=4", "")
    assert plan_settings(read_script(unbatched), {}).settings["batch_size"] == 8  # TrainingArguments' default
    no_config = "\n".join(line for line in script.replace("args=config, ", "").splitlines() if "SFTConfig(" not in line)
    defaults = plan_settings(read_script(no_config.format(extra="")), {}).settings  # TRL builds a default SFTConfig
    assert defaults["seq_len"] == 1024 and defaults["dtype"] == "amp-bf16" and defaults["trl_default_checkpointing"] is True


FULL_FINETUNE = textwrap.dedent(
    """\
    from transformers import AutoModelForCausalLM, Trainer, TrainingArguments

    model = AutoModelForCausalLM.from_pretrained("Qwen/Qwen2.5-7B"{load})
    args = TrainingArguments(output_dir="out", per_device_train_batch_size=2, bf16=True, optim="adamw_torch_fused")
    Trainer(model=model, args=args, train_dataset=data).train()
    """
)
LOOP_IN_MAIN = textwrap.dedent(
    """\
    import torch
    from transformers import AutoModelForCausalLM


    def main():
        model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.2-1B").cuda()
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5)
        for batch in loader:
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = model(**batch).loss
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
    """
)
LOADED_IN_A_CLASS = textwrap.dedent(
    """\
    import torch
    from transformers import AutoModelForCausalLM


    class Finetuner:
        def __init__(self):
            self.model = AutoModelForCausalLM.from_pretrained("Qwen/Qwen2.5-0.5B")
            self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=1e-5)

        def step(self, batch):
            self.model(**batch).loss.backward()
            self.optimizer.step()
            self.optimizer.zero_grad()
    """
)


def _full_plan(script: str) -> Plan:
    planned = plan_settings(read_script(script), {})
    model = find_architecture(planned.model_name or "")
    return Plan(model=model, **{**planned.settings, "seq_len": 2048, "lengths_vary": False, "attention": "sdpa",
                                "lazy_module_loading": True, "zero_grad_frees": True})


def test_a_model_loaded_without_a_dtype_is_in_its_checkpoints_dtype_from_transformers_5_and_fp32_before():
    """transformers 5 loads `from_pretrained` in the checkpoint's dtype (dtype="auto"): Qwen2.5's bf16 checkpoint under
    the Trainer's bf16=True trains its weights, gradients and AdamW state in bf16, which the estimate takes; the fp32
    load of earlier releases (autocast over fp32 weights) is the high end, and a stated release decides."""
    plan = _full_plan(FULL_FINETUNE.format(load=""))
    assert plan.dtype == "amp-bf16" and plan.default_load_dtype and plan.model is not None
    assert plan.model.checkpoint_dtype == "bf16"
    unstated = mechanism_estimate(plan)
    settled = dataclasses.replace(plan, default_load_dtype=False)
    sixteen, fp32 = mechanism_estimate(dataclasses.replace(settled, dtype="bf16")), mechanism_estimate(settled)
    assert unstated.breakdown.weights.estimate == sixteen.breakdown.weights.estimate < fp32.breakdown.weights.estimate
    assert unstated.allocated.estimate == sixteen.allocated.estimate and unstated.allocated.high == fp32.allocated.high
    assert any("the checkpoint's bf16" in note and "--library-version transformers=VERSION" in note for note in unstated.assumptions)
    older = mechanism_estimate(dataclasses.replace(plan, **settings_for_versions({"transformers": "4.57.1"})))
    newer = mechanism_estimate(dataclasses.replace(plan, **settings_for_versions({"transformers": "5.0.0"})))
    assert older.allocated == fp32.allocated and newer.allocated == sixteen.allocated
    stated = dataclasses.replace(_full_plan(FULL_FINETUNE.format(load=', torch_dtype="auto"')), lengths_vary=False)
    assert stated.loads_checkpoint_dtype is True and mechanism_estimate(stated).allocated == sixteen.allocated


@pytest.mark.parametrize("script", [LOOP_IN_MAIN, LOADED_IN_A_CLASS], ids=["loop in main", "method of a class"])
def test_a_load_without_a_dtype_is_read_wherever_the_script_loads_the_model(script):
    planned = plan_settings(read_script(script), {"model": "Qwen/Qwen2.5-0.5B"} if "class" in script else {})
    assert planned.settings["default_load_dtype"] is True and "loads_checkpoint_dtype" not in planned.settings


@pytest.mark.parametrize("load", [", torch_dtype=torch.float32", ", **model_kwargs",
                                  ", quantization_config=BitsAndBytesConfig(load_in_4bit=True)", ").float(",
                                  ").to('cuda', dtype=torch.float32"])
def test_a_stated_dtype_keywords_passed_on_a_quantised_load_and_a_cast_leave_nothing_to_the_release(load):
    assert "default_load_dtype" not in plan_settings(read_script(FULL_FINETUNE.format(load=load)), {}).settings


def test_a_model_cast_to_16_bits_after_loading_is_read_as_16_bit_weights():
    script = FULL_FINETUNE.format(load=").to(torch.device('cuda'), torch.bfloat16").replace("bf16=True, ", "")
    assert plan_settings(read_script(script), {}).settings["dtype"] == "bf16"


def test_an_fp32_checkpoint_loads_in_fp32_either_way_and_an_unknown_one_keeps_fp32_at_the_estimate():
    """BERT's checkpoint is fp32: nothing changes with the release. A model whose checkpoint dtype nobody knows keeps the
    fp32 load at the estimate, a 16-bit checkpoint at the low end."""
    bert = find_architecture("bert-large-uncased")
    assert bert is not None and bert.checkpoint_dtype == "fp32"
    plan = Plan(model=bert, batch_size=4, seq_len=512, dtype="amp-fp16", attention="sdpa", lengths_vary=False,
                lazy_module_loading=True, default_load_dtype=True)
    assert mechanism_estimate(plan).allocated == mechanism_estimate(dataclasses.replace(plan, default_load_dtype=False)).allocated
    unknown = dataclasses.replace(plan, model=msgspec.structs.replace(QWEN, checkpoint_dtype=None), dtype="amp-bf16")
    result, fp32 = mechanism_estimate(unknown), mechanism_estimate(dataclasses.replace(unknown, default_load_dtype=False))
    assert result.allocated.estimate == fp32.allocated.estimate and result.allocated.low < fp32.allocated.low
    assert any("the checkpoint's not known" in note for note in result.assumptions)


def test_a_config_states_the_checkpoints_dtype_and_an_fp16_one_under_a_grad_scaler_is_named():
    config = {"model_type": "llama", "hidden_size": 2048, "num_hidden_layers": 16, "num_attention_heads": 32,
              "num_key_value_heads": 8, "intermediate_size": 8192, "vocab_size": 128256, "max_position_embeddings": 8192}
    assert architecture_from_config(config, "local", "a test").checkpoint_dtype is None
    assert architecture_from_config({**config, "torch_dtype": "float16"}, "local", "a test").checkpoint_dtype == "fp16"
    local = architecture_from_config({**config, "dtype": "bfloat16"}, "local", "a test")
    assert local.checkpoint_dtype == "bf16"
    scaled = Plan(model=msgspec.structs.replace(local, checkpoint_dtype="fp16"), batch_size=1, seq_len=1024, dtype="amp-fp16",
                  attention="sdpa", lengths_vary=False, lazy_module_loading=True, default_load_dtype=True)
    assert any("GradScaler refuses fp16 gradients" in note for note in mechanism_estimate(scaled).assumptions)
