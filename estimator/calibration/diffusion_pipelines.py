"""Diffusion pipelines: each component's parameters and the working memory of a denoising step, a VAE
decode and a denoiser training step, measured on fake tensors.

For Stable Diffusion 1.5, 2.1, XL, 3 (medium) and FLUX.1-dev, each component (UNet or transformer,
text encoders, VAE) is built from its published config (written out below; nothing is downloaded)
with diffusers and transformers under ``FakeTensorMode`` in 16-bit, and its parameters counted (they
match the published counts). Then, at the pipeline's reference resolution:

- inference: ``MemTracker``'s peak beyond the parameters for one denoiser call at batch 1 and 2
  (classifier-free guidance runs 2 per image; a UNet's also with diffusers' sliced attention processor, slice
  "auto", as ``enable_attention_slicing()`` sets it), for a VAE decode of one image (and of one image in bf16 as
  diffusers before 0.31 decoded it, upsampling in fp32), and for the text
  encoders on a 77-token (T5: 256-token) prompt, all under ``torch.no_grad()``; the text encoders'
  parameters that transformers keeps in fp32 when fp16 is asked for (T5's ``wo``); and whether the
  pipeline's class casts an fp16 VAE to fp32 for the decode (SDXL's ``upcast_vae``, when the VAE's
  config sets ``force_upcast``, as diffusers' default and the stock SDXL VAE do);
- training the denoiser: the bytes the forward keeps for the backward (saved-tensor hooks, unique
  storages, parameters excluded, as in ``activations.py``) at batch 1, trained in full, with
  gradient checkpointing, and frozen with LoRA adapters (peft, rank 4) on the attention projections,
  with their parameter count per unit of rank.

Attention is diffusers' default (SDPA), which on fake CPU tensors dispatches to the fused kernel as
a GPU does. Memory scales with the latent area (the estimator scales by (resolution / reference)^2).
Runs in the calibration venv (torch, transformers, diffusers, peft), never the product's:

    python diffusion_pipelines.py ../data/diffusion_pipelines.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import diffusers
import diffusers.models.upsampling
import peft
import torch
import transformers
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.distributed._tools.mem_tracker import MemTracker

DTYPE = torch.float16
LORA_RANK = 4
LORA_TARGETS = ["to_q", "to_k", "to_v", "to_out.0"]
SD_VAE = dict(block_out_channels=[128, 256, 512, 512], down_block_types=["DownEncoderBlock2D"] * 4,
              up_block_types=["UpDecoderBlock2D"] * 4, latent_channels=4, layers_per_block=2)
SD3_VAE = dict(SD_VAE, latent_channels=16, use_quant_conv=False, use_post_quant_conv=False)
CLIP_L = dict(hidden_size=768, intermediate_size=3072, num_hidden_layers=12, num_attention_heads=12, vocab_size=49408,
              max_position_embeddings=77, hidden_act="quick_gelu")
OPENCLIP_H = dict(hidden_size=1024, intermediate_size=4096, num_hidden_layers=23, num_attention_heads=16, vocab_size=49408,
                  max_position_embeddings=77, hidden_act="gelu")
OPENCLIP_BIGG = dict(hidden_size=1280, intermediate_size=5120, num_hidden_layers=32, num_attention_heads=20, vocab_size=49408,
                     max_position_embeddings=77, hidden_act="gelu", projection_dim=1280)
T5_XXL = dict(d_model=4096, d_ff=10240, num_layers=24, num_heads=64, d_kv=64, vocab_size=32128, feed_forward_proj="gated-gelu")
SD15_UNET = dict(sample_size=64, block_out_channels=[320, 640, 1280, 1280], layers_per_block=2, attention_head_dim=8,
                 cross_attention_dim=768, down_block_types=["CrossAttnDownBlock2D"] * 3 + ["DownBlock2D"],
                 up_block_types=["UpBlock2D"] + ["CrossAttnUpBlock2D"] * 3)
SD21_UNET = dict(SD15_UNET, sample_size=96, attention_head_dim=[5, 10, 20, 20], cross_attention_dim=1024, use_linear_projection=True)
SDXL_UNET = dict(sample_size=128, block_out_channels=[320, 640, 1280], layers_per_block=2, transformer_layers_per_block=[1, 2, 10],
                 attention_head_dim=[5, 10, 20], cross_attention_dim=2048, use_linear_projection=True,
                 down_block_types=["DownBlock2D", "CrossAttnDownBlock2D", "CrossAttnDownBlock2D"],
                 up_block_types=["CrossAttnUpBlock2D", "CrossAttnUpBlock2D", "UpBlock2D"],
                 addition_embed_type="text_time", addition_time_embed_dim=256, projection_class_embeddings_input_dim=2816)
SD3_TRANSFORMER = dict(sample_size=128, patch_size=2, in_channels=16, num_layers=24, attention_head_dim=64, num_attention_heads=24,
                       joint_attention_dim=4096, caption_projection_dim=1536, pooled_projection_dim=2048, out_channels=16,
                       pos_embed_max_size=192)
FLUX_TRANSFORMER = dict(patch_size=1, in_channels=64, num_layers=19, num_single_layers=38, attention_head_dim=128,
                        num_attention_heads=24, joint_attention_dim=4096, pooled_projection_dim=768, guidance_embeds=True,
                        axes_dims_rope=[16, 56, 56])

PIPELINES = {
    "sd-1.5": {"class": "StableDiffusionPipeline", "resolution": 512, "guidance_batch": 2, "denoiser": ("unet", SD15_UNET),
               "text_encoders": [("clip", CLIP_L)], "vae": SD_VAE, "context": (77, 768)},
    "sd-2.1": {"class": "StableDiffusionPipeline", "resolution": 768, "guidance_batch": 2, "denoiser": ("unet", SD21_UNET),
               "text_encoders": [("clip", OPENCLIP_H)], "vae": SD_VAE, "context": (77, 1024)},
    "sdxl": {"class": "StableDiffusionXLPipeline", "resolution": 1024, "guidance_batch": 2, "denoiser": ("unet", SDXL_UNET),
             "text_encoders": [("clip", CLIP_L), ("clip-projection", OPENCLIP_BIGG)], "vae": SD_VAE, "context": (77, 2048)},
    "sd-3-medium": {"class": "StableDiffusion3Pipeline", "resolution": 1024, "guidance_batch": 2, "denoiser": ("sd3", SD3_TRANSFORMER),
                    "text_encoders": [("clip-projection", dict(CLIP_L, projection_dim=768)), ("clip-projection", OPENCLIP_BIGG),
                                      ("t5", T5_XXL)], "vae": SD3_VAE, "context": (333, 4096)},
    "flux.1-dev": {"class": "FluxPipeline", "resolution": 1024, "guidance_batch": 1, "denoiser": ("flux", FLUX_TRANSFORMER),
                   "text_encoders": [("clip", CLIP_L), ("t5", T5_XXL)], "vae": SD3_VAE, "context": (512, 4096)},
}


def _text_encoder(kind: str, config: dict):
    if kind == "t5":
        return transformers.T5EncoderModel(transformers.T5Config(**config))
    if kind == "clip-projection":
        return transformers.CLIPTextModelWithProjection(transformers.CLIPTextConfig(**config))
    return transformers.CLIPTextModel(transformers.CLIPTextConfig(**config))


def kept_fp32_under_fp16(encoders: list) -> dict[str, int]:
    """Per text encoder, the parameters transformers loads in fp32 when the pipeline asks for fp16: those of
    the modules its class names in `_keep_in_fp32_modules` (T5's `wo`, which overflows in fp16)."""
    kept = {}
    for index, encoder in enumerate(encoders):
        names = set(getattr(encoder, "_keep_in_fp32_modules", None) or ())
        count = sum(p.numel() for name, p in encoder.named_parameters() if names & set(name.split(".")))
        if count:
            kept[f"text_encoder_{index + 1}"] = count
    return kept


def _denoiser(kind: str, config: dict):
    if kind == "unet":
        return diffusers.UNet2DConditionModel(**config)
    if kind == "sd3":
        return diffusers.SD3Transformer2DModel(**config)
    return diffusers.FluxTransformer2DModel(**config)


def _denoiser_inputs(pipeline: dict, batch: int) -> dict:
    kind, config = pipeline["denoiser"]
    latent = pipeline["resolution"] // 8
    tokens, width = pipeline["context"]
    text = torch.randn(batch, tokens, width, dtype=DTYPE)
    if kind == "unet":
        inputs = {"sample": torch.randn(batch, 4, latent, latent, dtype=DTYPE), "timestep": torch.tensor(10),
                  "encoder_hidden_states": text}
        if config.get("addition_embed_type") == "text_time":
            inputs["added_cond_kwargs"] = {"text_embeds": torch.randn(batch, 1280, dtype=DTYPE), "time_ids": torch.randn(batch, 6, dtype=DTYPE)}
        return inputs
    if kind == "sd3":
        return {"hidden_states": torch.randn(batch, 16, latent, latent, dtype=DTYPE), "encoder_hidden_states": text,
                "pooled_projections": torch.randn(batch, 2048, dtype=DTYPE), "timestep": torch.tensor([10] * batch)}
    packed = (latent // 2) ** 2
    return {"hidden_states": torch.randn(batch, packed, 64, dtype=DTYPE), "encoder_hidden_states": text,
            "pooled_projections": torch.randn(batch, 768, dtype=DTYPE), "timestep": torch.tensor([0.5] * batch, dtype=DTYPE),
            "guidance": torch.tensor([3.5] * batch, dtype=DTYPE), "img_ids": torch.zeros(packed, 3, dtype=DTYPE),
            "txt_ids": torch.zeros(tokens, 3, dtype=DTYPE)}


def _peak_beyond_parameters(module: torch.nn.Module, call) -> int:
    tracker = MemTracker()
    tracker.track_external(module)
    with torch.no_grad(), tracker:
        call()
    peak = next(iter(tracker.get_tracker_snapshot("peak").values()))
    return int(sum(value for name, value in peak.items() if str(name).rsplit(".", 1)[-1] not in ("PARAM", "BUFFER", "Total")))


def _decode_with_fp32_upsampling(vae_config: dict, latent: int) -> int:
    """The peak of a bf16 VAE's decode as diffusers before 0.31 ran it: ``Upsample2D`` cast bf16 to fp32 around
    the nearest-neighbour interpolation and back (from 0.31 only under torch older than 2.1, where the CUDA kernel
    lacks bf16), so each upsampler held its input upsampled in fp32 beside the 16-bit copy."""
    today = diffusers.models.upsampling.is_torch_version
    diffusers.models.upsampling.is_torch_version = lambda *_: True  # the release before 0.31 cast unconditionally
    torch.set_default_dtype(torch.bfloat16)
    try:
        vae = diffusers.AutoencoderKL(**vae_config)
    finally:
        torch.set_default_dtype(torch.float32)
    try:
        channels = vae_config["latent_channels"]
        return _peak_beyond_parameters(vae, lambda: vae.decode(torch.randn(1, channels, latent, latent, dtype=torch.bfloat16)))
    finally:
        diffusers.models.upsampling.is_torch_version = today


def _saved_bytes(module: torch.nn.Module, call) -> int:
    """Bytes of unique storages the forward keeps for the backward, parameters excluded."""
    params = {p.untyped_storage()._cdata for p in module.parameters()} | {b.untyped_storage()._cdata for b in module.buffers()}
    seen: dict[int, int] = {}
    keep = []

    def pack(tensor):
        keep.append(tensor)
        storage = tensor.untyped_storage()
        if storage._cdata not in params:
            seen.setdefault(storage._cdata, storage.nbytes())
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        output = call()
    assert (output[0] if isinstance(output, tuple) else output.sample).requires_grad
    return sum(seen.values())


def _with_lora(module: torch.nn.Module) -> torch.nn.Module:
    for parameter in module.parameters():
        parameter.requires_grad_(False)
    move = torch.nn.Module.to
    torch.nn.Module.to = lambda self, *args, **kwargs: self  # all on the CPU already; fake parameters cannot be swapped
    try:
        return peft.get_peft_model(module, peft.LoraConfig(r=LORA_RANK, lora_alpha=LORA_RANK, target_modules=LORA_TARGETS))
    finally:
        torch.nn.Module.to = move


def measure(name: str, pipeline: dict) -> dict:
    kind, config = pipeline["denoiser"]
    latent = pipeline["resolution"] // 8
    result: dict = {"resolution": pipeline["resolution"], "guidance_batch": pipeline["guidance_batch"], "components": {}}
    with FakeTensorMode(allow_non_fake_inputs=True):
        torch.set_default_dtype(DTYPE)
        try:
            denoiser = _denoiser(kind, config)
            vae = diffusers.AutoencoderKL(**pipeline["vae"])
            encoders = [_text_encoder(kind_, config_) for kind_, config_ in pipeline["text_encoders"]]
        finally:
            torch.set_default_dtype(torch.float32)
        result["components"]["denoiser"] = sum(p.numel() for p in denoiser.parameters())
        result["components"]["vae"] = sum(p.numel() for p in vae.parameters())
        for index, encoder in enumerate(encoders):
            result["components"][f"text_encoder_{index + 1}"] = sum(p.numel() for p in encoder.parameters())
        result["kept_fp32_under_fp16"] = kept_fp32_under_fp16(encoders)
        # the SDXL pipelines cast an fp16 VAE to fp32 for the decode when its config sets force_upcast (`upcast_vae`)
        result["vae_upcast_under_fp16"] = hasattr(getattr(diffusers, pipeline["class"]), "upcast_vae") and vae.config.force_upcast
        denoiser.eval()
        result["denoise_bytes"] = {
            str(batch): _peak_beyond_parameters(denoiser, lambda batch=batch: denoiser(**_denoiser_inputs(pipeline, batch)))
            for batch in (1, 2)
        }
        if hasattr(denoiser, "set_attention_slice"):  # a UNet: the pipeline's enable_attention_slicing() reaches it
            processors = denoiser.attn_processors
            denoiser.set_attention_slice("auto")
            result["denoise_bytes_sliced"] = {
                str(batch): _peak_beyond_parameters(denoiser, lambda batch=batch: denoiser(**_denoiser_inputs(pipeline, batch)))
                for batch in (1, 2)
            }
            denoiser.set_attn_processor(processors)
        channels = pipeline["vae"]["latent_channels"]
        result["vae_decode_bytes"] = _peak_beyond_parameters(
            vae, lambda: vae.decode(torch.randn(1, channels, latent, latent, dtype=DTYPE)))
        result["vae_decode_bytes_fp32_upsampling"] = _decode_with_fp32_upsampling(pipeline["vae"], latent)
        result["text_encode_bytes"] = max(
            _peak_beyond_parameters(encoder, lambda encoder=encoder, kind_=kind_: encoder(
                input_ids=torch.randint(0, 1000, (1, 256 if kind_ == "t5" else 77))))
            for encoder, (kind_, _) in zip(encoders, pipeline["text_encoders"])
        )
        denoiser.train()
        call = lambda: denoiser(**_denoiser_inputs(pipeline, 1))  # noqa: E731
        result["train_saved_bytes"] = {"full": _saved_bytes(denoiser, call)}
        denoiser.enable_gradient_checkpointing()
        result["train_saved_bytes"]["checkpointing"] = _saved_bytes(denoiser, call)
        denoiser.disable_gradient_checkpointing()
        adapted = _with_lora(denoiser)
        result["lora_params_per_rank"] = sum(p.numel() for p in adapted.parameters() if p.requires_grad) // LORA_RANK
        inputs = _denoiser_inputs(pipeline, 1)
        first = next(iter(inputs))
        inputs[first] = inputs[first].requires_grad_(True)  # the measured blocks' input carries a gradient, as with adapters below
        result["train_saved_bytes"]["lora"] = _saved_bytes(adapted, lambda: adapted(**inputs))
    print(name, result, flush=True)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", type=Path)
    parser.add_argument("--only", nargs="*")
    args = parser.parse_args()
    peft.tuners.tuners_utils.BaseTunerLayer._move_adapter_to_device_of_base_layer = lambda self, *a, **k: None
    pipelines = {name: measure(name, PIPELINES[name]) for name in (args.only or PIPELINES)}
    meta = {"torch": torch.__version__, "diffusers": diffusers.__version__, "transformers": transformers.__version__,
            "peft": peft.__version__, "dtype": "fp16", "lora_rank": LORA_RANK, "lora_targets": LORA_TARGETS,
            "measured_with": "FakeTensorMode (CPU-device fakes); MemTracker peak beyond parameters (inference); "
                             "saved-tensor hooks, unique storages, parameters excluded (training)"}
    args.out.write_text(json.dumps({**meta, "pipelines": pipelines}, indent=1) + "\n")


if __name__ == "__main__":
    main()
