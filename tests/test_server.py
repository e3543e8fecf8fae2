"""The language server end to end: the real `trainlint server` process, driven over stdio by
pytest-lsp with the capabilities real editors send (VS Code, Neovim 0.7 and 0.11, and a
push-only client shaped like Helix)."""

from __future__ import annotations

import asyncio
import textwrap
from pathlib import Path

import pytest
import pytest_lsp
from cli_process import SERVER
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities

# One server per client preset serves all of this module's tests: they must run on its loop.
pytestmark = pytest.mark.asyncio(loop_scope="module")

BUGGY = textwrap.dedent(
    """\
    import torch
    import torch.nn as nn

    model = nn.Linear(10, 2)
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    history = []
    for x, y in loader:
        optimizer.zero_grad()
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
        history.append(loss)
    """
)
FINDING_LINE = 12  # 0-based line of `history.append(loss)`

HELIX = types.ClientCapabilities(
    general=types.GeneralClientCapabilities(position_encodings=[types.PositionEncodingKind.Utf8]),
    text_document=types.TextDocumentClientCapabilities(
        synchronization=types.TextDocumentSyncClientCapabilities(did_save=True),
        publish_diagnostics=types.PublishDiagnosticsClientCapabilities(version_support=True, related_information=True),
        code_action=types.CodeActionClientCapabilities(
            code_action_literal_support=types.ClientCodeActionLiteralOptions(
                code_action_kind=types.ClientCodeActionKindOptions(value_set=["quickfix", "source"])
            )
        ),
        hover=types.HoverClientCapabilities(content_format=[types.MarkupKind.Markdown]),
    ),
    workspace=types.WorkspaceClientCapabilities(configuration=True, workspace_folders=True),
)

CLIENTS = {
    "vscode": client_capabilities("visual-studio-code@v1.65.2"),
    "neovim-0.7": client_capabilities("neovim@v0.7.0"),
    "neovim-0.11": client_capabilities("neovim@v0.11.0"),
    "helix": HELIX,
}


def pulls(capabilities: types.ClientCapabilities) -> bool:
    return capabilities.text_document is not None and capabilities.text_document.diagnostic is not None


class Session:
    """A client with helpers that hide whether diagnostics are pulled or pushed."""

    def __init__(self, client: LanguageClient, capabilities: types.ClientCapabilities, folder: Path) -> None:
        self.client = client
        self.capabilities = capabilities
        self.folder = folder
        self.encoding = types.PositionEncodingKind.Utf16  # until the server's answer says otherwise
        self.opened = 0
        self.versions: dict[str, int] = {}
        self.published: dict[str, tuple[int | None, list[types.Diagnostic]]] = {}
        self.arrived = asyncio.Event()

    def uri(self, name: str) -> str:
        return (self.folder / name).as_uri()

    def open(self, name: str, text: str) -> str:
        """Open a new document (each test its own: the server is shared by a module's tests)."""
        self.opened += 1
        name = f"{Path(name).stem}_{self.opened}.py"
        uri = self.uri(name)
        (self.folder / name).write_text(text, encoding="utf-8")
        self.versions[uri] = 1
        self.client.text_document_did_open(types.DidOpenTextDocumentParams(
            text_document=types.TextDocumentItem(uri=uri, language_id="python", version=1, text=text)
        ))
        return uri

    def change(self, uri: str, text: str, range_: types.Range | None = None) -> None:
        self.versions[uri] += 1
        change = (types.TextDocumentContentChangePartial(range=range_, text=text) if range_ is not None
                  else types.TextDocumentContentChangeWholeDocument(text=text))
        self.client.text_document_did_change(types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=self.versions[uri]),
            content_changes=[change],
        ))

    async def diagnostics(self, uri: str) -> list[types.Diagnostic]:
        if pulls(self.capabilities):
            report = await self.client.text_document_diagnostic_async(
                types.DocumentDiagnosticParams(text_document=types.TextDocumentIdentifier(uri=uri))
            )
            return list(report.items)
        wanted = self.versions[uri]
        while self.published.get(uri, (None, None))[0] != wanted:
            self.arrived.clear()
            await asyncio.wait_for(self.arrived.wait(), timeout=60)
        return list(self.published[uri][1])

    def record_published(self) -> None:
        """Keep the version of each push, which the client's own handler drops."""
        features = self.client.protocol.fm.features
        keep = features[types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS]

        def recording(params: types.PublishDiagnosticsParams) -> None:
            keep(params)
            self.published[params.uri] = (params.version, params.diagnostics)
            self.arrived.set()

        features[types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS] = recording


def _initialize(capabilities: types.ClientCapabilities, folder: Path, options: dict | None = None) -> types.InitializeParams:
    return types.InitializeParams(
        capabilities=capabilities,
        root_uri=folder.as_uri(),
        workspace_folders=[types.WorkspaceFolder(uri=folder.as_uri(), name="project")],
        initialization_options=options if options is not None else {"settings": {"debounceMs": 0}},
    )


@pytest_lsp.fixture(config=ClientServerConfig(server_command=SERVER), params=sorted(CLIENTS), scope="module")
async def session(lsp_client: LanguageClient, request, tmp_path_factory):
    folder = tmp_path_factory.mktemp("workspace")
    capabilities = CLIENTS[request.param]

    lsp_client.set_configuration({"debounceMs": 0}, section="trainlint")
    registrations: list[types.Registration] = []

    @lsp_client.feature(types.CLIENT_REGISTER_CAPABILITY)
    def register(params: types.RegistrationParams) -> None:
        registrations.extend(params.registrations)

    lsp_client.registrations = registrations
    session = Session(lsp_client, capabilities, folder)
    session.record_published()
    result = await lsp_client.initialize_session(_initialize(capabilities, folder))
    session.encoding = result.capabilities.position_encoding or types.PositionEncodingKind.Utf16
    lsp_client.test_session = session
    yield
    await lsp_client.shutdown_session()


@pytest.fixture
def s(session) -> Session:
    return session.test_session


async def test_findings_arrive_and_follow_edits(s: Session):
    uri = s.open("train.py", BUGGY)
    diagnostics = await s.diagnostics(uri)
    retained = [d for d in diagnostics if d.code == "TL101"]
    assert len(retained) == 1, diagnostics
    diagnostic = retained[0]
    assert diagnostic.source == "trainlint"
    assert diagnostic.range.start.line == FINDING_LINE
    assert diagnostic.severity == types.DiagnosticSeverity.Warning
    assert diagnostic.code_description is not None and "TL101" in diagnostic.code_description.href
    assert diagnostic.related_information, "the evidence lines travel as related information"
    assert {info.location.range.start.line for info in diagnostic.related_information} >= {7, FINDING_LINE}

    fixed = BUGGY.replace("history.append(loss)", "history.append(loss.item())")
    s.change(uri, fixed)
    assert not [d for d in await s.diagnostics(uri) if d.code == "TL101"]


async def test_a_syntax_error_mid_edit_keeps_the_other_findings(s: Session):
    uri = s.open("train.py", BUGGY)
    await s.diagnostics(uri)
    s.change(uri, BUGGY + "\nsummary = describe(history[\n")
    codes = {d.code: d for d in await s.diagnostics(uri)}
    assert "TL000" in codes and codes["TL000"].severity == types.DiagnosticSeverity.Error
    assert "TL101" in codes, "the statement that did parse keeps its finding"


async def test_quick_fix_and_disable_actions(s: Session):
    uri = s.open("train.py", BUGGY)
    diagnostics = await s.diagnostics(uri)
    where = next(d for d in diagnostics if d.code == "TL101").range
    actions = await s.client.text_document_code_action_async(types.CodeActionParams(
        text_document=types.TextDocumentIdentifier(uri=uri), range=where,
        context=types.CodeActionContext(diagnostics=diagnostics),
    ))
    titles = [action.title for action in actions]
    quick = next(a for a in actions if a.title.startswith("trainlint (TL101)"))
    assert quick.is_preferred and quick.kind == types.CodeActionKind.QuickFix
    assert apply(BUGGY, quick.edit.changes[uri]).count("history.append(loss.detach())") == 1
    disable = next(a for a in actions if a.title == "Disable TL101 for this line")
    assert "history.append(loss)  # trainlint: ignore[TL101]" in apply(BUGGY, disable.edit.changes[uri])
    assert "trainlint: fix all auto-fixable problems" in titles


async def test_an_unsafe_fix_is_offered_but_never_preferred_nor_in_fix_all(s: Session):
    text = (
        "from transformers import AutoModelForCausalLM\n\n"
        "model = AutoModelForCausalLM.from_pretrained(\"gpt2\")\n"
        "kept = []\n"
        "for batch in eval_dataloader:\n"
        "    outputs = model(**batch)\n"
        "    kept.append(outputs)\n"
    )
    uri = s.open("train.py", text)
    diagnostics = await s.diagnostics(uri)
    where = next(d for d in diagnostics if d.code == "TL101").range
    actions = await s.client.text_document_code_action_async(types.CodeActionParams(
        text_document=types.TextDocumentIdentifier(uri=uri), range=where,
        context=types.CodeActionContext(diagnostics=diagnostics),
    ))
    quick = next(a for a in actions if a.title.startswith("trainlint (TL101)"))
    assert not quick.is_preferred, "a ModelOutput has no .detach(): the editor must not apply this unasked"
    assert "(unsafe" in quick.title
    assert apply(text, quick.edit.changes[uri]).count("kept.append(outputs.detach())") == 1
    assert not [a for a in actions if a.title == "trainlint: fix all auto-fixable problems"]


async def test_fix_all_is_resolved_lazily_and_only_when_asked(s: Session):
    uri = s.open("train.py", BUGGY)
    await s.diagnostics(uri)
    whole = types.Range(start=types.Position(0, 0), end=types.Position(0, 0))
    only_quick = await s.client.text_document_code_action_async(types.CodeActionParams(
        text_document=types.TextDocumentIdentifier(uri=uri), range=whole,
        context=types.CodeActionContext(diagnostics=[], only=[types.CodeActionKind.QuickFix]),
    ))
    assert not [a for a in only_quick or [] if a.kind != types.CodeActionKind.QuickFix]
    actions = await s.client.text_document_code_action_async(types.CodeActionParams(
        text_document=types.TextDocumentIdentifier(uri=uri), range=whole,
        context=types.CodeActionContext(diagnostics=[], only=[types.CodeActionKind.SourceFixAll]),
    ))
    (fix_all,) = actions
    assert fix_all.kind == "source.fixAll.trainlint" and fix_all.edit is None
    resolved = await s.client.code_action_resolve_async(fix_all)
    fixed = apply(BUGGY, resolved.edit.changes[uri])
    assert "history.append(loss.detach())" in fixed


async def test_hover_on_a_suppression_code_explains_the_rule(s: Session):
    text = BUGGY.replace("history.append(loss)", "history.append(loss)  # trainlint: ignore[TL101]")
    uri = s.open("train.py", text)
    column = text.splitlines()[FINDING_LINE].index("TL101") + 2
    hover = await s.client.text_document_hover_async(types.HoverParams(
        text_document=types.TextDocumentIdentifier(uri=uri), position=types.Position(FINDING_LINE, column),
    ))
    assert hover is not None and "retained-graph" in hover.contents.value
    nothing = await s.client.text_document_hover_async(types.HoverParams(
        text_document=types.TextDocumentIdentifier(uri=uri), position=types.Position(FINDING_LINE, 2),
    ))
    assert nothing is None


MODEL_SCRIPT = textwrap.dedent(
    """\
    import torch
    from torch.utils.data import DataLoader
    from torchvision import models

    model = models.resnet18(num_classes=10)
    loader = DataLoader(train_set, batch_size=64, shuffle=True)
    """
)


async def test_model_and_batch_size_lines_show_the_vram_estimate(s: Session):
    uri = s.open("model.py", MODEL_SCRIPT)
    hover = await s.client.text_document_hover_async(types.HoverParams(
        text_document=types.TextDocumentIdentifier(uri=uri), position=types.Position(4, 2),
    ))
    assert hover is not None and "resnet18" in hover.contents.value and "GiB" in hover.contents.value
    assert "batch size" in hover.contents.value and "line 6" in hover.contents.value, "inputs name their lines"
    formats = s.capabilities.text_document.hover.content_format if s.capabilities.text_document.hover else None
    wanted = types.MarkupKind.Markdown if formats and types.MarkupKind.Markdown in formats else types.MarkupKind.PlainText
    assert hover.contents.kind == wanted
    hints = await s.client.text_document_inlay_hint_async(types.InlayHintParams(
        text_document=types.TextDocumentIdentifier(uri=uri),
        range=types.Range(start=types.Position(0, 0), end=types.Position(6, 0)),
    ))
    assert [hint.position.line for hint in hints] == [4, 5]
    assert all(hint.label.startswith("≈ ") and "GiB" in hint.label for hint in hints)
    assert hints[0].position.character == len(MODEL_SCRIPT.splitlines()[4])
    outside = await s.client.text_document_inlay_hint_async(types.InlayHintParams(
        text_document=types.TextDocumentIdentifier(uri=uri),
        range=types.Range(start=types.Position(0, 0), end=types.Position(3, 0)),
    ))
    assert not outside
    import_line = await s.client.text_document_hover_async(types.HoverParams(
        text_document=types.TextDocumentIdentifier(uri=uri), position=types.Position(0, 2),
    ))
    assert import_line is None


async def test_a_model_outside_the_catalog_says_there_is_no_estimate(s: Session):
    uri = s.open("unknown.py", MODEL_SCRIPT.replace("models.resnet18(num_classes=10)", "models.no_such_net()"))
    hover = await s.client.text_document_hover_async(types.HoverParams(
        text_document=types.TextDocumentIdentifier(uri=uri), position=types.Position(4, 2),
    ))
    assert hover is not None and "No estimate" in hover.contents.value and "no_such_net" in hover.contents.value


async def test_without_a_model_the_hover_says_how_to_name_it_in_the_editor_and_one_hint_at_most(s: Session):
    script = MODEL_SCRIPT.replace("models.resnet18(num_classes=10)", "AutoModelForCausalLM.from_pretrained(args.model)")
    script = "from transformers import AutoModelForCausalLM\n" + script + "eval_loader = DataLoader(val_set, batch_size=64)\n"
    uri = s.open("unnamed.py", script)
    hover = await s.client.text_document_hover_async(types.HoverParams(
        text_document=types.TextDocumentIdentifier(uri=uri), position=types.Position(6, 2),
    ))
    assert hover is not None and "No estimate" in hover.contents.value
    assert "# trainlint: model=" in hover.contents.value and "targetModel" in hover.contents.value
    assert "--model" not in hover.contents.value, "a CLI flag is no advice in the editor"
    everything = types.Range(start=types.Position(0, 0), end=types.Position(len(script.splitlines()), 0))
    hints = await s.client.text_document_inlay_hint_async(types.InlayHintParams(
        text_document=types.TextDocumentIdentifier(uri=uri), range=everything,
    ))
    assert [hint.position.line for hint in hints] == [5], "one hint, on the line that builds the model"
    no_model_line = s.open("loaders.py", "from torch.utils.data import DataLoader\nloader = DataLoader(train_set, batch_size=64)\n")
    hints = await s.client.text_document_inlay_hint_async(types.InlayHintParams(
        text_document=types.TextDocumentIdentifier(uri=no_model_line), range=everything,
    ))
    assert not hints
    named = s.open("named.py", "# trainlint: model=gpt2\n" + script)
    hover = await s.client.text_document_hover_async(types.HoverParams(
        text_document=types.TextDocumentIdentifier(uri=named), position=types.Position(7, 2),
    ))
    assert hover is not None and "gpt2" in hover.contents.value and "line 1: `# trainlint: model=gpt2`" in hover.contents.value


async def test_columns_are_in_the_negotiated_encoding(s: Session):
    text = BUGGY.replace("history.append(loss)", "history.append(loss); note = '😋é'; history.append(loss)")
    uri = s.open("train.py", text)
    findings = sorted((d for d in await s.diagnostics(uri) if d.code == "TL101"), key=lambda d: d.range.start.character)
    line = text.splitlines()[FINDING_LINE]
    prefix = line[: line.rindex("loss)")]
    units = {"utf-8": len(prefix.encode()), "utf-16": len(prefix.encode("utf-16-le")) // 2, "utf-32": len(prefix)}
    assert findings[-1].range.start.character == units[s.encoding]


async def test_bad_requests_get_answers_not_a_dead_server(s: Session):
    unknown = s.uri("never_opened.py")
    hover = await s.client.text_document_hover_async(types.HoverParams(
        text_document=types.TextDocumentIdentifier(uri=unknown), position=types.Position(5, 5)
    ))
    assert hover is None
    uri = s.open("train.py", BUGGY)
    past_end = await s.client.text_document_hover_async(types.HoverParams(
        text_document=types.TextDocumentIdentifier(uri=uri), position=types.Position(10_000, 10_000)
    ))
    assert past_end is None
    s.change(uri, "\x00\x01 garbage \ufffd ((( [[[ \n" * 50)
    assert "TL000" in {d.code for d in await s.diagnostics(uri)}
    s.change(uri, BUGGY)
    assert any(d.code == "TL101" for d in await s.diagnostics(uri)), "the server still answers after garbage"


def apply(text: str, edits: list[types.TextEdit]) -> str:
    """Apply LSP edits (code-point columns are enough for these ASCII texts)."""
    lines = text.splitlines(keepends=True)
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line))

    def offset(position: types.Position) -> int:
        return offsets[min(position.line, len(lines))] + position.character

    for edit in sorted(edits, key=lambda e: (e.range.start.line, e.range.start.character), reverse=True):
        text = text[: offset(edit.range.start)] + edit.new_text + text[offset(edit.range.end):]
    return text
