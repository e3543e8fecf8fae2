"""What of an analysis an edit leaves usable (``ModuleAnalysis.updated``): the edited lines, the one
function or class a top-level statement defines, whether two versions of a node differ only in one
field, and whether a kept method's or function's flow read only what the edit left alone."""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

if TYPE_CHECKING:
    from .flow import ScopeAnalysis
    from .parsing import ParsedChunk
    from .summary import ClassInfo, FunctionInfo


def edited_text(text: str, edited_lines: tuple[int, int, int]) -> str:
    """The lines of ``text`` an edit touched (``edited_lines``: the first and last, 1-based)."""
    first, last, _ = edited_lines
    start = 0
    for _ in range(first - 1):
        start = text.find("\n", start) + 1
    end = start
    for _ in range(last - first + 1):
        found = text.find("\n", end)
        end = len(text) if found < 0 else found + 1
    return text[start:end]


def only_function(chunk: ParsedChunk) -> cst.FunctionDef | None:
    """The function a top-level statement defines, if it is one ``def``."""
    body = chunk.body
    return body[0] if len(body) == 1 and isinstance(body[0], cst.FunctionDef) else None


def kept_inner_flows(flow: ScopeAnalysis) -> list[ScopeAnalysis]:
    """The flows of the functions defined in a scope that have one, and of those defined in them."""
    found: list[ScopeAnalysis] = []
    for inner in flow.local_functions.values():
        if inner._analysis is not None:
            found.append(inner._analysis)
            found.extend(kept_inner_flows(inner._analysis))
    return found


def only_class(chunk: ParsedChunk) -> cst.ClassDef | None:
    """The class a top-level statement defines, if it is one ``class``."""
    body = chunk.body
    return body[0] if len(body) == 1 and isinstance(body[0], cst.ClassDef) else None


def same_but(old: cst.CSTNode, new: cst.CSTNode, field: str, *, alike: bool = False) -> bool:
    """Whether two nodes of the same kind hold the very same children but in ``field`` (a splice keeps
    the nodes an edit did not reach); with ``alike``, children equal in every detail count too (a
    statement added to a method's body re-parses the whole method, its header included)."""
    if type(old) is not type(new):
        return False
    for name in old.__dataclass_fields__:
        if name == field:
            continue
        before, after = getattr(old, name), getattr(new, name)
        if before is after:
            continue
        if not isinstance(before, (tuple, list)) or not isinstance(after, (tuple, list)) or len(before) != len(after):
            if alike and isinstance(before, cst.CSTNode) and isinstance(after, cst.CSTNode) and before.deep_equals(after):
                continue
            return False
        if any(one is not other and not (alike and one.deep_equals(other)) for one, other in zip(before, after)):
            return False
    return True


def reads_kept_statements(method: FunctionInfo, owner: ClassInfo, kept_chunks: set[int]) -> bool:
    """Whether a method's flow asked only for the flows of its own local functions, of methods of its
    class (checked when it is asked for: ``FunctionInfo.pending``), of other files' functions, and of
    functions of statements the edit left alone."""
    analysis = method._analysis
    if analysis is None:
        return True  # nothing to keep: walked when asked
    local = local_functions(analysis)
    return all(
        read.owner is owner or read in local or read.home is not None or id(read.chunk) in kept_chunks
        for read, _ in method.reads
    )


def local_functions(analysis: ScopeAnalysis) -> set[FunctionInfo]:
    """The functions defined in a scope, and in those, at any depth."""
    found: set[FunctionInfo] = set()
    for info in analysis.local_functions.values():
        found.add(info)
        inner = info._analysis
        if inner is not None:
            found |= local_functions(inner)
    return found
