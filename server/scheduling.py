"""When analyses run: one per document at a time, on a worker thread, shared by every request.

Diagnostics, code actions, hover, inlay hints and commands all ask ``analysis`` for the analysis
of a document's text as it is now; none starts one of its own. A result computed for a text that
has since changed is never shown as the text's own.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from trainlint.analysis.dependencies import Superseded
from trainlint.settings import EffectiveSettings

from .documents import STOPPED, Analysis, DocumentState, Stopped
from .notebooks import cell_analysis

if TYPE_CHECKING:
    from trainlint.estimator.editor import EditorEstimate

    from .language_server import TrainlintServer

log = logging.getLogger("trainlint.server")

# An analysis is stopped for a newer text at most this many times in a row; the next one finishes,
# so that someone typing without a pause still sees diagnostics of a text a few keys old.
MAX_STOPS_IN_A_ROW = 3


async def analysis(ls: TrainlintServer, uri: str, *, recent: bool = False) -> Analysis | None:
    """The analysis of the document's text as it is now.

    One analysis runs per document at a time, and every request shares it: a request that
    arrives while one runs waits for it, then, if the text has changed meanwhile, for one
    analysis of the text as it is then; the keystrokes in between get none of their own. An
    analysis whose text changes while it runs stops at its next statement (what it did is kept
    for the next one), unless the ones before it stopped too (``MAX_STOPS_IN_A_ROW``: typing
    without a pause still sees diagnostics). A cancelled request stops waiting; the analysis it
    waited for goes on for the next one. With ``recent`` (hover, inlay hints), the last finished
    analysis answers at once while a newer one runs, and the client is asked to refresh its inlay
    hints once that is done.
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
        if job is None and latest is not None and latest.text == text and latest.settings == settings:
            if state.module is None or state.module.imports_unchanged():
                return state.with_version(latest, version)
        if recent and latest is not None:
            if job is None:
                job = _start_analysis(ls, uri, state, text, version, settings)
            ls.stale_hints.add(uri)
            return latest
        if job is None or waited:
            if job is None:
                job = _start_analysis(ls, uri, state, text, version, settings)
            result = await asyncio.shield(job)
            if result is STOPPED:
                continue  # the text changed while it ran: analyse it as it is now
            return result
        await asyncio.shield(job)  # an analysis of an older text: then one of the text as it is then
        waited = True


def _start_analysis(
    ls: TrainlintServer, uri: str, state: DocumentState, text: str, version: int | None, settings: EffectiveSettings,
) -> asyncio.Future[Analysis | Stopped | None]:
    """The document's one running analysis, of ``text``; shared by whoever waits for it."""
    loop = asyncio.get_running_loop()
    edits = state.edits

    def superseded() -> bool:  # asked on the worker thread, between statements
        if state.stopped_in_a_row >= MAX_STOPS_IN_A_ROW:
            return False
        return state.edits != edits or ls.documents.get(uri) is not state

    async def run() -> Analysis | Stopped | None:
        try:
            return await loop.run_in_executor(ls.lane(state, text), state.analyse, text, version, settings, superseded)
        except Superseded:  # counted by the document, whose stops ``superseded`` reads
            return STOPPED
        except Exception:  # the engine never raises on bad input; this is our bug, not the user's
            log.exception("analysis of %s failed", uri)
            return None
        finally:
            ls.idle_gc.analysed()
            ls.report_plugin_problems()
            if ls.jobs.get(uri) is job:
                del ls.jobs[uri]
            _refresh_stale_hints(ls, uri, text)

    job = ls.jobs[uri] = asyncio.ensure_future(run())
    return job


def _refresh_stale_hints(ls: TrainlintServer, uri: str, analysed: str) -> None:
    """Inlay hints answered from an older analysis are asked for again once the text's own is done."""
    current = ls.current_text(uri)
    if uri not in ls.stale_hints or current is None or current[0] != analysed:
        return
    ls.stale_hints.discard(uri)
    if ls.client.inlay_hint_refresh:
        ls.workspace_inlay_hint_refresh(None)


async def vram(ls: TrainlintServer, uri: str, analysis: Analysis) -> EditorEstimate | None:
    """The VRAM estimate for an analysed text, against the target GPU of the document's settings."""
    state = ls.documents.get(uri)
    if state is None:
        return None
    target = analysis.settings.analysis.target_gpu
    loop = asyncio.get_running_loop()
    try:
        return await loop.run_in_executor(
            ls.lane(state, analysis.text), state.vram, analysis, target, analysis.settings.target_model
        )
    except Exception:  # a bug of ours: no hover rather than a broken server
        log.exception("VRAM estimate of %s failed", uri)
        return None
