"""Any model with a ``config.json``: a model folder, the file itself, or the local Hugging Face cache.

The memory model needs a transformer's widths, depth, heads, vocabulary and a few structural
flags; a Hugging Face ``config.json`` states them. Missing keys take the defaults of the config
class for that ``model_type`` (``save_pretrained`` leaves defaults out), so the architecture, and
with it the parameter count, is the one transformers would build: ``tests/test_model_configs.py``
checks each family against transformers' own count on the meta device
(``calibration/config_counts.py``). Nothing is fetched and nothing is imported: an id that is not
in the local cache is looked up in the catalog, then it is unknown.

When a config's fields equal a catalog architecture's (a fine-tuned or renamed variant:
``-Instruct``, ``-Coder``, a community fine-tune), the estimate also uses that architecture's
measured activation coefficients.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec

from .architectures import Architecture, find_architecture, load_architectures, parameter_count
from .hub_models import HubModel, base_of, find_hub_model, load_hub_models
from .local_files import Unreadable, read_json

CONFIG_FILE = "config.json"


class UnsupportedConfig(ValueError):
    """A config.json the estimator cannot describe (an unknown model_type, a missing size)."""


# ---------------------------------------------------------------------- config.json -> Architecture
def _get(config: dict, key: str, default: Any) -> Any:
    value = config.get(key, default)
    return default if value is None else value


def _positive(config: dict, key: str, default: int | None) -> int:
    value = _get(config, key, default)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value < 1 << 40:
        raise UnsupportedConfig(f"`{key}` is {value!r}, not a size")
    return value


def _decoder(config: dict, defaults: dict[str, Any], **structure: Any) -> dict[str, Any]:
    """The fields every Llama-like decoder config names the same way."""
    hidden = _positive(config, "hidden_size", defaults["hidden_size"])
    heads = _positive(config, "num_attention_heads", defaults["num_attention_heads"])
    fields = dict(
        kind="decoder",
        layers=_positive(config, "num_hidden_layers", defaults["num_hidden_layers"]),
        hidden=hidden,
        heads=heads,
        kv_heads=_positive(config, "num_key_value_heads", defaults.get("num_key_value_heads") or heads),
        head_dim=_positive(config, "head_dim", defaults.get("head_dim") or hidden // heads),
        intermediate=_positive(config, "intermediate_size", defaults["intermediate_size"]),
        vocab=_positive(config, "vocab_size", defaults["vocab_size"]),
        max_positions=_positive(config, "max_position_embeddings", defaults["max_position_embeddings"]),
        tied_embeddings=bool(_get(config, "tie_word_embeddings", defaults.get("tie_word_embeddings", False))),
    )
    fields.update(structure)
    return fields


def _window(config: dict, default: int | None = None) -> int | None:
    """The attention window a config sets. The family's default applies only where the key is absent: an
    explicit ``"sliding_window": null`` (Mistral v0.2 and later, Codestral) turns the window off, and
    every token stays in the KV cache."""
    value = config["sliding_window"] if "sliding_window" in config else default
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _llama(config: dict) -> dict[str, Any]:
    defaults = dict(hidden_size=4096, num_attention_heads=32, num_hidden_layers=32, intermediate_size=11008,
                    vocab_size=32000, max_position_embeddings=2048)
    bias = bool(_get(config, "attention_bias", False))
    return _decoder(config, defaults, qkv_bias=bias, o_bias=bias, mlp_bias=bool(_get(config, "mlp_bias", False)))


def _mistral(config: dict) -> dict[str, Any]:
    defaults = dict(hidden_size=4096, num_attention_heads=32, num_key_value_heads=8, num_hidden_layers=32,
                    intermediate_size=14336, vocab_size=32000, max_position_embeddings=4096 * 32)
    return _decoder(config, defaults, sliding_window=_window(config, 4096))


def _mixtral(config: dict) -> dict[str, Any]:
    defaults = dict(hidden_size=4096, num_attention_heads=32, num_key_value_heads=8, num_hidden_layers=32,
                    intermediate_size=14336, vocab_size=32000, max_position_embeddings=4096 * 32)
    return _decoder(
        config, defaults, sliding_window=_window(config),
        experts=_positive(config, "num_local_experts", 8), experts_active=_positive(config, "num_experts_per_tok", 2),
    )


def _qwen2(config: dict) -> dict[str, Any]:
    defaults = dict(hidden_size=4096, num_attention_heads=32, num_hidden_layers=32, intermediate_size=22016,
                    vocab_size=151936, max_position_embeddings=32768)
    window = _window(config, 4096) if _get(config, "use_sliding_window", False) else None
    return _decoder(config, defaults, qkv_bias=True, sliding_window=window)


def _qwen3(config: dict) -> dict[str, Any]:
    defaults = dict(hidden_size=4096, num_attention_heads=32, num_hidden_layers=32, intermediate_size=22016,
                    vocab_size=151936, max_position_embeddings=32768, head_dim=128)
    bias = bool(_get(config, "attention_bias", False))
    return _decoder(config, defaults, qk_norm=True, qkv_bias=bias, o_bias=bias)


def _qwen3_moe(config: dict) -> dict[str, Any]:
    defaults = dict(hidden_size=2048, num_attention_heads=32, num_key_value_heads=4, num_hidden_layers=24,
                    intermediate_size=6144, vocab_size=151936, max_position_embeddings=32768)
    if _get(config, "mlp_only_layers", []) or _get(config, "decoder_sparse_step", 1) != 1:
        raise UnsupportedConfig("Qwen3-MoE with dense layers between the expert layers is not modelled")
    fields = _decoder(config, defaults, qk_norm=True)
    fields.update(
        intermediate=_positive(config, "moe_intermediate_size", 768), experts=_positive(config, "num_experts", 128),
        experts_active=_positive(config, "num_experts_per_tok", 8),
    )
    return fields


def _gemma(config: dict) -> dict[str, Any]:
    defaults = dict(hidden_size=3072, num_attention_heads=16, num_key_value_heads=16, num_hidden_layers=28,
                    intermediate_size=24576, vocab_size=256000, max_position_embeddings=8192, head_dim=256,
                    tie_word_embeddings=True)
    return _decoder(config, defaults)


def _gemma2(config: dict) -> dict[str, Any]:
    defaults = dict(hidden_size=2304, num_attention_heads=8, num_key_value_heads=4, num_hidden_layers=26,
                    intermediate_size=9216, vocab_size=256000, max_position_embeddings=8192, head_dim=256,
                    tie_word_embeddings=True)
    return _decoder(config, defaults, norms_per_layer=4, sliding_window=_window(config, 4096))


def _gemma3_text(config: dict) -> dict[str, Any]:
    defaults = dict(hidden_size=2304, num_attention_heads=8, num_key_value_heads=4, num_hidden_layers=26,
                    intermediate_size=9216, vocab_size=262208, max_position_embeddings=131072, head_dim=256,
                    tie_word_embeddings=True)
    return _decoder(config, defaults, norms_per_layer=4, qk_norm=True, sliding_window=_window(config, 4096))


def _phi(config: dict) -> dict[str, Any]:
    defaults = dict(hidden_size=2048, num_attention_heads=32, num_hidden_layers=24, intermediate_size=8192,
                    vocab_size=51200, max_position_embeddings=2048)
    if _get(config, "qk_layernorm", False):
        raise UnsupportedConfig("Phi with query/key layer norms is not modelled")
    return _decoder(
        config, defaults, norm="layernorm", norms_per_layer=1, qkv_bias=True, o_bias=True, mlp_bias=True,
        gated_mlp=False, lm_head_bias=True,
    )


def _phi3(config: dict) -> dict[str, Any]:
    defaults = dict(hidden_size=3072, num_attention_heads=32, num_hidden_layers=32, intermediate_size=8192,
                    vocab_size=32064, max_position_embeddings=4096)
    return _decoder(config, defaults, fused_qkv=True, fused_gate_up=True, sliding_window=_window(config))


def _gpt2(config: dict) -> dict[str, Any]:
    hidden = _positive(config, "n_embd", 768)
    positions = _positive(config, "n_positions", 1024)
    heads = _positive(config, "n_head", 12)
    return dict(
        kind="decoder", layers=_positive(config, "n_layer", 12), hidden=hidden, heads=heads, kv_heads=heads, head_dim=hidden // heads, intermediate=_positive(config, "n_inner", 4 * hidden),
        vocab=_positive(config, "vocab_size", 50257), max_positions=positions, learned_positions=positions,
        tied_embeddings=bool(_get(config, "tie_word_embeddings", True)), norm="layernorm", qkv_bias=True, o_bias=True,
        mlp_bias=True, gated_mlp=False, fused_qkv=True,
    )


def _gptj(config: dict) -> dict[str, Any]:
    hidden = _positive(config, "n_embd", 4096)
    heads = _positive(config, "n_head", 16)
    return dict(
        kind="decoder", layers=_positive(config, "n_layer", 28), hidden=hidden, heads=heads, kv_heads=heads, head_dim=hidden // heads,
        intermediate=_positive(config, "n_inner", 4 * hidden), vocab=_positive(config, "vocab_size", 50400),
        max_positions=_positive(config, "n_positions", 2048), tied_embeddings=bool(_get(config, "tie_word_embeddings", False)),
        norm="layernorm", norms_per_layer=1, mlp_bias=True, gated_mlp=False, lm_head_bias=True,
    )


def _gpt_neox(config: dict) -> dict[str, Any]:
    defaults = dict(hidden_size=6144, num_attention_heads=64, num_hidden_layers=44, intermediate_size=24576,
                    vocab_size=50432, max_position_embeddings=2048)
    bias = bool(_get(config, "attention_bias", True))
    fields = _decoder(config, defaults, norm="layernorm", qkv_bias=bias, o_bias=bias, mlp_bias=True, gated_mlp=False, fused_qkv=True)
    fields["kv_heads"] = fields["heads"]
    return fields


def _falcon(config: dict) -> dict[str, Any]:
    hidden = _positive(config, "hidden_size", 4544)
    heads = _positive(config, "num_attention_heads", 71)
    new_architecture = bool(_get(config, "new_decoder_architecture", False))
    if new_architecture:
        kv_heads = _positive(config, "num_kv_heads", heads)
        norms = _positive(config, "num_ln_in_parallel_attn", 2)
    else:
        kv_heads = 1 if _get(config, "multi_query", True) else heads
        norms = 1 if _get(config, "parallel_attn", True) else 2
    if _get(config, "bias", False) or _get(config, "alibi", False):
        raise UnsupportedConfig("Falcon with biases or ALiBi is not modelled")
    return dict(
        kind="decoder", layers=_positive(config, "num_hidden_layers", 32), hidden=hidden, heads=heads, kv_heads=kv_heads,
        head_dim=hidden // heads, intermediate=_positive(config, "ffn_hidden_size", 4 * hidden),
        vocab=_positive(config, "vocab_size", 65024), max_positions=_positive(config, "max_position_embeddings", 2048),
        tied_embeddings=bool(_get(config, "tie_word_embeddings", True)), norm="layernorm", norms_per_layer=norms,
        gated_mlp=False, fused_qkv=True,
    )


def _starcoder2(config: dict) -> dict[str, Any]:
    """StarCoder2: grouped-query attention and an fc1/fc2 MLP, biases everywhere (use_bias), LayerNorms."""
    defaults = dict(hidden_size=3072, num_attention_heads=24, num_key_value_heads=2, num_hidden_layers=30,
                    intermediate_size=12288, vocab_size=49152, max_position_embeddings=4096, tie_word_embeddings=True)
    bias = bool(_get(config, "use_bias", True))
    return _decoder(config, defaults, norm="layernorm", qkv_bias=bias, o_bias=bias, mlp_bias=bias, gated_mlp=False,
                    sliding_window=_window(config))


def _granite(config: dict) -> dict[str, Any]:
    """Granite: Llama's layers (its multipliers scale activations, not parameters)."""
    return _llama(config)


def _olmo(config: dict) -> dict[str, Any]:
    """OLMo (the first): Llama's layers with LayerNorms that have neither weight nor bias (OlmoLayerNorm)."""
    defaults = dict(hidden_size=4096, num_attention_heads=32, num_hidden_layers=32, intermediate_size=11008,
                    vocab_size=50304, max_position_embeddings=2048)
    bias = bool(_get(config, "attention_bias", False))
    return _decoder(config, defaults, norm="layernorm", norm_affine=False, qkv_bias=bias, o_bias=bias)


def _stablelm(config: dict) -> dict[str, Any]:
    """StableLM: a gated MLP without biases, LayerNorms, query/key/value biases where use_qkv_bias; one norm
    per layer with the parallel residual."""
    defaults = dict(hidden_size=2560, num_attention_heads=32, num_hidden_layers=32, intermediate_size=6912,
                    vocab_size=50304, max_position_embeddings=4096)
    if _get(config, "qk_layernorm", False):
        raise UnsupportedConfig("StableLM with per-head query/key layer norms is not modelled")
    parallel = bool(_get(config, "use_parallel_residual", False))
    return _decoder(config, defaults, norm="layernorm", norms_per_layer=1 if parallel else 2,
                    qkv_bias=bool(_get(config, "use_qkv_bias", False)))


def _opt(config: dict) -> dict[str, Any]:
    """OPT: learned positions (two rows more than max_position_embeddings: OPT's offset), fc1/fc2, biases
    everywhere, LayerNorms. The variants that project embeddings to another width (opt-350m) are refused."""
    hidden = _positive(config, "hidden_size", 768)
    heads = _positive(config, "num_attention_heads", 12)
    positions = _positive(config, "max_position_embeddings", 2048)
    if _get(config, "word_embed_proj_dim", hidden) != hidden or not _get(config, "do_layer_norm_before", True):
        raise UnsupportedConfig("OPT with projected embeddings or post-layer norms (opt-350m) is not modelled")
    if not _get(config, "layer_norm_elementwise_affine", True):
        raise UnsupportedConfig("OPT without affine layer norms is not modelled")
    bias = bool(_get(config, "enable_bias", True))
    return dict(
        kind="decoder", layers=_positive(config, "num_hidden_layers", 12), hidden=hidden, heads=heads, kv_heads=heads,
        head_dim=hidden // heads, intermediate=_positive(config, "ffn_dim", 3072), vocab=_positive(config, "vocab_size", 50272),
        max_positions=positions, learned_positions=positions + 2, tied_embeddings=bool(_get(config, "tie_word_embeddings", True)),
        norm="layernorm", qkv_bias=bias, o_bias=bias, mlp_bias=bias, gated_mlp=False,
        final_norm=not _get(config, "_remove_final_layer_norm", False),
    )


def _bloom(config: dict) -> dict[str, Any]:
    """BLOOM: ALiBi (no position table), a LayerNorm on the embeddings, a fused query/key/value, a 4h MLP, biases
    everywhere. No maximum length: ALiBi extrapolates."""
    hidden = _positive(config, "hidden_size", _get(config, "n_embed", 64))
    heads = _positive(config, "n_head", 8)
    return dict(
        kind="decoder", layers=_positive(config, "n_layer", 2), hidden=hidden, heads=heads, kv_heads=heads,
        head_dim=hidden // heads, intermediate=4 * hidden, vocab=_positive(config, "vocab_size", 250880), max_positions=None,
        tied_embeddings=bool(_get(config, "tie_word_embeddings", True)), norm="layernorm", embedding_norm=True,
        qkv_bias=True, o_bias=True, mlp_bias=True, gated_mlp=False, fused_qkv=True,
    )


def _gpt_neo(config: dict) -> dict[str, Any]:
    """GPT-Neo: learned positions, query/key/value without biases, the output projection and the MLP with them."""
    hidden = _positive(config, "hidden_size", 2048)
    heads = _positive(config, "num_heads", 16)
    positions = _positive(config, "max_position_embeddings", 2048)
    return dict(
        kind="decoder", layers=_positive(config, "num_layers", 24), hidden=hidden, heads=heads, kv_heads=heads,
        head_dim=hidden // heads, intermediate=_positive(config, "intermediate_size", 4 * hidden),
        vocab=_positive(config, "vocab_size", 50257), max_positions=positions, learned_positions=positions,
        tied_embeddings=bool(_get(config, "tie_word_embeddings", True)), norm="layernorm", o_bias=True, mlp_bias=True,
        gated_mlp=False,
    )


def _encoder(layers: int, hidden: int, heads: int, intermediate: int, vocab: int, positions: int, **extra: Any) -> dict[str, Any]:
    """A BERT-like encoder: learned positions, biases everywhere, LayerNorm, tied embeddings."""
    return dict(
        kind="encoder", layers=layers, hidden=hidden, heads=heads, kv_heads=heads, head_dim=hidden // heads,
        intermediate=intermediate, vocab=vocab, max_positions=positions, learned_positions=positions, tied_embeddings=True,
        norm="layernorm", qkv_bias=True, o_bias=True, mlp_bias=True, gated_mlp=False, embedding_norm=True, **extra,
    )


def _bert_like(config: dict, positions: int, token_types: int) -> dict[str, Any]:
    return _encoder(
        _positive(config, "num_hidden_layers", 12), _positive(config, "hidden_size", 768),
        _positive(config, "num_attention_heads", 12), _positive(config, "intermediate_size", 3072),
        _positive(config, "vocab_size", 30522), _positive(config, "max_position_embeddings", positions),
        token_types=_positive(config, "type_vocab_size", token_types), pooler=True,
    )


def _distilbert(config: dict) -> dict[str, Any]:
    return _encoder(
        _positive(config, "n_layers", 6), _positive(config, "dim", 768), _positive(config, "n_heads", 12),
        _positive(config, "hidden_dim", 3072), _positive(config, "vocab_size", 30522),
        _positive(config, "max_position_embeddings", 512),
    )


def _t5(config: dict) -> dict[str, Any]:
    layers = _positive(config, "num_layers", 6)
    heads = _positive(config, "num_heads", 8)
    projection = _get(config, "feed_forward_proj", "relu")
    return dict(
        kind="encoder-decoder", encoder_layers=layers, decoder_layers=_positive(config, "num_decoder_layers", layers),
        hidden=_positive(config, "d_model", 512), heads=heads, kv_heads=heads, head_dim=_positive(config, "d_kv", 64),
        intermediate=_positive(config, "d_ff", 2048), vocab=_positive(config, "vocab_size", 32128),
        relative_attention_buckets=_positive(config, "relative_attention_num_buckets", 32),
        gated_mlp=isinstance(projection, str) and projection.startswith("gated-"),
        tied_embeddings=bool(_get(config, "tie_word_embeddings", True)), final_norm=True,
    )


# The keys a config.json states its dropout probabilities under, per model_type: (hidden/residual sites, attention
# probabilities), as transformers' configuration classes name them. A key left out takes the class default
# (layer_activations.config_dropout).
_DROPOUT_KEYS: dict[str, tuple[str | None, str | None]] = {
    "bert": ("hidden_dropout_prob", "attention_probs_dropout_prob"),
    "roberta": ("hidden_dropout_prob", "attention_probs_dropout_prob"),
    "xlm-roberta": ("hidden_dropout_prob", "attention_probs_dropout_prob"),
    "distilbert": ("dropout", "attention_dropout"), "gpt2": ("resid_pdrop", "attn_pdrop"), "gptj": ("resid_pdrop", "attn_pdrop"),
    "phi": ("resid_pdrop", "attention_dropout"), "phi3": ("resid_pdrop", "attention_dropout"),
    "gpt_neox": ("hidden_dropout", "attention_dropout"), "falcon": ("hidden_dropout", "attention_dropout"),
    "t5": ("dropout_rate", "dropout_rate"), "starcoder2": ("residual_dropout", "attention_dropout"),
    "stablelm": ("hidden_dropout", "attention_dropout"), "opt": ("dropout", "attention_dropout"),
    "bloom": ("hidden_dropout", "attention_dropout"), "gpt_neo": ("resid_dropout", "attention_dropout"),
}


def _dropout_fields(model_type: str, config: dict) -> dict[str, Any]:
    """The dropout probabilities the config states (a number in [0, 1)); the others are left to the family's default."""
    hidden_key, attention_key = _DROPOUT_KEYS.get(model_type, (None, "attention_dropout"))
    fields: dict[str, Any] = {}
    for field, key in (("hidden_dropout", hidden_key), ("attention_dropout", attention_key)):
        value = config.get(key) if key is not None else None
        if isinstance(value, (int, float)) and not isinstance(value, bool) and 0 <= value < 1:
            fields[field] = float(value)
    return fields


# config.json's name for the dtype its weights were saved in (transformers 5 writes `dtype`, earlier releases `torch_dtype`)
_CHECKPOINT_DTYPES = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}


def _checkpoint_dtype(config: dict) -> dict[str, Any]:
    """The dtype the config says the weights are stored in, which `from_pretrained` loads by default from transformers 5."""
    stated = config.get("dtype", config.get("torch_dtype"))
    return {"checkpoint_dtype": _CHECKPOINT_DTYPES[stated]} if isinstance(stated, str) and stated in _CHECKPOINT_DTYPES else {}


_FAMILIES: dict[str, Callable[[dict], dict[str, Any]]] = {
    "llama": _llama, "mistral": _mistral, "mixtral": _mixtral, "qwen2": _qwen2, "qwen3": _qwen3, "qwen3_moe": _qwen3_moe,
    "gemma": _gemma, "gemma2": _gemma2, "gemma3_text": _gemma3_text, "phi": _phi, "phi3": _phi3, "gpt2": _gpt2,
    "gptj": _gptj, "gpt_neox": _gpt_neox, "falcon": _falcon, "bert": lambda c: _bert_like(c, 512, 2),
    "roberta": lambda c: _bert_like(c, 512, 2), "xlm-roberta": lambda c: _bert_like(c, 512, 2), "distilbert": _distilbert,
    "t5": _t5, "starcoder2": _starcoder2, "granite": _granite, "olmo": _olmo, "stablelm": _stablelm, "opt": _opt,
    "bloom": _bloom, "gpt_neo": _gpt_neo,
}
SUPPORTED_TYPES = tuple(sorted(_FAMILIES))
# Structural fields that make two architectures the same for the memory model.
_SAME = (
    "family", "kind", "layers", "encoder_layers", "decoder_layers", "hidden", "heads", "kv_heads", "head_dim",
    "intermediate", "vocab", "tied_embeddings", "experts", "experts_active",
)


def architecture_from_config(config: Any, name: str, where: str) -> Architecture:
    """The architecture a Hugging Face config describes; ``where`` says where it was read."""
    if not isinstance(config, dict):
        raise UnsupportedConfig(f"{where} is not a JSON object")
    model_type = config.get("model_type")
    if model_type == "gemma3" and isinstance(config.get("text_config"), dict):
        raise UnsupportedConfig("Gemma 3 with its vision tower is not modelled; give the text model's config")
    build = _FAMILIES.get(model_type) if isinstance(model_type, str) else None
    if build is None:
        supported = ", ".join(SUPPORTED_TYPES)
        raise UnsupportedConfig(f"{where} has model_type {model_type!r}; the estimator reads configs of {supported}")
    assert isinstance(model_type, str), "a family is found for a string model_type only"
    fields = build(config) | _dropout_fields(model_type, config) | _checkpoint_dtype(config)
    try:
        architecture = Architecture(id=name, family=model_type, published_params=0, source=f"read from {where}", **fields)
        count = parameter_count(architecture)
    except (msgspec.ValidationError, TypeError, ValueError, ZeroDivisionError) as error:
        raise UnsupportedConfig(f"{where}: {error}") from error
    base = same_architecture(architecture)
    source = f"read from {where}" + (f" (the architecture of catalog entry {base.id})" if base is not None else "")
    return msgspec.structs.replace(
        architecture, published_params=count, source=source, base=base.id if base is not None else None,
        max_positions=architecture.max_positions or (base.max_positions if base is not None else None),
    )


def same_architecture(architecture: Architecture) -> Architecture | None:
    """The catalog entry with the same structure (a fine-tuned or renamed variant's base), if any."""
    key = tuple(getattr(architecture, name) for name in _SAME)
    for entry in load_architectures():
        if tuple(getattr(entry, name) for name in _SAME) == key and parameter_count(entry) == parameter_count(architecture):
            return entry
    return None


# ---------------------------------------------------------------------- where configs are found
def hub_cache_folders() -> list[Path]:
    """The local Hugging Face hub caches, as huggingface_hub finds them (environment first)."""
    folders = []
    for variable in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        if os.environ.get(variable):
            folders.append(Path(os.environ[variable]))
    if os.environ.get("HF_HOME"):
        folders.append(Path(os.environ["HF_HOME"]) / "hub")
    cache = Path(os.environ["XDG_CACHE_HOME"]) if os.environ.get("XDG_CACHE_HOME") else Path.home() / ".cache"
    folders.append(cache / "huggingface" / "hub")
    return list(dict.fromkeys(folders))


def _cached_config(model_id: str) -> Path | None:
    """``config.json`` of a cached snapshot of ``model_id`` (the one refs/main names, else the newest)."""
    if model_id.count("/") > 1 or not model_id.strip("/") or ".." in model_id:
        return None
    for cache in hub_cache_folders():
        repository = cache / ("models--" + model_id.strip("/").replace("/", "--"))
        snapshots = repository / "snapshots"
        if not snapshots.is_dir():
            continue
        reference = repository / "refs" / "main"
        try:
            revision = reference.read_text(encoding="utf-8").strip() if reference.is_file() else ""
        except OSError:
            revision = ""
        candidates = [snapshots / revision] if revision and "/" not in revision else []
        try:
            candidates += sorted(snapshots.iterdir(), key=lambda path: path.stat().st_mtime, reverse=True)
        except OSError:
            continue
        for snapshot in candidates:
            if (snapshot / CONFIG_FILE).exists():
                return snapshot / CONFIG_FILE
    return None


def _config_path(name: str, bases: list[Path]) -> Path | None:
    """The config a path-like name points at: a folder holding config.json, or a .json file."""
    for base in bases:
        candidate = base / name
        if candidate.is_dir() and (candidate / CONFIG_FILE).exists():
            return candidate / CONFIG_FILE
        if candidate.suffix == ".json" and candidate.exists():
            return candidate
    return None


def resolve_model_name(name: str, roots: list[Path] | None) -> tuple[Architecture | None, str | None]:
    """The architecture ``name`` means: a config.json path (under ``roots``; None: anywhere), a Hugging
    Face id in the local cache, or a catalog entry; else None and what the user can do about it."""
    name = name.strip()
    bases = [Path(".")] if roots is None else roots
    path = _config_path(name, bases) if name else None
    if path is not None:
        try:
            config = read_json(path, roots)
            return architecture_from_config(config, name, str(path)), None
        except (Unreadable, UnsupportedConfig) as error:
            return None, str(error)
    cached = _cached_config(name) if name else None
    if cached is not None:
        try:
            config = read_json(cached, [cached.parents[2]])  # snapshot files link into the repository's blobs
            return architecture_from_config(config, name, f"the local Hugging Face cache ({cached})"), None
        except (Unreadable, UnsupportedConfig) as error:
            return None, str(error)
    architecture = find_architecture(name) if name else None
    if architecture is None and name:
        from .litgpt import architecture_for_litgpt_name

        architecture = architecture_for_litgpt_name(name)  # a LitGPT model name: the checkpoint it converts
    if architecture is not None:
        return architecture, None
    architecture = _from_hub_table(name) if name else None
    if architecture is not None:
        return architecture, None
    similar = similar_model_names(name)
    hint = f"did you mean {', '.join(similar)}? " if similar else ""
    return None, (
        f"`{name}` is neither in the model catalog nor in the local Hugging Face cache; {hint}(`trainlint estimate "
        f"--list-models QUERY` lists the catalog), or point at its config.json (a model folder or the file) to estimate it"
    )


def hub_architecture(model: HubModel, name: str | None = None) -> Architecture:
    """The architecture of a row, under ``name`` (the id the user gave) or its own id."""
    return architecture_from_config(model.config, name or model.id, f"the vendored hub table ({model.source})")


def _from_hub_table(name: str) -> Architecture | None:
    """A hub id of the vendored table, or a fine-tune named after a model the table or the catalog knows
    (its architecture assumed to be its base's, and the report says so)."""
    row = find_hub_model(name)
    if row is not None:
        return hub_architecture(row, name)
    found = base_of(name)
    if found is None:
        return None
    spelled, base = found
    architecture = hub_architecture(base) if isinstance(base, HubModel) else base
    assumption = (
        f"assumed: `{name}` has the architecture of {spelled}, the model its name begins with (a fine-tune keeps "
        f"its base's config); point at its config.json if it does not"
    )
    return msgspec.structs.replace(architecture, id=name, source=assumption, base=architecture.base or architecture.id)


# ---------------------------------------------------------------------- the catalog, for people
def catalog_entries() -> list[tuple[str, tuple[str, ...], str, int]]:
    """(name, other names, family, parameters) of every model a name resolves to without a config file:
    the catalog's, then the vendored hub table's."""
    entries = [(arch.id, arch.aliases, arch.family, parameter_count(arch)) for arch in load_architectures()]
    for row in load_hub_models():
        architecture = hub_architecture(row)
        entries.append((row.id, (), architecture.family, parameter_count(architecture)))
    return entries


def similar_model_names(name: str, limit: int = 3) -> list[str]:
    """Catalog names close to ``name``: those its last part begins, then the closest by spelling."""
    key = name.strip().lower().rsplit("/", 1)[-1]
    if not key:
        return []
    shown: dict[str, str] = {}  # a name's last part, lowercased -> the name to suggest
    for entry, aliases, _, _ in catalog_entries():
        for candidate in (entry, *aliases):
            shown.setdefault(candidate.lower().rsplit("/", 1)[-1], entry)
    found = [shown[part] for part in sorted(shown) if part.startswith(key) and part != key]
    found += [shown[part] for part in difflib.get_close_matches(key, list(shown), n=10, cutoff=0.75)]
    return list(dict.fromkeys(found))[:limit]


def model_table(query: str = "") -> str | None:
    """What ``trainlint estimate --list-models [QUERY]`` prints: every catalog model whose names or family
    hold each word of ``query`` (case does not matter); None when none does."""
    from .report import params_text

    words = query.lower().split()
    rows = []
    for entry, aliases, family, params in catalog_entries():
        text = " ".join((entry, *aliases, family)).lower()
        if all(word in text for word in words):
            rows.append((entry, params_text(params) if params else "?", family, ", ".join(aliases)))
    if not rows:
        return None
    header = ("model", "parameters", "family", "also known as")
    widths = [max(len(row[column]) for row in [header, *rows]) for column in range(3)]
    return "\n".join(
        "  ".join(cell.ljust(widths[column]) if column < 3 else cell for column, cell in enumerate(row)).rstrip()
        for row in [header, *rows]
    )
