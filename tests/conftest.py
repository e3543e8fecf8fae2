"""How `make test` shares the suite between pytest-xdist's workers (`--dist loadgroup`).

Each test goes to whichever worker is free, so the long property tests of one file (test_splicing,
test_incremental: minutes each under load) no longer queue behind each other on one worker. The tests
of a module whose fixtures outlive one test (a VS Code session, built artifacts, a running server, an
event loop per module) stay together on one worker, so those fixtures are made once, as before.

It also stops a run that would test the checkout's trainlint/ folder instead of the install.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def pytest_configure(config: pytest.Config) -> None:
    # `python -m pytest` in the repository's root puts the root first on sys.path; `trainlint` is then
    # the checkout's folder, which lacks analysis/, estimator/ and server/ (pyproject.toml maps them into
    # the package as it installs), and every test would fail on a missing module.
    found = importlib.util.find_spec("trainlint")
    if found is not None and found.origin is not None and Path(found.origin).parent == ROOT / "trainlint":
        raise pytest.UsageError(
            "trainlint is imported from the checkout's trainlint/ folder, not from its install: run the tests "
            "as `.venv/bin/pytest` (or `python -P -m pytest`), not `python -m pytest` from the repository's root"
        )

MODULES_WITH_SHARED_FIXTURES = frozenset({
    "test_ci_integrations", "test_fix_scripts", "test_fuzz_fix", "test_line_model", "test_neovim",
    "test_output_formats", "test_packaging", "test_plugins", "test_release", "test_server", "test_server_edits",
    "test_server_notebooks", "test_server_protocol", "test_server_workspace", "test_vscode",
})


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        module = item.module.__name__ if isinstance(item, pytest.Function) and item.module else ""
        if module in MODULES_WITH_SHARED_FIXTURES:
            item.add_marker(pytest.mark.xdist_group(module))
