"""Evidence from the files that call in (analysis/callers.py): a pass of one file whose callers are in
another, run there with grad on or under ``no_grad()``; what the index reads, its limits, and a result
kept across runs that a change of a caller file makes stale."""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path

import pytest

import trainlint.analysis.callers as callers
from trainlint.analysis.engine import analyze_source
from trainlint.analysis.settings import AnalysisSettings
from trainlint.analysis.workspace import Workspace
from trainlint.cli import main
from trainlint.server.documents import DocumentState
from trainlint.settings import EffectiveSettings

SAMPLING = textwrap.dedent('''\
    import torch


    class Sampler:
        def __init__(self, generator, latent_dim, device):
            self.generator = generator
            self.latent_dim = latent_dim
            self.device = device

        def sample_grid(self, rows):
            grid = []
            for _ in range(rows):
                noise = torch.randn(rows, self.latent_dim, device=self.device)
                grid.append(self.generator(noise).cpu().numpy())
            return len(grid)
''')

# A script: its module level runs the sampler with grad on.
RUN = textwrap.dedent('''\
    import torch

    from models import Generator
    from sampling import Sampler

    generator = Generator().cuda()
    sampler = Sampler(generator, 128, "cuda")
    for epoch in range(10):
        sampler.sample_grid(8)
''')
RUN_WITHOUT_GRAD = RUN.replace("    sampler.sample_grid(8)\n", "    with torch.no_grad():\n        sampler.sample_grid(8)\n")

# Calls a method of the same name, but imports nothing from sampling.py.
UNRELATED = textwrap.dedent('''\
    from plotting import Grid

    Grid().sample_grid(4)
''')


def _project(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (root / name).write_text(text, encoding="utf-8")
    return root


def _tl102(root: Path, workspace: Workspace) -> list:
    path = root / "sampling.py"
    return [f for f in analyze_source(path.read_text(), str(path), workspace=workspace) if f.code == "TL102"]


def test_a_caller_in_another_file_with_grad_on_makes_the_pass_a_warning(tmp_path):
    root = _project(tmp_path, {"sampling.py": SAMPLING, "run.py": RUN})
    [finding] = _tl102(root, Workspace([root]))
    assert finding.severity.label == "warning"
    assert "`run.py` calls it on line 9 with grad on (a script's module level)" in finding.message
    assert any(item.path == str((root / "run.py").resolve()) and item.line == 9 for item in finding.evidence)


def test_callers_that_all_turn_grad_off_keep_the_pass_quiet(tmp_path):
    root = _project(tmp_path, {"sampling.py": SAMPLING, "run.py": RUN_WITHOUT_GRAD})
    assert _tl102(root, Workspace([root])) == []


def test_without_a_caller_found_the_pass_stays_a_note(tmp_path):
    root = _project(tmp_path, {"sampling.py": SAMPLING, "plots.py": UNRELATED})
    [finding] = _tl102(root, Workspace([root]))
    assert finding.severity.label == "note"
    assert str((root / "plots.py").resolve()) not in Workspace([root]).dependencies(str(root / "sampling.py"))


def test_a_caller_whose_own_callers_decide_is_named_in_the_note(tmp_path):
    helper = "from sampling import Sampler\n\n\ndef preview(sampler):\n    return sampler.sample_grid(8)\n"
    root = _project(tmp_path, {"sampling.py": SAMPLING, "preview.py": helper})
    [finding] = _tl102(root, Workspace([root]))
    assert finding.severity.label == "note"
    assert "`preview.py` calls it on line 5 without `no_grad()`" in finding.message
    assert any(item.path == str((root / "preview.py").resolve()) and item.line == 5 for item in finding.evidence)


def test_a_caller_file_is_a_dependency_and_is_read_again_when_it_changes(tmp_path):
    root = _project(tmp_path, {"sampling.py": SAMPLING, "run.py": RUN, "notes.py": "print('no calls here')\n"})
    workspace = Workspace([root])  # the server's kind: files may change while it is used
    assert _tl102(root, workspace)[0].severity.label == "warning"
    reached = workspace.dependencies(str(root / "sampling.py"))
    assert str((root / "run.py").resolve()) in reached
    assert str((root / "notes.py").resolve()) not in reached, "a file that does not call the name is not read"
    (root / "run.py").write_text(RUN_WITHOUT_GRAD, encoding="utf-8")
    workspace.forget_lookups()  # what the server does when a file is saved
    assert _tl102(root, workspace) == []


def test_a_kept_result_is_checked_again_when_a_caller_file_changes(tmp_path, monkeypatch, capsys):
    root = _project(tmp_path, {"sampling.py": SAMPLING, "run.py": RUN})
    monkeypatch.chdir(root)
    monkeypatch.delenv("TRAINLINT_CACHE_DIR", raising=False)
    monkeypatch.delenv("CI", raising=False)

    def tl102_in_sampling() -> list[str]:
        main(["check", "--format", "json", "--select", "TL102", "sampling.py"])
        findings = json.loads(capsys.readouterr().out)["findings"]
        return [finding["severity"] for finding in findings if finding["path"] == "sampling.py"]

    assert tl102_in_sampling() == ["warning"]
    assert tl102_in_sampling() == ["warning"]  # from the cache
    (root / "run.py").write_text(RUN_WITHOUT_GRAD, encoding="utf-8")
    stat = (root / "run.py").stat()
    os.utime(root / "run.py", ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    assert tl102_in_sampling() == []


def test_a_broken_file_among_the_callers_is_skipped(tmp_path):
    root = _project(tmp_path, {
        "sampling.py": SAMPLING,
        "aaa_broken.py": "from sampling import Sampler\nSampler(None, 1, 'cpu').sample_grid(2\n",
        "run.py": RUN,
    })
    [finding] = _tl102(root, Workspace([root]))
    assert finding.severity.label == "warning" and "`run.py` calls it" in finding.message


@pytest.mark.parametrize("limit", ["MAX_FILES", "MAX_CALLER_FILES"])
def test_past_its_limits_the_index_finds_nothing_and_the_pass_stays_a_note(tmp_path, monkeypatch, limit):
    root = _project(tmp_path, {"sampling.py": SAMPLING, "aaa.py": UNRELATED, "run.py": RUN})
    # listed in path order: aaa.py, run.py, sampling.py; one file listed, or one analysed, is aaa.py
    monkeypatch.setattr(callers, limit, 1)
    [finding] = _tl102(root, Workspace([root]))
    assert finding.severity.label == "note"


def test_a_large_file_is_not_read_for_its_calls(tmp_path, monkeypatch):
    root = _project(tmp_path, {"sampling.py": SAMPLING, "run.py": RUN})
    monkeypatch.setattr(callers, "MAX_CALLER_BYTES", len(RUN) - 1)
    [finding] = _tl102(root, Workspace([root]))
    assert finding.severity.label == "note"


def test_the_server_state_sees_a_caller_file_saved_with_no_grad(tmp_path):
    root = _project(tmp_path, {"sampling.py": SAMPLING, "run.py": RUN})
    workspace = Workspace([root])
    state = DocumentState((root / "sampling.py").as_uri(), root / "sampling.py", workspace)
    settings = EffectiveSettings(AnalysisSettings())

    def tl102(version: int) -> list[str]:
        return [f.severity.label for f in state.analyse(SAMPLING, version, settings).findings if f.code == "TL102"]

    assert tl102(1) == ["warning"]
    (root / "run.py").write_text(RUN_WITHOUT_GRAD, encoding="utf-8")
    os.utime(root / "run.py", ns=(1, 1))  # a different stamp even on a coarse clock
    workspace.forget_lookups()  # the server does so when a file is saved
    assert tl102(1) == []


LANGUAGE_MODEL = textwrap.dedent('''\
    import torch
    import torch.nn as nn


    class TinyLM(nn.Module):
        def __init__(self, vocab, dim=64):
            super().__init__()
            self.embed = nn.Embedding(vocab, dim)
            self.drop = nn.Dropout(0.1)
            self.head = nn.Linear(dim, vocab)

        def forward(self, tokens):
            return self.head(self.drop(self.embed(tokens)))

        @torch.no_grad()
        def generate(self, tokens, steps):
            for _ in range(steps):
                next_token = self(tokens)[:, -1].argmax(dim=-1, keepdim=True)
                tokens = torch.cat([tokens, next_token], dim=1)
            return tokens
''')

# A sampling script: its statements are scopes of their own; the switch to eval is an earlier one.
SAMPLE_SCRIPT = textwrap.dedent('''\
    import torch

    from lm import TinyLM

    model = TinyLM(256)
    model.load_state_dict(torch.load("ckpt.pt"))
    model.eval()
    print(model.generate(torch.zeros(1, 1, dtype=torch.long), 100))
''')


def test_a_script_that_switches_the_module_to_eval_first_keeps_its_own_inference_method_quiet(tmp_path):
    root = _project(tmp_path, {"lm.py": LANGUAGE_MODEL, "sample.py": SAMPLE_SCRIPT})
    path = root / "lm.py"

    def tl208() -> list[str]:
        findings = analyze_source(path.read_text(), str(path), workspace=Workspace([root]))
        return [f.severity.label for f in findings if f.code == "TL208"]

    assert tl208() == []
    (root / "sample.py").write_text(SAMPLE_SCRIPT.replace("model.eval()\n", ""), encoding="utf-8")
    assert tl208() == ["note"], "no switch before the call: its mode is not known, as before"


# A framework class that wraps whatever model it is handed; a package script builds it by its dotted path.
FRAMEWORK = textwrap.dedent('''\
    import torch
    from torch import nn


    class BagTrainer:
        def __init__(self, model, loader):
            self.model = nn.DataParallel(model)
            self.loader = loader
            self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.1)

        def train_model(self, epochs):
            for epoch in range(epochs):
                self.model.train()
                for bags, labels in self.loader:
                    loss = nn.functional.cross_entropy(self.model(bags), labels)
                    self.optimizer.zero_grad()
                    loss.backward()
                    self.optimizer.step()

        def infer(self, bag):
            with torch.no_grad():
                return self.model(bag).argmax(-1).tolist()
''')
MODELS = textwrap.dedent('''\
    from torch import nn


    class BagAttention(nn.Module):
        def __init__(self, vocab_size, num_classes):
            super().__init__()
            self.embed = nn.EmbeddingBag(vocab_size, 64)
            self.drop = nn.Dropout(0.5)
            self.fc = nn.Linear(64, num_classes)

        def forward(self, bag):
            return self.fc(self.drop(self.embed(bag)))
''')
SCRIPT = textwrap.dedent('''\
    import relnet

    model = relnet.models.BagAttention(30000, 53)
    trainer = relnet.framework.BagTrainer(model, loader)
    trainer.train_model(60)
''')


def test_a_construction_in_a_script_that_imports_only_the_package_tells_the_layers_handed_in(tmp_path):
    package = tmp_path / "relnet"
    package.mkdir()
    _project(package, {"__init__.py": "from . import framework, models\n", "framework.py": FRAMEWORK, "models.py": MODELS})
    _project(tmp_path, {"run.py": SCRIPT})
    workspace = Workspace([tmp_path])
    path = package / "framework.py"

    def tl208() -> list:
        return [f for f in analyze_source(path.read_text(), str(path), workspace=workspace) if f.code == "TL208"]

    [finding] = tl208()
    assert finding.severity.label == "warning"
    assert any(item.path == str((tmp_path / "run.py").resolve()) and item.line == 4 for item in finding.evidence)
    (tmp_path / "run.py").write_text(SCRIPT.replace("relnet.models.BagAttention(30000, 53)", "nn.Sequential(nn.EmbeddingBag(30000, 64), nn.Linear(64, 53))").replace("import relnet\n", "import relnet\nfrom torch import nn\n"), encoding="utf-8")
    workspace.forget_lookups()  # what the server does when a file is saved
    assert tl208() == [], "a model with no dropout or batch-norm behaves the same in both modes"
