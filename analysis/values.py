"""Abstract values: what the analysis knows about what an expression evaluates to.

A value is a set of tags (``graph``: carries a live autograd graph; ``model``; ``probs``; …)
plus where the most important one was established, so findings can cite their evidence.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from . import torchapi

if TYPE_CHECKING:
    import libcst as cst

    from .parsing import ParsedChunk

# What a value is.
GRAPH = "graph"  # carries a live autograd graph
TENSOR = "tensor"
NUMBER = "number"  # a Python number (host value)
MODEL = "model"  # an nn.Module (or a wrapper of one)
MODEL_CLASS = "model-class"  # a class whose instances are nn.Modules: calling it (or its from_pretrained) builds a model
DDP = "ddp"  # a model wrapped for data parallelism (DDP/FSDP)
ENGINE = "engine"  # a DeepSpeed engine: backward/step/zero_grad handled by it
PIPELINE = "pipeline"  # a diffusers/transformers pipeline: not an nn.Module; calling it runs without grad
CRITERION = "criterion"
LOSS = "loss"
OPTIMIZER = "optimizer"
SCALER = "scaler"
LOADER = "loader"
SAMPLER_DISTRIBUTED = "distributed-sampler"
SAMPLER_LOCAL = "local-sampler"  # a sampler that every rank runs identically
DATASET_MAP = "map-dataset"
DATASET_ITERABLE = "iterable-dataset"
SHARDED = "sharded"  # data split across ranks by something visible (accelerate, fabric, slicing)
ACCELERATOR = "accelerator"
CONSTANT = "constant"  # built from literals only
DEVICE = "device"  # a torch.device / device string
ON_DEVICE = "on-device"  # a tensor moved to or created on the accelerator (`.cuda()`, `.to(device)`, `device=`)
ON_HOST = "on-host"  # a tensor created on the CPU (a factory without `device=`, no default device set)
CONTAINER = "container"  # a list/dict/set literal or constructor
# A model's output whose structure is not known: a tensor, or a tuple, dict or ModelOutput of them
# (Hugging Face models return ModelOutput objects; LSTMs return tuples). `.detach()` is not for it.
STRUCTURED = "maybe-structured"
# What a tensor holds, for loss-input checks.
PROBS = "probs"  # softmax output
LOG_PROBS = "log-probs"  # log_softmax output
SIGMOID = "sigmoid"  # sigmoid output
LOGITS = "logits"  # raw scores from a layer known to be linear
SCALED = "scaled"  # divided (or multiplied by a fraction) after it was computed
# Computed from `Variable(t, volatile=True)` (PyTorch before 0.4, whose torch.autograd documentation says a
# volatile input makes the whole computation on it record no graph): what consumes it runs as under no_grad().
VOLATILE = "volatile"

OUTPUT_KINDS = frozenset({PROBS, LOG_PROBS, SIGMOID, LOGITS})


class Tag:
    """The tags a rule reads from a ``Value`` (``Tag.GRAPH in value.tags``), each a fact the analysis
    established, never a guess; the comments beside the constants above say what each means."""

    ACCELERATOR = ACCELERATOR
    CONSTANT = CONSTANT
    CONTAINER = CONTAINER
    CRITERION = CRITERION
    DATASET_ITERABLE = DATASET_ITERABLE
    DATASET_MAP = DATASET_MAP
    DDP = DDP
    ENGINE = ENGINE
    GRAPH = GRAPH
    LOADER = LOADER
    LOG_PROBS = LOG_PROBS
    LOGITS = LOGITS
    LOSS = LOSS
    MODEL = MODEL
    MODEL_CLASS = MODEL_CLASS
    NUMBER = NUMBER
    ON_DEVICE = ON_DEVICE
    ON_HOST = ON_HOST
    OPTIMIZER = OPTIMIZER
    PIPELINE = PIPELINE
    PROBS = PROBS
    SAMPLER_DISTRIBUTED = SAMPLER_DISTRIBUTED
    SAMPLER_LOCAL = SAMPLER_LOCAL
    SCALED = SCALED
    SCALER = SCALER
    SHARDED = SHARDED
    STRUCTURED = STRUCTURED
    SIGMOID = SIGMOID
    TENSOR = TENSOR
    VOLATILE = VOLATILE

Site = tuple["ParsedChunk", "cst.CSTNode"]


class Value:
    __slots__ = ("tags", "site", "note", "roots", "items", "detail", "node")

    def __init__(
        self,
        tags: Iterable[str] = (),
        *,
        site: Site | None = None,
        note: str = "",
        roots: frozenset = frozenset(),
        items: tuple[Value, ...] | None = None,
        detail: object = None,
    ) -> None:
        self.tags = frozenset(tags)
        self.site = site  # where the defining fact was established (for evidence)
        self.note = note  # how to describe that fact in a message
        self.roots = roots  # graph seeds this value depends on (for matching backward calls)
        self.items = items  # element values when this is a known tuple (unpacking)
        self.detail = detail  # per-kind extra: criterion class, model class info, loader call

    def with_tags(self, add: Iterable[str] = (), remove: Iterable[str] = ()) -> Value:
        tags = (self.tags | frozenset(add)) - frozenset(remove)
        return Value(tags, site=self.site, note=self.note, roots=self.roots, detail=self.detail)

    def without_graph(self) -> Value:
        if GRAPH not in self.tags:
            return self
        return Value(self.tags - {GRAPH}, site=self.site, note=self.note, detail=self.detail)

    def __repr__(self) -> str:  # for test failure messages
        return f"Value({sorted(self.tags)}, note={self.note!r})"


UNKNOWN = Value()


def value_key(value: Value) -> tuple:
    """What a value says, field by field: two walks of the same statements make values alike in every
    field but made anew. The fields are compared as the objects themselves, by identity (none of
    them defines equality), not their ids: an earlier walk's objects may be gone and their ids reused."""
    items = None if value.items is None else tuple(map(value_key, value.items))
    return value.tags, value.site, value.note, value.roots, items, value.detail


def alike(one: Value | bool, other: Value | bool) -> bool:
    """Whether two values (or two answers to whether a name is bound) say the same (``value_key``)."""
    if one is other:
        return True
    return isinstance(one, Value) and isinstance(other, Value) and value_key(one) == value_key(other)


def is_known_tensor(value: Value) -> bool:
    """Positive evidence that the value is one tensor: not a list, a tuple, a dict or a ModelOutput."""
    return TENSOR in value.tags and not value.tags & {CONTAINER, STRUCTURED} and value.items is None


def join(values: Iterable[Value]) -> Value:
    """What is known about a value that may be any of these (branches) or combines them (arithmetic)."""
    values = [value for value in values if value is not None]
    if not values:
        return UNKNOWN
    if len(values) == 1:
        return values[0]
    tags: set[str] = set()
    roots: frozenset = frozenset()
    primary = None
    for value in values:
        tags |= value.tags
        roots |= value.roots
        if primary is None and GRAPH in value.tags:
            primary = value
    if not all(MODEL_CLASS in value.tags for value in values):
        tags.discard(MODEL_CLASS)  # a class picked among others builds a model only when every one of them does
    primary = primary or next((value for value in values if value.tags), values[0])
    width = len(values[0].items or ())
    if width and all(value.items is not None and len(value.items) == width for value in values):
        # `return model, transform` on two paths: a tuple of as many items whichever path, joined item by item
        items = tuple(join(column) for column in zip(*(value.items for value in values)))
        return Value(tags, site=primary.site, note=primary.note, roots=roots, items=items)
    if MODEL_CLASS in tags and any(value.detail is not primary.detail for value in values) or is_table(primary.detail):
        # which class (its forward) is not known; a dict joined with what is stored in it later holds more than its literal
        return Value(tags, site=primary.site, note=primary.note, roots=roots)
    return Value(tags, site=primary.site, note=primary.note, roots=roots, detail=primary.detail)


def is_table(detail: object) -> bool:
    """The detail of a dict literal: ``("table", entry)``, what subscripting it by an unknown key gives."""
    return isinstance(detail, tuple) and len(detail) == 2 and detail[0] == "table"


def literal_dict(values: list[Value], complete: bool, *, site: Site | None = None, note: str = "") -> Value:
    """A dict literal holding ``values`` (``complete``: nothing spread into it): what its values may hold,
    and, as its detail, what subscripting it by a key not known here gives (``table_value``)."""
    tags = (join(values).tags | {CONTAINER}) - {MODEL_CLASS}  # iterating a dict gives its keys
    return Value(tags, site=site, note=note, detail=("table", table_entry(values)) if complete else None)


def table_value(base: Value) -> Value | None:
    """``base[key]`` for a dict literal whose values agree on being model classes or tuples of known items
    (``{"bert": (BertConfig, BertModel)}``); None where the dict's usual element says as much."""
    detail = base.detail
    if not isinstance(detail, tuple) or not is_table(detail):
        return None
    entry: Value = detail[1]
    return entry if MODEL_CLASS in entry.tags or entry.items else None


def table_entry(entries: list[Value]) -> Value:
    """What subscripting a dict literal by a key not known here gives: one of its values, known as far as
    all of them agree (a table of model classes, ``{"bert": (BertConfig, BertModel)}``, position by
    position when every value is a tuple of the same length)."""
    if not entries:
        return UNKNOWN
    if all(entry.items is not None for entry in entries) and len({len(entry.items or ()) for entry in entries}) == 1:
        items = tuple(table_entry([entry.items[index] for entry in entries if entry.items]) for index in range(len(entries[0].items or ())))
        return Value(join(items).tags - {MODEL_CLASS}, items=items)
    return join(entries)


# Fields of a model's output object that hold one tensor (Hugging Face ModelOutput conventions).
_TENSOR_FIELDS = frozenset({
    "loss", "logits", "last_hidden_state", "pooler_output", "sample", "prev_sample", "pred_original_sample",
    "image_embeds", "text_embeds", "T", "mT", "H", "real", "imag",
})
# A pipeline's components that are nn.Modules: `pipeline.unet(...)` runs a forward.
_PIPELINE_MODULES = frozenset({
    "unet", "vae", "text_encoder", "text_encoder_2", "text_encoder_3", "transformer", "controlnet", "prior",
    "image_encoder", "decoder", "model", "adapter",
})


def attribute_of(base: Value, attribute: str) -> Value:
    """What `base.attribute` holds: a pipeline's module, a tensor's field, nothing known otherwise."""
    if PIPELINE in base.tags:
        return Value((MODEL,), site=base.site, note=f"the pipeline's `{attribute}`") if attribute in _PIPELINE_MODULES else UNKNOWN
    if attribute in torchapi.GRAPH_FREE_ATTRIBUTES:
        return Value((TENSOR,)) if attribute in {"grad", "data"} else UNKNOWN
    if MODEL in base.tags:
        return base if attribute == "module" else UNKNOWN
    if GRAPH in base.tags or TENSOR in base.tags:
        kept = base.with_tags(remove=(CONTAINER, CONSTANT))
        if attribute in _TENSOR_FIELDS:
            kept = kept.with_tags(remove=(STRUCTURED,))
        if attribute == "logits":
            return kept.with_tags(add=(LOGITS,), remove=OUTPUT_KINDS - {LOGITS})
        if attribute == "loss":
            return kept.with_tags(add=(LOSS,), remove=OUTPUT_KINDS)
        return kept
    return UNKNOWN


ROLE_VALUES: dict[str | None, Value] = {  # None: a parameter whose role is not known
    "model": Value((MODEL,)),
    "optimizer": Value((OPTIMIZER,)),
    "criterion": Value((CRITERION,)),
    "scaler": Value((SCALER,)),
    "loader": Value((LOADER,)),
    "accelerator": Value((ACCELERATOR,)),
}


def volatile_input(*inputs: Value | None) -> Value | None:
    """The first of a call's inputs computed from ``Variable(t, volatile=True)`` (PyTorch < 0.4): the call
    records no graph."""
    return next((value for value in inputs if value is not None and VOLATILE in value.tags), None)
