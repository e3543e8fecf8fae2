"""Typing inside one method of a class: the other methods keep their flow, and what is shown is
what a fresh analysis shows, also when the edit changes what another method reads of the edited
one (what it returns, what ``__init__`` binds to ``self``)."""

from __future__ import annotations

import pytest
from typing_keys import one_key_towards

from trainlint.analysis.engine import analyze_source
from trainlint.analysis.flow import ScopeAnalysis
from trainlint.analysis.settings import AnalysisSettings
from trainlint.server.documents import DocumentState
from trainlint.settings import EffectiveSettings

SETTINGS = EffectiveSettings(AnalysisSettings(), frozenset())
PATH = "file:///trainer.py"

TRAINER = '''import torch
import torch.nn as nn


class Trainer:
    def __init__(self, model, optimizer):
        self.model = model
        self.optimizer = optimizer
        self.criterion = nn.CrossEntropyLoss()
        self.history = []

    def probabilities(self, x):
        return torch.softmax(self.model(x), dim=-1)

    def step(self, batch):
        x, y = batch
        loss = self.criterion(self.probabilities(x), y)
        loss.backward()
        self.optimizer.step()
        self.optimizer.zero_grad()
        return loss

    def evaluate(self, loader):
        total = 0
        for x, y in loader:
            total += self.criterion(self.model(x), y)
        return total

    def train(self, loader):
        for batch in loader:
            x, y = batch
            loss = self.criterion(self.model(x), y)
            loss.backward()
            self.optimizer.step()
'''


def _fresh(text: str) -> list:
    return analyze_source(text, PATH, SETTINGS.analysis)


def _typed(state: DocumentState, text: str, target: str, version: int) -> tuple[str, list, int]:
    """``target`` typed into ``text`` one key at a time, each key's findings checked against a fresh analysis."""
    findings = state.analyse(text, version, SETTINGS).findings
    while text != target:
        text = one_key_towards(text, target)
        version += 1
        findings = state.analyse(text, version, SETTINGS).findings
        assert findings == _fresh(text), f"after typing towards the target, at: {text[-80:]!r}"
    return text, findings, version


def _codes_by_line(findings: list, text: str) -> set[tuple[str, str]]:
    lines = text.split("\n")
    return {(finding.code, lines[finding.line - 1].strip()) for finding in findings}


def test_the_findings_of_the_other_methods_stay_while_one_method_is_typed_into():
    state = DocumentState(PATH, None)
    before = state.analyse(TRAINER, 0, SETTINGS).findings
    assert before == _fresh(TRAINER)
    shown = _codes_by_line(before, TRAINER)
    others = {
        ("TL202", "loss = self.criterion(self.probabilities(x), y)"),
        ("TL102", "def evaluate(self, loader):"),
        ("TL101", "total += self.criterion(self.model(x), y)"),
    }
    assert others <= shown
    assert ("TL201", "loss.backward()") in shown  # `train` never clears its gradients
    cleared = TRAINER.replace(
        "            self.optimizer.step()\n", "            self.optimizer.step()\n            self.optimizer.zero_grad()\n",
    ).replace("x, y = batch\n            loss", "x, y = batch\n            loss")
    assert cleared.count("zero_grad()") == 2
    typed, after, _ = _typed(state, TRAINER, cleared, 1)
    shown_after = _codes_by_line(after, typed)
    assert others <= shown_after
    assert not any(code == "TL201" for code, _ in shown_after)


@pytest.mark.parametrize("edit", [
    # what `probabilities` returns, which `step` reads, stops being softmax probabilities
    ("torch.softmax(self.model(x), dim=-1)", "self.model(x)"),
    # what `__init__` binds to `self.criterion`, which `step` reads, stops being a cross-entropy
    ("self.criterion = nn.CrossEntropyLoss()", "self.criterion = nn.MSELoss()"),
], ids=["a method's return", "an attribute __init__ binds"])
def test_an_edit_of_what_another_method_reads_updates_that_method(edit):
    old, new = edit
    state = DocumentState(PATH, None)
    assert state.analyse(TRAINER, 0, SETTINGS).findings == _fresh(TRAINER)
    edited, findings, version = _typed(state, TRAINER, TRAINER.replace(old, new), 1)
    assert ("TL202", "loss = self.criterion(self.probabilities(x), y)") not in _codes_by_line(findings, edited)
    back, findings, _ = _typed(state, edited, TRAINER, version + 1)
    assert ("TL202", "loss = self.criterion(self.probabilities(x), y)") in _codes_by_line(findings, back)


def test_a_key_in_one_method_walks_that_method_alone(monkeypatch):
    """The other methods' flows are kept: the walk runs for the edited method only."""
    state = DocumentState(PATH, None)
    state.analyse(TRAINER, 0, SETTINGS)
    walked: list[str] = []
    walk = ScopeAnalysis.of_function.__func__

    def counting(cls, info, summary):
        walked.append(info.qualified_name)
        return walk(cls, info, summary)

    monkeypatch.setattr(ScopeAnalysis, "of_function", classmethod(counting))
    typed = TRAINER.replace("            x, y = batch\n            loss", "            x, y = batch\n            # a\n            loss")
    assert state.analyse(typed, 1, SETTINGS).findings == _fresh(typed)
    assert walked[: walked.index("Trainer.train") + 1] == ["Trainer.train"]  # the fresh analysis walks all of them after


RECURSIVE = '''import torch


class Walker:
    def __init__(self, model):
        self.model = model

    def first(self, x, depth):
        if depth:
            return self.second(x, depth - 1)
        return self.model(x)

    def second(self, x, depth):
        return self.first(x, depth)

    def run(self, loader):
        outputs = []
        for x in loader:
            outputs.append(self.model(x))
        return outputs
'''


@pytest.mark.parametrize("old,new", [
    ("            outputs.append(self.model(x))", "            outputs.append(self.second(x, 2))"),
    ("            outputs.append(self.model(x))", "            outputs.append(self.first(x, 2).detach())"),
    ("        return self.first(x, depth)", "        return self.first(x, depth).detach()"),
], ids=["a call into the recursion added", "another call into it", "the recursion itself edited"])
def test_methods_that_call_each_other_give_what_a_fresh_analysis_gives(old, new):
    """The flows of mutually recursive methods depend on which was walked first: an edit that asks
    for them in another order gets what a fresh analysis gets."""
    assert old in RECURSIVE
    state = DocumentState(PATH, None)
    assert state.analyse(RECURSIVE, 0, SETTINGS).findings == _fresh(RECURSIVE)
    edited, _, version = _typed(state, RECURSIVE, RECURSIVE.replace(old, new), 1)
    _typed(state, edited, RECURSIVE, version + 1)


def test_typing_a_new_statement_moves_the_findings_of_the_methods_below():
    """Enter and a statement typed in an early method, a key at a time: every key's findings, those of
    the later methods on their moved lines included, are a fresh analysis' (``_typed`` checks each)."""
    target = TRAINER.replace(
        "        return torch.softmax(self.model(x), dim=-1)\n",
        "        scores = self.model(x).float()\n        return torch.softmax(self.model(x), dim=-1)\n",
    )
    state = DocumentState(PATH, None)
    typed, findings, version = _typed(state, TRAINER, target, 0)
    assert ("TL101", "total += self.criterion(self.model(x), y)") in _codes_by_line(findings, typed)
    _typed(state, typed, TRAINER, version + 1)


STEPPER = '''import torch


class Stepper:
    def __init__(self, model, optimizer):
        self.model = model
        self.optimizer = optimizer

    def _apply(self):
        self.optimizer.step()

    def evaluate(self, loader):
        return [self.model(x).detach() for x in loader]

    def train(self, loader):
        for x, y in loader:
            loss = torch.nn.functional.mse_loss(self.model(x), y)
            loss.backward()
            self._apply()
'''


def test_a_method_whose_findings_read_another_methods_events_is_checked_again_after_an_edit_of_it():
    """``train`` never clears its gradients (TL201) until the helper it calls does: its finding was
    found through the helper's events, so an edit of the helper alone takes it away."""
    state = DocumentState(PATH, None)
    before = state.analyse(STEPPER, 0, SETTINGS).findings
    assert ("TL201", "loss.backward()") in _codes_by_line(before, STEPPER)
    cleared = STEPPER.replace("        self.optimizer.step()\n", "        self.optimizer.step()\n        self.optimizer.zero_grad()\n")
    typed, findings, version = _typed(state, STEPPER, cleared, 1)
    assert not any(code == "TL201" for code, _ in _codes_by_line(findings, typed))
    back, findings, _ = _typed(state, typed, STEPPER, version + 1)
    assert ("TL201", "loss.backward()") in _codes_by_line(findings, back)


METRICS_STORE = '''from collections import defaultdict

import torch.nn.functional as F
from transformers import Trainer


class DistillTrainer(Trainer):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._stored = defaultdict(list)

    def compute_loss(self, model, inputs, return_outputs=False, **kwargs):
        outputs = model(**inputs)
        kd_loss = F.kl_div(F.log_softmax(outputs.logits, -1), inputs["teacher_probs"], reduction="batchmean")
        metrics = {}
        metrics["kd_loss"] = kd_loss
        self.store_metrics(metrics)
        return outputs.loss + kd_loss

    def store_metrics(self, metrics):
        for key, value in metrics.items():
            self._stored[key].append(value)
'''


def test_a_caller_whose_walk_read_the_text_of_the_edited_method_is_walked_again():
    """``compute_loss`` keeps the graph of every step's ``kd_loss`` because ``store_metrics`` appends
    what it is handed to ``self._stored``: that is read from the helper's text, not its flow. Typing
    the append away leaves the caller with nothing kept, as a fresh analysis says; typed back, kept again."""
    state = DocumentState(PATH, None)
    before = state.analyse(METRICS_STORE, 0, SETTINGS).findings
    assert ("TL101", 'self.store_metrics(metrics)') in _codes_by_line(before, METRICS_STORE)
    dropped = METRICS_STORE.replace("            self._stored[key].append(value)", "            pass")
    typed, findings, version = _typed(state, METRICS_STORE, dropped, 1)
    assert not any(code == "TL101" for code, _ in _codes_by_line(findings, typed))
    back, findings, _ = _typed(state, typed, METRICS_STORE, version + 1)
    assert ("TL101", 'self.store_metrics(metrics)') in _codes_by_line(findings, back)


def test_renaming_a_method_that_another_calls_gives_what_a_fresh_analysis_gives():
    """Renamed, the helper is no longer the method ``train`` calls: ``train`` steps no optimizer the
    analysis knows of, and is not told to clear its gradients; named back, it is again."""
    renamed = STEPPER.replace("def _apply(self):", "def _update(self):")
    state = DocumentState(PATH, None)
    typed, findings, version = _typed(state, STEPPER, renamed, 0)
    assert not any(code == "TL201" for code, _ in _codes_by_line(findings, typed))
    back, findings, _ = _typed(state, typed, STEPPER, version + 1)
    assert ("TL201", "loss.backward()") in _codes_by_line(findings, back)


def test_a_key_in_one_method_checks_the_rules_on_that_method_alone(monkeypatch):
    """A rule that checks scope by scope checks again only the edited method's scope (and those
    whose check read its flow): the other methods keep their findings."""
    from trainlint.analysis.rules.missing_zero_grad import MissingZeroGrad

    state = DocumentState(PATH, None)
    state.analyse(STEPPER, 0, SETTINGS)
    checked: list[str] = []
    check_scope = MissingZeroGrad.check_scope

    def counting(self, ctx, scope):
        checked.append(scope.function.qualified_name if scope.function is not None else "<module>")
        return check_scope(self, ctx, scope)

    monkeypatch.setattr(MissingZeroGrad, "check_scope", counting)
    typed = STEPPER.replace("mse_loss(self.model(x), y)", "mse_loss(self.model(x), y * 2)")
    findings = state.analyse(typed, 1, SETTINGS).findings
    assert checked == ["Stepper.train"]
    assert findings == _fresh(typed)
    # a method that follows no backward, the one event every TL201 finding needs (``scope_needs``), is not checked
    evaluated = typed.replace("return [self.model(x).detach() for x in loader]", "return [self.model(x).detach() for x in loader if x]")
    checked.clear()  # the fresh analysis above checked `train` too
    findings = state.analyse(evaluated, 2, SETTINGS).findings
    assert checked == []
    assert findings == _fresh(evaluated)


SCORER = '''import torch
import torch.nn as nn


class Trainer:
    def __init__(self, model, optimizer):
        self.model = model
        self.optimizer = optimizer
        self.criterion = nn.CrossEntropyLoss()

    def loss_of(self, scores, labels):
        return self.criterion(scores, labels)

    def step(self, x, y):
        loss = self.loss_of(self.model(x), y)
        loss.backward()
        self.optimizer.step()
        self.optimizer.zero_grad()

    def evaluate(self, loader):
        total = 0
        for x, y in loader:
            total += 1
        return total
'''


def test_a_method_checked_through_its_callers_keeps_its_result_until_a_call_of_it_changes(monkeypatch):
    """TL202 judges ``loss_of``'s loss by what its callers pass (the calls of one method, not every
    call in the file): a key in ``evaluate``, which does not call it, leaves its result as it was; a
    key in ``step``, which does, checks it again, and what it passes then is reported there."""
    from trainlint.analysis.rules.softmax_before_cross_entropy import SoftmaxBeforeCrossEntropy

    state = DocumentState(PATH, None)
    state.analyse(SCORER, 0, SETTINGS)
    checked: list[str] = []
    check_scope = SoftmaxBeforeCrossEntropy.check_scope

    def counting(self, ctx, scope):
        checked.append(scope.function.qualified_name if scope.function is not None else "<module>")
        return check_scope(self, ctx, scope)

    monkeypatch.setattr(SoftmaxBeforeCrossEntropy, "check_scope", counting)
    typed = SCORER.replace("total += 1", "total += 2")
    findings = state.analyse(typed, 1, SETTINGS).findings
    assert checked == ["Trainer.evaluate"]
    assert findings == _fresh(typed)
    softmax = typed.replace("self.loss_of(self.model(x), y)", "self.loss_of(torch.softmax(self.model(x), dim=-1), y)")
    checked.clear()
    softmax, findings, _ = _typed(state, typed, softmax, 2)
    assert "Trainer.loss_of" in checked
    assert ("TL202", "return self.criterion(scores, labels)") in _codes_by_line(findings, softmax)


RECORDER = '''import torch


class Trainer:
    def __init__(self, model, optimizer):
        self.model = model
        self.optimizer = optimizer
        self.seen = []

    def _record(self, loss):
        value = float(loss)
        self.seen.append(value)

    def fit(self, loader):
        for x, y in loader:
            loss = (self.model(x) - y).pow(2).mean()
            self._record(loss)
            self.optimizer.step()
'''


def test_a_caller_that_runs_no_backward_keeps_its_result_until_the_helper_it_calls_gets_one(monkeypatch):
    """TL201 needs a backward (``scope_needs``): ``fit`` runs none, nor does the helper it calls, so a
    key in the helper checks neither (``rules.base.needs_none``); once the helper backwards the loss,
    ``fit`` is checked again and its loop, which steps without clearing, is reported as a fresh analysis
    reports it."""
    from trainlint.analysis.rules.missing_zero_grad import MissingZeroGrad

    state = DocumentState(PATH, None)
    state.analyse(RECORDER, 0, SETTINGS)
    checked: list[str] = []
    check_scope = MissingZeroGrad.check_scope

    def counting(self, ctx, scope):
        checked.append(scope.function.qualified_name if scope.function is not None else "<module>")
        return check_scope(self, ctx, scope)

    monkeypatch.setattr(MissingZeroGrad, "check_scope", counting)
    typed = RECORDER.replace("value = float(loss)", "value = float(loss) * 2")
    findings = state.analyse(typed, 1, SETTINGS).findings
    assert checked == []
    assert findings == _fresh(typed)
    backward = typed.replace("        value = float(loss) * 2\n", "        value = float(loss) * 2\n        loss.backward()\n")
    checked.clear()
    backward, findings, _ = _typed(state, typed, backward, 2)
    assert "Trainer.fit" in checked
    assert findings == _fresh(backward)
    assert any(finding.code == "TL201" for finding in findings)
