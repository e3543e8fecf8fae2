"""Findings as LSP diagnostics, pulled or pushed.

Every client can pull (``textDocument/diagnostic``, identifier ``trainlint``); clients that cannot
(Helix, Neovim before 0.10) get versioned ``publishDiagnostics``, a debounce after each change
(``schedule``), and ``[]`` when a document closes. After a settings or configuration change,
pulling clients are asked to pull again (``workspace/diagnostic/refresh``); the others get a new
publish of every open document.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING

from lsprotocol import types

from trainlint.analysis.findings import Finding, Severity

from .documents import Analysis
from .notebooks import cell_analysis, python_cells
from .positions import Positions
from .scheduling import analysis as analysis_of

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
    rule = ls.rules.get(finding.code)
    return rule.help_uri() if rule is not None else None


def diagnostics(ls: TrainlintServer, uri: str, analysis: Analysis) -> list[types.Diagnostic]:
    positions = Positions(analysis.lines, ls.client.position_encoding)
    return [to_diagnostic(finding, positions, uri, help_uri(ls, finding)) for finding in analysis.findings]


def result_id(ls: TrainlintServer, analysis: Analysis) -> str:
    return f"{analysis.version}:{ls.generation}:{id(analysis)}"


# ---------------------------------------------------------------------- pull
async def pull_diagnostics(
    ls: TrainlintServer, params: types.DocumentDiagnosticParams,
) -> types.RelatedFullDocumentDiagnosticReport | types.RelatedUnchangedDocumentDiagnosticReport:
    uri = params.text_document.uri
    analysis = await analysis_of(ls, uri)
    if analysis is None:
        return types.RelatedFullDocumentDiagnosticReport(items=[])
    current = result_id(ls, analysis)
    if params.previous_result_id == current:
        return types.RelatedUnchangedDocumentDiagnosticReport(result_id=current)
    return types.RelatedFullDocumentDiagnosticReport(items=diagnostics(ls, uri, analysis), result_id=current)


# ---------------------------------------------------------------------- push
def schedule(ls: TrainlintServer, uri: str, delay_ms: int) -> None:
    """Push mode: publish the document's diagnostics ``delay_ms`` from now, replacing a publish already waiting."""
    if ls.client.pulls_diagnostics:
        return
    previous = ls.pending.pop(uri, None)
    if previous is not None:
        previous.cancel()

    async def later() -> None:
        if delay_ms:
            await asyncio.sleep(delay_ms / 1000)
        await publish(ls, uri)

    ls.pending[uri] = asyncio.ensure_future(later())


async def publish(ls: TrainlintServer, uri: str) -> None:
    """Push mode: analyse and publish, unless the text moved on while we worked."""
    analysis = await analysis_of(ls, uri)
    if analysis is None or uri not in ls.documents:
        return
    current = ls.current_text(uri)
    if current is None or current[0] != analysis.text:
        return  # stale: a newer change has its own publish scheduled
    version = ls.workspace.get_text_document(uri).version
    ls.text_document_publish_diagnostics(
        types.PublishDiagnosticsParams(uri=uri, diagnostics=diagnostics(ls, uri, analysis), version=version)
    )


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
        if analysis is not None:
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
