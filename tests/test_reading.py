"""Reading a training script's memory-relevant configuration, each value with the line it came from."""

from __future__ import annotations

import json
import subprocess
import textwrap

import pytest
from cli_process import TRAINLINT

from trainlint.analysis.module import ModuleAnalysis
from trainlint.estimator.reading import read_inputs
from trainlint.estimator.script_plan import plan_settings

QLORA = textwrap.dedent(
    """\
    import argparse
    import torch
    from transformers import AutoModelForCausalLM, BitsAndBytesConfig, TrainingArguments
    from peft import LoraConfig

    MODEL_ID = "meta-llama/Meta-Llama-3-8B"
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch-size", type=int, default=4)
    parser.add_argument("--max-seq-length", type=int, default=1024)
    args = parser.parse_args()

    bnb = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_use_double_quant=True)
    model = AutoModelForCausalLM.from_pretrained(MODEL_ID, quantization_config=bnb, attn_implementation="flash_attention_2")
    model.gradient_checkpointing_enable()
    lora = LoraConfig(r=32, target_modules=["q_proj", "v_proj"])
    training_args = TrainingArguments(output_dir="out", per_device_train_batch_size=args.batch_size, bf16=True, optim="adamw_bnb_8bit")
    """
)
PLAIN = textwrap.dedent(
    """\
    from dataclasses import dataclass

    import torch
    from torch.utils.data import DataLoader
    from torchvision import models

    @dataclass
    class Config:
        batch_size: int = 2 * 64
        image_size: int = 224

    cfg = Config()
    model = models.resnet50(num_classes=10).cuda()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    scaler = torch.cuda.amp.GradScaler()
    loader = DataLoader(train_set, batch_size=cfg.batch_size, shuffle=True)
    for x, y in loader:
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = torch.nn.functional.cross_entropy(model(x.cuda()), y.cuda())
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad()
    """
)


def _read(text: str):
    return read_inputs(ModuleAnalysis(text, "train.py"))


def test_a_hugging_face_qlora_script():
    found = _read(QLORA).found()
    assert found["model"].value == "meta-llama/Meta-Llama-3-8B" and found["model"].line == 13
    assert found["batch_size"].value == 4 and found["batch_size"].line == 16
    assert found["seq_len"].value == 1024 and found["seq_len"].line == 9
    assert found["quant"].value == "nf4-dq"
    # no bnb_4bit_compute_dtype: transformers' BitsAndBytesConfig computes in fp32
    assert found["quant_compute_fp32"].value is True and found["quant_compute_fp32"].line == 12
    stated = _read(QLORA.replace("bnb_4bit_use_double_quant=True)", "bnb_4bit_use_double_quant=True, bnb_4bit_compute_dtype=torch.bfloat16)"))
    assert stated.found()["quant_compute_fp32"].value is False
    assert found["lora_rank"].value == 32 and found["lora_targets"].value == ("q_proj", "v_proj")
    assert found["gradient_checkpointing"].value is True
    assert found["attention"].value == "flash"
    assert found["dtype"].value == "amp-bf16"
    assert found["optimizer"].value == "adamw-8bit"
    assert found["mode"].value == "train"


def test_a_trainer_frees_each_steps_graph_and_a_hand_written_loop_is_left_unknown():
    """A Trainer runs each step in a method whose locals go when it returns; a loop that binds `loss`
    keeps the previous step's graph into the next forward, which matters with bitsandbytes' kept inputs."""
    qlora_without_checkpointing = QLORA.replace("model.gradient_checkpointing_enable()\n", "")
    with_trainer = qlora_without_checkpointing + textwrap.dedent(
        """\
        from trl import SFTTrainer
        trainer = SFTTrainer(model=model, args=training_args, train_dataset=data, peft_config=lora)
        trainer.train()
        """
    )
    found = _read(with_trainer).found()
    assert found["previous_graph_alive"].value is False
    assert with_trainer.splitlines()[found["previous_graph_alive"].line - 1].startswith("trainer = SFTTrainer(")
    by_hand = qlora_without_checkpointing + textwrap.dedent(
        """\
        for batch in loader:
            loss = model(**batch).loss
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
        """
    )
    assert "previous_graph_alive" not in _read(by_hand).found()

    from trainlint.estimator.architectures import find_architecture
    from trainlint.estimator.costmodel import estimate
    from trainlint.estimator.plan import Plan

    def high_end(text: str) -> float:
        settings = plan_settings(_read(text), {}).settings
        return estimate(Plan(model=find_architecture("llama-3-8b"), **settings)).allocated.high

    # bitsandbytes' version is unknown: the high end keeps the inputs, twice only for the loop
    assert high_end(by_hand) > high_end(with_trainer) + 1 * 2**30


def test_a_plain_pytorch_script_with_a_config_dataclass():
    found = _read(PLAIN).found()
    assert found["model"].value == "resnet50"
    assert found["batch_size"].value == 128  # 2 * 64, through the dataclass default
    assert found["optimizer"].value == "sgd-momentum"
    assert found["dtype"].value == "amp-bf16", "the autocast dtype, not the GradScaler's default guess"
    assert found["mode"].value == "train"


def test_what_is_not_in_the_script_is_assumed_and_the_command_line_wins():
    planned = plan_settings(_read(PLAIN), {"batch_size": 16})
    assert planned.inputs["batch_size"] == (16, "command line")
    assert planned.inputs["attention"] == ("sdpa", "assumed")
    assert planned.inputs["optimizer"][1].startswith("line 14:")


def test_a_model_class_of_the_script_is_counted_from_its_init_or_not_at_all():
    from trainlint.estimator.custom_models import resolve_model

    script = textwrap.dedent(
        """\
        import torch.nn as nn

        WIDTH = 512

        class Block(nn.Module):
            def __init__(self, dim, expansion=4):
                super().__init__()
                self.norm = nn.LayerNorm(dim)
                self.up = nn.Linear(dim, dim * expansion)
                self.down = nn.Linear(dim * expansion, dim, bias=False)

        class Net(nn.Module):
            def __init__(self, depth=6, classes=10):
                super().__init__()
                self.embed = nn.Embedding(1000, WIDTH)
                self.blocks = nn.ModuleList([Block(WIDTH) for _ in range(depth)])
                self.conv = nn.Conv2d(3, 16, kernel_size=(3, 3), padding=1)
                self.lstm = nn.LSTM(WIDTH, 128, num_layers=2, bidirectional=True)
                self.head = nn.Sequential(nn.Dropout(0.1), nn.Linear(WIDTH, classes))

        model = Net(depth=4)
        """
    )
    module = ModuleAnalysis(script, "train.py")
    read = read_inputs(module)
    assert read.local_model_class.value == "Net" and read.local_model_class.line == 21
    architecture, reason = resolve_model(module, read, plan_settings(read, {}))
    block = 2 * 512 + (512 * 2048 + 2048) + 2048 * 512
    lstm = 2 * (4 * 128 * (512 + 128) + 8 * 128) + 2 * (4 * 128 * (256 + 128) + 8 * 128)
    assert reason is None
    assert architecture.published_params == 1000 * 512 + 4 * block + (3 * 16 * 9 + 16) + lstm + (512 * 10 + 10)
    unresolved = script.replace("nn.Linear(WIDTH, classes)", "nn.Linear(feature_count(), classes)")
    module = ModuleAnalysis(unresolved, "train.py")
    read = read_inputs(module)
    architecture, reason = resolve_model(module, read, plan_settings(read, {}))
    assert architecture is None and "feature_count()" in reason


def test_the_cli_estimates_a_script(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(QLORA, encoding="utf-8")
    result = subprocess.run(
        [*TRAINLINT, "estimate", str(script), "--gpu", "rtx-4090", "--format", "json"],
        capture_output=True, text=True, check=False,
    )
    assert result.returncode in (0, 1), result.stderr
    report = json.loads(result.stdout)
    assert report["model"]["id"] == "llama-3-8b"
    assert report["inputs"]["quant"]["value"] == "nf4-dq"
    assert report["inputs"]["quant"]["source"].startswith("line 12:")
    unknown = tmp_path / "custom.py"
    unknown.write_text("import torch.nn as nn\n\nclass Net(nn.Module):\n    pass\n\nmodel = Net()\n", encoding="utf-8")
    refused = subprocess.run(
        [*TRAINLINT, "estimate", str(unknown), "--format", "json"], capture_output=True, text=True, check=False,
    )
    assert refused.returncode == 2 and json.loads(refused.stdout)["verdict"] == "unknown"


def test_a_deepspeed_config_file_next_to_the_script(tmp_path):
    (tmp_path / "ds_config.json").write_text(json.dumps({
        "zero_optimization": {"stage": 3, "offload_optimizer": {"device": "cpu"}}, "bf16": {"enabled": True},
    }), encoding="utf-8")
    script = QLORA.replace('bf16=True, optim="adamw_bnb_8bit")', 'bf16=True, deepspeed="ds_config.json")')
    found = read_inputs(ModuleAnalysis(script, str(tmp_path / "train.py"))).found()
    assert found["sharding"].value == "zero3" and found["offload"].value == ("optimizer",)
    inline = PLAIN + '\nengine, *_ = deepspeed.initialize(model=model, config={"zero_optimization": {"stage": 2}})\n'
    assert read_inputs(ModuleAnalysis("import deepspeed\n" + inline, "train.py")).found()["sharding"].value == "zero2"


def test_layers_built_by_helper_functions_are_counted():
    from trainlint.estimator.custom_models import resolve_model

    script = textwrap.dedent(
        """\
        import torch.nn as nn

        def conv_block(c_in, c_out):
            return nn.Sequential(nn.Conv2d(c_in, c_out, 3, padding=1, bias=False), nn.BatchNorm2d(c_out), nn.GELU())

        class Generator(nn.Module):
            def __init__(self, nz=100, width=64):
                super().__init__()

                def up(c_in, c_out, stride=2):
                    return [nn.ConvTranspose2d(c_in, c_out, 4, stride, 1, bias=False), nn.BatchNorm2d(c_out), nn.ReLU()]

                self.stem = conv_block(3, width)
                self.net = nn.Sequential(*up(nz, width * 2, stride=1), *up(width * 2, width), nn.Tanh())

        model = Generator(nz=16)
        """
    )
    module = ModuleAnalysis(script, "gan.py")
    read = read_inputs(module)
    architecture, reason = resolve_model(module, read, plan_settings(read, {}))
    stem = 3 * 64 * 9 + 2 * 64
    net = (16 * 128 * 16 + 2 * 128) + (128 * 64 * 16 + 2 * 64)
    assert reason is None and architecture.published_params == stem + net


def _deepspeed_script(config: str) -> str:
    return PLAIN + f'\nimport deepspeed\nengine, *_ = deepspeed.initialize(model=model, config="{config}")\n'


def test_deepspeed_configs_are_read_only_inside_the_workspace(tmp_path):
    import os

    from trainlint.analysis.workspace import Workspace

    stage3 = json.dumps({"zero_optimization": {"stage": 3}})
    workspace, outside = tmp_path / "project", tmp_path / "elsewhere"
    (workspace / "scripts").mkdir(parents=True)
    outside.mkdir()
    (outside / "ds.json").write_text(stage3, encoding="utf-8")
    (workspace / "ds.json").write_text(stage3, encoding="utf-8")
    os.symlink(outside / "ds.json", workspace / "link.json")
    script = workspace / "scripts" / "train.py"
    script.write_text("", encoding="utf-8")

    def sharding(config: str):
        module = ModuleAnalysis(_deepspeed_script(config), str(script), workspace=Workspace([workspace]))
        found = read_inputs(module).found()
        return found["sharding"].value if "sharding" in found else None

    assert sharding("ds.json") == "zero3"  # relative to the workspace root
    assert sharding("../ds.json") == "zero3"  # relative to the script, still inside
    assert sharding(str(workspace / "ds.json")) == "zero3"  # absolute, inside
    assert sharding(str(outside / "ds.json")) is None  # absolute, outside
    assert sharding("../../elsewhere/ds.json") is None  # a `..` chain out of the workspace
    assert sharding("link.json") is None  # a symlink out
    os.mkfifo(workspace / "fifo.json")
    assert sharding("fifo.json") is None  # never blocks on a FIFO


def test_a_huge_or_deeply_nested_deepspeed_config_is_unknown_and_tl601_still_runs(tmp_path):
    (tmp_path / "deep.json").write_text('{"zero_optimization": ' + "[" * 100_000 + "]" * 100_000 + "}", encoding="utf-8")
    (tmp_path / "huge.json").write_text('{"zero_optimization": {"stage": 3}, "pad": "' + "x" * 2_000_000 + '"}', encoding="utf-8")
    script = _FULL_FT.replace("MODEL", "meta-llama/Meta-Llama-3-8B")
    for config in ("deep.json", "huge.json"):
        path = tmp_path / f"train_{config[:4]}.py"
        path.write_text(script + f'engine, *_ = deepspeed.initialize(model=model, config="{config}")\n', encoding="utf-8")
        found = read_inputs(ModuleAnalysis(path.read_text(), str(path))).found()
        assert "sharding" not in found
        result = subprocess.run(
            [*TRAINLINT, "check", "--target-gpu", "t4", "--format", "json", str(path)],
            capture_output=True, text=True, check=False,
        )
        assert "Traceback" not in result.stderr
        findings = json.loads(result.stdout)["findings"]
        assert "TL601" in [finding["code"] for finding in findings], findings
        assert not any("internal error" in finding["message"] for finding in findings), findings


_FULL_FT = textwrap.dedent(
    """\
    import deepspeed
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained("MODEL", torch_dtype=torch.bfloat16)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5)
    for batch in loader:
        model(**batch).loss.backward()
    """
)


def test_absurd_numbers_in_a_script_are_unknown(tmp_path):
    for literal in ("10**100000", "1e999", "float('inf')", "float('nan')", "2**64", "10**30", "-4", "0.5", "9" * 5000, "int(1e400)"):
        script = tmp_path / "train.py"
        script.write_text(
            _FULL_FT.replace("MODEL", "gpt2") + f"batch_size = {literal}\nloader = DataLoader(ds, batch_size=batch_size)\n",
            encoding="utf-8",
        )
        found = read_inputs(ModuleAnalysis(script.read_text(), str(script))).found()
        assert "batch_size" not in found, literal[:20]
        estimate = subprocess.run(
            [*TRAINLINT, "estimate", str(script), "--format", "json"],
            capture_output=True, text=True, check=False, timeout=60,
        )
        assert estimate.returncode in (0, 1) and "Traceback" not in estimate.stderr, (literal, estimate.stderr)
        report = json.loads(estimate.stdout)
        assert report["inputs"]["batch_size"]["source"] == "assumed"
        assert any("not a usable size" in note for note in report["notes"]), (literal, report["notes"])
        check = subprocess.run(
            [*TRAINLINT, "check", "--target-gpu", "t4", "--format", "json", str(script)],
            capture_output=True, text=True, check=False, timeout=60,
        )
        assert "Traceback" not in check.stderr and "internal error" not in check.stdout, (literal, check.stdout, check.stderr)


def test_a_model_class_with_an_astronomical_size_is_unknown():
    from trainlint.estimator.custom_models import resolve_model

    script = "import torch.nn as nn\n\nclass Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
    script += "        self.fc = nn.Linear(1125899906842624, 1125899906842624)\n\nmodel = Net()\n"
    module = ModuleAnalysis(script, "train.py")
    read = read_inputs(module)
    architecture, reason = resolve_model(module, read, plan_settings(read, {}))
    assert architecture is None and "parameters" in reason


def test_accumulation_adapter_dropout_and_the_optimizer_implementation_are_read():
    script = QLORA.replace('optim="adamw_bnb_8bit")', 'optim="adamw_torch_fused", gradient_accumulation_steps=8)')
    script = script.replace("LoraConfig(r=32,", "LoraConfig(r=32, lora_dropout=0.05,")
    found = _read(script).found()
    assert found["grad_accum"].value == 8 and found["lora_dropout"].value == 0.05 and found["foreach"].value is False
    plain = _read(PLAIN.replace("momentum=0.9)", "momentum=0.9, foreach=True)") + "\nACCUMULATION_STEPS = 4\n").found()
    assert plain["foreach"].value is True and plain["grad_accum"].value == 4
    assert _read(QLORA).found()["lora_dropout"].value == 0.0, "peft's default"


def test_modules_trained_beside_the_adapters_are_read_and_counted():
    from trainlint.estimator.architectures import find_architecture, shape
    from trainlint.estimator.costmodel import mechanism_estimate
    from trainlint.estimator.plan import Plan

    script = QLORA.replace("LoraConfig(r=32,", 'LoraConfig(r=32, modules_to_save=["model.embed_tokens", "lm_head", "score"],')
    found = _read(script).found()["modules_to_save"]
    assert (found.value, found.line) == (("embeddings", "lm_head"), 15)
    assert "modules_to_save" not in _read(QLORA.replace("LoraConfig(r=32,", 'LoraConfig(r=32, modules_to_save=["classifier"],')).found()
    llama = find_architecture("llama-3-8b")
    geometry = shape(llama)
    common = dict(model=llama, lora_rank=16, lora_dropout=0.0, dtype="bf16", batch_size=1, seq_len=1024, attention="sdpa")
    plain = mechanism_estimate(Plan(**common)).breakdown
    saved = mechanism_estimate(Plan(**common, modules_to_save=("embeddings", "lm_head"))).breakdown
    copies = geometry.embedding_params + geometry.lm_head_params
    # peft's ModulesToSaveWrapper: a bf16 copy beside the frozen original, its bf16 gradient and AdamW's two bf16 states
    assert saved.weights.estimate - plain.weights.estimate == pytest.approx(2 * copies)
    assert saved.gradients.estimate - plain.gradients.estimate == pytest.approx(2 * copies)
    assert saved.optimizer.estimate - plain.optimizer.estimate == pytest.approx(4 * copies)
    assert saved.activations.estimate - plain.activations.estimate == pytest.approx(2 * 1024 * geometry.hidden), "the head's input"


def test_prepare_model_for_kbit_training_upcasts_and_checkpoints():
    from trainlint.estimator.architectures import find_architecture
    from trainlint.estimator.costmodel import estimate
    from trainlint.estimator.plan import Plan

    script = QLORA.replace("model.gradient_checkpointing_enable()", "model = prepare_model_for_kbit_training(model)")
    found = _read(script).found()
    assert found["kbit_prepared"].value is True and found["gradient_checkpointing"].value is True
    arch = find_architecture("llama-3-8b")
    plain = estimate(Plan(model=arch, lora_rank=16, quant="nf4", seq_len=512, dtype="bf16")).breakdown.weights.estimate
    prepared = estimate(Plan(model=arch, lora_rank=16, quant="nf4", seq_len=512, dtype="bf16", kbit_prepared=True)).breakdown.weights.estimate
    assert prepared - plain == 2 * (128_256 * 4096 * 2)  # embeddings and LM head: 2 more bytes each


# diffusers' DreamBooth scripts: checkpointing behind a store_true option, off unless the run passes it.
_GUARDED_CHECKPOINTING = textwrap.dedent(
    """\
    import argparse
    import torch
    from diffusers import UNet2DConditionModel

    def parse_args():
        parser = argparse.ArgumentParser()
        parser.add_argument("--pretrained_model_name_or_path", type=str, default="stabilityai/stable-diffusion-xl-base-1.0")
        parser.add_argument(
            "--gradient_checkpointing",
            action="store_true",
            help="Whether or not to use gradient checkpointing to save memory at the expense of slower backward pass.",
        )
        parser.add_argument("--train_text_encoder", action="store_true")
        return parser.parse_args()

    def main(args):
        unet = UNet2DConditionModel.from_pretrained(args.pretrained_model_name_or_path, subfolder="unet")
        if args.gradient_checkpointing:
            unet.enable_gradient_checkpointing()
            if args.train_text_encoder:
                text_encoder.gradient_checkpointing_enable()
        optimizer = torch.optim.AdamW(unet.parameters())
        for batch in loader:
            unet(batch).sample.mean().backward()
    """
)


def test_checkpointing_behind_an_option_that_is_off_by_default_is_read_as_off():
    read = _read(_GUARDED_CHECKPOINTING)
    found = read.found()["gradient_checkpointing"]
    assert found.value is False and found.line == 8, "the option's definition, which keeps it off"
    planned = plan_settings(read, {})
    assert any("line 19 (`unet.enable_gradient_checkpointing()`) runs only when `args.gradient_checkpointing` holds" in note
               and "--gradient-checkpointing" in note for note in planned.notes), planned.notes
    stated = plan_settings(read, {"gradient_checkpointing": True})
    assert stated.settings["gradient_checkpointing"] is True and not any("checkpointing" in note for note in stated.notes)


def test_checkpointing_behind_an_option_that_is_on_by_default_or_unconditional_is_on():
    on_by_default = _GUARDED_CHECKPOINTING.replace('action="store_true",\n', 'default=True,\n', 1)
    assert _read(on_by_default).found()["gradient_checkpointing"].value is True
    negated = _GUARDED_CHECKPOINTING.replace('"--gradient_checkpointing",\n        action="store_true"', '"--no_checkpointing",\n        action="store_true"')
    negated = negated.replace("if args.gradient_checkpointing:", "if not args.no_checkpointing:")
    assert _read(negated).found()["gradient_checkpointing"].value is True
    also_unconditional = _GUARDED_CHECKPOINTING.replace("    optimizer = ", "    vae.enable_gradient_checkpointing()\n    optimizer = ")
    assert _read(also_unconditional).found()["gradient_checkpointing"].value is True
    trainer = textwrap.dedent(
        """\
        import argparse
        from transformers import AutoModelForCausalLM, Trainer, TrainingArguments
        parser = argparse.ArgumentParser()
        parser.add_argument("--gradient_checkpointing", action="store_true")
        args = parser.parse_args()
        model = AutoModelForCausalLM.from_pretrained("gpt2")
        training_args = TrainingArguments("out", gradient_checkpointing=args.gradient_checkpointing)
        Trainer(model=model, args=training_args).train()
        """
    )
    found = _read(trainer).found()["gradient_checkpointing"]
    assert found.value is False and found.line == 4


# nanoGPT's train.py: a module-level switch, on by default
_NANOGPT_COMPILE = textwrap.dedent(
    """\
    import torch
    from model import GPTConfig, GPT

    batch_size = 12
    block_size = 1024
    compile = True # use PyTorch 2.0 to compile the model to be faster

    model = GPT(GPTConfig(block_size=block_size))
    optimizer = torch.optim.AdamW(model.parameters(), lr=6e-4)
    if compile:
        print("compiling the model... (takes a ~minute)")
        unoptimized_model = model
        model = torch.compile(model) # requires PyTorch 2.0
    for X, Y in batches:
        logits, loss = model(X, Y)
        loss.backward()
    """
)


_NANOGPT_MODEL = textwrap.dedent(
    """    import torch.nn as nn

    class GPTConfig:
        block_size: int = 1024

    class GPT(nn.Module):
        def __init__(self, config):
            super().__init__()
            self.lm_head = nn.Linear(768, 50304, bias=False)
    """
)


def _nanogpt(tmp_path, script: str):
    from trainlint.analysis.workspace import Workspace

    (tmp_path / "model.py").write_text(_NANOGPT_MODEL, encoding="utf-8")
    (tmp_path / "train.py").write_text(script, encoding="utf-8")
    return read_inputs(ModuleAnalysis(script, str(tmp_path / "train.py"), workspace=Workspace([tmp_path])))


def test_torch_compile_of_the_model_is_read_and_of_anything_else_is_not(tmp_path):
    found = _nanogpt(tmp_path, _NANOGPT_COMPILE).found()["compiled"]
    assert found.value is True and found.line == 13
    assert plan_settings(_nanogpt(tmp_path, _NANOGPT_COMPILE), {}).settings["compiled"] is True
    off = _nanogpt(tmp_path, _NANOGPT_COMPILE.replace("compile = True", "compile = False")).found()["compiled"]
    assert off.value is False and off.line == 6
    loss_only = textwrap.dedent(
        """\
        import torch
        from transformers import AutoModelForCausalLM
        model = AutoModelForCausalLM.from_pretrained("gpt2")
        loss_fn = torch.compile(torch.nn.functional.cross_entropy)
        for batch in loader:
            loss_fn(model(batch["x"]).logits, batch["y"]).backward()
        """
    )
    assert "compiled" not in _read(loss_only).found()
    method = loss_only.replace("loss_fn = torch.compile(torch.nn.functional.cross_entropy)", "model.compile()\nloss_fn = F.cross_entropy")
    assert _read(method).found()["compiled"].value is True
    trainer = QLORA.replace('optim="adamw_bnb_8bit")', 'optim="adamw_bnb_8bit", torch_compile=True)')
    assert _read(trainer).found()["compiled"].line == 16


def test_the_cli_takes_compile_and_a_compiled_step_keeps_less(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(_NANOGPT_COMPILE.replace("compile = True", "compile = False"), encoding="utf-8")
    (tmp_path / "model.py").write_text(_NANOGPT_MODEL, encoding="utf-8")

    def activations(*flags: str):
        result = subprocess.run(
            [*TRAINLINT, "estimate", str(script), "--model", "gpt2", "--seq-len", "1024", "--format", "json", *flags],
            capture_output=True, text=True, check=False,
        )
        report = json.loads(result.stdout)
        inputs = report["inputs"]["compiled"]
        return (inputs["value"], inputs["source"]), report["breakdown"]["activations"]

    (off, off_source), eager = activations()
    assert off is False and off_source.startswith("line 6:")
    (on, on_source), compiled = activations("--compile")
    assert on is True and on_source == "command line" and compiled < 0.8 * eager


_FSDP_SCRIPT = textwrap.dedent(
    """\
    import functools

    import torch
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP, MixedPrecision, ShardingStrategy
    from torch.distributed.fsdp.wrap import transformer_auto_wrap_policy
    from transformers import AutoModelForCausalLM
    from transformers.models.llama.modeling_llama import LlamaDecoderLayer

    bf16_policy = MixedPrecision(param_dtype=torch.bfloat16, reduce_dtype=torch.bfloat16, buffer_dtype=torch.bfloat16)
    model = AutoModelForCausalLM.from_pretrained("meta-llama/Meta-Llama-3-8B")
    model = FSDP(
        model,
        auto_wrap_policy=functools.partial(transformer_auto_wrap_policy, transformer_layer_cls={LlamaDecoderLayer}),
        mixed_precision=bf16_policy,
        sharding_strategy=ShardingStrategy.SHARD_GRAD_OP,
        device_id=torch.cuda.current_device(),
    )
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5)
    for batch in loader:
        model(**batch).loss.backward()
        optimizer.step()
    """
)


def test_fsdp_sharding_strategy_and_mixed_precision_policy_are_read():
    read = _read(_FSDP_SCRIPT)
    found = read.found()
    assert found["sharding"].value == "fsdp-grad-op" and found["sharding"].line == 11
    assert found["fsdp_param_dtype"].value == "bf16" and found["fsdp_param_dtype"].line == 9
    assert found["dtype"].value == "amp-bf16" and found["dtype"].line == 9, "fp32 sharded states, bf16 compute"
    assert any("MixedPrecision(param_dtype=bf16) at line 9" in note for note in read.notes)
    assert plan_settings(read, {}).settings["fsdp_param_dtype"] == "bf16"
    default = _FSDP_SCRIPT.replace("    sharding_strategy=ShardingStrategy.SHARD_GRAD_OP,\n", "")
    assert _read(default).found()["sharding"].value == "fsdp"
    assert _read(_FSDP_SCRIPT.replace("SHARD_GRAD_OP", "NO_SHARD")).found()["sharding"].value == "ddp"
    hybrid = _read(_FSDP_SCRIPT.replace("SHARD_GRAD_OP", "HYBRID_SHARD"))
    assert hybrid.found()["sharding"].value == "fsdp" and any("GPUs of one node" in note for note in hybrid.notes)
    autocast = _FSDP_SCRIPT.replace("    model(**batch).loss.backward()", "    with torch.autocast('cuda', dtype=torch.float16):\n"
                                    "        loss = model(**batch).loss\n    loss.backward()")
    assert _read(autocast).found()["dtype"].value == "amp-fp16", "the autocast decides where there is one"
    fsdp2 = textwrap.dedent(
        """\
        import torch
        from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
        from transformers import AutoModelForCausalLM

        model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.2-1B", torch_dtype=torch.float32)
        mp_policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
        for layer in model.model.layers:
            fully_shard(layer, mp_policy=mp_policy, reshard_after_forward=False)
        fully_shard(model, mp_policy=mp_policy, reshard_after_forward=False)
        """
    )
    found = _read(fsdp2).found()
    assert found["sharding"].value == "fsdp-grad-op" and found["fsdp_param_dtype"].value == "bf16"
    trainer = QLORA.replace('optim="adamw_bnb_8bit")', 'optim="adamw_bnb_8bit", fsdp="shard_grad_op auto_wrap")')
    assert _read(trainer).found()["sharding"].value == "fsdp-grad-op"
    plugin = "from accelerate import FullyShardedDataParallelPlugin\nplugin = FullyShardedDataParallelPlugin(sharding_strategy='SHARD_GRAD_OP')\n"
    assert _read(plugin).found()["sharding"].value == "fsdp-grad-op"


def test_the_cli_takes_the_fsdp_mixed_precision_dtype(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(_FSDP_SCRIPT, encoding="utf-8")

    def weights(*flags: str):
        result = subprocess.run(
            # transformers 4 loads the weights in fp32, so FSDP's param_dtype decides the gathered units' width (from
            # transformers 5 the bf16 checkpoint's weights are bf16 whatever the policy)
            [*TRAINLINT, "estimate", str(script), "--gpu", "8xa100-80gb", "--seq-len", "2048",
             "--library-version", "transformers=4.57.0", "--format", "json", *flags], capture_output=True, text=True, check=False,
        )
        report = json.loads(result.stdout)
        return report["inputs"]["fsdp_param_dtype"], report["breakdown"]["weights"]

    (read, read_weights), (stated, stated_weights) = weights(), weights("--fsdp-param-dtype", "fp32")
    assert read == {"value": "bf16", "source": read["source"]} and read["source"].startswith("line 9:")
    assert stated == {"value": "fp32", "source": "command line"} and stated_weights > read_weights


# The SD3 announcement's way of dropping T5: the pipeline loads without its third text encoder.
_SD3_WITHOUT_T5 = textwrap.dedent(
    """\
    import torch
    from diffusers import StableDiffusion3Pipeline

    pipe = StableDiffusion3Pipeline.from_pretrained(
        "stabilityai/stable-diffusion-3-medium-diffusers",
        text_encoder_3=None,
        tokenizer_3=None,
        torch_dtype=torch.float16,
    )
    pipe.to("cuda")
    image = pipe(prompt="a photo of a cat holding a sign that says hello world", negative_prompt="", num_inference_steps=28,
                 height=1024, width=1024, guidance_scale=7.0).images[0]
    """
)


def test_a_pipeline_component_loaded_as_none_is_left_out(tmp_path):
    found = _read(_SD3_WITHOUT_T5).found()["omitted_components"]
    assert found.value == ("text_encoder_3",) and found.line == 4
    assert "omitted_components" not in _read(_SD3_WITHOUT_T5.replace("    text_encoder_3=None,\n", "")).found()
    script = tmp_path / "sd3.py"
    script.write_text(_SD3_WITHOUT_T5, encoding="utf-8")

    def weights(text: str, *flags: str) -> float:
        script.write_text(text, encoding="utf-8")
        result = subprocess.run([*TRAINLINT, "estimate", str(script), "--gpu", "a100-80gb", "--format", "json", *flags],
                                capture_output=True, text=True, check=False)
        return json.loads(result.stdout)["breakdown"]["weights"]

    whole = weights(_SD3_WITHOUT_T5.replace("    text_encoder_3=None,\n", ""))
    t5_parameters = 4_762_310_656  # T5-XXL's encoder in SD3, in fp16 with its fp32 `wo`
    assert whole - weights(_SD3_WITHOUT_T5) > 2 * t5_parameters
    assert weights(_SD3_WITHOUT_T5.replace("    text_encoder_3=None,\n", ""), "--omit-component", "text_encoder_3") == weights(_SD3_WITHOUT_T5)


# transformers' text-classification example's shape: the Trainer builds the optimizer itself
_TRAINER_DEFAULTS = textwrap.dedent(
    """\
    from transformers import AutoModelForSequenceClassification, Trainer, TrainingArguments

    model = AutoModelForSequenceClassification.from_pretrained("bert-large-uncased", num_labels=2)
    training_args = TrainingArguments(
        output_dir="bert-large-glue",
        per_device_train_batch_size=4,
        learning_rate=2e-5,
        fp16=True,
    )
    trainer = Trainer(model=model, args=training_args, train_dataset=train_dataset)
    trainer.train()
    """
)


def test_trainer_arguments_without_optim_leave_the_optimizer_to_the_trainer():
    found = _read(_TRAINER_DEFAULTS).found()
    assert found["optimizer"].value == "adamw" and found["optimizer"].line == 4
    assert found["trainer_default_optimizer"].value is True
    assert "trainer_default_optimizer" not in plan_settings(_read(_TRAINER_DEFAULTS), {"optimizer": "sgd"}).settings
    named = _read(_TRAINER_DEFAULTS.replace("fp16=True,", 'fp16=True,\n    optim="adamw_torch",')).found()
    assert "trainer_default_optimizer" not in named
    own = _TRAINER_DEFAULTS.replace("trainer = Trainer(model=model, args=training_args,",
                                    "optimizer = torch.optim.AdamW(model.parameters(), lr=2e-5, foreach=False)\n"
                                    "trainer = Trainer(model=model, args=training_args, optimizers=(optimizer, None),")
    found = _read("import torch\n" + own).found()
    assert "trainer_default_optimizer" not in found and found["foreach"].value is False


# torch's tutorial "How to save memory by fusing the optimizer step into the backward pass"
_OPTIMIZER_IN_BACKWARD = textwrap.dedent(
    """\
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.2-1B", torch_dtype=torch.bfloat16).cuda()
    optimizer_dict = {p: torch.optim.AdamW([p], foreach=False) for p in model.parameters()}

    def optimizer_hook(parameter) -> None:
        optimizer_dict[parameter].step()
        optimizer_dict[parameter].zero_grad()

    for p in model.parameters():
        p.register_post_accumulate_grad_hook(optimizer_hook)

    for batch in loader:
        model(**batch).loss.backward()
    """
)
# torchtune's single-device recipes: every feature behind the config the recipe is run with
_TORCHTUNE_RECIPE = textwrap.dedent(
    """\
    from torchtune import config, training

    class FullFinetuneRecipeSingleDevice:
        def __init__(self, cfg):
            self._optimizer_in_bwd = cfg.optimizer_in_bwd
            self._enable_activation_offloading = cfg.get("enable_activation_offloading", False)

        def setup(self, cfg):
            self._model = config.instantiate(cfg.model)
            if self._optimizer_in_bwd:
                training.register_optim_in_bwd_hooks(model=self._model, optim_dict=self._optim_dict)
            self.activations_handling_ctx = training.get_act_offloading_ctx_manager(self._model, self._enable_activation_offloading)

        def train(self):
            for batch in self._dataloader:
                with self.activations_handling_ctx:
                    logits = self._model(**batch)
                self._loss_fn(logits, batch["labels"]).backward()
    """
)


def test_an_optimizer_stepped_in_a_gradient_hook_runs_in_the_backward():
    found = _read(_OPTIMIZER_IN_BACKWARD).found()["optimizer_in_backward"]
    assert found.value is True and found.line == 12
    other_hook = _OPTIMIZER_IN_BACKWARD.replace("    optimizer_dict[parameter].step()\n", "")
    assert "optimizer_in_backward" not in _read(other_hook).found(), "a hook that steps no optimizer"
    assert plan_settings(_read(_OPTIMIZER_IN_BACKWARD), {}).settings["optimizer_in_backward"] is True


def test_torchtune_features_behind_the_recipes_config_are_not_counted_but_named():
    read = _read(_TORCHTUNE_RECIPE)
    assert "optimizer_in_backward" not in read.found() and "activation_offloading" not in read.found()
    notes = plan_settings(read, {}).notes
    assert any(note.startswith("optimizer in backward: line 11") and "`self._optimizer_in_bwd` holds, which the script does "
               "not settle: not counted; give --optimizer-in-backward" in note for note in notes), notes
    assert any(note.startswith("activation offloading: line 12") and "--activation-offloading" in note for note in notes), notes
    assert not plan_settings(read, {"optimizer_in_backward": True, "activation_offloading": True}).notes
    stated = _TORCHTUNE_RECIPE.replace("if self._optimizer_in_bwd:", "if True:").replace(
        "get_act_offloading_ctx_manager(self._model, self._enable_activation_offloading)",
        "get_act_offloading_ctx_manager(self._model, True)")
    found = _read(stated).found()
    assert found["optimizer_in_backward"].line == 11 and found["activation_offloading"].line == 12
    with_context = "import torch\nfrom torchtune.training import OffloadActivations\n" + _OPTIMIZER_IN_BACKWARD.split("\n", 2)[2].replace(
        "    model(**batch).loss.backward()", "    with OffloadActivations():\n        loss = model(**batch).loss\n    loss.backward()")
    assert _read(with_context).found()["activation_offloading"].value is True


def test_the_cli_takes_the_optimizer_in_the_backward_and_activation_offloading():
    def breakdown(*flags: str) -> dict:
        result = subprocess.run(
            [*TRAINLINT, "estimate", "--model", "llama-3.2-1b", "--dtype", "bf16", "--seq-len", "2048",
             "--batch-size", "4", "--gradient-checkpointing", "--format", "json", *flags], capture_output=True, text=True, check=False,
        )
        report = json.loads(result.stdout)
        return {"inputs": report["inputs"], **report["breakdown"]}

    plain, in_backward, offloaded = breakdown(), breakdown("--optimizer-in-backward"), breakdown("--activation-offloading")
    assert in_backward["inputs"]["optimizer_in_backward"] == {"value": True, "source": "command line"}
    assert in_backward["optimizer_step"] == 0 and in_backward["gradients"] < plain["gradients"] / 2  # one tensor at a time
    assert offloaded["inputs"]["activation_offloading"] == {"value": True, "source": "command line"}
    assert offloaded["activations"] < plain["activations"]


def test_a_stated_set_to_none_decides_whether_the_gradients_live_through_the_forward():
    """zero_grad(set_to_none=False) keeps every gradient allocated into the next forward; set_to_none=True frees it;
    a bare zero_grad() leaves it to the torch release (unknown: only the high end keeps them)."""
    from trainlint.estimator.architectures import find_architecture
    from trainlint.estimator.costmodel import estimate
    from trainlint.estimator.plan import Plan

    def loop(zero_grad: str) -> str:
        return textwrap.dedent(
            f"""\
            import torch
            from transformers import AutoModelForSequenceClassification
            model = AutoModelForSequenceClassification.from_pretrained("bert-large-uncased").cuda()
            optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5)
            loader = torch.utils.data.DataLoader(data, batch_size=4, shuffle=True)
            for batch in loader:
                model(**batch).loss.backward()
                optimizer.step()
                {zero_grad}
            """
        )

    def allocated(text: str):
        settings = plan_settings(_read(text), {}).settings
        return estimate(Plan(model=find_architecture("bert-large-uncased"), seq_len=512, **settings)).allocated

    in_place = _read(loop("optimizer.zero_grad(set_to_none=False)")).found()["zero_grad_frees"]
    assert in_place.value is False and in_place.line == 9
    assert _read(loop("model.zero_grad(True)")).found()["zero_grad_frees"].value is True
    assert "zero_grad_frees" not in _read(loop("optimizer.zero_grad()")).found()
    gradients = 335_141_888 * 4  # fp32
    frees, kept = allocated(loop("optimizer.zero_grad(set_to_none=True)")), allocated(loop("optimizer.zero_grad(set_to_none=False)"))
    assert kept.estimate == pytest.approx(frees.estimate + gradients, rel=0.01)
    unknown = allocated(loop("optimizer.zero_grad()"))
    assert unknown.estimate == frees.estimate and unknown.high >= kept.high


ACCELERATED_LOOP = textwrap.dedent(
    """\
    import torch
    from accelerate import Accelerator
    from transformers import AutoModelForSequenceClassification


    def train_epoch(model, optimizer, loader, accelerator):
        for batch in loader:
            accelerator.backward(model(**batch).loss)
            optimizer.step()
            optimizer.zero_grad()


    def main():
        accelerator = Accelerator()
        model = AutoModelForSequenceClassification.from_pretrained("bert-large-uncased")
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5)
        loader = torch.utils.data.DataLoader(data, batch_size=4, shuffle=True)
        model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
        train_epoch(model, optimizer, loader, accelerator)
    """
)


def test_a_prepared_optimizers_zero_grad_follows_accelerates_release_not_torchs():
    """accelerate's AcceleratedOptimizer.zero_grad(set_to_none=None) passed set_to_none=False to torch's before accelerate
    0.28.0 (PR 2472), True from it on: an optimizer the Accelerator prepared (here in `main`, stepped in the helper it
    calls) keeps its gradients allocated through the next forward under an older accelerate, whatever torch's default.
    Unknown: the estimate frees them, the high end keeps them. An optimizer not prepared, or a stated set_to_none, is
    torch's as before."""
    from trainlint.estimator.architectures import find_architecture
    from trainlint.estimator.costmodel import estimate
    from trainlint.estimator.plan import Plan
    from trainlint.estimator.versions import settings_for_versions

    found = _read(ACCELERATED_LOOP).found()
    assert found["zero_grad_accelerated"].value is True and found["zero_grad_accelerated"].line == 10
    assert "zero_grad_frees" not in found
    unprepared = ACCELERATED_LOOP.replace("model, optimizer, loader = accelerator.prepare(model, optimizer, loader)",
                                          "model, loader = accelerator.prepare(model, loader)")
    assert "zero_grad_accelerated" not in _read(unprepared).found()
    stated = _read(ACCELERATED_LOOP.replace("optimizer.zero_grad()", "optimizer.zero_grad(set_to_none=True)")).found()
    assert "zero_grad_accelerated" not in stated and stated["zero_grad_frees"].value is True

    assert settings_for_versions({"accelerate": "0.27.2"})["accelerate_zero_grad_frees"] is False
    assert settings_for_versions({"accelerate": "0.28.0"})["accelerate_zero_grad_frees"] is True
    settings = plan_settings(_read(ACCELERATED_LOOP), {}).settings
    assert settings["zero_grad_accelerated"] is True

    def allocated(**releases):
        return estimate(Plan(model=find_architecture("bert-large-uncased"), seq_len=512, **settings,
                             **settings_for_versions(releases))).allocated

    gradients = 335_141_888 * 4  # fp32
    old, new, unknown = allocated(accelerate="0.27.2", torch="2.1.0"), allocated(accelerate="0.28.0", torch="1.13.1"), allocated()
    assert old.estimate == pytest.approx(new.estimate + gradients, rel=0.01)  # torch's own default does not decide
    assert unknown.estimate == new.estimate and unknown.high >= old.high


def test_a_16_bit_base_trained_with_adapters_under_the_trainers_autocast_is_read_as_autocast():
    """`torch_dtype=torch.bfloat16` loads the base in 16 bits and `TrainingArguments(bf16=True)` runs each forward under
    autocast: with adapters that is amp-bf16 (a 16-bit frozen base, adapters casting their inputs to 16 bits), whichever
    line comes first. Without adapters, or under the command line's dtype, the loaded dtype stays."""
    lora = QLORA.replace("quantization_config=bnb,", "torch_dtype=torch.bfloat16,").replace(
        "bnb = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_use_double_quant=True)", "")
    read = plan_settings(_read(lora), {})
    assert read.settings["dtype"] == "amp-bf16"
    assert "line 13" in read.inputs["dtype"][1] and "line 16" in read.inputs["dtype"][1]
    full = lora.replace('lora = LoraConfig(r=32, target_modules=["q_proj", "v_proj"])\n', "")
    assert plan_settings(_read(full), {}).settings["dtype"] == "bf16"
    assert plan_settings(_read(lora), {"dtype": "bf16"}).settings["dtype"] == "bf16"
    fp16 = lora.replace("bf16=True", "fp16=True")
    assert plan_settings(_read(fp16), {}).settings["dtype"] == "amp-fp16"
    assert read.settings["lora_base_16bit"] is True, "the load dtype is the script's"


def test_adapters_under_autocast_over_a_base_loaded_without_a_dtype_cover_an_fp32_base():
    """`from_pretrained` without a dtype: transformers 5 loads the checkpoint's own (16 bits here: the estimate),
    earlier releases fp32, whose frozen linears each save a 16-bit cast of their weight for the backward (the high end);
    the note names the flag that settles it."""
    from trainlint.estimator.architectures import find_architecture, parameter_count
    from trainlint.estimator.costmodel import estimate
    from trainlint.estimator.plan import Plan

    lora = QLORA.replace("quantization_config=bnb,", "").replace(
        "bnb = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_use_double_quant=True)", "")
    read = plan_settings(_read(lora), {"seq_len": 512})
    assert read.settings["dtype"] == "amp-bf16" and "lora_base_16bit" not in read.settings
    model = find_architecture("llama-2-7b")
    unstated = estimate(Plan(model=model, **read.settings))
    sixteen = estimate(Plan(model=model, **read.settings, lora_base_16bit=True)).allocated
    fp32 = estimate(Plan(model=model, **read.settings, lora_base_16bit=False)).allocated
    assert unstated.allocated.estimate == sixteen.estimate and unstated.allocated.high >= fp32.estimate
    assert fp32.estimate > sixteen.estimate + 2 * parameter_count(model) * 1.5  # fp32 weights and their saved casts
    assert any("--library-version transformers=VERSION" in note and "dtype=" in note for note in unstated.assumptions)


def test_a_cast_of_the_loaded_model_sets_the_weights_dtype():
    """`model.to(torch.bfloat16)` after a load without a dtype: the weights are bf16 whatever the release loads;
    `model.float()`: fp32, so no release's default load dtype is assumed."""
    load = textwrap.dedent(
        """\
        import torch
        from transformers import AutoModelForCausalLM

        model = AutoModelForCausalLM.from_pretrained("Qwen/Qwen2.5-0.5B")
        {cast}
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5)
        """
    )
    cast = _read(load.format(cast="model = model.to(torch.bfloat16)")).found()
    assert cast["dtype"].value == "bf16" and cast["dtype"].line == 5
    assert _read(load.format(cast="model.float()")).default_load_dtype is None
    assert _read(load.format(cast="")).default_load_dtype is not None

def _scripts_read_in_tests() -> list[tuple[str, str]]:
    """The bundled examples and every script the estimator's tests and rule examples give the reader."""
    import ast
    from pathlib import Path

    from trainlint.analysis.registry import builtin_rules

    root = Path(__file__).parent
    scripts = [(str(path), path.read_text()) for path in sorted((root.parent / "examples").rglob("*.py"))]
    for name in ("test_reading.py", "test_training_loop_reading.py", "test_unstated_settings.py", "test_diffusion.py", "test_litgpt.py",
                 "test_estimate_output.py", "test_editor_estimate.py", "test_model_configs.py"):
        for node in ast.walk(ast.parse((root / name).read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and "import " in node.value and "\n" in node.value:
                scripts.append((f"{name}:{node.lineno}", textwrap.dedent(node.value)))
    for rule in builtin_rules():  # every rule's examples: training scripts as projects write them
        scripts += [(f"{rule.code} example {index}", textwrap.dedent(example.code))
                    for index, example in enumerate((*rule.MUST_FIRE, *rule.MUST_NOT_FIRE))]
    return scripts


def test_reading_only_the_calls_that_can_tell_something_reads_what_reading_every_call_reads(monkeypatch):
    """The reader keeps, with each scope, the calls its names or keywords can make tell something (a key elsewhere in
    a long file reads none of the others again): every script the tests give it reads the same as with every call."""
    import libcst as cst

    from trainlint.estimator import reading

    def every_call(scope):
        return [(call, None) for call in scope.calls() if isinstance(call.node, cst.Call)]

    scripts = _scripts_read_in_tests()
    assert len(scripts) > 500
    compared = 0
    for where, script in scripts:
        module = ModuleAnalysis(script, "train.py")
        try:
            filtered = read_inputs(module)
        except SyntaxError:
            continue
        for scope in module.all_scopes:  # the same flows, read again without the calls kept with them
            scope.followed.pop(reading._CALLS_READ, None)
        with monkeypatch.context() as patched:
            patched.setattr(reading, "_calls_read", every_call)
            whole = read_inputs(module)
        shown = {name: (found.value, found.line) for name, found in filtered.found().items()}
        assert shown == {name: (found.value, found.line) for name, found in whole.found().items()}, where
        assert (filtered.notes, filtered.setting_notes, filtered.local_class_home) == (whole.notes, whole.setting_notes, whole.local_class_home), where
        compared += bool(shown)
    assert compared > 300
