"""Counts each transformer architecture's parameters with transformers itself, on the meta device.

Runs in a separate calibration venv with torch and transformers (never the product's venv). The
configs are built from the catalog's fields, not downloaded, so this checks that the estimator's
derivation matches what transformers builds *for those fields*; whether the fields match the
published config.json is a separate question (see README.md).

    python param_counts.py OUT.json [--catalog PATH]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch
import transformers

DEFAULT_CATALOG = Path(__file__).resolve().parent.parent / "data" / "architectures.json"


def _decoder_config(a: dict) -> transformers.PretrainedConfig:
    family = a["family"]
    common = dict(
        vocab_size=a["vocab"],
        hidden_size=a["hidden"],
        num_hidden_layers=a["layers"],
        num_attention_heads=a["heads"],
        num_key_value_heads=a.get("kv_heads"),
        intermediate_size=a["intermediate"],
        max_position_embeddings=a["max_positions"],
        tie_word_embeddings=a.get("tied_embeddings", False),
    )
    if family == "gpt2":
        return transformers.GPT2Config(
            vocab_size=a["vocab"], n_positions=a["learned_positions"], n_embd=a["hidden"], n_layer=a["layers"],
            n_head=a["heads"], tie_word_embeddings=a.get("tied_embeddings", False),
        )
    if family == "gptj":
        return transformers.GPTJConfig(
            vocab_size=a["vocab"], n_positions=a["max_positions"], n_embd=a["hidden"], n_layer=a["layers"],
            n_head=a["heads"], n_inner=a["intermediate"], tie_word_embeddings=False,
        )
    if family == "gpt_neox":
        return transformers.GPTNeoXConfig(**{k: v for k, v in common.items() if k != "num_key_value_heads"})
    if family == "falcon":
        return transformers.FalconConfig(
            vocab_size=a["vocab"], hidden_size=a["hidden"], num_hidden_layers=a["layers"],
            num_attention_heads=a["heads"], num_kv_heads=a["kv_heads"], ffn_hidden_size=a["intermediate"],
            new_decoder_architecture=a.get("norms_per_layer", 2) == 2, multi_query=a["kv_heads"] == 1,
            parallel_attn=True, bias=False, tie_word_embeddings=a.get("tied_embeddings", False),
        )
    if family == "phi":
        return transformers.PhiConfig(**common)
    if family in ("llama", "mistral", "qwen2", "qwen3", "phi3", "gemma", "gemma2", "gemma3_text"):
        config_class = transformers.CONFIG_MAPPING[family]
        return config_class(**common, head_dim=a["head_dim"])
    if family == "mixtral":
        return transformers.MixtralConfig(
            **common, head_dim=a["head_dim"], num_local_experts=a["experts"], num_experts_per_tok=a["experts_active"]
        )
    if family == "phimoe":
        return transformers.PhimoeConfig(
            **common, num_local_experts=a["experts"], num_experts_per_tok=a["experts_active"],
            attention_bias=a.get("qkv_bias", False), lm_head_bias=a.get("lm_head_bias", False),
        )
    if family == "qwen3_moe":
        return transformers.Qwen3MoeConfig(
            **common, head_dim=a["head_dim"], moe_intermediate_size=a["intermediate"], num_experts=a["experts"],
            num_experts_per_tok=a["experts_active"], decoder_sparse_step=1, mlp_only_layers=[],
        )
    if family == "gpt_oss":
        return transformers.GptOssConfig(
            **common, head_dim=a["head_dim"], num_local_experts=a["experts"], num_experts_per_tok=a["experts_active"],
        )
    if family in ("deepseek_v2", "deepseek_v3"):
        config_class = transformers.CONFIG_MAPPING[family]
        return config_class(
            **{**common, "intermediate_size": a["dense_intermediate"]},
            moe_intermediate_size=a["intermediate"], n_routed_experts=a["experts"], n_shared_experts=a["shared_experts"],
            num_experts_per_tok=a["experts_active"], first_k_dense_replace=a["dense_layers"],
            q_lora_rank=a.get("q_lora_rank"), kv_lora_rank=a["kv_lora_rank"], qk_rope_head_dim=a["rope_head_dim"],
            qk_nope_head_dim=a["nope_head_dim"], v_head_dim=a["v_head_dim"],
        )
    raise KeyError(family)


def encoder_config(a: dict) -> transformers.PretrainedConfig:
    """The config of a BERT-like encoder or a T5 model from the catalog's fields."""
    family = a["family"]
    if family in ("bert", "roberta", "xlm-roberta"):
        config_class = transformers.CONFIG_MAPPING[family]
        return config_class(
            vocab_size=a["vocab"], hidden_size=a["hidden"], num_hidden_layers=a["layers"],
            num_attention_heads=a["heads"], intermediate_size=a["intermediate"],
            max_position_embeddings=a["learned_positions"], type_vocab_size=a["token_types"],
        )
    if family == "distilbert":
        return transformers.DistilBertConfig(
            vocab_size=a["vocab"], dim=a["hidden"], n_layers=a["layers"], n_heads=a["heads"],
            hidden_dim=a["intermediate"], max_position_embeddings=a["learned_positions"],
        )
    if family == "t5":
        return transformers.T5Config(
            vocab_size=a["vocab"], d_model=a["hidden"], d_kv=a["head_dim"], d_ff=a["intermediate"],
            num_layers=a["encoder_layers"], num_decoder_layers=a["decoder_layers"], num_heads=a["heads"],
            relative_attention_num_buckets=a["relative_attention_buckets"],
            feed_forward_proj="gated-gelu" if a.get("gated_mlp", True) else "relu",
            tie_word_embeddings=a.get("tied_embeddings", False),
        )
    raise KeyError(family)


def model_for(config: transformers.PretrainedConfig) -> torch.nn.Module:
    """The model class the catalog counts for a config: a causal LM, T5 with its head, an encoder without."""
    if config.model_type == "t5":
        return transformers.T5ForConditionalGeneration(config)
    if config.model_type in ("bert", "roberta", "xlm-roberta", "distilbert"):
        return transformers.AutoModel.from_config(config)
    return transformers.AutoModelForCausalLM.from_config(config)


def _build(a: dict) -> torch.nn.Module:
    family, kind = a["family"], a["kind"]
    if kind == "decoder":
        return transformers.AutoModelForCausalLM.from_config(_decoder_config(a))
    if family in ("bert", "roberta", "xlm-roberta", "distilbert", "t5"):
        return model_for(encoder_config(a))
    if family == "bart":
        config = transformers.BartConfig(
            vocab_size=a["vocab"], d_model=a["hidden"], encoder_layers=a["encoder_layers"],
            decoder_layers=a["decoder_layers"], encoder_attention_heads=a["heads"], decoder_attention_heads=a["heads"],
            encoder_ffn_dim=a["intermediate"], decoder_ffn_dim=a["intermediate"], max_position_embeddings=a["max_positions"],
        )
        return transformers.BartModel(config)
    if family == "whisper":
        config = transformers.WhisperConfig(
            vocab_size=a["vocab"], num_mel_bins=a["mel_bins"], d_model=a["hidden"], encoder_layers=a["encoder_layers"],
            decoder_layers=a["decoder_layers"], encoder_attention_heads=a["heads"], decoder_attention_heads=a["heads"],
            encoder_ffn_dim=a["intermediate"], decoder_ffn_dim=a["intermediate"],
            max_source_positions=a["encoder_positions"], max_target_positions=a["learned_positions"],
        )
        return transformers.WhisperForConditionalGeneration(config)
    if family == "vit":
        config = transformers.ViTConfig(
            hidden_size=a["hidden"], num_hidden_layers=a["layers"], num_attention_heads=a["heads"],
            intermediate_size=a["intermediate"], image_size=a["image_size"], patch_size=a["patch_size"],
            num_labels=a["num_labels"],
        )
        return transformers.ViTForImageClassification(config)
    if family == "clip":
        text = dict(
            vocab_size=a["vocab"], hidden_size=a["text_hidden"], intermediate_size=a["text_intermediate"],
            num_hidden_layers=a["text_layers"], num_attention_heads=a["text_hidden"] // 64,
            max_position_embeddings=a["text_positions"],
        )
        vision = dict(
            hidden_size=a["hidden"], intermediate_size=a["intermediate"], num_hidden_layers=a["layers"],
            num_attention_heads=a["heads"], image_size=a["image_size"], patch_size=a["patch_size"],
        )
        config = transformers.CLIPConfig(text_config=text, vision_config=vision, projection_dim=a["projection_dim"])
        return transformers.CLIPModel(config)
    raise KeyError(family)


def meta_count(build) -> int:
    """Parameters of the module ``build()`` makes on the meta device (a tied weight counted once, as
    num_parameters() does)."""
    with torch.device("meta"):
        model = build()
    return sum(p.numel() for p in model.parameters())


def count(a: dict) -> int:
    return meta_count(lambda: _build(a))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", type=Path)
    parser.add_argument("--catalog", type=Path, default=DEFAULT_CATALOG)
    args = parser.parse_args()
    catalog = json.loads(args.catalog.read_text())
    derivable = ("decoder", "encoder", "encoder-decoder", "vision-transformer", "clip")
    counts = {}
    for arch in catalog:
        if arch["kind"] in derivable:
            counts[arch["id"]] = count(arch)
            print(f"{arch['id']:32} {counts[arch['id']]:>18,}", flush=True)
    result = {"transformers": transformers.__version__, "torch": torch.__version__, "counts": counts}
    args.out.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
