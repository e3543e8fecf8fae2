"""The language server in a multi-root workspace, and with input that should not hurt it: requests
for closed documents, cancelled requests, a 20,000-line document, malformed settings."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import pytest_lsp
from cli_process import SERVER
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities
from test_server import BUGGY, FINDING_LINE

pytestmark = pytest.mark.asyncio(loop_scope="module")


class Workspace:
    def __init__(self, client: LanguageClient, root: Path) -> None:
        self.client = client
        self.root = root
        self.versions: dict[str, int] = {}

    def open(self, relative: str, text: str) -> str:
        path = self.root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        uri = path.as_uri()
        self.versions[uri] = 1
        self.client.text_document_did_open(types.DidOpenTextDocumentParams(
            text_document=types.TextDocumentItem(uri=uri, language_id="python", version=1, text=text)
        ))
        return uri

    def change(self, uri: str, text: str) -> None:
        self.versions[uri] += 1
        self.client.text_document_did_change(types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=self.versions[uri]),
            content_changes=[types.TextDocumentContentChangeWholeDocument(text=text)],
        ))

    def pull_request(self, uri: str):
        return self.client.text_document_diagnostic_async(
            types.DocumentDiagnosticParams(text_document=types.TextDocumentIdentifier(uri=uri))
        )

    async def codes(self, uri: str) -> list[str]:
        report = await self.pull_request(uri)
        return [diagnostic.code for diagnostic in report.items]


@pytest_lsp.fixture(config=ClientServerConfig(server_command=SERVER), scope="module")
async def workspace(lsp_client: LanguageClient, tmp_path_factory):
    root = tmp_path_factory.mktemp("multi-root")
    (root / "research").mkdir()
    (root / "production").mkdir()
    lsp_client.set_configuration({"debounceMs": 0}, section="trainlint")

    @lsp_client.feature(types.CLIENT_REGISTER_CAPABILITY)
    def register(params: types.RegistrationParams) -> None:
        pass

    # The second folder turns TL101 off in its own settings.
    lsp_client.set_configuration(
        {"debounceMs": 0, "ignore": ["TL101"]}, section="trainlint", scope_uri=(root / "production").as_uri()
    )
    await lsp_client.initialize_session(types.InitializeParams(
        capabilities=client_capabilities("visual-studio-code@v1.65.2"),
        root_uri=root.as_uri(),
        workspace_folders=[
            types.WorkspaceFolder(uri=(root / "research").as_uri(), name="research"),
            types.WorkspaceFolder(uri=(root / "production").as_uri(), name="production"),
        ],
    ))
    lsp_client.test_workspace = Workspace(lsp_client, root)
    yield
    await lsp_client.shutdown_session()


@pytest.fixture
def w(workspace) -> Workspace:
    return workspace.test_workspace


async def test_each_workspace_folder_has_its_own_settings(w: Workspace):
    research = w.open("research/train.py", BUGGY)
    production = w.open("production/train.py", BUGGY)
    for _ in range(50):  # the folder settings arrive after `initialized`
        if "TL101" not in await w.codes(production):
            break
        await asyncio.sleep(0.1)
    assert "TL101" in await w.codes(research)
    assert "TL101" not in await w.codes(production)


async def test_requests_for_a_closed_document_get_empty_answers(w: Workspace):
    uri = w.open("research/closed.py", BUGGY)
    assert "TL101" in await w.codes(uri)
    w.client.text_document_did_close(types.DidCloseTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=uri)))
    assert await w.codes(uri) == []
    position = types.Position(line=FINDING_LINE, character=4)
    actions = await w.client.text_document_code_action_async(types.CodeActionParams(
        text_document=types.TextDocumentIdentifier(uri=uri), range=types.Range(start=position, end=position),
        context=types.CodeActionContext(diagnostics=[]),
    ))
    assert not actions
    hover = await w.client.text_document_hover_async(
        types.HoverParams(text_document=types.TextDocumentIdentifier(uri=uri), position=position)
    )
    assert hover is None


async def test_a_cancelled_request_leaves_the_server_answering(w: Workspace):
    uri = w.open("research/cancelled.py", BUGGY)
    params = types.DocumentDiagnosticParams(text_document=types.TextDocumentIdentifier(uri=uri))
    pending = w.client.protocol.send_request(types.TEXT_DOCUMENT_DIAGNOSTIC, params, msg_id="to-be-cancelled")
    w.client.protocol.notify(types.CANCEL_REQUEST, types.CancelParams(id="to-be-cancelled"))
    try:
        await asyncio.wrap_future(pending)  # it may have been answered before the cancellation arrived
    except Exception as error:
        assert "cancel" in str(error).lower()
    assert "TL101" in await w.codes(uri)


async def test_a_twenty_thousand_line_document_is_analysed_and_follows_edits(w: Workspace):
    # 40,000 tokens, under the limit of what is checked as you type (with 50,000 lines of these,
    # 100,000 tokens, this test took 24 s; test_server_protocol checks that such a document gets a
    # note at once)
    filler = "".join(f"value_{index} = {index}\n" for index in range(20_000))
    uri = w.open("research/huge.py", filler + BUGGY)
    assert "TL101" in await w.codes(uri)
    w.change(uri, filler + BUGGY.replace("history.append(loss)", "history.append(loss.item())"))
    assert "TL101" not in await w.codes(uri)


async def test_malformed_settings_are_reported_and_the_rest_still_apply(w: Workspace):
    uri = w.open("research/settings.py", BUGGY)
    w.client.set_configuration({"debounceMs": "soon", "ignore": ["TL101"], "severity": 42}, section="trainlint")
    w.client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings=None))
    for _ in range(50):
        if "TL101" not in await w.codes(uri):
            break
        await asyncio.sleep(0.1)
    assert "TL101" not in await w.codes(uri), "the valid part of the settings applies"
    shown = " ".join(message.message for message in w.client.messages)
    assert "debounceMs" in shown and "severity" in shown
    w.client.set_configuration({"debounceMs": 0}, section="trainlint")
    w.client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings=None))
