"""When analyses run: one per document at a time, on a worker thread, shared by every request.

Diagnostics, code actions, hover, inlay hints and commands ask either ``analysis`` for the
analysis of a document's text as it is now (waiting for it), or ``last_finished`` for the last
one that finished, its positions carried through the edits made since (at once); none starts
one of its own. A result computed for a text that has since changed is never shown as the
text's own: a carried one says where it came from (``Analysis.carried_from``), and whoever was
answered from it is told when a newer one is done (``stale_diagnostics``, ``stale_hints``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from trainlint.analysis.dependencies import Superseded
from trainlint.settings import EffectiveSettings

from . import timeline
from .carry import carry_anchor, carry_finding
from .documents import STOPPED, Analysis, Asked, DocumentState, Stopped
from .notebooks import cell_analysis
from .remembered import remember_analysis

if TYPE_CHECKING:
    from trainlint.estimator.anchors import Anchor
    from trainlint.estimator.editor import EditorEstimate

    from .language_server import TrainlintServer

log = logging.getLogger("trainlint.server")

# An analysis is stopped for a newer text at most this many times in a row; the next one finishes,
# so that someone typing without a pause still sees diagnostics of a text a few keys old.
MAX_STOPS_IN_A_ROW = 3
# How long after a document's first report its long statements' positions are worked out: the
# report is sent first (``DocumentState.warm_positions``).
WARM_AFTER_S = 0.2
# How long after an analysis, with no edit since, the VRAM lines and estimates of its text are
# found (``DocumentState.find_asked``): longer than the time between two keys of someone typing.
ASKED_AFTER_S = 0.3


async def analysis(ls: TrainlintServer, uri: str) -> Analysis | None:
    """The analysis of the document's text as it is now.

    One analysis runs per document at a time, and every request shares it: a request that
    arrives while one runs waits for it, then, if the text has changed meanwhile, for one
    analysis of the text as it is then; the keystrokes in between get none of their own. An
    analysis whose text changes while it runs stops at its next statement (what it did is kept
    for the next one), unless the ones before it stopped too (``MAX_STOPS_IN_A_ROW``: typing
    without a pause still sees diagnostics). A cancelled request stops waiting; the analysis it
    waited for goes on for the next one.
    """
    if uri not in ls.documents and ls.workspace.get_notebook_document(cell_uri=uri) is not None:
        return await cell_analysis(ls, uri)
    state = ls.documents.get(uri)
    waited = False
    while True:
        current = ls.current_text(uri)
        if current is None or state is None or state is not ls.documents.get(uri):
            return None
        text, version = current
        settings = ls.settings_for(state)
        job = ls.jobs.get(uri)
        latest = state.latest
        if latest is not None and latest.remembered and latest.text == text and latest.settings == settings:
            if job is None:
                _start_analysis(ls, uri, state, text, version, settings)
            return latest  # an earlier session's findings for this very text, until its own analysis is done
        if job is None and latest is not None and latest.text == text and latest.settings == settings:
            if state.module is None or state.module.imports_unchanged():
                return state.with_version(latest, version, ls.changes_of(uri, version))
        if job is None or waited:
            if job is None:
                job = _start_analysis(ls, uri, state, text, version, settings)
            result = await asyncio.shield(job)
            if result is STOPPED:
                continue  # the text changed while it ran: analyse it as it is now
            return result
        await asyncio.shield(job)  # an analysis of an older text: then one of the text as it is then
        waited = True


def last_finished(ls: TrainlintServer, uri: str) -> Analysis | None:
    """At once, without waiting: the last finished analysis of an open document, its positions
    carried to the text as it is now (``carry``), or the text's own when it is done; and an
    analysis of the text as it is now runs (one is started if none does).

    None when there is nothing to answer from: no analysis has finished yet, the settings have
    changed since, or the edits since cannot be carried (a whole-text change; with run-on-save,
    the saved text's analysis is answered only while the saved text is the one analysed).
    """
    state = ls.documents.get(uri)
    current = ls.current_text(uri)
    if state is None or current is None:
        return None
    text, version = current
    settings = ls.settings_for(state)
    latest = state.latest
    job = ls.jobs.get(uri)
    if latest is not None and latest.text == text and latest.settings == settings and job is None and not latest.remembered:
        if state.module is None or state.module.imports_unchanged():
            return state.with_version(latest, version, ls.changes_of(uri, version))
    if job is None:
        _start_analysis(ls, uri, state, text, version, settings)
    if latest is None or latest.settings != settings:
        return None
    if latest.text == text:
        return latest
    return carried(ls, uri, latest, text, version)


def carried(ls: TrainlintServer, uri: str, analysis: Analysis, text: str, version: int | None) -> Analysis | None:
    """``analysis`` (of an older text of the document) with its positions carried to ``text``, the
    document's text as it is now; None when the edits between cannot be carried."""
    count = ls.changes_of(uri, version)
    if analysis.changes < 0 or count < 0:  # run on save: the saved text's edits are not known
        return None
    state = ls.documents.get(uri)
    if state is not None and state.carried is not None and state.carried[0] is analysis and state.carried[1] == count:
        return state.carried[2]
    document = ls.edited_document(uri)
    changes = document.changes_since(analysis.changes) if document is not None else None
    if changes is None:
        return None
    lines = analysis.lines
    findings = [found for finding in analysis.findings if (found := carry_finding(changes, finding, lines)) is not None]
    anchors = analysis.asked.anchors
    if anchors is not None:
        anchors = [found for anchor in anchors if (found := carry_anchor(changes, anchor, lines)) is not None]
    asked = Asked(anchors, analysis.asked.vram)  # the estimates are the analysed text's, whatever its lines
    result = Analysis(version, analysis.settings, text, findings, asked, changes=count, carried_from=analysis)
    if state is not None:
        state.carried = (analysis, count, result)
    return result


def _start_analysis(
    ls: TrainlintServer, uri: str, state: DocumentState, text: str, version: int | None, settings: EffectiveSettings,
) -> asyncio.Future[Analysis | Stopped | None]:
    """The document's one running analysis, of ``text``; shared by whoever waits for it."""
    loop = asyncio.get_running_loop()
    edits = state.edits
    changes = ls.changes_of(uri, version)
    timeline.mark("queued", version=version)

    def superseded() -> bool:  # asked on the worker thread, between statements
        if state.stopped_in_a_row >= MAX_STOPS_IN_A_ROW:
            return False
        return state.edits != edits or ls.documents.get(uri) is not state

    def analyse() -> Analysis:  # on the lane's thread
        cpu = timeline.cpu_ns()
        timeline.mark("started", version=version)
        try:
            result = state.analyse(text, version, settings, superseded, changes, carry_asked)
        except Superseded:
            timeline.mark("stopped", version=version, cpu=timeline.cpu_ns() - cpu)
            raise
        timeline.mark("finished", version=version, cpu=timeline.cpu_ns() - cpu)
        remember_analysis(ls, uri, state, result)
        return result

    async def run() -> Analysis | Stopped | None:
        result: Analysis | Stopped | None = None
        try:
            result = await loop.run_in_executor(ls.lane(state, text), analyse)
        except Superseded:  # counted by the document, whose stops ``superseded`` reads
            result = STOPPED
        except Exception:  # the engine never raises on bad input; this is our bug, not the user's
            log.exception("analysis of %s failed", uri)
        finally:
            ls.idle_gc.analysed()
            ls.report_plugin_problems()
            if ls.jobs.get(uri) is job:
                del ls.jobs[uri]
            _after_analysis(ls, uri, text, finished=isinstance(result, Analysis))
        if isinstance(result, Analysis) and not state.warmed:
            state.warmed = True  # once the report is out, on the document's lane, which its next analysis waits for
            loop.call_later(WARM_AFTER_S, loop.run_in_executor, ls.lane(state, text), state.warm_positions, edits)
        if isinstance(result, Analysis) and (state.anchors_wanted or state.vram_wanted or not state.asked_once):
            loop.call_later(ASKED_AFTER_S, _at_a_pause, ls, uri, state, result, state.edits)
        return result

    carry_asked = _asked_carrier(ls, uri, state, state.latest, changes)
    job = ls.jobs[uri] = asyncio.ensure_future(run())
    return job


def _asked_carrier(
    ls: TrainlintServer, uri: str, state: DocumentState, previous: Analysis | None, changes: int,
) -> Callable[[Analysis], None] | None:
    """A new analysis of a document someone hovered starts with the VRAM lines and estimates of the
    last finished one (``previous``), the lines carried through the edits between the two texts, so
    that a hover or inlay hint answers at once until the pause after it finds its own (``find_asked``).

    The edits between are read here, on the event loop, when the analysis is queued (its text is
    fixed by then); the carrier runs on the lane, before the new analysis becomes the document's
    latest: a hover that comes as the analysis ends, before the event loop has heard of it, finds the
    carried lines, not a finished analysis with none (an empty hover on a busy machine)."""
    if previous is None or previous.changes < 0 or changes < previous.changes:
        return None
    document = ls.edited_document(uri)
    between = document.changes_since(previous.changes) if document is not None else None
    if between is None:
        return None
    between = between[: changes - previous.changes]  # the edits up to the new text, not since
    lines = previous.lines

    def carry(result: Analysis) -> None:  # on the lane
        found = previous.asked.anchors  # read now: a pause or hover on this lane may have found them since
        if result.asked is previous.asked or result.asked.anchors is not None or found is None:
            return
        if not (state.anchors_wanted or state.vram_wanted):
            return
        asked = result.asked
        asked.vram = dict(previous.asked.vram)
        asked.anchors = [carried for anchor in found if (carried := carry_anchor(between, anchor, lines)) is not None]
        asked.carried = True

    return carry


def _at_a_pause(ls: TrainlintServer, uri: str, state: DocumentState, analysis: Analysis, edits: int) -> None:
    """On the event loop, ``ASKED_AFTER_S`` after an analysis: while the text is still the analysed
    one and no analysis runs, its VRAM lines and estimates are found on its lane, for the settings'
    target and whatever hovers asked for; once for every document, for the first text analysed, and
    then only for documents a hover or inlay hint asked about."""
    latest = state.latest
    if ls.documents.get(uri) is not state or state.edits != edits or uri in ls.jobs:
        return
    if latest is None or latest.asked is not analysis.asked:
        return
    state.asked_once = True
    keys = {(analysis.settings.analysis.target_gpu, analysis.settings.target_model), *state.vram_wanted}
    asked = analysis.asked
    if asked.anchors is not None and not asked.carried and keys <= asked.vram.keys():
        return  # a hover found them already
    carried = asked.carried  # inlay hints were answered from an older text's lines and estimate

    def find() -> None:  # on the lane
        cpu = timeline.cpu_ns()
        try:
            state.find_asked(analysis, keys, edits)
        except Exception:  # a bug of ours: the hover finds them when asked, or shows nothing
            log.exception("VRAM anchors of %s failed", uri)
        timeline.mark("vram lines", version=analysis.version, cpu=timeline.cpu_ns() - cpu)

    def found(_: object) -> None:  # on the event loop: the hints answered from the carried ones are asked again
        if carried and not asked.carried and ls.client.inlay_hint_refresh and ls.documents.get(uri) is state:
            ls.workspace_inlay_hint_refresh(None)

    asyncio.get_running_loop().run_in_executor(ls.lane(state, analysis.text), find).add_done_callback(found)


def _after_analysis(ls: TrainlintServer, uri: str, analysed: str, *, finished: bool) -> None:
    """Whoever was answered from an older analysis is told about a newer one, and the next
    analysis starts while the text has moved on and someone is still owed one.

    Pulled diagnostics: a client that can be asked to pull again is (``workspace/diagnostic/refresh``)
    after each analysis that finished. Inlay hints: once the text's own analysis is done."""
    state = ls.documents.get(uri)
    if state is None:
        return
    document = ls.edited_document(uri)
    if finished and state.latest is not None and state.latest.changes >= 0 and document is not None:
        document.forget_changes_before(state.latest.changes)  # nothing is carried from an older text
    current = ls.current_text(uri)
    if finished and uri in ls.stale_diagnostics:
        ls.stale_diagnostics.discard(uri)
        if ls.client.diagnostic_refresh:
            ls.workspace_diagnostic_refresh(None)
    if finished and uri in ls.stale_hints and current is not None and current[0] == analysed:
        ls.stale_hints.discard(uri)
        if ls.client.inlay_hint_refresh:
            ls.workspace_inlay_hint_refresh(None)
    owed = uri in ls.stale_diagnostics or uri in ls.stale_hints
    if owed and uri not in ls.jobs and current is not None and current[0] != analysed:
        last_finished(ls, uri)  # starts the analysis of the text as it is now


async def anchors(ls: TrainlintServer, uri: str, analysis: Analysis) -> list[Anchor]:
    """The lines of an analysed text a VRAM estimate belongs to (hover, inlay hints).

    Never waits for a running analysis: they are found at a pause after an analysis (``_at_a_pause``),
    and a new analysis starts with the last ones carried to its text (``_asked_carrier``). Asked before
    any was found, they are found in the analysed module, when it is still of the analysis' text; else
    (the text has moved on since) there are none until the analysis of the text as it is now is done."""
    state = ls.documents.get(uri)
    if state is None:  # a notebook cell: no VRAM hover
        return []
    state.anchors_wanted = True
    if analysis.asked.anchors is not None:
        return analysis.asked.anchors
    current = ls.current_text(uri)
    if analysis.carried_from is not None or (uri in ls.jobs and (current is None or current[0] != analysis.text)):
        return []  # the module is being replaced by a newer text's: the anchors will come with it
    loop = asyncio.get_running_loop()
    try:
        found = await loop.run_in_executor(ls.lane(state, analysis.text), state.anchors, analysis)
    except Exception:  # a bug of ours: no hover rather than a broken server
        log.exception("VRAM anchors of %s failed", uri)
        return []
    return found or []


async def vram(ls: TrainlintServer, uri: str, analysis: Analysis) -> EditorEstimate | None:
    """The VRAM estimate for an analysed text, against the target GPU of the document's settings.

    Never waits for a running analysis: the estimate is computed at a pause after an analysis, for the
    settings' target and whatever a hover or inlay hint asked for (``DocumentState.vram_wanted``), and
    carried with the VRAM lines to the next analysis; asked while an analysis of a newer text runs,
    before any was computed, there is none (None). Asked while the
    same text is analysed again (a push client's publish re-checks it), it is computed after that
    analysis on the document's lane: the first hover of a document is never empty for that race."""
    state = ls.documents.get(uri)
    if state is None:
        return None
    source = analysis.source
    key = (source.settings.analysis.target_gpu, source.settings.target_model)
    state.vram_wanted.add(key)
    if key in source.asked.vram:
        return source.asked.vram[key]
    current = ls.current_text(uri)
    if uri in ls.jobs and (current is None or current[0] != source.text):
        return None  # the module is being replaced by a newer text's: its estimate will come with it
    loop = asyncio.get_running_loop()
    try:
        return await loop.run_in_executor(ls.lane(state, source.text), state.vram, source, *key)
    except Exception:  # a bug of ours: no hover rather than a broken server
        log.exception("VRAM estimate of %s failed", uri)
        return None
