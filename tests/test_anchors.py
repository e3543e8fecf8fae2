"""The lines a VRAM estimate belongs to (hover, inlay hints) are found again after every edit, and an
edit deep inside a long ``main()`` re-reads only the statements on its path."""

from __future__ import annotations

import random

from test_splicing import RULES, SETTINGS, _script

from trainlint.analysis.engine import findings_for
from trainlint.analysis.module import ModuleAnalysis
from trainlint.estimator import anchors
from trainlint.estimator.anchors import BATCH_SIZE, MODEL_CLASS, find_anchors

MODEL = '''

class Denoiser(torch.nn.Module):
    def __init__(self, width):
        super().__init__()
        self.proj = torch.nn.Linear(width, width)

    def forward(self, x):
        return self.proj(x)


def setup():
    parser = argparse.ArgumentParser()
    parser.add_argument("--train-batch-size", type=int, default=16)
    parser.add_argument("--max_seq_length", type=int, default=77)
    return parser.parse_args()
'''


def _text() -> str:
    return "import argparse\n" + _script(10) + MODEL


def _analysed(module: ModuleAnalysis) -> ModuleAnalysis:
    findings_for(module, SETTINGS, RULES)
    return module


def test_a_scripts_settings_and_model_class_are_anchors():
    text = _text()
    found = {(anchor.kind, text.split("\n")[anchor.line - 1].strip()) for anchor in find_anchors(_analysed(ModuleAnalysis(text, "train.py")))}
    assert (BATCH_SIZE, "train_dataloader = DataLoader(dataset, batch_size=4)") in found
    assert (BATCH_SIZE, 'parser.add_argument("--train-batch-size", type=int, default=16)') in found
    assert (MODEL_CLASS, "class Denoiser(torch.nn.Module):") in found


def test_after_random_edits_inside_main_the_anchors_are_those_of_a_fresh_analysis():
    rng = random.Random(1202)
    original = text = _text()
    module = _analysed(ModuleAnalysis(text, "train.py"))
    find_anchors(module)
    snippets = [
        "x", "(", ")", " ", "\n                micro_batch_size = 2", "\n                block_size = args.block_size",
        ", batch_size=8", "\n                loader = DataLoader(dataset, batch_size=args.train_batch_size)",
    ]
    for step in range(60):
        if step % 10 == 0:
            text = original
        lines = text.split("\n")
        index = rng.choice([i for i, line in enumerate(lines) if line.startswith("                ")])
        line = lines[index]
        column = rng.randrange(len(line) - len(line.lstrip()), len(line) + 1)
        if rng.random() < 0.75:
            lines[index] = line[:column] + rng.choice(snippets) + line[column:]
        else:
            lines[index] = line[:column] + line[column + rng.randint(1, 8):]
        text = "\n".join(lines)
        module = _analysed(module.updated(text))
        assert find_anchors(module) == find_anchors(_analysed(ModuleAnalysis(text, "train.py")))


def test_a_keystroke_in_main_reads_the_settings_of_the_statements_on_its_path_only(monkeypatch):
    text = _text()
    module = _analysed(ModuleAnalysis(text, "train.py"))
    find_anchors(module)
    read: list[str] = []
    real = anchors._setting

    def counting(node):
        read.append(type(node).__name__)
        return real(node)

    monkeypatch.setattr(anchors, "_setting", counting)
    edited = text.replace("latents * vae.config.scaling_factor", "latents * vae.config.scaling_factors", 1)
    find_anchors(_analysed(module.updated(edited)))
    everything: list[str] = []
    monkeypatch.setattr(anchors, "_setting", lambda node: everything.append(type(node).__name__) or real(node))
    find_anchors(_analysed(ModuleAnalysis(edited, "train.py")))
    assert 0 < len(read) < len(everything) / 10, (len(read), len(everything))
