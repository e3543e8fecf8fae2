"""What the client can do, read once from its ``initialize`` request.

Every feature asks this object, never the raw capabilities: which diagnostics model to use (pull,
or push for clients without pull, like Helix and Neovim before 0.10), which refresh requests the
client answers, whether hovers may be Markdown, and the position encoding both sides agreed on.
"""

from __future__ import annotations

from dataclasses import dataclass

from lsprotocol import types


@dataclass(frozen=True)
class ClientSupport:
    """Before ``initialize`` (a client that skips it): the least a client can do."""

    pulls_diagnostics: bool = False  # textDocument/diagnostic; else the server pushes publishDiagnostics
    diagnostic_refresh: bool = False  # workspace/diagnostic/refresh
    inlay_hint_refresh: bool = False  # workspace/inlayHint/refresh
    configuration: bool = False  # workspace/configuration
    watches_files: bool = False  # didChangeWatchedFiles, registered dynamically
    markdown_hover: bool = True  # hover contents in Markdown (a client that names no format gets it)
    position_encoding: str = types.PositionEncodingKind.Utf16

    @classmethod
    def of(cls, capabilities: types.ClientCapabilities, position_encoding: str | None) -> ClientSupport:
        """``position_encoding``: the one pygls chose from the client's list at initialize."""
        text_document = capabilities.text_document
        workspace = capabilities.workspace
        hover = text_document.hover if text_document is not None else None
        formats = hover.content_format if hover is not None else None
        diagnostics = workspace.diagnostics if workspace is not None else None
        inlay_hint = workspace.inlay_hint if workspace is not None else None
        watched = workspace.did_change_watched_files if workspace is not None else None
        return cls(
            pulls_diagnostics=text_document is not None and text_document.diagnostic is not None,
            diagnostic_refresh=bool(diagnostics is not None and diagnostics.refresh_support),
            inlay_hint_refresh=bool(inlay_hint is not None and inlay_hint.refresh_support),
            configuration=bool(workspace is not None and workspace.configuration),
            watches_files=bool(watched is not None and watched.dynamic_registration),
            markdown_hover=not formats or types.MarkupKind.Markdown in formats,
            position_encoding=position_encoding or types.PositionEncodingKind.Utf16,
        )
