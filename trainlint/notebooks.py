"""Jupyter notebooks as one program: code cells in order, magics and shell lines kept out of the way.

A model built in cell 2 and trained in cell 5 is one flow, so the code cells are joined (each
after a marker comment) into one Python text that the engine checks like a script. Lines that are
not Python (`%time ...`, `!pip install ...`, a `%%bash` cell) become `pass` lines with the same
indentation, so every other line keeps its place. Findings are mapped back to the cell (for
people) and to the line and column inside the `.ipynb` file (for JSON and SARIF consumers). Fixes
are applied to the joined text and written back into the cells they touch, with the rest of the
file — outputs, metadata, other cells — left byte for byte as it was.
"""

from __future__ import annotations

import bisect
import json
import re
from dataclasses import dataclass

_MARKER = "# %% trainlint cell {}"
_PLACEHOLDER = "pass  # trainlint: not python {}"
# A magic (`%time`), a shell line (`!pip ...`), help (`df?`), or IPython's assignment of a shell or magic
# line's output (`VERSION = !curl ...`, `t = %timeit -o f()`): no Python text starts `NAME = !` or `NAME = %`.
_NOT_PYTHON = re.compile(r"^\s*(?:[!%]|\?|\w[\w.]*\?$|[\w.]+(?:\s*,\s*[\w.]+)*\s*=\s*[!%])")
# Cell magics whose body is still Python.
_PYTHON_CELL_MAGICS = {"%%time", "%%timeit", "%%capture", "%%prun"}
_JSON_SPACE = re.compile(r"[ \t\n\r]*")
_LINE_REFERENCE = re.compile(r"\bline (\d+)\b(?! of )")  # "line 5 of its file" is another file's


class NotebookError(ValueError):
    pass


@dataclass
class _Cell:
    number: int  # 1-based, among all cells, as editors number them
    lines: list[str]  # source lines without line breaks
    ends_with_newline: bool
    as_list: bool  # the file stores the source as a list of strings (else one string)
    span: tuple[int, int]  # the source value's [start, end) in the file's text
    element_starts: list[int]  # file offsets of each line's opening quote (list form), else [string start]
    first_line: int  # index of the cell's first line in the joined program (0-based)


@dataclass(frozen=True)
class CellPosition:
    cell: int
    line: int  # 1-based within the cell
    column: int


class Notebook:
    def __init__(self, raw: str) -> None:
        self.raw = raw
        try:
            document = json.loads(raw)
        except ValueError as error:
            raise NotebookError(f"not a notebook: {error}") from None
        except RecursionError:
            raise NotebookError("not a notebook: its JSON is nested too deeply to read") from None
        cells = _checked_cells(document)
        self.is_python = _language(document).lower() == "python"
        self.cells: list[_Cell] = []
        self._replaced: dict[int, str] = {}
        self._line_starts: list[int] | None = None
        source_spans = _source_spans(raw)
        sources: dict[int, tuple[str | list[str], tuple[int, int, list[int]]]] = {}
        for number, (cell, span) in enumerate(zip(cells, source_spans), start=1):
            if cell.get("cell_type") == "code" and span is not None:
                sources[number] = (cell["source"], span)
        texts = {number: "".join(source) if isinstance(source, list) else source for number, (source, _) in sources.items()}
        self._tag = _unused_tag([line for text in texts.values() for line in text.split("\n")])
        program: list[str] = []
        for number, (source, span) in sources.items():
            text = texts[number]
            lines = text.split("\n")
            ends_with_newline = text.endswith("\n")
            if ends_with_newline:
                lines.pop()
            program.append(_MARKER.format(number) + self._tag)
            first_line = len(program)
            program.extend(_python_lines(lines, self._replaced, self._tag))
            self.cells.append(_Cell(
                number, lines, ends_with_newline, isinstance(source, list), span[:2], span[2], first_line,
            ))
        self.text = "\n".join(program) + "\n"

    # ------------------------------------------------------------------ positions
    def cell_position(self, line: int, column: int) -> CellPosition | None:
        """A 1-based line of the joined program to (cell, line in the cell, column); None on a marker."""
        for cell in reversed(self.cells):
            if line - 1 >= cell.first_line:
                offset = line - 1 - cell.first_line
                if offset >= len(cell.lines):
                    return CellPosition(cell.number, len(cell.lines) or 1, column)
                return CellPosition(cell.number, offset + 1, column)
        return None

    def file_position(self, line: int, column: int) -> tuple[int, int]:
        """A program position to the 1-based line and column inside the .ipynb text."""
        position = self.cell_position(line, column)
        cell = next((c for c in self.cells if position is not None and c.number == position.cell), None)
        if cell is None or not cell.element_starts:
            return 1, 1
        assert position is not None, "a cell is found for a position only"
        if cell.as_list and position.line - 1 < len(cell.element_starts):
            start = cell.element_starts[position.line - 1]
            prefix = cell.lines[position.line - 1][: position.column - 1]
        else:  # one string holds every line: point into it
            start = cell.element_starts[0]
            before = "\n".join(cell.lines[: position.line - 1]) + ("\n" if position.line > 1 else "")
            prefix = before + cell.lines[position.line - 1][: position.column - 1] if cell.lines else ""
        offset = start + 1 + len(_escaped(prefix))
        if self._line_starts is None:  # once per notebook, not once per finding: notebooks can be large
            self._line_starts = [0] + [match.end() for match in re.finditer("\n", self.raw)]
        file_line = bisect.bisect_right(self._line_starts, offset)
        return file_line, offset - self._line_starts[file_line - 1] + 1

    def cell_sources(self) -> dict[int, str]:
        """Each code cell's source text, by cell number (for showing findings in the cell's own lines)."""
        return {cell.number: "\n".join(cell.lines) for cell in self.cells}

    def in_cells(self, text: str) -> str:
        """A message's references to lines of the joined program ("line 27") as lines of cells
        ("line 3 of cell 2"), so people see one numbering; quoted code (`...`) is left alone."""
        def renumber(match: re.Match[str]) -> str:
            position = self.cell_position(int(match.group(1)), 1)
            if position is None or int(match.group(1)) > self.text.count("\n"):
                return match.group()
            return f"line {position.line} of cell {position.cell}"

        pieces = text.split("`")
        return "`".join(_LINE_REFERENCE.sub(renumber, piece) if index % 2 == 0 else piece for index, piece in enumerate(pieces))

    # ------------------------------------------------------------------ writing fixes back
    def with_program(self, program: str) -> str:
        """The .ipynb text with the cells of ``program`` (this notebook's joined text, edited)
        written back. NotebookError when the result would not hold exactly those cells."""
        new_cells = self._cells_of(program)
        result = self.raw
        for cell in sorted(self.cells, key=lambda c: c.span[0], reverse=True):
            lines = new_cells.get(cell.number)
            if lines is None:
                raise NotebookError(f"cell {cell.number} lost its marker while fixing")
            if lines == cell.lines:
                continue
            start, end = cell.span
            result = result[:start] + _render(result[start:end], lines, cell, _newline_of(self.raw)) + result[end:]
        written = Notebook(result)
        if {cell.number: cell.lines for cell in written.cells} != {n: new_cells[n] for n in (c.number for c in self.cells)}:
            raise NotebookError("the fixed cells could not be written back exactly")
        return result

    def _cells_of(self, program: str) -> dict[int, list[str]]:
        """The lines of each cell in an edited joined program, magics and shell lines restored."""
        marker = re.compile(r"^# %% trainlint cell (\d+)" + re.escape(self._tag) + "$")
        placeholder = re.compile(r"^(\s*)pass  # trainlint: not python (\d+)" + re.escape(self._tag) + "$")
        new_cells: dict[int, list[str]] = {}
        current: list[str] | None = None
        for line in program.split("\n"):
            found = marker.match(line)
            if found:
                current = new_cells.setdefault(int(found.group(1)), [])
            elif current is not None:
                replaced = placeholder.match(line)
                current.append(self._replaced[int(replaced.group(2))] if replaced and int(replaced.group(2)) in self._replaced else line)
        for cell in self.cells:
            lines = new_cells.get(cell.number)
            while lines and lines[-1] == "" and len(lines) > len(cell.lines):
                lines.pop()  # the joined text's line break after each cell
        return new_cells


def _checked_cells(document: object) -> list[dict]:
    """The cells, after checking the types the reading below relies on; NotebookError names the key."""
    if not isinstance(document, dict) or not isinstance(document.get("cells"), list):
        raise NotebookError("not a notebook: no list of cells")
    metadata = document.get("metadata", {})
    if not isinstance(metadata, dict):
        raise NotebookError(f"metadata: expected an object, got {_json_kind(metadata)}")
    for key, field_name in (("language_info", "name"), ("kernelspec", "language")):
        table = metadata.get(key)
        if table is not None and not isinstance(table, dict):
            raise NotebookError(f"metadata.{key}: expected an object, got {_json_kind(table)}")
        value = (table or {}).get(field_name)
        if value is not None and not isinstance(value, str):
            raise NotebookError(f"metadata.{key}.{field_name}: expected a string, got {_json_kind(value)}")
    for index, cell in enumerate(document["cells"]):
        where = f"cells[{index}]"
        if not isinstance(cell, dict):
            raise NotebookError(f"{where}: expected an object, got {_json_kind(cell)}")
        if not isinstance(cell.get("cell_type"), str):
            raise NotebookError(f"{where}.cell_type: expected a string, got {_json_kind(cell.get('cell_type'))}")
        if "metadata" in cell and not isinstance(cell["metadata"], dict):
            raise NotebookError(f"{where}.metadata: expected an object, got {_json_kind(cell['metadata'])}")
        source = cell.get("source", "")
        if not isinstance(source, str) and not (isinstance(source, list) and all(isinstance(item, str) for item in source)):
            raise NotebookError(f"{where}.source: expected a string or a list of strings, got {_json_kind(source)}")
    return document["cells"]


def _language(document: dict) -> str:
    metadata = document.get("metadata", {})
    return (metadata.get("language_info") or {}).get("name") or (metadata.get("kernelspec") or {}).get("language") or "python"


def _json_kind(value: object) -> str:
    if isinstance(value, list) and value and not all(isinstance(item, str) for item in value):
        return "a list holding " + _json_kind(next(item for item in value if not isinstance(item, str)))
    kinds = {str: "a string", bool: "true or false", int: "a number", float: "a number", list: "a list", dict: "an object"}
    return "null" if value is None else kinds.get(type(value), type(value).__name__)


_MARKER_LIKE = re.compile(r"^(?:# %% trainlint cell|\s*pass  # trainlint: not python) \d+(?P<tag>.*)$")


def _unused_tag(lines: list[str]) -> str:
    """A suffix for the marker and placeholder lines that no line of the notebook already has
    (empty unless some cell holds a line that reads like one), so writing back never takes a
    line of the user's for a marker."""
    taken = {match.group("tag") for match in map(_MARKER_LIKE.match, lines) if match}
    return next(tag for tag in ("", *(f" ~{attempt}" for attempt in range(1, len(taken) + 2))) if tag not in taken)


def _python_lines(lines: list[str], replaced: dict[int, str], tag: str = "") -> list[str]:
    """A cell's lines with every non-Python line (magic, shell, help, a foreign cell magic's body) turned
    into a `pass` at the same indentation; ``replaced`` keeps the originals to write back."""
    skip_cell = bool(lines) and lines[0].startswith("%%") and lines[0].split()[0] not in _PYTHON_CELL_MAGICS
    result = []
    continued = False  # the line before was a shell or magic line ending in `\`: IPython joins this one to it
    indent = ""
    for index, line in enumerate(lines):
        if skip_cell or continued or (index == 0 and line.startswith("%%")) or _NOT_PYTHON.match(line):
            if not continued:  # a continuation line stands in at the indentation of the line it continues
                indent = "" if skip_cell else line[: len(line) - len(line.lstrip())]
            continued = line.rstrip("\r\n").endswith("\\")
            key = len(replaced)
            replaced[key] = line
            result.append(indent + _PLACEHOLDER.format(key) + tag)
        else:
            result.append(line)
    return result


def _escaped(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)[1:-1]


def _newline_of(raw: str) -> str:
    """The line break the file's JSON is laid out with (a notebook saved on Windows uses CRLF)."""
    return "\r\n" if "\r\n" in raw else "\n"


def _render(original: str, lines: list[str], cell: _Cell, newline: str) -> str:
    """The new source value in the layout of the original one (a list of lines, or one string)."""
    texts = [line + "\n" for line in lines[:-1]] + ([lines[-1] + ("\n" if cell.ends_with_newline else "")] if lines else [])
    if not cell.as_list:
        return json.dumps("".join(texts), ensure_ascii=False)
    if "\n" not in original:
        return "[" + ", ".join(json.dumps(text, ensure_ascii=False) for text in texts) + "]"
    element_indent = re.search(r"\[\s*?\n([ \t]*)", original)
    closing_indent = re.search(r"\n([ \t]*)\]$", original)
    indent = element_indent.group(1) if element_indent else " "
    closing = closing_indent.group(1) if closing_indent else ""
    body = f",{newline}".join(indent + json.dumps(text, ensure_ascii=False) for text in texts)
    return f"[{newline}{body}{newline}{closing}]"


def _source_spans(raw: str) -> list[tuple[int, int, list[int]] | None]:
    """For each cell, in order: the [start, end) of its own "source" value and where each line's
    string starts. Only the document's own "cells" and each cell's own "source" count, not keys of
    those names inside metadata or outputs (the text was checked by json.loads before)."""
    document = _members(raw, _skip_space(raw, 0))
    cells = document.get("cells")
    if cells is None:
        return []
    spans: list[tuple[int, int, list[int]] | None] = []
    for cell_start, _ in _elements(raw, cells[0]):
        source = _members(raw, cell_start).get("source")
        if source is None:
            spans.append(None)
            continue
        value_start, value_end = source
        starts = [start for start, _ in _elements(raw, value_start)] if raw[value_start] == "[" else [value_start]
        spans.append((value_start, value_end, starts))
    return spans


_DECODER = json.JSONDecoder()


def _members(raw: str, start: int) -> dict[str, tuple[int, int]]:
    """Each key of the JSON object at ``start`` with its value's [start, end); the last one of a
    repeated key, as json.loads keeps."""
    members: dict[str, tuple[int, int]] = {}
    position = _skip_space(raw, start + 1)
    while raw[position] != "}":
        key, position = _DECODER.raw_decode(raw, position)
        value_start = _skip_space(raw, _skip_space(raw, position) + 1)  # past the colon
        _, value_end = _DECODER.raw_decode(raw, value_start)
        members[key] = (value_start, value_end)
        position = _skip_space(raw, value_end)
        if raw[position] == ",":
            position = _skip_space(raw, position + 1)
    return members


def _elements(raw: str, start: int) -> list[tuple[int, int]]:
    """The [start, end) of each element of the JSON array at ``start``."""
    elements: list[tuple[int, int]] = []
    position = _skip_space(raw, start + 1)
    while raw[position] != "]":
        _, end = _DECODER.raw_decode(raw, position)
        elements.append((position, end))
        position = _skip_space(raw, end)
        if raw[position] == ",":
            position = _skip_space(raw, position + 1)
    return elements


def _skip_space(text: str, position: int) -> int:
    match = _JSON_SPACE.match(text, position)
    assert match is not None, "the pattern matches no space too"
    return match.end()


class CellProgram:
    """Code cells given as texts (the editor's cell documents) joined the way `Notebook` joins a file's."""

    def __init__(self, sources: list[str]) -> None:
        self.first_lines: list[int] = []
        self.line_counts: list[int] = []
        replaced: dict[int, str] = {}
        program: list[str] = []
        for number, source in enumerate(sources, start=1):
            lines = source.split("\n")
            if source.endswith("\n"):
                lines.pop()
            program.append(_MARKER.format(number))
            self.first_lines.append(len(program))
            self.line_counts.append(len(lines))
            program.extend(_python_lines(lines, replaced))
        self.text = "\n".join(program) + "\n"

    def locate(self, line: int) -> tuple[int, int] | None:
        """A 1-based program line to (cell index, 1-based line in that cell); None on a marker line."""
        for index in range(len(self.first_lines) - 1, -1, -1):
            offset = line - 1 - self.first_lines[index]
            if offset >= 0:
                return (index, offset + 1) if offset < max(self.line_counts[index], 1) else None
        return None
