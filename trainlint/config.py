"""Project settings from ``[tool.trainlint]`` in pyproject.toml or the top level of trainlint.toml.

Every problem becomes a ConfigError naming the file, the key and the value, because the CLI
prints it as the one line a user sees before exit code 2.
"""

from __future__ import annotations

import difflib
import errno
import os
import re
import stat
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from trainlint.analysis.engine_codes import ENGINE_CODES, engine_code_named
from trainlint.analysis.files import MAX_SETTINGS_BYTES, UnreadableFile, read_bounded
from trainlint.analysis.findings import Severity
from trainlint.analysis.registry import RESERVED_PREFIX, all_rules, is_plugin_path, local_plugins_allowed, rules_for
from trainlint.analysis.rules.base import Rule
from trainlint.analysis.selection import resolve_selector
from trainlint.globs import GlobError, GlobSpec, compile_pattern

if sys.version_info >= (3, 11):
    import tomllib
else:
    # The dependency only Python 3.10 installs (pyproject.toml); a checker running on 3.11+ has no copy to read.
    import tomli as tomllib  # pyright: ignore[reportMissingImports]

PYPROJECT = "pyproject.toml"
TRAINLINT_TOML = "trainlint.toml"


# The most parts a dotted key or table name may have (`a.b.c` has three; real ones have up to 7,
# `[tool.pixi.feature.cuda.target.linux-64.dependencies]`). Python's TOML reader builds a key one
# part at a time and looks up every prefix of it under the table's name, in time that grows with
# the square of the parts: one key of 50,000 parts took 16 s, a table name of 20,000 parts above
# 20,000 short keys 200 s. With at most 16, the largest file read (1 MiB) of the worst keys takes
# about as long as one of plain keys takes, a few seconds.
MAX_KEY_PARTS = 16
# What may hold dots that are not a key's: strings (multi-line first) and comments.
_TOML_STRING_OR_COMMENT = re.compile(
    r'"""(?:[^\\]|\\.)*?"""|\'\'\'.*?\'\'\'|"(?:[^"\\\n]|\\.)*"|\'[^\'\n]*\'|#[^\n]*', re.S
)
# With those replaced by `"`, a dotted key is a run of bare key characters, quotes, dots and
# blanks; floats and dates, the other places a dot stands, have one each.
_DOTTED_RUN = re.compile(r"[A-Za-z0-9_\-\"][A-Za-z0-9_\-\". \t]*")


class ConfigError(Exception):
    """A configuration problem, worded for the user."""


class _Table(msgspec.Struct, forbid_unknown_fields=True, rename="kebab"):
    select: list[str] = []
    extend_select: list[str] = []
    ignore: list[str] = []
    exclude: list[str] = []
    fail_on: str = "error"
    target_gpu: str | None = None
    cache_dir: str | None = None
    plugins: list[str] = []  # local rule plugins: .py files (relative to this file) or module names
    # Checked entry by entry below, so a message can name the entry's key.
    severity: dict[str, Any] = {}
    per_file_ignores: dict[str, Any] = {}


_KEYS = [field_name.replace("_", "-") for field_name in _Table.__struct_fields__]


class BadGlob(ValueError):
    """A gitignore-style pattern that cannot be compiled; ``index`` is its place in the list."""

    def __init__(self, index: int, pattern: str, reason: str) -> None:
        super().__init__(f"invalid pattern {shown_pattern(pattern)}: {reason}")
        self.index = index


def shown_pattern(pattern: str) -> str:
    """A pattern quoted in a message: its start, when it is too long to read on one line."""
    return repr(pattern) if len(pattern) <= _SHOWN_CHARS else f"{pattern[:_SHOWN_CHARS]!r}... ({len(pattern):,} characters)"


_SHOWN_CHARS = 60


def glob_spec(patterns: Sequence[str]) -> GlobSpec:
    """Gitignore-style patterns compiled into one matcher (trainlint.globs: linear time, never
    backtracking); BadGlob names the first bad one."""
    compiled = []
    for index, pattern in enumerate(patterns):
        try:
            compiled.append(compile_pattern(pattern))
        except GlobError as error:
            raise BadGlob(index, pattern, str(error)) from None
    return GlobSpec([pattern for pattern in compiled if pattern is not None])


class PerFileIgnores:
    """Which codes to drop for a file, from glob -> codes entries (gitignore-style globs)."""

    def __init__(self, entries: Sequence[tuple[str, frozenset[str]]], root: Path) -> None:
        self.root = root
        self._entries = [(glob_spec([glob]), codes) for glob, codes in entries]

    def __bool__(self) -> bool:
        return bool(self._entries)

    def codes_for(self, path: Path) -> frozenset[str]:
        relative = relative_posix(path, self.root)
        codes: set[str] = set()
        for spec, entry_codes in self._entries:
            if spec.match_file(relative):
                codes |= entry_codes
        return frozenset(codes)


@dataclass(frozen=True)
class Config:
    source: Path | None = None  # the file these settings came from; None means built-in defaults
    root: Path = field(default_factory=Path.cwd)  # where relative globs start: the config file's folder
    select: tuple[str, ...] = ()  # empty: every rule; extend-select is already added to it
    ignore: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    fail_on: Severity = Severity.ERROR
    target_gpu: str | None = None
    severity: dict[str, Severity] = field(default_factory=dict)  # rule code -> severity
    per_file_ignores: PerFileIgnores = field(default_factory=lambda: PerFileIgnores((), Path.cwd()))
    cache_dir: Path | None = None  # where `check` keeps results (absolute); None: the CLI's default
    plugins: tuple[str, ...] = ()  # local rule plugins: absolute paths of .py files, or module names


def relative_posix(path: Path, root: Path) -> str:
    """``path`` relative to ``root`` in forward slashes; the absolute path when it lies outside."""
    absolute = Path(os.path.abspath(path))
    try:
        return absolute.relative_to(os.path.abspath(root)).as_posix()
    except ValueError:
        return absolute.as_posix()


def display_path(path: Path) -> str:
    relative = relative_posix(path, Path.cwd())
    return relative if not os.path.isabs(relative) else str(path)


# ---------------------------------------------------------------------------- rule tokens


def rule_codes(token: str, *, allow_engine_codes: bool = False, rules: Sequence[type[Rule]] | None = None) -> list[str]:
    """Codes a user's token names among ``rules`` (every rule loaded so far when None). Engine
    codes (TL000 syntax-error…) are no rules, so they can only be ignored, which the CLI does
    after analysis."""
    try:
        return resolve_selector(token, all_rules() if rules is None else rules)
    except ValueError:
        engine = engine_code_named(token) if allow_engine_codes else None
        if engine is None:
            raise
        return [engine.code]


_OWN_CODE = re.compile(rf"{RESERVED_PREFIX}\d*", re.IGNORECASE)


def check_before_plugins(token: str, *, allow_engine_codes: bool = False) -> None:
    """Raises ValueError when ``token`` names no rule whichever plugins a file's configuration
    loads: a trainlint code or prefix (TL..., which no plugin may use) that is none of ours. Any
    other token may name a plugin's rule (its code, prefix or name): that is settled per file,
    against the rules its configuration loads (``rule_codes(..., rules=rules_for(plugins))``)."""
    if _OWN_CODE.fullmatch(token.strip()):
        rule_codes(token, allow_engine_codes=allow_engine_codes)


def engine_codes_in(tokens: Iterable[str]) -> frozenset[str]:
    codes: set[str] = set()
    for token in tokens:
        codes.update(code for code in rule_codes(token, allow_engine_codes=True) if code in ENGINE_CODES)
    return frozenset(codes)


def without_engine_codes(tokens: Iterable[str]) -> tuple[str, ...]:
    """The tokens the engine resolves itself: everything but engine codes."""
    return tuple(token for token in tokens if not set(rule_codes(token, allow_engine_codes=True)) <= set(ENGINE_CODES))


# ---------------------------------------------------------------------------- finding and loading


def find_config_file(start: Path) -> Path | None:
    """Nearest trainlint.toml, or pyproject.toml with a [tool.trainlint] table, from start upward."""
    directory = Path(os.path.abspath(start))
    if not directory.is_dir():
        directory = directory.parent
    for folder in (directory, *directory.parents):
        found = find_config_file_in(folder)
        if found is not None:
            return found
    return None


def find_config_file_in(folder: Path) -> Path | None:
    """The folder's own trainlint.toml, else its pyproject.toml when that has a [tool.trainlint] table."""
    own_file = folder / TRAINLINT_TOML
    if _present(own_file):
        return own_file
    pyproject = folder / PYPROJECT
    if _present(pyproject) and _tool_table(_read_toml(pyproject), pyproject) is not None:
        return pyproject
    return None


def _present(path: Path) -> bool:
    """Whether a config file is there to be read: a FIFO or a link loop of that name is, and
    reading it says what is wrong; a folder or a dangling link is not."""
    try:
        return not stat.S_ISDIR(os.stat(path).st_mode)
    except OSError as error:
        return error.errno == errno.ELOOP


class ConfigFinder:
    """The settings for each folder's files: those of the nearest configuration above it, as ruff
    does, so ``trainlint check a b`` checks ``a/`` with ``a/pyproject.toml``. Each folder is looked
    at and each configuration read once (per run; ``trainlint.linter.Linter`` starts a new finder
    when the configuration changes); with no configuration, the built-in defaults rooted at the
    working directory."""

    def __init__(self) -> None:
        self._nearest: dict[Path, Path | None] = {}
        self._loaded: dict[Path | None, Config] = {}

    def for_folder(self, folder: Path) -> Config:
        config_file = self._nearest_file(Path(os.path.abspath(folder)))
        if config_file not in self._loaded:
            self._loaded[config_file] = load_config(config_file) if config_file else Config(root=Path.cwd())
        return self._loaded[config_file]

    def _nearest_file(self, folder: Path) -> Path | None:
        passed: list[Path] = []
        found: Path | None = None
        for candidate in (folder, *folder.parents):
            if candidate in self._nearest:
                found = self._nearest[candidate]
                break
            passed.append(candidate)
            found = find_config_file_in(candidate)
            if found is not None:
                break
        for candidate in passed:
            self._nearest[candidate] = found
        return found


def load_config(config_file: Path) -> Config:
    """Settings from one file: pyproject.toml's [tool.trainlint] table, or any other file's top level."""
    if not _present(config_file):
        raise ConfigError(f"config file not found: {config_file}")
    document = _read_toml(config_file)
    if config_file.name == PYPROJECT:
        table = _tool_table(document, config_file)
        where = "[tool.trainlint] "
    else:
        table = document
        where = ""
    root = Path(os.path.abspath(config_file)).parent
    if table is None:
        return Config(source=config_file, root=root)
    return _build(table, config_file, where, root)


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        data = read_bounded(path, MAX_SETTINGS_BYTES)
    except UnreadableFile as error:
        raise ConfigError(f"{display_path(path)}: cannot read: {error}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + 1
        raise ConfigError(
            f"{display_path(path)}: invalid TOML: not UTF-8 text (byte 0x{data[error.start]:02x} on line {line}); "
            "TOML files are UTF-8"
        ) from None
    long_key = _overlong_key_line(text)
    if long_key is not None:
        raise ConfigError(
            f"{display_path(path)}: invalid TOML: a dotted key of more than {MAX_KEY_PARTS} parts on line {long_key}"
        )
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"{display_path(path)}: invalid TOML: {error}") from None
    except RecursionError:
        raise ConfigError(f"{display_path(path)}: invalid TOML: arrays or tables nested too deeply to read") from None


def _overlong_key_line(text: str) -> int | None:
    """The line of the first key or table name of more than MAX_KEY_PARTS parts; None when there
    is none. A scan in linear time, so the reader never meets one."""
    if text.count(".") < MAX_KEY_PARTS:
        return None
    masked = _TOML_STRING_OR_COMMENT.sub(lambda match: '"' + "\n" * match.group().count("\n"), text)
    for run in _DOTTED_RUN.finditer(masked):
        if run.group().count(".") >= MAX_KEY_PARTS:
            return masked.count("\n", 0, run.start()) + 1
    return None


def _tool_table(document: dict[str, Any], path: Path) -> dict[str, Any] | None:
    tool = document.get("tool")
    if not isinstance(tool, dict) or "trainlint" not in tool:
        return None
    table = tool["trainlint"]
    if not isinstance(table, dict):
        raise ConfigError(f"{display_path(path)}: [tool.trainlint] must be a table, got {_kind(table)}")
    return table


def _build(table: dict[str, Any], path: Path, where: str, root: Path) -> Config:
    def fail(location: str, problem: str) -> ConfigError:
        return ConfigError(f"{display_path(path)}: {where}{location}: {problem}")

    try:
        raw = msgspec.convert(table, _Table)
    except msgspec.ValidationError as error:
        raise _readable(error, path, where) from None

    plugins: list[str] = []
    for index, spec in enumerate(raw.plugins):
        if not spec.strip():
            raise fail(f"plugins[{index}]", "empty entry")
        if not is_plugin_path(spec):
            plugins.append(spec.strip())
            continue
        plugin = os.path.abspath(root / spec)
        real, project = os.path.realpath(plugin), os.path.realpath(root)
        if real != project and not real.startswith(project.rstrip(os.sep) + os.sep):
            raise fail(f"plugins[{index}]", f"{spec} lies outside the project ({display_path(root)}); "
                       "a plugin file must be one of the project's own")
        plugins.append(plugin)
    rules = rules_for(plugins)  # loads them: a plugin's codes are selectable below
    plugins_held_back = bool(plugins) and not local_plugins_allowed()  # their codes are unknown, not wrong

    def codes(key: str, tokens: Sequence[str], *, allow_engine_codes: bool = False) -> list[str]:
        found: list[str] = []
        for index, token in enumerate(tokens):
            try:
                try:
                    found += rule_codes(token, allow_engine_codes=allow_engine_codes, rules=rules)
                except ValueError:
                    if not plugins_held_back:
                        raise
                    check_before_plugins(token, allow_engine_codes=allow_engine_codes)  # maybe a plugin's code
            except ValueError as error:
                raise fail(f"{key}[{index}]", str(error)) from None
        return found

    def severity(key: str, value: object) -> Severity:
        if not isinstance(value, str):
            raise fail(key, f"expected error, warning or note, got {_kind(value)}")
        try:
            return Severity.parse(value)
        except ValueError:
            raise fail(key, f"expected error, warning or note, got {value!r}") from None

    codes("select", raw.select)
    codes("extend-select", raw.extend_select)
    codes("ignore", raw.ignore, allow_engine_codes=True)
    overrides: dict[str, Severity] = {}
    for token, value in raw.severity.items():
        level = severity(f"severity.{token}", value)
        for code in codes(f"severity.{token}", [token]):
            overrides[code] = level
    per_file: list[tuple[str, frozenset[str]]] = []
    for glob, tokens in raw.per_file_ignores.items():
        key = f"per-file-ignores.{shown_pattern(glob)}"
        if not isinstance(tokens, list) or not all(isinstance(token, str) for token in tokens):
            raise fail(key, f"expected a list of rule codes or names, got {_kind(tokens)}")
        try:
            glob_spec([glob])
        except BadGlob as error:
            raise fail(key, str(error)) from None
        per_file.append((glob, frozenset(codes(key, tokens, allow_engine_codes=True))))
    for index, pattern in enumerate(raw.exclude):
        if not pattern.strip():
            raise fail(f"exclude[{index}]", "empty pattern")
    try:
        glob_spec(raw.exclude)
    except BadGlob as error:
        raise fail(f"exclude[{error.index}]", str(error)) from None
    if raw.target_gpu is not None:
        problem = target_gpu_problem(raw.target_gpu)
        if problem:
            raise fail("target-gpu", problem)
    if raw.cache_dir is not None and not raw.cache_dir.strip():
        raise fail("cache-dir", "empty path")
    if raw.cache_dir is not None and "\0" in raw.cache_dir:
        raise fail("cache-dir", "a path cannot hold a NUL character")
    return Config(
        source=path,
        root=root,
        # extend-select adds to a select that names some rules; with no select every rule runs anyway
        select=tuple(raw.select + raw.extend_select) if raw.select else (),
        ignore=tuple(raw.ignore),
        exclude=tuple(raw.exclude),
        fail_on=severity("fail-on", raw.fail_on),
        target_gpu=raw.target_gpu,
        severity=overrides,
        per_file_ignores=PerFileIgnores(per_file, root),
        cache_dir=root / Path(raw.cache_dir).expanduser() if raw.cache_dir is not None else None,
        plugins=tuple(plugins),
    )


_AT = re.compile(r"^(?P<problem>.*?)(?: - at `\$(?P<path>[^`]*)`)?$", re.S)
_UNKNOWN_FIELD = re.compile(r"Object contains unknown field `(?P<key>[^`]*)`")
_EXPECTED = re.compile(r"Expected `(?P<want>[^`]*)`, got `(?P<got>[^`]*)`")
_TYPE_WORDS = {
    "array": "a list",
    "str": "a string",
    "int": "an integer",
    "float": "a number",
    "bool": "a boolean",
    "object": "a table",
    "null": "nothing",
    "str | null": "a string",
}


def _readable(error: msgspec.ValidationError, path: Path, where: str) -> ConfigError:
    match = _AT.match(str(error))
    assert match is not None  # the pattern accepts any text
    problem, location = match.group("problem"), (match.group("path") or "").lstrip(".")
    unknown = _UNKNOWN_FIELD.fullmatch(problem)
    if unknown:
        key = unknown.group("key")
        close = difflib.get_close_matches(key, _KEYS, n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        table = where.strip() or "the config"
        return ConfigError(
            f"{display_path(path)}: unknown key {key!r} in {table} ({hint}known keys: {', '.join(_KEYS)})"
        )
    expected = _EXPECTED.fullmatch(problem)
    if expected:
        want = _TYPE_WORDS.get(expected.group("want"), expected.group("want"))
        got = _TYPE_WORDS.get(expected.group("got"), expected.group("got"))
        problem = f"expected {want}, got {got}"
    return ConfigError(f"{display_path(path)}: {where}{location or 'table'}: {problem}")


def target_gpu_problem(name: str) -> str | None:
    """Why a target GPU name is no use (with the nearest known names), None when it is known.
    Checked up front because TL601 can only stay silent about a GPU it does not know."""
    from trainlint.estimator.hardware import UnknownTarget, resolve_target

    try:
        resolve_target(name)
    except UnknownTarget as error:
        return str(error)
    return None


def _kind(value: object) -> str:
    names = {str: "a string", bool: "a boolean", int: "an integer", float: "a number", list: "a list", dict: "a table"}
    return names.get(type(value), type(value).__name__)
