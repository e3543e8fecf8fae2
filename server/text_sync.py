"""The editor's documents and notebooks opening, changing, saving and closing.

pygls keeps the text (``text.LspWorkspace``); these handlers decide what each event means for
the analyses: a change schedules a push of diagnostics (``diagnostics.schedule``; pulling clients
ask when they want them), a save of a configuration file or of a module other documents import
refreshes everything, a close forgets the document.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from lsprotocol import types
from pygls.uris import to_fs_path

from trainlint.linter import CONFIG_FILES
from trainlint.settings import RUN_ON_SAVE

from . import diagnostics
from .remembered import first_report

if TYPE_CHECKING:
    from .language_server import TrainlintServer


def did_open(ls: TrainlintServer, params: types.DidOpenTextDocumentParams) -> None:
    uri = params.text_document.uri
    state = ls.state(uri)
    ls.saved_text[uri] = params.text_document.text
    first_report(ls, uri, state)  # findings remembered for this text, published while it is analysed
    diagnostics.schedule(ls, uri, 0)


def did_change(ls: TrainlintServer, params: types.DidChangeTextDocumentParams) -> None:
    uri = params.text_document.uri
    settings = ls.settings.of(uri)
    if uri in ls.documents and settings.run != RUN_ON_SAVE:
        ls.documents[uri].edits += 1
        ls.text_changed(uri)
        diagnostics.schedule(ls, uri, settings.debounce_ms)


def did_save(ls: TrainlintServer, params: types.DidSaveTextDocumentParams) -> None:
    uri = params.text_document.uri
    if uri not in ls.documents:
        return
    saved = params.text if params.text is not None else ls.workspace.get_text_document(uri).source
    if ls.settings.of(uri).run == RUN_ON_SAVE and saved != ls.saved_text.get(uri):
        ls.documents[uri].edits += 1
        ls.text_changed(uri)
    ls.saved_text[uri] = saved
    if Path(to_fs_path(uri) or "").name in CONFIG_FILES:
        ls.linter.configuration_changed()
        diagnostics.refresh_all(ls)
    elif len(ls.documents) > 1:
        ls.forget_lookups()  # the saved file may be one an import could not find before
        diagnostics.refresh_all(ls)  # other open files may import what was just saved
    diagnostics.schedule(ls, uri, 0)


def did_close(ls: TrainlintServer, params: types.DidCloseTextDocumentParams) -> None:
    uri = params.text_document.uri
    ls.documents.pop(uri, None)
    ls.saved_text.pop(uri, None)
    ls.jobs.pop(uri, None)  # a running analysis finishes for nobody
    ls.stale_hints.discard(uri)
    ls.stale_diagnostics.discard(uri)
    ls.unpublished_since.pop(uri, None)
    ls.last_published.pop(uri, None)
    ls.text_changed(uri)
    task = ls.pending.pop(uri, None)
    if task is not None:
        task.cancel()
    diagnostics.clear(ls, [uri])


# ---------------------------------------------------------------------- notebooks
async def notebook_did_open(ls: TrainlintServer, params: types.DidOpenNotebookDocumentParams) -> None:
    await _notebook_changed(ls, params.notebook_document.uri)


async def notebook_did_change(ls: TrainlintServer, params: types.DidChangeNotebookDocumentParams) -> None:
    await _notebook_changed(ls, params.notebook_document.uri)


def notebook_did_close(ls: TrainlintServer, params: types.DidCloseNotebookDocumentParams) -> None:
    uri = params.notebook_document.uri
    ls.notebooks.pop(uri, None)
    cells = ls.notebook_cells.pop(uri, set()) | {cell.uri for cell in params.cell_text_documents}
    diagnostics.clear(ls, sorted(cells))


async def _notebook_changed(ls: TrainlintServer, notebook_uri: str) -> None:
    if ls.client.pulls_diagnostics:
        diagnostics.refresh_pulled(ls)  # cells the edit did not touch may change too
        return
    await diagnostics.publish_notebook(ls, notebook_uri)
