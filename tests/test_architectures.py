import json
import re
from pathlib import Path

import pytest

from trainlint.estimator.architectures import (
    Architecture,
    find_architecture,
    is_derivable,
    load_architectures,
    parameter_count,
    shape,
)

CATALOG = load_architectures()
DERIVABLE = [arch for arch in CATALOG if is_derivable(arch)]
MEASURED = json.loads(
    (Path(__file__).resolve().parent.parent / "estimator" / "calibration" / "param_counts.json").read_text()
)["counts"]
KINDS = {"decoder", "encoder", "encoder-decoder", "vision-transformer", "cnn", "diffusion", "clip"}


def test_catalog_is_large_enough_and_covers_every_kind():
    assert len(CATALOG) >= 80
    assert {arch.kind for arch in CATALOG} == KINDS


def test_ids_and_aliases_are_unique_ignoring_case():
    names = [name.lower() for arch in CATALOG for name in (arch.id, *arch.aliases)]
    duplicates = {name for name in names if names.count(name) > 1}
    assert not duplicates


def test_every_entry_says_where_its_count_comes_from():
    for arch in CATALOG:
        assert arch.source.strip(), arch.id
        assert arch.published_params > 0, arch.id


@pytest.mark.parametrize("arch", DERIVABLE, ids=lambda arch: arch.id)
def test_derived_count_equals_published_count(arch: Architecture):
    assert parameter_count(arch) == arch.published_params


@pytest.mark.parametrize("arch", DERIVABLE, ids=lambda arch: arch.id)
def test_derived_count_equals_transformers_meta_device_count(arch: Architecture):
    measured = MEASURED[arch.id]
    if arch.family == "t5" and not arch.tied_embeddings:
        # transformers 5 ties T5's lm_head unconditionally; the catalog keeps the checkpoint's own
        measured += arch.vocab * arch.hidden
    assert parameter_count(arch) == measured


_STATED = re.compile(r"^(\d+)(?:\.(\d+))?([MB])$")


@pytest.mark.parametrize("arch", [a for a in CATALOG if a.stated_params], ids=lambda arch: arch.id)
def test_count_rounds_to_the_stated_figure(arch: Architecture):
    whole, decimals, unit = _STATED.match(arch.stated_params).groups()
    scale = {"M": 10**6, "B": 10**9}[unit] // 10 ** len(decimals or "")
    stated = int(whole + (decimals or "")) * scale
    assert abs(parameter_count(arch) - stated) * 2 <= scale


def test_non_derivable_kinds_return_the_published_count():
    resnet50 = find_architecture("resnet50")
    assert parameter_count(resnet50) == 25_557_032
    assert resnet50.activation_bytes_per_sample == 43_100_000
    assert shape(resnet50) is None
    assert shape(find_architecture("sdxl-unet")) is None


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("llama-3-8b", "llama-3-8b"),
        ("meta-llama/Meta-Llama-3-8B", "llama-3-8b"),
        ("META-LLAMA/meta-llama-3-8b-instruct", "llama-3-8b"),
        ("meta-llama/Llama-3.1-8B-Instruct", "llama-3.1-8b"),
        ("Qwen/Qwen2.5-7B-Instruct", "qwen2.5-7b"),
        ("someone/qwen2.5-7b-instruct", "qwen2.5-7b"),  # last path part, suffix dropped
        ("TheBloke/Llama-2-7B-Chat-HF", "llama-2-7b"),
        ("gpt2", "gpt2"),
        ("resnet50", "resnet50"),
        ("convnext_tiny", "convnext-tiny"),
        ("openai/whisper-small.en", "whisper-small"),
    ],
)
def test_find_architecture(name: str, expected: str):
    assert find_architecture(name).id == expected


@pytest.mark.parametrize(
    "name",
    ["meta-llama/Llama-3.2-11B-Vision-Instruct", "llama-3-9b", "mistralai/Mistral-Large-Instruct-2407", "", "resnet"],
)
def test_unknown_names_are_not_guessed(name: str):
    assert find_architecture(name) is None


def test_shape_of_llama_3_8b():
    s = shape(find_architecture("llama-3-8b"))
    assert (s.layers, s.hidden, s.heads, s.kv_heads, s.head_dim) == (32, 4096, 32, 8, 128)
    assert s.kv_cache_bytes_per_token_per_byte == 2 * 32 * 8 * 128
    assert s.total_params == s.active_params == 8_030_261_248
    assert s.embedding_params == s.lm_head_params == 128_256 * 4096
    assert s.lora_dims["q_proj"] == (4096, 4096)
    assert s.lora_dims["k_proj"] == (4096, 1024)
    assert s.lora_dims["gate_proj"] == (4096, 14336)
    assert s.lora_dims["down_proj"] == (14336, 4096)


def test_shape_of_tied_model_has_no_separate_lm_head():
    s = shape(find_architecture("meta-llama/Llama-3.2-1B"))
    assert s.lm_head_params == 0
    assert s.kv_cache_bytes_per_token_per_byte == 2 * 16 * 8 * 64


def test_shape_of_moe_counts_active_experts_per_token():
    s = shape(find_architecture("mistralai/Mixtral-8x7B-v0.1"))
    expert = 3 * 4096 * 14336
    assert (s.experts, s.experts_active) == (8, 2)
    assert s.total_params - s.active_params == 32 * 6 * expert
    assert s.lora_dims["up_proj"] == (4096, 14336)  # per expert


def test_shape_of_mla_caches_the_latent():
    s = shape(find_architecture("deepseek-ai/DeepSeek-V3"))
    assert s.kv_cache_bytes_per_token_per_byte == 61 * (512 + 64)
    assert s.lora_dims["kv_b_proj"] == (512, 128 * (128 + 128))
    assert 36e9 < s.active_params < 38e9  # the report's 37B activated


def test_shape_of_fused_projections_and_encoders():
    phi3 = shape(find_architecture("microsoft/Phi-3-mini-4k-instruct"))
    assert phi3.lora_dims["qkv_proj"] == (3072, 3 * 3072)
    assert phi3.lora_dims["gate_up_proj"] == (3072, 2 * 8192)
    bert = shape(find_architecture("bert-base-uncased"))
    assert bert.kv_cache_bytes_per_token_per_byte == 0
    assert bert.lm_head_params == 0
    t5 = shape(find_architecture("google/flan-t5-base"))
    assert t5.layers == 24
    assert t5.kv_cache_bytes_per_token_per_byte == 2 * 12 * 12 * 64
    assert t5.lm_head_params == 32128 * 768
