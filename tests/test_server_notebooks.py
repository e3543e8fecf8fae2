"""The language server with notebooks (VS Code's notebook editor): all Python cells are one program,
diagnostics come per cell, cells that leave are cleared, and quick fixes work inside a cell."""

from __future__ import annotations

import asyncio

import pytest
import pytest_lsp
from cli_process import SERVER
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities

pytestmark = pytest.mark.asyncio(loop_scope="module")

SETUP = "import torch\nimport torch.nn as nn\nmodel = nn.Linear(10, 2)\ncriterion = nn.CrossEntropyLoss()\nhistory = []\n"
LOOP = "for x, y in loader:\n    loss = criterion(model(x), y)\n    loss.backward()\n    history.append(loss)\n"
NOTES = "# Training\nThe loop below."


@pytest_lsp.fixture(config=ClientServerConfig(server_command=SERVER), scope="module")
async def client(lsp_client: LanguageClient, tmp_path_factory):
    @lsp_client.feature(types.CLIENT_REGISTER_CAPABILITY)
    def register(params: types.RegistrationParams) -> None:
        pass

    folder = tmp_path_factory.mktemp("notebooks")
    lsp_client.set_configuration({"debounceMs": 0}, section="trainlint")
    await lsp_client.initialize_session(types.InitializeParams(
        capabilities=client_capabilities("visual-studio-code@v1.65.2"), root_uri=folder.as_uri(),
        initialization_options={"settings": {"debounceMs": 0}},
    ))
    lsp_client.folder = folder
    yield
    await lsp_client.shutdown_session()


def _open(client: LanguageClient, name: str, cells: list[tuple[str, str, types.NotebookCellKind]]) -> list[str]:
    notebook = (client.folder / name).as_uri()
    uris = [f"vscode-notebook-cell:{client.folder / name}#cell{index}" for index in range(len(cells))]
    client.notebook_document_did_open(types.DidOpenNotebookDocumentParams(
        notebook_document=types.NotebookDocument(
            uri=notebook, notebook_type="jupyter-notebook", version=1,
            cells=[types.NotebookCell(kind=kind, document=uri) for uri, (_, _, kind) in zip(uris, cells)],
        ),
        cell_text_documents=[
            types.TextDocumentItem(uri=uri, language_id=language, version=1, text=text)
            for uri, (text, language, _) in zip(uris, cells)
        ],
    ))
    return uris


def _delete_cell(client: LanguageClient, name: str, index: int, uri: str) -> None:
    """The notebook's second version: the cell at ``index`` deleted (and its document closed)."""
    client.notebook_document_did_change(types.DidChangeNotebookDocumentParams(
        notebook_document=types.VersionedNotebookDocumentIdentifier(uri=(client.folder / name).as_uri(), version=2),
        change=types.NotebookDocumentChangeEvent(cells=types.NotebookDocumentCellChanges(
            structure=types.NotebookDocumentCellChangeStructure(
                array=types.NotebookCellArrayChange(start=index, delete_count=1, cells=[]),
                did_close=[types.TextDocumentIdentifier(uri=uri)],
            ),
        )),
    ))


async def _codes(client: LanguageClient, uri: str) -> list[tuple[str, int]]:
    report = await client.text_document_diagnostic_async(
        types.DocumentDiagnosticParams(text_document=types.TextDocumentIdentifier(uri=uri))
    )
    return [(d.code, d.range.start.line) for d in report.items]


async def test_cells_are_one_program_and_each_cell_gets_its_own_findings(client):
    code, markup = types.NotebookCellKind.Code, types.NotebookCellKind.Markup
    setup, notes, loop = _open(client, "train.ipynb", [(SETUP, "python", code), (NOTES, "markdown", markup), (LOOP, "python", code)])
    assert ("TL101", 3) in await _codes(client, loop), "the model and criterion come from another cell"
    assert all(code != "TL101" for code, _ in await _codes(client, setup))
    assert await _codes(client, notes) == []
    for _ in range(400):  # this client cannot pull: the server also pushes, per cell (20 s at most, on a busy machine)
        if any(d.code == "TL101" for d in client.diagnostics.get(loop, [])):
            break
        await asyncio.sleep(0.05)
    assert any(d.code == "TL101" for d in client.diagnostics.get(loop, []))


async def test_a_quick_fix_inside_a_cell(client):
    code = types.NotebookCellKind.Code
    _, loop = _open(client, "fix.ipynb", [(SETUP, "python", code), (LOOP, "python", code)])
    report = await client.text_document_diagnostic_async(
        types.DocumentDiagnosticParams(text_document=types.TextDocumentIdentifier(uri=loop))
    )
    diagnostic = next(d for d in report.items if d.code == "TL101")
    actions = await client.text_document_code_action_async(types.CodeActionParams(
        text_document=types.TextDocumentIdentifier(uri=loop), range=diagnostic.range,
        context=types.CodeActionContext(diagnostics=[diagnostic], only=[types.CodeActionKind.QuickFix]),
    ))
    fix = next(action for action in actions if action.is_preferred)
    [edit] = fix.edit.changes[loop]
    assert edit.range.start.line == 3 and ".detach()" in edit.new_text


async def test_a_cell_that_stops_being_python_loses_its_findings(client):
    code = types.NotebookCellKind.Code
    setup, loop = _open(client, "switch.ipynb", [(SETUP, "python", code), (LOOP, "python", code)])
    assert ("TL101", 3) in await _codes(client, loop)
    _delete_cell(client, "switch.ipynb", 1, loop)
    assert await _codes(client, loop) == []
    for _ in range(400):
        if not client.diagnostics.get(loop):
            break
        await asyncio.sleep(0.05)
    assert not client.diagnostics.get(loop), "the deleted cell's pushed diagnostics are cleared"


async def test_cells_whose_text_never_came_are_empty_not_read_from_disk(client):
    # A notebook that lists cells the client sent no text for (at open, and in a structure change
    # without `didOpen`): pygls looked for their text on disk, at the path in the cell's URI (the
    # notebook's own file), and a pull of an untouched cell answered -32603 FileNotFoundError.
    # Where the file existed, its text would have been analysed as the cell's code.
    code = types.NotebookCellKind.Code
    setup, loop = _open(client, "odd.ipynb", [(SETUP, "python", code), (LOOP, "python", code)])
    notebook = (client.folder / "odd.ipynb").as_uri()
    ghost = f"vscode-notebook-cell:{client.folder / 'odd.ipynb'}#ghost"
    client.notebook_document_did_change(types.DidChangeNotebookDocumentParams(
        notebook_document=types.VersionedNotebookDocumentIdentifier(uri=notebook, version=2),
        change=types.NotebookDocumentChangeEvent(cells=types.NotebookDocumentCellChanges(
            structure=types.NotebookDocumentCellChangeStructure(
                array=types.NotebookCellArrayChange(start=1, delete_count=0, cells=[types.NotebookCell(kind=code, document=ghost)]),
            ),
        )),
    ))
    found = await _codes(client, loop)
    assert ("TL101", 3) in found
    # were the file read as the ghost cell, the loop would put a softmax before CrossEntropyLoss: TL202
    (client.folder / "odd.ipynb").write_text("model = nn.Sequential(nn.Linear(10, 2), nn.Softmax(dim=1))\n")
    client.notebook_document_did_change(types.DidChangeNotebookDocumentParams(
        notebook_document=types.VersionedNotebookDocumentIdentifier(uri=notebook, version=3),
        change=types.NotebookDocumentChangeEvent(cells=types.NotebookDocumentCellChanges(
            text_content=[types.NotebookDocumentCellContentChanges(
                document=types.VersionedTextDocumentIdentifier(uri=setup, version=2),
                changes=[types.TextDocumentContentChangeWholeDocument(text=SETUP + "\n")],
            )],
        )),
    ))
    assert await _codes(client, loop) == found, "the file on disk is not read as a cell"


async def test_a_cell_deleted_while_the_notebook_is_analysed_gets_no_late_findings(client):
    # The push after opening awaits each cell's analysis in turn; a change that deletes a cell while
    # that analysis runs clears the cell, and the older push must not publish its findings afterwards
    # (a ghost squiggle in a cell that no longer exists).
    code = types.NotebookCellKind.Code
    padding = "".join(f"def helper_{index}(x):\n    return x * {index}\n\n" for index in range(1500))
    first, rest = _open(client, "late.ipynb", [(SETUP + LOOP + padding, "python", code), ("print(1)\n", "python", code)])
    _delete_cell(client, "late.ipynb", 0, first)
    assert await _codes(client, rest) == []
    for _ in range(40):  # both pushes have had time to finish
        if rest in client.diagnostics:
            break
        await asyncio.sleep(0.05)
    await asyncio.sleep(0.5)
    assert not client.diagnostics.get(first), "the deleted cell has no findings pushed after it was cleared"
