"""The package as pyproject.toml lays it out: each module's dotted name and source file in the checkout."""

from __future__ import annotations

import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent


def package_modules(root: Path = ROOT) -> dict[str, Path]:
    """Dotted name -> source file of every module of the packages pyproject.toml lists (a package's
    folder is its ``package-dir`` entry, or its dotted path under the root)."""
    setuptools = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]
    folders: dict[str, str] = setuptools.get("package-dir", {})
    modules: dict[str, Path] = {}
    for package in setuptools["packages"]:
        folder = root / folders.get(package, package.replace(".", "/"))
        for path in sorted(folder.glob("*.py")):
            modules[package if path.stem == "__init__" else f"{package}.{path.stem}"] = path
    return modules
