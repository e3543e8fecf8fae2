"""Carrying positions through edits (``server/carry.py``), on the server's own document
(``server/text.py`` records each edit): a span no edit reached into still holds the same text
in the new document; one an edit reached into is dropped; a whole-text change, or an edit that
joins a ``\\r`` and a ``\\n`` into one line break, carries nothing."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from lsprotocol import types

from trainlint.analysis.lines import line_starts
from trainlint.server.carry import TextChange, carry_line, carry_span
from trainlint.server.text import LspTextDocument

UTF32 = types.PositionEncodingKind.Utf32


def document(text: str) -> LspTextDocument:
    from pygls.workspace.position_codec import PositionCodec

    return LspTextDocument("file:///t.py", text, version=0, position_codec=PositionCodec(encoding=UTF32))


def point(text: str, offset: int) -> tuple[int, int]:
    starts = line_starts(text)
    line = max(i for i, start in enumerate(starts) if start <= offset)
    return line, offset - starts[line]


def offset(text: str, where: tuple[int, int]) -> int:
    return line_starts(text)[where[0]] + where[1]


def edit(doc: LspTextDocument, start: tuple[int, int], end: tuple[int, int], new_text: str) -> None:
    doc.apply_change(types.TextDocumentContentChangePartial(
        range=types.Range(start=types.Position(*start), end=types.Position(*end)), text=new_text,
    ))


PIECES = st.sampled_from(["a", "xy", " ", "\n", "\r\n", "\r", "loss", "é", "𝔸", "(", "\t"])
TEXTS = st.lists(PIECES, min_size=1, max_size=40).map("".join)


def positions_of(text: str) -> list[int]:
    """Offsets an editor can name: none between the \\r and \\n of a line break."""
    return [i for i in range(len(text) + 1) if not (0 < i < len(text) and text[i - 1] == "\r" and text[i] == "\n")]


@settings(max_examples=300, deadline=None)
@given(data=st.data(), text=TEXTS)
def test_a_span_no_edit_reached_into_holds_the_same_text_after_the_edits(data, text):
    doc = document(text)
    offsets = positions_of(text)
    spans = [tuple(sorted(data.draw(st.lists(st.sampled_from(offsets), min_size=2, max_size=2)))) for _ in range(4)]
    for _ in range(data.draw(st.integers(1, 4))):
        current = doc.source
        where = sorted(data.draw(st.lists(st.sampled_from(positions_of(current)), min_size=2, max_size=2)))
        edit(doc, point(current, where[0]), point(current, where[1]), data.draw(TEXTS | st.just("")))
    changes = doc.changes_since(0)
    if changes is None:  # a \r and a \n were joined into one break by some edit: nothing is carried
        return
    new = doc.source
    for start, end in spans:
        carried = carry_span(changes, (point(text, start), point(text, end)))
        if carried is not None:
            assert new[offset(new, carried[0]): offset(new, carried[1])] == text[start:end]


def test_a_finding_after_an_edit_moves_one_before_stays_one_edited_into_is_dropped():
    text = "a = 1\nloss.backward()\nopt.step()\n"
    doc = document(text)
    edit(doc, (0, 0), (0, 0), "import torch\n")  # a line above everything
    edit(doc, (2, 4), (2, 4), "x")  # inside `loss.backward()` (now line 2)
    changes = doc.changes_since(0)
    assert changes is not None
    assert carry_span(changes, ((2, 0), (2, 10))) == ((3, 0), (3, 10))  # `opt.step()` moved down one line
    assert carry_span(changes, ((1, 0), (1, 15))) is None  # `loss.backward()` was typed into
    assert carry_span(changes, ((0, 0), (0, 1))) == ((1, 0), (1, 1))  # an insertion where a span starts moves it
    assert carry_span(changes, ((0, 0), (0, 5))) == ((1, 0), (1, 5))


def test_a_line_survives_an_edit_inside_it_but_not_one_that_splits_it():
    inside = [TextChange.of((4, 3), (4, 3), "x")]
    assert carry_line(inside, 5, 20) == 5
    split = [TextChange.of((4, 3), (4, 3), "\n")]
    assert carry_line(split, 5, 20) is None
    assert carry_line([TextChange.of((4, 20), (4, 20), "\n    ")], 5, 20) == 5  # Enter at its end
    assert carry_line([TextChange.of((4, 0), (4, 0), "\n")], 5, 20) == 6  # Enter at its start


def test_whole_text_changes_and_joined_line_breaks_carry_nothing():
    doc = document("a\rb\n")
    edit(doc, (1, 0), (1, 0), "\n")  # "a\r" + "\n" + "b": the \r and the new \n become one break
    assert doc.changes_since(0) is None
    doc = document("a\nb\n")
    doc.apply_change(types.TextDocumentContentChangeWholeDocument(text="c\n"))
    assert doc.changes_since(0) is None
    edit(doc, (0, 0), (0, 0), "x")
    assert doc.changes_since(doc.changes - 1) is not None  # after it, edits carry again


@settings(max_examples=400, deadline=None)
@given(data=st.data(), text=TEXTS)
def test_the_line_starts_kept_from_edit_to_edit_are_the_texts_own(data, text):
    """The document keeps its line starts through each edit (``starts_after_splice``) instead of
    finding them in the whole text at every key; after any edits (line breaks typed, joined, split,
    ``\\r`` and ``\\r\\n`` among them, ranges anywhere, a range past the end) they are the text's."""
    doc = document(text)
    for _ in range(data.draw(st.integers(1, 6))):
        current = doc.source
        where = sorted(data.draw(st.lists(st.sampled_from(positions_of(current)), min_size=2, max_size=2)))
        start, end = point(current, where[0]), point(current, where[1])
        if data.draw(st.booleans()):
            end = (end[0] + data.draw(st.integers(0, 2)), end[1] + data.draw(st.integers(0, 3)))  # clamped as LSP says
        edit(doc, start, end, data.draw(TEXTS | st.just("")))
        assert doc.line_starts() == line_starts(doc.source)
        assert "".join(doc.lines) == doc.source


def test_an_edit_reads_the_lines_it_touched_not_the_whole_text(monkeypatch):
    """A key finds the line starts of the lines it touched, not of the whole text again (a ``\r``
    near the edit excepted)."""
    from trainlint.server import text as text_module

    doc = document("x = 1\n" * 500)
    doc.line_starts()
    whole_text_reads = []
    monkeypatch.setattr(text_module, "line_starts", lambda text: whole_text_reads.append(text) or line_starts(text))
    edit(doc, (250, 5), (250, 5), "0")
    edit(doc, (250, 6), (250, 6), "\n")
    edit(doc, (249, 0), (251, 0), "")
    assert whole_text_reads == []
    assert doc.line_starts() == line_starts(doc.source)
    edit(doc, (100, 5), (100, 5), "\r")
    assert len(whole_text_reads) == 1
    assert doc.line_starts() == line_starts(doc.source)
