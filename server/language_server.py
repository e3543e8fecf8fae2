"""The server's state, shared by every feature: the client, the settings, the open documents and
notebooks, and the two threads analyses run on; and the transport (stdio or TCP) it reads through.

The features themselves are functions in their own modules (``diagnostics``, ``code_actions``,
``hover``, ...) that take this object; ``server.py`` registers them.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import BinaryIO

from lsprotocol import types
from pygls.io_ import StdoutWriter
from pygls.lsp.server import LanguageServer
from pygls.uris import to_fs_path

import trainlint
from trainlint.analysis.registry import all_rules, take_problems
from trainlint.analysis.rules.base import Rule
from trainlint.analysis.workspace import Workspace
from trainlint.linter import Linter
from trainlint.settings import RUN_ON_SAVE, EffectiveSettings

from . import timeline
from .capabilities import ClientSupport
from .configuration import CONFIG_RECHECK_S, SettingsStore
from .documents import Analysis, DocumentState, Stopped
from .framing import BinaryReader, StreamReader, log_message, serve
from .idle_gc import IdleGarbageCollector
from .remembered import RememberedReports
from .text import LspTextDocument

log = logging.getLogger("trainlint.server")


class TrainlintServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__(
            "trainlint", trainlint.__version__,
            notebook_document_sync=types.NotebookDocumentSyncOptions(notebook_selector=[
                types.NotebookDocumentFilterWithCells(cells=[types.NotebookCellLanguage(language="python")], notebook="*"),
            ]),
        )
        self.client = ClientSupport()  # resolved at initialize
        self.settings = SettingsStore(self.problem)  # the editor's
        # The project configurations, and each document's settings and rules under the editor's settings.
        self.linter = Linter(problem=self.problem, recheck_s=CONFIG_RECHECK_S)
        self.documents: dict[str, DocumentState] = {}
        self.saved_text: dict[str, str] = {}
        self.pending: dict[str, asyncio.Task[None]] = {}  # each document's debounced publish (push mode)
        # Push mode, in the event loop's time: each document's first change not yet published, and its last publish.
        self.unpublished_since: dict[str, float] = {}
        self.last_published: dict[str, float] = {}
        self._change_waiters: dict[str, asyncio.Future[None]] = {}  # ``next_change``
        self.jobs: dict[str, asyncio.Future[Analysis | Stopped | None]] = {}  # each document's running analysis (``scheduling``)
        self.stale_hints: set[str] = set()  # documents whose inlay hints came from an older analysis
        # Documents whose pulled diagnostics came from an older analysis than the text's own: the
        # client is asked to pull again when a newer one is done (``scheduling``).
        self.stale_diagnostics: set[str] = set()
        self.generation = 0  # bumped whenever settings or files change, so result ids change with them
        # Two analysis lanes, one thread each: documents within their budget, and the others
        # (``DocumentState.expensive``), which then cannot hold up the first lane's documents.
        self.executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="trainlint-analysis")
        self.expensive_executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="trainlint-analysis-expensive")
        self._reported_problems: set[str] = set()
        self.idle_gc = IdleGarbageCollector()
        self.remembered = RememberedReports.in_user_cache()  # first reports of documents opened again
        self.workspaces: dict[Path, Workspace] = {}
        # Notebooks: one analysis of all code cells as one program, per notebook; the cells last published to.
        self.notebooks: dict[str, DocumentState] = {}
        self.notebook_cells: dict[str, set[str]] = {}

    # ------------------------------------------------------------------ transport
    def start_io(self, stdin: BinaryIO | None = None, stdout: BinaryIO | None = None) -> int:  # pyright: ignore[reportIncompatibleMethodOverride]  # pygls' returns None; ours returns the exit status for `start`
        """pygls' stdio server, reading through the framing guard (``framing.serve``).

        Returns the exit status: pygls' for ``exit`` (0 after ``shutdown``, else 1), 0 at the end of input."""
        self._stop_event = threading.Event()
        reader = BinaryReader(stdin or sys.stdin.buffer, self.thread_pool)
        self.protocol.set_writer(timeline.writer(StdoutWriter(stdout or sys.stdout.buffer)))
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
            self.protocol.set_writer(writer)
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

    # ------------------------------------------------------------------ messages
    @property
    def rules(self) -> dict[str, type[Rule]]:
        """Every rule by code: the built-in and installed ones, and the plugins loaded so far."""
        return {rule.code: rule for rule in all_rules()}

    def report_plugin_problems(self) -> None:
        """A plugin that failed to load or raised while checking: told once, the other rules go on."""
        for problem in take_problems():
            self.problem(f"trainlint: {problem}")

    def problem(self, message: str) -> None:
        """Tell the user once about something they can fix (a bad setting, a broken config file)."""
        log.warning(message)
        self.window_log_message(types.LogMessageParams(type=types.MessageType.Warning, message=message))
        if message not in self._reported_problems:
            self._reported_problems.add(message)
            self.window_show_message(types.ShowMessageParams(type=types.MessageType.Warning, message=message))

    # ------------------------------------------------------------------ documents
    def knows(self, uri: str) -> bool:
        """An open document, or a cell of an open notebook."""
        return uri in self.documents or self.workspace.get_notebook_document(cell_uri=uri) is not None

    def state(self, uri: str) -> DocumentState:
        """The open document's state, made on first use."""
        state = self.documents.get(uri)
        if state is None:
            state = self.documents[uri] = self.new_state(uri)
        return state

    def new_state(self, uri: str) -> DocumentState:
        path = file_path(uri)
        return DocumentState(uri, path, self.workspace_for(path), linter=self.linter)

    def workspace_for(self, path: Path | None) -> Workspace | None:
        """Imports resolve within the workspace folder holding the file (one shared index per folder)."""
        if path is None:
            return None
        folders = [folder for folder in map(file_path, (f.uri for f in self.workspace.folders.values())) if folder is not None]
        holding = [folder for folder in folders if folder == path.parent or folder in path.parents]
        root = max(holding, key=lambda folder: len(folder.parts)) if holding else path.parent
        workspace = self.workspaces.get(root)
        if workspace is None:
            workspace = self.workspaces[root] = Workspace([root])
        return workspace

    def forget_lookups(self) -> None:
        """A file appeared or changed on disk: imports that found nothing before are looked up again."""
        for workspace in self.workspaces.values():
            workspace.forget_lookups()

    def current_text(self, uri: str) -> tuple[str, int | None] | None:
        """The text to analyse and its version: the editor's, or with run-on-save the saved text (no version)."""
        if uri not in self.documents:
            return None
        document = self.workspace.get_text_document(uri)
        if self.settings.of(uri).run == RUN_ON_SAVE and uri in self.saved_text:
            return self.saved_text[uri], None
        return document.source, document.version

    def next_change(self, uri: str) -> asyncio.Future[None]:
        """Done when the document's text to analyse next changes, or the document closes."""
        future = self._change_waiters.get(uri)
        if future is None or future.done():
            future = self._change_waiters[uri] = asyncio.get_running_loop().create_future()
        return future

    def text_changed(self, uri: str) -> None:
        future = self._change_waiters.pop(uri, None)
        if future is not None and not future.done():
            future.set_result(None)

    def edited_document(self, uri: str) -> LspTextDocument | None:
        """The editor's document with the edits made to it (``text.LspTextDocument``)."""
        document = self.workspace.get_text_document(uri)
        return document if isinstance(document, LspTextDocument) else None

    def changes_of(self, uri: str, version: int | None) -> int:
        """How many edits the document has had, when the text to analyse is the editor's (``version``
        is not None); -1 with run-on-save, whose text is the saved one."""
        document = self.edited_document(uri)
        return document.changes if version is not None and document is not None else -1

    def settings_for(self, state: DocumentState) -> EffectiveSettings:
        """The document's settings: the Linter's, resolved once per change of settings or configuration."""
        return self.linter.settings_for(state.path, self.settings.of(state.uri).overrides())

    def lane(self, state: DocumentState, text: str) -> ThreadPoolExecutor:
        """Where a document's analysis runs: the expensive lane once it is large or went over budget."""
        return self.expensive_executor if state.expensive(text) else self.executor


def file_path(uri: str) -> Path | None:
    """The file a ``file:`` URI names; None for any other URI (an unsaved buffer)."""
    path = to_fs_path(uri) if uri.startswith("file:") else None
    return Path(path) if path else None
