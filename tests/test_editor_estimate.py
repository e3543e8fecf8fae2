"""The estimate as the editor and the report show it: every input cites a real line of the file, the
model can be named in the editor, and a count is never shown as "0.00B parameters"."""

from __future__ import annotations

import re
import subprocess
import textwrap

from cli_process import TRAINLINT

from trainlint.analysis.module import ModuleAnalysis
from trainlint.estimator.editor import estimate_module, hover_text, inlay_label
from trainlint.linter import Linter
from trainlint.settings import EditorSettings, parse_editor_settings

SCRIPT = textwrap.dedent(
    """\
    import torch
    from transformers import AutoModelForCausalLM, Trainer, TrainingArguments

    # a comment that mentions a backward pass or a Trainer
    model = AutoModelForCausalLM.from_pretrained(MODEL_PATH, torch_dtype=torch.bfloat16)
    args = TrainingArguments(output_dir="out", per_device_train_batch_size=8, bf16=True, gradient_checkpointing=True)
    trainer = Trainer(model=model, args=args, train_dataset=data)
    trainer.train()
    """
)


def test_every_input_cites_a_real_line_of_the_file():
    module = ModuleAnalysis("# trainlint: model=qwen2.5-0.5b\n" + SCRIPT, "train.py")
    estimate = estimate_module(module, "a10g")
    lines = module.text.splitlines()
    assert estimate.report is not None
    for name, (_value, source) in estimate.report.inputs.items():
        match = re.fullmatch(r"line (\d+): `(.*)`", source)
        if source in ("assumed", "command line"):
            continue
        assert match, (name, source)
        number, code = int(match.group(1)), match.group(2)
        assert code.split(" ")[0].rstrip(".") in lines[number - 1], (name, source, lines[number - 1])
    assert estimate.report.inputs["mode"][1].startswith("line 7: `TrainingArguments(")  # the comment line is line 5


def test_the_target_model_setting_names_the_model_a_script_leaves_unknown():
    module = ModuleAnalysis(SCRIPT, "train.py")
    unknown = estimate_module(module, "a10g")
    assert unknown.report is None and unknown.model_unknown
    text = hover_text(unknown, markdown=True)
    assert "`# trainlint: model=NAME`" in text and "`targetModel`" in text and "--model" not in text
    assert inlay_label(unknown).startswith("VRAM: unknown model")
    named = estimate_module(module, "a10g", target_model="Qwen/Qwen2.5-0.5B")
    assert named.report is not None and named.report.inputs["model"] == ("Qwen/Qwen2.5-0.5B", "the targetModel setting")
    commented = estimate_module(ModuleAnalysis("# trainlint: model=gpt2\n" + SCRIPT, "train.py"), "a10g", target_model="qwen2.5-0.5b")
    assert commented.report.plan.model.id == "gpt2", "the file's own comment wins over the setting"
    settings, problems = parse_editor_settings({"targetModel": "  meta-llama/Meta-Llama-3-8B "})
    assert not problems and settings.target_model == "meta-llama/Meta-Llama-3-8B"
    told: list[str] = []
    assert Linter(problem=told.append).settings_for(None, settings.overrides()).target_model == "meta-llama/Meta-Llama-3-8B"
    _, problems = parse_editor_settings({"targetModel": 8})
    assert problems and "targetModel" in problems[0]
    assert EditorSettings().target_model is None


def test_a_small_script_model_gets_its_count_and_no_verdict_it_cannot_give(tmp_path):
    script = tmp_path / "mlp.py"
    script.write_text(textwrap.dedent(
        """\
        import torch
        import torch.nn as nn

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc1 = nn.Linear(784, 128)
                self.fc2 = nn.Linear(128, 10)

        model = Net()
        for x, y in loader:
            torch.nn.functional.cross_entropy(model(x), y).backward()
        """
    ), encoding="utf-8")
    result = subprocess.run([*TRAINLINT, "estimate", str(script), "--gpu", "t4"],
                            capture_output=True, text=True, check=False)
    assert result.returncode == 2, "activations of a script's own model are not modelled: no verdict"
    assert "Net: 101,770 parameters" in result.stdout and "0.00B" not in result.stdout
    assert "still too big" not in result.stdout and "verdict UNKNOWN" in result.stdout


def test_the_editor_shows_what_must_fit_and_names_the_cache_of_varying_lengths():
    # whether the Trainer's samples vary in length is not in the script: the reserved peak's high end counts the
    # cache of shorter steps, which the allocator frees before a request fails; the inlay and the verdict do not
    script = SCRIPT.replace("per_device_train_batch_size=8", "per_device_train_batch_size=1")
    module = ModuleAnalysis("# trainlint: model=qwen2.5-0.5b\nmax_seq_length = 1024\n" + script, "train.py")
    estimate = estimate_module(module, "a100-80gb")
    assert estimate.report is not None
    result = estimate.report.result
    assert result.plan.seq_len == 1024
    assert result.cached.high > 0 and result.process.high > result.needed.high
    high = re.search(r"\((\S+)–(\S+)\)", inlay_label(estimate))
    assert high is not None and float(high.group(2)) == round(result.needed.high / 2**30)
    assert "more reserved (segments of shorter steps" in hover_text(estimate, markdown=False)
