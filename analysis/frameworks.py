"""What a training framework does around the methods a user overrides: which run once per training
step, which run without grad. The loop that calls them is in the framework, out of sight.

PyTorch Lightning (``LightningModule``): the trainer calls ``training_step`` once per batch with
grad enabled and, under automatic optimisation, runs ``backward`` on the loss it returns and
clears the gradients itself; with ``self.automatic_optimization = False`` the method has to call
``self.manual_backward(loss)``, ``opt.step()`` and ``opt.zero_grad()`` itself. The evaluation
loops (``validation_step``, ``test_step``, ``predict_step`` and their epoch hooks) run under
``torch.no_grad()``/``inference_mode()``.

Hugging Face ``Trainer``: ``training_step`` (and the ``compute_loss`` it calls) runs once per
optimisation micro-step with grad enabled. ``evaluation_loop`` calls ``prediction_step`` once per
batch without disabling grad: the base ``prediction_step`` wraps its forward in
``torch.no_grad()`` itself, so an override must do the same. ``compute_loss`` is also called from
the base ``prediction_step``, under that ``no_grad``: whoever calls it decides.

Lightning also calls the step methods and the ``on_{train,validation,test,predict}_batch_end`` hooks
(of the module and of every ``Callback``, ``BasePredictionWriter`` among them) once per batch, with the
batch moved to the module's device and, in the batch-end hooks, the step's ``outputs`` as it returned
them: what such a method keeps in an attribute piles up for as long as the attribute lives.

Between a training step's backward and its optimizer step, Lightning (automatic optimisation) calls
``on_after_backward``, ``on_before_optimizer_step`` and ``configure_gradient_clipping`` of the module
(the first two of every ``Callback`` too), in the documented hook order (``backward``,
``on_after_backward``, ``on_before_optimizer_step``, ``configure_gradient_clipping``,
``optimizer_step``, ``optimizer_zero_grad``); the Hugging Face Trainer calls a ``TrainerCallback``'s
``on_pre_optimizer_step`` after clipping and before ``optimizer.step()``, and steps the optimizer
after ``training_step`` returns (at each accumulation boundary, then ``model.zero_grad()``).

fairseq: its ``Trainer.valid_step`` calls the task's ``valid_step`` inside ``torch.no_grad()``.

Lightning's ``Trainer`` applies two of its arguments to torch's global state when it is built:
``deterministic=True`` (or ``"warn"``) calls ``torch.use_deterministic_algorithms(True)``, and
``benchmark`` sets ``torch.backends.cudnn.benchmark`` (left unset, it is False under
``deterministic=True``): ``TRAINER_CUDNN_SETTINGS``.

PyTorch-Ignite: ``engine.run(data, max_epochs=N)`` iterates ``data`` once per epoch, N epochs, and
between them calls only the handlers registered on the engine's events (``@engine.on(Events.X)``,
``engine.add_event_handler(Events.X, f)``; ``Events.EPOCH_STARTED`` at the start of each epoch): a
statement of the function that calls ``run`` runs once, not per epoch (ignite docs, ``Engine.run``
and "Events and Handlers"). A receiver that such a handler is registered on, with an ``Events`` of
ignite, is an ignite engine. ``Engine(process_function)`` calls ``process_function(engine, batch)`` once per
batch inside ``run``, in the grad mode in force where ``run`` is called: ignite changes none (its
``create_supervised_evaluator`` builds a step that wraps its forward in ``torch.no_grad()`` itself; ignite
docs, "Engine" concepts and ``create_supervised_evaluator``), and the handlers of an engine run inside its
``run``, in the grad mode its training steps run in.

Read from transformers' ``trainer.py`` (``Trainer.evaluation_loop``, ``Trainer.prediction_step``,
``_inner_training_loop``) and ``trainer_callback.py``, Lightning's hooks page and loops and fairseq's ``trainer.py``; kept as a table so that no framework needs to be
installed.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

import libcst as cst

from .names import dotted, last_part

if TYPE_CHECKING:
    from .events import CallEvent
    from .summary import ClassInfo, FunctionInfo, ModuleSummary

LIGHTNING = "lightning"
HF_TRAINER = "hf-trainer"
FAIRSEQ_TASK = "fairseq-task"

# Methods the framework calls once per training step, with grad enabled.
_TRAINING_STEPS = {
    LIGHTNING: frozenset({"training_step"}),
    HF_TRAINER: frozenset({"training_step", "compute_loss"}),
}
# Hugging Face Trainer methods that run with grad enabled when overridden (the base versions
# disable it inside themselves, or leave it to prediction_step).
_HF_GRAD_ON_EVALUATION = frozenset({"prediction_step", "evaluation_loop", "prediction_loop", "evaluate", "predict"})


# Keyword arguments of a framework's trainer that set torch's cuDNN and determinism state when it is built: one row
# a keyword, what it sets, and the source. (Lightning's package names: `lightning`, `lightning.pytorch` and the older
# `pytorch_lightning`.)
_LIGHTNING_TRAINERS = frozenset({
    "lightning.Trainer", "lightning.pytorch.Trainer", "lightning.pytorch.trainer.Trainer",
    "pytorch_lightning.Trainer", "pytorch_lightning.trainer.Trainer", "pytorch_lightning.trainer.trainer.Trainer",
})
_LIGHTNING_TRAINER_DOCS = "Lightning docs, Trainer API (common/trainer.html), "
TRAINER_CUDNN_SETTINGS: tuple[tuple[str, str, str], ...] = (
    ("deterministic", "torch.use_deterministic_algorithms",
     _LIGHTNING_TRAINER_DOCS + "`deterministic`: True makes PyTorch operations use deterministic algorithms "
     "(torch.use_deterministic_algorithms); \"warn\" does so with warnings only"),
    ("benchmark", "torch.backends.cudnn.benchmark",
     _LIGHTNING_TRAINER_DOCS + "`benchmark`: the value the Trainer sets torch.backends.cudnn.benchmark to; "
     "left unset, it is False when deterministic is True"),
)


def trainer_cudnn_argument(callee: str | None, setting: str, node: cst.Call) -> tuple[cst.Arg, str] | None:
    """The keyword argument of a framework trainer's construction (``Trainer(deterministic=True)``) that sets the torch
    switch ``setting`` (``torch.backends.cudnn.benchmark``, ``torch.use_deterministic_algorithms``), with the source
    that says so, or None."""
    if callee not in _LIGHTNING_TRAINERS:
        return None
    for keyword, sets, source in TRAINER_CUDNN_SETTINGS:
        if sets == setting:
            arg = next((arg for arg in node.args if arg.keyword is not None and arg.keyword.value == keyword), None)
            return (arg, source) if arg is not None else None
    return None


_IGNITE_EVENTS = frozenset({"ignite.engine.Events", "ignite.engine.events.Events"})
_IGNITE_REGISTRATIONS = frozenset({"on", "add_event_handler"})


def _ignite_event(summary: ModuleSummary, node: cst.BaseExpression) -> bool:
    """``Events.EPOCH_STARTED``, ``Events.ITERATION_COMPLETED(every=10)``, ``Events.STARTED | Events.COMPLETED``."""
    if isinstance(node, cst.BinaryOperation):
        return _ignite_event(summary, node.left) and _ignite_event(summary, node.right)
    if isinstance(node, cst.Call):
        node = node.func
    return isinstance(node, cst.Attribute) and summary.canonical(dotted(node.value) or "") in _IGNITE_EVENTS


def ignite_registrations(calls: Iterable[CallEvent], definitions: Iterable[cst.CSTNode]) -> list[tuple[str, cst.Call]]:
    """Each ``engine.on(...)``/``engine.add_event_handler(...)`` among ``calls`` and the decorators of the function
    definitions among ``definitions`` (``@trainer.on(Events.EPOCH_STARTED)``), as (receiver text, the call)."""
    found = [(call.receiver_key, call.node) for call in calls if call.method in _IGNITE_REGISTRATIONS and call.receiver_key]
    for node in definitions:
        if not isinstance(node, cst.FunctionDef):
            continue
        for decorator in node.decorators:
            called = decorator.decorator
            if isinstance(called, cst.Call) and isinstance(called.func, cst.Attribute) and called.func.attr.value in _IGNITE_REGISTRATIONS:
                receiver = dotted(called.func.value)
                if receiver is not None:
                    found.append((receiver, called))
    return found


_IGNITE_ENGINE_CLASSES = frozenset({
    "ignite.engine.Engine", "ignite.engine.engine.Engine",
    "ignite.engine.DeterministicEngine", "ignite.engine.deterministic.DeterministicEngine",
})


def ignite_engines(calls: Iterable[CallEvent], assignments: Iterable[tuple[str, cst.CSTNode | None]]) -> dict[str, tuple[str, CallEvent]]:
    """The ignite engines among ``calls`` built from a function of the file (``evaluator = Engine(validation_step)``),
    by the name each is bound to (``assignments``: each target with the value node assigned to it): the name of its
    process function and the construction."""
    built: dict[cst.CSTNode, tuple[str, CallEvent]] = {
        call.node: (call.arg_nodes[0].value.value, call) for call in calls
        if call.callee in _IGNITE_ENGINE_CLASSES and call.arg_nodes and call.arg_nodes[0].keyword is None
        and isinstance(call.arg_nodes[0].value, cst.Name)
    }
    return {target: built[value] for target, value in assignments if value is not None and value in built}


def ignite_engine_runs(summary: ModuleSummary, run: CallEvent, registrations: Iterable[tuple[str, cst.Call]]) -> cst.Call | None:
    """The registration of an ignite event handler on the receiver of ``run`` (``trainer.run(loader, max_epochs=...)``, more
    than one epoch) that shows it is an ignite engine, or None."""
    epochs = run.keyword("max_epochs")
    if run.method != "run" or run.receiver_key is None or epochs is None or not run.arg_nodes or run.arg_nodes[0].keyword is not None:
        return None
    value = epochs.value
    if (isinstance(value, cst.Integer) and int(value.value) <= 1) or (isinstance(value, cst.Name) and value.value == "None"):
        return None
    return next((
        call for receiver, call in registrations
        if receiver == run.receiver_key and call.args and _ignite_event(summary, call.args[0].value)
    ), None)


def framework_of(summary: ModuleSummary, owner: ClassInfo | None) -> str | None:
    """LIGHTNING for a LightningModule, HF_TRAINER for a transformers (or trl) Trainer subclass,
    FAIRSEQ_TASK for a subclass of fairseq's (Legacy)FairseqTask."""
    if owner is None:
        return None
    if summary.class_kind(owner) == "lightning":
        return LIGHTNING
    if any(summary.canonical(base).startswith(("transformers.", "trl.")) and last_part(base).endswith("Trainer") for base in owner.bases):
        return HF_TRAINER
    if any(summary.canonical(base).startswith("fairseq.") and last_part(base).endswith("FairseqTask") for base in owner.bases):
        return FAIRSEQ_TASK
    return None


def grad_handled_by_framework(summary: ModuleSummary, function: FunctionInfo) -> bool:
    """The framework decides the grad mode this method runs in: every LightningModule method (its
    evaluation loops run under no_grad), and every Trainer method except the evaluation overrides
    that ``evaluation_loop`` calls with grad enabled."""
    framework = framework_of(summary, function.owner)
    if framework == LIGHTNING:
        return True
    if framework == FAIRSEQ_TASK:
        return function.name == "valid_step"
    return framework == HF_TRAINER and function.name not in _HF_GRAD_ON_EVALUATION


def training_step_hook(summary: ModuleSummary, function: FunctionInfo | None) -> str | None:
    """Evidence that the framework calls this method once per training step with grad on, or None."""
    if function is None:
        return None
    framework = framework_of(summary, function.owner)
    if framework is None or function.name not in _TRAINING_STEPS.get(framework, frozenset()):
        return None
    who = "Lightning" if framework == LIGHTNING else "the Hugging Face Trainer"
    return f"{who} calls `{function.name}` once per training step"


_PER_BATCH = frozenset({
    "training_step", "validation_step", "test_step", "predict_step",
    "on_train_batch_end", "on_validation_batch_end", "on_test_batch_end", "on_predict_batch_end",
})
_CALLBACK_BASES = frozenset({"Callback", "BasePredictionWriter"})


def per_batch_hook(summary: ModuleSummary, function: FunctionInfo | None) -> str | None:
    """Evidence that Lightning calls this method once per batch (a LightningModule's step method or
    batch-end hook, or a Callback's batch-end hook), or None."""
    if function is None or function.owner is None or function.name not in _PER_BATCH:
        return None
    owner = function.owner
    if framework_of(summary, owner) == LIGHTNING:
        return f"Lightning calls `{function.name}` once per batch"
    if function.name.startswith("on_") and _lightning_callback(summary, owner, _CALLBACK_BASES):
        return f"Lightning calls the callback's `{function.name}` once per batch"
    return None


def _lightning_callback(summary: ModuleSummary, owner: ClassInfo, bases: frozenset[str]) -> bool:
    """A class deriving from one of Lightning's callback ``bases`` (``Callback``, ``BasePredictionWriter``)."""
    return any(
        summary.canonical(base).startswith(("lightning.", "pytorch_lightning.")) and last_part(base) in bases
        for base in owner.bases
    )


def manual_optimization(summary: ModuleSummary, owner: ClassInfo | None) -> bool:
    """A LightningModule that sets ``self.automatic_optimization = False``: it steps and zeroes itself."""
    if owner is None or framework_of(summary, owner) != LIGHTNING:
        return False
    text = owner.chunk.code_for(owner.node)
    return "automatic_optimization = False" in text or "automatic_optimization=False" in text


_LIGHTNING_BEFORE_STEP = frozenset({"on_after_backward", "on_before_optimizer_step", "configure_gradient_clipping"})
_LIGHTNING_CALLBACK_BEFORE_STEP = frozenset({"on_after_backward", "on_before_optimizer_step"})


def runs_between_backward_and_step(summary: ModuleSummary, function: FunctionInfo | None) -> str | None:
    """Evidence that the framework calls this method after a training step's backward and before its optimizer
    step (what it clears, the step finds cleared), or None."""
    if function is None or function.owner is None:
        return None
    owner = function.owner
    if framework_of(summary, owner) == LIGHTNING:
        if function.name in _LIGHTNING_BEFORE_STEP and not manual_optimization(summary, owner):
            return f"Lightning calls `{function.name}` after the training step's backward and before the optimizer step"
        return None
    if function.name in _LIGHTNING_CALLBACK_BEFORE_STEP and _lightning_callback(summary, owner, frozenset({"Callback"})):
        return f"Lightning calls the callback's `{function.name}` after the training step's backward and before the optimizer step"
    if function.name == "on_pre_optimizer_step" and any(
        summary.canonical(base).startswith("transformers.") and last_part(base) == "TrainerCallback" for base in owner.bases
    ):
        return "the Hugging Face Trainer calls the callback's `on_pre_optimizer_step` right before the optimizer step"
    return None


def stepped_after_return(summary: ModuleSummary, function: FunctionInfo | None) -> str | None:
    """Evidence that the framework steps the optimizer after this method returns, on the gradients its backward
    left (a Hugging Face Trainer's ``training_step``), or None."""
    if function is None or function.name != "training_step" or framework_of(summary, function.owner) != HF_TRAINER:
        return None
    return "the Hugging Face Trainer steps the optimizer after `training_step` returns, on the gradients its backward left"
