"""Library classes read from installed source, never imported: a fake site-packages with the shapes
diffusers and transformers use (lazy __init__ files, dummy placeholders, bases in another package)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from trainlint.analysis import libraries, library_source
from trainlint.analysis.engine import analyze_source
from trainlint.analysis.libraries import MODULE, OTHER, PIPELINE
from trainlint.analysis.library_source import LibraryIndex

MARKER = "IMPORTED-{name}"


def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text), encoding="utf-8")


@pytest.fixture
def site(tmp_path: Path, monkeypatch) -> Path:
    monkeypatch.setenv("TRAINLINT_CACHE_DIR", str(tmp_path / "cache"))
    root = tmp_path / "site-packages"
    marker = tmp_path / "imported"
    # every __init__ writes a marker if it is ever executed
    trap = f"open({str(marker)!r}, 'a').write(__name__ + '\\n')\n"
    _write(root, {
        "torch/__init__.py": trap,
        "torch/nn/__init__.py": trap + "from .modules.module import Module\n",
        "torch/nn/modules/module.py": "class Module:\n    pass\n",
        "fakediff/__init__.py": trap + """
            from typing import TYPE_CHECKING
            _import_structure = {"pipelines": ["FakeDiffusionPipeline"], "models": ["FakeUNet"]}
            if TYPE_CHECKING:
                from .pipelines import FakeDiffusionPipeline
            """,
        "fakediff/pipelines/__init__.py": "from .pipeline_fake import FakeDiffusionPipeline\n",
        "fakediff/pipelines/pipeline_utils.py": "class DiffusionPipelineBase:\n    pass\n",
        "fakediff/pipelines/pipeline_fake.py": """
            import torch
            from .pipeline_utils import DiffusionPipelineBase

            class FakeDiffusionPipeline(DiffusionPipelineBase):
                @torch.no_grad()
                def __call__(self, prompt):
                    return prompt
            """,
        # a lazy package: the name is found through the index of class statements, not the imports
        "fakediff/models/unet_fake.py": """
            import torch.nn as nn
            from ..mixins import FakeModelMixin

            class FakeUNet(FakeModelMixin):
                pass
            """,
        "fakediff/mixins.py": "import torch\n\nclass FakeModelMixin(torch.nn.Module):\n    pass\n",
        "fakediff/utils/dummy_objects.py": "class FakeUNet:\n    pass\n",  # placeholders must not win
        "fakediff/schedulers.py": "class FakeScheduler:\n    pass\n",
    })
    return root


def test_kinds_come_from_the_source_without_importing_it(site: Path):
    index = LibraryIndex((site,))
    pipeline = index.class_kind("fakediff.FakeDiffusionPipeline")
    assert pipeline is not None and pipeline.kind == PIPELINE
    assert "pipeline_fake.py" in pipeline.evidence and "no_grad" in pipeline.evidence
    unet = index.class_kind("fakediff.FakeUNet")
    assert unet is not None and unet.kind == MODULE, "found through the index, bases followed to torch.nn.Module"
    assert "dummy" not in unet.evidence
    assert index.class_kind("fakediff.schedulers.FakeScheduler").kind == OTHER
    assert index.class_kind("fakediff.NoSuchThing") is None
    assert not (site.parent / "imported").exists(), "nothing of the library may run"


def test_the_package_index_is_kept_on_disk_and_reused(site: Path, tmp_path: Path, monkeypatch):
    LibraryIndex((site,)).class_kind("fakediff.FakeUNet")
    assert len(list((tmp_path / "cache" / "libraries").glob("*.json"))) == 1

    def no_walk(*args, **kwargs):
        raise AssertionError("the package was scanned again")

    monkeypatch.setattr(library_source.os, "walk", no_walk)
    again = LibraryIndex((site,)).class_kind("fakediff.FakeUNet")
    assert again is not None and again.kind == MODULE, "a second process reads the index from disk"
    monkeypatch.undo()
    # an upgrade changes the package folder: its index is built again (`Later` is only found through it)
    (site / "fakediff" / "later.py").write_text("class Later:\n    pass\n")
    later = LibraryIndex((site,)).class_kind("fakediff.Later")
    assert later is not None and later.kind == OTHER


def test_without_the_package_the_table_answers():
    index = LibraryIndex(())
    assert index.class_kind("diffusers.StableDiffusionXLPipeline").kind == PIPELINE
    assert index.class_kind("diffusers.AutoencoderKL").kind == MODULE
    assert index.class_kind("transformers.AutoTokenizer").kind == OTHER
    assert index.class_kind("somewhere.Unknown") is None


def test_a_pipeline_call_gives_no_graph_and_a_model_does(site: Path):
    script = textwrap.dedent(
        """\
        import torch
        from fakediff import FakeDiffusionPipeline, FakeUNet

        pipe = FakeDiffusionPipeline.from_pretrained("x")
        unet = FakeUNet.from_pretrained("x")
        images, outputs = [], []
        for batch in train_loader:
            images.append(pipe(batch["prompt"]))
            outputs.append(unet(batch["latents"]))
        """
    )
    library_source.use_library_index(LibraryIndex((site,)))
    try:
        findings = [f for f in analyze_source(script, "train.py") if f.code == "TL101"]
    finally:
        library_source.use_library_index(None)
    assert [f.line for f in findings] == [9], "the unet's outputs keep their graph; the pipeline's images carry none"


def test_each_call_fact_is_one_documented_fact_a_row():
    kinds = {libraries.DRAWS_GLOBAL_NUMPY, libraries.STARTS_FRESH_PROCESSES, libraries.DDP_SAMPLER_WHEN, libraries.LEAVES_GRADIENTS,
             libraries.SERVES_REQUESTS, libraries.ACCUMULATES_ONLY_INSIDE, libraries.RUNS_ENTRY_POINT,
             libraries.ARGUMENT_PARSING_DECORATOR, libraries.UNPICKLES_OBJECT, libraries.KEEPS_NO_GRAPH,
             libraries.DISABLES_DROPOUT, libraries.RUNS_WRAPPED_MODULE, libraries.SEEDS_WHEN_BUILT,
             libraries.PREPARED_CLEARS_WITH_STEP, libraries.SEEDS_ITS_WORKERS}
    keys = [(row.callee, row.fact) for row in libraries.CALL_FACTS]
    assert len(keys) == len(set(keys))
    for row in libraries.CALL_FACTS:
        assert row.fact in kinds and row.callee.count(".") >= 1 and len(row.source) > 30, row
        assert libraries.call_fact(row.callee, row.fact) is row
    assert libraries.call_fact("sklearn.model_selection.train_test_split", libraries.STARTS_FRESH_PROCESSES) is None
    assert libraries.call_fact(None, libraries.DRAWS_GLOBAL_NUMPY) is None


def test_each_sharded_loader_row_names_the_loader_and_its_sampler():
    callees = [row.callee for row in libraries.SHARDED_LOADERS]
    assert len(callees) == len(set(callees))
    for row in libraries.SHARDED_LOADERS:
        assert row.position >= 0 and row.sampler.isidentifier() and row.dataset.isidentifier() and len(row.source) > 30, row
        assert libraries.sharded_loader(row.callee) is row
    assert libraries.sharded_loader("torch.utils.data.DataLoader") is None
    assert libraries.sharded_loader(None) is None
    assert {"torch.Tensor", "torch.LongTensor"} <= libraries.TENSOR_TYPES and "torch.nn.Module" not in libraries.TENSOR_TYPES


def test_each_attention_dropout_row_names_where_its_rate_goes():
    names = [row.function for row in libraries.ATTENTION_DROPOUT]
    assert len(names) == len(set(names))
    for row in libraries.ATTENTION_DROPOUT:
        assert row.keyword in {"dropout_p", "p"} and row.position >= 1 and len(row.source) > 30, row
        assert libraries.attention_dropout(row.function) is row
    assert libraries.attention_dropout("flash_attn.flash_attn_func").position == 3  # (q, k, v, dropout_p, ...)
    assert libraries.attention_dropout("torch.nn.functional.dropout") is None
    assert libraries.attention_dropout(None) is None


@pytest.mark.parametrize(("built_by", "checkpoint", "acts"), [
    ("torchvision.models.resnet50", None, True),
    ("torchvision.models.vit_b_16", None, False),  # layer norm; its dropout defaults to 0
    ("timm.create_model", "efficientnet_b0", True),
    ("timm.create_model", "hf-hub:timm/resnet50.a1_in1k", True),
    ("timm.create_model", "resnet50_gn", False),  # group norm
    ("timm.create_model", "resnetv2_50x1_bit.goog_in21k", False),  # BiT: group norm
    ("timm.create_model", "vit_base_patch16_224", False),
    ("timm.create_model", None, False),  # a name trainlint cannot read
    ("pytorch_fid.inception.InceptionV3", None, True),
    ("transformers.BertForSequenceClassification", None, True),
    ("transformers.AutoModelForSequenceClassification", "FacebookAI/roberta-base", True),
    ("transformers.AutoModelForCausalLM", "gpt2-medium", True),
    ("transformers.AutoModelForCausalLM", "meta-llama/Llama-2-7b-hf", False),  # no dropout by default
    ("transformers.AutoModel", None, False),
    ("transformers.LlamaForCausalLM", None, False),
])
def test_which_library_models_have_layers_the_mode_changes(built_by: str, checkpoint: str | None, acts: bool):
    fact = libraries.mode_layers(built_by, checkpoint)
    assert (fact is not None) == acts
    assert fact is None or len(fact.source) > 30


@pytest.mark.parametrize(("layer", "arguments", "acts"), [
    ("BatchNorm2d", {0: ...}, True),
    ("SyncBatchNorm", {0: 256, "momentum": 0.01}, True),
    ("BatchNorm1d", {0: ..., "track_running_stats": False}, False),  # batch statistics in both modes
    ("BatchNorm3d", {0: 64, 1: 1e-5, 2: 0.1, 3: True, 4: False}, False),
    ("BatchNorm2d", {0: 64, "track_running_stats": ...}, False),  # a name: not known
    ("Dropout", {}, True),  # p defaults to 0.5
    ("Dropout2d", {0: 0.2}, True),
    ("Dropout", {"p": 0.0}, False),
    ("Dropout", {0: ...}, False),  # the caller's rate: not known
    ("Linear", {0: 16, 1: 4}, False),
    ("LayerNorm", {0: 16}, False),
])
def test_which_torch_layers_act_differently_in_training_mode_as_built(layer: str, arguments: dict, acts: bool):
    source = libraries.torch_layer_mode(layer, arguments)
    assert (source is not None) == acts
    assert source is None or "pytorch.org/docs" in source


def test_from_pretrained_of_transformers_and_diffusers_returns_eval_mode():
    assert libraries.eval_mode_after_loading("transformers.BertModel", "from_pretrained") is not None
    assert libraries.eval_mode_after_loading("diffusers.UNet2DConditionModel", "from_pretrained") is not None
    assert libraries.eval_mode_after_loading("transformers.BertModel", "from_config") is None
    assert libraries.eval_mode_after_loading("timm.create_model", "from_pretrained") is None


@pytest.mark.parametrize(("repository", "entry", "builder"), [
    ("pytorch/vision", "resnet18", "torchvision.models.resnet18"),
    ("pytorch/vision:v0.10.0", "mobilenet_v2", "torchvision.models.mobilenet_v2"),
    ("ultralytics/yolov5", "yolov5s", None),  # a repository whose entry points no row tells
    ("pytorch/vision", "get_model(name)", None),  # not an entry point's name
])
def test_a_hub_entry_point_of_pytorch_vision_is_torchvisions_builder(repository: str, entry: str, builder: str | None):
    assert libraries.hub_builder(repository, entry) == builder
