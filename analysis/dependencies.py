"""What a rule read beyond the statement it was checking, so its findings can be kept after an edit.

The language server keeps each rule's findings for a top-level statement across edits when
nothing the rule looked at has changed. Most of what a rule reads is reached by name (an
imported alias, a module-level binding, a local function or class), and the module decides
from names alone which statements an edit can reach (``ModuleAnalysis.updated``). The rest is
module-wide (every call in the file, the whole text, all scopes): a rule that reads any of it is
recorded here as depending on the whole module, and its findings for that statement are
recomputed after every edit. A few module-wide facts are small values (the first line that shows
CUDA); those are recorded with the value seen, and a kept finding is valid while the value is.
A few module-wide lists of calls (the calls of one local function, the file's backward calls) are
recorded with the call events seen: a kept finding is valid while the list holds the same events
(a caller walked again, or a call added or gone, makes new ones), each in a statement kept as it
was or in a class edited inside one method (``same_calls``), whatever happened elsewhere.

A rule that checks one scope at a time (``Rule.check_scope``) is recorded per scope of a statement
that holds several (the methods of a class): what it read of the flows of other functions, and the
lines of its own statement it read. After an edit inside one method, the results of the other
methods are kept while those flows are the same objects and those lines did not move
(``ModuleAnalysis.scope_result_holds``).

A key typed on a line that stays broken leaves every statement's tree as it was (the line is
blanked in it): the analysed program is the same. A result that read the module's trees
beyond its statement, but not the module's text (which holds the broken line as typed), is kept
for as long as the program is (``KeptResult.program``, ``ModuleAnalysis.program``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from .events import CallEvent
    from .flow import ScopeAnalysis
    from .parsing import ParsedChunk
    from .summary import FunctionInfo

_local = threading.local()
T = TypeVar("T")


class Superseded(Exception):
    """The text being analysed changed: the analysis stopped between two statements' checks.

    Defined here, with nothing heavy imported, so that the language server can catch it before its
    first analysis has imported LibCST."""


class Reads:
    """What one rule read while checking one statement, or one scope of it."""

    __slots__ = ("chunk", "scope", "whole_module", "text", "facts", "placed", "flows", "own_lines", "calls")

    def __init__(self, chunk: ParsedChunk, scope: ScopeAnalysis | None = None) -> None:
        self.chunk = chunk
        self.scope = scope
        self.whole_module = False
        self.text = False  # read the module's text beyond the statement's own unbroken lines
        self.facts: dict[Hashable, Any] = {}
        # Statements whose line numbers the rule read, with the first line and the revision each had then.
        self.placed: dict[int, tuple[ParsedChunk, int, int]] = {}
        # Checking one scope: the functions whose flow it asked for, with the flow it got, and the
        # lines of its own statement it read (first and last of each read), which are not in ``placed``.
        self.flows: dict[FunctionInfo, ScopeAnalysis | None] = {}
        self.own_lines: set[tuple[int, int]] = set()
        # Module-wide lists of calls it read (``note_calls``): what each list was then.
        self.calls: dict[object, tuple[CallEvent, ...]] = {}

    def read_beyond(self) -> bool:
        """Whether the rule read anything beyond its statement (its scope) that is not module-wide."""
        return bool(self.facts or self.placed or self.flows or self.own_lines or self.calls)


class KeptResult:
    """One rule's findings for one statement, the module-wide values they were computed with, and
    the statements whose lines they cite (a message may quote a line number: a statement that
    moved makes the result stale). For a rule checked scope by scope, ``scopes`` holds each
    scope's own result (those that read nothing module-wide), and ``whole`` says whether the
    statement's result may be kept as a whole (no scope read anything module-wide). ``program``: for
    a result that read the module's trees beyond its statement, the program it was computed on
    (``ModuleAnalysis.program``), which it is kept for."""

    __slots__ = ("findings", "facts", "placed", "calls", "scopes", "whole", "program")

    def __init__(self, findings: Sequence, reads: Reads, program: object | None = None) -> None:
        self.findings = findings
        self.facts = reads.facts
        self.placed = tuple(reads.placed.values())
        self.calls = tuple(reads.calls.items())
        self.program = program
        self.scopes: dict[ScopeAnalysis, ScopeResult] | None = None
        self.whole = True

    @classmethod
    def of_scopes(cls, chunk: ParsedChunk, findings: Sequence, scopes: dict[ScopeAnalysis, ScopeResult], whole: bool) -> KeptResult:
        """The result of a rule checked scope by scope: what each scope's check read, together."""
        reads = Reads(chunk)
        for result in scopes.values():
            reads.facts.update(result.facts)
            reads.calls.update(result.calls)
            for where in result.placed:
                reads.placed[id(where[0])] = where
            if result.own_lines:
                reads.placed[id(chunk)] = (chunk, chunk.chunk.start_line, chunk.revision)
        combined = cls(findings, reads)
        combined.scopes, combined.whole = scopes, whole
        return combined


class ScopeResult:
    """One rule's findings for one scope, and what the check of that scope read beyond it
    (``bare``: nothing, so it holds while its scope is the same flow)."""

    __slots__ = ("findings", "facts", "placed", "flows", "own_lines", "calls", "bare", "needs_absent")
    program = None  # what ``ModuleAnalysis.still_holds`` asks of every kept result: a scope's reads none

    def __init__(self, findings: Sequence, reads: Reads) -> None:
        self.findings = findings
        # the rule declares what its check needs (``Rule.scope_needs``) and the scope's followed events held none
        self.needs_absent = False
        self.facts = reads.facts
        self.placed = tuple(reads.placed.values())
        self.flows = tuple(reads.flows.items())
        self.own_lines = tuple(reads.own_lines)
        self.calls = tuple(reads.calls.items())
        self.bare = not (self.facts or self.placed or self.flows or self.own_lines or self.calls)

    @staticmethod
    def of(findings: Sequence, reads: Reads) -> ScopeResult:
        if findings or reads.read_beyond():
            return ScopeResult(findings, reads)
        return NOTHING_IN_SCOPE


def _nothing_in_scope() -> ScopeResult:
    result = ScopeResult.__new__(ScopeResult)
    result.findings, result.facts, result.placed, result.flows, result.own_lines, result.calls, result.bare = (), {}, (), (), (), (), True
    result.needs_absent = False
    return result


# What most scopes' checks come to: nothing found, nothing read beyond the scope.
NOTHING_IN_SCOPE = _nothing_in_scope()


def flows_hold(result: ScopeResult, resumed: ScopeAnalysis | None, none_needed: Callable[[ScopeAnalysis], bool] | None) -> ScopeResult | None:
    """``result`` if every flow its check asked for is the same (``resumed``, the flow walked on from the
    edited statement, is the same object, changed), else None; but a result that found nothing because
    none of the events it followed was one its rule needs (``Rule.scope_needs``, ``needs_absent``) is
    kept while none of the functions whose flow changed now follows one either (``none_needed``, asked
    of each one's flow; ``patterns.follows_none``): the events the scope
    follows now are those of flows that did not change, which it followed before, and those each
    changed function follows from itself, as deep or deeper. Kept, it names the flows as they are now,
    with those the changed ones follow, so that a later change of any of them is seen."""
    for function, analysis in result.flows:  # loops, not all(), here and in still_holds: asked of every kept scope result at every key
        if function._analysis is not analysis or analysis is resumed:
            break
    else:
        return result
    changed = [function for function, analysis in result.flows if function._analysis is not analysis or analysis is resumed]
    if none_needed is None or not result.needs_absent:
        return None
    flows = dict(result.flows)
    for function in changed:
        analysis = function._analysis
        if analysis is None or not none_needed(analysis):
            return None
        flows[function] = analysis
        flows.update(analysis.followed["events"][1])
    kept = ScopeResult.__new__(ScopeResult)
    kept.findings, kept.facts, kept.placed, kept.own_lines, kept.calls = result.findings, result.facts, result.placed, result.own_lines, result.calls
    kept.flows, kept.bare, kept.needs_absent = tuple(flows.items()), False, True
    return kept


def _nothing_found() -> KeptResult:
    result = KeptResult.__new__(KeptResult)
    result.findings, result.facts, result.placed, result.calls, result.scopes, result.whole, result.program = (), {}, (), (), None, True, None
    return result


# Most rules find nothing in most statements and read nothing beyond them: one shared result for all of those.
NOTHING_FOUND = _nothing_found()


class KeptStatement:
    """Every selected rule's kept result for one statement (``complete``: each may be kept as a whole)."""

    __slots__ = ("results", "facts", "placed", "calls", "complete", "program")

    def __init__(self, results: dict[str, KeptResult], rule_count: int) -> None:
        self.results = results
        self.complete = len(results) == rule_count and all(result.whole for result in results.values())
        # the program the results that read beyond the statement were computed on (all the same one)
        self.program = next((result.program for result in results.values() if result.program is not None), None)
        # What all of them depend on together: checked once, they can be kept at once.
        self.facts: dict[Hashable, Any] = {}
        placed: dict[int, tuple[ParsedChunk, int, int]] = {}
        calls: dict[object, tuple[CallEvent, ...]] = {}
        for result in results.values():
            self.facts.update(result.facts)
            calls.update(result.calls)
            for where in result.placed:
                placed[id(where[0])] = where
        self.placed = tuple(placed.values())
        self.calls = tuple(calls.items())


class recording:
    """Record, for the duration of a ``with`` block, what the running rule reads (of one of the
    statement's scopes, when ``scope`` is given)."""

    __slots__ = ("reads", "_outer")

    def __init__(self, chunk: ParsedChunk, scope: ScopeAnalysis | None = None) -> None:
        self.reads = Reads(chunk, scope)

    def __enter__(self) -> Reads:
        self._outer = getattr(_local, "reads", None)
        _local.reads = self.reads
        return self.reads

    def __exit__(self, *exc_info) -> None:
        _local.reads = self._outer
        if self._outer is not None and self.reads.whole_module:
            self._outer.whole_module = True
            self._outer.text = self._outer.text or self.reads.text


class unrecorded:
    """Compute, for the duration of a ``with`` block, what is recorded otherwise (a module fact's
    value, which is recorded with the value instead): nothing read in it counts for the running rule."""

    __slots__ = ("_outer",)

    def __enter__(self) -> None:
        self._outer = getattr(_local, "reads", None)
        _local.reads = None

    def __exit__(self, *exc_info) -> None:
        _local.reads = self._outer


def current() -> Reads | None:
    return getattr(_local, "reads", None)


def note_whole_module() -> None:
    reads = getattr(_local, "reads", None)
    if reads is not None:
        reads.whole_module = True


def note_whole_text() -> None:
    """A read of the module's text (which holds a broken line as typed, not as analysed)."""
    count_text_read()
    reads = getattr(_local, "reads", None)
    if reads is not None:
        reads.whole_module = reads.text = True


def count_text_read() -> None:
    """A value read off the module's text: it is counted (``text_reads``), and a rule that reads it
    records it as a module-wide value (``note_fact``), not as a read of the text."""
    _local.text_reads = getattr(_local, "text_reads", 0) + 1


def text_reads() -> int:
    """How many times this thread has read a module's text: a value computed in between read it."""
    return getattr(_local, "text_reads", 0)


def note_position(chunk: ParsedChunk, first: int, last: int) -> None:
    """The rule read the lines ``first`` to ``last`` of a statement (module coordinates)."""
    reads = getattr(_local, "reads", None)
    if reads is None:
        return
    if reads.scope is not None and chunk is reads.chunk:
        reads.own_lines.add((first, last))
    elif id(chunk) not in reads.placed:
        reads.placed[id(chunk)] = (chunk, chunk.chunk.start_line, chunk.revision)


def note_flow(function: FunctionInfo, analysis: ScopeAnalysis | None) -> None:
    """The rule asked for a function's flow: a scope's kept result holds while the function has that flow."""
    reads = getattr(_local, "reads", None)
    if reads is not None and reads.scope is not None:
        reads.flows.setdefault(function, analysis)


def note_flows(read: Sequence[tuple[FunctionInfo, ScopeAnalysis | None]]) -> None:
    """``note_flow`` for each function of ``read`` (what a kept value's computation asked for): once for
    all of them, since a kept list of the calls a method makes may have followed hundreds."""
    reads = getattr(_local, "reads", None)
    if reads is not None and reads.scope is not None:
        flows = reads.flows
        for function, analysis in read:
            flows.setdefault(function, analysis)


def kept_with_scope(
    scope: ScopeAnalysis, key: object, compute: Callable[[], T], none_found: Callable[[ScopeAnalysis], bool] | None = None,
) -> T:
    """A value computed from one scope's flow and the flows of the local functions it asks for, kept
    with the scope (``ScopeAnalysis.followed``, which a new walk or a resumed one starts empty) while
    those functions have the same flows: a key elsewhere in the file asks it again of a kept scope.
    What computing it read counts for the running rule each time it is asked; a value whose
    computation read anything else beyond the scope (a module-wide value, another statement's lines)
    is computed again at every ask. With ``none_found`` (asked of a function's new flow: nothing it
    follows is what the value looks for), an empty value is also kept while every function whose
    flow changed finds none, as ``flows_hold`` keeps a scope's result that found nothing."""
    kept = scope.followed.get(key)
    if kept is not None and all(function._analysis is analysis for function, analysis in kept[1]):
        note_flows(kept[1])  # what asking for them again would have recorded
        return kept[0]
    if kept is not None and none_found is not None and not kept[0]:
        flows = _none_found_still(kept[1], none_found)
        if flows is not None:
            scope.followed[key] = (kept[0], flows)
            note_flows(flows)
            return kept[0]
    outer = getattr(_local, "reads", None)
    captured = _local.reads = Reads(scope.chunk, scope)
    try:
        value = compute()
    finally:
        _local.reads = outer
    flows = tuple(captured.flows.items())
    if captured.whole_module or captured.facts or captured.placed or captured.own_lines or captured.calls:
        scope.followed.pop(key, None)
        _replay(captured, outer)
    else:
        scope.followed[key] = (value, flows)
    note_flows(flows)
    return value


def _none_found_still(
    flows: tuple[tuple[FunctionInfo, ScopeAnalysis | None], ...], none_found: Callable[[ScopeAnalysis], bool],
) -> tuple[tuple[FunctionInfo, ScopeAnalysis | None], ...] | None:
    """The flows an empty kept value read, as they are now, with those each changed one follows, if every
    function whose flow changed finds none of what the value looks for (``none_found``); else None. What
    the scope follows now is what it followed before through the flows that did not change, and through a
    changed one part of what that one follows on its own (as deep or less, past fewer functions already
    on the way)."""
    now = dict(flows)
    for function, analysis in flows:
        current = function._analysis
        if current is analysis:
            continue
        if current is None or not none_found(current):
            return None
        now[function] = current
        now.update(current.followed["events"][1])
    return tuple(now.items())


def _replay(captured: Reads, outer: Reads | None) -> None:
    """Record for the running rule what a computation recorded on its own read beyond the flows."""
    if outer is None:
        return
    outer.whole_module = outer.whole_module or captured.whole_module
    outer.text = outer.text or captured.text
    outer.facts.update(captured.facts)
    for key, calls in captured.calls.items():
        outer.calls.setdefault(key, calls)
    for chunk_id, where in captured.placed.items():
        outer.placed.setdefault(chunk_id, where)
    for first, last in captured.own_lines:
        note_position(captured.chunk, first, last)


def scoped() -> bool:
    """Whether the running rule checks one scope of its statement (``Rule.check_scope``)."""
    reads = getattr(_local, "reads", None)
    return reads is not None and reads.scope is not None


def note_calls(key: object, calls: Sequence[CallEvent]) -> None:
    """The rule read a module-wide list of calls (``ModuleAnalysis.calls_read`` names them by ``key``:
    a local function for its calls, or the name of the list): a kept result holds while the list
    holds the same call events."""
    reads = getattr(_local, "reads", None)
    if reads is not None and key not in reads.calls:
        reads.calls[key] = tuple(calls)


def same_calls(now: Sequence[CallEvent], then: Sequence[CallEvent], kept: frozenset[int], edited_class: int) -> bool:
    """Whether a list of calls holds the same call events it held when a kept result read it, each in a
    statement kept as it was (``kept``) or in the class edited inside one method (``edited_class``,
    whose methods walked again make new events). A function walked on from its edited statement
    (``FunctionInfo.resume``) keeps its events before the edit but not what follows them, which the
    rule may have read of the caller (what it does with the call's result)."""
    return len(now) == len(then) and all(
        call is seen and (call.chunk.index in kept or call.chunk.index == edited_class) for call, seen in zip(now, then)
    )


def note_fact(name: Hashable, value: Any) -> None:
    reads = getattr(_local, "reads", None)
    if reads is not None:
        reads.facts[name] = value


class WholeModuleDict(dict):
    """A name table whose lookups by name are free, while walking all of it is a module-wide read."""

    def __iter__(self) -> Iterator:
        note_whole_module()
        return super().__iter__()

    def keys(self):
        note_whole_module()
        return super().keys()

    def values(self):
        note_whole_module()
        return super().values()

    def items(self):
        note_whole_module()
        return super().items()

    def __len__(self) -> int:
        note_whole_module()
        return super().__len__()
