"""Popular hub models resolve without a network or a local cache: the vendored table, every row sourced,
its counts checked against published ones, and fine-tunes through their base."""

from __future__ import annotations

import re

import pytest

from trainlint.estimator.architectures import load_architectures, parameter_count
from trainlint.estimator.hub_models import load_hub_models
from trainlint.estimator.model_configs import hub_architecture, resolve_model_name


@pytest.fixture(autouse=True)
def _no_local_cache(tmp_path, monkeypatch):
    for variable in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        monkeypatch.setenv(variable, str(tmp_path / "empty-cache"))
    monkeypatch.setenv("HF_HOME", str(tmp_path / "empty-home"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "empty-xdg"))


def _published(text: str) -> float:
    """'1.54B', '494M' or '1,346,471,936' as a number."""
    match = re.fullmatch(r"([\d.]+)\s*([BM])", text)
    if match:
        return float(match.group(1)) * (1e9 if match.group(2) == "B" else 1e6)
    return float(text.replace(",", ""))


def test_the_coder_models_of_the_issue_resolve_offline():
    for name, billions in (("Qwen/Qwen2.5-Coder-1.5B", 1.54), ("deepseek-ai/deepseek-coder-1.3b-base", 1.35)):
        architecture, reason = resolve_model_name(name, None)
        assert architecture is not None, reason
        assert round(parameter_count(architecture) / 1e9, 2) == billions


def test_every_row_is_sourced_and_builds():
    rows = load_hub_models()
    assert len(rows) >= 266
    assert len({row.id.lower() for row in rows}) == len(rows)
    for row in rows:
        assert len(row.source) > 40 and ("config" in row.source or "report" in row.source), row.id
        assert (row.stated_params is None) == (row.stated_params_source is None), row.id
        assert parameter_count(hub_architecture(row)) > 0


def test_hub_ids_resolvable_offline():
    table = {row.id.lower() for row in load_hub_models()}
    catalog = {name.lower() for arch in load_architectures() for name in (arch.id, *arch.aliases) if "/" in name}
    assert len(table | catalog) >= 462


def test_derived_counts_match_the_published_counts():
    sample = [row for row in load_hub_models() if row.stated_params is not None]
    assert len(sample) >= 4
    for row in sample:
        assert row.stated_params is not None
        derived = parameter_count(hub_architecture(row))
        assert abs(derived / _published(row.stated_params) - 1) <= 0.02, (row.id, derived, row.stated_params)


def test_a_model_named_like_a_catalog_entry_gets_its_own_vocabulary():
    # `bert-base-chinese` begins like `bert-base`; its row keeps its 21,128-token vocabulary, not BERT's 30,522
    architecture, reason = resolve_model_name("google-bert/bert-base-chinese", None)
    assert architecture is not None, reason
    assert architecture.vocab == 21128 and "fine-tune of bert-base-chinese" in architecture.source
    # a distilled model is its own row, not DeepSeek-R1 (the 671B MoE its name begins with): 1.78B, its head untied
    distilled, reason = resolve_model_name("deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B", None)
    assert distilled is not None, reason
    assert round(parameter_count(distilled) / 1e9, 2) == 1.78


def test_a_fine_tune_resolves_through_its_base_and_says_so():
    architecture, reason = resolve_model_name("someone/Qwen2.5-Coder-1.5B-sql-lora", None)
    assert architecture is not None, reason
    assert architecture.id == "someone/Qwen2.5-Coder-1.5B-sql-lora"
    assert architecture.source.startswith("assumed: `someone/Qwen2.5-Coder-1.5B-sql-lora` has the architecture of Qwen/Qwen2.5-Coder-1.5B")
    base, _ = resolve_model_name("Qwen/Qwen2.5-Coder-1.5B", None)
    assert base is not None and parameter_count(architecture) == parameter_count(base)
    # a name that only begins like a known one, without a separator, is not taken for it
    for other in ("someone/Qwen2.5-Coder-1.5Bx", "openai-community/gpt2-xxl", "someone/TinyLlama-1.1B-7b-merge"):
        unknown, reason = resolve_model_name(other, None)
        assert unknown is None and "did you mean" in (reason or ""), other


def test_bert_miniatures_embedding_models_and_timm_tags_resolve_offline():
    for name, millions in (("google/bert_uncased_L-2_H-128_A-2", 4.4), ("google/bert_uncased_L-8_H-512_A-8", 41.4),
                           ("BAAI/bge-small-en-v1.5", 33.4), ("sentence-transformers/all-MiniLM-L12-v2", 33.4),
                           ("tiiuae/Falcon3-7B-Base", 7455.6)):
        architecture, reason = resolve_model_name(name, None)
        assert architecture is not None, reason
        assert round(parameter_count(architecture) / 1e6, 1) == millions, name
    # timm's pretrained tags name an architecture of the catalog, as the hub id, a bare tag or timm's hf-hub: form
    for name in ("timm/resnet50.a1_in1k", "resnet50.a1_in1k", "hf-hub:timm/resnet50.a1_in1k", "timm/convnext_tiny.in12k_ft_in1k_384"):
        architecture, reason = resolve_model_name(name, None)
        assert architecture is not None and architecture.id in ("resnet50", "convnext-tiny"), (name, reason)
    # a tag with another head (ImageNet-21k's 21,843 classes) is another model: not taken for the 1,000-class one
    unknown, _ = resolve_model_name("timm/vit_base_patch16_224.augreg_in21k", None)
    assert unknown is None
