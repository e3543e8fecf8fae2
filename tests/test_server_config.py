"""The project's configuration in the editor: per-file-ignores and ignored engine codes drop the
same findings as on the command line, and an edited configuration file changes the findings
without a restart (whether the client tells of the change, the editor saves it, or neither).
The server resolves a document's settings once per change, not at each request
(``trainlint.linter``): these are the changes it must not miss."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest
from cli_process import TRAINLINT
from lsp_pipe import RawServer
from test_server import BUGGY, MODEL_SCRIPT

BROKEN = BUGGY + "def broken(:\n    pass\n"
CONFIG = '[tool.trainlint]\nignore = ["TL000"]\n\n[tool.trainlint.per-file-ignores]\n"scripts/*" = ["TL101"]\n'
WATCHING = {
    "textDocument": {"diagnostic": {}, "hover": {"contentFormat": ["markdown"]}, "inlayHint": {}},
    "workspace": {"didChangeWatchedFiles": {"dynamicRegistration": True}},
}


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "pyproject.toml").write_text(CONFIG, encoding="utf-8")
    for relative, text in (("scripts/train.py", BUGGY), ("lab/train.py", BUGGY), ("lab/broken.py", BROKEN)):
        (tmp_path / relative).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / relative).write_text(text, encoding="utf-8")
    return tmp_path


def codes(server: RawServer, uri: str) -> list[str]:
    return sorted(item["code"] for item in server.diagnostics(uri))


def opened(server: RawServer, root: Path, relative: str) -> str:
    uri = (root / relative).as_uri()
    server.open(uri, (root / relative).read_text(encoding="utf-8"), version=1)
    return uri


def test_per_file_ignores_and_ignored_engine_codes_drop_the_same_findings_as_the_command_line(project):
    done = subprocess.run([*TRAINLINT, "check", "--no-cache", "--format", "json", "."], cwd=project,
                          capture_output=True, text=True, timeout=120)
    on_the_command_line: dict[str, list[str]] = {}
    for finding in json.loads(done.stdout)["findings"]:
        on_the_command_line.setdefault(finding["path"], []).append(finding["code"])
    assert sorted(on_the_command_line["lab/broken.py"]) == ["TL101", "TL401"], "TL000 is ignored"
    assert on_the_command_line["scripts/train.py"] == ["TL401"], "scripts/* drop TL101"
    server = RawServer()
    try:
        server.initialize({"textDocument": {"diagnostic": {}}}, options={"debounceMs": 0})
        for relative in ("scripts/train.py", "lab/train.py", "lab/broken.py"):
            assert codes(server, opened(server, project, relative)) == sorted(on_the_command_line[relative]), relative
    finally:
        server.close()


def test_a_configuration_file_edited_while_open_changes_the_findings(project):
    server = RawServer()
    try:
        server.initialize(WATCHING, options={"debounceMs": 0})
        script = opened(server, project, "scripts/train.py")
        broken = opened(server, project, "lab/broken.py")
        assert codes(server, script) == ["TL401"] and codes(server, broken) == ["TL101", "TL401"]
        assert "client/registerCapability" in server.server_requests, "the server asked to watch configuration files"

        # the client tells of the change it watched: the next pull has the new settings
        config = project / "pyproject.toml"
        config.write_text('[tool.trainlint]\nignore = ["TL101"]\n', encoding="utf-8")
        server.notify("workspace/didChangeWatchedFiles", {"changes": [{"uri": config.as_uri(), "type": 2}]})
        assert codes(server, script) == ["TL401"] and codes(server, broken) == ["TL000", "TL401"]

        # the editor saves it
        server.notify("textDocument/didOpen", {"textDocument": {
            "uri": config.as_uri(), "languageId": "toml", "version": 1, "text": config.read_text(encoding="utf-8"),
        }})
        config.write_text("[tool.trainlint]\n", encoding="utf-8")
        server.notify("textDocument/didSave", {"textDocument": {"uri": config.as_uri()}, "text": "[tool.trainlint]\n"})
        assert codes(server, script) == ["TL101", "TL401"]

        # another program writes it and nobody tells: seen within about a second
        config.write_text('[tool.trainlint]\nselect = ["TL4"]\n', encoding="utf-8")
        deadline = time.monotonic() + 10
        while codes(server, script) != ["TL401"]:
            assert time.monotonic() < deadline, "the changed configuration was never read"
            time.sleep(0.2)
        assert codes(server, broken) == ["TL000", "TL401"]
    finally:
        server.close()


def test_the_vram_hints_follow_the_lines_after_the_first_ask(tmp_path):
    """The lines a VRAM estimate belongs to are found once a hover or inlay hint asks, and from then on
    by every analysis: after an edit the hints sit on the lines as they are now."""
    server = RawServer()
    try:
        server.initialize(WATCHING, options={"debounceMs": 0})
        uri = (tmp_path / "model.py").as_uri()
        server.open(uri, MODEL_SCRIPT, version=1)
        everything = {"start": {"line": 0, "character": 0}, "end": {"line": 20, "character": 0}}
        first = server.result("textDocument/inlayHint", {"textDocument": {"uri": uri}, "range": everything})
        assert [hint["position"]["line"] for hint in first] == [4, 5]
        server.change(uri, 2, [{"range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 0}},
                                "text": "import os\n"}])
        server.diagnostics(uri)  # the new text's own analysis is done
        hints = server.result("textDocument/inlayHint", {"textDocument": {"uri": uri}, "range": everything})
        assert [hint["position"]["line"] for hint in hints] == [5, 6]
        assert all(hint["label"].startswith("≈ ") and "GiB" in hint["label"] for hint in hints)
        hover = server.result("textDocument/hover", {"textDocument": {"uri": uri}, "position": {"line": 5, "character": 2}})
        assert hover is not None and "resnet18" in hover["contents"]["value"]
    finally:
        server.close()
