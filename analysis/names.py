"""Dotted names and the import table that turns ``nn.CrossEntropyLoss`` into ``torch.nn.CrossEntropyLoss``."""

from __future__ import annotations

import libcst as cst


def dotted(expr: cst.BaseExpression) -> str | None:
    """``a.b.c`` for a chain of names and attributes, else None."""
    # exact class tests: LibCST's node classes have no subclasses, and an isinstance test that
    # fails costs an ABCMeta check (this runs for every call and attribute the analysis meets)
    parts: list[str] = []
    while type(expr) is cst.Attribute:
        parts.append(expr.attr.value)
        expr = expr.value
    if type(expr) is not cst.Name:
        return None
    if not parts:
        return expr.value
    parts.append(expr.value)
    return ".".join(reversed(parts))


def imports_of(statement: cst.CSTNode) -> dict[str, str]:
    """Aliases bound by one import statement, mapped to the dotted names they stand for."""
    table: dict[str, str] = {}
    if isinstance(statement, cst.Import):
        for alias in statement.names:
            full = dotted(alias.name) or ""
            if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                table[alias.asname.name.value] = full
            else:
                head = full.split(".", 1)[0]
                table[head] = head
    elif isinstance(statement, cst.ImportFrom):
        module = dotted(statement.module) if statement.module is not None else ""
        module = "." * len(statement.relative) + (module or "")
        if isinstance(statement.names, cst.ImportStar):
            return table
        for alias in statement.names:
            imported = dotted(alias.name) or ""
            local = imported
            if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                local = alias.asname.name.value
            separator = "" if module.endswith(".") else "."
            table[local] = f"{module}{separator}{imported}" if module else imported
    return table


def star_imported(statement: cst.CSTNode) -> str | None:
    """The module a ``from module import *`` statement takes every public name of (``.models``), or None."""
    if not isinstance(statement, cst.ImportFrom) or not isinstance(statement.names, cst.ImportStar):
        return None
    module = dotted(statement.module) if statement.module is not None else ""
    return "." * len(statement.relative) + (module or "") or None


def star_target(module: str, name: str) -> str:
    """The dotted name ``name`` stands for when ``from module import *`` brought it in (``.models`` and
    ``Net``: ``.models.Net``)."""
    return f"{module}{'' if module.endswith('.') else '.'}{name}"


def canonical(raw: str, imports: dict[str, str]) -> str:
    head, dot, rest = raw.partition(".")
    target = imports.get(head)
    if target is None:
        return raw
    return f"{target}{dot}{rest}"


def last_part(name: str) -> str:
    return name.rsplit(".", 1)[-1]


def annotated_type(annotation: cst.BaseExpression) -> str | None:
    """The dotted name of a parameter's annotated type; for a subscripted one (``Callable[..., Any]``,
    ``Optional[nn.Module]``) the name subscripted."""
    if type(annotation) is cst.Subscript:
        annotation = annotation.value
    return dotted(annotation)
