"""Code as a message quotes it: whitespace collapsed and cut to a length a reader takes in at once."""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

if TYPE_CHECKING:
    from .parsing import ParsedChunk


def shortened(text: str, limit: int = 50) -> str:
    """``text`` with its whitespace collapsed, cut to ``limit`` characters (ending in ``...``)."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def quoted(chunk: ParsedChunk, node: cst.CSTNode, limit: int = 48) -> str:
    """A node's code as a message quotes it; a call too long to quote whole keeps its callee: ``f(...)``."""
    text = " ".join(chunk.code_for(node).split())
    if len(text) <= limit:
        return text
    if isinstance(node, cst.Call):
        callee = " ".join(chunk.code_for(node.func).split())
        return f"{callee}(...)" if len(callee) < limit else callee[: limit - 3] + "..."
    return text[: limit - 3] + "..."
