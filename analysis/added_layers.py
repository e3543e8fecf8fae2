"""The last layer of an ``nn.Sequential`` built empty and filled with ``add_module``.

Tutorials and older projects build a model as ``model = nn.Sequential()`` followed by
``model.add_module("softmax", nn.Softmax())`` (also on an attribute: ``self.fc.add_module(...)``
in ``__init__``). ``nn.Sequential.forward`` runs the modules in the order they were added, so the
model's output is what the last added module returns. This reads that module in the function that
builds the Sequential: the name the construction is bound to, and the last ``add_module`` call on
that name in the same function body, in source order. Only a function body is read, never later
module-level statements, so what is found depends on the statement being analysed alone.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from . import torchapi
from .names import dotted
from .values import MODEL, UNKNOWN, Value

if TYPE_CHECKING:
    from .flow import ScopeAnalysis


class _AddedModules(cst.CSTVisitor):
    """The names an expression is bound to and, per receiver name, the layers ``add_module`` adds, in order."""

    def __init__(self, construction: cst.Call) -> None:
        self.construction = construction
        self.bound: str | None = None
        self.added: dict[str, list[cst.Arg]] = {}

    def visit_Assign(self, node: cst.Assign) -> None:
        if node.value is self.construction and len(node.targets) == 1:
            self.bound = dotted(node.targets[0].target)

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if not isinstance(func, cst.Attribute) or func.attr.value != "add_module":
            return
        receiver = dotted(func.value)
        layer = _layer_argument(node)
        if receiver is not None and layer is not None:
            self.added.setdefault(receiver, []).append(layer)


def _layer_argument(call: cst.Call) -> cst.Arg | None:
    """What ``add_module(name, module)`` adds: its second positional argument or ``module=``."""
    positional = [arg for arg in call.args if arg.keyword is None and not arg.star]
    if len(positional) >= 2:
        return positional[1]
    return next((arg for arg in call.args if arg.keyword is not None and arg.keyword.value == "module"), None)


def last_added_layer(scope: ScopeAnalysis, construction: cst.Call) -> cst.Arg | None:
    """The module the last ``add_module`` call adds to the empty Sequential that ``construction`` builds,
    in the body of the function ``scope`` runs; None outside a function, or when none is added."""
    if scope.function is None:
        return None
    visitor = _AddedModules(construction)
    scope.function.node.body.visit(visitor)
    if visitor.bound is None:
        return None
    added = visitor.added.get(visitor.bound)
    return added[-1] if added else None


def added_layer(scope: ScopeAnalysis, construction: cst.Call) -> tuple[Value, list[cst.Arg]]:
    """The last module added to the empty Sequential ``construction`` builds (a torch layer's value, else
    unknown) and its argument, or unknown and no argument when none is found."""
    layer = last_added_layer(scope, construction)
    if layer is None:
        return UNKNOWN, []
    value = layer.value
    raw = dotted(value.func) if isinstance(value, cst.Call) else None
    callee = scope.canonical(raw) if raw else None
    if callee is None or not torchapi.is_torch_layer(callee):
        return UNKNOWN, [layer]
    return Value((MODEL,), site=(scope.chunk, value), note=f"`{callee}`", detail=callee), [layer]
