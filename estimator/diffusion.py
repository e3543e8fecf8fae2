"""Diffusion pipelines: a denoiser (UNet or transformer), text encoders and a VAE.

``data/diffusion_pipelines.json`` holds, per pipeline, each component's parameter count and the
working memory measured on fake tensors at the pipeline's reference resolution
(``calibration/diffusion_pipelines.py``): one denoiser call at batch 1 and 2, one VAE decode, the
text encoders, and what a denoiser training step keeps for its backward (full, with gradient
checkpointing, frozen with LoRA adapters). Working memory scales with the latent area.

Inference keeps every component on the device (unless ``enable_model_cpu_offload``: one at a time, see
``_offloaded_phases``) and peaks in the larger of a denoising step (classifier-free guidance doubles its
batch) and the VAE decode (``enable_vae_tiling``: one reference-sized tile of each image at a time;
``enable_vae_slicing``: one image at a time). A component left
out of the pipeline (``text_encoder_3=None``: ``Plan.omitted_components``) is not loaded. Training updates
the denoiser; the text encoders and the VAE stay resident and frozen.
"""

from __future__ import annotations

import functools
from pathlib import Path

import msgspec

from .architectures import Architecture
from .plan import OPTIMIZER_STATE, PRECISION, CannotEstimate, Interval
from .versions import settled_by

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
    # Per text encoder, the parameters transformers keeps in fp32 when fp16 is asked for (`_keep_in_fp32_modules`:
    # T5's `wo`); the other dtypes load them as asked.
    kept_fp32_under_fp16: dict[str, int] = msgspec.field(default_factory=dict)
    # The pipeline's code casts its VAE to fp32 for the decode when the VAE is in fp16 and its config sets
    # `force_upcast` (diffusers' SDXL pipelines: `needs_upcasting`; the stock SDXL VAE's config sets it).
    vae_upcast_under_fp16: bool = False
    # A bf16 decode's working memory (bytes, one image) as diffusers before 0.31 ran it: each Upsample2D casts to fp32
    # around its interpolation (plan.vae_upsampling_fp32).
    vae_decode_bytes_fp32_upsampling: int = 0
    # A denoiser call at batch 1 and 2 with diffusers' sliced attention processor (`enable_attention_slicing()`,
    # slice "auto"; a UNet's `set_attention_slice`); empty where not replayed or the denoiser has none.
    denoise_bytes_sliced: dict[str, int] = msgspec.field(default_factory=dict)


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
    weight_bytes = 2 if plan.dtype in ("fp16", "bf16", "amp-fp16", "amp-bf16") else 4
    work_bytes = PRECISION[plan.dtype][2]
    area = ((plan.image_size or pipeline.resolution) / pipeline.resolution) ** 2
    scale = area * work_bytes / 2  # measured in 16 bits
    unknown = set(plan.omitted_components) - set(pipeline.components)
    if unknown:
        raise CannotEstimate(f"{', '.join(sorted(unknown))}: not a component of this pipeline ({', '.join(pipeline.components)})")
    components = {name: count for name, count in pipeline.components.items() if name not in plan.omitted_components}
    if plan.omitted_components:
        notes.append(f"left out of the pipeline: {', '.join(plan.omitted_components)}")
    denoiser = components["denoiser"]
    total = sum(components.values())
    # transformers keeps some modules in fp32 when fp16 is asked for: 2 more bytes per parameter
    kept_fp32 = {name: count for name, count in pipeline.kept_fp32_under_fp16.items() if name in components and plan.dtype == "fp16"}
    if kept_fp32:
        notes.append(f"fp16: {', '.join(kept_fp32)} keeps {sum(kept_fp32.values()):,} parameters in fp32 (T5's `wo`, "
                     "transformers' _keep_in_fp32_modules)")

    def resident(names) -> float:
        return sum(components[name] * weight_bytes + 2 * kept_fp32.get(name, 0) for name in names)

    if plan.image_size is None:
        notes.append(f"resolution assumed {pipeline.resolution}x{pipeline.resolution}, the pipeline's own")
    if plan.mode != "train":
        per_call = plan.batch_size * pipeline.guidance_batch
        one, two = pipeline.denoise_bytes["1"], pipeline.denoise_bytes["2"]
        denoise = (one + (two - one) * (per_call - 1)) * scale
        if plan.attention_slicing and pipeline.denoise_bytes_sliced:
            # the sliced processor computes each slice's scores in full (baddbmm, softmax): tokens squared, so the
            # latent area squared, where SDPA keeps none
            extra = max(pipeline.denoise_bytes_sliced[batch] - pipeline.denoise_bytes[batch] for batch in ("1", "2"))
            denoise += extra * area * scale
            notes.append("attention slicing (enable_attention_slicing): the sliced processor holds each slice's attention "
                         "scores and probabilities, which SDPA never makes: more memory on torch 2, not less (as diffusers warns)")
        elif plan.attention_slicing:
            notes.append("attention slicing: not counted (no replay with the sliced processor for this pipeline's denoiser; "
                         "SD3's and FLUX's transformers have none)")
        decode_area = min(area, 1.0) if plan.vae_tiling else area

        def peak_phase(decode_bytes: int, fp32_upsampling: bool = False) -> tuple[str, list[str], float, float]:
            """The phase with the most on the device: its name, the components then on the device, their weights
            and its working memory, the VAE decoding with ``decode_bytes`` per element (its weights then as wide),
            or in bf16 upsampling in fp32 (``fp32_upsampling``: diffusers before 0.31)."""
            per_image = pipeline.vae_decode_bytes_fp32_upsampling if fp32_upsampling else pipeline.vae_decode_bytes * decode_bytes / 2
            # a tile carries every image of the batch (tiled_decode slices the latents' height and width only);
            # slicing decodes one image at a time, the earlier images' pixels kept for the final concatenation
            decode = per_image * decode_area * (1 if plan.vae_slicing else plan.batch_size)
            if plan.vae_slicing:
                decode += (plan.batch_size - 1) * 3 * (plan.image_size or pipeline.resolution) ** 2 * decode_bytes
            vae_cast = components.get("vae", 0) * (decode_bytes - weight_bytes)
            if plan.cpu_offload:
                phases = _offloaded_phases(pipeline, encoders, denoise, decode)
            else:
                phases = {"text encoding": (list(components), pipeline.text_encode_bytes),
                          "denoising": (list(components), denoise), "VAE decode": (list(components), decode)}
            sized = {name: (names, resident(names) + (vae_cast if name == "VAE decode" else 0), work)
                     for name, (names, work) in phases.items()}
            name, (names, weights, work) = max(sized.items(), key=lambda item: item[1][1] + item[1][2])
            return name, names, weights, work

        if plan.vae_tiling:
            notes.append("VAE tiling: the decode works one reference-sized tile at a time (of every image in the batch)")
        if plan.vae_slicing and plan.batch_size > 1:
            notes.append("VAE slicing: the decode works one image at a time")
        if pipeline.guidance_batch > 1:
            notes.append("classifier-free guidance: each denoising step runs two samples per image")
        encoders = [name for name in components if name.startswith("text_encoder")]
        name, names, weights, work = peak_phase(work_bytes)
        working, weights_interval = Interval.spread(work, _WORK_SPREAD), Interval.exact(weights)
        if plan.dtype == "fp16" and pipeline.vae_upcast_under_fp16:
            low_weights, low_work = weights, work
            name, names, weights, work = peak_phase(4)
            working = Interval(min(low_work, work) * _WORK_SPREAD[0], work * _WORK_SPREAD[1], work * _WORK_SPREAD[2])
            weights_interval = Interval(min(low_weights, weights), weights, weights)
            notes.append("fp16: the pipeline casts its VAE to fp32 for the decode (force_upcast in the VAE's config, as the "
                         "stock VAE sets it), so the decode works in fp32; a VAE whose config turns it off (an fp16-fixed "
                         "VAE) decodes in fp16 (the low end)")
        if plan.dtype == "bf16" and pipeline.vae_decode_bytes_fp32_upsampling and plan.vae_upsampling_fp32 is not False:
            old = peak_phase(work_bytes, fp32_upsampling=True)
            if plan.vae_upsampling_fp32:
                name, names, weights, work = old
                working = Interval.spread(work, _WORK_SPREAD)
                notes.append("diffusers before 0.31: a bf16 decode casts each upsampler's input to fp32 around the "
                             "interpolation (Upsample2D), so the upsampled maps are held in fp32 as well")
            else:
                working = Interval(working.low, working.estimate, max(working.high, old[3] * _WORK_SPREAD[2]))
                notes.append("bf16 decode as diffusers 0.31 and later run it (the estimate); before, each upsampler cast "
                             f"to fp32 around the interpolation (the high end); {settled_by('diffusers')}")
        if plan.cpu_offload:
            notes.append(f"model CPU offload: a component leaves the device when the next one in the pipeline's order "
                         f"runs; the largest phase is {name} ({', '.join(names)} on the device)")
        else:
            notes.append(f"all components on the device ({total:,} parameters); the working memory peaks in the {name}")
        return total, 0, {"weights": weights_interval, "activations": working}
    frozen = resident(name for name in components if name != "denoiser")
    lora = plan.lora_rank is not None
    saved = pipeline.train_saved_bytes["lora" if lora else "checkpointing" if plan.gradient_checkpointing else "full"]
    activations = Interval.spread(saved * plan.batch_size * scale, _TRAIN_SPREAD)
    states, fixed = OPTIMIZER_STATE[plan.optimizer]
    if lora:
        trainable = plan.lora_rank * pipeline.lora_params_per_rank
        notes.append(f"LoRA rank {plan.lora_rank} on the denoiser's attention projections: {trainable:,} trainable parameters, in fp32")
        weights = resident(components) + trainable * 4
        gradients, optimizer, cache = trainable * 4, trainable * (states * 4 + fixed), 0
    else:
        trainable = denoiser
        master = 4 if plan.dtype.startswith("amp") or plan.dtype == "fp32" else 2
        weights = denoiser * master + frozen
        gradients, optimizer = denoiser * master, denoiser * (states * master + fixed)
        cache = denoiser * 2 if plan.dtype.startswith("amp") else 0
        notes.append("the denoiser is trained in full; the text encoders and the VAE stay on the device, frozen")
    return total, trainable, {
        "weights": Interval.exact(weights), "gradients": Interval.exact(gradients), "optimizer": Interval.exact(optimizer),
        "autocast_cache": Interval.exact(cache), "activations": activations,
    }


def _offloaded_phases(pipeline: Pipeline, encoders: list[str], denoise: float, decode: float) -> dict[str, tuple[list[str], float]]:
    """Which components are on the device in each phase under ``enable_model_cpu_offload``, with its working
    memory. diffusers chains accelerate's offload hooks in the pipeline's order (text encoders, denoiser, VAE):
    a component is moved off only when the next one in that order runs. With classifier-free guidance the
    pipeline encodes the negative prompt after the prompt, so the last text encoder is still on the device
    while the earlier ones run again: the text phase holds it and the largest of the others."""
    text = encoders[-1:]
    if pipeline.guidance_batch > 1 and len(encoders) > 1:
        text = [max(encoders[:-1], key=lambda name: pipeline.components[name]), encoders[-1]]
    return {
        "text encoding": (text, pipeline.text_encode_bytes),
        "denoising": (["denoiser"], denoise),
        "VAE decode": (["vae"], decode),
    }
