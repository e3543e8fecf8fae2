"""Turn the paths on the command line into the Python files to check."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Sequence

import pathspec

from trainlint.config import relative_posix

SKIPPED_DIRECTORIES = frozenset(
    {".git", ".venv", "venv", "__pycache__", "node_modules", "build", "dist", "site-packages"}
)
GITIGNORE = ".gitignore"


class MissingPathError(Exception):
    def __init__(self, path: str) -> None:
        super().__init__(f"path not found: {path}")
        self.path = path


class Exclusions:
    """The user's exclude globs (config and --exclude), gitignore-style, relative to ``root``."""

    def __init__(self, patterns: Sequence[str], root: Path) -> None:
        self.root = root
        self._spec = pathspec.GitIgnoreSpec.from_lines(patterns)

    def excludes(self, path: Path, *, is_dir: bool) -> bool:
        relative = relative_posix(path, self.root)
        return self._spec.match_file(relative + "/" if is_dir else relative)


class _GitIgnores:
    """.gitignore files met while walking; each decides for the paths below its own folder."""

    def __init__(self) -> None:
        self._specs: dict[Path, pathspec.GitIgnoreSpec | None] = {}

    def _spec(self, folder: Path) -> pathspec.GitIgnoreSpec | None:
        if folder not in self._specs:
            try:
                lines = (folder / GITIGNORE).read_text(encoding="utf-8", errors="replace").splitlines()
            except OSError:
                self._specs[folder] = None
            else:
                self._specs[folder] = pathspec.GitIgnoreSpec.from_lines(lines)
        return self._specs[folder]

    def ignores(self, path: Path, *, is_dir: bool, boundary: Path) -> bool:
        """As git decides: the .gitignore nearest the path with a matching pattern wins."""
        for folder in path.parents:
            spec = self._spec(folder)
            if spec is not None:
                relative = path.relative_to(folder).as_posix() + ("/" if is_dir else "")
                verdict = spec.check_file(relative).include
                if verdict is not None:
                    return verdict
            if folder == boundary:
                break
        return False


def discover_files(paths: Sequence[str], exclusions: Exclusions) -> list[str]:
    """Python files under ``paths``, as display paths, sorted and without duplicates.

    A named file is checked whatever its name or .gitignore say; only exclusions drop it.
    Inside a named folder, skipped folders, exclusions and .gitignore files all apply.
    """
    gitignores = _GitIgnores()
    found: dict[Path, str] = {}
    for given in paths:
        if not os.path.exists(given):
            raise MissingPathError(given)
        absolute = Path(os.path.abspath(given))
        if not absolute.is_dir():
            if not exclusions.excludes(absolute, is_dir=False):
                found.setdefault(absolute.resolve(), os.path.normpath(given))
            continue
        if exclusions.excludes(absolute, is_dir=True):
            continue
        boundary = _git_root(absolute) or absolute
        for folder, subfolders, files in os.walk(absolute):
            here = Path(folder)
            subfolders[:] = sorted(
                name
                for name in subfolders
                if name not in SKIPPED_DIRECTORIES
                and not exclusions.excludes(here / name, is_dir=True)
                and not gitignores.ignores(here / name, is_dir=True, boundary=boundary)
            )
            for name in sorted(files):
                candidate = here / name
                if (
                    name.endswith((".py", ".ipynb"))
                    and not exclusions.excludes(candidate, is_dir=False)
                    and not gitignores.ignores(candidate, is_dir=False, boundary=boundary)
                ):
                    display = os.path.normpath(os.path.join(given, candidate.relative_to(absolute)))
                    found.setdefault(candidate.resolve(), display)
    return sorted(found.values(), key=_sort_key)


def _git_root(folder: Path) -> Path | None:
    """The enclosing repository's top folder, so .gitignore files above a named folder count too."""
    for candidate in (folder, *folder.parents):
        if (candidate / ".git").exists():
            return candidate
    return None


def _sort_key(display: str) -> tuple[str, ...]:
    return Path(display).parts
