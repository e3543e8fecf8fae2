"""The server's start-up without recompiling lsprotocol's classes at every launch.

Importing the server means importing ``lsprotocol.types``: some 570 attrs classes, for each of
which attrs writes the source of ``__init__``, ``__eq__``, ``__repr__``... and compiles it. The
compiling was about a third of the server's import CPU (0.15 of 0.65 s on the development machine),
paid again at every editor start although the sources are the same each time.

:func:`compiled_code_cache` keeps the compiled code between launches: while the server's modules
are imported, attrs' ``compile`` is looked up in a table read from the user's cache folder (never
the workspace), keyed by everything ``compile`` reads (source, file name, mode and the future
flags attrs' module compiles with), so a hit is the code ``compile`` would have returned. The
table is written once, when the import compiled much that it did not hold (the first launch, or a
new attrs or Python: both are in the file name); a source that changes from launch to launch
(attrs puts a per-process hash in one) is compiled as before and not written. A table that cannot
be read or written costs only the speed it would have saved.
"""

from __future__ import annotations
import __future__

import contextlib
import marshal
import os
import sys
import tempfile
from collections.abc import Iterator, Mapping
from types import CodeType

from trainlint.analysis.files import MIB, UnreadableFile, read_bounded, user_cache_folder

MAX_TABLE_BYTES = 16 * MIB  # the table for lsprotocol 2025 is about 1.8 MiB
WRITE_AFTER_MISSES = 50  # fewer misses are sources that change per process, not a new release

Key = tuple[str, str, str]


@contextlib.contextmanager
def compiled_code_cache() -> Iterator[None]:
    """Within the block, attrs compiles what the table lacks and takes the rest from it."""
    try:
        import attr
        from attr import _make as attrs_make
    except ImportError:  # pygls' dependencies changed: nothing to save
        yield
        return
    path = _table_path(getattr(attr, "__version__", "unknown"))
    table = _read(path) if path else {}
    compiled: dict[Key, CodeType] = {}
    flags = _future_flags(vars(attrs_make))

    def compile_or_reuse(source: str, filename: str, mode: str) -> CodeType:
        key = (source, filename, mode)
        code = table.get(key)
        if code is None:
            code = compile(source, filename, mode, flags, True)  # as attrs' own call would, with its future flags
            compiled[key] = code
        return code

    attrs_make.compile = compile_or_reuse  # type: ignore[attr-defined]  # a module global shadows the builtin
    try:
        yield
    finally:
        del attrs_make.compile  # type: ignore[attr-defined]
    if path and len(compiled) >= WRITE_AFTER_MISSES:
        _write(path, {**table, **compiled})


def _future_flags(module_globals: Mapping[str, object]) -> int:
    """The compiler flags of the ``from __future__`` imports a module's own ``compile`` calls inherit."""
    flags = 0
    for name in __future__.all_feature_names:
        feature = getattr(__future__, name)
        if module_globals.get(name) is feature:
            flags |= feature.compiler_flag
    return flags


def _table_path(attrs_version: str) -> str | None:
    folder = user_cache_folder()
    if not folder:
        return None
    return os.path.join(folder, "compiled", f"attrs-{attrs_version}-{sys.implementation.cache_tag}.marshal")


def _read(path: str) -> dict[Key, CodeType]:
    try:
        table = marshal.loads(read_bounded(path, MAX_TABLE_BYTES))
    except (UnreadableFile, EOFError, ValueError, TypeError):  # absent, too large, or not a table
        return {}
    if not isinstance(table, dict):
        return {}
    return {key: code for key, code in table.items() if _is_entry(key, code)}


def _is_entry(key: object, code: object) -> bool:
    return (isinstance(key, tuple) and len(key) == 3 and all(isinstance(part, str) for part in key)
            and isinstance(code, CodeType))


def _write(path: str, table: dict[Key, CodeType]) -> None:
    folder = os.path.dirname(path)
    try:
        os.makedirs(folder, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=folder, prefix=".compiled-", suffix=".tmp")
        try:
            with os.fdopen(handle, "wb") as file:
                marshal.dump(table, file)
            os.replace(temporary, path)  # whole or not at all: another server may be reading it
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
            raise
    except (OSError, ValueError):
        return
