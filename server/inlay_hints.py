"""Inlay hints: the VRAM estimate at the end of each model and batch-size line
(``≈ 31.2 GiB (24–38) · A100-80GB 39%``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lsprotocol import types

from .positions import Positions
from .scheduling import analysis as analysis_of
from .scheduling import anchors as anchors_of
from .scheduling import last_finished, vram

if TYPE_CHECKING:
    from .language_server import TrainlintServer


async def inlay_hints(ls: TrainlintServer, params: types.InlayHintParams) -> list[types.InlayHint] | None:
    """At the end of each model and batch-size line in the requested range: the estimate; without one, a
    single hint on the model line (or none).

    From the last finished analysis, its lines carried to the text as it is now: a request never
    waits for a running analysis (Neovim sends one with every change and never cancels them), only
    for the document's first. When the text's own analysis is done, the client is asked to refresh."""
    from trainlint.estimator.anchors import BATCH_SIZE, MODEL  # here: the server starts without the estimator
    from trainlint.estimator.editor import inlay_label

    uri = params.text_document.uri
    if uri not in ls.documents or not ls.settings.of(uri).inlay_hints:
        return None
    analysis = last_finished(ls, uri)
    if analysis is None:
        analysis = await analysis_of(ls, uri)
    elif analysis.carried_from is not None or uri in ls.jobs:
        ls.stale_hints.add(uri)
    if analysis is None:
        return None
    first, last = params.range.start.line + 1, params.range.end.line + 1
    found = await anchors_of(ls, uri, analysis)
    anchors = [anchor for anchor in found if first <= anchor.line <= last and anchor.kind in (MODEL, BATCH_SIZE)]
    if not anchors:
        return []
    estimate = await vram(ls, uri, analysis)
    if estimate is None:
        return None
    if estimate.report is None:  # one hint, where the model is built (the hover says how to name it), or none
        anchors = [anchor for anchor in anchors if anchor.kind == MODEL][:1]
    positions = Positions(analysis.lines, ls.client.position_encoding)
    label = inlay_label(estimate)
    return [types.InlayHint(position=positions.line_range(anchor.line).end, label=label, padding_left=True) for anchor in anchors]
