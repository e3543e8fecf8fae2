"""The accelerators and cloud instances an estimate can be checked against.

The catalogs live in ``data/gpus.json`` and ``data/instances.json``; every row names its source
and says when a figure was recalled rather than read. ``memory_bytes`` is the vendor's figure,
``usable_bytes`` what a process can allocate in total (the estimator adds ``context_bytes``, the
runtime memory ``torch.cuda.memory_allocated`` does not show, to its own peak).

Names are matched loosely: case, spaces, hyphens, underscores and dots do not matter, and a
leading brand ("NVIDIA", "Tesla", "GeForce", "AMD Instinct", ...) may be left off, so the names
``nvidia-smi`` prints resolve too. A name that does not fix the memory (bare "a100") is refused
rather than guessed.
"""

from __future__ import annotations

import difflib
import re
from functools import cache
from pathlib import Path

import msgspec

from .units import gib

_DATA = Path(__file__).parent / "data"

# Leading words that name the maker, not the part: "NVIDIA A100-SXM4-80GB", "Tesla T4",
# "AMD Instinct MI300X", GCP's "nvidia-tesla-t4".
_BRAND_WORDS = frozenset({"nvidia", "tesla", "geforce", "amd", "instinct", "radeon", "intel", "habana", "apple", "google", "aws"})

# "8xa100-80gb", "8x A100-80GB", "8 × h100"; and the count after the name: "a100-80gb x8".
_COUNT_FIRST = re.compile(r"^\s*(\d+)\s*[x×*]\s*(\S.*?)\s*$", re.IGNORECASE)
_COUNT_LAST = re.compile(r"^\s*(\S.*?)\s*[x×*]\s*(\d+)\s*$", re.IGNORECASE)


class Gpu(msgspec.Struct, frozen=True, kw_only=True):
    id: str
    name: str
    aliases: tuple[str, ...] = ()
    vendor: str
    memory_bytes: int  # nominal, as the vendor states it
    usable_bytes: int  # what one process can allocate in total, context included
    bandwidth_gb_s: float | None = None
    stack: str  # "cuda" | "rocm" | "habana" | "xpu" | "mps" | "xla" | "neuron"
    bf16: bool
    context_bytes: int  # per-process runtime memory that memory_allocated does not show
    source: str
    notes: str = ""
    compute_capability: str | None = None  # NVIDIA: "9.0"
    gfx_target: str | None = None  # AMD: "gfx942"

    @property
    def blas_workspace_bytes(self) -> int:
        """torch's default cuBLAS/hipBLAS workspace for one handle and stream (CUBLAS_WORKSPACE_CONFIG
        unset; aten/src/ATen/cuda/CublasHandlePool.cpp): ":4096:2:16:8" before Hopper, 32 MiB on compute
        capability 9.x, 10.x and 12.x; hipBLAS 32 MiB, 128 MiB on gfx94x/gfx95x. Other stacks: none."""
        if self.compute_capability is not None:
            major = int(self.compute_capability.split(".")[0])
            return 32 * 2**20 if major in (9, 10, 12) else 4096 * 1024 * 2 + 16 * 1024 * 8
        if self.gfx_target is not None:
            return 128 * 2**20 if self.gfx_target.startswith(("gfx94", "gfx95")) else 32 * 2**20
        return 0


class Instance(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    provider: str
    gpu: str  # a Gpu id
    count: int
    aliases: tuple[str, ...] = ()
    source: str
    notes: str = ""
    slice_bytes: int | None = None  # memory of a fractional GPU slice, when the instance has one


class Target(msgspec.Struct, frozen=True):
    gpu: Gpu
    count: int
    instance: Instance | None = None

    @property
    def usable_bytes_per_device(self) -> int:
        """Usable bytes on one device; a fractional slice keeps the whole GPU's usable share."""
        if self.instance is not None and self.instance.slice_bytes is not None:
            return self.instance.slice_bytes * self.gpu.usable_bytes // self.gpu.memory_bytes
        return self.gpu.usable_bytes


class UnknownTarget(ValueError):
    """A GPU or instance name the catalogs do not know, or one that does not fix the memory."""

    def __init__(self, message: str, candidates: tuple[str, ...] = ()):
        super().__init__(message)
        self.candidates = candidates


class _GpuCatalog(msgspec.Struct, frozen=True):
    gpus: tuple[Gpu, ...]
    # names that cover parts with different memory (bare "a100") -> the catalogued ids they may mean
    ambiguous: dict[str, tuple[str, ...]] = {}


class _InstanceCatalog(msgspec.Struct, frozen=True):
    instances: tuple[Instance, ...]


@cache
def _gpu_catalog() -> _GpuCatalog:
    return msgspec.json.decode((_DATA / "gpus.json").read_bytes(), type=_GpuCatalog)


@cache
def load_gpus() -> tuple[Gpu, ...]:
    return _gpu_catalog().gpus


@cache
def load_instances() -> tuple[Instance, ...]:
    return msgspec.json.decode((_DATA / "instances.json").read_bytes(), type=_InstanceCatalog).instances


def _keys(name: str) -> tuple[str, str]:
    """(full key, key without leading brand words): lowercase letters and digits only."""
    words = re.findall(r"[a-z0-9]+", name.lower())
    full = "".join(words)
    while words and words[0] in _BRAND_WORDS:
        words = words[1:]
    return full, "".join(words)


class _Index(msgspec.Struct, frozen=True):
    by_id: dict[str, Gpu]
    gpus: dict[str, Gpu]
    ambiguous: dict[str, tuple[str, ...]]
    instances: dict[str, Instance]


@cache
def _index() -> _Index:
    """Every name's key -> what it means; two different things under one key is a catalog error."""
    owners: dict[str, str] = {}

    def claim(name: str, owner: str) -> str:
        key = _keys(name)[0]
        if owners.setdefault(key, owner) != owner:
            raise ValueError(f"hardware catalog: {name!r} of {owner} collides with {owners[key]}")
        return key

    gpus: dict[str, Gpu] = {}
    for gpu in load_gpus():
        for name in (gpu.id, *gpu.aliases):
            gpus[claim(name, f"GPU {gpu.id}")] = gpu
    by_id = {gpu.id: gpu for gpu in load_gpus()}
    ambiguous: dict[str, tuple[str, ...]] = {}
    for name, ids in _gpu_catalog().ambiguous.items():
        if not set(ids) <= by_id.keys():
            raise ValueError(f"hardware catalog: ambiguous name {name!r} lists unknown ids {sorted(set(ids) - by_id.keys())}")
        ambiguous[claim(name, f"ambiguous name {name!r}")] = ids
    instances: dict[str, Instance] = {}
    for instance in load_instances():
        if instance.gpu not in by_id:
            raise ValueError(f"hardware catalog: instance {instance.name} names unknown GPU {instance.gpu!r}")
        for name in (instance.name, *instance.aliases):
            instances[claim(name, f"instance {instance.name}")] = instance
    return _Index(by_id, gpus, ambiguous, instances)


def _lookup_gpu(name: str) -> Gpu | tuple[str, ...] | None:
    """The GPU a name means, the candidate ids when it does not fix the memory, or None."""
    index = _index()
    for key in dict.fromkeys(_keys(name)):  # the full key first: "nvidia-tesla-a100" is not bare "a100"
        if key in index.gpus:
            return index.gpus[key]
        if key in index.ambiguous:
            return index.ambiguous[key]
    return None


def find_gpu(name: str) -> Gpu | None:
    """The GPU an id, alias or ``nvidia-smi`` name means; None when unknown or ambiguous."""
    found = _lookup_gpu(name)
    return found if isinstance(found, Gpu) else None


def _resolve_one(name: str, spec: str) -> Target | None:
    """A single GPU or instance name as a target (count 1 for a GPU); None when unknown.
    ``spec`` is the user's whole input, for the message when the name is ambiguous."""
    index = _index()
    instance = index.instances.get(_keys(name)[0])
    if instance is not None:
        return Target(index.by_id[instance.gpu], instance.count, instance)
    found = _lookup_gpu(name)
    if isinstance(found, tuple):
        choices = ", ".join(f"{gpu_id} ({gib(index.by_id[gpu_id].memory_bytes)} GiB)" for gpu_id in found)
        if len(found) == 1:  # other memory sizes exist but are not catalogued
            hint = f"the catalog has only {choices}: name it if that is the part"
        else:
            hint = f"name one of: {choices}"
        raise UnknownTarget(f"{spec.strip()!r} does not say which memory size; {hint}", found)
    return Target(found, 1) if found is not None else None


def resolve_target(spec: str, gpus: int | None = None) -> Target:
    """The devices a spec names: a GPU ("a100-80gb"), a count of them ("8xa100-80gb",
    "a100-80gb x8") or a cloud instance ("p4d.24xlarge"). ``gpus`` replaces the count.
    A count before an instance multiplies it ("2x p4d.24xlarge" is 16 GPUs)."""
    if gpus is not None and gpus < 1:
        raise ValueError(f"gpus must be at least 1, got {gpus}")
    target = _resolve_one(spec, spec)
    if target is None:
        target = _resolve_counted(spec)
    if target is None:
        raise _unknown(spec)
    return Target(target.gpu, gpus, target.instance) if gpus is not None else target


def states_count(spec: str) -> bool:
    """Whether a target spec says how many devices: "8xa100-80gb", "a100-80gb x8" (an instance's own
    count is the instance's, see :func:`resolve_target`)."""
    return any(pattern.match(spec) for pattern in (_COUNT_FIRST, _COUNT_LAST))


def _resolve_counted(spec: str) -> Target | None:
    for pattern, count_group, name_group in ((_COUNT_FIRST, 1, 2), (_COUNT_LAST, 2, 1)):
        match = pattern.match(spec)
        if match is None:
            continue
        count = int(match.group(count_group))
        single = _resolve_one(match.group(name_group), spec)
        if single is not None and count >= 1:
            return Target(single.gpu, count * single.count, single.instance)
    return None


def _unknown(spec: str) -> UnknownTarget:
    index = _index()
    display = {key: gpu.id for key, gpu in index.gpus.items()}
    display.update({key: instance.name for key, instance in index.instances.items()})
    suggestions: list[str] = []
    for key in difflib.get_close_matches(_keys(spec)[1], list(display), n=10, cutoff=0.6):
        if display[key] not in suggestions:
            suggestions.append(display[key])
    suggestions = suggestions[:3]
    if suggestions:
        hint = "did you mean " + ", ".join(suggestions) + "?"
    else:
        hint = "run `trainlint gpus` (or `trainlint gpus --instances`) for the known names"
    return UnknownTarget(f"unknown GPU or instance {spec.strip()!r}; {hint}", tuple(suggestions))


def smallest_fitting(required_bytes_per_device: float, *, vendor: str | None = None) -> list[Gpu]:
    """Catalog GPUs whose usable bytes cover the requirement, smallest first."""
    fitting = [
        gpu
        for gpu in load_gpus()
        if gpu.usable_bytes >= required_bytes_per_device and (vendor is None or gpu.vendor == vendor.lower())
    ]
    return sorted(fitting, key=lambda gpu: (gpu.usable_bytes, gpu.id))


def _columns(header: tuple[str, ...], rows: list[tuple[str, ...]], right_aligned: set[int]) -> str:
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]

    def line(row: tuple[str, ...]) -> str:
        cells = (cell.rjust(widths[i]) if i in right_aligned else cell.ljust(widths[i]) for i, cell in enumerate(row))
        return "  ".join(cells).rstrip()

    return "\n".join(line(row) for row in [header, *rows]) + "\n"


def gpu_table(instances: bool = False) -> str:
    """What ``trainlint gpus`` prints (``--instances``: the cloud instance catalog)."""
    if instances:
        gpus = _index().by_id
        rows = []
        for instance in load_instances():
            if instance.slice_bytes is not None:
                devices = f"{gib(instance.slice_bytes)} GiB slice of {instance.gpu}"
                total = instance.slice_bytes
            else:
                devices = f"{instance.count} x {instance.gpu}"
                total = instance.count * gpus[instance.gpu].memory_bytes
            rows.append((instance.name, instance.provider, devices, gib(total)))
        return _columns(("instance", "provider", "GPUs", "total GiB"), rows, right_aligned={3})
    rows = [
        (gpu.id, gpu.name, gib(gpu.memory_bytes), gib(gpu.usable_bytes), f"{gpu.vendor}/{gpu.stack}")
        for gpu in load_gpus()
    ]
    return _columns(("id", "name", "memory GiB", "usable GiB", "vendor/stack"), rows, right_aligned={2, 3})
