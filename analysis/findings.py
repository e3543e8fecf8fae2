"""The data every part of trainlint exchanges: findings, evidence, fixes.

Positions are 1-based lines and 1-based columns counted in code points, the way
LibCST and editors' status bars count; the language server converts columns to
the client's encoding.
"""

from __future__ import annotations

import enum

import msgspec


class Severity(enum.IntEnum):
    """What happens if the code ships as it is."""

    NOTE = 1  # correct but untuned
    WARNING = 2  # a real defect with bounded cost
    ERROR = 3  # a wrong result or a dead run

    @property
    def label(self) -> str:
        return self.name.lower()

    @classmethod
    def parse(cls, text: str) -> Severity:
        try:
            return cls[text.strip().upper()]
        except KeyError:
            raise ValueError(f"unknown severity {text!r} (expected error, warning or note)") from None


class TextEdit(msgspec.Struct, frozen=True):
    """Replace the text between two positions (end exclusive) with new_text."""

    line: int
    column: int
    end_line: int
    end_column: int
    new_text: str


class Fix(msgspec.Struct, frozen=True):
    """Edits that resolve one finding.

    A safe fix (``--fix``, the editor's preferred quick fix, fix-all) is certain to leave code that
    runs and changes only what the finding is about: ``.detach()`` on a value known to be one
    tensor. An unsafe fix may break the code or change more than that (``.detach()`` on a model
    output that may be a tuple, `.item()` on a loss whose reduction is unknown); it is applied only
    on request (``--unsafe-fixes``, a quick fix that is not preferred).
    """

    description: str
    edits: tuple[TextEdit, ...]
    safe: bool = True


class Evidence(msgspec.Struct, frozen=True):
    line: int
    note: str
    path: str | None = None  # another file of the workspace; None: the finding's own file
    # In a notebook: the cell and the line inside it (``line`` is then a line of the .ipynb file).
    cell: int | None = None
    cell_line: int | None = None


class Finding(msgspec.Struct, frozen=True):
    path: str
    line: int
    column: int
    end_line: int
    end_column: int
    code: str
    name: str
    severity: Severity
    message: str
    evidence: tuple[Evidence, ...] = ()
    help: str = ""
    fix: Fix | None = None
    # In a notebook: the cell (1-based, as editors number them) and the line and column inside it;
    # line and column above are then positions in the .ipynb file.
    cell: int | None = None
    cell_line: int | None = None
    cell_column: int | None = None
    cell_end_line: int | None = None  # where the span ends, in the same cell
    cell_end_column: int | None = None

    def sort_key(self) -> tuple:
        return (self.path, self.line, self.column, self.code)
