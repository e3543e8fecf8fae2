"""The server's start-up without recompiling lsprotocol's and LibCST's classes at every launch.

Importing the server means importing ``lsprotocol.types``: some 570 attrs classes, for each of
which attrs writes the source of ``__init__``, ``__eq__``, ``__repr__``... and compiles it. The
compiling was about a third of the server's import CPU (0.15 of 0.65 s on the development machine),
paid again at every editor start although the sources are the same each time. The analysis' import
is the same story with the standard library's dataclasses: LibCST's nodes and the analysis' own
classes are dataclasses, whose methods ``dataclasses`` writes and ``exec``-s, about 1,070 sources
and 115 ms of CPU of the analysis' 300 (2026-12-07).

:func:`compiled_code_cache` keeps the compiled code between launches: while the block imports, attrs'
``compile`` and dataclasses' ``exec`` (of a source) look the code up in a table read from the user's
cache folder (never the workspace), keyed by everything ``compile`` reads (source, file name, mode
and the future flags the generating module compiles with), so a hit is the code ``compile`` would
have returned. A table is written once, when the import compiled much that it did not hold (the
first launch, or a new attrs or Python: both are in the file name); a source that changes from
launch to launch (attrs puts a per-process hash in one) is compiled as before and not written. A
table that cannot be read or written costs only the speed it would have saved.
"""

from __future__ import annotations
import __future__

import builtins
import contextlib
import dataclasses
import marshal
import os
import sys
import tempfile
from collections.abc import Callable, Iterator, Mapping
from types import CodeType, ModuleType

from trainlint.analysis.files import MIB, UnreadableFile, make_user_cache_part, read_bounded, user_cache_folder

MAX_TABLE_BYTES = 16 * MIB  # the table for lsprotocol 2025 is about 1.8 MiB
WRITE_AFTER_MISSES = 50  # fewer misses are sources that change per process, not a new release

Key = tuple[str, str, str]


@contextlib.contextmanager
def compiled_code_cache(*, attrs: bool = True) -> Iterator[None]:
    """Within the block, dataclasses (and, unless ``attrs`` is false, attrs) compile what the tables
    lack and take the rest from them."""
    with contextlib.ExitStack() as stack:
        if attrs:
            try:
                import attr
                from attr import _make as attrs_make
            except ImportError:  # pygls' dependencies changed: nothing to save
                pass
            else:
                table = f"attrs-{getattr(attr, '__version__', 'unknown')}"
                stack.enter_context(_reusing(attrs_make, "compile", table, lambda compile_or_reuse: compile_or_reuse))
        stack.enter_context(_reusing(dataclasses, "exec", "dataclasses", _exec_with))
        yield


def _exec_with(compile_or_reuse: Callable[[str, str, str], CodeType]) -> Callable[..., None]:
    """``exec`` as dataclasses calls it (a source, its globals, a namespace), compiling through the table."""

    def exec_source(source: str | CodeType, globals: dict | None = None, locals: Mapping | None = None) -> None:
        code = compile_or_reuse(source, "<string>", "exec") if isinstance(source, str) else source
        builtins.exec(code, globals, locals)  # the code dataclasses itself would have run

    return exec_source


@contextlib.contextmanager
def _reusing(module: ModuleType, name: str, table_name: str, wrap: Callable[[Callable[[str, str, str], CodeType]], object]) -> Iterator[None]:
    """Within the block, ``module``'s global ``name`` (a builtin it calls) compiles through the table
    ``table_name``: the code of a source the table holds is reused, the rest compiled and written."""
    path = _table_path(table_name)
    table = _read(path) if path else {}
    compiled: dict[Key, CodeType] = {}
    flags = _future_flags(vars(module))

    def compile_or_reuse(source: str, filename: str, mode: str) -> CodeType:
        key = (source, filename, mode)
        code = table.get(key)
        if code is None:
            code = compile(source, filename, mode, flags, True)  # as the module's own call would, with its future flags
            compiled[key] = code
        return code

    previous = vars(module).get(name)  # another block's, still open on another thread; else the builtin
    setattr(module, name, wrap(compile_or_reuse))  # a module global shadows the builtin
    try:
        yield
    finally:
        if previous is None:
            delattr(module, name)
        else:
            setattr(module, name, previous)
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


def _table_path(name: str) -> str | None:
    folder = user_cache_folder()
    if not folder:
        return None
    return os.path.join(folder, "compiled", f"{name}-{sys.implementation.cache_tag}.marshal")


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
        make_user_cache_part(folder)
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
