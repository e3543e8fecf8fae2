"""Evidence across files: rules see what a model class, a helper or a loader factory imported from
the user's other files does, in the CLI and in the language server's document state."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from two_file_project import HELPERS_TRAINING_A_MODEL, IMPORTING_THE_HELPER, MODEL, TRAIN

from trainlint.analysis.engine import analyze_source
from trainlint.analysis.settings import AnalysisSettings
from trainlint.analysis.workspace import Workspace
from trainlint.server.documents import DocumentState
from trainlint.settings import EffectiveSettings


def _project(tmp_path: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return tmp_path


def _codes(path: Path, workspace: Workspace | None) -> list[str]:
    return [f.code for f in analyze_source(path.read_text(), str(path), workspace=workspace)]


def test_a_model_class_in_another_file_is_seen_by_the_loss_check(tmp_path):
    root = _project(tmp_path, {"model.py": MODEL, "train.py": TRAIN})
    findings = analyze_source(TRAIN, str(root / "train.py"), workspace=Workspace([root]))
    softmax = [f for f in findings if f.code == "TL202"]
    assert len(softmax) == 1
    assert any(item.path == str((root / "model.py").resolve()) and item.line == 11 for item in softmax[0].evidence)
    assert "TL202" not in _codes(root / "train.py", None), "without the workspace the class is unknown: no finding"


def test_an_import_that_leads_nowhere_is_unknown_never_a_finding(tmp_path):
    root = _project(tmp_path, {"train.py": TRAIN.replace("from model import Net", "from missing_package import Net")})
    assert "TL202" not in _codes(root / "train.py", Workspace([root]))


def test_relative_imports_inside_a_package_resolve(tmp_path):
    train = TRAIN.replace("from model import Net", "from .nets.model import Net")
    root = _project(tmp_path, {
        "project/__init__.py": "", "project/nets/__init__.py": "", "project/nets/model.py": MODEL, "project/train.py": train,
    })
    assert "TL202" in _codes(root / "project" / "train.py", Workspace([root]))


def test_a_helper_that_clears_gradients_in_another_file_counts(tmp_path):
    train = textwrap.dedent(
        """\
        import torch
        from helpers import clear

        for x, y in loader:
            clear(optimizer)
            loss = torch.nn.functional.mse_loss(model(x), y)
            loss.backward()
            optimizer.step()
        """
    )
    helpers = "def clear(optimizer):\n    optimizer.zero_grad(set_to_none=True)\n"
    root = _project(tmp_path, {"helpers.py": helpers, "train.py": train})
    assert "TL201" not in _codes(root / "train.py", Workspace([root]))
    (root / "helpers.py").write_text("def clear(optimizer):\n    pass\n", encoding="utf-8")
    assert "TL201" in _codes(root / "train.py", Workspace([root]))


def test_import_cycles_and_re_exports_do_not_hurt(tmp_path):
    root = _project(tmp_path, {
        "a.py": "from b import helper\nfrom model import Net\n",
        "b.py": "from a import Net\n\ndef helper():\n    return Net()\n",
        "model.py": MODEL,
        "train.py": TRAIN.replace("from model import Net", "from a import Net"),
    })
    assert "TL202" in _codes(root / "train.py", Workspace([root]))


def test_a_star_import_brings_in_the_model_class_and_a_package_may_re_export_it_that_way(tmp_path):
    root = _project(tmp_path, {"model.py": MODEL, "train.py": TRAIN.replace("from model import Net", "from model import *")})
    assert "TL202" in _codes(root / "train.py", Workspace([root]))
    package = _project(tmp_path / "pkg_project", {
        "nets/__init__.py": "from .model import *\n",
        "nets/model.py": MODEL,
        "train.py": TRAIN.replace("from model import Net", "from nets import *"),
    })
    assert "TL202" in _codes(package / "train.py", Workspace([package]))


_LAYERS_WITH_ITS_IMPORTS = """\
import torch
import torch.nn as nn
import torch.nn.functional as F


class ConvBlock(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, 3, padding=1)

    def forward(self, x):
        return F.relu(self.conv(x))
"""
_NET_USING_THE_STAR_IMPORTED_F = """\
import torch.nn as nn

from layers import *


class SegNet(nn.Module):
    def __init__(self, classes):
        super().__init__()
        self.block = ConvBlock(64)
        self.head = nn.Conv2d(64, classes, 1)

    def forward(self, x):
        x = F.dropout2d(self.block(x), p=0.1)
        return self.head(x)
"""


def test_a_module_a_star_import_copies_is_known_by_its_name_there(tmp_path):
    # `F` comes from layers.py's own `import torch.nn.functional as F`: Python's star import copies it
    root = _project(tmp_path, {"layers.py": _LAYERS_WITH_ITS_IMPORTS, "net.py": _NET_USING_THE_STAR_IMPORTED_F})
    findings = analyze_source(_NET_USING_THE_STAR_IMPORTED_F, str(root / "net.py"), workspace=Workspace([root]))
    assert [(f.code, f.line) for f in findings if f.code == "TL211"] == [("TL211", 13)]
    assert "TL211" not in _codes(root / "net.py", None), "without the workspace `F` is unknown: no finding"


def test_an_all_that_leaves_the_import_out_keeps_it_unknown(tmp_path):
    listed = _LAYERS_WITH_ITS_IMPORTS.replace("import torch\n", "import torch\n\n__all__ = ['ConvBlock']\n", 1)
    root = _project(tmp_path, {"layers.py": listed, "net.py": _NET_USING_THE_STAR_IMPORTED_F})
    assert "TL211" not in _codes(root / "net.py", Workspace([root]))
    listing_f = listed.replace("['ConvBlock']", "['ConvBlock', 'F']")
    (root / "layers.py").write_text(listing_f, encoding="utf-8")
    assert "TL211" in _codes(root / "net.py", Workspace([root]))


def test_a_star_import_passed_on_by_a_package_brings_the_module_name_too(tmp_path):
    root = _project(tmp_path, {
        "nets/__init__.py": "from .layers import *\n",
        "nets/layers.py": _LAYERS_WITH_ITS_IMPORTS,
        "net.py": _NET_USING_THE_STAR_IMPORTED_F.replace("from layers import *", "from nets import *"),
    })
    assert "TL211" in _codes(root / "net.py", Workspace([root]))


def test_a_definition_of_the_file_wins_over_a_star_import_of_the_same_name(tmp_path):
    train = TRAIN.replace(
        "from model import Net",
        "from model import *\n\n\nclass Net(torch.nn.Module):\n    def forward(self, x):\n        return x\n",
    )
    root = _project(tmp_path, {"model.py": MODEL, "train.py": train})
    assert "TL202" not in _codes(root / "train.py", Workspace([root]))


def test_an_edit_that_adds_a_star_import_is_seen_by_the_statements_it_did_not_touch(tmp_path):
    without = TRAIN.replace("from model import Net", "")
    root = _project(tmp_path, {"model.py": MODEL, "train.py": without})
    state = DocumentState((root / "train.py").as_uri(), root / "train.py", Workspace([root]))
    settings = EffectiveSettings(AnalysisSettings(), frozenset())
    assert "TL202" not in [f.code for f in state.analyse(without, 1, settings).findings]
    with_star = TRAIN.replace("from model import Net", "from model import *")
    assert "TL202" in [f.code for f in state.analyse(with_star, 2, settings).findings]


def test_the_server_state_sees_a_change_saved_in_the_imported_file(tmp_path):
    root = _project(tmp_path, {"model.py": MODEL, "train.py": TRAIN})
    state = DocumentState((root / "train.py").as_uri(), root / "train.py", Workspace([root]))
    settings = EffectiveSettings(AnalysisSettings())
    assert "TL202" in [f.code for f in state.analyse(TRAIN, 1, settings).findings]
    fixed_model = MODEL.replace("F.softmax(self.fc(x), dim=1)", "self.fc(x)")
    (root / "model.py").write_text(fixed_model, encoding="utf-8")
    os.utime(root / "model.py", ns=(1, 1))  # a different stamp even on a coarse clock
    assert "TL202" not in [f.code for f in state.analyse(TRAIN, 1, settings).findings]


def test_the_cli_checks_a_directory_as_one_workspace_and_names_the_other_file(tmp_path):
    root = _project(tmp_path, {"model.py": MODEL, "train.py": TRAIN})
    result = subprocess.run(
        [sys.executable, "-m", "trainlint", "check", ".", "--format", "json", "--select", "TL202"],
        cwd=root, capture_output=True, text=True, check=False,
    )
    report = json.loads(result.stdout)
    # one bug, seen from both files: the loss call in train.py, and the softmax model.py's forward returns (where
    # the fix goes), each citing the other file
    by_path = {finding["path"]: finding for finding in report["findings"]}
    assert sorted(by_path) == ["model.py", "train.py"] and len(report["findings"]) == 2
    finding = by_path["train.py"]
    assert {"line": 11, "note": finding["evidence"][-1]["note"], "path": "model.py"} in finding["evidence"]
    assert by_path["model.py"]["line"] == 11
    assert "train.py" in {item.get("path") for item in by_path["model.py"]["evidence"]}
    single = subprocess.run(
        [sys.executable, "-m", "trainlint", "check", "train.py", "--format", "json", "--select", "TL202"],
        cwd=root, capture_output=True, text=True, check=False,
    )
    assert len(json.loads(single.stdout)["findings"]) == 1, "one file still resolves its neighbours"


def test_an_evaluation_helper_in_another_file_runs_a_model_that_never_enters_eval_mode(tmp_path):
    utils = textwrap.dedent(
        """\
        import torch


        def evaluate(model, loader):
            with torch.no_grad():
                return sum((model(x).argmax(1) == y).sum().item() for x, y in loader)
        """
    )
    train = textwrap.dedent(
        """\
        from torchvision import models

        from utils import evaluate

        model = models.resnet18(num_classes=10)
        for epoch in range(10):
            train_one_epoch(model)
            print(evaluate(model, val_loader))
        """
    )
    root = _project(tmp_path, {"utils.py": utils, "train.py": train})
    findings = [f for f in analyze_source(train, str(root / "train.py"), workspace=Workspace([root])) if f.code == "TL208"]
    assert [f.line for f in findings] == [8]
    assert any(item.path == str((root / "utils.py").resolve()) for item in findings[0].evidence)
    with_eval = train.replace("    print(evaluate", "    model.eval()\n    print(evaluate")
    assert "TL208" not in [f.code for f in analyze_source(with_eval, str(root / "train.py"), workspace=Workspace([root]))]


def test_a_loader_factory_in_another_file_is_checked_where_it_is_called(tmp_path):
    data = textwrap.dedent(
        """\
        from torch.utils.data import DataLoader
        from torch.utils.data.distributed import DistributedSampler


        def plain_loader(dataset):
            return DataLoader(dataset, batch_size=32, shuffle=True)


        def sharded_loader(dataset):
            return DataLoader(dataset, batch_size=32, sampler=DistributedSampler(dataset))
        """
    )
    train = textwrap.dedent(
        """\
        import torch
        from torch.nn.parallel import DistributedDataParallel as DDP

        from data import plain_loader, sharded_loader

        model = DDP(torch.nn.Linear(8, 2).cuda())
        train_loader = {factory}(train_set)
        for epoch in range(10):
            for x, y in train_loader:
                optimizer.zero_grad()
                torch.nn.functional.mse_loss(model(x), y).backward()
                optimizer.step()
        """
    )
    root = _project(tmp_path, {"data.py": data})
    workspace = Workspace([root])
    plain = train.format(factory="plain_loader")
    assert [f.code for f in analyze_source(plain, str(root / "train.py"), workspace=workspace) if f.code in {"TL501", "TL502"}] == ["TL501"]
    sharded = train.format(factory="sharded_loader")
    [finding] = [f for f in analyze_source(sharded, str(root / "train.py"), workspace=workspace) if f.code in {"TL501", "TL502"}]
    assert finding.code == "TL502" and finding.line == 7
    assert finding.fix is not None and finding.fix.edits[0].new_text == "    train_loader.sampler.set_epoch(epoch)\n"


def test_a_helper_in_another_file_that_leaves_the_model_in_eval_mode(tmp_path):
    utils = textwrap.dedent(
        """\
        import torch


        def validate(model, loader):
            model.eval()
            with torch.no_grad():
                return [model(x) for x, _ in loader]
        """
    )
    train = textwrap.dedent(
        """\
        import torch
        from torchvision import models
        from utils import validate

        model = models.resnet18()
        criterion = torch.nn.CrossEntropyLoss()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for epoch in range(10):
            for x, y in train_loader:
                optimizer.zero_grad()
                loss = criterion(model(x), y)
                loss.backward()
                optimizer.step()
            validate(model, val_loader)
        """
    )
    root = _project(tmp_path, {"utils.py": utils})
    findings = [f for f in analyze_source(train, str(root / "train.py"), workspace=Workspace([root])) if f.code == "TL205"]
    assert [f.line for f in findings] == [14]
    assert "TL205" not in _codes_of(train, root, None)
    restored = utils.replace("    with torch.no_grad():\n        return [model(x) for x, _ in loader]", "    with torch.no_grad():\n        outputs = [model(x) for x, _ in loader]\n    model.train()\n    return outputs")
    (root / "utils.py").write_text(restored, encoding="utf-8")
    assert "TL205" not in _codes_of(train, root, Workspace([root]))


def _codes_of(text: str, root: Path, workspace: Workspace | None) -> list[str]:
    return [f.code for f in analyze_source(text, str(root / "train.py"), workspace=workspace)]


def test_a_model_whose_nn_module_base_is_in_another_file_keeps_its_inference_branch_quiet(tmp_path):
    # detectron2's shape: `class PanopticFPN(GeneralizedRCNN)` with `from .rcnn import GeneralizedRCNN`;
    # the model's own inference method runs with whatever grad mode its caller chose.
    rcnn = textwrap.dedent(
        """\
        from torch import nn

        class GeneralizedRCNN(nn.Module):
            def __init__(self):
                super().__init__()
                self.backbone = nn.Conv2d(3, 8, 3, padding=1)
                self.head = nn.Conv2d(8, 4, 1)
        """
    )
    panoptic = textwrap.dedent(
        """\
        from torch import nn

        from .rcnn import GeneralizedRCNN

        class PanopticFPN(GeneralizedRCNN):
            def __init__(self, sem_seg_head: nn.Module):
                super().__init__()
                self.sem_seg_head = sem_seg_head

            def forward(self, images):
                if not self.training:
                    return self.inference(images)
                return self.sem_seg_head(self.backbone(images)).mean()

            def inference(self, images):
                return self.sem_seg_head(self.backbone(images))
        """
    )
    root = _project(tmp_path, {"meta_arch/__init__.py": "", "meta_arch/rcnn.py": rcnn, "meta_arch/panoptic_fpn.py": panoptic})
    path = root / "meta_arch" / "panoptic_fpn.py"
    assert "TL102" not in _codes(path, Workspace([root]))
    standalone = panoptic.replace("from .rcnn import GeneralizedRCNN", "class GeneralizedRCNN:\n    pass")
    assert "TL102" in [f.code for f in analyze_source(standalone, str(path))], "a class that is no module: its inference method is an evaluation"


def test_a_file_checked_after_an_import_led_to_it_reports_what_it_reports_alone(tmp_path, monkeypatch):
    root = _project(tmp_path, {"a_train.py": IMPORTING_THE_HELPER, "b_helpers.py": HELPERS_TRAINING_A_MODEL, "c_model.py": MODEL})
    monkeypatch.chdir(root)
    for shown_as in ("b_helpers.py", str(root / "b_helpers.py")):  # as `check .` and `check /abs/dir` name it
        shared = Workspace([root])
        analyze_source(IMPORTING_THE_HELPER, "a_train.py", workspace=shared)
        assert shared.checked_analysis(shown_as, HELPERS_TRAINING_A_MODEL) is not None, "the import analysed b_helpers.py"
        after_the_import = analyze_source(HELPERS_TRAINING_A_MODEL, shown_as, workspace=shared)
        alone = analyze_source(HELPERS_TRAINING_A_MODEL, shown_as, workspace=Workspace([root]))
        assert after_the_import == alone
        (softmax,) = [f for f in after_the_import if f.code == "TL202"]
        assert softmax.path == shown_as
        assert {item.path for item in softmax.evidence} == {None, str((root / "c_model.py").resolve())}


def test_an_import_target_whose_text_differs_from_the_checked_text_is_analysed_anew(tmp_path):
    root = _project(tmp_path, {"a_train.py": IMPORTING_THE_HELPER, "b_helpers.py": HELPERS_TRAINING_A_MODEL, "c_model.py": MODEL})
    shared = Workspace([root])
    analyze_source(IMPORTING_THE_HELPER, str(root / "a_train.py"), workspace=shared)
    unsaved = HELPERS_TRAINING_A_MODEL.replace("criterion(model(x), y)", "torch.nn.functional.mse_loss(model(x), y)")
    assert shared.checked_analysis(str(root / "b_helpers.py"), unsaved) is None
    assert "TL202" not in [f.code for f in analyze_source(unsaved, str(root / "b_helpers.py"), workspace=shared)]


# A model file as real projects write one: many definitions, of which a training script imports one.
# `Net` is defined twice (the later definition is the one Python binds), behind a decorator once.
MODELS = MODEL + textwrap.dedent(
    """\


    # Layers the scripts of this folder do not use.
    @torch.no_grad()
    def init_weights(module):
        nn.init.zeros_(module.weight)


    class Encoder(nn.Module):
        def forward(self, x):
            return x


    def build_encoder(depth: int = 4):
        return nn.Sequential(*[Encoder() for _ in range(depth)])


    @register_model(name="net", default=True)
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(784, 10)

        def forward(self, x):
            return F.log_softmax(self.fc(x), dim=1)


    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(784, 10)

        def forward(self, x):
            return F.softmax(self.fc(x), dim=-1)
    """
)


def _imported_chunks(workspace: Workspace, path: Path) -> dict[str, bool]:
    """Each top-level statement of an imported file (its first code line) -> whether it was parsed."""
    from trainlint.analysis.parsing import UnparsedChunk

    module = workspace._analysis(path.resolve(), 0)
    assert module is not None
    return {
        next(line for line in chunk.chunk.text.splitlines() if line and not line.startswith("#")):
            not isinstance(chunk, UnparsedChunk) or chunk.parsed
        for chunk in module._chunks
    }


def test_an_imported_file_is_parsed_only_as_far_as_the_check_needs(tmp_path):
    root = _project(tmp_path, {"model.py": MODELS, "train.py": TRAIN})
    workspace = Workspace([root])
    findings = analyze_source(TRAIN, str(root / "train.py"), workspace=workspace)
    [softmax] = [f for f in findings if f.code == "TL202"]
    # the last `class Net` is the one imported: its softmax over dim=-1, on the file's last line
    assert [item.line for item in softmax.evidence if item.path] == [MODELS.count("\n")]
    parsed = _imported_chunks(workspace, root / "model.py")
    assert parsed == {
        "import torch.nn as nn": True, "import torch.nn.functional as F": True,
        "class Net(nn.Module):": True, "@torch.no_grad()": False, "class Encoder(nn.Module):": False,
        "def build_encoder(depth: int = 4):": False,
        # not read off its text (brackets in the decorator's call): parsed as any statement
        '@register_model(name="net", default=True)': True,
    }


def test_an_imported_file_parsed_as_needed_gives_what_parsing_it_whole_gives(tmp_path, monkeypatch):
    root = _project(tmp_path, {"model.py": MODELS, "train.py": TRAIN, "helpers.py": HELPERS_TRAINING_A_MODEL})
    (root / "helpers.py").write_text(HELPERS_TRAINING_A_MODEL.replace("c_model", "model"), encoding="utf-8")

    def check_all() -> list:
        workspace = Workspace([root])
        return [(f.path, f.line, f.code, f.message, f.evidence) for name in ("helpers.py", "model.py", "train.py")
                for f in analyze_source((root / name).read_text(), str(root / name), workspace=workspace)]

    as_needed = check_all()
    monkeypatch.setattr("trainlint.analysis.module.definition_name", lambda text: None)
    assert as_needed == check_all()
    # the two training files' loss calls, and the softmax of model.py's `Net` that train.py's loss gets
    assert [code for _, _, code, _, _ in as_needed].count("TL202") == 3


def test_walking_an_imported_files_definitions_parses_them_all_in_file_order(tmp_path):
    root = _project(tmp_path, {"model.py": MODELS})
    module = Workspace([root])._analysis((root / "model.py").resolve(), 0)
    assert module is not None
    assert "Net" in module.summary.classes and "init_weights" not in dict(module.summary.classes.items())
    assert list(module.summary.functions) == ["init_weights", "build_encoder"]
    assert list(module.summary.classes) == ["Net", "Encoder"]
    assert module.summary.classes["Net"].chunk.index == len(module.chunks) - 1
    assert all(chunk.module is not None for chunk in module.chunks)


def test_two_threads_asking_for_one_imported_definition_get_the_same_one(tmp_path):
    import threading

    root = _project(tmp_path, {"model.py": MODELS * 20})
    module = Workspace([root])._analysis((root / "model.py").resolve(), 0)
    assert module is not None
    found: list = []
    threads = [threading.Thread(target=lambda: found.append(module.summary.classes.get("Encoder"))) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(found) == 4 and found[0] is not None and all(info is found[0] for info in found)


def test_a_model_class_further_down_its_file_than_the_script_is_long_is_still_followed(tmp_path):
    """The loss check looked for the softmax call among the checked file's statements, by the index
    of the model file's statement: past the script's last statement, the rule failed (TL002)."""
    root = _project(tmp_path, {"model.py": MODELS, "train.py": TRAIN})
    codes = _codes(root / "train.py", Workspace([root]))
    assert "TL202" in codes and "TL002" not in codes


def test_a_batch_runs_workspace_reads_each_files_stamp_once_and_the_servers_every_time(tmp_path):
    """A batch run reads the workspace as it was when it started (one stat per file, not one per
    lookup); the server's workspace sees a file change or vanish between two analyses."""
    root = _project(tmp_path, {"model.py": MODEL, "train.py": TRAIN})
    model = root / "model.py"
    batch, server = Workspace([root], files_fixed=True), Workspace([root])
    for workspace in (batch, server):
        assert "TL202" in _codes(root / "train.py", workspace)
    first = batch.stamps([str(model)])
    model.write_text(MODEL.replace("softmax", "relu"), encoding="utf-8")
    os.utime(model, ns=(1, 1))  # a different stamp however fast the file system's clock ticks
    assert batch.stamps([str(model)]) == first
    assert server.stamps([str(model)]) != first
    assert "TL202" not in _codes(root / "train.py", server), "the server analyses the file as it is now"
    model.unlink()
    assert "TL202" not in _codes(root / "train.py", Workspace([root])), "the class is unknown without its file"
    assert server.find_module(str(root / "train.py"), "model") is None
