"""What the server shows after many edits equals a fresh analysis of the same text.

The server re-parses only the statements an edit touched and keeps the rest; this drives its
document state through random edits of the kinds people make mid-typing (insertions, deletions,
pasted code, unbalanced brackets, non-ASCII) and compares, after each batch, with a fresh run.
"""

from __future__ import annotations

import os
import random
import re
import statistics
import time
from pathlib import Path

import pytest
from typing_keys import one_key_towards

from trainlint.analysis.engine import analyze_source
from trainlint.analysis.settings import AnalysisSettings
from trainlint.server.documents import DocumentState
from trainlint.settings import EffectiveSettings

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
SNIPPETS = [
    "\n", "(", ")", "[", "]", "{", "}", ":", "'", '"', '"""', "#", "\\\n", "    ", "é", "😋", "日本",
    "loss.backward()\n", "history.append(loss)\n", "    optimizer.zero_grad()\n",
    "\ndef helper(model, x):\n    return model(x)\n", "\nclass Net(nn.Module):\n    pass\n",
    "with torch.no_grad():\n    ", "for x, y in loader:\n    ", "import torch\n", "@torch.no_grad()\n",
    "model.eval()\n", "total += criterion(model(x), y)\n",
]
SETTINGS = EffectiveSettings(AnalysisSettings())
# The suite runs a short sequence; set TRAINLINT_EDIT_BATCHES=300 for a long soak (about 2,000 edits at random).
BATCHES = int(os.environ.get("TRAINLINT_EDIT_BATCHES", "4"))


def _edit(text: str, rng: random.Random) -> str:
    position = rng.randrange(len(text) + 1)
    kind = rng.random()
    if kind < 0.45:
        return text[:position] + rng.choice(SNIPPETS) + text[position:]
    if kind < 0.8:
        return text[:position] + text[position + rng.randint(1, 40):]
    start = rng.randrange(len(text) + 1)
    pasted = text[start:start + rng.randint(1, 200)]
    return text[:position] + pasted + text[position:]


def _fresh(text: str, path: str) -> list:
    return analyze_source(text, path, SETTINGS.analysis)


def test_random_edits_give_what_a_fresh_analysis_gives():
    rng = random.Random(20261130)
    sources = sorted((EXAMPLES / "buggy").glob("*.py"))
    edits_done = 0
    for round_index in range(BATCHES):
        source = sources[round_index % len(sources)]
        text = source.read_text(encoding="utf-8")
        state = DocumentState(source.as_uri(), source)
        state.analyse(text, 1, SETTINGS)
        for batch in range(2):
            for _ in range(rng.randint(1, 8)):
                text = _edit(text, rng)
                edits_done += 1
                if rng.random() < 0.3:  # the editor sometimes asks mid-batch, too
                    state.analyse(text, batch, SETTINGS)
            incremental = state.analyse(text, batch + 100, SETTINGS).findings
            assert incremental == _fresh(text, str(source)), f"{source.name}, batch {batch}"
    assert edits_done >= BATCHES * 2


def _training_project_in_one_file(copies: int) -> str:
    """The bundled buggy examples, concatenated, with each copy's functions and classes renamed."""
    sources = [path.read_text(encoding="utf-8") for path in sorted((EXAMPLES / "buggy").glob("*.py"))]
    parts = []
    for copy in range(copies):
        for source in sources:
            parts.append(re.sub(r"^(\s*(?:def|class) )(\w+)", rf"\g<1>\g<2>_{copy}", source, flags=re.M))
    return "\n".join(parts)


def test_typing_inside_functions_of_a_large_file_gives_what_a_fresh_analysis_gives():
    """Most statements are kept between these edits: what is kept must still be right."""
    rng = random.Random(7)
    text = _training_project_in_one_file(2)
    state = DocumentState("file:///project.py", None)
    state.analyse(text, 0, SETTINGS)
    kept_somewhere = False
    for step in range(1, 13 * BATCHES):
        lines = text.split("\n")
        index = rng.choice([i for i, line in enumerate(lines) if line.startswith("    ")])
        column = rng.randrange(len(lines[index]) + 1)
        lines[index] = lines[index][:column] + rng.choice(["x", "(", ")", ":", "\n", "\n    ", "é", "'", " "]) + lines[index][column:]
        text = "\n".join(lines)
        findings = state.analyse(text, step, SETTINGS).findings
        kept_somewhere = kept_somewhere or bool(state.module.kept)
        if step % 4 == 0:
            assert findings == analyze_source(text, "file:///project.py", SETTINGS.analysis), f"step {step}"
    assert kept_somewhere


def test_typing_in_a_file_that_defines_its_functions_twice_gives_what_a_fresh_analysis_gives():
    """Two scripts in one file (each with its own ``main``): typing in one copy keeps the other
    copy's statements, which only bind the same names, and what they keep must still be right."""
    rng = random.Random(11)
    sources = [path.read_text(encoding="utf-8") for path in sorted((EXAMPLES / "buggy").glob("*.py"))]
    text = "\n".join(sources * 2)
    state = DocumentState("file:///two_scripts.py", None)
    state.analyse(text, 0, SETTINGS)
    first_copy_lines = text.count("\n", 0, len("\n".join(sources)))
    kept_a_namesake = False
    for step in range(1, 13 * BATCHES):
        lines = text.split("\n")
        index = rng.choice([i for i, line in enumerate(lines[:first_copy_lines]) if line.startswith("    ")])
        column = rng.randrange(len(lines[index]) + 1)
        lines[index] = lines[index][:column] + rng.choice(["x", "(", ")", ":", "\n", "\n    ", "é", "'", " "]) + lines[index][column:]
        text = "\n".join(lines)
        findings = state.analyse(text, step, SETTINGS).findings
        module = state.module
        defined = [set(facts.functions) | set(facts.classes) for facts in module.facts]
        edited = [i for i in range(len(defined)) if i not in module.kept]
        kept_a_namesake = kept_a_namesake or any(
            i in module.kept and defined[i] & defined[j] for j in edited for i in range(len(defined)) if i != j
        )
        if step % 4 == 0:
            assert findings == analyze_source(text, "file:///two_scripts.py", SETTINGS.analysis), f"step {step}"
    assert kept_a_namesake


def _without_statement(text: str, chunk) -> str:
    """The text with one top-level statement blanked out, every other line where it was."""
    lines = text.split("\n")
    first = chunk.start_line
    for number in range(first, min(first + chunk.line_count, len(lines))):
        lines[number] = ""
    return "\n".join(lines)


def test_removing_any_statement_and_putting_it_back_gives_what_a_fresh_analysis_gives():
    """Each statement the others depend on (a model class, a DDP wrap, a `.cuda()` line, a helper
    they call) disappears and comes back; a statement that kept stale findings would show here."""
    from trainlint.analysis.chunking import split_statements

    changed_findings = 0
    for source in sorted((EXAMPLES / "buggy").glob("*.py")):
        original = source.read_text(encoding="utf-8")
        state = DocumentState(source.as_uri(), source)
        before = state.analyse(original, 0, SETTINGS).findings
        for index, chunk in enumerate(split_statements(original)):
            if not chunk.text.strip():
                continue
            edited = _without_statement(original, chunk)
            if index % 3 == 0:  # and, sometimes, every later line moves down by one
                lines = edited.split("\n")
                lines.insert(chunk.start_line, "")
                edited = "\n".join(lines)
            after = state.analyse(edited, 2 * index + 1, SETTINGS).findings
            assert after == _fresh(edited, str(source)), f"{source.name} without statement {index}"
            changed_findings += after != before
            assert state.analyse(original, 2 * index + 2, SETTINGS).findings == before, f"{source.name}, statement {index} back"
    assert changed_findings > 20


_HELPER_CLEARS = '''import torch


def clear(opt):
    opt.zero_grad()


def train(model, opt, loader):
    for x, y in loader:
        clear(opt)
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
'''
_SOFTMAX_MODEL = '''import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 3)

    def forward(self, x):
        return torch.softmax(self.fc(x), dim=-1)


def train(loader):
    model = Net()
    criterion = nn.CrossEntropyLoss()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for x, y in loader:
        opt.zero_grad()
        loss = criterion(model(x), y)
        loss.backward()
        opt.step()
'''
_DDP = '''import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader

dist.init_process_group("nccl")
model = DDP(torch.nn.Linear(8, 2).cuda())

loader = DataLoader(dataset, batch_size=32, shuffle=True)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for x, y in loader:
    opt.zero_grad()
    torch.nn.functional.mse_loss(model(x.cuda()), y.cuda()).backward()
    opt.step()
'''
_LOADER = '''import torch
import torch.nn as nn


class LSTMTagger(nn.Module):
    def __init__(self, vocab_size, num_tags, dropout=0.3):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, 128)
        self.drop = nn.Dropout(dropout)
        self.out = nn.Linear(128, num_tags)

    def forward(self, tokens):
        return self.out(self.drop(self.embedding(tokens)))

    def tag_sentences_no_grad(self, batches):
        with torch.no_grad():
            return [self(batch).argmax(-1) for batch in batches]


class Trainer:
    def __init__(self, model, optimizer=None):
        self.model = model
        self.optimizer = optimizer

    @staticmethod
    def model_from_params(params):
        model = LSTMTagger(params["vocab_size"], params["num_tags"])
        model.load_state_dict(params["model"])
        return model

    @staticmethod
    def load(filename):
        params = torch.load(filename, map_location="cpu")
        model = Trainer.model_from_params(params)
        return Trainer(model=model)


def tag_file(model, batches):
    return model.tag_sentences_no_grad(batches)


def load_model_tag_text(model_file, batches):
    trainer = Trainer.load(model_file)
    model = trainer.model
    return tag_file(model, batches)
'''
_TEMPLATE_METHOD = '''import torch


class BaseTrainer:
    def __init__(self, model, optimizer):
        self.model = model
        self.optimizer = optimizer

    def train_step(self, batch):
        raise NotImplementedError

    def fit(self, loader):
        for batch in loader:
            self.train_step(batch)
            self.optimizer.step()


class ClassifierTrainer(BaseTrainer):
    def train_step(self, batch):
        x, y = batch
        loss = torch.nn.functional.cross_entropy(self.model(x), y)
        loss.backward()
        return loss.item()
'''
_SECOND_OVERRIDE = '''

class RegressionTrainer(BaseTrainer):
    def train_step(self, batch):
        self.optimizer.zero_grad()
        x, y = batch
        torch.nn.functional.mse_loss(self.model(x), y).backward()
'''
_SEEDED_LATE = '''import torch
import torch.nn as nn

model = nn.Sequential(nn.Linear(64, 64), nn.Dropout(0.1), nn.Linear(64, 2))
optimizer = torch.optim.Adam(model.parameters())
for x, y in train_loader:
    loss = nn.functional.cross_entropy(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
'''
# (what the edit does, the text before, the text after): findings differ, and only a statement the
# edit did not touch shows the difference.
CROSS_STATEMENT_EDITS = [
    ("a helper the loop calls stops clearing gradients", _HELPER_CLEARS, _HELPER_CLEARS.replace("    opt.zero_grad()", "    print(opt)")),
    ("the model's forward stops ending in softmax", _SOFTMAX_MODEL, _SOFTMAX_MODEL.replace("torch.softmax(self.fc(x), dim=-1)", "self.fc(x)")),
    ("the DDP wrap goes", _DDP, _DDP.replace("model = DDP(torch.nn.Linear(8, 2).cuda())", "model = torch.nn.Linear(8, 2).cuda()")),
    ("lines above move the statements the messages cite", _DDP, _DDP.replace('dist.init_process_group("nccl")', '\n\ndist.init_process_group("nccl")')),
    ("lines are added inside the model", _SOFTMAX_MODEL, _SOFTMAX_MODEL.replace("super().__init__()", "super().__init__()\n\n")),
    ("the project's loader stops loading the weights", _LOADER,
     _LOADER.replace('model.load_state_dict(params["model"])', 'print(params["model"])')),
    ("the holder the loader returns keeps another argument", _LOADER, _LOADER.replace("self.model = model", "self.model = optimizer")),
    ("the subclass's hook that the base's loop runs starts clearing gradients", _TEMPLATE_METHOD,
     _TEMPLATE_METHOD.replace("        x, y = batch\n        loss", "        self.optimizer.zero_grad()\n        x, y = batch\n        loss")),
    ("a second subclass overrides the hook the base's loop runs", _TEMPLATE_METHOD, _TEMPLATE_METHOD + _SECOND_OVERRIDE),
    # the seeding is a new module-level statement: the verdict joins its calls with those of the kept statements above
    ("torch is seeded after the model was built", _SEEDED_LATE, _SEEDED_LATE.replace("for x, y", "torch.manual_seed(0)\nfor x, y")),
]


@pytest.mark.parametrize("before,after", [case[1:] for case in CROSS_STATEMENT_EDITS], ids=[case[0] for case in CROSS_STATEMENT_EDITS])
def test_an_edit_changes_findings_in_statements_it_did_not_touch(before, after):
    state = DocumentState("file:///train.py", None)
    first = state.analyse(before, 1, SETTINGS).findings
    assert first == analyze_source(before, "file:///train.py", SETTINGS.analysis)
    second = state.analyse(after, 2, SETTINGS).findings
    assert second == analyze_source(after, "file:///train.py", SETTINGS.analysis)
    assert second != first
    assert state.analyse(before, 3, SETTINGS).findings == first


def _long_trainer_class(methods: int) -> str:
    """A class of many methods, each a short training step of its own, and a ``train`` method."""
    lines = ["import torch", "", "", "class Trainer:", "    def __init__(self, model, optimizer):",
             "        self.model = model", "        self.optimizer = optimizer", ""]
    for index in range(methods):
        lines += [
            f"    def step_{index}(self, batch):",
            "        x, y = batch",
            f"        loss = self.model(x, y) * {index + 1}",
            "        loss.backward()",
            "        self.optimizer.step()",
            "        self.optimizer.zero_grad()",
            "        return loss.item()",
            "",
        ]
    lines += [
        "    def train(self, loader):",
        "        history = []",
        "        for batch in loader:",
        "            x, y = batch",
        "            loss = self.model(x, y)",
        "            loss.backward()",
        "            self.optimizer.step()",
        "            self.optimizer.zero_grad()",
        "            history.append(loss.item())",
        "        return history",
        "",
    ]
    return "\n".join(lines)


def test_an_edit_inside_one_method_of_a_long_class_shows_what_a_fresh_analysis_shows():
    """Typing in one method of a long class: the finding the edit makes appears, the one it
    removes goes, in that method, and each text's findings are a fresh analysis' findings."""
    text = _long_trainer_class(40)
    state = DocumentState("file:///trainer.py", Path("trainer.py"))
    assert state.analyse(text, 0, SETTINGS).findings == _fresh(text, "trainer.py")
    kept_graph = text.replace("history.append(loss.item())", "history.append(loss)")
    train_line = kept_graph.split("\n").index("            history.append(loss)") + 1
    typed = text
    for version, target in enumerate((kept_graph, text, kept_graph), start=1):
        # one key at a time: `.item()` deleted from the end backwards, or typed back
        while typed != target:
            typed = one_key_towards(typed, target)
            findings = state.analyse(typed, version, SETTINGS).findings
        assert findings == _fresh(target, "trainer.py")
        retained = [finding.line for finding in findings if finding.code == "TL101"]
        assert retained == ([train_line] if target == kept_graph else [])


def test_a_key_inside_one_method_of_a_long_class_costs_a_fraction_of_a_fresh_analysis():
    """CPU time, in this process: a key typed in one method of a 1,000-line class re-parses that
    method's statement alone and keeps every other statement's results (measured: about a fifth of
    a fresh analysis; the bound is generous, for a loaded machine)."""
    text = _long_trainer_class(120)
    edited = text.replace("loss = self.model(x, y) * 61\n", "loss = self.model(x, y) * 610\n")
    assert edited != text

    def cpu(run) -> float:
        started = time.process_time()
        run()
        return time.process_time() - started

    fresh = min(cpu(lambda: DocumentState("file:///trainer.py", None).analyse(text, 0, SETTINGS)) for _ in range(3))
    state = DocumentState("file:///trainer.py", None)
    state.analyse(text, 0, SETTINGS)
    keys = [cpu(lambda version=version: state.analyse(edited if version % 2 else text, version, SETTINGS)) for version in range(1, 8)]
    assert statistics.median(keys) < 0.5 * fresh


_CUDA_SCRIPT = '''import torch
from torch.utils.data import DataLoader

print("starting")
device = torch.device("cuda")
loader = DataLoader(train_set, batch_size=64, shuffle=True, num_workers=8)
for x, y in loader:
    x, y = x.to(device), y.to(device)
    optimizer.zero_grad()
    loss = criterion(model(x), y)
    loss.backward()
    optimizer.step()
'''


@pytest.mark.parametrize("old,new", [
    ('print("starting")', 'print("starting", torch.cuda.device_count())'),  # a first CUDA line above the one there was
    ('print("starting")', 'print(\n    "starting",\n)'),  # lines above it (TL301's evidence cites its line)
    ('device = torch.device("cuda")', 'device = torch.device("cpu")'),  # the only one goes
    ('shuffle=True, num_workers=8)', 'shuffle=True, num_workers=8)  # "cuda"'),  # one after it, and one after a `#`
], ids=["above", "lines above", "itself", "below"])
def test_typing_around_the_first_cuda_line_gives_what_a_fresh_analysis_gives(old, new):
    """The first line that shows CUDA is searched for again only from the edited line on; typing
    above it, in it and below it, key by key, shows what a fresh analysis shows."""
    state = DocumentState("file:///train.py", None)
    text = _CUDA_SCRIPT
    assert state.analyse(text, 0, SETTINGS).findings == _fresh(text, "file:///train.py")
    shown = []
    for version, target in enumerate((_CUDA_SCRIPT.replace(old, new), _CUDA_SCRIPT), start=1):
        while text != target:
            text = one_key_towards(text, target)
            findings = state.analyse(text, version, SETTINGS).findings
            assert findings == _fresh(text, "file:///train.py")
        shown.append(findings)
    assert any(finding.code == "TL301" for finding in shown[-1])  # pin_memory: the script runs on CUDA


_PSEUDO_LABELS = '''import torch
import torch.nn as nn


def pseudo_label(teacher, loader):
    labels = []
    for images in loader:
        labels.append(teacher(images).argmax(1).tolist())
    print(sum(len(batch) for batch in labels))


if __name__ == "__main__":
    pseudo_label(nn.Linear(784, 10), torch.load("unlabelled.pt"))
'''


def test_freezing_a_model_key_by_key_gives_what_a_fresh_analysis_gives():
    """TL102 reads which models the file freezes from each statement, kept per statement: typing the
    freeze in, and a thaw after it, shows at each key what a fresh analysis shows."""
    frozen = _PSEUDO_LABELS.replace("    labels = []\n", "    teacher.requires_grad_(False)\n    labels = []\n")
    thawed = frozen.replace("    print(sum(", "    teacher.requires_grad_(True)\n    print(sum(")
    state = DocumentState("file:///label.py", None)
    text = _PSEUDO_LABELS
    codes = [{finding.code for finding in state.analyse(text, 0, SETTINGS).findings}]
    version = 0
    for target in (frozen, thawed):
        while text != target:
            text = one_key_towards(text, target)
            version += 1
            findings = state.analyse(text, version, SETTINGS).findings
            assert findings == _fresh(text, "file:///label.py")
        codes.append({finding.code for finding in findings})
    assert ["TL102" in shown for shown in codes] == [True, False, True]
