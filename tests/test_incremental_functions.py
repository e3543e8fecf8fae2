"""Typing inside one long top-level function: the walk goes on from the statement of its body the
edit changed (``flow_checkpoints.rewind``, ``FunctionInfo.resume``) instead of walking the whole
function again, and what is shown is what a fresh analysis shows, key after key, also when the
edit changes what a function defined before it reads when it is first called after it."""

from __future__ import annotations

import libcst as cst
import pytest
from typing_keys import one_key_towards

from trainlint.analysis.engine import analyze_source
from trainlint.analysis.flow import ScopeAnalysis
from trainlint.analysis.rules.missing_zero_grad import MissingZeroGrad
from trainlint.analysis.settings import AnalysisSettings
from trainlint.server.documents import DocumentState
from trainlint.settings import EffectiveSettings

SETTINGS = EffectiveSettings(AnalysisSettings(), frozenset())
PATH = "file:///train.py"

SCRIPT = '''import argparse

import torch
import torch.nn as nn
from torch.utils.data import DataLoader


def build(width):
    return nn.Sequential(nn.Linear(width, width), nn.Dropout(0.1), nn.Linear(width, 2))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--width", type=int, default=8)
    args = parser.parse_args()
    model = build(args.width).cuda()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    criterion = nn.CrossEntropyLoss()
    loader = DataLoader(torch.randn(64, 8), batch_size=8)
    history = []

    def log(value):
        history.append(value)

    def evaluate():
        with torch.no_grad():
            return [model(x) for x in loader]

    log(0)
    if args.width > 4:
        scale = 2
    else:
        scale = 1
    for epoch in range(3):
        for x, y in loader:
            outputs = model(x)
            loss = criterion(outputs, y) * scale
            loss.backward()
            optimizer.step()
            history.append(loss)
        log(epoch)
    with torch.no_grad():
        for batch in loader:
            val_outputs = model(batch)
        else:
            log(-1)
    steps = 0
    while steps < 3:
        steps += 1
    evaluate()
    torch.save(model.state_dict(), "model.pt")


if __name__ == "__main__":
    main()
'''


def _fresh(text: str) -> list:
    return analyze_source(text, PATH, SETTINGS.analysis)


def _typed(state: DocumentState, text: str, target: str, version: int) -> tuple[str, list, int]:
    """``target`` typed into ``text`` one key at a time, each key's findings checked against a fresh analysis."""
    while text != target:
        text = one_key_towards(text, target)
        version += 1
        findings = state.analyse(text, version, SETTINGS).findings
        assert findings == _fresh(text), f"after typing towards the target, at: {text[-120:]!r}"
    return text, state.analyse(text, version, SETTINGS).findings, version


def _codes_by_line(findings: list, text: str) -> set[tuple[str, str]]:
    lines = text.split("\n")
    return {(finding.code, lines[finding.line - 1].strip()) for finding in findings}


def _opened(text: str = SCRIPT) -> DocumentState:
    state = DocumentState(PATH, None)
    assert state.analyse(text, 0, SETTINGS).findings == _fresh(text)
    return state


def test_the_script_shows_what_the_edits_below_change():
    shown = _codes_by_line(_fresh(SCRIPT), SCRIPT)
    assert ("TL201", "loss.backward()") in shown  # the loop never clears its gradients
    assert ("TL101", "history.append(loss)") in shown  # each step's graph kept alive


@pytest.mark.parametrize("edit", [
    # in the inner loop: the walk goes on from the outer loop
    ("            optimizer.step()\n", "            optimizer.step()\n            optimizer.zero_grad()\n"),
    # the first statement of the body
    ("    parser = argparse.ArgumentParser()\n", "    parser = argparse.ArgumentParser(description='train')\n"),
    # the last one
    ('torch.save(model.state_dict(), "model.pt")', 'torch.save(model.state_dict(), args.output)'),
    # a statement of the body taken out, then typed back below
    ("    log(0)\n", ""),
    # a binding before a function defined earlier is first called: what it reads changes
    ("    evaluate()\n", "    model = build(4)\n    evaluate()\n"),
    # ... a binding of another model (no dropout) there: its flow kept from before the edit does not hold
    ("    evaluate()\n", "    model = nn.Linear(8, 2)\n    evaluate()\n"),
    # the branch a later statement reads the merged value of
    ("        scale = 1\n", "        scale = loss\n"),
    # what a function defined earlier and already called reads of the scope
    ("    history = []\n", "    history = [torch.zeros(1)]\n"),
    # inside the loops, statement by statement (``flow_checkpoints.inner_path``): in the middle of a body,
    # a binding the loop's head reads, an exit from the loop, a statement taken out
    ("            loss = criterion(outputs, y) * scale\n", "            loss = criterion(outputs, y) * scale\n            scale = loss\n"),
    ("            history.append(loss)\n", "            history.append(loss)\n            loader = [torch.randn(8)]\n"),
    ("            optimizer.step()\n", "            optimizer.step()\n            if loss.item() < 0.1:\n                break\n"),
    ("            optimizer.step()\n", "            optimizer.step()\n            continue\n"),
    ("            outputs = model(x)\n", ""),
    # in a loop inside `with torch.no_grad():`, in a loop's `else:`, in a `while`
    ("            val_outputs = model(batch)\n", "            val_outputs = model(batch)\n            history.append(val_outputs)\n"),
    ("            log(-1)\n", "            log(-2)\n"),
    ("        steps += 1\n", "        steps += 1\n        history.append(loss)\n"),
], ids=["inner loop", "first statement", "last statement", "statement removed", "closure called later", "closure reads anew",
        "if branch", "closure called earlier", "rebound in the loop", "loop head rebound", "break", "continue",
        "loop statement removed", "loop under no_grad", "loop else", "while"])
def test_typing_in_a_long_function_gives_what_a_fresh_analysis_gives(edit):
    old, new = edit
    state = _opened()
    edited, _, version = _typed(state, SCRIPT, SCRIPT.replace(old, new), 0)
    back, findings, _ = _typed(state, edited, SCRIPT, version)
    assert findings == _fresh(SCRIPT)


def test_clearing_the_gradients_typed_in_the_loop_ends_the_finding_and_keeps_the_others():
    state = _opened()
    cleared = SCRIPT.replace("            optimizer.step()\n", "            optimizer.step()\n            optimizer.zero_grad()\n")
    typed, findings, _ = _typed(state, SCRIPT, cleared, 0)
    shown = _codes_by_line(findings, typed)
    assert not any(code == "TL201" for code, _ in shown)
    assert ("TL101", "history.append(loss)") in shown


def test_a_key_walks_the_function_on_from_the_statement_it_changed(monkeypatch):
    """The first edit walks the function whole (keeping its state before each statement); the next
    one walks it from the statement of its body that holds the edit, the outer loop."""
    state = _opened()
    main_walked: list[cst.CSTNode] = []
    walk = ScopeAnalysis._walk_statement

    def counting(self, statement, context):
        if self.function is not None and self.function.name == "main":
            main_walked.append(statement)
        return walk(self, statement, context)

    monkeypatch.setattr(ScopeAnalysis, "_walk_statement", counting)
    first = SCRIPT.replace("outputs = model(x)", "outputs = model(x) ")
    assert state.analyse(first, 1, SETTINGS).findings == _fresh(first)
    second = first.replace("outputs = model(x) ", "outputs = model(x)  ")
    main_walked.clear()
    findings = state.analyse(second, 2, SETTINGS).findings
    walked_lines = {cst.Module([statement]).code.strip().split("\n")[0] for statement in main_walked}
    assert findings == _fresh(second)
    assert "for epoch in range(3):" in walked_lines
    assert "args = parser.parse_args()" not in walked_lines
    assert "log(0)" not in walked_lines


def test_a_key_in_a_loop_walks_on_from_the_statement_of_the_loop_it_changed(monkeypatch):
    """From the third key in a loop on, the walk goes on from the edited statement inside the loops
    (``flow_checkpoints.inner_path``): the statements of the loop bodies before it are not walked
    again, those after it and after the loops are."""
    state = _opened()
    main_walked: list[cst.CSTNode] = []
    walk = ScopeAnalysis._walk_statement

    def counting(self, statement, context):
        if self.function is not None and self.function.name == "main":
            main_walked.append(statement)
        return walk(self, statement, context)

    monkeypatch.setattr(ScopeAnalysis, "_walk_statement", counting)
    text, findings = SCRIPT, []
    for spaces in range(1, 4):
        text = text.replace("optimizer.step()" + " " * (spaces - 1) + "\n", "optimizer.step()" + " " * spaces + "\n")
        main_walked.clear()
        findings = state.analyse(text, spaces, SETTINGS).findings
    walked_lines = {cst.Module([statement]).code.strip().split("\n")[0] for statement in main_walked}
    assert findings == _fresh(text)
    assert "optimizer.step()" in walked_lines
    assert {"history.append(loss)", "log(epoch)", "evaluate()"} <= walked_lines
    assert not walked_lines & {"for epoch in range(3):", "for x, y in loader:", "outputs = model(x)", "loss.backward()", "log(0)"}


PPO_STATS = '''\
import torch


def policy_stats(logprobs, old_logprobs, advantages):
    ratio = torch.exp(logprobs - old_logprobs)
    loss = -(ratio * advantages).mean()
    return dict(policy_loss=loss.detach(), ratio=ratio.detach().mean())


def train(policy, optimizer, batches):
    all_stats = []
    for batch in batches:
        for minibatch in batch:
            logprobs = policy(minibatch["input_ids"]).log_softmax(-1)
            stats = policy_stats(logprobs, minibatch["old_logprobs"], minibatch["advantages"])
            optimizer.zero_grad()
            (-(logprobs * minibatch["advantages"]).mean()).backward()
            optimizer.step()
            all_stats.append(stats)
    return all_stats
'''


def test_editing_a_helper_twice_re_reads_what_it_returns_when_given_a_graph():
    """The helper's walk with a graph-carrying argument is kept with its flow; a key in the helper walks
    the flow on from the edited statement, and what the earlier walk returned (built from the helper's
    old statements) goes with it: the second edit of the helper neither reports nor crashes on the first's."""
    state = DocumentState(PATH, None)
    assert state.analyse(PPO_STATS, 0, SETTINGS).findings == _fresh(PPO_STATS) == []
    kept_graph = PPO_STATS.replace("policy_loss=loss.detach()", "policy_loss=loss")
    text, findings, version = _typed(state, PPO_STATS, kept_graph, 0)
    assert [finding.code for finding in findings] == ["TL101"]
    text, findings, version = _typed(state, text, kept_graph.replace("ratio=ratio.detach().mean()", "ratio=ratio.mean()"), version)
    assert [finding.code for finding in findings] == ["TL101"]
    _, findings, _ = _typed(state, text, PPO_STATS, version)
    assert findings == []


def _flow_of(state: DocumentState, name: str) -> ScopeAnalysis:
    assert state.module is not None
    return next(scope for scope in state.module.all_scopes if scope.name == name)


def test_a_function_defined_before_the_edit_and_first_called_after_it_keeps_its_flow_and_findings(monkeypatch):
    """``evaluate`` is defined before the training loop and first called after it: a key in the loop
    keeps its flow (what it reads of ``main``, ``model`` and ``loader``, is as it was) and the rules'
    results for it; rebinding ``model`` before the call walks it again, and its finding (an evaluation
    pass in training mode, of a model with dropout) goes with the dropout."""
    state = _opened()
    first = SCRIPT.replace("outputs = model(x)", "outputs = model(x) ")
    assert state.analyse(first, 1, SETTINGS).findings == _fresh(first)
    before = _flow_of(state, "evaluate")
    checked: list[str] = []
    check_scope = MissingZeroGrad.check_scope

    def counting_check(self, ctx, scope):
        checked.append(scope.name)
        return check_scope(self, ctx, scope)

    monkeypatch.setattr(MissingZeroGrad, "check_scope", counting_check)
    second = first.replace("outputs = model(x) ", "outputs = model(x)  ")
    findings = state.analyse(second, 2, SETTINGS).findings
    assert _flow_of(state, "evaluate") is before
    assert "evaluate" not in checked and "main" in checked
    assert findings == _fresh(second)
    assert ("TL208", "return [model(x) for x in loader]") in _codes_by_line(findings, second)
    rebound = second.replace("    evaluate()\n", "    model = nn.Linear(8, 2)\n    evaluate()\n")
    findings = state.analyse(rebound, 3, SETTINGS).findings
    assert _flow_of(state, "evaluate") is not before
    assert findings == _fresh(rebound)
    assert ("TL208", "return [model(x) for x in loader]") not in _codes_by_line(findings, rebound)


def test_a_function_defined_after_the_edit_keeps_its_flow_while_what_it_reads_is_alike(monkeypatch):
    """``report`` is defined after the training loop, and reads ``model`` as ``model = model.cuda()``
    after the loop binds it: a key in the loop walks both statements again (a value made anew, alike in
    every field), and ``report`` keeps its flow and the rules' results; binding another value there,
    or editing ``report`` itself, walks it again."""
    script = SCRIPT.replace(
        '    torch.save(model.state_dict(), "model.pt")\n',
        '    model = model.cuda()\n\n    def report():\n        with torch.no_grad():\n'
        '            return [model(x) for x in loader]\n\n    report()\n    torch.save(model.state_dict(), "model.pt")\n',
    )
    state = _opened(script)
    first = script.replace("outputs = model(x)", "outputs = model(x) ")
    assert state.analyse(first, 1, SETTINGS).findings == _fresh(first)
    before = _flow_of(state, "report")
    checked: list[str] = []
    check_scope = MissingZeroGrad.check_scope

    def counting_check(self, ctx, scope):
        checked.append(scope.name)
        return check_scope(self, ctx, scope)

    monkeypatch.setattr(MissingZeroGrad, "check_scope", counting_check)
    second = first.replace("outputs = model(x) ", "outputs = model(x)  ")
    findings = state.analyse(second, 2, SETTINGS).findings
    assert _flow_of(state, "report") is before
    assert "report" not in checked and "main" in checked
    assert findings == _fresh(second)
    assert ("TL208", "return [model(x) for x in loader]") in _codes_by_line(findings, second)
    rebound = second.replace("    model = model.cuda()\n", "    model = nn.Linear(8, 2)\n")
    findings = state.analyse(rebound, 3, SETTINGS).findings
    assert _flow_of(state, "report") is not before
    assert findings == _fresh(rebound)
    kept = _flow_of(state, "report")
    edited = rebound.replace("return [model(x) for x in loader]", "return [model(x) for x in loader][0]")
    assert state.analyse(edited, 4, SETTINGS).findings == _fresh(edited)
    assert _flow_of(state, "report") is not kept
