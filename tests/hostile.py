"""A workspace that tries to run its own code: modules named like the ones trainlint and its
helpers import, each leaving a marker file when imported. A test runs something in it and
asserts that no marker appeared."""

from __future__ import annotations

from pathlib import Path

# What a pull request could add to shadow the standard library, the venv and pip start-up, or
# trainlint and its dependencies.
MODULES = ("json.py", "venv.py", "libcst.py", "msgspec.py", "trainlint/__init__.py")


def plant(workspace: Path, markers: Path) -> None:
    """Write the hostile modules into ``workspace``; an import of one creates a file in ``markers``."""
    markers.mkdir(parents=True, exist_ok=True)
    for name in MODULES:
        module = workspace / name
        module.parent.mkdir(parents=True, exist_ok=True)
        marker = markers / name.replace("/", "_")
        module.write_text(f"open({str(marker)!r}, 'w').close()\n", encoding="utf-8")


def ran(markers: Path) -> list[str]:
    """The hostile modules that were imported."""
    return sorted(path.name for path in markers.iterdir())
