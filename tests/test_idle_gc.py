"""The server's garbage collection: nothing alive is walked while someone types, and what a
reference cycle held is still returned, at a pause or after the backstop's number of analyses."""

from __future__ import annotations

import asyncio
import gc
import weakref

import pytest

from trainlint.server.idle_gc import IdleGarbageCollector


class _Node:
    def __init__(self) -> None:
        self.partner: _Node | None = None


def _cycle() -> weakref.ref[_Node]:
    """A reference cycle no one else holds once this returns; its weak reference says if it was freed."""
    first, second = _Node(), _Node()
    first.partner, second.partner = second, first
    return weakref.ref(first)


@pytest.fixture
def collector_state():
    """The test process's collector as it was: enabled, nothing frozen."""
    yield
    gc.unfreeze()
    gc.enable()


def test_what_is_alive_when_an_analysis_ends_is_not_walked_while_typing(collector_state) -> None:
    async def typing() -> None:
        collector = IdleGarbageCollector(idle_s=60)
        collector.start()
        document_trees = [[index] for index in range(50_000)]  # tracked objects that stay alive
        collector.analysed()
        assert len(gc.get_objects()) < 50_000  # what a collection now would walk
        assert gc.get_freeze_count() >= 50_000
        assert document_trees

    asyncio.run(typing())


def test_a_cycle_dropped_while_typing_is_freed_at_the_pause(collector_state) -> None:
    async def typing_then_pause() -> None:
        collector = IdleGarbageCollector(idle_s=0.01)
        collector.start()
        freed = _cycle()
        collector.analysed()  # the cycle is frozen with everything else alive now
        await asyncio.sleep(0.1)
        assert freed() is None
        assert collector.collections == 1

    asyncio.run(typing_then_pause())


def test_without_a_pause_the_backstop_frees_cycles_after_max_deferred_analyses(collector_state) -> None:
    async def typing_without_pause() -> None:
        collector = IdleGarbageCollector(idle_s=60, max_deferred=3)
        collector.start()
        freed = _cycle()
        collector.analysed()
        collector.analysed()
        assert collector.collections == 0
        collector.analysed()
        assert freed() is None
        assert collector.collections == 1

    asyncio.run(typing_without_pause())
