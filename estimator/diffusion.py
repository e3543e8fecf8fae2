"""Diffusion pipelines: a denoiser (UNet or transformer), text encoders and a VAE.

``data/diffusion_pipelines.json`` holds, per pipeline, each component's parameter count and the
working memory measured on fake tensors at the pipeline's reference resolution
(``calibration/diffusion_pipelines.py``): one denoiser call at batch 1 and 2, one VAE decode, the
text encoders, and what a denoiser training step keeps for its backward (full, with gradient
checkpointing, frozen with LoRA adapters). Working memory scales with the latent area.

Inference keeps every component on the device (unless ``enable_model_cpu_offload``: one at a time)
and peaks in the larger of a denoising step (classifier-free guidance doubles its batch) and the
VAE decode (``enable_vae_tiling``: one reference-sized tile at a time). Training updates the
denoiser; the text encoders and the VAE stay resident and frozen.
"""

from __future__ import annotations

import functools
from pathlib import Path

import msgspec

from .architectures import Architecture

_DATA_PATH = Path(__file__).parent / "data" / "diffusion_pipelines.json"
# GPU kernels (cuDNN's convolution workspaces above all) add to what fake tensors count.
_WORK_SPREAD = (0.9, 1.0, 1.5)
_TRAIN_SPREAD = (0.9, 1.0, 1.25)


class Pipeline(msgspec.Struct, frozen=True):
    resolution: int
    guidance_batch: int
    components: dict[str, int]
    denoise_bytes: dict[str, int]
    vae_decode_bytes: int
    text_encode_bytes: int
    train_saved_bytes: dict[str, int]
    lora_params_per_rank: int


class _Data(msgspec.Struct, frozen=True):
    pipelines: dict[str, Pipeline]
    lora_targets: list[str]


@functools.cache
def _data() -> _Data:
    return msgspec.json.decode(_DATA_PATH.read_bytes(), type=_Data)


def pipeline_of(arch: Architecture) -> Pipeline | None:
    return _data().pipelines.get(arch.pipeline) if arch.pipeline else None


def pipeline_params(arch: Architecture) -> int:
    pipeline = pipeline_of(arch)
    return sum(pipeline.components.values()) if pipeline is not None else arch.published_params


def diffusion_terms(plan, arch: Architecture, pipeline: Pipeline, notes: list[str]):
    """(parameters, trainable parameters, the breakdown's terms) per GPU, as keyword arguments."""
    from .costmodel import _OPTIMIZER_STATE, _PRECISION, Interval

    weight_bytes = 2 if plan.dtype in ("fp16", "bf16", "amp-fp16", "amp-bf16") else 4
    work_bytes = _PRECISION[plan.dtype][2]
    area = ((plan.image_size or pipeline.resolution) / pipeline.resolution) ** 2
    scale = area * work_bytes / 2  # measured in 16 bits
    components = pipeline.components
    denoiser = components["denoiser"]
    total = sum(components.values())
    if plan.image_size is None:
        notes.append(f"resolution assumed {pipeline.resolution}x{pipeline.resolution}, the pipeline's own")
    if plan.mode != "train":
        per_call = plan.batch_size * pipeline.guidance_batch
        one, two = pipeline.denoise_bytes["1"], pipeline.denoise_bytes["2"]
        denoise = (one + (two - one) * (per_call - 1)) * scale
        decode_area = min(area, 1.0) if plan.vae_tiling else area
        decode = pipeline.vae_decode_bytes * decode_area * work_bytes / 2 * (1 if plan.vae_tiling else plan.batch_size)
        if plan.vae_tiling:
            notes.append("VAE tiling: the decode works one reference-sized tile at a time")
        if pipeline.guidance_batch > 1:
            notes.append("classifier-free guidance: each denoising step runs two samples per image")
        phases = {  # (weights on the device, working memory) per phase
            "text encoding": (sum(v for k, v in components.items() if k.startswith("text_encoder")), pipeline.text_encode_bytes),
            "denoising": (denoiser, denoise),
            "VAE decode": (components["vae"], decode),
        }
        if plan.cpu_offload:
            name, (resident, work) = max(phases.items(), key=lambda item: item[1][0] * weight_bytes + item[1][1])
            notes.append(f"model CPU offload: one component on the device at a time; the largest phase is {name}")
            return total, 0, {"weights": Interval.exact(resident * weight_bytes), "activations": Interval.spread(work, _WORK_SPREAD)}
        name, (_, work) = max(phases.items(), key=lambda item: item[1][1])
        notes.append(f"all components on the device ({total:,} parameters); the working memory peaks in the {name}")
        return total, 0, {"weights": Interval.exact(total * weight_bytes), "activations": Interval.spread(work, _WORK_SPREAD)}
    frozen = total - denoiser
    lora = plan.lora_rank is not None
    saved = pipeline.train_saved_bytes["lora" if lora else "checkpointing" if plan.gradient_checkpointing else "full"]
    activations = Interval.spread(saved * plan.batch_size * scale, _TRAIN_SPREAD)
    states, fixed = _OPTIMIZER_STATE[plan.optimizer]
    if lora:
        trainable = plan.lora_rank * pipeline.lora_params_per_rank
        notes.append(f"LoRA rank {plan.lora_rank} on the denoiser's attention projections: {trainable:,} trainable parameters, in fp32")
        weights = total * weight_bytes + trainable * 4
        gradients, optimizer, cache = trainable * 4, trainable * (states * 4 + fixed), 0
    else:
        trainable = denoiser
        master = 4 if plan.dtype.startswith("amp") or plan.dtype == "fp32" else 2
        weights = denoiser * master + frozen * weight_bytes
        gradients, optimizer = denoiser * master, denoiser * (states * master + fixed)
        cache = denoiser * 2 if plan.dtype.startswith("amp") else 0
        notes.append("the denoiser is trained in full; the text encoders and the VAE stay on the device, frozen")
    return total, trainable, {
        "weights": Interval.exact(weights), "gradients": Interval.exact(gradients), "optimizer": Interval.exact(optimizer),
        "autocast_cache": Interval.exact(cache), "activations": activations,
    }
