"""What a rule read beyond the statement it was checking, so its findings can be kept after an edit.

The language server keeps each rule's findings for a top-level statement across edits when
nothing the rule looked at has changed. Most of what a rule reads is reached by name (an
imported alias, a module-level binding, a local function or class), and the module decides
from names alone which statements an edit can reach (``ModuleAnalysis.updated``). The rest is
module-wide (every call in the file, the whole text, all scopes): a rule that reads any of it is
recorded here as depending on the whole module, and its findings for that statement are
recomputed after every edit. A few module-wide facts are small values (the first line that shows
CUDA); those are recorded with the value seen, and a kept finding is valid while the value is.

A key typed on a line that stays broken leaves every statement's tree as it was (the line is
blanked in it): the analysed program is the same. A result that read the module's trees
beyond its statement, but not the module's text (which holds the broken line as typed), is kept
for as long as the program is (``KeptResult.program``, ``ModuleAnalysis.program``).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .parsing import ParsedChunk

_local = threading.local()


class Superseded(Exception):
    """The text being analysed changed: the analysis stopped between two statements' checks.

    Defined here, with nothing heavy imported, so that the language server can catch it before its
    first analysis has imported LibCST."""


class Reads:
    """What one rule read while checking one statement."""

    __slots__ = ("chunk", "whole_module", "text", "facts", "placed")

    def __init__(self, chunk: ParsedChunk) -> None:
        self.chunk = chunk
        self.whole_module = False
        self.text = False  # read the module's text beyond the statement's own unbroken lines
        self.facts: dict[str, Any] = {}
        # Statements whose line numbers the rule read, with the first line and the revision each had then.
        self.placed: dict[int, tuple[ParsedChunk, int, int]] = {}


class KeptResult:
    """One rule's findings for one statement, the module-wide values they were computed with, and
    the statements whose lines they cite (a message may quote a line number: a statement that
    moved makes the result stale). ``program``: for a result that read the module's trees beyond
    its statement, the program it was computed on (``ModuleAnalysis.program``), which it is kept for."""

    __slots__ = ("findings", "facts", "placed", "program")

    def __init__(self, findings: Sequence, reads: Reads, program: object | None = None) -> None:
        self.findings = findings
        self.facts = reads.facts
        self.placed = tuple(reads.placed.values())
        self.program = program


def _nothing_found() -> KeptResult:
    result = KeptResult.__new__(KeptResult)
    result.findings, result.facts, result.placed, result.program = (), {}, (), None
    return result


# Most rules find nothing in most statements and read nothing beyond them: one shared result for all of those.
NOTHING_FOUND = _nothing_found()


class KeptStatement:
    """Every selected rule's kept result for one statement."""

    __slots__ = ("results", "facts", "placed", "program")

    def __init__(self, results: dict[str, KeptResult]) -> None:
        self.results = results
        # the program the results that read beyond the statement were computed on (all the same one)
        self.program = next((result.program for result in results.values() if result.program is not None), None)
        # What all of them depend on together: checked once, they can be kept at once.
        self.facts: dict[str, Any] = {}
        placed: dict[int, tuple[ParsedChunk, int, int]] = {}
        for result in results.values():
            self.facts.update(result.facts)
            for where in result.placed:
                placed[id(where[0])] = where
        self.placed = tuple(placed.values())


class recording:
    """Record, for the duration of a ``with`` block, what the running rule reads."""

    __slots__ = ("reads", "_outer")

    def __init__(self, chunk: ParsedChunk) -> None:
        self.reads = Reads(chunk)

    def __enter__(self) -> Reads:
        self._outer = getattr(_local, "reads", None)
        _local.reads = self.reads
        return self.reads

    def __exit__(self, *exc_info) -> None:
        _local.reads = self._outer
        if self._outer is not None and self.reads.whole_module:
            self._outer.whole_module = True
            self._outer.text = self._outer.text or self.reads.text


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


def note_position(chunk: ParsedChunk) -> None:
    reads = getattr(_local, "reads", None)
    if reads is not None and id(chunk) not in reads.placed:
        reads.placed[id(chunk)] = (chunk, chunk.chunk.start_line, chunk.revision)


def note_fact(name: str, value: Any) -> None:
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
