"""How library classes are read from the installed packages' source: never imported, never run.

A class name is found through a per-package index of top-level ``class`` statements (lazy
``__init__`` files, as transformers and diffusers use, defeat import-following); its file is parsed
with :mod:`ast` and its bases are followed (across packages) to ``torch.nn.Module``; a ``__call__``
decorated ``@torch.no_grad()`` or ``@torch.inference_mode()`` anywhere in its bases makes it a
grad-free callable. Answers are memoised per name for the life of the process, and each package's
index is kept on disk (see :func:`cache_folder`) keyed by its version and mtime. When a package is
not installed, :func:`trainlint.analysis.libraries.table_kind` answers from the documented facts.

jedi was the first candidate; on this project's machines it took 10 s to infer one diffusers name
and 95 s for one transformers name (it follows every star import of their lazy ``__init__`` files),
far from the milliseconds an editor keystroke allows.
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import re
import sys
import threading
from pathlib import Path

from .files import make_user_cache_part, user_cache_folder
from .libraries import MODULE, OTHER, PIPELINE, PIPELINE_BASES, ClassKind, table_kind

_MODULE_ROOTS = frozenset({"torch.nn.Module", "torch.nn.modules.module.Module"})
_NO_GRAD_DECORATORS = frozenset({
    "torch.no_grad", "torch.inference_mode", "torch.autograd.no_grad", "torch.autograd.grad_mode.no_grad",
    "torch.autograd.grad_mode.inference_mode", "no_grad", "inference_mode",
})
# Classes above this many base hops are not followed further (real hierarchies are 3–6 deep).
_MAX_DEPTH = 12
# A package file larger than this is not parsed (generated tables, vendored blobs).
_MAX_FILE_BYTES = 3_000_000
_CLASS_LINE = re.compile(rb"^class[ \t]+(\w+)", re.M)
_INDEX_FORMAT = 1


def cache_folder() -> Path | None:
    """Where package indexes are kept between runs: $TRAINLINT_CACHE_DIR, else the user's cache folder."""
    folder = user_cache_folder()
    return Path(folder) / "libraries" if folder else None


def library_paths() -> tuple[Path, ...]:
    """Folders installed packages live in: this interpreter's site-packages and an active virtualenv's.

    Never the working directory or a folder of the user's project: those hold the user's code,
    which the workspace resolver reads, and which must not pass for a library.
    """
    found: list[Path] = []
    candidates = list(sys.path)
    virtual_env = os.environ.get("VIRTUAL_ENV")
    if virtual_env:
        lib = Path(virtual_env) / "lib"
        candidates.extend(str(path) for path in sorted(lib.glob("python3*/site-packages")) if lib.is_dir())
    for entry in candidates:
        if entry and os.path.basename(entry.rstrip("/\\")) in {"site-packages", "dist-packages"} and os.path.isdir(entry):
            path = Path(entry)
            if path not in found:
                found.append(path)
    return tuple(found)


class _Package:
    """One installed top-level package: where its classes are defined."""

    def __init__(self, root: Path) -> None:
        self.root = root  # the package folder (…/site-packages/diffusers)
        self._classes: dict[str, list[str]] | None = None
        self._lock = threading.Lock()

    def files_defining(self, name: str) -> list[str]:
        with self._lock:
            if self._classes is None:
                self._classes = self._load_index()
        return self._classes.get(name, [])

    def _stamp(self) -> str:
        version = ""
        for info in self.root.parent.glob(f"{self.root.name}-*.dist-info"):
            version = info.name
        try:
            mtime = self.root.stat().st_mtime_ns
        except OSError:
            mtime = 0
        return f"{_INDEX_FORMAT}:{self.root}:{version}:{mtime}"

    def _load_index(self) -> dict[str, list[str]]:
        stamp = self._stamp()
        folder = cache_folder()
        cached = folder / (hashlib.sha256(stamp.encode()).hexdigest()[:24] + ".json") if folder else None
        if cached is not None:
            try:
                data = json.loads(cached.read_text(encoding="utf-8"))
                if data.get("stamp") == stamp:
                    return data["classes"]
            except (OSError, ValueError, KeyError, TypeError):
                pass
        classes: dict[str, list[str]] = {}
        for folder_path, folders, files in os.walk(self.root):
            folders[:] = sorted(name for name in folders if not name.startswith((".", "__pycache__")))
            for file_name in sorted(files):
                # dummy_*.py files hold placeholders raising ImportError for missing extras
                if not file_name.endswith(".py") or file_name.startswith("dummy_"):
                    continue
                path = os.path.join(folder_path, file_name)
                try:
                    with open(path, "rb") as handle:
                        data = handle.read(_MAX_FILE_BYTES + 1)
                except OSError:
                    continue
                if len(data) > _MAX_FILE_BYTES:
                    continue
                relative = os.path.relpath(path, self.root.parent)
                for match in _CLASS_LINE.finditer(data):
                    classes.setdefault(match.group(1).decode("ascii", "replace"), []).append(relative)
        if cached is not None:
            try:
                make_user_cache_part(cached.parent)
                temporary = cached.with_suffix(f".{os.getpid()}.tmp")
                temporary.write_text(json.dumps({"stamp": stamp, "classes": classes}), encoding="utf-8")
                os.replace(temporary, cached)
            except OSError:
                pass  # a read-only cache folder only costs the next run the scan again
        return classes


class _SourceFile:
    """A library file's top-level classes and what its imports bind, from :mod:`ast`."""

    def __init__(self, module: str, tree: ast.Module, relative: str) -> None:
        self.module = module  # dotted module name of the file
        self.relative = relative  # path under site-packages, for evidence
        self.classes = {node.name: node for node in tree.body if isinstance(node, ast.ClassDef)}
        self.imports: dict[str, str] = {}
        package = module if relative.endswith("__init__.py") else module.rpartition(".")[0]
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.asname:
                        self.imports[alias.asname] = alias.name
                    else:
                        head = alias.name.split(".", 1)[0]
                        self.imports.setdefault(head, head)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")
                    anchor = parts[: len(parts) - (node.level - 1)] if node.level > 1 else parts
                    base = ".".join([*anchor, base]) if base else ".".join(anchor)
                for alias in node.names:
                    if alias.name != "*":
                        self.imports.setdefault(alias.asname or alias.name, f"{base}.{alias.name}")

    def canonical(self, dotted_name: str) -> str:
        head, dot, rest = dotted_name.partition(".")
        if head in self.imports:
            return self.imports[head] + dot + rest
        if head in self.classes:
            return f"{self.module}.{dotted_name}"
        return dotted_name


def _dotted(node: ast.expr) -> str | None:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Call):  # `@torch.no_grad()` is a call of the name
        return _dotted(node.func) if not parts else None
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return ".".join(reversed(parts))


class LibraryIndex:
    """Kinds of library classes, from the installed source or else the table; thread-safe."""

    def __init__(self, paths: tuple[Path, ...] | None = None) -> None:
        self._paths = library_paths() if paths is None else tuple(paths)
        self._packages: dict[str, _Package | None] = {}
        self._files: dict[str, _SourceFile | None] = {}
        self._answers: dict[str, ClassKind | None] = {}  # source, else table
        self._source_kinds: dict[str, ClassKind | None] = {}  # source alone
        self._lock = threading.RLock()

    def class_kind(self, canonical: str) -> ClassKind | None:
        """What the class named ``canonical`` (``diffusers.StableDiffusionPipeline``) is; None when unknown."""
        if "." not in canonical:
            return None
        with self._lock:
            if canonical not in self._answers:
                found = self._source_kind(canonical, 0)
                if found is None or (found.kind == OTHER and canonical.rsplit(".", 1)[-1].startswith("Auto")):
                    # `AutoModel*`/`AutoPipeline*` classes are factories: what they build is in the table
                    found = table_kind(canonical) or found
                self._answers[canonical] = found
            return self._answers[canonical]

    def installed(self, top: str) -> bool:
        return self._package(top) is not None

    # -------------------------------------------------------------------------------- internals
    def _package(self, top: str) -> _Package | None:
        if top not in self._packages:
            self._packages[top] = None
            for base in self._paths:
                if (base / top / "__init__.py").is_file():
                    self._packages[top] = _Package(base / top)
                    break
        return self._packages[top]

    def _source_file(self, package: _Package, relative: str) -> _SourceFile | None:
        key = str(package.root.parent / relative)
        if key not in self._files:
            self._files[key] = None
            try:
                path = Path(key)
                if path.stat().st_size <= _MAX_FILE_BYTES:
                    tree = ast.parse(path.read_bytes(), filename=key)
                    module = relative[:-3].replace(os.sep, ".").removesuffix(".__init__")
                    self._files[key] = _SourceFile(module, tree, relative)
            except (OSError, SyntaxError, ValueError, RecursionError, MemoryError):
                pass
        return self._files[key]

    def _definition(self, canonical: str) -> tuple[_SourceFile, ast.ClassDef] | None:
        top = canonical.split(".", 1)[0]
        package = self._package(top)
        if package is None:
            return None
        found = self._follow_imports(package, canonical, 0)
        if found is not None:
            return found
        # not where the name says (a lazy `__init__`): the package's index of class statements,
        # the file the dotted name spells out first, then the shortest path (the defining module
        # rather than a copy in an example or a test folder)
        module_path, _, name = canonical.rpartition(".")
        spelled = module_path.replace(".", os.sep)
        ordered = sorted(package.files_defining(name), key=lambda rel: (not rel.startswith(spelled), len(rel), rel))
        for relative in ordered:
            source = self._source_file(package, relative)
            if source is not None and name in source.classes:
                return source, source.classes[name]
        return None

    def _follow_imports(self, package: _Package, canonical: str, hops: int) -> tuple[_SourceFile, ast.ClassDef] | None:
        """The class a dotted name spells, through the re-exports of the modules on the way."""
        module_path, _, name = canonical.rpartition(".")
        parts = module_path.split(".")
        if hops > 6 or parts[0] != package.root.name:
            return None
        base = package.root.parent.joinpath(*parts)
        for candidate in (base.with_name(base.name + ".py"), base / "__init__.py"):
            if candidate.is_file():
                source = self._source_file(package, str(candidate.relative_to(package.root.parent)))
                break
        else:
            return None
        if source is None:
            return None
        if name in source.classes:
            return source, source.classes[name]
        target = source.imports.get(name)
        if target is not None and target != canonical:
            return self._follow_imports(package, target, hops + 1)
        return None

    def _from_source(self, canonical: str, depth: int) -> ClassKind | None:
        if depth > _MAX_DEPTH:
            return None
        found = self._definition(canonical)
        if found is None:
            return None
        source, node = found
        where = f"{source.relative}:{node.lineno}"
        call = next((item for item in node.body if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and item.name == "__call__"), None)
        if call is not None:
            for decorator in call.decorator_list:
                name = _dotted(decorator)
                if name is not None and source.canonical(name) in _NO_GRAD_DECORATORS | {"torch." + n for n in ("no_grad", "inference_mode")}:
                    return ClassKind(PIPELINE, f"{source.relative}:{call.lineno}: `__call__` of `{node.name}` runs under `@{name}()`")
        inherited: list[ClassKind] = []
        for base in node.bases:
            name = _dotted(base)
            if name is None:
                continue
            resolved = source.canonical(name)
            kind = self._source_kind(resolved, depth + 1)
            if kind is not None:
                inherited.append(kind)
        for wanted in (MODULE, PIPELINE):
            kind = next((k for k in inherited if k.kind == wanted), None)
            if kind is not None:
                return ClassKind(wanted, f"{where}: `{node.name}` subclasses {kind.evidence}")
        return ClassKind(OTHER, f"{where}: `{node.name}` is neither an nn.Module nor a grad-free pipeline")

    def _source_kind(self, canonical: str, depth: int) -> ClassKind | None:
        if canonical in _MODULE_ROOTS:
            return ClassKind(MODULE, "`torch.nn.Module`")
        if canonical in PIPELINE_BASES:
            return ClassKind(PIPELINE, PIPELINE_BASES[canonical])
        if canonical not in self._source_kinds:
            self._source_kinds[canonical] = None  # a cycle through this name answers "unknown"
            self._source_kinds[canonical] = self._from_source(canonical, depth)
        return self._source_kinds[canonical]


_INDEX: LibraryIndex | None = None
_INDEX_LOCK = threading.Lock()


def library_index() -> LibraryIndex:
    """The process's one index (library source does not change while trainlint runs)."""
    global _INDEX
    with _INDEX_LOCK:
        if _INDEX is None:
            _INDEX = LibraryIndex()
        return _INDEX


def use_library_index(index: LibraryIndex | None) -> None:
    """Replace the process's index (tests point it at a folder of fake packages; None: rebuild)."""
    global _INDEX
    with _INDEX_LOCK:
        _INDEX = index
