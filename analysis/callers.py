"""Who calls a function of one workspace file from the others: the reverse of the imports that
``workspace.py`` follows forward.

An evaluation helper in `utils.py` does not say whether grad is on where it runs; `train.py`, which
calls it inside `with torch.no_grad():` or in the loop that steps the optimizer, does. The rules ask
this index for the calls of a function (or of a method, by its name) in the workspace's other files:
each file's text is searched for the name followed by `(` first, and only a file that calls the name
and imports the defining file is analysed, as an import target is (``Workspace.analysis_of``: bounded,
cached by its (mtime, size)). Nothing is imported or run.

Limits: the files listed under the workspace roots (``MAX_FILES`` of them, hidden folders, virtual
environments and build output left out), at most ``MAX_CALLER_FILES`` analysed for one name; a call
through a value passed around (a callback, a registry) is not found. The files found are recorded
as read by the checked file (a result kept across runs is checked again when one changes); a file
that does not call the name yet and starts to is seen when the workspace is listed again (a new
batch run; in the server, after a file is saved).
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import libcst as cst

from .dependencies import unrecorded
from .values import MODEL

if TYPE_CHECKING:
    from .flow import CallEvent
    from .module import ModuleAnalysis
    from .summary import ClassInfo, FunctionInfo, ModuleSummary
    from .workspace import Workspace

T = TypeVar("T")

# Python files listed under the workspace roots; a larger tree is read up to this many.
MAX_FILES = 5000
# Files analysed to answer one question (the first ones in path order): each is a full parse.
MAX_CALLER_FILES = 12
# A file larger than this is not read for its calls (generated code, vendored blobs).
MAX_CALLER_BYTES = 1_000_000
# Folders that hold no project code: environments, caches, build output.
_SKIPPED_FOLDERS = frozenset({
    "__pycache__", "node_modules", "site-packages", "build", "dist", "venv", "env", ".venv",
})


class CallerIndex:
    """The workspace's files that call a name, found in their text; those that import the defining file,
    analysed on demand."""

    def __init__(self, workspace: Workspace) -> None:
        self._workspace = workspace
        self._listed: list[Path] | None = None
        # The answers given, until the workspace is listed again: the server asks at each key.
        self._answers: dict[tuple[Path, str, bool, bool], tuple[tuple[ModuleAnalysis, CallEvent], ...]] = {}
        # Each name a class statement of a listed file names among its bases -> those files (read once a listing).
        self._bases_named: dict[str, list[Path]] | None = None
        self._subclassing: dict[tuple[Path, str], tuple[ModuleAnalysis, ...]] = {}
        self._lock = threading.RLock()

    def forget(self) -> None:
        """List the files again at the next question (a file was saved, created or renamed)."""
        with self._lock:
            self._listed = None
            self._answers.clear()
            self._bases_named = None
            self._subclassing.clear()

    def calls_of(self, defined_in: Path, name: str, *, method: bool,
                 constructs: bool = False) -> tuple[tuple[ModuleAnalysis, CallEvent], ...]:
        """The calls of ``name`` in the other workspace files that import ``defined_in``: a call resolved
        to that file's function of this name, (``method``) any call of a method of this name, or
        (``constructs``) a construction of that file's class of this name."""
        defined_in = defined_in.resolve()
        key = (defined_in, name, method, constructs)
        with self._lock:
            if key not in self._answers:
                with unrecorded():  # other files: nothing here is a read of the file being checked
                    self._answers[key] = tuple(self._find(defined_in, name, method=method, constructs=constructs))
            return self._answers[key]

    def modules_subclassing(self, defined_in: Path, name: str) -> tuple[ModuleAnalysis, ...]:
        """The analyses of the other workspace files that import ``defined_in`` and hold a class statement naming
        ``name`` among its bases (``class T(BaseTrainer):``, ``class T(base.BaseTrainer, Mixin):``)."""
        defined_in = defined_in.resolve()
        with self._lock:
            if (defined_in, name) not in self._subclassing:
                with unrecorded():
                    self._subclassing[defined_in, name] = tuple(self._subclassing_files(defined_in, name))
            return self._subclassing[defined_in, name]

    def _subclassing_files(self, defined_in: Path, name: str):
        if self._bases_named is None:
            self._bases_named = self._read_bases()
        paths = [path for path in self._bases_named.get(name, ()) if path != defined_in]
        for path in paths[:MAX_CALLER_FILES]:
            module = self._workspace.analysis_of(str(path))
            if module is not None and _imports(self._workspace, module.summary, defined_in):
                yield module

    def _read_bases(self) -> dict[str, list[Path]]:
        """Every name the listed files' class statements name among their bases, with the files: one read of
        each file, where a question a class asks would read them all again."""
        named: dict[str, list[Path]] = {}
        for path in self._files():
            data = _bounded_bytes(path)
            for bases in _CLASS_BASES.findall(data) if b"class" in data else ():
                for base in set(_BASE_NAME.findall(bases)):
                    named.setdefault(base.decode(), []).append(path)
        return named

    def _find(self, defined_in: Path, name: str, *, method: bool, constructs: bool):
        analysed = 0
        for path in self._files():
            if path == defined_in or not self._calls_name(path, name):
                continue
            if analysed == MAX_CALLER_FILES:
                return
            analysed += 1
            module = self._workspace.analysis_of(str(path))
            if module is None or not constructs and not _imports(self._workspace, module.summary, defined_in):
                continue  # a construction is resolved to its class, through a package too (`opennre.model.SoftmaxNN`)
            for call in module.all_calls():
                if _constructs(self._workspace, module, call, defined_in, name) if constructs else _calls(call, defined_in, name, method=method):
                    yield module, call

    def _files(self) -> list[Path]:
        if self._listed is None:
            listed: list[Path] = []
            for root in self._workspace.roots:
                for folder, folders, files in os.walk(root):
                    folders[:] = sorted(f for f in folders if not f.startswith(".") and f not in _SKIPPED_FOLDERS)
                    listed.extend(Path(folder, file).resolve() for file in sorted(files) if file.endswith(".py"))
                    if len(listed) >= MAX_FILES:
                        break
            self._listed = list(dict.fromkeys(listed))[:MAX_FILES]
        return self._listed

    def _calls_name(self, path: Path, name: str) -> bool:
        """Whether the file's text has ``name`` followed by ``(``: read as bytes, searched as a substring
        first (the files are read again for each new question; the answers are kept)."""
        data = _bounded_bytes(path)
        encoded = name.encode()
        return encoded in data and re.search(rb"\b" + re.escape(encoded) + rb"\s*\(", data) is not None


# A class statement's bases (the literal first: searched for fast), and the last part of each name in them.
_CLASS_BASES = re.compile(rb"class[ \t]+\w+[ \t]*\(([^)]*)\)")
_BASE_NAME = re.compile(rb"(\w+)[ \t]*(?:\[[^\]]*\][ \t]*)?(?=,|$|\s)")


def _bounded_bytes(path: Path) -> bytes:
    """The file's bytes; nothing for a file too large or not a regular file, or one that cannot be read."""
    from .files import UnreadableFile, read_bounded

    try:
        return read_bounded(path, MAX_CALLER_BYTES)
    except (OSError, UnreadableFile, ValueError):
        return b""


def callers_elsewhere(summary: ModuleSummary, info: FunctionInfo, read: Callable[[ModuleAnalysis, CallEvent], T]) -> list[T]:
    """What ``read`` says of each call of ``info`` (a function or method of the checked file) in the
    workspace's other files, in path order; empty outside a workspace. The files are recorded as read
    by the checked file, and ``read`` runs unrecorded (it reads another file's analysis)."""
    return _read_elsewhere(summary, info.name, read, method=info.owner is not None, constructs=False)


def callers_further(summary: ModuleSummary, defined_in: str, info: FunctionInfo,
                    read: Callable[[ModuleAnalysis, CallEvent], T]) -> list[T]:
    """As ``callers_elsewhere`` for a function of another workspace file (``defined_in``, a file found calling the
    checked file's function): its calls in the files other than its own, recorded as read by the checked file, whose
    verdict now depends on them (a caller's caller)."""
    return _read_elsewhere(summary, info.name, read, method=info.owner is not None, constructs=False, defined_in=defined_in)


def constructions_elsewhere(summary: ModuleSummary, info: ClassInfo, read: Callable[[ModuleAnalysis, CallEvent], T]) -> list[T]:
    """What ``read`` says of each construction of ``info`` (a class of the checked file: ``Predictor(model)``,
    ``opennre.model.SoftmaxNN(encoder, ...)``) in the workspace's other files, as ``callers_elsewhere``."""
    return _read_elsewhere(summary, info.name, read, method=False, constructs=True)


def _read_elsewhere(summary: ModuleSummary, name: str, read: Callable[[ModuleAnalysis, CallEvent], T], *,
                    method: bool, constructs: bool, defined_in: str | None = None) -> list[T]:
    workspace = summary.workspace
    defined_in = defined_in or summary.path
    if workspace is None or defined_in is None:
        return []
    found = workspace.caller_index().calls_of(Path(defined_in), name, method=method, constructs=constructs)
    results = []
    with unrecorded():
        for module, call in found:
            if module.summary.path != summary.path:  # a caller's caller may be in the checked file itself
                summary.note_caller_file(module.summary.path)
            results.append(read(module, call))
    return results


def _imports(workspace: Workspace, summary: ModuleSummary, target: Path) -> bool:
    """Whether one of the file's imports leads to ``target``: ``import utils``, ``from .predict import
    Predictor``, ``from utils import *``, or a name a package's ``__init__`` re-exports from it."""
    if any(workspace.find_module(summary.path, star) == str(target) for star in summary.stars):
        return True
    for imported in summary.imports.values():
        module_name, _, _ = imported.rpartition(".")
        for candidate in (imported, module_name):
            if candidate and workspace.find_module(summary.path, candidate) == str(target):
                return True
        if module_name:
            found = workspace.resolve_class(summary.path, imported) or workspace.resolve_function(summary.path, imported)
            if found is not None and found.home is not None and Path(found.home.path) == target:
                return True
    return False


def _constructs(workspace: Workspace, module: ModuleAnalysis, call: CallEvent, defined_in: Path, name: str) -> bool:
    """Whether the call builds ``defined_in``'s class ``name`` (imported by any path: ``opennre.model.SoftmaxNN``)."""
    callee = call.callee
    if callee is None or call.function is not None or callee.rpartition(".")[2] != name:
        return False
    found = workspace.resolve_class(module.summary.path, callee) if module.summary.path is not None else None
    return found is not None and found.name == name and found.home is not None and Path(found.home.path).resolve() == defined_in


def _calls(call: CallEvent, defined_in: Path, name: str, *, method: bool) -> bool:
    function = call.function
    if function is not None:
        return function.name == name and function.home is not None and Path(function.home.path).resolve() == defined_in
    return method and call.method == name


def arguments_elsewhere(summary: ModuleSummary, info: FunctionInfo, parameter: str) -> list[tuple[CallEvent, cst.BaseExpression]] | None:
    """The expression each call of ``info`` in the workspace's other files hands its ``parameter`` (by keyword or
    by position), with the call (its scope evaluates it); None when one of them hides it (``*args``) or leaves it
    at its default. A method's name called on a model of another class (``net.train()`` beside
    ``LocalUpdate(args).train(net=...)``) is not a call of the method."""
    positional = info.positional_parameters
    index = positional.index(parameter) if parameter in positional else None

    def read(module: ModuleAnalysis, call: CallEvent) -> tuple[tuple[CallEvent, cst.BaseExpression], ...] | None:
        receiver = call.receiver
        if call.function is None and info.owner is not None and receiver is not None and MODEL in receiver.tags \
                and _of_another_class(receiver.detail, info.owner):
            return ()
        argument = argument_at(call.node, parameter, index)
        return None if argument is None else ((call, argument),)

    found = callers_elsewhere(summary, info, read)
    if any(item is None for item in found):
        return None
    return [passed for item in found if item is not None for passed in item]


def argument_at(call: cst.Call, name: str, index: int | None) -> cst.BaseExpression | None:
    """The expression a call passes for parameter ``name`` (by keyword, or at positional ``index``); None when
    it does not pass it or hides it behind ``*args``/``**kwargs``."""
    position = 0
    for arg in call.args:
        if arg.star:
            return None
        if arg.keyword is not None:
            if arg.keyword.value == name:
                return arg.value
            continue
        if position == index:
            return arg.value
        position += 1
    return None


def _of_another_class(detail: object, owner: ClassInfo) -> bool:
    """Whether a model's known class (a library's, by name; a workspace class) is not ``owner``."""
    if isinstance(detail, str) or isinstance(detail, tuple) and detail and detail[0] == "sequential":
        return True
    return getattr(detail, "name", owner.name) != owner.name
