"""The suite's own scheduling: a module whose fixtures outlive one test runs whole on one xdist worker
(tests/conftest.py), so a VS Code session or a server is made once, not once per worker."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent

SHARED = """
import os


def test_one():
    print("worker", os.environ["PYTEST_XDIST_WORKER"])
"""


def test_a_module_with_shared_fixtures_runs_whole_on_one_worker(tmp_path):
    shutil.copy(HERE / "conftest.py", tmp_path / "conftest.py")
    # test_vscode is one of MODULES_WITH_SHARED_FIXTURES; test_other is not
    (tmp_path / "test_vscode.py").write_text("".join(SHARED.replace("test_one", f"test_{i}") for i in range(8)))
    (tmp_path / "test_other.py").write_text("".join(SHARED.replace("test_one", f"test_{i}") for i in range(8)))
    run = subprocess.run(
        [sys.executable, "-P", "-m", "pytest", "-n", "2", "--dist", "loadgroup", "-v", "-p", "no:cacheprovider", str(tmp_path)],
        capture_output=True, text=True, cwd=tmp_path, timeout=300,
    )
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    workers: dict[str, set[str]] = {"test_vscode": set(), "test_other": set()}
    for line in run.stdout.splitlines():
        if line.startswith("[gw") and "PASSED" in line:
            worker, module = line.split()[0], line.split("PASSED")[1].strip().split("::")[0].removesuffix(".py")
            workers[Path(module).name].add(worker)
    assert len(workers["test_vscode"]) == 1, workers
    assert workers["test_other"], workers
