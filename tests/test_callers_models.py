"""A model handed to a training function by the workspace's other files (analysis/callers.py,
``arguments_elsewhere``): what TL202 reads there, the files it then depends on, and a result kept across
runs or in the server that a change of a caller file makes stale."""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path

from trainlint.analysis.engine import analyze_source
from trainlint.analysis.settings import AnalysisSettings
from trainlint.analysis.workspace import Workspace
from trainlint.cli import main
from trainlint.server.documents import DocumentState
from trainlint.settings import EffectiveSettings

MODELS = textwrap.dedent('''\
    import torch.nn as nn
    import torch.nn.functional as F


    class Scorer(nn.Module):
        def __init__(self, features=128, classes=10):
            super().__init__()
            self.fc = nn.Linear(features, classes)

        def forward(self, x):
            return F.softmax(self.fc(x), dim=-1)


    class Logits(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(128, 10)

        def forward(self, x):
            return self.fc(x)
''')

TRAIN = textwrap.dedent('''\
    import torch
    import torch.nn as nn


    def fit(model, loader, epochs):
        criterion = nn.CrossEntropyLoss()
        optimizer = torch.optim.Adam(model.parameters())
        for _ in range(epochs):
            for x, y in loader:
                optimizer.zero_grad()
                loss = criterion(model(x), y)
                loss.backward()
                optimizer.step()
''')

RUN = textwrap.dedent('''\
    import copy
    from models import Scorer
    from train import fit

    base = Scorer()
    fit(copy.deepcopy(base).cuda(), loader, epochs=3)
''')
RUN_LOGITS = RUN.replace("from models import Scorer", "from models import Logits as Scorer")
# Another script hands the same function a model of another kind.
OTHER_RUN = "import train\nimport models\n\ntrain.fit(models.Logits(), loader, 1)\n"
SAME_RUN = "import train\nimport models\n\ntrain.fit(model=models.Scorer(features=64), loader=loader, epochs=1)\n"


def _project(root: Path, files: dict[str, str]) -> Path:
    for name, text in {"models.py": MODELS, "train.py": TRAIN, **files}.items():
        (root / name).write_text(text, encoding="utf-8")
    return root


def _tl202(root: Path, workspace: Workspace) -> list:
    path = root / "train.py"
    return [f for f in analyze_source(path.read_text(), str(path), workspace=workspace) if f.code == "TL202"]


def test_the_callers_in_other_files_say_what_model_reaches_the_loss(tmp_path):
    root = _project(tmp_path, {"run.py": RUN, "run_small.py": SAME_RUN})
    [finding] = _tl202(root, Workspace([root]))
    assert finding.severity.label == "error" and finding.line == 11
    handed = {(item.path, item.line) for item in finding.evidence if item.path is not None}
    assert (str((root / "run.py").resolve()), 6) in handed
    assert (str((root / "run_small.py").resolve()), 4) in handed
    assert (str((root / "models.py").resolve()), 11) in handed


def test_callers_that_hand_models_of_different_outputs_keep_it_quiet(tmp_path):
    root = _project(tmp_path, {"run.py": RUN, "other_run.py": OTHER_RUN})
    assert _tl202(root, Workspace([root])) == []


def test_a_caller_file_is_a_dependency_and_its_change_is_seen(tmp_path):
    root = _project(tmp_path, {"run.py": RUN, "notes.py": "print('nothing called')\n"})
    workspace = Workspace([root])  # the server's kind: files may change while it is used
    assert len(_tl202(root, workspace)) == 1
    reached = workspace.dependencies(str(root / "train.py"))
    assert str((root / "run.py").resolve()) in reached
    assert str((root / "notes.py").resolve()) not in reached
    (root / "run.py").write_text(RUN_LOGITS, encoding="utf-8")
    workspace.forget_lookups()  # what the server does when a file is saved
    assert _tl202(root, workspace) == []


def test_a_kept_result_is_checked_again_when_a_caller_file_changes(tmp_path, monkeypatch, capsys):
    root = _project(tmp_path, {"run.py": RUN_LOGITS})
    monkeypatch.chdir(root)
    monkeypatch.delenv("TRAINLINT_CACHE_DIR", raising=False)
    monkeypatch.delenv("CI", raising=False)

    def tl202_in_train() -> list[str]:
        main(["check", "--format", "json", "--select", "TL202", "train.py"])
        findings = json.loads(capsys.readouterr().out)["findings"]
        return [finding["severity"] for finding in findings if finding["path"] == "train.py"]

    assert tl202_in_train() == []
    assert tl202_in_train() == []  # from the cache
    (root / "run.py").write_text(RUN, encoding="utf-8")
    stat = (root / "run.py").stat()
    os.utime(root / "run.py", ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    assert tl202_in_train() == ["error"]


def test_the_server_state_sees_a_caller_file_saved_with_another_model(tmp_path):
    root = _project(tmp_path, {"run.py": RUN})
    workspace = Workspace([root])
    state = DocumentState((root / "train.py").as_uri(), root / "train.py", workspace)
    settings = EffectiveSettings(AnalysisSettings())

    def tl202(version: int) -> list[str]:
        return [f.severity.label for f in state.analyse(TRAIN, version, settings).findings if f.code == "TL202"]

    assert tl202(1) == ["error"]
    (root / "run.py").write_text(RUN_LOGITS, encoding="utf-8")
    os.utime(root / "run.py", ns=(1, 1))  # a different stamp even on a coarse clock
    workspace.forget_lookups()  # the server does so when a file is saved
    assert tl202(1) == []
