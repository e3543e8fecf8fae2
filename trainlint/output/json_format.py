"""Findings as one JSON document (``--format json``); the shape is a public contract.

The document is made of the structs below, so its JSON Schema is derived from the same code that
writes it (:func:`schema`, published as ``docs/schema/check-output-v1.json``, which ``python -m
trainlint.output.json_format`` prints; a test keeps the two equal). ``VERSION`` is the document's ``version`` field: it changes only when a field is removed,
renamed or changes meaning, never for an added field (docs/ci.md, "The JSON report").
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal, cast

import msgspec

from trainlint.analysis.findings import Finding, Fix, Severity
from trainlint.config import relative_posix

from . import Report

VERSION = 1
SeverityLabel = Literal["error", "warning", "note"]
SCHEMA_ID = f"https://trainlint.dev/schema/check-output-v{VERSION}.json"


class CellPosition(msgspec.Struct):
    """Where a notebook finding is inside its cell (the finding's own positions are the .ipynb file's)."""

    number: int
    line: int | None
    column: int | None
    end_line: int | None
    end_column: int | None


class EvidenceCell(msgspec.Struct):
    number: int
    line: int | None


class Evidence(msgspec.Struct):
    """One line that establishes the finding; ``path`` only when it is in another file."""

    line: int
    note: str
    path: str | msgspec.UnsetType = msgspec.UNSET
    cell: EvidenceCell | msgspec.UnsetType = msgspec.UNSET


class Edit(msgspec.Struct):
    """Replace the text from (line, column) to (end_line, end_column), 1-based, with ``new_text``."""

    line: int
    column: int
    end_line: int
    end_column: int
    new_text: str


class JsonFix(msgspec.Struct):
    description: str
    applicability: Literal["safe", "unsafe"]
    edits: list[Edit]


class JsonFinding(msgspec.Struct):
    path: str
    line: int
    column: int
    end_line: int
    end_column: int
    code: str
    name: str
    severity: SeverityLabel
    message: str
    evidence: list[Evidence]
    help: str | None
    fix: JsonFix | None
    cell: CellPosition | msgspec.UnsetType = msgspec.UNSET


class Summary(msgspec.Struct):
    files: int
    errors: int
    warnings: int
    notes: int
    fixable: int


class CheckReport(msgspec.Struct):
    """What ``trainlint check --output-format json`` prints."""

    version: Literal[1]  # VERSION
    findings: list[JsonFinding]
    summary: Summary


def schema() -> dict[str, Any]:
    """The JSON Schema of the document ``render_json`` writes."""
    document = msgspec.json.schema(CheckReport)
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", "$id": SCHEMA_ID,
            "title": f"trainlint check report, version {VERSION}", **document}


def render_json(report: Report) -> str:
    document = CheckReport(
        version=VERSION,
        findings=[_finding(finding) for finding in report.findings],
        summary=Summary(
            files=report.files,
            errors=report.count(Severity.ERROR),
            warnings=report.count(Severity.WARNING),
            notes=report.count(Severity.NOTE),
            fixable=report.fixable,
        ),
    )
    return msgspec.json.format(msgspec.json.encode(document), indent=2).decode("utf-8") + "\n"


def _finding(finding: Finding) -> JsonFinding:
    cell = msgspec.UNSET
    if finding.cell is not None:  # a notebook: positions are in the .ipynb file; these say where in the cell
        cell = CellPosition(finding.cell, finding.cell_line, finding.cell_column, finding.cell_end_line, finding.cell_end_column)
    return JsonFinding(
        path=finding.path,
        line=finding.line,
        column=finding.column,
        end_line=finding.end_line,
        end_column=finding.end_column,
        code=finding.code,
        name=finding.name,
        severity=cast(SeverityLabel, finding.severity.label),
        message=finding.message,
        evidence=[_evidence(item) for item in finding.evidence],
        help=finding.help,
        fix=_fix(finding.fix),
        cell=cell,
    )


def _fix(fix: Fix | None) -> JsonFix | None:
    if fix is None:
        return None
    return JsonFix(
        description=fix.description,
        applicability="safe" if fix.safe else "unsafe",
        edits=[Edit(edit.line, edit.column, edit.end_line, edit.end_column, edit.new_text) for edit in fix.edits],
    )


def _evidence(item) -> Evidence:
    """Evidence in another file of the workspace carries its path (relative to the working directory)."""
    return Evidence(
        line=item.line,
        note=item.note,
        path=relative_posix(Path(item.path), Path.cwd()) if item.path is not None else msgspec.UNSET,
        # in a notebook: line is the .ipynb file's, these the cell's
        cell=EvidenceCell(item.cell, item.cell_line) if item.cell is not None else msgspec.UNSET,
    )


if __name__ == "__main__":
    print(msgspec.json.format(msgspec.json.encode(schema()), indent=2).decode("utf-8"))
