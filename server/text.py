"""The server's copy of each document, kept equal to the editor's.

pygls' ``TextDocument`` splits its text with ``str.splitlines()``, which breaks at form feed,
``\\x0b``, ``\\x1c``-``\\x1e``, ``\\x85``, U+2028 and U+2029 as well as at LSP's line breaks; once a
document holds one of them, every incremental edit below it lands a line early and the copy
drifts from the editor's for good. ``LspTextDocument`` keeps LSP's line model (``\\n``, ``\\r\\n``,
``\\r``; ``trainlint.analysis.lines``) and applies an edit as one splice of the text at the two
offsets its range names, clamped as LSP says: a character past the end of its line means the
end of the line, a line past the last means the end of the document.

``LspWorkspace`` is pygls' workspace making these documents; the server installs it while it
handles ``initialize``, before any document arrives. A document's text is only what the client
sent, and a change to a document or notebook that is not open is logged and ignored.
"""

from __future__ import annotations

import bisect
import logging
from collections.abc import Sequence
from urllib.parse import unquote

from lsprotocol import types
from pygls.workspace import TextDocument, Workspace

from trainlint.analysis.lines import LINE_BREAK, line_starts

from .carry import TextChange

log = logging.getLogger("trainlint.server")


def units(text: str, encoding: str) -> int:
    """Length of ``text`` in the code units of a negotiated position encoding."""
    if encoding == types.PositionEncodingKind.Utf8:
        return len(text.encode("utf-8", "surrogatepass"))
    if encoding == types.PositionEncodingKind.Utf32:
        return len(text)
    return len(text) + sum(1 for char in text if ord(char) > 0xFFFF)


def column_at(line: str, character: int, encoding: str) -> int:
    """The code-point index in ``line`` (without its break) of an LSP character offset, clamped to the
    line's end; an offset inside a character's code units (half a surrogate pair) counts as after it."""
    if encoding == types.PositionEncodingKind.Utf32 or line.isascii():
        return min(character, len(line))
    count = 0
    for index, char in enumerate(line):
        if count >= character:
            return index
        count += units(char, encoding)
    return len(line)


def offset_at(text: str, starts: list[int], position: types.Position, encoding: str) -> int:
    """Index into ``text`` (whose ``line_starts`` are ``starts``) of an LSP position, clamped into the text."""
    if position.line >= len(starts):
        return len(text)
    start = starts[position.line]
    end = starts[position.line + 1] if position.line + 1 < len(starts) else len(text)
    line = LINE_BREAK.sub("", text[start:end], count=1) if end > start else ""
    return start + column_at(line, position.character, encoding)


class LspTextDocument(TextDocument):
    """A pygls document with LSP's line model; see the module's docstring.

    It also keeps the edits made to it (``changes_since``), so that the positions of an analysis
    of an earlier text can be carried to the text as it is now (``carry``).
    """

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.changes = 0  # edits applied so far: an analysis notes this count with the text it reads
        self._starts: tuple[str, list[int]] | None = None  # ``line_starts`` of a text, kept with it
        self._recorded: list[TextChange] = []  # the edits after the first ``_base`` ones
        self._base = 0
        self._uncarried = 0  # edits up to this count cannot be carried across (a whole-text change)

    def changes_since(self, count: int) -> list[TextChange] | None:
        """The edits made after the first ``count``; None when they cannot be carried (forgotten,
        a whole-text change, or one that joined a ``\r`` and a ``\n`` into one line break)."""
        if count < self._uncarried or count < self._base or count > self.changes:
            return None
        return self._recorded[count - self._base:]

    def forget_changes_before(self, count: int) -> None:
        """Nothing will carry positions from a text older than ``count`` edits."""
        if count > self._base:
            del self._recorded[: min(count, self.changes) - self._base]
            self._base = min(count, self.changes)

    def _apply_full_change(self, change: types.TextDocumentContentChangeEvent) -> None:
        super()._apply_full_change(change)
        self._record(None)

    @property
    def source(self) -> str:
        """The text the client sent; empty for a document it never sent. pygls reads such a
        document's text from disk, at the path in its URI: a notebook cell listed without its text
        (``vscode-notebook-cell:/x/train.ipynb#c3``) read the notebook's own file, or failed with
        FileNotFoundError and took the pull of every other cell with it."""
        return self._source or ""

    @property
    def lines(self) -> Sequence[str]:
        """The lines with their own line breaks, as pygls' API expects."""
        text = self.source
        starts = self.line_starts()
        return tuple(text[start:end] for start, end in zip(starts, [*starts[1:], len(text)]) if end > start)

    def line_starts(self) -> list[int]:
        """``line_starts`` of the text as it is now; kept from edit to edit (``_apply_incremental_change``)
        rather than found again in the whole text at each key: 3.5 ms of the event loop's time per key
        (holding the interpreter the analysis thread needs) on a 3,900-line document, under load."""
        text = self.source
        if self._starts is None or self._starts[0] is not text:
            self._starts = (text, line_starts(text))
        return self._starts[1]

    def _apply_incremental_change(self, change: types.TextDocumentContentChangePartial) -> None:
        text = self.source
        starts = self.line_starts()
        encoding = self.position_codec.encoding or types.PositionEncodingKind.Utf16
        start = offset_at(text, starts, change.range.start, encoding)
        end = offset_at(text, starts, change.range.end, encoding)
        if end < start:  # a reversed range: the span between the two positions
            start, end = end, start
        self._source = text[:start] + change.text + text[end:]
        self._starts = (self._source, starts_after_splice(self._source, starts, start, end, len(change.text)))
        before, after = text[start - 1: start], text[end: end + 1]
        joins_a_break = (before == "\r" and (change.text or after).startswith("\n")) or (
            (change.text or before).endswith("\r") and after == "\n"
        )
        self._record(None if joins_a_break else TextChange.of(_point(starts, start), _point(starts, end), change.text))

    def _record(self, change: TextChange | None) -> None:
        self.changes += 1
        if change is None:
            self._uncarried = self.changes
            self._recorded.clear()
            self._base = self.changes
        else:
            self._recorded.append(change)


def starts_after_splice(text: str, starts: list[int], start: int, end: int, inserted: int) -> list[int]:
    """``line_starts(text)`` of ``text``, which is a text whose line starts were ``starts`` with its
    ``[start, end)`` replaced by ``inserted`` characters: the starts before the edit's first line are
    kept, the lines from it to the first line that begins after ``end`` are found again, and the
    starts after those move by the change in length. Where a ``\r`` is near the edit (one that may
    join a ``\n`` into one line break, or part from one) the whole text is read again."""
    first = bisect.bisect_right(starts, start) - 1  # the line the edit starts in
    after = bisect.bisect_right(starts, end)  # the first line that starts after the edit's end
    shift = inserted - (end - start)
    window_start = starts[first]
    window_end = starts[after] + shift if after < len(starts) else len(text)
    if "\r" in text[max(window_start - 1, 0): window_end + 1]:
        return line_starts(text)
    found = [match.end() for match in LINE_BREAK.finditer(text, window_start, window_end)]
    return starts[: first + 1] + found + [offset + shift for offset in starts[after + 1:]]


def _point(starts: list[int], offset: int) -> tuple[int, int]:
    """(0-based line, code-point column) of an offset that is not inside a line break."""
    line = bisect.bisect_right(starts, offset) - 1
    return line, offset - starts[line]


class LspWorkspace(Workspace):
    """pygls' workspace, holding ``LspTextDocument`` documents."""

    def _create_text_document(
        self, doc_uri: str, source: str | None = None, version: int | None = None, language_id: str | None = None,
    ) -> TextDocument:
        return LspTextDocument(
            doc_uri, source=source, version=version, language_id=language_id,
            sync_kind=self._sync_kind, position_codec=self.position_codec,
        )

    def update_text_document(self, text_doc: types.VersionedTextDocumentIdentifier, change: types.TextDocumentContentChangeEvent) -> None:
        """pygls' edit of a document; a change to a document that is not open (the client's mistake)
        is logged and ignored: pygls failed on it, and the editor showed "Error in server: KeyError"."""
        if unquote(text_doc.uri) not in self.text_documents:
            log.warning("ignored a change to %s, which is not open", text_doc.uri)
            return
        super().update_text_document(text_doc, change)

    def update_notebook_document(self, params: types.DidChangeNotebookDocumentParams) -> None:
        """pygls' edit of a notebook; as ``update_text_document`` for a notebook that is not open."""
        if self.get_notebook_document(notebook_uri=params.notebook_document.uri) is None:
            log.warning("ignored a change to %s, which is not open", params.notebook_document.uri)
            return
        super().update_notebook_document(params)

    @classmethod
    def replacing(cls, workspace: Workspace) -> LspWorkspace:
        """A new, empty workspace with the root, sync kind, folders and position encoding of pygls' own."""
        return cls(workspace.root_uri, workspace._sync_kind, list(workspace.folders.values()), workspace.position_encoding)
