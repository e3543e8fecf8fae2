"""Reading the user's files: regular files only, of bounded size, each read once.

A FIFO named ``train.py`` would block a plain ``open`` forever, a ``train.py`` linked to
``/dev/zero`` would be read until memory runs out, and a symbolic link loop raises an error
nobody expects. Every file trainlint reads on the user's behalf (sources, notebooks,
configuration, .gitignore) goes through :func:`read_bounded`, which opens without blocking,
checks what it opened and reads at most its limit.
"""

from __future__ import annotations

import errno
import os
import stat
import tempfile

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


def replace_file(path: str | os.PathLike[str], data: bytes) -> None:
    """Write ``data`` over the file at ``path`` atomically: into a temporary file in the same
    folder, flushed to disk, with the original's permission bits, then renamed over it. A
    failure at any point leaves the original as it was (and no temporary file behind). A
    symbolic link stays a link: its target is replaced."""
    target = os.path.realpath(path)
    folder, name = os.path.split(target)
    mode = stat.S_IMODE(os.stat(target).st_mode)
    descriptor, temporary = tempfile.mkstemp(prefix=f".{name}.", suffix=".trainlint", dir=folder)
    try:
        with os.fdopen(descriptor, "wb") as stream:
            stream.write(data)
            stream.flush()
            os.fsync(stream.fileno())
        os.chmod(temporary, mode)
        os.replace(temporary, target)
    except BaseException:
        try:
            os.unlink(temporary)
        except OSError:
            pass
        raise
