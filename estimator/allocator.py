"""What torch's CUDA caching allocator adds to the live tensors: each block's rounding, the reserved
segments beyond what is allocated (fragmentation), and the segments a training run over samples of
varying length keeps cached. The cost model (costmodel.py) adds them to its peaks.
"""

from __future__ import annotations

import math

from .plan import ZERO, Breakdown, Interval, Plan

# Caching-allocator overhead, reserved / allocated - 1, from whole runs replayed through the allocator's rules
# (calibration/allocator_replay.py; allocator_peaks.json, litgpt_peaks.json): 0.7-16.5 % with fixed shapes
# (21 runs: training full, LoRA, QLoRA, checkpointed, accumulating; inference; a generation with a static cache,
# whose allocations are almost all its weights, taken once: 0.7 %), 5.5-30.5 % with batches of varying length;
# the estimate is the median of all 24, 5.2 %.
FRAGMENTATION = (0.0067, 0.052, 0.305)
# A training run over samples of varying length (no packing: each batch padded to its own longest, the samples in
# random order) reserves more than that. The caching allocator gives a segment back only on empty_cache() or when
# cudaMalloc fails (torch's "CUDA memory management" notes, CUDACachingAllocator.cpp's release_cached_blocks), and it
# never serves a request from two segments: a step longer than every step before finds no cached block large enough
# and takes new segments, while the older, smaller ones stay reserved. Replayed over runs of lengths drawn from a
# dataset's stated statistics (calibration/varying_length_peaks.py), reserved minus allocated as a share of the
# activations and the loss, the tensors whose size follows the length (what is not a model state in the replayed runs,
# whose allocated peak is in the forward and backward): the median and the largest of the replays, for training
# adapters over a frozen base and for full training apart (full training's parameter-sized gradients and step
# temporaries take and free whole segments of their own between the steps: it kept less cached; one replay, so its
# high end is the largest of all), and for adapters without checkpointing apart (every layer's activations stay
# through the forward, many tensors of a layer's size that the next, longer step's tensors reuse in part: it kept 0.59
# of them cached, against 1.87 checkpointed, where the few length-sized tensors of the one recomputed layer and the loss
# each take new segments; one replay, its high end the largest of all). A
# run whose longest batch comes first takes its segments at once and reuses them (the low end: one shape's
# fragmentation, as allocator_peaks.json's runs of varying length, longest first, show). The segments that hold no
# live tensor are what the allocator frees before it fails a request: they show in max_memory_reserved and
# nvidia-smi but do not decide whether a run fits.
LENGTH_CACHE = {"adapters": (1.869, 2.350), "adapters, not checkpointed": (0.589, 2.350), "full": (0.545, 2.350)}
# Allocated blocks over live tensors in the same replays: at most +0.63 % (the high end; the estimate
# counts the weights' rounding, costmodel._block_rounding).
BLOCKS_OVER_LIVE = 0.0063

# torch's CUDA caching allocator (c10/cuda/CUDACachingAllocator.cpp): blocks are multiples of 512 bytes;
# a request of 10 MiB or more gets a segment of its size rounded up to 2 MiB, and a block is not split
# when 1 MiB or less would be left over: the block, counted in max_memory_allocated, is the whole segment.
_MIN_BLOCK = 512
_SMALL_REQUEST = 1 << 20
_LARGE_SEGMENT_FROM = 10 << 20
_LARGE_ROUNDING = 2 << 20


def block_overhead(size: float) -> float:
    """Bytes the caching allocator's block adds to one tensor of ``size`` bytes in a fresh segment."""
    rounded = _MIN_BLOCK * math.ceil(size / _MIN_BLOCK)
    if rounded >= _LARGE_SEGMENT_FROM:
        segment = _LARGE_ROUNDING * math.ceil(rounded / _LARGE_ROUNDING)
        if segment - rounded <= _SMALL_REQUEST:
            return segment - size
    return rounded - size


def length_cache(plan: Plan, allocated: Interval, reserved: Interval, breakdown: Breakdown, room: Interval | None,
                 notes: list[str]) -> Interval:
    """What a training run over samples of varying length reserves beyond one shape's fragmentation: the replayed
    runs' reserved-over-allocated as a share of the activations and loss, the tensors whose size follows the length
    (LENGTH_CACHE), less `reserved` (one shape's), end by end; with `lengths_vary` unknown, at the high end only.
    The allocator never reserves more than the device lets it (``room``: what it can reserve beside the context, end by
    end): it frees its cache when cudaMalloc fails."""
    if plan.mode != "train" or plan.lengths_vary is False:
        return ZERO
    varying = breakdown.activations + breakdown.logits

    def beyond(end: str, share: float) -> float:
        cache = max(0.0, getattr(allocated, end) + share * getattr(varying, end) - getattr(reserved, end))
        return cache if room is None else max(0.0, min(cache, getattr(room, end) - getattr(reserved, end)))

    kind = "full" if plan.lora_rank is None else "adapters" if plan.gradient_checkpointing else "adapters, not checkpointed"
    expected, high = LENGTH_CACHE[kind]
    if plan.lengths_vary:
        notes.append(
            f"samples of varying length: the allocator keeps segments of earlier, shorter steps cached; reserved over "
            f"allocated {expected:.0%} (up to {high:.0%}) of the activations and loss (replayed runs; none where the "
            "longest batch comes first), at most what the device has; the cache counts in the reserved and process "
            "peaks, not in whether the run fits"
        )
        return Interval(0.0, beyond("estimate", expected), beyond("high", high))
    notes.append(
        "whether the samples vary in length is not known: the high end of the reserved peak counts the segments a run "
        f"over varying lengths keeps cached (reserved over allocated up to {high:.0%} of the activations and loss); "
        "--lengths-vary or --fixed-lengths settles it"
    )
    return Interval(0.0, 0.0, beyond("high", high))
