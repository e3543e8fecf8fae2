"""The settings a document is analysed with, and how they reach the server.

The editor's settings come from ``initializationOptions``, then ``workspace/configuration`` (asked
again on ``workspace/didChangeConfiguration`` and when workspace folders change), each folder's
over the editor-wide ones. The project's come from the nearest ``[tool.trainlint]`` or
``trainlint.toml``. The server's ``Linter`` (``trainlint.linter``) puts the two together, as
``trainlint check`` does, and keeps each document's settings until something changes: the editor's
settings, the workspace folders, a configuration file (``didChangeWatchedFiles`` where the client
watches files, a save in the editor, and in any case a check of the configuration files'
modification times at most once a second: ``CONFIG_RECHECK_S``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from lsprotocol import types

from trainlint.linter import CONFIG_FILES
from trainlint.settings import EditorSettings, parse_editor_settings

from . import diagnostics

if TYPE_CHECKING:
    from .language_server import TrainlintServer

log = logging.getLogger("trainlint.server")

# How often, at most, the configuration files are checked for a change no message told of (the
# Linter's ``recheck_s``): a file another program wrote, one above the workspace folders, a client
# that watches no files. Sooner than a person switches back to the editor after such an edit.
CONFIG_RECHECK_S = 1.0


class SettingsStore:
    """The editor's settings, editor-wide and per workspace folder. ``problem`` tells the user about
    a value that was ignored."""

    def __init__(self, problem: Callable[[str], None]) -> None:
        self.problem = problem
        self.editor = EditorSettings()
        # Multi-root workspaces: a folder's own `trainlint` settings, over the editor-wide ones.
        self.folders: dict[str, EditorSettings] = {}

    def apply(self, raw: Any, origin: str) -> bool:
        """Read the editor-wide settings from a client payload; whether they changed."""
        settings, problems = parse_editor_settings(raw, self.editor)
        for problem in problems:
            self.problem(f"trainlint: {origin}: {problem}")
        changed = settings != self.editor
        self.editor = settings
        return changed

    def apply_folders(self, answers: dict[str, Any]) -> bool:
        """Each workspace folder's answer to workspace/configuration, read over the editor-wide
        settings; whether any folder's settings changed."""
        folders: dict[str, EditorSettings] = {}
        for folder, raw in answers.items():
            settings, problems = parse_editor_settings(raw, self.editor)
            for problem in problems:
                self.problem(f"trainlint: settings of {folder}: {problem}")
            if settings != self.editor:
                folders[folder] = settings
        changed = folders != self.folders
        self.folders = folders
        return changed

    def of(self, uri: str) -> EditorSettings:
        """The editor settings for a document: its workspace folder's (the innermost), else the editor's."""
        best = None
        for folder in self.folders:
            if uri.startswith(folder.rstrip("/") + "/") and (best is None or len(folder) > len(best)):
                best = folder
        return self.folders[best] if best is not None else self.editor


# ---------------------------------------------------------------------- handlers
async def watch_config_files(ls: TrainlintServer) -> None:
    """Ask the client to tell us when a pyproject.toml or trainlint.toml changes, where it can."""
    if not ls.client.watches_files:
        return
    options = types.DidChangeWatchedFilesRegistrationOptions(
        watchers=[types.FileSystemWatcher(glob_pattern=f"**/{name}") for name in CONFIG_FILES]
    )
    registration = types.Registration(
        id="trainlint-config-watch", method=types.WORKSPACE_DID_CHANGE_WATCHED_FILES, register_options=options
    )
    try:
        await ls.client_register_capability_async(types.RegistrationParams(registrations=[registration]))
    except Exception as error:  # the Linter's check of the files' modification times still notices edits
        log.info("file watching not registered: %s", error)


async def pull_configuration(ls: TrainlintServer) -> None:
    """Ask the client for the `trainlint` section, editor-wide and of each workspace folder."""
    if not ls.client.configuration:
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
    changed = answer[0] is not None and ls.settings.apply(answer[0], "workspace settings")
    changed = ls.settings.apply_folders({folder: raw for folder, raw in zip(folders, answer[1:]) if raw is not None}) or changed
    if changed:
        ls.linter.configuration_changed()
        diagnostics.refresh_all(ls)


async def did_change_configuration(ls: TrainlintServer, params: types.DidChangeConfigurationParams) -> None:
    if params.settings and not ls.client.configuration:
        ls.settings.apply(params.settings, "settings")
        ls.linter.configuration_changed()
        diagnostics.refresh_all(ls)
        return
    await pull_configuration(ls)


async def did_change_workspace_folders(ls: TrainlintServer, params: types.DidChangeWorkspaceFoldersParams) -> None:
    await pull_configuration(ls)  # a folder's own settings: what was resolved under the old ones is forgotten


def did_change_watched_files(ls: TrainlintServer, params: types.DidChangeWatchedFilesParams) -> None:
    ls.linter.configuration_changed()
    ls.forget_lookups()
    diagnostics.refresh_all(ls)
