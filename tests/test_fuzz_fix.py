"""Fuzzing `trainlint check --fix` with random training scripts (tests/fuzz_documents.py) stored as
a user's files are: UTF-8, UTF-8 with a byte-order mark, latin-1 with a coding cookie, a cookie
Python ignores (below a code line), with LF, CRLF or CR line ends. For each file:

- every round of fixes changes the text only inside the spans its edits name (placed by this
  test's own reckoning of lines and columns), and its result parses unless the text before it
  did not (then --fix keeps the text before);
- the file `--fix` writes is that text, in the file's own encoding, byte-order mark and line ends;
- a second `--fix` changes nothing (the fixes are idempotent).

The short run is part of `make test`; `TRAINLINT_FUZZ_EXAMPLES=20000` runs 5,000 files.
"""

from __future__ import annotations

import ast
import collections
import contextlib
import io

import pytest
from fuzz_documents import FIX_SETTINGS, scripts
from hypothesis import given
from hypothesis import strategies as st
from lsp_pipe import offset_at

from trainlint.analysis.engine import analyze_source, read_source
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
