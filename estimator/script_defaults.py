"""The defaults a script gives its settings outside the code that uses them: its argparse options'
``default=`` (a switch's too) and its config classes' annotated fields, for the script reader to follow.
"""

from __future__ import annotations

import libcst as cst

from trainlint.analysis.module import ModuleAnalysis
from trainlint.rules import ParsedChunk, string_value


def argparse_defaults(module: ModuleAnalysis) -> dict[str, tuple[cst.BaseExpression, cst.CSTNode, ParsedChunk]]:
    """dest -> (default expression, the add_argument call, chunk) for every `add_argument("--x", default=...)`."""
    found: dict[str, tuple[cst.BaseExpression, cst.CSTNode, ParsedChunk]] = {}
    for chunk in module.chunks:
        for key, default, node in _options_in(chunk):
            found.setdefault(key, (default, node, chunk))
    return found


def _options_in(chunk: ParsedChunk) -> list[tuple[str, cst.BaseExpression, cst.Call]]:
    """One statement's `add_argument` calls with a default, kept with its tree and per statement (the
    editor asks on every edit: only the statements on the edit's path are read again)."""
    if "add_argument" not in chunk.tree_text():
        return []
    return chunk.facts_by_statement("argparse_options", _option_at)


def _option_at(node: cst.CSTNode) -> list[tuple[str, cst.BaseExpression, cst.Call]]:
    """(dest, default, the call) when ``node`` is an `add_argument` call with a default."""
    if not isinstance(node, cst.Call) or not isinstance(node.func, cst.Attribute) or node.func.attr.value != "add_argument":
        return []
    flags = [arg.value for arg in node.args if arg.keyword is None and isinstance(arg.value, cst.SimpleString)]
    default = next((arg.value for arg in node.args if arg.keyword is not None and arg.keyword.value == "default"), None)
    dest = next((arg.value for arg in node.args if arg.keyword is not None and arg.keyword.value == "dest"), None)
    names = [name for name in map(string_value, flags) if name is not None]
    long = next((name for name in names if name.startswith("--")), names[0] if names else None)
    dest_name = string_value(dest)
    if dest_name is not None:
        key = dest_name
    elif long is not None:
        key = long.lstrip("-").replace("-", "_")
    else:
        return []
    if default is None:  # a switch's default is the opposite of what it stores
        action = string_value(next((arg.value for arg in node.args if arg.keyword is not None and arg.keyword.value == "action"), None))
        default = {"store_true": cst.Name("False"), "store_false": cst.Name("True")}.get(action or "")
    return [(key, default, node)] if default is not None else []


def dataclass_defaults(module: ModuleAnalysis) -> dict[str, tuple[cst.BaseExpression, cst.CSTNode, ParsedChunk]]:
    """field -> (default expression, node, chunk) for annotated class attributes with defaults (config dataclasses);
    a field name that several classes define is left out."""
    found: dict[str, tuple[cst.BaseExpression, cst.CSTNode, ParsedChunk]] = {}
    duplicated: set[str] = set()
    for info in module.summary.classes.values():
        if not isinstance(info.node.body, cst.IndentedBlock):
            continue
        for statement in info.node.body.body:
            if not isinstance(statement, cst.SimpleStatementLine):
                continue
            for small in statement.body:
                if isinstance(small, cst.AnnAssign) and isinstance(small.target, cst.Name) and small.value is not None:
                    name = small.target.value
                    if name in found:
                        duplicated.add(name)
                    found.setdefault(name, (small.value, small, info.chunk))
    return {name: entry for name, entry in found.items() if name not in duplicated}
