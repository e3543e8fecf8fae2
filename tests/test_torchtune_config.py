"""`trainlint estimate CONFIG.yaml`: a torchtune recipe's configuration read for what it says about memory,
each value with its line; a YAML file that is not one is refused in a line, and odd YAML never crashes."""

from __future__ import annotations

import json
import subprocess
import textwrap

import pytest
from cli_process import TRAINLINT

from trainlint.estimator.script_plan import plan_settings
from trainlint.estimator.torchtune_config import NotAConfig, parse, read_config

# The shape of torchtune's single-device LoRA configurations (model builder, tokenizer, dataset, optimizer, loss,
# the memory switches at the end).
LORA_SINGLE_DEVICE = textwrap.dedent(
    """\
    # LoRA fine-tuning of Llama 3.1 8B on one GPU, for lora_finetune_single_device.py
    output_dir: /tmp/torchtune/llama3_1_8B/lora_single_device

    model:
      _component_: torchtune.models.llama3_1.lora_llama3_1_8b
      lora_attn_modules: ['q_proj', 'v_proj', 'output_proj']
      apply_lora_to_mlp: True
      apply_lora_to_output: False
      lora_rank: 8  # higher: more memory
      lora_alpha: 16
      lora_dropout: 0.0

    tokenizer:
      _component_: torchtune.models.llama3.llama3_tokenizer
      path: /tmp/Meta-Llama-3.1-8B-Instruct/original/tokenizer.model
      max_seq_len: 2048

    checkpointer:
      _component_: torchtune.training.FullModelHFCheckpointer
      checkpoint_dir: /tmp/Meta-Llama-3.1-8B-Instruct/
      checkpoint_files: [
        model-00001-of-00004.safetensors,
        model-00002-of-00004.safetensors
      ]
      output_dir: ${output_dir}

    dataset:
      _component_: torchtune.datasets.alpaca_cleaned_dataset
      packed: True
    batch_size: 2

    optimizer:
      _component_: torch.optim.AdamW
      fused: True
      lr: 3e-4
    loss:
      _component_: torchtune.modules.loss.LinearCrossEntropyLoss

    epochs: 1
    gradient_accumulation_steps: 8
    compile: False

    device: cuda
    dtype: bf16

    enable_activation_checkpointing: True
    enable_activation_offloading: False
    """
)


def _found(text: str) -> dict:
    return {name: (found.value, found.line) for name, found in read_config(text).found().items()}


def test_a_lora_configuration_is_read_with_its_lines():
    found = _found(LORA_SINGLE_DEVICE)
    assert found["model"] == ("llama-3.1-8b", 5)
    assert found["lora_rank"] == (8, 9) and found["lora_dropout"] == (0.0, 11)
    assert found["lora_targets"] == (("q_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"), 6)
    assert found["seq_len"] == (2048, 16) and found["batch_size"] == (2, 30) and found["grad_accum"] == (8, 40)
    assert found["dtype"] == ("bf16", 44) and found["optimizer"] == ("adamw", 33) and found["foreach"] == (False, 34)
    assert found["loss"] == ("projected-chunked", 37) and found["mode"] == ("train", 32)
    assert found["gradient_checkpointing"] == (True, 46) and found["activation_offloading"] == (False, 47)
    assert found["compiled"] == (False, 41) and "quant" not in found and "sharding" not in found
    assert found["attention"] == ("sdpa", 5), "torchtune's attention modules call SDPA: no eager high end"
    assert found["lengths_vary"] == (False, 29), "packed samples are all max_seq_len long"
    assert found["previous_graph_alive"] == (False, 36), "the recipe's _loss_step deletes the outputs before the backward"
    assert found["zero_grad_frees"][0] is True, "the recipes call zero_grad(set_to_none=True) after each step"
    assert found["model_code"] == ("torchtune", 5), "torchtune's modules: adapters in the model's dtype"
    no_dropout = _found(LORA_SINGLE_DEVICE.replace("  lora_dropout: 0.0\n", ""))
    assert no_dropout["lora_dropout"] == (0.0, 5), "the builders' default, lora_dropout=0.0"


def test_torchtunes_memory_switches_qlora_and_the_lm_head():
    full = LORA_SINGLE_DEVICE.replace("lora_llama3_1_8b", "llama3_1_8b").replace("gradient_accumulation_steps: 8", "gradient_accumulation_steps: 1")
    full += "optimizer_in_bwd: True\n"
    full = full.replace("compile: False", "compile: True").replace("enable_activation_offloading: False", "enable_activation_offloading: True")
    found = _found(full)
    assert found["optimizer_in_backward"] == (True, 48) and found["compiled"] == (True, 41)
    assert found["activation_offloading"] == (True, 47) and "lora_rank" not in found
    qlora = _found(LORA_SINGLE_DEVICE.replace("lora_llama3_1_8b", "qlora_llama3_1_8b"))
    assert qlora["quant"] == ("nf4-dq", 5) and qlora["quant_keeps_inputs"] == (False, 5), "torchao's LinearNF4 saves no input"
    assert qlora["kbit_prepared"] == (False, 5), "torchtune does not use peft: nothing casts the base to fp32"
    head = _found(LORA_SINGLE_DEVICE.replace("apply_lora_to_output: False", "apply_lora_to_output: True"))
    assert head["lora_targets"][0][-1] == "lm_head"
    paged = _found(LORA_SINGLE_DEVICE.replace("torch.optim.AdamW", "bitsandbytes.optim.PagedAdamW8bit"))
    assert paged["optimizer"] == ("paged-adamw-8bit", 33)


def test_a_distributed_configuration_shards_and_an_unpacked_dataset_is_a_cap():
    distributed = "# Config for multi-device LoRA finetuning in lora_finetune_distributed.py\n" + LORA_SINGLE_DEVICE.split("\n", 1)[1]
    assert _found(distributed)["sharding"] == ("fsdp", 1)
    grad_op = _found(LORA_SINGLE_DEVICE + "fsdp_cpu_offload: True\nfsdp_reshard_after_forward: False\n")
    assert grad_op["sharding"] == ("fsdp-grad-op", 48) and grad_op["offload"] == (("optimizer", "params"), 48)
    unpacked = read_config(LORA_SINGLE_DEVICE.replace("packed: True", "packed: False"))
    assert any("max_seq_len (line 16) caps each sample" in note for note in unpacked.notes)
    assert unpacked.found()["lengths_vary"].value is True, "each batch padded to its own longest: the lengths vary"
    default = read_config(LORA_SINGLE_DEVICE.replace("  packed: True\n", ""))
    assert (default.found()["lengths_vary"].value, default.found()["lengths_vary"].line) == (True, 27)
    several = read_config(LORA_SINGLE_DEVICE.replace("  _component_: torchtune.datasets.alpaca_cleaned_dataset\n  packed: True",
                                                     "  - _component_: torchtune.datasets.alpaca_cleaned_dataset"))
    assert "lengths_vary" not in several.found(), "a list of datasets is not read"
    open_length = read_config(LORA_SINGLE_DEVICE.replace("max_seq_len: 2048", "max_seq_len: null"))
    assert "seq_len" not in open_length.found()
    assert any("max_seq_len is not set" in note for note in plan_settings(open_length, {}).notes)
    assert not any("max_seq_len" in note for note in plan_settings(open_length, {"seq_len": 1024}).notes)


def test_a_builder_outside_the_catalog_and_a_yaml_that_is_no_torchtune_configuration():
    other = read_config(LORA_SINGLE_DEVICE.replace("llama3_1.lora_llama3_1_8b", "llama4.lora_llama4_scout_17b_16e"))
    assert "model" not in other.found()
    assert any("lora_llama4_scout_17b_16e (line 5) is not in the catalog: give --model" in note for note in other.notes)
    with pytest.raises(NotAConfig):
        read_config("name: CI\non:\n  push:\n    branches: [main]\njobs:\n  test:\n    runs-on: ubuntu-latest\n")


@pytest.mark.parametrize("text", [
    "model: &base\n  _component_: torchtune.models.llama3_1.lora_llama3_1_8b\nother: *base\n",
    "model: {_component_: torchtune.models.llama3_1.llama3_1_8b}\nbatch_size: [\n",
    "model:\n\t_component_: torchtune.models.llama3_1.llama3_1_8b\n",
    "model:\n  _component_: torchtune.models.llama3_1.lora_llama3_1_8b\n  lora_rank: |\n    8\n",
    "".join(f"{' ' * depth}k{depth}:\n" for depth in range(200)) + "optimizer_in_bwd: True\n",
    "\x00\x01 binary: [[[]]]]\n- - -\n: :\n",
])
def test_odd_yaml_is_left_unread_never_a_crash(text):
    try:
        read_config(text)
    except NotAConfig:
        pass
    assert isinstance(parse(text), dict)


def test_the_cli_estimates_a_torchtune_configuration(tmp_path):
    config = tmp_path / "8B_qlora_single_device.yaml"
    config.write_text(LORA_SINGLE_DEVICE.replace("lora_llama3_1_8b", "qlora_llama3_1_8b"), encoding="utf-8")
    result = subprocess.run(
        [*TRAINLINT, "estimate", str(config), "--gpu", "rtx-4090", "--format", "json"],
        capture_output=True, text=True, check=False,
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["model"]["id"] == "llama-3.1-8b"
    assert report["inputs"]["quant"] == {"value": "nf4-dq", "source": "line 5: `_component_: torchtune.models.llama3_1.qlora_llama3_1_8b`"}
    assert report["inputs"]["gradient_checkpointing"]["source"] == "line 46: `enable_activation_checkpointing: True`"
    workflow = tmp_path / "ci.yml"
    workflow.write_text("name: CI\njobs:\n  test:\n    runs-on: ubuntu-latest\n", encoding="utf-8")
    refused = subprocess.run([*TRAINLINT, "estimate", str(workflow)], capture_output=True, text=True, check=False)
    assert refused.returncode == 2 and "not a torchtune configuration" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1 and "Traceback" not in refused.stderr
