"""The memory model: model states follow the published per-parameter accounting, activations and
intervals behave as a user expects, verdicts and remedies are consistent, and the CLI reports it."""

from __future__ import annotations

import json
import subprocess
from dataclasses import replace

import pytest
from cli_process import TRAINLINT

from trainlint.estimator.architectures import find_architecture, parameter_count, shape
from trainlint.estimator.cost_constants import QUANT_BYTES
from trainlint.estimator.costmodel import estimate, verdict
from trainlint.estimator.hardware import resolve_target
from trainlint.estimator.plan import CannotEstimate, Interval, Plan
from trainlint.estimator.units import GIB

LLAMA = find_architecture("llama-3-8b")


def _plan(**changes) -> Plan:
    settings = {"model": LLAMA, "batch_size": 1, "seq_len": 2048, "dtype": "bf16", "optimizer": "adamw"}
    settings.update(changes)
    return Plan(**settings)


def test_full_fine_tuning_states_follow_the_per_parameter_accounting():
    params = parameter_count(LLAMA)
    fp32 = estimate(_plan(dtype="fp32")).breakdown
    assert fp32.weights.estimate == 4 * params and fp32.gradients.estimate == 4 * params
    assert fp32.optimizer.estimate == 8 * params  # AdamW: two fp32 states
    bf16 = estimate(_plan(dtype="bf16")).breakdown
    assert bf16.weights.estimate == 2 * params and bf16.optimizer.estimate == 4 * params  # states in the param dtype
    amp = estimate(_plan(dtype="amp-bf16")).breakdown
    assert amp.weights.estimate == 4 * params and amp.autocast_cache.estimate == 2 * params
    eight_bit = estimate(_plan(optimizer="adamw-8bit")).breakdown
    assert eight_bit.optimizer.estimate == 2 * params
    sgd = estimate(_plan(optimizer="sgd")).breakdown
    assert sgd.optimizer.estimate == 0


def test_zero_and_fsdp_divide_model_states_across_gpus():
    ddp = estimate(_plan(gpus=8)).breakdown
    zero1 = estimate(_plan(gpus=8, sharding="zero1")).breakdown
    zero2 = estimate(_plan(gpus=8, sharding="zero2")).breakdown
    zero3 = estimate(_plan(gpus=8, sharding="zero3")).breakdown
    assert zero1.optimizer.estimate == pytest.approx(ddp.optimizer.estimate / 8)
    assert zero1.gradients.estimate == ddp.gradients.estimate
    assert zero2.gradients.estimate == pytest.approx(ddp.gradients.estimate / 8)
    assert ddp.weights.estimate / 8 < zero3.weights.estimate < ddp.weights.estimate / 3  # plus gathered units and a bucket
    offloaded = estimate(_plan(gpus=8, sharding="zero3", offload=("optimizer",))).breakdown
    assert offloaded.optimizer.estimate == 0


def test_zero3_keeps_deepspeeds_reduction_bucket_and_steps_an_fp32_copy_of_the_gradient_partition():
    """DeepSpeed 0.14.2's stage3.py: a 16-bit bucket of reduce_bucket_size elements (default 5e8; the HF Trainer's
    "auto" hidden², the low end) allocated with the optimizer, and each sub-group's gradient partition copied into fp32
    for the step (sub_group_size 1e9 elements at most)."""
    params = parameter_count(LLAMA)
    hidden = shape(LLAMA).hidden
    zero3 = estimate(_plan(gpus=8, sharding="zero3")).breakdown
    zero3_fp32 = estimate(_plan(gpus=8, sharding="zero3", dtype="fp32")).breakdown
    assert zero3.weights.estimate - zero3.weights.low == pytest.approx(2 * (5e8 - hidden**2))
    assert zero3_fp32.weights.estimate - zero3_fp32.weights.low == pytest.approx(4 * (5e8 - hidden**2))
    ddp_step = estimate(_plan(gpus=8, foreach=True)).breakdown.optimizer_step.estimate
    fp32_gradients = 4 * min(params / 8, 1e9)  # Llama 3 8B's partition over 8 GPUs is just over one sub-group
    assert zero3.optimizer_step.estimate == pytest.approx(ddp_step / 8 + fp32_gradients)  # foreach temporary beside it
    one_gpu = estimate(_plan(gpus=1, sharding="zero3", foreach=False, optimizer="sgd")).breakdown
    assert one_gpu.optimizer_step.estimate == pytest.approx(4 * 1e9)  # one sub-group at most
    offloaded = estimate(_plan(gpus=8, sharding="zero3", foreach=False, optimizer="sgd", offload=("optimizer",))).breakdown
    assert offloaded.optimizer_step.estimate == 0  # the fp32 gradients live on the CPU


def test_lora_and_qlora_train_a_few_million_parameters_on_a_smaller_base():
    full = estimate(_plan())
    lora = estimate(_plan(lora_rank=16, lora_targets=("q_proj", "v_proj")))
    geometry = shape(LLAMA)
    q, v = geometry.lora_dims["q_proj"], geometry.lora_dims["v_proj"]
    assert lora.trainable_params == geometry.layers * 16 * (sum(q) + sum(v))
    assert lora.breakdown.gradients.estimate == lora.trainable_params * 4
    qlora = estimate(_plan(lora_rank=16, quant="nf4"))
    # 4-bit body, 16-bit embeddings and LM head (a quarter of the bytes for Llama 3's 128k vocabulary)
    assert qlora.breakdown.weights.estimate < lora.breakdown.weights.estimate / 2.5
    assert qlora.process.estimate < lora.process.estimate < full.process.estimate
    with pytest.raises(CannotEstimate):
        estimate(_plan(quant="nf4"))  # a quantised base does not train without adapters


def test_activations_grow_with_batch_and_sequence_and_checkpointing_cuts_them():
    base = estimate(_plan(batch_size=4)).breakdown.activations.estimate
    assert estimate(_plan(batch_size=8)).breakdown.activations.estimate == pytest.approx(2 * base)
    longer = estimate(_plan(batch_size=4, seq_len=4096)).breakdown.activations.estimate
    assert longer == pytest.approx(2 * base)  # linear with flash/SDPA attention
    eager = estimate(_plan(batch_size=4, seq_len=4096, attention="eager")).breakdown.activations.estimate
    assert eager > longer * 1.5  # the score matrices grow with the square of the length
    checkpointed = estimate(_plan(batch_size=4, gradient_checkpointing=True)).breakdown.activations.estimate
    assert checkpointed < base / 5


def test_every_peak_is_an_interval_and_the_three_peaks_are_ordered():
    result = estimate(_plan(batch_size=4), context_bytes=0.5 * GIB)
    for peak in (result.allocated, result.reserved, result.process):
        assert peak.low <= peak.estimate <= peak.high
    assert result.allocated.estimate < result.reserved.estimate < result.process.estimate
    assert result.process.estimate - result.reserved.estimate == pytest.approx(0.5 * GIB)
    assert result.assumptions, "the numbers come with what they assume"


def test_generation_counts_the_kv_cache_for_the_whole_context():
    short = estimate(_plan(mode="generate", batch_size=8, seq_len=512, max_context=1024)).breakdown
    long = estimate(_plan(mode="generate", batch_size=8, seq_len=512, max_context=8192)).breakdown
    assert long.kv_cache.estimate == pytest.approx(8 * short.kv_cache.estimate)
    per_token = 2 * 32 * 8 * 128 * 2  # layers x kv heads x head dim, K and V, bf16
    assert short.kv_cache.estimate == per_token * 1024 * 8
    assert short.gradients.estimate == 0 and short.optimizer.estimate == 0


def test_verdicts_and_remedies_for_a_full_fine_tune_that_does_not_fit_a_24_gb_card():
    from trainlint.estimator.report import build

    target = resolve_target("rtx-4090")
    report = build(_plan(batch_size=4), target, {})
    assert report.verdict == "oom"
    assert any(remedy.fits for remedy in report.remedies), "some change makes it fit"
    qlora = next(remedy for remedy in report.remedies if remedy.change.startswith("QLoRA"))
    assert qlora.saving_bytes > 0
    big = build(_plan(batch_size=1, lora_rank=16, quant="nf4", seq_len=512), resolve_target("h100-sxm"), {})
    assert big.verdict == "fits" and big.max_batch_size is not None and big.max_batch_size >= 1
    assert verdict(big.result, 1.0) == "oom"


def test_unknown_models_give_no_number():
    with pytest.raises(CannotEstimate):
        estimate(Plan(model=None))
    result = subprocess.run(
        [*TRAINLINT, "estimate", "--model", "no-such-model-7b", "--format", "json"],
        capture_output=True, text=True, check=False,
    )
    assert result.returncode == 2
    assert json.loads(result.stdout)["verdict"] == "unknown"


def test_the_cli_reports_breakdown_peaks_verdict_and_remedies_as_json():
    result = subprocess.run(
        [*TRAINLINT, "estimate", "--model", "meta-llama/Meta-Llama-3-8B", "--batch-size", "4",
         "--seq-len", "2048", "--dtype", "bf16", "--gpu", "rtx-4090", "--format", "json"],
        capture_output=True, text=True, check=False,
    )
    assert result.returncode == 1, result.stderr
    report = json.loads(result.stdout)
    assert set(report) >= {"model", "inputs", "breakdown", "peak", "gpu", "verdict", "remedies", "max_batch_size", "smallest_gpu", "notes"}
    assert report["model"]["id"] == "llama-3-8b"
    assert report["inputs"]["batch_size"] == {"value": 4, "source": "command line"}
    assert report["inputs"]["optimizer"]["source"] == "assumed"
    assert report["verdict"] == "oom" and report["remedies"]
    peak = report["peak"]["process"]
    assert peak["low"] <= peak["estimate"] <= peak["high"]
    text = subprocess.run(
        [*TRAINLINT, "estimate", "--model", "llama-3-8b", "--lora-rank", "16", "--quant", "nf4",
         "--seq-len", "512", "--gpu", "rtx-4090"],
        capture_output=True, text=True, check=False,
    )
    assert text.returncode == 0, text.stderr
    assert "verdict" in text.stdout and "weights" in text.stdout


def test_the_gpu_listing():
    result = subprocess.run([*TRAINLINT, "gpus"], capture_output=True, text=True, check=True)
    assert "h100" in result.stdout.lower()
    instances = subprocess.run([*TRAINLINT, "gpus", "--instances"], capture_output=True, text=True, check=True)
    assert "p4d.24xlarge" in instances.stdout


def _calibration(name: str) -> dict:
    from pathlib import Path

    return json.loads((Path(__file__).resolve().parent.parent / "estimator" / "calibration" / name).read_text())


def test_the_peak_phases_follow_what_memtracker_measured():
    rows = {(row["seq"], row["foreach"], row["accumulate"]): row for row in _calibration("step_peaks.json")["rows"]}
    foreach, single = rows[(16, True, 1)], rows[(16, False, 1)]
    params = foreach["param_bytes"]
    # the step: weights, gradients, two AdamW states, and the foreach temporary of one parameter copy
    assert foreach["peak"]["OPT"] == pytest.approx(3 * params, rel=1e-3)
    assert single["peak"]["OPT"] - 2 * params == pytest.approx(2 * single["largest_param_bytes"], rel=1e-3)
    # the forward/backward peak holds no gradients unless they accumulate
    assert rows[(512, True, 1)]["peak"]["GRAD"] == 0 and rows[(512, True, 2)]["peak"]["GRAD"] == params
    # and the cost model's phases say the same
    short = _plan(dtype="bf16", seq_len=16)
    result = estimate(short).breakdown
    assert result.step().estimate > result.forward_backward().estimate
    assert result.optimizer_step.estimate == pytest.approx(result.weights.estimate)  # bf16: states and temporary in bf16
    per_tensor = estimate(_plan(dtype="bf16", seq_len=16, foreach=False)).breakdown
    assert per_tensor.optimizer_step.estimate < result.optimizer_step.estimate / 5  # two embedding-sized buffers
    long = _plan(dtype="bf16", seq_len=4096, batch_size=4)
    alone, accumulating = estimate(long), estimate(_plan(dtype="bf16", seq_len=4096, batch_size=4, grad_accum=4))
    assert accumulating.allocated.estimate - alone.allocated.estimate == pytest.approx(alone.breakdown.gradients.estimate)


def test_ddp_keeps_gradient_buckets_on_each_gpu():
    single, ddp = estimate(_plan(gpus=1)).breakdown, estimate(_plan(gpus=4)).breakdown
    assert single.gradient_buckets.estimate == 0 and ddp.gradient_buckets.estimate == ddp.gradients.estimate
    assert estimate(_plan(gpus=4, sharding="zero2")).breakdown.gradient_buckets.estimate == 0


def test_a_frozen_base_with_adapters_keeps_what_peft_measured():
    from trainlint.estimator.activation_data import measured_layer_coefficients
    from trainlint.estimator.layer_activations import adapter_layer_adjustment

    measured = _calibration("adapter_activations.json")
    everything = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
    for arch_id, cases in measured["layers"].items():
        arch = find_architecture(arch_id)
        full = measured_layer_coefficients(arch_id, "sdpa")[0]
        assert full == pytest.approx(cases["full"], abs=0.01)
        for case, targets in (("lora q,v", ("q_proj", "v_proj")), ("lora all-linear", everything)):
            for suffix, dropout in (("", 0.0), (" dropout", 0.05)):
                plan = Plan(model=arch, lora_rank=measured["rank"], lora_targets=targets, lora_dropout=dropout, dtype="bf16")
                assert full + adapter_layer_adjustment(plan, shape(arch)) == pytest.approx(cases[case + suffix], rel=0.005), (arch_id, case)


def test_fsdp_gathers_two_units_and_accumulates_unsharded_gradients():
    sharded = estimate(_plan(gpus=8, sharding="fsdp", dtype="amp-bf16")).breakdown
    assert sharded.autocast_cache.estimate == 0, "gathered parameters are not leaves: no cast cache"
    accumulating = estimate(_plan(gpus=8, sharding="fsdp", dtype="amp-bf16", grad_accum=4)).breakdown
    # unsharded under no_sync, in the gathered 16-bit param_dtype (fsdp_accumulation.py); fp32 at the high end
    assert accumulating.gradients.estimate == pytest.approx(2 * parameter_count(LLAMA))
    assert accumulating.gradients.high == pytest.approx(4 * parameter_count(LLAMA))
    assert accumulating.gradients_in_backward


def test_checkpointing_every_nth_layer_and_a_static_kv_cache():
    full = estimate(_plan(batch_size=4, gradient_checkpointing=True)).breakdown.activations.estimate
    half = estimate(_plan(batch_size=4, gradient_checkpointing=True, checkpoint_every=2)).breakdown.activations.estimate
    none = estimate(_plan(batch_size=4)).breakdown.activations.estimate
    assert full < half < none
    dynamic = estimate(_plan(mode="generate", seq_len=128, max_context=256)).breakdown.kv_cache.estimate
    static = estimate(_plan(mode="generate", seq_len=128, max_context=256, kv_cache_len=8192)).breakdown.kv_cache.estimate
    assert static == pytest.approx(32 * dynamic)
    result = subprocess.run(
        [*TRAINLINT, "estimate", "--model", "llama-3-8b", "--seq-len", "1024",
         "--activation-checkpointing", "every-4", "--format", "json"], capture_output=True, text=True, check=False,
    )
    assert result.returncode in (0, 1) and any("every 4th layer" in note for note in json.loads(result.stdout)["notes"])


def test_selective_checkpointing_keeps_what_torch_keeps():
    from trainlint.estimator.architectures import Architecture
    from trainlint.estimator.layer_activations import selective_coefficient

    measured = _calibration("step_peaks.json")
    config = measured["config"]
    layer = Architecture(
        id="step-peaks-llama", family="llama", kind="decoder", layers=config["num_hidden_layers"], hidden=config["hidden_size"],
        heads=config["num_attention_heads"], kv_heads=config["num_key_value_heads"], head_dim=config["hidden_size"] // config["num_attention_heads"],
        intermediate=config["intermediate_size"], vocab=1024, max_positions=2048, published_params=0, source="test",
    )
    plan = Plan(model=layer, gradient_checkpointing=True, checkpoint_policy="selective", dtype="bf16")
    assert selective_coefficient(plan, shape(layer), 1024) == pytest.approx(measured["kept_per_layer_after_forward"]["selective"], rel=0.01)
    assert measured["kept_per_layer_after_forward"]["full"] == pytest.approx(2.0, rel=0.01)  # the layer's input
    full = estimate(_plan(batch_size=4, gradient_checkpointing=True)).breakdown.activations.estimate
    selective = estimate(_plan(batch_size=4, gradient_checkpointing=True, checkpoint_policy="selective")).breakdown.activations.estimate
    assert full < selective < estimate(_plan(batch_size=4)).breakdown.activations.estimate
    # torchtitan's op policy recomputes every second matmul of a layer as well
    alternate = Plan(model=layer, gradient_checkpointing=True, checkpoint_policy="alternate", dtype="bf16")
    assert selective_coefficient(alternate, shape(layer), 1024) == pytest.approx(measured["kept_per_layer_after_forward"]["alternate"], rel=0.01)
    result = subprocess.run(
        [*TRAINLINT, "estimate", "--model", "llama-3-8b", "--seq-len", "1024",
         "--activation-checkpointing", "alternate", "--format", "json"], capture_output=True, text=True, check=False,
    )
    assert any("torchtitan's op policy" in note for note in json.loads(result.stdout)["notes"])


def test_autocast_keeps_what_cuda_autocast_keeps():
    """The emulated CUDA autocast counts also hold the cached 16-bit weight casts, a per-layer constant:
    the SDPA rows (whose per-token part does not depend on the length) give it, over two token counts."""
    from trainlint.estimator.layer_activations import autocast_layer_adjustment

    measured = _calibration("amp_activations.json")
    (b1, s1), (b2, s2) = measured["shapes"]
    t1, t2 = b1 * s1, b2 * s2
    for arch_id, kernels in measured["layers"].items():
        arch = find_architecture(arch_id)
        sdpa = [amp - pure for amp, pure in zip(kernels["sdpa"]["amp"], kernels["sdpa"]["bf16"])]
        casts = (sdpa[0] - sdpa[1]) / (1 / t1 - 1 / t2)  # the weight casts, bytes per layer and hidden unit
        for attention, rows in kernels.items():
            amp, pure = rows["amp"], rows["bf16"]
            for extra, tokens, seq in ((amp[0] - pure[0], t1, s1), (amp[1] - pure[1], t2, s2)):
                plan = Plan(model=arch, dtype="amp-bf16", attention=attention, dropout=False)  # measured without dropout
                assert extra - casts / tokens == pytest.approx(autocast_layer_adjustment(plan, shape(arch), seq), abs=0.05), (arch_id, attention, seq)
            # 16-bit weights under the same autocast (FSDP's param_dtype=bf16): nothing to cast, so no constant
            for extra, seq in ((rows["amp16"][0] - pure[0], s1), (rows["amp16"][1] - pure[1], s2)):
                plan = Plan(model=arch, dtype="amp-bf16", attention=attention, dropout=False)
                assert extra == pytest.approx(autocast_layer_adjustment(plan, shape(arch), seq, weights_16bit=True), abs=0.05), (arch_id, attention, seq)


def test_under_autocast_the_layers_keep_the_residual_stream_as_wide_as_the_weights_the_forward_sees():
    """fp32 weights: an fp32 residual stream (a checkpoint keeps a 4-byte input) and one cast per linear; FSDP's
    16-bit gathered units: a Llama layer keeps what pure 16 bits keeps; an fp32 policy is autocast over fp32."""
    from trainlint.estimator.layer_activations import autocast_layer_adjustment

    llama = find_architecture("llama-3-8b")
    tokens = 2 * 1024
    common = dict(model=llama, dtype="amp-bf16", batch_size=2, seq_len=1024, attention="sdpa", dropout=False, gradient_checkpointing=True)
    alone = estimate(Plan(**common)).breakdown.activations.estimate
    gathered_16 = estimate(Plan(**common, sharding="fsdp", gpus=8, fsdp_param_dtype="bf16")).breakdown.activations.estimate
    gathered_32 = estimate(Plan(**common, sharding="fsdp", gpus=8, fsdp_param_dtype="fp32")).breakdown.activations.estimate
    assert gathered_32 == pytest.approx(alone)
    wider_inputs = 2 * tokens * llama.hidden * llama.layers
    assert autocast_layer_adjustment(Plan(**common), shape(llama), 1024, weights_16bit=True) == 0
    # the layer being recomputed (where autocast's casts live) peaks after the loss has freed its logits, which at
    # a 128k vocabulary are the larger: only the checkpointed inputs' width tells the two apart
    assert alone - gathered_16 == pytest.approx(wider_inputs)
    pure = estimate(Plan(**{**common, "dtype": "bf16"}, sharding="fsdp", gpus=8)).breakdown.activations.estimate
    assert gathered_16 == pytest.approx(pure)
    # a post-LN layer's input is its predecessor's LayerNorm output, fp32 under autocast over 16-bit weights too
    bert = find_architecture("bert-base-uncased")
    post_ln = dict(common, model=bert, seq_len=512, head="classifier")
    pure_bert = estimate(Plan(**{**post_ln, "dtype": "bf16"}, sharding="fsdp", gpus=8)).breakdown.activations.estimate
    gathered_bert = estimate(Plan(**post_ln, sharding="fsdp", gpus=8, fsdp_param_dtype="bf16")).breakdown.activations.estimate
    adjustment = autocast_layer_adjustment(Plan(**post_ln), shape(bert), 512, weights_16bit=True)
    assert gathered_bert - pure_bert == pytest.approx((2 * bert.layers + adjustment) * 2 * 512 * bert.hidden)


def test_generation_counts_the_sampling_buffers_and_at_the_high_end_the_prompts_fp32_logits():
    llama = find_architecture("llama-3-8b")
    breakdown = estimate(Plan(model=llama, mode="generate", dtype="bf16", batch_size=8, seq_len=4096, max_context=4160)).breakdown
    logits = breakdown.logits
    assert logits.low == 8 * llama.vocab * 8  # greedy: the fp32 next-token logits and their scores
    assert logits.estimate == logits.high == 8 * llama.vocab * 38  # top-k/top-p sampling's copies, sorted indices, probabilities
    prompt = breakdown.prompt_logits  # transformers before 4.45: every prompt position's, after the layers
    assert (prompt.low, prompt.estimate, prompt.high) == (0, 0, 8 * 4096 * llama.vocab * 6)
    whole = estimate(Plan(model=llama, mode="generate", dtype="bf16", batch_size=8, seq_len=4096, max_context=4160,
                          prompt_logits_whole=True)).breakdown
    working = max(whole.activations.estimate, whole.prompt_logits.estimate)  # the layers' working memory is gone by then
    assert whole.forward_backward().estimate == pytest.approx(
        whole.weights.estimate + whole.prompt_kv_cache.estimate + working + whole.logits.estimate
        + whole.cublas_workspace.estimate + whole.block_rounding.estimate)


def test_a_4bit_matmul_dequantises_its_largest_weight_while_it_runs():
    llama = find_architecture("llama-3-8b")
    plan = dict(model=llama, dtype="bf16", seq_len=512, lora_rank=16, quant="nf4")
    layer_linear = llama.hidden * llama.intermediate
    hf = estimate(Plan(**plan)).breakdown.dequantised
    assert (hf.low, hf.estimate, hf.high) == (2 * layer_linear, 2 * layer_linear, 6 * layer_linear)
    litgpt = estimate(Plan(**plan, model_code="litgpt")).breakdown.dequantised
    assert litgpt.estimate == 4 * llama.vocab * llama.hidden  # every linear quantised, the LM head the largest
    assert estimate(Plan(**{**plan, "quant": None})).breakdown.dequantised.high == 0
    # bnb_4bit_compute_dtype fp32 (transformers' default where the config leaves it out): the 16-bit weight and its fp32 cast
    fp32 = estimate(Plan(**plan, quant_compute_fp32=True)).breakdown.dequantised
    assert (fp32.low, fp32.estimate, fp32.high) == (6 * layer_linear,) * 3
    bf16 = estimate(Plan(**plan, quant_compute_fp32=False)).breakdown.dequantised
    assert (bf16.low, bf16.estimate, bf16.high) == (2 * layer_linear,) * 3


def test_a_forward_without_backward_holds_what_transformers_prompt_forward_holds():
    """The working memory of a prompt's forward under no_grad equals fake-tensor replays of transformers'
    generate path (DynamicCache, last position's logits only) for every replayed model. Eager attention on
    bf16 scores peaks inside the softmax (the scores, an fp32 copy of them, the fp32 output: 10 bytes per head
    and pair of positions), on a GPU as on the CPU: torch's fused half-to-float softmax takes fp16 only."""
    from trainlint.estimator.layer_activations import inference_layer_coefficient

    measured = _calibration("inference_peaks.json")
    assert len(measured["rows"]) >= 12
    for row in measured["rows"]:
        arch = find_architecture(row["model"])
        geometry = shape(arch)
        replayed = row["prefill_working"] - row["last_logits"]
        replayed /= row["prompt"] * row["hidden"]
        plan = Plan(model=arch, mode="generate", dtype="bf16", attention=row["attention"])
        assert inference_layer_coefficient(plan, geometry, row["prompt"]) == pytest.approx(replayed, rel=0.05), row["model"]


def test_a_long_prompt_holds_one_layers_working_memory_and_only_its_own_kv_cache():
    qwen = find_architecture("qwen2.5-7b")
    geometry = shape(qwen)
    long_prompt = estimate(Plan(model=qwen, mode="generate", dtype="bf16", seq_len=30720, max_context=32768, attention="flash"))
    working = long_prompt.breakdown.activations.estimate
    assert 3.5 * GIB < working < 4.5 * GIB  # the MLP's three FFN-wide tensors beside the residual stream: 4.1 GiB
    weights = long_prompt.breakdown.weights.estimate
    prompt_kv = geometry.kv_cache_bytes_per_token_per_byte * 2 * 30720
    forward = long_prompt.breakdown.forward_backward().estimate
    assert forward == pytest.approx(weights + prompt_kv + working + long_prompt.breakdown.logits.estimate
                                    + long_prompt.breakdown.cublas_workspace.estimate + long_prompt.breakdown.block_rounding.estimate)
    # a one-token prompt generating 32k tokens peaks with the whole cache and no prompt working memory
    short_prompt = estimate(Plan(model=qwen, mode="generate", dtype="bf16", seq_len=1, max_context=32768, attention="flash"))
    whole_cache = short_prompt.breakdown.kv_cache.estimate
    assert whole_cache >= geometry.kv_cache_bytes_per_token_per_byte * 2 * 32768
    assert short_prompt.breakdown.forward_backward().estimate < weights + whole_cache + 0.1 * GIB


def test_gpt_fast_generation_keeps_its_causal_mask_and_decodes_on_the_math_kernel():
    """gpt-fast's setup_caches registers a cache-length-squared bool mask; its decoding steps run attention on
    the math kernel over the whole static cache, expanded to every query head and copied to fp32."""
    llama = find_architecture("llama-3.1-8b")
    plan = Plan(model=llama, mode="generate", dtype="bf16", seq_len=6, max_context=206, kv_cache_len=131072, model_code="gpt-fast")
    result = estimate(plan)
    assert result.breakdown.causal_mask.estimate == 131072**2
    expanded = 2 * llama.heads * 131072 * 128  # keys and values of every query head
    attention = result.breakdown.decode_attention
    assert (attention.low, attention.estimate) == (2 * expanded, 6 * expanded)  # 16-bit copies; and fp32 since torch 2.5
    plain = estimate(Plan(**{**plan.__dict__, "model_code": "transformers"})).allocated.estimate
    assert result.allocated.estimate == pytest.approx(plain + 131072**2 + 6 * expanded, rel=0.001)
    assert any("causal mask of 131072x131072" in note for note in result.assumptions)


def test_a_compiled_layer_keeps_what_aotautograds_partitioner_keeps():
    """torch.compile's partitioner (replayed with aot_eager_decomp_partition on the CPU) keeps the matmuls' and
    attention's inputs and outputs and recomputes the rest: the accounting equals the replay for gated decoders;
    GPT-2 and Phi-2 keep a little more there, never more than eager."""
    import msgspec

    from trainlint.estimator.layer_activations import compiled_layer_coefficient

    measured = _calibration("compiled_activations.json")
    assert len(measured["rows"]) >= 8
    for row in measured["rows"]:
        arch = find_architecture(row["model"])
        factor = arch.hidden // row["scaled_hidden"]  # replayed at the same proportions, a smaller scale
        scaled = msgspec.structs.replace(arch, hidden=row["scaled_hidden"], intermediate=arch.intermediate // factor,
                                         head_dim=shape(arch).head_dim // factor if arch.head_dim else None)
        plan = Plan(model=scaled, dtype="bf16", compiled=True)
        coefficient = compiled_layer_coefficient(plan, shape(scaled), measured["seq"])
        if "gate_proj" in shape(arch).lora_dims:
            assert coefficient == pytest.approx(row["compiled"], rel=0.02), row["model"]
        else:
            assert 0.85 * row["compiled"] < coefficient <= row["compiled"] < row["eager"], row["model"]


def test_a_compiled_training_step_keeps_fewer_activations_with_eager_at_the_high_end():
    eager = estimate(_plan(batch_size=4)).breakdown.activations
    compiled = estimate(_plan(batch_size=4, compiled=True))
    assert compiled.breakdown.activations.estimate < 0.75 * eager.estimate
    assert compiled.breakdown.activations.high == eager.high
    assert any("compiled" in note for note in compiled.assumptions)
    with_adapters = estimate(_plan(batch_size=4, compiled=True, lora_rank=16)).breakdown.activations
    assert with_adapters.estimate == estimate(_plan(batch_size=4, lora_rank=16)).breakdown.activations.estimate


def test_a_compiled_layer_with_adapters_keeps_what_the_partitioner_keeps():
    """A frozen base with adapters under torch.compile (replayed with aot_eager_decomp_partition and peft, adapters in
    the model's dtype and in fp32): the accounting equals the replay, below eager's; eager stays the high end."""
    import msgspec

    from trainlint.estimator.layer_activations import compiled_lora_layer_coefficient

    measured = _calibration("compiled_lora_activations.json")
    assert len({row["model"] for row in measured["rows"]}) >= 3
    for row in measured["rows"]:
        arch = find_architecture(row["model"])
        factor = arch.hidden // row["scaled_hidden"]
        scaled = msgspec.structs.replace(arch, hidden=row["scaled_hidden"], intermediate=arch.intermediate // factor,
                                         head_dim=shape(arch).head_dim // factor if arch.head_dim else None)
        plan = Plan(model=scaled, dtype="bf16", compiled=True, lora_rank=row["rank"], lora_targets=tuple(row["targets"]),
                    lora_dropout=0.0, model_code="torchtune" if row["adapters"] == "model dtype" else "transformers")
        coefficient = compiled_lora_layer_coefficient(plan, shape(scaled), measured["seq"])
        assert coefficient == pytest.approx(row["compiled"], abs=0.01), row
        assert row["compiled"] < row["eager"]
    common = dict(batch_size=4, lora_rank=16, lora_dropout=0.0)
    eager = estimate(_plan(**common)).breakdown.activations
    compiled = estimate(_plan(**common, compiled=True))
    assert compiled.breakdown.activations.estimate < 0.85 * eager.estimate
    assert compiled.breakdown.activations.high == eager.high
    assert any("compiled with adapters: the partitioner" in note for note in compiled.assumptions)
    with_dropout = estimate(_plan(**{**common, "lora_dropout": 0.05}, compiled=True))  # not replayed: eager's accounting
    assert with_dropout.breakdown.activations.estimate == estimate(_plan(**{**common, "lora_dropout": 0.05})).breakdown.activations.estimate
    ungated = dict(common, model=find_architecture("gpt2"), seq_len=1024, lora_targets=("qkv_proj",))  # not replayed either
    assert estimate(_plan(**ungated, compiled=True)).breakdown.activations.estimate == estimate(_plan(**ungated)).breakdown.activations.estimate


def test_torchtunes_compiled_chunked_loss_keeps_the_16bit_logits_only():
    """torchtune's compile: True compiles the chunked loss's per-chunk function: the partitioner keeps the 16-bit
    logits and recomputes the fp32 log-softmax (replayed: 2 bytes per logit against eager's 6); a compiled model
    with another code's chunked loss (not compiled with it) keeps eager's, and eager's is the high end."""
    from trainlint.estimator.cost_constants import (
        CHUNKED_LOGIT_BYTES,
        COMPILED_CHUNKED_LOGIT_BYTES,
        PROJECTED_CHUNKED_LOGIT_BYTES,
    )

    (row,) = _calibration("compiled_loss_activations.json")["rows"]
    assert row["eager"] == pytest.approx(CHUNKED_LOGIT_BYTES[0], abs=0.01)
    assert row["compiled"] == pytest.approx(COMPILED_CHUNKED_LOGIT_BYTES[0], abs=0.01)
    assert row["projected_compiled"] == pytest.approx(COMPILED_CHUNKED_LOGIT_BYTES[0], abs=0.01)  # LinearCrossEntropyLoss
    assert row["projected_eager"] == pytest.approx(PROJECTED_CHUNKED_LOGIT_BYTES[0], abs=0.01)
    common = dict(batch_size=2, lora_rank=8, loss="chunked", gradient_checkpointing=True)
    compiled = estimate(_plan(**common, compiled=True, model_code="torchtune"))
    assert any("compiled per chunk" in note for note in compiled.assumptions)
    torchtune = compiled.breakdown.logits
    eager = estimate(_plan(**common, model_code="torchtune")).breakdown.logits
    assert torchtune.estimate == pytest.approx(eager.estimate * COMPILED_CHUNKED_LOGIT_BYTES[1] / CHUNKED_LOGIT_BYTES[1])
    assert torchtune.high == eager.high
    assert estimate(_plan(**common, compiled=True)).breakdown.logits.estimate == eager.estimate
    projected = estimate(_plan(**{**common, "loss": "projected-chunked"}, model_code="torchtune")).breakdown.logits
    assert projected.estimate == pytest.approx(eager.estimate * PROJECTED_CHUNKED_LOGIT_BYTES[1] / CHUNKED_LOGIT_BYTES[1])
    assert projected.high == eager.high
    projected_compiled = estimate(_plan(**{**common, "loss": "projected-chunked"}, compiled=True, model_code="torchtune"))
    assert projected_compiled.breakdown.logits.estimate == torchtune.estimate


def test_torchtunes_optimizer_in_backward_and_activation_offloading():
    """optimizer_in_bwd steps each parameter in its post-accumulate-grad hook and frees its gradient: one
    gradient at a time, no step phase; activation offloading moves saved tensors to pinned CPU memory,
    keeping one layer and the last five offloaded tensors (layer inputs under checkpointing) on the device."""
    llama = find_architecture("llama-3.2-1b")
    geometry = shape(llama)
    common = dict(model=llama, dtype="bf16", batch_size=4, seq_len=2048)
    plain = estimate(Plan(**common))
    in_backward = estimate(Plan(**common, optimizer_in_backward=True))
    largest = max(geometry.embedding_params, geometry.lm_head_params, geometry.hidden * geometry.intermediate)
    assert in_backward.breakdown.gradients.estimate == largest * (2 + 2)  # its gradient and its foreach temporary
    assert in_backward.breakdown.optimizer_step.estimate == 0
    short = dict(common, batch_size=1, seq_len=256)  # the optimizer step's phase holds the peak: it is gone
    assert estimate(Plan(**short, optimizer_in_backward=True)).allocated.estimate < 0.8 * estimate(Plan(**short)).allocated.estimate
    assert in_backward.allocated.estimate >= plain.allocated.estimate  # the activations' phase is unchanged
    with pytest.raises(CannotEstimate):
        estimate(Plan(**common, optimizer_in_backward=True, grad_accum=4))
    checkpointed = estimate(Plan(**common, gradient_checkpointing=True)).breakdown.activations.estimate
    offloaded = estimate(Plan(**common, gradient_checkpointing=True, activation_offloading=True)).breakdown.activations.estimate
    layer_input = 2 * 4 * 2048 * llama.hidden
    one_layer = checkpointed - llama.layers * layer_input  # what a checkpointed run keeps beyond the layers' inputs
    assert offloaded == pytest.approx(one_layer + 5 * layer_input)
    assert offloaded < checkpointed


def test_where_a_library_version_is_unknown_the_estimate_takes_current_releases_and_names_the_flag():
    """bitsandbytes before 0.43.2 kept each 4-bit linear's input; transformers before 4.45 computed every prompt
    position's logits. Unstated, the estimate takes today's behaviour, the high end the old one, and the note
    names --library-version; stated, the version decides both ends."""
    from trainlint.estimator.versions import settings_for_versions

    assert settings_for_versions({"bitsandbytes": "0.41.1"}) == {"quant_keeps_inputs": True}
    assert settings_for_versions({"bitsandbytes": "0.43.2", "transformers": "4.46.0.dev0"}) == {
        "quant_keeps_inputs": False, "prompt_logits_whole": False, "logits_upcast": False, "sdpa_dispatch": True,
        "lora_base_16bit": False, "loads_checkpoint_dtype": False, "cache_copied": False, "trainer_adamw_torch": True}
    assert settings_for_versions({"transformers": "4.40.2+cu121"}) == {
        "prompt_logits_whole": True, "logits_upcast": True, "sdpa_dispatch": True, "lora_base_16bit": False,
        "loads_checkpoint_dtype": False, "cache_copied": True, "trainer_adamw_torch": True}
    # generate's last-position logits (num_logits_to_keep) came in 4.45.0, later for a few families
    assert settings_for_versions({"transformers": "4.44.2"}, "llama")["prompt_logits_whole"] is True
    assert settings_for_versions({"transformers": "4.45.0"}, "llama")["prompt_logits_whole"] is False
    assert settings_for_versions({"transformers": "4.46.1"}, "falcon")["prompt_logits_whole"] is True
    assert settings_for_versions({"transformers": "4.47.0"}, "falcon")["prompt_logits_whole"] is False
    assert settings_for_versions({"transformers": "4.52.1"}, "gpt2")["prompt_logits_whole"] is True
    assert settings_for_versions({"transformers": "4.53.0"}, "gpt2")["prompt_logits_whole"] is False
    with pytest.raises(CannotEstimate):
        settings_for_versions({"numpy": "2.1"})  # no memory behaviour of it is followed
    qlora = ["--model", "llama-3-8b", "--lora-rank", "16", "--quant", "nf4", "--seq-len", "512", "--gpu", "a10g", "--format", "json"]

    def run(*extra):
        done = subprocess.run([*TRAINLINT, "estimate", *qlora, *extra], capture_output=True, text=True, check=False)
        return json.loads(done.stdout)

    unstated, old, new = run(), run("--library-version", "bitsandbytes=0.41.1"), run("--library-version", "bitsandbytes=0.45.0")
    assert any("--library-version bitsandbytes=VERSION settles it" in note for note in unstated["notes"])
    assert not any("settles it" in note and "bitsandbytes" in note for note in old["notes"] + new["notes"])
    peak = lambda report: report["peak"]["allocated"]  # noqa: E731
    assert peak(new)["estimate"] == pytest.approx(peak(unstated)["estimate"])
    assert peak(unstated)["estimate"] < peak(old)["estimate"]
    assert peak(old)["high"] <= peak(unstated)["high"]


def test_fsdp_keeps_the_root_unit_gathered_and_gathers_units_in_the_mixed_precision_dtype():
    """FSDP does not reshard the root unit after its forward (the embeddings and LM head under the usual
    one-unit-per-layer wrapping) and keeps the unit being computed and the prefetched next one gathered;
    under autocast the gathered units are in MixedPrecision's param_dtype (16 bits at the estimate, as
    accelerate sets it; fp32 at the high end); SHARD_GRAD_OP keeps every unit gathered into the backward.
    A classifier's loss keeps no vocabulary-wide logits, so the layer units count whole (see the next test)."""
    geometry = shape(LLAMA)
    params = parameter_count(LLAMA)
    root = geometry.embedding_params + geometry.lm_head_params
    layer = (params - root) / geometry.layers
    bf16 = estimate(_plan(gpus=8, sharding="fsdp", head="classifier")).breakdown.weights
    assert bf16.estimate == pytest.approx(params * 2 / 8 + (root + 2 * layer) * 2)
    amp = estimate(_plan(gpus=8, sharding="fsdp", dtype="amp-bf16", head="classifier"))
    weights = amp.breakdown.weights
    assert (weights.estimate, weights.high) == pytest.approx((params * 4 / 8 + (root + 2 * layer) * 2, params * 4 / 8 + (root + 2 * layer) * 4))
    assert any("param_dtype=bf16" in note for note in amp.assumptions)
    stated = estimate(_plan(gpus=8, sharding="fsdp", dtype="amp-bf16", fsdp_param_dtype="fp32", head="classifier")).breakdown.weights
    assert stated.estimate == stated.high == pytest.approx(weights.high)
    grad_op = estimate(_plan(gpus=8, sharding="fsdp-grad-op")).breakdown.weights
    assert grad_op.estimate == pytest.approx(params * 2 / 8 + params * 2)
    qlora = estimate(_plan(gpus=8, sharding="fsdp", lora_rank=16, quant="nf4", head="classifier")).breakdown.weights
    assert qlora.estimate - 2 * root < (bf16.estimate - 2 * root) / 2  # the layers' units gather the packed 4-bit storage


def test_fsdp_reshards_the_layer_units_before_the_loss():
    """FULL_SHARD reshards every unit but the root after its forward (fully_shard's reshard_after_forward=True):
    the loss is computed beside the root alone, and the layer units are gathered again in the backward, once the
    loss's tensors are freed. Where the vocabulary-wide logits outweigh two units, the units add nothing to the
    peak; where they do not, only what the units exceed them by; with checkpointing the recomputed layer is
    alive beside the units. SHARD_GRAD_OP keeps every unit gathered through the loss."""
    geometry = shape(LLAMA)
    params = parameter_count(LLAMA)
    root = geometry.embedding_params + geometry.lm_head_params
    units = 2 * (params - root) / geometry.layers * 2  # two layer units in bf16
    sharded_and_root = params * 2 / 8 + root * 2
    long = estimate(_plan(gpus=8, sharding="fsdp", seq_len=2048)).breakdown
    assert long.logits.estimate > units
    assert long.weights.estimate == pytest.approx(sharded_and_root)
    short = estimate(_plan(gpus=8, sharding="fsdp", seq_len=128)).breakdown
    assert short.logits.estimate < units
    assert short.weights.estimate == pytest.approx(sharded_and_root + units - short.logits.estimate)
    both = estimate(_plan(gpus=8, sharding="fsdp", seq_len=128, gradient_checkpointing=True)).breakdown
    # the recomputed layer (smaller than the logits at 128 tokens) is alive beside the units
    assert short.weights.estimate < both.weights.estimate < sharded_and_root + units
    grad_op = estimate(_plan(gpus=8, sharding="fsdp-grad-op", seq_len=2048)).breakdown
    assert grad_op.weights.estimate == pytest.approx(params * 2 / 8 + params * 2)


def test_the_attention_kernel_follows_the_gpu_generation():
    """torch's SDPA has no flash kernel before compute capability 8.0; its memory-efficient kernel keeps the
    same (fp16, fp32), but takes bf16 only from 8.0, so bf16 on a V100 runs the math kernel, which keeps the
    probabilities as eager attention does. FlashAttention-2 needs 8.0."""
    plan = _plan(batch_size=2, seq_len=1024, dtype="fp16")
    a100 = estimate(plan, compute_capability="8.0").breakdown.activations.estimate
    v100 = estimate(plan, compute_capability="7.0")
    assert v100.breakdown.activations.estimate == a100
    assert any("memory-efficient kernel keeps what flash keeps" in note for note in v100.assumptions)
    bf16 = _plan(batch_size=2, seq_len=1024, dtype="bf16")
    math_kernel = estimate(bf16, compute_capability="7.0")
    assert math_kernel.breakdown.activations.estimate == estimate(replace(bf16, attention="eager")).breakdown.activations.estimate
    assert math_kernel.breakdown.activations.estimate > 1.3 * estimate(bf16, compute_capability="9.0").breakdown.activations.estimate
    assert math_kernel.plan.attention == "sdpa"  # what was asked; the note says what runs
    with pytest.raises(CannotEstimate, match="8.0 or newer"):
        estimate(replace(plan, attention="flash"), compute_capability="7.0")
    result = subprocess.run([*TRAINLINT, "estimate", "--model", "llama-3-8b", "--gpu", "v100-16gb",
                             "--attention", "flash", "--seq-len", "512"], capture_output=True, text=True, check=False)
    assert result.returncode == 2 and "FlashAttention-2 needs compute capability 8.0" in result.stderr


def test_int8_quantisation_on_loading_holds_a_column_major_copy_too():
    """bitsandbytes' Int8Params.cuda quantises with double_quant, which returns the row-major int8 weight it
    keeps and a column-major one it frees after: while the largest weight is converted, its 16-bit form and
    both int8 copies are on the device."""
    falcon = find_architecture("falcon-7b")
    geometry = shape(falcon)
    common = dict(model=falcon, mode="generate", dtype="bf16", seq_len=5, max_context=261)
    nf4, int8 = estimate(Plan(**common, quant="nf4")), estimate(Plan(**common, quant="int8"))
    largest_16bit = 2 * max(geometry.embedding_params, geometry.lm_head_params, geometry.hidden * geometry.intermediate)
    assert int8.allocated.estimate == pytest.approx(int8.breakdown.weights.estimate + largest_16bit + geometry.hidden * geometry.intermediate)
    assert nf4.allocated.estimate == pytest.approx(nf4.breakdown.weights.estimate + largest_16bit)


def test_older_transformers_kept_a_rotary_cache_in_every_layer_of_some_families():
    """Qwen2's (and Phi's, Starcoder2's) attention built a rotary embedding with cos and sin caches for the
    maximum length in every layer until transformers 4.45, Mistral's until 4.42: unknown, the high end counts
    them; a stated version decides."""
    from trainlint.estimator.versions import settings_for_versions

    assert settings_for_versions({"transformers": "4.38.2"}, "qwen2") == {
        "prompt_logits_whole": True, "logits_upcast": True, "sdpa_dispatch": True, "rotary_cache": True,
        "lora_base_16bit": False, "loads_checkpoint_dtype": False, "cache_copied": True, "trainer_adamw_torch": True}
    assert settings_for_versions({"transformers": "4.45.0"}, "qwen2")["rotary_cache"] is False
    assert settings_for_versions({"transformers": "4.41.0"}, "mistral")["rotary_cache"] is True
    assert settings_for_versions({"transformers": "4.38.2"}, "llama")["rotary_cache"] is False
    qwen = find_architecture("qwen2-0.5b")
    geometry = shape(qwen)
    cache = 2 * geometry.layers * qwen.max_positions * geometry.head_dim * 2
    common = dict(model=qwen, mode="generate", dtype="bf16", seq_len=1, max_context=2049)
    unknown = estimate(Plan(**common)).breakdown.weights
    stated = estimate(Plan(**common, rotary_cache=True)).breakdown.weights
    assert unknown.high - unknown.estimate == cache and stated.estimate - unknown.estimate == cache
    assert estimate(Plan(**{**common, "model": LLAMA})).breakdown.weights.high == estimate(Plan(**{**common, "model": LLAMA})).breakdown.weights.estimate


def test_the_trainers_default_optimizer_is_fused_adamw_from_torch_2_8_and_foreach_before():
    from trainlint.estimator.versions import settings_for_versions

    params = parameter_count(LLAMA)
    per_tensor = estimate(_plan(foreach=False)).breakdown.optimizer_step
    foreach = estimate(_plan(foreach=True)).breakdown.optimizer_step
    assert foreach.estimate == pytest.approx(2 * params)  # one bf16 copy of every parameter
    unknown = estimate(_plan(trainer_default_optimizer=True))
    step = unknown.breakdown.optimizer_step
    assert (step.low, step.estimate, step.high) == (per_tensor.low, per_tensor.estimate, foreach.high)
    assert any("(adamw_torch_fused) with torch 2.8" in note and "--library-version torch=VERSION" in note for note in unknown.assumptions)
    assert settings_for_versions({"torch": "2.7.1+cu126"})["trainer_fused_adamw"] is False
    assert settings_for_versions({"torch": "2.8.0"})["trainer_fused_adamw"] is True
    older = estimate(_plan(trainer_default_optimizer=True, **settings_for_versions({"torch": "2.5.1"}))).breakdown.optimizer_step
    assert older == foreach
    # a script's own optimizer is not the Trainer's: the setting changes nothing then
    assert estimate(_plan(foreach=True, trainer_default_optimizer=True)).breakdown.optimizer_step == foreach


def test_the_trainers_default_optimizer_before_transformers_4_32_is_its_own_adamw_with_one_tensors_temporary():
    """transformers 4.31's TrainingArguments default optim "adamw_hf" (optimization.AdamW: a loop over the parameters,
    `denom = exp_avg_sq.sqrt().add_(eps)` its one temporary); 4.32 made "adamw_torch" the default (PR 25109)."""
    from trainlint.estimator.versions import settings_for_versions

    assert settings_for_versions({"transformers": "4.31.0"})["trainer_adamw_torch"] is False
    assert settings_for_versions({"transformers": "4.32.0"})["trainer_adamw_torch"] is True
    geometry = shape(LLAMA)
    largest = max(geometry.embedding_params, geometry.lm_head_params, geometry.hidden * geometry.intermediate)
    old = estimate(_plan(trainer_default_optimizer=True, **settings_for_versions({"transformers": "4.31.0", "torch": "2.0.1"})))
    assert old.breakdown.optimizer_step == Interval.exact(2 * largest)  # one bf16 tensor, the largest parameter's
    assert any("adamw_hf" in note for note in old.assumptions)
    newer = estimate(_plan(trainer_default_optimizer=True, **settings_for_versions({"transformers": "4.32.0", "torch": "2.0.1"})))
    assert newer.breakdown.optimizer_step.estimate == pytest.approx(2 * parameter_count(LLAMA))  # torch's foreach AdamW
    # a script's own optimizer is not the Trainer's
    stated = _plan(trainer_adamw_torch=False, trainer_default_optimizer=False)
    assert estimate(stated).breakdown.optimizer_step == estimate(_plan()).breakdown.optimizer_step


def test_lora_on_the_lm_head_is_one_adapter_with_its_kept_input():
    """peft's adapter on the LM head: A (rank x hidden) and B (vocabulary x rank), once; in the forward it keeps
    its input cast to fp32, a byte-mask with dropout, and its rank-wide inner output, as a layer's adapters do."""
    rank, hidden, vocab, tokens = 8, 4096, 128_256, 2 * 1024
    layers = estimate(_plan(lora_rank=rank, lora_targets=("q_proj", "v_proj"), lora_dropout=0.0, batch_size=2, seq_len=1024))
    headed = estimate(_plan(lora_rank=rank, lora_targets=("q_proj", "v_proj", "lm_head"), lora_dropout=0.0, batch_size=2, seq_len=1024))
    head = rank * (hidden + vocab)
    assert headed.trainable_params - layers.trainable_params == head
    # fp32 weights, gradients and two AdamW states: 16 bytes per adapter parameter
    states = lambda result: result.breakdown.weights.estimate + result.breakdown.gradients.estimate + result.breakdown.optimizer.estimate  # noqa: E731
    assert states(headed) - states(layers) == pytest.approx(16 * head)
    kept = headed.breakdown.activations.estimate - layers.breakdown.activations.estimate
    assert kept == pytest.approx(tokens * (4 * hidden + 4 * rank))
    dropout = estimate(_plan(lora_rank=rank, lora_targets=("lm_head",), lora_dropout=0.1, batch_size=2, seq_len=1024))
    none = estimate(_plan(lora_rank=rank, lora_targets=("lm_head",), lora_dropout=0.0, batch_size=2, seq_len=1024))
    assert dropout.breakdown.activations.estimate - none.breakdown.activations.estimate == pytest.approx(tokens * hidden)
    with pytest.raises(CannotEstimate, match="no LM head"):
        estimate(Plan(model=find_architecture("bert-base-uncased"), lora_rank=8, lora_targets=("lm_head",), seq_len=128))


def test_tensor_parallel_generation_splits_weights_and_kv_heads():
    """Megatron's split: each GPU holds 1/N of every layer's heads and MLP, of the embeddings and of the LM head, and
    caches its own KV heads; with fewer KV heads than GPUs each KV head is held by several GPUs (one per GPU)."""
    from trainlint.estimator.layer_activations import inference_layer_coefficient

    generate = dict(mode="generate", seq_len=1024, max_context=4096, batch_size=4, dtype="bf16")
    whole = estimate(_plan(**generate)).breakdown
    four = estimate(_plan(**generate, tensor_parallel=4, gpus=4)).breakdown
    assert four.weights.estimate == pytest.approx(whole.weights.estimate / 4)
    assert four.kv_cache.estimate == pytest.approx(whole.kv_cache.estimate / 4)  # 8 KV heads: 2 per GPU
    sixteen = estimate(_plan(**generate, tensor_parallel=16, gpus=16)).breakdown
    assert sixteen.kv_cache.estimate == pytest.approx(whole.kv_cache.estimate / 8)  # 1 KV head per GPU, not half of one
    # one layer's working memory: the hidden-wide tensors whole, the heads' and the MLP's a quarter
    geometry = shape(LLAMA)
    hidden, width, kv_width, ffn = 4096, 1.0, 1024 / 4096, 14336 / 4096
    rope = 4.0 * 128 / hidden
    quarter = 6.0 + rope + max(2.0 + 6.0 * ffn / 4, 2.0 + 2.0 * (width / 4 + 2.0 * kv_width / 4) + 4.0 * width / 4)
    assert inference_layer_coefficient(_plan(**generate, tensor_parallel=4, gpus=4), geometry, 1024) == pytest.approx(quarter)
    # a latent (MLA) cache is not split by heads
    lite = find_architecture("deepseek-v2-lite")
    mla = dict(model=lite, mode="generate", seq_len=1024, max_context=4096, dtype="bf16")
    assert (estimate(Plan(**mla, tensor_parallel=2, gpus=2)).breakdown.kv_cache.estimate
            == pytest.approx(estimate(Plan(**mla)).breakdown.kv_cache.estimate))
    for plan, reason in (
        (_plan(tensor_parallel=2, gpus=2), "inference and generation only"),
        (_plan(**generate, tensor_parallel=3, gpus=3), "32 attention heads do not split 3 ways"),
        (_plan(**generate, tensor_parallel=4, gpus=2), "needs 4 GPUs"),
    ):
        with pytest.raises(CannotEstimate, match=reason):
            estimate(plan)


def test_litgpt_tensor_parallel_keeps_the_embeddings_and_the_lm_head_whole():
    """LitGPT's generate/tp.py splits only the blocks' linears: every GPU holds the whole token embedding and LM head
    (Fabric's bitsandbytes plugin quantises the head, not the embedding), and 1/N of the rest."""
    geometry = shape(LLAMA)
    ends = geometry.embedding_params + geometry.lm_head_params
    generate = dict(mode="generate", seq_len=8, max_context=264, dtype="bf16", model_code="litgpt")
    whole = estimate(_plan(**generate)).breakdown.weights.estimate
    four = estimate(_plan(**generate, tensor_parallel=4, gpus=4)).breakdown.weights.estimate
    assert four == pytest.approx((whole - 2 * ends) / 4 + 2 * ends)
    quantised = estimate(_plan(**generate, quant="nf4-dq")).breakdown.weights.estimate
    quantised_four = estimate(_plan(**generate, quant="nf4-dq", tensor_parallel=4, gpus=4)).breakdown.weights.estimate
    kept = 2 * geometry.embedding_params + QUANT_BYTES["nf4-dq"] * geometry.lm_head_params
    assert quantised_four == pytest.approx((quantised - kept) / 4 + kept)
    # transformers' own code: Megatron's split, the ends split too
    assert estimate(_plan(**{**generate, "model_code": "transformers"}, tensor_parallel=4, gpus=4)).breakdown.weights.estimate == (
        pytest.approx(estimate(_plan(**{**generate, "model_code": "transformers"})).breakdown.weights.estimate / 4))


def test_the_cli_takes_a_tensor_parallel_degree_as_the_gpu_count():
    done = subprocess.run(
        [*TRAINLINT, "estimate", "--model", "llama-3.1-70b", "--mode", "generate", "--seq-len", "4096",
         "--max-context", "8192", "--dtype", "bf16", "--gpu", "a100-80gb", "--tensor-parallel", "4", "--format", "json"],
        capture_output=True, text=True, check=False,
    )
    report = json.loads(done.stdout)
    assert report["inputs"]["tensor_parallel"] == {"value": 4, "source": "command line"}
    assert report["inputs"]["gpus"] == {"value": 4, "source": "command line (--tensor-parallel)"}
    assert report["breakdown"]["weights"] == pytest.approx(parameter_count(find_architecture("llama-3.1-70b")) * 2 / 4)


def test_training_runs_the_dropout_the_models_config_sets():
    """A model in train mode (the HF Trainer's, `model.train()`) runs its config's dropout: BERT's config class sets 0.1
    on its hidden sites and its attention probabilities, Llama's 0.0. Counted from BERT-large's fp32 layer in
    transformers' eager attention: each hidden dropout keeps a 1-byte mask (two per layer), the probabilities' dropout
    a 1-byte mask and its fp32 output beside the fp32 softmax output (9 bytes per score instead of 4)."""
    bert = find_architecture("bert-large-uncased")
    geometry = shape(bert)
    batch, seq = 4, 512

    def activations(dropout, model=bert, **changes):
        settings = dict(model=model, dtype="fp32", batch_size=batch, seq_len=seq, attention="eager", dropout=dropout,
                        head="classifier")
        return estimate(Plan(**(settings | changes))).breakdown.activations.estimate

    unstated, off, on = activations(None), activations(False), activations(True)
    assert unstated == on > off
    tokens = batch * seq
    masks_and_outputs = geometry.layers * tokens * (2 * geometry.hidden + (1 + 4) * geometry.heads * seq)
    assert on - off == pytest.approx(masks_and_outputs, rel=1e-3)
    # SDPA's fused kernels keep an RNG state for the probabilities' dropout: the hidden sites' masks only
    assert activations(True, attention="sdpa") - activations(False, attention="sdpa") == pytest.approx(
        geometry.layers * tokens * 2 * geometry.hidden, rel=1e-3)
    # a config that sets no dropout (Llama's) keeps nothing more; inference runs in eval mode
    assert activations(None, model=LLAMA, dtype="bf16") == activations(False, model=LLAMA, dtype="bf16")
    assert activations(None, mode="infer") == activations(False, mode="infer")


def test_autocast_with_dropout_on_the_probabilities_keeps_the_16_bit_cast_for_the_matmul():
    """Under autocast BERT's softmax runs in fp32 (4 bytes kept per score); its dropout keeps a 1-byte mask, and the
    matmul with the values keeps the 16-bit cast of the dropout's fp32 output (2): 7 bytes per score, 3 more than
    without dropout (the fp32 softmax output and its 16-bit cast: 6)."""
    bert = find_architecture("bert-base-uncased")
    geometry = shape(bert)
    batch, seq = 2, 512

    def activations(dropout, attention):
        plan = Plan(model=bert, dtype="amp-fp16", batch_size=batch, seq_len=seq, attention=attention, dropout=dropout,
                    head="classifier")
        return estimate(plan).breakdown.activations.estimate

    scores_only = (activations(True, "eager") - activations(False, "eager")) - (activations(True, "sdpa") - activations(False, "sdpa"))
    assert scores_only == pytest.approx(geometry.layers * batch * seq * geometry.heads * seq * (7 - 6), rel=1e-3)


def test_a_forwards_logits_follow_the_transformers_release():
    """transformers before 4.46 upcast a forward's logits to fp32 beside the 16-bit ones (6 bytes per logit while the
    cast runs); 4.46 and later return them in the model's dtype (2). Unknown: the estimate today's, the high end the
    old; a stated version decides both ends."""
    from trainlint.estimator.versions import settings_for_versions

    batch, seq = 2, 4096
    logits = batch * seq * LLAMA.vocab

    def prompt_logits(**changes):
        return estimate(_plan(mode="infer", batch_size=batch, seq_len=seq, **changes)).breakdown.prompt_logits

    unknown = prompt_logits()
    assert (unknown.estimate, unknown.high) == (2 * logits, 6 * logits)
    old, new = (prompt_logits(**settings_for_versions({"transformers": v}, LLAMA.family)) for v in ("4.45.2", "4.46.0"))
    assert (old.low, old.high) == (6 * logits, 6 * logits) and (new.low, new.high) == (2 * logits, 2 * logits)
    assert prompt_logits(dtype="fp32").high == 4 * logits  # an fp32 model's logits are fp32 either way


def test_the_loss_keeps_what_the_replayed_loss_codes_keep():
    """Bytes per logit at the loss's peak, replayed for transformers' three loss codes (calibration/loss_peaks.py): a
    step that drops the model's outputs before its backward (the HF Trainer's) keeps 12, one that holds them (a loop's
    `outputs = model(...)`) up to 16. The Trainer's step is at the first, an unknown loop at the second."""
    from trainlint.estimator.cost_constants import LOGIT_BYTES, TRAINER_LOGIT_BYTES

    rows = _calibration("loss_peaks.json")["rows"]
    dropped = [row["bytes_per_logit"] for row in rows if not row["outputs_held_through_backward"]]
    held = [row["bytes_per_logit"] for row in rows if row["outputs_held_through_backward"]]
    assert TRAINER_LOGIT_BYTES[:2] == pytest.approx((min(dropped), max(dropped)), abs=0.05)
    assert LOGIT_BYTES[0] == pytest.approx(min(dropped), abs=0.05)
    assert LOGIT_BYTES[1] == LOGIT_BYTES[2] == TRAINER_LOGIT_BYTES[2] == pytest.approx(max(held), abs=0.05)
    # what a user sees: the Trainer's step (read as freeing its graph) is estimated below the same step in a loop
    loop, trainer = (estimate(_plan(batch_size=4, seq_len=1024, previous_graph_alive=alive)).breakdown.logits
                     for alive in (None, False))
    tokens_logits = 4 * 1024 * LLAMA.vocab
    assert (trainer.estimate, loop.estimate) == (12 * tokens_logits, 16 * tokens_logits)


def test_non_reentrant_checkpointing_keeps_every_layers_bitsandbytes_inputs():
    """bitsandbytes before 0.43.2 keeps each 4-bit matmul's input as an attribute of its autograd context (MatMul4Bit:
    ctx.tensors = (A, B)), not with save_for_backward. Non-reentrant checkpointing (use_reentrant=False, swift's patch
    of torch.utils.checkpoint under torch 2.1) runs the forward with autograd on and packs only what is saved, so every
    checkpointed layer keeps those inputs until its backward: the attention's input and output, the MLP's input and
    its FFN-wide down-projection input (Llama 2 7B: 2 + 2 + 2 + 2 x 11008 / 4096 = 11.375 bytes per token and hidden
    unit). Reentrant checkpointing runs the forward without autograd: nothing kept beyond the layer's input. bitsandbytes
    0.43.2 keeps no input: reentrancy moves nothing. Unknown: the estimate reentrant (transformers' default), the high
    end not where the plan states an older bitsandbytes; with bitsandbytes unknown too, the high end takes only the
    older bitsandbytes, not both older behaviours."""
    llama = find_architecture("meta-llama/Llama-2-7b-hf")
    plan = Plan(model=llama, batch_size=2, seq_len=1024, dtype="bf16", lora_rank=8, lora_targets=("q_proj", "v_proj"),
                quant="nf4", gradient_checkpointing=True, attention="flash", quant_keeps_inputs=True, lengths_vary=False,
                previous_graph_alive=False, zero_grad_frees=True)

    def activations(**changes):
        return estimate(replace(plan, **changes)).breakdown.activations

    reentrant, non_reentrant, unknown = activations(checkpoint_reentrant=True), activations(checkpoint_reentrant=False), activations()
    inputs = (2 + 2 + 2 + 2 * 11008 / 4096) * 2 * 1024 * 4096 * 32
    assert non_reentrant.estimate - reentrant.estimate == pytest.approx(inputs)
    assert unknown.estimate == reentrant.estimate and unknown.high == non_reentrant.high
    newer = [activations(quant_keeps_inputs=False, checkpoint_reentrant=reentrant) for reentrant in (True, False)]
    assert newer[0] == newer[1]
    assert activations(quant_keeps_inputs=None).high == activations(quant_keeps_inputs=None, checkpoint_reentrant=True).high
