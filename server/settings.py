"""Editor settings: read leniently from the client, merged over the project's configuration.

A client may send settings nested (``{"settings": {...}}``) or flat, under ``trainlint`` or not,
with keys the user typed by hand. One bad value must not discard the good ones: each key is
checked on its own, and every problem becomes one line the server logs and shows once.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec

from trainlint.analysis.findings import Severity
from trainlint.analysis.settings import AnalysisSettings
from trainlint.config import Config, engine_codes_in, rule_codes, without_engine_codes

RUN_ON_TYPE = "onType"
RUN_ON_SAVE = "onSave"


class EditorSettings(msgspec.Struct, frozen=True):
    """What the user set in the editor; None means "not set here, use the project's value"."""

    target_gpu: str | None = None
    target_model: str | None = None  # the model to estimate when a script names none the estimator can read
    select: tuple[str, ...] | None = None
    ignore: tuple[str, ...] | None = None
    severity: dict[str, Severity] = {}
    run: str = RUN_ON_TYPE
    debounce_ms: int = 150
    inlay_hints: bool = True


_KEYS = {
    "targetGpu": "target_gpu",
    "targetModel": "target_model",
    "select": "select",
    "ignore": "ignore",
    "severity": "severity",
    "run": "run",
    "debounceMs": "debounce_ms",
    "inlayHints": "inlay_hints",
}


def _section(raw: Any) -> dict[str, Any]:
    """The settings object, whether sent flat, as ``{"settings": ...}`` or as ``{"trainlint": ...}``."""
    if not isinstance(raw, dict):
        return {}
    for wrapper in ("settings", "trainlint"):
        inner = raw.get(wrapper)
        if isinstance(inner, dict):
            return _section(inner) if wrapper == "settings" else inner
    return raw


def _codes(key: str, value: Any) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(token, str) for token in value):
        raise ValueError(f"`{key}` must be a list of rule codes or names")
    for token in value:
        rule_codes(token, allow_engine_codes=True)  # raises with a readable message
    return tuple(value)


def parse_editor_settings(raw: Any, base: EditorSettings | None = None) -> tuple[EditorSettings, list[str]]:
    """Settings from a client payload, and one message per value that was ignored."""
    section = _section(raw)
    values: dict[str, Any] = {}
    problems: list[str] = []
    if raw is not None and not isinstance(raw, dict):
        problems.append(f"settings must be an object, got {type(raw).__name__}")
    for key, value in section.items():
        field = _KEYS.get(key)
        if field is None:
            if key not in ("settings", "trainlint"):
                problems.append(f"unknown setting `{key}`")
            continue
        if value is None:
            continue
        try:
            values[field] = _converted(key, value)
        except ValueError as error:
            problems.append(f"{error}; using the default")
    settings = msgspec.structs.replace(base or EditorSettings(), **values)
    return settings, problems


def _converted(key: str, value: Any) -> Any:
    if key == "targetGpu":
        if not isinstance(value, str):
            raise ValueError("`targetGpu` must be a GPU name such as \"A100-80GB\"")
        return value.strip() or None
    if key == "targetModel":
        if not isinstance(value, str):
            raise ValueError("`targetModel` must be a model name such as \"meta-llama/Meta-Llama-3-8B\" or a config.json path")
        return value.strip() or None
    if key in ("select", "ignore"):
        return _codes(key, value)
    if key == "severity":
        if not isinstance(value, dict):
            raise ValueError("`severity` must map rule codes to error, warning or note")
        severities = {}
        for rule, level in value.items():
            rule_codes(str(rule))
            severities[str(rule)] = Severity.parse(str(level))
        return severities
    if key == "run":
        if value not in (RUN_ON_TYPE, RUN_ON_SAVE):
            raise ValueError(f"`run` must be \"{RUN_ON_TYPE}\" or \"{RUN_ON_SAVE}\", not {value!r}")
        return value
    if key == "debounceMs":
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 10_000:
            raise ValueError("`debounceMs` must be a number of milliseconds between 0 and 10000")
        return int(value)
    if isinstance(value, bool):  # inlayHints
        return value
    raise ValueError("`inlayHints` must be true or false")


class EffectiveSettings(msgspec.Struct, frozen=True):
    """What one document is analysed with: the engine's settings and the codes dropped after it."""

    analysis: AnalysisSettings
    dropped: frozenset[str]
    target_model: str | None = None  # for the VRAM hover and inlay hints


def effective_settings(editor: EditorSettings, project: Config, path: Path | None) -> EffectiveSettings:
    select = editor.select if editor.select is not None else project.select
    ignore = editor.ignore if editor.ignore is not None else project.ignore
    severity = {**project.severity, **editor.severity}
    dropped = engine_codes_in(ignore)
    if path is not None:
        dropped |= project.per_file_ignores.codes_for(path)
    analysis = AnalysisSettings(
        select=tuple(select),
        ignore=without_engine_codes(ignore),
        severity=severity,
        target_gpu=editor.target_gpu or project.target_gpu,
        plugins=project.plugins,
    )
    return EffectiveSettings(analysis, frozenset(dropped), editor.target_model)

