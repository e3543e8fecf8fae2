"""No text takes the process down: LibCST's native parser recurses once per level of nesting and
overflows its stack (SIGSEGV) on 20 KB of `x = a+a+...+a`; the guard in analysis/parsing.py keeps
such statements from it. Syntax errors name file lines, not the statement's."""

from __future__ import annotations

import subprocess
from pathlib import Path

import libcst as cst
import pytest
from cli_process import TRAINLINT
from test_engine import RETAINED

from trainlint.analysis.chunking import split_statements
from trainlint.analysis.engine import analyze_source
from trainlint.analysis.parsing import INLINE_NESTING, MAX_NESTING, nesting_estimate, parse_module

# Each crashed LibCST (exit 139) or took minutes before the guard, at these sizes (20-120 KB).
HOSTILE = {
    "sum": "x = " + "+".join(["a"] * 10_000) + "\n",
    "power": "x = " + "**".join(["a"] * 10_000) + "\n",
    "brackets": "x = " + "(" * 3_000 + "a" + ")" * 3_000 + "\n",
    "lists": "x = " + "[" * 3_000 + "]" * 3_000 + "\n",
    "minus": "x = " + "-" * 10_000 + "a\n",
    "not": "x = " + "not " * 10_000 + "a\n",
    "calls": "x = a" + "()" * 10_000 + "\n",
    "subscripts": "x = a" + "[0]" * 10_000 + "\n",
    "attributes": "x = a" + ".b" * 10_000 + "\n",
    "lambdas": "x = " + "lambda: " * 5_000 + "a\n",
    "conditionals": "x = " + " if a else ".join(["a"] * 5_000) + "\n",
    "elifs": "if a:\n    pass\n" + "elif a:\n    pass\n" * 10_000,
    "continued": "x = a" + " + \\\n    a" * 10_000 + "\n",
    "sum in a function": "def f():\n    return " + "+".join(["a"] * 10_000) + "\n",
}


def test_hostile_nesting_gets_a_finding_and_the_rest_is_checked(tmp_path):
    for index, statement in enumerate(HOSTILE.values()):
        (tmp_path / f"case_{index}.py").write_text(statement + RETAINED)
    result = subprocess.run(
        [*TRAINLINT, "check", "--jobs", "1", "--format", "json", str(tmp_path)],
        capture_output=True, text=True, timeout=300,
    )
    assert result.returncode == 1, result.stderr[-2000:]
    assert "Traceback" not in result.stderr
    import json

    findings = json.loads(result.stdout)["findings"]
    for index, name in enumerate(HOSTILE):
        codes = {f["code"] for f in findings if Path(f["path"]).name == f"case_{index}.py"}
        assert codes & {"TL000", "TL002"}, name
        assert "TL101" in codes, f"{name}: the statements after it are still checked"


def test_what_python_refuses_is_a_syntax_error_and_the_rest_is_not_analysed():
    refused = analyze_source(HOSTILE["sum"], "sum.py")
    assert [(f.code, f.line) for f in refused] == [("TL000", 1)]
    assert "nests too deeply for Python's parser" in refused[0].message
    brackets = analyze_source(HOSTILE["brackets"], "brackets.py")
    assert [(f.code, f.message) for f in brackets] == [("TL000", "syntax error: too many nested parentheses")]
    accepted = "\n\n# a long sum\nx = " + "+".join(["a"] * 1_000) + "\n"  # Python compiles it; LibCST is not asked
    compile(accepted, "accepted.py", "exec")
    [finding] = analyze_source(accepted, "accepted.py")
    assert (finding.code, finding.line, finding.severity.label) == ("TL002", 4, "note")
    assert f"trainlint parses statements up to {MAX_NESTING} levels" in finding.message


def test_moderately_deep_statements_are_parsed_and_checked():
    # Between INLINE_NESTING and MAX_NESTING LibCST runs on a thread with a large stack.
    statement = "total = " + "+".join(["a"] * 150) + "\n"
    assert INLINE_NESTING < nesting_estimate(statement) <= MAX_NESTING
    assert [f.code for f in analyze_source(statement + RETAINED, "t.py")] == ["TL101"]


def test_real_code_nests_far_below_the_limit():
    root = Path(__file__).resolve().parent.parent
    for path in [*root.glob("examples/**/*.py"), *root.glob("analysis/**/*.py"), *root.glob("estimator/*.py")]:
        for chunk in split_statements(path.read_text(encoding="utf-8")):
            assert nesting_estimate(chunk.text) <= INLINE_NESTING // 2, path


@pytest.mark.parametrize("source, message", [
    ('x = 1\n\n\ns = """never closed\ny = 2\n', "unterminated triple-quoted string literal (detected at line 5)"),
    ("x = 1\n\n\nif True:\ny = 2\n", "expected an indented block after 'if' statement on line 4"),
    ("x = 1\n\n\nz = (1,\n     2]\n", "closing parenthesis ']' does not match opening parenthesis '(' on line 4"),
])
def test_syntax_errors_name_file_lines(source, message):
    [finding] = analyze_source(source, "broken.py")
    assert finding.code == "TL000"
    assert finding.message == f"syntax error: {message}"
    assert finding.line >= 4


def test_a_syntax_error_that_moves_keeps_file_lines(tmp_path):
    from trainlint.analysis.engine import findings_for, select_rules
    from trainlint.analysis.module import ModuleAnalysis
    from trainlint.analysis.settings import AnalysisSettings

    broken = 'x = 1\n\ns = """never closed\n'
    module = ModuleAnalysis(broken, "m.py")
    settings = AnalysisSettings()
    [before] = findings_for(module, settings, select_rules(settings))
    assert "(detected at line 3)" in before.message
    moved = module.updated("import os\n\n" + broken)  # the unchanged statement moves down two lines
    [after] = findings_for(moved, settings, select_rules(settings))
    assert after.line == before.line + 2
    assert "(detected at line 5)" in after.message


def test_fix_never_hands_the_parser_a_hostile_file(tmp_path):
    path = tmp_path / "train.py"
    text = HOSTILE["subscripts"] + RETAINED
    path.write_text(text)
    result = subprocess.run(
        [*TRAINLINT, "check", "--fix", str(path)], capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr[-2000:]
    assert path.read_text() == text  # the fixed text could not be checked to parse, so nothing is written


@pytest.mark.parametrize("literal, message", [
    ('"a\\utocast"', "(unicode error) 'unicodeescape' codec can't decode bytes in position 1-2: truncated \\uXXXX escape"),
    ('"\\N{no such name}"', "(unicode error) 'unicodeescape' codec can't decode bytes in position 0-15: unknown Unicode character name"),
    ('b"\\xz"', "(value error) invalid \\x escape at position 0"),
    ('b"café"', "bytes can only contain ASCII literal characters"),
])
def test_literals_python_rejects_are_syntax_errors_not_crashes(literal, message):
    # LibCST parses them; evaluating them (as the analysis does) raised out of `trainlint check`.
    findings = analyze_source(f"import torch\n\nbanner = {literal}\n" + RETAINED, "t.py")
    assert [(f.code, f.line, f.message) for f in findings if f.code == "TL000"] == [("TL000", 3, f"syntax error: {message}")]
    assert "TL101" in {f.code for f in findings}


def test_literals_python_accepts_are_analysed():
    text = 'banner = "\\x1b[1m\\u2588\\N{BULLET}\\U0001F600"\nraw = rb"\\xz"\n' + RETAINED
    assert [f.code for f in analyze_source(text, "t.py")] == ["TL101"]


def test_nodes_built_outside_a_parse_are_still_validated():
    """The parser's own nodes skip LibCST's validation; a node a fix builds by hand does not."""
    parse_module("x = compute(1)\n")
    with pytest.raises(cst.CSTValidationError):
        cst.Name("")
    with pytest.raises(cst.CSTValidationError):
        cst.Attribute(value=cst.Name("x"), attr=cst.Name(""))
