"""Findings as GitHub Actions workflow commands, which become annotations on the pull request."""

from __future__ import annotations

import os
from pathlib import Path

from trainlint.analysis.findings import Finding, Severity
from trainlint.config import relative_posix

from . import Report, visible

_COMMANDS = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.NOTE: "notice"}


def render_github(report: Report, *, cwd: Path | None = None, root: Path | None = None) -> str:
    """``file=`` is relative to ``root`` (the repository's top folder, where GitHub looks for it),
    the findings' paths to ``cwd``; both default to the working directory."""
    cwd = Path(os.path.abspath(cwd or Path.cwd()))
    root = Path(os.path.abspath(root or cwd))
    return "".join(_command(finding, relative_posix(cwd / finding.path, root)) + "\n" for finding in report.findings)


def _command(finding: Finding, file: str) -> str:
    properties = {
        "file": file,
        "line": finding.line,
        "col": finding.column,
        "endLine": finding.end_line,
        "endColumn": finding.end_column,
        "title": f"{finding.code} {finding.name}",
    }
    rendered = ",".join(f"{key}={escape_property(str(value))}" for key, value in properties.items())
    return f"::{_COMMANDS[finding.severity]} {rendered}::{escape_data(finding.message)}"


def escape_data(text: str) -> str:
    """As the Actions toolkit escapes a command's message; other control characters (which the
    log would pass to the viewer) as ``\\x1b`` escapes, as the terminal shows them."""
    return visible(text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A"))


def escape_property(text: str) -> str:
    """As the Actions toolkit escapes a property value, where ':' and ',' are separators."""
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")
