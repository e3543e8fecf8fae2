"""The one object ``trainlint check`` (and ``--fix``) and the language server analyse files through.

A ``Linter`` holds the project configurations found so far and resolves, under the overrides a front
end puts over them (the command line's flags, the editor's settings), each file's settings (its
per-file-ignores included) and the rules those settings select. Each is resolved once and kept until
the configuration changes: the command line resolves them once per run; the language server says
when the editor's settings, its workspace folders or a configuration file changed
(``configuration_changed``).

The two front ends differ in one way: the command line stops at a broken configuration file (an
error the user fixes before anything is checked), while the editor must go on. A Linter given a
``problem`` callback tells it the problem and goes on: a configuration that cannot be read is told
and the built-in defaults used for its files, and a rule code or name in the editor's settings that
names no rule of a file's project is told and left out for that project.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from trainlint.config import PYPROJECT, TRAINLINT_TOML, Config, ConfigError, ConfigFinder
from trainlint.settings import EffectiveSettings, Overrides, known_overrides, resolve_settings

if TYPE_CHECKING:
    from trainlint.analysis.rules.base import Rule
    from trainlint.analysis.settings import AnalysisSettings

CONFIG_FILES = (PYPROJECT, TRAINLINT_TOML)

_Stamp = tuple[int, int] | None  # a configuration file's (modification time, size); None: not there


class Linter:
    """The configurations, each file's settings and each selection's rules, resolved once per
    configuration change.

    ``config``: every file's configuration (``--config``, ``--isolated``), else each file's nearest.
    ``problem``: see the module's docstring. ``recheck_s``: how often, at most, the configuration
    files looked at so far are checked for changes nobody reported (None: never)."""

    def __init__(
        self, *, config: Config | None = None, problem: Callable[[str], None] | None = None,
        recheck_s: float | None = None,
    ) -> None:
        self._explicit = config
        self._problem = problem
        self._recheck_s = recheck_s
        self._forget()

    def _forget(self) -> None:
        self._finder = ConfigFinder()
        self._configs: dict[Path, Config] = {}  # a folder -> the configuration of its files
        self._stamps: dict[Path, _Stamp] = {}  # every configuration file a lookup looked for, as it was then
        self._checked_at = time.monotonic()
        # id(config) -> (config, overrides, the file's per-file-ignores, its settings): the settings a
        # configuration gives its files, under each overrides and each set of per-file-ignores met
        self._resolved: dict[int, list[tuple[Config, Overrides, frozenset[str], EffectiveSettings]]] = {}
        self._by_path: dict[Path | None, tuple[Overrides, EffectiveSettings]] = {}  # ``settings_for``'s answers
        self._rules: dict[tuple[tuple[str, ...], ...], list[type[Rule]]] = {}

    def configuration_changed(self) -> None:
        """Forget every configuration, setting and selection: the next asks read and resolve them again."""
        self._forget()

    # ------------------------------------------------------------------ configurations
    def config_for(self, path: Path | None) -> Config:
        """The configuration of a file (for a folder, its own); None: the built-in defaults."""
        if self._explicit is not None:
            return self._explicit
        if path is None:
            return Config()
        absolute = Path(os.path.abspath(path))
        return self.config_for_folder(absolute if absolute.is_dir() else absolute.parent)

    def config_for_folder(self, folder: Path) -> Config:
        """The configuration of the files in ``folder``: the nearest above it, as ``trainlint check`` finds it."""
        if self._explicit is not None:
            return self._explicit
        folder = Path(os.path.abspath(folder))
        config = self._configs.get(folder)
        if config is None:
            if self._recheck_s is not None:
                self._stamps.update((file, _stamp(file)) for file in _candidates(folder) if file not in self._stamps)
            config = self._configs[folder] = self._read(folder)
        return config

    def _read(self, folder: Path) -> Config:
        if self._problem is None:
            return self._finder.for_folder(folder)
        try:
            return self._finder.for_folder(folder)
        except (ConfigError, OSError, ValueError) as error:
            self._problem(f"trainlint: configuration ignored: {error}")
            return Config(root=folder)

    def _recheck(self) -> None:
        """Forget everything when a configuration file looked for has changed since: at most once every
        ``recheck_s``. A client that watches files tells of a change as it happens, and a save in the
        editor is seen at once; this catches the rest: a client that cannot watch files, a file edited
        by another program, a configuration above the workspace folders, which no watcher covers.
        Once a second is a few dozen ``stat`` calls, where checking at each request (several per key)
        cost them at every key."""
        if self._recheck_s is None or time.monotonic() - self._checked_at < self._recheck_s:
            return
        self._checked_at = time.monotonic()
        if any(_stamp(file) != stamp for file, stamp in self._stamps.items()):
            self._forget()

    # ------------------------------------------------------------------ settings
    def settings_for(self, path: Path | None, overrides: Overrides) -> EffectiveSettings:
        """The settings of the file at ``path`` (None: a document that is no file) under ``overrides``."""
        self._recheck()
        kept = self._by_path.get(path)
        if kept is not None and kept[0] == overrides:
            return kept[1]
        settings = self.settings(self.config_for(path), overrides, path)
        self._by_path[path] = (overrides, settings)
        return settings

    def settings(self, config: Config, overrides: Overrides, path: Path | None = None) -> EffectiveSettings:
        """The settings ``config`` under ``overrides`` gives the file at ``path`` (its per-file-ignores
        dropped); None: any file of the project, without per-file-ignores. Resolved once per
        configuration, overrides and set of per-file-ignores."""
        per_file = config.per_file_ignores.codes_for(path) if path is not None and config.per_file_ignores else frozenset()
        resolved = self._resolved.setdefault(id(config), [])  # each entry holds its config: the id is not reused
        for kept_config, kept_overrides, kept_codes, settings in resolved:
            if kept_config is config and kept_codes == per_file and kept_overrides == overrides:
                return settings
        checked = overrides if self._problem is None else known_overrides(overrides, config.plugins, self._problem)
        settings = resolve_settings(config, checked, path)
        resolved.append((config, overrides, per_file, settings))
        return settings

    # ------------------------------------------------------------------ rules
    def rules_for(self, settings: AnalysisSettings) -> list[type[Rule]]:
        """The rules ``settings`` select, chosen once per selection; less a plugin's rules that have
        failed since (``registry.rule_failed``: a failed rule runs no more in this process). The
        server's analysis threads ask too: a selection depends only on its key, so two threads that
        make the same one at once keep the same."""
        from trainlint.analysis.engine import select_rules
        from trainlint.analysis.registry import has_failed

        key = (settings.select, settings.ignore, settings.plugins)
        rules = self._rules.get(key)
        if rules is None:
            rules = self._rules[key] = select_rules(settings)
        if any(has_failed(rule) for rule in rules):
            rules = self._rules[key] = [rule for rule in rules if not has_failed(rule)]
        return rules


def _candidates(folder: Path) -> list[Path]:
    """The files that could be the configuration of ``folder``'s files: each name in it and every folder above."""
    return [directory / name for directory in (folder, *folder.parents) for name in CONFIG_FILES]


def _stamp(file: Path) -> _Stamp:
    try:
        status = os.stat(file)
    except OSError:
        return None
    return status.st_mtime_ns, status.st_size
