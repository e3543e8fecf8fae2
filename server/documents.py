"""Per-document state shared by every feature: text, version, analysis and findings.

An edit re-parses only the top-level statements whose text changed (``ModuleAnalysis.updated``);
the findings are recomputed from the reused parses. A result is keyed by the text's version and
the settings it was computed with, so a stale result is recognised and never shown.
"""

from __future__ import annotations

import enum
import logging
import string
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec

from trainlint.analysis.dependencies import Superseded
from trainlint.analysis.engine_codes import NOT_ANALYSED
from trainlint.analysis.findings import Finding
from trainlint.analysis.lines import split_lines
from trainlint.analysis.workspace import Workspace
from trainlint.linter import Linter
from trainlint.settings import EffectiveSettings

from . import timeline
from .compiled_code_cache import compiled_code_cache

# The analysis (LibCST, the rules) and the estimator are imported where first used, or ahead of that
# by ``import_ahead`` on a thread of its own: the server answers `initialize` without them.
if TYPE_CHECKING:
    from trainlint.analysis.module import ModuleAnalysis
    from trainlint.estimator.anchors import Anchor
    from trainlint.estimator.editor import EditorEstimate

log = logging.getLogger("trainlint.server")

BOM = "\ufeff"

# Larger documents are not analysed as you type: one diagnostic says so, on save too. An analysis
# costs about 20-150 µs a token on the 2-core development machine (20-70 in real code, about 60 an
# item of a literal list, 150 in a file of one-line statements), and LibCST holds the interpreter,
# event loop included, while it reads a statement (about 30 ms per 1,000 items of a literal). A
# 1.6-million-item list (4.8 MB) took minutes and held the event loop for half a minute; the largest
# file of 40 repositories of training code (peft's tests/test_custom_models.py, 7,866 lines) has
# about 45,000 tokens and takes 1.5 s.
MAX_DOCUMENT_CHARS = 5_000_000
MAX_DOCUMENT_TOKENS = 60_000
# The analysis budget of a document: one of more tokens than this (about 3,000 lines of code), or
# whose analysis once took longer, is analysed in its own lane (``TrainlintServer.lane``), so that
# it never holds up the others.
LARGE_DOCUMENT_TOKENS = 15_000
ANALYSIS_BUDGET_S = 2.0
# A top-level statement this long has its nodes' positions worked out after the document's first
# analysis (``DocumentState.warm_positions``); a shorter one's cost the first key inside it little.
WARMED_STATEMENT_LINES = 200
# What a token is counted by: every bracket, comma, operator, colon and statement has one of these.
_TOKEN_MARKS = (string.punctuation.replace("_", "") + "\n").encode()


_analysis_imported = threading.Lock()
_analysis_ready = threading.Event()  # set once ``import_analysis`` is done: later calls return at once
_first_analysis_done = threading.Event()  # set when any document's analysis first finishes


def import_analysis() -> None:
    """Import the analysis and its rules (half a second of CPU), once. An analysis calls this first;
    the server calls it ahead of that (``import_ahead``). The lock keeps two threads from importing
    the same modules at once, where Python's import locks can hand one of them a module still half
    initialised."""
    with _analysis_imported:
        if _analysis_ready.is_set():
            return
        with compiled_code_cache(attrs=False):  # LibCST's and the analysis' dataclasses as compiled at the last launch
            from trainlint.analysis.engine import select_rules
            from trainlint.analysis.settings import AnalysisSettings

            select_rules(AnalysisSettings())  # the built-in rules and installed packages' rules
        _analysis_ready.set()


def analysis_imported() -> bool:
    """Whether the analysis and its rules are imported (``import_analysis`` is done)."""
    return _analysis_ready.is_set()


def import_ahead() -> None:
    """What the server runs on a thread of its own as it starts, while the client greets it: the
    analysis' import, so that the first analysis finds it done; then, once a first analysis has
    finished, the estimator's (80 ms of CPU), which hovers, inlay hints and the pause after an
    analysis need (``find_asked``) and no report does: imported earlier, it would hold the
    interpreter while the first analysis runs."""
    cpu = timeline.cpu_ns()
    import_analysis()
    timeline.mark("imported", cpu=timeline.cpu_ns() - cpu)
    _first_analysis_done.wait()
    from trainlint.estimator.anchors import find_anchors  # noqa: F401 - imported for the hovers to come
    from trainlint.estimator.editor import estimate_module  # noqa: F401


def token_estimate(text: str) -> int:
    """About how many tokens ``text`` has, counted in C: its punctuation marks and line breaks (a
    name or number between two is not counted, a mark inside a string or comment is)."""
    data = text.encode("utf-8", "surrogatepass")
    return len(data) - len(data.translate(None, _TOKEN_MARKS))


class Stopped(enum.Enum):
    """What a document's analysis job gives when it stopped because the text changed (``scheduling``)."""

    STOPPED = "stopped"


STOPPED = Stopped.STOPPED


@dataclass(eq=False)
class Asked:
    """What hovers and inlay hints ask of an analysed text: found at a pause after the analysis, on
    its lane (``DocumentState.find_asked``), or when a hover or inlay hint asks before that; until
    then, those of the analysis before it, carried to this text (``carried``)."""

    anchors: list[Anchor] | None = None  # the lines a VRAM estimate belongs to; None: not looked for
    # VRAM estimates of this text per (target GPU, model); shared with the analyses carried from it
    vram: dict[tuple[str | None, str | None], EditorEstimate | None] = field(default_factory=dict)
    # The anchors (their lines carried through the edits since) and the estimates of an older text of
    # the document: answered at once, and found afresh for this text at the next pause.
    carried: bool = False


@dataclass(frozen=True)
class Analysis:
    version: int | None
    settings: EffectiveSettings
    text: str
    findings: list[Finding]
    asked: Asked = field(default_factory=Asked, compare=False)
    changes: int = -1  # how many edits the editor's document had had when this text was read (-1: unknown)
    # An analysis of an older text whose positions were carried to this one (``carry``); None: this text's own.
    carried_from: Analysis | None = field(default=None, compare=False)
    # Findings an earlier session's analysis of this same text gave (``remembered``), answered until
    # this text's own analysis is done; they are not this process' analysis, which still runs.
    remembered: bool = field(default=False, compare=False)

    @property
    def source(self) -> Analysis:
        """The analysis that ran: this one, or the one it was carried from."""
        return self.carried_from if self.carried_from is not None else self

    @cached_property
    def lines(self) -> list[str]:
        return split_lines(self.text)


@dataclass
class DocumentState:
    uri: str
    path: Path | None
    workspace: Workspace | None = None  # resolves imports of the user's other files
    module: ModuleAnalysis | None = None
    latest: Analysis | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)
    over_budget: bool = False  # an analysis of this document took longer than ANALYSIS_BUDGET_S
    tokens: int | None = None  # ``token_estimate`` of the text last analysed
    analyses: int = 0  # texts analysed (printDebugInfo shows it: requests share analyses)
    # Bumped (on the event loop) whenever the text to analyse changes: a running analysis of an
    # older text then stops at its next statement (``scheduling``). ``stopped`` counts analyses
    # stopped so (printDebugInfo), ``stopped_in_a_row`` those since one last finished.
    edits: int = 0
    stopped: int = 0
    stopped_in_a_row: int = 0
    linter: Linter = field(default_factory=Linter)  # chooses the rules the settings select
    # What a hover or inlay hint asked of the document: the lines a VRAM estimate belongs to, and the
    # estimates per (target GPU, model). They are found at a pause after an analysis (``find_asked``,
    # while its parse is at hand: the next analysis consumes it), not as part of it, and each analysis
    # starts with the last ones carried to its text, so that they answer at once and never delay a
    # report; a document nobody hovers has them found once, for its first text (``asked_once``).
    anchors_wanted: bool = False
    vram_wanted: set[tuple[str | None, str | None]] = field(default_factory=set)
    asked_once: bool = False
    # The last analysis carried to a later text (``scheduling.carried``): (from, edit count, carried),
    # so that the pull, inlay-hint and hover requests of one key carry it once.
    carried: tuple[Analysis, int, Analysis] | None = None
    warmed: bool = False  # ``warm_positions`` asked for once, after the document's first analysis
    first_remembered: bool = False  # its first report was remembered from an earlier session (``remembered``)

    def expensive(self, text: str) -> bool:
        """Whether analysing this text may hold up other documents' analyses. Asked on the event
        loop: the text is counted for a document's first analysis only, later ones go by the size
        of the text last analysed (a paste that makes it much larger costs one analysis over the
        budget, and the next ones go to the other lane)."""
        tokens = self.tokens if self.tokens is not None else token_estimate(text)
        return self.over_budget or tokens > LARGE_DOCUMENT_TOKENS

    def with_version(self, analysis: Analysis, version: int | None, changes: int) -> Analysis:
        """The analysis of an unchanged text, under the version (and edit count) the editor gives it now."""
        if analysis.version == version and analysis.changes == changes:
            return analysis
        relabelled = replace(analysis, version=version, changes=changes)
        if self.latest is analysis:  # asked on the event loop while no analysis of the document runs
            self.latest = relabelled
        return relabelled

    def analyse(
        self, text: str, version: int | None, settings: EffectiveSettings, superseded: Callable[[], bool] | None = None,
        changes: int = -1, carry_asked: Callable[[Analysis], None] | None = None,
    ) -> Analysis:
        """The findings for this text, reusing the parses of unchanged statements; ``carry_asked`` gives
        a new analysis what hovers asked of the one before, before it becomes the latest.

        Raises ``Superseded`` when ``superseded`` says the text changed before the rules were
        done; the parse of ``text`` and what the rules did stay for the next analysis.
        """
        with self.lock:
            latest = self.latest
            unchanged = self.module is None or self.module.imports_unchanged()
            if latest is not None and latest.text == text and latest.settings == settings and unchanged and not latest.remembered:
                if latest.version != version or latest.changes != changes:
                    latest = replace(latest, version=version, changes=changes)
                    self.latest = latest
                return latest
            asked = Asked()
            self.analyses += 1
            started = time.perf_counter()
            self.tokens = token_estimate(text)
            if len(text) > MAX_DOCUMENT_CHARS or self.tokens > MAX_DOCUMENT_TOKENS:
                findings = [_too_large(self.display_path, len(text), self.tokens)]
                asked.anchors = []  # a document too large to analyse has none
            else:
                findings = self._findings(text, settings, superseded)
            if time.perf_counter() - started > ANALYSIS_BUDGET_S:
                self.over_budget = True
            result = Analysis(version, settings, text, findings, asked, changes=changes)
            if carry_asked is not None:
                carry_asked(result)
            self.latest = result
            self.stopped_in_a_row = 0
            _first_analysis_done.set()
            return self.latest

    def find_asked(self, analysis: Analysis, keys: set[tuple[str | None, str | None]], edits: int) -> None:
        """At a pause after ``analysis``, on its lane: the lines a VRAM estimate belongs to and the
        estimates for ``keys`` (target GPU, model), found in the module it left and replacing any
        carried from an older text. Nothing is kept once the text has changed since (``edits``): the
        next analysis needs the lane, and its own pause finds them."""
        from trainlint.analysis.engine import collector_paused
        from trainlint.estimator.anchors import find_anchors
        from trainlint.estimator.editor import estimate_module

        with self.lock:
            if self.edits != edits or not self._module_of(analysis):
                return
            assert self.module is not None
            with collector_paused():
                anchors = find_anchors(self.module)
                estimates = {}
                for key in sorted(keys, key=str) if anchors else ():  # no anchor: nothing asks for an estimate
                    if self.edits != edits:
                        return
                    estimates[key] = estimate_module(self.module, *key)
            asked = analysis.asked
            asked.vram, asked.anchors, asked.carried = estimates, anchors, False

    def vram(self, analysis: Analysis, target_gpu: str | None, target_model: str | None = None) -> EditorEstimate | None:
        """The estimate for the analysed text; None when a newer text has been analysed since."""
        from trainlint.analysis.engine import collector_paused
        from trainlint.estimator.editor import estimate_module

        key = (target_gpu, target_model)
        vram = analysis.asked.vram
        with self.lock:
            if key in vram:
                return vram[key]
            if not self._module_of(analysis):
                return None
            assert self.module is not None
            with collector_paused():
                estimate = estimate_module(self.module, target_gpu, target_model)
            vram[key] = estimate
            return estimate

    def anchors(self, analysis: Analysis) -> list[Anchor] | None:
        """The lines a VRAM estimate belongs to in the analysed text, found now if no analysis found
        them (the module is still of that text); None when they cannot be found any more: a newer
        text has been analysed since, or ``analysis`` was carried to a newer text."""
        from trainlint.analysis.engine import collector_paused
        from trainlint.estimator.anchors import find_anchors

        asked = analysis.asked
        with self.lock:
            if asked.anchors is None and analysis.carried_from is None and self._module_of(analysis):
                assert self.module is not None
                with collector_paused():
                    asked.anchors = find_anchors(self.module)
            return asked.anchors

    def warm_positions(self, edits: int) -> None:
        """Work out, after the document's first analysis, the positions of the nodes of its long
        statements, which the first key typed inside one needs to find the statement it re-parses
        (``splicing.locate``): about 0.4 s of CPU for a 3,700-line class, which that key used to pay.
        Stops, between statements, once the text has changed since (``edits``): that analysis needs
        the worker, and works out what it needs itself."""
        with self.lock:
            if self.module is None:
                return
            for chunk in self.module.chunks:
                if self.edits != edits:
                    return
                if chunk.module is not None and chunk.chunk.line_count >= WARMED_STATEMENT_LINES:
                    chunk.positions()

    def _module_of(self, analysis: Analysis) -> bool:
        """Whether the document's module is the one the last analysis left, ``analysis`` (or the same
        one under another version), still of its text (asked under the lock)."""
        if self.latest is None or self.latest.asked is not analysis.asked or self.module is None:
            return False
        return self.module.text == analysis.text.removeprefix(BOM)  # else a newer text's analysis stopped half-way

    @property
    def display_path(self) -> str:
        return str(self.path) if self.path is not None else self.uri

    def _findings(self, text: str, settings: EffectiveSettings, superseded: Callable[[], bool] | None) -> list[Finding]:
        import_analysis()
        from trainlint.analysis.engine import collector_paused, findings_for
        from trainlint.analysis.module import ModuleAnalysis

        # A leading byte-order mark is no character to Python, nor to LibCST (which drops it): the
        # analysis reads the text after it, and the columns of its first line move one to the right.
        bom = text.startswith(BOM)
        if bom:
            text = text[1:]
        with collector_paused():
            # `updated` consumes the previous analysis: if anything below fails, start afresh next time.
            previous, self.module = self.module, None
            module = (
                previous.updated(text) if previous is not None
                else ModuleAnalysis(text, self.display_path, workspace=self.workspace)
            )
            try:
                findings = findings_for(module, settings.analysis, self.linter.rules_for(settings.analysis), superseded)
            except Superseded:
                self.module = module  # what it parsed and checked is right for `text`: the next one goes on
                self.stopped += 1
                self.stopped_in_a_row += 1
                raise
            self.module = module
        return [_after_bom(finding) for finding in findings] if bom else findings


def _after_bom(finding: Finding) -> Finding:
    """A finding of the text after a byte-order mark, in the coordinates of the text with it."""

    def column(line: int, value: int) -> int:
        return value + 1 if line == 1 else value

    fix = finding.fix
    if fix is not None:
        fix = msgspec.structs.replace(fix, edits=tuple(
            msgspec.structs.replace(edit, column=column(edit.line, edit.column), end_column=column(edit.end_line, edit.end_column))
            for edit in fix.edits
        ))
    return msgspec.structs.replace(
        finding, column=column(finding.line, finding.column), end_column=column(finding.end_line, finding.end_column), fix=fix,
    )


def _too_large(path: str, size: int, tokens: int) -> Finding:
    return Finding(
        path=path, line=1, column=1, end_line=1, end_column=2, code=NOT_ANALYSED.code, name=NOT_ANALYSED.name,
        severity=NOT_ANALYSED.severity,
        message=f"this document is too large to check as you type: {size:,} characters, about {tokens:,} tokens; "
        f"trainlint checks documents of up to {MAX_DOCUMENT_CHARS:,} characters and about {MAX_DOCUMENT_TOKENS:,} tokens "
        "(some 10,000 lines of code) as you type. Run `trainlint check` on it instead",
    )
