"""Hover: on a code inside a suppression comment, what the rule finds; on a model, batch-size or
sequence-length line, the script's VRAM breakdown (``trainlint.estimator.editor.hover_text``)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from lsprotocol import types

from trainlint.analysis.lines import split_lines
from trainlint.analysis.suppressions import find_suppressions

from .positions import Positions
from .scheduling import analysis as analysis_of
from .scheduling import anchors, last_finished, vram

if TYPE_CHECKING:
    from .language_server import TrainlintServer

_CODE = re.compile(r"[A-Z]+\d+|[a-z]+(?:-[a-z]+)+", re.I)  # TL101, a plugin's ACME101, or a rule name


async def hover(ls: TrainlintServer, params: types.HoverParams) -> types.Hover | None:
    uri = params.text_document.uri
    if not ls.knows(uri):
        return None
    document = ls.workspace.get_text_document(uri)
    lines = split_lines(document.source)
    positions = Positions(lines, ls.client.position_encoding)
    line, column = positions.from_client(params.position)
    if line >= len(lines):
        return None
    text = lines[line]
    comment = next((c for c in find_suppressions(text) if c.column - 1 <= column < c.end_column - 1), None)
    if comment is None:
        return await _vram_hover(ls, uri, line + 1)
    for match in _CODE.finditer(text, comment.column - 1, comment.end_column - 1):
        if match.start() <= column < match.end():
            rule = next((r for r in ls.rules.values() if match.group().upper() == r.code or match.group().lower() == r.name), None)
            if rule is None:
                return None
            markdown = ls.client.markdown_hover
            body = rule.explain()
            heading = f"**{rule.code} {rule.name}** ({rule.severity.label})" if markdown else f"{rule.code} {rule.name} ({rule.severity.label})"
            contents = types.MarkupContent(
                kind=types.MarkupKind.Markdown if markdown else types.MarkupKind.PlainText,
                value=f"{heading}\n\n{body}" + (f"\n\n{rule.help_uri()}" if rule.help_uri() else ""),
            )
            hover_range = types.Range(
                start=positions.to_client(line + 1, match.start() + 1), end=positions.to_client(line + 1, match.end() + 1)
            )
            return types.Hover(contents=contents, range=hover_range)
    return None


async def _vram_hover(ls: TrainlintServer, uri: str, line: int) -> types.Hover | None:
    """On a model, model-class, batch-size or sequence-length line: the VRAM estimate for the script,
    from the last finished analysis (its lines carried to the text as it is now): never waiting for
    a running one, only for the first."""
    from trainlint.estimator.editor import hover_text  # here: the server starts without the estimator

    analysis = (last_finished(ls, uri) or await analysis_of(ls, uri)) if uri in ls.documents else await analysis_of(ls, uri)
    if analysis is None or not any(anchor.line == line for anchor in await anchors(ls, uri, analysis)):
        return None
    estimate = await vram(ls, uri, analysis)
    if estimate is None:
        return None
    markdown = ls.client.markdown_hover
    return types.Hover(
        contents=types.MarkupContent(
            kind=types.MarkupKind.Markdown if markdown else types.MarkupKind.PlainText, value=hover_text(estimate, markdown),
        ),
        range=Positions(analysis.lines, ls.client.position_encoding).line_range(line),
    )
