"""What workspace class an attribute of ``self`` holds an instance of, read from the class's text.

A processor or agent class often keeps its worker object in an attribute bound once, in whatever method
sets it up (``self._trainer = Trainer(args, model_file=path)`` in ``_set_up_model``), and reads it through a
property that a base class in another file defines (``@property def trainer(self): return self._trainer``).
The flow of one method cannot see that binding; this module reads every method of the class and of its
workspace base classes: the attribute holds an instance of a class when every assignment of it builds that
class (calling it, or a class method of it whose every ``return`` hands back ``cls(...)``), ``None`` apart.
Anything else assigned (a parameter, a library's object, two different classes) leaves the answer unknown.
"""

from __future__ import annotations

import libcst as cst

from .names import dotted
from .summary import ClassInfo, ModuleSummary
from .tree import walk

# How many base classes deep the attribute and its property are looked for.
_MAX_BASES = 8


def held_instance(summary: ModuleSummary, owner: ClassInfo, attribute: str) -> ClassInfo | None:
    """The workspace class of the instance ``self.<attribute>`` holds in ``owner``'s methods, the methods of
    its workspace bases included, following a property of that name that returns another attribute of
    ``self``; None when that is not known."""
    classes = _class_and_bases(summary, owner)
    name: str | None = attribute
    for _ in range(_MAX_BASES):
        if name is None:
            return None
        built = _assigned_classes(classes, name)
        if built is None:
            return None
        if built:
            return built[0] if all(found is built[0] for found in built) else None
        name = _property_of(classes, name)  # no assignment: a property may hand back another attribute
    return None


def _class_and_bases(summary: ModuleSummary, owner: ClassInfo) -> list[tuple[ClassInfo, ModuleSummary]]:
    """The class and its workspace base classes (each with the summary its names are read in), nearest first."""
    found: list[tuple[ClassInfo, ModuleSummary]] = []
    pending = [(owner, owner.home or summary)]
    while pending and len(found) <= _MAX_BASES:
        current, home = pending.pop(0)
        if any(current is seen for seen, _ in found):
            continue
        found.append((current, home))
        for base in current.bases:
            parent = home.local_class(home.canonical(base)) if base else None
            if parent is not None:
                pending.append((parent, parent.home or home))
    return found


def _assigned_classes(classes: list[tuple[ClassInfo, ModuleSummary]], attribute: str) -> list[ClassInfo] | None:
    """The classes built into ``self.<attribute>`` by each of its assignments (``None`` assigned is skipped);
    None when one assignment binds something else."""
    built: list[ClassInfo] = []
    for info, home in classes:
        for method in info.methods.values():
            for node in walk(method.node):
                if not isinstance(node, (cst.Assign, cst.AnnAssign)) or node.value is None:
                    continue
                targets = [target.target for target in node.targets] if isinstance(node, cst.Assign) else [node.target]
                if not any(_is_self_attribute(target, attribute) for target in targets):
                    continue
                if isinstance(node.value, cst.Name) and node.value.value == "None":
                    continue
                found = _built_class(home, node.value)
                if found is None:
                    return None
                built.append(found)
    return built


def _is_self_attribute(target: cst.BaseExpression, attribute: str) -> bool:
    return (
        isinstance(target, cst.Attribute) and isinstance(target.value, cst.Name) and target.value.value == "self"
        and target.attr.value == attribute
    )


def _built_class(summary: ModuleSummary, value: cst.BaseExpression) -> ClassInfo | None:
    """The workspace class ``value`` builds: ``Trainer(...)``, or ``Trainer.load(...)`` when that class method
    hands back ``cls(...)``."""
    if not isinstance(value, cst.Call):
        return None
    raw = dotted(value.func)
    if raw is None:
        return None
    direct = summary.local_class(summary.canonical(raw))
    if direct is not None:
        return direct
    if not isinstance(value.func, cst.Attribute) or (owner_name := dotted(value.func.value)) is None:
        return None
    owner = summary.local_class(summary.canonical(owner_name))
    factory = owner.find_method(value.func.attr.value, summary) if owner is not None else None
    return owner if factory is not None and builds_own_class(factory.node) else None


def builds_own_class(node: cst.FunctionDef) -> bool:
    """A ``@classmethod`` whose every ``return`` hands back ``cls(...)`` (or a name bound to it)."""
    if not any(isinstance(d.decorator, cst.Name) and d.decorator.value == "classmethod" for d in node.decorators):
        return False
    first = node.params.params[0].name.value if node.params.params else None
    built_names = {
        target.target.value for inner in walk(node) if isinstance(inner, cst.Assign) and _calls_name(inner.value, first)
        for target in inner.targets if isinstance(target.target, cst.Name)
    }
    returns = [inner for inner in walk(node) if isinstance(inner, cst.Return)]
    return bool(returns) and all(
        r.value is not None and (_calls_name(r.value, first) or isinstance(r.value, cst.Name) and r.value.value in built_names)
        for r in returns
    )


def _calls_name(node: cst.BaseExpression | None, name: str | None) -> bool:
    return isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and node.func.value == name


def _property_of(classes: list[tuple[ClassInfo, ModuleSummary]], name: str) -> str | None:
    """The attribute of ``self`` that a ``@property`` called ``name`` returns (its body one ``return self.<x>``),
    the nearest class's definition first."""
    for info, _ in classes:
        method = info.methods.get(name)
        if method is None:
            continue
        node = method.node
        if not any(isinstance(d.decorator, cst.Name) and d.decorator.value == "property" for d in node.decorators):
            return None
        body = node.body.body if isinstance(node.body, cst.IndentedBlock) else ()
        statements = [s for s in body if not (isinstance(s, cst.SimpleStatementLine) and isinstance(s.body[0], cst.Expr))]
        if len(statements) != 1 or not isinstance(statements[0], cst.SimpleStatementLine):
            return None
        returned = statements[0].body[0]
        if (
            isinstance(returned, cst.Return) and isinstance(returned.value, cst.Attribute)
            and isinstance(returned.value.value, cst.Name) and returned.value.value.value == "self"
        ):
            return returned.value.attr.value
        return None
    return None
