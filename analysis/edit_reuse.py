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


def edited_text(text: str, start: int, end: int) -> str:
    """The lines of ``text`` an edit touched: those holding offsets ``start`` to ``end``, found from
    them (not by counting lines from the top of the file)."""
    line_end = text.find("\n", end)
    return text[text.rfind("\n", 0, start) + 1 : len(text) if line_end < 0 else line_end + 1]


def only_function(chunk: ParsedChunk) -> cst.FunctionDef | None:
    """The function a top-level statement defines, if it is one ``def``."""
    body = chunk.body
    return body[0] if len(body) == 1 and isinstance(body[0], cst.FunctionDef) else None


def kept_inner_flows(flow: ScopeAnalysis) -> list[ScopeAnalysis]:
    """The flows of the functions defined in a scope that have one, and of those defined in them (those
    defined after the point a rewound walk goes on from too: ``flow_checkpoints.rewind``)."""
    found: list[ScopeAnalysis] = []
    for inner in (*flow.local_functions.values(), *flow.defined_later.values()):
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
    """Whether a method's flow asked only for the flows (or read the texts) of its own local functions,
    of methods of its class (checked when it is asked for: ``FunctionInfo.pending``), of other files'
    functions, and of functions of statements the edit left alone."""
    analysis = method._analysis
    if analysis is None:
        return True  # nothing to keep: walked when asked
    local: set[FunctionInfo] | None = None  # listed only for a read of the statement's own functions (most read none)
    for read, _ in (*method.reads, *method.texts_read):
        if read.owner is owner or read.home is not None or id(read.chunk) in kept_chunks:
            continue
        if local is None:
            local = local_functions(analysis)
        if read not in local:
            return False
    return True


def local_functions(analysis: ScopeAnalysis) -> set[FunctionInfo]:
    """The functions defined in a scope, and in those, at any depth."""
    found: set[FunctionInfo] = set()
    for info in analysis.local_functions.values():
        found.add(info)
        inner = info._analysis
        if inner is not None:
            found |= local_functions(inner)
    return found
