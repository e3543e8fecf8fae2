"""Keep Python's cyclic garbage collector off the typing path.

The analyses of open documents hold millions of small objects for as long as the documents are
open. With the collector on, allocation bursts trigger collections that walk all of them, at
random moments, on the thread that answers the editor: 50–140 ms pauses measured on a
3,000-line file, longer than the analysis of an edit. So the server turns automatic collection
off and collects when the user pauses (no analysis for ``idle_s``), or after ``max_deferred``
analyses without a pause, so that memory held by discarded analyses (which contain reference
cycles) is still returned while someone types without stopping.

What survives a collection at a pause is frozen (``gc.freeze``): the open documents' trees, which
live on. A collection while someone types then walks only what was allocated since, not every
tree of every open document (on a 3,000-line document that walk blocked requests for seconds);
the collection at the next pause unfreezes everything first, so nothing stays uncollected.
"""

from __future__ import annotations

import asyncio
import gc


class IdleGarbageCollector:
    def __init__(self, idle_s: float = 1.0, max_deferred: int = 200) -> None:
        self.idle_s = idle_s
        self.max_deferred = max_deferred
        self.deferred = 0
        self.collections = 0
        self._timer: asyncio.TimerHandle | None = None

    def start(self) -> None:
        gc.disable()

    def analysed(self) -> None:
        """Call on the event loop after each analysis."""
        self.deferred += 1
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self.deferred >= self.max_deferred:
            self.deferred = 0
            gc.collect()  # the objects allocated since the last pause only: the rest is frozen
        else:
            self._timer = asyncio.get_running_loop().call_later(self.idle_s, self.collect)

    def collect(self) -> None:
        """At a pause: everything, then freeze what survives."""
        self._timer = None
        self.deferred = 0
        self.collections += 1
        gc.unfreeze()
        gc.collect()
        gc.freeze()
