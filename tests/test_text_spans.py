"""A node's position read off its statement's text (when its code occurs there once) is the position
LibCST gives it: findings, their evidence and their fixes are where the positions of the whole
statement put them."""

from __future__ import annotations

from pathlib import Path

import libcst as cst
import pytest

from trainlint.analysis import parsing
from trainlint.analysis.engine import findings_for, select_rules
from trainlint.analysis.module import ModuleAnalysis
from trainlint.analysis.settings import AnalysisSettings
from trainlint.analysis.tree import walk

EXAMPLES_ROOT = Path(__file__).resolve().parent.parent / "examples"
EXAMPLES = sorted(EXAMPLES_ROOT.rglob("*.py"))
SETTINGS = AnalysisSettings()
RULES = select_rules(SETTINGS)


def _findings(path: Path) -> list:
    module = ModuleAnalysis(path.read_text(encoding="utf-8"), path.name)
    return [
        (f.code, f.line, f.column, f.end_line, f.end_column, f.message, f.evidence, f.fix)
        for f in findings_for(module, SETTINGS, RULES)
    ]


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda path: str(path.relative_to(EXAMPLES_ROOT)))
def test_findings_are_placed_as_with_every_position_generated(path: Path, monkeypatch) -> None:
    read_off_the_text = _findings(path)
    monkeypatch.setattr(parsing, "_spelled_as_its_text", lambda node: False)
    assert read_off_the_text == _findings(path)


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda path: str(path.relative_to(EXAMPLES_ROOT)))
def test_every_span_read_off_the_text_is_the_generated_position(path: Path) -> None:
    module = ModuleAnalysis(path.read_text(encoding="utf-8"), path.name)
    read = 0
    for chunk in module.chunks:
        if chunk.module is None:
            continue
        spans = {node: chunk._text_span(node) for node in walk(chunk.module)}
        positions = chunk.positions()
        for node, span in spans.items():
            if span is not None:
                position = positions[node]
                assert span == (position.start.line, position.start.column, position.end.line, position.end.column), chunk.code_for(node)
                read += 1
    assert read > 50


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda path: str(path.relative_to(EXAMPLES_ROOT)))
def test_every_span_inside_a_call_read_off_the_text_is_the_generated_position(path: Path) -> None:
    """``range_of(node, within=call)``: the positions of the call's code alone, placed where the text
    has the call, are those of the whole statement for every node inside it (its arguments, commas,
    the whitespace and comments between them)."""
    module = ModuleAnalysis(path.read_text(encoding="utf-8"), path.name)
    read = 0
    for chunk in module.chunks:
        if chunk.module is None:
            continue
        inside = {call: chunk._spans_inside(call) for call in walk(chunk.module) if isinstance(call, cst.Call)}
        assert chunk._positions is None
        positions = chunk.positions()
        for call, spans in inside.items():
            for node, span in (spans or {}).items():
                position = positions[node]
                assert span == (position.start.line, position.start.column, position.end.line, position.end.column), chunk.code_for(call)
                read += 1
    assert read > 50


RECIPE_WITH_A_LOADER = '''\
class Recipe:
    def setup_data(self, ds, sampler, batch_size):
        loader = StatefulDataLoader(
            dataset=ds,
            batch_size=batch_size,
            sampler=sampler,
            # dropping last avoids shape issues with compile
            drop_last=True,
            collate_fn=partial(
                collate_fn,
                padding_idx=self._tokenizer.pad_id,
            ),
        )
        return loader

    def setup_eval_data(self, ds, sampler, batch_size):
        first = DataLoader(
            ds,
            batch_size=batch_size,
        )
        second = DataLoader(
            ds,
            batch_size=batch_size,
        )
        return first, second
'''


def _calls_named(chunk, name: str) -> list:
    return [node for node in walk(chunk.module) if isinstance(node, cst.Call) and chunk.code_for(node.func) == name]


def test_a_call_over_several_lines_inside_a_method_is_read_off_the_text() -> None:
    """Its code is generated without the method's indentation, yet it is found where it is."""
    chunk = ModuleAnalysis(RECIPE_WITH_A_LOADER, "recipe.py").chunks[0]
    (loader,) = _calls_named(chunk, "StatefulDataLoader")
    span = chunk._text_span(loader)
    assert chunk._positions is None  # found without generating the positions of the class
    position = chunk.positions()[loader]
    assert span == (position.start.line, position.start.column, position.end.line, position.end.column) == (3, 17, 13, 9)


def test_a_call_over_several_lines_written_twice_is_placed_by_the_assignment_that_holds_it() -> None:
    chunk = ModuleAnalysis(RECIPE_WITH_A_LOADER, "recipe.py").chunks[0]
    loaders = _calls_named(chunk, "DataLoader")
    assert [chunk._text_span(loader) for loader in loaders] == [None, None]
    assert sorted(chunk.line_of(loader) for loader in loaders) == [17, 21]
    assert chunk._positions is None  # without generating the positions of the class


def test_a_node_no_small_statement_holds_is_placed_by_the_positions_of_the_whole_statement() -> None:
    loop = "\n    def {}(self, ds):\n        for item in DataLoader(ds):\n            yield item\n"
    source = RECIPE_WITH_A_LOADER + loop.format("train_batches") + loop.format("eval_batches")
    chunk = ModuleAnalysis(source, "recipe.py").chunks[0]
    in_loop_headers = [call for call in _calls_named(chunk, "DataLoader") if chunk.code_for(call) == "DataLoader(ds)"]
    assert sorted(chunk.line_of(call) for call in in_loop_headers) == [28, 32]
    assert chunk._positions is not None


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda path: str(path.relative_to(EXAMPLES_ROOT)))
def test_every_span_placed_inside_its_small_statement_is_the_generated_position(path: Path) -> None:
    """A node whose code is not unique in the text is placed by the small statement that holds it:
    the positions of that statement's code alone, where the text has it, are the whole chunk's."""
    module = ModuleAnalysis(path.read_text(encoding="utf-8"), path.name)
    read = 0
    for chunk in module.chunks:
        if chunk.module is None:
            continue
        holders = {node: parsing._small_statement_holding(chunk.module, node) for node in walk(chunk.module)}
        inside = {id(holder): chunk._spans_inside(holder) for holder in holders.values() if holder is not None}
        assert chunk._positions is None
        positions = chunk.positions()
        for node, holder in holders.items():
            span = (inside[id(holder)] or {}).get(node) if holder is not None else None
            if span is not None:
                position = positions[node]
                assert span == (position.start.line, position.start.column, position.end.line, position.end.column), chunk.code_for(node)
                read += 1
    assert read > 50


def test_the_arguments_of_a_call_over_several_lines_inside_a_method_are_placed_without_the_class_positions() -> None:
    chunk = ModuleAnalysis(RECIPE_WITH_A_LOADER, "recipe.py").chunks[0]
    (loader,) = _calls_named(chunk, "StatefulDataLoader")
    inner = [loader.func, loader.args[-1], loader.args[-1].value.args[-1]]
    ranges = [chunk.range_of(node, within=loader) for node in inner]
    assert chunk._positions is None
    assert ranges == [chunk.range_of(node) for node in inner] == [(3, 18, 3, 36), (9, 13, 12, 14), (11, 17, 11, 51)]
