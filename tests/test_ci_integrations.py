"""The CI integrations: the pre-commit hooks (.pre-commit-hooks.yaml) and the GitHub Action (action.yml).

The hooks are exercised the way a user meets them: `pre-commit try-repo` builds trainlint from
source into pre-commit's own virtual environment (packages come from PyPI) and runs it in a
throwaway git repository. The Action's `run:` steps are taken out of action.yml and executed
with bash as the runner would, with the already-installed trainlint (`version: installed`).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import hostile
import pytest

ROOT = Path(__file__).resolve().parents[1]
VENV_BIN = Path(sys.executable).parent

# A scoring loop keeps each batch's loss tensor: with no backward, every graph and its
# activations stay alive until the list dies. TL101 at error severity.
BUGGY = """\
import torch
from torch import nn

model = nn.Linear(10, 1)
data = [(torch.randn(8, 10), torch.randn(8, 1)) for _ in range(100)]

history = []
for x, y in data:
    loss = nn.functional.mse_loss(model(x), y)
    history.append(loss)
print(sum(history) / len(history))
"""
FIXED = BUGGY.replace("history.append(loss)", "history.append(loss.item())")
# The same mistake after a backward: only the graph nodes are kept (TL101 as a warning).
WARNING_ONLY = """\
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Linear(10, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
data = [(torch.randn(8, 10), torch.randn(8, 1)) for _ in range(100)]

history = []
for x, y in data:
    optimizer.zero_grad()
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward()
    optimizer.step()
    history.append(loss)
"""
# Full AdamW fine-tuning of a 7B model cannot fit on a 24 GB card: TL601 with a target GPU.
TOO_BIG = """\
import torch
from transformers import AutoModelForCausalLM

torch.manual_seed(0)
model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-2-7b-hf").cuda()
optimizer = torch.optim.AdamW(model.parameters(), lr=2e-5)

def train(loader):
    for batch in loader:
        optimizer.zero_grad()
        loss = model(**batch).loss
        loss.backward()
        optimizer.step()
"""


# ---------------------------------------------------------------------------- helpers

_GIT_IDENTITY = (
    "-c", "user.name=trainlint tests", "-c", "user.email=tests@trainlint.invalid",
    "-c", "commit.gpgsign=false", "-c", "init.defaultBranch=main",
)


def _clean_env(**extra: str) -> dict[str, str]:
    """The environment without anything that would point git or pre-commit somewhere else."""
    env = {
        key: value for key, value in os.environ.items()
        if not key.startswith(("GIT_", "PRE_COMMIT")) and key != "SKIP"
    }
    env.update(extra)
    return env


def _git(*args: str, cwd: Path) -> str:
    done = subprocess.run(
        ["git", *_GIT_IDENTITY, *args], cwd=cwd, env=_clean_env(), capture_output=True, text=True, check=False,
    )
    assert done.returncode == 0, f"git {' '.join(args)} failed:\n{done.stdout}{done.stderr}"
    return done.stdout


def _commit_all(repo: Path) -> None:
    _git("add", "-A", cwd=repo)
    _git("commit", "--quiet", "--no-verify", "-m", "snapshot", cwd=repo)


def _working_tree_files() -> list[Path]:
    """The project's files as they are now: tracked and untracked, minus what .gitignore drops."""
    if (ROOT / ".git").exists():
        listed = _git("ls-files", "-z", "--cached", "--others", "--exclude-standard", cwd=ROOT)
        names = [name for name in listed.split("\0") if name]
        return [Path(name) for name in names if (ROOT / name).is_file()]
    skipped = {".git", ".venv", "build", "dist", "__pycache__", ".pytest_cache"}
    return [
        path.relative_to(ROOT) for path in ROOT.rglob("*")
        if path.is_file()
        and not skipped.intersection(path.relative_to(ROOT).parts)
        and not any(part.endswith(".egg-info") for part in path.parts)
    ]


def _pre_commit(*args: str, cwd: Path, home: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pre_commit", *args],
        cwd=cwd,
        env=_clean_env(PRE_COMMIT_HOME=str(home), PIP_DISABLE_PIP_VERSION_CHECK="1"),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


# ---------------------------------------------------------------------------- pre-commit


@pytest.fixture(scope="session")
def pre_commit_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """pre-commit's cache for this test session, so nothing lands in the user's ~/.cache."""
    home = tmp_path_factory.mktemp("pre-commit-home")
    done = _pre_commit("--version", cwd=home, home=home)
    assert done.returncode == 0, (
        "pre-commit is not installed in this environment (it is part of the dev extra: "
        f"pip install -e '.[dev]'):\n{done.stdout}{done.stderr}"
    )
    return home


@pytest.fixture(scope="session")
def hook_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The project's working tree committed into a throwaway repository.

    `try-repo` on a dirty repository only carries over changes to tracked files, so a new
    .pre-commit-hooks.yaml (or any other new file) would be missing; a committed copy of the
    working tree is exactly what a user would get from the released tag.
    """
    repo = tmp_path_factory.mktemp("trainlint-hook-repo")
    for name in _working_tree_files():
        target = repo / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, target)
    assert (repo / ".pre-commit-hooks.yaml").is_file()
    _git("init", "--quiet", cwd=repo)
    _commit_all(repo)
    return repo


def _consumer_repo(path: Path, script: str) -> Path:
    path.mkdir()
    _git("init", "--quiet", cwd=path)
    (path / "score.py").write_text(script, encoding="utf-8")
    (path / "README.md").write_text("not Python: the hooks must not see this\n", encoding="utf-8")
    _commit_all(path)
    return path


def test_hook_manifest_is_valid_and_declares_both_hooks(pre_commit_home: Path) -> None:
    from pre_commit.clientlib import load_manifest

    hooks = {hook["id"]: hook for hook in load_manifest(str(ROOT / ".pre-commit-hooks.yaml"))}
    assert set(hooks) == {"trainlint", "trainlint-fix"}
    assert hooks["trainlint"]["entry"] == "trainlint check"
    assert hooks["trainlint-fix"]["entry"] == "trainlint check --fix"
    for hook in hooks.values():
        assert hook["language"] == "python"
        assert hook["types"] == ["python"]
        assert hook["require_serial"] is True
        assert hook["pass_filenames"] is True


def test_try_repo_fails_on_the_buggy_script_and_fix_hook_repairs_it(
    hook_repo: Path, pre_commit_home: Path, tmp_path: Path
) -> None:
    consumer = _consumer_repo(tmp_path / "consumer", BUGGY)
    # No hook id: every hook in the manifest runs, in id order: `trainlint`, then `trainlint-fix`.
    done = _pre_commit("try-repo", str(hook_repo), "--all-files", "--color=never", cwd=consumer, home=pre_commit_home)
    output = done.stdout + done.stderr
    assert done.returncode == 1, output
    check_part, _, fix_part = output.partition("- hook id: trainlint-fix")
    assert "- hook id: trainlint\n" in check_part, output
    assert "score.py:10:20: error TL101 retained-graph" in check_part, output
    assert "README.md" not in check_part, output
    assert "files were modified by this hook" in fix_part, output
    assert "history.append(loss.detach())" in (consumer / "score.py").read_text(encoding="utf-8")


def test_try_repo_passes_on_the_fixed_script(hook_repo: Path, pre_commit_home: Path, tmp_path: Path) -> None:
    consumer = _consumer_repo(tmp_path / "consumer", FIXED)
    done = _pre_commit("try-repo", str(hook_repo), "--all-files", "--color=never", cwd=consumer, home=pre_commit_home)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    assert re.search(r"^trainlint \(apply fixes\)\.+Passed$", output, re.M), output
    assert re.search(r"^trainlint\.+Passed$", output, re.M), output
    assert (consumer / "score.py").read_text(encoding="utf-8") == FIXED


# ---------------------------------------------------------------------------- the GitHub Action

_EXPRESSION = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")


def _action() -> dict:
    import yaml  # PyYAML: a dependency of pre-commit

    with (ROOT / "action.yml").open(encoding="utf-8") as file:
        return yaml.safe_load(file)


def _run_action(
    workspace: Path, runner_temp: Path, search_path: str | None = None, extra_env: dict[str, str] | None = None, **given: str
) -> tuple[int, str, dict[str, str]]:
    """Every step of the composite action in order, as the runner runs it; stops at a failing step.

    Returns the last step's exit status, everything printed, and the outputs the steps set.
    """
    action = _action()
    inputs = {name: str(spec.get("default", "")) for name, spec in action["inputs"].items()}
    unknown = set(given) - set(inputs)
    assert not unknown, f"not inputs of the action: {unknown}"
    inputs.update(given)
    step_outputs: dict[str, dict[str, str]] = {}

    def evaluate(expression: str) -> str:
        scope, _, rest = expression.partition(".")
        if scope == "inputs":
            return inputs[rest]
        if expression == "github.action_path":
            return str(ROOT)
        if scope == "steps":
            step_id, outputs, name = rest.split(".", 2)
            assert outputs == "outputs", expression
            return step_outputs.get(step_id, {}).get(name, "")
        raise AssertionError(f"the test does not know the expression {expression!r}")

    printed = []
    status = 0
    for index, step in enumerate(action["runs"]["steps"]):
        assert step["shell"] == "bash"
        assert "${{" not in step["run"], "inputs reach the shell through env:, never pasted into the script"
        script = runner_temp / f"step{index}.sh"
        script.write_text(step["run"], encoding="utf-8")
        output_file = runner_temp / f"step{index}.output"
        output_file.write_text("", encoding="utf-8")
        env = _clean_env(
            PATH=f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}",
            RUNNER_TEMP=str(runner_temp),
            GITHUB_OUTPUT=str(output_file),
            GITHUB_WORKSPACE=str(workspace),
        )
        env.update({key: _EXPRESSION.sub(lambda m: evaluate(m.group(1)), str(value)) for key, value in step.get("env", {}).items()})
        env.update(extra_env or {})
        if search_path is not None:
            env["PATH"] = search_path
        done = subprocess.run(
            [shutil.which("bash") or "/bin/bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)],
            cwd=workspace, env=env, capture_output=True, text=True, timeout=120, check=False,
        )
        printed.append(done.stdout + done.stderr)
        step_outputs[step.get("id", str(index))] = dict(
            line.split("=", 1) for line in output_file.read_text(encoding="utf-8").splitlines() if "=" in line
        )
        status = done.returncode
        if status != 0:
            break
    flat = {f"{step}.{name}": value for step, outputs in step_outputs.items() for name, value in outputs.items()}
    return status, "".join(printed), flat


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    path = tmp_path / "workspace"
    path.mkdir()
    return path


@pytest.fixture
def runner_temp(tmp_path: Path) -> Path:
    path = tmp_path / "runner-temp"
    path.mkdir()
    return path


def test_action_declares_the_documented_inputs() -> None:
    action = _action()
    assert action["runs"]["using"] == "composite"
    defaults = {name: spec.get("default") for name, spec in action["inputs"].items()}
    assert defaults == {
        "paths": ".", "format": "github", "fail-on": "", "target-gpu": "", "config": "", "args": "",
        "working-directory": ".", "version": "", "sarif-file": "trainlint.sarif",
    }
    documented = (ROOT / "docs" / "ci.md").read_text(encoding="utf-8")
    for name in defaults:
        assert f"| `{name}` |" in documented, f"docs/ci.md does not describe the input {name!r}"


def test_action_github_format_annotates_and_fails_on_errors(workspace: Path, runner_temp: Path) -> None:
    (workspace / "score.py").write_text(BUGGY, encoding="utf-8")
    status, printed, outputs = _run_action(workspace, runner_temp, version="installed")
    assert status == 1, printed
    assert outputs["install.exe"] == str(VENV_BIN / "trainlint")
    assert re.search(r"^::error file=score\.py,line=10,col=20,.*title=TL101 retained-graph::", printed, re.M), printed

    (workspace / "score.py").write_text(FIXED, encoding="utf-8")
    status, printed, _ = _run_action(workspace, runner_temp, version="installed")
    assert status == 0, printed
    assert "::error" not in printed


def test_action_exit_status_follows_fail_on(workspace: Path, runner_temp: Path) -> None:
    (workspace / "train.py").write_text(WARNING_ONLY, encoding="utf-8")
    status, printed, _ = _run_action(workspace, runner_temp, version="installed")
    assert status == 0, printed
    assert re.search(r"^::warning file=train\.py,.*title=TL101 retained-graph::", printed, re.M), printed

    status, printed, _ = _run_action(workspace, runner_temp, version="installed", **{"fail-on": "warning"})
    assert status == 1, printed
    assert "::warning file=train.py" in printed


def test_action_fail_on_comes_from_the_configuration_unless_set(workspace: Path, runner_temp: Path) -> None:
    (workspace / "train.py").write_text(WARNING_ONLY, encoding="utf-8")
    (workspace / "pyproject.toml").write_text('[tool.trainlint]\nfail-on = "warning"\n', encoding="utf-8")
    status, printed, _ = _run_action(workspace, runner_temp, version="installed")
    assert status == 1, printed  # as `trainlint check` fails locally
    assert "findings at or above 'the configured fail-on'" in printed

    status, printed, _ = _run_action(workspace, runner_temp, version="installed", **{"fail-on": "error"})
    assert status == 0, printed  # the input, when set, wins


def test_action_working_directory_config_and_args(workspace: Path, runner_temp: Path) -> None:
    project = workspace / "project"
    project.mkdir()
    (project / "train.py").write_text(WARNING_ONLY, encoding="utf-8")
    (project / "strict.toml").write_text('fail-on = "warning"\n', encoding="utf-8")

    status, printed, _ = _run_action(workspace, runner_temp, version="installed", **{"working-directory": "project"})
    assert status == 0, printed
    # annotations name the file from the top of the repository, where GitHub looks for it
    assert "::warning file=project/train.py," in printed, printed

    status, printed, _ = _run_action(
        workspace, runner_temp, version="installed", **{"working-directory": "project", "config": "strict.toml"}
    )
    assert status == 1, printed

    status, printed, _ = _run_action(
        workspace, runner_temp, version="installed",
        **{"working-directory": "project", "config": "strict.toml", "args": "--ignore\nTL101  --quiet"},
    )
    assert status == 0, printed
    assert "::warning" not in printed

    status, printed, outputs = _run_action(
        workspace, runner_temp, version="installed", format="sarif", **{"working-directory": "project"}
    )
    assert status == 0, printed
    assert outputs["check.sarif-file"] == "trainlint.sarif"
    log = json.loads((workspace / "trainlint.sarif").read_text(encoding="utf-8"))  # relative to the workspace
    [result] = log["runs"][0]["results"]
    assert result["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "project/train.py"

    status, printed, _ = _run_action(workspace, runner_temp, version="installed", **{"working-directory": "missing"})
    assert status == 2, printed
    assert "working-directory 'missing' is not a folder of the workspace" in printed


def test_action_helper_pythons_never_import_from_the_workspace(workspace: Path, runner_temp: Path, tmp_path: Path) -> None:
    markers = tmp_path / "markers"
    hostile.plant(workspace, markers)
    (workspace / "score.py").write_text(BUGGY, encoding="utf-8")
    # The install step, as a pull request's CI runs it: a venv is created and pip starts in the
    # checkout. No index is reachable here, so pip stops once it has started (and imported json).
    status, printed, _ = _run_action(workspace, runner_temp, version="0.0.0", extra_env={"PIP_NO_INDEX": "1"})
    assert status == 1, printed
    assert "No matching distribution found for trainlint==0.0.0" in printed, printed
    assert (runner_temp / "trainlint-venv").is_dir()
    # The check step's own helper Python, which counts the SARIF results.
    status, printed, _ = _run_action(workspace, runner_temp, version="installed", format="sarif")
    assert status == 1, printed
    assert "wrote 1 result(s) to trainlint.sarif" in printed, printed
    assert hostile.ran(markers) == []


def test_action_paths_and_target_gpu_gate_on_projected_oom(workspace: Path, runner_temp: Path) -> None:
    (workspace / "src").mkdir()
    (workspace / "src" / "finetune.py").write_text(TOO_BIG, encoding="utf-8")
    (workspace / "elsewhere").mkdir()
    (workspace / "elsewhere" / "score.py").write_text(BUGGY, encoding="utf-8")

    status, printed, _ = _run_action(workspace, runner_temp, version="installed", paths="src")
    assert status == 0, printed  # no target GPU: no memory verdict, and elsewhere/ is not checked
    assert "::error" not in printed

    status, printed, _ = _run_action(workspace, runner_temp, version="installed", paths="src", **{"target-gpu": "a10"})
    assert status == 1, printed
    assert re.search(r"^::error file=src/finetune\.py,line=5,.*title=TL601 projected-oom::", printed, re.M), printed

    status, printed, _ = _run_action(
        workspace, runner_temp, version="installed", paths="src\nelsewhere/score.py", **{"target-gpu": "b200"}
    )
    assert status == 1, printed  # fits on a B200; the second path's TL101 fails the run
    assert "TL601" not in printed
    assert "::error file=elsewhere/score.py" in printed


def test_action_sarif_format_writes_the_file_and_still_fails(workspace: Path, runner_temp: Path) -> None:
    (workspace / "score.py").write_text(BUGGY, encoding="utf-8")
    status, printed, outputs = _run_action(
        workspace, runner_temp, version="installed", format="sarif", **{"sarif-file": "reports/trainlint.sarif"}
    )
    assert status == 1, printed
    assert "::error" not in printed  # the findings go to the file, for code scanning
    assert outputs["check.sarif-file"] == "reports/trainlint.sarif"
    log = json.loads((workspace / "reports" / "trainlint.sarif").read_text(encoding="utf-8"))
    assert log["version"] == "2.1.0"
    results = [result for run in log["runs"] for result in run["results"]]
    assert [result["ruleId"] for result in results] == ["TL101"]
    location = results[0]["locations"][0]["physicalLocation"]
    assert location["artifactLocation"]["uri"] == "score.py"
    assert location["region"]["startLine"] == 10
    assert "wrote 1 result(s) to reports/trainlint.sarif" in printed

    (workspace / "score.py").write_text(FIXED, encoding="utf-8")
    status, printed, _ = _run_action(workspace, runner_temp, version="installed", format="sarif")
    assert status == 0, printed
    log = json.loads((workspace / "trainlint.sarif").read_text(encoding="utf-8"))
    assert [result for run in log["runs"] for result in run["results"]] == []


def test_action_rejects_other_formats(workspace: Path, runner_temp: Path) -> None:
    (workspace / "score.py").write_text(BUGGY, encoding="utf-8")
    status, printed, _ = _run_action(workspace, runner_temp, version="installed", format="terminal")
    assert status == 2, printed
    assert "::error title=trainlint action::format must be github or sarif" in printed


def test_action_installed_version_needs_trainlint_on_path(workspace: Path, runner_temp: Path) -> None:
    # The step uses only bash builtins before it looks for trainlint, so an empty PATH is enough.
    status, printed, _ = _run_action(workspace, runner_temp, version="installed", search_path=str(runner_temp))
    assert status == 1, printed
    assert "no trainlint on PATH" in printed
