"""Findings as SARIF 2.1.0, the format code-scanning services (GitHub and others) ingest."""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

import msgspec

import trainlint
from trainlint.analysis.engine_codes import ENGINE_CODES
from trainlint.analysis.findings import Finding, Severity, TextEdit
from trainlint.analysis.rules.base import Rule
from trainlint.config import relative_posix

from . import Report

SCHEMA_URI = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
INFORMATION_URI = "https://trainlint.dev"
SOURCE_ROOT = "%SRCROOT%"
FINGERPRINT_KEY = "trainlintFingerprint/v1"
_LEVELS = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.NOTE: "note"}
_WHITESPACE = re.compile(r"\s+")


def render_sarif(report: Report, rules: Sequence[type[Rule]], *, cwd: Path | None = None, root: Path | None = None) -> str:
    """``cwd``: what the findings' relative paths are relative to; ``root``: what the URIs are
    relative to (%SRCROOT%), the repository's top folder, as code scanning expects (default cwd)."""
    cwd = Path(os.path.abspath(cwd or Path.cwd()))
    root = Path(os.path.abspath(root or cwd))
    descriptors = [_rule_descriptor(rule) for rule in rules]
    descriptors += [_engine_descriptor(engine.code, engine.name) for _, engine in sorted(ENGINE_CODES.items())]
    index = {descriptor["id"]: position for position, descriptor in enumerate(descriptors)}
    for finding in report.findings:
        if finding.code not in index:
            index[finding.code] = len(descriptors)
            descriptors.append(_engine_descriptor(finding.code, finding.name))
    fingerprints = _Fingerprints(report)
    log = {
        "$schema": SCHEMA_URI,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "trainlint",
                        "version": trainlint.__version__,
                        "informationUri": INFORMATION_URI,
                        "rules": descriptors,
                    }
                },
                "originalUriBaseIds": {SOURCE_ROOT: {"uri": root.as_uri() + "/"}},
                "columnKind": "unicodeCodePoints",
                "results": [
                    _result(finding, index[finding.code], cwd, root, fingerprints)
                    for finding in report.findings
                ],
            }
        ],
    }
    return msgspec.json.format(msgspec.json.encode(log), indent=2).decode("utf-8") + "\n"


def _rule_descriptor(rule: type[Rule]) -> dict[str, Any]:
    text = rule.explain()
    descriptor: dict[str, Any] = {
        "id": rule.code,
        "name": rule.name,
        "shortDescription": {"text": rule.summary()},
        "fullDescription": {"text": text},
        "help": {"text": text, "markdown": text},
        "helpUri": rule.help_uri(),
        "defaultConfiguration": {"level": _LEVELS[rule.severity]},
        "properties": {"fixable": rule.fixable},
    }
    if descriptor["helpUri"] is None:  # a plugin rule that names no documentation page
        del descriptor["helpUri"]
    return descriptor


def _engine_descriptor(code: str, name: str) -> dict[str, Any]:
    """Codes the engine itself reports (unparsable file, unused suppression…), not a rule's."""
    return {"id": code, "name": name, "shortDescription": {"text": name.replace("-", " ").capitalize()}}


def _artifact(path: str, cwd: Path, root: Path) -> dict[str, str]:
    relative = relative_posix(cwd / path, root)  # finding paths are relative to cwd, or absolute
    if os.path.isabs(relative):
        return {"uri": Path(relative).as_uri()}
    return {"uri": quote(relative), "uriBaseId": SOURCE_ROOT}


def _region(line: int, column: int, end_line: int, end_column: int) -> dict[str, int]:
    return {"startLine": line, "startColumn": column, "endLine": end_line, "endColumn": end_column}


def _result(finding: Finding, rule_index: int, cwd: Path, root: Path, fingerprints: _Fingerprints) -> dict[str, Any]:
    artifact = _artifact(finding.path, cwd, root)
    result: dict[str, Any] = {
        "ruleId": finding.code,
        "ruleIndex": rule_index,
        "level": _LEVELS[finding.severity],
        "message": {"text": finding.message},
        "locations": [
            {
                "physicalLocation": {
                    "artifactLocation": artifact,
                    "region": _region(finding.line, finding.column, finding.end_line, finding.end_column),
                }
            }
        ],
        "partialFingerprints": {FINGERPRINT_KEY: fingerprints.next(finding, artifact["uri"])},
    }
    if finding.evidence:
        result["relatedLocations"] = [
            {
                "id": number,
                "physicalLocation": {
                    "artifactLocation": _artifact(item.path, cwd, root) if item.path else artifact,
                    "region": {"startLine": item.line},
                },
                "message": {"text": item.note},
            }
            for number, item in enumerate(finding.evidence, start=1)
        ]
    if finding.fix is not None and finding.fix.edits:  # a notebook's fixes are program edits: --fix applies them
        result["fixes"] = [
            {
                "description": {"text": finding.fix.description},
                "properties": {"applicability": "safe" if finding.fix.safe else "unsafe"},
                "artifactChanges": [
                    {"artifactLocation": artifact, "replacements": [_replacement(edit) for edit in finding.fix.edits]}
                ],
            }
        ]
    return result


def _replacement(edit: TextEdit) -> dict[str, Any]:
    return {
        "deletedRegion": _region(edit.line, edit.column, edit.end_line, edit.end_column),
        "insertedContent": {"text": edit.new_text},
    }


class _Fingerprints:
    """Same finding, same fingerprint, across runs: hashed from what survives unrelated edits
    (the file's URI, code, the flagged line's text without spacing), not from line numbers. Repeats of
    one line text in one file are told apart by their order."""

    def __init__(self, report: Report) -> None:
        self._report = report
        self._seen: dict[str, int] = {}

    def next(self, finding: Finding, uri: str) -> str:
        line = finding.cell_line if finding.cell is not None else finding.line
        line_text = _WHITESPACE.sub(" ", self._report.code_line(finding, line or 1) or "").strip()
        key = "\0".join((uri, finding.code, line_text))
        digest = hashlib.sha256(key.encode("utf-8")).hexdigest()[:32]
        occurrence = self._seen.get(digest, 0) + 1
        self._seen[digest] = occurrence
        return f"{digest}:{occurrence}"
