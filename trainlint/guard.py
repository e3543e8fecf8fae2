"""VRAMGuard: check, at the start of a run, that it will fit in GPU memory — before the first step.

    from trainlint.guard import VRAMGuard

    with VRAMGuard(model, optimizer=opt, example_input=batch, gpu="a100-80gb"):
        train()

Weights, gradients and optimizer state are read from the live objects (their real dtypes and
shapes; frozen parameters and adapters count as they are). Activations are measured by one
forward pass run with the module's parameters and the input replaced by meta tensors, under
`saved_tensors_hooks`: nothing is allocated, and the model is not changed (not even its
device, dtype or mode). On meta tensors `scaled_dot_product_attention` takes its math path,
which keeps the attention scores a fused kernel would not: for such models the measurement is
an upper bound. When that forward cannot run on meta tensors, activations are reported as
unknown and the interval's high end is open — never assumed zero.

This is the only part of trainlint that imports torch (`pip install "trainlint[runtime]"`).
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, cast

import torch

from trainlint.estimator.units import GIB

# The allocator's overhead over live tensors (reserved / allocated - 1): low, expected, high.
_FRAGMENTATION = (0.05, 0.105, 0.30)
# One forward's saved tensors are measured exactly; the backward's transients add some.
_ACTIVATION_SPREAD = (1.0, 1.1, 1.3)
# Optimizer state per trainable parameter, in units of the parameter's own size (torch keeps state in its dtype).
_STATES_PER_PARAMETER = {"Adam": 2, "AdamW": 2, "NAdam": 2, "RAdam": 2, "Adamax": 2, "SGD": 0, "RMSprop": 1, "Adagrad": 1, "Lion": 1}
_8BIT_STATE_BYTES = {"AdamW8bit": 2, "Adam8bit": 2, "PagedAdamW8bit": 2, "PagedAdam8bit": 2}


class VramRiskError(RuntimeError):
    """The run cannot fit: even the optimistic end of the projection exceeds the memory limit."""


@dataclass
class Projection:
    weights: int
    gradients: int
    optimizer: int
    activations: float | None  # None: the forward could not run on meta tensors
    context: int
    notes: list[str] = field(default_factory=list)

    def _states(self) -> int:
        return self.weights + self.gradients + self.optimizer

    @property
    def low(self) -> float:
        return (self._states() + (self.activations or 0) * _ACTIVATION_SPREAD[0]) * (1 + _FRAGMENTATION[0]) + self.context

    @property
    def estimate(self) -> float:
        if self.activations is None:
            return math.inf
        return (self._states() + self.activations * _ACTIVATION_SPREAD[1]) * (1 + _FRAGMENTATION[1]) + self.context

    @property
    def high(self) -> float:
        if self.activations is None:
            return math.inf
        return (self._states() + self.activations * _ACTIVATION_SPREAD[2]) * (1 + _FRAGMENTATION[2]) + self.context

    def breakdown(self) -> str:
        activations = "unknown" if self.activations is None else _size(self.activations)
        return (
            f"weights {_size(self.weights)}, gradients {_size(self.gradients)}, optimizer state {_size(self.optimizer)}, "
            f"activations {activations}, CUDA context {_size(self.context)}"
        )


class VRAMGuard:
    def __init__(
        self,
        model: torch.nn.Module,
        optimizer: torch.optim.Optimizer | Any | None = None,
        *,
        example_input: Any = None,
        batch_size: int | None = None,
        seq_len: int | None = None,
        image_size: int | None = None,
        gpu: str | None = None,
        memory_limit: str | int | None = None,
        strict: bool = False,
    ) -> None:
        self.model = model
        self.optimizer = optimizer
        self.example_input = example_input
        self.batch_size = batch_size
        self.seq_len = seq_len
        self.image_size = image_size
        self.gpu = gpu
        self.memory_limit = memory_limit
        self.strict = strict
        self.projection: Projection | None = None
        self.limit: float | None = None
        self.overhead_ms: float | None = None
        self.measured_peak: int | None = None
        self.accuracy: float | None = None  # measured peak / projected estimate (allocated-level comparison)

    # ------------------------------------------------------------------ the check
    def __enter__(self) -> VRAMGuard:
        started = time.perf_counter()
        self.projection = self.project()
        self.limit = self._limit()
        self.overhead_ms = (time.perf_counter() - started) * 1000
        if self.limit is not None:
            projection = self.projection
            if projection.low > self.limit or (self.strict and projection.high > self.limit):
                raise VramRiskError(self._message())
        if torch.cuda.is_available():
            torch.cuda.reset_peak_memory_stats()
        return self

    def __exit__(self, *exc_info) -> None:
        if torch.cuda.is_available() and self.projection is not None and not math.isinf(self.projection.estimate):
            self.measured_peak = torch.cuda.max_memory_allocated()
            allocated_estimate = self.projection.estimate / (1 + _FRAGMENTATION[1]) - self.projection.context
            self.accuracy = self.measured_peak / allocated_estimate if allocated_estimate else None

    def _message(self) -> str:
        projection = self.projection
        assert projection is not None and self.limit is not None, "__enter__ projects and finds the limit first"
        verdict = "cannot fit even at the low end" if projection.low > self.limit else "may not fit (strict)"
        return (
            f"projected peak {_size(projection.estimate)} (interval {_size(projection.low)} to {_size(projection.high)}) "
            f"against a limit of {_size(self.limit)}: the run {verdict}. Breakdown: {projection.breakdown()}. "
            f"Smallest change to try: {self._remedy()}"
        )

    def _remedy(self) -> str:
        projection = self.projection
        assert projection is not None and self.limit is not None, "__enter__ projects and finds the limit first"
        candidates = []
        if projection.activations:
            candidates.append((projection.activations / 2, "halve the micro-batch and accumulate gradients twice"))
            candidates.append((projection.activations * 0.8, "gradient checkpointing"))
        if projection.optimizer:
            candidates.append((projection.optimizer * 0.75, "an 8-bit optimizer (bitsandbytes AdamW8bit)"))
        if projection.weights and projection.gradients:
            candidates.append(((projection.weights + projection.gradients) / 2, "bf16 weights and gradients"))
        if not candidates:
            return "a GPU with more memory"
        missing = projection.low - self.limit
        fitting = [(saving, change) for saving, change in candidates if saving >= missing]
        saving, change = min(fitting) if fitting else max(candidates)
        return f"{change} (saves about {_size(saving)})"

    # ------------------------------------------------------------------ the projection
    def project(self) -> Projection:
        notes: list[str] = []
        parameters = _unique_parameters(self.model)
        weights = sum(p.numel() * p.element_size() for p in parameters)
        weights += sum(b.numel() * b.element_size() for b in self.model.buffers())
        trainable = [p for p in parameters if p.requires_grad]
        gradients = sum(p.numel() * p.element_size() for p in trainable)
        optimizer = self._optimizer_bytes(trainable, notes)
        activations = self._activation_bytes(notes)
        return Projection(weights, gradients, optimizer, activations, self._context_bytes(), notes)

    def _optimizer_bytes(self, trainable: list[torch.nn.Parameter], notes: list[str]) -> int:
        if self.optimizer is None:
            notes.append("no optimizer given: its state is not counted")
            return 0
        existing = sum(
            value.numel() * value.element_size()
            for state in getattr(self.optimizer, "state", {}).values() for value in state.values()
            if isinstance(value, torch.Tensor) and value.dim() > 0
        )
        if existing:
            return existing
        name = type(self.optimizer).__name__
        if name in _8BIT_STATE_BYTES:
            return sum(p.numel() for p in trainable) * _8BIT_STATE_BYTES[name]
        states = _STATES_PER_PARAMETER.get(name)
        if name == "SGD":
            momentum = any(group.get("momentum", 0) for group in self.optimizer.param_groups)
            states = 1 if momentum else 0
        if states is None:
            notes.append(f"optimizer {name}: state size unknown, taken as AdamW's (two states per parameter)")
            states = 2
        managed = {id(p) for group in self.optimizer.param_groups for p in group["params"]}
        return sum(p.numel() * p.element_size() * states for p in trainable if id(p) in managed)

    def _activation_bytes(self, notes: list[str]) -> float | None:
        inputs = self._meta_inputs()
        if inputs is None:
            notes.append("no example_input or shape (batch_size with seq_len or image_size): activations unknown")
            return None
        parameters = {name: _meta_like(value) for name, value in self.model.named_parameters(remove_duplicate=False)}
        buffers = {name: _meta_like(value) for name, value in self.model.named_buffers(remove_duplicate=False)}
        excluded = {value.untyped_storage()._cdata for value in (*parameters.values(), *buffers.values())}
        saved: dict[int, int] = {}

        def pack(tensor: torch.Tensor):
            storage = tensor.untyped_storage()
            key = storage._cdata
            if key not in excluded and key not in saved:
                saved[key] = storage.nbytes()
            return tensor

        try:
            with torch.enable_grad(), torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
                args, kwargs = inputs
                output = torch.func.functional_call(self.model, {**parameters, **buffers}, args, kwargs, strict=False)
        except Exception as error:  # the forward uses something meta tensors cannot do (data-dependent shapes, .item())
            notes.append(f"the forward could not run on meta tensors ({type(error).__name__}): activations unknown")
            return None
        output_bytes = sum(t.numel() * t.element_size() for t in _tensors(output))
        return float(sum(saved.values()) + output_bytes)

    def _meta_inputs(self) -> tuple[tuple, dict] | None:
        if self.example_input is not None:
            value = self.example_input
            if isinstance(value, dict):
                return (), {key: _to_meta(item) for key, item in value.items()}
            if isinstance(value, (tuple, list)):
                return tuple(_to_meta(item) for item in value), {}
            return (_to_meta(value),), {}
        if self.batch_size is None:
            return None
        if self.seq_len is not None:
            return (torch.zeros(self.batch_size, self.seq_len, dtype=torch.long, device="meta"),), {}
        if self.image_size is not None:
            dtype = next((p.dtype for p in self.model.parameters() if p.is_floating_point()), torch.float32)
            shape = (self.batch_size, 3, self.image_size, self.image_size)
            return (torch.zeros(shape, dtype=dtype, device="meta"),), {}
        return None

    def _context_bytes(self) -> int:
        if self.gpu is not None:
            from trainlint.estimator.hardware import resolve_target

            return resolve_target(self.gpu).gpu.context_bytes
        return int(0.14 * GIB) if torch.cuda.is_available() else 0

    def _limit(self) -> float | None:
        if self.memory_limit is not None:
            return _parse_bytes(self.memory_limit)
        if self.gpu is not None:
            from trainlint.estimator.hardware import resolve_target

            return resolve_target(self.gpu).usable_bytes_per_device
        if torch.cuda.is_available():
            return float(torch.cuda.get_device_properties(torch.cuda.current_device()).total_memory)
        return None


def _unique_parameters(model: torch.nn.Module) -> list[torch.nn.Parameter]:
    return list(model.parameters())  # shared (tied) parameters once


def _meta_like(tensor: torch.Tensor) -> torch.Tensor:
    meta = torch.empty_like(tensor, device="meta")
    if isinstance(tensor, torch.nn.Parameter) or tensor.requires_grad:
        meta.requires_grad_(tensor.requires_grad)
    return meta


def _to_meta(value: Any) -> Any:
    return value.to("meta") if isinstance(value, torch.Tensor) else value


def _tensors(value: Any):
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _tensors(item)
    elif isinstance(value, (tuple, list)):
        for item in value:
            yield from _tensors(item)
    elif hasattr(value, "values") and callable(value.values):  # ModelOutput and similar mappings
        for item in cast(Iterable[Any], value.values()):
            yield from _tensors(item)


_SIZE = re.compile(r"^\s*([\d.]+)\s*(B|KB|MB|GB|TB|KiB|MiB|GiB|TiB)?\s*$", re.I)
_UNITS = {"b": 1, "kb": 1e3, "mb": 1e6, "gb": 1e9, "tb": 1e12, "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}


def _parse_bytes(value: str | int) -> float:
    if isinstance(value, (int, float)):
        return float(value)
    match = _SIZE.match(value)
    if match is None:
        raise ValueError(f"memory_limit {value!r}: expected a size such as '24GiB' or '80GB'")
    return float(match.group(1)) * _UNITS[(match.group(2) or "B").lower()]


def _size(value: float) -> str:
    if math.isinf(value):
        return "unbounded"
    return f"{value / GIB:.2f} GiB" if value >= GIB / 4 else f"{value / 2**20:.1f} MiB"
