"""What an editor shows while an analysis is still running (issue 31): a long script, a loaded
machine, an analysis slower than the keys. Nothing here races a clock: the analysis is held by
a plugin rule (the public plugin API) for as long as a file named GATE lies beside it, so
"while an analysis runs" is exactly that, and it ends when the test removes the file.

A pull is answered from the last finished analysis with its positions carried through the edits
since (a finding an edit reached into is left out); a client that can be asked to pull again is
answered at once and asked (``workspace/diagnostic/refresh``) when the new analysis is done; one
that cannot (Neovim 0.10 and 0.11) gets the carried answer when the text changes again, and
``ServerCancelled`` with ``retriggerRequest`` for a pull it cancels while it waits (and a real
Neovim 0.11 shows that carried answer). Hover, inlay hints and code actions answer while the
analysis runs. Push clients get a publish at least every 250 ms
while the changes keep coming, and the text's own diagnostics when the analysis is done.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import pytest_lsp
from cli_process import SERVER
from lsp_pipe import RawServer, diagnostics_of, shown
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient
from test_neovim import find_nvim

from trainlint.analysis.engine import analyze_source

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "buggy" / "ddp_train.py"
NVIM_SCRIPT = Path(__file__).resolve().parent / "nvim" / "typing_while_held.lua"
SERVER_CANCELLED = -32802
GATE_RULE = textwrap.dedent('''\
    """Holds every analysis while a file named GATE lies beside this one (HELD says one is held)."""
    import time
    from pathlib import Path

    from trainlint.rules import Rule, RuleContext, Severity

    HERE = Path(__file__).parent


    class Gate(Rule):
        code = "GATE001"
        name = "gate"
        severity = Severity.NOTE

        def check(self, ctx: RuleContext) -> None:
            for _ in ctx.scopes:  # reads every scope, so it runs again at every analysis
                pass
            if (HERE / "GATE").exists():
                (HERE / "HELD").touch()
                while (HERE / "GATE").exists():
                    time.sleep(0.005)
    ''')


class Project:
    """A project whose analyses the test holds and lets go."""

    def __init__(self, root: Path) -> None:
        self.root = root
        (root / "gate_rule.py").write_text(GATE_RULE, encoding="utf-8")
        (root / "pyproject.toml").write_text('[tool.trainlint]\nplugins = ["gate_rule.py"]\n', encoding="utf-8")
        shutil.copy(EXAMPLE, root / "train.py")
        self.uri = (root / "train.py").as_uri()
        self.text = EXAMPLE.read_text(encoding="utf-8")

    def hold(self) -> None:
        (self.root / "HELD").unlink(missing_ok=True)
        (self.root / "GATE").touch()

    def wait_until_held(self) -> None:
        deadline = time.monotonic() + 20
        while not (self.root / "HELD").exists():
            assert time.monotonic() < deadline, "no analysis started"
            time.sleep(0.01)

    def release(self) -> None:
        (self.root / "GATE").unlink()

    def edit(self, server: RawServer, version: int, line: int, column: int, end_column: int, new_text: str) -> None:
        """One edit within a line (or an insertion that may hold line breaks), on the server and here."""
        server.change(self.uri, version, [{
            "range": {"start": {"line": line, "character": column}, "end": {"line": line, "character": end_column}},
            "text": new_text,
        }])
        lines = self.text.split("\n")
        lines[line] = lines[line][:column] + new_text + lines[line][end_column:]
        self.text = "\n".join(lines)

    def expected(self) -> list[tuple]:
        """What a client shows for the text as it is now: the engine's findings (the gate finds nothing)."""
        return diagnostics_of(analyze_source(self.text, str(self.root / "train.py")), self.text, "utf-16")


def moved(shown_items: list[tuple], lines: int) -> list[tuple]:
    return [
        ({"start": {**r["start"], "line": r["start"]["line"] + lines}, "end": {**r["end"], "line": r["end"]["line"] + lines}}, code, message)
        for r, code, message in shown_items
    ]


def start(root: Path, capabilities: dict, settings: dict | None = None) -> tuple[RawServer, Project]:
    project = Project(root)
    server = RawServer()
    server.initialize(capabilities, options={"allowLocalPlugins": True, "settings": settings or {}})
    server.open(project.uri, project.text, version=1)
    return server, project


PULL_AND_REFRESH = {
    "textDocument": {"diagnostic": {}, "hover": {"contentFormat": ["markdown"]}, "inlayHint": {}},
    "workspace": {"diagnostics": {"refreshSupport": True}, "inlayHint": {"refreshSupport": True}},
}
NEOVIM_0_11 = {"textDocument": {"diagnostic": {"dynamicRegistration": False}, "inlayHint": {}}, "workspace": {"inlayHint": {"refreshSupport": True}}}


@pytest.fixture
def project_root(tmp_path):
    yield tmp_path
    (tmp_path / "GATE").unlink(missing_ok=True)  # a failed test must not leave the server's analysis held


def test_a_pull_while_an_analysis_runs_is_answered_at_once_with_its_ranges_carried_then_refreshed(project_root):
    server, project = start(project_root, PULL_AND_REFRESH)
    try:
        before = shown(server.diagnostics(project.uri))
        assert len(before) >= 2, before
        project.hold()
        project.edit(server, 2, 0, 0, 0, "\n")  # every line moves down one
        first = before[0][0]
        inside = first["start"]["line"] + 1, first["start"]["character"] + 1
        project.edit(server, 3, *inside, inside[1], "x")  # typed into the first finding's span
        reply = server.reply(server.request("textDocument/diagnostic", {"textDocument": {"uri": project.uri}}))
        project.wait_until_held()  # the answer came while the analysis of the new text was held
        report = reply["result"]
        assert shown(report["items"]) == moved(before[1:], 1)  # the first is left out, the others moved
        assert "workspace/diagnostic/refresh" not in server.server_requests
        again = server.result("textDocument/diagnostic", {"textDocument": {"uri": project.uri}, "previousResultId": report["resultId"]})
        assert again == {"kind": "unchanged", "resultId": report["resultId"]}  # nothing newer yet
        project.release()
        server.debug_info()  # a round trip: the refresh is asked for once the analysis is done
        deadline = time.monotonic() + 20
        while "workspace/diagnostic/refresh" not in server.server_requests:
            assert time.monotonic() < deadline, "no workspace/diagnostic/refresh"
            server.debug_info()
        fresh = server.result("textDocument/diagnostic", {"textDocument": {"uri": project.uri}, "previousResultId": report["resultId"]})
        assert fresh["kind"] == "full" and shown(fresh["items"]) == project.expected()
    finally:
        server.close()


def test_a_client_that_cannot_be_asked_to_pull_again_gets_the_carried_answer_at_its_next_change(project_root):
    server, project = start(project_root, NEOVIM_0_11)
    try:
        before = shown(server.diagnostics(project.uri))
        project.hold()
        project.edit(server, 2, 0, 0, 0, "\n")
        waiting = server.request("textDocument/diagnostic", {"textDocument": {"uri": project.uri}})
        project.wait_until_held()
        with pytest.raises(AssertionError, match="no reply"):
            server.reply(waiting, timeout=0.3)  # it waits for the text's own analysis...
        project.edit(server, 3, 0, 0, 0, "\n\n")  # ...until the text changes (Neovim cancels it next)
        server.notify("$/cancelRequest", {"id": waiting})
        answer = server.reply(waiting)["result"]
        assert shown(answer["items"]) == moved(before, 3)  # carried to the text of the change
        cancelled = server.request("textDocument/diagnostic", {"textDocument": {"uri": project.uri}})
        server.notify("$/cancelRequest", {"id": cancelled})  # cancelled while it waits, no change
        error = server.reply(cancelled)["error"]
        assert (error["code"], error["data"]) == (SERVER_CANCELLED, {"retriggerRequest": True})
        assert not any(b"ServerCancelled" in line or b"Traceback" in line for line in server.stderr), b"".join(server.stderr)
        project.release()
        assert shown(server.diagnostics(project.uri)) == project.expected()  # the last pull waits for the text's own
    finally:
        server.close()


def test_hover_inlay_hints_and_code_actions_answer_while_an_analysis_runs(project_root):
    server, project = start(project_root, PULL_AND_REFRESH)
    try:
        model_line = next(i for i, line in enumerate(project.text.split("\n")) if "resnet50(" in line)
        everything = {"start": {"line": 0, "character": 0}, "end": {"line": len(project.text.split("\n")) + 5, "character": 0}}

        def hover(line: int) -> dict | None:
            return server.result("textDocument/hover", {"textDocument": {"uri": project.uri}, "position": {"line": line, "character": 8}})

        def hints() -> list[dict]:
            return server.result("textDocument/inlayHint", {"textDocument": {"uri": project.uri}, "range": everything})

        def disabled_lines() -> set[int]:  # where "Disable TLxxx for this line" would write its comment
            actions = server.result("textDocument/codeAction", {
                "textDocument": {"uri": project.uri}, "range": everything, "context": {"diagnostics": []},
            })
            return {a["edit"]["changes"][project.uri][0]["range"]["start"]["line"] for a in actions if a["title"].startswith("Disable ")}

        finding_lines = {d["range"]["start"]["line"] for d in server.diagnostics(project.uri)}
        assert disabled_lines() == finding_lines
        first = hover(model_line)
        assert first is not None and "GiB" in first["contents"]["value"]
        first_hints = hints()
        assert model_line in [hint["position"]["line"] for hint in first_hints]
        project.hold()
        project.edit(server, 2, 0, 0, 0, "\n")
        server.diagnostics(project.uri)  # answered at once; the analysis of the new text starts
        project.wait_until_held()
        during = hover(model_line + 1)
        assert during is not None and during["contents"] == first["contents"]
        assert during["range"]["start"]["line"] == model_line + 1
        assert [hint["position"]["line"] for hint in hints()] == [hint["position"]["line"] + 1 for hint in first_hints]
        assert disabled_lines() == {line + 1 for line in finding_lines}
        assert "workspace/inlayHint/refresh" not in server.server_requests
        project.release()
        deadline = time.monotonic() + 20
        while "workspace/inlayHint/refresh" not in server.server_requests:
            assert time.monotonic() < deadline, "no workspace/inlayHint/refresh"
            server.debug_info()
    finally:
        server.close()


def wait_for_vram_lines(server: RawServer, version: int) -> None:
    """Until the server says the VRAM lines of its analysis of ``version`` were found for its text (its
    debug information)."""
    deadline = time.monotonic() + 20
    while not re.search(rf"version {version}, .* VRAM lines found for its text", server.debug_info()):
        assert time.monotonic() < deadline, f"the VRAM lines of version {version} were never found"
        time.sleep(0.05)


def test_a_first_hover_while_an_analysis_runs_answers_from_the_lines_found_at_the_pause_after_the_first(project_root):
    """Nobody hovered before the edit: the VRAM lines of the first text were found at the pause after its
    analysis, so a hover asked while the next analysis is held answers at once, on the line as it is now,
    with what a hover of the first text showed."""
    server, project = start(project_root, PULL_AND_REFRESH)
    try:
        model_line = next(i for i, line in enumerate(project.text.split("\n")) if "resnet50(" in line)
        server.diagnostics(project.uri)
        wait_for_vram_lines(server, 1)
        project.hold()
        project.edit(server, 2, 0, 0, 0, "\n")
        server.diagnostics(project.uri)  # answered at once; the analysis of the new text starts and is held
        project.wait_until_held()
        during = server.result("textDocument/hover", {"textDocument": {"uri": project.uri}, "position": {"line": model_line + 1, "character": 8}})
        assert during is not None and "resnet50" in during["contents"]["value"] and "GiB" in during["contents"]["value"]
        assert during["range"]["start"]["line"] == model_line + 1
        project.release()
        server.change(project.uri, 3, [{"range": {"start": {"line": 0, "character": 0}, "end": {"line": 1, "character": 0}}, "text": ""}])
        server.diagnostics(project.uri)  # the first text again, analysed once the held analysis is done
        after = server.result("textDocument/hover", {"textDocument": {"uri": project.uri}, "position": {"line": model_line, "character": 8}})
        assert after is not None and after["contents"] == during["contents"]
    finally:
        server.close()


def test_after_a_hover_the_pause_after_each_analysis_finds_the_lines_of_its_text(project_root):
    """Once someone hovered, the VRAM lines answer from the last ones found, carried through the edits
    since, and the pause after the new text's analysis finds those of its text and its estimate: a model
    built on a new line gets its hover then."""
    server, project = start(project_root, PULL_AND_REFRESH)
    try:
        lines = project.text.split("\n")
        model_line = next(i for i, line in enumerate(lines) if "resnet50(" in line)

        def hover(line: int) -> dict | None:
            return server.result("textDocument/hover", {"textDocument": {"uri": project.uri}, "position": {"line": line, "character": 8}})

        server.diagnostics(project.uri)
        first = hover(model_line)
        assert first is not None and "GiB" in first["contents"]["value"]
        indent = lines[model_line][: len(lines[model_line]) - len(lines[model_line].lstrip())]
        project.hold()
        project.edit(server, 2, model_line, 0, 0, f"{indent}other = models.resnet18(num_classes=10)\n")
        server.diagnostics(project.uri)
        project.wait_until_held()
        moved = hover(model_line + 1)  # while the new text's analysis is held: the first text's lines, carried
        assert moved is not None and moved["contents"] == first["contents"]
        project.release()
        wait_for_vram_lines(server, 2)
        new_line, old_line = hover(model_line), hover(model_line + 1)
        assert new_line is not None and old_line is not None and new_line["contents"] == old_line["contents"]
        assert "resnet50" in first["contents"]["value"]
        assert "resnet18" in new_line["contents"]["value"], "the estimate of the new text, whose first model is resnet18"
    finally:
        server.close()


def test_inlay_hints_are_refreshed_when_the_pause_finds_the_lines_of_the_new_text(project_root):
    """Inlay hints answered from the lines carried from an older text are asked again once the pause
    after the new text's analysis has found its own: a model built on a new line gets its hint."""
    server, project = start(project_root, PULL_AND_REFRESH)
    try:
        lines = project.text.split("\n")
        model_line = next(i for i, line in enumerate(lines) if "resnet50(" in line)
        everything = {"start": {"line": 0, "character": 0}, "end": {"line": len(lines) + 5, "character": 0}}

        def hinted_lines() -> list[int]:
            hints = server.result("textDocument/inlayHint", {"textDocument": {"uri": project.uri}, "range": everything})
            return [hint["position"]["line"] for hint in hints]

        server.diagnostics(project.uri)
        assert model_line in hinted_lines()
        refreshes = server.server_requests.count("workspace/inlayHint/refresh")
        indent = lines[model_line][: len(lines[model_line]) - len(lines[model_line].lstrip())]
        project.edit(server, 2, model_line, 0, 0, f"{indent}other = models.resnet18(num_classes=10)\n")
        server.diagnostics(project.uri)
        deadline = time.monotonic() + 20
        while server.server_requests.count("workspace/inlayHint/refresh") == refreshes:
            assert time.monotonic() < deadline, "no workspace/inlayHint/refresh after the pause"
            server.debug_info()
            time.sleep(0.05)
        assert model_line in hinted_lines() and model_line + 1 in hinted_lines()
    finally:
        server.close()


def diagnostic_shown(diagnostic: types.Diagnostic) -> tuple:
    """A pytest-lsp client's diagnostic as ``lsp_pipe.shown`` gives a raw one."""
    start, end = diagnostic.range.start, diagnostic.range.end
    where = {"start": {"line": start.line, "character": start.character}, "end": {"line": end.line, "character": end.character}}
    return where, diagnostic.code, diagnostic.message.split("\n\n")[0]


@pytest_lsp.fixture(config=ClientServerConfig(server_command=SERVER))
async def helix(lsp_client: LanguageClient, project_root):
    """A push client (no pull, as Helix 25.07), with a debounce longer than any typing below: every
    publish while someone types comes from the cadence. Each publish is kept with when it arrived."""
    lsp_client.published = published = []  # pyright: ignore[reportAttributeAccessIssue]
    features = lsp_client.protocol.fm.features
    keep = features[types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS]

    def recording(params: types.PublishDiagnosticsParams) -> None:
        keep(params)
        published.append((time.monotonic(), params))

    features[types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS] = recording
    await lsp_client.initialize_session(types.InitializeParams(
        capabilities=types.ClientCapabilities(text_document=types.TextDocumentClientCapabilities(
            publish_diagnostics=types.PublishDiagnosticsClientCapabilities(version_support=True),
        )),
        root_uri=project_root.as_uri(),
        initialization_options={"allowLocalPlugins": True, "settings": {"debounceMs": 10_000}},
    ))
    yield
    await lsp_client.shutdown_session()


async def test_a_push_client_gets_a_publish_at_least_every_quarter_second_while_someone_types(helix, project_root):
    client: LanguageClient = helix
    published: list[tuple[float, types.PublishDiagnosticsParams]] = client.published  # pyright: ignore[reportAttributeAccessIssue]
    project = Project(project_root)
    client.text_document_did_open(types.DidOpenTextDocumentParams(text_document=types.TextDocumentItem(
        uri=project.uri, language_id="python", version=1, text=project.text,
    )))
    while not published:  # the open is published at once
        await asyncio.sleep(0.02)
    before = [diagnostic_shown(d) for d in published[0][1].diagnostics]
    assert before
    project.hold()
    typing_started = time.monotonic()
    for key in range(30):  # 30 keys, one every 50 ms, each a line added at the top: every line moves down
        client.text_document_did_change(types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=project.uri, version=2 + key),
            content_changes=[types.TextDocumentContentChangePartial(
                range=types.Range(start=types.Position(0, 0), end=types.Position(0, 0)), text="#\n",
            )],
        ))
        project.text = "#\n" + project.text
        await asyncio.sleep(0.05)
    typing_ended = time.monotonic()
    during = [(at, params) for at, params in published if typing_started <= at <= typing_ended]
    arrivals = [typing_started, *(at for at, _ in during), typing_ended]
    gaps = [later - earlier for earlier, later in zip(arrivals, arrivals[1:])]
    # 250 ms apart; the bound leaves room for what a loaded machine adds (a debounce would give none at all)
    assert len(during) >= 4 and max(gaps) <= 0.75, (len(during), gaps)
    for _, params in during:  # each carried to its own text (version 2 has one line more than 1)
        assert params.version is not None
        assert [diagnostic_shown(d) for d in params.diagnostics] == moved(before, params.version - 1), params.version
    project.release()
    own = project.expected()
    deadline = time.monotonic() + 30
    while not any(params.version == 31 and [diagnostic_shown(d) for d in params.diagnostics] == own for _, params in published):
        assert time.monotonic() < deadline, "no publish of the last text's own diagnostics"
        await asyncio.sleep(0.05)


def test_neovim_shows_the_carried_report_while_the_analysis_is_held(project_root):
    """Neovim 0.11 itself: it cancels the pull at each change and declares no diagnostic refresh;
    what it shows while the analysis is held can only be the carried answer to a pull it cancelled."""
    project = Project(project_root)
    (project_root / "train.py").write_text(project.text, encoding="utf-8")
    result = project_root / "result.json"
    home = project_root / "home"
    (home / "run").mkdir(parents=True)
    environment = {
        **os.environ, "TRAINLINT_E2E_CMD": str(Path(sys.executable).parent / "trainlint"), "HOME": str(home),
        **{f"XDG_{kind}_HOME": str(home / kind.lower()) for kind in ("CONFIG", "DATA", "STATE", "CACHE")},
        "XDG_RUNTIME_DIR": str(home / "run"),
    }
    command = [find_nvim(), "--headless", "--clean", "-l", str(NVIM_SCRIPT), str(project_root / "train.py"), str(project_root), str(result)]
    run = subprocess.run(command, cwd=project_root, env=environment, capture_output=True, text=True, timeout=90, stdin=subprocess.DEVNULL)
    recorded = json.loads(result.read_text(encoding="utf-8")) if result.is_file() else {}
    assert run.returncode == 0 and recorded.get("ok"), (run.returncode, recorded, run.stderr[-2000:])
    assert recorded["held_throughout"] is True  # the report came while the analysis was held
    assert recorded["while_held"] == recorded["before"] + 2
    assert "~" not in recorded["own_result_id"]  # after the release: the text's own analysis
    final = "# two\n# one\n" + project.text
    expected = [(finding.code, finding.line - 1) for finding in analyze_source(final, str(project_root / "train.py"))]
    assert [(item["code"], item["line"]) for item in recorded["own"]] == expected
