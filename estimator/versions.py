"""Memory behaviours that changed in a library's release, and the plan settings a stated version decides
(``--library-version``, or what a script pins).
"""

from __future__ import annotations

from .plan import CannotEstimate

# transformers' model families whose attention layers each built a rotary embedding with cos and sin caches
# for max_position_embeddings positions (register_buffer("cos_cached", ...)), and the first release without
# them (read from the releases' modeling files: 4.38.2 to 4.46.0).
ROTARY_CACHE_UNTIL = {"qwen2": "4.45.0", "qwen2_moe": "4.45.0", "phi": "4.45.0", "starcoder2": "4.45.0", "mistral": "4.42.0"}

# transformers' model families whose SDPA attention came after the 4.36 dispatch, and the first release with it (each
# family's modeling file sets `_supports_sdpa = True` from that release on: read from the releases' modeling files,
# 4.36.0 to 4.45.0); before it, transformers runs them with eager attention whatever torch offers.
SDPA_SINCE = {"bert": "4.41.0", "vit": "4.41.0", "gpt2": "4.42.0", "gpt_neox": "4.42.0", "roberta": "4.45.0", "xlm-roberta": "4.45.0"}

# transformers' generate computes the prompt's logits for its last position only where the model's forward takes
# `num_logits_to_keep` (PR 31292, released in 4.45.0 for Llama, Mistral, Mixtral, Gemma 1/2, Phi, Phi-3, Qwen2 and
# others); the families that took it later, and their first release with it (read from the releases' modeling files,
# 4.42.0 to 5.0.0). Before it, every prompt position's logits.
PROMPT_LOGITS_LAST_SINCE = {"falcon": "4.47.0", "gpt_neox": "4.49.0", "gpt2": "4.53.0", "gptj": "5.0.0"}

# transformers' generate passes one Cache object between decoding steps from 4.42.0 for the families whose models
# declared `_supports_cache_class` then (Llama, Mistral, Mixtral, Gemma, Phi, Phi-3, Qwen2 and others: read from 4.42.4's
# modeling files and generation/utils.py); before it, and for other families until their first release with it, the
# previous step's cache tuple is held while the next is built (Plan.cache_copied). The families that came later, and
# their first release with it (read from the releases' modeling files, 4.44.2 to 4.52.4).
CACHE_OBJECT_SINCE = {"gptj": "4.45.0", "gpt_neox": "4.45.0", "falcon": "4.45.0", "gpt2": "4.52.0"}

# Behaviours that changed in a library's release, as plan settings: (library, the first release with today's
# behaviour, the plan field, its value before that release, its value from it on). Where neither the script nor
# the command line says, the estimate takes today's behaviour and the interval's other end the older one.
VERSIONED_BEHAVIOURS = (
    ("bitsandbytes", "0.43.2", "quant_keeps_inputs", True, False),
    ("transformers", "4.45.0", "prompt_logits_whole", True, False),
    ("transformers", "4.46.0", "logits_upcast", True, False),
    ("transformers", "4.42.0", "cache_copied", True, False),
    ("transformers", "5.0.0", "lora_base_16bit", False, True),
    ("transformers", "5.0.0", "loads_checkpoint_dtype", False, True),
    ("transformers", "4.36.0", "sdpa_dispatch", False, True),
    ("transformers", "4.32.0", "trainer_adamw_torch", False, True),
    ("torch", "2.8.0", "trainer_fused_adamw", False, True),
    ("torch", "1.13.0", "lazy_module_loading", False, True),
    ("torch", "2.0.0", "zero_grad_frees", False, True),
    ("accelerate", "0.28.0", "accelerate_zero_grad_frees", False, True),
    ("trl", "0.22.0", "trl_checkpointing", False, True),
    ("trl", "1.7.0", "trl_chunked_loss", False, True),
    ("diffusers", "0.31.0", "vae_upsampling_fp32", True, False),
)
LIBRARY_VERSION_FLAG = "--library-version"


def settled_by(library: str) -> str:
    return f"{LIBRARY_VERSION_FLAG} {library}=VERSION settles it"


def _release(text: str) -> tuple[int, ...]:
    """The numeric release of a version string: "0.41.1" -> (0, 41, 1); "2.5.0+cu121", "4.46.0.dev0" alike."""
    parts = []
    for part in text.strip().split("+")[0].split("."):
        digits = "".join(char for char in part if char.isdigit()) if part[:1].isdigit() else ""
        if not digits:
            break
        parts.append(int(digits))
        if not part.isdigit():
            break
    if not parts:
        raise CannotEstimate(f"not a version number: {text!r} (e.g. 0.43.2)")
    return tuple(parts)


def settings_for_versions(versions: dict[str, str], family: str | None = None) -> dict[str, bool]:
    """The plan settings that the given library versions decide (see VERSIONED_BEHAVIOURS; with the model's
    family, transformers' per-layer rotary caches and the family's first releases with SDPA, with the prompt's last
    logits only and with one cache object in generate, too); a library the
    estimator does not follow is refused,
    so that a misspelt name is not silently ignored."""
    known = {library for library, *_ in VERSIONED_BEHAVIOURS}
    unknown = sorted(set(versions) - known)
    if unknown:
        raise CannotEstimate(f"no memory behaviour of {', '.join(unknown)} depends on its version here: "
                             f"one of {', '.join(sorted(known))}")
    settings = {}
    for library, changed_in, name, before, after in VERSIONED_BEHAVIOURS:
        if library in versions:
            settings[name] = before if _release(versions[library]) < _release(changed_in) else after
    if "transformers" in versions and family is not None:
        until = ROTARY_CACHE_UNTIL.get(family)
        settings["rotary_cache"] = until is not None and _release(versions["transformers"]) < _release(until)
        if family in SDPA_SINCE:
            settings["sdpa_dispatch"] = _release(versions["transformers"]) >= _release(SDPA_SINCE[family])
        if family in PROMPT_LOGITS_LAST_SINCE:
            settings["prompt_logits_whole"] = _release(versions["transformers"]) < _release(PROMPT_LOGITS_LAST_SINCE[family])
        if family in CACHE_OBJECT_SINCE:
            settings["cache_copied"] = _release(versions["transformers"]) < _release(CACHE_OBJECT_SINCE[family])
    return settings
