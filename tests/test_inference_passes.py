"""TL102 on inference passes that library facts reveal: a whole module that ``torch.load`` gives back and a
script calls in a loop, and the ``volatile=True`` inputs with which code written before PyTorch 0.4 ran
without a graph."""

from __future__ import annotations

import textwrap

from trainlint.analysis.engine import analyze_source
from trainlint.analysis.findings import Severity

# A sampling script of a model saved whole (`torch.save(model)`): nothing trains, nothing switches it to eval.
SAMPLER = textwrap.dedent('''\
    import argparse

    import torch


    def main():
        parser = argparse.ArgumentParser()
        parser.add_argument("checkpoint")
        args = parser.parse_args()
        rnn = torch.load(args.checkpoint, map_location="cpu", weights_only=False).cuda()
        state = None
        char = torch.zeros(1, 1, dtype=torch.long, device="cuda")
        text = []
        for _ in range(200):
            logits, state = rnn(char, state)
            char = torch.multinomial(logits[:, -1].softmax(-1), 1)
            text.append(int(char))
        print(text)


    if __name__ == "__main__":
        main()
''')

# PyTorch 0.3: the test loop after training, its inputs wrapped in Variables.
OLD_SCRIPT = textwrap.dedent('''\
    import torch
    import torch.nn as nn
    from torch.autograd import Variable

    from data import loaders

    train_loader, test_loader = loaders()
    net = nn.Linear(784, 10)
    optimizer = torch.optim.SGD(net.parameters(), lr=0.1)
    for images, labels in train_loader:
        optimizer.zero_grad()
        loss = nn.functional.cross_entropy(net(Variable(images)), Variable(labels))
        loss.backward()
        optimizer.step()

    correct = 0
    for images, labels in test_loader:
        images = Variable(images)
        outputs = net(images)
        correct += (outputs.data.max(1)[1] == labels).sum()
    print(correct)
''')


def _tl102(source: str, tmp_path) -> list:
    path = tmp_path / "script.py"
    path.write_text(source)
    return [f for f in analyze_source(source, str(path)) if f.code == "TL102"]


def test_a_module_torch_load_returns_is_run_as_an_inference_pass(tmp_path):
    findings = _tl102(SAMPLER, tmp_path)
    assert [(f.line, f.severity) for f in findings] == [(15, Severity.WARNING)]
    assert "a program that trains nothing" in findings[0].message


def test_what_torch_load_returns_is_not_a_model_until_it_is_called(tmp_path):
    source = SAMPLER.replace("logits, state = rnn(char, state)", "logits, state = rnn[0] * char, state")
    assert _tl102(source, tmp_path) == []


def test_the_test_loop_after_a_scripts_training_loop_records_a_graph(tmp_path):
    findings = _tl102(OLD_SCRIPT, tmp_path)
    assert [(f.line, f.severity) for f in findings] == [(19, Severity.ERROR)]
    assert "no later statement of the script reads what it leaves" in findings[0].message


def test_a_volatile_input_records_no_graph(tmp_path):
    source = OLD_SCRIPT.replace("images = Variable(images)\n", "images = Variable(images, volatile=True)\n")
    assert _tl102(source, tmp_path) == []


def test_a_later_statement_reading_the_output_keeps_the_graph_in_use(tmp_path):
    source = OLD_SCRIPT + "outputs.sum().backward()\n"
    assert _tl102(source, tmp_path) == []


GENERATOR_SCRIPT = textwrap.dedent('''
    import torch
    from torch.autograd import Variable

    with open("model.pt", "rb") as f:
        model = torch.load(f)

    hidden = model.init_hidden(1)
    input = Variable(torch.rand(1, 1).mul(100).long(), volatile=True)

    with open("out.txt", "w") as outf:
        for i in range(20):
            output, hidden = model(input, hidden)
            outf.write(str(output.argmax().item()))
''')


def test_a_volatile_input_made_in_an_earlier_statement_is_evidence_where_the_forward_runs(tmp_path):
    # the input is made volatile in one statement of the script and run in a later one: the note on the restored
    # module's mode shows the forward it runs without grad (it once crashed the rule, placing the earlier
    # statement's node in the later one)
    path = tmp_path / "generate.py"
    path.write_text(GENERATOR_SCRIPT)
    findings = analyze_source(GENERATOR_SCRIPT, str(path))
    assert [(f.code, f.line, f.severity) for f in findings] == [("TL208", 6, Severity.NOTE)]
    assert [e.line for e in findings[0].evidence] == [13]


SHARED_EPOCH = textwrap.dedent('''
    import torch

    model = torch.nn.Linear(4, 1)
    opt = torch.optim.Adam(model.parameters())


    def forward(model, batch, train=True):
        if train:
            return model(batch)
        with torch.no_grad():
            return model(batch)


    def run(batches, train=True):
        for batch in batches:
            loss = forward(model, batch, train).mean()
            if train:
                opt.zero_grad()
                loss.backward()
                opt.step()


    for epoch in range(10):
        run(train_batches, True)
        run(valid_batches, False)
''')


def test_a_shared_epoch_whose_forward_helper_turns_grad_off_when_evaluating_is_quiet(tmp_path):
    assert _tl102(SHARED_EPOCH, tmp_path) == []


def test_a_shared_epochs_forward_in_a_helper_is_reported_at_the_call_of_the_helper(tmp_path):
    # the helper's forward lies in another statement of the file: the finding goes on this function's call of it
    source = SHARED_EPOCH.replace("    with torch.no_grad():\n        return model(batch)\n", "    return model(batch)\n")
    findings = _tl102(source, tmp_path)
    assert [(f.line, f.severity) for f in findings] == [(16, Severity.ERROR)]
    assert "records the autograd graph even when `run()` only evaluates" in findings[0].message
