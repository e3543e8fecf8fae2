"""The flow walk's environment after an ``if``: what either branch wrote is merged, the rest kept."""

from __future__ import annotations

from trainlint.analysis.module import ModuleAnalysis
from trainlint.analysis.values import CONTAINER, GRAPH, MODEL

SOURCE = '''import torch


def train(loader, flag, other):
    model = torch.nn.Linear(8, 2)
    model.head = torch.nn.Linear(2, 2)
    untouched = torch.nn.Linear(8, 2)
    history = []
    for x in loader:
        loss = model(x).sum()
        if flag:
            history.append(loss)
            only_in_body = torch.nn.Linear(2, 2)
        else:
            model = other
'''


def _environment() -> dict:
    module = ModuleAnalysis(SOURCE, "train.py")
    module.prepare_scopes()
    (scope,) = [scope for scope in module.all_scopes if scope.name == "train"]
    return scope.final_env


def test_an_if_merges_what_either_branch_wrote_and_keeps_what_neither_did():
    env = _environment()
    # rebinding `model` in the else branch drops `model.head` there; the body kept it
    assert MODEL in env["model.head"].tags
    assert MODEL in env["model"].tags
    # stored into in the body only: the merge keeps what the store added
    assert {CONTAINER, GRAPH} <= env["history"].tags
    assert MODEL in env["only_in_body"].tags
    assert MODEL in env["untouched"].tags
