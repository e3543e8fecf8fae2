"""Definitions imported from the user's other files: a model class in `model.py`, a loader factory
in `data.py`, an evaluation helper in `utils.py`.

An import whose target is a file of the workspace (next to the importing file, under a workspace
root, or under its `src/`) is resolved to that file's own analysis, so the rules see the class's
`forward`, its layers, what the function returns and what it calls. Files are parsed on first use
and kept while their modification time and size stay the same. Nothing is imported or run; an
import that does not lead to a workspace file stays unknown, which is never a finding on its own.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from .lines import normalize_line_breaks

if TYPE_CHECKING:
    from .callers import CallerIndex
    from .module import ModuleAnalysis
    from .summary import ClassInfo, FunctionInfo

# Files larger than this are not read to resolve an import (generated code, vendored blobs).
MAX_RESOLVED_BYTES = 2_000_000
# How many imports deep a chain of resolutions may go (model.py importing layers.py importing ...).
MAX_DEPTH = 3

Stamp = tuple[int, int]  # (mtime_ns, size)


class Workspace:
    """The files that imports may resolve to, and their analyses."""

    def __init__(self, roots: list[Path] | tuple[Path, ...] = (), *, files_fixed: bool = False) -> None:
        """``files_fixed``: the files stay as they are while this workspace is used (one batch run,
        which reads the workspace as it is when it starts), so each file's (mtime, size) is read
        once and a module found once is not looked for on disk again; a file that changes during
        the run is then seen as it was first stat-ed, and the results cache records that, so the
        next run checks it again. The server's workspace (files change while it runs) reads them
        every time: an analysis then sees what is on disk."""
        self.roots = tuple(dict.fromkeys(Path(root).resolve() for root in roots))
        # Every stamp read, by path, when the files are fixed; None: read them each time.
        self._stamps: dict[str, Stamp | None] | None = {} if files_fixed else None
        self._modules: dict[Path, tuple[Stamp, ModuleAnalysis]] = {}
        self._resolving: set[Path] = set()
        self._files: dict[tuple[Path, str], Path | None] = {}  # (importing folder, module) -> file
        # Every module each importing file looked for, and the file it got (None: not a workspace file),
        # so a result kept across runs can name everything it read (see dependencies()).
        self._lookups: dict[Path, dict[str, Path | None]] = {}
        # A checked file whose check used its analysis as an import target (checked_analysis): the
        # path it was checked under -> the resolved path that analysis looked up imports from.
        self._checked_as: dict[Path, Path] = {}
        # The files whose calls of a checked file's functions an analysis of it read (analysis/callers.py).
        self._callers_read: dict[Path, set[Path]] = {}
        self._caller_index: CallerIndex | None = None
        self._lock = threading.RLock()

    # ------------------------------------------------------------------ lookups
    def resolve_class(self, importer: str, target: str, depth: int = 0) -> ClassInfo | None:
        from .names import star_target  # here: the server starts without libcst, which names.py imports

        found = self._definition(importer, target, depth)
        if found is None:
            return None
        module, name = found
        info = module.summary.classes.get(name)
        if info is None and name in module.summary.imports:  # re-exported: `from .layers import Net`
            return self.resolve_class(module.summary.path, module.summary.imports[name], depth + 1)
        for star in reversed(module.summary.stars if info is None else ()):  # re-exported: `from .layers import *`
            info = self.resolve_class(module.summary.path, star_target(star, name), depth + 1)
            if info is not None:
                break
        return info

    def resolve_function(self, importer: str, target: str, depth: int = 0) -> FunctionInfo | None:
        from .names import star_target  # here: the server starts without libcst, which names.py imports

        found = self._definition(importer, target, depth)
        if found is None:
            return None
        module, name = found
        info = module.summary.functions.get(name)
        if info is None and name in module.summary.imports:
            return self.resolve_function(module.summary.path, module.summary.imports[name], depth + 1)
        for star in reversed(module.summary.stars if info is None else ()):
            info = self.resolve_function(module.summary.path, star_target(star, name), depth + 1)
            if info is not None:
                break
        return info

    def star_imported_name(self, importer: str, target: str, depth: int = 0) -> tuple[str, str] | None:
        """When the module of ``target`` (``utils.F``) binds its last name by an import (``import
        torch.nn.functional as F``) and a star import of it copies that name (no ``__all__`` leaves it
        out): the dotted name it stands for and the file that says so. None otherwise."""
        from .names import star_target  # here: the server starts without libcst, which names.py imports

        found = self._definition(importer, target, depth)
        if found is None:
            return None
        module, name = found
        summary = module.summary
        if name.startswith("_") or not summary.star_exports(name):
            return None
        if name in summary.imports:
            return summary.imports[name], summary.path
        if name in summary.functions or name in summary.classes or name in summary.bindings:
            return None
        for star in reversed(summary.stars):  # passed on: `from .common import *` in the module itself
            passed = self.star_imported_name(summary.path, star_target(star, name), depth + 1)
            if passed is not None:
                return passed
        return None

    def checked_analysis(self, path: str, text: str) -> ModuleAnalysis | None:
        """The analysis of a file to be checked, when an import elsewhere already led to that file in
        this process and it still holds ``text``: a batch run then parses and analyses each file once,
        not once per role. Its findings are reported under ``path``. None otherwise (then the caller
        analyses ``text`` itself), and for a path that reaches its file through a symbolic link,
        whose imports would be looked up from another folder."""
        if not self._modules:
            return None
        given = Path(path).absolute()
        resolved = given.resolve()
        if resolved != given:
            return None
        with self._lock:
            cached = self._modules.get(resolved)
            if cached is None or cached[0] != self._stamp(resolved) or cached[1].text != normalize_line_breaks(text):
                return None
            module = cached[1]
            module.path = path
            self._checked_as[Path(path)] = resolved
            return module

    def analysis_of(self, path: str) -> ModuleAnalysis | None:
        """The analysis of a workspace file a definition was resolved in (``ClassInfo.home.path``), read
        as any resolved file is: bounded, cached by its stamp; None when it cannot be read."""
        return self._analysis(Path(path), 0)

    def forget_lookups(self) -> None:
        """Look on disk again for modules not found before (a file was created or renamed), and for
        the files that call a checked file's functions."""
        with self._lock:
            self._files = {key: path for key, path in self._files.items() if path is not None}
            index = self._caller_index
        if index is not None:  # outside this lock: the index holds its own while it analyses files, which takes this one
            index.forget()

    def caller_index(self) -> CallerIndex:
        """Where the workspace's files call the functions of a file (built on first use)."""
        from .callers import CallerIndex

        with self._lock:
            if self._caller_index is None:
                self._caller_index = CallerIndex(self)
            return self._caller_index

    def note_caller_read(self, importer: str, caller: str) -> None:
        """An analysis of ``importer`` read how ``caller`` calls one of its functions: a dependency."""
        with self._lock:
            self._callers_read.setdefault(Path(importer), set()).add(Path(caller))

    def stamps(self, paths) -> dict[str, Stamp | None]:
        return {path: self._stamp(path) for path in paths}

    def dependencies(self, importer: str) -> dict[str, tuple[Stamp | None, list[tuple[str, str | None]]]]:
        """What an analysis of ``importer`` read of the workspace, directly or through the files its
        imports led to: for ``importer`` and each file reached, its (mtime, size) when it was
        analysed and every module looked for from it with the file found (None: no workspace file).
        While each lookup finds the same file again (:meth:`find_module`) and each stamp is the
        same, so is what the imports mean. A file's lookups include what other importers in this
        process asked of it: more than needed, never less."""
        found_files: dict[str, tuple[Stamp | None, list[tuple[str, str | None]]]] = {}
        pending = [Path(importer)]
        with self._lock:
            while pending:
                current = pending.pop()
                looked_up_from = self._checked_as.get(current, current)
                lookups = sorted((name, str(path) if path is not None else None)
                                 for name, path in self._lookups.get(looked_up_from, {}).items())
                cached = self._modules.get(current)
                found_files[str(current)] = (cached[0] if cached is not None else self._stamp(current), lookups)
                callers = sorted(str(path) for path in self._callers_read.get(current, ()))
                for path in [path for _, path in lookups] + callers:
                    if path is not None and path not in found_files:
                        found_files[path] = (None, [])  # a placeholder until it is visited
                        pending.append(Path(path))
        return found_files

    def find_module(self, importer: str, module_name: str) -> str | None:
        """The workspace file an import of ``module_name`` in ``importer`` leads to now, as the analysis looks for it."""
        found = self._module_file(Path(importer), module_name)
        return str(found) if found is not None else None

    # ------------------------------------------------------------------ resolution
    def _definition(self, importer: str, target: str, depth: int) -> tuple[ModuleAnalysis, str] | None:
        """The module that defines ``target`` (``model.Net``, ``.model.Net``, ``pkg.nets.Net``) and the name in it."""
        if depth > MAX_DEPTH or "." not in target:
            return None
        module_name, _, name = target.rpartition(".")
        path = self._module_file(Path(importer), module_name)
        if path is None:
            return None
        module = self._analysis(path, depth)
        return (module, name) if module is not None else None

    def _module_file(self, importer: Path, module_name: str) -> Path | None:
        key = (importer.parent, module_name)
        if key not in self._files:
            self._files[key] = self._find_module_file(importer, module_name)
        found = self._files[key]
        if found is not None and self._stamps is None and not found.is_file():  # deleted since it was found
            found = None
        self._lookups.setdefault(importer, {})[module_name] = found
        return found

    def _find_module_file(self, importer: Path, module_name: str) -> Path | None:
        if not module_name.strip("."):
            return None
        if module_name.startswith("."):
            level = len(module_name) - len(module_name.lstrip("."))
            base = importer.parent
            for _ in range(level - 1):
                base = base.parent
            return _file_for(base, module_name.lstrip(".").split("."))
        parts = module_name.split(".")
        for base in (importer.parent, *self.roots, *(root / "src" for root in self.roots)):
            found = _file_for(base, parts)
            if found is not None:
                return found
        return None

    def _analysis(self, path: Path, depth: int) -> ModuleAnalysis | None:
        from .engine import DecodeError, decode_source
        from .files import UnreadableFile, read_bounded
        from .module import ModuleAnalysis

        stamp = self._stamp(path)
        if stamp is None or stamp[1] > MAX_RESOLVED_BYTES:
            return None
        with self._lock:
            cached = self._modules.get(path)
            if cached is not None and cached[0] == stamp:
                return cached[1]
            if path in self._resolving:
                return None  # an import cycle
            self._resolving.add(path)
            try:
                text = decode_source(read_bounded(path, MAX_RESOLVED_BYTES))  # a FIFO or a device never blocks
                module = ModuleAnalysis(text, str(path), workspace=self, foreign=True)
            except (OSError, UnreadableFile, DecodeError, ValueError, RecursionError):
                return None
            finally:
                self._resolving.discard(path)
            self._modules[path] = (stamp, module)
            return module

    def _stamp(self, path: Path | str) -> Stamp | None:
        if self._stamps is None:
            return _stamp(path)
        key = str(path)
        stamp = self._stamps.get(key, _UNREAD)
        if stamp is _UNREAD:
            stamp = self._stamps[key] = _stamp(path)
        return stamp  # type: ignore[return-value]


_UNREAD = object()  # a path whose stamp a fixed-files workspace has not read yet


def _file_for(base: Path, parts: list[str]) -> Path | None:
    candidate = base.joinpath(*parts)
    for path in (candidate.with_name(candidate.name + ".py"), candidate / "__init__.py"):
        if path.is_file():
            return path.resolve()
    return None


def _stamp(path: Path | str) -> Stamp | None:
    try:
        status = os.stat(path)
    except OSError:
        return None
    return (status.st_mtime_ns, status.st_size)
