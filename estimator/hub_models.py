"""Popular Hugging Face hub models, resolved without their config.json on disk and without a network.

``data/hub_models.json`` keeps, for each model id, the config.json fields the memory model reads
(under their config.json names, so a row is read exactly as the file would be, missing keys taking
their config class's defaults) and where each value was read. A fine-tuned model named after its
base (``someone/Qwen2.5-Coder-1.5B-sql-lora``, ``...-Instruct``) resolves through that base, and the
report says it assumed so.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

import msgspec

from .architectures import Architecture, load_architectures

_DATA_PATH = Path(__file__).parent / "data" / "hub_models.json"
# What may follow a base model's name in a fine-tune's: `-Instruct`, `_sft`, `-sql-lora`.
_SEPARATORS = ("-", "_")
# ... but not a size: `gpt2-xxl` and `llama-7b-13b` name other models, not fine-tunes of `gpt2` and `llama-7b`.
_SIZE = re.compile(r"(?:tiny|mini|small|medium|large|xl|xxl|huge|giant|\d+(?:\.\d+)?[bmk]|\d+x\d+(?:\.\d+)?[bm])(?:[-_]|$)")


class HubModel(msgspec.Struct, frozen=True, kw_only=True):
    id: str  # the hub id, as the hub spells it
    config: dict[str, int | bool | str]  # config.json fields, by their config.json names
    source: str  # where the values were read
    stated_params: str | None = None  # the parameter count as published ("1.54B", "1,346,471,936")
    stated_params_source: str | None = None


class _Table(msgspec.Struct, frozen=True):
    about: str
    models: tuple[HubModel, ...]


@functools.cache
def load_hub_models() -> tuple[HubModel, ...]:
    return msgspec.json.decode(_DATA_PATH.read_bytes(), type=_Table).models


@functools.cache
def _by_id() -> dict[str, HubModel]:
    return {model.id.lower(): model for model in load_hub_models()}


def find_hub_model(name: str) -> HubModel | None:
    """The row of a hub id, case-insensitively."""
    return _by_id().get(name.strip().lower())


def _last(name: str) -> str:
    return name.strip().lower().rsplit("/", 1)[-1]


@functools.cache
def _base_names() -> dict[str, tuple[str, HubModel | Architecture]]:
    """A known model's name, its last part lowercased -> (the name as spelled, the row or catalog entry)."""
    names: dict[str, tuple[str, HubModel | Architecture]] = {}
    for arch in load_architectures():
        if arch.kind in ("decoder", "encoder", "encoder-decoder"):
            for spelled in (arch.id, *arch.aliases):
                names.setdefault(_last(spelled), (spelled, arch))
    for model in load_hub_models():
        names.setdefault(_last(model.id), (model.id, model))
    return names


def base_of(name: str) -> tuple[str, HubModel | Architecture] | None:
    """The known model a fine-tune is named after: the longest known name its last part begins, followed
    by ``-`` or ``_`` and not by a size (``Qwen2.5-Coder-1.5B-sql-lora`` -> ``Qwen/Qwen2.5-Coder-1.5B``, but
    ``gpt2-xxl`` is not ``gpt2``); None when none is."""
    last = _last(name)
    best: tuple[str, tuple[str, HubModel | Architecture]] | None = None
    for part, entry in _base_names().items():
        suffix = last[len(part) + 1:]
        if not last.startswith(part) or last[len(part):len(part) + 1] not in _SEPARATORS or _SIZE.match(suffix):
            continue
        if best is None or len(part) > len(best[0]):
            best = (part, entry)
    return best[1] if best is not None else None
