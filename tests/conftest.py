"""How `make test` shares the suite between pytest-xdist's workers (`pytest_xdist_make_scheduler`, below).

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


def pytest_xdist_make_scheduler(config: pytest.Config, log):
    """Tests go to whichever worker is free, except that a module of MODULES_WITH_SHARED_FIXTURES goes
    whole to one worker. (xdist's own `xdist_group` marks do not group under pytest 9.2: xdist 3.8 writes
    the group into `item._nodeid`, which pytest 9.2 no longer reads, so such a module ran on both workers,
    each with its own module-scoped fixtures: two VS Code sessions wrote one screenshot folder at once.)"""
    if config.getoption("dist") not in ("load", "loadgroup", "loadscope"):
        return None
    from xdist.scheduler import LoadScopeScheduling

    class SharedFixtureScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.split("::", 1)[0].rsplit("/", 1)[-1].removesuffix(".py")
            return module if module in MODULES_WITH_SHARED_FIXTURES else nodeid

    return SharedFixtureScheduling(config, log)
