"""The flow walk's environment after an ``if``: what either branch wrote is merged, the rest kept."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from trainlint.analysis.module import ModuleAnalysis
from trainlint.analysis.statement_shapes import calls_method, names_calling_in
from trainlint.analysis.values import CONTAINER, GRAPH, MODEL, MODEL_CLASS

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


@settings(max_examples=300, deadline=None)
@given(
    st.text(alphabet="ab_x. ()\né", max_size=80).map(lambda text: text.replace("()", "(")),
    st.sampled_from(["a", "b", "ab", "x", "a_b", "é", "a.b", "ab "]),
    st.sampled_from(["zero_grad", "step", "parameters", "named_parameters", "train", "eval"]),
)
def test_names_calling_a_method_are_what_a_search_of_the_text_finds(words, name, method):
    # what the flow reads a parameter's role from, once per text rather than once per parameter
    text = words.replace("x", f".{method}(")
    assert calls_method(names_calling_in(text), text, name, method) == (f"{name}.{method}(" in text)


CLOSURE = '''import torch


def train(loader):
    optimizer = torch.optim.SGD(torch.nn.Linear(8, 2).parameters(), lr=0.1)
    scaler = torch.nn.Linear(2, 2)

    def read_enclosing():
        return optimizer

    def shadowing():
        scaler = torch.optim.Adam([], lr=0.1)
        return scaler

    def nonlocal_rebinding():
        nonlocal optimizer
        return optimizer

    for x in loader:
        read_enclosing()
        shadowing()
        nonlocal_rebinding()
'''


def test_a_nested_function_reads_what_it_does_not_bind_from_the_enclosing_function():
    from trainlint.analysis.values import OPTIMIZER

    module = ModuleAnalysis(CLOSURE, "train.py")
    module.prepare_scopes()
    (outer,) = [scope for scope in module.all_scopes if scope.name == "train"]
    returned = {name: info.analysis(module.summary).return_value for name, info in outer.local_functions.items()}
    assert OPTIMIZER in returned["read_enclosing"].tags  # a closure over the enclosing `optimizer`
    assert OPTIMIZER in returned["nonlocal_rebinding"].tags  # `nonlocal` names the enclosing binding
    assert OPTIMIZER in returned["shadowing"].tags and MODEL not in returned["shadowing"].tags  # its own `scaler`


CLASS_TABLES = '''import torch.nn as nn


class Encoder(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.proj = nn.Linear(width, width)


class Tokenizer:
    def __init__(self, width):
        self.width = width


ENCODERS = {"small": (Encoder, 128), "large": (Encoder, 1024)}
MIXED = {"encoder": Encoder, "tokenizer": Tokenizer}


def build(name, flag):
    encoder_class, width = ENCODERS[name]
    encoder = encoder_class(width)
    picked = MIXED[name](width)
    branch_class = Encoder if flag else Tokenizer
    either = branch_class(width)
    for key in ENCODERS:
        print(key)
'''


def test_a_class_read_out_of_a_table_or_a_name_builds_a_model_only_when_every_candidate_is_a_module():
    module = ModuleAnalysis(CLASS_TABLES, "build.py")
    module.prepare_scopes()
    (scope,) = [scope for scope in module.all_scopes if scope.name == "build"]
    env = scope.final_env
    assert MODEL_CLASS in env["encoder_class"].tags
    assert MODEL in env["encoder"].tags
    # one candidate is a plain class: what calling it builds is not known
    assert MODEL not in env["picked"].tags
    assert MODEL not in env["either"].tags
    # iterating the dict gives its keys, not its classes
    assert MODEL_CLASS not in env["key"].tags
