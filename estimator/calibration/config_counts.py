"""transformers' parameter counts for config.json files, as ``save_pretrained`` writes them.

For every catalog architecture of a family the estimator reads configs of, and for each such
family's default config (every key left out), this writes the config in its saved form (keys
equal to the config class's defaults dropped, ``model_type`` kept) and the number of parameters
transformers builds from it on the meta device. ``tests/test_model_configs.py`` reads the
estimator's architecture from each saved config and compares the counts, which checks the
defaults the estimator assumes for missing keys as well as the structure.

Runs in the calibration venv (torch, transformers), never the product's:

    python config_counts.py OUT.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch
import transformers

sys.path.insert(0, str(Path(__file__).resolve().parent))
from param_counts import DEFAULT_CATALOG, _decoder_config, encoder_config, meta_count, model_for  # noqa: E402

FAMILIES = (
    "llama", "mistral", "mixtral", "qwen2", "qwen3", "qwen3_moe", "gemma", "gemma2", "gemma3_text", "phi", "phi3",
    "gpt2", "gptj", "gpt_neox", "falcon", "bert", "roberta", "xlm-roberta", "distilbert", "t5",
    "starcoder2", "granite", "olmo", "stablelm", "opt", "bloom", "gpt_neo",
)
# Variants with keys the catalog entries leave at their defaults.
VARIANTS = {
    "llama-attention-bias": ("llama", {"attention_bias": True, "mlp_bias": True, "num_hidden_layers": 2}),
    "qwen2-sliding-window": ("qwen2", {"use_sliding_window": True, "sliding_window": 1024, "num_hidden_layers": 2}),
    "falcon-rw-style": ("falcon", {"multi_query": False, "parallel_attn": False, "num_hidden_layers": 2}),
    "gpt-neox-no-attention-bias": ("gpt_neox", {"attention_bias": False, "num_hidden_layers": 2}),
    "stablelm-parallel-qkv-bias": ("stablelm", {"use_parallel_residual": True, "use_qkv_bias": True, "num_hidden_layers": 2}),
    "starcoder2-no-bias": ("starcoder2", {"use_bias": False, "tie_word_embeddings": False, "num_hidden_layers": 2}),
    "olmo-attention-bias": ("olmo", {"attention_bias": True, "num_hidden_layers": 2}),
    "opt-untied": ("opt", {"tie_word_embeddings": False, "num_hidden_layers": 2}),
}


def saved(config: transformers.PretrainedConfig) -> dict:
    """The config as config.json holds it: defaults left out, model_type and architectures kept."""
    data = config.to_diff_dict()
    data["model_type"] = config.model_type
    data.pop("transformers_version", None)
    return data


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", type=Path)
    args = parser.parse_args()
    catalog = json.loads(DEFAULT_CATALOG.read_text())
    configs: dict[str, transformers.PretrainedConfig] = {}
    for arch in catalog:
        if arch["family"] in FAMILIES and arch["kind"] in ("decoder", "encoder", "encoder-decoder"):
            configs[arch["id"]] = _decoder_config(arch) if arch["kind"] == "decoder" else encoder_config(arch)
    for family in FAMILIES:
        configs[f"{family}-defaults"] = transformers.CONFIG_MAPPING[family](num_hidden_layers=2) if family not in (
            "gpt2", "gptj", "distilbert", "t5", "bloom", "gpt_neo") else transformers.CONFIG_MAPPING[family]()
    for name, (family, changes) in VARIANTS.items():
        configs[name] = transformers.CONFIG_MAPPING[family](**changes)
    rows = {}
    for name, config in configs.items():
        rows[name] = {"config": saved(config), "transformers": meta_count(lambda config=config: model_for(config))}
        print(f"{name:32} {rows[name]['transformers']:>18,}", flush=True)
    result = {"transformers": transformers.__version__, "torch": torch.__version__, "configs": rows}
    args.out.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
