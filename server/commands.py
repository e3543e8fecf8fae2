"""The server's commands (``workspace/executeCommand``): apply every safe fix, show the VRAM
breakdown, and print what the server knows (for bug reports)."""

from __future__ import annotations

import hashlib
import sys
from typing import Any

from lsprotocol import types

import trainlint

from .code_actions import fix_all_edits
from .language_server import TrainlintServer  # at run time: pygls reads command handlers' annotations
from .scheduling import analysis as analysis_of
from .scheduling import vram

COMMAND_FIX_ALL = "trainlint.fixAll"
COMMAND_VRAM = "trainlint.showVramBreakdown"
COMMAND_DEBUG = "trainlint.printDebugInfo"


async def fix_all_command(ls: TrainlintServer, *args: Any) -> bool:
    uri = _uri_argument(args)
    if uri is None:
        return False
    analysis = await analysis_of(ls, uri)
    edits = fix_all_edits(ls, uri, analysis) if analysis is not None else None
    if not edits:
        return False
    result = await ls.workspace_apply_edit_async(
        types.ApplyWorkspaceEditParams(edit=types.WorkspaceEdit(changes={uri: edits}), label="trainlint: fix all")
    )
    return bool(result and result.applied)


async def vram_command(ls: TrainlintServer, *args: Any) -> str:
    """The whole VRAM breakdown of a document, returned as text and shown to the user.

    Arguments: the document's URI, or `{"uri": ..., "show": false}` for a client that displays the
    text itself (a status bar) and wants no message window.
    """
    from trainlint.estimator.editor import hover_text  # here: the server starts without the estimator

    uri = _uri_argument(args)
    show = not any(isinstance(arg, dict) and arg.get("show") is False for arg in args)
    analysis = await analysis_of(ls, uri) if uri is not None else None
    estimate = await vram(ls, uri, analysis) if uri is not None and analysis is not None else None
    if estimate is None:
        text = "trainlint: give the URI of an open document to show its VRAM breakdown"
    else:
        text = hover_text(estimate, markdown=False)
    if show:
        ls.window_log_message(types.LogMessageParams(type=types.MessageType.Info, message=text))
        ls.window_show_message(types.ShowMessageParams(type=types.MessageType.Info, message=text))
    return text


def debug_command(ls: TrainlintServer, *args: Any) -> str:
    client = ls.client
    lines = [
        f"trainlint {trainlint.__version__} (Python {sys.version.split()[0]})",
        f"diagnostics: {'pull' if client.pulls_diagnostics else 'push'}; position encoding: {client.position_encoding}",
        f"editor settings: {ls.settings.editor}",
        *(f"  settings of {folder}: {settings}" for folder, settings in ls.settings.folders.items()),
        f"open documents: {len(ls.documents)}; full garbage collections at pauses so far: {ls.idle_gc.collections}",
    ]
    for uri, state in ls.documents.items():
        latest = state.latest
        summary = f"version {latest.version}, {len(latest.findings)} findings" if latest else "not analysed yet"
        summary += f", {state.analyses} analyses ({state.stopped} stopped for a newer text)"
        if state.first_remembered:
            summary += ", its first report remembered from an earlier analysis of its text"
        if latest is not None and latest.asked.anchors is not None:
            found = "carried from an older text" if latest.asked.carried else "found for its text"
            summary += f", {len(latest.asked.anchors)} VRAM lines {found}"
        config = ls.linter.config_for(state.path).source
        lines.append(f"  {uri}: {summary}; config {config or 'defaults'}; {_text_digest(ls.workspace.get_text_document(uri).source)}")
    info = "\n".join(lines)
    ls.window_log_message(types.LogMessageParams(type=types.MessageType.Info, message=info))
    return info


def _text_digest(text: str) -> str:
    """What the server holds of a document, short enough to compare with the editor's copy by eye."""
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return f"text {len(text):,} characters, sha256 {digest}"


def _uri_argument(args: tuple[Any, ...]) -> str | None:
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
