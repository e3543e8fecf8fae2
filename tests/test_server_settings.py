"""Editor settings: every spelling clients use, and bad values reported without losing good ones."""

from __future__ import annotations

from pathlib import Path

from trainlint.analysis.findings import Severity
from trainlint.config import Config
from trainlint.linter import Linter
from trainlint.settings import EditorSettings, parse_editor_settings


def test_nested_flat_and_sectioned_forms_read_the_same():
    flat = {"select": ["TL1"], "debounceMs": 20, "run": "onSave"}
    for payload in (flat, {"settings": flat}, {"trainlint": flat}, {"settings": {"trainlint": flat}}):
        settings, problems = parse_editor_settings(payload)
        assert problems == []
        assert (settings.select, settings.debounce_ms, settings.run) == (("TL1",), 20, "onSave")


def test_a_bad_value_is_reported_and_the_rest_still_applies():
    settings, problems = parse_editor_settings(
        {"select": ["TL9999"], "debounceMs": "fast", "inlayHints": False, "colour": "red", "severity": {"TL401": "loud"}}
    )
    assert settings.inlay_hints is False
    assert settings.select is None and settings.debounce_ms == 150 and settings.severity == {}
    assert len(problems) == 4
    assert any("colour" in problem for problem in problems)
    assert any("TL9999" in problem for problem in problems)


def test_garbage_payloads_give_defaults_and_a_message():
    for payload in ("nonsense", 42, ["a"]):
        settings, problems = parse_editor_settings(payload)
        assert settings == EditorSettings() and problems
    assert parse_editor_settings(None) == (EditorSettings(), [])


def test_editor_settings_override_the_project_file():
    project = Config(select=("TL2",), ignore=("TL000",), severity={"TL401": Severity.NOTE})
    editor, _ = parse_editor_settings({"ignore": ["TL101"], "severity": {"TL201": "warning"}})
    effective = Linter(config=project, problem=print).settings_for(Path("train.py"), editor.overrides())
    assert effective.analysis.select == ("TL2",)
    assert effective.analysis.ignore == ("TL101",)
    assert effective.analysis.severity == {"TL401": Severity.NOTE, "TL201": Severity.WARNING}
    assert effective.analysis.dropped == (), "the editor's ignore replaces the project's, TL000 with it"


def test_a_plugin_code_in_the_editors_settings_is_checked_against_the_files_own_rules(tmp_path, monkeypatch):
    from test_plugins import project

    from trainlint.analysis import registry
    from trainlint.config import load_config

    monkeypatch.setattr(registry, "_loaded", registry._Loaded())
    registry.allow_local_plugins()  # as the server does when the user allowed them
    (tmp_path / "project").mkdir()
    root = project(tmp_path / "project")
    editor, problems = parse_editor_settings({"select": ["ACME101", "TL101"], "severity": {"save-whole-model": "error"}})
    assert problems == []  # not a trainlint code: which rule it names depends on the file
    told: list[str] = []
    linter = Linter(problem=told.append)
    assert linter.config_for(root / "train.py").plugins == load_config(root / "pyproject.toml").plugins
    with_plugin = linter.settings_for(root / "train.py", editor.overrides())
    assert with_plugin.analysis.select == ("ACME101", "TL101") and with_plugin.analysis.severity == {"save-whole-model": Severity.ERROR}
    assert told == []
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "trainlint.toml").write_text("", encoding="utf-8")  # a project without the plugin
    without = linter.settings_for(tmp_path / "elsewhere" / "train.py", editor.overrides())
    assert without.analysis.select == ("TL101",) and without.analysis.severity == {}
    assert len(told) == 2 and all("left out" in message for message in told)
    assert any("ACME101" in message for message in told) and any("save-whole-model" in message for message in told)
    linter.settings_for(tmp_path / "elsewhere" / "other.py", editor.overrides())
    linter.configuration_changed()
    linter.settings_for(tmp_path / "elsewhere" / "train.py", editor.overrides())
    assert len(told) == 2  # told once
