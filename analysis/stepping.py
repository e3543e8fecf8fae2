"""What steps the weights: an optimizer, a grad scaler or an engine, known by what the code does with it.

A receiver of ``.step()`` whose value the flow knows (built by an optimizer's constructor, a scaler's, an
engine's ``deepspeed.initialize``, handed in under an annotation) is what its tags say. Many are not known
there: built in another function or file, handed in as a parameter, kept on ``self`` by a method the flow
does not read, returned by a factory, held in a dict or a list. What the scope does with the object is then
the evidence, each kind with its strength:

- ``protocol``: the same object (the same text: ``opt``, ``self.opt``, ``opts[k]``) has ``.zero_grad()`` and
  ``.step()`` called on it in the scope; a scaler's ``.step(x)`` with its ``.update()`` or ``.scale(...)``; an
  engine's ``.backward(loss)`` with its ``.step()``. A module's ``zero_grad()`` alone steps nothing, and a
  scheduler has ``.step()`` and no ``.zero_grad()``;
- ``after backward``: ``.step()``, with no argument, is the first step after a backward in the same loop
  body (or the scope's straight-line code); a step after another step (``optimizer.step(); scheduler.step()``)
  is not;
- ``factory``: the receiver is bound in the scope to a call handed a model's ``.parameters()`` or
  ``.named_parameters()`` or a list of param groups (``[{"params": ...}]``): what builds an optimizer.

Against it: a receiver known to be something else (a model, a loss, a loader, a tensor, unless a protocol
above is called on it: a tensor has no ``.step()``), or bound to a scheduler's constructor
(``LambdaLR(opt, ...)``; an unknown call handed an optimizer may be a wrapper, ``FP16_Optimizer(opt)``, and says
nothing), or to a class of the workspace that is no optimizer. Only where nothing in the scope says either way does the receiver's name still count
(``optimizer``, ``opt``, ``scaler``, ``engine``), as the weakest evidence.

The facts are one pass over the scope's own events, kept with its flow (``ScopeAnalysis.followed``, as
``patterns._events_by_loop`` keeps its index): a key typed elsewhere never walks a tree for them.
"""

from __future__ import annotations

import libcst as cst

from . import torchapi
from .events import AssignEvent, CallEvent, Loop, is_backward
from .flow import ScopeAnalysis
from .names import dotted
from .values import (
    ACCELERATOR,
    CRITERION,
    DATASET_ITERABLE,
    DATASET_MAP,
    ENGINE,
    LOADER,
    MODEL,
    OPTIMIZER,
    SCALER,
    TENSOR,
    UNKNOWN,
)

# Kinds a value can be known as that no optimizer, scaler or engine is.
_OTHER_KINDS = frozenset({MODEL, CRITERION, LOADER, TENSOR, ACCELERATOR, DATASET_MAP, DATASET_ITERABLE})
# What a method that hands an optimizer the weights it updates is called.
_PARAMETER_METHODS = frozenset({"parameters", "named_parameters"})


def receiver_text(call: CallEvent) -> str:
    """What a method is called on, as the code names it: ``optimizer``, ``self.optimizer``, and also
    ``optimizers["G"]`` or ``self.optims[i]`` (one optimizer of several kept in a dict or a list), which
    have no dotted key."""
    key = call.receiver_key or (call.callee or "").rpartition(".")[0]
    if not key and type(call.node.func) is cst.Attribute and type(call.node.func.value) is cst.Subscript:
        return call.scope.chunk.code_for(call.node.func.value)
    return key


def step_evidence(call: CallEvent) -> str | None:
    """Why ``call`` (a ``.step()``) steps an optimizer, a scaler or an engine, in words for a finding's
    evidence; None when nothing says so, or something says it does not."""
    if call.method != "step":
        return None
    receiver = call.receiver or UNKNOWN
    if OPTIMIZER in receiver.tags or ENGINE in receiver.tags:
        return f"an optimizer ({receiver.note})" if receiver.note else "an optimizer"
    if SCALER in receiver.tags:
        return "a grad scaler" if call.args else None
    text = receiver_text(call)
    facts = _facts(call.scope)
    methods = facts.methods.get(text, frozenset())
    if receiver.tags & _OTHER_KINDS and not (TENSOR in receiver.tags and methods & {"zero_grad", "backward"}):
        return None  # (a tensor has no `.step()`: what the flow took for one, stepped by a protocol, is not one)
    if "zero_grad" in methods:  # (a wrapper built around an optimizer, `Lookahead(opt)`, too)
        return f"`{text}.zero_grad()` and `{text}.step()` are called: an optimizer's protocol"
    if "backward" in methods:
        return f"`{text}.backward(loss)` and `{text}.step()` are called: an engine's protocol"
    if text in facts.not_stepping:
        return None
    if call.args and methods & {"update", "scale"}:
        return f"`{text}.step(...)` with `{text}.update()` or `.scale()`: a grad scaler's protocol"
    if text in facts.factories:
        return f"`{text}` is built from a model's parameters"
    if id(call) in facts.after_backward:
        return f"`{text}.step()` is the first step after a backward"
    return None


def knows_otherwise(call: CallEvent) -> bool:
    """Something in the scope says the receiver of ``.step()`` is no optimizer: it is known as another kind,
    or bound to a scheduler's construction or to a workspace class that is no optimizer. Then its name
    counts for nothing."""
    receiver = call.receiver or UNKNOWN
    if receiver.tags & _OTHER_KINDS and not receiver.tags & {OPTIMIZER, ENGINE, SCALER}:
        return True
    return step_evidence(call) is None and receiver_text(call) in _facts(call.scope).not_stepping


def optimizer_protocol(call: CallEvent) -> bool:
    """The object ``call`` is made on has both ``.zero_grad()`` and ``.step()`` called on it in the scope."""
    return {"zero_grad", "step"} <= _facts(call.scope).methods.get(receiver_text(call), frozenset())


def runs_as_an_engine(call: CallEvent) -> bool:
    """The object ``call`` is made on is run as the model (``engine(batch)``) and has ``.backward(loss)`` and
    ``.step()`` called on it in the scope: DeepSpeed's engine protocol, whose ``step()`` also zeroes the gradients
    (deepspeed/runtime/engine.py, ``DeepSpeedEngine.step`` -> ``_take_model_step`` -> ``zero_grad``), whatever
    wrapper returned it (``msamp``'s ``deepspeed.initialize``)."""
    text = receiver_text(call)
    facts = _facts(call.scope)
    return {"backward", "step"} <= facts.methods.get(text, frozenset()) and text in facts.modules


def clears_a_module(call: CallEvent) -> bool:
    """``model.zero_grad()`` of a module: one the flow knows, or one the scope runs (``net(x)``) or asks for its
    parameters or mode, on which nothing calls ``.step()``."""
    if call.method != "zero_grad" or call.receiver is None:
        return False
    if MODEL in call.receiver.tags:
        return True
    if call.receiver.tags & _OTHER_KINDS or call.receiver.tags & {OPTIMIZER, SCALER, ENGINE}:
        return False
    text = receiver_text(call)
    facts = _facts(call.scope)
    return text in facts.modules and "step" not in facts.methods.get(text, frozenset())


def stepped_optimizer(scope: ScopeAnalysis, expression: cst.BaseExpression) -> bool:
    """``expression`` (``opt``, ``self.opt``) names what a ``.step()`` of the scope steps as an optimizer, by the
    evidence above: handed to a call, it is an optimizer handed."""
    text = dotted(expression)
    if text is None:
        return False
    facts = _facts(scope)
    if facts.stepped is None:
        facts.stepped = {
            receiver_text(event) for event in scope.events
            if type(event) is CallEvent and event.method == "step" and step_evidence(event) is not None
        }
    return text in facts.stepped


class _Facts:
    __slots__ = ("methods", "after_backward", "factories", "not_stepping", "modules", "stepped")

    def __init__(self) -> None:
        self.methods: dict[str, frozenset[str]] = {}  # receiver text -> the protocol's methods called on it
        self.after_backward: set[int] = set()  # ids of the `.step()` calls that first follow a backward
        self.factories: set[str] = set()  # names bound to a call handed a model's parameters
        self.not_stepping: set[str] = set()  # names bound to a scheduler or to a workspace class's instance
        self.modules: set[str] = set()  # what the scope runs as a module (`net(x)`, `net.parameters()`, `net.train()`)
        self.stepped: set[str] | None = None  # what the scope steps as an optimizer, once asked (`stepped_optimizer`)


# The key of the facts in ``ScopeAnalysis.followed``.
_FACTS = "stepping facts"
# Methods only a module has among the objects that get `.zero_grad()`.
_MODULE_METHODS = frozenset({"parameters", "named_parameters", "train", "eval", "forward"})
# The methods whose calls on one object are the protocols above (``backward`` with an argument: an engine's).
_PROTOCOL = frozenset({"zero_grad", "step", "update", "scale", "unscale_", "backward"})


def _facts(scope: ScopeAnalysis) -> _Facts:
    kept = scope.followed.get(_FACTS)
    if kept is not None and kept[0][1] == len(scope.events):  # (a scope asked for while it is walked grows)
        return kept[0][0]
    facts = _Facts()
    methods: dict[str, set[str]] = {}
    last: dict[Loop | None, str] = {}  # per loop body (None: the scope): "backward" or "step", whichever came last
    for event in scope.events:
        if type(event) is AssignEvent:
            _read_binding(scope, event, facts)
            continue
        if type(event) is not CallEvent:
            continue
        text = receiver_text(event) if event.method is not None else ""
        if text and event.method in _PROTOCOL and not (event.method == "backward" and not event.args):
            methods.setdefault(text, set()).add(event.method)
        elif text and event.method in _MODULE_METHODS:
            facts.modules.add(text)
        elif event.method is None and event.receiver_key is not None:  # `net(x)`, `self.net(x)`: a value called
            facts.modules.add(event.receiver_key)
        loops: tuple[Loop | None, ...] = (None, *event.context.loops)
        if is_backward(event):
            last.update(dict.fromkeys(loops, "backward"))
        elif event.method == "step":
            if not event.args and last.get(loops[-1]) == "backward":
                facts.after_backward.add(id(event))
            last.update(dict.fromkeys(loops, "step"))
    facts.methods = {text: frozenset(called) for text, called in methods.items()}
    scope.followed[_FACTS] = ((facts, len(scope.events)), ())  # read no other function's flow
    return facts


def _read_binding(scope: ScopeAnalysis, event: AssignEvent, facts: _Facts) -> None:
    """A name bound to a call: an optimizer's factory (handed a model's parameters), a scheduler (by its
    constructor) or an instance of a workspace class that is no optimizer."""
    call = event.value_node
    if len(event.targets) != 1 or not isinstance(call, cst.Call):
        return
    name = event.targets[0]
    callee = dotted(call.func)
    if callee is not None and torchapi.is_scheduler(scope.summary.canonical(callee)):
        facts.not_stepping.add(name)
        return
    # (a call of an unknown callable handed an optimizer says nothing either way: a scheduler, or a wrapper that is one,
    # `FP16_Optimizer(opt)`, `Lookahead(opt)`; schedulers are known by their constructors above)
    if any(hands_parameters(arg.value) for arg in call.args):
        facts.factories.add(name)
        return
    if OPTIMIZER in event.value.tags or ENGINE in event.value.tags or SCALER in event.value.tags:
        return
    info = scope.summary.classes.get(call.func.value) if isinstance(call.func, cst.Name) else None
    if info is not None and "zero_grad" not in info.methods and not any(_optimizer_base(base) for base in info.bases):
        facts.not_stepping.add(name)  # `opt = Options(args)`: a class of the file that clears no gradients


def _optimizer_base(base: str) -> bool:
    """``torch.optim.Optimizer`` or a library optimizer a class of the workspace extends."""
    return base in {"torch.optim.Optimizer", "torch.optim.optimizer.Optimizer"} or torchapi.is_optimizer_class(base)


def hands_parameters(argument: cst.BaseExpression) -> bool:
    """``model.parameters()``, ``model.named_parameters()``, ``filter(f, model.parameters())``, or a list of
    param groups (``[{"params": ...}, ...]``)."""
    if isinstance(argument, cst.Call):
        func = argument.func
        if isinstance(func, cst.Attribute) and func.attr.value in _PARAMETER_METHODS:
            return True
        return isinstance(func, cst.Name) and func.value in {"filter", "list"} and any(
            hands_parameters(arg.value) for arg in argument.args
        )
    if isinstance(argument, (cst.List, cst.Tuple)):
        return bool(argument.elements) and all(_param_group(element.value) for element in argument.elements)
    return False


def _param_group(element: cst.BaseExpression) -> bool:
    if not isinstance(element, cst.Dict):
        return False
    return any(
        isinstance(item, cst.DictElement) and isinstance(item.key, cst.SimpleString) and item.key.evaluated_value == "params"
        for item in element.elements
    )
