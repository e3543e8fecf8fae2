#!/usr/bin/env python3
"""Metamorphic test of the rules: does a verdict survive a rewrite that keeps what the code does?

    .venv/bin/python -P benchmarks/shapes.py                        # every rule, every transformation
    .venv/bin/python -P benchmarks/shapes.py --rule TL102 --rule TL208 --json shapes.json
    .venv/bin/python -P benchmarks/shapes.py --transform into-main --show   # each changed verdict's example

Every registered rule's MUST_FIRE and MUST_NOT_FIRE examples are rewritten with LibCST by each
transformation below, and the original and the variant are analysed as the example tests analyse
them (``trainlint.rule_examples.own_findings``: the example alone, or as ``train.py`` of a project
holding its ``files``). A transformation that cannot rewrite an example exactly (a name read as a
global, a function passed as a value, ...) skips it. Per rule and transformation the table gives the
examples it applied to, the MUST_FIRE examples that fired at warning or error and stop doing so
(``lost``; of those, ``to note`` still give a note), the note-only MUST_FIRE examples that go silent
(``note lost``), and the MUST_NOT_FIRE examples that start reporting (``new``).

- ``rename``: local variables, parameters, module-level names and the functions and classes the
  example defines, with their uses, become ``v1``, ``fn_1``, ``Thing1``; never attributes (methods,
  names bound in a class body), keywords, ``self``/``cls``, imported or builtin names; a name passed
  as a keyword anywhere, or a parameter of a method of a class with a base from a library other
  than ``torch.nn`` (the library may pass it by keyword), is kept.
- ``into-main``: the module-level statements after the last import or definition (or the body of
  an ``if __name__ == "__main__":`` block there) go into ``def main():`` called under that guard;
  skipped when they bind a name that a function or class reads as a global.
- ``to-module``: the body of a parameterless module-level function called once, as a statement at
  module level (under the ``__main__`` guard or not), and named nowhere else, replaces that call (the
  guard too when it held only the call); skipped when the body returns, yields, declares a name
  global or binds a name another function reads as a global or the module binds.
- ``into-method``: each module-level function named only in calls (not decorated, not passed as a
  value, not named in another file) becomes the method of a small class of its own; each call
  becomes ``Thing().name(...)``.
- ``to-file``: the module-level functions that read no module-level name but imports, builtins and
  each other move to a second file of the project (``shapes_helpers.py``), which repeats the
  example's imports; the example imports them from there. The variant's verdict is what the rule reports on
  both files.
"""

from __future__ import annotations

import argparse
import builtins
import collections
import json
import sys
import tempfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import libcst as cst
import libcst.helpers
from libcst import metadata

from trainlint.analysis.engine import analyze_source
from trainlint.analysis.findings import Severity
from trainlint.analysis.registry import all_rules
from trainlint.analysis.rules.base import Fires, Rule
from trainlint.analysis.settings import AnalysisSettings
from trainlint.analysis.workspace import Workspace
from trainlint.rule_examples import own_findings

HELPERS = "shapes_helpers.py"
BUILTINS = frozenset(dir(builtins)) | {"__name__", "__file__", "__doc__", "__spec__", "__builtins__"}
KEPT_NAMES = frozenset({"self", "cls"})


class Skip(Exception):
    """The transformation cannot rewrite this example exactly."""


# --- reading a module ---------------------------------------------------------------------


def _scopes(module: cst.Module) -> tuple[metadata.MetadataWrapper, dict]:
    wrapper = metadata.MetadataWrapper(module, unsafe_skip_copy=True)
    return wrapper, wrapper.resolve(metadata.ScopeProvider)


def _global_reads_from_inner_scopes(module: cst.Module) -> set[str]:
    """Names that a function, lambda, comprehension or class body reads from the module's globals."""
    _, scopes = _scopes(module)
    read: set[str] = set()
    for scope in {scope for scope in scopes.values() if scope is not None}:
        if isinstance(scope, metadata.GlobalScope):
            continue
        for access in scope.accesses:
            if any(isinstance(referent.scope, metadata.GlobalScope) for referent in access.referents) or not access.referents:
                read.add(access.node.value if isinstance(access.node, cst.Name) else str(access.node))
    return read


def _imported_names(module: cst.Module) -> set[str]:
    names: set[str] = set()
    for node in _walk(module):
        if isinstance(node, cst.Import):
            for alias in node.names:
                names.add(_alias_name(alias))
        elif isinstance(node, cst.ImportFrom) and not isinstance(node.names, cst.ImportStar):
            for alias in node.names:
                names.add(_alias_name(alias))
    return names


def _alias_name(alias: cst.ImportAlias) -> str:
    if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
        return alias.asname.name.value
    return cst.helpers.get_full_name_for_node(alias.name).split(".")[0]


def _walk(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    yield node
    for child in node.children:
        yield from _walk(child)


def _is_main_guard(statement: cst.CSTNode) -> bool:
    if not isinstance(statement, cst.If) or statement.orelse is not None:
        return False
    test = statement.test
    return (
        isinstance(test, cst.Comparison) and isinstance(test.left, cst.Name) and test.left.value == "__name__"
        and len(test.comparisons) == 1 and isinstance(test.comparisons[0].operator, cst.Equal)
        and isinstance(test.comparisons[0].comparator, cst.SimpleString)
        and test.comparisons[0].comparator.evaluated_value == "__main__"
    )


def _is_definition(statement: cst.CSTNode) -> bool:
    if isinstance(statement, (cst.FunctionDef, cst.ClassDef)):
        return True
    return isinstance(statement, cst.SimpleStatementLine) and all(
        isinstance(small, (cst.Import, cst.ImportFrom)) for small in statement.body
    )


def _is_docstring(statement: cst.CSTNode) -> bool:
    return (
        isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1
        and isinstance(statement.body[0], cst.Expr) and isinstance(statement.body[0].value, cst.SimpleString)
    )


def _bound_at_module(statements: Sequence[cst.CSTNode]) -> set[str]:
    """Names these module-level statements bind (in the module's own scope)."""
    module = cst.Module(body=list(statements))
    _, scopes = _scopes(module)
    global_scope = next((s for s in scopes.values() if isinstance(s, metadata.GlobalScope)), None)
    if global_scope is None:
        return set()
    return {assignment.name for assignment in global_scope.assignments}


# --- the transformations -------------------------------------------------------------------


def rename(code: str, files: dict[str, str]) -> tuple[str, dict[str, str]]:
    module = cst.parse_module(code)
    imported = _imported_names(module)
    keywords = {node.keyword.value for node in _walk(module) if isinstance(node, cst.Arg) and node.keyword is not None}
    class_bound: set[str] = set()
    kept_parameters: set[str] = set()
    kinds: dict[str, str] = {}

    def visit(node: cst.CSTNode, in_class: bool, external_class: bool) -> None:
        if isinstance(node, cst.ClassDef):
            if not in_class:
                kinds.setdefault(node.name.value, "class")
            else:
                class_bound.add(node.name.value)
            external = any(_library_base(base.value, imported) for base in node.bases)
            for statement in node.body.body:
                visit(statement, True, external)
            for child in (*node.bases, *node.decorators):
                visit(child, False, False)
            return
        if isinstance(node, cst.FunctionDef):
            if in_class:
                class_bound.add(node.name.value)
                if external_class:
                    kept_parameters.update(_parameter_names(node.params))
            else:
                kinds.setdefault(node.name.value, "function")
            for name in _parameter_names(node.params):
                kinds.setdefault(name, "variable")
            for child in node.children:
                if child is not node.name:
                    visit(child, False, False)
            return
        if in_class and isinstance(node, (cst.Assign, cst.AnnAssign, cst.AugAssign)):
            targets = node.targets if isinstance(node, cst.Assign) else [node]
            for target in targets:
                class_bound.update(n.value for n in _walk(target.target) if isinstance(n, cst.Name))
        for target in _binding_targets(node):
            kinds.setdefault(target, "variable")
        for child in node.children:
            visit(child, in_class, external_class)

    visit(module, False, False)
    used = {node.value for node in _walk(module) if isinstance(node, cst.Name)}
    renamable = [
        name for name in kinds
        if name not in imported and name not in BUILTINS and name not in KEPT_NAMES and name not in class_bound
        and name not in keywords and name not in kept_parameters and not name.startswith("__")
    ]
    if not renamable:
        raise Skip("no name of its own to rename")
    prefix = {"class": "Thing", "function": "fn_", "variable": "v"}
    counters: collections.Counter[str] = collections.Counter()
    mapping: dict[str, str] = {}
    for name in renamable:
        while True:
            counters[kinds[name]] += 1
            new = f"{prefix[kinds[name]]}{counters[kinds[name]]}"
            if new not in used:
                break
        mapping[name] = new
    return module.visit(_Renamer(mapping)).code, files


def _library_base(base: cst.BaseExpression, imported: set[str]) -> bool:
    """A base class from a library other than torch.nn (whose ``Module.__call__`` passes on what its caller passed)."""
    name = cst.helpers.get_full_name_for_node(base) or ""
    if name.split(".")[0] not in imported:
        return False
    return name.split(".")[-1] != "Module"


def _parameter_names(params: cst.Parameters) -> list[str]:
    names = [p.name.value for p in (*params.posonly_params, *params.params, *params.kwonly_params)]
    for star in (params.star_arg, params.star_kwarg):
        if isinstance(star, cst.Param):
            names.append(star.name.value)
    return names


def _binding_targets(node: cst.CSTNode) -> list[str]:
    targets: list[cst.CSTNode] = []
    if isinstance(node, cst.Assign):
        targets = [t.target for t in node.targets]
    elif isinstance(node, (cst.AnnAssign, cst.AugAssign)):
        targets = [node.target]
    elif isinstance(node, (cst.For, cst.CompFor)):
        targets = [node.target]
    elif isinstance(node, cst.WithItem) and node.asname is not None:
        targets = [node.asname.name]
    elif isinstance(node, cst.ExceptHandler) and node.name is not None:
        targets = [node.name.name]
    elif isinstance(node, cst.NamedExpr):
        targets = [node.target]
    elif isinstance(node, cst.Lambda):
        return _parameter_names(node.params)
    names: list[str] = []
    for target in targets:
        names += [_name_of(n) for n in _target_names(target)]
    return names


def _target_names(target: cst.CSTNode) -> Iterator[cst.Name]:
    """The names a target binds: not the attribute or subscript it writes into."""
    if isinstance(target, cst.Name):
        yield target
    elif isinstance(target, (cst.Tuple, cst.List)):
        for element in target.elements:
            yield from _target_names(element.value)
    elif isinstance(target, cst.StarredElement):
        yield from _target_names(target.value)


def _name_of(node: cst.Name) -> str:
    return node.value


class _Renamer(cst.CSTTransformer):
    """Every Name that stands for one of ``mapping``'s names: not an attribute, a keyword or an import."""

    def __init__(self, mapping: dict[str, str]) -> None:
        super().__init__()
        self.mapping = mapping

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        return False  # the object is renamed in leave_Attribute, never the attribute's name

    def leave_Attribute(self, original: cst.Attribute, updated: cst.Attribute) -> cst.Attribute:
        return updated.with_changes(value=original.value.visit(self))

    def leave_Arg(self, original: cst.Arg, updated: cst.Arg) -> cst.Arg:
        return updated.with_changes(keyword=original.keyword)

    def visit_Import(self, node: cst.Import) -> bool:
        return False

    def visit_ImportFrom(self, node: cst.ImportFrom) -> bool:
        return False

    def leave_Name(self, original: cst.Name, updated: cst.Name) -> cst.Name:
        new = self.mapping.get(original.value)
        return updated if new is None else updated.with_changes(value=new)


def into_main(code: str, files: dict[str, str]) -> tuple[str, dict[str, str]]:
    module = cst.parse_module(code)
    body = list(module.body)
    last = max((index for index, statement in enumerate(body) if _is_definition(statement)), default=-1)
    tail = body[last + 1:]
    if len(tail) == 1 and _is_main_guard(tail[0]):
        moved = list(tail[0].body.body)
    elif tail and not any(_is_main_guard(statement) for statement in tail):
        moved = tail
    else:
        raise Skip("no module-level statements after the definitions")
    if any(isinstance(node, (cst.Global, cst.ImportStar)) for node in _walk(module)) or any(
        isinstance(node, (cst.Return, cst.Yield)) for s in moved for node in _walk_outside_defs(s)
    ):
        raise Skip("a global declaration, a star import, or statements that cannot sit in a function")
    bound = _bound_at_module(moved)
    if bound & _global_reads_from_inner_scopes(module):
        raise Skip("they bind names a function reads as globals")
    if any(name in text for name in bound for text in files.values()):
        raise Skip("another file of the project names what they bind")
    if "main" in {n.value for n in _walk(module) if isinstance(n, cst.Name)}:
        raise Skip("`main` is taken")
    moved[0] = moved[0].with_changes(leading_lines=[])
    main = cst.parse_statement("def main():\n    pass\n")
    assert isinstance(main, cst.FunctionDef)
    main = main.with_changes(body=main.body.with_changes(body=moved), leading_lines=[cst.EmptyLine(), cst.EmptyLine()])
    guard = cst.parse_statement('if __name__ == "__main__":\n    main()\n').with_changes(
        leading_lines=[cst.EmptyLine(), cst.EmptyLine()]
    )
    return module.with_changes(body=[*body[:last + 1], main, guard]).code, files


def to_module(code: str, files: dict[str, str]) -> tuple[str, dict[str, str]]:
    module = cst.parse_module(code)
    body = list(module.body)
    for index, statement in enumerate(body):
        if not isinstance(statement, cst.FunctionDef) or _parameter_names(statement.params) or statement.decorators:
            continue
        name = statement.name.value
        mentions = [n for n in _walk(module) if isinstance(n, cst.Name) and n.value == name]
        if len(mentions) != 2 or any(name in text for text in files.values()):
            continue
        place = _module_call_statement(body, name)
        if place is None:
            continue
        inner = list(statement.body.body)
        if any(isinstance(node, (cst.Return, cst.Yield, cst.Global, cst.Nonlocal, cst.ImportStar))
               for s in inner for node in _walk_outside_defs(s)):
            raise Skip(f"`{name}` returns, yields or declares globals")
        others = [s for s in body if s is not statement]
        bound = _bound_at_module(inner)
        if bound & (_global_reads_from_inner_scopes(module) | _bound_at_module(others)):
            raise Skip(f"`{name}` binds names the module binds or a function reads as globals")
        position, guard = place
        if guard is not None and len(guard.body.body) != 1:
            raise Skip(f"the guard runs more than `{name}()`")
        inner[0] = inner[0].with_changes(leading_lines=body[position].leading_lines)
        new_body = [s for i, s in enumerate(body) if i not in (index, position)]
        insert_at = position - (1 if index < position else 0)
        new_body[insert_at:insert_at] = inner
        return module.with_changes(body=new_body).code, files
    raise Skip("no parameterless function called once at module level")


def _module_call_statement(body: list[cst.CSTNode], name: str) -> tuple[int, cst.If | None] | None:
    for position, statement in enumerate(body):
        if _is_call_statement(statement, name):
            return position, None
        if _is_main_guard(statement) and any(_is_call_statement(s, name) for s in statement.body.body):
            return position, statement
    return None


def _is_call_statement(statement: cst.CSTNode, name: str) -> bool:
    if not isinstance(statement, cst.SimpleStatementLine) or len(statement.body) != 1:
        return False
    expr = statement.body[0]
    return (
        isinstance(expr, cst.Expr) and isinstance(expr.value, cst.Call) and not expr.value.args
        and isinstance(expr.value.func, cst.Name) and expr.value.func.value == name
    )


def _walk_outside_defs(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    yield node
    if isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
        return
    for child in node.children:
        yield from _walk_outside_defs(child)


def into_method(code: str, files: dict[str, str]) -> tuple[str, dict[str, str]]:
    module = cst.parse_module(code)
    used = {n.value for n in _walk(module) if isinstance(n, cst.Name)}
    called_names = {
        id(node.func) for node in _walk(module) if isinstance(node, cst.Call) and isinstance(node.func, cst.Name)
    }
    chosen: dict[str, str] = {}
    for statement in module.body:
        if not isinstance(statement, cst.FunctionDef) or statement.decorators or "self" in {
            n.value for n in _walk(statement) if isinstance(n, cst.Name)
        }:
            continue
        name = statement.name.value
        if sum(1 for s in module.body if isinstance(s, (cst.FunctionDef, cst.ClassDef)) and s.name.value == name) != 1:
            continue
        if name in _bound_at_module([s for s in module.body if s is not statement]):
            continue
        mentions = [n for n in _walk(module) if isinstance(n, cst.Name) and n.value == name and n is not statement.name]
        if any(id(n) not in called_names for n in mentions) or any(name in text for text in files.values()):
            continue
        number = len(chosen) + 1
        while f"Thing{number}" in used:
            number += 1
        chosen[name] = f"Thing{number}"
        used.add(chosen[name])
    if not chosen:
        raise Skip("no module-level function named only in calls")
    return module.visit(_IntoMethods(chosen)).code, files


class _IntoMethods(cst.CSTTransformer):
    def __init__(self, chosen: dict[str, str]) -> None:
        super().__init__()
        self.chosen = chosen
        self.depth = 0

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        self.depth += 1
        return True

    def leave_FunctionDef(self, original: cst.FunctionDef, updated: cst.FunctionDef) -> cst.CSTNode:
        self.depth -= 1
        holder = self.chosen.get(original.name.value)
        if self.depth or holder is None:
            return updated
        parameters = updated.params
        self_param = cst.Param(cst.Name("self"))
        if parameters.posonly_params:
            parameters = parameters.with_changes(posonly_params=[self_param, *parameters.posonly_params])
        else:
            parameters = parameters.with_changes(params=[self_param, *parameters.params])
        method = updated.with_changes(params=parameters, leading_lines=[])
        return cst.ClassDef(
            name=cst.Name(holder), body=cst.IndentedBlock(body=[method]), leading_lines=original.leading_lines,
        )

    def visit_ClassDef(self, node: cst.ClassDef) -> bool:
        self.depth += 1
        return True

    def leave_ClassDef(self, original: cst.ClassDef, updated: cst.ClassDef) -> cst.CSTNode:
        self.depth -= 1
        return updated

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.Call:
        if isinstance(original.func, cst.Name) and original.func.value in self.chosen:
            holder = self.chosen[original.func.value]
            instance = cst.Call(func=cst.Name(holder))
            return updated.with_changes(func=cst.Attribute(value=instance, attr=cst.Name(original.func.value)))
        return updated


def to_file(code: str, files: dict[str, str]) -> tuple[str, dict[str, str]]:
    if HELPERS in files:
        raise Skip(f"{HELPERS} exists")
    module = cst.parse_module(code)
    if any(isinstance(node, cst.ImportFrom) and node.relative for node in _walk(module)):
        raise Skip("relative imports")
    imported = _imported_names(module)
    functions = {
        s.name.value: s for s in module.body if isinstance(s, cst.FunctionDef)
    }
    bound_elsewhere = _bound_at_module([s for s in module.body if not isinstance(s, cst.FunctionDef)])
    if "__future__" in code:
        raise Skip("a __future__ import")
    candidates = {
        name for name, node in functions.items()
        if name not in bound_elsewhere and sum(isinstance(s, cst.FunctionDef) and s.name.value == name for s in module.body) == 1
        and not any(isinstance(n, (cst.Global, cst.Nonlocal)) for n in _walk(node))
    }
    reads = {name: _global_reads(functions[name]) for name in candidates}
    changed = True
    while changed:
        changed = False
        for name in sorted(candidates):
            if not reads[name] <= (imported | BUILTINS | candidates):
                candidates.discard(name)
                changed = True
    if not candidates:
        raise Skip("every function reads a module-level name of its own")
    imports = [s for s in module.body if _is_definition(s) and isinstance(s, cst.SimpleStatementLine)]
    moved = [s for s in module.body if isinstance(s, cst.FunctionDef) and s.name.value in candidates]
    helper = cst.Module(body=[*imports, *moved])
    kept = [s for s in module.body if s not in moved]
    last_import = max((i for i, s in enumerate(kept) if s in imports), default=-1)
    docstring = 1 if kept and _is_docstring(kept[0]) and last_import < 0 else 0
    line = cst.parse_statement(f"from {HELPERS[:-3]} import {', '.join(n for n in functions if n in candidates)}\n")
    at = max(last_import + 1, docstring)
    kept[at:at] = [line]
    return module.with_changes(body=kept).code, {**files, HELPERS: helper.code}


def _global_reads(function: cst.FunctionDef) -> set[str]:
    """Names the function reads that it does not bind itself (a module of its own, so that every free read
    resolves to the global scope)."""
    module = cst.Module(body=[function])
    _, scopes = _scopes(module)
    read: set[str] = set()
    for scope in {s for s in scopes.values() if s is not None}:
        if isinstance(scope, metadata.GlobalScope):
            continue
        for access in scope.accesses:
            if not access.referents or any(isinstance(r.scope, metadata.GlobalScope) for r in access.referents):
                node = access.node
                read.add(node.value if isinstance(node, cst.Name) else cst.helpers.get_full_name_for_node(node) or "")
    for node in function.decorators:
        read |= {n.value for n in _walk(node) if isinstance(n, cst.Name)}
    for parameter in _walk(function.params):
        if isinstance(parameter, cst.Param) and parameter.default is not None:
            read |= {n.value for n in _walk(parameter.default) if isinstance(n, cst.Name)}
        if isinstance(parameter, cst.Annotation):
            read |= {n.value for n in _walk(parameter) if isinstance(n, cst.Name)}
    return read


TRANSFORMS: dict[str, Callable[[str, dict[str, str]], tuple[str, dict[str, str]]]] = {
    "rename": rename,
    "into-main": into_main,
    "to-module": to_module,
    "into-method": into_method,
    "to-file": to_file,
}


# --- running -------------------------------------------------------------------------------


@dataclass
class Cell:
    applied: int = 0
    skipped: int = 0
    fires: int = 0  # MUST_FIRE examples at warning/error before
    lost: list[str] = field(default_factory=list)
    to_note: list[str] = field(default_factory=list)
    notes: int = 0  # MUST_FIRE examples with only notes before
    note_lost: list[str] = field(default_factory=list)
    quiet: int = 0
    new: list[str] = field(default_factory=list)
    new_note: list[str] = field(default_factory=list)
    broken: list[str] = field(default_factory=list)  # examples whose original does not hold


def _verdict(rule: type[Rule], code: str, example: Fires | object, files: dict[str, str]) -> Severity | None:
    """The strongest finding of ``rule`` on the example, and on the helpers' file a transformation wrote (a
    finding about code moved there is reported in that file, as ``trainlint check`` of the project would)."""
    settings = example.settings  # type: ignore[attr-defined]
    with tempfile.TemporaryDirectory(prefix="trainlint-shapes-") as folder:
        root = Path(folder)
        findings = own_findings(rule, code, settings, files, root)
        if HELPERS in files:
            found = analyze_source(files[HELPERS], str(root / HELPERS), AnalysisSettings(**settings), rules=[rule],
                                   workspace=Workspace([root]))
            findings += [finding for finding in found if finding.code == rule.code]
    return max((f.severity for f in findings), default=None)


def run(rules: Sequence[type[Rule]], transforms: Sequence[str], show: bool) -> dict[str, dict[str, Cell]]:
    table: dict[str, dict[str, Cell]] = {}
    for rule in rules:
        row = table.setdefault(rule.code, {name: Cell() for name in transforms})
        for kind, examples in (("MUST_FIRE", rule.MUST_FIRE), ("MUST_NOT_FIRE", rule.MUST_NOT_FIRE)):
            for index, example in enumerate(examples):
                label = f"{rule.code} {kind}[{index}]"
                code, files = example.code, example.files
                before = _verdict(rule, code, example, files)
                for name in transforms:
                    cell = row[name]
                    try:
                        variant, variant_files = TRANSFORMS[name](code, files)
                        cst.parse_module(variant)
                    except (Skip, cst.ParserSyntaxError):
                        cell.skipped += 1
                        continue
                    if variant == code and variant_files == files:
                        cell.skipped += 1
                        continue
                    cell.applied += 1
                    after = _verdict(rule, variant, example, variant_files)
                    changed = _classify(cell, kind, label, before, after)
                    if show and changed:
                        print(f"--- {name} {label}: {_label(before)} -> {_label(after)}\n{variant}", file=sys.stderr)
                        for path, text in variant_files.items():
                            if files.get(path) != text:
                                print(f"--- {path}\n{text}", file=sys.stderr)
    return table


def _classify(cell: Cell, kind: str, label: str, before: Severity | None, after: Severity | None) -> bool:
    if kind == "MUST_FIRE":
        if before is None:
            cell.broken.append(label)
            return False
        if before >= Severity.WARNING:
            cell.fires += 1
            if after is None or after < Severity.WARNING:
                (cell.to_note if after is not None else cell.lost).append(label)
                return True
            return False
        cell.notes += 1
        if after is None:
            cell.note_lost.append(label)
            return True
        return False
    if before is not None:
        cell.broken.append(label)
        return False
    cell.quiet += 1
    if after is not None:
        (cell.new if after >= Severity.WARNING else cell.new_note).append(label)
        return True
    return False


def _label(severity: Severity | None) -> str:
    return "silent" if severity is None else severity.label


def print_table(table: dict[str, dict[str, Cell]], transforms: Sequence[str]) -> None:
    header = f"{'rule':6} {'transform':12} {'applied':>7} {'skipped':>7} {'lost':>9} {'to note':>7} {'note lost':>9} {'new':>9}"
    print(header)
    for code, row in table.items():
        for name in transforms:
            c = row[name]
            if not c.applied:
                continue
            lost = f"{len(c.lost) + len(c.to_note)}/{c.fires}"
            new = f"{len(c.new)}+{len(c.new_note)}n/{c.quiet}"
            print(f"{code:6} {name:12} {c.applied:7} {c.skipped:7} {lost:>9} {len(c.to_note):7} "
                  f"{len(c.note_lost):>4}/{c.notes:<4} {new:>9}")
    print("\nper transformation (all rules):")
    for name in transforms:
        cells = [row[name] for row in table.values()]
        applied = sum(c.applied for c in cells)
        skipped = sum(c.skipped for c in cells)
        fires = sum(c.fires for c in cells)
        lost = sum(len(c.lost) + len(c.to_note) for c in cells)
        to_note = sum(len(c.to_note) for c in cells)
        notes = sum(c.notes for c in cells)
        note_lost = sum(len(c.note_lost) for c in cells)
        quiet = sum(c.quiet for c in cells)
        new = sum(len(c.new) for c in cells)
        new_note = sum(len(c.new_note) for c in cells)
        print(f"{name:12} applied {applied}, skipped {skipped}; MUST_FIRE at warning/error losing it {lost} of {fires} "
              f"({to_note} to a note); note-only MUST_FIRE going silent {note_lost} of {notes}; "
              f"MUST_NOT_FIRE starting to fire {new} (+{new_note} notes) of {quiet}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rule", action="append", help="a rule code (repeatable); default: every registered rule")
    parser.add_argument("--transform", action="append", choices=list(TRANSFORMS), help="default: all five")
    parser.add_argument("--json", type=Path, help="write the table, with each changed example's label, here")
    parser.add_argument("--show", action="store_true", help="print each variant whose verdict changed (stderr)")
    args = parser.parse_args(argv)
    rules = [rule for rule in all_rules() if not args.rule or rule.code in args.rule]
    transforms = args.transform or list(TRANSFORMS)
    table = run(rules, transforms, args.show)
    print_table(table, transforms)
    if args.json:
        args.json.write_text(json.dumps(
            {code: {name: vars(cell) for name, cell in row.items()} for code, row in table.items()}, indent=1,
        ) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
