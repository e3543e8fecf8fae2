"""Notebooks: the Python cells of a notebook analysed as one program, in cell order (a model built
in cell 2, its training loop in cell 5), and each finding shown in the cell it is in."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

import msgspec
from lsprotocol import types

from trainlint.analysis.findings import Finding
from trainlint.notebooks import CellProgram

from .documents import Analysis

if TYPE_CHECKING:
    from .language_server import TrainlintServer

log = logging.getLogger("trainlint.server")


def python_cells(ls: TrainlintServer, notebook: types.NotebookDocument) -> list[tuple[str, str]]:
    """(uri, text) of the notebook's code cells in Python, in order."""
    cells: list[tuple[str, str]] = []
    for cell in notebook.cells:
        if cell.kind != types.NotebookCellKind.Code:
            continue
        document = ls.workspace.get_text_document(cell.document)
        if document.language_id in (None, "python"):
            cells.append((cell.document, document.source))
    return cells


async def cell_analysis(ls: TrainlintServer, cell_uri: str) -> Analysis | None:
    """The findings of one notebook cell: the notebook's Python cells analysed as one program, then
    the findings inside this cell, in its own coordinates."""
    notebook = ls.workspace.get_notebook_document(cell_uri=cell_uri)
    if notebook is None:
        return None
    cells = python_cells(ls, notebook)
    uris = [uri for uri, _ in cells]
    if cell_uri not in uris:
        return None
    program = CellProgram([text for _, text in cells])
    version = notebook.version  # read now: the workspace updates this object in place as edits come
    state = ls.notebooks.get(notebook.uri)
    if state is None:
        state = ls.notebooks[notebook.uri] = ls.new_state(notebook.uri)
    settings = ls.settings_for(state)
    loop = asyncio.get_running_loop()
    try:
        whole = await loop.run_in_executor(
            ls.lane(state, program.text), state.analyse, program.text, version, settings
        )
    except Exception:
        log.exception("analysis of %s failed", notebook.uri)
        return None
    finally:
        ls.idle_gc.analysed()
        ls.report_plugin_problems()
    index = uris.index(cell_uri)
    findings = [placed for finding in whole.findings if (placed := in_cell(finding, program, index)) is not None]
    return Analysis(version, settings, cells[index][1], findings)


def in_cell(finding: Finding, program: CellProgram, index: int) -> Finding | None:
    """A finding of the joined program in one cell's coordinates; None when it is elsewhere. Evidence in
    other cells is left out (its position would be another document's); a fix that edits another cell too
    is dropped."""
    start, end = program.locate(finding.line), program.locate(finding.end_line)
    if start is None or start[0] != index:
        return None
    end_line = end[1] if end is not None and end[0] == index else start[1]

    def moved(line: int) -> int | None:
        located = program.locate(line)
        return located[1] if located is not None and located[0] == index else None

    evidence = tuple(
        msgspec.structs.replace(item, line=moved(item.line)) for item in finding.evidence
        if item.path is None and moved(item.line) is not None
    )
    fix = finding.fix
    if fix is not None:
        edits = [
            msgspec.structs.replace(edit, line=moved(edit.line), end_line=moved(edit.end_line))
            for edit in fix.edits
        ]
        fix = msgspec.structs.replace(fix, edits=tuple(edits)) if all(e.line and e.end_line for e in edits) else None
    return msgspec.structs.replace(finding, line=start[1], end_line=end_line, evidence=evidence, fix=fix)
