"""Results of earlier checks kept on disk, so that ``trainlint check`` does not analyse an
unchanged file again.

An entry is found by a key that hashes everything a file's findings depend on: its bytes, the
settings and codes that apply to it, where it is and where its imports are looked for. The
folder it sits in is named by trainlint's version and a fingerprint of the installed code (each
source file's size and modification time, the LibCST version, the library folders that library
facts are read from), so an upgrade or an edit to trainlint starts a new one. What a file's
imports resolved to in the workspace (a model class in ``model.py``) is not in the key: it is
known only after the analysis. The entry records it instead, every module the analysis looked
for, the file it found (or that none was found) and that file's modification time and size,
and an entry whose lookups find something else now, or whose files changed, is not used.

The folder is safe to delete, ignores itself in git (a ``.gitignore`` of ``*`` inside it),
tolerates concurrent runs (entries are written to a temporary file and renamed into place), and
is pruned: entries unused for ``KEEP_UNUSED_DAYS`` and the results of all but the last few
installations go. A folder that cannot be written only costs speed: the run goes on without it.

A checked repository decides where the default folder is (its configuration's ``cache-dir``, or a
``.trainlint_cache`` it commits, possibly a link), so the cache writes and deletes only what it can
tell is its own: a folder it opens must be new, empty, or carry the ``CACHEDIR.TAG`` it writes; a
folder the project chose must lie inside the project (no link out of it); and pruning removes only
results folders holding the marker the cache put there when it made them.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import os
import shutil
import sys
import time
from pathlib import Path

import msgspec

import trainlint
from trainlint.analysis.files import (
    CACHEDIR_TAG,
    MIB,
    UnreadableFile,
    holds_only_cache_parts,
    mark_cache_folder,
    read_bounded,
    write_atomically,
)
from trainlint.analysis.findings import Finding
from trainlint.analysis.library_source import library_paths
from trainlint.analysis.workspace import Stamp, Workspace

FOLDER_NAME = ".trainlint_cache"
ENVIRONMENT_VARIABLE = "TRAINLINT_CACHE_DIR"  # also the parent of the library indexes (trainlint.analysis.libraries)
_FORMAT = 1  # bump when an entry's layout changes
_GENERATION_PREFIX = "results-"
KEEP_UNUSED_DAYS = 30
MAX_ENTRY_BYTES = 64 * MIB  # one file's findings, or one lookup table; real ones are a few KiB
KEEP_OTHER_GENERATIONS = 2  # results of other installations kept besides the current one's
_DAY_S = 24 * 3600
_STALE_TEMPORARY_S = 3600
_PRUNED_MARKER = ".last-pruned"
_GENERATION_MARKER = ".trainlint-results"  # written into each results folder the cache makes: only those are pruned

Lookups = list[tuple[str, str | None]]  # modules looked for from one file: (module name, workspace file found or None)


class _Entry(msgspec.Struct, array_like=True):
    findings: list[Finding]
    imports: str  # the checked file's own lookups (a table's digest; "" for none)
    files: list[tuple[str, Stamp | None, str]]  # each workspace file reached: path, stamp then, its lookups' table


_ENCODER = msgspec.msgpack.Encoder()
_DECODER = msgspec.msgpack.Decoder(_Entry)
_LOOKUPS_DECODER = msgspec.msgpack.Decoder(Lookups)


class CacheUnavailable(Exception):
    """The cache folder cannot be made or written; the message says why, for one warning."""


class ResultCache:
    """One cache folder, and within it the entries of the running installation. Picklable: the
    worker processes of a run write the entries of the files they check."""

    def __init__(self, folder: Path, generation: str) -> None:
        self.folder = folder
        self.entries = folder / generation
        self._forget()

    def _forget(self) -> None:
        # What this process found out already: a file's stamp, whether a lookup table still holds
        # (keyed by importer and digest), which tables are on disk.
        self._stamps: dict[str, Stamp | None] = {}
        self._tables_holding: dict[tuple[str, str], bool] = {}
        self._tables_written: set[str] = set()

    def __getstate__(self) -> dict:
        return {"folder": self.folder, "entries": self.entries}

    def __setstate__(self, state: dict) -> None:
        self.folder, self.entries = state["folder"], state["entries"]
        self._forget()

    @classmethod
    def open(cls, folder: Path, *, project: Path | None = None) -> ResultCache:
        """The cache in ``folder``, created (with its .gitignore and CACHEDIR.TAG) when missing;
        CacheUnavailable when it cannot be written or is not the cache's to use. ``project``: the
        project folder that chose ``folder`` (its configuration or the default), which the cache
        must not leave; None for a folder the user named (--cache-dir, the environment)."""
        cache = cls(folder, _GENERATION_PREFIX + installation_fingerprint())
        try:
            _claim(folder, project)
            if not (cache.entries / _GENERATION_MARKER).is_file():
                cache.entries.mkdir(exist_ok=True)
                write_atomically(cache.entries / _GENERATION_MARKER, b"results of one trainlint installation\n")
            os.utime(cache.entries)  # the installations used last are the ones pruning keeps
        except OSError as error:
            raise CacheUnavailable(f"cannot write the cache folder {folder}: {error.strerror or error}") from None
        return cache

    # ------------------------------------------------------------------ entries
    @staticmethod
    def key(fingerprint: bytes, data: bytes) -> str:
        """The entry for a file's bytes, checked the way ``fingerprint`` (settings, paths) describes."""
        digest = hashlib.blake2b(fingerprint, digest_size=20)
        digest.update(data)
        return digest.hexdigest()

    def load(self, key: str, workspace: Workspace, importer: str) -> list[Finding] | None:
        """The findings kept under ``key`` for ``importer``, when every import they depended on
        still leads to the same file, unchanged."""
        try:
            entry = _DECODER.decode(_read_in_use(self._path(key)))
        except (OSError, msgspec.DecodeError):  # absent, or damaged: analyse the file again
            return None
        if not self._table_holds(str(Path(importer)), entry.imports, workspace):
            return None
        for file, stamp, table in entry.files:
            if self._stamp(file) != stamp or not self._table_holds(file, table, workspace):
                return None
        return entry.findings

    def store(self, key: str, findings: list[Finding], workspace: Workspace, importer: str) -> bool:
        """Keep a file's findings with what its analysis read of the workspace; False when the entry could not be written."""
        importer = str(Path(importer))
        try:
            reached = workspace.dependencies(importer)
            tables = {path: self._write_table(lookups) for path, (_, lookups) in reached.items()}
            files = [(path, stamp, tables[path]) for path, (stamp, _) in sorted(reached.items()) if path != importer]
            path = self._path(key)
            path.parent.mkdir(exist_ok=True)
            write_atomically(path, _ENCODER.encode(_Entry(findings, tables[importer], files)))
        except UnicodeEncodeError:  # a file name that is not UTF-8 (surrogate escapes): checked again each run
            return False
        except OSError:
            return False
        return True

    # A file's lookups are kept apart from the entries, once per distinct table: the files of one
    # package import the same __init__.py, whose lookups would otherwise be copied into each entry.
    def _write_table(self, lookups: Lookups) -> str:
        if not lookups:
            return ""
        data = _ENCODER.encode(lookups)
        digest = hashlib.blake2b(data, digest_size=16).hexdigest()
        if digest not in self._tables_written:
            table = self._table_path(digest)
            if not table.exists():
                table.parent.mkdir(parents=True, exist_ok=True)
                write_atomically(table, data)
            self._tables_written.add(digest)
        return digest

    def _table_holds(self, importer: str, digest: str, workspace: Workspace) -> bool:
        if not digest:
            return True
        known = self._tables_holding.get((importer, digest))
        if known is None:
            try:
                lookups = _LOOKUPS_DECODER.decode(_read_in_use(self._table_path(digest)))
            except (OSError, msgspec.DecodeError):
                lookups = None
            known = lookups is not None and all(workspace.find_module(importer, name) == found for name, found in lookups)
            self._tables_holding[(importer, digest)] = known
        return known

    def _path(self, key: str) -> Path:
        return self.entries / key[:2] / key[2:]

    def _table_path(self, digest: str) -> Path:
        return self.entries / "imports" / digest[:2] / digest[2:]

    def _stamp(self, file: str) -> Stamp | None:
        if file not in self._stamps:
            try:
                status = os.stat(file)
                self._stamps[file] = (status.st_mtime_ns, status.st_size)
            except OSError:
                self._stamps[file] = None
        return self._stamps[file]

    # ------------------------------------------------------------------ pruning
    def prune(self, now: float | None = None) -> None:
        """At most once a day: drop entries unused for KEEP_UNUSED_DAYS, temporary files a
        stopped run left, and the results of all but the last few other installations."""
        now = time.time() if now is None else now
        marker = self.folder / _PRUNED_MARKER
        try:
            if now - marker.stat().st_mtime < _DAY_S:
                return
        except OSError:
            pass
        try:
            write_atomically(marker, b"")  # replaces whatever stood there (a link is not followed)
            _prune_generations(self.folder, self.entries)
            _prune_entries(self.entries, now)
        except OSError:
            pass  # another run is pruning too, or the folder went away: nothing is lost


def _claim(folder: Path, project: Path | None) -> None:
    """Make ``folder`` the cache's, or say why it cannot be: outside the project that chose it, or
    a folder with content of its own (a link to a results folder, a project's ``experiments``)."""
    if project is not None and not _is_inside(os.path.realpath(folder), os.path.realpath(project)):
        how = "is a link out of" if os.path.realpath(folder) != os.path.abspath(folder) else "lies outside"
        raise CacheUnavailable(
            f"the cache folder {os.path.normpath(folder)} {how} the project {project}; only --cache-dir or "
            f"${ENVIRONMENT_VARIABLE} can put it elsewhere"
        )
    tag = folder / "CACHEDIR.TAG"
    if os.path.lexists(folder) and not _holds_our_tag(tag):
        if not folder.is_dir():
            raise CacheUnavailable(f"the cache folder {folder} is not a folder")
        # The user's cache folder as the server leaves it ($TRAINLINT_CACHE_DIR) is trainlint's too.
        if any(folder.iterdir()) and (folder.is_symlink() or not holds_only_cache_parts(folder)):
            raise CacheUnavailable(
                f"{folder} is not trainlint's cache (it holds files and no CACHEDIR.TAG of trainlint's), "
                "and trainlint writes and prunes only a folder of its own; choose another cache folder"
            )
    mark_cache_folder(folder)


def _holds_our_tag(tag: Path) -> bool:
    if tag.is_symlink() or not tag.is_file():
        return False
    try:
        with open(tag, "rb") as stream:
            return stream.read(len(CACHEDIR_TAG) + 1) == CACHEDIR_TAG.encode("utf-8")
    except OSError:
        return False


def _is_inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def _prune_generations(folder: Path, current: Path) -> None:
    others = [path for path in folder.iterdir()
              if path.name.startswith(_GENERATION_PREFIX) and path != current
              and not path.is_symlink() and path.is_dir() and (path / _GENERATION_MARKER).is_file()]
    others.sort(key=lambda path: path.stat().st_mtime, reverse=True)
    for path in others[KEEP_OTHER_GENERATIONS:]:
        shutil.rmtree(path, ignore_errors=True)


def _prune_entries(entries: Path, now: float) -> None:
    for folder, _, files in os.walk(entries):
        for name in files:
            path = os.path.join(folder, name)
            limit = _STALE_TEMPORARY_S if name.endswith(".tmp") else KEEP_UNUSED_DAYS * _DAY_S
            try:
                if now - os.stat(path).st_mtime > limit:
                    os.unlink(path)
            except OSError:
                pass


def _read_in_use(path: Path) -> bytes:
    """A file's bytes; one not touched for a day is touched, so that pruning keeps what is in use.
    Read bounded, as every input is: a FIFO or a link to a device committed where an entry would be
    is refused (OSError: the entry is analysed again), never blocked on."""
    try:
        modified = os.stat(path).st_mtime
        data = read_bounded(path, MAX_ENTRY_BYTES)
    except UnreadableFile as error:
        raise OSError(str(error)) from None
    if time.time() - modified > _DAY_S:
        try:
            os.utime(path)
        except OSError:
            pass
    return data


# ---------------------------------------------------------------------------- the installation


def installation_fingerprint() -> str:
    """trainlint's version and a hash of what else decides its findings: the installed code (a
    source checkout's edits included), the Python and LibCST versions, and the library folders
    whose packages library facts are read from (installing or removing one changes the folder)."""
    digest = hashlib.blake2b(digest_size=8)
    digest.update(f"{_FORMAT} {sys.version} {_libcst_version()}".encode())
    for folder in _code_folders():
        for directory, subfolders, files in os.walk(folder):
            subfolders[:] = sorted(name for name in subfolders if name != "__pycache__")
            for name in sorted(files):
                if name.endswith((".py", ".json")):
                    status = os.stat(os.path.join(directory, name))
                    digest.update(f"{directory}/{name} {status.st_size} {status.st_mtime_ns}\n".encode())
    for library in library_paths():
        try:
            digest.update(f"{library} {os.stat(library).st_mtime_ns}\n".encode())
        except OSError:
            pass
    return f"{trainlint.__version__}-{digest.hexdigest()}"


def _code_folders() -> list[str]:
    """The folders trainlint's packages are installed in (a source checkout maps them to several)."""
    import trainlint.analysis

    folders = {os.path.dirname(trainlint.__file__), os.path.dirname(trainlint.analysis.__file__)}
    estimator = importlib.util.find_spec("trainlint.estimator")
    if estimator is not None and estimator.origin:
        folders.add(os.path.dirname(estimator.origin))
    ordered = sorted(folders)
    return [folder for folder in ordered if not any(folder.startswith(other + os.sep) for other in ordered)]


def _libcst_version() -> str:
    """LibCST's installed version, read from its metadata without importing it (0.2 s of CPU): the
    server keys the reports it remembers on this before it has imported the analysis."""
    try:
        return importlib.metadata.version("libcst")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"
