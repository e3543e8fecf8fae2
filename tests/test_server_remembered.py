"""A file opened again in a new editor session: its first report is the one the last session's
analysis of the same text gave, published before the analysis is imported, and only when nothing
it depended on changed (server/remembered.py)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from lsp_pipe import RawServer
from two_file_project import MODEL, TRAIN

from trainlint.analysis.engine import analyze_source
from trainlint.analysis.settings import AnalysisSettings
from trainlint.analysis.workspace import Workspace
from trainlint.server.remembered import RememberedReports
from trainlint.settings import EffectiveSettings

REMEMBERED = "its first report remembered"


@pytest.fixture
def project(tmp_path, monkeypatch) -> Path:
    """model.py and train.py (TL202 in train.py, citing model.py's softmax), and the user's cache folder."""
    monkeypatch.setenv("TRAINLINT_CACHE_DIR", str(tmp_path / "user-cache"))
    root = tmp_path / "project"
    root.mkdir()
    (root / "model.py").write_text(MODEL, encoding="utf-8")
    (root / "train.py").write_text(TRAIN, encoding="utf-8")
    return root


def session(root: Path, text: str | None = None) -> tuple[list[dict], list[dict], str]:
    """One editor session on train.py: the first pull right after opening it, the pull once its own
    analysis is done, and the server's debug information; then the server is shut down."""
    server = RawServer()
    try:
        server.initialize(None)
        uri = (root / "train.py").as_uri()
        text = (root / "train.py").read_text(encoding="utf-8") if text is None else text
        server.open(uri, text)
        first = server.diagnostics(uri)
        deadline = time.monotonic() + 60
        while ", 0 analyses" in (info := server.debug_info()) and time.monotonic() < deadline:
            time.sleep(0.05)
        return first, server.diagnostics(uri), info
    finally:
        server.close()


def shown(items: list[dict]) -> list[tuple]:
    """What the editor shows of each diagnostic (a remembered report served before the rules are
    imported has no link to the rule's page)."""
    return [(item["range"], item["code"], item["severity"], item["message"], item.get("relatedInformation")) for item in items]


def test_a_file_opened_again_unchanged_gets_the_remembered_report_first_and_the_same_fresh_one(project):
    first, fresh, info = session(project)
    assert REMEMBERED not in info, "the first session has nothing remembered"
    assert "TL202" in [item["code"] for item in fresh] and shown(first) == shown(fresh)
    again, fresh_again, info = session(project)
    assert REMEMBERED in info
    assert shown(again) == shown(fresh_again) == shown(fresh)


def test_a_changed_text_is_never_answered_from_a_remembered_report(project):
    session(project)
    edited = TRAIN.replace("criterion(model(x), y)", "criterion(model(x).log(), y)")
    first, fresh, info = session(project, edited)
    assert REMEMBERED not in info
    assert shown(first) == shown(fresh)
    expected = analyze_source(edited, str(project / "train.py"), workspace=Workspace([project]))
    assert [item["code"] for item in first] == [finding.code for finding in expected]


def test_a_report_that_read_another_file_is_not_remembered_once_that_file_changed(project):
    session(project)
    (project / "model.py").write_text(MODEL.replace("return F.softmax(self.fc(x), dim=1)", "return self.fc(x)"), encoding="utf-8")
    first, fresh, info = session(project)
    assert REMEMBERED not in info
    assert shown(first) == shown(fresh)
    assert "TL202" not in [item["code"] for item in first], "the model no longer ends in softmax, first or last"


def test_settings_whose_findings_read_what_no_entry_records_are_not_remembered(tmp_path):
    path = tmp_path / "train.py"
    path.write_text(TRAIN, encoding="utf-8")
    workspace = Workspace([tmp_path])
    reports = RememberedReports(tmp_path / "reports")
    findings = analyze_source(TRAIN, str(path), workspace=workspace)
    plain = EffectiveSettings(AnalysisSettings())
    for settings in (EffectiveSettings(AnalysisSettings(target_gpu="A100-80GB")), EffectiveSettings(AnalysisSettings(plugins=("rules.py",)))):
        reports.remember(path, workspace, TRAIN, settings, findings)
        assert reports.recall(path, workspace, TRAIN, settings) is None
    reports.remember(path, workspace, TRAIN, plain, findings)
    assert reports.recall(path, workspace, TRAIN, plain) == findings
    assert reports.recall(path, workspace, TRAIN + "\n", plain) is None
    assert reports.recall(path, workspace, TRAIN, EffectiveSettings(AnalysisSettings(ignore=("TL101",)))) is None


def test_a_cache_folder_that_cannot_be_written_only_costs_the_remembered_reports(tmp_path):
    blocked = tmp_path / "a-file"
    blocked.write_text("not a folder\n", encoding="utf-8")
    path = tmp_path / "train.py"
    path.write_text(TRAIN, encoding="utf-8")
    reports = RememberedReports(blocked / "reports")
    settings = EffectiveSettings(AnalysisSettings())
    reports.remember(path, Workspace([tmp_path]), TRAIN, settings, [])
    assert reports.recall(path, Workspace([tmp_path]), TRAIN, settings) is None
    assert not os.path.isdir(blocked)
