"""The Linter both front ends analyse through resolves a file's settings once per configuration
change: the language server asks for a document's settings at every request (several per key), and
``trainlint check`` for every file of a run. What it keeps must still follow the configuration."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import trainlint.linter as linter_module
from trainlint.cli import main
from trainlint.linter import Linter
from trainlint.settings import Overrides

CONFIG = '[tool.trainlint]\nignore = ["TL000"]\n\n[tool.trainlint.per-file-ignores]\n"tests/*" = ["TL101"]\n'


@pytest.fixture
def resolutions(monkeypatch) -> list[Path | None]:
    """The paths settings were resolved for, in this process."""
    resolved: list[Path | None] = []
    real = linter_module.resolve_settings

    def counting(config, overrides, path):
        resolved.append(path)
        return real(config, overrides, path)

    monkeypatch.setattr(linter_module, "resolve_settings", counting)
    return resolved


@pytest.fixture
def config_stats(monkeypatch) -> list[str]:
    """The configuration files looked at with ``os.stat``, in this process."""
    looked: list[str] = []
    real = os.stat

    def counting(path, *args, **kwargs):
        if os.fspath(path).endswith(("pyproject.toml", "trainlint.toml")):
            looked.append(os.fspath(path))
        return real(path, *args, **kwargs)

    monkeypatch.setattr(os, "stat", counting)
    return looked


def test_a_documents_settings_are_resolved_once_until_the_configuration_changes(tmp_path, resolutions, config_stats):
    config = tmp_path / "pyproject.toml"
    config.write_text(CONFIG, encoding="utf-8")
    linter = Linter(problem=print, recheck_s=3600)  # as the server's, whose recheck comes only after an hour here
    script = tmp_path / "train.py"
    first = linter.settings_for(script, Overrides())
    assert first.analysis.dropped == ("TL000",)
    looked = len(config_stats)
    for _ in range(100):  # the requests of some twenty keys
        assert linter.settings_for(script, Overrides()) is first
    assert resolutions == [script] and len(config_stats) == looked, "no resolution and no stat after the first ask"

    test_a, test_b = tmp_path / "tests" / "a.py", tmp_path / "tests" / "b.py"
    assert linter.settings_for(test_a, Overrides()).analysis.dropped == ("TL000", "TL101")
    assert linter.settings_for(test_b, Overrides()) is linter.settings_for(test_a, Overrides())
    assert resolutions == [script, test_a], "files with the same per-file-ignores share one resolution"

    config.write_text('[tool.trainlint]\nignore = ["TL401"]\n', encoding="utf-8")
    assert linter.settings_for(script, Overrides()) is first, "a change nobody told of waits for the recheck"
    linter.configuration_changed()  # the client told of it (didChangeWatchedFiles, a save, new settings)
    changed = linter.settings_for(script, Overrides())
    assert changed.analysis.ignore == ("TL401",) and changed.analysis.dropped == ()
    editor = Overrides(ignore=("TL101",))
    assert linter.settings_for(script, editor).analysis.ignore == ("TL101",), "the editor's settings are compared at each ask"


def test_a_configuration_file_changed_behind_the_servers_back_is_read_at_the_next_recheck(tmp_path):
    config = tmp_path / "trainlint.toml"
    config.write_text('select = ["TL1"]\n', encoding="utf-8")
    linter = Linter(problem=print, recheck_s=0.0)
    script = tmp_path / "deep" / "train.py"
    assert linter.settings_for(script, Overrides()).analysis.select == ("TL1",)
    config.write_text('select = ["TL2"]\n', encoding="utf-8")
    assert linter.settings_for(script, Overrides()).analysis.select == ("TL2",)
    (tmp_path / "deep").mkdir()
    (tmp_path / "deep" / "trainlint.toml").write_text('select = ["TL4"]\n', encoding="utf-8")  # a nearer one appears
    assert linter.settings_for(script, Overrides()).analysis.select == ("TL4",)
    (tmp_path / "deep" / "trainlint.toml").write_text("select = [", encoding="utf-8")
    told: list[str] = []
    broken = Linter(problem=told.append, recheck_s=0.0)
    assert broken.settings_for(script, Overrides()).analysis.select == ()
    assert len(told) == 1 and "configuration ignored" in told[0], "the editor is told, and goes on with the defaults"


def test_a_check_run_resolves_settings_once_per_configuration_and_per_file_ignores(tmp_path, monkeypatch, resolutions, capsys):
    (tmp_path / "pyproject.toml").write_text(CONFIG, encoding="utf-8")
    for folder in ("src", "tests"):
        for index in range(6):
            (tmp_path / folder / f"m{index}.py").parent.mkdir(exist_ok=True)
            (tmp_path / folder / f"m{index}.py").write_text("history = []\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    assert main(["check", "--no-cache", "--jobs", "1", "--format", "json", "."]) == 0
    capsys.readouterr()
    assert len(resolutions) == 3, "any file's settings, then src/'s and tests/' files' own: not one per file"
