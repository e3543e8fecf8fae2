#!/usr/bin/env python3
"""The release tag names the version every artifact carries, or the release stops here.

    python3 .github/release_version.py v0.2.0

Checks that the tag is ``v`` followed by ``trainlint.__version__`` (which pyproject.toml reads) and
by the VS Code extension's ``package.json`` version, and that the CHANGELOG has a section for it.
Prints the version; exits 1 with one line per mismatch. Standard library only: it runs before anything
is installed.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def versions(root: Path = ROOT) -> dict[str, str]:
    """Each place a version is written, and what it says."""
    package = (root / "trainlint" / "__init__.py").read_text(encoding="utf-8")
    match = re.search(r'^__version__ = "([^"]+)"$', package, re.M)
    extension = json.loads((root / "vscode-extension" / "package.json").read_text(encoding="utf-8"))
    return {
        "trainlint/__init__.py": match.group(1) if match else "(none)",
        "vscode-extension/package.json": extension.get("version", "(none)"),
    }


def problems(tag: str, root: Path = ROOT) -> list[str]:
    found = []
    if not re.fullmatch(r"v\d+\.\d+\.\d+(?:(?:a|b|rc)\d+)?", tag):
        found.append(f"tag {tag!r} is not v<major>.<minor>.<patch> (optionally a, b or rc and a number)")
    wanted = tag.removeprefix("v")
    for where, version in versions(root).items():
        if version != wanted:
            found.append(f"{where} says {version}, the tag says {wanted}")
    changelog = (root / "CHANGELOG.md").read_text(encoding="utf-8")
    if not re.search(rf"^## \[?{re.escape(wanted)}\]?(?:\s|$)", changelog, re.M):
        found.append(f"CHANGELOG.md has no '## {wanted}' section")
    return found


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: release_version.py TAG", file=sys.stderr)
        return 2
    found = problems(argv[0])
    for problem in found:
        print(f"release: {problem}", file=sys.stderr)
    if not found:
        print(argv[0].removeprefix("v"))
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
