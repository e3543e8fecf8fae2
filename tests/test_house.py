"""The package's shape: the tests run on the installed package, no module edits the import path, none
imports itself back through others, and none outside the rules grows past 900 lines.

An import inside a function counts like one at the top: it runs the first time the function does, and a
loop closed that way is the same loop, only found later (issue 35: the dataflow walk and the module
summary imported each other from inside functions). Imports under ``if TYPE_CHECKING:`` never run and
are left out. The modules are those pyproject.toml puts in the package, read with ``ast``, never
imported.
"""

from __future__ import annotations

import ast
from pathlib import Path

from package_layout import ROOT, package_modules

MAX_LINES = 900
# The rules are each one file on purpose: a rule's checks, examples and fixes read together.
LONG_MODULES_ALLOWED_UNDER = "trainlint.analysis.rules."


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    """Every import statement that can run, at any depth (in functions and methods too), leaving out
    the bodies of ``if TYPE_CHECKING:``."""
    found: list[ast.Import | ast.ImportFrom] = []
    pending: list[ast.AST] = [tree]
    while pending:
        node = pending.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found.append(node)
        elif isinstance(node, ast.If) and _is_type_checking(node.test):
            pending.extend(node.orelse)
            continue
        pending.extend(ast.iter_child_nodes(node))
    return found


def import_graph(modules: dict[str, Path]) -> dict[str, set[str]]:
    """Module -> the modules of ``modules`` it imports (``from .x import y`` imports ``x``, or the module
    ``x.y`` where y is one)."""

    def known(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        targets: set[str] = set()
        for node in _imports(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                candidates = [alias.name for alias in node.names]
            else:
                base = node.module or ""
                if node.level:
                    parts = package.split(".")
                    parts = parts[: len(parts) - (node.level - 1)]
                    base = ".".join([*parts, *([node.module] if node.module else [])])
                candidates = [f"{base}.{alias.name}" for alias in node.names]
            targets.update(found for found in map(known, candidates) if found is not None)
        targets.discard(name)
        graph[name] = targets
    return graph


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan's algorithm, iteratively)."""
    index: dict[str, int] = {}
    lowest: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = lowest[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, targets = work[-1]
            target = next(targets, None)
            if target is not None:
                if target not in index:
                    index[target] = lowest[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(sorted(graph.get(target, ())))))
                elif target in on_stack:
                    lowest[node] = min(lowest[node], index[target])
                continue
            work.pop()
            if work:
                lowest[work[-1][0]] = min(lowest[work[-1][0]], lowest[node])
            if lowest[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    cycles.append(sorted(group))
    return cycles


def test_no_module_imports_itself_back():
    graph = import_graph(package_modules(ROOT))
    assert graph["trainlint.analysis.flow"], "the graph holds the package's imports"
    assert import_cycles(graph) == []


def test_no_long_module_outside_the_rules():
    modules = package_modules(ROOT)
    long = {
        name: lines for name, path in modules.items()
        if (lines := len(path.read_text().splitlines())) > MAX_LINES and not name.startswith(LONG_MODULES_ALLOWED_UNDER)
    }
    assert "trainlint.analysis.rules.retained_graph" in modules, "the rules are among the modules read"
    assert long == {}


def test_a_loop_closed_inside_a_function_is_found(tmp_path):
    """What the checks above rest on: a function's import counts, a TYPE_CHECKING one does not."""
    (tmp_path / "pyproject.toml").write_text(
        '[tool.setuptools]\npackages = ["pkg"]\npackage-dir = { "pkg" = "src" }\n'
    )
    source = tmp_path / "src"
    source.mkdir()
    (source / "__init__.py").write_text("")
    (source / "walk.py").write_text("from .facts import Facts\n")
    (source / "facts.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .shown import Shown\n\n"
        "class Facts:\n    def walk(self):\n        from . import walk\n        return walk\n"
    )
    (source / "shown.py").write_text("from pkg.facts import Facts\n")
    graph = import_graph(package_modules(tmp_path))
    assert graph == {"pkg": set(), "pkg.facts": {"pkg.walk"}, "pkg.shown": {"pkg.facts"}, "pkg.walk": {"pkg.facts"}}
    assert import_cycles(graph) == [["pkg.facts", "pkg.walk"]]


def test_the_tests_import_the_installed_package():
    """pyproject.toml maps analysis/, estimator/ and server/ into the package only as it installs: the
    tests run on the install (the Makefile's strict editable one links the mapped tree into build/), not
    on the checkout's trainlint/ folder, and the package searches no other folder."""
    import trainlint
    import trainlint.analysis
    import trainlint.estimator
    import trainlint.server

    package = Path(trainlint.__file__).parent
    assert package != ROOT / "trainlint", "the checkout's trainlint/ folder was imported, not the install"
    assert list(trainlint.__path__) == [str(package)]
    for subpackage in (trainlint.analysis, trainlint.estimator, trainlint.server):
        assert Path(subpackage.__file__).parent.parent == package


def test_no_package_edits_the_import_path():
    """No ``__init__.py`` of the package touches its ``__path__`` or ``sys.path``: what Python finds is what
    pyproject.toml installs, wherever it runs."""
    inits = {name: path for name, path in package_modules(ROOT).items() if path.name == "__init__.py"}
    edits = [
        f"{path.relative_to(ROOT)}:{node.lineno}"
        for path in inits.values()
        for node in ast.walk(ast.parse(path.read_text(), str(path)))
        if (isinstance(node, ast.Name) and node.id == "__path__")
        or (isinstance(node, ast.Attribute) and node.attr == "path" and ast.unparse(node.value) == "sys")
    ]
    assert "trainlint" in inits and "trainlint.analysis" in inits
    assert edits == []
