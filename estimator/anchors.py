"""The lines a VRAM estimate belongs to: where the model is built, where a local ``nn.Module`` class
is defined, and where the batch size or the sequence length is set.

The editor shows the estimate on these lines (hover, inlay hint). Finding them needs only the
analysis the rules already ran: model-building calls are the calls whose result the flow
analysis tags as a model, built right there.
"""

from __future__ import annotations

import re

import libcst as cst
import msgspec

from trainlint.analysis.module import ModuleAnalysis
from trainlint.rules import ParsedChunk, Tag, children, dotted, shortened, string_value

MODEL = "model"
MODEL_CLASS = "model-class"
BATCH_SIZE = "batch-size"
SEQUENCE_LENGTH = "sequence-length"

_SETTING_NAMES = {
    BATCH_SIZE: re.compile(r"^(?:per_device_)?(?:train_|eval_|micro_|global_)?batch_size$", re.I),
    SEQUENCE_LENGTH: re.compile(r"^(?:max_)?(?:seq(?:uence)?_?len(?:gth)?|block_size|context_length|seq_length|n_ctx)$", re.I),
}


# The nodes whose settings are memoised: every statement (an edit re-builds only those on its path).
_STATEMENTS = frozenset({
    cst.SimpleStatementLine, cst.If, cst.For, cst.While, cst.With, cst.Try, cst.TryStar, cst.FunctionDef, cst.ClassDef, cst.Match,
})


class Anchor(msgspec.Struct, frozen=True):
    line: int  # 1-based
    kind: str  # MODEL | MODEL_CLASS | BATCH_SIZE | SEQUENCE_LENGTH
    code: str  # the expression or name as written, shortened


def find_anchors(module: ModuleAnalysis) -> list[Anchor]:
    """Every anchor line of the module, in line order (one per line, the most telling kind)."""
    wanted: dict[int, list[tuple[cst.CSTNode, str, str]]] = {}  # chunk index -> (node, kind, code)
    summary = module.summary
    for scope in module.all_scopes:
        owner = scope.function.owner if scope.function is not None else None
        if owner is not None and summary.is_module_class(owner):
            continue  # layers built inside a model are part of it
        for call in scope.calls():
            if _builds_a_model(call):
                wanted.setdefault(call.chunk.index, []).append((call.node, MODEL, shortened(call.chunk.code_for(call.node), 60)))
    for name in sorted(summary.classes):
        info = summary.classes[name]
        if summary.is_module_class(info):
            wanted.setdefault(info.chunk.index, []).append((info.node.name, MODEL_CLASS, name))
    chunks = module.chunks
    for chunk in chunks:
        for kind, node, code in _settings_in(chunk):
            wanted.setdefault(chunk.index, []).append((node, kind, code))
    found: dict[int, Anchor] = {}
    for index in sorted(wanted):
        items = wanted[index]
        lines = chunks[index].start_lines([node for node, _, _ in items])
        for line, (_, kind, code) in zip(lines, items):
            found.setdefault(line, Anchor(line, kind, code))
    return sorted(found.values(), key=lambda anchor: anchor.line)


def _builds_a_model(call) -> bool:
    """A whole model built here: not a single `torch.nn` layer or container, not a DDP/FSDP wrapper."""
    result = call.result
    if Tag.MODEL not in result.tags or result.tags & {Tag.DDP, Tag.ENGINE} or result.site is None or result.site[1] is not call.node:
        return False
    return not (call.callee or "").startswith("torch.nn.")


def _settings_in(chunk: ParsedChunk) -> list[tuple[str, cst.CSTNode, str]]:
    """Assignments, keyword arguments and ``--batch-size``-style options that set a batch size or a length."""
    cached = chunk.memo.get("vram_settings")
    if cached is None:
        # per statement, so that after an edit only the statements on the edit's path are read again
        by_statement = chunk.node_memo("vram_settings")
        cached = _settings_under(chunk, chunk.module, by_statement) if chunk.module is not None else []
        chunk.memo["vram_settings"] = cached
    return cached


def _settings_under(
    chunk: ParsedChunk, root: cst.CSTNode, by_statement: dict[cst.CSTNode, list[tuple[str, cst.CSTNode, str]]],
) -> list[tuple[str, cst.CSTNode, str]]:
    """The settings in ``root``'s subtree, in ``walk``'s order; a nested statement's from the memo."""
    found: list[tuple[str, cst.CSTNode, str]] = []
    stack = [root]
    while stack:
        node = stack.pop()
        if node is not root and type(node) in _STATEMENTS:
            kept = by_statement.get(node)
            if kept is None:
                kept = by_statement[node] = _settings_under(chunk, node, by_statement)
            found.extend(kept)
            continue
        setting = _setting(node)
        if setting is not None:
            found.append((setting, node, shortened(chunk.code_for(node), 60)))
        stack.extend(children(node))
    return found


def _setting(node: cst.CSTNode) -> str | None:
    """The kind of setting the node sets (an assignment's target, a keyword, an option's name), if any."""
    name = None
    if isinstance(node, (cst.Assign, cst.AnnAssign, cst.AugAssign)):
        targets = [t.target for t in node.targets] if isinstance(node, cst.Assign) else [node.target]
        for target in targets:
            text = dotted(target)
            if text is not None:
                name = text.rsplit(".", 1)[-1]
    elif isinstance(node, cst.Arg) and node.keyword is not None:
        name = node.keyword.value
    elif isinstance(node, cst.Call) and (dotted(node.func) or "").endswith("add_argument"):
        option = next((a.value for a in node.args if isinstance(a.value, cst.SimpleString)), None)
        if option is not None:
            value = string_value(option)
            name = value.lstrip("-").replace("-", "_") if value is not None else None
    if name is None:
        return None
    return next((kind for kind, pattern in _SETTING_NAMES.items() if pattern.match(name)), None)
