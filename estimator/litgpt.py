"""LitGPT's own model code, where its memory differs from transformers' (``Plan.model_code == "litgpt"``).

LitGPT (Lightning AI) builds every model from its own classes, trains through Lightning Fabric and
quantises through Fabric's bitsandbytes plugin. What that changes, read from their sources and
measured on LitGPT's modules under FakeTensorMode (``calibration/litgpt_activations.py``,
``calibration/litgpt_peaks.py``):

- A separate LM head beside the embedding for every model (its checkpoint converter copies a tied
  embedding into the head), and its own padded vocabulary (``data/litgpt_models.json``).
- One fused qkv linear; values of multi-head attention are views of its output (the whole output
  stays alive); grouped keys and values are expanded to all heads before attention.
- RMSNorm computed in fp32 (an fp32 copy of its input kept; LitGPT before October 2023 kept it in
  the activation dtype); LayerNorm keeps its input. A fused ``F.gelu`` keeps one FFN-wide tensor.
- LoRA adapters in the model's dtype (``bf16-true``), one dropout over the fused qkv input, and the
  zero-padded adapter output kept.
- Fabric casts the model's outputs to fp32 (``convert_output``): the logits the loss sees are fp32.
  ``finetune_lora`` chunks the LM head by 128 tokens; ``finetune_full`` takes the whole logits and
  the loss copies their shifted view.
- Fabric's bitsandbytes plugin quantises every linear, the LM head too, from fp16; each 4-bit
  matmul dequantises its weight to fp16 and casts it to bf16 (4 bytes per weight while it runs).

This module never imports torch.
"""

from __future__ import annotations

import functools
from pathlib import Path

import msgspec

from .architectures import Architecture, Shape, find_architecture

_DATA_PATH = Path(__file__).parent / "data" / "litgpt_models.json"
# Model types whose blocks run attention and MLP in parallel on the block's input (LitGPT's
# ``parallel_residual``): a second LayerNorm reads the same input as the first.
PARALLEL_FAMILIES = frozenset({"gpt_neox", "phi", "falcon", "gptj"})
# Bytes per logit the loss keeps, measured with torch's MemTracker over whole LitGPT models under
# FakeTensorMode (calibration/litgpt_peaks.py): finetune_lora's chunked head (fp32 logits and fp32
# log-softmax, 8 bytes, plus the backward's chunk transients: 8.7-10.2 measured over three models) and
# finetune_full's whole fp32 logits, their contiguous shifted copy and the fp32 log-softmax (12, 12.8 measured).
CHUNKED_LOGIT_BYTES = (8.0, 9.5, 10.5)
WHOLE_LOGIT_BYTES = (12.0, 12.8, 13.5)
# Bytes per weight element while a 4-bit matmul runs: the fp16 dequantised weight and its bf16 cast.
DEQUANTISED_BYTES = 4.0
# Bytes per logit of the loss alive while the LM head's weight is dequantised in the backward: the fp32
# logits the training loop holds (4) and a chunk's gradients; 4.5-6.0 in the MemTracker runs of four models.
LOSS_BESIDE_DEQUANTISED_BYTES = (4.5, 5.5, 6.0)


class LitgptModel(msgspec.Struct, frozen=True):
    hf_id: str | None
    padded_vocab_size: int


class _Catalog(msgspec.Struct, frozen=True):
    about: str
    models: dict[str, LitgptModel]


@functools.cache
def litgpt_models() -> dict[str, LitgptModel]:
    return msgspec.json.decode(_DATA_PATH.read_bytes(), type=_Catalog).models


@functools.cache
def _by_hf_id() -> dict[str, tuple[str, LitgptModel]]:
    return {model.hf_id.lower(): (name, model) for name, model in litgpt_models().items() if model.hf_id}


def litgpt_entry(arch: Architecture) -> tuple[str, LitgptModel] | None:
    """LitGPT's entry for a catalog architecture: the one converting one of its Hugging Face ids."""
    for alias in (arch.id, *arch.aliases):
        entry = _by_hf_id().get(alias.lower())
        if entry is not None:
            return entry
    return None


def architecture_for_litgpt_name(name: str) -> Architecture | None:
    """The catalog architecture of a LitGPT model name (``phi-2``, ``Llama-2-7b-hf``) or checkpoint
    folder (``checkpoints/microsoft/phi-2``)."""
    key = name.strip().rstrip("/")
    if key.startswith("checkpoints/"):
        key = key[len("checkpoints/"):]
    model = litgpt_models().get(key) or litgpt_models().get(key.rsplit("/", 1)[-1])
    if model is not None and model.hf_id:
        return find_architecture(model.hf_id)
    return find_architecture(key)


def litgpt_architecture(arch: Architecture) -> tuple[Architecture, list[str]]:
    """The architecture as LitGPT builds it: an LM head of its own, LitGPT's padded vocabulary."""
    notes = []
    changes: dict = {} if arch.fused_qkv else {"fused_qkv": True}
    if arch.tied_embeddings:
        changes["tied_embeddings"] = False
        notes.append("LitGPT keeps the LM head apart from the embedding (the checkpoint's tied weights are copied)")
    entry = litgpt_entry(arch)
    if entry is not None and entry[1].padded_vocab_size != arch.vocab:
        changes["vocab"] = entry[1].padded_vocab_size
        notes.append(f"LitGPT's {entry[0]} pads the vocabulary to {entry[1].padded_vocab_size:,}")
    return (msgspec.structs.replace(arch, **changes) if changes else arch), notes


def layer_coefficient(
    arch: Architecture, geometry: Shape, *, trains_base: bool, keeps_linear_inputs: bool,
    lora_targets: tuple[str, ...] | None, lora_dropout: float | None, lora_rank: int, fp32_norm: bool = True,
) -> float:
    """Bytes per token and hidden unit one LitGPT layer keeps for the backward (2-byte activations, SDPA).

    ``trains_base``: the layer's own weights train (finetune_full); ``keeps_linear_inputs``: its frozen
    linears keep their inputs anyway (bitsandbytes before 0.43.2); ``lora_targets``: the adapters (None:
    none); ``fp32_norm``: RMSNorm upcasts (LitGPT since October 2023). Checked against LitGPT's modules
    under FakeTensorMode (calibration/litgpt_activations.py) for six models, LoRA and full."""
    hidden = geometry.hidden
    width = geometry.heads * geometry.head_dim / hidden
    kv_width = geometry.kv_heads * geometry.head_dim / hidden
    ffn = geometry.intermediate * (geometry.experts_active or 1) / hidden
    rms = arch.norm == "rms"
    norm_input = 4.0 if rms and fp32_norm else 2.0
    normalised = 4.0 if rms and trains_base else 0.0  # a trained RMSNorm weight keeps the fp32 normalised tensor
    shared_norm = arch.norms_per_layer == 1
    parallel = arch.family in PARALLEL_FAMILIES
    if shared_norm:
        second_norm = 0.0
    elif parallel:  # reads the block's input, which a LayerNorm keeps already; an RMSNorm upcasts it again
        second_norm = (norm_input if rms else 0.0) + normalised
    else:
        second_norm = norm_input + normalised
    norms = norm_input + normalised + second_norm
    mha = geometry.kv_heads == geometry.heads
    values = 2.0 * (width + 2 * kv_width) if mha else 2.0 * width  # MHA: a view of the whole qkv output
    attention = 2.0 * width + 2.0 * width + values + 2.0 * width + 4.0 * geometry.heads / hidden  # q, k, v, out, lse
    mlp = (6.0 if arch.gated_mlp else 2.0) * ffn  # gated: the activation's input and output, the up projection
    linear_inputs = 2.0 + 2.0 * width + (0.0 if shared_norm else 2.0) + 2.0 * ffn  # qkv, proj, fc, MLP proj
    total = norms + attention + mlp + (linear_inputs if trains_base or keeps_linear_inputs else 0.0)
    if lora_targets:
        mask = 0.5 if lora_dropout is None else (1.0 if lora_dropout > 0 else 0.0)
        fused = {"q_proj": width, "k_proj": kv_width, "v_proj": kv_width, "qkv_proj": width + 2 * kv_width}
        enabled = [target for target in lora_targets if target in fused]
        if enabled:  # one dropout over the qkv input, the zero-padded adapter output
            total += mask + 2.0 + 2.0 * sum(fused[target] for target in enabled) + 2.0 * lora_rank * len(enabled) / hidden
        inputs = {"o_proj": width, "gate_proj": 1.0, "up_proj": 1.0, "down_proj": ffn}
        for target in lora_targets:
            if target in inputs:
                total += mask + 2.0 * inputs[target] + 2.0 * lora_rank / hidden
    return total
