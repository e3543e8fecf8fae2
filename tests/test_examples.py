"""The bundled examples as integration cases.

Every script under ``examples/buggy`` opens with a comment naming exactly what trainlint
must report on it, ``# expect: TL101@42, TL301@17`` (code@line of the finding's first
line, notes included), or ``# expect: none``. Its twin under ``examples/fixed`` (same
relative path) is the same script with the bugs mended and must produce no finding at
all. Each file is analysed on its own: ``examples/*/project`` is a multi-file project,
but its expectations only name what one file shows.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
BUGGY = EXAMPLES / "buggy"
FIXED = EXAMPLES / "fixed"

EXPECT_LINE = re.compile(r"^#\s*expect:\s*(?P<body>.*?)\s*$")
EXPECT_ITEM = re.compile(r"^(?P<code>TL\d{3})@(?P<line>[1-9]\d*)$")
HEADER_LINES = 5  # the expectation sits within the first lines of a file

# The rules the examples exercise; every one must be demonstrated at least once.
COVERED_CODES = {
    "TL101", "TL102", "TL201", "TL202", "TL203", "TL204",
    "TL205", "TL301", "TL302", "TL303", "TL401", "TL501",
}


def _relative_scripts(root: Path) -> list[str]:
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*.py"))


BUGGY_FILES = _relative_scripts(BUGGY)
FIXED_FILES = _relative_scripts(FIXED)


def parse_expectation(text: str, path: str) -> set[tuple[str, int]]:
    """The (code, line) pairs named by the file's ``# expect:`` comment."""
    for line in text.splitlines()[:HEADER_LINES]:
        match = EXPECT_LINE.match(line)
        if match is None:
            continue
        body = match.group("body")
        if body == "none":
            return set()
        expected = set()
        for item in body.split(","):
            item_match = EXPECT_ITEM.match(item.strip())
            if item_match is None:
                raise AssertionError(f"{path}: malformed expectation item {item.strip()!r}")
            expected.add((item_match.group("code"), int(item_match.group("line"))))
        return expected
    raise AssertionError(f"{path}: no '# expect:' comment in its first {HEADER_LINES} lines")


def analyze(path: Path):
    # Imported here so the structural checks below run even while the engine is unfinished.
    from trainlint.analysis.engine import analyze_source
    from trainlint.analysis.settings import AnalysisSettings

    return analyze_source(path.read_text(encoding="utf-8"), str(path), AnalysisSettings())


def describe(findings) -> str:
    return "\n".join(
        f"  {f.code}@{f.line} ({f.severity.label}): {f.message}"
        for f in sorted(findings, key=lambda f: (f.line, f.code))
    ) or "  (none)"


# -- structure of the example set --------------------------------------------------------


def test_example_set_shape():
    assert 8 <= len({Path(f).parts[0] for f in BUGGY_FILES}) <= 10
    assert "project/train.py" in BUGGY_FILES
    assert BUGGY_FILES == FIXED_FILES, "every buggy example needs a fixed twin of the same name"


@pytest.mark.parametrize("rel", BUGGY_FILES)
def test_buggy_example_is_valid_python_with_an_expectation(rel):
    path = BUGGY / rel
    text = path.read_text(encoding="utf-8")
    compile(text, str(path), "exec")
    expected = parse_expectation(text, rel)
    n_lines = len(text.splitlines())
    for code, line in expected:
        assert line <= n_lines, f"{rel}: {code}@{line} is past the end of the file"
        assert text.splitlines()[line - 1].strip(), f"{rel}: {code}@{line} points at a blank line"


@pytest.mark.parametrize("rel", FIXED_FILES)
def test_fixed_example_is_valid_python_expecting_nothing(rel):
    path = FIXED / rel
    text = path.read_text(encoding="utf-8")
    compile(text, str(path), "exec")
    assert parse_expectation(text, rel) == set()


@pytest.mark.parametrize("rel", BUGGY_FILES)
def test_fixed_twin_differs_only_where_bugs_are(rel):
    buggy = (BUGGY / rel).read_text(encoding="utf-8").splitlines()[1:]
    fixed = (FIXED / rel).read_text(encoding="utf-8").splitlines()[1:]
    has_bugs = bool(parse_expectation((BUGGY / rel).read_text(encoding="utf-8"), rel))
    assert (buggy != fixed) == has_bugs


def test_every_rule_in_scope_is_demonstrated():
    seen = set()
    for rel in BUGGY_FILES:
        seen |= {code for code, _ in parse_expectation((BUGGY / rel).read_text(), rel)}
    assert COVERED_CODES <= seen, f"no example for {sorted(COVERED_CODES - seen)}"
    assert seen <= COVERED_CODES, f"examples use codes outside scope: {sorted(seen - COVERED_CODES)}"


def test_parse_expectation():
    assert parse_expectation("# expect: TL101@42, TL201@57\nx = 1\n", "a.py") == {
        ("TL101", 42),
        ("TL201", 57),
    }
    assert parse_expectation('# expect: none\n"""doc"""\n', "b.py") == set()
    with pytest.raises(AssertionError, match="malformed"):
        parse_expectation("# expect: TL101-42\n", "c.py")
    with pytest.raises(AssertionError, match="no '# expect:'"):
        parse_expectation("import torch\n", "d.py")


# -- what the analyser reports ----------------------------------------------------------


@pytest.mark.parametrize("rel", BUGGY_FILES)
def test_buggy_example_findings(rel):
    path = BUGGY / rel
    expected = parse_expectation(path.read_text(encoding="utf-8"), rel)
    findings = analyze(path)
    got = {(f.code, f.line) for f in findings}
    assert got == expected, (
        f"{rel}\n missing: {sorted(expected - got)}\n unexpected: {sorted(got - expected)}\n"
        f" findings:\n{describe(findings)}"
    )


@pytest.mark.parametrize("rel", FIXED_FILES)
def test_fixed_example_is_clean(rel):
    from trainlint.analysis.findings import Severity

    path = FIXED / rel
    findings = analyze(path)
    serious = [f for f in findings if f.severity >= Severity.WARNING]
    assert not serious, f"{rel} is the mended twin, yet:\n{describe(serious)}"
    assert not findings, f"{rel} expects no notes either, yet:\n{describe(findings)}"


@pytest.mark.parametrize("unsafe", [False, True], ids=["safe fixes", "unsafe fixes too"])
def test_no_rule_reports_a_line_a_fix_wrote(tmp_path, monkeypatch, capsys, unsafe):
    """Where rules meet on one line their fixes agree: after `--fix`, nothing is reported on a line a
    fix wrote that was not reported there before (TL101's `.detach()` used to leave TL104 to report)."""
    import difflib
    import json
    import shutil

    from trainlint.cli import main

    shutil.copytree(BUGGY, tmp_path / "buggy")
    monkeypatch.chdir(tmp_path)

    def findings() -> dict[str, list[dict]]:
        main(["check", "--no-cache", "--output-format", "json", "buggy"])
        by_file: dict[str, list[dict]] = {}
        for finding in json.loads(capsys.readouterr().out)["findings"]:
            by_file.setdefault(finding["path"], []).append(finding)
        return by_file

    before_text = {path: path.read_text() for path in (tmp_path / "buggy").rglob("*.py")}
    before = findings()
    main(["check", "--no-cache", "--fix", *(["--unsafe-fixes"] if unsafe else []), "buggy"])
    capsys.readouterr()
    after = findings()
    written_any, bred = False, []
    for path, old_text in before_text.items():
        shown = path.relative_to(tmp_path).as_posix()
        matcher = difflib.SequenceMatcher(a=old_text.splitlines(), b=path.read_text().splitlines(), autojunk=False)
        for tag, old_start, old_end, new_start, new_end in matcher.get_opcodes():
            if tag == "equal":
                continue
            written_any = True
            there = {f["code"] for f in before.get(shown, []) if old_start < f["line"] <= max(old_end, old_start + 1)}
            bred += [(shown, f["line"], f["code"]) for f in after.get(shown, [])
                     if new_start < f["line"] <= new_end and f["code"] not in there]
    assert written_any and bred == []
