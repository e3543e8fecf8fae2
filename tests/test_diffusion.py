"""Diffusion pipelines: every component counted, inference at a resolution peaks in a denoising step or
the VAE decode, offload and tiling change what is resident, the denoiser trains in full or with LoRA."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from trainlint.analysis.module import ModuleAnalysis
from trainlint.estimator.architectures import find_architecture
from trainlint.estimator.costmodel import estimate
from trainlint.estimator.diffusion import pipeline_of, pipeline_params
from trainlint.estimator.hardware import resolve_target
from trainlint.estimator.plan import Plan
from trainlint.estimator.reading import read_inputs
from trainlint.estimator.report import build
from trainlint.estimator.script_plan import plan_settings
from trainlint.estimator.units import GIB

DATA = json.loads((Path(__file__).resolve().parent.parent / "estimator" / "data" / "diffusion_pipelines.json").read_text())
PUBLISHED_DENOISERS = {"sd-1.5": 859_520_964, "sd-2.1": 865_910_724, "sdxl": 2_567_463_684, "sd-3-medium": 2_028_328_000}


@pytest.mark.parametrize("name", ["sd-1.5", "sd-2.1", "sdxl", "sd-3-medium", "flux.1-dev"])
def test_each_pipeline_answers_with_all_its_components(name):
    arch = next(a for a in (find_architecture(alias) for alias in (name, f"{name}-unet")) if a is not None)
    pipeline = pipeline_of(arch)
    assert pipeline is not None and pipeline.components["denoiser"] == arch.published_params
    if name in PUBLISHED_DENOISERS:
        assert arch.published_params == PUBLISHED_DENOISERS[name]
    result = estimate(Plan(model=arch, mode="infer", dtype="fp16"))
    assert result.params == pipeline_params(arch) > arch.published_params  # text encoders and the VAE too
    assert result.breakdown.weights.low == 2 * result.params + 2 * sum(pipeline.kept_fp32_under_fp16.values())


def test_sdxl_decodes_in_fp32_under_fp16():
    """diffusers' SDXL pipeline casts an fp16 VAE to fp32 for the decode (force_upcast): at 1024x1024 the decode is
    the peak, its working memory twice the 16-bit one and the VAE's weights twice as wide; bf16 is not cast, nor is
    an fp16 Stable Diffusion 1.5 pipeline; an fp16-fixed VAE (no upcast) stays inside the interval."""
    sdxl = find_architecture("sdxl")
    vae = pipeline_of(sdxl).components["vae"]
    fp16 = estimate(Plan(model=sdxl, mode="infer", dtype="fp16", image_size=1024))
    bf16 = estimate(Plan(model=sdxl, mode="infer", dtype="bf16", image_size=1024))
    assert fp16.breakdown.activations.estimate == pytest.approx(2 * bf16.breakdown.activations.estimate)
    assert fp16.breakdown.weights.estimate == bf16.breakdown.weights.estimate + 2 * vae
    assert fp16.allocated.low <= bf16.allocated.estimate < fp16.allocated.estimate
    assert any("decode works in fp32" in note for note in fp16.assumptions)
    sd15 = find_architecture("sd-1.5")
    sd15_fp16 = estimate(Plan(model=sd15, mode="infer", dtype="fp16"))
    today_bf16 = Plan(model=sd15, mode="infer", dtype="bf16", vae_upsampling_fp32=False)  # diffusers 0.31 and later
    assert sd15_fp16.breakdown.activations == estimate(today_bf16).breakdown.activations
    assert not any("decode works in fp32" in note for note in sd15_fp16.assumptions)


def test_a_bf16_decode_before_diffusers_0_31_upsamples_in_fp32():
    """diffusers before 0.31 cast bf16 to fp32 around each Upsample2D's interpolation: a replay of the VAE's decode
    that way holds more (the fp32 upsampled maps); a plan that says so (or a diffusers release before 0.31) is
    estimated with it, an unknown release at the high end only, and fp16, which was never cast, not at all."""
    from trainlint.estimator.versions import settings_for_versions

    for name, pipeline in DATA["pipelines"].items():
        assert pipeline["vae_decode_bytes_fp32_upsampling"] > 1.2 * pipeline["vae_decode_bytes"], name
    flux = find_architecture("flux.1-dev")
    decode = DATA["pipelines"]["flux.1-dev"]["vae_decode_bytes_fp32_upsampling"]
    common = dict(model=flux, mode="infer", batch_size=8, image_size=1024)
    cast = estimate(Plan(**common, dtype="bf16", vae_upsampling_fp32=True)).breakdown.activations
    today = estimate(Plan(**common, dtype="bf16", vae_upsampling_fp32=False)).breakdown.activations
    unknown = estimate(Plan(**common, dtype="bf16")).breakdown.activations
    assert cast.estimate == pytest.approx(8 * decode)
    assert unknown.estimate == today.estimate < cast.estimate <= unknown.high
    assert today.high < unknown.high
    fp16 = Plan(**common, dtype="fp16")
    assert estimate(fp16).breakdown.activations == estimate(Plan(**common, dtype="fp16", vae_upsampling_fp32=True)).breakdown.activations
    assert settings_for_versions({"diffusers": "0.30.3"})["vae_upsampling_fp32"] is True
    assert settings_for_versions({"diffusers": "0.31.0"})["vae_upsampling_fp32"] is False


def test_vae_slicing_decodes_one_image_at_a_time_and_a_tile_holds_every_image_of_the_batch():
    """AutoencoderKL.decode: with slicing, one image's latents at a time (the decoded images concatenated at the end);
    tiled_decode cuts the latents' height and width, each tile keeping the whole batch."""
    flux = find_architecture("flux.1-dev")
    decode = DATA["pipelines"]["flux.1-dev"]["vae_decode_bytes"]
    common = dict(model=flux, mode="infer", dtype="bf16", vae_upsampling_fp32=False)
    whole = estimate(Plan(**common, batch_size=2, image_size=1024)).breakdown.activations.estimate
    sliced = estimate(Plan(**common, batch_size=2, image_size=1024, vae_slicing=True)).breakdown.activations.estimate
    assert whole == pytest.approx(2 * decode)
    assert sliced == pytest.approx(decode + 3 * 1024 * 1024 * 2)  # the first image's pixels wait for the second's
    tiled = estimate(Plan(**common, batch_size=2, image_size=1536, vae_tiling=True)).breakdown.activations.estimate
    assert tiled == pytest.approx(2 * decode)
    report = build(Plan(**common, batch_size=2, image_size=1024), resolve_target("a10g"), {})
    assert any("VAE slicing" in remedy.change for remedy in report.remedies)
    single = build(Plan(**common, batch_size=1, image_size=1024), resolve_target("a10g"), {})
    assert not any("VAE slicing" in remedy.change for remedy in single.remedies)  # one image: nothing to slice


def test_attention_slicing_holds_each_slices_scores_where_sdpa_holds_none():
    """enable_attention_slicing() gives a UNet diffusers' sliced processor, which computes each slice's attention scores
    in full (replayed: more than SDPA's call holds, growing with the tokens squared); a transformer denoiser has none."""
    sd15 = find_architecture("sd-1.5")
    measured = DATA["pipelines"]["sd-1.5"]
    extra = max(measured["denoise_bytes_sliced"][batch] - measured["denoise_bytes"][batch] for batch in ("1", "2"))
    assert extra > 0
    common = dict(model=sd15, mode="infer", dtype="fp16", batch_size=4, vae_slicing=True)  # the denoising step peaks
    for side in (512, 768):
        plain = estimate(Plan(**common, image_size=side)).breakdown.activations.estimate
        sliced = estimate(Plan(**common, image_size=side, attention_slicing=True))
        assert sliced.breakdown.activations.estimate - plain == pytest.approx(extra * (side / 512) ** 4)
        assert any("more memory on torch 2" in note for note in sliced.assumptions)
    flux = dict(model=find_architecture("flux.1-dev"), mode="infer", dtype="bf16", vae_upsampling_fp32=False)
    assert estimate(Plan(**flux, attention_slicing=True)).breakdown == estimate(Plan(**flux)).breakdown


def test_resolution_guidance_offload_and_tiling():
    sdxl = find_architecture("stabilityai/stable-diffusion-xl-base-1.0")
    base = estimate(Plan(model=sdxl, mode="infer", dtype="fp16", image_size=1024))
    large = estimate(Plan(model=sdxl, mode="infer", dtype="fp16", image_size=2048))
    assert large.breakdown.activations.estimate == pytest.approx(4 * base.breakdown.activations.estimate)
    tiled = estimate(Plan(model=sdxl, mode="infer", dtype="fp16", image_size=2048, vae_tiling=True))
    assert tiled.breakdown.activations.estimate < large.breakdown.activations.estimate / 2
    offloaded = estimate(Plan(model=sdxl, mode="infer", dtype="fp16", cpu_offload=True)).breakdown.weights.estimate
    assert offloaded == 2 * pipeline_of(sdxl).components["denoiser"]  # one component at a time: the UNet is the largest
    report = build(Plan(model=sdxl, mode="infer", dtype="fp32", image_size=2048, batch_size=4), resolve_target("t4"), {})
    changes = [remedy.change for remedy in report.remedies]
    assert any("VAE tiling" in change for change in changes) and any("CPU offload" in change for change in changes)


def test_t5_keeps_wo_in_fp32_and_offload_keeps_the_last_text_encoder_through_the_negative_prompt():
    """transformers loads T5's `wo` in fp32 when fp16 is asked for (`_keep_in_fp32_modules`); diffusers' offload
    hooks move a component off only when the next one in the pipeline's order runs, so with guidance the
    negative prompt's CLIP encoders run beside T5; a component left out is not loaded."""
    sd3 = find_architecture("sd-3-medium")
    pipeline = pipeline_of(sd3)
    components = pipeline.components
    wo = 24 * 10240 * 4096  # T5-XXL: layers x d_ff x d_model
    assert pipeline.kept_fp32_under_fp16 == {"text_encoder_3": wo}
    fp16 = estimate(Plan(model=sd3, mode="infer", dtype="fp16")).breakdown.weights.estimate
    bf16 = estimate(Plan(model=sd3, mode="infer", dtype="bf16")).breakdown.weights.estimate
    assert fp16 - bf16 == 2 * wo
    offloaded = estimate(Plan(model=sd3, mode="infer", dtype="fp16", cpu_offload=True)).breakdown.weights.estimate
    assert offloaded == 2 * (components["text_encoder_3"] + wo + components["text_encoder_2"])
    without_t5 = estimate(Plan(model=sd3, mode="infer", dtype="fp16", cpu_offload=True, omitted_components=("text_encoder_3",)))
    assert without_t5.breakdown.weights.estimate == 2 * components["denoiser"]
    assert any("left out of the pipeline: text_encoder_3" in note for note in without_t5.assumptions)


def test_the_denoiser_trains_in_full_or_with_lora():
    sd = find_architecture("sd-1.5")
    full = estimate(Plan(model=sd, mode="train", dtype="amp-fp16", image_size=512, batch_size=4))
    lora = estimate(Plan(model=sd, mode="train", dtype="fp16", image_size=512, batch_size=4, lora_rank=8))
    assert lora.trainable_params == 8 * DATA["pipelines"]["sd-1.5"]["lora_params_per_rank"]
    assert full.trainable_params == DATA["pipelines"]["sd-1.5"]["components"]["denoiser"]
    assert lora.allocated.estimate < full.allocated.estimate
    checkpointed = estimate(Plan(model=sd, mode="train", dtype="amp-fp16", image_size=512, batch_size=4, gradient_checkpointing=True))
    assert checkpointed.breakdown.activations.estimate < full.breakdown.activations.estimate / 3


def test_a_diffusers_script_is_read():
    script = textwrap.dedent(
        """\
        import torch
        from diffusers import DiffusionPipeline

        pipe = DiffusionPipeline.from_pretrained("stabilityai/stable-diffusion-xl-base-1.0", torch_dtype=torch.float16)
        pipe.enable_model_cpu_offload()
        pipe.enable_vae_tiling()
        pipe.enable_vae_slicing()
        pipe.enable_attention_slicing()
        images = pipe("a lighthouse at dusk", height=1536, width=1536, num_images_per_prompt=2).images
        """
    )
    found = read_inputs(ModuleAnalysis(script, "generate.py")).found()
    assert found["model"].value == "stabilityai/stable-diffusion-xl-base-1.0" and found["dtype"].value == "fp16"
    assert found["mode"].value == "infer" and found["image_size"].value == 1536 and found["batch_size"].value == 2
    assert found["cpu_offload"].value is True and found["vae_tiling"].value is True and found["vae_slicing"].value is True
    assert found["attention_slicing"].value is True
    planned = plan_settings(read_inputs(ModuleAnalysis(script, "generate.py")), {})
    result = estimate(Plan(model=find_architecture(planned.model_name), **planned.settings))
    assert result.process.high < 16 * GIB
