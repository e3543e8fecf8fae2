"""One line model everywhere, LSP's: a line ends at \\n, \\r\\n or \\r, never at the other characters
str.splitlines() breaks at (form feed, \\x0b, \\x1c-\\x1e, \\x85, U+2028, U+2029)."""

from __future__ import annotations

from pathlib import Path

import pytest
from lsp_pipe import (
    ENCODINGS,
    RawServer,
    apply_edits,
    capabilities_for,
    client_lines,
    code_units,
    diagnostics_of,
    position_at,
    shown,
    text_digest,
)

from trainlint.analysis.engine import analyze_source
from trainlint.analysis.lines import line_starts, normalize_line_breaks, split_lines
from trainlint.fixing import apply_fixes, fix_until_stable

EXAMPLES = sorted((Path(__file__).resolve().parent.parent / "examples" / "buggy").glob("*.py"))
# Characters str.splitlines() takes for line breaks and Python, LSP and editors do not.
NOT_LINE_BREAKS = ["\x0c", "\x0b", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029"]


def with_character(text: str, character: str) -> str:
    """The script with the character in a comment line at the top and at the end of a line further down."""
    lines = text.split("\n")
    middle = len(lines) // 2
    while not lines[middle].strip() or lines[middle].rstrip().endswith("\\"):
        middle += 1
    lines[middle] += f"  # a{character}b"
    return f"# section{character}break\n" + "\n".join(lines)


def positions(findings) -> list[tuple]:
    return [(f.code, f.line, f.column, f.end_line, f.end_column, f.message, f.fix) for f in findings]


def test_the_line_model():
    text = "a\x0cb\r\nc\u2028d\re\nf\x85"
    assert split_lines(text) == ["a\x0cb", "c\u2028d", "e", "f\x85"]
    assert split_lines("a\n") == ["a", ""]
    assert line_starts(text) == [0, 5, 9, 11]
    assert normalize_line_breaks(text) == "a\x0cb\nc\u2028d\ne\nf\x85"


@pytest.mark.parametrize("character", NOT_LINE_BREAKS, ids=[f"U+{ord(c):04X}" for c in NOT_LINE_BREAKS])
def test_characters_that_are_not_line_breaks_move_no_finding(character):
    for example in EXAMPLES:
        text = example.read_text(encoding="utf-8")
        plain = analyze_source(with_character(text, " "), example.name)
        assert plain, example.name
        assert positions(analyze_source(with_character(text, character), example.name)) == positions(plain), example.name


@pytest.mark.parametrize("character", NOT_LINE_BREAKS, ids=[f"U+{ord(c):04X}" for c in NOT_LINE_BREAKS])
def test_fixes_land_where_they_would_without_the_character(character):
    for example in EXAMPLES:
        text = with_character(example.read_text(encoding="utf-8"), character)

        def analyze(source: str, name: str = example.name):
            return analyze_source(source, name)

        fixed = fix_until_stable(text, analyze).text
        plain = fix_until_stable(text.replace(character, " "), analyze).text
        assert fixed.replace(character, " ") == plain, example.name


@pytest.mark.parametrize("newline", ["\r\n", "\r"], ids=["CRLF", "CR"])
def test_crlf_and_cr_only_files_report_what_lf_files_do(newline):
    for example in EXAMPLES:
        text = example.read_text(encoding="utf-8")
        lf = analyze_source(text, example.name)
        other = analyze_source(text.replace("\n", newline), example.name)
        assert positions(other) == positions(lf), example.name
        fixed, applied = apply_fixes(text.replace("\n", newline), other)
        assert fixed == apply_fixes(text, lf)[0].replace("\n", newline)
        assert applied == apply_fixes(text, lf)[1]


def test_cr_only_files_keep_their_dataloader_findings():
    text = (EXAMPLES[0].parent / "image_classifier.py").read_text(encoding="utf-8")
    codes = {finding.code for finding in analyze_source(text.replace("\n", "\r"), "image_classifier.py")}
    assert "TL301" in codes


LOADER = """\
import torch
from torch.utils.data import DataLoader
# section{character}break
device = torch.device("cuda")
loader = DataLoader(
    dataset,
    batch_size=32,
    num_workers=4,
)
for x, y in loader:
    loss = model(x.to(device)).sum()
    loss.backward()
    print(loss.item())  # trainlint: ignore[TL302]
"""


@pytest.mark.parametrize("character", NOT_LINE_BREAKS, ids=[f"U+{ord(c):04X}" for c in NOT_LINE_BREAKS])
def test_fixes_that_read_lines_and_suppressions_below_the_character(character):
    text = LOADER.format(character=character)
    findings = analyze_source(text, "loader.py")
    assert ("TL301", 5) in [(f.code, f.line) for f in findings]
    assert not {"TL302", "TL001"} & {f.code for f in findings}  # the suppression on line 13 holds
    fixed, applied = apply_fixes(text, [f for f in findings if f.code == "TL301"])
    assert applied == 1
    assert "    batch_size=32,\n    num_workers=4,\n    pin_memory=True,\n)\n" in fixed


# ---------------------------------------------------------------------- the server's copy
@pytest.fixture(scope="module", params=ENCODINGS)
def server(request):
    server = RawServer()
    capabilities = server.initialize(capabilities_for(request.param))
    assert capabilities["positionEncoding"] == request.param
    server.encoding = request.param
    yield server
    server.close()


@pytest.mark.parametrize("character", NOT_LINE_BREAKS, ids=[f"U+{ord(c):04X}" for c in NOT_LINE_BREAKS])
def test_the_servers_copy_follows_edits_below_the_character(server, character, tmp_path):
    example = EXAMPLES[0].parent / "image_classifier.py"
    uri = (tmp_path / f"{ord(character):x}.py").as_uri()
    text = with_character(example.read_text(encoding="utf-8"), character)
    server.open(uri, text)
    for version in range(1, 4):
        # below the character: replace a line near the end and insert a retained loss further up
        lines = client_lines(text)
        target = len(lines) - 3 - version
        start = sum(len(line) + 1 for line in lines[:target])
        edits = [(start, start + len(lines[target]), lines[target] + "  # edited " + character)]
        edits.append((start, start, "    history.append(loss)\n" if version == 2 else ""))
        changes = []
        for begin, end, new in edits:
            changes.append({"range": {"start": position_at(text, begin, server.encoding), "end": position_at(text, end, server.encoding)}, "text": new})
            text = text[:begin] + new + text[end:]
        server.change(uri, version, changes)
        assert shown(server.diagnostics(uri)) == diagnostics_of(analyze_source(text, "x.py"), text, server.encoding)
        assert text_digest(text) in server.debug_info()
    edits = server.fix_all(uri)
    assert edits is not None
    fixed = apply_edits(text, edits, server.encoding)
    assert fixed == apply_fixes(text, analyze_source(text, "x.py"))[0]
    assert fixed.count(character) == text.count(character)
    server.close_document(uri)


@pytest.mark.parametrize("newline", ["\r\n", "\r"], ids=["CRLF", "CR"])
def test_the_servers_copy_of_crlf_and_cr_documents(server, newline, tmp_path):
    uri = (tmp_path / "crlf.py").as_uri()
    text = (EXAMPLES[0].parent / "image_classifier.py").read_text(encoding="utf-8").replace("\n", newline)
    server.open(uri, text)
    lines = client_lines(text)
    start = sum(len(line) + len(newline) for line in lines[:15])  # above `CIFAR_MEAN = ...`
    assert lines[15].startswith("CIFAR_MEAN")
    new = f"# inserted{newline}x = 1{newline}"
    server.change(uri, 1, [{"range": {"start": position_at(text, start, server.encoding), "end": position_at(text, start, server.encoding)}, "text": new}])
    text = text[:start] + new + text[start:]
    assert text_digest(text) in server.debug_info()
    expected = diagnostics_of(analyze_source(text, "x.py"), text, server.encoding)
    assert "TL301" in {code for _, code, _ in expected}
    assert shown(server.diagnostics(uri)) == expected
    fixed = apply_edits(text, server.fix_all(uri), server.encoding)
    assert fixed == apply_fixes(text, analyze_source(text, "x.py"))[0]
    server.close_document(uri)


def test_no_edit_is_built_from_a_copy_the_editor_no_longer_holds(tmp_path):
    # With run-on-save the findings are those of the saved text; the buffer has moved on since.
    server = RawServer()
    try:
        server.initialize(capabilities_for("utf-16"), options={"settings": {"run": "onSave"}})
        uri = (tmp_path / "train.py").as_uri()
        text = (EXAMPLES[0].parent / "image_classifier.py").read_text(encoding="utf-8")
        server.open(uri, text)
        assert {d["code"] for d in server.diagnostics(uri)} >= {"TL301"}
        assert server.fix_all(uri) is not None
        server.change(uri, 1, [{"text": "# unsaved work\n" + text}])
        assert {d["code"] for d in server.diagnostics(uri)} >= {"TL301"}  # still the saved text's findings
        assert server.fix_all(uri) is None
        everything = {"start": {"line": 0, "character": 0}, "end": {"line": 200, "character": 0}}
        assert not server.result("textDocument/codeAction", {"textDocument": {"uri": uri}, "range": everything, "context": {"diagnostics": []}})
    finally:
        server.close()


def test_a_leading_byte_order_mark_is_a_character_to_the_client(server, tmp_path):
    # Python and LibCST drop it; the editor's document (a client that keeps it) counts it.
    uri = (tmp_path / "bom.py").as_uri()
    server.open(uri, "\ufeffx = (1,\n")
    [diagnostic] = server.diagnostics(uri)
    expected = {"line": 0, "character": code_units("\ufeffx = ", server.encoding)}  # at the bracket never closed
    assert (diagnostic["code"], diagnostic["range"]["start"]) == ("TL000", expected)
    server.close_document(uri)
