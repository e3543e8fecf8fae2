"""Facts of a loop's or a function's tree that a rule reads whole (whether a loop works on `.grad`
itself, TL206; a function's nodes in source order, which TL102 and TL208 follow a forward's output
through) are read statement by statement and kept per statement: after a key on a line that parses,
the loop and the function holding it are new nodes, but only the statements on the edit's path are
read again. What is shown is what a fresh analysis shows, key after key, also when the edit changes
the finding."""

from __future__ import annotations

import libcst as cst
from typing_keys import one_key_towards

from trainlint.analysis import tree
from trainlint.analysis.engine import analyze_source
from trainlint.analysis.rules import zero_grad_before_step
from trainlint.analysis.settings import AnalysisSettings
from trainlint.server.documents import DocumentState
from trainlint.settings import EffectiveSettings

SETTINGS = EffectiveSettings(AnalysisSettings(), frozenset())
PATH = "file:///train.py"

SCRIPT = '''import torch
import torch.nn as nn


def evaluate(model, loader):
    model.eval()
    total = 0
    for batch in loader:
        out = model(batch.cuda())
        total += out.argmax(1).sum().item()
    return total


def main():
    model = nn.Linear(8, 2).cuda()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    loader = torch.utils.data.DataLoader(torch.randn(64, 8), batch_size=8)
    for epoch in range(3):
        model.train()
        for step, batch in enumerate(loader):
            optimizer.zero_grad()
            loss = model(batch.cuda()).sum() / 4
            loss.backward()
            if (step + 1) % 4 == 0:
                optimizer.step()
            preview = model(batch.cuda())
            print(f"epoch={epoch} step={step} preview={preview.argmax(1)}")
            print(f"loss={loss.item():.4f}")
        print(evaluate(model, loader))


if __name__ == "__main__":
    main()
'''
BACKWARD = "            loss.backward()\n"
EVALUATED = "        print(evaluate(model, loader))\n"


def _fresh(text: str) -> list:
    return analyze_source(text, PATH, SETTINGS.analysis)


def _opened() -> DocumentState:
    state = DocumentState(PATH, None)
    assert state.analyse(SCRIPT, 0, SETTINGS).findings == _fresh(SCRIPT)
    return state


def _typed(state: DocumentState, text: str, target: str, version: int) -> tuple[str, list, int]:
    """``target`` typed into ``text`` one key at a time, each key's findings checked against a fresh analysis."""
    while text != target:
        text = one_key_towards(text, target)
        version += 1
        assert state.analyse(text, version, SETTINGS).findings == _fresh(text), f"at: {text[-160:]!r}"
    return text, state.analyse(text, version, SETTINGS).findings, version


def _shown(findings: list, text: str) -> set[tuple[str, str]]:
    lines = text.split("\n")
    return {(finding.code, lines[finding.line - 1].strip()) for finding in findings}


def test_the_script_shows_what_the_edits_below_change():
    shown = _shown(_fresh(SCRIPT), SCRIPT)
    assert ("TL206", "optimizer.zero_grad()") in shown  # cleared on every batch, stepped every fourth
    assert ("TL102", "preview = model(batch.cuda())") in shown  # the preview's graph is recorded for nothing


def test_reading_the_gradients_typed_in_the_loop_ends_the_finding_and_taking_it_back_brings_it_back():
    state = _opened()
    surgery = SCRIPT.replace(BACKWARD, BACKWARD + "            norms = [p.grad.norm() for p in model.parameters()]\n")
    typed, findings, version = _typed(state, SCRIPT, surgery, 0)
    assert not any(code == "TL206" for code, _ in _shown(findings, typed))
    _, findings, _ = _typed(state, typed, SCRIPT, version)
    assert ("TL206", "optimizer.zero_grad()") in _shown(findings, SCRIPT)


def test_a_clearing_of_a_gradient_typed_in_the_loop_is_not_a_read_of_it():
    state = _opened()
    cleared = SCRIPT.replace(BACKWARD, "            model.weight.grad = None\n" + BACKWARD)
    typed, findings, _ = _typed(state, SCRIPT, cleared, 0)
    assert ("TL206", "optimizer.zero_grad()") in _shown(findings, typed)


def test_a_nested_function_typed_that_captures_the_output_ends_the_unused_graph_finding():
    state = _opened()
    captured = SCRIPT.replace(EVALUATED, EVALUATED + "\n    def last():\n        return preview\n\n")
    typed, findings, version = _typed(state, SCRIPT, captured, 0)
    assert ("TL102", "preview = model(batch.cuda())") not in _shown(findings, typed)
    _, findings, _ = _typed(state, typed, SCRIPT, version)
    assert ("TL102", "preview = model(batch.cuda())") in _shown(findings, SCRIPT)


def test_a_key_in_the_loop_reads_again_only_the_statements_on_its_path(monkeypatch):
    """The loop's statements off the edit's path keep what was read of them: of the training loop's
    nodes, a key reads again those of the statements that hold it, not the two `print` lines after it."""
    asked: list[cst.CSTNode] = []
    marks = zero_grad_before_step._gradient_marks
    monkeypatch.setattr(zero_grad_before_step, "_gradient_marks", lambda node: asked.append(node) or marks(node))
    listed: list[cst.CSTNode] = []
    in_order = tree.in_source_order_kept
    monkeypatch.setattr(tree, "in_source_order_kept", lambda node, memo: listed.append(node) or in_order(node, memo))
    state = _opened()
    loop = cst.parse_module(SCRIPT).body[3].body.body[3]  # `for epoch ...` in main()
    nodes = sum(1 for _ in tree.walk(loop))
    typed = SCRIPT.replace(BACKWARD, BACKWARD + "            scale = 24\n")
    assert state.analyse(typed.replace("24", "2"), 1, SETTINGS).findings == _fresh(typed.replace("24", "2"))
    asked.clear()
    listed.clear()
    findings = state.analyse(typed, 2, SETTINGS).findings
    assert 0 < len(asked) < nodes / 2
    prints = [node for node in listed if isinstance(node, cst.SimpleStatementLine) and "print" in cst.Module([node]).code]
    assert listed and not prints
    assert findings == _fresh(typed)


def test_grad_turned_off_above_the_loop_ends_the_unused_graph_finding_below_it():
    """A finding after the edit that the edit changes: the preview's graph is no longer recorded."""
    state = _opened()
    off = SCRIPT.replace("        model.train()\n", "        model.train()\n        torch.set_grad_enabled(False)\n")
    typed, findings, version = _typed(state, SCRIPT, off, 0)
    assert ("TL102", "preview = model(batch.cuda())") not in _shown(findings, typed)
    _, findings, _ = _typed(state, typed, SCRIPT, version)
    assert ("TL102", "preview = model(batch.cuda())") in _shown(findings, SCRIPT)
