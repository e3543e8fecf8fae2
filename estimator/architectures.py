"""The model-architecture catalog: the config fields memory depends on, and the parameter counts
they imply.

The catalog lives in ``data/architectures.json``. For transformer kinds the parameter count is
derived from the config fields, module by module, the way the Hugging Face implementation builds
the model; ``calibration/param_counts.py`` checks each derivation against transformers on the meta
device. Kinds whose modules the fields cannot describe (CNN, diffusion) use the published count.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path
from typing import Protocol, cast

import msgspec

_CATALOG_PATH = Path(__file__).parent / "data" / "architectures.json"

TRANSFORMER_KINDS = frozenset({"decoder", "encoder", "encoder-decoder", "vision-transformer", "clip"})
# Shape describes one token stream through one stack; CLIP's two towers do not fit it.
_SHAPED_KINDS = frozenset({"decoder", "encoder", "encoder-decoder", "vision-transformer"})


class Architecture(msgspec.Struct, frozen=True, kw_only=True):
    id: str
    aliases: tuple[str, ...] = ()
    family: str  # the Hugging Face model_type (or "torchvision"/"diffusers" for the others)
    kind: str  # "decoder" | "encoder" | "encoder-decoder" | "vision-transformer" | "cnn" | "diffusion" | "clip"
    layers: int | None = None  # decoder/encoder layers; CLIP: vision tower
    encoder_layers: int | None = None
    decoder_layers: int | None = None
    hidden: int | None = None
    heads: int | None = None
    kv_heads: int | None = None
    head_dim: int | None = None
    intermediate: int | None = None  # MoE: per expert
    vocab: int | None = None
    max_positions: int | None = None
    tied_embeddings: bool = False
    experts: int | None = None
    experts_active: int | None = None
    sliding_window: int | None = None
    kv_lora_rank: int | None = None  # MLA (DeepSeek): the latent cached per token is kv_lora_rank + rope_head_dim
    rope_head_dim: int | None = None
    image_size: int | None = None  # vision: reference resolution
    activation_bytes_per_sample: int | None = None  # CNN/diffusion, 2-byte dtype, at image_size
    published_params: int
    source: str
    # A rounded figure as published (model card, paper, or the Hub's parameter display: "8.03B",
    # "124M"); the exact count must round to it, which catches a wrong config field.
    stated_params: str | None = None
    # Read from a config.json: the catalog entry with the same structure (its measured coefficients apply).
    base: str | None = None
    pipeline: str | None = None  # diffusion: the entry of data/diffusion_pipelines.json (every component)

    # -- structure the exact count needs --
    norm: str = "rms"  # "rms" (weight only) | "layernorm" (weight and bias)
    norm_affine: bool = True  # False: norms without weight or bias (OLMo's LayerNorm)
    norms_per_layer: int = 2  # 1: parallel-attention blocks with one shared norm; 4: Gemma 2/3 sandwich norms
    final_norm: bool = True  # a norm after the last layer (encoder-decoder: one per stack)
    qkv_bias: bool = False
    key_bias: bool = True  # Whisper's k_proj alone has no bias
    o_bias: bool = False
    mlp_bias: bool = False
    gated_mlp: bool = True  # gate/up/down (3 matrices) or fc1/fc2 (2)
    qk_norm: bool = False  # RMSNorm over head_dim on queries and keys (Qwen3, Gemma 3)
    attention_sinks: bool = False  # gpt-oss: one learned logit per head and layer
    learned_positions: int | None = None  # rows of a learned position table (decoder side)
    encoder_positions: int | None = None  # encoder-decoder: rows of the encoder's position table
    token_types: int | None = None  # BERT-style token-type embedding rows
    embedding_norm: bool = False  # a LayerNorm on the embeddings (BERT, BART: one per stack)
    pooler: bool = False  # BERT-style pooler (dense h x h with bias)
    lm_head_bias: bool = False
    relative_attention_buckets: int | None = None  # T5: per-head bias table in each stack's first layer
    mel_bins: int | None = None  # Whisper: the two-conv audio front end
    # MoE
    router_bias: bool = False
    shared_experts: int | None = None  # DeepSeek: one shared MLP of width intermediate * shared_experts
    dense_layers: int = 0  # leading layers with a dense MLP instead of experts (DeepSeek first_k_dense_replace)
    dense_intermediate: int | None = None  # their FFN width
    # MLA
    q_lora_rank: int | None = None  # None: a plain q_proj
    nope_head_dim: int | None = None
    v_head_dim: int | None = None
    # vision
    patch_size: int | None = None
    channels: int = 3
    num_labels: int | None = None  # classifier head rows (ViT image classification)
    # CLIP text tower (the vision tower uses layers/hidden/heads/intermediate)
    text_layers: int | None = None
    text_hidden: int | None = None
    text_intermediate: int | None = None
    text_positions: int | None = None
    projection_dim: int | None = None
    # How the implementation packs projections; changes what a LoRA adapter on them costs.
    fused_qkv: bool = False
    fused_gate_up: bool = False
    # Dropout probabilities a config.json states (its hidden/residual sites, its attention probabilities); None: the
    # config class's default for the family (layer_activations.config_dropout)
    hidden_dropout: float | None = None
    attention_dropout: float | None = None
    # The dtype its published weights are stored in (config.json's torch_dtype): "bf16", "fp16" or "fp32".
    # `from_pretrained` without a dtype loads it from transformers 5 on (dtype="auto"). None: not known.
    checkpoint_dtype: str | None = None


class Shape(msgspec.Struct, frozen=True, kw_only=True):
    """What the memory model needs of a transformer."""

    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    vocab: int  # 0 for vision transformers
    experts: int | None
    experts_active: int | None
    total_params: int
    active_params: int  # per token: MoE counts only the routed experts; embeddings and lm_head included
    embedding_params: int
    lm_head_params: int  # 0 when tied
    # Cached elements per token (multiply by dtype bytes): 2*L*kv_heads*head_dim; MLA:
    # L*(kv_lora_rank+rope_head_dim). Encoder-decoder: the decoder's self-attention only (the
    # cross-attention cache grows with the encoder length, not the generated tokens). Encoders
    # and vision transformers: 0. Sliding windows are ignored here.
    kv_cache_bytes_per_token_per_byte: int
    # Per-layer (d_in, d_out) of each linear a LoRA can target, under Llama's names. Fused
    # projections keep one entry ("qkv_proj", "gate_up_proj"); MLA keeps DeepSeek's names
    # ("q_a_proj", "q_b_proj", "kv_a_proj_with_mqa", "kv_b_proj"). MoE: MLP entries per expert.
    lora_dims: dict[str, tuple[int, int]]


@functools.cache
def load_architectures() -> tuple[Architecture, ...]:
    return msgspec.json.decode(_CATALOG_PATH.read_bytes(), type=tuple[Architecture, ...])


# Checkpoint suffixes that change weights but not the architecture.
_VARIANT_SUFFIX = re.compile(r"(?:-(?:instruct|chat|base|hf|it|pt))+$")


@functools.cache
def _index() -> dict[str, Architecture]:
    index: dict[str, Architecture] = {}
    for arch in load_architectures():
        for name in (arch.id, *arch.aliases):
            index[name.lower()] = arch
    return index


def find_architecture(name: str) -> Architecture | None:
    """By id or alias, case-insensitively; an HF id also matches by its last path part, with or
    without an -instruct/-chat/-base/-hf/-it suffix, and timm's `hf-hub:` prefix or a bare pretrained tag
    (`resnet50.a1_in1k`) its hub id. Unknown names give None, never a look-alike."""
    index = _index()
    key = name.strip().lower().removeprefix("hf-hub:").removeprefix("hf_hub:")
    last_part = key.rsplit("/", 1)[-1]
    # timm.create_model("resnet50.a1_in1k") names a pretrained tag the hub keeps as timm/resnet50.a1_in1k
    timm_tag = f"timm/{key}" if "/" not in key and "." in key else key
    for candidate in (key, timm_tag, last_part, _VARIANT_SUFFIX.sub("", last_part)):
        if candidate in index:
            return index[candidate]
    return None


# --- parameter counts -------------------------------------------------------------------------


class _Derivable(Protocol):
    """An Architecture as the derivations below read it: the catalog gives an entry of a derivable
    kind every field its kind's count multiplies by (tests/test_architectures.py derives every
    entry, and calibration/param_counts.py checks each against transformers), so those fields are
    ints here; the fields the code tests for None, or falls back from with ``or``, stay optional."""

    kind: str
    layers: int
    encoder_layers: int
    decoder_layers: int
    hidden: int
    heads: int
    kv_heads: int | None
    head_dim: int
    intermediate: int
    vocab: int
    tied_embeddings: bool
    experts: int | None
    experts_active: int
    kv_lora_rank: int | None
    rope_head_dim: int
    image_size: int
    published_params: int
    norm: str
    norm_affine: bool
    norms_per_layer: int
    final_norm: bool
    qkv_bias: bool
    key_bias: bool
    o_bias: bool
    mlp_bias: bool
    gated_mlp: bool
    qk_norm: bool
    attention_sinks: bool
    learned_positions: int | None
    encoder_positions: int | None
    token_types: int | None
    embedding_norm: bool
    pooler: bool
    lm_head_bias: bool
    relative_attention_buckets: int | None
    mel_bins: int | None
    router_bias: bool
    shared_experts: int | None
    dense_layers: int
    dense_intermediate: int | None
    q_lora_rank: int | None
    nope_head_dim: int
    v_head_dim: int
    patch_size: int
    channels: int
    num_labels: int
    text_layers: int
    text_hidden: int
    text_intermediate: int
    text_positions: int
    projection_dim: int
    fused_qkv: bool
    fused_gate_up: bool


def _derivable(arch: Architecture) -> _Derivable:
    """The entry as its derivation reads it (see _Derivable): a type, no check."""
    return cast(_Derivable, arch)


def _norm(arch: _Derivable, width: int) -> int:
    if not arch.norm_affine:
        return 0
    return 2 * width if arch.norm == "layernorm" else width


def _mlp(arch: _Derivable, width: int, inner: int) -> int:
    if arch.gated_mlp:
        return 3 * width * inner + ((2 * inner + width) if arch.mlp_bias else 0)
    return 2 * width * inner + ((inner + width) if arch.mlp_bias else 0)


def _q_width(arch: _Derivable) -> int:
    if arch.kv_lora_rank is not None:
        return arch.heads * (arch.nope_head_dim + arch.rope_head_dim)
    return arch.heads * arch.head_dim


def _attention(arch: _Derivable) -> int:
    h = arch.hidden
    if arch.kv_lora_rank is not None:
        return _mla_attention(arch)
    q_out = arch.heads * arch.head_dim
    kv_out = (arch.kv_heads or arch.heads) * arch.head_dim
    params = h * q_out + 2 * h * kv_out + q_out * h
    if arch.qkv_bias:
        params += q_out + kv_out + (kv_out if arch.key_bias else 0)
    if arch.o_bias:
        params += h
    if arch.qk_norm:
        params += 2 * arch.head_dim
    if arch.attention_sinks:
        params += arch.heads
    return params


def _mla_attention(arch: _Derivable) -> int:
    assert arch.kv_lora_rank is not None, "_attention calls this for multi-head latent attention only"
    h, heads = arch.hidden, arch.heads
    if arch.q_lora_rank is None:
        query = h * _q_width(arch)
    else:  # down-projection, its RMSNorm, up-projection
        query = h * arch.q_lora_rank + arch.q_lora_rank + arch.q_lora_rank * _q_width(arch)
    key_value = (
        h * (arch.kv_lora_rank + arch.rope_head_dim)  # kv_a_proj_with_mqa
        + arch.kv_lora_rank  # kv_a_layernorm
        + arch.kv_lora_rank * heads * (arch.nope_head_dim + arch.v_head_dim)  # kv_b_proj
    )
    return query + key_value + heads * arch.v_head_dim * h


def _expert(arch: _Derivable) -> int:
    return _mlp(arch, arch.hidden, arch.intermediate)


def _moe_layer_mlp(arch: _Derivable, routed: int) -> int:
    """Router, `routed` experts, and the shared expert, of one MoE layer."""
    assert arch.experts, "_decoder_counts calls this for a mixture of experts only"
    router = arch.hidden * arch.experts + (arch.experts if arch.router_bias else 0)
    shared = _mlp(arch, arch.hidden, arch.intermediate * arch.shared_experts) if arch.shared_experts else 0
    return router + routed * _expert(arch) + shared


def _embeddings(arch: _Derivable) -> int:
    h = arch.hidden
    params = arch.vocab * h
    params += (arch.learned_positions or 0) * h + (arch.encoder_positions or 0) * h
    params += (arch.token_types or 0) * h
    return params


def _lm_head(arch: _Derivable) -> int:
    if arch.tied_embeddings or arch.kind in ("encoder", "vision-transformer", "clip"):
        return 0
    return arch.vocab * arch.hidden + (arch.vocab if arch.lm_head_bias else 0)


def _decoder_counts(arch: _Derivable) -> tuple[int, int]:
    """(total, active per token) of a decoder-only model."""
    h, layers = arch.hidden, arch.layers
    per_layer = _attention(arch) + arch.norms_per_layer * _norm(arch, h)
    shared = _embeddings(arch) + _lm_head(arch) + layers * per_layer
    shared += _norm(arch, h) if arch.final_norm else 0
    shared += _norm(arch, h) if arch.embedding_norm else 0  # BLOOM's word_embeddings_layernorm
    if not arch.experts:
        total = shared + layers * _mlp(arch, h, arch.intermediate)
        return total, total
    dense = arch.dense_layers * _mlp(arch, h, arch.dense_intermediate or arch.intermediate)
    moe_layers = layers - arch.dense_layers
    total = shared + dense + moe_layers * _moe_layer_mlp(arch, arch.experts)
    active = shared + dense + moe_layers * _moe_layer_mlp(arch, arch.experts_active)
    return total, active


def _encoder_count(arch: _Derivable) -> int:
    """BERT-style encoder (AutoModel: with the pooler where the model has one)."""
    h = arch.hidden
    per_layer = _attention(arch) + _mlp(arch, h, arch.intermediate) + arch.norms_per_layer * _norm(arch, h)
    params = _embeddings(arch) + arch.layers * per_layer
    params += _norm(arch, h) if arch.embedding_norm else 0
    params += (h * h + h) if arch.pooler else 0
    return params


def _encoder_decoder_count(arch: _Derivable) -> int:
    """T5, BART, Whisper (the ...ForConditionalGeneration model)."""
    h = arch.hidden
    norm = _norm(arch, h)
    attention = _attention(arch)
    mlp = _mlp(arch, h, arch.intermediate)
    encoder_layer = attention + mlp + 2 * norm
    decoder_layer = 2 * attention + mlp + 3 * norm  # self- and cross-attention
    params = _embeddings(arch) + _lm_head(arch)
    params += arch.encoder_layers * encoder_layer + arch.decoder_layers * decoder_layer
    if arch.relative_attention_buckets:  # in each stack's first self-attention
        params += 2 * arch.relative_attention_buckets * arch.heads
    if arch.embedding_norm:
        params += 2 * norm
    if arch.final_norm:
        params += 2 * norm
    if arch.mel_bins:  # conv1 (mel -> h, kernel 3) and conv2 (h -> h, kernel 3), with biases
        params += arch.mel_bins * h * 3 + h + h * h * 3 + h
    return params


def _vit_layer(width: int, inner: int) -> int:
    """A pre-norm transformer layer with biases everywhere (ViT, CLIP)."""
    return 4 * (width * width + width) + 2 * width * inner + inner + width + 2 * 2 * width


def _patches(arch: _Derivable) -> int:
    return (arch.image_size // arch.patch_size) ** 2


def _vision_transformer_count(arch: _Derivable) -> int:
    """ViTForImageClassification: patch conv, class token, positions, layers, norm, classifier."""
    h = arch.hidden
    params = arch.channels * arch.patch_size**2 * h + h  # patch conv with bias
    params += h + (_patches(arch) + 1) * h  # class token, positions
    params += arch.layers * _vit_layer(h, arch.intermediate) + 2 * h
    params += h * arch.num_labels + arch.num_labels
    return params


def _clip_count(arch: _Derivable) -> int:
    """CLIPModel: text tower, vision tower, both projections and the logit scale."""
    text_h, vision_h = arch.text_hidden, arch.hidden
    text = arch.vocab * text_h + arch.text_positions * text_h
    text += arch.text_layers * _vit_layer(text_h, arch.text_intermediate) + 2 * text_h
    vision = vision_h + arch.channels * arch.patch_size**2 * vision_h  # class embedding, patch conv without bias
    vision += (_patches(arch) + 1) * vision_h + 2 * 2 * vision_h  # positions, pre- and post-norm
    vision += arch.layers * _vit_layer(vision_h, arch.intermediate)
    projections = (text_h + vision_h) * arch.projection_dim
    return text + vision + projections + 1


def is_derivable(arch: Architecture) -> bool:
    return arch.kind in TRANSFORMER_KINDS


def parameter_count(arch: Architecture) -> int:
    if arch.kind == "decoder":
        return _decoder_counts(_derivable(arch))[0]
    if arch.kind == "encoder":
        return _encoder_count(_derivable(arch))
    if arch.kind == "encoder-decoder":
        return _encoder_decoder_count(_derivable(arch))
    if arch.kind == "vision-transformer":
        return _vision_transformer_count(_derivable(arch))
    if arch.kind == "clip":
        return _clip_count(_derivable(arch))
    return arch.published_params


# --- shape ------------------------------------------------------------------------------------


def _lora_dims(arch: _Derivable) -> dict[str, tuple[int, int]]:
    h, inner = arch.hidden, arch.intermediate
    dims: dict[str, tuple[int, int]] = {}
    if arch.kv_lora_rank is not None:
        q_width = _q_width(arch)
        if arch.q_lora_rank is None:
            dims["q_proj"] = (h, q_width)
        else:
            dims["q_a_proj"] = (h, arch.q_lora_rank)
            dims["q_b_proj"] = (arch.q_lora_rank, q_width)
        dims["kv_a_proj_with_mqa"] = (h, arch.kv_lora_rank + arch.rope_head_dim)
        dims["kv_b_proj"] = (arch.kv_lora_rank, arch.heads * (arch.nope_head_dim + arch.v_head_dim))
        dims["o_proj"] = (arch.heads * arch.v_head_dim, h)
    else:
        q_out = arch.heads * arch.head_dim
        kv_out = (arch.kv_heads or arch.heads) * arch.head_dim
        if arch.fused_qkv:  # an adapter may also cover one part of the fused projection (litgpt's query/value)
            dims["qkv_proj"] = (h, q_out + 2 * kv_out)
        dims |= {"q_proj": (h, q_out), "k_proj": (h, kv_out), "v_proj": (h, kv_out)}
        dims["o_proj"] = (q_out, h)
    if arch.gated_mlp and arch.fused_gate_up:
        dims["gate_up_proj"] = (h, 2 * inner)
    elif arch.gated_mlp:
        dims["gate_proj"] = (h, inner)
        dims["up_proj"] = (h, inner)
    else:
        dims["up_proj"] = (h, inner)
    dims["down_proj"] = (inner, h)
    return dims


# LoRA target names as the models' own code calls its linears (peft matches a module by its name's last
# part), and the linears they are here (Llama's names; a fused projection's parts name its slices, as
# LitGPT's lora_query / lora_key / lora_value do).
_TARGET_NAMES: dict[str, tuple[str, ...]] = {
    "query": ("q_proj",), "key": ("k_proj",), "value": ("v_proj",), "q": ("q_proj",), "k": ("k_proj",), "v": ("v_proj",),
    "q_lin": ("q_proj",), "k_lin": ("k_proj",), "v_lin": ("v_proj",), "wq": ("q_proj",), "wk": ("k_proj",), "wv": ("v_proj",),
    "query_key_value": ("qkv_proj",), "c_attn": ("qkv_proj",), "Wqkv": ("qkv_proj",), "qkv": ("qkv_proj",), "W_pack": ("qkv_proj",),
    "dense": ("o_proj",), "out_proj": ("o_proj",), "o": ("o_proj",), "out_lin": ("o_proj",), "proj": ("o_proj",),
    "dense_h_to_4h": ("up_proj",), "fc1": ("up_proj",), "c_fc": ("up_proj",), "fc_in": ("up_proj",), "lin1": ("up_proj",),
    "wi": ("up_proj",), "dense_4h_to_h": ("down_proj",), "fc2": ("down_proj",), "fc_out": ("down_proj",),
    "lin2": ("down_proj",), "wo": ("down_proj",), "c_proj": ("o_proj", "down_proj"),
}
# Where a family's code gives a name to more than one linear: BERT's attention output, intermediate and
# output are each a `dense`.
_FAMILY_TARGET_NAMES: dict[str, dict[str, tuple[str, ...]]] = {
    family: {"dense": ("o_proj", "up_proj", "down_proj")} for family in ("bert", "roberta", "xlm-roberta")
}
ALL_LINEAR = ("all-linear", "all_linear")
# The output projection to the vocabulary, as the families' code names it.
LM_HEAD_NAMES = ("lm_head", "embed_out")
# What a LoraConfig that names no target_modules adapts: peft's default for the model type
# (TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING in peft's utils/constants.py, read in peft 0.21.2), in the names
# the models' code gives its linears. A model type it lacks (Phi-3, Qwen3-MoE, DeepSeek, ...) makes peft raise
# ("Please specify `target_modules` in `peft_config`").
_PEFT_DEFAULT_TARGETS: dict[str, tuple[str, ...]] = {
    **{family: ("q_proj", "v_proj") for family in (
        "llama", "mistral", "mixtral", "qwen2", "qwen3", "gemma", "gemma2", "gemma3_text", "gptj", "gpt_neo", "opt", "bart",
        "stablelm",
    )},
    "phi": ("q_proj", "v_proj", "fc1", "fc2"),
    "gpt2": ("c_attn",),
    **{family: ("query_key_value",) for family in ("gpt_neox", "falcon", "bloom")},
    **{family: ("query", "value") for family in ("bert", "roberta", "xlm-roberta")},
    "t5": ("q", "v"),
}
LORA_FALLBACK_TARGETS = ("q_proj", "v_proj")


def default_lora_targets(arch: Architecture) -> tuple[tuple[str, ...], str]:
    """The LoRA targets of a run that names none, as its code names them, and where they come from: peft's default
    for the model's type, else (peft has none and would ask for them) the attention's query and value."""
    targets = _PEFT_DEFAULT_TARGETS.get(arch.family)
    if targets is not None:
        return targets, f"assumed: peft's default for {arch.family} models (LoraConfig without target_modules)"
    return LORA_FALLBACK_TARGETS, (f"assumed: peft has no default for {arch.family} models (a LoraConfig without target_modules "
                                   "stops with an error); give --lora-targets")


def lora_target_linears(arch: Architecture, targets: tuple[str, ...]) -> tuple[tuple[str, ...], list[str]]:
    """The linears of ``arch`` that LoRA targets named as its code names them cover (``query,value`` on
    Falcon's fused ``query_key_value``: its query and value slices; ``all-linear``: every linear of a
    layer), with a note of each renaming. A name that names no linear is kept: the estimate says so."""
    geometry = shape(arch)
    if geometry is None:
        return targets, []
    dims = geometry.lora_dims
    fused = "qkv_proj" in dims
    linears: list[str] = []
    renamed: list[str] = []
    for target in targets:
        if target in ALL_LINEAR:
            every = [name for name in dims if not (fused and name in ("q_proj", "k_proj", "v_proj"))]
            linears += every
            renamed.append(f"{target} -> {', '.join(every)}")
            continue
        names = _FAMILY_TARGET_NAMES.get(arch.family, {}).get(target) or _TARGET_NAMES.get(target)
        known = tuple(name for name in names or () if name in dims)
        if target in dims or not known:
            linears.append(target)
            continue
        linears += known
        renamed.append(f"{target} -> {', '.join(known)}")
    return tuple(dict.fromkeys(linears)), (
        [f"LoRA targets as {arch.id}'s code names its linears: {'; '.join(renamed)}"] if renamed else []
    )


def _kv_cache_elements_per_token(arch: _Derivable) -> int:
    if arch.kind == "decoder" and arch.kv_lora_rank is not None:
        return arch.layers * (arch.kv_lora_rank + arch.rope_head_dim)
    if arch.kind == "decoder":
        return 2 * arch.layers * (arch.kv_heads or arch.heads) * arch.head_dim
    if arch.kind == "encoder-decoder":
        return 2 * arch.decoder_layers * (arch.kv_heads or arch.heads) * arch.head_dim
    return 0


def shape(arch: Architecture) -> Shape | None:
    if arch.kind not in _SHAPED_KINDS:
        return None
    fields = _derivable(arch)
    total = parameter_count(arch)
    active = _decoder_counts(fields)[1] if fields.kind == "decoder" else total
    if fields.kind == "vision-transformer":
        embedding = fields.channels * fields.patch_size**2 * fields.hidden + fields.hidden + (_patches(fields) + 2) * fields.hidden
    else:
        embedding = _embeddings(fields)
    layers = fields.layers if fields.kind != "encoder-decoder" else fields.encoder_layers + fields.decoder_layers
    head_dim = fields.head_dim if fields.kv_lora_rank is None else fields.nope_head_dim + fields.rope_head_dim
    return Shape(
        layers=layers,
        hidden=fields.hidden,
        heads=fields.heads,
        kv_heads=fields.kv_heads or fields.heads,
        head_dim=head_dim,
        intermediate=fields.intermediate,
        vocab=fields.vocab or 0,
        experts=fields.experts,
        experts_active=fields.experts_active,
        total_params=total,
        active_params=active,
        embedding_params=embedding,
        lm_head_params=_lm_head(fields),
        kv_cache_bytes_per_token_per_byte=_kv_cache_elements_per_token(fields),
        lora_dims=_lora_dims(fields),
    )
