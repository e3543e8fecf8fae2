"""peft's `LoraConfig(...)` in a script, as memory sees it: the rank, the target modules, the dropout, and the
modules trained whole beside the adapters (`modules_to_save`)."""

from __future__ import annotations

from typing import Any

from .architectures import ALL_LINEAR

# Module names of the input embeddings and the LM head across transformers' model types (and Qwen 1.0's own code),
# as `modules_to_save` names them
_EMBEDDINGS = ("embed_tokens", "wte", "word_embeddings", "embed_in", "tok_embeddings", "shared")
_HEADS = ("lm_head", "embed_out", "output")


def read_lora_config(reader: Any, node: Any, chunk: Any) -> None:
    """Set what a LoraConfig call says on ``reader`` (reading._Reader), each value from the call's line."""
    reader._set("lora_rank", reader.value(reader.keyword(node, "r"), chunk) if reader.keyword(node, "r") is not None else 8, node, chunk)
    targets = reader.value(reader.keyword(node, "target_modules"), chunk)
    if isinstance(targets, (tuple, list)) and all(isinstance(t, str) for t in targets):
        reader._set("lora_targets", tuple(targets), node, chunk)
    elif targets in ALL_LINEAR:  # peft's shorthand; any other string is a regular expression over names
        reader._set("lora_targets", (targets,), node, chunk)
    dropout = reader.value(reader.keyword(node, "lora_dropout"), chunk) if reader.keyword(node, "lora_dropout") is not None else 0.0
    if isinstance(dropout, (int, float)) and not isinstance(dropout, bool) and 0 <= dropout < 1:
        reader._set("lora_dropout", float(dropout), node, chunk)  # peft's default is 0.0
    saved = reader.value(reader.keyword(node, "modules_to_save"), chunk)
    if isinstance(saved, (tuple, list)) and all(isinstance(name, str) for name in saved):
        last = {name.rsplit(".", 1)[-1] for name in saved}
        modules = (("embeddings",) if last & set(_EMBEDDINGS) else ()) + (("lm_head",) if last & set(_HEADS) else ())
        if modules:  # a classifier's `score` or `classifier` is small beside them: not counted
            reader._set("modules_to_save", modules, node, chunk)
