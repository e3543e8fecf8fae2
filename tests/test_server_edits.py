"""Random edits sent to the real server as incremental changes, in the position encoding it
negotiated: after each batch, the diagnostics it reports equal those of a fresh analysis.

The suite sends a few dozen edits; TRAINLINT_SERVER_EDITS=2000 runs the long version.
"""

from __future__ import annotations

import os
import random
import sys
from pathlib import Path

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities

from test_incremental import SNIPPETS
from trainlint.analysis.engine import analyze_source
from trainlint.server.convert import Positions

SERVER = [sys.executable, "-m", "trainlint", "server"]
EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "buggy"
EDITS = int(os.environ.get("TRAINLINT_SERVER_EDITS", "60"))
pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest_lsp.fixture(
    config=ClientServerConfig(server_command=SERVER), scope="module",
    params=["visual-studio-code@v1.65.2", "neovim@v0.11.0"],  # UTF-16 and UTF-8 positions
)
async def client(lsp_client: LanguageClient, request, tmp_path_factory):
    folder = tmp_path_factory.mktemp("edits")

    @lsp_client.feature(types.CLIENT_REGISTER_CAPABILITY)
    def register(params: types.RegistrationParams) -> None:
        pass

    lsp_client.set_configuration({"debounceMs": 0}, section="trainlint")
    result = await lsp_client.initialize_session(types.InitializeParams(
        capabilities=client_capabilities(request.param),
        root_uri=folder.as_uri(),
        initialization_options={"settings": {"debounceMs": 0}},
        workspace_folders=[types.WorkspaceFolder(uri=folder.as_uri(), name="edits")],
    ))
    lsp_client.folder = folder
    lsp_client.encoding = result.capabilities.position_encoding or types.PositionEncodingKind.Utf16
    yield
    await lsp_client.shutdown_session()


def _position(text: str, offset: int, encoding: str) -> types.Position:
    line = text.count("\n", 0, offset)
    before = text[text.rfind("\n", 0, offset) + 1:offset]
    if encoding == types.PositionEncodingKind.Utf8:
        units = len(before.encode("utf-8"))
    elif encoding == types.PositionEncodingKind.Utf32:
        units = len(before)
    else:
        units = len(before.encode("utf-16-le")) // 2
    return types.Position(line=line, character=units)


def _random_edit(text: str, rng: random.Random) -> tuple[int, int, str]:
    start = rng.randrange(len(text) + 1)
    kind = rng.random()
    if kind < 0.45:
        return start, start, rng.choice(SNIPPETS)
    if kind < 0.8:
        return start, min(len(text), start + rng.randint(1, 40)), ""
    source = rng.randrange(len(text) + 1)
    return start, start, text[source:source + rng.randint(1, 200)]


def _expected(text: str, path: Path, encoding: str) -> list[tuple]:
    findings = analyze_source(text, str(path))
    positions = Positions(text.splitlines(), encoding)
    return [
        (positions.range_to_client(f.line, f.column, f.end_line, f.end_column), f.code, f.message.split("\n\n")[0])
        for f in findings
    ]


async def test_random_incremental_edits_give_what_a_fresh_analysis_gives(client):
    lsp_client = client
    encoding = lsp_client.encoding
    rng = random.Random(2026)
    sources = sorted(EXAMPLES.glob("*.py"))
    edits_sent = 0
    document = 0
    while edits_sent < EDITS:
        source = sources[document % len(sources)]
        document += 1
        path = lsp_client.folder / f"{document}_{source.name}"
        text = source.read_text(encoding="utf-8")
        uri = path.as_uri()
        lsp_client.text_document_did_open(types.DidOpenTextDocumentParams(
            text_document=types.TextDocumentItem(uri=uri, language_id="python", version=0, text=text)
        ))
        for version in range(1, 21):
            changes = []
            for _ in range(rng.randint(1, 8)):
                start, end, new = _random_edit(text, rng)
                changes.append(types.TextDocumentContentChangePartial(
                    range=types.Range(start=_position(text, start, encoding), end=_position(text, end, encoding)), text=new
                ))
                text = text[:start] + new + text[end:]
                edits_sent += 1
            lsp_client.text_document_did_change(types.DidChangeTextDocumentParams(
                text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version), content_changes=changes
            ))
            report = await lsp_client.text_document_diagnostic_async(
                types.DocumentDiagnosticParams(text_document=types.TextDocumentIdentifier(uri=uri))
            )
            got = [(d.range, d.code, d.message.split("\n\n")[0]) for d in report.items]
            assert got == _expected(text, path, encoding), f"{source.name} after {edits_sent} edits"
            if edits_sent >= EDITS:
                break
        lsp_client.text_document_did_close(types.DidCloseTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=uri)))
    assert lsp_client.error is None
    assert encoding in (types.PositionEncodingKind.Utf16, types.PositionEncodingKind.Utf8)
