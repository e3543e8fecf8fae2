"""Reading a training script's memory-relevant configuration, each value with the line it came from."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

from trainlint.analysis.module import ModuleAnalysis
from trainlint.estimator.reading import plan_settings, read_inputs

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
    assert found["lora_rank"].value == 32 and found["lora_targets"].value == ("q_proj", "v_proj")
    assert found["gradient_checkpointing"].value is True
    assert found["attention"].value == "flash"
    assert found["dtype"].value == "amp-bf16"
    assert found["optimizer"].value == "adamw-8bit"
    assert found["mode"].value == "train"


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
        [sys.executable, "-m", "trainlint", "estimate", str(script), "--gpu", "rtx-4090", "--format", "json"],
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
        [sys.executable, "-m", "trainlint", "estimate", str(unknown), "--format", "json"], capture_output=True, text=True, check=False,
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
