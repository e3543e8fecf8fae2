"""Reading the user's files: regular files only, of bounded size, each read once.

A FIFO named ``train.py`` would block a plain ``open`` forever, a ``train.py`` linked to
``/dev/zero`` would be read until memory runs out, and a symbolic link loop raises an error
nobody expects. Every file trainlint reads on the user's behalf (sources, notebooks,
configuration, .gitignore) goes through :func:`read_bounded`, which opens without blocking,
checks what it opened and reads at most its limit.

Writing is ``--fix``'s alone (:func:`replace_file`): only inside the folders the command line
gives (:class:`WriteRoots`), whole or not at all, and without a checked folder's links leading the
write anywhere else. The one other place trainlint writes is its own cache folder
(:func:`make_user_cache_part`), which it marks as its own when it makes it.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import secrets
import stat
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None

MIB = 2**20
MAX_SOURCE_BYTES = 10 * MIB  # a Python file; the largest hand-written ones are well under 1 MiB
MAX_NOTEBOOK_BYTES = 50 * MIB  # outputs (images) make notebooks large
MAX_SETTINGS_BYTES = 1 * MIB  # pyproject.toml, trainlint.toml, .gitignore

_KINDS = (
    (stat.S_ISDIR, "a folder"),
    (stat.S_ISFIFO, "a named pipe (FIFO)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


class UnreadableFile(Exception):
    """Why a file cannot be read, worded to follow "cannot read PATH: "."""

    def __init__(self, reason: str, *, missing: bool = False) -> None:
        super().__init__(reason)
        self.missing = missing  # nothing of that name (or a dangling link)


def user_cache_folder() -> str | None:
    """trainlint's own folder in the user's cache (never in a workspace): $TRAINLINT_CACHE_DIR, else
    $XDG_CACHE_HOME/trainlint or ~/.cache/trainlint; None where the user has no home folder."""
    explicit = os.environ.get("TRAINLINT_CACHE_DIR")
    if explicit:
        return explicit
    home = os.path.expanduser("~")
    base = os.environ.get("XDG_CACHE_HOME") or (os.path.join(home, ".cache") if home != "~" else "")
    return os.path.join(base, "trainlint") if base else None


# The cachedir standard's tag (https://bford.info/cachedir/): backup tools skip a folder holding it, and
# `trainlint check` prunes only a cache folder that holds it (trainlint/cache.py).
CACHEDIR_TAG = "Signature: 8a477f597d28d172789f06886806bc55\n# This folder is trainlint's cache (https://bford.info/cachedir/).\n"
CACHE_GITIGNORE = "# Created by trainlint.\n*\n"
# What the server and the library reader keep in the user's cache folder, beside `check`'s results.
USER_CACHE_PARTS = frozenset({"compiled", "libraries", "reports"})


def mark_cache_folder(folder: str | os.PathLike[str]) -> None:
    """Create ``folder`` when missing and mark it as trainlint's cache (CACHEDIR.TAG, and a .gitignore
    of ``*`` so that a cache inside a repository ignores itself); OSError when it cannot be written."""
    os.makedirs(folder, exist_ok=True)
    for name, text in (("CACHEDIR.TAG", CACHEDIR_TAG), (".gitignore", CACHE_GITIGNORE)):
        path = Path(folder, name)
        if not path.is_file():
            write_atomically(path, text.encode("utf-8"))  # a reader sees no tag or the whole tag, never a part


def write_atomically(path: Path, data: bytes) -> None:
    """Write a file of trainlint's cache: readers see the old file or the whole new one, never a part (no fsync:
    a cache entry lost to a crash only costs the work again)."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        temporary.write_bytes(data)
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


def holds_only_cache_parts(folder: str | os.PathLike[str]) -> bool:
    """Whether ``folder`` holds nothing but what trainlint's server and library reader keep in the
    user's cache folder (as a release before the tag was written there left it)."""
    try:
        return all(entry.name in USER_CACHE_PARTS and entry.is_dir(follow_symlinks=False)
                   for entry in os.scandir(folder))
    except OSError:
        return False


def make_user_cache_part(part: str | os.PathLike[str]) -> None:
    """Create ``part``, a folder of the user's cache folder, and mark the cache folder as trainlint's
    when it is trainlint's to mark: new, or holding only trainlint's parts. A folder the user named
    that holds other things is left unmarked ($TRAINLINT_CACHE_DIR pointed at a shared folder), so
    that `trainlint check` does not take it for its own and prune in it. OSError when it cannot be
    written."""
    root = os.path.dirname(os.path.abspath(part))
    if not os.path.lexists(root) or (os.path.isdir(root) and not os.path.islink(root) and holds_only_cache_parts(root)):
        mark_cache_folder(root)
    os.makedirs(part, exist_ok=True)


def limit_for(path: str) -> int:
    return MAX_NOTEBOOK_BYTES if path.endswith(".ipynb") else MAX_SOURCE_BYTES


def read_bounded(path: str | os.PathLike[str], limit: int) -> bytes:
    """The bytes of a regular file of at most ``limit`` bytes; UnreadableFile otherwise."""
    try:
        # Without O_NONBLOCK, opening a FIFO waits for a writer; for a regular file it changes nothing.
        descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
    except OSError as error:
        raise UnreadableFile(_reason(path, error), missing=error.errno in (errno.ENOENT, errno.ENOTDIR)) from None
    except ValueError:  # a NUL in the name (from a string in the code or a setting): no file has one
        raise UnreadableFile("a file name cannot hold a NUL character", missing=True) from None
    try:
        status = os.fstat(descriptor)
        if not stat.S_ISREG(status.st_mode):
            raise UnreadableFile(f"{_kind(status.st_mode)}, not a regular file")
        if status.st_size > limit:
            raise UnreadableFile(_too_large(status.st_size, limit))
        chunks: list[bytes] = []
        remaining = limit + 1  # one byte more tells a file that grew past the limit
        while remaining > 0:
            chunk = os.read(descriptor, min(remaining, MIB))
            if not chunk:
                break
            chunks.append(chunk)
            remaining -= len(chunk)
    except OSError as error:
        raise UnreadableFile(error.strerror or str(error)) from None
    finally:
        os.close(descriptor)
    data = b"".join(chunks)
    if len(data) > limit:
        raise UnreadableFile(_too_large(len(data), limit))
    return data


def _reason(path: str | os.PathLike[str], error: OSError) -> str:
    """What the failed open says, or what the path is when that explains it better (a socket
    cannot be opened at all: ENXIO reads 'No such device or address')."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return error.strerror or str(error)
    if not stat.S_ISREG(mode):
        return f"{_kind(mode)}, not a regular file"
    return error.strerror or str(error)


def _kind(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "a special file")


def _too_large(size: int, limit: int) -> str:
    return f"{size / MIB:.1f} MiB, over the {limit // MIB} MiB limit"


class OutsideWriteRoots(Exception):
    """A file ``--fix`` may not write: its real path lies outside the paths given on the command line."""

    def __init__(self, real: str) -> None:
        super().__init__(real)
        self.real = real  # where the file really is (a link's target)


@dataclass(frozen=True)
class WriteRoots:
    """Where ``--fix`` may write: inside the folders the paths on the command line give, a folder
    itself and a file the folder holding it, each by its real path (the user typed those paths,
    links and all).

    A file is written where it really is. A link, met in a folder or named, is fixed at its target
    only when the target lies inside one of these folders too: a checked folder cannot redirect a
    write to a file outside them.
    """

    folders: tuple[str, ...]

    @classmethod
    def given(cls, paths: Iterable[str]) -> WriteRoots:
        folders = (path if os.path.isdir(path) else os.path.dirname(os.path.abspath(path)) for path in paths)
        return cls(tuple(dict.fromkeys(_compared(os.path.realpath(folder)) for folder in folders)))

    def start(self, real: str) -> str | None:
        """The folder a write to the file at ``real`` (a real path) starts from, the one of these
        that holds it; None when none does."""
        compared = _compared(real)
        return next((folder for folder in self.folders if _holds(folder, compared)), None)


def _compared(path: str) -> str:
    return os.path.normcase(os.path.normpath(path))


def _holds(folder: str, path: str) -> bool:
    try:
        return os.path.commonpath([folder, path]) == folder
    except ValueError:  # on two drives (Windows)
        return False


def replace_file(path: str | os.PathLike[str], data: bytes, roots: WriteRoots) -> None:
    """Write ``data`` over the file at ``path`` atomically, and only inside ``roots``.

    The file is written at its real path (a link stays a link; its target is replaced) when that
    lies inside ``roots``, else OutsideWriteRoots. The folders from the root down are opened one
    by one without following a link (where the system can: POSIX), so a folder turned into a link
    after the check cannot redirect the write either. The data goes into a temporary file in the
    same folder (``.NAME.XXXXXXXX.trainlint``, locked while it is written: see
    ``remove_stale_temporaries``), flushed to disk, with the original's permission bits, then
    renamed over it. A failure at any point leaves the original as it was, and no temporary behind.
    """
    real = os.path.realpath(path)
    start = roots.start(real)
    if start is None:
        raise OutsideWriteRoots(real)
    *folders, name = _names_below(start, real)
    with _Folder.reached(start, folders) as folder:
        folder.replace(name, data)


def remove_stale_temporaries(paths: Iterable[str], roots: WriteRoots) -> None:
    """Remove the temporaries killed runs of ``--fix`` left next to these files (a write that
    finishes or fails leaves none): those named as trainlint names them for the same file, that
    are regular files, and that no running fix holds (its writer locks each until the rename;
    where the system has no such locks, an open file cannot be removed). Files outside ``roots``
    are left alone, and a folder that cannot be listed is skipped."""
    wanted: dict[tuple[str, tuple[str, ...]], set[str]] = {}
    for path in paths:
        real = os.path.realpath(path)
        start = roots.start(real)
        if start is not None:
            *folders, name = _names_below(start, real)
            wanted.setdefault((start, tuple(folders)), set()).add(name)
    for (start, folders), names in wanted.items():
        with contextlib.suppress(OSError), _Folder.reached(start, list(folders)) as folder:
            folder.remove_stale_temporaries(names)


def _names_below(start: str, real: str) -> list[str]:
    """The names leading from the folder ``start`` down to ``real``, which it holds."""
    return os.path.relpath(_compared(real), start).split(os.sep)


_TEMPORARY_SUFFIX = ".trainlint"
# The temporaries' names: `.train.py.`, eight characters of mkstemp's alphabet (earlier versions
# drew them from it, so what they left is recognised too), the suffix.
_TEMPORARY = re.compile(r"\.(?P<name>.+)\.[a-z0-9_]{8}" + re.escape(_TEMPORARY_SUFFIX))
# Folders are walked by descriptor where every call below takes one (POSIX, not Windows); on Linux
# a descriptor that only locates the folder (O_PATH), so a folder that cannot be listed still can be
# written in.
_BY_DESCRIPTOR = {os.open, os.stat, os.unlink, os.rename} <= os.supports_dir_fd and os.listdir in os.supports_fd
_FOLDER = getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_PATH", os.O_RDONLY)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_BINARY = getattr(os, "O_BINARY", 0)


class _Folder:
    """A folder reached from a write root: by a descriptor opened without following links (POSIX),
    else by its path."""

    def __init__(self, path: str, descriptor: int | None) -> None:
        self.path = path
        self.descriptor = descriptor

    @classmethod
    @contextlib.contextmanager
    def reached(cls, start: str, names: list[str]) -> Iterator[_Folder]:
        if not _BY_DESCRIPTOR:
            yield cls(os.path.join(start, *names), None)
            return
        descriptor = os.open(start, _FOLDER)
        try:
            for name in names:  # a name that is now a link fails (ENOTDIR, ELOOP)
                inner = os.open(name, _FOLDER | _NOFOLLOW, dir_fd=descriptor)
                os.close(descriptor)
                descriptor = inner
            yield cls(os.path.join(start, *names), descriptor)
        finally:
            os.close(descriptor)

    def _at(self, name: str) -> str:
        return name if self.descriptor is not None else os.path.join(self.path, name)

    def _status(self, name: str) -> os.stat_result:
        return os.stat(self._at(name), dir_fd=self.descriptor, follow_symlinks=False)

    def replace(self, name: str, data: bytes) -> None:
        status = self._status(name)
        if not stat.S_ISREG(status.st_mode):  # a link or a folder now: it changed since it was read
            raise OSError(errno.EINVAL, "no longer a regular file")
        descriptor, temporary = self._new_temporary(name)
        try:
            try:
                remaining = memoryview(data)
                while remaining:
                    remaining = remaining[os.write(descriptor, remaining) :]
                os.fsync(descriptor)
                if hasattr(os, "fchmod"):
                    os.fchmod(descriptor, stat.S_IMODE(status.st_mode))
                else:
                    os.chmod(self._at(temporary), stat.S_IMODE(status.st_mode))
                os.replace(self._at(temporary), self._at(name), src_dir_fd=self.descriptor, dst_dir_fd=self.descriptor)
            finally:
                os.close(descriptor)  # after the rename: the lock is held until the temporary is gone
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(self._at(temporary), dir_fd=self.descriptor)
            raise

    def _new_temporary(self, name: str) -> tuple[int, str]:
        """A new temporary for ``name``, open and locked. A run cleaning up at the same moment may
        remove one between its creation and its lock: then another is made."""
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _BINARY
        while True:
            temporary = f".{name}.{secrets.token_hex(4)}{_TEMPORARY_SUFFIX}"
            try:
                descriptor = os.open(self._at(temporary), flags, 0o600, dir_fd=self.descriptor)
            except FileExistsError:
                continue
            if fcntl is None:
                return descriptor, temporary
            with contextlib.suppress(OSError):  # a file system without locks: it stays unlocked
                fcntl.flock(descriptor, fcntl.LOCK_EX)
            if self._still_names(temporary, descriptor):
                return descriptor, temporary
            os.close(descriptor)

    def _still_names(self, name: str, descriptor: int) -> bool:
        """Whether ``name`` is still the file open as ``descriptor``."""
        try:
            named = self._status(name)
        except OSError:
            return False
        opened = os.fstat(descriptor)
        return (named.st_dev, named.st_ino) == (opened.st_dev, opened.st_ino)

    def remove_stale_temporaries(self, names: set[str]) -> None:
        if self.descriptor is None:
            found = os.listdir(self.path)
        else:
            listing = os.open(".", os.O_RDONLY | os.O_DIRECTORY, dir_fd=self.descriptor)
            try:
                found = os.listdir(listing)
            finally:
                os.close(listing)
        for entry in found:
            match = _TEMPORARY.fullmatch(entry)
            if match is not None and match["name"] in names:
                self._remove_if_abandoned(entry)

    def _remove_if_abandoned(self, temporary: str) -> None:
        if fcntl is None:  # no locks, but an open file cannot be removed: a running fix's stays
            with contextlib.suppress(OSError):
                if stat.S_ISREG(self._status(temporary).st_mode):
                    os.unlink(self._at(temporary), dir_fd=self.descriptor)
            return
        try:
            descriptor = os.open(self._at(temporary), os.O_RDONLY | _NOFOLLOW | os.O_NONBLOCK, dir_fd=self.descriptor)
        except OSError:
            return  # a link, or not ours to read: left alone
        try:
            if not stat.S_ISREG(os.fstat(descriptor).st_mode):
                return
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)  # fails while a running fix holds it
            if self._still_names(temporary, descriptor):
                os.unlink(self._at(temporary), dir_fd=self.descriptor)
        except OSError:
            return  # held, or locks cannot tell: left alone
        finally:
            os.close(descriptor)
