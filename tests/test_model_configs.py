"""Any model with a config.json answers: a model folder, the file, or the local Hugging Face cache,
counted as transformers builds it; variants of catalog architectures use the catalog's measurements."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from cli_process import TRAINLINT

from trainlint.estimator.architectures import parameter_count
from trainlint.estimator.model_configs import UnsupportedConfig, architecture_from_config, resolve_model_name

COUNTS = json.loads((Path(__file__).resolve().parent.parent / "estimator" / "calibration" / "config_counts.json").read_text())


@pytest.mark.parametrize("name", sorted(COUNTS["configs"]))
def test_a_saved_config_counts_as_transformers_builds_it(name):
    row = COUNTS["configs"][name]
    architecture = architecture_from_config(row["config"], name, "config.json")
    expected = row["transformers"]
    if row["config"]["model_type"] == "t5" and not architecture.tied_embeddings:
        # transformers 5.24 ties T5's lm_head whatever the config says (calibration README); the checkpoint does not
        expected += architecture.vocab * architecture.hidden
    assert parameter_count(architecture) == expected


def test_a_variant_resolves_to_its_base_architecture():
    config = dict(COUNTS["configs"]["llama-3-8b"]["config"], _name_or_path="someone/Llama-3-8B-Coder-Finetune")
    architecture = architecture_from_config(config, "someone/Llama-3-8B-Coder-Finetune", "config.json")
    assert architecture.base == "llama-3-8b" and "catalog entry llama-3-8b" in architecture.source
    changed = architecture_from_config(dict(config, vocab_size=128_300), "x", "config.json")
    assert changed.base is None  # another vocabulary: another architecture


def test_unknown_model_types_and_bad_sizes_are_refused_with_the_reason():
    with pytest.raises(UnsupportedConfig, match="model_type 'mamba'"):
        architecture_from_config({"model_type": "mamba"}, "m", "config.json")
    with pytest.raises(UnsupportedConfig, match="hidden_size"):
        architecture_from_config({"model_type": "llama", "hidden_size": "big"}, "m", "config.json")
    with pytest.raises(UnsupportedConfig, match="not a JSON object"):
        architecture_from_config([1, 2], "m", "config.json")


def test_structures_the_counts_do_not_cover_are_refused_with_the_reason():
    # opt-350m projects its 512-wide embeddings to 1024 and normalises after each sublayer
    opt_350m = {"model_type": "opt", "hidden_size": 1024, "word_embed_proj_dim": 512, "do_layer_norm_before": False}
    with pytest.raises(UnsupportedConfig, match="opt-350m"):
        architecture_from_config(opt_350m, "facebook/opt-350m", "config.json")
    with pytest.raises(UnsupportedConfig, match="per-head query/key layer norms"):
        architecture_from_config({"model_type": "stablelm", "qk_layernorm": True}, "m", "config.json")


def _hub_snapshot(cache: Path, model_id: str, config: dict) -> Path:
    repository = cache / ("models--" + model_id.replace("/", "--"))
    blob = repository / "blobs" / "abc123"
    blob.parent.mkdir(parents=True)
    blob.write_text(json.dumps(config), encoding="utf-8")
    snapshot = repository / "snapshots" / "0123abcd"
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").symlink_to(blob)
    (repository / "refs").mkdir()
    (repository / "refs" / "main").write_text("0123abcd", encoding="utf-8")
    return snapshot


def test_a_model_in_the_local_hub_cache_answers_before_the_catalog(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    config = dict(COUNTS["configs"]["mistral-7b-v0.1"]["config"], vocab_size=32_002)  # a fine-tune with two added tokens
    _hub_snapshot(tmp_path / "hf" / "hub", "teknium/OpenHermes-2.5-Mistral-7B", config)
    architecture, reason = resolve_model_name("teknium/OpenHermes-2.5-Mistral-7B", None)
    assert reason is None and architecture.family == "mistral"
    assert parameter_count(architecture) == COUNTS["configs"]["mistral-7b-v0.1"]["transformers"] + 2 * 2 * 4096
    missing, reason = resolve_model_name("nobody/Nothing-7B", None)
    assert missing is None and "config.json" in reason and "local Hugging Face cache" in reason


def test_the_cli_takes_a_config_file_or_a_model_folder(tmp_path):
    folder = tmp_path / "my-model"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(COUNTS["configs"]["qwen2.5-7b"]["config"]), encoding="utf-8")
    for given in (str(folder), str(folder / "config.json")):
        result = subprocess.run(
            [*TRAINLINT, "estimate", "--model", given, "--seq-len", "1024", "--format", "json"],
            capture_output=True, text=True, check=False,
        )
        assert result.returncode in (0, 1), result.stderr
        report = json.loads(result.stdout)
        assert report["model"]["params"] == COUNTS["configs"]["qwen2.5-7b"]["transformers"]
        assert "catalog entry qwen2" in report["model"]["source"]  # Qwen2-7B and Qwen2.5-7B share one architecture


def test_a_script_may_name_a_model_folder_only_inside_its_workspace(tmp_path):
    from trainlint.analysis.module import ModuleAnalysis
    from trainlint.analysis.workspace import Workspace
    from trainlint.estimator.custom_models import resolve_model
    from trainlint.estimator.reading import read_inputs
    from trainlint.estimator.script_plan import plan_settings

    project, elsewhere = tmp_path / "project", tmp_path / "elsewhere"
    for folder in (project / "checkpoints" / "run1", elsewhere / "model"):
        folder.mkdir(parents=True)
        (folder / "config.json").write_text(json.dumps(COUNTS["configs"]["gpt2"]["config"]), encoding="utf-8")
    (project / "linked").symlink_to(elsewhere / "model")

    def resolved(path: str):
        text = f'from transformers import AutoModelForCausalLM\nmodel = AutoModelForCausalLM.from_pretrained("{path}")\n'
        module = ModuleAnalysis(text, str(project / "train.py"), workspace=Workspace([project]))
        read = read_inputs(module)
        return resolve_model(module, read, plan_settings(read, {}))

    assert resolved("./checkpoints/run1")[0].base == "gpt2"
    for outside in (str(elsewhere / "model"), "../elsewhere/model", "linked"):
        architecture, reason = resolved(outside)
        assert architecture is None and "outside the workspace" in reason, (outside, reason)


def test_a_configs_dropout_decides_what_training_keeps():
    """A config.json that turns a family's default dropout off (BERT's 0.1 by default) keeps no masks in training."""
    from trainlint.estimator.costmodel import estimate
    from trainlint.estimator.plan import Plan

    bert = {"model_type": "bert", "hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12, "intermediate_size": 3072}
    default = architecture_from_config(bert, "bert", "config.json")
    quiet = architecture_from_config(bert | {"hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0}, "quiet", "config.json")
    assert (quiet.hidden_dropout, quiet.attention_dropout) == (0.0, 0.0)

    def activations(model, dropout=None):
        plan = Plan(model=model, dtype="bf16", batch_size=2, seq_len=256, attention="eager", dropout=dropout, head="classifier")
        return estimate(plan).breakdown.activations.estimate

    assert activations(quiet) == activations(default, dropout=False) < activations(default)


def test_an_explicit_null_sliding_window_keeps_every_token_in_the_cache():
    """Mistral v0.1's config sets a 4,096-token window; v0.2 and later write `"sliding_window": null`, which
    turns it off, so a 32k-token generation caches all 32k tokens, not 4,096."""
    mistral = {"model_type": "mistral", "hidden_size": 4096, "num_attention_heads": 32, "num_key_value_heads": 8,
               "num_hidden_layers": 32, "intermediate_size": 14336, "vocab_size": 32768, "max_position_embeddings": 32768}
    assert architecture_from_config(mistral | {"sliding_window": 4096}, "v01", "config.json").sliding_window == 4096
    assert architecture_from_config(mistral, "absent", "config.json").sliding_window == 4096
    assert architecture_from_config(mistral | {"sliding_window": None}, "v03", "config.json").sliding_window is None
