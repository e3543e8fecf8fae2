"""What torch's CUDA caching allocator makes of a run's tensors: replayed from a fake-tensor trace.

``max_memory_allocated`` does not count tensors' bytes: it counts the allocator's *blocks*, each
rounded up to 512 bytes and, in the large pool, not split when less than 1 MiB would be left over;
``max_memory_reserved`` counts its *segments* (2 MiB for small requests, 20 MiB for requests under
10 MiB, larger ones rounded up to 2 MiB), which freed blocks leave partly empty. Both follow from
the allocator's rules (c10/cuda/CUDACachingAllocator.cpp; the "CUDA memory management" notes of
torch's documentation), and from the order in which a run allocates and frees, which a run under
FakeTensorMode reproduces without a GPU.

``Recorder`` (a dispatch mode, inside FakeTensorMode) writes each storage's allocation and, through a
weak reference, its release, in order. ``replay`` runs that trace through a model of the allocator
with its default settings (one stream, no ``max_split_size_mb``, no expandable segments, no
``roundup_power2_divisions``) and returns the peaks of live bytes, allocated blocks and reserved
segments. What it leaves out: kernels' own workspaces (cuBLAS, cuDNN, flash attention's backward),
which a fake tensor never allocates, and the release of cached segments when cudaMalloc fails.
"""

from __future__ import annotations

import bisect
import weakref
from dataclasses import dataclass

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

MIN_BLOCK = 512
SMALL_SIZE = 1 << 20  # requests up to 1 MiB are served from the small pool
SMALL_BUFFER = 2 << 20  # the small pool's segments
LARGE_BUFFER = 20 << 20  # segments for requests between 1 MiB and 10 MiB
MIN_LARGE_ALLOC = 10 << 20
ROUND_LARGE = 2 << 20  # larger requests: a segment of their size rounded up to 2 MiB


class Recorder(TorchDispatchMode):
    """The order in which a run's storages are allocated and released (sizes in bytes)."""

    def __init__(self) -> None:
        super().__init__()
        self.events: list[tuple[str, int, int]] = []
        self._next = 0
        self._known: dict[int, weakref.ref] = {}

    def track(self, tensors) -> None:
        """Storages that exist already (parameters created outside the mode)."""
        for tensor in tensors:
            self._see(tensor)

    def _see(self, tensor: torch.Tensor) -> None:
        storage = tensor.untyped_storage()
        key = storage._cdata
        if key in self._known and self._known[key]() is not None:
            return
        self._next += 1
        handle = self._next
        self.events.append(("alloc", handle, storage.nbytes()))
        self._known[key] = weakref.ref(storage, lambda _, handle=handle: self.events.append(("free", handle, 0)))

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        result = func(*args, **(kwargs or {}))
        for value in tree_flatten(result)[0]:
            if isinstance(value, torch.Tensor) and value.device.type != "meta":
                self._see(value)
        return result


def live_over_time(events: list[tuple[str, int, int]]) -> list[int]:
    """The bytes of live storages after each event of a ``Recorder``'s trace."""
    sizes: dict[int, int] = {}
    live, timeline = 0, []
    for kind, handle, nbytes in events:
        if kind == "alloc":
            sizes[handle] = nbytes
            live += nbytes
        else:
            live -= sizes.pop(handle)
        timeline.append(live)
    return timeline


@dataclass
class _Block:
    segment: int
    address: int
    size: int
    free: bool = True
    prev: _Block | None = None
    next: _Block | None = None


@dataclass
class Peaks:
    live: int = 0  # bytes of live tensors (what MemTracker counts)
    allocated: int = 0  # max_memory_allocated
    reserved: int = 0  # max_memory_reserved
    segments: int = 0


def _round(size: int) -> int:
    return MIN_BLOCK if size < MIN_BLOCK else MIN_BLOCK * -(-size // MIN_BLOCK)


def _segment_size(size: int) -> int:
    if size <= SMALL_SIZE:
        return SMALL_BUFFER
    if size < MIN_LARGE_ALLOC:
        return LARGE_BUFFER
    return ROUND_LARGE * -(-size // ROUND_LARGE)


class CachingAllocator:
    """The caching allocator's block policy: best fit among cached blocks of the pool (smallest size,
    then lowest address), split when the rest is at least 512 bytes (small pool) or more than 1 MiB
    (large pool), a freed block merged with its free neighbours in the same segment."""

    def __init__(self) -> None:
        self._free: dict[bool, list] = {True: [], False: []}  # small pool?: sorted [(size, address, id, block)]
        self._small_segment: dict[int, bool] = {}
        self._blocks: dict[int, _Block] = {}
        self._requested: dict[int, int] = {}
        self._next_address = 0
        self.live = self.allocated = self.reserved = 0
        self.peaks = Peaks()

    def _key(self, block: _Block) -> tuple:
        return (block.size, block.address, id(block))

    def _insert(self, block: _Block) -> None:
        bisect.insort(self._free[self._small_segment[block.segment]], (*self._key(block), block))

    def _remove(self, block: _Block) -> None:
        pool = self._free[self._small_segment[block.segment]]
        del pool[bisect.bisect_left(pool, self._key(block))]

    def malloc(self, handle: int, nbytes: int) -> None:
        size = _round(nbytes)
        small = size <= SMALL_SIZE
        pool = self._free[small]
        index = bisect.bisect_left(pool, (size, -1, -1))
        if index < len(pool):
            block = pool.pop(index)[3]
        else:  # no cached block fits: a new segment (cudaMalloc)
            segment_bytes = _segment_size(size)
            segment = len(self._small_segment)
            self._small_segment[segment] = small
            block = _Block(segment, self._next_address, segment_bytes)
            self._next_address += segment_bytes
            self.reserved += segment_bytes
        remaining = block.size - size
        if (remaining >= MIN_BLOCK) if small else (remaining > SMALL_SIZE):
            rest = _Block(block.segment, block.address + size, remaining, True, block, block.next)
            if block.next is not None:
                block.next.prev = rest
            block.next = rest
            block.size = size
            self._insert(rest)
        block.free = False
        self._blocks[handle] = block
        self._requested[handle] = nbytes
        self.live += nbytes
        self.allocated += block.size
        self._note()

    def free(self, handle: int) -> None:
        block = self._blocks.pop(handle, None)
        if block is None:  # allocated before the trace began
            return
        self.live -= self._requested.pop(handle)
        self.allocated -= block.size
        block.free = True
        if block.next is not None and block.next.free:
            self._remove(block.next)
            self._absorb(block, block.next)
        if block.prev is not None and block.prev.free:
            self._remove(block.prev)
            block = self._absorb(block.prev, block)
        self._insert(block)

    @staticmethod
    def _absorb(left: _Block, right: _Block) -> _Block:
        """Merge ``right``, the block that follows ``left`` in its segment, into ``left``."""
        left.size += right.size
        left.next = right.next
        if right.next is not None:
            right.next.prev = left
        return left

    def _note(self) -> None:
        peaks = self.peaks
        peaks.live = max(peaks.live, self.live)
        peaks.allocated = max(peaks.allocated, self.allocated)
        peaks.reserved = max(peaks.reserved, self.reserved)
        peaks.segments = max(peaks.segments, len(self._small_segment))


def replay(events: list[tuple[str, int, int]]) -> Peaks:
    allocator = CachingAllocator()
    for kind, handle, nbytes in events:
        if kind == "alloc":
            allocator.malloc(handle, nbytes)
        else:
            allocator.free(handle)
    return allocator.peaks
