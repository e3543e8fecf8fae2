"""The server's garbage collection: nothing alive is walked while someone types, and what a
reference cycle held is still returned, at a pause or after the backstop's number of analyses."""

from __future__ import annotations

import ast
import asyncio
import gc
import weakref
from pathlib import Path

import pytest

from trainlint.analysis.engine import findings_for, select_rules
from trainlint.analysis.module import ModuleAnalysis
from trainlint.analysis.settings import AnalysisSettings
from trainlint.analysis.tree import evaluate_literal
from trainlint.estimator.anchors import find_anchors
from trainlint.estimator.editor import estimate_module
from trainlint.server.documents import DocumentState
from trainlint.server.idle_gc import IdleGarbageCollector
from trainlint.settings import EffectiveSettings

EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "buggy"


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


def test_a_short_pause_frees_only_what_came_after_the_last_analysis(collector_state) -> None:
    async def typing_then_a_moment() -> None:
        collector = IdleGarbageCollector(idle_s=0.01, long_idle_s=60)
        collector.start()
        with_the_analysis = _cycle()
        collector.analysed()  # frozen with everything else alive now
        after_it = _cycle()
        await asyncio.sleep(0.1)
        assert after_it() is None
        assert with_the_analysis() is not None, "a short pause walked the frozen objects"
        assert collector.collections == 0

    asyncio.run(typing_then_a_moment())


def test_a_cycle_frozen_with_an_analysis_is_freed_at_a_long_pause(collector_state) -> None:
    async def typing_then_a_long_pause() -> None:
        collector = IdleGarbageCollector(idle_s=0.01, long_idle_s=0.05)
        collector.start()
        freed = _cycle()  # a closed document's analysis, say
        collector.analysed()
        await asyncio.sleep(0.3)
        assert freed() is None
        assert collector.collections == 1

    asyncio.run(typing_then_a_long_pause())


def test_after_full_every_analyses_the_next_short_pause_collects_everything(collector_state) -> None:
    async def much_typing_then_a_moment() -> None:
        collector = IdleGarbageCollector(idle_s=0.01, long_idle_s=60, full_every=3)
        collector.start()
        freed = _cycle()
        for _ in range(3):
            collector.analysed()
        assert freed() is not None, "nothing is collected while someone types"
        await asyncio.sleep(0.1)
        assert freed() is None
        assert collector.collections == 1

    asyncio.run(much_typing_then_a_moment())


@pytest.mark.parametrize("script", sorted(EXAMPLES.glob("*.py")), ids=lambda path: path.name)
def test_analysing_a_script_and_its_vram_estimate_leaves_no_reference_cycles(script, collector_state) -> None:
    """What the server does for an open document (findings, the lines a VRAM estimate belongs to,
    the estimate) frees what it drops by reference counting: nothing waits for a collection. (A
    document's whole analysis, once dropped, does: its statements' memos hold events that point
    back at them; the collection at a pause frees it after the document is closed.)"""
    settings = AnalysisSettings()
    rules = select_rules(settings)

    def as_the_server_does() -> ModuleAnalysis:
        module = ModuleAnalysis(script.read_text(encoding="utf-8"), script.name)
        findings_for(module, settings, rules)
        find_anchors(module)
        estimate_module(module, "a100-80gb")
        return module

    as_the_server_does()  # once first: msgspec builds what it knows of a type (cycles, kept) on first use
    gc.disable()
    gc.collect()
    gc.freeze()
    open_document = as_the_server_does()
    assert gc.collect() == 0
    assert open_document.chunks


@pytest.mark.parametrize("code", [
    "0", "42", "1_000", "0x1F", "0o17", "0b101", "1e-4", "3.", ".5", "2.5e+3_0", "3j", "1.5J",
    "'plain'", '"--batch-size"', r"r'\d+'", "b'bytes'", r"'tab\there'", r"'\N{BULLET}'", "u'x'",
    "'a' 'b'", "('a'\n    'b')", "'''three\nlines'''",
])
def test_evaluate_literal_gives_what_literal_eval_gives(code: str) -> None:
    assert evaluate_literal(code) == ast.literal_eval(code)


@pytest.mark.parametrize("code", ["f'{x}'", "name", "-1", "[1]"])
def test_evaluate_literal_refuses_what_is_not_one_literal(code: str) -> None:
    with pytest.raises(ValueError):
        evaluate_literal(code)


# A class of the shapes whose old statement an edit used to leave in reference cycles: methods name
# their class, a function defined inside a method has a flow of its own, and a method returns a
# loader (whose value names its call, whose event names the scope).
TRAINER_CLASS = '''\
import torch
from torch.utils.data import DataLoader


class Trainer:
    def __init__(self, model, dataset, optimizer):
        self.model = model
        self.dataset = dataset
        self.optimizer = optimizer

    def get_train_dataloader(self):
        return DataLoader(self.dataset, batch_size=32, shuffle=True, num_workers=4, pin_memory=True)

    def scores(self, values):
        def normalize(items):
            low, high = min(items), max(items)
            return [(item - low) / (high - low) for item in items]

        return normalize(values)

    def train(self):
        history = []
        for x, y in self.get_train_dataloader():
            loss = self.model(x, y)
            loss.backward()
            self.optimizer.step()
            self.optimizer.zero_grad()
            history.append(loss.item())
        return history
'''


def test_typing_inside_a_method_leaves_no_reference_cycles(collector_state) -> None:
    """A key typed in a class replaces the class's statement; what the replaced one held (its text,
    the path of its tree, its memos: 0.7 MB a key in a 3,300-line class) is freed by reference
    counting at once, not kept until the server's collection at a long pause."""
    settings = EffectiveSettings(AnalysisSettings())
    document = DocumentState("file:///trainer.py", None)
    text = TRAINER_CLASS
    document.analyse(text, 0, settings)
    edited = text.replace("history = []", "history = [] ")
    for version in range(1, 4):  # msgspec and the rules build what they keep on first use
        document.analyse(edited if version % 2 else text, version, settings)
    gc.disable()
    gc.collect()
    gc.freeze()
    document.analyse(edited, 10, settings)
    document.analyse(text, 11, settings)
    assert gc.collect() == 0
