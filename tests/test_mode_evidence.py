"""Where the mode rules say the fix goes: the evidence names the line a `.train()` or `.eval()` belongs on."""

from __future__ import annotations

import textwrap

from trainlint.analysis.engine import analyze_source
from trainlint.analysis.findings import Severity

PERIODIC_EVALUATION = textwrap.dedent(
    """
    import torch
    import torch.nn as nn


    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.body = nn.Sequential(nn.Linear(16, 32), nn.Dropout(0.2), nn.Linear(32, 2))

        def forward(self, x):
            return self.body(x)


    def evaluate(model, loader):
        model.eval()
        with torch.no_grad():
            return sum((model(x).argmax(1) == y).sum().item() for x, y in loader)


    def train(model, optimizer, criterion, train_loader, val_loader, epochs, eval_every):
        step = 0
        for epoch in range(epochs):
            model.train()
            for x, y in train_loader:
                loss = criterion(model(x), y)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                step += 1
                if step % eval_every == 0:
                    accuracy = evaluate(model, val_loader)
                    print(step, accuracy)
    """
).lstrip()


def test_a_periodic_evaluation_names_the_end_of_its_block():
    findings = [f for f in analyze_source(PERIODIC_EVALUATION, "train.py") if f.code == "TL205"]
    assert len(findings) == 1
    block_end = PERIODIC_EVALUATION.splitlines().index("                print(step, accuracy)") + 1
    notes = {e.line: e.note for e in findings[0].evidence}
    assert "the evaluation block ends here" in notes.get(block_end, "")


LIBRARY_HELPERS = textwrap.dedent(
    '''
    import torch


    def evaluate_accuracy(data_iter, net):
        """Accuracy of `net` on `data_iter`."""
        correct = n = 0
        for X, y in data_iter:
            correct += (net(X).argmax(dim=1) == y).sum().item()
            n += y.numel()
        return correct / n


    def train_classifier(net, train_iter, test_iter, loss_fn, num_epochs, lr):
        optimizer = torch.optim.SGD(net.parameters(), lr=lr)
        for epoch in range(num_epochs):
            for X, y in train_iter:
                loss = loss_fn(net(X), y)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
            print(epoch, evaluate_accuracy(test_iter, net))
    '''
).lstrip()


def test_an_evaluation_handed_an_unknown_model_from_training_is_a_note_naming_where_eval_goes():
    findings = [f for f in analyze_source(LIBRARY_HELPERS, "train.py") if f.code == "TL208"]
    assert len(findings) == 1
    finding = findings[0]
    assert finding.severity is Severity.NOTE
    assert "is not known in this file" in finding.message
    first_statement = LIBRARY_HELPERS.splitlines().index("    correct = n = 0") + 1
    assert first_statement in {e.line for e in finding.evidence}
