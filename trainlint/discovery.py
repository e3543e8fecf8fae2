"""Turn the paths on the command line into the Python files to check.

Inside a folder, files are skipped the way git skips them: by the .gitignore files, the
repository's .git/info/exclude and the user's global excludes file (core.excludesFile), and
never when git tracks the file. All of it is read from git's files (:mod:`trainlint.git_files`),
never by running git, which would run what the checked repository configures (its
``core.fsmonitor`` command), and with the same bounded reads as every other input. Without a
readable index, or outside a repository, the ignore files alone decide.
"""
from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Protocol

from trainlint.analysis.files import MAX_SETTINGS_BYTES, UnreadableFile, read_bounded
from trainlint.config import BadGlob, display_path, glob_spec, relative_posix
from trainlint.git_files import global_excludes_file, locate, tracked_paths
from trainlint.globs import GlobSpec
from trainlint.output import visible

SKIPPED_DIRECTORIES = frozenset(
    {".git", ".venv", "venv", "__pycache__", "node_modules", "build", "dist", "site-packages"}
)
GITIGNORE = ".gitignore"


def is_template_name(name: str) -> bool:
    """A cookiecutter or Jinja placeholder in a file or folder name (`{{cookiecutter.modelname}}`): what
    lies there is a template, Python only once rendered, and each of its statements would be a TL000."""
    return "{{" in name and "}}" in name

class MissingPathError(Exception):
    def __init__(self, path: str, reason: str | None = None) -> None:
        super().__init__(f"cannot read {path}: {reason}" if reason else f"path not found: {path}")
        self.path = path


class Excluder(Protocol):
    def excludes(self, path: Path, *, is_dir: bool) -> bool: ...


class Exclusions:
    """The user's exclude globs (config and --exclude), gitignore-style, relative to ``root``."""

    def __init__(self, patterns: Sequence[str], root: Path) -> None:
        self.patterns = tuple(patterns)
        self.root = root
        self._spec = glob_spec(self.patterns)

    def excludes(self, path: Path, *, is_dir: bool) -> bool:
        relative = relative_posix(path, self.root)
        return self._spec.match_file(relative + "/" if is_dir else relative)


def warn(message: str) -> None:
    print(f"trainlint: warning: {visible(message)}", file=sys.stderr)  # it quotes file names and patterns


def _ignore_file_spec(path: Path, report: Callable[[str], None]) -> GlobSpec | None:
    """The patterns of one ignore file; None when there is none. A file that cannot be read, or
    a pattern that is not one, is told and left out, as git leaves out what it cannot use."""
    try:
        data = read_bounded(path, MAX_SETTINGS_BYTES)
    except UnreadableFile as error:
        if not error.missing:
            report(f"{display_path(path)}: cannot read: {error}; its patterns are not applied")
        return None
    patterns = []
    for number, line in enumerate(data.decode("utf-8", "surrogateescape").splitlines(), start=1):
        try:
            patterns.append(glob_spec([line]))
        except BadGlob as error:
            report(f"{display_path(path)}:{number}: {error}; the line is not applied")
    return GlobSpec.joined(patterns)


class _Repository:
    """What git knows about one repository: the files it tracks, and its other ignore files."""

    def __init__(self, top: Path, report: Callable[[str], None]) -> None:
        self.top = top
        locations = locate(top)
        names = tracked_paths(locations.index) if locations is not None else None
        self.tracked: frozenset[str] | None = None
        self.tracked_folders: frozenset[str] = frozenset()
        self.sparse_folders: frozenset[str] = frozenset()  # a sparse index tracks these whole, as one entry
        if names is not None:
            self.tracked = frozenset(name for name in names if not name.endswith("/"))
            self.sparse_folders = frozenset(name[:-1] for name in names if name.endswith("/"))
            self.tracked_folders = frozenset(
                folder for name in self.tracked | self.sparse_folders for folder in _parents(name)
            ) | self.sparse_folders
        exclude = locations.exclude if locations is not None else top / ".git" / "info" / "exclude"
        self.specs = [
            spec for spec in (_ignore_file_spec(exclude, report), _ignore_file_spec(global_excludes_file(), report)) if spec
        ]

    def tracks(self, relative: str, *, is_dir: bool) -> bool:
        if self.tracked is None:
            return False
        if relative in (self.tracked_folders if is_dir else self.tracked):
            return True
        return bool(self.sparse_folders) and any(folder in self.sparse_folders for folder in _parents(relative))


def _parents(name: str) -> list[str]:
    parts = name.split("/")[:-1]
    return ["/".join(parts[: index + 1]) for index in range(len(parts))]


class _GitIgnores:
    """The ignore rules met while walking: .gitignore files (each decides for the paths below
    its own folder; the nearest with a matching pattern wins), then the repository's own."""

    def __init__(self, report: Callable[[str], None]) -> None:
        self._report = report
        self._specs: dict[Path, GlobSpec | None] = {}
        self._repositories: dict[Path, _Repository] = {}

    def repository(self, top: Path) -> _Repository:
        if top not in self._repositories:
            self._repositories[top] = _Repository(top, self._report)
        return self._repositories[top]

    def _spec(self, folder: Path) -> GlobSpec | None:
        if folder not in self._specs:
            self._specs[folder] = _ignore_file_spec(folder / GITIGNORE, self._report)
        return self._specs[folder]

    def ignores(self, path: Path, *, is_dir: bool, boundary: Path, repository: _Repository | None) -> bool:
        suffix = "/" if is_dir else ""
        if repository is not None and repository.tracks(path.relative_to(repository.top).as_posix(), is_dir=is_dir):
            return False
        for folder in path.parents:
            spec = self._spec(folder)
            if spec is not None:
                verdict = spec.verdict(path.relative_to(folder).as_posix() + suffix)
                if verdict is not None:
                    return verdict
            if folder == boundary:
                break
        if repository is not None:
            relative = path.relative_to(repository.top).as_posix() + suffix
            for spec in repository.specs:
                verdict = spec.verdict(relative)
                if verdict is not None:
                    return verdict
        return False


def discover_files(paths: Sequence[str], exclusions: Excluder, report: Callable[[str], None] = warn) -> list[str]:
    """Python files under ``paths``, as display paths, sorted and without duplicates.

    A named file is checked whatever its name or the ignore files say; only exclusions drop it.
    Inside a named folder, skipped folders, templates (a `{{...}}` placeholder in the name),
    exclusions and git's ignore rules all apply.
    """
    ignores = _GitIgnores(report)
    found: dict[str, str] = {}
    for given in paths:
        if not os.path.lexists(given):
            raise MissingPathError(given)
        absolute = Path(os.path.abspath(given))
        if not absolute.is_dir():
            if not exclusions.excludes(absolute, is_dir=False):
                found.setdefault(os.path.realpath(absolute), os.path.normpath(given))
            continue
        if exclusions.excludes(absolute, is_dir=True):
            continue
        top = repository_top(absolute)
        tops: dict[Path, Path | None] = {absolute: top}  # each folder's repository, nested ones included
        for folder, subfolders, files in os.walk(absolute):
            here = Path(folder)
            if here != absolute and (here / ".git").exists():
                tops[here] = here  # a nested repository (a submodule) has its own rules
            here_top = tops[here]
            repository = ignores.repository(here_top) if here_top is not None else None
            boundary = here_top or absolute
            kept = []
            for name in sorted(subfolders):
                candidate = here / name
                if (
                    name not in SKIPPED_DIRECTORIES
                    and not is_template_name(name)
                    and not exclusions.excludes(candidate, is_dir=True)
                    and not ignores.ignores(candidate, is_dir=True, boundary=boundary, repository=repository)
                ):
                    kept.append(name)
                    tops[candidate] = here_top
            subfolders[:] = kept
            for name in sorted(files):
                candidate = here / name
                if (
                    name.endswith((".py", ".ipynb"))
                    and not is_template_name(name)
                    and not exclusions.excludes(candidate, is_dir=False)
                    and not ignores.ignores(candidate, is_dir=False, boundary=boundary, repository=repository)
                ):
                    display = os.path.normpath(os.path.join(given, candidate.relative_to(absolute)))
                    found.setdefault(os.path.realpath(candidate), display)
    return sorted(found.values(), key=_sort_key)


def repository_top(folder: Path) -> Path | None:
    """The enclosing repository's top folder, so ignore files above a named folder count too."""
    for candidate in (folder, *folder.parents):
        if (candidate / ".git").exists():
            return candidate
    return None


def _sort_key(display: str) -> tuple[str, ...]:
    return Path(display).parts
