"""The settings one file is analysed with: the project's configuration under the command line's
flags or the editor's settings. ``trainlint check`` and the language server both resolve them here
(``resolve_settings``, through their ``trainlint.linter.Linter``, which keeps what it resolved), so
a key means the same in both.

The editor's settings are declared once, in ``EDITOR_SETTINGS``; the VS Code extension's
``package.json`` and ``settings.ts`` and docs/editors.md are checked against that table by a test.
A client may send them nested (``{"settings": {...}}``) or flat, under ``trainlint`` or not, with
keys the user typed by hand. One bad value must not discard the good ones: each key is checked on
its own, and every problem becomes one line the server logs and shows once.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec

from trainlint.analysis.findings import Severity
from trainlint.analysis.registry import rules_for
from trainlint.analysis.settings import AnalysisSettings
from trainlint.config import Config, check_before_plugins, engine_codes_in, rule_codes, without_engine_codes


class Overrides(msgspec.Struct, frozen=True):
    """What the command line or the editor sets over the project's configuration; None (or empty)
    means "not set here, use the project's value"."""

    select: tuple[str, ...] | None = None
    extend_select: tuple[str, ...] = ()  # added to a select that names some rules
    ignore: tuple[str, ...] | None = None
    severity: dict[str, Severity] = {}  # over the project's, code by code
    target_gpu: str | None = None
    target_model: str | None = None  # the model to estimate when a script names none the estimator can read
    report_unused_ignores: bool = False


class EffectiveSettings(msgspec.Struct, frozen=True):
    """What one file is analysed with: the engine's settings (the codes dropped for the file among
    them) and, for the VRAM hover and inlay hints, the model to estimate."""

    analysis: AnalysisSettings
    target_model: str | None = None


def resolve_settings(config: Config, overrides: Overrides, path: Path | None) -> EffectiveSettings:
    """The settings for the file at ``path`` (None: any file of the project, without per-file-ignores)."""
    select = list(overrides.select if overrides.select is not None else config.select)
    if select:  # an empty select is every rule already
        select += overrides.extend_select
    ignore = overrides.ignore if overrides.ignore is not None else config.ignore
    dropped = engine_codes_in(ignore)  # no rules, so not deselected: the engine drops them
    if path is not None:
        dropped |= config.per_file_ignores.codes_for(path)
    analysis = AnalysisSettings(
        select=tuple(select),
        ignore=without_engine_codes(ignore),
        severity={**config.severity, **overrides.severity},
        target_gpu=overrides.target_gpu or config.target_gpu,
        report_unused_ignores=overrides.report_unused_ignores,
        plugins=config.plugins,  # only the project's configuration names plugins (docs/writing-rules.md)
        dropped=tuple(sorted(dropped)),
    )
    return EffectiveSettings(analysis, overrides.target_model)


# ---------------------------------------------------------------------------- editor settings

RUN_ON_TYPE = "onType"
RUN_ON_SAVE = "onSave"


def _gpu(value: Any) -> str | None:
    if not isinstance(value, str):
        raise ValueError("`targetGpu` must be a GPU name such as \"A100-80GB\"")
    return value.strip() or None


def _model(value: Any) -> str | None:
    if not isinstance(value, str):
        raise ValueError("`targetModel` must be a model name such as \"meta-llama/Meta-Llama-3-8B\" or a config.json path")
    return value.strip() or None


# Which rule a code or name in the editor's settings means depends on the file: its project's
# configuration may load plugins. So only what no plugin can change is checked here
# (``check_before_plugins``); the rest is checked per project (``known_overrides``).
def _codes(key: str) -> Callable[[Any], tuple[str, ...]]:
    def convert(value: Any) -> tuple[str, ...]:
        if not isinstance(value, list) or not all(isinstance(token, str) and token.strip() for token in value):
            raise ValueError(f"`{key}` must be a list of rule codes or names")
        for token in value:
            check_before_plugins(token, allow_engine_codes=True)  # raises with a readable message
        return tuple(value)

    return convert


def _severities(value: Any) -> dict[str, Severity]:
    if not isinstance(value, dict):
        raise ValueError("`severity` must map rule codes to error, warning or note")
    for rule in value:
        check_before_plugins(str(rule))
    return {str(rule): Severity.parse(str(level)) for rule, level in value.items()}


def _run(value: Any) -> str:
    if value not in (RUN_ON_TYPE, RUN_ON_SAVE):
        raise ValueError(f"`run` must be \"{RUN_ON_TYPE}\" or \"{RUN_ON_SAVE}\", not {value!r}")
    return value


def _debounce(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 10_000:
        raise ValueError("`debounceMs` must be a number of milliseconds between 0 and 10000")
    return int(value)


def _flag(value: Any) -> bool:
    if not isinstance(value, bool):
        raise ValueError("`inlayHints` must be true or false")
    return value


@dataclass(frozen=True)
class EditorSetting:
    """One key of the editor's ``trainlint`` section."""

    key: str  # as the editor spells it
    attribute: str  # EditorSettings' field
    json_type: str | tuple[str, ...]  # its JSON schema type, as package.json declares it
    default: Any  # the editor's default, as package.json writes it
    description: str  # package.json's markdownDescription
    convert: Callable[[Any], Any]  # the client's value to EditorSettings', or ValueError saying why not


EDITOR_SETTINGS: tuple[EditorSetting, ...] = (
    EditorSetting(
        "targetGpu", "target_gpu", "string", "",
        "GPU that VRAM estimates are checked against (a `trainlint gpus` id). Empty: use `target-gpu` from the "
        "project's `[tool.trainlint]` / `trainlint.toml`, if any.",
        _gpu,
    ),
    EditorSetting(
        "targetModel", "target_model", "string", "",
        "Model the VRAM estimate is for when a script names none that can be read (e.g. "
        "`from_pretrained(args.model)`): a Hugging Face id (read from the local cache, never downloaded), a "
        "catalog id, or the path of a model folder or its `config.json`. A `# trainlint: model=NAME` comment in a "
        "file takes precedence for that file.",
        _model,
    ),
    EditorSetting(
        "select", "select", ("array", "null"), None,
        "Rule codes, prefixes or names to report (e.g. `[\"TL1\", \"TL401\"]`). `null`: the project's `select`.",
        _codes("select"),
    ),
    EditorSetting(
        "ignore", "ignore", ("array", "null"), None,
        "Rule codes, prefixes or names to skip. `null`: the project's `ignore`.",
        _codes("ignore"),
    ),
    EditorSetting(
        "severity", "severity", "object", {},
        "Severity per rule code or name, over the project's (e.g. `{\"TL101\": \"error\"}`).",
        _severities,
    ),
    EditorSetting("run", "run", "string", RUN_ON_TYPE, "When trainlint analyses a file.", _run),
    EditorSetting(
        "debounceMs", "debounce_ms", "number", 150,
        "Delay in milliseconds between a keystroke and the analysis (with `\"run\": \"onType\"`).",
        _debounce,
    ),
    EditorSetting(
        "inlayHints", "inlay_hints", "boolean", True,
        "Show the VRAM estimate as an inlay hint after model and batch-size lines.",
        _flag,
    ),
)
_BY_KEY = {setting.key: setting for setting in EDITOR_SETTINGS}

# initializationOptions read once, at `initialize`, beside the settings: whether the project's
# local plugins may load (the user's consent, which a later settings change cannot give), and VS
# Code's workspace trust, which means the same.
ALLOW_LOCAL_PLUGINS = "allowLocalPlugins"
START_ONLY_OPTIONS = (ALLOW_LOCAL_PLUGINS, "workspaceTrusted")


class EditorSettings(msgspec.Struct, frozen=True):
    """What the user set in the editor (``EDITOR_SETTINGS``); None means "not set here, use the
    project's value". A test checks that each default is its declared default, converted."""

    target_gpu: str | None = None
    target_model: str | None = None
    select: tuple[str, ...] | None = None
    ignore: tuple[str, ...] | None = None
    severity: dict[str, Severity] = {}
    run: str = RUN_ON_TYPE
    debounce_ms: int = 150
    inlay_hints: bool = True

    def overrides(self) -> Overrides:
        return Overrides(
            select=self.select, ignore=self.ignore, severity=self.severity,
            target_gpu=self.target_gpu, target_model=self.target_model,
        )


def _section(raw: Any) -> dict[str, Any]:
    """The settings object, whether sent flat, as ``{"settings": ...}`` or as ``{"trainlint": ...}``."""
    if not isinstance(raw, dict):
        return {}
    for wrapper in ("settings", "trainlint"):
        inner = raw.get(wrapper)
        if isinstance(inner, dict):
            return _section(inner) if wrapper == "settings" else inner
    return raw


def parse_editor_settings(raw: Any, base: EditorSettings | None = None) -> tuple[EditorSettings, list[str]]:
    """Settings from a client payload, and one message per value that was ignored."""
    section = _section(raw)
    values: dict[str, Any] = {}
    problems: list[str] = []
    if raw is not None and not isinstance(raw, dict):
        problems.append(f"settings must be an object, got {type(raw).__name__}")
    for key, value in section.items():
        setting = _BY_KEY.get(key)
        if setting is None:
            if key not in ("settings", "trainlint", *START_ONLY_OPTIONS):
                problems.append(f"unknown setting `{key}`")
            continue
        if value is None:
            continue
        try:
            values[setting.attribute] = setting.convert(value)
        except ValueError as error:
            problems.append(f"{error}; using the default")
    settings = msgspec.structs.replace(base or EditorSettings(), **values)
    return settings, problems


def known_overrides(overrides: Overrides, plugins: tuple[str, ...], problem: Callable[[str], None]) -> Overrides:
    """The editor's overrides for the files of a project whose configuration loads ``plugins``: a rule
    code or name that names none of their rules is left out and told to ``problem``, once per set of
    settings and plugins."""
    if overrides.select is None and overrides.ignore is None and not overrides.severity:
        return overrides  # nothing to check, and no rules to load: the server asks this as it starts
    select, ignore, severity, problems = _known_rule_tokens(
        overrides.select, overrides.ignore, tuple(overrides.severity.items()), plugins,
    )
    for message in problems:
        problem(message)
    problems.clear()  # told once: the next project with these settings and plugins stays quiet
    return msgspec.structs.replace(overrides, select=select, ignore=ignore, severity=severity)


@functools.lru_cache(maxsize=64)
def _known_rule_tokens(
    select: tuple[str, ...] | None, ignore: tuple[str, ...] | None, severity: tuple[tuple[str, Severity], ...],
    plugins: tuple[str, ...],
) -> tuple[tuple[str, ...] | None, tuple[str, ...] | None, dict[str, Severity], list[str]]:
    rules = rules_for(plugins)
    problems: list[str] = []

    def known(key: str, token: str, *, engine: bool = True) -> bool:
        try:
            rule_codes(token, allow_engine_codes=engine, rules=rules)
        except ValueError as error:
            problems.append(f"trainlint: setting `{key}`: {error}; left out")
            return False
        return True

    def kept(key: str, tokens: tuple[str, ...] | None) -> tuple[str, ...] | None:
        if tokens is None:
            return None
        known_tokens = tuple(token for token in tokens if known(key, token))
        return known_tokens if known_tokens or not tokens else None  # none known: the project's value

    levels = {rule: level for rule, level in severity if known("severity", rule, engine=False)}
    return kept("select", select), kept("ignore", ignore), levels, problems
