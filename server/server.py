"""The trainlint language server (pygls 2): which handler answers which LSP message.

Each feature lives in its own module; this one creates the server, resolves what the client can
do once at ``initialize`` (``capabilities``), registers every handler, and starts the transport.
docs/server.md ("Reading the server") follows an edit through the modules to its diagnostics.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import threading

from lsprotocol import types

from trainlint.analysis.registry import allow_local_plugins, forbid_local_plugins
from trainlint.settings import ALLOW_LOCAL_PLUGINS

from . import code_actions, commands, configuration, diagnostics, hover, inlay_hints, text_sync, timeline
from .capabilities import ClientSupport
from .documents import import_ahead
from .language_server import TrainlintServer
from .text import LspWorkspace

server = TrainlintServer()


# ---------------------------------------------------------------------- lifecycle
@server.feature(types.INITIALIZE)
def initialize(ls: TrainlintServer, params: types.InitializeParams) -> None:
    ls.protocol._workspace = LspWorkspace.replacing(ls.workspace)  # before any document arrives
    ls.client = ClientSupport.of(params.capabilities, ls.workspace.position_encoding)
    options = params.initialization_options if isinstance(params.initialization_options, dict) else {}
    # A project's local plugins run its code: loaded only when the user said so outside the project,
    # in the settings their editor sends at start (not later, and not from the workspace's files).
    if options.get("workspaceTrusted") is False:  # VS Code's restricted mode
        forbid_local_plugins("the workspace is not trusted (VS Code's restricted mode)")
    elif options.get("workspaceTrusted") is True or options.get(ALLOW_LOCAL_PLUGINS) is True:
        allow_local_plugins()
    else:
        forbid_local_plugins(f"local plugins run the project's code; allow them with `{ALLOW_LOCAL_PLUGINS}: true` "
                             "in the initializationOptions your editor sends")
    if ls.settings.apply(params.initialization_options, "initializationOptions"):
        ls.generation += 1


@server.feature(types.INITIALIZED)
async def initialized(ls: TrainlintServer, params: types.InitializedParams) -> None:
    await configuration.watch_config_files(ls)
    await configuration.pull_configuration(ls)


# ---------------------------------------------------------------------- every other message
server.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)(configuration.did_change_configuration)
server.feature(types.WORKSPACE_DID_CHANGE_WORKSPACE_FOLDERS)(configuration.did_change_workspace_folders)
server.feature(types.WORKSPACE_DID_CHANGE_WATCHED_FILES)(configuration.did_change_watched_files)

server.feature(types.TEXT_DOCUMENT_DID_OPEN)(text_sync.did_open)
server.feature(types.TEXT_DOCUMENT_DID_CHANGE)(text_sync.did_change)
server.feature(types.TEXT_DOCUMENT_DID_SAVE, types.SaveOptions(include_text=True))(text_sync.did_save)
server.feature(types.TEXT_DOCUMENT_DID_CLOSE)(text_sync.did_close)
server.feature(types.NOTEBOOK_DOCUMENT_DID_OPEN)(text_sync.notebook_did_open)
server.feature(types.NOTEBOOK_DOCUMENT_DID_CHANGE)(text_sync.notebook_did_change)
server.feature(types.NOTEBOOK_DOCUMENT_DID_CLOSE)(text_sync.notebook_did_close)

server.feature(
    types.TEXT_DOCUMENT_DIAGNOSTIC,
    types.DiagnosticOptions(identifier=diagnostics.SOURCE, inter_file_dependencies=False, workspace_diagnostics=False),
)(diagnostics.pull_diagnostics)
server.feature(
    types.TEXT_DOCUMENT_CODE_ACTION,
    types.CodeActionOptions(code_action_kinds=code_actions.KINDS, resolve_provider=True),
)(code_actions.code_actions)
server.feature(types.CODE_ACTION_RESOLVE)(code_actions.resolve_code_action)
server.feature(types.TEXT_DOCUMENT_HOVER)(hover.hover)
server.feature(types.TEXT_DOCUMENT_INLAY_HINT)(inlay_hints.inlay_hints)

server.command(commands.COMMAND_FIX_ALL)(commands.fix_all_command)
server.command(commands.COMMAND_VRAM)(commands.vram_command)
server.command(commands.COMMAND_DEBUG)(commands.debug_command)


def start(tcp: str | None = None) -> None:
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="trainlint: %(levelname)s %(message)s")
    logging.getLogger("pygls").setLevel(logging.WARNING)  # it logs every message at INFO
    timeline.start()
    server.idle_gc.start()
    # The analysis is imported while the client and the server greet each other, not at the first didOpen.
    threading.Thread(target=import_ahead, name="trainlint-imports", daemon=True).start()
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
