"""Findings as LSP diagnostics, pulled or pushed.

Every client can pull (``textDocument/diagnostic``, identifier ``trainlint``); clients that cannot
(Helix, Neovim before 0.10) get versioned ``publishDiagnostics``, a debounce after each change
(``schedule``, at most ``MAX_PUBLISH_DELAY_MS`` apart while changes keep coming), and ``[]`` when
a document closes. Neither waits for an analysis while someone types: the last finished one is
answered, its positions carried through the edits since (``scheduling.last_finished``). After a
settings or configuration change, pulling clients are asked to pull again
(``workspace/diagnostic/refresh``); the others get a new publish of every open document.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING

from lsprotocol import types
from pygls.exceptions import JsonRpcException

from trainlint.analysis.findings import Finding, Severity

from .documents import Analysis, analysis_imported
from .notebooks import cell_analysis, python_cells
from .positions import Positions
from .scheduling import analysis as analysis_of
from .scheduling import last_finished

if TYPE_CHECKING:
    from .language_server import TrainlintServer

SOURCE = "trainlint"

_SEVERITY = {
    Severity.ERROR: types.DiagnosticSeverity.Error,
    Severity.WARNING: types.DiagnosticSeverity.Warning,
    Severity.NOTE: types.DiagnosticSeverity.Information,
}


def to_diagnostic(finding: Finding, positions: Positions, uri: str, help_uri: str | None) -> types.Diagnostic:
    """One finding as the client shows it: its evidence as related information, its rule's docs linked."""
    related = [
        types.DiagnosticRelatedInformation(
            location=types.Location(uri=uri, range=positions.line_range(evidence.line))
            if evidence.path is None
            else types.Location(
                uri=Path(evidence.path).as_uri(),
                range=types.Range(start=types.Position(evidence.line - 1, 0), end=types.Position(evidence.line, 0)),
            ),
            message=evidence.note,
        )
        for evidence in finding.evidence
    ]
    message = finding.message + (f"\n\nFix: {finding.help}" if finding.help else "")
    return types.Diagnostic(
        range=positions.range_to_client(finding.line, finding.column, finding.end_line, finding.end_column),
        severity=_SEVERITY[finding.severity],
        code=finding.code,
        code_description=types.CodeDescription(href=help_uri) if help_uri else None,
        source=SOURCE,
        message=message,
        related_information=related or None,
        data={"code": finding.code, "line": finding.line, "fixable": finding.fix is not None},
    )


def help_uri(ls: TrainlintServer, finding: Finding) -> str | None:
    if not analysis_imported():  # a remembered report, out before the rules are imported: no link, no wait
        return None
    rule = ls.rules.get(finding.code)
    return rule.help_uri() if rule is not None else None


def diagnostics(ls: TrainlintServer, uri: str, analysis: Analysis) -> list[types.Diagnostic]:
    positions = Positions(analysis.lines, ls.client.position_encoding)
    return [to_diagnostic(finding, positions, uri, help_uri(ls, finding)) for finding in analysis.findings]


def result_id(ls: TrainlintServer, analysis: Analysis) -> str:
    """Names a report's content: the text's version, the settings' generation, the analysis that ran,
    and, for one carried from an older text's analysis, that text's version (after a ``~``)."""
    source = analysis.source
    carried = f"~{source.version}" if analysis.carried_from is not None else ""
    return f"{analysis.version}:{ls.generation}:{id(source)}{carried}"


class ServerCancelled(JsonRpcException):
    """LSP 3.17's answer to a pull the server did not finish: the client is to pull again."""

    CODE = types.LSPErrorCodes.ServerCancelled.value
    MESSAGE = "ServerCancelled"

    def __init__(self) -> None:
        super().__init__(
            message="the pull was cancelled before the analysis of the text was done; pull again",
            data={"retriggerRequest": True},
        )


# ---------------------------------------------------------------------- pull
async def pull_diagnostics(
    ls: TrainlintServer, params: types.DocumentDiagnosticParams,
) -> types.RelatedFullDocumentDiagnosticReport | types.RelatedUnchangedDocumentDiagnosticReport:
    """A pull is never left without an answer while someone types (docs/server.md, "While someone types").

    A client that can be asked to pull again gets the last finished analysis at once, carried
    to the text as it is now, and ``workspace/diagnostic/refresh`` when a newer one is done. One
    that cannot (Neovim 0.10 and 0.11) waits for the text's own analysis, but only until the text
    changes again: then it gets the last finished analysis carried to the new text, since that
    client cancels the pull at each change and shows what it gets before the cancel is read.
    A pull cancelled while it waits is answered ``ServerCancelled`` with ``retriggerRequest``.
    """
    uri = params.text_document.uri
    try:
        if uri not in ls.documents:
            analysis = await analysis_of(ls, uri)  # a notebook cell, or a document not open
        elif ls.client.diagnostic_refresh:
            analysis = last_finished(ls, uri) or await analysis_of(ls, uri)
        else:
            analysis = await _own_or_carried_at_next_change(ls, uri)
    except asyncio.CancelledError:
        raise ServerCancelled() from None
    if analysis is None:
        return types.RelatedFullDocumentDiagnosticReport(items=[])
    if analysis.carried_from is not None or analysis.remembered:
        ls.stale_diagnostics.add(uri)
    current = result_id(ls, analysis)
    if params.previous_result_id == current:
        return types.RelatedUnchangedDocumentDiagnosticReport(result_id=current)
    return types.RelatedFullDocumentDiagnosticReport(items=diagnostics(ls, uri, analysis), result_id=current)


async def _own_or_carried_at_next_change(ls: TrainlintServer, uri: str) -> Analysis | None:
    """The text's own analysis, or, if the text changes before it is done, the last finished one
    carried to the text as it is then. A cancel read after that change (Neovim sends it right
    behind the change, and the two may be read before this wakes) gets that answer too."""
    own = asyncio.ensure_future(analysis_of(ls, uri))
    changed = ls.next_change(uri)
    try:
        try:
            await asyncio.wait([own, changed], return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            if not changed.done():
                raise
            own.cancel()
        if own.done() and not own.cancelled():
            return own.result()
        answer = last_finished(ls, uri)
        if answer is not None:
            return answer
        if own.cancelled():
            raise asyncio.CancelledError
        return await own
    finally:
        own.cancel()  # it only waits: the analysis it waits for goes on


# ---------------------------------------------------------------------- push
# While changes keep coming, publishes are at most this far apart: 300 ms, less the 50 ms or so a
# loaded machine (two busy cores) adds before the publish reaches the editor.
MAX_PUBLISH_DELAY_MS = 250


def schedule(ls: TrainlintServer, uri: str, delay_ms: int) -> None:
    """Push mode: publish the document's diagnostics ``delay_ms`` from now, replacing a publish
    already waiting, but no later than ``MAX_PUBLISH_DELAY_MS`` after the last publish (or, after
    a pause, after the first change since): someone typing without a pause sees diagnostics that often."""
    if ls.client.pulls_diagnostics:
        return
    previous = ls.pending.pop(uri, None)
    if previous is not None:
        previous.cancel()
    now = asyncio.get_running_loop().time()
    window = MAX_PUBLISH_DELAY_MS / 1000
    first = ls.unpublished_since.setdefault(uri, now)
    published = ls.last_published.get(uri)
    since = published if published is not None and now - published < window else first
    delay_s = min(delay_ms / 1000, max(0.0, since + window - now))

    async def later() -> None:
        if delay_s:
            await asyncio.sleep(delay_s)
        await publish(ls, uri)

    ls.pending[uri] = asyncio.ensure_future(later())


async def publish(ls: TrainlintServer, uri: str) -> None:
    """Push mode: publish at once what the last finished analysis says, carried to the text as it is
    now, then the newer analyses' as they finish, until the text's own is published. Before any
    analysis has finished, the first one is waited for."""
    while True:
        analysis = last_finished(ls, uri)
        if analysis is None:
            analysis = await analysis_of(ls, uri)
        current = ls.current_text(uri)
        if analysis is None or uri not in ls.documents or current is None or current[0] != analysis.text:
            return  # the text moved on while we waited: a newer change has its own publish scheduled
        ls.unpublished_since.pop(uri, None)
        ls.last_published[uri] = asyncio.get_running_loop().time()
        version = ls.workspace.get_text_document(uri).version
        ls.text_document_publish_diagnostics(
            types.PublishDiagnosticsParams(uri=uri, diagnostics=diagnostics(ls, uri, analysis), version=version)
        )
        job = ls.jobs.get(uri)
        if (analysis.carried_from is None and not analysis.remembered) or job is None:
            return
        await asyncio.shield(job)


def clear(ls: TrainlintServer, uris: list[str]) -> None:
    """Push mode: no diagnostics for documents that closed (no ghost squiggles)."""
    if ls.client.pulls_diagnostics:
        return
    for uri in uris:
        ls.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=uri, diagnostics=[]))


async def publish_notebook(ls: TrainlintServer, notebook_uri: str) -> None:
    """Push mode: every Python cell's findings, and [] for cells that left (deleted, or no longer Python)."""
    notebook = ls.workspace.get_notebook_document(notebook_uri=notebook_uri)
    previous = ls.notebook_cells.get(notebook_uri, set())
    current = {uri for uri, _ in python_cells(ls, notebook)} if notebook is not None else set()
    clear(ls, sorted(previous - current))
    ls.notebook_cells[notebook_uri] = current
    for uri in sorted(current):
        analysis = await cell_analysis(ls, uri)
        now = ls.workspace.get_notebook_document(notebook_uri=notebook_uri)
        if now is None or analysis is None or analysis.version != now.version:
            return  # the notebook changed or closed while we waited: its newer push (or clear) stands
        ls.text_document_publish_diagnostics(
            types.PublishDiagnosticsParams(uri=uri, diagnostics=diagnostics(ls, uri, analysis))
        )


# ---------------------------------------------------------------------- after a change of settings or files
def refresh_all(ls: TrainlintServer) -> None:
    """After settings or config changed: ask pulling clients to re-pull, republish for the rest."""
    ls.generation += 1
    if ls.client.pulls_diagnostics:
        refresh_pulled(ls)
    else:
        for uri in list(ls.documents):
            schedule(ls, uri, 0)
    if ls.client.inlay_hint_refresh:
        ls.workspace_inlay_hint_refresh(None)


def refresh_pulled(ls: TrainlintServer) -> None:
    """Pull mode: ask the client to pull every document's diagnostics again, where it can be asked."""
    if ls.client.diagnostic_refresh:
        ls.workspace_diagnostic_refresh(None)
