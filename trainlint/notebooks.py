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

import json
import re
from dataclasses import dataclass

_MARKER = "# %% trainlint cell {}"
_MARKER_LINE = re.compile(r"^# %% trainlint cell (\d+)$")
_PLACEHOLDER = "pass  # trainlint: not python {}"
_PLACEHOLDER_LINE = re.compile(r"^(\s*)pass  # trainlint: not python (\d+)$")
_NOT_PYTHON = re.compile(r"^\s*(?:[!%]|\?|\w[\w.]*\?$)")
# Cell magics whose body is still Python.
_PYTHON_CELL_MAGICS = {"%%time", "%%timeit", "%%capture", "%%prun"}


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
        if not isinstance(document, dict) or not isinstance(document.get("cells"), list):
            raise NotebookError("not a notebook: no list of cells")
        language = (document.get("metadata", {}).get("language_info", {}) or {}).get("name") or \
            (document.get("metadata", {}).get("kernelspec", {}) or {}).get("language") or "python"
        self.is_python = str(language).lower() == "python"
        self.cells: list[_Cell] = []
        self._replaced: dict[int, str] = {}
        program: list[str] = []
        source_spans = _source_spans(raw, len(document["cells"]))
        for number, (cell, span) in enumerate(zip(document["cells"], source_spans), start=1):
            if cell.get("cell_type") != "code" or span is None:
                continue
            source = cell.get("source", "")
            text = "".join(source) if isinstance(source, list) else str(source)
            lines = text.split("\n")
            ends_with_newline = text.endswith("\n")
            if ends_with_newline:
                lines.pop()
            program.append(_MARKER.format(number))
            first_line = len(program)
            program.extend(_python_lines(lines, self._replaced))
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
        if cell.as_list and position.line - 1 < len(cell.element_starts):
            start = cell.element_starts[position.line - 1]
            prefix = cell.lines[position.line - 1][: position.column - 1]
        else:  # one string holds every line: point into it
            start = cell.element_starts[0]
            before = "\n".join(cell.lines[: position.line - 1]) + ("\n" if position.line > 1 else "")
            prefix = before + cell.lines[position.line - 1][: position.column - 1] if cell.lines else ""
        offset = start + 1 + len(_escaped(prefix))
        file_line = self.raw.count("\n", 0, offset) + 1
        return file_line, offset - (self.raw.rfind("\n", 0, offset) + 1) + 1

    # ------------------------------------------------------------------ writing fixes back
    def with_program(self, program: str) -> str:
        """The .ipynb text with the cells of ``program`` (this notebook's joined text, edited) written back."""
        new_cells: dict[int, list[str]] = {}
        current: list[str] | None = None
        for line in program.split("\n"):
            marker = _MARKER_LINE.match(line)
            if marker:
                current = new_cells.setdefault(int(marker.group(1)), [])
            elif current is not None:
                placeholder = _PLACEHOLDER_LINE.match(line)
                current.append(self._replaced[int(placeholder.group(2))] if placeholder else line)
        result = self.raw
        for cell in sorted(self.cells, key=lambda c: c.span[0], reverse=True):
            lines = new_cells.get(cell.number)
            if lines is None:
                raise NotebookError(f"cell {cell.number} lost its marker while fixing")
            while lines and lines[-1] == "" and len(lines) > len(cell.lines):
                lines.pop()  # the joined text's line break after each cell
            if lines == cell.lines:
                continue
            start, end = cell.span
            result = result[:start] + _render(result[start:end], lines, cell) + result[end:]
        return result


def _python_lines(lines: list[str], replaced: dict[int, str]) -> list[str]:
    """A cell's lines with every non-Python line (magic, shell, help, a foreign cell magic's body) turned
    into a `pass` at the same indentation; ``replaced`` keeps the originals to write back."""
    skip_cell = bool(lines) and lines[0].startswith("%%") and lines[0].split()[0] not in _PYTHON_CELL_MAGICS
    result = []
    for index, line in enumerate(lines):
        if skip_cell or (index == 0 and line.startswith("%%")) or _NOT_PYTHON.match(line):
            key = len(replaced)
            replaced[key] = line
            indent = "" if skip_cell else line[: len(line) - len(line.lstrip())]
            result.append(indent + _PLACEHOLDER.format(key))
        else:
            result.append(line)
    return result


def _escaped(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)[1:-1]


def _render(original: str, lines: list[str], cell: _Cell) -> str:
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
    body = ",\n".join(indent + json.dumps(text, ensure_ascii=False) for text in texts)
    return f"[\n{body}\n{closing}]"


def _source_spans(raw: str, count: int) -> list[tuple[int, int, list[int]] | None]:
    """For each cell, in order: the [start, end) of its "source" value and where each line's string starts."""
    decoder = json.JSONDecoder()
    spans: list[tuple[int, int, list[int]] | None] = []
    cells_key = re.search(r'"cells"\s*:\s*\[', raw)
    position = cells_key.end() if cells_key else 0
    for _ in range(count):
        cell_start = _skip(raw, position, ",")
        try:
            _, cell_end = decoder.raw_decode(raw, cell_start)
        except ValueError:
            spans.append(None)
            continue
        key = re.compile(r'"source"\s*:\s*').search(raw, cell_start, cell_end)
        if key is None:
            spans.append(None)
        else:
            value_start = key.end()
            _, value_end = decoder.raw_decode(raw, value_start)
            starts = []
            if raw[value_start] == "[":
                cursor = value_start + 1
                while True:
                    cursor = _skip(raw, cursor, ",")
                    if raw[cursor] == "]":
                        break
                    starts.append(cursor)
                    _, cursor = decoder.raw_decode(raw, cursor)
            else:
                starts.append(value_start)
            spans.append((value_start, value_end, starts))
        position = cell_end
    return spans


def _skip(text: str, position: int, separators: str) -> int:
    while position < len(text) and (text[position].isspace() or text[position] in separators):
        position += 1
    return position


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
