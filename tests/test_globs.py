"""Gitignore-style patterns (trainlint.globs): what they match, and that no pattern and no path
makes matching take long."""

from __future__ import annotations

import gc
import time

import pytest

from trainlint.globs import MAX_PATTERN_CHARS, GlobError, compile_patterns

# (patterns, path, verdict): True excluded, False taken back by a `!` pattern, None not matched.
# A folder's path ends in a slash.
CASES = [
    (["*.py"], "train.py", True),
    (["*.py"], "src/deep/train.py", True),  # no slash in the pattern: at any depth
    (["*.py"], "train.pyc", None),
    (["*.py[cod]"], "src/m.pyc", True),
    (["/train.py"], "src/train.py", None),  # a leading slash anchors
    (["src/*.py"], "src/a.py", True),
    (["src/*.py"], "src/a/b.py", None),  # `*` stays in its segment
    (["src/*.py"], "lib/src/a.py", None),  # a slash inside anchors too
    (["build/"], "build/", True),
    (["build/"], "build", None),  # a file named build: `dir/` names folders only
    (["build/"], "build/lib/x.py", True),  # what lies inside
    (["data/**"], "data/a/b.csv", True),
    (["a/**/b"], "a/b", True),  # `**` is any number of folders, none included
    (["a/**/b"], "a/x/y/b", True),
    (["a/**/b"], "a/x/y/c", None),
    (["**/logs"], "x/y/logs/", True),
    (["*"], "anything/at/all.py", True),
    (["*/"], "top.py", None),
    (["*/"], "src/", True),
    (["x?z"], "xyz", True),
    (["x?z"], "x/z", None),  # `?` is no slash
    (["a[!b]c"], "a/c", None),  # nor is a bracket
    (["a[!b]c"], "axc", True),
    (["[a-c]*"], "beta.py", True),
    (["\\*.py"], "*.py", True),  # an escaped star is a star
    (["\\*.py"], "a.py", None),
    (["\\!keep"], "!keep", True),
    (["\\#notes"], "#notes", True),
    (["# a comment", ""], "# a comment", None),
    (["trailing   "], "trailing", True),  # trailing blanks are no part of the pattern
    (["space\\ "], "space ", True),
    (["tmp_[abc"], "tmp_[abc", None),  # a bracket that never closes: git drops the pattern
    (["*.py", "!keep.py"], "keep.py", False),
    (["*.py", "!keep.py"], "other.py", True),
    (["!keep.py", "*.py"], "keep.py", True),  # the last one that matches decides
    (["out/", "!out/keep.py"], "out/keep.py", False),  # a file's own pattern over its folder's
    (["*", "!*/", "!*.py"], "src/", False),  # git's way to keep folders and Python files only
    (["*", "!*/", "!*.py"], "src/data.csv", True),
    (["*", "!*/", "!*.py"], "src/a.py", False),
    (["**", "!*/"], "src/", False),
    (["build/***"], "build/", None),  # no empty segment after a folder's slash
    (["*.py"], "./train.py", True),
    (["*.py"], "/abs/train.py", True),
]


@pytest.mark.parametrize(("patterns", "path", "verdict"), CASES)
def test_what_a_pattern_matches(patterns, path, verdict):
    assert compile_patterns(patterns).verdict(path) is verdict


@pytest.mark.parametrize(("pattern", "problem"), [
    ("\\", "not a gitignore pattern"),
    ("!", "not a gitignore pattern"),
    ("[z-a]", "bad character range z-a"),
    ("x" * (MAX_PATTERN_CHARS + 1), f"longer than {MAX_PATTERN_CHARS} characters"),
])
def test_a_line_that_is_no_pattern(pattern, problem):
    with pytest.raises(GlobError, match=f"^{problem}$"):
        compile_patterns([pattern])


SEGMENT = "a" * 250
# (pattern, path): a plain translation to a regular expression backtracks over every way of
# splitting the path among the wildcards (30 s, 70 s and more on these).
PATHOLOGICAL = [
    ("*a" * 20 + "b", SEGMENT),
    ("*a" * 20 + "b", "/".join([SEGMENT] * 16)),
    ("/" + "*a" * 20 + "b", SEGMENT + "/"),
    ("**/a/**/a/**/b", "/".join(["a"] * 2000)),
    ("**/a/**/a/**/a/**/a/**/a/**/b", "/".join(["a"] * 2000) + "/"),
    ("a" + "**" * 30 + "b", SEGMENT),
    ("[a]*" * 40 + "b", "/".join([SEGMENT] * 16)),
    ("*a" * (MAX_PATTERN_CHARS // 2 - 1) + "b", "/".join([SEGMENT] * 16)),
]


@pytest.mark.parametrize(("pattern", "path"), PATHOLOGICAL, ids=range(len(PATHOLOGICAL)))
def test_matching_never_backtracks_over_the_wildcards(pattern, path):
    spec = compile_patterns([pattern, "!" + pattern])
    # Only the match is timed: backtracking happens there, and it takes under a millisecond here (seconds to hours
    # before). Building the regular expressions is not: on a slow CI machine the longest pattern's compile took
    # seconds of CPU. This thread's CPU time, with the collector held off, is what the match itself burns, whatever
    # else the machine (or another thread of this test worker) runs.
    gc.disable()
    try:
        started = time.thread_time()
        verdict = spec.verdict(path)
        spent = time.thread_time() - started
    finally:
        gc.enable()
    assert verdict is None
    assert spent < 1
