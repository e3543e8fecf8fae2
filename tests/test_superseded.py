"""An analysis whose text changed stops between two statements' checks, and what it did is kept: the
next analysis, of the same text or of the newer one, gives what a fresh analysis of that text gives."""

from __future__ import annotations

import random

import pytest
from test_splicing import RULES, SETTINGS, _key, _script

from trainlint.analysis.engine import findings_for
from trainlint.analysis.module import ModuleAnalysis, Superseded

HELPERS = '''

def evaluate(model, loader):
    model.eval()
    losses = []
    for batch in loader:
        losses.append(model(batch).loss)
    return sum(losses) / len(losses)


class Trainer:
    def __init__(self, model, optimizer):
        self.model, self.optimizer = model, optimizer

    def fit(self, loader):
        for batch in loader:
            loss = self.model(batch).loss
            loss.backward()
            self.optimizer.step()
'''


class AfterChecks:
    """Says "superseded" once it has been asked ``count`` times: the edit arrives mid-analysis."""

    def __init__(self, count: int) -> None:
        self.count = count
        self.asked = 0

    def __call__(self) -> bool:
        self.asked += 1
        return self.asked > self.count


def _text() -> str:
    return _script(6) + HELPERS


def _fresh(text: str):
    return _key(findings_for(ModuleAnalysis(text, "train.py"), SETTINGS, RULES))


def test_a_superseded_analysis_stops_and_says_so():
    module = ModuleAnalysis(_text(), "train.py")
    never = AfterChecks(10**9)
    findings_for(module, SETTINGS, RULES, superseded=never)
    checks = never.asked
    assert checks > len(RULES), "the check is asked before each statement and each rule"
    stop = AfterChecks(checks // 2)
    with pytest.raises(Superseded):
        findings_for(ModuleAnalysis(_text(), "train.py"), SETTINGS, RULES, superseded=stop)
    assert stop.asked == checks // 2 + 1, "it stopped at the first check that said yes"


@pytest.mark.parametrize("stopped_after", [0, 1, 3, 7, 20, 45, 80])
def test_the_same_text_analysed_again_after_a_stop_matches_a_fresh_analysis(stopped_after):
    text = _text()
    module = ModuleAnalysis(text, "train.py")
    with pytest.raises(Superseded):
        findings_for(module, SETTINGS, RULES, superseded=AfterChecks(stopped_after))
    assert _key(findings_for(module, SETTINGS, RULES)) == _fresh(text)


def test_an_edit_after_a_stop_matches_a_fresh_analysis_of_the_new_text():
    rng = random.Random(1201)
    text = _text()
    module = ModuleAnalysis(text, "train.py")
    findings_for(module, SETTINGS, RULES)
    edits = [
        ("latents * vae.config.scaling_factor", "latents * vae.config.scaling_factors"),
        ("optimizer.zero_grad()", "pass"),
        ("losses.append(model(batch).loss)", "losses.append(model(batch).loss.item())"),
        ("history_2.append(loss)", "history_2.append(loss.detach())"),
        ("self.optimizer.step()", "self.optimizer.step()\n            self.optimizer.zero_grad()"),
        ("model.eval()", "model.train()"),
    ]
    for old, new in edits * 3:
        if old not in text:
            continue
        text = text.replace(old, new, 1)
        module = module.updated(text)
        stop = AfterChecks(rng.randrange(0, 40))
        try:
            findings_for(module, SETTINGS, RULES, superseded=stop)
        except Superseded:
            pass  # the editor sent another change: analyse the newest text with what was kept
        text = text.replace(new, old, 1) if rng.random() < 0.5 else text
        module = module.updated(text)
        assert _key(findings_for(module, SETTINGS, RULES)) == _fresh(text)
