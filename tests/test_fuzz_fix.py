"""Fuzzing `trainlint check --fix` with random training scripts (tests/fuzz_documents.py) stored as
a user's files are: UTF-8, UTF-8 with a byte-order mark, latin-1 with a coding cookie, a cookie
Python ignores (below a code line), with LF, CRLF or CR line ends. For each file:

- every round of fixes changes the text only inside the spans its edits name (placed by this
  test's own reckoning of lines and columns), and its result parses unless the text before it
  did not (then --fix keeps the text before);
- the file `--fix` writes is that text, in the file's own encoding, byte-order mark and line ends;
- a second `--fix` changes nothing (the fixes are idempotent).

And every rule's own fixable examples dressed in what Python reads as the same program (form
feeds in and after the indentation, a line holding only a backslash before a statement, tabs,
line ends mixed line by line): no round is rejected, the lines a fix adds end as the lines it
touches, a second run changes nothing, and the result is the program the plain example's fix gives.

The short run is part of `make test`; `TRAINLINT_FUZZ_EXAMPLES=20000` runs 5,000 files.
"""

from __future__ import annotations

import ast
import bisect
import collections
import contextlib
import io

import pytest
from fuzz_documents import FIX_SETTINGS, dressed, scripts
from hypothesis import given
from hypothesis import strategies as st
from lsp_pipe import offset_at

from trainlint.analysis.engine import analyze_source, read_source
from trainlint.analysis.lines import LINE_BREAK, line_starts
from trainlint.analysis.registry import all_rules
from trainlint.analysis.rules.base import Fires
from trainlint.cli import main
from trainlint.fixing import apply_fixes, fix_until_stable, parses

COUNTS: collections.Counter = collections.Counter()
# How a file is stored: (encoding to write with, bytes before the text, a cookie line, or None).
STORAGE = {
    "utf-8": ("utf-8", b"", None),
    "utf-8 with BOM": ("utf-8", b"\xef\xbb\xbf", None),
    "latin-1 with a cookie": ("latin-1", b"", "# -*- coding: latin-1 -*-"),
    "a cookie below code": ("utf-8", b"", "import os\n# -*- coding: latin-1 -*-"),
}


@pytest.fixture(scope="module", autouse=True)
def summary():
    yield
    print(f"\n--fix fuzz: {dict(COUNTS)}")


def _offset(text: str, line: int, column: int) -> int:
    return offset_at(text, {"line": line - 1, "character": column - 1}, "utf-32")  # code points


def _spans(text: str, findings) -> list[tuple[int, int]]:
    """The spans the fixes' edits name, merged."""
    spans = sorted(
        (_offset(text, edit.line, edit.column), _offset(text, edit.end_line, edit.end_column))
        for finding in findings if finding.fix is not None for edit in finding.fix.edits
    )
    merged: list[list[int]] = []
    for start, end in spans:
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return [(start, end) for start, end in merged]


def _changed_only_inside(old: str, new: str, spans: list[tuple[int, int]]) -> bool:
    """Whether ``new`` keeps, in order, every piece of ``old`` outside the spans (the first and last
    where they were)."""
    gaps, position = [], 0
    for start, end in spans:
        gaps.append(old[position:start])
        position = end
    gaps.append(old[position:])
    if not new.startswith(gaps[0]) or not new.endswith(gaps[-1]):
        return False
    cursor = len(gaps[0])
    for gap in gaps[1:-1]:
        found = new.find(gap, cursor)
        if found < 0:
            return False
        cursor = found + len(gap)
    return cursor <= len(new) - len(gaps[-1])


def _store(text: str, storage: str, newline: str) -> bytes:
    encoding, prefix, cookie = STORAGE[storage]
    if cookie is not None:
        text = cookie + "\n" + text
    text = text.replace("\n", newline)
    if encoding == "latin-1":
        text = text.encode("latin-1", "replace").decode("latin-1")  # what latin-1 can hold
    return prefix + text.encode(encoding)


def _fix(path) -> int:
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        return main(["check", "--fix", "--jobs", "1", str(path)])


@FIX_SETTINGS
@given(text=scripts(), storage=st.sampled_from(sorted(STORAGE)), newline=st.sampled_from(["\n", "\r\n", "\r"]))
def test_fix_changes_only_what_its_edits_name_and_keeps_the_file_as_it_was(tmp_path_factory, text, storage, newline):
    COUNTS["files"] += 1
    data = _store(text, storage, newline)
    original, encoding = read_source(data)

    def analyze(source: str):
        return analyze_source(source, "train.py")

    # Round by round, as --fix does: each round stays inside its edits' spans and parses.
    current, findings = original, analyze(original)
    for _ in range(10):
        fixed, applied = apply_fixes(current, findings)
        if not applied or fixed == current:
            break
        assert _changed_only_inside(current, fixed, _spans(current, findings)), "a fix changed text outside its edits"
        if not parses(fixed):
            assert not parses(current), "fixes broke a file that parsed"
            COUNTS["rounds rejected (the file did not parse before either)"] += 1
            break
        COUNTS["rounds"] += 1
        current, findings = fixed, analyze(fixed)
    expected = fix_until_stable(original, analyze).text
    assert current == expected  # the rounds checked above are those --fix runs

    path = tmp_path_factory.mktemp("fix") / "train.py"
    path.write_bytes(data)
    assert _fix(path) in (0, 1)
    written = path.read_bytes()
    if expected == original:
        assert written == data, "--fix rewrote a file it had nothing to fix in"
        return
    COUNTS["files fixed"] += 1
    assert written == expected.encode(encoding), "the file --fix wrote is not the fixed text in the file's encoding"
    assert parses(expected)
    try:
        ast.parse(original)
    except SyntaxError:
        pass
    else:
        ast.parse(expected)  # Python too reads what it read before
    others = expected.replace(newline, "")
    assert "\r" not in others and "\n" not in others, "line ends not the file's own"
    assert _fix(path) in (0, 1)
    assert path.read_bytes() == written, "a second --fix changed the file again"


# Every rule's own examples that have a fix (without other files or settings).
FIXABLE_EXAMPLES = [
    example.code for rule in all_rules() for example in rule.MUST_FIRE
    if isinstance(example, Fires) and example.fixed is not None and not example.files and not example.settings
]


def _replacements(old: str, new: str, spans: list[tuple[int, int]]) -> list[str]:
    """The text that took each span's place in ``new`` (where ``_changed_only_inside`` holds)."""
    gaps, position = [], 0
    for start, end in spans:
        gaps.append(old[position:start])
        position = end
    gaps.append(old[position:])
    replacements, cursor = [], len(gaps[0])
    for gap in gaps[1:-1]:
        found = new.find(gap, cursor)
        replacements.append(new[cursor:found])
        cursor = found + len(gap)
    replacements.append(new[cursor : len(new) - len(gaps[-1])])
    return replacements


def _breaks_around(text: str, start: int, end: int) -> set[str]:
    """The line breaks of the lines a span touches, and of the line above it (a last line has none)."""
    starts = line_starts(text)
    first, last = bisect.bisect_right(starts, start) - 1, bisect.bisect_right(starts, end) - 1
    return set(LINE_BREAK.findall(text, starts[max(0, first - 1)], starts[last + 1] if last + 1 < len(starts) else len(text)))


@FIX_SETTINGS
@given(data=st.data(), example=st.sampled_from(FIXABLE_EXAMPLES))
def test_fix_on_odd_whitespace_lands_once_and_does_what_it_does_on_plain_text(data, example):
    """The same program dressed in form feeds, backslash-only lines, tabs and mixed line ends
    (fuzz_documents.dressed): each round changes only its spans, ending the lines it adds as the
    lines it touches; no round is rejected; a second run changes nothing; and where the dressed
    text is offered the plain text's fixes, the result is the plain result's program."""
    text = data.draw(dressed(example))
    try:
        same = ast.dump(ast.parse(text)) == ast.dump(ast.parse(example))
    except SyntaxError:
        same = False
    if not same or not parses(text):
        COUNTS["dressed: read otherwise by Python or LibCST"] += 1
        return
    COUNTS["dressed"] += 1

    def analyze(source: str):
        return analyze_source(source, "train.py")

    current, findings = text, analyze(text)
    offered = collections.Counter(f.code for f in findings if f.fix is not None)
    for _ in range(10):
        fixed, applied = apply_fixes(current, findings, unsafe=True)
        if not applied or fixed == current:
            break
        spans = _spans(current, findings)
        assert _changed_only_inside(current, fixed, spans), "a fix changed text outside its edits"
        for (start, end), replacement in zip(spans, _replacements(current, fixed, spans)):
            added = set(LINE_BREAK.findall(replacement))
            assert added <= _breaks_around(current, start, end), f"line ends {added} not those around the fix"
        assert parses(fixed), "a fix broke a file that parsed"
        current, findings = fixed, analyze(fixed)
    outcome = fix_until_stable(text, analyze, unsafe=True)
    assert outcome.text == current and not outcome.rejected
    assert fix_until_stable(current, analyze, unsafe=True).text == current, "a second --fix changed the text again"
    plain_findings = analyze_source(example, "train.py")
    if offered == collections.Counter(f.code for f in plain_findings if f.fix is not None):
        COUNTS["dressed: same fixes as plain"] += 1
        plain = fix_until_stable(example, analyze, findings=plain_findings, unsafe=True).text
        assert ast.dump(ast.parse(current)) == ast.dump(ast.parse(plain)), "the fix did not do what it does on plain text"
