"""Findings as one JSON document (``--format json``); the shape is a public contract, version 1."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec

from trainlint.analysis.findings import Finding, Fix, Severity
from trainlint.config import relative_posix

from . import Report

VERSION = 1


def render_json(report: Report) -> str:
    document = {
        "version": VERSION,
        "findings": [_finding(finding) for finding in report.findings],
        "summary": {
            "files": report.files,
            "errors": report.count(Severity.ERROR),
            "warnings": report.count(Severity.WARNING),
            "notes": report.count(Severity.NOTE),
            "fixable": report.fixable,
        },
    }
    return msgspec.json.format(msgspec.json.encode(document), indent=2).decode("utf-8") + "\n"


def _finding(finding: Finding) -> dict[str, Any]:
    entry = _fields(finding)
    if finding.cell is not None:  # a notebook: positions are in the .ipynb file; these say where in the cell
        entry["cell"] = {
            "number": finding.cell, "line": finding.cell_line, "column": finding.cell_column,
            "end_line": finding.cell_end_line, "end_column": finding.cell_end_column,
        }
    return entry


def _fields(finding: Finding) -> dict[str, Any]:
    return {
        "path": finding.path,
        "line": finding.line,
        "column": finding.column,
        "end_line": finding.end_line,
        "end_column": finding.end_column,
        "code": finding.code,
        "name": finding.name,
        "severity": finding.severity.label,
        "message": finding.message,
        "evidence": [_evidence(item) for item in finding.evidence],
        "help": finding.help,
        "fix": _fix(finding.fix),
    }


def _fix(fix: Fix | None) -> dict[str, Any] | None:
    if fix is None:
        return None
    return {
        "description": fix.description,
        "applicability": "safe" if fix.safe else "unsafe",
        "edits": [
            {
                "line": edit.line,
                "column": edit.column,
                "end_line": edit.end_line,
                "end_column": edit.end_column,
                "new_text": edit.new_text,
            }
            for edit in fix.edits
        ],
    }


def _evidence(item) -> dict[str, Any]:
    """Evidence in another file of the workspace carries its path (relative to the working directory)."""
    entry: dict[str, Any] = {"line": item.line, "note": item.note}
    if item.path is not None:
        entry["path"] = relative_posix(Path(item.path), Path.cwd())
    if item.cell is not None:  # in a notebook: line is the .ipynb file's, these the cell's
        entry["cell"] = {"number": item.cell, "line": item.cell_line}
    return entry
