"""The trainlint language server (pygls 2): diagnostics as you type, fixes as code actions.

Diagnostics are offered by pull (``textDocument/diagnostic``) to every client; clients that
cannot pull (Helix, Neovim before 0.10) get versioned ``publishDiagnostics`` after a per-document
debounce, and ``[]`` when a document closes. Analysis runs on a worker thread, never on the
event loop, one analysis per document at a time, shared by every request (``analysis``); a
result computed for a text that has since changed is never shown as the text's own.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import os
import re
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, BinaryIO

import msgspec
from lsprotocol import types
from pygls.io_ import StdoutWriter
from pygls.lsp.server import LanguageServer
from pygls.uris import to_fs_path

import trainlint
from trainlint.analysis.findings import Finding
from trainlint.analysis.lines import split_lines
from trainlint.analysis.registry import all_rules, forbid_local_plugins, take_problems
from trainlint.analysis.suppressions import find_suppressions
from trainlint.analysis.workspace import Workspace
from trainlint.config import PYPROJECT, TRAINLINT_TOML, Config, ConfigError, find_config_file, load_config
from trainlint.estimator.anchors import BATCH_SIZE, MODEL
from trainlint.estimator.editor import EditorEstimate, hover_text, inlay_label
from trainlint.fixing import apply_fixes, parses
from trainlint.notebooks import CellProgram

from .collector import IdleCollector
from .convert import Positions, to_diagnostic, to_text_edit
from .documents import Analysis, DocumentState
from .framing import BinaryReader, StreamReader, log_message, serve
from .settings import RUN_ON_SAVE, EditorSettings, EffectiveSettings, effective_settings, parse_editor_settings
from .text import LspWorkspace

log = logging.getLogger("trainlint.server")

SOURCE = "trainlint"
FIX_ALL_KIND = "source.fixAll.trainlint"
COMMAND_FIX_ALL = "trainlint.fixAll"
COMMAND_VRAM = "trainlint.showVramBreakdown"
COMMAND_DEBUG = "trainlint.printDebugInfo"
_CODE = re.compile(r"TL\d{3}|[a-z]+(?:-[a-z]+)+", re.I)


class TrainlintServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__(
            "trainlint", trainlint.__version__,
            notebook_document_sync=types.NotebookDocumentSyncOptions(notebook_selector=[
                types.NotebookDocumentFilterWithCells(cells=[types.NotebookCellLanguage(language="python")], notebook="*"),
            ]),
        )
        self.editor_settings = EditorSettings()
        # Multi-root workspaces: a folder's own `trainlint` settings, over the editor-wide ones.
        self.folder_settings: dict[str, EditorSettings] = {}
        self.documents: dict[str, DocumentState] = {}
        self.saved_text: dict[str, str] = {}
        self.pending: dict[str, asyncio.Task] = {}
        self.jobs: dict[str, asyncio.Future] = {}  # each document's running analysis (``analysis``)
        self.stale_hints: set[str] = set()  # documents whose inlay hints came from an older analysis
        self.generation = 0  # bumped whenever settings change, so result ids change with them
        # Two analysis lanes, one thread each: documents within their budget, and the others
        # (``DocumentState.expensive``), which then cannot hold up the first lane's documents.
        self.executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="trainlint-analysis")
        self.expensive_executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="trainlint-analysis-expensive")
        self._configs: dict[tuple, Config] = {}
        self._reported_problems: set[str] = set()
        self.rules = {rule.code: rule for rule in all_rules()}
        self.collector = IdleCollector()
        self.workspaces: dict[Path, Workspace] = {}
        # Notebooks: one analysis of all code cells as one program, per notebook; the cells last published to.
        self.notebooks: dict[str, DocumentState] = {}
        self.notebook_cells: dict[str, set[str]] = {}

    # ------------------------------------------------------------------ transport
    def start_io(self, stdin: BinaryIO | None = None, stdout: BinaryIO | None = None) -> int:
        """pygls' stdio server, reading through the framing guard (``framing.serve``).

        Returns the exit status: pygls' for ``exit`` (0 after ``shutdown``, else 1), 0 at the end of input."""
        self._stop_event = threading.Event()
        reader = BinaryReader(stdin or sys.stdin.buffer, self.thread_pool)
        self.protocol.set_writer(StdoutWriter(stdout or sys.stdout.buffer))
        status = 0
        try:
            asyncio.run(serve(self._stop_event, reader, self.protocol, self.frame_problem))
        except BrokenPipeError:
            log.error("the connection to the client is lost; shutting down")
            status = 1
        except SystemExit as exit:  # the client's `exit`
            status = exit.code if isinstance(exit.code, int) else 0
        except KeyboardInterrupt:
            pass
        finally:
            self.shutdown()
        return status

    def start_tcp(self, host: str, port: int) -> None:
        """pygls' TCP server (one client), reading through the framing guard."""
        self._stop_event = stop = threading.Event()

        async def connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            self.protocol.set_writer(writer)  # type: ignore[arg-type]
            await serve(stop, StreamReader(reader), self.protocol, self.frame_problem)
            self.shutdown()

        async def listen() -> None:
            self._server = await asyncio.start_server(connection, host, port)
            log.info("listening on %s:%s", host, port)
            async with self._server:
                await self._server.serve_forever()

        try:
            asyncio.run(listen())
        except (asyncio.CancelledError, KeyboardInterrupt, SystemExit):
            pass

    def frame_problem(self, message: str) -> None:
        log_message(self.protocol, message)

    # ------------------------------------------------------------------ client facts
    @property
    def pulls(self) -> bool:
        text_document = self.client_capabilities.text_document
        return text_document is not None and text_document.diagnostic is not None

    @property
    def encoding(self) -> str:
        return self.workspace.position_encoding or types.PositionEncodingKind.Utf16

    def _workspace_capability(self, name: str) -> Any:
        workspace = self.client_capabilities.workspace
        return getattr(workspace, name, None) if workspace is not None else None

    # ------------------------------------------------------------------ messages
    def problem(self, message: str) -> None:
        """Tell the user once about something they can fix (a bad setting, a broken config file)."""
        log.warning(message)
        self.window_log_message(types.LogMessageParams(type=types.MessageType.Warning, message=message))
        if message not in self._reported_problems:
            self._reported_problems.add(message)
            self.window_show_message(types.ShowMessageParams(type=types.MessageType.Warning, message=message))

    def report_plugin_problems(self) -> None:
        """A plugin that failed to load or raised while checking: told once, the other rules go on."""
        for problem in take_problems():
            self.problem(f"trainlint: {problem}")

    def apply_settings(self, raw: Any, origin: str) -> None:
        settings, problems = parse_editor_settings(raw, self.editor_settings)
        for problem in problems:
            self.problem(f"trainlint: {origin}: {problem}")
        if settings != self.editor_settings:
            self.editor_settings = settings
            self.generation += 1

    def apply_folder_settings(self, answers: dict[str, Any]) -> None:
        """Each workspace folder's answer to workspace/configuration, read over the editor-wide settings."""
        folder_settings = {}
        for folder, raw in answers.items():
            settings, problems = parse_editor_settings(raw, self.editor_settings)
            for problem in problems:
                self.problem(f"trainlint: settings of {folder}: {problem}")
            if settings != self.editor_settings:
                folder_settings[folder] = settings
        if folder_settings != self.folder_settings:
            self.folder_settings = folder_settings
            self.generation += 1

    def settings_of(self, uri: str) -> EditorSettings:
        """The editor settings for a document: its workspace folder's (the innermost), else the editor's."""
        best = None
        for folder in self.folder_settings:
            if uri.startswith(folder.rstrip("/") + "/") and (best is None or len(folder) > len(best)):
                best = folder
        return self.folder_settings[best] if best is not None else self.editor_settings

    # ------------------------------------------------------------------ configuration
    def project_config(self, path: Path | None) -> Config:
        """The nearest [tool.trainlint] / trainlint.toml, re-read when any candidate file changes."""
        if path is None:
            return Config()
        folder = path.parent
        stamps = []
        for directory in (folder, *folder.parents):
            for name in (TRAINLINT_TOML, PYPROJECT):
                try:
                    stamps.append((str(directory / name), os.stat(directory / name).st_mtime_ns))
                except OSError:
                    continue
        key = (str(folder), tuple(stamps))
        config = self._configs.get(key)
        if config is None:
            try:
                found = find_config_file(folder)
                config = load_config(found) if found is not None else Config(root=folder)
            except (ConfigError, OSError, ValueError) as error:
                self.problem(f"trainlint: configuration ignored: {error}")
                config = Config(root=folder)
            self._configs = {k: v for k, v in self._configs.items() if k[0] != key[0]}
            self._configs[key] = config
        return config

    def settings_for(self, state: DocumentState) -> EffectiveSettings:
        return effective_settings(self.settings_of(state.uri), self.project_config(state.path), state.path)

    # ------------------------------------------------------------------ analysis
    def knows(self, uri: str) -> bool:
        """An open document, or a cell of an open notebook."""
        return uri in self.documents or self.workspace.get_notebook_document(cell_uri=uri) is not None

    def state(self, uri: str) -> DocumentState:
        state = self.documents.get(uri)
        if state is None:
            path = Path(to_fs_path(uri)) if uri.startswith("file:") else None
            state = self.documents[uri] = DocumentState(uri, path, self.workspace_for(path))
        return state

    def workspace_for(self, path: Path | None) -> Workspace | None:
        """Imports resolve within the workspace folder holding the file (one shared index per folder)."""
        if path is None:
            return None
        folders = [Path(to_fs_path(folder.uri)) for folder in self.workspace.folders.values() if folder.uri.startswith("file:")]
        holding = [folder for folder in folders if folder == path.parent or folder in path.parents]
        root = max(holding, key=lambda folder: len(folder.parts)) if holding else path.parent
        workspace = self.workspaces.get(root)
        if workspace is None:
            workspace = self.workspaces[root] = Workspace([root])
        return workspace

    def current_text(self, uri: str) -> tuple[str, int | None] | None:
        if uri not in self.documents:
            return None
        document = self.workspace.get_text_document(uri)
        if self.settings_of(uri).run == RUN_ON_SAVE and uri in self.saved_text:
            return self.saved_text[uri], None
        return document.source, document.version

    async def analysis(self, uri: str, *, recent: bool = False) -> Analysis | None:
        """The analysis of the document's text as it is now.

        One analysis runs per document at a time, and every request shares it: a request that
        arrives while one runs waits for it, then, if the text has changed meanwhile, for one
        analysis of the text as it is then; the keystrokes in between get none of their own. A
        cancelled request stops waiting; the analysis it waited for goes on for the next one.
        With ``recent`` (hover, inlay hints), the last finished analysis answers at once while a
        newer one runs, and the client is asked to refresh its inlay hints once that is done.
        """
        if uri not in self.documents and self.workspace.get_notebook_document(cell_uri=uri) is not None:
            return await self.cell_analysis(uri)
        state = self.documents.get(uri)
        waited = False
        while True:
            current = self.current_text(uri)
            if current is None or state is not self.documents.get(uri):
                return None
            text, version = current
            settings = self.settings_for(state)
            job = self.jobs.get(uri)
            latest = state.latest
            if job is None and latest is not None and latest.text == text and latest.settings == settings:
                if state.module is None or state.module.imports_unchanged():
                    return state.with_version(latest, version)
            if recent and latest is not None:
                if job is None:
                    job = self._start_analysis(uri, state, text, version, settings)
                self.stale_hints.add(uri)
                return latest
            if job is None or waited:
                if job is None:
                    job = self._start_analysis(uri, state, text, version, settings)
                return await asyncio.shield(job)
            await asyncio.shield(job)  # an analysis of an older text: then one of the text as it is then
            waited = True

    def _start_analysis(
        self, uri: str, state: DocumentState, text: str, version: int | None, settings: EffectiveSettings,
    ) -> asyncio.Future[Analysis | None]:
        """The document's one running analysis, of ``text``; shared by whoever waits for it."""
        loop = asyncio.get_running_loop()

        async def run() -> Analysis | None:
            try:
                return await loop.run_in_executor(self.lane(state, text), state.analyse, text, version, settings)
            except Exception:  # the engine never raises on bad input; this is our bug, not the user's
                log.exception("analysis of %s failed", uri)
                return None
            finally:
                self.collector.analysed()
                self.report_plugin_problems()
                if self.jobs.get(uri) is job:
                    del self.jobs[uri]
                self._refresh_stale_hints(uri, text)

        job = self.jobs[uri] = asyncio.ensure_future(run())
        return job

    def _refresh_stale_hints(self, uri: str, analysed: str) -> None:
        """Inlay hints answered from an older analysis are asked for again once the text's own is done."""
        current = self.current_text(uri)
        if uri not in self.stale_hints or current is None or current[0] != analysed:
            return
        self.stale_hints.discard(uri)
        hints = self._workspace_capability("inlay_hint")
        if hints is not None and hints.refresh_support:
            self.workspace_inlay_hint_refresh(None)

    def lane(self, state: DocumentState, text: str) -> ThreadPoolExecutor:
        """Where a document's analysis runs: the expensive lane once it is large or went over budget."""
        return self.expensive_executor if state.expensive(text) else self.executor

    async def vram(self, uri: str, analysis: Analysis) -> EditorEstimate | None:
        """The VRAM estimate for an analysed text, against the target GPU of the document's settings."""
        state = self.documents.get(uri)
        if state is None:
            return None
        target = analysis.settings.analysis.target_gpu
        loop = asyncio.get_running_loop()
        try:
            return await loop.run_in_executor(
                self.lane(state, analysis.text), state.vram, analysis, target, analysis.settings.target_model
            )
        except Exception:  # a bug of ours: no hover rather than a broken server
            log.exception("VRAM estimate of %s failed", uri)
            return None

    async def cell_analysis(self, cell_uri: str) -> Analysis | None:
        """The findings of one notebook cell: the notebook's Python cells analysed as one program, then
        the findings inside this cell, in its own coordinates."""
        notebook = self.workspace.get_notebook_document(cell_uri=cell_uri)
        if notebook is None:
            return None
        cells = self.python_cells(notebook)
        uris = [uri for uri, _ in cells]
        if cell_uri not in uris:
            return None
        program = CellProgram([text for _, text in cells])
        state = self.notebooks.get(notebook.uri)
        if state is None:
            path = Path(to_fs_path(notebook.uri)) if notebook.uri.startswith("file:") else None
            state = self.notebooks[notebook.uri] = DocumentState(notebook.uri, path, self.workspace_for(path))
        settings = self.settings_for(state)
        loop = asyncio.get_running_loop()
        try:
            whole = await loop.run_in_executor(
                self.lane(state, program.text), state.analyse, program.text, notebook.version, settings
            )
        except Exception:
            log.exception("analysis of %s failed", notebook.uri)
            return None
        finally:
            self.collector.analysed()
            self.report_plugin_problems()
        index = uris.index(cell_uri)
        findings = [placed for finding in whole.findings if (placed := _in_cell(finding, program, index)) is not None]
        return Analysis(notebook.version, settings, cells[index][1], findings)

    def python_cells(self, notebook: types.NotebookDocument) -> list[tuple[str, str]]:
        """(uri, text) of the notebook's code cells in Python, in order."""
        cells = []
        for cell in notebook.cells:
            if cell.kind != types.NotebookCellKind.Code:
                continue
            document = self.workspace.get_text_document(cell.document)
            if document.language_id in (None, "python"):
                cells.append((cell.document, document.source))
        return cells

    async def publish_notebook(self, notebook_uri: str) -> None:
        """Push mode: every Python cell's findings, and [] for cells that left (deleted, or no longer Python)."""
        notebook = self.workspace.get_notebook_document(notebook_uri=notebook_uri)
        previous = self.notebook_cells.get(notebook_uri, set())
        current = {uri for uri, _ in self.python_cells(notebook)} if notebook is not None else set()
        for uri in sorted(previous - current):
            self.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=uri, diagnostics=[]))
        self.notebook_cells[notebook_uri] = current
        for uri in sorted(current):
            analysis = await self.cell_analysis(uri)
            if analysis is not None:
                self.text_document_publish_diagnostics(
                    types.PublishDiagnosticsParams(uri=uri, diagnostics=self.diagnostics(uri, analysis))
                )

    def result_id(self, analysis: Analysis) -> str:
        return f"{analysis.version}:{self.generation}:{id(analysis)}"

    def diagnostics(self, uri: str, analysis: Analysis) -> list[types.Diagnostic]:
        positions = Positions(analysis.lines, self.encoding)
        return [to_diagnostic(f, positions, uri, self._help_uri(f)) for f in analysis.findings]

    def _help_uri(self, finding: Finding) -> str | None:
        rule = self.rules.get(finding.code)
        return rule.help_uri() if rule is not None else None

    async def publish(self, uri: str) -> None:
        """Push mode: analyse and publish, unless the text moved on while we worked."""
        analysis = await self.analysis(uri)
        if analysis is None or uri not in self.documents:
            return
        current = self.current_text(uri)
        if current is None or current[0] != analysis.text:
            return  # stale: a newer change has its own publish scheduled
        version = self.workspace.get_text_document(uri).version
        self.text_document_publish_diagnostics(
            types.PublishDiagnosticsParams(uri=uri, diagnostics=self.diagnostics(uri, analysis), version=version)
        )

    def schedule(self, uri: str, delay_ms: int) -> None:
        if self.pulls:
            return
        previous = self.pending.pop(uri, None)
        if previous is not None:
            previous.cancel()

        async def later() -> None:
            if delay_ms:
                await asyncio.sleep(delay_ms / 1000)
            await self.publish(uri)

        self.pending[uri] = asyncio.ensure_future(later())

    def refresh_all(self) -> None:
        """After settings or config changed: ask pulling clients to re-pull, republish for the rest."""
        self.generation += 1
        if self.pulls:
            refresh = self._workspace_capability("diagnostics")
            if refresh is not None and refresh.refresh_support:
                self.workspace_diagnostic_refresh(None)
        else:
            for uri in list(self.documents):
                self.schedule(uri, 0)
        hints = self._workspace_capability("inlay_hint")
        if hints is not None and hints.refresh_support:
            self.workspace_inlay_hint_refresh(None)

    # ------------------------------------------------------------------ code actions
    def is_live(self, uri: str, analysis: Analysis) -> bool:
        """Whether an analysis is of the text the editor holds now (with run-on-save it may be of the
        saved text): edits are only ever built from that text, or applying them would corrupt it."""
        return analysis.text == self.workspace.get_text_document(uri).source

    def fix_all_edits(self, uri: str, analysis: Analysis) -> list[types.TextEdit] | None:
        if not self.is_live(uri, analysis):
            return None
        new_text, applied = apply_fixes(analysis.text, analysis.findings)
        if not applied or new_text == analysis.text or not parses(new_text):
            return None
        end = Positions(analysis.lines, self.encoding).end()
        return [types.TextEdit(range=types.Range(start=types.Position(0, 0), end=end), new_text=new_text)]


server = TrainlintServer()


# ---------------------------------------------------------------------- lifecycle
@server.feature(types.INITIALIZE)
def initialize(ls: TrainlintServer, params: types.InitializeParams) -> None:
    ls.protocol._workspace = LspWorkspace.replacing(ls.workspace)  # before any document arrives
    options = params.initialization_options
    if isinstance(options, dict) and options.get("workspaceTrusted") is False:  # VS Code's restricted mode
        forbid_local_plugins("the workspace is not trusted (VS Code's restricted mode)")
    ls.apply_settings(options, "initializationOptions")


@server.feature(types.INITIALIZED)
async def initialized(ls: TrainlintServer, params: types.InitializedParams) -> None:
    watched = ls._workspace_capability("did_change_watched_files")
    if watched is not None and watched.dynamic_registration:
        options = types.DidChangeWatchedFilesRegistrationOptions(
            watchers=[types.FileSystemWatcher(glob_pattern=f"**/{name}") for name in (PYPROJECT, TRAINLINT_TOML)]
        )
        registration = types.Registration(
            id="trainlint-config-watch", method=types.WORKSPACE_DID_CHANGE_WATCHED_FILES, register_options=options
        )
        try:
            await ls.client_register_capability_async(types.RegistrationParams(registrations=[registration]))
        except Exception as error:  # the mtime check before each analysis still notices edits
            log.info("file watching not registered: %s", error)
    await _pull_configuration(ls)


async def _pull_configuration(ls: TrainlintServer) -> None:
    if not ls._workspace_capability("configuration"):
        return
    folders = [folder.uri for folder in ls.workspace.folders.values()]
    items = [types.ConfigurationItem(section="trainlint")]
    items += [types.ConfigurationItem(section="trainlint", scope_uri=folder) for folder in folders]
    try:
        answer = await ls.workspace_configuration_async(types.ConfigurationParams(items=items))
    except Exception as error:
        log.info("workspace/configuration failed: %s", error)
        return
    if not isinstance(answer, (list, tuple)) or not answer:
        return
    before = ls.generation
    if answer[0] is not None:
        ls.apply_settings(answer[0], "workspace settings")
    ls.apply_folder_settings({
        folder: raw for folder, raw in zip(folders, answer[1:]) if raw is not None
    })
    if ls.generation != before:
        ls.refresh_all()


@server.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)
async def did_change_configuration(ls: TrainlintServer, params: types.DidChangeConfigurationParams) -> None:
    if params.settings and not ls._workspace_capability("configuration"):
        ls.apply_settings(params.settings, "settings")
        ls.refresh_all()
        return
    await _pull_configuration(ls)


@server.feature(types.WORKSPACE_DID_CHANGE_WORKSPACE_FOLDERS)
async def did_change_workspace_folders(ls: TrainlintServer, params: types.DidChangeWorkspaceFoldersParams) -> None:
    await _pull_configuration(ls)


@server.feature(types.WORKSPACE_DID_CHANGE_WATCHED_FILES)
def did_change_watched_files(ls: TrainlintServer, params: types.DidChangeWatchedFilesParams) -> None:
    ls._configs.clear()
    for workspace in ls.workspaces.values():
        workspace.forget_lookups()
    ls.refresh_all()


# ---------------------------------------------------------------------- text sync
@server.feature(types.TEXT_DOCUMENT_DID_OPEN)
def did_open(ls: TrainlintServer, params: types.DidOpenTextDocumentParams) -> None:
    uri = params.text_document.uri
    ls.state(uri)
    ls.saved_text[uri] = params.text_document.text
    ls.schedule(uri, 0)


@server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
def did_change(ls: TrainlintServer, params: types.DidChangeTextDocumentParams) -> None:
    uri = params.text_document.uri
    settings = ls.settings_of(uri)
    if uri in ls.documents and settings.run != RUN_ON_SAVE:
        ls.schedule(uri, settings.debounce_ms)


@server.feature(types.TEXT_DOCUMENT_DID_SAVE, types.SaveOptions(include_text=True))
def did_save(ls: TrainlintServer, params: types.DidSaveTextDocumentParams) -> None:
    uri = params.text_document.uri
    if uri not in ls.documents:
        return
    ls.saved_text[uri] = params.text if params.text is not None else ls.workspace.get_text_document(uri).source
    if Path(to_fs_path(uri) or "").name in (PYPROJECT, TRAINLINT_TOML):
        ls._configs.clear()
        ls.refresh_all()
    elif len(ls.documents) > 1:
        for workspace in ls.workspaces.values():
            workspace.forget_lookups()  # the saved file may be one an import could not find before
        ls.refresh_all()  # other open files may import what was just saved
    ls.schedule(uri, 0)


@server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
def did_close(ls: TrainlintServer, params: types.DidCloseTextDocumentParams) -> None:
    uri = params.text_document.uri
    ls.documents.pop(uri, None)
    ls.saved_text.pop(uri, None)
    ls.jobs.pop(uri, None)  # a running analysis finishes for nobody
    ls.stale_hints.discard(uri)
    task = ls.pending.pop(uri, None)
    if task is not None:
        task.cancel()
    if not ls.pulls:
        ls.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=uri, diagnostics=[]))


@server.feature(types.NOTEBOOK_DOCUMENT_DID_OPEN)
async def notebook_did_open(ls: TrainlintServer, params: types.DidOpenNotebookDocumentParams) -> None:
    await _notebook_changed(ls, params.notebook_document.uri)


@server.feature(types.NOTEBOOK_DOCUMENT_DID_CHANGE)
async def notebook_did_change(ls: TrainlintServer, params: types.DidChangeNotebookDocumentParams) -> None:
    await _notebook_changed(ls, params.notebook_document.uri)


@server.feature(types.NOTEBOOK_DOCUMENT_DID_CLOSE)
def notebook_did_close(ls: TrainlintServer, params: types.DidCloseNotebookDocumentParams) -> None:
    uri = params.notebook_document.uri
    ls.notebooks.pop(uri, None)
    cells = ls.notebook_cells.pop(uri, set()) | {cell.uri for cell in params.cell_text_documents}
    if not ls.pulls:
        for cell in sorted(cells):
            ls.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=cell, diagnostics=[]))


async def _notebook_changed(ls: TrainlintServer, notebook_uri: str) -> None:
    if ls.pulls:
        refresh = ls._workspace_capability("diagnostics")
        if refresh is not None and refresh.refresh_support:
            ls.workspace_diagnostic_refresh(None)  # cells the edit did not touch may change too
        return
    await ls.publish_notebook(notebook_uri)


# ---------------------------------------------------------------------- diagnostics (pull)
@server.feature(
    types.TEXT_DOCUMENT_DIAGNOSTIC,
    types.DiagnosticOptions(identifier=SOURCE, inter_file_dependencies=False, workspace_diagnostics=False),
)
async def pull_diagnostics(ls: TrainlintServer, params: types.DocumentDiagnosticParams):
    uri = params.text_document.uri
    analysis = await ls.analysis(uri)
    if analysis is None:
        return types.RelatedFullDocumentDiagnosticReport(items=[])
    result_id = ls.result_id(analysis)
    if params.previous_result_id == result_id:
        return types.RelatedUnchangedDocumentDiagnosticReport(result_id=result_id)
    return types.RelatedFullDocumentDiagnosticReport(items=ls.diagnostics(uri, analysis), result_id=result_id)


# ---------------------------------------------------------------------- code actions
@server.feature(
    types.TEXT_DOCUMENT_CODE_ACTION,
    types.CodeActionOptions(
        code_action_kinds=[types.CodeActionKind.QuickFix, types.CodeActionKind.SourceFixAll, FIX_ALL_KIND],
        resolve_provider=True,
    ),
)
async def code_actions(ls: TrainlintServer, params: types.CodeActionParams) -> list[types.CodeAction] | None:
    uri = params.text_document.uri
    analysis = await ls.analysis(uri)
    if analysis is None or not ls.is_live(uri, analysis):
        return None
    only = params.context.only
    wanted = (lambda kind: any(kind == k or kind.startswith(f"{k}.") for k in only)) if only else (lambda kind: True)
    positions = Positions(analysis.lines, ls.encoding)
    first, _ = positions.from_client(params.range.start)
    last, _ = positions.from_client(params.range.end)
    actions: list[types.CodeAction] = []
    if wanted(types.CodeActionKind.QuickFix):
        for finding in analysis.findings:
            if finding.end_line - 1 < first or finding.line - 1 > last:
                continue
            diagnostic = to_diagnostic(finding, positions, uri, ls._help_uri(finding))
            if finding.fix is not None:
                # an unsafe fix is offered, never preferred: an editor applies preferred fixes unasked
                unsafe = "" if finding.fix.safe else " (unsafe: check the result)"
                actions.append(types.CodeAction(
                    title=f"trainlint ({finding.code}): {finding.fix.description}{unsafe}",
                    kind=types.CodeActionKind.QuickFix,
                    diagnostics=[diagnostic],
                    is_preferred=finding.fix.safe,
                    edit=types.WorkspaceEdit(changes={uri: [to_text_edit(e, positions) for e in finding.fix.edits]}),
                ))
            if finding.code in ls.rules:
                actions.append(types.CodeAction(
                    title=f"Disable {finding.code} for this line",
                    kind=types.CodeActionKind.QuickFix,
                    diagnostics=[diagnostic],
                    edit=types.WorkspaceEdit(changes={uri: [_suppression_edit(analysis, positions, finding)]}),
                ))
    fix_all_kinds = [kind for kind in (FIX_ALL_KIND, types.CodeActionKind.SourceFixAll) if only and wanted(kind)]
    if (not only or fix_all_kinds) and any(finding.fix is not None and finding.fix.safe for finding in analysis.findings):
        actions.append(types.CodeAction(
            title="trainlint: fix all auto-fixable problems",
            kind=FIX_ALL_KIND,
            data={"uri": uri, "version": analysis.version},
        ))
    return actions


@server.feature(types.CODE_ACTION_RESOLVE)
async def resolve_code_action(ls: TrainlintServer, action: types.CodeAction) -> types.CodeAction:
    data = action.data if isinstance(action.data, dict) else {}
    uri = data.get("uri")
    if action.edit is not None or not isinstance(uri, str):
        return action
    analysis = await ls.analysis(uri)
    if analysis is None:
        return action
    edits = ls.fix_all_edits(uri, analysis)
    if edits:
        action.edit = types.WorkspaceEdit(changes={uri: edits})
    return action


def _in_cell(finding: Finding, program: CellProgram, index: int) -> Finding | None:
    """A finding of the joined program in one cell's coordinates; None when it is elsewhere. Evidence in
    other cells is left out (its position would be another document's); a fix that edits another cell too
    is dropped."""
    start, end = program.locate(finding.line), program.locate(finding.end_line)
    if start is None or start[0] != index:
        return None
    end_line = end[1] if end is not None and end[0] == index else start[1]

    def moved(line: int) -> int | None:
        located = program.locate(line)
        return located[1] if located is not None and located[0] == index else None

    evidence = tuple(
        msgspec.structs.replace(item, line=moved(item.line)) for item in finding.evidence
        if item.path is None and moved(item.line) is not None
    )
    fix = finding.fix
    if fix is not None:
        edits = [
            msgspec.structs.replace(edit, line=moved(edit.line), end_line=moved(edit.end_line))
            for edit in fix.edits
        ]
        fix = msgspec.structs.replace(fix, edits=tuple(edits)) if all(e.line and e.end_line for e in edits) else None
    return msgspec.structs.replace(finding, line=start[1], end_line=end_line, evidence=evidence, fix=fix)


def _suppression_edit(analysis: Analysis, positions: Positions, finding: Finding) -> types.TextEdit:
    """Add the code to the line's ``# trainlint: ignore[...]``, or append one."""
    line_text = analysis.lines[finding.line - 1] if finding.line - 1 < len(analysis.lines) else ""
    existing = re.search(r"#\s*trainlint:\s*ignore\[(?P<codes>[^\]]*)\]", line_text)
    if existing:
        codes = [c.strip() for c in existing.group("codes").split(",") if c.strip()]
        replacement = f"# trainlint: ignore[{', '.join([*codes, finding.code])}]"
        start, end = existing.start() + 1, existing.end() + 1
        return types.TextEdit(range=positions.range_to_client(finding.line, start, finding.line, end), new_text=replacement)
    end = len(line_text.rstrip()) + 1
    return types.TextEdit(
        range=positions.range_to_client(finding.line, end, finding.line, len(line_text) + 1),
        new_text=f"  # trainlint: ignore[{finding.code}]",
    )


# ---------------------------------------------------------------------- hover
@server.feature(types.TEXT_DOCUMENT_HOVER)
async def hover(ls: TrainlintServer, params: types.HoverParams) -> types.Hover | None:
    uri = params.text_document.uri
    if not ls.knows(uri):
        return None
    document = ls.workspace.get_text_document(uri)
    lines = split_lines(document.source)
    positions = Positions(lines, ls.encoding)
    line, column = positions.from_client(params.position)
    if line >= len(lines):
        return None
    text = lines[line]
    comment = next((c for c in find_suppressions(text) if c.column - 1 <= column < c.end_column - 1), None)
    if comment is None:
        return await _vram_hover(ls, uri, line + 1)
    for match in _CODE.finditer(text, comment.column - 1, comment.end_column - 1):
        if match.start() <= column < match.end():
            rule = next((r for r in ls.rules.values() if match.group().upper() == r.code or match.group().lower() == r.name), None)
            if rule is None:
                return None
            markdown = _markdown(ls)
            body = rule.explain()
            heading = f"**{rule.code} {rule.name}** ({rule.severity.label})" if markdown else f"{rule.code} {rule.name} ({rule.severity.label})"
            contents = types.MarkupContent(
                kind=types.MarkupKind.Markdown if markdown else types.MarkupKind.PlainText,
                value=f"{heading}\n\n{body}" + (f"\n\n{rule.help_uri()}" if rule.help_uri() else ""),
            )
            hover_range = types.Range(
                start=positions.to_client(line + 1, match.start() + 1), end=positions.to_client(line + 1, match.end() + 1)
            )
            return types.Hover(contents=contents, range=hover_range)
    return None


async def _vram_hover(ls: TrainlintServer, uri: str, line: int) -> types.Hover | None:
    """On a model, model-class, batch-size or sequence-length line: the VRAM estimate for the script."""
    analysis = await ls.analysis(uri, recent=True)
    if analysis is None or not any(anchor.line == line for anchor in analysis.anchors):
        return None
    estimate = await ls.vram(uri, analysis)
    if estimate is None:
        return None
    markdown = _markdown(ls)
    return types.Hover(
        contents=types.MarkupContent(
            kind=types.MarkupKind.Markdown if markdown else types.MarkupKind.PlainText, value=hover_text(estimate, markdown),
        ),
        range=Positions(analysis.lines, ls.encoding).line_range(line),
    )


@server.feature(types.TEXT_DOCUMENT_INLAY_HINT)
async def inlay_hints(ls: TrainlintServer, params: types.InlayHintParams) -> list[types.InlayHint] | None:
    """At the end of each model and batch-size line in the requested range: the estimate; without one, a
    single hint on the model line (or none)."""
    uri = params.text_document.uri
    if uri not in ls.documents or not ls.settings_of(uri).inlay_hints:
        return None
    analysis = await ls.analysis(uri, recent=True)
    if analysis is None:
        return None
    first, last = params.range.start.line + 1, params.range.end.line + 1
    anchors = [anchor for anchor in analysis.anchors if first <= anchor.line <= last and anchor.kind in (MODEL, BATCH_SIZE)]
    if not anchors:
        return []
    estimate = await ls.vram(uri, analysis)
    if estimate is None:
        return None
    if estimate.report is None:  # one hint, where the model is built (the hover says how to name it), or none
        anchors = [anchor for anchor in anchors if anchor.kind == MODEL][:1]
    positions = Positions(analysis.lines, ls.encoding)
    label = inlay_label(estimate)
    return [types.InlayHint(position=positions.line_range(anchor.line).end, label=label, padding_left=True) for anchor in anchors]


def _markdown(ls: TrainlintServer) -> bool:
    text_document = ls.client_capabilities.text_document
    hover_capability = text_document.hover if text_document is not None else None
    formats = hover_capability.content_format if hover_capability is not None else None
    return not formats or types.MarkupKind.Markdown in formats


# ---------------------------------------------------------------------- commands
@server.command(COMMAND_FIX_ALL)
async def fix_all_command(ls: TrainlintServer, *args: Any) -> bool:
    uri = _uri_argument(args)
    if uri is None:
        return False
    analysis = await ls.analysis(uri)
    edits = ls.fix_all_edits(uri, analysis) if analysis is not None else None
    if not edits:
        return False
    result = await ls.workspace_apply_edit_async(
        types.ApplyWorkspaceEditParams(edit=types.WorkspaceEdit(changes={uri: edits}), label="trainlint: fix all")
    )
    return bool(result and result.applied)


@server.command(COMMAND_VRAM)
async def vram_command(ls: TrainlintServer, *args: Any) -> str:
    """The whole VRAM breakdown of a document, returned as text and shown to the user.

    Arguments: the document's URI, or `{"uri": ..., "show": false}` for a client that displays the
    text itself (a status bar) and wants no message window.
    """
    uri = _uri_argument(args)
    show = not any(isinstance(arg, dict) and arg.get("show") is False for arg in args)
    analysis = await ls.analysis(uri) if uri is not None else None
    estimate = await ls.vram(uri, analysis) if analysis is not None else None
    if estimate is None:
        text = "trainlint: give the URI of an open document to show its VRAM breakdown"
    else:
        text = hover_text(estimate, markdown=False)
    if show:
        ls.window_log_message(types.LogMessageParams(type=types.MessageType.Info, message=text))
        ls.window_show_message(types.ShowMessageParams(type=types.MessageType.Info, message=text))
    return text


@server.command(COMMAND_DEBUG)
def debug_command(ls: TrainlintServer, *args: Any) -> str:
    lines = [
        f"trainlint {trainlint.__version__} (Python {sys.version.split()[0]})",
        f"diagnostics: {'pull' if ls.pulls else 'push'}; position encoding: {ls.encoding}",
        f"editor settings: {ls.editor_settings}",
        *(f"  settings of {folder}: {settings}" for folder, settings in ls.folder_settings.items()),
        f"open documents: {len(ls.documents)}; idle garbage collections so far: {ls.collector.collections}",
    ]
    for uri, state in ls.documents.items():
        latest = state.latest
        summary = f"version {latest.version}, {len(latest.findings)} findings" if latest else "not analysed yet"
        summary += f", {state.analyses} analyses"
        config = ls.project_config(state.path).source
        lines.append(f"  {uri}: {summary}; config {config or 'defaults'}; {_text_digest(ls.workspace.get_text_document(uri).source)}")
    info = "\n".join(lines)
    ls.window_log_message(types.LogMessageParams(type=types.MessageType.Info, message=info))
    return info


def _text_digest(text: str) -> str:
    """What the server holds of a document, short enough to compare with the editor's copy by eye."""
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return f"text {len(text):,} characters, sha256 {digest}"


def _uri_argument(args: tuple) -> str | None:
    for arg in args:
        if isinstance(arg, str):
            return arg
        if isinstance(arg, (list, tuple)):
            found = _uri_argument(tuple(arg))
            if found:
                return found
        if isinstance(arg, dict) and isinstance(arg.get("uri"), str):
            return arg["uri"]
    return None


def start(tcp: str | None = None) -> None:
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="trainlint: %(levelname)s %(message)s")
    logging.getLogger("pygls").setLevel(logging.WARNING)  # it logs every message at INFO
    server.collector.start()
    # The analysis runs on a worker thread and holds the GIL in long stretches; at Python's default
    # 5 ms switch interval each message the event loop reads (a change, a pull, a cancel) waited
    # for it several times, so a fast typist's messages queued up behind the analyses.
    sys.setswitchinterval(0.0005)
    if tcp:
        host, _, port = tcp.rpartition(":")
        server.start_tcp(host or "127.0.0.1", int(port))
        return
    status = server.start_io()
    # An analysis still running (a huge document) must not keep the process alive after `exit`:
    # the worker threads would be joined at interpreter exit. Nothing is left to save.
    logging.shutdown()
    with contextlib.suppress(OSError, ValueError):  # pygls closes stdout on `exit`
        sys.stdout.flush()
    os._exit(status)
