"""Functions defined inside other functions: what a nested function reads from the enclosing one (a closure)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from .names import dotted
from .statement_shapes import target_names
from .summary import FunctionInfo
from .tree import children

if TYPE_CHECKING:
    from .flow import ScopeAnalysis
    from .parsing import ParsedChunk
    from .summary import ModuleSummary


class LocalFunctionInfo(FunctionInfo):
    """A function defined inside another function: what it reads and does not bind is the enclosing
    function's (``accelerator`` in a nested ``unwrap_model``), read as the enclosing walk has it when
    the function is first called."""

    __slots__ = ("enclosing",)

    def __init__(self, name: str, node: cst.FunctionDef, chunk: ParsedChunk, enclosing: ScopeAnalysis) -> None:
        super().__init__(name, node, chunk, None)
        self.enclosing: ScopeAnalysis | None = enclosing

    def _still_holds(self, summary: ModuleSummary) -> bool:
        """A kept flow of a function walked after the point the enclosing function's walk went on from
        (``flow_checkpoints.rewind``) holds while what it read of the enclosing scope reads the same, and
        it asked for no function's flow that is walked on from an edit (its flow is the same object, changed)."""
        return (
            self._analysis is not None and self._analysis.reads_enclosing_as_before()
            and not any(read.checkpointed for read, _ in self.reads) and super()._still_holds(summary)
        )

    def release(self) -> None:
        super().release()
        self.enclosing = None


_OWN_SCOPES = (cst.FunctionDef, cst.ClassDef, cst.Lambda, cst.ListComp, cst.SetComp, cst.DictComp, cst.GeneratorExp)


def names_bound_in(function: cst.FunctionDef) -> frozenset[str]:
    params = function.params
    bound = {param.name.value for param in (*params.posonly_params, *params.params, *params.kwonly_params)}
    bound |= {star.name.value for star in (params.star_arg, params.star_kwarg) if isinstance(star, cst.Param)}
    declared: set[str] = set()
    stack: list[cst.CSTNode] = [function.body]
    while stack:
        node = stack.pop()
        if isinstance(node, (cst.FunctionDef, cst.ClassDef)):
            bound.add(node.name.value)
            continue
        if isinstance(node, _OWN_SCOPES):
            continue
        if isinstance(node, (cst.Nonlocal, cst.Global)):
            declared |= {item.name.value for item in node.names}
        elif isinstance(node, (cst.AssignTarget, cst.AnnAssign, cst.AugAssign, cst.For)):
            bound.update(target_names(node.target))
        elif isinstance(node, cst.WithItem) and node.asname is not None:
            bound.update(target_names(node.asname.name))
        elif isinstance(node, (cst.ExceptHandler, cst.ExceptStarHandler)) and node.name is not None:
            bound.update(target_names(node.name.name))
        elif isinstance(node, cst.NamedExpr):
            bound.update(target_names(node.target))
        elif isinstance(node, (cst.Import, cst.ImportFrom)) and not isinstance(node.names, cst.ImportStar):
            for alias in node.names:
                bound.add(alias.asname.name.value if alias.asname is not None and isinstance(alias.asname.name, cst.Name)
                          else (dotted(alias.name) or "").split(".")[0])
        stack.extend(children(node))
    return frozenset(bound - declared)

