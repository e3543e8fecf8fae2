"""Every fixable rule's safe fix, applied to a small script that really runs (CPU torch): the script
runs before and after, the finding is gone, and where the fix must not change what the script
computes (`.detach()`, `no_grad`, `is not None` with a non-zero seed) it prints the same numbers.

Each script in tests/fix_scripts/ starts with ``# fix-check: CODE same-output|changes-output``.
All scripts run in one interpreter per side (torch is imported once), each in a fresh namespace.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import libcst
import pytest

from trainlint.analysis.engine import analyze_source
from trainlint.analysis.registry import all_rules
from trainlint.fixing import fix_until_stable

SCRIPTS = sorted((Path(__file__).parent / "fix_scripts").glob("*.py"))

# Runs each script with runpy in a fresh namespace and prints {name: stdout or an error} as JSON.
_RUNNER = """
import contextlib, io, json, runpy, sys, traceback
results = {}
for path in sys.argv[1:]:
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            runpy.run_path(path, run_name="__main__")
        results[path] = {"ok": True, "stdout": out.getvalue()}
    except BaseException:
        results[path] = {"ok": False, "stdout": out.getvalue(), "error": traceback.format_exc()}
print(json.dumps(results))
"""


def _parse_header(path: Path) -> tuple[str, str]:
    words = path.read_text(encoding="utf-8").splitlines()[0].split()
    assert words[:2] == ["#", "fix-check:"] and words[3] in {"same-output", "changes-output"}, path
    return words[2], words[3]


def _run_all(paths: list[Path]) -> dict[str, dict]:
    done = subprocess.run(
        [sys.executable, "-I", "-c", _RUNNER, *map(str, paths)], capture_output=True, text=True, timeout=600,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


@pytest.fixture(scope="module")
def fixed_scripts(tmp_path_factory) -> dict[Path, tuple[str, str, Path, Path]]:
    """Each script copied under a training project's name, and its safe-fixed twin."""
    root = tmp_path_factory.mktemp("project")
    prepared = {}
    for script in SCRIPTS:
        code, expectation = _parse_header(script)
        original = root / "before" / script.name
        fixed = root / "after" / script.name
        original.parent.mkdir(exist_ok=True)
        fixed.parent.mkdir(exist_ok=True)
        text = script.read_text(encoding="utf-8")
        original.write_text(text, encoding="utf-8")

        def analyze(source: str, path: str = str(original)) -> list:
            return analyze_source(source, path)

        outcome = fix_until_stable(text, analyze)
        fixed.write_text(outcome.text, encoding="utf-8")
        prepared[script] = (code, expectation, original, fixed)
    return prepared


@pytest.fixture(scope="module")
def runs(fixed_scripts) -> tuple[dict, dict]:
    before = _run_all([original for _, _, original, _ in fixed_scripts.values()])
    after = _run_all([fixed for _, _, _, fixed in fixed_scripts.values()])
    return before, after


def test_every_fixable_rule_has_a_script():
    covered = {_parse_header(script)[0] for script in SCRIPTS}
    fixable = {rule.code for rule in all_rules() if rule.fixable}
    assert fixable <= covered, f"fixable rules without a runnable script: {sorted(fixable - covered)}"


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda path: path.stem)
def test_the_safe_fix_resolves_the_finding_and_the_script_still_runs(script, fixed_scripts, runs):
    code, expectation, original, fixed = fixed_scripts[script]
    before, after = runs
    assert before[str(original)]["ok"], before[str(original)].get("error")
    findings = [f for f in analyze_source(original.read_text(), str(original)) if f.code == code]
    assert findings and all(f.fix is not None and f.fix.safe for f in findings), f"{code} must offer a safe fix here"
    fixed_text = fixed.read_text()
    assert fixed_text != original.read_text()
    libcst.parse_module(fixed_text)
    assert not [f for f in analyze_source(fixed_text, str(fixed)) if f.code == code], "the fix must remove the finding"
    assert after[str(fixed)]["ok"], after[str(fixed)].get("error")
    if expectation == "same-output":
        assert _same_numbers(after[str(fixed)]["stdout"], before[str(original)]["stdout"])
    else:
        assert after[str(fixed)]["stdout"] != before[str(original)]["stdout"], "this fix is meant to change the result"


def _same_numbers(one: str, other: str) -> bool:
    """Equal output, numbers within float32 rounding (`.item()` sums in float64 where a tensor summed in float32)."""
    words, other_words = one.split(), other.split()
    if len(words) != len(other_words):
        return False
    for word, other_word in zip(words, other_words):
        try:
            if not math.isclose(float(word), float(other_word), rel_tol=1e-5):
                return False
        except ValueError:
            if word != other_word:
                return False
    return True
