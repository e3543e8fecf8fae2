"""Notebooks: code cells checked as one program, findings placed in cells and in the file, fixes
written back without disturbing outputs, metadata, magics or other cells."""

from __future__ import annotations

import json
import subprocess
import sys

from trainlint.notebooks import Notebook


def _cell(source: str, kind: str = "code", outputs: list | None = None) -> dict:
    lines = source.split("\n")
    cell = {"cell_type": kind, "metadata": {}, "source": [line + "\n" for line in lines[:-1]] + [lines[-1]]}
    if kind == "code":
        cell.update(execution_count=1, outputs=outputs or [])
    return cell


def _notebook(*cells: dict, language: str = "python") -> str:
    document = {
        "cells": list(cells),
        "metadata": {"kernelspec": {"language": language, "name": "python3", "display_name": "Python 3"},
                     "language_info": {"name": language}},
        "nbformat": 4, "nbformat_minor": 5,
    }
    return json.dumps(document, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


SETUP = "!pip install torch\nimport torch\nimport torch.nn as nn"
MODEL = "model = nn.Linear(10, 2)\ncriterion = nn.CrossEntropyLoss()\noptimizer = torch.optim.SGD(model.parameters(), lr=0.1)\nhistory = []"
LOOP = "%%time\nfor x, y in loader:\n    optimizer.zero_grad()\n    loss = criterion(model(x), y)\n    loss.backward()\n    optimizer.step()\n    history.append(loss)"
OUTPUT = {"name": "stdout", "output_type": "stream", "text": ["CPU times: 1 s — é\n"]}


def _check(path, *args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "trainlint", "check", str(path), *args], capture_output=True, text=True, check=False)


def test_cells_are_one_program_and_findings_say_which_cell(tmp_path):
    path = tmp_path / "train.ipynb"
    path.write_text(_notebook(_cell("# Notes", "markdown"), _cell(SETUP), _cell(MODEL), _cell(LOOP, outputs=[OUTPUT])), encoding="utf-8")
    result = _check(path, "--select", "TL101", "--format", "json")
    [finding] = json.loads(result.stdout)["findings"]
    assert finding["cell"] == {"number": 4, "line": 7, "column": 20}
    line = path.read_text(encoding="utf-8").splitlines()[finding["line"] - 1]
    assert line[finding["column"] - 1:].startswith('loss)"'), "file positions point into the cell's JSON string"
    terminal = _check(path, "--select", "TL101")
    assert "train.ipynb:cell 4:7:20:" in terminal.stdout


def test_a_fix_changes_only_the_line_it_fixes(tmp_path):
    path = tmp_path / "train.ipynb"
    original = _notebook(_cell(SETUP), _cell(MODEL), _cell(LOOP, outputs=[OUTPUT]))
    path.write_text(original, encoding="utf-8")
    _check(path, "--fix", "--select", "TL101")
    fixed = path.read_text(encoding="utf-8")
    changed = [(a, b) for a, b in zip(original.splitlines(), fixed.splitlines()) if a != b]
    assert changed == [('    "    history.append(loss)"', '    "    history.append(loss.detach())"')]
    assert len(original.splitlines()) == len(fixed.splitlines())
    assert "!pip install torch" in fixed and "%%time" in fixed
    assert _check(path, "--select", "TL101").returncode == 0


def test_magics_shell_lines_and_foreign_cells_do_not_break_the_program():
    raw = _notebook(_cell("%%bash\necho hi\nls -la"), _cell(SETUP), _cell("%matplotlib inline\nfor i in range(2):\n    !echo $i"), _cell("df?"))
    notebook = Notebook(raw)
    compile(notebook.text, "notebook", "exec")  # every non-Python line became a `pass` in place
    assert notebook.with_program(notebook.text) == raw


def test_notebooks_in_other_languages_and_broken_files(tmp_path):
    julia = tmp_path / "julia.ipynb"
    julia.write_text(_notebook(_cell("history = [loss for loss in losses]"), language="julia"), encoding="utf-8")
    assert _check(julia).returncode == 0
    broken = tmp_path / "broken.ipynb"
    broken.write_text('{"cells": [', encoding="utf-8")
    result = _check(broken)
    assert result.returncode == 1 and "cannot read the notebook" in result.stdout


def test_a_directory_check_includes_notebooks(tmp_path):
    (tmp_path / "train.ipynb").write_text(_notebook(_cell(SETUP), _cell(MODEL), _cell(LOOP)), encoding="utf-8")
    result = _check(tmp_path, "--select", "TL101")
    assert "train.ipynb:cell 3:7:20" in result.stdout
