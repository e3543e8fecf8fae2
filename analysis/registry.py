"""Every rule trainlint runs, found by discovery, and the invariants every rule keeps.

Three sources, one mechanism (:func:`rules_in`: the ``Rule`` subclasses a module defines):

- the built-in rules: every module of ``analysis/rules`` (adding a rule is adding a file);
- installed packages' rules, named by the ``trainlint.rules`` entry-point group (the estimator's
  TL601 is one: trainlint's own pyproject.toml declares it, so ``analysis`` never imports the
  estimator);
- local plugins, only those a configuration's ``plugins`` key names: a Python file (a path
  relative to the configuration file) or an importable module name. Loading one runs the
  project's code, so nothing is loaded unless it is named (docs/writing-rules.md, "Trust").

Codes starting with ``TL`` are trainlint's own; a plugin's codes are letters then digits in
another namespace (``ACME101``). A rule that breaks an invariant (a duplicate code or name, a
malformed code) fails the built-in set when it is first loaded and is refused, with a message, when a plugin
brings it; what needs the examples run (each fires, each produced fix has its expected result) is
checked by the test suite and by ``trainlint test-rule`` (``trainlint/rule_examples.py``). A plugin that fails to load is reported
once (:func:`take_problems`) and the other rules go on.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import importlib.util
import inspect
import pkgutil
import re
import sys
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from . import rules as builtin_package
from .files import MAX_SOURCE_BYTES, UnreadableFile, read_bounded
from .rules.base import Rule

ENTRY_POINT_GROUP = "trainlint.rules"
RESERVED_PREFIX = "TL"  # trainlint's own codes; the engine's TL000-TL002 among them
OWN_DISTRIBUTION = "trainlint"  # the one distribution whose entry points may use TL codes
CODE_PATTERN = re.compile(r"[A-Z]+[0-9]+")
NAME_PATTERN = re.compile(r"[a-z][a-z0-9]*(?:-[a-z0-9]+)*")


class RuleProblem(Exception):
    """Rules that break an invariant; the message names each rule and what is wrong."""


@dataclass(frozen=True)
class PluginProblem:
    """A plugin that could not be loaded or a plugin rule that failed while checking."""

    plugin: str  # as the configuration or the entry point names it
    message: str

    def __str__(self) -> str:
        return f"plugin {self.plugin}: {self.message}"


def rules_in(module: ModuleType) -> list[type[Rule]]:
    """The rules a module defines (imported ones belong to the module that defines them)."""
    return [
        value for value in vars(module).values()
        if inspect.isclass(value) and issubclass(value, Rule) and value is not Rule
        and value.__module__ == module.__name__ and "code" in _attributes(value)
    ]


def _attributes(rule: type[Rule]) -> set[str]:
    return {name for klass in rule.__mro__ if klass is not Rule for name in vars(klass)}


def invariant_problems(rules: Sequence[type[Rule]], *, own: bool, known: Iterable[type[Rule]] = ()) -> list[str]:
    """What is wrong with ``rules`` (empty when nothing is), checked against each other and ``known``.

    ``own``: trainlint's rules, whose codes start with TL; everyone else's must not.
    """
    problems: list[str] = []
    codes = {rule.code: rule for rule in known}
    names = {rule.name: rule for rule in known}
    for rule in rules:
        where = f"{rule.__module__}.{rule.__qualname__}"
        code, name = getattr(rule, "code", None), getattr(rule, "name", None)
        if not isinstance(code, str) or not CODE_PATTERN.fullmatch(code):
            problems.append(f"{where}: code {code!r} is not letters then digits (like ACME101)")
            continue
        if own != code.startswith(RESERVED_PREFIX):
            wanted = f"start with {RESERVED_PREFIX}" if own else f"not start with {RESERVED_PREFIX} (trainlint's own codes)"
            problems.append(f"{where}: code {code} must {wanted}")
        if not isinstance(name, str) or not NAME_PATTERN.fullmatch(name):
            problems.append(f"{where}: name {name!r} is not kebab-case (like retained-graph)")
        if code in codes and codes[code] is not rule:
            problems.append(f"{where}: code {code} is already {codes[code].__module__}.{codes[code].__qualname__}'s")
        if name in names and names[name] is not rule:
            problems.append(f"{where}: name {name} is already {names[name].code}'s")
        codes.setdefault(code, rule)
        if isinstance(name, str):
            names.setdefault(name, rule)
        if not isinstance(getattr(rule, "severity", None), int):
            problems.append(f"{where}: no severity")
    return problems


def _discover_builtin() -> tuple[type[Rule], ...]:
    found: list[type[Rule]] = []
    for info in pkgutil.iter_modules(builtin_package.__path__):
        if info.name != "base":
            found += rules_in(importlib.import_module(f"{builtin_package.__name__}.{info.name}"))
    problems = invariant_problems(found, own=True)
    if problems:
        raise RuleProblem("; ".join(problems))
    return tuple(sorted(found, key=lambda rule: rule.code))


# Held while rules are imported: the language server imports them on a thread of its own as it
# starts, and a request on another thread must wait for that rather than import them alongside.
_importing = threading.RLock()


@functools.cache
def _builtin_rules() -> tuple[type[Rule], ...]:
    return _discover_builtin()


def builtin_rules() -> tuple[type[Rule], ...]:
    """The built-in rules, found on first use: importing them imports LibCST and the whole analysis,
    which the language server does not need before its first analysis (import time is start-up time)."""
    with _importing:
        return _builtin_rules()


class _Loaded:
    """What this process has loaded: installed packages' rules once, each named plugin once."""

    def __init__(self) -> None:
        self.installed: tuple[type[Rule], ...] | None = None
        self.plugins: dict[str, tuple[type[Rule], ...]] = {}  # resolved spec -> its rules
        self.origin: dict[type[Rule], str] = {}  # a rule -> the plugin (spec) that brought it
        self.failed: set[type[Rule]] = set()  # plugin rules that raised while checking: off from then on
        self.problems: list[PluginProblem] = []
        self.reported: set[PluginProblem] = set()
        # Why local plugins are not loaded in this process: they run the project's code, so each
        # front end loads them only when the user allowed it outside the project (allow_local_plugins).
        self.forbidden: str | None = "local plugins run the project's code, and loading them was not allowed"

    def problem(self, plugin: str, message: str) -> None:
        problem = PluginProblem(plugin, message)
        if problem not in self.reported:
            self.reported.add(problem)
            self.problems.append(problem)


_loaded = _Loaded()


def installed_rules() -> tuple[type[Rule], ...]:
    """Rules of the ``trainlint.rules`` entry points of every installed distribution (once per process)."""
    with _importing:
        return _installed_rules()


def _installed_rules() -> tuple[type[Rule], ...]:
    if _loaded.installed is None:
        # Imported here: importlib.metadata (zipfile, email, csv, ...) is a tenth of the language
        # server's start-up, and the server looks for installed rules only on its analysis thread.
        from importlib import metadata

        _loaded.installed = ()  # a plugin that imports this module while loading sees no loop
        found: list[type[Rule]] = []
        for entry in sorted(metadata.entry_points(group=ENTRY_POINT_GROUP), key=lambda entry: entry.value):
            distribution = entry.dist.name if entry.dist is not None else None
            label = f"{entry.value} (entry point {entry.name!r} of {distribution or 'an unknown distribution'})"
            try:
                loaded = entry.load()
            except BaseException as error:  # noqa: B036 - a plugin calling exit() must not end the run
                if isinstance(error, KeyboardInterrupt):
                    raise
                _loaded.problem(label, f"failed to import: {_described(error)}")
                continue
            rules = rules_in(loaded) if isinstance(loaded, ModuleType) else [loaded] if _is_rule(loaded) else []
            if not rules:
                _loaded.problem(label, "defines no rule (a Rule subclass with a code)")
            own = distribution is not None and distribution.lower() == OWN_DISTRIBUTION
            found += _accepted(label, rules, own=own, known=[*builtin_rules(), *found])
        _loaded.installed = tuple(found)
    return _loaded.installed


def load_plugin(spec: str) -> tuple[type[Rule], ...]:
    """The rules of one local plugin: an absolute path of a ``.py`` file, or a module name
    (``Config`` resolves paths relative to the configuration file). Loaded once per process;
    on failure, a problem is recorded and there are no rules."""
    if _loaded.forbidden is not None:
        _loaded.problem(spec, f"not loaded: {_loaded.forbidden}")
        return ()
    if spec in _loaded.plugins:
        return _loaded.plugins[spec]
    _loaded.plugins[spec] = ()
    try:
        module = _import_plugin(spec)
    except BaseException as error:  # noqa: B036 - a plugin calling exit() must not end the run
        if isinstance(error, KeyboardInterrupt):
            raise
        _loaded.problem(spec, f"failed to import: {_described(error)}")
        return ()
    rules = rules_in(module)
    if not rules:
        _loaded.problem(spec, "defines no rule (a Rule subclass with a code)")
    known = [*builtin_rules(), *installed_rules(), *(rule for loaded in _loaded.plugins.values() for rule in loaded)]
    accepted = _accepted(spec, rules, own=False, known=known)
    _loaded.plugins[spec] = accepted
    return accepted


def forbid_local_plugins(reason: str) -> None:
    """From now on no local plugin is loaded in this process (the default, until a front end allows
    them); each one a configuration names is reported once, with ``reason``. Installed packages'
    rules still run: installing a package is the user's consent, given outside the project."""
    _loaded.forbidden = reason


def local_plugins_allowed() -> bool:
    return _loaded.forbidden is None


def allow_local_plugins() -> None:
    """Load the local plugins configurations name: the user allowed it outside the project (a
    command-line flag, their own editor settings, a trusted VS Code workspace)."""
    _loaded.forbidden = None


def is_plugin_path(spec: str) -> bool:
    """Whether a ``plugins`` entry names a file (``tools/lint_rules.py``) rather than a module."""
    return spec.endswith(".py") or "/" in spec or "\\" in spec


def _import_plugin(spec: str) -> ModuleType:
    if not is_plugin_path(spec):
        return importlib.import_module(spec)
    path = Path(spec)
    try:  # a FIFO would block the import, /dev/zero or a huge file fill the memory
        read_bounded(path, MAX_SOURCE_BYTES)
    except UnreadableFile as error:
        raise _Unreadable(f"cannot read it: {error}") from None
    digest = hashlib.sha1(str(path).encode()).hexdigest()[:12]
    stem = re.sub(r"\W", "_", path.stem)
    name = f"trainlint_plugin_{stem}_{digest}"
    module_spec = importlib.util.spec_from_file_location(name, path)
    if module_spec is None or module_spec.loader is None:
        raise ImportError(f"cannot load {spec} as a Python module")
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[name] = module  # a rule's `explain` reads its module's docstring from sys.modules
    try:
        module_spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module


def _accepted(plugin: str, rules: list[type[Rule]], *, own: bool, known: Sequence[type[Rule]]) -> tuple[type[Rule], ...]:
    accepted: list[type[Rule]] = []
    for rule in rules:
        problems = invariant_problems([rule], own=own, known=[*known, *accepted])
        if problems:
            _loaded.problem(plugin, f"rule refused: {'; '.join(problems)}")
            continue
        accepted.append(rule)
        _loaded.origin[rule] = plugin
    return tuple(accepted)


def _is_rule(value: object) -> bool:
    return inspect.isclass(value) and issubclass(value, Rule) and value is not Rule


class _Unreadable(Exception):
    """A plugin file that is not there to import: the message says why, and is all that is told."""


def _described(error: BaseException) -> str:
    text = str(error)
    if isinstance(error, _Unreadable):
        return text
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def all_rules() -> list[type[Rule]]:
    """Built-in and installed rules, and every plugin this process has loaded, sorted by code."""
    loaded = (rule for rules in _loaded.plugins.values() for rule in rules)
    return sorted({*builtin_rules(), *installed_rules(), *loaded}, key=lambda rule: rule.code)


def rules_for(plugins: Sequence[str]) -> list[type[Rule]]:
    """The rules one file runs: built-in and installed ones and those of the plugins its
    configuration names (loaded now when not yet), less plugin rules that failed while checking."""
    extra = (rule for spec in plugins for rule in load_plugin(spec))
    return sorted(
        {rule for rule in (*builtin_rules(), *installed_rules(), *extra) if rule not in _loaded.failed},
        key=lambda rule: rule.code,
    )


def plugin_of(rule: type[Rule]) -> str | None:
    """The plugin that brought a rule (a path, a module, an entry point); None for a built-in one."""
    return None if rule in builtin_rules() else _loaded.origin.get(rule)


def has_failed(rule: type[Rule]) -> bool:
    return rule in _loaded.failed


def rule_failed(rule: type[Rule], error: BaseException, path: str) -> None:
    """A plugin rule raised while checking ``path``: it is reported once and runs no more in this process."""
    _loaded.failed.add(rule)
    plugin = plugin_of(rule) or rule.__module__
    _loaded.problem(plugin, f"rule {rule.code} ({rule.name}) raised {_described(error)} while checking {path}; "
                            "it is turned off for the rest of this run")


def take_problems() -> list[PluginProblem]:
    """Plugin problems not yet handed out: each is handed out once per process."""
    problems, _loaded.problems = _loaded.problems, []
    return problems


def plugin_fingerprint(plugins: Sequence[str]) -> bytes:
    """What a cached result depends on besides the file: each plugin file's bytes (a module's: its source)."""
    digest = hashlib.sha256()
    for spec in plugins:
        digest.update(spec.encode(errors="surrogateescape") + b"\0")
        source = spec if is_plugin_path(spec) else _module_file(spec)
        try:
            digest.update(read_bounded(source, MAX_SOURCE_BYTES) if source else b"")
        except UnreadableFile as error:  # a plugin that was not loaded: bounded reads only, as for the sources
            digest.update(f"unreadable: {error}".encode())
    return digest.digest()


def _module_file(name: str) -> str | None:
    module = sys.modules.get(name)
    return getattr(module, "__file__", None) if module is not None else None
