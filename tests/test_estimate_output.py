"""`trainlint estimate` as a new user meets it: what "fits" means, remedies that save something,
every assumed parallelism said, the catalog listed, names suggested, a model class from the next
file read, and each setting a user knows that changes memory accepted."""

from __future__ import annotations

import json
import textwrap

from trainlint.cli import main


def _estimate(capsys, *args: str) -> tuple[int, str, str]:
    code = main(["estimate", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_a_model_class_imported_from_the_next_file_is_counted(tmp_path, capsys):
    (tmp_path / "model.py").write_text(textwrap.dedent(
        """\
        import torch.nn as nn


        class GPT(nn.Module):
            def __init__(self, vocab=50304, width=768, depth=12):
                super().__init__()
                self.embed = nn.Embedding(vocab, width)
                self.blocks = nn.ModuleList([nn.Linear(width, width) for _ in range(depth)])
                self.head = nn.Linear(width, vocab, bias=False)
        """
    ), encoding="utf-8")
    (tmp_path / "train.py").write_text(textwrap.dedent(
        """\
        import torch
        from model import GPT

        model = GPT(width=512)
        optimizer = torch.optim.AdamW(model.parameters())
        for x, y in loader:
            loss = model(x, y)
            loss.backward()
            optimizer.step()
        """
    ), encoding="utf-8")
    code, out, err = _estimate(capsys, str(tmp_path / "train.py"), "--format", "json")
    report = json.loads(out)
    assert report["model"]["params"] == 2 * 50304 * 512 + 12 * (512 * 512 + 512), err
    assert report["inputs"]["model"]["value"] == "GPT (a class of model.py)"
    assert code == 2  # its activations are not modelled: the count, and no verdict


TOO_BIG = ("--model", "meta-llama/Llama-3.2-1B", "--gpu", "a10g", "--batch-size", "4", "--seq-len", "1280", "--dtype", "amp-bf16")


def test_the_report_says_what_fits_means(capsys):
    code, out, _ = _estimate(capsys, *TOO_BIG)
    assert code == 1
    rule = next(line for line in out.splitlines() if line.strip().startswith("fits ="))
    assert "high end of the process peak" in rule and "22.3 GiB usable" in rule
    remedies = [line for line in out.splitlines() if line.startswith("  - ")]
    assert remedies and not any("still too big" in line for line in remedies)
    # a remedy whose estimate fits and whose high end does not is called tight, with the high end shown
    lora = next(line for line in remedies if line.startswith("  - LoRA (rank 16"))
    assert "tight: the estimate fits, the high end" in lora and "(up to " in lora


def test_no_remedy_that_saves_nothing_is_listed(capsys):
    _, out, _ = _estimate(capsys, *TOO_BIG, "--format", "json")
    report = json.loads(out)
    assert report["remedies"]
    assert all(remedy["saving_bytes"] >= 0.05 * 2**30 or remedy["high_saving_bytes"] >= 0.05 * 2**30 for remedy in report["remedies"])
    assert not any(remedy["change"].startswith("fused AdamW") for remedy in report["remedies"])  # the step is not the peak
    assert {remedy["verdict"] for remedy in report["remedies"]} <= {"fits", "tight", "oom"}


def test_every_assumed_gpu_count_and_sharding_is_said(tmp_path, capsys):
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent(
        """\
        import torch
        from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
        from transformers import AutoModelForCausalLM

        model = FSDP(AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.2-1B"))
        optimizer = torch.optim.AdamW(model.parameters())
        for batch in loader:
            model(**batch).loss.backward()
            optimizer.step()
        """
    ), encoding="utf-8")
    _, out, _ = _estimate(capsys, str(script), "--seq-len", "512", "--format", "json")
    report = json.loads(out)
    assert report["inputs"]["gpu"] == {"value": "h100-sxm", "source": "assumed (give --gpu)"}
    assert report["inputs"]["gpus"]["value"] == 1 and report["inputs"]["gpus"]["source"].startswith("assumed")
    assert any(note.startswith("fsdp (line 5") and "1 GPU" in note and "--gpus" in note for note in report["notes"])
    _, out, _ = _estimate(capsys, str(script), "--seq-len", "512", "--gpu", "8xa100-80gb", "--format", "json")
    report = json.loads(out)
    assert report["inputs"]["gpus"] == {"value": 8, "source": "command line (--gpu 8xa100-80gb)"}
    assert not any(note.startswith("fsdp (line 5") for note in report["notes"])


def test_an_unknown_model_gets_the_nearest_names(capsys):
    code, out, err = _estimate(capsys, "--model", "mistral-7b")
    assert code == 2 and out == ""
    assert "did you mean mistral-7b-v0.1, mistral-7b-v0.2, mistral-7b-v0.3?" in err
    assert "--list-models" in err
    _, _, err = _estimate(capsys, "--model", "openai-community/gpt2-xxl")
    assert "did you mean gpt2-xl" in err


def test_list_models_lists_the_catalog_filtered_by_a_query(capsys):
    code, out, _ = _estimate(capsys, "--list-models")
    assert code == 0
    rows = out.splitlines()
    assert rows[0].split()[:3] == ["model", "parameters", "family"]
    assert any(row.startswith("gpt2 ") for row in rows) and len(rows) > 100
    code, out, _ = _estimate(capsys, "--list-models", "mistral 7b")
    rows = out.splitlines()[1:]
    assert code == 0 and all("mistral" in row.lower() and "7b" in row.lower() for row in rows)  # in a name or an alias
    assert {"mistral-7b-v0.1", "mistral-7b-v0.3", "mixtral-8x7b"} <= {row.split()[0] for row in rows}
    code, out, err = _estimate(capsys, "--list-models", "no-such-model-anywhere")
    assert code == 1 and out == "" and "no model in the catalog matches" in err


def test_falcon_fused_qkv_targets_given_as_query_and_value(capsys):
    code, out, err = _estimate(capsys, "--model", "tiiuae/falcon-7b", "--lora-rank", "8", "--lora-targets", "query,value",
                               "--seq-len", "512", "--format", "json")
    assert code in (0, 1), err
    split = json.loads(out)
    _, out, _ = _estimate(capsys, "--model", "tiiuae/falcon-7b", "--lora-rank", "8", "--lora-targets", "q_proj,v_proj",
                          "--seq-len", "512", "--format", "json")
    named = json.loads(out)
    assert split["breakdown"] == named["breakdown"]
    assert split["inputs"]["lora_targets"]["value"] == ["query", "value"]
    assert any("query -> q_proj" in note and "value -> v_proj" in note for note in split["notes"])
    # 71 heads of 64 and one key/value head: rank 8 on the query part (4544 -> 4544) and on the value
    # part (4544 -> 64) of the fused projection, in each of the 32 layers
    assert any(f"{32 * 8 * (4544 + 4544 + 4544 + 64):,} trainable parameters" in note for note in split["notes"])
    _, out, _ = _estimate(capsys, "--model", "tiiuae/falcon-7b", "--lora-rank", "8", "--lora-targets", "query_key_value",
                          "--seq-len", "512", "--format", "json")
    fused = json.loads(out)  # one adapter over the whole fused projection: 4544 -> 4544 + 2 * 64
    assert any(f"{32 * 8 * (4544 + 4544 + 2 * 64):,} trainable parameters" in note for note in fused["notes"])


def test_a_scripts_all_linear_targets_are_read(tmp_path, capsys):
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent(
        """\
        from peft import LoraConfig
        from transformers import AutoModelForCausalLM, TrainingArguments

        model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.2-1B")
        config = LoraConfig(r=16, target_modules="all-linear")
        args = TrainingArguments(output_dir="out", per_device_train_batch_size=2)
        """
    ), encoding="utf-8")
    _, out, err = _estimate(capsys, str(script), "--seq-len", "512", "--format", "json")
    report = json.loads(out)
    assert report["inputs"]["lora_targets"]["value"] == ["all-linear"], err
    # every linear of the 16 layers: q, k, v, o, gate, up, down
    per_layer = 16 * ((2048 + 2048) + 2 * (2048 + 512) + (2048 + 2048) + 3 * (2048 + 8192))
    assert any(f"{16 * per_layer:,} trainable parameters" in note for note in report["notes"])


def test_lora_on_the_lm_head_is_estimated(capsys):
    code, out, err = _estimate(capsys, "--model", "meta-llama/Llama-3.2-1B", "--lora-rank", "8", "--lora-targets", "q_proj,lm_head",
                               "--seq-len", "512", "--format", "json")
    assert code == 0, err
    report = json.loads(out)
    head = 8 * (2048 + 128_256)  # A: rank x hidden, B: vocabulary x rank
    assert any(f"= {head:,} parameters" in note for note in report["notes"]), report["notes"]
    neox = _estimate(capsys, "--model", "pythia-1b", "--lora-rank", "8", "--lora-targets", "query_key_value,embed_out", "--seq-len", "512")
    assert neox[0] == 0, neox[2]


def test_sharding_over_one_gpu_says_it_saves_nothing():
    """FSDP or ZeRO over the one GPU nobody counted: the note says a single shard saves nothing and how to give the count."""
    from trainlint.estimator.architectures import find_architecture
    from trainlint.estimator.costmodel import estimate
    from trainlint.estimator.plan import Plan

    llama = find_architecture("llama-3.1-8b")
    for sharding in ("fsdp", "fsdp-grad-op", "zero2", "zero3"):
        alone = estimate(Plan(model=llama, dtype="bf16", sharding=sharding, gpus=1, attention="sdpa"))
        assert any("over 1 GPU (a single shard saves nothing; give --gpus N" in note for note in alone.assumptions), sharding
        spread = estimate(Plan(model=llama, dtype="bf16", sharding=sharding, gpus=4, attention="sdpa"))
        assert any(f"{sharding.split('-')[0]}" in note and "over 4 GPUs" in note for note in spread.assumptions), sharding


def test_a_classifier_head_is_stated_on_the_command_line(capsys):
    """--head classifier: a BERT fine-tuned for classification keeps no vocabulary logits, and the input says so."""
    args = ["--model", "bert-large-uncased", "--batch-size", "4", "--seq-len", "512", "--gpu", "v100-16gb", "--format", "json"]
    code, masked_lm, _ = _estimate(capsys, *args)
    assert code == 0
    code, classifier, _ = _estimate(capsys, *args, "--head", "classifier")
    assert code == 0
    masked_lm, classifier = json.loads(masked_lm), json.loads(classifier)
    assert masked_lm["breakdown"]["logits"] > 0.5 * 2**30 and classifier["breakdown"]["logits"] == 0
    assert classifier["peak"]["allocated"]["estimate"] < masked_lm["peak"]["allocated"]["estimate"]
    assert classifier["inputs"]["head"] == {"value": "classifier", "source": "command line"}


def test_whose_code_runs_the_model_is_stated_on_the_command_line(capsys):
    """--model-code litgpt: a LoRA fine-tune that `litgpt finetune_lora` runs keeps what LitGPT's modules keep (its fused
    GELU, adapters in the model's dtype, a chunked loss), far less than transformers' Python GELU for Phi-2, and the
    input says whose code it took; asked without it, transformers' modules, as before."""
    args = ["--model", "phi-2", "--lora-rank", "8", "--lora-targets", "q_proj,v_proj", "--batch-size", "4", "--seq-len", "512",
            "--dtype", "bf16", "--gpu", "a100-40gb", "--format", "json"]
    code, transformers_layers, err = _estimate(capsys, *args)
    assert code in (0, 1), err
    code, litgpt_layers, err = _estimate(capsys, *args, "--model-code", "litgpt")
    assert code in (0, 1), err
    transformers_layers, litgpt_layers = json.loads(transformers_layers), json.loads(litgpt_layers)
    assert litgpt_layers["inputs"]["model_code"] == {"value": "litgpt", "source": "command line"}
    assert litgpt_layers["breakdown"]["activations"] < 0.7 * transformers_layers["breakdown"]["activations"]
    assert any("LitGPT's modules" in note for note in litgpt_layers["notes"])
