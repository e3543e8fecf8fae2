"""Code actions: a quick fix per finding that has one, "Disable TLxxx for this line", and
``source.fixAll.trainlint``, which applies every safe fix in the file (its edit resolved on
``codeAction/resolve`` for clients that defer edits, or at once by the ``trainlint.fixAll`` command).

Edits are built only from the text the editor holds now (``is_live``), or applying them would
corrupt it.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from lsprotocol import types

from trainlint.analysis.findings import Finding
from trainlint.fixing import apply_fixes, parses

from .diagnostics import help_uri, to_diagnostic
from .documents import Analysis
from .positions import Positions, to_text_edit
from .scheduling import analysis as analysis_of
from .scheduling import last_finished

if TYPE_CHECKING:
    from .language_server import TrainlintServer

FIX_ALL_KIND = "source.fixAll.trainlint"
KINDS = [types.CodeActionKind.QuickFix, types.CodeActionKind.SourceFixAll, FIX_ALL_KIND]


def is_live(ls: TrainlintServer, uri: str, analysis: Analysis) -> bool:
    """Whether an analysis is of the text the editor holds now (with run-on-save it may be of the
    saved text): edits are only ever built from that text, or applying them would corrupt it."""
    return analysis.text == ls.workspace.get_text_document(uri).source


def fix_all_edits(ls: TrainlintServer, uri: str, analysis: Analysis) -> list[types.TextEdit] | None:
    """One edit replacing the text with every safe fix applied; None when that changes nothing or breaks the parse."""
    if not is_live(ls, uri, analysis):
        return None
    new_text, applied = apply_fixes(analysis.text, analysis.findings)
    if not applied or new_text == analysis.text or not parses(new_text):
        return None
    end = Positions(analysis.lines, ls.client.position_encoding).end()
    return [types.TextEdit(range=types.Range(start=types.Position(0, 0), end=end), new_text=new_text)]


async def code_actions(ls: TrainlintServer, params: types.CodeActionParams) -> list[types.CodeAction] | None:
    """From the last finished analysis, its positions (and its fixes') carried to the text as it is
    now: never waiting for a running one, only for the first. A fix an edit reached into is not
    offered until the new analysis is done; fix-all is resolved from the text's own analysis."""
    uri = params.text_document.uri
    analysis = (last_finished(ls, uri) or await analysis_of(ls, uri)) if uri in ls.documents else await analysis_of(ls, uri)
    if analysis is None or not is_live(ls, uri, analysis):
        return None
    only = params.context.only

    def wanted(kind: str) -> bool:
        return not only or any(kind == k or kind.startswith(f"{k}.") for k in only)

    positions = Positions(analysis.lines, ls.client.position_encoding)
    first, _ = positions.from_client(params.range.start)
    last, _ = positions.from_client(params.range.end)
    actions: list[types.CodeAction] = []
    if wanted(types.CodeActionKind.QuickFix):
        for finding in analysis.findings:
            if finding.end_line - 1 < first or finding.line - 1 > last:
                continue
            diagnostic = to_diagnostic(finding, positions, uri, help_uri(ls, finding))
            if finding.fix is not None:
                # an unsafe fix is offered, never preferred: an editor applies preferred fixes unasked
                unsafe = "" if finding.fix.safe else " (unsafe: check the result)"
                actions.append(types.CodeAction(
                    title=f"trainlint ({finding.code}): {finding.fix.description}{unsafe}",
                    kind=types.CodeActionKind.QuickFix,
                    diagnostics=[diagnostic],
                    is_preferred=finding.fix.safe,
                    edit=types.WorkspaceEdit(changes={uri: [to_text_edit(e, positions) for e in finding.fix.edits]}),
                ))
            if finding.code in ls.rules:
                actions.append(types.CodeAction(
                    title=f"Disable {finding.code} for this line",
                    kind=types.CodeActionKind.QuickFix,
                    diagnostics=[diagnostic],
                    edit=types.WorkspaceEdit(changes={uri: [_suppression_edit(analysis, positions, finding)]}),
                ))
    fix_all_kinds = [kind for kind in (FIX_ALL_KIND, types.CodeActionKind.SourceFixAll) if only and wanted(kind)]
    if (not only or fix_all_kinds) and any(finding.fix is not None and finding.fix.safe for finding in analysis.findings):
        actions.append(types.CodeAction(
            title="trainlint: fix all auto-fixable problems",
            kind=FIX_ALL_KIND,
            data={"uri": uri, "version": analysis.version},
        ))
    return actions


async def resolve_code_action(ls: TrainlintServer, action: types.CodeAction) -> types.CodeAction:
    data = action.data if isinstance(action.data, dict) else {}
    uri = data.get("uri")
    if action.edit is not None or not isinstance(uri, str):
        return action
    analysis = await analysis_of(ls, uri)
    if analysis is None:
        return action
    edits = fix_all_edits(ls, uri, analysis)
    if edits:
        action.edit = types.WorkspaceEdit(changes={uri: edits})
    return action


def _suppression_edit(analysis: Analysis, positions: Positions, finding: Finding) -> types.TextEdit:
    """Add the code to the line's ``# trainlint: ignore[...]``, or append one."""
    line_text = analysis.lines[finding.line - 1] if finding.line - 1 < len(analysis.lines) else ""
    existing = re.search(r"#\s*trainlint:\s*ignore\[(?P<codes>[^\]]*)\]", line_text)
    if existing:
        codes = [c.strip() for c in existing.group("codes").split(",") if c.strip()]
        replacement = f"# trainlint: ignore[{', '.join([*codes, finding.code])}]"
        start, end = existing.start() + 1, existing.end() + 1
        return types.TextEdit(range=positions.range_to_client(finding.line, start, finding.line, end), new_text=replacement)
    end = len(line_text.rstrip()) + 1
    return types.TextEdit(
        range=positions.range_to_client(finding.line, end, finding.line, len(line_text) + 1),
        new_text=f"  # trainlint: ignore[{finding.code}]",
    )
