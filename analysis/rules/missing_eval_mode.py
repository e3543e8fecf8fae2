"""An evaluation pass runs a model that has dropout or batch-norm, and nothing puts it in eval mode.

A module starts in training mode and stays there until `.eval()` is called. Evaluated in training
mode, dropout keeps dropping units (scores are noisy and pessimistic) and batch-norm normalises
with the statistics of each evaluation batch while also updating its running averages with
evaluation data: validation numbers are wrong, checkpoint selection picks on noise, and the
saved model's batch-norm statistics are polluted by the validation set. A function used for both
(`run_epoch(model, loader, optimizer=None)`) that starts with `model.train()` does this to every
evaluation call. An inference pass is known by what it does, not by its name: a function that trains
nothing (no backward, no optimizer step, in it or in the helpers it calls) and whose forward feeds no
backward (it runs without grad, or returns and keeps none of its graph, and what it returns no caller in
the file backwards): scoring, sampling an image grid, extracting features for a metric, decoding. So is a
forward every N steps of the loop that trains the same model (under `if step % k == 0:`: a held-out batch scored, a
grid sampled from the generator its optimizer steps) that no backward runs through, in a branch that backwards and
steps nothing: it runs in the training mode the step left (which forward a backward runs through is the flow's graph
roots, so a name the scoring reuses, `pred` or `loss`, is not mistaken for the training step's). A no-grad
loop over held-out data (`val_loader`, `testloader`) is one too, and so, in a file that trains, is a loop over
held-out data that trains nothing (code written before `no_grad`, or that forgot it). A script's module level is the
same pass as the same body in a `main()` it calls: a forward there, in a program that trains nothing (no backward,
optimizer step or `torch.autograd` in the file or in the workspace functions its module level runs), is an inference
pass, unless the script built the model without weights and loads none into it (a check of its shapes, a demo; a
class whose constructor loads its checkpoint itself, `torch.load` or `load_state_dict` in `__init__`, has its weights). The
mode is also followed
to where it is known: an evaluation function handed the model straight from the function that trains it
(`net.train()`, or a backwarded forward, and no `.eval()` there), in this file or another (`from utils import *` and
`do_eval(model, ...)` every N steps of the training loop: reported on the evaluation, where the `.eval()` belongs; when
that training function is itself handed the model, its layers are what the calls in its own file hand it: `train_net(net)`
in `train.py`, called by that file's main block with `UNet(...)`); a class that puts its model in training
mode in one method (its own, or one it inherits from a base class of the workspace: a forecaster's `predict` after
the base class's `_train_model`) and runs it in an inference pass that never switches it, itself or behind a wrapper
method that sets no mode; and a model whose trained weights are loaded (`load_state_dict`) and that is then only run
without grad, by itself or by a helper it is handed to; so is a model a factory builds from trained weights it is
handed (`get_unetr(..., decoder_state=state)`, `state` taken from what `torch.load` returned) and runs in a loop of a
function that trains nothing (a note when the factory is not read; a factory of the workspace that returns its model
with `.eval()` is eval mode). A model the project's loader hands out (`Trainer.load(path)`, a function or static
method of the workspace that builds it, loads its weights with `load_state_dict` and returns it, or an object keeping it
as an attribute, without `.eval()`) is in training mode too: run for inference by a function that trains nothing (a
method of its class that runs it without grad, `model.parse_sentences_no_grad(...)`, or a helper it is handed to that
does so and switches nothing), a warning for a class with dropout or batch-norm. A model the file builds and never trains (a distillation
teacher, a target network, a frozen encoder: no optimizer is given its parameters, every forward of it runs without
grad, it is handed whole to nothing) is run for inference even inside a training step or a loss: built in training
mode, it stays there unless switched, and as a submodule its holder's `.train()` switches it back, whatever
`.eval()` its constructor called (unless the holder overrides `train`). When the model comes from elsewhere (a parameter,
a factory of another file) and its layers cannot be read, these are notes. Two passes whose mode depends on a
caller this file does not show are notes too: a module's own inference method that runs its
forward without `self.eval()` (its calls in the workspace's other files are read: when each switches the module to
eval first it is quiet; one that trains it, or calls `.train()` last, before calling it makes it a warning, for a
module with dropout or batch-norm), and an inference method of a plain class (`Predictor.predict`) that runs the model
its constructor was handed while no method of the class switches it (a warning when every construction of the class,
in this file or another, hands it a model of a workspace class with such layers, built in training mode and never switched
in that file, in code that trains nothing: a server script's `PredictionServer(model)` after loading the checkpoint). A plain class that builds its model itself (in its
constructor or a loading method) and runs it without grad, with nothing switching it, runs it in training mode: a warning
for a model whose layers are known, a note for a whole module restored by `torch.load` (it keeps the mode it was saved
in), as for a function that restores one with `torch.load` and runs it without grad. A `copy.deepcopy` of a model (an EMA
copy) is a model of the same class, built in the mode the original was in. A model a class or a training function
is handed has the layers of what its constructions or calls pass, in this file or another (`BagTrainer(model)` in a
script, `train(model, ...)` with a model the project's factory built), and a module's own inference method that the
project's loader (`get_model`: built, given its weights, returned without `.eval()`) hands out runs in training mode:
warnings, with the construction or call as evidence. The layers are read from
the model's class, in whichever workspace file defines it (a workspace copy of a library class built by its
`from_pretrained` too, which returns eval mode unless its factory shows no `.eval()`), and from the parts it derives
from or builds, classes deep and across files (a star import's too: `UNet` builds `Down`, which builds `DoubleConv`
with `nn.BatchNorm2d` in `parts.py`) when the part's layer acts in training mode whatever its caller passes
(batch-norm that keeps running statistics, dropout at a literal or default rate: PyTorch's documented behaviour, a
library fact), or from what a library documents for what built it, with the checkpoint or dropout rate it was given
as a literal, a module constant or a command-line option's default.

A method of a plain class that runs a model it is handed or reads from the module, not one it holds on `self`
(`Scorer().accuracy(net, batches)`, called on an instance built on the spot or bound to a name), is read as a function
is: the mode is what its caller leaves.

A helper handed its model (`evaluate(model, loader)`) that runs it on a batch for inference and switches nothing
runs it in the mode its caller left: when a call of it in the workspace hands the model in training mode or in a mode
it does not show, a note saying so (not for a probe on random or constant input, nor when the helper switches some
module's mode itself, nor for a helper no call of the workspace reaches: its callers are elsewhere, nor when every model
the calls hand it, or hand the function that hands it on, is known to have no dropout or batch-norm).
A model whose class is known but whose dropout lives in a part from another workspace file, at a rate its caller
sets, is a note that names the part. A model of unknown kind whose dropout a function takes out (trl's
`disable_dropout_in_model`, or the project's own that sets `p = 0` on each `Dropout` of its `modules()`) gets no note:
no layer of it is known to behave differently in the two modes.

The mode at a pass is the last switch that reaches it: a `model.train()` that runs whenever the pass does, with no
`.eval()` after it on the way (nor a helper that switches, nor a workspace call handed the model), leaves the pass in
training mode whatever `.eval()` the file calls elsewhere (a frozen backbone set to eval once at set-up, then to train
every epoch before its test loop). A generator sampled from noise is not an evaluation: every input of the forward made
by the program (random draws, index tensors, through names, wrappers, loop pieces and helpers' parameters every caller
hands one), at least one drawn. Its batch-norm normalises the sample batch as training does, and no held-out data
reaches its running statistics; a generator handed held-out data (a validation batch inpainted) is scored on data.

How to fix: call `model.eval()` before the evaluation loop and `model.train()` before training
resumes. Models without dropout or batch-norm layers behave the same in both modes, so they are
not reported.
"""

from __future__ import annotations

import os
import re

import libcst as cst

from trainlint.analysis.activations import unwrapped
from trainlint.analysis.callers import callers_elsewhere, constructions_elsewhere
from trainlint.analysis.dependencies import kept_with_scope
from trainlint.analysis.events import modules_looped_over
from trainlint.analysis.graph_use import feeds_backward, graph_kept, own_returns, program_trains, value_returned
from trainlint.analysis.libraries import (
    DISABLES_DROPOUT,
    LIBRARY_FORWARD_METHODS,
    LIBRARY_NO_GRAD_METHODS,
    RUNS_WRAPPED_MODULE,
    call_fact,
    torch_layer_dropout,
    torch_layer_mode,
)
from trainlint.analysis.library_models import library_model_facts
from trainlint.analysis.patterns import (
    argument_passed,
    evaluation_calls,
    made_up_inputs,
    mode_parameter,
    name_words,
    script_model_untrained,
    smoke_test_forward,
)
from trainlint.analysis.torchapi import is_ddp_wrapper
from trainlint.analysis.tree import facts_by_statement
from trainlint.rules import (
    AssignEvent,
    CallEvent,
    ClassInfo,
    Fires,
    FunctionInfo,
    ModuleView,
    Quiet,
    Rule,
    RuleContext,
    ScopeAnalysis,
    Severity,
    Tag,
    Value,
    backward_target,
    calls_in,
    dotted,
    is_backward,
    is_optimizer_step,
    is_test_file,
    last_part,
    literal_value,
    mentions,
    shortened,
    walk,
)

# Only ever a supporting word in a message: what makes a pass an inference pass is what it does.
_EVALUATION_WORDS = re.compile(
    r"^_?(?:evaluate|evaluation|eval|validate|validation|valid|val|test|testing|predict|inference|infer)(?:_|$)"
    r"|_(?:eval|evaluate|evaluation|validate|validation|val|test)$",
    re.I,
)
# At the start of a word (`val_loader`, `testloader`, `dataloaders['val']`): not `interval`, `latest`, `device`.
_EVALUATION_DATA = re.compile(r"(?<![a-z])(?:val|valid|test|eval|holdout|dev(?!ice))", re.I)
# A word naming held-out data, alone or fused with what holds it (`val`, `testloader`, `devset`).
_HELD_OUT_WORD = re.compile(r"(?:val|valid|validation|test|testing|eval|evaluation|dev|holdout)(?:loader|set|data|dl|iter|batches)?s?")
# Methods only a module has (`self.model.parameters()`): what shows an attribute holds one.
_MODULE_USES = frozenset({"parameters", "named_parameters", "state_dict", "load_state_dict", "modules", "children", "zero_grad", "to", "cuda"})
_MODE_LAYERS = re.compile(r"Dropout|BatchNorm|dropout\(|batch_norm\(")
# Class methods that build a model and load its weights (`from_pretrained`): named as the libraries name them.
_FACTORY_METHODS = frozenset({"from_pretrained", "from_single_file", "from_config"})


class MissingEvalMode(Rule):
    code = "TL208"
    name = "missing-eval-mode"
    severity = Severity.WARNING

    def check_scope(self, ctx: RuleContext, scope: ScopeAnalysis) -> None:
        if ctx.module.framework_runs_loop is not None or is_test_file(ctx.module.path):
            return
        self._check_shared_function(ctx, scope)
        reported = False
        for call in scope.calls():
            if call.function is not None and ctx.summary.defined_elsewhere(call.function):
                self._check_imported_evaluation(ctx, scope, call)
            if call.method is not None or call.receiver is None or not _runs_a_model(ctx, scope, call):
                continue
            why = _evaluation_pass(ctx, scope, call)
            if why is None or smoke_test_forward(ctx.summary, call):
                continue
            layers = _mode_layers(ctx, scope, call)
            if layers is None or _switched_to_eval(ctx.module, scope, call) or _loaded_in_eval_mode(ctx, scope, call):
                continue
            self._report(ctx, scope, call, why, layers)
            reported = True
            break  # one finding per evaluation pass
        if not reported:
            found = len(ctx.findings)
            self._check_handed_from_training(ctx, scope)
            self._check_class_managed_mode(ctx, scope)
            self._check_restored_and_run(ctx, scope)
            self._check_built_from_weights(ctx, scope)
            self._check_loader_handed_out(ctx, scope)
            self._check_whole_module_restored(ctx, scope)
            self._check_own_inference(ctx, scope)
            if len(ctx.findings) == found:
                self._check_frozen_model(ctx, scope)
            if len(ctx.findings) == found:
                self._check_parameter_inference(ctx, scope)

    def _check_shared_function(self, ctx: RuleContext, scope: ScopeAnalysis) -> None:
        """``run_epoch(model, loader, optimizer=None)`` that starts with ``model.train()``, called without an
        optimizer to evaluate: the evaluation runs in training mode."""
        parameter = mode_parameter(scope)
        if parameter is None:
            return
        assert scope.function is not None, "mode_parameter names a parameter of a function"
        evaluations = evaluation_calls(ctx.module, scope, parameter)
        if not evaluations:
            return
        calls = list(scope.calls())
        if any(call.method == "eval" for call in calls):
            return
        for switch in calls:
            key = switch.receiver_key
            if switch.method != "train" or key not in scope.params or not _sets_train_mode(switch):
                continue
            if any(condition.test is not None and mentions(scope, condition.test, parameter) for condition in switch.context.conditions):
                continue
            evaluation = evaluations[0]
            passed = _passed_for(evaluation, scope.function, key)
            layers = _layers_of(ctx.summary, passed[0], ctx.module) if passed is not None else None
            if layers is None:
                return
            ctx.report(
                switch.node,
                f"`{shortened(scope.chunk.code_for(switch.node), 50)}` also runs when `{scope.function.name}()` only evaluates: "
                f"`{shortened(evaluation.chunk.code_for(evaluation.node), 50)}` on line {evaluation.chunk.line_of(evaluation.node)} "
                f"leaves `{parameter}` off, so the evaluation runs with dropout on and batch-norm updating its statistics "
                "on evaluation data",
                evidence=[
                    layers,
                    ((switch.chunk, switch.node), "switches to training mode on every call"),
                    ((evaluation.chunk, evaluation.node), "called here to evaluate"),
                ],
                help=f"switch the mode on `{parameter}`: `{key}.train({parameter} is not None)` (or `{key}.train(train)`)",
            )
            return

    def _check_imported_evaluation(self, ctx: RuleContext, scope: ScopeAnalysis, call: CallEvent) -> None:
        """``evaluate(model, val_loader)`` where `evaluate` comes from another file of the workspace and is an
        inference pass over the model it is handed (it trains nothing and what it computes feeds no backward)."""
        function = call.function
        assert function is not None, "check() passes a call of a function from another file"
        inner = function.analysis(ctx.summary)
        if inner is None:
            return
        for parameter, forward in _forwards_on_parameters(inner).items():
            passed = _passed_for(call, function, parameter)
            why = _inference_pass(ctx, inner, forward) if passed is not None else None
            if passed is None or why is None:
                continue
            value, text = passed
            layers = _layers_of(ctx.summary, value, ctx.module)
            if layers is None or _switched_to_eval_named(ctx.module, text) and _training_switch_reaching(ctx.module, scope, call, text) is None:
                continue
            if text is not None and not _in_training_step(call) and _trains_and_keeps_training(ctx.module, call, text, value):
                continue  # handed over straight from training: reported on the pass itself (_check_handed_from_training)
            if text is not None and any(_still_in_eval_mode(ctx, [loaded], text) for loaded in (value, *_bound_values(scope, text))):
                continue
            ctx.report(
                call.node,
                f"`{shortened(scope.chunk.code_for(call.node), 50)}` evaluates `{text}` in training mode: neither this file nor "
                f"`{function.name}` calls `{text}.eval()`, and it has dropout or batch-norm layers, so the scores are "
                f"computed with dropout on and batch-norm updating its statistics on evaluation data",
                evidence=[
                    layers,
                    ((forward.chunk, function.node.name), why),
                    ((forward.chunk, forward.node), f"it runs `{parameter}` without `.eval()`"),
                ],
                help=f"call `{text}.eval()` before `{function.name}(...)` (and `{text}.train()` after it)",
            )
            return

    def _check_handed_from_training(self, ctx: RuleContext, scope: ScopeAnalysis) -> None:
        """``evaluate_accuracy(test_iter, net)`` called by the function that has just trained ``net`` (it calls
        ``net.train()``, or backwards a loss while running it) and switches nothing to eval mode: the
        evaluation function, which does not switch it either, runs it in training mode. This holds whatever
        the rest of the file does to other models of that name. An inference pass is known by what it does
        (``_inference_pass``); with the layers unknown (a model handed in from elsewhere) it is a note. A pass
        run inside a training step, or whose result the caller backwards (pseudo-labels for the model's own
        loss), may want training mode and is left alone."""
        function = scope.function
        if function is None or function.owner is not None and ctx.summary.is_module_class(function.owner) \
                or is_test_file(ctx.module.path):
            return
        calls = list(scope.calls())
        if any(is_backward(call) or is_optimizer_step(call) for call in calls):
            return  # it trains: not an inference pass
        for key, forward in _forwards_on_parameters(scope, models_only=False).items():
            why = None if _rebound(scope, key) or _sampled_from_noise(ctx, scope, forward) else _inference_pass(ctx, scope, forward)
            if why is None or any(call.function is not None and _helper_sets_eval_mode(call, key, ctx.summary) for call in calls):
                continue  # not an inference pass, or a local helper switches it (`with inference_context(model):`)
            # the callers in this file, then (the file's own pass being known) those of the workspace's other files
            here = [(ctx.module, outer) for outer in ctx.module.calls_of(function)]
            for module, outer in (*here, *callers_elsewhere(ctx.summary, function, lambda module, call: (module, call))):
                passed = _passed_for(outer, function, key)
                if passed is None or passed[1] is None:
                    continue
                handed_on = None
                if not _trains_and_keeps_training(module, outer, passed[1], passed[0]):
                    handed = _handed_on_from_training(module, outer, passed[1])
                    if handed is None:
                        continue
                    handed_on = ((outer.chunk, outer.node), f"handed on to `{function.name}` here, still in training mode")
                    outer, passed = handed
                if _in_training_step(outer):
                    continue  # part of the step that trains it (an action to take, targets): its mode may be wanted
                value, text = passed
                assert text is not None, "a call whose argument has no text was skipped above"
                if _own_method(module.summary, value, forward.method):
                    continue  # the project's `generate`, not the library's: what it does is its own code's
                layers = next((found for bound in (value, *_bound_values(outer.scope, text))
                               if (found := _layers_of(module.summary, bound, module)) is not None), None)
                passed_in = None
                if layers is None and _kind_unknown(value) and module is ctx.module and outer.scope.function is not None \
                        and text in outer.scope.params:
                    layers, passed_in = _layers_from_callers(ctx, outer.scope.function, text) or (None, None)
                    if layers is None and _known_without_layers(_passed_to_function(ctx, outer.scope.function, text)):
                        continue  # every caller hands it a model known to have no such layers
                elif layers is None and _kind_unknown(value) and outer.scope.function is not None and text in outer.scope.params:
                    layers, passed_in = _layers_passed_in_its_file(module, outer.scope.function, text) or (None, None)
                    handed = [(module, call, passed) for call, passed in module.arguments_for(outer.scope.function, text) or []]
                    if layers is None and _known_without_layers(handed):
                        continue  # every call in that file hands it a model known to have no such layers
                if layers is None and not _kind_unknown(value):
                    continue  # a model known to have no such layers
                caller = outer.scope.function.name if outer.scope.function is not None else "the module"
                if module is not ctx.module:
                    caller = f"{caller}` in `{os.path.basename(module.path)}"
                ctx.report(
                    forward.node,
                    f"`{function.name}` runs `{key}` without switching it to eval mode, and `{caller}` hands it over "
                    f"straight from training (line {outer.chunk.line_of(outer.node)}): it runs in training mode."
                    f"{_with_its_layers(text, layers)} scores are computed with "
                    "dropout on and batch-norm updating its statistics on evaluation data",
                    severity=None if layers is not None else Severity.NOTE,
                    evidence=[
                        layers,
                        passed_in,
                        ((scope.chunk, function.node.name), f"{why}; it does not call `{key}.eval()`"),
                        ((scope.chunk, _first_statement(function.node)), "where the pass starts in training mode"),
                        ((outer.chunk, outer.node), f"called with `{text}` while it is in training mode"),
                        handed_on,
                    ],
                    help=f"call `{key}.eval()` at the start of `{function.name}` (and `{text}.train()` when training resumes)",
                )
                return

    def _check_class_managed_mode(self, ctx: RuleContext, scope: ScopeAnalysis) -> None:
        """A class that switches its model's mode itself (``self.model.train()`` in its training method) and
        whose inference method (``_inference_pass``: it trains nothing and its forward feeds no backward) runs the model without switching
        it: called after training, as a fitted object's inference method is, it runs in training mode. The
        method must be an entry point (no other method of the class calls it and sets the mode for it) that
        computes no gradient. With the model's layers unknown it is a note, unless the class trains one update per
        call and the method runs one input (an agent's ``act`` beside its ``learn``: acting is part of training)."""
        function = scope.function
        if function is None or function.owner is None or function.name in {"forward", "__init__"}:
            return
        owner = function.owner
        if function.name == "__call__" and ctx.summary.is_module_class(owner):
            return  # a module's `__call__` is its forward; a plain class's (a predictor's) is its inference entry point
        calls = list(scope.calls())
        if any(is_backward(call) or is_optimizer_step(call) for call in calls):
            return
        if any(call.method in {"eval", "train"} and (call.receiver_key or "").startswith("self") for call in calls):
            return  # it sets the mode itself
        runs = [(forward, held, why) for forward in calls if (held := _held_model_run(ctx, forward)) is not None
                and _forward_or_helper_forward(ctx, forward, held[0])
                and (why := _inference_pass(ctx, scope, forward, callers=False)) is not None]
        if not runs:
            return  # most methods of a long class: the other methods are not read (a key costs this method only)
        if any(_another_method(call, owner, function) and _decides_mode(call.scope) for call in ctx.module.calls_of(function)):
            return  # a helper of another method, which decides the mode it runs in (its calls only are read)
        others = [(method, method.analysis(ctx.summary)) for method in owner.methods.values() if method is not function]
        others += _inherited_methods(ctx.summary, owner)
        for forward, (key, model), why in runs:
            if _returned_into_backward(ctx, scope, forward):
                continue  # asked here, after the method's own facts (see _inference_pass)
            switch = _training_switch(others, key)
            if switch is None:
                if forward.context.grad_off is not None and (self._check_handed_model(ctx, scope, forward, key, model, others, why)
                                                             or self._check_built_model(ctx, scope, forward, key, model, others, why)):
                    return
                continue
            trainer, call = switch
            if trainer == "__init__" and not any(analysis is not None and _trains(analysis) for _, analysis in others):
                continue  # a class that trains nothing and keeps its model in training mode on purpose (Monte Carlo dropout)
            layers = _layers_of(ctx.summary, model, ctx.module)
            construction = None
            if layers is None and _kind_unknown(model) and "." not in key.removeprefix("self."):
                layers, construction = _layers_handed_in(ctx, owner, key.removeprefix("self.")) or (None, None)
                if layers is None and _known_without_layers(_passed_at_constructions(ctx, owner, key.removeprefix("self."))):
                    continue  # every construction hands it a model known to have no such layers
            parts = _parts_with_layers(ctx.summary, model) if layers is None else None
            if layers is None and parts is None and (not _kind_unknown(model) or not forward.context.loops and not any(
                    analysis is not None and _runs_training_loop(ctx, analysis) for _, analysis in others)):
                # known to have no such layers; or unknown, for one input at a time in a class whose training is one
                # update per call: acting between updates is part of training (an agent's `act` beside its `learn`)
                continue
            where = f"{os.path.basename(call.chunk.origin)}, " if ctx.in_another_file(call.chunk) and call.chunk.origin else ""
            ctx.report(
                forward.node,
                f"`{function.name}` runs `{key}` without switching it to eval mode, while `{trainer}` puts it in "
                f"training mode ({where}line {call.chunk.line_of(call.node)}): run after `{trainer}`, it runs in training mode."
                f"{_with_its_layers(key, layers)} results are computed "
                "with dropout on and batch-norm updating its statistics on the data",
                severity=None if layers is not None else Severity.NOTE,
                evidence=[
                    layers,
                    parts,
                    construction,
                    ((scope.chunk, function.node.name), f"{why}; it does not call `{key}.eval()`"),
                    ((scope.chunk, _first_statement(function.node)), "where the pass starts in whatever mode training left"),
                    ((call.chunk, call.node), f"`{trainer}` switches to training mode"),
                ],
                help=f"call `{key}.eval()` at the start of `{function.name}`",
            )
            return

    def _check_handed_model(self, ctx: RuleContext, scope: ScopeAnalysis, forward: CallEvent, key: str, model: Value,
                            others: list, why: str) -> bool:
        """An inference method of a plain class (``Predictor.predict``) runs a model its constructor was handed
        (``self.model = model``), and no method of the class switches its mode: it runs in the mode it was handed
        over in, training mode when it comes straight from training. Whoever builds the object may switch the
        model to eval first, which this file cannot tell: a note, for a pass that runs it without grad (a sampler
        or a visualiser that merely keeps none of the graph may want it either way). What is handed in must be known to be a model
        (its value, what this file's constructions pass, or a method using it as a module), not any callable. A
        module's submodule follows the module's own mode switches, so only classes that are not modules are read."""
        function = scope.function
        assert function is not None and function.owner is not None, "_check_class_managed_mode passes a method"
        owner = function.owner
        attribute = key.removeprefix("self.")
        if "." in attribute or ctx.summary.is_module_class(owner):
            return False
        if any(analysis is not None and any(call.method in {"eval", "train"} and call.receiver_key in {key, "self"}
                                            for call in analysis.calls()) for _, analysis in others):
            return False  # the class sets the mode somewhere (its constructor, a loading method)
        bound = _bound_from_parameter(owner, attribute)
        if bound is None or not _known_model(ctx.module, owner, key, model, others):
            return False
        layers = _layers_of(ctx.summary, model, ctx.module)
        if layers is None and not _kind_unknown(model):
            return False  # a model known to have no such layers
        if layers is None and any(analysis is not None and any(_disables_dropout(call, key) for call in analysis.calls())
                                  for _, analysis in others):
            return False  # the class takes its dropout out (trl's reference model): no layer of it is known to need the mode
        construction = _handed_in_training(ctx, owner, attribute) if layers is None else None
        if construction is not None:
            layers, construction = construction
            builders = (f"every construction of `{owner.name}` hands it a model built in training mode that nothing in its "
                        "file switches to eval, in code that trains nothing.")
        else:
            builders = f"whoever builds `{owner.name}` calls `.eval()` first (not known in this file)."
        ctx.report(
            forward.node,
            f"`{function.name}` runs `{key}`, which `{owner.name}` is handed at construction (line "
            f"{ctx.line_of((owner.chunk, bound))}), without switching it to eval mode, and no method of `{owner.name}` "
            f"switches it: it runs in the mode it was handed over in, training mode when it comes straight from "
            f"training, {'and ' + builders if construction is not None else 'unless ' + builders}"
            f"{_with_its_layers(key, layers)} outputs are computed with dropout on and batch-norm normalising with the "
            "statistics of each input",
            severity=Severity.NOTE if construction is None else None,
            evidence=[
                layers,
                construction,
                ((owner.chunk, bound), "the model is handed in here, in whatever mode its builder left"),
                ((scope.chunk, function.node.name), f"{why}; it does not call `{key}.eval()`"),
                ((forward.chunk, forward.node), "the forward, in the mode the model was handed over in"),
            ],
            help=f"call `{key}.eval()` in `{function.name}` (or in `{owner.name}.__init__`)",
        )
        return True

    def _check_built_model(self, ctx: RuleContext, scope: ScopeAnalysis, forward: CallEvent, key: str, model: Value,
                           others: list, why: str) -> bool:
        """An inference method of a plain class (``Predictor.predict``, a metric's feature extractor) runs, without
        grad, a model the class builds itself (``self.model = timm.create_model(...)`` in its constructor or a loading
        method, a checkpoint loaded into it), and nothing switches it to eval mode: not the class, not this file. A module is
        built in training mode and loading weights keeps the mode, so every prediction runs with dropout on and
        batch-norm normalising with the statistics of each input. Built from a known class or library model it is a
        warning; a whole module restored by ``torch.load`` or a hub entry point whose layers are not known is a note.
        A model handed to anything (a wrapper, a trainer) may be switched there and is left alone."""
        function = scope.function
        assert function is not None and function.owner is not None, "_check_class_managed_mode passes a method"
        owner = function.owner
        attribute = key.removeprefix("self.")
        if "." in attribute or ctx.summary.is_module_class(owner) or _bound_from_parameter(owner, attribute) is not None:
            return False
        found = _built_by_the_class(owner, attribute)
        if found is None:
            return False
        builder, built = found
        analysis = owner.methods[builder].analysis(ctx.summary)
        bound = next((event.value for event in analysis.events if isinstance(event, AssignEvent) and event.node is built
                      and key in event.targets), None) if analysis is not None else None
        model = bound if bound is not None and Tag.MODEL in bound.tags else model  # bound outside `__init__`: `self.model = None` there
        if any(analysis is not None and any(call.method in {"eval", "train"} and _switched_name(call) in {key, "self"}
                                            for call in analysis.calls()) for _, analysis in others):
            return False  # the class sets the mode somewhere (its constructor, a loading method)
        if library_model_facts(model)[0] is not None:
            return False  # `from_pretrained` hands the model over in eval mode
        restored = _restores_whole_module(ctx.summary, built.value)
        layers = None if restored is not None else _layers_of(ctx.summary, model, ctx.module)
        if layers is None and restored is None and not _unknown_hub_model(model):
            return False  # a model known to have no such layers, or of no known kind
        # the file's calls last: module-wide reads, for a method already known to run a model it built for inference
        if _switched_to_eval_named(ctx.module, key) or _loaded_in_eval_mode(ctx, scope, forward) or _built_in_eval_mode(ctx.module, model) \
                or _trained_or_handed_on(ctx.module, key):
            return False
        how = restored or "it is built here, in training mode"
        ctx.report(
            forward.node,
            f"`{function.name}` runs `{key}` for inference in {'the mode it was saved in' if restored else 'training mode'}: "
            f"`{owner.name}.{builder}` {'restores' if restored else 'builds'} it (line {ctx.line_of((owner.chunk, built))}) and "
            "nothing switches it to eval mode, neither the class nor this file."
            f"{_with_its_layers(key, layers)} outputs are computed with dropout on and batch-norm normalising with the "
            "statistics of each input",
            severity=None if layers is not None else Severity.NOTE,
            evidence=[
                layers,
                ((owner.chunk, built), how),
                ((scope.chunk, function.node.name), f"{why}; it does not call `{key}.eval()`"),
                ((forward.chunk, forward.node), "the forward, in training mode"),
            ],
            help=f"call `{key}.eval()` in `{owner.name}.{builder}` once the model is built and loaded",
        )
        return True

    def _check_restored_and_run(self, ctx: RuleContext, scope: ScopeAnalysis) -> None:
        """A model whose trained weights are loaded (``load_state_dict``) and that is then only run without grad,
        itself or by a helper it is handed to, in a function that trains nothing and switches nothing to eval:
        an inference pass, whatever its data is called. A module is built in training mode and loading weights
        keeps the mode. With its layers unknown (a factory from elsewhere) it is a note."""
        calls = list(scope.calls())
        if not any(call.method == "load_state_dict" for call in calls):
            return
        if any(is_backward(call) or is_optimizer_step(call) for call in calls):
            return
        if scope.function is None and ctx.module.backward_calls:
            return
        for load in calls:
            key = load.receiver_key
            if load.method != "load_state_dict" or load.receiver is None or key is None or "." in key:
                continue
            if any(other.receiver_key == key and other.method in {"train", "eval"} for other in calls):
                continue
            if _switched_to_eval_named(ctx.module, key) or _loaded_in_eval_mode(ctx, scope, load):
                continue
            run = next((call for call in calls if call.context.grad_off is not None and _runs_named(ctx, call, key)), None)
            if run is None:
                continue
            layers = _layers_of(ctx.summary, load.receiver, ctx.module)
            if layers is None and not _kind_unknown(load.receiver):
                continue
            grad_off = run.context.grad_off
            assert grad_off is not None, "the run was picked for running without grad"
            ctx.report(
                run.node,
                f"`{key}` gets its trained weights (line {load.chunk.line_of(load.node)}) and is then run without grad, "
                f"for inference, in training mode: nothing switches it to eval mode, and loading weights keeps the mode "
                f"it was built in.{_with_its_layers(key, layers)} outputs "
                "are computed with dropout on and batch-norm normalising with the statistics of each batch",
                severity=None if layers is not None else Severity.NOTE,
                evidence=[
                    layers,
                    ((load.chunk, load.node), "the trained weights are loaded here"),
                    ((run.chunk, grad_off), "the inference runs without grad from here, in training mode"),
                ],
                help=f"call `{key}.eval()` after loading the weights",
            )
            return

    def _check_built_from_weights(self, ctx: RuleContext, scope: ScopeAnalysis) -> None:
        """A model built by a factory handed trained weights (``get_unetr(..., decoder_state=state)``, ``state`` taken
        from what ``torch.load`` returned) and then run for inference (without grad, or in a file that backwards nothing
        where the function keeps none of its graph) in a function that trains nothing and switches nothing to eval mode.
        A module is built in training mode and its weights do not change that; a factory that returns it in eval mode
        calls ``.eval()`` itself (a workspace factory that does is quiet). The factory's model comes from elsewhere, so
        whether it has dropout or batch-norm is not known here: a note, or a warning where its layers are read."""
        if scope.function is None or _trains(scope) or not _calls_torch_load(ctx.summary, scope.function):
            return
        loaded: set[str] = set()
        calls = list(scope.calls())
        for event in scope.events:
            if not isinstance(event, AssignEvent) or event.value_node is None:
                continue
            built = event.value_node
            weights = _trained_weights_in(ctx, scope, built, loaded)
            if weights is None:
                continue
            if _restores_whole_module(ctx.summary, built) is not None or not _builds_from(ctx, scope, built, loaded):
                loaded.update(target for target in event.targets if "." not in target)
                continue
            if len(event.targets) != 1 or "." in event.targets[0]:
                continue
            key = event.targets[0]
            factory = next((call for call in calls if call.node is built), None)
            if factory is None or (factory.function is not None and _returns_in_eval_mode(factory.function)):
                continue
            if any(other.receiver_key == key and other.method in {"train", "eval"} for other in calls):
                continue
            if _rebound_twice(scope, key) or _switched_to_eval_named(ctx.module, key):
                continue
            run = next((call for call in calls if call.context.loops and _run_for_inference(ctx, call) and _runs_named(ctx, call, key)
                        and any(Tag.TENSOR in value.tags or Tag.ON_DEVICE in value.tags for value in call.args)), None)
            if run is None:
                continue  # a forward runs batches of tensors: a tokenizer or a vocabulary rebuilt from a saved file does not
            layers = _layers_of(ctx.summary, event.value, ctx.module)
            if layers is None and not _kind_unknown(event.value):
                continue  # known to have no such layers
            loop = run.context.loops[-1]
            name = dotted(built.func) if isinstance(built, cst.Call) else None
            ctx.report(
                run.node,
                f"`{key}` is built by `{name or 'a factory'}` from trained weights ({weights}, line "
                f"{event.chunk.line_of(event.node)}) and run for inference in a loop that trains nothing, while nothing "
                "switches it to eval mode: a module is built in training mode and loading weights keeps that mode."
                f"{_with_its_layers(key, layers)} outputs are computed with dropout on and batch-norm normalising with "
                "the statistics of each batch",
                severity=None if layers is not None else Severity.NOTE,
                evidence=[
                    layers,
                    ((event.chunk, event.node), "the model is built here from trained weights, in training mode"),
                    ((run.chunk, loop.node), "the inference loop starts here, with the model in training mode"),
                ],
                help=f"call `{key}.eval()` after building it",
            )
            return

    def _check_loader_handed_out(self, ctx: RuleContext, scope: ScopeAnalysis) -> None:
        """A model the project's loader hands out (``Trainer.load(path)``: a function of the workspace that builds the
        model, gives it its trained weights with ``load_state_dict`` and returns it, or an object holding it, without
        switching its mode) and that a function training nothing then runs for inference: by a method of the model's
        class that runs it without grad (``model.parse_sentences_no_grad(...)``), or by a helper it is handed to that
        does so or runs it without grad, and that switches nothing itself. The model is in training mode: a warning
        for a class with dropout or batch-norm, a note for one whose layers are not read."""
        if scope.function is None or _trains(scope):
            return
        calls = list(scope.calls())
        by_node = {id(call.node): call for call in calls}
        restored: dict[str, tuple[AssignEvent, list[ClassInfo], str | None]] = {}  # the attribute holding it, for a holder
        for event in scope.events:
            if not isinstance(event, AssignEvent) or len(event.targets) != 1 or "." in event.targets[0]:
                continue
            node = event.value_node
            key = event.targets[0]
            if isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name) and node.value.value in restored:
                held = restored[node.value.value]
                if held[2] == node.attr.value:  # `model = trainer.model`: the loader's holder hands it over
                    restored[key] = (held[0], held[1], None)
                continue
            factory = by_node.get(id(node)) if isinstance(node, cst.Call) else None
            loader = _workspace_callee(ctx.summary, factory) if factory is not None else None
            found = _hands_out_restored(ctx.summary, loader, depth=0) if loader is not None else None
            if found is not None:
                restored[key] = (event, found[1], found[0])
        for key, (event, classes, attribute) in restored.items():
            if attribute is not None or any(other.receiver_key == key and other.method in {"train", "eval"} for other in calls):
                continue  # a holder (its model is read where it is taken out), or a model this function switches
            if any((_switched_name(call) == key and _sets_eval_mode(call))
                   or (call.function is not None and _helper_sets_eval_mode(call, key, ctx.summary)) for call in calls):
                continue  # switched here, or by a helper it is handed to (`set_eval(model)`)
            run = next((call for call in calls if _runs_restored(ctx.summary, call, key, classes, depth=2)), None)
            if run is None:
                continue
            holder = next((with_layers for info in classes
                           if (with_layers := _class_with_layers(info.home or ctx.summary, info, depth=0)) is not None), None)
            layers = ((holder.chunk, holder.node.name), f"`{holder.name}` has dropout or batch-norm layers") if holder is not None else None
            ctx.report(
                run.node,
                f"`{key}` comes from the project's loader (line {event.chunk.line_of(event.node)}), which builds it, loads its "
                "trained weights and hands it out without switching it to eval mode, and it is run here for inference "
                f"while nothing switches it: it runs in training mode.{_with_its_layers(key, layers)} outputs are computed "
                "with dropout on and batch-norm normalising with the statistics of each batch",
                severity=None if layers is not None else Severity.NOTE,
                evidence=[
                    layers,
                    ((event.chunk, event.node), "the loader hands the model out here, in training mode"),
                    ((run.chunk, run.node), "run here without grad, in training mode" if run.receiver_key == key else
                     f"handed here to `{run.function.name if run.function else 'a helper'}`, which runs it without grad"),
                ],
                help=f"call `{key}.eval()` after loading it",
            )
            return

    def _check_whole_module_restored(self, ctx: RuleContext, scope: ScopeAnalysis) -> None:
        """``model = torch.load(path)`` in a function that then runs ``model`` without grad, trains nothing and switches
        nothing to eval mode (a prediction script's ``main``, a serving entry point), or in a script's statements that
        run it afterwards: a whole module comes back in the mode it was saved in, training mode for one its training
        loop saved, so the inference may run with dropout on and batch-norm normalising with each batch's statistics.
        In a file that backwards nothing a run with grad on is an inference too (code older than ``no_grad``, or that
        forgot it), when the function keeps none of its graph. What layers it has is not in the code: a note."""
        restored = [(event, event.targets[0]) for event in scope.events if isinstance(event, AssignEvent)
                    and len(event.targets) == 1 and "." not in event.targets[0] and isinstance(event.value_node, cst.Call)
                    and _restores_whole_module(ctx.summary, event.value_node) is not None]
        if not restored:
            return
        if scope.function is not None:
            if _trains(scope):
                return
            calls = list(scope.calls())
        elif ctx.module.backward_calls:
            return  # a script that trains: what it restores may be trained on
        else:
            # a script's statements are scopes of their own: the restoring statement and the ones after it
            line = restored[0][0].chunk.line_of(restored[0][0].node)
            calls = [call for call in ctx.module.all_calls() if call.scope.function is None and call.chunk.line_of(call.node) >= line]
        for event, key in restored:
            if any(other.receiver_key == key and other.method in {"train", "eval"} for other in calls) or _rebound_twice(scope, key):
                continue
            run = next((call for call in calls if _run_for_inference(ctx, call) and _runs_named(ctx, call, key)), None)
            if run is None or _switched_to_eval_named(ctx.module, key):
                continue
            grad_off = run.context.grad_off
            how = "without grad" if grad_off is not None else "in a file that trains nothing"
            ran = ((run.chunk, grad_off), "the inference runs without grad from here") if grad_off is not None \
                else ((run.chunk, run.node), "the inference runs here, its result feeding no backward")
            here = run.chunk is scope.chunk  # a script's later statement is another chunk: reported where it is restored
            ctx.report(
                run.node if here else event.node,
                f"`{key}` is a whole module restored by `torch.load` (line {event.chunk.line_of(event.node)}) and run {how}, "
                f"for inference, while nothing switches it to eval mode: it runs in the mode it was saved in, training "
                f"mode for a module its training loop saved.{_with_its_layers(key, None)} outputs are computed with dropout "
                "on and batch-norm normalising with the statistics of each batch",
                severity=Severity.NOTE,
                evidence=[((event.chunk, event.node), "the whole module is restored here, in the mode it was saved in"), ran]
                if here else [ran],
                help=f"call `{key}.eval()` after loading it",
            )
            return

    def _check_own_inference(self, ctx: RuleContext, scope: ScopeAnalysis) -> None:
        """A module's own inference method (``SoftmaxClassifier.infer``, ``predict``) runs the module's forward
        (``self(...)``, ``self.forward(...)``) and switches nothing: it runs in whatever mode the module was
        left in, and a module is built in training mode and left there by training. Whoever calls the method
        may switch the module to eval mode first, which this file cannot tell: a note, that says so, about a
        module with dropout or batch-norm layers or with parts handed to its constructor (their layers unknown).
        A method another method of the class calls is that method's helper, which decides the mode."""
        function = scope.function
        if function is None or function.owner is None or function.name in {"forward", "__call__"}:
            return
        if function.name.endswith("_step"):
            return  # a runner's hook (`val_step`, `predict_step`): the runner that calls it sets the mode
        owner = function.owner
        if not ctx.summary.is_module_class(owner):
            return
        calls = list(scope.calls())
        if any(is_backward(call) or is_optimizer_step(call) for call in calls):
            return
        if any(call.method in {"eval", "train"} and (call.receiver_key or "").startswith("self") for call in calls):
            return  # it sets the mode itself
        forward = next((call for call in calls if call.receiver_key == "self" and call.method in {None, "forward"}), None)
        why = _inference_pass(ctx, scope, forward) if forward is not None else None
        if forward is None or why is None:
            return
        others = [method.analysis(ctx.summary) for method in owner.methods.values() if method is not function]
        if any(analysis is not None and any(call.function is function for call in analysis.calls()) for analysis in others):
            return
        folder = os.path.dirname(os.path.abspath(ctx.module.path))
        elsewhere = callers_elsewhere(ctx.summary, function, lambda module, call: _mode_at_call(module, call, os.path.relpath(module.path, folder)))
        if elsewhere and all(mode == "eval" for mode, _, _ in elsewhere):
            return  # every caller, in other files, switches the module to eval mode first
        holder = _class_with_layers(ctx.summary, owner, depth=0)
        handed = _part_handed_in(owner) if holder is None else None
        built_with = _layers_handed_in(ctx, owner, handed[1].removeprefix("self.")) if handed is not None else None
        construction = None
        if holder is not None:
            known = f"`{owner.name}` has dropout or batch-norm layers"
            layers: tuple | None = ((holder.chunk, holder.node.name), f"`{holder.name}` has dropout or batch-norm layers")
        elif built_with is not None and handed is not None:
            layers, construction = built_with
            known = f"`{owner.name}` is built with a `{handed[1]}` that has dropout or batch-norm layers"
        elif handed is not None and _known_without_layers(_passed_at_constructions(ctx, owner, handed[1].removeprefix("self."))):
            return  # every construction hands it a part known to have no such layers: both modes agree
        elif handed is not None:
            bound, part = handed
            known = f"whether `{owner.name}` has dropout or batch-norm layers is not known in this file (its `{part}` is handed to its constructor)"
            layers = ((owner.chunk, bound), f"`{part}` is a part of unknown kind")
        else:
            return  # a module known to have no such layers behaves the same in both modes
        in_training = next(((call, where) for mode, call, where in elsewhere if mode == "train"), None)
        handed_out = in_training is None
        if in_training is None and (holder is not None or built_with is not None) and not elsewhere:
            # no caller in the workspace: a loader of the workspace that hands the module out in training mode decides it
            here = os.path.basename(ctx.module.path)
            loaders = [_handed_out_in_training(ctx.module, call, here) for call in ctx.module.all_calls()
                       if call.callee is not None and ctx.summary.local_class(call.callee) is owner]
            loaders += constructions_elsewhere(ctx.summary, owner, lambda module, call: _handed_out_in_training(
                module, call, os.path.relpath(module.path, folder)))
            in_training = next((found for found in loaders if found is not None), None)
        if in_training is not None and (holder is not None or built_with is not None):
            call, where = in_training
            ctx.report(
                forward.node,
                f"`{function.name}` runs the module's own forward without switching it to eval mode, and `{where}` "
                f"{'hands the module out' if handed_out else 'calls it'} "
                f"while the module is in training mode: {known}, so its outputs are "
                "computed with dropout on and batch-norm normalising with the statistics of each input",
                evidence=[
                    layers,
                    construction,
                    ((scope.chunk, function.node.name), f"{why}; it does not call `self.eval()`"),
                    ((forward.chunk, forward.node), "the module's forward, in the mode it was left in"),
                    ((call.chunk, call.node), "built here, given its trained weights and returned, in training mode" if handed_out
                     else f"`{shortened(call.chunk.code_for(call.node))}` runs it in training mode"),
                ],
                help=f"call `self.eval()` at the start of `{function.name}` (or `.eval()` before calling it)",
            )
            return
        ctx.report(
            forward.node,
            f"`{function.name}` runs the module's own forward without switching it to eval mode: it runs in whatever mode "
            f"the module was left in, training mode after training, unless every caller calls `.eval()` first (not known in "
            f"this file). {known[0].upper()}{known[1:]}; in training mode its outputs are computed with dropout on and "
            "batch-norm normalising with the statistics of each input",
            severity=Severity.NOTE,
            evidence=[
                layers,
                construction,
                ((scope.chunk, function.node.name), f"{why}; it does not call `self.eval()`"),
                ((forward.chunk, forward.node), "the module's forward, in the mode it was left in"),
            ],
            help=f"call `self.eval()` at the start of `{function.name}` (and `self.train()` before training resumes)",
        )

    def _check_parameter_inference(self, ctx: RuleContext, scope: ScopeAnalysis) -> None:
        """A helper handed a model (``evaluate(model, loader)``, ``extract_features(net, batches)``) runs it as an
        inference pass (``_inference_pass``: it trains nothing, and its forward of a batch feeds no backward) and
        never switches its mode: it runs in whatever mode its caller left, training mode after a training loop.
        What the model is and how each caller leaves it are not in the function: when every call of it this file
        or the workspace's other files show switches the model to eval mode first it is quiet, and so it is when
        none is in the workspace (an API whose callers are elsewhere); otherwise a note naming the calls that do not. A function that switches some module's mode manages what it runs as its
        model (another callable it is handed, a loss object, is no module); a module's own methods, a script's
        statements and a function a caller of this file hands a model are read by the other checks."""
        function = scope.function
        if function is None or function.name in {"forward", "__call__"} or _trains(scope):
            return
        if function.owner is not None and ctx.summary.is_module_class(function.owner):
            return  # a module's method: its submodules follow the module's own switches
        calls = list(scope.calls())
        if any(call.method in {"eval", "train"} for call in calls):
            return  # it switches the mode of what it runs as its model; other callables it is handed are not modules
        for forward in calls:
            key = forward.receiver_key
            if forward.method is not None or key is None or key not in scope.params or key in {"self", "cls"}:
                continue
            if forward.receiver is not None and forward.receiver.tags & {Tag.LOSS, Tag.CRITERION}:
                continue
            if not any(Tag.TENSOR in value.tags or Tag.ON_DEVICE in value.tags for value in forward.args):
                continue  # a forward runs a batch of tensors; any other callable handed in is not known to be a model
            if made_up_inputs(ctx.summary, forward):
                continue  # a probe on random or constant input (shapes, activation statistics), not an inference over data
            why = _inference_pass(ctx, scope, forward)
            if why is None:
                continue
            here = os.path.basename(ctx.module.path)
            folder = os.path.dirname(os.path.abspath(ctx.module.path))
            modes = [_mode_at_call(ctx.module, call, here, key=passed[1]) for call in ctx.module.calls_of(function)
                     if (passed := _passed_for(call, function, key)) is not None]
            if modes and (len(modes) < len(ctx.module.calls_of(function)) or any(mode != "eval" for mode, _, _ in modes)):
                return  # a caller in this file hands it a model in a mode it shows (the main check reads it), or hides it
            modes += callers_elsewhere(ctx.summary, function, _passed_mode_reader(function, key, folder))
            if not modes or all(mode == "eval" for mode, _, _ in modes):
                # every caller switches the model to eval mode first, or no call of it is in the workspace (an API
                # whose callers, and the mode they hand it in, are elsewhere: nothing to show)
                return
            if _known_without_layers(_handed_one_call_up(ctx, function, key)):
                return  # every model the calls hand it, or hand their callers, has no layer that acts by mode
            unknown = [f"the call at {where} leaves it in {'training' if mode == 'train' else 'an unknown'} mode"
                       for mode, _, where in modes if mode != "eval"]
            callers = "; " + ", ".join(unknown[:2])
            ctx.report(
                forward.node,
                f"`{function.name}` runs `{key}` for inference without switching it to eval mode: it runs in the mode its "
                f"caller left it in, training mode after training{callers}. Whether `{key}` has dropout or batch-norm layers "
                "is not known in this file; if it has, the outputs are computed with dropout on and batch-norm normalising "
                "with the statistics of each batch",
                severity=Severity.NOTE,
                evidence=[
                    ((scope.chunk, function.node.name), f"{why}; it does not call `{key}.eval()`"),
                    ((scope.chunk, _first_statement(function.node)), f"where the pass starts, `{key}` in the mode its caller left"),
                    ((forward.chunk, forward.node), f"`{key}` is handed in and run here on a batch"),
                ],
                help=f"call `{key}.eval()` at the start of `{function.name}` (and `{key}.train()` where training resumes)",
            )
            return

    def _check_frozen_model(self, ctx: RuleContext, scope: ScopeAnalysis) -> None:
        """A model this file builds and never trains (a teacher for distillation, a target network, a feature
        extractor for a perceptual loss or a metric), run without grad, here inside a training step or a loss:
        no optimizer is given its parameters, every forward of it runs without grad, and nothing switches it to
        eval mode. A module is built in training mode, so its dropout drops and its batch-norm normalises with
        each batch's statistics while updating its running averages: the targets it gives are noisy and
        drift. Only a model whose layers are known (its class, or what its library documents) and that is not
        handed whole to another function (which could switch or train it) is reported."""
        for forward in scope.calls():
            model = forward.receiver
            key = forward.receiver_key
            if forward.method is not None or model is None or key is None or Tag.MODEL not in model.tags:
                continue
            if forward.context.grad_off is None or _kind_unknown(model) or model.site is None or not isinstance(model.site[1], cst.Call):
                continue  # run with grad, or not built here (a parameter, `model = self`): its mode is its builder's
            layers = _layers_of(ctx.summary, model, ctx.module)
            if layers is None:
                continue
            # the file's calls last: a module-wide read (see _returned_into_backward)
            holder = _holder_put_in_training(ctx, scope, key)
            if holder is None and (_switched_to_eval_named(ctx.module, key) or _loaded_in_eval_mode(ctx, scope, forward)
                                   or _built_in_eval_mode(ctx.module, model)):
                continue
            if holder is not None and any(other.receiver_key == key and _sets_eval_mode(other) for other in scope.calls()):
                continue  # switched back where it runs
            if not ctx.module.backward_calls or _trained_or_handed_on(ctx.module, key):
                continue  # a file that trains nothing may only extract features; or the model's mode is set or decided elsewhere
            grad_off = forward.context.grad_off
            frozen = (f"`{key}` is never trained in this file (no optimizer is given its parameters and every forward of it "
                      "runs without grad)")
            if holder is None:
                mode = "nothing switches it to eval mode: built in training mode, it runs here"
                switch = (model.site, "built here, in training mode")
                advice = f"call `{key}.eval()` once after building it"
            else:
                assert scope.function is not None and scope.function.owner is not None, "a holder is the method's class"
                owner = scope.function.owner.name
                mode = (f"`{shortened(holder.chunk.code_for(holder.node), 40)}` (line {holder.chunk.line_of(holder.node)}) puts "
                        f"every submodule of `{owner}` in training mode, `{key}` included, whatever mode it "
                        "was built or switched in: it runs here")
                switch = ((holder.chunk, holder.node), f"switches `{key}` to training mode with its holder")
                advice = f"override `train()` in `{owner}` to keep `{key}` in eval mode, or call `{key}.eval()` before running it"
            ctx.report(
                forward.node,
                f"{frozen}, and {mode} with its dropout on and its batch-norm normalising with each batch's statistics and "
                "updating its running averages, so what it computes is noisy and drifts",
                evidence=[layers, switch, ((forward.chunk, grad_off), "run without grad: it is not trained here")],
                help=advice,
            )
            return

    def _report(self, ctx: RuleContext, scope: ScopeAnalysis, call: CallEvent, why: tuple, layers: tuple) -> None:
        key = call.receiver_key or "the model"
        switch = _training_switch_reaching(ctx.module, scope, call, call.receiver_key)
        mode = f"`{key}.train()` on line {switch.chunk.line_of(switch.node)} is the last mode switch before it" \
            if switch is not None else f"nothing in this file calls `{key}.eval()`"
        ctx.report(
            call.node,
            f"`{key}` runs an evaluation pass in training mode: {mode}, and it has "
            f"dropout or batch-norm layers, so the scores are computed with dropout on and batch-norm updating its "
            f"statistics on evaluation data",
            evidence=[why, layers, ((scope.chunk, call.node), "the forward of the evaluation pass"), *(
                [((switch.chunk, switch.node), "switches to training mode; no `.eval()` follows before the pass")]
                if switch is not None else []), *(
                [((scope.chunk, _first_statement(scope.function.node)), f"where the pass starts, `{key}` in the mode its caller left")]
                if scope.function is not None and key in scope.params else [])],
            help=f"call `{key}.eval()` before evaluating and `{key}.train()` before training again",
        )


def _runs_a_model(ctx: RuleContext, scope: ScopeAnalysis, call: CallEvent) -> bool:
    """A call of a model: the callee is known to be one, or it is a parameter every call of the function in
    this file passes a model for (``test(model, predictor, ...)``)."""
    assert call.receiver is not None, "check() passes a call on a value"
    if Tag.MODEL in call.receiver.tags:
        return True
    key = call.receiver_key
    if scope.function is None or key not in scope.params:
        return False
    passed = ctx.module.arguments_for(scope.function, key)
    return bool(passed) and all(Tag.MODEL in value.tags for _, value in passed)


def _loaded_in_eval_mode(ctx, scope: ScopeAnalysis, call: CallEvent) -> bool:
    """The model came from a loader that returns it in eval mode (``from_pretrained``) and nothing in the
    file switches it to training mode: it is still in eval mode."""
    assert call.receiver is not None, "check() passes a call on a model"
    values = [call.receiver]
    if call.receiver.detail is None and scope.function is not None and call.receiver_key in scope.params:
        values = [value for _, value in ctx.module.arguments_for(scope.function, call.receiver_key) or []]
    return _still_in_eval_mode(ctx, values, call.receiver_key or "") or _bound_by_eval_factory(ctx, scope, call.receiver_key or "")


def _bound_by_eval_factory(ctx: RuleContext, scope: ScopeAnalysis, key: str) -> bool:
    """Every binding of ``key`` in the scope is a call of a workspace function (``build_classifier(weights)``) that returns
    the model in eval mode, and nothing in the file switches ``key`` to training mode."""
    bound = [event.value_node for event in scope.events if isinstance(event, AssignEvent) and key in event.targets]
    if not bound or not all(isinstance(node, cst.Call) for node in bound):
        return False
    calls = {id(call.node): call for call in scope.calls()}
    factories = [calls[id(node)].function if id(node) in calls else None for node in bound]
    if not all(function is not None and _returns_in_eval_mode(function) for function in factories):
        return False
    return not any(other.method == "train" and other.receiver_key == key for other in ctx.module.all_calls())


def _bound_values(scope: ScopeAnalysis, name: str) -> list[Value]:
    """What the function binds ``name`` to: a wrapper (``deepspeed.initialize``, DDP) rebinds the model it wraps, whose
    layers and mode it keeps, so each binding tells what the model is."""
    return [event.value for event in scope.events if isinstance(event, AssignEvent) and name in event.targets]


def _still_in_eval_mode(ctx, values: list[Value], key: str) -> bool:
    """Every value is a model its loader returned in eval mode (``from_pretrained``: a library's, or the workspace's
    own copy of one unless its factory shows no ``.eval()``) and nothing in the file switches ``key`` to training mode."""
    if not values or not all(library_model_facts(value)[0] is not None or _factory_in_eval_mode(ctx.summary, value) for value in values):
        return False
    key = key.rpartition(".")[2]
    return not any(
        other.method == "train" and (other.receiver_key or "").rpartition(".")[2] == key for other in ctx.module.all_calls()
    )


def _factory_in_eval_mode(summary, value: Value) -> bool:
    """A workspace class's factory (``from_pretrained``) built the model: it returns it in eval mode when the factory
    the class defines or inherits in the workspace calls ``.eval()``, or when the class inherits it from a library."""
    if not isinstance(value.detail, str) or value.site is None or not isinstance(value.site[1], cst.Call):
        return False
    built = value.site[1].func
    method = built.attr.value if isinstance(built, cst.Attribute) else None
    info = _workspace_class(summary, value.detail) if method in _FACTORY_METHODS else None
    for _ in range(6):
        if info is None:
            return method in _FACTORY_METHODS  # inherited from a library: `from_pretrained` returns eval mode there
        factory = info.methods.get(method or "")
        if factory is not None:
            return ".eval()" in info.chunk.code_for(factory.node)
        home = info.home or summary
        info = next((found for base in info.bases if (found := home.local_class(home.canonical(base))) is not None), None)
    return False


def _returns_in_eval_mode(function) -> bool:
    """``function`` returns what it built switched to eval mode: ``return model.eval()`` (through ``.to(device)`` and the
    like), or ``model.eval()`` on the name it returns."""
    code = function.chunk.code_for
    for node in walk(function.node.body):
        if not isinstance(node, cst.Return) or node.value is None:
            continue
        if ".eval()" in code(node.value):
            return True
        if isinstance(node.value, cst.Name) and f"{node.value.value}.eval()" in code(function.node):
            return True
    return False


def _sets_train_mode(call: CallEvent) -> bool:
    """``model.train()`` or ``model.train(True)``."""
    args = [arg for arg in call.arg_nodes if arg.keyword is None or arg.keyword.value == "mode"]
    return not args or (isinstance(args[0].value, cst.Name) and args[0].value.value == "True")


def _forwards_on_parameters(scope: ScopeAnalysis, *, models_only: bool = True) -> dict[str, CallEvent]:
    """The first forward of each model parameter of an evaluation function, unless it switches that model to eval
    (with ``models_only`` false, of each parameter it calls, known to be a model or not)."""
    forwards: dict[str, CallEvent] = {}
    switched: set[str] = set()
    for call in scope.calls():
        key = call.receiver_key
        looped = modules_looped_over(call) if call.method == "eval" else None  # `for net in (encoder, decoder): net.eval()`
        if looped is not None:
            switched.update(looped[1])
        if key is None or key not in scope.params:
            continue
        if call.method == "eval" or (call.method == "train" and call.arg_nodes):
            switched.add(key)
        elif (call.method is None or call.method in LIBRARY_FORWARD_METHODS) and call.receiver is not None \
                and (not models_only or Tag.MODEL in call.receiver.tags):
            forwards.setdefault(key, call)
    return {key: call for key, call in forwards.items() if key not in switched}


def _own_method(summary, value: Value, method: str | None) -> bool:
    """``method`` (a library's forward method, ``generate``) is one the workspace class of ``value`` defines or inherits
    in the workspace: the library's fact does not say what it runs."""
    if method is None:
        return False
    info = value.detail if isinstance(value.detail, ClassInfo) else None
    return info is not None and info.find_method(method, summary) is not None


def _held_model_run(ctx: RuleContext, call: CallEvent) -> tuple[str, Value] | None:
    """The attribute model (``self.model``) that ``call`` runs, itself or by handing it to a workspace helper
    that runs it, with its value."""
    key = call.receiver_key
    if call.method is None and call.receiver is not None and key is not None and key.startswith("self."):
        return key, call.receiver
    if call.function is None:
        return None
    for position, arg in enumerate(call.arg_nodes):
        text = call.chunk.code_for(arg.value)
        if arg.star or not text.startswith("self.") or not _runs_named(ctx, call, text):
            continue
        value = call.kwargs.get(arg.keyword.value) if arg.keyword is not None else (call.args[position] if position < len(call.args) else None)
        return (text, value) if value is not None else None
    return None


def _forward_or_helper_forward(ctx: RuleContext, call: CallEvent, key: str, depth: int = 0) -> bool:
    """``call`` runs the model ``key`` for an answer: it is the forward itself, or a workspace helper it is handed
    to calls it (``predict_sliding_window(self.network, volume)``), itself or through the helpers of the workspace
    it hands it on to, and trains nothing. A helper that
    only hands it on (``resize_token_embeddings(self.model, n)``, a hook remover, an RNG synchroniser) runs no forward."""
    if call.method is None and call.receiver_key == key:
        return True
    function = call.function
    inner = function.analysis(ctx.summary) if function is not None else None
    if function is None or inner is None:
        return False
    parameters = {name for name in inner.params if (passed := _passed_for(call, function, name)) is not None and passed[1] == key}
    if _trains(inner) or depth > 2:
        return False
    return any(
        (other.method is None and other.receiver_key in parameters)
        or any(other.chunk.code_for(arg.value) == name and _forward_or_helper_forward(ctx, other, name, depth + 1)
               for arg in other.arg_nodes if not arg.star for name in parameters if other.function is not None)
        for other in inner.calls()
    )


def _run_for_inference(ctx: RuleContext, call: CallEvent) -> bool:
    """The call runs without grad, or in a file that backwards nothing, where the function making it keeps none
    of its graph (a script's statements keep nothing for a backward that never comes)."""
    if call.context.grad_off is not None:
        return True
    if ctx.module.backward_calls:
        return False
    return call.scope.function is None or not graph_kept(call.scope, call.node)


def _runs_named(ctx: RuleContext, call: CallEvent, key: str, depth: int = 3) -> bool:
    """``call`` runs the model named ``key``: it calls it, or hands it to a function of the workspace that runs it
    (itself or through the functions it hands it on to). Handed only to functions that index it or read its keys, as
    a checkpoint converter does with what ``torch.load`` returned, it is data, not a model that runs."""
    if call.method is None and call.receiver_key == key:
        return True
    function = call.function
    if depth == 0 or function is None or not any(call.chunk.code_for(arg.value) == key for arg in call.arg_nodes if not arg.star):
        return False
    inner = function.analysis(ctx.summary)
    if inner is None:
        return False
    parameters = [name for name in inner.params if (passed := _passed_for(call, function, name)) is not None and passed[1] == key]
    return any(_runs_named(ctx, other, parameter, depth - 1) for other in inner.calls() for parameter in parameters)


def _trained_in_loop(forward: CallEvent, calls: list[CallEvent]) -> bool:
    """A backward runs in the loop that runs ``forward``: the model is trained there."""
    if not forward.context.loops:
        return False
    loop = forward.context.loops[-1]
    return any(is_backward(other) and loop in other.context.loops for other in calls)


def _rebound_twice(scope: ScopeAnalysis, name: str) -> bool:
    """The function binds ``name`` more than once: what it runs may be another value than the restored module."""
    return sum(1 for event in scope.events if isinstance(event, AssignEvent) and name in event.targets) > 1


def _rebound(scope: ScopeAnalysis, name: str) -> bool:
    """The function binds ``name`` again (``vae = accelerator.unwrap_model(vae)``, or a reloaded model): what it
    runs under that name may not be what it was handed."""
    return any(isinstance(event, AssignEvent) and name in event.targets for event in scope.events)


def _inherited_methods(summary, owner: ClassInfo) -> list[tuple]:
    """The methods ``owner`` inherits from its base classes in the workspace (this file or another) and does not
    override, each with its flow: a base class's training method (``_train_model``, called by the subclass's ``fit``)
    switches the model that the subclass's inference method runs, as the class's own methods do."""
    found: dict[str, tuple] = {}
    seen, pending = [owner], [owner]
    while pending and len(seen) < 9:
        info = pending.pop(0)
        home = info.home or summary
        for base in info.bases:
            parent = home.local_class(home.canonical(base)) if base else None
            if parent is None or any(parent is other for other in seen):
                continue
            seen.append(parent)
            pending.append(parent)
            for name, method in parent.methods.items():
                if name not in owner.methods and name not in found:
                    found[name] = (method, method.analysis(parent.home or summary))
    return list(found.values())


def _training_switch(methods: list, key: str) -> tuple[str, CallEvent] | None:
    """The first of a class's other methods that puts ``key`` (``self.model``) in training mode, directly or
    through the object holding it (``self.train()``), with that switch."""
    for method, analysis in methods:
        if analysis is None:
            continue
        for call in analysis.calls():
            if call.method == "train" and call.receiver_key in {key, "self"} and _sets_train_mode(call):
                return method.name, call
    return None


def _with_its_layers(name: str, layers: tuple | None) -> str:
    """How a message goes on to what the layers do: as a fact when they are known, or as a condition
    (a note) when the file does not tell whether ``name`` has dropout or batch-norm."""
    if layers is not None:
        return " With its dropout or batch-norm layers, the"
    return f" Whether `{name}` has dropout or batch-norm layers is not known in this file; if it has, the"


def _known_model(module: ModuleView, owner: ClassInfo, key: str, model: Value, others: list) -> bool:
    """Evidence that the attribute ``key`` holds a model, not any callable handed in: its value is one, every
    construction of the class in this file passes one, or a method of the class uses it as a module."""
    if Tag.MODEL in model.tags:
        return True
    passed = module.constructor_arguments(owner, key.removeprefix("self."))
    if passed and all(Tag.MODEL in value.tags for _, value in passed):
        return True
    return any(analysis is not None and any(call.receiver_key == key and call.method in _MODULE_USES for call in analysis.calls())
               for _, analysis in others)


def _bound_from_parameter(owner: ClassInfo, attribute: str) -> cst.Assign | None:
    """Where a class's ``__init__`` binds ``self.<attribute>`` to one of its parameters (``self.model = model``)."""
    init = owner.methods.get("__init__")
    if init is None:
        return None
    parameters = {param.name.value for param in init.node.params.params}
    for node in walk(init.node.body):
        if not isinstance(node, cst.Assign) or len(node.targets) != 1:
            continue
        target = node.targets[0].target
        if (isinstance(target, cst.Attribute) and isinstance(target.value, cst.Name) and target.value.value == "self"
                and target.attr.value == attribute and isinstance(node.value, cst.Name) and node.value.value in parameters):
            return node
    return None


def _built_by_the_class(owner: ClassInfo, attribute: str) -> tuple[str, cst.Assign] | None:
    """The method and the statement that bind ``self.<attribute>`` to a call (``self.model = timm.create_model(...)``
    in ``__init__``, ``self.net = torch.load(path)`` in a ``load`` method): a model the class builds itself. None when
    it is bound to anything else too (a ``None`` placeholder aside)."""
    bindings = []
    for method in owner.methods.values():
        for node in walk(method.node.body):
            if not isinstance(node, cst.Assign) or (isinstance(node.value, cst.Name) and node.value.value == "None"):
                continue
            for target in node.targets:
                target = target.target
                if (isinstance(target, cst.Attribute) and isinstance(target.value, cst.Name) and target.value.value == "self"
                        and target.attr.value == attribute):
                    bindings.append((method.name, node))
    if len(bindings) != 1 or not isinstance(bindings[0][1].value, cst.Call):
        return None
    return bindings[0]


def _restores_whole_module(summary, built: cst.BaseExpression) -> str | None:
    """``torch.load(path)`` (through ``.to(device)`` and the like) bound as the model: a whole module restored as it
    was saved, with whatever dropout and batch-norm it has and the mode it was saved in (training mode, for one
    saved by its training loop). None for anything else."""
    while isinstance(built, cst.Call) and isinstance(built.func, cst.Attribute) and built.func.attr.value in {"to", "cuda", "cpu", "float", "half"}:
        built = built.func.value
    if not isinstance(built, cst.Call):
        return None
    raw = dotted(built.func)
    if raw is None or summary.canonical(raw) != "torch.load":
        return None
    return "a whole module restored by `torch.load`, in the mode it was saved in"


def _workspace_callee(summary, call: CallEvent):
    """The workspace function ``call`` calls: a function, or a method named through its class (``Trainer.load(...)``,
    a static or class method)."""
    if call.function is not None:
        return call.function
    callee = call.callee
    if callee is None or "." not in callee:
        return None
    owner, _, name = callee.rpartition(".")
    info = summary.local_class(owner)
    return info.methods.get(name) if info is not None else None


def _hands_out_restored(summary, function, depth: int) -> tuple[str | None, list[ClassInfo]] | None:
    """``function`` (a loader) returns a model it built and gave its trained weights (``load_state_dict``), or got
    from a loader it calls, without switching its mode: None as the attribute when it returns the model, or the
    attribute of the object it returns that holds it (``return Trainer(model=model)``, whose ``__init__`` keeps
    ``self.model = model``); with the classes the model is built from. Read once per flow of the function, kept with
    it (``kept_with_scope``) while the flows it read are the same: a key in a function that calls thirty functions of
    the file reads none of their bodies again."""
    home = function.home or summary
    inner = function.analysis(home)
    if inner is None or depth > 2:
        return None
    return kept_with_scope(inner, ("TL208 hands out a restored model", depth), lambda: _handed_out(home, function, inner, depth))


def _handed_out(home, function, inner: ScopeAnalysis, depth: int) -> tuple[str | None, list[ClassInfo]] | None:
    calls = list(inner.calls())
    for node in walk(function.node.body):
        if not isinstance(node, cst.Return) or node.value is None:
            continue
        value = node.value
        while isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value in {"to", "cuda", "cpu"}:
            value = value.func.value
        if isinstance(value, cst.Name):
            classes = _restored_name(home, inner, calls, value.value, depth)
            if classes is not None:
                return None, classes
        elif isinstance(value, cst.Call) and (built := _workspace_class_called(home, value)) is not None:
            for arg in value.args:
                if arg.star or not isinstance(arg.value, cst.Name):
                    continue
                classes = _restored_name(home, inner, calls, arg.value.value, depth)
                kept = _kept_as(home, built, arg, value.args.index(arg)) if classes is not None else None
                if kept is not None and classes is not None:
                    return kept, classes
    return None


def _restored_name(home, inner: ScopeAnalysis, calls: list[CallEvent], name: str, depth: int) -> list[ClassInfo] | None:
    """The classes a loader's local ``name`` is built from, when it holds a model with its trained weights loaded (here,
    or by a loader it calls) and nothing here switches its mode; None otherwise."""
    if any(call.receiver_key == name and call.method in {"eval", "train"} for call in calls):
        return None
    bound = [event for event in inner.events if isinstance(event, AssignEvent) and name in event.targets]
    classes = [event.value.detail for event in bound if isinstance(event.value.detail, ClassInfo)]
    if any(call.receiver_key == name and call.method == "load_state_dict" for call in calls):
        return classes
    for event in bound:
        factory = next((call for call in calls if call.node is event.value_node), None)
        loader = _workspace_callee(home, factory) if factory is not None else None
        found = _hands_out_restored(home, loader, depth + 1) if loader is not None else None
        if found is not None and found[0] is None:
            return found[1]
    return None


def _workspace_class_called(home, node: cst.Call) -> ClassInfo | None:
    raw = dotted(node.func)
    return home.local_class(home.canonical(raw)) if raw is not None else None


def _kept_as(home, info: ClassInfo, arg: cst.Arg, position: int) -> str | None:
    """The attribute the class's ``__init__`` keeps the argument in (``self.model = model``)."""
    init = info.methods.get("__init__")
    if init is None:
        return None
    # read from its tree; asking for its flow, walked again when its body changes, is what a kept answer holds with
    init.analysis(info.home or home)
    params = [param.name.value for param in init.node.params.params][1:]
    parameter = arg.keyword.value if arg.keyword is not None else (params[position] if position < len(params) else None)
    for node in walk(init.node.body):
        if isinstance(node, cst.Assign) and isinstance(node.value, cst.Name) and node.value.value == parameter:
            for target in node.targets:
                if isinstance(target.target, cst.Attribute) and dotted(target.target.value) == "self":
                    return target.target.attr.value
    return None


def _runs_restored(summary, call: CallEvent, key: str, classes: list[ClassInfo], depth: int) -> bool:
    """``call`` runs the model ``key`` for inference: a method of its class (or a base class of the workspace) that runs it
    without grad, a forward without grad, or a helper it is handed to that does one of these and switches nothing."""
    if call.receiver_key == key:
        if call.method is None:
            return call.context.grad_off is not None
        return any(_inference_method(summary, info, call.method) for info in classes)
    function = call.function
    if depth == 0 or function is None or not any(call.chunk.code_for(arg.value) == key for arg in call.arg_nodes if not arg.star):
        return False
    inner = function.analysis(function.home or summary)
    if inner is None or _trains(inner):
        return False
    parameters = [name for name in inner.params if (passed := _passed_for(call, function, name)) is not None and passed[1] == key]
    inner_calls = list(inner.calls())
    if any(other.method in {"eval", "train"} and other.receiver_key in parameters for other in inner_calls):
        return False
    return any(_runs_restored(summary, other, parameter, classes, depth - 1) for other in inner_calls for parameter in parameters)


def _inference_method(summary, info: ClassInfo, name: str) -> bool:
    """The class (or a workspace base class) defines ``name`` as a method that runs the module without grad
    (``with torch.no_grad(): return self.parse_sentences(...)``) and switches no mode."""
    method = info.methods.get(name)
    home = info.home or summary
    if method is None:
        method = next((found for found, _ in _inherited_methods(summary, info) if found.name == name), None)
    inner = method.analysis(method.home or home) if method is not None else None
    if inner is None:
        return False
    calls = list(inner.calls())
    if any(call.method in {"eval", "train"} for call in calls):
        return False
    return any(call.context.grad_off is not None and (call.receiver_key or "").split(".")[0] == "self" for call in calls)


def _calls_torch_load(summary, function) -> bool:
    """Whether ``function``'s body calls ``torch.load`` anywhere (a lambda's body included): without it nothing there holds
    trained weights it loaded. The calls' names are read per statement, kept with the tree (a key in a long function reads
    its own statement again)."""
    names = facts_by_statement(
        function.node.body, function.chunk.node_memo("TL208 names called"), _name_called, function.chunk.node_memo("statement levels"))
    return any(summary.canonical(name) == "torch.load" for name in set(names))


def _name_called(node: cst.CSTNode) -> tuple[str, ...]:
    name = dotted(node.func) if isinstance(node, cst.Call) else None
    return (name,) if name is not None else ()


def _trained_weights_in(ctx: RuleContext, scope: ScopeAnalysis, node: cst.BaseExpression, loaded: set[str]) -> str | None:
    """How ``node`` holds trained weights, for a message: it calls ``torch.load``, or it reads a name bound to what
    ``torch.load`` returned (``state["model_state"]``, a comprehension over its items). None when it holds none."""
    for inner in walk(node):
        if isinstance(inner, cst.Call) and _restores_whole_module(ctx.summary, inner) is not None:
            return "`torch.load`"
    found = next((name for name in sorted(loaded) if mentions(scope, node, name)), None)
    return f"`{found}`, from `torch.load`" if found is not None else None


def _builds_from(ctx: RuleContext, scope: ScopeAnalysis, node: cst.BaseExpression, loaded: set[str]) -> bool:
    """``node`` calls a function or class (not a method of the loaded data: ``state.items()``) and hands it the trained
    weights as an argument: a factory that builds something from them."""
    if not isinstance(node, cst.Call) or dotted(node.func) is None:
        return False
    if isinstance(node.func, cst.Attribute) and _trained_weights_in(ctx, scope, node.func.value, loaded) is not None:
        return False
    return any(not arg.star and _trained_weights_in(ctx, scope, arg.value, loaded) is not None for arg in node.args)


def _disables_dropout(call: CallEvent, key: str) -> bool:
    """``call`` hands the model ``key`` to a function that sets the rate of its dropout layers to 0: a library's
    (trl's ``disable_dropout_in_model``, a row of ``libraries.CALL_FACTS``) or the workspace's own, which walks the
    model's ``modules()`` and assigns 0 to their ``p``."""
    if not any(not arg.star and call.chunk.code_for(arg.value) == key for arg in call.arg_nodes):
        return False
    if call_fact(call.callee, DISABLES_DROPOUT) is not None:
        return True
    function = call.function
    if function is None or ".modules()" not in function.chunk.code_for(function.node):
        return False
    return any(
        isinstance(node, cst.Assign) and _number(node.value) == 0
        and any(isinstance(target.target, cst.Attribute) and target.target.attr.value == "p" for target in node.targets)
        for node in walk(function.node)
    )


def _unknown_hub_model(value: Value) -> bool:
    """A model a hub entry point built whose layers no library fact tells (``torch.hub.load("user/repo", ...)``)."""
    return value.detail == "torch.hub.load"


def _part_handed_in(owner: ClassInfo) -> tuple[cst.CSTNode, str] | None:
    """The first attribute a module's ``__init__`` binds to one of its parameters (``self.encoder = encoder``)
    and that the class calls (``self.encoder(tokens)``): a part built elsewhere, whose layers this file does
    not show, with where it is bound. A number or a setting handed in the same way is never called."""
    called = {
        node.func.attr.value for node in walk(owner.node)
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and isinstance(node.func.value, cst.Name)
        and node.func.value.value == "self"
    }
    bindings = [(bound, attribute) for attribute in called if (bound := _bound_from_parameter(owner, attribute)) is not None]
    if not bindings:
        return None
    bound, attribute = min(bindings, key=lambda binding: owner.chunk.line_of(binding[0]))
    return bound, f"self.{attribute}"


def _layers_handed_in(ctx: RuleContext, owner: ClassInfo, attribute: str) -> tuple[tuple, tuple] | None:
    """The layers of a part a class's constructor is handed (``self.model = model``), read from what the class's
    constructions pass for it, in this file or in the workspace's other files (``SoftmaxNN(CNNEncoder(...), ...)``
    in a script): the first passed value with dropout or batch-norm, with the construction as evidence. A
    construction shows what one use of the class runs; the others may pass other parts, which is why one is enough
    to know the layers the pass can meet, and none means unknown."""
    for module, call, value in _passed_at_constructions(ctx, owner, attribute):
        layers = _layers_of(module.summary, value, module, imported=True)
        if layers is not None:
            return layers, ((call.chunk, call.node), f"`{owner.name}` is built here with a `{attribute}` that has them")
    return None


def _handed_in_training(ctx: RuleContext, owner: ClassInfo, attribute: str) -> tuple[tuple, tuple] | None:
    """Every construction of the class, in this file or the workspace's other files, hands it a model that is in
    training mode there: one of a workspace class (built by its constructor or by a workspace factory that returns it
    without ``.eval()``) whose layers act in training mode, in a file that runs no backward, with nothing in that file
    switching it (a server script's ``MegatronServer(model)`` after ``load_checkpoint(model)``). The layers and the
    construction, or None when one construction is not known so."""
    constructions = _passed_at_constructions(ctx, owner, attribute)
    found = None
    for module, call, value in constructions:
        name = _passed_name(call, value)
        if name is None or "." in name or module.backward_calls or _trains(call.scope) or not _built_in_training_mode(module, call, name, value):
            return None
        if _switched_to_eval_named(module, name) or _mode_at_call(module, call, "", key=name)[0] != "unknown":
            return None
        layers = _layers_of(module.summary, value, module)
        if layers is None:
            return None
        found = found or (layers, ((call.chunk, call.node), f"`{owner.name}` is built here with a `{attribute}` in training mode"))
    return found


def _passed_name(call: CallEvent, value: Value) -> str | None:
    """The name a call passes ``value`` under (``model`` in ``Server(model)``), or None."""
    positional = [arg for arg in call.arg_nodes if arg.keyword is None and not arg.star]
    for index, passed in enumerate(call.args):
        if passed is value and index < len(positional):
            return dotted(positional[index].value)
    return next((dotted(arg.value) for arg in call.arg_nodes
                 if arg.keyword is not None and call.kwargs.get(arg.keyword.value) is value), None)


def _built_in_training_mode(module: ModuleView, call: CallEvent, name: str, value: Value) -> bool:
    """``name``, bound once where ``call`` is made (its function, or the script's module level), holds a model of a
    workspace class built there by the class itself or by a workspace factory that returns it without ``.eval()``:
    a module starts in training mode."""
    if call.scope.function is not None:
        bound = [event.value_node for event in call.scope.events if isinstance(event, AssignEvent) and event.targets == (name,)]
    else:
        bound = [expression for _, expression, _ in module.summary.bindings.get(name) or []]
    if len(bound) != 1 or not isinstance(built := bound[0], cst.Call) or not isinstance(value.detail, ClassInfo):
        return False
    raw = dotted(built.func)  # None for `Net().eval()`: a chain is not read
    if raw is None:
        return False
    if module.summary.local_class(module.summary.canonical(raw)) is value.detail:
        return True
    factory = module.summary.functions.get(raw) or module.summary.imported_function(raw)
    return factory is not None and not _returns_in_eval_mode(factory)


def _passed_at_constructions(ctx: RuleContext, owner: ClassInfo, attribute: str) -> list[tuple[ModuleView, CallEvent, Value]]:
    """What each construction of the class, in this file and in the workspace's other files, passes for the
    parameter ``self.<attribute>`` is bound from; empty when that binding is not read or a construction hides it."""
    init = owner.methods.get("__init__")
    parameter = _parameter_wrapped(ctx.summary, owner, attribute)
    if init is None or parameter is None:
        return []
    positional = [param.name.value for param in (*init.node.params.posonly_params, *init.node.params.params)][1:]

    def read(module: ModuleView, call: CallEvent) -> tuple[ModuleView, CallEvent, Value] | None:
        if parameter in call.kwargs:
            return module, call, call.kwargs[parameter]
        index = positional.index(parameter) if parameter in positional else len(call.args)
        return (module, call, call.args[index]) if index < len(call.args) and not any(arg.star for arg in call.arg_nodes) else None

    here = [(ctx.module, call, value) for call, value in ctx.module.constructor_arguments(owner, attribute) or []]
    elsewhere = constructions_elsewhere(ctx.summary, owner, read)
    if any(found is None for found in elsewhere):
        return []
    return [*here, *filter(None, elsewhere)]


def _layers_from_callers(ctx: RuleContext, function, parameter: str) -> tuple[tuple, tuple] | None:
    """The layers of a model a function is handed (``train(net, ...)``), read from what its calls pass for it, in
    this file and in the workspace's other files (``train(model, ...)`` in ``main.py``, the model a factory of the
    project built): the first passed model with dropout or batch-norm, with the call as evidence."""
    for module, call, value in _passed_to_function(ctx, function, parameter):
        layers = _layers_of(module.summary, value, module, imported=True)
        if layers is not None:
            return layers, ((call.chunk, call.node), f"`{function.name}` is handed here a `{parameter}` that has them")
    return None


def _layers_passed_in_its_file(module: ModuleView, function, parameter: str) -> tuple[tuple, tuple] | None:
    """The layers of a model that a function of another file (``train_net(net, ...)`` in ``train.py``, which hands
    it to this file's evaluation) is handed by the calls of that file (``train_net(net=UNet(...))`` in its main
    block): the first passed model with dropout or batch-norm, with the call as evidence."""
    for call, value in module.arguments_for(function, parameter) or []:
        layers = _layers_of(module.summary, value, module, imported=True)
        if layers is not None:
            return layers, ((call.chunk, call.node), f"`{function.name}` is handed here a `{parameter}` that has them")
    return None


def _handed_one_call_up(ctx: RuleContext, function, parameter: str) -> list[tuple[ModuleView, CallEvent, Value]]:
    """What each call of a function, here and in the workspace's other files, passes for one of its parameters; where a
    call passes a parameter of its own function (``fit(net, ...)`` handing on its ``net``), what the calls of that
    function in the caller's file pass for it. Empty when a call hides it."""
    found: list[tuple[ModuleView, CallEvent, Value]] = []
    for module, call, value in _passed_to_function(ctx, function, parameter):
        passed = _passed_for(call, function, parameter)
        caller = call.scope.function
        if passed is None or not _kind_unknown(value) or caller is None or passed[1] not in call.scope.params:
            found.append((module, call, value))
            continue
        outer = module.arguments_for(caller, passed[1])
        if not outer:
            return []
        found += [(module, above, handed) for above, handed in outer]
    return found


def _passed_to_function(ctx: RuleContext, function, parameter: str) -> list[tuple[ModuleView, CallEvent, Value]]:
    """What each call of a function of this file, here and in the workspace's other files, passes for one of its
    parameters; empty when a call hides it."""
    here = ctx.module.arguments_for(function, parameter)
    if here is None:
        return []

    def read(module: ModuleView, call: CallEvent) -> tuple[ModuleView, CallEvent, Value] | None:
        passed = _passed_for(call, function, parameter)
        return (module, call, passed[0]) if passed is not None else None

    elsewhere = callers_elsewhere(ctx.summary, function, read)
    if any(found is None for found in elsewhere):
        return []
    return [*((ctx.module, call, value) for call, value in here), *filter(None, elsewhere)]


def _known_without_layers(passed: list[tuple[ModuleView, CallEvent, Value]]) -> bool:
    """Every value passed (one at least) is a model known to have no dropout or batch-norm (an ``nn.Sequential`` of
    linear layers, a workspace class without them): it behaves the same in both modes."""
    return bool(passed) and all(Tag.MODEL in value.tags and not _kind_unknown(value) and _layers_of(module.summary, value, module, imported=True) is None
                                for module, _, value in passed)


def _parameter_wrapped(summary, owner: ClassInfo, attribute: str) -> str | None:
    """The parameter of ``__init__`` that ``self.<attribute>`` holds: as it is (``self.model = model``), moved
    (``model.to(device)``, ``model.cuda()``: the same module) or in a data-parallel wrapper
    (``nn.DataParallel(model)``, which runs the module it wraps)."""
    init = owner.methods.get("__init__")
    if init is None:
        return None
    home = owner.home or summary
    parameters = {param.name.value for param in init.node.params.params}
    for node in walk(init.node.body):
        if not isinstance(node, cst.Assign) or len(node.targets) != 1:
            continue
        target = node.targets[0].target
        if not (isinstance(target, cst.Attribute) and isinstance(target.value, cst.Name) and target.value.value == "self"
                and target.attr.value == attribute):
            continue
        held = node.value
        while isinstance(held, cst.Call) and isinstance(held.func, cst.Attribute) and held.func.attr.value in {"to", "cuda"}:
            held = held.func.value
        if isinstance(held, cst.Call) and held.args:
            raw = dotted(held.func)
            if raw is not None and (is_ddp_wrapper(home.canonical(raw)) or last_part(raw) == "DataParallel"):
                held = held.args[0].value
        if isinstance(held, cst.Name) and held.value in parameters:
            return held.value
    return None


def _handed_out_in_training(module: ModuleView, call: CallEvent, path: str) -> tuple[CallEvent, str] | None:
    """A construction of a module in another file's function that gives it its trained weights (``load_state_dict``)
    and returns it without switching its mode (``get_model(name)`` of a package): whoever takes the model gets it in
    training mode. With where the construction is."""
    function = call.scope.function
    if function is None:
        return None
    built = next((event.targets[0] for event in call.scope.events if isinstance(event, AssignEvent)
                  and len(event.targets) == 1 and event.value_node is call.node), None)
    if built is None or "." in built:
        return None
    calls = list(call.scope.calls())
    if not any(other.receiver_key == built and other.method == "load_state_dict" for other in calls):
        return None
    if any(other.receiver_key == built and other.method in {"eval", "train"} for other in calls) or _trains(call.scope):
        return None
    returned = any(isinstance(node, cst.Return) and isinstance(node.value, cst.Name) and node.value.value == built
                   for node in walk(function.node.body))
    return (call, f"{path}:{call.chunk.line_of(call.node)}") if returned else None


def _kind_unknown(value: Value) -> bool:
    """Nothing in the file tells what model this is (a parameter, an attribute bound elsewhere, or a
    data-parallel wrapper around one): whether it has dropout or batch-norm is unknown, not absent."""
    detail = value.detail
    return detail is None or (isinstance(detail, str) and (is_ddp_wrapper(detail) or last_part(detail) == "DataParallel"))


def _first_statement(node: cst.FunctionDef) -> cst.CSTNode:
    """The first statement of a function's body after its docstring: where a mode switch would go."""
    body = list(node.body.body) if isinstance(node.body, cst.IndentedBlock) else [node.body]
    docstring = node.get_docstring(clean=False) is not None
    return body[1] if docstring and len(body) > 1 else body[0]


def _trains_and_keeps_training(module: ModuleView, call: CallEvent, text: str, value: Value) -> bool:
    """The function making ``call`` puts ``text`` in training mode (``text.train()``, or, for a value known to be
    a model, runs it in a loop that backwards) and nothing in it switches ``text`` to eval mode, itself or
    through a local helper."""
    calls = list(call.scope.calls())
    if _training_switch_reaching(module, call.scope, call, text) is not None:
        return True
    trains = any(other.method == "train" and other.receiver_key == text and _sets_train_mode(other) for other in calls) or (
        Tag.MODEL in value.tags and any(_trained_in_loop(other, calls) for other in calls if other.method is None and other.receiver_key == text)
    )
    if not trains:
        return False
    key = text.rpartition(".")[2]
    return not any(
        (other.receiver_key == text and _sets_eval_mode(other))
        or (other.function is not None and other is not call and _helper_sets_eval_mode(other, key, module.summary))
        for other in calls
    )


def _handed_on_from_training(module: ModuleView, call: CallEvent, text: str) -> tuple[CallEvent, tuple[Value, str]] | None:
    """Where ``call`` hands on a model its own function was handed (``predict(model)`` in ``validate(model)``, or
    ``predict(context.model)`` in ``validate(context)``) and that function trains nothing and switches nothing to eval
    mode: the call of it in this file made by a function that trains the model and keeps it training
    (``_trains_and_keeps_training``, the model named there as passed or by a name bound to it, ``model = context.model``),
    with what that call hands over. None when no such call is found."""
    helper = call.scope.function
    root, dot, rest = text.partition(".")
    if helper is None or root not in call.scope.params or _trains(call.scope):
        return None
    if any(other.receiver_key == text and _sets_eval_mode(other) for other in call.scope.calls()):
        return None
    for above in module.calls_of(helper):
        passed = _passed_for(above, helper, root)
        if passed is None or passed[1] is None:
            continue
        outer_text = passed[1] + dot + rest
        for name, value in ((outer_text, passed[0]), *_names_bound_to(above.scope, outer_text)):
            if _trains_and_keeps_training(module, above, name, value):
                return above, (value, name)
    return None


def _names_bound_to(scope: ScopeAnalysis, text: str) -> list[tuple[str, Value]]:
    """The plain names the scope binds to the expression ``text`` (``model = context.model``), with their values."""
    return [(event.targets[0], event.value) for event in scope.events
            if isinstance(event, AssignEvent) and len(event.targets) == 1 and "." not in event.targets[0]
            and event.value_node is not None and event.chunk.code_for(event.value_node) == text]


def _holder_put_in_training(ctx: RuleContext, scope: ScopeAnalysis, key: str) -> CallEvent | None:
    """For a submodule of the module class whose method runs it (``self.teacher``), a call in this file that
    puts an instance of that class in training mode (``model.train()``, ``self.train()``): `Module.train`
    switches every submodule, a frozen one switched to eval mode at construction included. None when the
    class overrides ``train`` (it may keep its frozen part in eval mode) or nothing here switches it."""
    function = scope.function
    owner = function.owner if function is not None else None
    if owner is None or not key.startswith("self.") or key.count(".") != 1 or not ctx.summary.is_module_class(owner):
        return None
    if owner.find_method("train", ctx.summary) is not None:
        return None
    for call in ctx.module.all_calls():
        if call.method != "train" or not _sets_train_mode(call) or call.receiver is None:
            continue
        holder = call.receiver.detail
        mine = call.receiver_key == "self" and call.scope.function is not None and call.scope.function.owner is owner
        if mine or (isinstance(holder, ClassInfo) and holder.name == owner.name):
            return call
    return None


def _built_in_eval_mode(module: ModuleView, model: Value) -> bool:
    """The expression that builds the model switches it on the way (``resnet50(weights=...).eval()``,
    ``Net().to(device).eval()``): the `.eval()` has no name to be found by."""
    if model.site is None:
        return False
    built = model.site[1]
    return any(_sets_eval_mode(call) and isinstance(call.node.func, cst.Attribute)
               and any(node is built for node in walk(call.node.func.value)) for call in module.all_calls())


def _trained_or_handed_on(module: ModuleView, key: str) -> bool:
    """Whether the file may train the model named ``key`` or lets something else decide its mode: a forward of it
    runs with grad, a call is given its parameters (an optimizer, a parameter group) or the model itself (a
    wrapper, an engine, a helper that may switch or train it)."""
    last = key.rpartition(".")[2]
    # `teacher`, `[student, teacher]`, `teacher.parameters()`; not its forward (`teacher(x)`) nor a field (`teacher.config`)
    handed = re.compile(rf"(?<!\w){re.escape(last)}(?:\.(?:named_)?parameters\(|\b(?!\s*[(.]))")
    for call in module.all_calls():
        if (call.receiver_key or "").rpartition(".")[2] == last:
            if call.method is None and call.context.grad_off is None:
                return True
            continue
        if call.callee == "zip":
            continue  # `zip(ema.parameters(), model.parameters())`: iterated in place, an average or a copy, not handed on
        if any(handed.search(call.chunk.code_for(arg.value)) for arg in call.arg_nodes):
            return True
    return False


def _passed_for(call: CallEvent, function, parameter: str) -> tuple[Value, str | None] | None:
    """The value (and the text) a call passes for one parameter of the function it runs."""
    if parameter in call.kwargs:
        argument = call.keyword(parameter)
        assert argument is not None, "call.kwargs holds the keyword arguments"
        return call.kwargs[parameter], call.chunk.code_for(argument.value)
    params = function.positional_parameters  # a method's `self` is no argument of the call
    positional = [arg for arg in call.arg_nodes if arg.keyword is None and not arg.star]
    if parameter in params and params.index(parameter) < len(positional) <= len(call.args):
        index = params.index(parameter)
        return call.args[index], call.chunk.code_for(positional[index].value)
    return None


def _inference_pass(ctx: RuleContext, scope: ScopeAnalysis, forward: CallEvent, *, callers: bool = True) -> str | None:
    """Why the function of ``scope`` is an inference pass for ``forward``, by what it does, or None: it trains
    nothing (no backward or optimizer step, in it or in the local helpers it calls), and what the forward
    computes feeds no backward: it runs without grad, or its graph dies in the function (scores, features,
    samples taken as numbers). An output it returns must feed no backward in any caller this file shows (a
    no-grad sample handed to a discriminator's loss, pseudo-labels for the model's own loss are training).
    Its name is never the reason, only said alongside."""
    function = scope.function
    if function is None or _trains(scope):
        return None
    off = forward.context.grad_off is not None or forward.method in LIBRARY_NO_GRAD_METHODS
    if not off and graph_kept(scope, forward.node):
        return None
    if callers and _returned_into_backward(ctx, scope, forward):
        return None
    how = "runs the model without grad" if off else "returns or keeps none of the forward's graph"
    named = " (its name says so too)" if _EVALUATION_WORDS.search(function.name) else ""
    return f"`{function.name}` {how} and trains nothing, and nothing in this file backwards what it computes: an inference pass{named}"


def _script_inference_pass(ctx: RuleContext, call: CallEvent) -> tuple | None:
    """A forward at a script's module level in a program that trains nothing (nothing in this file, or in the
    workspace functions its module level runs, backwards, steps an optimizer or calls ``torch.autograd``:
    ``program_trains``): an inference pass, by what the script does, as the same body in a ``main()`` is one
    (``_inference_pass``). A model the script builds without weights, and loads none into, computes no trained
    model's output: a check of its shapes, a demo (``script_model_untrained``)."""
    module = ctx.module
    if module.module_fact("the program trains", program_trains) or script_model_untrained(module, call):
        return None
    return ((call.chunk, call.node), (
        "the script's module level runs the model, and nothing the program runs (this file, or the workspace functions "
        "its module level calls) backwards, steps an optimizer or calls `torch.autograd`: an inference pass"
    ))


def _mode_at_call(module: ModuleView, call: CallEvent, path: str, *, key: str | None = None) -> tuple[str, CallEvent, str]:
    """The mode of the module a call of another file runs a method of (``classifier.infer(batch)``), or of the model
    named ``key`` it hands over (``evaluate(model, loader)``): "eval" or "train" when its function switched that
    receiver last before the call (or runs and trains it and never switches it: a module stays in training mode
    after training), "unknown" otherwise; with where the call is."""
    key = key if key is not None else call.receiver_key
    line = call.chunk.line_of(call.node)
    where = f"{path}:{line}"
    # a script's statements are scopes of their own: its module-level calls before this one, in order
    calls = list(call.scope.calls()) if call.scope.function is not None else [
        other for other in module.all_calls() if other.scope.function is None and other.chunk.line_of(other.node) <= line
    ]
    switches = [
        other for other in calls
        if key is not None and other.receiver_key == key and other.method in {"eval", "train"} and other.chunk.line_of(other.node) < line
    ]
    if switches:
        return switches[-1].method or "unknown", call, where
    if key is not None and any(other.receiver_key == key and other.method is None for other in calls) and any(
        is_backward(other) or is_optimizer_step(other) for other in calls
    ):
        return "train", call, where  # the function trains that module and leaves its mode as training left it
    return "unknown", call, where


def _passed_mode_reader(function, parameter: str, folder: str):
    """How a call of ``function`` in another file leaves the model it passes for ``parameter`` (``_mode_at_call``)."""
    def read(module: ModuleView, call: CallEvent) -> tuple[str, CallEvent, str]:
        passed = _passed_for(call, function, parameter)
        return _mode_at_call(module, call, os.path.relpath(module.path, folder), key=passed[1] if passed is not None else None)
    return read


def _another_method(call: CallEvent, owner, function) -> bool:
    """The call is made by another method of ``owner`` than ``function``, in the method's own flow."""
    caller = call.scope.function
    return caller is not None and caller is not function and owner.methods.get(caller.name) is caller


def _decides_mode(scope: ScopeAnalysis) -> bool:
    """The method switches a mode or trains: what it calls runs in the mode it sets. A method that does neither
    (``forecast`` returning one field of ``predict``) is a wrapper, and the mode is its own caller's to decide."""
    return _trains(scope) or any(call.method in {"eval", "train"} for call in scope.calls())


def _returned_into_backward(ctx: RuleContext, scope: ScopeAnalysis, forward: CallEvent) -> bool:
    """What the forward computes is returned, and a caller in this file backwards it."""
    assert scope.function is not None, "asked of a function's forward"
    return value_returned(scope, forward.node) and any(
        feeds_backward(outer.scope, outer.node) for outer in ctx.module.calls_of(scope.function)
    )


def _in_training_step(call: CallEvent) -> bool:
    """``call`` runs in the same loop iteration as a backward (its innermost loop backwards directly, not in a
    nested loop): part of a training step, like an action the trained policy takes or targets it makes. A call
    under a test of the step count (``if step % args.eval_step == 0``) runs every N steps beside the training
    step, not as a part of it: a periodic evaluation."""
    if not call.context.loops:
        return False
    loop = call.context.loops[-1]
    if any(_counts_steps(condition.test) for condition in call.context.conditions_inside(loop)):
        return False
    return any(is_backward(other) and other.context.loops and other.context.loops[-1] is loop for other in call.scope.calls())


def _counts_steps(test: cst.BaseExpression | None) -> bool:
    """A test of a count modulo a period (``step % 100 == 0``, ``(i + 1) % args.log_interval``), in any part of it."""
    return test is not None and any(isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Modulo)
                                    for node in walk(test))


def _runs_training_loop(ctx: RuleContext, scope: ScopeAnalysis) -> bool:
    """The function runs a whole training loop (a loop that backwards or steps, itself or through a local
    helper), not one update: what runs after it runs after training, not between two updates."""
    for call in scope.calls():
        if not call.context.loops:
            continue
        if is_backward(call) or is_optimizer_step(call):
            return True
        inner = call.function.analysis(ctx.summary) if call.function is not None else None
        if inner is not None and _trains(inner):
            return True
    return False


def _trains(scope: ScopeAnalysis) -> bool:
    """A backward or an optimizer step runs in the function or in a local helper it calls. Kept with the scope
    while the helpers' flows are the same (asked of every scope a key checks again, and of the helpers they call)."""
    return kept_with_scope(scope, "TL208 trains", lambda: any(is_backward(call) or is_optimizer_step(call) for call in calls_in(scope, None)))


def _evaluation_pass(ctx: RuleContext, scope: ScopeAnalysis, call: CallEvent) -> tuple | None:
    module = ctx.module
    if _sampled_from_noise(ctx, scope, call):
        return None
    function = scope.function
    if function is not None and _runs_what_it_is_handed(ctx, function, call):
        why = _inference_pass(ctx, scope, call)
        if why is not None:
            return ((scope.chunk, function.node.name), why)
    if function is None and (script := _script_inference_pass(ctx, call)) is not None:
        return script
    periodic = _periodic_scoring(scope, call) or _scored_after_training(module, scope, call)
    if periodic is not None:
        return periodic
    if call.context.grad_off is None:
        return _scoring_loop(module, scope, call)
    for loop in reversed(call.context.loops):
        if _EVALUATION_DATA.search(loop.iterable_text):
            return ((scope.chunk, loop.node), f"a no-grad loop over `{loop.iterable_text}`: evaluation data")
    return None


def _periodic_scoring(scope: ScopeAnalysis, call: CallEvent) -> tuple | None:
    """A forward run every N steps of a loop that trains the same model (``if i % 10 == 0:`` in its body), whose
    result no backward runs through, in a branch that backwards and steps nothing: a test batch scored, or an
    image grid sampled, beside the training step, in the mode the training step left the model, training. The
    flow's graph roots say which forward a backward runs through, where it runs: a name the scoring forward
    reuses (``pred``, ``loss``) and the next step binds again does not carry it into the next backward. A forward
    every step (pseudo-labels, targets) is part of the step, not beside it."""
    key = call.receiver_key
    if key is None:
        return None
    backwarded = [backward_target(other).roots for other in scope.calls() if is_backward(other)]
    if any(call.node in roots for roots in backwarded):
        return None
    for loop in reversed(call.context.loops):
        periodic = next((condition for condition in call.context.conditions_inside(loop) if _counts_steps(condition.test)), None)
        if periodic is None:
            continue
        inside = [other for other in scope.calls() if any(condition.node is periodic.node for condition in other.context.conditions)]
        if any(is_backward(other) or is_optimizer_step(other) for other in inside):
            return None
        trained = _trained_in(scope, loop, key, backwarded, call)
        if trained is None:
            return None
        return ((scope.chunk, periodic.node), (
            f"runs `{key}` every N steps of the loop that trains it ({trained}), and no backward runs through this "
            f"forward: a periodic evaluation, in the mode the training step left"
        ))
    return None


def _scored_after_training(module: ModuleView, scope: ScopeAnalysis, call: CallEvent) -> tuple | None:
    """A forward without grad, after the loop that trains its model (a backward runs through another forward of it,
    or an optimizer given its parameters steps there; in the same function, or at the module level of a script or an
    earlier cell of a notebook) and in no loop that trains it, that no backward runs through: the trained model
    scored (a test batch, ``next(iter(test_loader))``), in the mode the training loop left, training. Whatever the
    data is called: grad off and the training behind it say so."""
    key = call.receiver_key
    if key is None or call.context.grad_off is None:
        return None
    if any(call.node in roots for roots in _backwarded(scope)):
        return None
    where = (scope.chunk.index, scope.chunk.line_of(call.node))
    scopes = {id(scope): scope}
    if scope.function is None:
        scopes.update((id(other.scope), other.scope) for other in module.all_calls()
                      if other.scope.function is None and (is_backward(other) or is_optimizer_step(other)))
    trained = None
    for other_scope in scopes.values():
        backwarded = _backwarded(other_scope)
        steps = [other for other in other_scope.calls() if is_backward(other) or is_optimizer_step(other)]
        for loop in {id(loop): loop for step in steps for loop in step.context.loops}.values():
            how = _trained_in(other_scope, loop, key, backwarded, call)
            if how is None:
                continue
            if call.context.in_loop(loop) or (other_scope.chunk.index, other_scope.chunk.line_of(loop.node)) > where:
                return None  # scored within (or before) a loop that trains it: part of training, or of what precedes it
            trained = trained or (other_scope, loop, how)
    if trained is None:
        return None
    after = (trained[0].chunk.index, trained[0].chunk.line_of(trained[1].node))
    if any(other.receiver_key == key and other.method == "train" and not other.context.in_loop(trained[1])
           and after < (other.scope.chunk.index, other.scope.chunk.line_of(other.node)) < where
           for other in (scope.calls() if scope.function is not None else module.all_calls()) if other.scope.function is scope.function):
        return None  # put in training mode again on purpose (batch-norm statistics recomputed after averaging weights)
    other_scope, loop, how = trained
    return ((other_scope.chunk, loop.node), (
        f"runs `{key}` without grad after the loop that trains it ({how}), and no backward runs through this forward: "
        "the trained model scored, in the mode training left"
    ))


def _backwarded(scope: ScopeAnalysis) -> list[frozenset]:
    """The graph roots of each backward of the scope: the forwards it runs through."""
    return [backward_target(other).roots for other in scope.calls() if is_backward(other)]


# torch's and numpy's draws of random numbers: a generator's latent input, made by the program, not read from data
_NOISE_DRAWS = frozenset({
    "torch.randn", "torch.rand", "torch.randn_like", "torch.rand_like", "torch.normal", "torch.randint",
    "numpy.random.normal", "numpy.random.randn", "numpy.random.rand", "numpy.random.uniform",
    "numpy.random.standard_normal", "numpy.random.randint",
})
# torch's constructions of index tensors (the classes a conditional generator is asked for, `torch.arange(10)`)
_MADE_BY_THE_PROGRAM = frozenset({
    "torch.arange", "torch.full", "torch.linspace", "torch.eye", "torch.zeros", "torch.ones",
    "numpy.arange", "numpy.linspace", "numpy.zeros", "numpy.ones",
})
# calls that turn their first argument into a tensor or variable and keep its values (`Variable(FloatTensor(draw))`)
_KEEPS_VALUES = frozenset({
    "torch.autograd.Variable", "torch.from_numpy", "torch.tensor", "torch.as_tensor", "torch.Tensor",
    "torch.FloatTensor", "torch.LongTensor", "torch.cuda.FloatTensor", "torch.cuda.LongTensor", "numpy.array",
})
# tensor methods that move, cast, reshape or repeat a tensor's values
_MOVES_VALUES = frozenset({
    "to", "cuda", "float", "half", "long", "type", "view", "reshape", "unsqueeze", "expand", "repeat",
    "repeat_interleave", "detach", "requires_grad_", "type_as", "split", "chunk", "unbind",
})


def _sampled_from_noise(ctx: RuleContext, scope: ScopeAnalysis, call: CallEvent) -> bool:
    """Every input of the forward is made by the program, at least one a random draw (``torch.randn(...)``,
    ``Variable(FloatTensor(np.random.normal(...)))``, class labels from ``torch.arange``), directly, through
    names and attributes bound to one, or through the parameters of helpers whose every caller hands one
    (``save_grid(generator, fixed_noise, path)``): a generator sampled on noise, not a model scored on data.
    In training mode its batch-norm normalises the sample batch by its own statistics, as every training step
    does to the batch the discriminator sees, and the running averages it updates take one more batch drawn
    from the same prior the training steps draw from: no held-out data reaches the model's state and nothing is
    scored, so neither harm of this rule happens. Which statistics a sample grid shows is the project's choice
    (pytorch/examples' DCGAN samples `netG` in training mode; its maintainers kept batch statistics there,
    pytorch/examples#119). A generator handed held-out data (an inpainting or translation of a validation
    batch) is scored on data and stays reported."""
    if not call.node.args or scope.summary is None:
        return False
    iterated = {loop.node.target.value: loop.node.iter for loop in call.context.loops
                if isinstance(loop.node, cst.For) and isinstance(loop.node.target, cst.Name)}
    kinds = [_made_by_program(ctx.module, scope, iterated.get(argument.value.value, argument.value)
                              if isinstance(argument.value, cst.Name) else argument.value, 2, ctx.summary, chunk=call.chunk)
             for argument in call.node.args]
    return all(kinds) and "drawn" in kinds


def _made_by_program(module: ModuleView, scope: ScopeAnalysis, node: cst.BaseExpression, depth: int,
                     checked=None, hops: int = 16, chunk=None) -> str | None:
    """``"drawn"`` for a random draw, ``"made"`` for another tensor the program constructs, None for anything
    else (data, or what the analysis cannot follow). ``checked``, the checked file's summary, also reads the
    callers in other files of a function of that file. ``chunk``: the chunk ``node`` was parsed in (the scope's when
    not given)."""
    chunk = chunk or scope.chunk
    summary = scope.summary
    if summary is None or hops == 0:
        return None
    if isinstance(node, cst.Call):
        raw = dotted(node.func)
        known = summary.canonical(raw) if raw is not None else None
        if known in _NOISE_DRAWS:
            return "drawn"
        if known in _MADE_BY_THE_PROGRAM:
            return "made"
        if (known in _KEEPS_VALUES or _bound_to_keepers(module, scope, node.func)) and node.args:
            return _made_by_program(module, scope, node.args[0].value, depth, checked, hops - 1, chunk)
        if isinstance(node.func, cst.Attribute) and node.func.attr.value in _MOVES_VALUES:
            return _made_by_program(module, scope, node.func.value, depth, checked, hops - 1, chunk)
        helper = summary.functions.get(node.func.value) if isinstance(node.func, cst.Name) else None
        return _returned_by(module, helper, depth - 1, checked, hops - 1) if helper is not None and depth > 0 else None
    if isinstance(node, cst.ListComp | cst.List):  # class labels written out, `[c for _ in range(n) for c in range(n)]`
        loops, written = [], node.for_in if isinstance(node, cst.ListComp) else None
        while written is not None:
            loops.append(written.iter)
            written = written.inner_for_in
        numbers = isinstance(node, cst.List) and all(isinstance(element.value, cst.Integer) for element in node.elements)
        ranges = bool(loops) and all(isinstance(loop, cst.Call) and dotted(loop.func) == "range" for loop in loops)
        return "made" if numbers or ranges else None
    if not isinstance(node, cst.Name | cst.Attribute):
        return None
    value = scope.value_at(node)
    site = value.site if value is not None else None
    if site is not None and isinstance(site[1], cst.Call) and site[1] is not node:
        kind = _made_by_program(module, scope, site[1], depth, checked, hops - 1, site[0])
        if kind is None and depth > 0:  # the value a helper of the file returns (`labels = one_hot(...)`): read in the helper
            helper = next((function for function in summary.functions.values()
                           if any(isinstance(end, cst.Return) and end.value is site[1] for end in own_returns(function.node))), None)
            kind = _returned_by(module, helper, depth - 1, checked, hops - 1) if helper is not None else None
        return kind
    line = chunk.line_of(node)
    bound = [event for event in scope.events if isinstance(event, AssignEvent) and event.targets == (dotted(node),)
             and event.value_node is not None and event.chunk is chunk and chunk.line_of(event.node) < line]
    if bound:  # the binding before it, which the flow could not evaluate (a call of a name bound at the module level)
        last = max(bound, key=lambda event: event.chunk.line_of(event.node)).value_node
        assert last is not None, "bindings without a value were left out above"
        return _made_by_program(module, scope, last, depth, checked, hops - 1, chunk)
    if isinstance(node, cst.Name) and scope.function is not None and node.value in scope.params and depth > 0:
        return _handed_by_every_caller(module, scope.function, node.value, depth - 1, checked)
    if isinstance(node, cst.Name) and scope.function is not None:
        # a global the function reads (InfoGAN's `static_label`, bound once at the module level): read at its binding
        entries = summary.bindings.get(node.value) or []
        home = next((other for other in module.all_scopes if other.function is None and other.chunk.index == entries[0][0]), None) \
            if len(entries) == 1 and entries[0][2] is None else None
        if home is not None:
            return _made_by_program(module, home, entries[0][1], depth, checked, hops - 1, home.chunk)
    return None


def _returned_by(module: ModuleView, function, depth: int, checked, hops: int) -> str | None:
    """What a function of this file returns (by ``_made_by_program``, read in its own scope), when it has one
    ``return`` and writes only numbers into what it builds (InfoGAN's ``to_categorical``: ``np.zeros`` with 1.0
    written at the labels, kept by ``Variable(FloatTensor(...))``); None when an item it writes may be data."""
    returns = own_returns(function.node)
    if len(returns) != 1 or not isinstance(returns[0], cst.Return) or returns[0].value is None:
        return None
    for written in walk(function.node.body):
        if isinstance(written, cst.AugAssign) and isinstance(written.target, cst.Subscript):
            return None
        if isinstance(written, cst.Assign) and any(isinstance(target.target, cst.Subscript) for target in written.targets) and not isinstance(
            written.value, cst.Integer | cst.Float
        ):
            return None
    inner = function.analysis(module.summary)
    return _made_by_program(module, inner, returns[0].value, depth, checked, hops, function.chunk) if inner is not None else None


def _bound_to_keepers(module: ModuleView, scope: ScopeAnalysis, func: cst.BaseExpression) -> bool:
    """A module-level name bound to one of two tensor types by a conditional (``Tensor = torch.cuda.FloatTensor if
    cuda else torch.FloatTensor``): calling it keeps its argument's values as either would."""
    if not isinstance(func, cst.Name) or scope.summary is None:
        return False
    bound = [statement.value for chunk in module.chunks if chunk.module is not None for line in chunk.module.body
             if isinstance(line, cst.SimpleStatementLine) for statement in line.body
             if isinstance(statement, cst.Assign) and any(dotted(target.target) == func.value for target in statement.targets)]
    summary = scope.summary
    return len(bound) == 1 and isinstance(bound[0], cst.IfExp) and all(
        (raw := dotted(branch)) is not None and summary.canonical(raw) in _KEEPS_VALUES for branch in (bound[0].body, bound[0].orelse))

def _handed_by_every_caller(module: ModuleView, function, parameter: str, depth: int, checked) -> str | None:
    """What every call of ``function`` in its file hands ``parameter`` (by ``_made_by_program``), or, for a
    function of the checked file that its file never calls, every call in the workspace's other files; None
    when there is no such call or one hands something else."""
    calls = [(module, call) for call in module.calls_of(function)]
    if not calls and checked is not None:
        calls = callers_elsewhere(checked, function, lambda other, call: (other, call))
    kinds = set()
    for home, call in calls:
        argument = argument_passed(call, function, parameter)
        kind = _made_by_program(home, call.scope, argument.value, depth, chunk=call.chunk) if argument is not None else None
        if kind is None:
            return None
        kinds.add(kind)
    return "drawn" if "drawn" in kinds else ("made" if kinds else None)


def _trained_in(scope: ScopeAnalysis, loop, key: str, backwarded: list[frozenset], scoring: CallEvent) -> str | None:
    """How the loop trains the model ``key``, or None: a backward runs through another forward of it, or an
    optimizer stepped in the loop was given its parameters (a generator whose output reaches the loss through
    a discriminator)."""
    for other in scope.calls():
        if other is scoring or not other.context.in_loop(loop):
            continue
        if other.receiver_key == key and other.method is None and any(other.node in roots for roots in backwarded):
            return f"its forward on line {scope.chunk.line_of(other.node)} is backwarded"
        built = other.receiver.site if is_optimizer_step(other) and other.receiver is not None else None
        if built is not None and isinstance(built[1], cst.Call) and _given_parameters_of(built[1], key):
            return f"`{shortened(other.chunk.code_for(other.node), 40)}` on line {other.chunk.line_of(other.node)} steps its parameters"
    return None


def _given_parameters_of(optimizer: cst.Call, key: str) -> bool:
    """An optimizer's construction is handed the parameters of the model ``key`` (``Adam(netG.parameters())``)."""
    return any(
        isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value in {"parameters", "named_parameters"}
        and dotted(node.func.value) == key
        for arg in optimizer.args for node in walk(arg.value)
    )


def _runs_what_it_is_handed(ctx: RuleContext, function, call: CallEvent) -> bool:
    """The forward's model is not the instance's, so its mode is what the code around it leaves, as for a
    module-level function: a function, or a method of a plain class (not a module, whose holder sets its mode)
    that runs a model it is handed or reads from the module (``Evaluator().run(model, loader)``), not one it holds
    on ``self`` (``_check_class_managed_mode`` reads those)."""
    if function.owner is None:
        return True
    root = (call.receiver_key or "").split(".")[0]
    bound = function.node.params.params[:1] if function.positional_parameters != _parameters(function) else ()
    return all(root != instance.name.value for instance in bound) and not ctx.summary.is_module_class(function.owner)


def _parameters(function) -> list[str]:
    return [param.name.value for param in (*function.node.params.posonly_params, *function.node.params.params)]


def _scoring_loop(module: ModuleView, scope: ScopeAnalysis, call: CallEvent) -> tuple | None:
    """A loop over held-out data (`test_loader`, `testloader`) that runs the forward with grad on (code
    written before `no_grad`, or that forgot it) and trains nothing, in a file that trains: the loop
    scores the trained model. A loop over such data that backwards or steps is training on it (test-time
    adaptation), and a file that trains nothing may be a feature extractor: both stay quiet."""
    if not module.backward_calls:
        return None
    for loop in reversed(call.context.loops):
        if not isinstance(loop.node, cst.For) or not _names_held_out_data(loop.iterable_text):
            continue
        if any(is_backward(inner) or is_optimizer_step(inner) for inner in calls_in(scope, loop)):
            return None
        trained = module.backward_calls[0]
        return ((scope.chunk, loop.node), f"a loop over `{loop.iterable_text}` that trains nothing: it scores the model "
                f"this file trains (backward on line {trained.chunk.line_of(trained.node)})")
    return None


def _names_held_out_data(text: str) -> bool:
    """`test_loader`, `testloader`, `dataloaders["val"]`: a word of the iterable names held-out data
    (`values`, `device`, `latest` do not)."""
    return any(_HELD_OUT_WORD.fullmatch(word) for word in name_words(text))


def _mode_layers(ctx: RuleContext, scope: ScopeAnalysis, call: CallEvent) -> tuple | None:
    """Where the model's dropout or batch-norm is visible, or None."""
    assert call.receiver is not None, "check() passes a call on a model"
    values = [call.receiver]
    key = call.receiver_key
    if call.receiver.detail is None and scope.function is not None and key in scope.params:
        passed = ctx.module.arguments_for(scope.function, key) or []
        values = [value for _, value in passed]
    for value in values:
        found = _layers_of(ctx.summary, value, ctx.module)
        if found is not None:
            return found
    return None


def _wrapped_model(module: ModuleView, value: Value) -> Value:
    """The module a data-parallel wrapper was handed where it was built (``nn.DataParallel(model)``, whose forward runs
    that module and whose mode switches reach it: ``RUNS_WRAPPED_MODULE``), else the value as it is."""
    if not (isinstance(value.detail, str) and call_fact(value.detail, RUNS_WRAPPED_MODULE)) or value.site is None:
        return value
    built = next((event for event in module.all_calls() if event.node is value.site[1]), None)
    return unwrapped(built.scope, value) if built is not None else value


def _layers_of(summary, value: Value, module: ModuleView, *, imported: bool = False) -> tuple | None:
    value = _wrapped_model(module, value)
    detail = value.detail
    if isinstance(detail, ClassInfo):
        holder = _class_with_layers(summary, detail, depth=0, imported=imported)
        if holder is None:
            part = _part_acting_in_training(summary, detail, 0, set())
            if part is None:
                return None
            holder, layer, source = part
            where = f" ({os.path.basename(holder.chunk.origin)})" if holder.home is not None and holder.chunk.origin else ""
            role = f"a part of `{detail.name}`" if isinstance(holder, ClassInfo) else f"which `{detail.name}` calls to build a part"
            return ((holder.chunk, holder.node.name), f"`{holder.name}`{where}, {role}, builds `{layer}`, "
                    f"which acts differently in training mode whatever its caller passes; {source}")
        default = _dropping_torch_layer(summary, holder) if not _MODE_LAYERS.search(holder.chunk.code_for(holder.node)) else None
        if default is not None:
            return ((holder.chunk, holder.node.name), f"`{holder.name}` builds `{default[0]}`, which drops out by default; {default[1]}")
        return ((holder.chunk, holder.node.name), f"`{holder.name}` has dropout or batch-norm layers")
    if isinstance(detail, str):
        _, layers = library_model_facts(value, module)
        if layers is not None:
            return (value.site, layers.says)
        info = _workspace_class(summary, detail)
        holder = _class_with_layers(info.home or summary, info, depth=0) if info is not None else None
        if holder is not None:  # built by the class's own factory (`from_pretrained`), or wrapped by an engine
            return ((holder.chunk, holder.node.name), f"`{holder.name}` has dropout or batch-norm layers")
        return None
    if isinstance(detail, tuple) and detail and detail[0] == "sequential" and value.site is not None:
        chunk, node = value.site
        if _MODE_LAYERS.search(chunk.code_for(node)):
            return (value.site, "this `nn.Sequential` has dropout or batch-norm layers")
    if detail is None and value.site is not None and isinstance(value.site[1], cst.Call):
        return _every_class_chosen_has_layers(module, value.site)
    return None


def _every_class_chosen_has_layers(module: ModuleView, site: tuple) -> tuple | None:
    """A model built from a class picked at run time, in this file or a workspace factory the flow followed
    (``return MODELS[name](**kwargs)`` with ``MODELS = {"mlp": MLP, "cnn": SmallCNN}``, ``MODELS.get(name)(...)``,
    ``cls = MODELS[name]; return cls(...)``, or ``if``/``else`` returns of different classes): whichever class the run
    picks, it has the layers when every class it can pick builds a torch.nn layer acting differently in training
    mode whatever its caller passes (``_part_acting_in_training``). One class without such a layer, or a return
    built otherwise, leaves the layers unknown (a note)."""
    chunk, built = site
    home = module.summary
    if chunk not in home.chunks:  # the factory's own file, where the flow followed the call
        workspace = home.workspace
        analysis = workspace.analysis_of(chunk.origin) if workspace is not None and chunk.origin else None
        if analysis is None or chunk not in analysis.summary.chunks:
            return None
        home = analysis.summary
    enclosing = next((function for function in home.functions.values() if any(node is built for node in walk(function.node.body))), None)
    returned = enclosing is not None and any(isinstance(node, cst.Return) and node.value is not None and _unmoved(node.value) is built
                                             for node in walk(enclosing.node.body))
    factory = enclosing if returned else None
    classes = (_classes_returned(home, enclosing.node) if factory is not None and enclosing is not None
               else _picked_classes(home, built.func, _bound_once(enclosing.node) if enclosing is not None else {}))
    if not classes or len(classes) < 2:  # a single class is the flow's own value: its layers are read there
        return None
    acting = [_part_acting_in_training(home, info, 0, set()) for info in classes]
    if any(found is None for found in acting):
        return None
    names = ", ".join(f"`{info.name}`" for info in classes)
    where = (chunk, factory.node.name) if factory is not None else site
    picker = f"`{factory.name}` builds" if factory is not None else "this builds"
    return (where, f"{picker} one of {names}, picked at run time, and each builds a layer that acts differently in "
            f"training mode ({', '.join(sorted({found[1] for found in acting if found}))})")


def _classes_returned(home, function: cst.FunctionDef) -> list[ClassInfo] | None:
    """The workspace classes ``function`` may build and return, every return read (``_picked_classes``); None when a
    return is anything else."""
    bound = _bound_once(function)
    found: list[ClassInfo] = []
    for node in walk(function.body):
        if not isinstance(node, cst.Return) or node.value is None:
            continue
        value = _unmoved(node.value)
        classes = _picked_classes(home, value.func, bound) if isinstance(value, cst.Call) else None
        if classes is None:
            return None
        found.extend(info for info in classes if info not in found)
    return found


def _picked_classes(home, chosen: cst.BaseExpression, bound: dict[str, cst.BaseExpression]) -> list[ClassInfo] | None:
    """The workspace classes a call of ``chosen`` may build: a class named, or one taken from a module-level table of
    classes (``_table_classes``), directly or through a local name bound once (``bound``); None for anything else."""
    if isinstance(chosen, cst.Name) and chosen.value in bound and home.local_class(chosen.value) is None:
        chosen = bound[chosen.value]
    classes = _table_classes(home, chosen)
    if classes is None:
        raw = dotted(chosen)
        info = _workspace_builder(home, raw) if raw is not None else None
        classes = [info] if isinstance(info, ClassInfo) else None
    return classes


def _bound_once(function: cst.FunctionDef) -> dict[str, cst.BaseExpression]:
    """The local names ``function`` assigns exactly once, with what they are bound to."""
    bindings: dict[str, list[cst.BaseExpression]] = {}
    for node in walk(function.body):
        if isinstance(node, cst.Assign):
            for target in node.targets:
                if isinstance(target.target, cst.Name):
                    bindings.setdefault(target.target.value, []).append(node.value)
    return {name: values[0] for name, values in bindings.items() if len(values) == 1}


def _unmoved(value: cst.BaseExpression) -> cst.BaseExpression:
    """The expression a device move wraps (``Net().to(device)``, ``.cuda()``): the model it moves."""
    while isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value in {"to", "cuda", "cpu"}:
        value = value.func.value
    return value


def _table_classes(home, chosen: cst.BaseExpression) -> list[ClassInfo] | None:
    """The classes of the module-level table ``chosen`` picks from (``MODELS[name]``, ``MODELS.get(name)``), when every
    entry is a workspace class; None otherwise."""
    if isinstance(chosen, cst.Subscript):
        table = chosen.value
    elif isinstance(chosen, cst.Call) and isinstance(chosen.func, cst.Attribute) and chosen.func.attr.value == "get":
        table = chosen.func.value
    else:
        return None
    entries = home.bindings.get(table.value) if isinstance(table, cst.Name) else None
    if not entries or len(entries) != 1:
        return None
    literal = entries[0][1]
    if isinstance(literal, cst.Dict):
        elements = [element.value for element in literal.elements if isinstance(element, cst.DictElement)]
    elif isinstance(literal, (cst.List, cst.Tuple)):
        elements = [element.value for element in literal.elements if not isinstance(element, cst.StarredElement)]
    else:
        return None
    classes = [_workspace_builder(home, raw) if (raw := dotted(element)) is not None else None for element in elements]
    if not classes or len(classes) != len(literal.elements) or not all(isinstance(info, ClassInfo) for info in classes):
        return None
    return [info for info in classes if isinstance(info, ClassInfo)]


def _workspace_class(summary, detail: str) -> ClassInfo | None:
    """The workspace class a model was built from by its own factory (``BertForSequenceClassification.from_pretrained``
    of a copy of a library kept in the project), or None."""
    head, _, method = detail.rpartition(".")
    name = head if method in _FACTORY_METHODS else detail
    if "." not in name:
        return None
    info = summary.local_class(name)
    return info if info is not None and info.home is not None else None


def _class_with_layers(summary, info: ClassInfo, depth: int, *, imported: bool = False) -> ClassInfo | None:
    """The class (this one, or a local class it builds or derives from; with ``imported``, one of another workspace
    file too) whose code builds dropout or batch-norm. An imported part's dropout is often a rate its caller sets
    (``nn.Dropout(dropout)``, 0 by default): it is read only for a model a construction or call hands over
    (``_layers_handed_in``, ``_layers_from_callers``), never for a class merely imported."""
    code = info.chunk.code_for(info.node)
    if _MODE_LAYERS.search(code) or _dropping_torch_layer(summary, info) is not None:
        return info
    if depth >= 3:
        return None
    for name, other in summary.classes.items():  # local classes it builds or derives from
        if other is not info and re.search(rf"\b{re.escape(name)}\b", code):
            found = _class_with_layers(summary, other, depth + 1, imported=imported)
            if found is not None:
                return found
    if not imported:
        return None
    home = info.home or summary
    built = [raw for node in walk(info.node) if isinstance(node, cst.Call) and (raw := dotted(node.func)) is not None]
    for raw in dict.fromkeys([*info.bases, *built]):  # classes of other workspace files it derives from or builds
        if raw.split(".", 1)[0] not in home.imports:
            continue
        other = home.local_class(home.canonical(raw))
        if other is not None and other is not info and other.home is not None:
            found = _class_with_layers(other.home, other, depth + 1, imported=True)
            if found is not None:
                return found
    return None


def _part_acting_in_training(summary, info: ClassInfo | FunctionInfo, depth: int, seen: set[int]) -> tuple[ClassInfo | FunctionInfo, str, str] | None:
    """The class (this one, or one it derives from or builds, in its own file or another workspace file, a star
    import's too: ``UNet`` building ``down`` building ``double_conv``) that builds a torch.nn layer acting differently
    in training mode whatever its callers pass (``nn.BatchNorm2d(out_ch)``, ``nn.Dropout(0.3)``), with the layer and
    where PyTorch says so. A layer whose switch is a name (``nn.Dropout(dropout)``) is not counted: its caller sets it.
    A part built by a workspace function (``conv_bn(64, 128)`` returning an ``nn.Sequential`` with its batch-norm,
    ``backbone()`` returning a class's instance) is read as the classes are: the function's body is what builds it."""
    if id(info) in seen or depth > _PART_DEPTH:
        return None
    seen.add(id(info))
    home = info.home or summary
    built: list[str] = []
    for node in walk(info.node):
        if not isinstance(node, cst.Call) or (raw := dotted(node.func)) is None:
            continue
        target = home.canonical(raw)
        if not target.startswith("torch.nn."):
            built.append(raw)
        elif not any(arg.star for arg in node.args) and (source := torch_layer_mode(last_part(target), _literal_arguments(node))):
            return info, f"nn.{last_part(target)}", source
    for raw in dict.fromkeys([*(info.bases if isinstance(info, ClassInfo) else ()), *built]):
        other = _workspace_builder(home, raw)
        found = _part_acting_in_training(home, other, depth + 1, seen) if other is not None else None
        if found is not None:
            return found
    return None


def _workspace_builder(home, raw: str) -> ClassInfo | FunctionInfo | None:
    """The workspace class, or module-level function, a call of ``raw`` in ``home`` runs, or None."""
    imported = raw.split(".", 1)[0] in home.imports
    if "." not in raw and not imported:
        return home.local_class(raw) or home.functions.get(raw) or home.imported_function(raw)
    if not imported:
        return None
    target = home.canonical(raw)
    return home.local_class(target) or home.imported_function(target)


# How many classes deep a model's parts are read for a layer that acts in training mode.
_PART_DEPTH = 4


def _literal_arguments(node: cst.Call) -> dict[int | str, object]:
    """The arguments of a call by position and keyword: a number or ``True``/``False`` as its value, anything else
    as ``...`` (not known)."""
    found: dict[int | str, object] = {}
    positional = 0
    for arg in node.args:
        value = arg.value
        if isinstance(value, (cst.Integer, cst.Float)):
            held = _number(value)
        elif isinstance(value, cst.Name) and value.value in {"True", "False"}:
            held = value.value == "True"
        else:
            held = ...
        if arg.keyword is not None:
            found[arg.keyword.value] = held
        else:
            found[positional] = held
            positional += 1
    return found


def _parts_with_layers(summary, model: Value) -> tuple | None:
    """Where a model of a workspace class builds, through a class of another workspace file, dropout or batch-norm
    whose rate or use that part's caller sets (``nn.Dropout(dropout)``): whether the model has them is not known, so
    what runs it in the wrong mode is a note that names the part."""
    if not isinstance(model.detail, ClassInfo):
        return None
    holder = _class_with_layers(model.detail.home or summary, model.detail, depth=0, imported=True)
    if holder is None:
        return None
    return ((holder.chunk, holder.node.name), f"`{holder.name}`, a part of `{model.detail.name}`, builds dropout or batch-norm "
            "that its caller's arguments may switch on")


def _dropping_torch_layer(summary, info: ClassInfo) -> tuple[str, str] | None:
    """A torch.nn layer the class builds that drops out by default (``nn.TransformerEncoderLayer(512, 8)``,
    whose dropout is 0.1 unless given 0), read in the class's own file, and where PyTorch says so."""
    home = info.home or summary
    for node in walk(info.node):
        if not isinstance(node, cst.Call) or any(arg.star for arg in node.args):  # `**kwargs` may carry the rate
            continue
        raw = dotted(node.func)
        target = home.canonical(raw) if raw is not None else ""
        if not target.startswith("torch.nn."):
            continue
        keyword = next((arg for arg in node.args if arg.keyword is not None and arg.keyword.value == "dropout"), None)
        positional = [_number(arg.value) for arg in node.args if arg.keyword is None]
        source = torch_layer_dropout(last_part(target), _number(keyword.value) if keyword else None, positional, keyword is not None)
        if source is not None:
            return f"nn.{last_part(target)}", source
    return None


def _number(node: cst.BaseExpression) -> float | None:
    if isinstance(node, (cst.Integer, cst.Float)):
        held = literal_value(node)
        return float(held) if isinstance(held, (int, float)) else None
    return None


def _switched_to_eval(module: ModuleView, scope: ScopeAnalysis, forward: CallEvent) -> bool:
    """The model is switched to eval mode in this file: under its own name, or, for a parameter, under the name
    every caller in this file passes for it (a helper each of whose callers calls ``.eval()`` first)."""
    if _switched_to_eval_named(module, forward.receiver_key):
        return _training_switch_reaching(module, scope, forward, forward.receiver_key) is None
    key = forward.receiver_key
    if scope.function is None or key is None or key not in scope.params:
        return False
    passed = [_passed_for(outer, scope.function, key) for outer in module.calls_of(scope.function)]
    return bool(passed) and all(found is not None and _switched_to_eval_named(module, found[1]) for found in passed)


def _training_switch_reaching(module: ModuleView, scope: ScopeAnalysis, call: CallEvent, text: str | None) -> CallEvent | None:
    """The ``text.train()`` that is the last mode switch of ``text`` before ``call`` in its function (or script):
    it runs whenever the call does (no condition the call is not under) and, after it, nothing on the way to the
    call switches ``text`` to eval mode, itself or through a helper, nor is handed ``text`` by a call of the
    workspace that might. The mode at the call is then training, whatever ``.eval()`` the file calls elsewhere
    (``model.eval()`` once at set-up, then ``model.train()`` every epoch before the test loop)."""
    if text is None:
        return None
    calls = list(scope.calls()) if scope.function is not None else \
        [other for other in module.all_calls() if other.scope.function is None and other.chunk is call.chunk]
    where = call.chunk.line_of(call.node)
    under = {id(condition.node) for condition in call.context.conditions}
    key = text.rpartition(".")[2]
    switch = None
    for other in sorted((other for other in calls if other.chunk is call.chunk and other.chunk.line_of(other.node) < where),
                        key=lambda other: other.chunk.line_of(other.node)):
        if other.receiver_key == text and other.method == "train" and _sets_train_mode(other):
            unconditional = all(id(condition.node) in under for condition in other.context.conditions)
            switch = other if unconditional else None
        elif (other.receiver_key == text and _sets_eval_mode(other)) \
                or (other.function is not None and _helper_sets_eval_mode(other, key, scope.summary)):
            switch = None
        elif other.function is not None and any(dotted(arg.value) == text for arg in other.arg_nodes):
            switch = None  # a helper of the workspace handed the model may switch it
    return switch


def _switched_name(call: CallEvent) -> str | None:
    """The name a mode switch acts on: its receiver's, or, for one at the end of a chain of moves
    (``self.model.to(device).eval()``), the name the chain starts from; for one on a module as it is built
    (``model = Net(config).eval()``: ``eval()`` returns the module), the name the statement binds it to."""
    if call.receiver_key is not None or not isinstance(call.node.func, cst.Attribute):
        return call.receiver_key
    base = call.node.func.value
    while isinstance(base, cst.Call) and isinstance(base.func, cst.Attribute) and base.func.attr.value in _MOVES:
        base = base.func.value
    name = dotted(base)
    statement = call.statement
    if name is None and isinstance(statement, cst.Assign) and statement.value is call.node and len(statement.targets) == 1:
        return dotted(statement.targets[0].target)
    return name


# Methods of a module that return the module itself, moved or cast: a mode switch chained after them switches it.
_MOVES = frozenset({"to", "cuda", "cpu", "float", "half", "bfloat16", "double", "requires_grad_"})


def _switched_to_eval_named(module: ModuleView, name: str | None) -> bool:
    """`.eval()`, or `.train(x)` with anything but a literal True, on the same name anywhere in the module (where the
    pass is known, ``_training_switch_reaching`` says whether a later `.train()` undoes it)."""
    key = (name or "").rpartition(".")[2]
    for call in module.all_calls():
        receiver = (_switched_name(call) or (call.callee or "").rpartition(".")[0]).rpartition(".")[2]
        looped = modules_looped_over(call) if call.method == "eval" else None  # `for net in (encoder, decoder): net.eval()`
        if (receiver == key or (looped is not None and key in {text.rpartition(".")[2] for text in looped[1]})) and _sets_eval_mode(call):
            return True
        if call.function is not None and _helper_sets_eval_mode(call, key, module.summary):
            return True  # `set_eval(model)`, `freeze(model)`: a helper that switches what it is given
    return False


def _sets_eval_mode(call: CallEvent) -> bool:
    if call.method == "eval" and not call.arg_nodes:
        return True
    return call.method == "train" and bool(call.arg_nodes) and call.chunk.code_for(call.arg_nodes[0].value) not in {"True", "mode=True"}


def _helper_sets_eval_mode(call: CallEvent, key: str, summary) -> bool:
    """The local function ``call`` runs switches to eval mode the parameter it is passed ``key`` for (any of
    its parameters, when where ``key`` goes cannot be told)."""
    function = call.function
    assert function is not None, "_switched_to_eval_named passes a call of a local function"
    inner = function.analysis(summary)
    if inner is None:
        return False
    switched = {other.receiver_key for other in inner.calls() if _sets_eval_mode(other) and other.receiver_key in inner.params}
    receiving = [
        parameter for parameter in inner.params
        if (passed := _passed_for(call, function, parameter)) is not None and (passed[1] or "").rpartition(".")[2] == key
    ]
    if receiving:
        return any(parameter in switched for parameter in receiving)
    passes_it = any(call.chunk.code_for(arg.value).rpartition(".")[2] == key for arg in call.arg_nodes)
    return passes_it and bool(switched)


# A text classifier whose constructor loads its own checkpoint, and a script that scores a file of reviews with it.
_SELF_LOADING_CLASSIFIER = {"review_model.py": """
                import torch
                import torch.nn as nn


                class ReviewClassifier(nn.Module):
                    def __init__(self, checkpoint_path, vocab=30000, width=256):
                        super().__init__()
                        self.embed = nn.EmbeddingBag(vocab, width)
                        self.dropout = nn.Dropout(0.3)
                        self.head = nn.Linear(width, 2)
                        self.load_state_dict(torch.load(checkpoint_path, map_location="cpu"))

                    def forward(self, tokens, offsets):
                        return self.head(self.dropout(self.embed(tokens, offsets)))
            """}
_UNLOADED_CLASSIFIER = {"review_model.py": """
                import torch.nn as nn


                class ReviewClassifier(nn.Module):
                    def __init__(self, checkpoint_path, vocab=30000, width=256):
                        super().__init__()
                        self.checkpoint_path = checkpoint_path
                        self.embed = nn.EmbeddingBag(vocab, width)
                        self.dropout = nn.Dropout(0.3)
                        self.head = nn.Linear(width, 2)

                    def forward(self, tokens, offsets):
                        return self.head(self.dropout(self.embed(tokens, offsets)))
            """}
_SCORE_REVIEWS = """
import sys

import torch

from review_model import ReviewClassifier

model = ReviewClassifier("reviews.pt"){switch}
batches = torch.load(sys.argv[1])
with torch.no_grad():
    for tokens, offsets in batches:
        print(model(tokens, offsets).argmax(-1).tolist())
"""


MissingEvalMode.MUST_FIRE = (
    Fires(  # a linear probe: the frozen backbone is put in eval mode once at set-up, then back in training mode every epoch
        """
        import torch
        import torch.nn as nn
        import torch.nn.functional as F

        from backbones import build_backbone


        def linear_probe(args, train_loader, test_loader):
            backbone = build_backbone(args.arch)
            backbone.load_state_dict(torch.load(args.pretrained, map_location="cpu"))
            backbone = backbone.to(args.device)
            backbone.eval()
            classifier = nn.Linear(backbone.out_dim, args.num_classes).to(args.device)
            optimizer = torch.optim.SGD(classifier.parameters(), lr=args.lr, momentum=0.9)
            for epoch in range(args.epochs):
                backbone.train()
                classifier.train()
                for images, labels in train_loader:
                    with torch.no_grad():
                        features = backbone(images.to(args.device))
                    loss = F.cross_entropy(classifier(features), labels.to(args.device))
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
                classifier.eval()
                correct = 0
                for images, labels in test_loader:
                    with torch.no_grad():
                        test_features = backbone(images.to(args.device))
                        correct += (classifier(test_features).argmax(1) == labels.to(args.device)).sum().item()
                print(f"epoch {epoch}: accuracy {correct / len(test_loader.dataset):.4f}")
        """,
        files={
            "backbones.py": """
            import torch.nn as nn


            class SmallResNet(nn.Module):
                out_dim = 128

                def __init__(self):
                    super().__init__()
                    self.stem = nn.Sequential(nn.Conv2d(3, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU())
                    self.body = nn.Sequential(nn.Conv2d(64, 128, 3, stride=2, padding=1), nn.BatchNorm2d(128), nn.ReLU())
                    self.pool = nn.AdaptiveAvgPool2d(1)

                def forward(self, x):
                    return self.pool(self.body(self.stem(x))).flatten(1)


            def build_backbone(arch):
                if arch == "small":
                    return SmallResNet()
                raise ValueError(arch)
            """,
        },
        at="test_features = backbone(images.to(args.device))",
    ),
    Fires(  # a model built by a factory of another file from a class picked by name out of a table: every class in it has dropout or batch-norm
        """
        import torch
        import torch.nn.functional as F

        from architectures import create_model


        def evaluate(model, loader):
            correct = 0
            with torch.no_grad():
                for x, y in loader:
                    correct += (model(x).argmax(1) == y).sum().item()
            return correct / len(loader.dataset)


        def train(args, train_loader, val_loader):
            model = create_model(args.arch, args.features, args.classes)
            optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
            for epoch in range(args.epochs):
                model.train()
                for x, y in train_loader:
                    optimizer.zero_grad()
                    F.cross_entropy(model(x), y).backward()
                    optimizer.step()
                print(epoch, evaluate(model, val_loader))
        """,
        files={"architectures.py": """
            import torch.nn as nn


            class DropoutMLP(nn.Module):
                def __init__(self, features, classes):
                    super().__init__()
                    self.layers = nn.Sequential(nn.Linear(features, 256), nn.ReLU(), nn.Dropout(0.5), nn.Linear(256, classes))

                def forward(self, x):
                    return self.layers(x)


            class ConvNet(nn.Module):
                def __init__(self, features, classes):
                    super().__init__()
                    self.conv = nn.Sequential(nn.Conv1d(1, 32, 5), nn.BatchNorm1d(32), nn.ReLU(), nn.AdaptiveAvgPool1d(1))
                    self.fc = nn.Linear(32, classes)

                def forward(self, x):
                    return self.fc(self.conv(x.unsqueeze(1)).flatten(1))


            ARCHITECTURES = {"mlp": DropoutMLP, "conv": ConvNet}


            def create_model(name, features, classes):
                model_class = ARCHITECTURES.get(name)
                return model_class(features, classes)
            """},
        severity=Severity.WARNING,
        at="correct += (model(x).argmax(1) == y).sum().item()",
    ),
    Fires(  # the same, one class of the table without dropout or batch-norm: which one runs is decided at run time, a note
        """
        import torch
        import torch.nn.functional as F

        from architectures import create_model


        def evaluate(model, loader):
            correct = 0
            with torch.no_grad():
                for x, y in loader:
                    correct += (model(x).argmax(1) == y).sum().item()
            return correct / len(loader.dataset)


        def train(args, train_loader, val_loader):
            model = create_model(args.arch, args.features, args.classes)
            optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
            for epoch in range(args.epochs):
                model.train()
                for x, y in train_loader:
                    optimizer.zero_grad()
                    F.cross_entropy(model(x), y).backward()
                    optimizer.step()
                print(epoch, evaluate(model, val_loader))
        """,
        files={"architectures.py": """
            import torch.nn as nn


            class PlainMLP(nn.Module):
                def __init__(self, features, classes):
                    super().__init__()
                    self.layers = nn.Sequential(nn.Linear(features, 256), nn.ReLU(), nn.Linear(256, classes))

                def forward(self, x):
                    return self.layers(x)


            class ConvNet(nn.Module):
                def __init__(self, features, classes):
                    super().__init__()
                    self.conv = nn.Sequential(nn.Conv1d(1, 32, 5), nn.BatchNorm1d(32), nn.ReLU(), nn.AdaptiveAvgPool1d(1))
                    self.fc = nn.Linear(32, classes)

                def forward(self, x):
                    return self.fc(self.conv(x.unsqueeze(1)).flatten(1))


            ARCHITECTURES = {"mlp": PlainMLP, "conv": ConvNet}


            def create_model(name, features, classes):
                model_class = ARCHITECTURES.get(name)
                return model_class(features, classes)
            """},
        severity=Severity.NOTE,
        at="correct += (model(x).argmax(1) == y).sum().item()",
    ),
    Fires(  # a script's per-epoch validation after `model.train()`; its one `model.eval()` is for the final test, after the loop
        """
        import torch
        import torch.nn.functional as F
        from torch.utils.data import DataLoader

        from models import Net

        train_loader = DataLoader(torch.load("train.pt"), batch_size=64, shuffle=True)
        val_loader = DataLoader(torch.load("val.pt"), batch_size=256)
        test_loader = DataLoader(torch.load("test.pt"), batch_size=256)
        model = Net()
        optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)

        for epoch in range(20):
            model.train()
            for x, y in train_loader:
                optimizer.zero_grad()
                F.cross_entropy(model(x), y).backward()
                optimizer.step()
            correct = 0
            with torch.no_grad():
                for x, y in val_loader:
                    correct += (model(x).argmax(1) == y).sum().item()
            print(f"epoch {epoch}: val acc {correct / len(val_loader.dataset):.3f}")

        model.eval()
        with torch.no_grad():
            for x, y in test_loader:
                print((model(x).argmax(1) == y).float().mean().item())
        """,
        files={
            "models.py": """
            import torch.nn as nn


            class Net(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.features = nn.Sequential(nn.Conv2d(1, 32, 3), nn.BatchNorm2d(32), nn.ReLU(), nn.Flatten())
                    self.head = nn.Sequential(nn.Dropout(0.5), nn.LazyLinear(10))

                def forward(self, x):
                    return self.head(self.features(x))
            """,
        },
        at="correct += (model(x).argmax(1) == y).sum().item()",
    ),
    Fires(  # an evaluation helper, called by a script of another file every epoch after `model.train()`; its `.eval()` was for a check before training
        """
        import torch


        @torch.no_grad()
        def evaluate(model, loader, device):
            losses = []
            for x, y in loader:
                losses.append(torch.nn.functional.cross_entropy(model(x.to(device)), y.to(device)).item())
            return sum(losses) / len(losses)
        """,
        files={
            "main.py": """
            import torch
            import torch.nn.functional as F

            from models import Net
            from train import evaluate


            def main(train_loader, val_loader, device="cuda", epochs=30):
                model = Net().to(device)
                model.eval()
                print("initial val loss", evaluate(model, val_loader, device))
                optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)
                for epoch in range(epochs):
                    model.train()
                    for x, y in train_loader:
                        loss = F.cross_entropy(model(x.to(device)), y.to(device))
                        optimizer.zero_grad()
                        loss.backward()
                        optimizer.step()
                    print(epoch, "val loss", evaluate(model, val_loader, device))


            if __name__ == "__main__":
                main([], [])
            """,
            "models.py": """
            import torch.nn as nn


            class Net(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.body = nn.Sequential(nn.Linear(32, 64), nn.BatchNorm1d(64), nn.ReLU(), nn.Dropout(0.2), nn.Linear(64, 4))

                def forward(self, x):
                    return self.body(x)
            """,
        },
        at="losses.append(torch.nn.functional.cross_entropy(model(x.to(device)), y.to(device)).item())",
    ),
    Fires(  # a script that trains nothing scores reviews with a model whose constructor loaded the trained weights
        # itself (`load_state_dict(torch.load(...))` in `__init__`): built in training mode, its dropout drops
        _SCORE_REVIEWS.format(switch=""),
        files=_SELF_LOADING_CLASSIFIER,
        at="        print(model(tokens, offsets).argmax(-1).tolist())",
        severity=Severity.WARNING,
    ),
    Fires(
        """
        import torch
        import torch.nn as nn

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc1 = nn.Linear(784, 256)
                self.drop = nn.Dropout(0.5)
                self.fc2 = nn.Linear(256, 10)

            def forward(self, x):
                return self.fc2(self.drop(torch.relu(self.fc1(x))))

        def evaluate(model, loader):
            correct = 0
            with torch.no_grad():
                for x, y in loader:
                    correct += (model(x).argmax(1) == y).sum().item()
            return correct

        model = Net()
        evaluate(model, val_loader)
        """
    ),
    Fires(
        """
        import torch
        from torchvision import models

        model = models.resnet50(num_classes=10)
        with torch.no_grad():
            for images, labels in val_loader:
                outputs = model(images)
        """
    ),
    Fires(
        """
        import torch
        import torch.nn as nn

        model = nn.Sequential(nn.Linear(20, 64), nn.BatchNorm1d(64), nn.ReLU(), nn.Linear(64, 2))
        with torch.no_grad():
            for x, y in test_loader:
                preds = model(x)
        """
    ),
    Fires(
        """
        import torch
        import torch.nn as nn

        class Block(nn.Module):
            def __init__(self, c):
                super().__init__()
                self.conv = nn.Conv2d(c, c, 3, padding=1)
                self.bn = nn.BatchNorm2d(c)

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.blocks = nn.Sequential(Block(16), Block(16))

        def validate(net, loader):
            for x, y in loader:
                out = net(x)

        net = Net()
        for epoch in range(10):
            validate(net, val_loader)
        """
    ),
    Fires(
        """
        import torch
        from torchvision import models

        def test(model, loader):
            with torch.no_grad():
                return [model(x) for x, _ in loader]

        test(models.vgg16(), test_loader)
        """
    ),
    Fires(
        """
        import torch
        import torch.nn as nn
        import torch.nn.functional as F

        class Net(nn.Module):
            def forward(self, x):
                return F.dropout(x, 0.2, training=self.training)

        model = Net()
        model.train()
        with torch.no_grad():
            for x, y in eval_loader:
                model(x)
        """
    ),
    Fires(  # mode by argument: the shared function switches to training mode for the evaluation call too
        """
        import torch
        import torch.nn as nn

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.features = nn.Sequential(nn.Linear(64, 128), nn.BatchNorm1d(128), nn.ReLU(), nn.Dropout(0.3))
                self.head = nn.Linear(128, 10)

            def forward(self, x):
                return self.head(self.features(x))

        def run_epoch(model, loader, criterion, optimizer=None):
            model.train()
            total = 0.0
            with torch.set_grad_enabled(optimizer is not None):
                for x, y in loader:
                    loss = criterion(model(x), y)
                    if optimizer is not None:
                        optimizer.zero_grad()
                        loss.backward()
                        optimizer.step()
                    total += loss.item()
            return total / len(loader)

        model = Net()
        criterion = nn.CrossEntropyLoss()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for epoch in range(10):
            run_epoch(model, train_loader, criterion, optimizer)
            run_epoch(model, val_loader, criterion)
        """
    ),
    Fires(  # objects: the dropout sits in an nn.ModuleDict attribute; evaluation is a helper the epoch loop calls
        """
        import torch
        from torch import nn

        class Tagger(nn.Module):
            def __init__(self, vocab, tags):
                super().__init__()
                self.parts = nn.ModuleDict({
                    "embed": nn.Embedding(vocab, 64),
                    "drop": nn.Dropout(0.3),
                    "out": nn.Linear(64, tags),
                })

            def forward(self, tokens):
                return self.parts["out"](self.parts["drop"](self.parts["embed"](tokens)))

        def evaluate(model, loader):
            correct = 0
            with torch.no_grad():
                for tokens, tags in loader:
                    correct += (model(tokens).argmax(-1) == tags).sum().item()
            return correct

        def main(train_loader, val_loader):
            model = Tagger(1000, 12)
            optimizer = torch.optim.Adam(model.parameters())
            for epoch in range(5):
                model.train()
                for tokens, tags in train_loader:
                    optimizer.zero_grad()
                    nn.functional.cross_entropy(model(tokens).flatten(0, 1), tags.flatten()).backward()
                    optimizer.step()
                print(evaluate(model, val_loader))
        """
    ),
    Fires(  # a no-grad loop over a dev set, with dropout left on
        """
        import torch
        import torch.nn as nn


        class Classifier(nn.Module):
            def __init__(self, dim, classes):
                super().__init__()
                self.drop = nn.Dropout(0.3)
                self.head = nn.Linear(dim, classes)

            def forward(self, features):
                return self.head(self.drop(features))


        model = Classifier(64, 10).cuda()
        model.load_state_dict(torch.load("classifier.pt"))
        correct = 0
        with torch.no_grad():
            for features, labels in dev_loader:
                logits = model(features.cuda())
                correct += (logits.argmax(-1) == labels.cuda()).sum().item()
        print(correct)
        """,
    ),
    Fires(  # the test function switches the encoder to eval mode, not the link predictor it is also handed
        """
        import torch
        import torch.nn.functional as F


        class LinkPredictor(torch.nn.Module):
            def __init__(self, channels, dropout):
                super().__init__()
                self.hidden = torch.nn.Linear(channels, channels)
                self.out = torch.nn.Linear(channels, 1)
                self.dropout = dropout

            def forward(self, x_i, x_j):
                x = F.relu(self.hidden(x_i * x_j))
                x = F.dropout(x, p=self.dropout, training=self.training)
                return torch.sigmoid(self.out(x))


        @torch.no_grad()
        def test(model, predictor, data, edges):
            model.eval()
            h = model(data.x, data.adj_t)
            return predictor(h[edges[0]], h[edges[1]]).squeeze().cpu()


        def main(model, data, edges, train_step, epochs):
            predictor = LinkPredictor(256, 0.5)
            for epoch in range(epochs):
                train_step(model, predictor)
                print(test(model, predictor, data, edges))
        """,
        at="return predictor(h[edges[0]], h[edges[1]]).squeeze().cpu()",
    ),
    Fires(  # switched to training mode for fine-tuning, then evaluated with BERT's dropout still on
        """
        import torch
        from transformers import AutoModelForSequenceClassification

        model = AutoModelForSequenceClassification.from_pretrained("bert-base-uncased", num_labels=2)
        optimizer = torch.optim.AdamW(model.parameters(), lr=2e-5)


        def evaluate(loader):
            correct = 0
            with torch.no_grad():
                for batch in loader:
                    logits = model(**batch).logits
                    correct += (logits.argmax(-1) == batch["labels"]).sum().item()
            return correct


        for epoch in range(3):
            model.train()
            for batch in train_loader:
                model(**batch).loss.backward()
                optimizer.step()
                optimizer.zero_grad()
            print(evaluate(eval_loader))
        """,
    ),
    Fires(  # FID features from pytorch_fid's Inception network, whose batch-norm runs on batch statistics
        """
        import numpy as np
        import torch
        from pytorch_fid.inception import InceptionV3

        inception = InceptionV3([InceptionV3.BLOCK_INDEX_BY_DIM[2048]]).cuda()


        def evaluate_fid_features(loader):
            features = []
            with torch.no_grad():
                for images in loader:
                    features.append(inception(images.cuda())[0].squeeze(-1).squeeze(-1).cpu().numpy())
            return np.concatenate(features)
        """,
    ),

    Fires(  # written before no_grad existed: the test loop runs with grad on, and scores the model trained above
        """
        import torch
        import torch.nn as nn

        from model import ConvNet

        model = ConvNet(num_classes=10)
        criterion = nn.CrossEntropyLoss()
        optimizer = torch.optim.Adam(model.parameters(), lr=0.001)

        for epoch in range(5):
            for images, labels in train_loader:
                loss = criterion(model(images), labels)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()

        correct = 0
        for images, labels in testloader:
            outputs = model(images)
            correct += (outputs.argmax(1) == labels).sum().item()
        print(correct)
        """,
        files={
            "model.py": """
                import torch.nn as nn


                class ConvNet(nn.Module):
                    def __init__(self, num_classes):
                        super().__init__()
                        self.features = nn.Sequential(nn.Conv2d(1, 16, 5, padding=2), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2))
                        self.fc = nn.Linear(14 * 14 * 16, num_classes)

                    def forward(self, x):
                        return self.fc(self.features(x).flatten(1))
            """,
        },
        at="outputs = model(images)",
    ),
    Fires(  # a trainer class holds a timm model whose stochastic depth comes from the command line's default
        """
        import argparse

        import timm
        import torch
        import torch.nn.functional as F


        class Trainer:
            def __init__(self, args, train_loader, val_loader):
                self.model = timm.create_model(args.arch, num_classes=100, drop_path_rate=args.drop_path).cuda()
                self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=args.lr)
                self.train_loader = train_loader
                self.val_loader = val_loader

            def train_one_epoch(self):
                self.model.train()
                for images, targets in self.train_loader:
                    loss = F.cross_entropy(self.model(images.cuda()), targets.cuda())
                    self.optimizer.zero_grad()
                    loss.backward()
                    self.optimizer.step()

            @torch.no_grad()
            def validate(self):
                correct = 0
                for images, targets in self.val_loader:
                    correct += (self.model(images.cuda()).argmax(1) == targets.cuda()).sum().item()
                return correct


        if __name__ == "__main__":
            parser = argparse.ArgumentParser()
            parser.add_argument("--arch", default="vit_small_patch16_224")
            parser.add_argument("--drop-path", type=float, default=0.1)
            parser.add_argument("--lr", type=float, default=5e-4)
            args = parser.parse_args()
            trainer = Trainer(args, train_loader, val_loader)
            for epoch in range(100):
                trainer.train_one_epoch()
                print(epoch, trainer.validate())
        """,
        at="correct += (self.model(images.cuda()).argmax(1) == targets.cuda()).sum().item()",
    ),
    Fires(  # the model class comes in through a star import of the project's own module
        """
        import torch

        from models import *

        model = SpeechClassifier(n_mels=80, n_classes=35).cuda()
        model.load_state_dict(torch.load("speech.pt"))
        with torch.no_grad():
            for mels, labels in val_loader:
                predictions = model(mels.cuda()).argmax(-1)
        """,
        files={
            "models.py": """
                import torch.nn as nn

                __all__ = ["SpeechClassifier"]


                class SpeechClassifier(nn.Module):
                    def __init__(self, n_mels, n_classes):
                        super().__init__()
                        self.rnn = nn.GRU(n_mels, 256, batch_first=True)
                        self.drop = nn.Dropout(0.2)
                        self.out = nn.Linear(256, n_classes)

                    def forward(self, mels):
                        hidden, _ = self.rnn(mels)
                        return self.out(self.drop(hidden[:, -1]))
            """,
        },
    ),
    Fires(  # PyTorch's transformer layer drops out 0.1 unless told otherwise: the class never says "Dropout"
        """
        import math

        import torch
        import torch.nn.functional as F

        from model import TinyLM


        def evaluate(model, loader):
            total = 0.0
            with torch.no_grad():
                for tokens in loader:
                    logits = model(tokens[:, :-1])
                    total += F.cross_entropy(logits.flatten(0, 1), tokens[:, 1:].flatten()).item()
            return math.exp(total / len(loader))


        model = TinyLM(vocab=32000)
        model.load_state_dict(torch.load("lm.pt"))
        print(evaluate(model, val_loader))
        """,
        files={
            "model.py": """
                import torch.nn as nn


                class TinyLM(nn.Module):
                    def __init__(self, vocab, d_model=256, dropout=None):
                        super().__init__()
                        self.embed = nn.Embedding(vocab, d_model)
                        layer = nn.TransformerEncoderLayer(d_model, nhead=4, batch_first=True)
                        self.encoder = nn.TransformerEncoder(layer, num_layers=4)
                        self.head = nn.Linear(d_model, vocab)

                    def forward(self, tokens):
                        return self.head(self.encoder(self.embed(tokens)))
            """,
        },
    ),
    Fires(  # the training function hands its model to `val` straight from training; the `.eval()` in `test` runs elsewhere
        """
        import torch

        from networks import HyperspectralCNN


        def val(net, loader, device="cpu"):
            correct, total = 0, 0
            for data, target in loader:
                with torch.no_grad():
                    output = net(data.to(device))
                correct += (output.argmax(1) == target.to(device)).sum().item()
                total += target.numel()
            return correct / total


        def test(net, loader):
            net.eval()
            with torch.no_grad():
                return [net(data).argmax(1) for data, _ in loader]


        def train(train_loader, val_loader, epochs, device="cpu"):
            net = HyperspectralCNN(bands=103, classes=9).to(device)
            optimizer = torch.optim.SGD(net.parameters(), lr=0.01)
            criterion = torch.nn.CrossEntropyLoss()
            for epoch in range(epochs):
                net.train()
                for data, target in train_loader:
                    optimizer.zero_grad()
                    loss = criterion(net(data.to(device)), target.to(device))
                    loss.backward()
                    optimizer.step()
                print(epoch, val(net, val_loader, device=device))
            return net
        """,
        files={
            "networks.py": """
                import torch.nn as nn


                class HyperspectralCNN(nn.Module):
                    def __init__(self, bands, classes):
                        super().__init__()
                        self.features = nn.Sequential(nn.Conv1d(1, 20, 24), nn.BatchNorm1d(20), nn.ReLU(), nn.AdaptiveAvgPool1d(8))
                        self.classifier = nn.Sequential(nn.Dropout(0.5), nn.Linear(160, classes))

                    def forward(self, x):
                        return self.classifier(self.features(x.unsqueeze(1)).flatten(1))
            """,
        },
        at="output = net(data.to(device))",
    ),
    Fires(  # a library of training helpers: the model comes from the user, so its layers are unknown here (a note)
        """
        import torch


        def evaluate_accuracy(data_iter, net, device=torch.device("cpu")):
            correct, n = 0, 0
            for X, y in data_iter:
                X, y = X.to(device), y.to(device)
                correct += (net(X).argmax(dim=1) == y).sum().item()
                n += y.numel()
            return correct / n


        def train_classifier(net, train_iter, test_iter, loss_fn, num_epochs, lr, device):
            net = net.to(device)
            optimizer = torch.optim.SGD(net.parameters(), lr=lr)
            for epoch in range(num_epochs):
                for X, y in train_iter:
                    X, y = X.to(device), y.to(device)
                    loss = loss_fn(net(X), y)
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
                print(f"epoch {epoch + 1}, test acc {evaluate_accuracy(test_iter, net, device):.3f}")
        """,
        severity=Severity.NOTE,
        at="correct += (net(X).argmax(dim=1) == y).sum().item()",
    ),
    Fires(  # a fitted object's predict method: `fit` leaves the classifier in training mode, `predict` never switches it
        """
        import torch
        import torch.nn.functional as F

        from text_models import TextClassifier


        class SentimentModel:
            def __init__(self, vocab_size, num_labels, device="cuda"):
                self.device = device
                self.model = TextClassifier(vocab_size, num_labels).to(device)
                self.optimizer = torch.optim.Adam(self.model.parameters(), lr=1e-3)

            def fit(self, loader, epochs=3):
                self.model.train()
                for _ in range(epochs):
                    for tokens, labels in loader:
                        loss = F.cross_entropy(self.model(tokens.to(self.device)), labels.to(self.device))
                        self.optimizer.zero_grad()
                        loss.backward()
                        self.optimizer.step()

            def score(self, loader):
                self.model.eval()
                with torch.no_grad():
                    return sum((self.model(t.to(self.device)).argmax(-1).cpu() == y).sum().item() for t, y in loader)

            @torch.no_grad()
            def predict(self, tokens):
                logits = self.model(tokens.to(self.device))
                return logits.softmax(-1).cpu()
        """,
        files={
            "text_models.py": """
                import torch.nn as nn


                class TextClassifier(nn.Module):
                    def __init__(self, vocab_size, num_labels, dim=128):
                        super().__init__()
                        self.embed = nn.EmbeddingBag(vocab_size, dim)
                        self.drop = nn.Dropout(0.3)
                        self.out = nn.Linear(dim, num_labels)

                    def forward(self, tokens):
                        return self.out(self.drop(self.embed(tokens)))
            """,
        },
        at="logits = self.model(tokens.to(self.device))",
    ),
    Fires(  # weights restored, then the model segments every input file without grad: the data is not named held-out, the pass is inference all the same
        """
        import torch

        from networks import UNet


        def segment_folder(checkpoint, volumes):
            network = UNet(in_channels=1, classes=3)
            network.load_state_dict(torch.load(checkpoint, map_location="cpu"))
            results = {}
            with torch.no_grad():
                for name, volume in volumes.items():
                    results[name] = network(volume[None]).argmax(1)[0]
            return results
        """,
        files={
            "networks.py": """
                import torch.nn as nn


                class UNet(nn.Module):
                    def __init__(self, in_channels, classes, width=32):
                        super().__init__()
                        self.encode = nn.Sequential(nn.Conv3d(in_channels, width, 3, padding=1), nn.BatchNorm3d(width), nn.ReLU())
                        self.head = nn.Conv3d(width, classes, 1)

                    def forward(self, x):
                        return self.head(self.encode(x))
            """,
        },
        at="results[name] = network(volume[None]).argmax(1)[0]",
    ),
    Fires(  # the network comes from a factory of another file and runs inside a helper: its layers are unknown here (a note)
        """
        import torch

        from architectures import network_from_config
        from sliding_window import predict_sliding_window


        def predict_cases(config, checkpoint, cases):
            network = network_from_config(config)
            network.load_state_dict(torch.load(checkpoint)["weights"])
            predictions = []
            with torch.no_grad():
                for case in cases:
                    predictions.append(predict_sliding_window(network, case, tile=(128, 128, 128)))
            return predictions
        """,
        files={
            "sliding_window.py": """
                import torch


                def predict_sliding_window(network, volume, tile):
                    logits = torch.zeros_like(volume)
                    for z in range(0, volume.shape[-3], tile[0]):
                        logits[..., z:z + tile[0], :, :] = network(volume[None, ..., z:z + tile[0], :, :])[0]
                    return logits
            """,
            "architectures.py": """
                import importlib


                def network_from_config(config):
                    module = importlib.import_module(config["module"])
                    return getattr(module, config["class"])(**config["kwargs"])
            """,
        },
        severity=Severity.NOTE,
        at="predictions.append(predict_sliding_window(network, case, tile=(128, 128, 128)))",
    ),
    Fires(  # a trainer class switches its network per epoch, and its final validation hands it to a helper without switching (a note: the network comes from a factory)
        """
        import torch

        from architectures import network_from_config
        from sliding_window import predict_sliding_window


        class SegmentationTrainer:
            def __init__(self, config):
                self.network = network_from_config(config)
                self.optimizer = torch.optim.SGD(self.network.parameters(), lr=0.01, momentum=0.99)

            def on_train_epoch_start(self):
                self.network.train()

            def train_step(self, batch):
                loss = self.network(batch["data"]).sub(batch["target"]).pow(2).mean()
                self.optimizer.zero_grad()
                loss.backward()
                self.optimizer.step()
                return loss.item()

            def perform_final_validation(self, cases):
                results = {}
                with torch.no_grad():
                    for name, volume in cases.items():
                        results[name] = predict_sliding_window(self.network, volume, tile=(96, 96, 96))
                return results
        """,
        files={
            "sliding_window.py": """
                def predict_sliding_window(network, volume, tile):
                    return network(volume[None])[0]
            """,
            "architectures.py": """
                import importlib


                def network_from_config(config):
                    module = importlib.import_module(config["module"])
                    return getattr(module, config["class"])(**config["kwargs"])
            """,
        },
        severity=Severity.NOTE,
        at="results[name] = predict_sliding_window(self.network, volume, tile=(96, 96, 96))",
    ),
    Fires(  # an intent classifier's own `infer`: the text encoder is handed in, and the module is never switched to eval
        """
        from torch import nn

        from .base import TextClassifierBase


        class IntentClassifier(TextClassifierBase):
            def __init__(self, encoder, labels):
                super().__init__()
                self.encoder = encoder
                self.head = nn.Linear(encoder.hidden_size, len(labels))
                self.labels = list(labels)

            def forward(self, input_ids, attention_mask):
                return self.head(self.encoder(input_ids, attention_mask))

            def infer(self, batch):
                probabilities = self.forward(batch["input_ids"], batch["attention_mask"]).softmax(-1)
                confidence, index = probabilities.max(-1)
                return self.labels[index.item()], confidence.item()
        """,
        files={
            "base.py": """
                from torch import nn


                class TextClassifierBase(nn.Module):
                    def infer(self, batch):
                        raise NotImplementedError
            """,
        },
        severity=Severity.NOTE,
        at='probabilities = self.forward(batch["input_ids"], batch["attention_mask"]).softmax(-1)',
    ),
    Fires(  # a tagger with dropout whose `predict` runs its forward in the mode training left
        """
        import torch
        from torch import nn


        class Tagger(nn.Module):
            def __init__(self, vocab_size, num_tags, dim=128):
                super().__init__()
                self.embed = nn.Embedding(vocab_size, dim)
                self.drop = nn.Dropout(0.5)
                self.out = nn.Linear(dim, num_tags)

            def forward(self, tokens):
                return self.out(self.drop(self.embed(tokens)))

            @torch.no_grad()
            def predict(self, tokens):
                return self(tokens).argmax(-1)
        """,
        severity=Severity.NOTE,
        at="return self(tokens).argmax(-1)",
    ),
    Fires(  # a predictor object handed the trained seq2seq model: nothing in it switches the model to eval mode
        """
        import torch


        class Predictor:
            def __init__(self, model, src_vocab, tgt_vocab):
                self.model = model
                self.src_vocab = src_vocab
                self.tgt_vocab = tgt_vocab

            def predict(self, src_seq):
                device = next(self.model.parameters()).device
                src_ids = torch.tensor([self.src_vocab.indices(src_seq)], device=device)
                with torch.no_grad():
                    logits, _ = self.model(src_ids)
                return self.tgt_vocab.tokens(logits.argmax(-1)[0].tolist())
        """,
        severity=Severity.NOTE,
        at="logits, _ = self.model(src_ids)",
    ),
    Fires(  # an inpainting of a validation batch after each epoch: a helper that trains nothing and saves pictures, not named for evaluation
        """
        import torch
        import torch.nn as nn
        import torch.nn.functional as F
        from torchvision.utils import save_image


        class ContextEncoder(nn.Module):
            def __init__(self, width=64):
                super().__init__()
                self.net = nn.Sequential(
                    nn.Conv2d(3, width, 4, 2, 1), nn.BatchNorm2d(width), nn.LeakyReLU(0.2),
                    nn.ConvTranspose2d(width, 3, 4, 2, 1), nn.Tanh(),
                )

            def forward(self, masked):
                return self.net(masked)


        def save_inpainting(generator, val_loader, path):
            masked, target = next(iter(val_loader))
            with torch.no_grad():
                filled = generator(masked)
            save_image(torch.cat([masked, filled, target]) * 0.5 + 0.5, path, nrow=8)


        def train(generator, loader, val_loader, optimizer, epochs):
            for epoch in range(epochs):
                generator.train()
                for masked, target in loader:
                    loss = F.mse_loss(generator(masked), target)
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
                save_inpainting(generator, val_loader, f"samples/{epoch:03d}.png")
        """,
        at="filled = generator(masked)",
    ),
    Fires(  # image features for a metric from a torchvision network built in training mode, in a helper of its own
        """
        import numpy as np
        import torch
        from torchvision import models

        backbone = models.inception_v3(weights="IMAGENET1K_V1", aux_logits=True)
        backbone.fc = torch.nn.Identity()


        def image_statistics(images, batch_size=50):
            features = []
            with torch.no_grad():
                for start in range(0, len(images), batch_size):
                    features.append(backbone(images[start:start + batch_size]).cpu().numpy())
            features = np.concatenate(features)
            return features.mean(0), np.cov(features, rowvar=False)
        """,
        at="features.append(backbone(images[start:start + batch_size]).cpu().numpy())",
    ),
    Fires(  # two files: the caller hands its freshly built tagger to a decoding helper of another file that never switches it
        """
        import torch

        from decoding import decode_sentences
        from tagger import Tagger

        tagger = Tagger(vocab_size=20000, num_tags=17)
        tagger.load_state_dict(torch.load("tagger.pt"))
        for sentence, tags in zip(decode_sentences(tagger, sentences), gold):
            print(sentence, tags)
        """,
        files={
            "tagger.py": """
                import torch.nn as nn


                class Tagger(nn.Module):
                    def __init__(self, vocab_size, num_tags):
                        super().__init__()
                        self.embed = nn.Embedding(vocab_size, 128)
                        self.drop = nn.Dropout(0.5)
                        self.out = nn.Linear(128, num_tags)

                    def forward(self, tokens):
                        return self.out(self.drop(self.embed(tokens)))
            """,
            "decoding.py": """
                import torch


                def decode_sentences(model, sentences):
                    decoded = []
                    with torch.no_grad():
                        for tokens in sentences:
                            decoded.append(model(tokens).argmax(-1).tolist())
                    return decoded
            """,
        },
        at="for sentence, tags in zip(decode_sentences(tagger, sentences), gold):",
    ),
    Fires(  # a distillation trainer's frozen teacher, run without grad inside the loss: nothing switches it to eval mode
        """
        import torch
        import torch.nn.functional as F

        from networks import WideResNet, SmallResNet


        class DistillationTrainer:
            def __init__(self, teacher_checkpoint, device="cuda", temperature=4.0):
                self.teacher = WideResNet(depth=28, widen=4).to(device)
                self.teacher.load_state_dict(torch.load(teacher_checkpoint, map_location=device))
                self.teacher.requires_grad_(False)
                self.student = SmallResNet().to(device)
                self.optimizer = torch.optim.SGD(self.student.parameters(), lr=0.05, momentum=0.9)
                self.temperature = temperature

            def distillation_loss(self, images, labels):
                with torch.no_grad():
                    soft_targets = (self.teacher(images) / self.temperature).softmax(-1)
                logits = self.student(images)
                kd = F.kl_div((logits / self.temperature).log_softmax(-1), soft_targets, reduction="batchmean")
                return kd * self.temperature ** 2 + F.cross_entropy(logits, labels)

            def train_epoch(self, loader):
                self.student.train()
                for images, labels in loader:
                    loss = self.distillation_loss(images, labels)
                    self.optimizer.zero_grad()
                    loss.backward()
                    self.optimizer.step()
        """,
        files={
            "networks.py": """
                import torch.nn as nn


                def block(channels_in, channels_out):
                    return nn.Sequential(nn.Conv2d(channels_in, channels_out, 3, padding=1), nn.BatchNorm2d(channels_out), nn.ReLU())


                class WideResNet(nn.Module):
                    def __init__(self, depth, widen, classes=100):
                        super().__init__()
                        width = 16 * widen
                        self.body = nn.Sequential(block(3, width), *[block(width, width) for _ in range((depth - 4) // 6)])
                        self.head = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Dropout(0.3), nn.Linear(width, classes))

                    def forward(self, x):
                        return self.head(self.body(x))


                class SmallResNet(nn.Module):
                    def __init__(self, classes=100):
                        super().__init__()
                        self.body = nn.Sequential(block(3, 32), block(32, 64), nn.AdaptiveAvgPool2d(1), nn.Flatten())
                        self.head = nn.Linear(64, classes)

                    def forward(self, x):
                        return self.head(self.body(x))
            """,
        },
        at="soft_targets = (self.teacher(images) / self.temperature).softmax(-1)",
    ),
    Fires(  # pseudo-labels from a pretrained torchvision network inside the training loop: torchvision builds it in training mode
        """
        import torch
        import torch.nn.functional as F
        from torchvision.models import ResNet50_Weights, resnet18, resnet50


        def train_on_unlabelled(unlabelled_loader, epochs, device="cuda"):
            labeller = resnet50(weights=ResNet50_Weights.IMAGENET1K_V2).to(device)
            student = resnet18(num_classes=1000).to(device)
            optimizer = torch.optim.AdamW(student.parameters(), lr=1e-3)
            for epoch in range(epochs):
                student.train()
                for images in unlabelled_loader:
                    images = images.to(device)
                    with torch.no_grad():
                        pseudo_labels = labeller(images).argmax(-1)
                    loss = F.cross_entropy(student(images), pseudo_labels)
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
            return student
        """,
        at="pseudo_labels = labeller(images).argmax(-1)",
    ),
    Fires(  # the frozen encoder is switched to eval mode in `__init__`, and `model.train()` switches it back with its holder
        """
        import torch
        import torch.nn as nn
        import torch.nn.functional as F
        from transformers import AutoModel


        class CaptionScorer(nn.Module):
            def __init__(self, image_dim=512):
                super().__init__()
                self.text_encoder = AutoModel.from_pretrained("bert-base-uncased")
                self.text_encoder.requires_grad_(False)
                self.text_encoder.eval()
                self.image_proj = nn.Linear(image_dim, self.text_encoder.config.hidden_size)

            def forward(self, image_features, input_ids, attention_mask):
                with torch.no_grad():
                    text = self.text_encoder(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state[:, 0]
                return F.cosine_similarity(self.image_proj(image_features), text)


        def train(loader, epochs, device="cuda"):
            model = CaptionScorer().to(device)
            optimizer = torch.optim.AdamW(model.image_proj.parameters(), lr=1e-4)
            for epoch in range(epochs):
                model.train()
                for batch in loader:
                    scores = model(batch["image_features"], batch["input_ids"], batch["attention_mask"])
                    loss = F.binary_cross_entropy_with_logits(scores, batch["matches"].float())
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
        """,
        at="text = self.text_encoder(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state[:, 0]",
    ),
    Fires(  # a module's own predict, which another file runs right after training it: training mode
        """
        import torch
        import torch.nn as nn


        class TextClassifier(nn.Module):
            def __init__(self, vocab_size, num_labels, dim=128):
                super().__init__()
                self.embed = nn.EmbeddingBag(vocab_size, dim)
                self.dropout = nn.Dropout(0.3)
                self.head = nn.Linear(dim, num_labels)

            def forward(self, tokens):
                return self.head(self.dropout(self.embed(tokens)))

            def predict(self, tokens):
                with torch.no_grad():
                    return self(tokens).argmax(dim=-1)
        """,
        files={
            "fit.py": """
                import torch.nn.functional as F

                from train import TextClassifier


                def fit(model: TextClassifier, loader, optimizer, preview_tokens):
                    model.train()
                    for tokens, labels in loader:
                        loss = F.cross_entropy(model(tokens), labels)
                        optimizer.zero_grad()
                        loss.backward()
                        optimizer.step()
                    return model.predict(preview_tokens)
            """,
        },
        severity=Severity.WARNING,
    ),
    Fires(  # a predictor that builds and loads its network itself, the class in another file: no `.eval()` anywhere
        """
        import torch

        from models import SegNet


        class Predictor:
            def __init__(self, checkpoint, device="cuda"):
                self.device = device
                self.model = SegNet(in_channels=3, n_classes=2).to(device)
                self.model.load_state_dict(torch.load(checkpoint, map_location=device)["model"])

            @torch.no_grad()
            def predict(self, image):
                logits = self.model(image.unsqueeze(0).to(self.device))
                return logits.argmax(1).squeeze(0).cpu().numpy()
        """,
        files={
            "models.py": """
                import torch.nn as nn


                class SegNet(nn.Module):
                    def __init__(self, in_channels, n_classes):
                        super().__init__()
                        self.body = nn.Sequential(nn.Conv2d(in_channels, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU())
                        self.head = nn.Conv2d(32, n_classes, 1)

                    def forward(self, x):
                        return self.head(self.body(x))
            """,
        },
        at="logits = self.model(image.unsqueeze(0).to(self.device))",
    ),
    Fires(  # a metric's feature extractor around pytorch_fid's InceptionV3, called from `__call__`
        """
        import torch
        from pytorch_fid.inception import InceptionV3


        class FIDFeatures:
            def __init__(self, dims=2048):
                block = InceptionV3.BLOCK_INDEX_BY_DIM[dims]
                self.inception = InceptionV3([block]).cuda()

            def __call__(self, images):
                with torch.no_grad():
                    features = self.inception(images)[0]
                return features.squeeze(3).squeeze(2).cpu().numpy()
        """,
        at="features = self.inception(images)[0]",
    ),
    Fires(  # a hub entry point of pytorch/vision is torchvision's builder of that name
        """
        import torch

        model = torch.hub.load("pytorch/vision:v0.10.0", "resnet18", pretrained=True).cuda()
        correct = 0
        with torch.no_grad():
            for images, labels in test_loader:
                correct += (model(images.cuda()).argmax(1) == labels.cuda()).sum().item()
        print(correct / len(test_loader.dataset))
        """,
        at="correct += (model(images.cuda()).argmax(1) == labels.cuda()).sum().item()",
    ),
    Fires(  # a prediction script restores a whole module: it comes back in the mode it was saved in
        """
        import argparse

        import torch


        def main():
            parser = argparse.ArgumentParser()
            parser.add_argument("--checkpoint", required=True)
            args = parser.parse_args()
            model = torch.load(args.checkpoint, map_location="cpu")
            predictions = []
            with torch.no_grad():
                for images in torch.utils.data.DataLoader(dataset, batch_size=64):
                    predictions.append(model(images).argmax(1))
            torch.save(torch.cat(predictions), "predictions.pt")


        if __name__ == "__main__":
            main()
        """,
        severity=Severity.NOTE,
        at="predictions.append(model(images).argmax(1))",
    ),
    Fires(  # the model is built by a loading method, not the constructor
        """
        import torch
        from torchvision import models


        class ChestXrayService:
            def __init__(self):
                self.model = None

            def load(self, weights_path):
                self.model = models.densenet121(num_classes=14)
                self.model.load_state_dict(torch.load(weights_path, map_location="cpu"))

            @torch.no_grad()
            def classify(self, images):
                return torch.sigmoid(self.model(images))
        """,
        at="return torch.sigmoid(self.model(images))",
    ),
    Fires(  # an EMA copy of the generator, averaged by hand and sampled from, is never switched to eval mode
        """
        import copy

        import torch
        from torchvision.utils import save_image

        from networks import Generator


        def train(loader, fixed_noise, steps, ema_decay=0.999):
            generator = Generator(latent_dim=128).cuda()
            generator_ema = copy.deepcopy(generator)
            optimizer = torch.optim.Adam(generator.parameters(), lr=2e-4)
            for step, (noise, target) in enumerate(loader):
                loss = (generator(noise) - target).pow(2).mean()
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                with torch.no_grad():
                    for averaged, current in zip(generator_ema.parameters(), generator.parameters()):
                        averaged.lerp_(current, 1 - ema_decay)
                if step % 1000 == 0:
                    with torch.no_grad():
                        samples = generator_ema(fixed_noise)
                    save_image(samples, f"samples/{step:06d}.png")
        """,
        files={
            "networks.py": """
                import torch.nn as nn


                class Generator(nn.Module):
                    def __init__(self, latent_dim):
                        super().__init__()
                        self.net = nn.Sequential(nn.Linear(latent_dim, 256), nn.BatchNorm1d(256), nn.ReLU(), nn.Linear(256, 784))

                    def forward(self, z):
                        return self.net(z).tanh()
            """,
        },
        at="samples = generator_ema(fixed_noise)",
    ),
    Fires(  # the package's loader restores a classifier whose encoder has dropout and hands it out in training mode
        """
        from torch import nn


        class RelationClassifier(nn.Module):
            def __init__(self, sentence_encoder, num_class, rel2id):
                super().__init__()
                self.sentence_encoder = sentence_encoder
                self.fc = nn.Linear(sentence_encoder.hidden_size, num_class)
                self.id2rel = {index: relation for relation, index in rel2id.items()}

            def forward(self, tokens, mask):
                return self.fc(self.sentence_encoder(tokens, mask))

            def infer(self, sentence):
                tokens, mask = self.sentence_encoder.tokenize(sentence)
                score, pred = self.forward(tokens, mask).softmax(-1).max(-1)
                return self.id2rel[pred.item()], score.item()
        """,
        files={
            "encoders.py": """
                import torch
                from torch import nn


                class CNNEncoder(nn.Module):
                    def __init__(self, word2id, hidden_size=230, dropout=0.0):
                        super().__init__()
                        self.word2id = word2id
                        self.hidden_size = hidden_size
                        self.embed = nn.Embedding(len(word2id), 50)
                        self.conv = nn.Conv1d(50, hidden_size, 3, padding=1)
                        self.drop = nn.Dropout(dropout)

                    def forward(self, tokens, mask):
                        hidden = self.conv(self.embed(tokens).transpose(1, 2)).max(-1).values
                        return self.drop(hidden)

                    def tokenize(self, sentence):
                        ids = [self.word2id.get(word, 0) for word in sentence.split()]
                        return torch.tensor([ids]), torch.ones(1, len(ids))
            """,
            "hub.py": """
                import torch

                from encoders import CNNEncoder
                from train import RelationClassifier


                def get_model(checkpoint, word2id, rel2id):
                    encoder = CNNEncoder(word2id, hidden_size=230, dropout=0.5)
                    model = RelationClassifier(encoder, len(rel2id), rel2id)
                    model.load_state_dict(torch.load(checkpoint, map_location="cpu")["state_dict"])
                    return model
            """,
        },
        severity=Severity.WARNING,
        at="score, pred = self.forward(tokens, mask).softmax(-1).max(-1)",
    ),
    Fires(  # a training framework wraps whatever model it is handed; the script hands it one with dropout
        """
        import torch
        from torch import nn


        class BagTrainer:
            def __init__(self, model, train_loader, lr=0.1):
                self.model = nn.DataParallel(model)
                self.train_loader = train_loader
                self.optimizer = torch.optim.SGD(self.model.parameters(), lr=lr)
                self.criterion = nn.CrossEntropyLoss()

            def train_model(self, epochs):
                for epoch in range(epochs):
                    self.model.train()
                    for tokens, labels in self.train_loader:
                        loss = self.criterion(self.model(tokens.cuda()), labels.cuda())
                        self.optimizer.zero_grad()
                        loss.backward()
                        self.optimizer.step()

            def infer(self, bag):
                with torch.no_grad():
                    logits = self.model(bag.cuda())
                return logits.softmax(-1).argmax(-1).tolist()
        """,
        files={
            "models.py": """
                from torch import nn


                class BagAttention(nn.Module):
                    def __init__(self, vocab_size, num_classes, dim=230):
                        super().__init__()
                        self.embed = nn.EmbeddingBag(vocab_size, dim)
                        self.drop = nn.Dropout(0.5)
                        self.fc = nn.Linear(dim, num_classes)

                    def forward(self, bag):
                        return self.fc(self.drop(self.embed(bag)))
            """,
            "run.py": """
                from models import BagAttention
                from train import BagTrainer

                model = BagAttention(vocab_size=30000, num_classes=53)
                trainer = BagTrainer(model, train_loader)
                trainer.train_model(epochs=60)
            """,
        },
        severity=Severity.WARNING,
        at="logits = self.model(bag.cuda())",
    ),
    Fires(  # the training helper's model comes from the script, which builds it with the project's model factory
        """
        import torch
        import torch.nn.functional as F


        def validate(net, loader, device):
            correct = total = 0
            with torch.no_grad():
                for data, target in loader:
                    output = net(data.to(device))
                    correct += (output.argmax(1) == target.to(device)).sum().item()
                    total += target.numel()
            return correct / total


        def train(net, optimizer, loader, epochs, device, val_loader=None):
            net.train()
            for epoch in range(epochs):
                for data, target in loader:
                    loss = F.cross_entropy(net(data.to(device)), target.to(device))
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
                if val_loader is not None:
                    print(epoch, validate(net, val_loader, device))
        """,
        files={
            "models.py": """
                from torch import nn


                class SpectralMLP(nn.Module):
                    def __init__(self, n_bands, n_classes):
                        super().__init__()
                        self.net = nn.Sequential(nn.Linear(n_bands, 2048), nn.ReLU(), nn.Dropout(0.5), nn.Linear(2048, n_classes))

                    def forward(self, x):
                        return self.net(x)


                def get_model(name, n_bands, n_classes):
                    if name == "mlp":
                        model = SpectralMLP(n_bands, n_classes)
                    else:
                        raise KeyError(name)
                    return model.cuda()
            """,
            "main.py": """
                import torch

                from models import get_model
                from train import train

                model = get_model("mlp", n_bands=103, n_classes=9)
                optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
                train(model, optimizer, train_loader, 100, "cuda", val_loader=val_loader)
            """,
        },
        severity=Severity.WARNING,
        at="output = net(data.to(device))",
    ),
    Fires(  # the module's own loader restores its weights and returns it in training mode; `predict` never switches it
        """
        import torch
        from torch import nn


        class Tagger(nn.Module):
            def __init__(self, vocab_size, num_tags, dim=128):
                super().__init__()
                self.embed = nn.Embedding(vocab_size, dim)
                self.drop = nn.Dropout(0.3)
                self.out = nn.Linear(dim, num_tags)

            def forward(self, tokens):
                return self.out(self.drop(self.embed(tokens)))

            @torch.no_grad()
            def predict(self, tokens):
                return self(tokens).argmax(-1).tolist()


        def load_tagger(path, vocab_size, num_tags):
            tagger = Tagger(vocab_size, num_tags)
            tagger.load_state_dict(torch.load(path, map_location="cpu"))
            return tagger
        """,
        severity=Severity.WARNING,
        at="return self(tokens).argmax(-1).tolist()",
    ),
    Fires(  # an evaluation helper in one file, called every N steps by a training loop of another (a star import)
        """
        import torch


        def do_eval(model, eval_dataloader, device):
            correct = total = 0
            for batch in eval_dataloader:
                batch = {key: value.to(device) for key, value in batch.items()}
                predictions = model(**batch).logits.argmax(dim=-1)
                correct += (predictions == batch["labels"]).sum().item()
                total += batch["labels"].numel()
            return correct / total
        """,
        files={
            "run_glue.py": """
                import deepspeed
                from transformers import BertForSequenceClassification

                from train import *


                def main(args, train_dataloader, eval_dataloader, device):
                    model = BertForSequenceClassification.from_pretrained(args.model_name_or_path, num_labels=2)
                    model, optimizer, _, _ = deepspeed.initialize(args=args, model=model, model_parameters=model.parameters())
                    for epoch in range(args.num_train_epochs):
                        model.train()
                        for step, batch in enumerate(train_dataloader):
                            loss = model(**batch).loss
                            model.backward(loss)
                            model.step()
                            if step % args.eval_step == 0:
                                print(epoch, step, do_eval(model, eval_dataloader, device))
            """,
        },
        severity=Severity.WARNING,
        at='predictions = model(**batch).logits.argmax(dim=-1)',
    ),
    Fires(  # a sampling script restores the whole trained module and generates from it, in the mode it was saved in
        """
        import argparse

        import torch

        parser = argparse.ArgumentParser()
        parser.add_argument("--checkpoint", default="model.pt")
        parser.add_argument("--words", type=int, default=1000)
        args = parser.parse_args()

        with open(args.checkpoint, "rb") as f:
            model = torch.load(f, map_location="cpu")

        hidden = model.init_hidden(1)
        token = torch.randint(100, (1, 1))
        with open("generated.txt", "w") as out:
            for i in range(args.words):
                output, hidden = model(token, hidden)
                weights = output.squeeze().div(0.8).exp()
                token.fill_(torch.multinomial(weights, 1)[0])
                out.write(f"{token.item()} ")
        """,
        severity=Severity.NOTE,
        at='model = torch.load(f, map_location="cpu")',
    ),
    Fires(  # the training loop is the base class's (another file); the subclass's predict, behind a wrapper, never switches
        """
        import torch
        from torch.utils.data import DataLoader

        from base import BaseForecaster
        from core import ForecastNet


        class TransformerForecaster(BaseForecaster):
            def __init__(self, n_features, d_model=64, n_heads=4, dropout=0.1, epochs=10, device="cuda"):
                super().__init__(epochs, device)
                self.model = ForecastNet(n_features, d_model, n_heads, dropout).to(device)
                self.optimizer = torch.optim.Adam(self.model.parameters(), lr=1e-3)

            def _assemble_input(self, batch):
                return {"X": batch[0].to(self.device), "y": batch[1].to(self.device)}

            def fit(self, train_set):
                self._train_model(DataLoader(train_set, batch_size=32, shuffle=True))
                self.model.load_state_dict(self.best_state)

            @torch.no_grad()
            def predict(self, test_set):
                collected = []
                for batch in DataLoader(test_set, batch_size=32):
                    results = self.model(self._assemble_input(batch))
                    collected.append(results["forecast"].cpu())
                return {"forecast": torch.cat(collected).numpy()}

            def forecast(self, test_set):
                return self.predict(test_set)["forecast"]
        """,
        files={
            "base.py": """
                import torch


                class BaseForecaster:
                    def __init__(self, epochs, device):
                        self.epochs = epochs
                        self.device = device
                        self.model = None
                        self.optimizer = None

                    def _train_model(self, train_loader):
                        for epoch in range(self.epochs):
                            self.model.train()
                            for batch in train_loader:
                                inputs = self._assemble_input(batch)
                                loss = self.model(inputs)["loss"]
                                self.optimizer.zero_grad()
                                loss.backward()
                                self.optimizer.step()
                        self.best_state = {k: v.detach().clone() for k, v in self.model.state_dict().items()}
            """,
            "core.py": """
                import torch.nn as nn


                class Encoder(nn.Module):
                    def __init__(self, d_model, n_heads, dropout):
                        super().__init__()
                        self.attention = nn.MultiheadAttention(d_model, n_heads, batch_first=True)
                        self.dropout = nn.Dropout(dropout)

                    def forward(self, x):
                        return self.dropout(self.attention(x, x, x)[0])


                class ForecastNet(nn.Module):
                    def __init__(self, n_features, d_model, n_heads, dropout):
                        super().__init__()
                        self.embedding = nn.Linear(n_features, d_model)
                        self.encoder = Encoder(d_model, n_heads, dropout)
                        self.head = nn.Linear(d_model, n_features)

                    def forward(self, inputs):
                        out = self.head(self.encoder(self.embedding(inputs["X"])))
                        return {"forecast": out, "loss": ((out - inputs["y"]) ** 2).mean()}
            """,
        },
        severity=Severity.NOTE,
        at='results = self.model(self._assemble_input(batch))',
    ),
    Fires(  # a whole module restored by torch.load and sampled from through a volatile input (PyTorch < 0.4)
        """
        import torch
        from torch.autograd import Variable

        with open("model.pt", "rb") as f:
            model = torch.load(f)
        model.cuda()

        hidden = model.init_hidden(1)
        token = Variable(torch.rand(1, 1).mul(10000).long(), volatile=True).cuda()

        with open("generated.txt", "w") as out:
            for i in range(1000):
                output, hidden = model(token, hidden)
                weights = output.squeeze().data.exp().cpu()
                token.data.fill_(torch.multinomial(weights, 1)[0])
                out.write(f"{i} ")
        """,
        severity=Severity.NOTE,
        at="model = torch.load(f)",
    ),
    Fires(  # a restored whole module handed to a helper that hands it on to the function that runs it
        """
        import torch


        def predict(net, images):
            with torch.no_grad():
                return net(images).argmax(dim=1)


        def label_folder(net, folder):
            images = torch.stack([torch.load(path) for path in sorted(folder.glob("*.pt"))])
            return predict(net, images)


        if __name__ == "__main__":
            import sys
            from pathlib import Path

            classifier = torch.load(sys.argv[1], map_location="cpu")
            print(label_folder(classifier, Path(sys.argv[2])).tolist())
        """,
        severity=Severity.NOTE,
        at="print(label_folder(classifier, Path(sys.argv[2])).tolist())",
    ),
    Fires(  # an evaluation helper handed its model runs it in the mode its caller (another file) left it in
        """
        import torch


        def train_one_epoch(model, loader, optimizer, device):
            model.train()
            for images, labels in loader:
                loss = torch.nn.functional.cross_entropy(model(images.to(device)), labels.to(device))
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()


        @torch.no_grad()
        def evaluate(model, loader, device):
            correct = total = 0
            for images, labels in loader:
                logits = model(images.to(device))
                correct += (logits.argmax(1) == labels.to(device)).sum().item()
                total += labels.numel()
            return correct / total
        """,
        files={
            "main.py": """
                import torch
                import torchvision

                from train import evaluate, train_one_epoch


                def main(args):
                    model = getattr(torchvision.models, args.arch)(num_classes=10).cuda()
                    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
                    train_loader, val_loader = build_loaders(args)
                    for epoch in range(args.epochs):
                        train_one_epoch(model, train_loader, optimizer, "cuda")
                        print(epoch, evaluate(model, val_loader, "cuda"))
            """,
        },
        severity=Severity.NOTE,
        at="logits = model(images.to(device))",
    ),
    Fires(  # a segmentation head built by a library factory from a checkpoint's decoder weights, then predicted with
        """
        import torch
        from tqdm import tqdm

        from segment_lib.heads import build_decoder_head

        from data import test_loader


        def predict_masks(args):
            checkpoint = torch.load(args.checkpoint, map_location="cpu")
            decoder_state = {k: v for k, v in checkpoint["model_state"].items() if not k.startswith("encoder")}
            head = build_decoder_head(out_channels=args.num_classes, decoder_state=decoder_state, device=args.device)
            saved = []
            for images, _ in tqdm(test_loader(args.data, batch_size=1)):
                logits = head(images.to(args.device))
                saved.append(torch.argmax(logits, dim=1).detach().cpu().numpy())
            return saved
        """,
        files={
            "data.py": """
                from torch.utils.data import DataLoader
                from torchvision import datasets, transforms


                def test_loader(root, batch_size):
                    dataset = datasets.ImageFolder(root, transforms.ToTensor())
                    return DataLoader(dataset, batch_size=batch_size)
            """,
        },
        severity=Severity.NOTE,
        at="logits = head(images.to(args.device))",
    ),
    Fires(  # the project's own factory (another file) builds a model with dropout from the restored weights
        """
        import torch

        from models import build_classifier


        def export_predictions(checkpoint_path, loader, out_path):
            weights = torch.load(checkpoint_path, map_location="cpu")["state_dict"]
            classifier = build_classifier(weights, num_classes=10)
            rows = []
            for images, names in loader:
                rows.extend(zip(names, classifier(images).argmax(dim=1).tolist()))
            with open(out_path, "w") as out:
                out.writelines(f"{name},{label}" for name, label in rows)
        """,
        files={
            "models.py": """
                import torch.nn as nn


                class Classifier(nn.Module):
                    def __init__(self, num_classes):
                        super().__init__()
                        self.features = nn.Sequential(nn.Linear(512, 256), nn.ReLU(), nn.Dropout(0.3))
                        self.head = nn.Linear(256, num_classes)

                    def forward(self, x):
                        return self.head(self.features(x))


                def build_classifier(state_dict, num_classes):
                    model = Classifier(num_classes)
                    model.load_state_dict(state_dict)
                    return model
            """,
        },
        at="rows.extend(zip(names, classifier(images).argmax(dim=1).tolist()))",
    ),
    Fires(  # the project's loader builds the tagger, loads its weights and hands it out in training mode
        """
        import torch

        from tagger.model import LSTMTagger


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
        """,
        files={
            "tagger/model.py": """
                import torch
                import torch.nn as nn


                class BaseTagger:
                    def tag_sentences(self, batches):
                        return [self(batch).argmax(-1) for batch in batches]

                    def tag_sentences_no_grad(self, batches):
                        with torch.no_grad():
                            return self.tag_sentences(batches)


                class LSTMTagger(BaseTagger, nn.Module):
                    def __init__(self, vocab_size, num_tags, dropout=0.3):
                        super().__init__()
                        self.embedding = nn.Embedding(vocab_size, 128)
                        self.lstm = nn.LSTM(128, 256, batch_first=True, bidirectional=True)
                        self.drop = nn.Dropout(dropout)
                        self.out = nn.Linear(512, num_tags)

                    def forward(self, tokens):
                        hidden, _ = self.lstm(self.embedding(tokens))
                        return self.out(self.drop(hidden))
            """,
        },
        at="return tag_file(model, batches)",
    ),
    Fires(  # a predictor script: the model's batch-norm sits two classes deep, in a part of another file reached by a star import
        """
        import sys

        import torch
        from PIL import Image

        from unet import UNet
        from utils import to_tensor


        def predict_image(net, image, threshold=0.5):
            batch = to_tensor(image).unsqueeze(0)
            with torch.no_grad():
                probs = torch.sigmoid(net(batch)).squeeze(0)
            return probs > threshold


        if __name__ == "__main__":
            net = UNet(n_channels=3, n_classes=1)
            net.load_state_dict(torch.load(sys.argv[1], map_location="cpu"))
            for path in sys.argv[2:]:
                mask = predict_image(net, Image.open(path))
                Image.fromarray(mask.numpy().astype("uint8") * 255).save(path + ".mask.png")
        """,
        files={
            "unet/__init__.py": """
                from .model import UNet
            """,
            "unet/model.py": """
                import torch.nn as nn

                from .parts import *


                class UNet(nn.Module):
                    def __init__(self, n_channels, n_classes):
                        super().__init__()
                        self.inc = InConv(n_channels, 64)
                        self.down = Down(64, 128)
                        self.outc = nn.Conv2d(128, n_classes, 1)

                    def forward(self, x):
                        return self.outc(self.down(self.inc(x)))
            """,
            "unet/parts.py": """
                import torch.nn as nn


                class DoubleConv(nn.Module):
                    def __init__(self, in_ch, out_ch):
                        super().__init__()
                        self.conv = nn.Sequential(
                            nn.Conv2d(in_ch, out_ch, 3, padding=1), nn.BatchNorm2d(out_ch), nn.ReLU(inplace=True),
                        )

                    def forward(self, x):
                        return self.conv(x)


                class InConv(nn.Module):
                    def __init__(self, in_ch, out_ch):
                        super().__init__()
                        self.conv = DoubleConv(in_ch, out_ch)

                    def forward(self, x):
                        return self.conv(x)


                class Down(nn.Module):
                    def __init__(self, in_ch, out_ch):
                        super().__init__()
                        self.block = nn.Sequential(nn.MaxPool2d(2), DoubleConv(in_ch, out_ch))

                    def forward(self, x):
                        return self.block(x)
            """,
            "utils.py": """
                import numpy as np
                import torch


                def to_tensor(image):
                    return torch.from_numpy(np.asarray(image, dtype=np.float32).transpose(2, 0, 1) / 255)
            """,
        },
        at="probs = torch.sigmoid(net(batch)).squeeze(0)",
    ),
    Fires(  # a prediction script: the model comes from a factory of another file, its weights from a checkpoint helper of a
        # third, and its batch-norm from a part of a fourth; the loop's forward feeds no backward, and nothing calls `.eval()`
        """
        import argparse
        import json

        import torch

        from ckpt import load_checkpoint
        from models import build_model


        def main():
            parser = argparse.ArgumentParser()
            parser.add_argument("checkpoint")
            parser.add_argument("images", nargs="+")
            args = parser.parse_args()
            model = build_model("net", classes=10)
            load_checkpoint(model, args.checkpoint)
            pass
            results = {}
            for path in args.images:
                image = torch.load(path)
                results[path] = model(image[None]).argmax(-1).item()
            with open("predictions.json", "w") as f:
                json.dump(results, f)


        if __name__ == "__main__":
            main()
        """,
        files={
            "models.py": """
                import torch.nn as nn

                from blocks import ConvBN


                class Net(nn.Module):
                    def __init__(self, classes):
                        super().__init__()
                        self.body = nn.Sequential(ConvBN(3, 16), nn.AdaptiveAvgPool2d(1), nn.Flatten())
                        self.head = nn.Linear(16, classes)

                    def forward(self, x):
                        return self.head(self.body(x))


                def build_model(name, classes):
                    if name == "net":
                        return Net(classes)
                    raise ValueError(name)
            """,
            "blocks.py": """
                import torch.nn as nn


                class ConvBN(nn.Module):
                    def __init__(self, cin, cout):
                        super().__init__()
                        self.conv = nn.Conv2d(cin, cout, 3, padding=1, bias=False)
                        self.bn = nn.BatchNorm2d(cout)

                    def forward(self, x):
                        return self.bn(self.conv(x)).relu()
            """,
            "ckpt.py": """
                import torch


                def load_checkpoint(model, path):
                    state = torch.load(path, map_location="cpu")
                    model.load_state_dict(state["model"])
                    return state.get("epoch", 0)
            """,
        },
        at="results[path] = model(image[None]).argmax(-1).item()",
    ),
    Fires(  # a prediction server: the script that builds it hands it a model it built and loaded, never switched, and trains
        # nothing; the model's batch-norm sits in a part of another file
        """
        import json
        from http.server import BaseHTTPRequestHandler, HTTPServer

        import torch


        class PredictionServer:
            def __init__(self, model):
                self.model = model

            def predict(self, pixels):
                with torch.no_grad():
                    return self.model(torch.tensor(pixels)[None]).argmax(-1).item()

            def run(self, port):
                server = self

                class Handler(BaseHTTPRequestHandler):
                    def do_POST(self):
                        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                        self.send_response(200)
                        self.end_headers()
                        self.wfile.write(json.dumps({"label": server.predict(body["pixels"])}).encode())

                HTTPServer(("0.0.0.0", port), Handler).serve_forever()
        """,
        files={
            "serve.py": """
                import sys

                from ckpt import load_checkpoint
                from models import build_model
                from train import PredictionServer  # the example's own file (the server's module)

                model = build_model("net", classes=10)
                load_checkpoint(model, sys.argv[1])
                PredictionServer(model).run(port=8080)
            """,
            "models.py": """
                import torch.nn as nn

                from blocks import ConvBN


                class Net(nn.Module):
                    def __init__(self, classes):
                        super().__init__()
                        self.body = nn.Sequential(ConvBN(3, 16), nn.AdaptiveAvgPool2d(1), nn.Flatten())
                        self.head = nn.Linear(16, classes)

                    def forward(self, x):
                        return self.head(self.body(x))


                def build_model(name, classes):
                    if name == "net":
                        return Net(classes)
                    raise ValueError(name)
            """,
            "blocks.py": """
                import torch.nn as nn


                class ConvBN(nn.Module):
                    def __init__(self, cin, cout):
                        super().__init__()
                        self.conv = nn.Conv2d(cin, cout, 3, padding=1, bias=False)
                        self.bn = nn.BatchNorm2d(cout)

                    def forward(self, x):
                        return self.bn(self.conv(x)).relu()
            """,
            "ckpt.py": """
                import torch


                def load_checkpoint(model, path):
                    state = torch.load(path, map_location="cpu")
                    model.load_state_dict(state["model"])
                    return state.get("epoch", 0)
            """,
        },
        severity=Severity.WARNING,
        at="return self.model(torch.tensor(pixels)[None]).argmax(-1).item()",
    ),
    Fires(  # the same server, but the factory returns the model switched to eval: its mode is not known to be training, a note
        """
        import json
        from http.server import BaseHTTPRequestHandler, HTTPServer

        import torch


        class PredictionServer:
            def __init__(self, model):
                self.model = model

            def predict(self, pixels):
                with torch.no_grad():
                    return self.model(torch.tensor(pixels)[None]).argmax(-1).item()

            def run(self, port):
                server = self

                class Handler(BaseHTTPRequestHandler):
                    def do_POST(self):
                        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                        self.send_response(200)
                        self.end_headers()
                        self.wfile.write(json.dumps({"label": server.predict(body["pixels"])}).encode())

                HTTPServer(("0.0.0.0", port), Handler).serve_forever()
        """,
        files={
            "serve.py": """
                import sys

                from ckpt import load_checkpoint
                from models import build_model
                from train import PredictionServer  # the example's own file (the server's module)

                model = build_model("net", classes=10)
                load_checkpoint(model, sys.argv[1])
                PredictionServer(model).run(port=8080)
            """,
            "models.py": """
                import torch.nn as nn

                from blocks import ConvBN


                class Net(nn.Module):
                    def __init__(self, classes):
                        super().__init__()
                        self.body = nn.Sequential(ConvBN(3, 16), nn.AdaptiveAvgPool2d(1), nn.Flatten())
                        self.head = nn.Linear(16, classes)

                    def forward(self, x):
                        return self.head(self.body(x))


                def build_model(name, classes):
                    if name == "net":
                        return Net(classes).eval()
                    raise ValueError(name)
            """,
            "blocks.py": """
                import torch.nn as nn


                class ConvBN(nn.Module):
                    def __init__(self, cin, cout):
                        super().__init__()
                        self.conv = nn.Conv2d(cin, cout, 3, padding=1, bias=False)
                        self.bn = nn.BatchNorm2d(cout)

                    def forward(self, x):
                        return self.bn(self.conv(x)).relu()
            """,
            "ckpt.py": """
                import torch


                def load_checkpoint(model, path):
                    state = torch.load(path, map_location="cpu")
                    model.load_state_dict(state["model"])
                    return state.get("epoch", 0)
            """,
        },
        severity=Severity.NOTE,
        at="return self.model(torch.tensor(pixels)[None]).argmax(-1).item()",
    ),
    Fires(  # an inference script written at module level: the same pass as the same body in main(), a warning alike
        """
        import sys

        import torch
        from PIL import Image
        from torchvision import transforms

        from model import Classifier

        preprocess = transforms.Compose([transforms.Resize(256), transforms.CenterCrop(224), transforms.ToTensor()])
        net = Classifier(n_classes=10)
        net.load_state_dict(torch.load(sys.argv[1], map_location="cpu"))
        image = preprocess(Image.open(sys.argv[2]).convert("RGB")).unsqueeze(0)
        with torch.no_grad():
            scores = net(image)
        print(f"{sys.argv[2]}: class {scores.argmax(1).item()}")
        """,
        severity=Severity.WARNING,
        at="scores = net(image)",
        files={
            "model.py": """
                import torch.nn as nn


                class Classifier(nn.Module):
                    def __init__(self, n_classes=10):
                        super().__init__()
                        self.features = nn.Sequential(nn.Conv2d(3, 32, 3), nn.BatchNorm2d(32), nn.ReLU())
                        self.head = nn.Sequential(nn.Dropout(0.3), nn.Linear(32, n_classes))

                    def forward(self, x):
                        return self.head(self.features(x).mean((2, 3)))
            """,
        },
    ),
    Fires(  # a plain class's method scores the model it is handed, called on a freshly built instance after training
        """
        import torch

        from nets import ConvNet


        class Scorer:
            def accuracy(self, net, batches):
                hits = 0
                with torch.no_grad():
                    for inputs, targets in batches:
                        hits += (net(inputs).argmax(1) == targets).sum().item()
                return hits


        def fit(net, batches, held_out, rounds):
            opt = torch.optim.SGD(net.parameters(), lr=0.1)
            for _ in range(rounds):
                net.train()
                for inputs, targets in batches:
                    opt.zero_grad()
                    torch.nn.functional.cross_entropy(net(inputs), targets).backward()
                    opt.step()
                print(Scorer().accuracy(net, held_out))


        fit(ConvNet(), train_batches, dev_batches, 5)
        """,
        files={
            "nets.py": """
            from torch import nn


            class ConvNet(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.body = nn.Sequential(nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8), nn.ReLU(), nn.Flatten(), nn.LazyLinear(10))

                def forward(self, x):
                    return self.body(x)
            """,
        },
        at="hits += (net(inputs).argmax(1) == targets).sum().item()",
    ),
    Fires(  # a held-out batch scored every N steps of the loop that trains the model, reusing the step's names
        """
        import torch
        import torch.nn.functional as F

        from models import PointClassifier


        def next_batch(loader, device):
            points, labels = next(iter(loader))
            return points.to(device), labels.to(device)


        def main(args, train_loader, held_out_loader):
            net = PointClassifier(args.classes).to(args.device)
            optimizer = torch.optim.Adam(net.parameters(), lr=1e-3)
            for epoch in range(args.epochs):
                for step, (points, labels) in enumerate(train_loader):
                    optimizer.zero_grad()
                    logits = net(points.to(args.device))
                    loss = F.cross_entropy(logits, labels.to(args.device))
                    loss.backward()
                    optimizer.step()
                    if step % args.log_every == 0:
                        points, labels = next_batch(held_out_loader, args.device)
                        logits = net(points)
                        loss = F.cross_entropy(logits, labels)
                        print(f"epoch {epoch} step {step}: held-out loss {loss.item():.3f}")
        """,
        files={
            "models.py": """
            import torch.nn as nn


            class PointClassifier(nn.Module):
                def __init__(self, classes):
                    super().__init__()
                    self.features = nn.Sequential(nn.Conv1d(3, 64, 1), nn.BatchNorm1d(64), nn.ReLU(), nn.AdaptiveMaxPool1d(1))
                    self.head = nn.Sequential(nn.Flatten(), nn.Linear(64, 32), nn.Dropout(0.3), nn.Linear(32, classes))

                def forward(self, points):
                    return self.head(self.features(points))
            """,
        },
        at="logits = net(points)",
    ),
    Fires(  # a validation helper whose caller, in another file, trains the model its own main block built
        """
        import torch


        @torch.no_grad()
        def dice_score(net, loader, device):
            total, batches = 0.0, 0
            for images, masks in loader:
                probs = torch.sigmoid(net(images.to(device)))
                hits = ((probs > 0.5).float() * masks.to(device)).sum()
                total += (2 * hits / (probs.sum() + masks.sum() + 1e-6)).item()
                batches += 1
            return total / max(batches, 1)
        """,
        files={
            "fit.py": """
            import torch
            import torch.nn.functional as F

            from nets import SegNet
            from train import dice_score


            def fit(net, train_loader, val_loader, epochs, device):
                optimizer = torch.optim.Adam(net.parameters(), lr=1e-4)
                for epoch in range(epochs):
                    net.train()
                    for images, masks in train_loader:
                        loss = F.binary_cross_entropy_with_logits(net(images.to(device)), masks.to(device))
                        optimizer.zero_grad()
                        loss.backward()
                        optimizer.step()
                    print(f"epoch {epoch}: validation dice {dice_score(net, val_loader, device):.3f}")


            if __name__ == "__main__":
                segmenter = SegNet(in_channels=3, classes=1)
                train_loader, val_loader = make_loaders("data/")
                fit(segmenter, train_loader, val_loader, epochs=20, device="cuda")
            """,
            "nets.py": """
            import torch.nn as nn


            class ConvBlock(nn.Module):
                def __init__(self, cin, cout):
                    super().__init__()
                    self.conv = nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU(inplace=True))

                def forward(self, x):
                    return self.conv(x)


            class SegNet(nn.Module):
                def __init__(self, in_channels, classes):
                    super().__init__()
                    self.body = nn.Sequential(ConvBlock(in_channels, 32), ConvBlock(32, 32), nn.Conv2d(32, classes, 1))

                def forward(self, x):
                    return self.body(x)
            """,
        },
        severity=Severity.WARNING,
        at="probs = torch.sigmoid(net(images.to(device)))",
    ),
    Fires(  # summaries decoded with `generate` after every epoch: a transformers forward, run in the mode training left
        """
        import torch
        from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

        from data import summary_loaders


        def decode_batches(model, tokenizer, loader, device):
            texts = []
            for batch in loader:
                ids = model.generate(batch["input_ids"].to(device), max_new_tokens=64)
                texts.extend(tokenizer.batch_decode(ids, skip_special_tokens=True))
            return texts


        class SummaryTrainer:
            def __init__(self, checkpoint, device="cuda"):
                self.tokenizer = AutoTokenizer.from_pretrained(checkpoint)
                self.device = device

            def fit(self, epochs):
                train_loader, val_loader = summary_loaders(self.tokenizer)
                model = AutoModelForSeq2SeqLM.from_pretrained("t5-small").to(self.device)
                optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)
                for epoch in range(epochs):
                    model.train()
                    for batch in train_loader:
                        loss = model(**{k: v.to(self.device) for k, v in batch.items()}).loss
                        loss.backward()
                        optimizer.step()
                        optimizer.zero_grad()
                    summaries = decode_batches(model, self.tokenizer, val_loader, self.device)
                    print(epoch, summaries[:2])
        """,
        files={
            "data.py": """
                from torch.utils.data import DataLoader


                def summary_loaders(tokenizer, batch_size=16):
                    from datasets import load_dataset

                    splits = load_dataset("xsum").map(lambda row: tokenizer(row["document"], text_target=row["summary"]))
                    return DataLoader(splits["train"], batch_size, shuffle=True), DataLoader(splits["validation"], batch_size)
            """,
        },
        severity=Severity.WARNING,
        at="ids = model.generate(batch[\"input_ids\"].to(device), max_new_tokens=64)",
    ),
    Fires(  # the prediction helper is reached through `validate`, which hands on the model `fit` has just trained
        """
        import torch

        from model import TaggerNet


        def predict(model, loader):
            predictions = []
            with torch.no_grad():
                for tokens, _ in loader:
                    predictions.append(model(tokens).argmax(-1))
            return torch.cat(predictions)


        def validate(model, loader):
            predictions = predict(model, loader)
            labels = torch.cat([tags for _, tags in loader])
            return (predictions == labels).float().mean().item()


        def fit(train_loader, val_loader, epochs):
            model = TaggerNet(vocab=20000, tags=17)
            optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
            for epoch in range(epochs):
                model.train()
                for tokens, tags in train_loader:
                    loss = torch.nn.functional.cross_entropy(model(tokens).flatten(0, 1), tags.flatten())
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
                print(epoch, validate(model, val_loader))
        """,
        files={
            "model.py": """
                import torch.nn as nn


                class TaggerNet(nn.Module):
                    def __init__(self, vocab, tags, dim=128):
                        super().__init__()
                        self.embed = nn.Embedding(vocab, dim)
                        self.drop = nn.Dropout(0.3)
                        self.out = nn.Linear(dim, tags)

                    def forward(self, tokens):
                        return self.out(self.drop(self.embed(tokens)))
            """,
        },
        severity=Severity.WARNING,
        at="predictions.append(model(tokens).argmax(-1))",
    ),
    Fires(  # the same through a context object: `train` trains `context.model` (as `model`), `validate` hands it on
        """
        from dataclasses import dataclass

        import torch
        from torch.utils.data import DataLoader

        from model import build_model


        @dataclass
        class RunContext:
            model: torch.nn.Module
            train_loader: DataLoader
            val_loader: DataLoader


        def predict(model, loader):
            predictions = []
            with torch.no_grad():
                for tokens, _ in loader:
                    predictions.append(model(tokens).argmax(-1))
            return torch.cat(predictions)


        def validate(context):
            predictions = predict(context.model, context.val_loader)
            labels = torch.cat([tags for _, tags in context.val_loader])
            return (predictions == labels).float().mean().item()


        def train(context, epochs):
            model = context.model
            optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
            model.train()
            for epoch in range(epochs):
                for tokens, tags in context.train_loader:
                    loss = torch.nn.functional.cross_entropy(model(tokens).flatten(0, 1), tags.flatten())
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
                print(epoch, validate(context))
        """,
        files={
            "model.py": """
                import importlib


                def build_model(name, **options):
                    return getattr(importlib.import_module("taggers"), name)(**options)
            """,
        },
        severity=Severity.NOTE,
        at="predictions.append(model(tokens).argmax(-1))",
    ),
    Fires(  # a held-out batch scored under no_grad after the training loop, its name saying nothing: the loop says so
        """
        import torch
        from torch.utils.data import DataLoader

        from survival import CoxNet, SurvivalDataset, partial_likelihood

        train_loader = DataLoader(SurvivalDataset("train.csv"), batch_size=64, shuffle=True)
        holdout = DataLoader(SurvivalDataset("holdout.csv"), batch_size=1024)
        net = CoxNet(features=12)
        optimizer = torch.optim.Adam(net.parameters(), lr=1e-3)
        for epoch in range(40):
            for x, (event, time) in train_loader:
                optimizer.zero_grad()
                loss = partial_likelihood(net(x), event, time)
                loss.backward()
                optimizer.step()
        with torch.no_grad():
            x, (event, time) = next(iter(holdout))
            log_hazard = net(x)
        print(log_hazard.squeeze().tolist()[:10])
        """,
        files={
            "survival.py": """
                import pandas as pd
                import torch
                import torch.nn as nn


                class CoxNet(nn.Module):
                    def __init__(self, features, hidden=32):
                        super().__init__()
                        self.body = nn.Sequential(nn.BatchNorm1d(features), nn.Linear(features, hidden), nn.ReLU(),
                                                  nn.Dropout(0.2), nn.Linear(hidden, 1))

                    def forward(self, x):
                        return self.body(x)


                class SurvivalDataset(torch.utils.data.Dataset):
                    def __init__(self, path):
                        self.frame = pd.read_csv(path)

                    def __len__(self):
                        return len(self.frame)

                    def __getitem__(self, i):
                        row = self.frame.iloc[i]
                        return torch.tensor(row.drop(["event", "time"]).values, dtype=torch.float32), (row.event, row.time)


                def partial_likelihood(log_hazard, event, time):
                    order = torch.argsort(time, descending=True)
                    log_hazard, event = log_hazard.squeeze(-1)[order], event[order]
                    return -((log_hazard - torch.logcumsumexp(log_hazard, 0)) * event).sum() / event.sum().clamp(min=1)
            """,
        },
        severity=Severity.WARNING,
        at="log_hazard = net(x)",
    ),
    Fires(  # the detector's parts come from factory functions of another file, and the script trains it wrapped in DataParallel
        """
        import torch
        import torch.nn as nn
        from tqdm import tqdm

        from nets.detector import Detector
        from nets.loss import DetectionLoss


        def fit_one_epoch(net, criterion, optimizer, train_loader, val_loader, epoch):
            total_loss, val_loss = 0.0, 0.0
            for images, targets in tqdm(train_loader, desc=f"epoch {epoch}"):
                optimizer.zero_grad()
                loss = sum(criterion(output, targets) for output in net(images.cuda()))
                loss.backward()
                optimizer.step()
                total_loss += loss.item()
            for images, targets in val_loader:
                with torch.no_grad():
                    outputs = net(images.cuda())
                    val_loss += sum(criterion(output, targets) for output in outputs).item()
            print(f"train {total_loss:.3f} val {val_loss:.3f}")


        if __name__ == "__main__":
            model = Detector(num_anchors=3, num_classes=20)
            model.load_state_dict(torch.load("weights/backbone.pth"), strict=False)
            net = nn.DataParallel(model).cuda()
            optimizer = torch.optim.Adam(net.parameters(), lr=1e-3, weight_decay=5e-4)
            criterion = DetectionLoss()
            train_loader, val_loader = make_loaders("data/voc")
            for epoch in range(50):
                fit_one_epoch(net, criterion, optimizer, train_loader, val_loader, epoch)
        """,
        files={
            "nets/detector.py": """
            from collections import OrderedDict

            import torch.nn as nn


            def conv_bn(channels_in, channels_out, kernel_size, stride=1):
                return nn.Sequential(OrderedDict([
                    ("conv", nn.Conv2d(channels_in, channels_out, kernel_size, stride, kernel_size // 2, bias=False)),
                    ("bn", nn.BatchNorm2d(channels_out)),
                    ("act", nn.LeakyReLU(0.1)),
                ]))


            def neck(widths, channels_in):
                return nn.Sequential(conv_bn(channels_in, widths[0], 1), conv_bn(widths[0], widths[1], 3))


            class Detector(nn.Module):
                def __init__(self, num_anchors, num_classes):
                    super().__init__()
                    self.stem = nn.Conv2d(3, 32, 3, padding=1)
                    self.neck = neck([64, 128], 32)
                    self.head = nn.Conv2d(128, num_anchors * (5 + num_classes), 1)

                def forward(self, x):
                    return [self.head(self.neck(self.stem(x)))]
            """,
        },
        at="outputs = net(images.cuda())",
    ),
    Fires(  # the model class is in the script, trained and validated through DataParallel
        """
        import torch
        import torch.nn as nn
        import torch.nn.functional as F


        class Classifier(nn.Module):
            def __init__(self, classes):
                super().__init__()
                self.body = nn.Sequential(nn.Linear(512, 256), nn.Dropout(0.3), nn.ReLU(), nn.Linear(256, classes))

            def forward(self, x):
                return self.body(x)


        def main():
            model = nn.DataParallel(Classifier(10)).cuda()
            optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
            train_loader, test_loader = get_loaders()
            for epoch in range(30):
                for features, labels in train_loader:
                    loss = F.cross_entropy(model(features.cuda()), labels.cuda())
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
            correct = 0
            with torch.no_grad():
                for features, labels in test_loader:
                    correct += (model(features.cuda()).argmax(1) == labels.cuda()).sum().item()
            print(correct)
        """,
        at="correct += (model(features.cuda()).argmax(1) == labels.cuda()).sum().item()",
    ),
)

MissingEvalMode.MUST_NOT_FIRE = (
    Quiet(  # a conditional generator's grid: noise drawn in the helper, labels one-hot encoded once at the module level by a helper of the script
        """
        import argparse

        import numpy as np
        import torch
        import torch.nn as nn
        from torchvision.utils import save_image

        from models import ConditionalGenerator, Critic

        parser = argparse.ArgumentParser()
        parser.add_argument("--classes", type=int, default=10)
        parser.add_argument("--latent", type=int, default=64)
        parser.add_argument("--epochs", type=int, default=50)
        opt = parser.parse_args()


        def one_hot(labels, classes):
            encoded = np.zeros((labels.shape[0], classes))
            encoded[np.arange(labels.shape[0]), labels] = 1.0
            return torch.tensor(encoded, dtype=torch.float32)


        generator, critic = ConditionalGenerator(opt.latent, opt.classes), Critic(opt.classes)
        g_opt = torch.optim.Adam(generator.parameters(), lr=2e-4)
        d_opt = torch.optim.Adam(critic.parameters(), lr=2e-4)
        grid_labels = one_hot(np.array([c for c in range(opt.classes) for _ in range(opt.classes)]), opt.classes)


        def save_grid(step):
            noise = torch.randn(opt.classes ** 2, opt.latent)
            save_image(generator(noise, grid_labels).detach(), f"grids/{step}.png", nrow=opt.classes, normalize=True)


        data = torch.load("digits.pt")
        loss_fn = nn.BCEWithLogitsLoss()
        for epoch in range(opt.epochs):
            for images, labels in zip(data["images"].split(64), data["labels"].split(64)):
                codes = one_hot(labels.numpy(), opt.classes)
                fake = generator(torch.randn(len(images), opt.latent), codes)
                d_loss = loss_fn(critic(images, codes), torch.ones(len(images), 1)) + loss_fn(critic(fake.detach(), codes), torch.zeros(len(images), 1))
                d_opt.zero_grad()
                d_loss.backward()
                d_opt.step()
                g_loss = loss_fn(critic(fake, codes), torch.ones(len(images), 1))
                g_opt.zero_grad()
                g_loss.backward()
                g_opt.step()
            save_grid(epoch)
        """,
        files={
            "models.py": """
                import torch
                import torch.nn as nn


                class ConditionalGenerator(nn.Module):
                    def __init__(self, latent, classes):
                        super().__init__()
                        self.net = nn.Sequential(nn.Linear(latent + classes, 256), nn.BatchNorm1d(256), nn.ReLU(), nn.Linear(256, 784), nn.Tanh())

                    def forward(self, noise, labels):
                        return self.net(torch.cat((noise, labels), -1)).view(-1, 1, 28, 28)


                class Critic(nn.Module):
                    def __init__(self, classes):
                        super().__init__()
                        self.net = nn.Sequential(nn.Linear(784 + classes, 256), nn.LeakyReLU(0.2), nn.Dropout(0.3), nn.Linear(256, 1))

                    def forward(self, images, labels):
                        return self.net(torch.cat((images.flatten(1), labels), -1))
            """,
        },
    ),
    Quiet(  # the evaluation helper switches both models it is handed to eval mode through a loop over them
        """
        import torch
        import torch.nn.functional as F

        from seq2seq import Decoder, Encoder


        def validation_loss(encoder, decoder, batches):
            for module in [encoder, decoder]:
                module.eval()
            total = 0.0
            with torch.no_grad():
                for src, tgt in batches:
                    total += F.cross_entropy(decoder(tgt[:, :-1], encoder(src)).transpose(1, 2), tgt[:, 1:]).item()
            return total / len(batches)


        def main(train_batches, val_batches, vocab=8000, dim=256):
            encoder, decoder = Encoder(vocab, dim), Decoder(vocab, dim)
            optimizer = torch.optim.Adam([*encoder.parameters(), *decoder.parameters()], lr=1e-3)
            for epoch in range(10):
                for module in (encoder, decoder):
                    module.train()
                for src, tgt in train_batches:
                    loss = F.cross_entropy(decoder(tgt[:, :-1], encoder(src)).transpose(1, 2), tgt[:, 1:])
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
                print(epoch, validation_loss(encoder, decoder, val_batches))
        """,
        files={"seq2seq.py": """
            import torch.nn as nn


            class Encoder(nn.Module):
                def __init__(self, vocab, dim):
                    super().__init__()
                    self.embed = nn.Embedding(vocab, dim)
                    self.drop = nn.Dropout(0.2)
                    self.rnn = nn.GRU(dim, dim, batch_first=True)

                def forward(self, src):
                    return self.rnn(self.drop(self.embed(src)))[1]


            class Decoder(nn.Module):
                def __init__(self, vocab, dim):
                    super().__init__()
                    self.embed = nn.Embedding(vocab, dim)
                    self.drop = nn.Dropout(0.2)
                    self.rnn = nn.GRU(dim, dim, batch_first=True)
                    self.out = nn.Linear(dim, vocab)

                def forward(self, tgt, hidden):
                    return self.out(self.rnn(self.drop(self.embed(tgt)), hidden)[0])
            """},
    ),
    Quiet(  # the table's classes all have dropout or batch-norm, and the evaluation helper switches to eval mode
        """
        import torch
        import torch.nn.functional as F

        from architectures import create_model


        def evaluate(model, loader):
            model.eval()
            correct = 0
            with torch.no_grad():
                for x, y in loader:
                    correct += (model(x).argmax(1) == y).sum().item()
            return correct / len(loader.dataset)


        def train(args, train_loader, val_loader):
            model = create_model(args.arch, args.features, args.classes)
            optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
            for epoch in range(args.epochs):
                model.train()
                for x, y in train_loader:
                    optimizer.zero_grad()
                    F.cross_entropy(model(x), y).backward()
                    optimizer.step()
                print(epoch, evaluate(model, val_loader))
        """,
        files={"architectures.py": """
            import torch.nn as nn


            class DropoutMLP(nn.Module):
                def __init__(self, features, classes):
                    super().__init__()
                    self.layers = nn.Sequential(nn.Linear(features, 256), nn.ReLU(), nn.Dropout(0.5), nn.Linear(256, classes))

                def forward(self, x):
                    return self.layers(x)


            class ConvNet(nn.Module):
                def __init__(self, features, classes):
                    super().__init__()
                    self.conv = nn.Sequential(nn.Conv1d(1, 32, 5), nn.BatchNorm1d(32), nn.ReLU(), nn.AdaptiveAvgPool1d(1))
                    self.fc = nn.Linear(32, classes)

                def forward(self, x):
                    return self.fc(self.conv(x.unsqueeze(1)).flatten(1))


            ARCHITECTURES = {"mlp": DropoutMLP, "conv": ConvNet}


            def create_model(name, features, classes):
                model_class = ARCHITECTURES.get(name)
                return model_class(features, classes)
            """},
    ),
    Quiet(  # the backbone goes back to training mode only when it is fine-tuned; frozen, it stays in the eval mode set up front
        """
        import torch
        import torch.nn.functional as F

        from models import Net


        def probe(train_loader, val_loader, epochs, tune_backbone=False):
            model = Net()
            model.eval()
            head = torch.nn.Linear(10, 2)
            opt = torch.optim.Adam(head.parameters())
            for epoch in range(epochs):
                if tune_backbone:
                    model.train()
                head.train()
                for x, y in train_loader:
                    with torch.no_grad():
                        features = model(x)
                    opt.zero_grad()
                    F.cross_entropy(head(features), y).backward()
                    opt.step()
                head.eval()
                with torch.no_grad():
                    for x, y in val_loader:
                        print(F.cross_entropy(head(model(x)), y).item())
        """,
        files={
            "models.py": """
            import torch.nn as nn


            class Net(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.body = nn.Sequential(nn.Linear(32, 64), nn.BatchNorm1d(64), nn.ReLU(), nn.Linear(64, 10))

                def forward(self, x):
                    return self.body(x)
            """,
        },
    ),
    Quiet(  # every epoch trains, then a helper of the file switches the model to eval mode before the validation loop
        """
        import torch
        import torch.nn.functional as F

        from models import Net


        def set_eval(*nets):
            for net in nets:
                net.eval()


        def run(train_loader, val_loader, epochs):
            model = Net()
            opt = torch.optim.Adam(model.parameters())
            model.eval()
            for epoch in range(epochs):
                model.train()
                for x, y in train_loader:
                    opt.zero_grad()
                    F.cross_entropy(model(x), y).backward()
                    opt.step()
                set_eval(model)
                with torch.no_grad():
                    for x, y in val_loader:
                        print(F.cross_entropy(model(x), y).item())
        """,
        files={
            "models.py": """
            import torch.nn as nn


            class Net(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.body = nn.Sequential(nn.Linear(32, 64), nn.BatchNorm1d(64), nn.ReLU(), nn.Linear(64, 10))

                def forward(self, x):
                    return self.body(x)
            """,
        },
    ),
    Quiet(  # a script's sample helper draws numpy noise into a Variable for the module-level generator it trains
        """
        import numpy as np
        import torch
        from torch.autograd import Variable
        from torchvision.utils import save_image

        from models import Discriminator, Generator

        cuda = torch.cuda.is_available()
        Tensor = torch.cuda.FloatTensor if cuda else torch.FloatTensor
        generator, discriminator = Generator(latent_dim=100), Discriminator()
        adversarial_loss = torch.nn.BCEWithLogitsLoss()
        optimizer_G = torch.optim.Adam(generator.parameters(), lr=2e-4, betas=(0.5, 0.999))


        def sample_image(n_row, batches_done):
            z = Variable(Tensor(np.random.normal(0, 1, (n_row ** 2, 100))))
            labels = torch.arange(n_row).repeat_interleave(n_row)
            gen_imgs = generator(z, labels)
            save_image(gen_imgs.data, "images/%d.png" % batches_done, nrow=n_row, normalize=True)


        loader = torch.utils.data.DataLoader(torch.load("digits.pt"), batch_size=64, shuffle=True)
        for epoch in range(200):
            for i, (imgs, labels) in enumerate(loader):
                optimizer_G.zero_grad()
                z = torch.randn(imgs.size(0), 100)
                g_loss = adversarial_loss(discriminator(generator(z, labels), labels), torch.ones(imgs.size(0), 1))
                g_loss.backward()
                optimizer_G.step()
                batches_done = epoch * len(loader) + i
                if batches_done % 400 == 0:
                    sample_image(n_row=10, batches_done=batches_done)
        """,
        files={
            "models.py": """
            import torch
            import torch.nn as nn


            class Generator(nn.Module):
                def __init__(self, latent_dim, classes=10):
                    super().__init__()
                    self.label_emb = nn.Embedding(classes, classes)
                    self.model = nn.Sequential(
                        nn.Linear(latent_dim + classes, 256), nn.BatchNorm1d(256, 0.8), nn.LeakyReLU(0.2),
                        nn.Linear(256, 784), nn.Tanh(),
                    )

                def forward(self, noise, labels):
                    return self.model(torch.cat((self.label_emb(labels), noise), -1))


            class Discriminator(nn.Module):
                def __init__(self, classes=10):
                    super().__init__()
                    self.label_emb = nn.Embedding(classes, classes)
                    self.model = nn.Sequential(nn.Linear(784 + classes, 256), nn.LeakyReLU(0.2), nn.Linear(256, 1))

                def forward(self, img, labels):
                    return self.model(torch.cat((img.view(img.size(0), -1), self.label_emb(labels)), -1))
            """,
        },
    ),
    Quiet(  # a sampling helper of another file, handed fixed latents by the training script, runs them chunk by chunk
        """
        import torch
        import torch.nn.functional as F

        from nets import Discriminator, Generator
        from sampling import write_samples


        def main(loader, epochs=10):
            netG, netD = Generator(), Discriminator()
            opt = torch.optim.Adam(netG.parameters(), lr=2e-4)
            latents = torch.randn(64, 100, 1, 1)
            for epoch in range(epochs):
                netG.train()
                for real in loader:
                    loss = F.softplus(-netD(netG(torch.randn(real.size(0), 100, 1, 1)))).mean()
                    opt.zero_grad()
                    loss.backward()
                    opt.step()
                write_samples(netG, latents, f"samples/{epoch}.png")
        """,
        files={
            "sampling.py": """
            import torch
            from torchvision.utils import save_image


            def write_samples(net, latents, path):
                images = []
                with torch.no_grad():
                    for chunk in latents.split(16):
                        images.append(net(chunk))
                save_image(torch.cat(images), path, normalize=True)
            """,
            "nets.py": """
            import torch.nn as nn


            class Generator(nn.Module):
                def __init__(self, latent=100, width=64):
                    super().__init__()
                    self.main = nn.Sequential(
                        nn.ConvTranspose2d(latent, width, 4, 1, 0), nn.BatchNorm2d(width), nn.ReLU(True),
                        nn.ConvTranspose2d(width, 3, 4, 2, 1), nn.Tanh(),
                    )

                def forward(self, z):
                    return self.main(z)


            class Discriminator(nn.Module):
                def __init__(self, width=64):
                    super().__init__()
                    self.main = nn.Sequential(nn.Conv2d(3, width, 4, 2, 1), nn.LeakyReLU(0.2), nn.Flatten(), nn.LazyLinear(1))

                def forward(self, x):
                    return self.main(x)
            """,
        },
    ),
    Quiet(  # a sample grid drawn from noise after each epoch, through a helper handed the training loop's fixed noise: batch statistics of the prior training draws from, nothing scored
        """
        import torch
        import torch.nn as nn
        from torchvision.utils import save_image


        class Generator(nn.Module):
            def __init__(self, latent=100):
                super().__init__()
                self.net = nn.Sequential(
                    nn.ConvTranspose2d(latent, 128, 4, 1, 0), nn.BatchNorm2d(128), nn.ReLU(),
                    nn.ConvTranspose2d(128, 3, 4, 2, 1), nn.Tanh(),
                )

            def forward(self, z):
                return self.net(z)


        def save_grid(generator, noise, path):
            with torch.no_grad():
                images = generator(noise)
            save_image(images * 0.5 + 0.5, path, nrow=8)


        def train_gan(generator, discriminator, loader, g_opt, d_opt, epochs, fixed_noise):
            criterion = nn.BCEWithLogitsLoss()
            for epoch in range(epochs):
                generator.train()
                for real in loader:
                    fake = generator(torch.randn(real.size(0), 100, 1, 1))
                    g_loss = criterion(discriminator(fake), torch.ones(real.size(0), 1))
                    g_opt.zero_grad()
                    g_loss.backward()
                    g_opt.step()
                save_grid(generator, fixed_noise, f"samples/{epoch:03d}.png")


        train_gan(Generator(), None, None, None, None, 10, torch.randn(64, 100, 1, 1))
        """,
    ),
    Quiet(  # a conversion check: the model is switched to eval mode as it is built (`eval()` returns the module)
        """
        import torch

        from modeling import ConvertedClassifier, ClassifierConfig, rename_keys


        @torch.no_grad()
        def convert_checkpoint(original, sample_tokens, dump_path):
            config = ClassifierConfig(num_labels=3)
            model = ConvertedClassifier(config).eval()
            model.load_state_dict(rename_keys(original.state_dict()))
            expected = original.predict(sample_tokens)
            logits = model(sample_tokens)
            assert torch.allclose(logits, expected, atol=1e-3), "the converted weights do not match"
            torch.save(model.state_dict(), dump_path)
        """,
        files={
            "modeling.py": """
                import torch.nn as nn


                class ClassifierConfig:
                    def __init__(self, num_labels, hidden=256, vocab=32000, dropout=0.1):
                        self.num_labels, self.hidden, self.vocab, self.dropout = num_labels, hidden, vocab, dropout


                class ConvertedClassifier(nn.Module):
                    def __init__(self, config):
                        super().__init__()
                        self.embed = nn.Embedding(config.vocab, config.hidden)
                        self.dropout = nn.Dropout(config.dropout)
                        self.head = nn.Linear(config.hidden, config.num_labels)

                    def forward(self, tokens):
                        return self.head(self.dropout(self.embed(tokens).mean(1)))


                def rename_keys(state_dict):
                    return {key.replace("encoder.", ""): value for key, value in state_dict.items()}
            """,
        },
    ),
    Quiet(  # twin: the class loads nothing and the script gives it no weights: a demo of its shapes, not a trained model
        _SCORE_REVIEWS.format(switch=""),
        files=_UNLOADED_CLASSIFIER,
    ),
    Quiet(  # twin: the script switches the self-loading model to eval mode
        _SCORE_REVIEWS.format(switch="\nmodel.eval()"),
        files=_SELF_LOADING_CLASSIFIER,
    ),
    Quiet(  # the fixed shape: switched to eval mode after training, before scoring
        """
        import torch
        from torch.utils.data import DataLoader

        from survival import CoxNet, SurvivalDataset, partial_likelihood

        train_loader = DataLoader(SurvivalDataset("train.csv"), batch_size=64, shuffle=True)
        holdout = DataLoader(SurvivalDataset("holdout.csv"), batch_size=1024)
        net = CoxNet(features=12)
        optimizer = torch.optim.Adam(net.parameters(), lr=1e-3)
        for epoch in range(40):
            for x, (event, time) in train_loader:
                optimizer.zero_grad()
                loss = partial_likelihood(net(x), event, time)
                loss.backward()
                optimizer.step()
        net.eval()
        with torch.no_grad():
            x, (event, time) = next(iter(holdout))
            log_hazard = net(x)
        print(log_hazard.squeeze().tolist()[:10])
        """,
        files={
            "survival.py": """
                import pandas as pd
                import torch
                import torch.nn as nn


                class CoxNet(nn.Module):
                    def __init__(self, features, hidden=32):
                        super().__init__()
                        self.body = nn.Sequential(nn.BatchNorm1d(features), nn.Linear(features, hidden), nn.ReLU(),
                                                  nn.Dropout(0.2), nn.Linear(hidden, 1))

                    def forward(self, x):
                        return self.body(x)


                class SurvivalDataset(torch.utils.data.Dataset):
                    def __init__(self, path):
                        self.frame = pd.read_csv(path)

                    def __len__(self):
                        return len(self.frame)

                    def __getitem__(self, i):
                        row = self.frame.iloc[i]
                        return torch.tensor(row.drop(["event", "time"]).values, dtype=torch.float32), (row.event, row.time)


                def partial_likelihood(log_hazard, event, time):
                    order = torch.argsort(time, descending=True)
                    log_hazard, event = log_hazard.squeeze(-1)[order], event[order]
                    return -((log_hazard - torch.logcumsumexp(log_hazard, 0)) * event).sum() / event.sum().clamp(min=1)
            """,
        },
    ),
    Quiet(  # put back in training mode on purpose after training: a pass that recomputes batch-norm statistics
        """
        import torch
        from torch.utils.data import DataLoader

        from survival import CoxNet, SurvivalDataset, partial_likelihood

        train_loader = DataLoader(SurvivalDataset("train.csv"), batch_size=64, shuffle=True)
        holdout = DataLoader(SurvivalDataset("holdout.csv"), batch_size=1024)
        net = CoxNet(features=12)
        optimizer = torch.optim.Adam(net.parameters(), lr=1e-3)
        for epoch in range(40):
            for x, (event, time) in train_loader:
                optimizer.zero_grad()
                loss = partial_likelihood(net(x), event, time)
                loss.backward()
                optimizer.step()
        net.train()
        with torch.no_grad():
            x, (event, time) = next(iter(holdout))
            log_hazard = net(x)
        print(log_hazard.squeeze().tolist()[:10])
        """,
        files={
            "survival.py": """
                import pandas as pd
                import torch
                import torch.nn as nn


                class CoxNet(nn.Module):
                    def __init__(self, features, hidden=32):
                        super().__init__()
                        self.body = nn.Sequential(nn.BatchNorm1d(features), nn.Linear(features, hidden), nn.ReLU(),
                                                  nn.Dropout(0.2), nn.Linear(hidden, 1))

                    def forward(self, x):
                        return self.body(x)


                class SurvivalDataset(torch.utils.data.Dataset):
                    def __init__(self, path):
                        self.frame = pd.read_csv(path)

                    def __len__(self):
                        return len(self.frame)

                    def __getitem__(self, i):
                        row = self.frame.iloc[i]
                        return torch.tensor(row.drop(["event", "time"]).values, dtype=torch.float32), (row.event, row.time)


                def partial_likelihood(log_hazard, event, time):
                    order = torch.argsort(time, descending=True)
                    log_hazard, event = log_hazard.squeeze(-1)[order], event[order]
                    return -((log_hazard - torch.logcumsumexp(log_hazard, 0)) * event).sum() / event.sum().clamp(min=1)
            """,
        },
    ),
    Quiet(  # the fixed shape: `validate` switches the model it hands on to eval mode
        """
        import torch

        from model import TaggerNet


        def predict(model, loader):
            predictions = []
            with torch.no_grad():
                for tokens, _ in loader:
                    predictions.append(model(tokens).argmax(-1))
            return torch.cat(predictions)


        def validate(model, loader):
            model.eval()
            predictions = predict(model, loader)
            labels = torch.cat([tags for _, tags in loader])
            return (predictions == labels).float().mean().item()


        def fit(train_loader, val_loader, epochs):
            model = TaggerNet(vocab=20000, tags=17)
            optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
            for epoch in range(epochs):
                model.train()
                for tokens, tags in train_loader:
                    loss = torch.nn.functional.cross_entropy(model(tokens).flatten(0, 1), tags.flatten())
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
                print(epoch, validate(model, val_loader))
        """,
        files={
            "model.py": """
                import torch.nn as nn


                class TaggerNet(nn.Module):
                    def __init__(self, vocab, tags, dim=128):
                        super().__init__()
                        self.embed = nn.Embedding(vocab, dim)
                        self.drop = nn.Dropout(0.3)
                        self.out = nn.Linear(dim, tags)

                    def forward(self, tokens):
                        return self.out(self.drop(self.embed(tokens)))
            """,
        },
    ),
    Quiet(  # the evaluation switches the model through the file's own context manager, entered on an ExitStack
        """
        from contextlib import ExitStack, contextmanager

        import torch
        from torch import nn


        @contextmanager
        def inference_context(model):
            was_training = model.training
            model.eval()
            yield
            model.train(was_training)


        def inference_on_dataset(model, data_loader, evaluator):
            evaluator.reset()
            with ExitStack() as stack:
                if isinstance(model, nn.Module):
                    stack.enter_context(inference_context(model))
                stack.enter_context(torch.no_grad())
                for inputs in data_loader:
                    evaluator.process(inputs, model(inputs))
            return evaluator.evaluate()
        """,
        files={
            "train_net.py": """
                import torch
                from torch import nn

                from train import inference_on_dataset  # the example's own file, train.py


                def do_test(model, loader, evaluator):
                    return inference_on_dataset(model, loader, evaluator)


                def do_train(loader, test_loader, evaluator):
                    model = nn.Sequential(nn.Linear(16, 16), nn.Dropout(0.2), nn.Linear(16, 4))
                    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
                    model.train()
                    for epoch in range(10):
                        for inputs, targets in loader:
                            loss = nn.functional.cross_entropy(model(inputs), targets)
                            optimizer.zero_grad()
                            loss.backward()
                            optimizer.step()
                        print(epoch, do_test(model, test_loader, evaluator))
            """,
        },
    ),
    Quiet(  # the fixed shape through a context object: `validate` switches `context.model` to eval mode
        """
        from dataclasses import dataclass

        import torch
        from torch.utils.data import DataLoader

        from model import build_model


        @dataclass
        class RunContext:
            model: torch.nn.Module
            train_loader: DataLoader
            val_loader: DataLoader


        def predict(model, loader):
            predictions = []
            with torch.no_grad():
                for tokens, _ in loader:
                    predictions.append(model(tokens).argmax(-1))
            return torch.cat(predictions)


        def validate(context):
            context.model.eval()
            predictions = predict(context.model, context.val_loader)
            labels = torch.cat([tags for _, tags in context.val_loader])
            return (predictions == labels).float().mean().item()


        def train(context, epochs):
            model = context.model
            optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
            model.train()
            for epoch in range(epochs):
                for tokens, tags in context.train_loader:
                    loss = torch.nn.functional.cross_entropy(model(tokens).flatten(0, 1), tags.flatten())
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
                print(epoch, validate(context))
        """,
        files={
            "model.py": """
                import importlib


                def build_model(name, **options):
                    return getattr(importlib.import_module("taggers"), name)(**options)
            """,
        },
    ),
    Quiet(  # the fixed shape: the decoding helper switches the model to eval mode first
        """
        import torch
        from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

        from data import summary_loaders


        def decode_batches(model, tokenizer, loader, device):
            model.eval()
            texts = []
            for batch in loader:
                ids = model.generate(batch["input_ids"].to(device), max_new_tokens=64)
                texts.extend(tokenizer.batch_decode(ids, skip_special_tokens=True))
            return texts

        class SummaryTrainer:
            def __init__(self, checkpoint, device="cuda"):
                self.tokenizer = AutoTokenizer.from_pretrained(checkpoint)
                self.device = device

            def fit(self, epochs):
                train_loader, val_loader = summary_loaders(self.tokenizer)
                model = AutoModelForSeq2SeqLM.from_pretrained("t5-small").to(self.device)
                optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)
                for epoch in range(epochs):
                    model.train()
                    for batch in train_loader:
                        loss = model(**{k: v.to(self.device) for k, v in batch.items()}).loss
                        loss.backward()
                        optimizer.step()
                        optimizer.zero_grad()
                    summaries = decode_batches(model, self.tokenizer, val_loader, self.device)
                    print(epoch, summaries[:2])
        """,
        files={
            "data.py": """
                from torch.utils.data import DataLoader


                def summary_loaders(tokenizer, batch_size=16):
                    from datasets import load_dataset

                    splits = load_dataset("xsum").map(lambda row: tokenizer(row["document"], text_target=row["summary"]))
                    return DataLoader(splits["train"], batch_size, shuffle=True), DataLoader(splits["validation"], batch_size)
            """,
        },
    ),
    Quiet(  # a project's own model class whose `generate` switches itself to eval mode: not the library's method
        """
        import torch
        from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

        from data import summary_loaders


        def decode_batches(model, tokenizer, loader, device):
            texts = []
            for batch in loader:
                ids = model.generate(batch["input_ids"].to(device), max_new_tokens=64)
                texts.extend(tokenizer.batch_decode(ids, skip_special_tokens=True))
            return texts


        class Summarizer(torch.nn.Module):
            def __init__(self, checkpoint):
                super().__init__()
                self.net = AutoModelForSeq2SeqLM.from_pretrained(checkpoint)
                self.noise = torch.nn.Dropout(0.1)

            def forward(self, input_ids, **batch):
                return self.net(inputs_embeds=self.noise(self.net.get_input_embeddings()(input_ids)), **batch)

            def generate(self, input_ids, **options):
                self.eval()
                return self.net.generate(input_ids, **options)

        class SummaryTrainer:
            def __init__(self, checkpoint, device="cuda"):
                self.tokenizer = AutoTokenizer.from_pretrained(checkpoint)
                self.device = device

            def fit(self, epochs):
                train_loader, val_loader = summary_loaders(self.tokenizer)
                model = Summarizer("t5-small").to(self.device)
                optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)
                for epoch in range(epochs):
                    model.train()
                    for batch in train_loader:
                        loss = model(**{k: v.to(self.device) for k, v in batch.items()}).loss
                        loss.backward()
                        optimizer.step()
                        optimizer.zero_grad()
                    summaries = decode_batches(model, self.tokenizer, val_loader, self.device)
                    print(epoch, summaries[:2])
        """,
        files={
            "data.py": """
                from torch.utils.data import DataLoader


                def summary_loaders(tokenizer, batch_size=16):
                    from datasets import load_dataset

                    splits = load_dataset("xsum").map(lambda row: tokenizer(row["document"], text_target=row["summary"]))
                    return DataLoader(splits["train"], batch_size, shuffle=True), DataLoader(splits["validation"], batch_size)
            """,
        },
    ),
    Quiet(  # an image grid sampled every N steps from fixed noise, the generator left training: batch statistics by choice
        """
        import torch
        import torch.nn.functional as F
        from torchvision.utils import save_image

        from nets import Discriminator, Generator


        class GANTrainer:
            def __init__(self, args):
                self.args = args
                self.netG, self.netD = Generator(args.nz), Discriminator()
                self.optG = torch.optim.Adam(self.netG.parameters(), lr=2e-4, betas=(0.5, 0.999))
                self.optD = torch.optim.Adam(self.netD.parameters(), lr=2e-4, betas=(0.5, 0.999))
                self.fixed_noise = torch.randn(64, args.nz, 1, 1)

            def fit(self, loader):
                for epoch in range(self.args.epochs):
                    for i, (real, _) in enumerate(loader):
                        fake = self.netG(torch.randn(real.size(0), self.args.nz, 1, 1))
                        self.optD.zero_grad()
                        errD = F.softplus(-self.netD(real)).mean() + F.softplus(self.netD(fake.detach())).mean()
                        errD.backward()
                        self.optD.step()
                        self.optG.zero_grad()
                        errG = F.softplus(-self.netD(fake)).mean()
                        errG.backward()
                        self.optG.step()
                        if i % self.args.sample_every == 0:
                            with torch.no_grad():
                                grid = self.netG(self.fixed_noise)
                            save_image(grid, f"samples/{epoch:03d}_{i:05d}.png", normalize=True)
        """,
        files={
            "nets.py": """
            import torch.nn as nn


            class Generator(nn.Module):
                def __init__(self, nz, width=64):
                    super().__init__()
                    self.main = nn.Sequential(
                        nn.ConvTranspose2d(nz, width, 4, 1, 0), nn.BatchNorm2d(width), nn.ReLU(True),
                        nn.ConvTranspose2d(width, 3, 4, 2, 1), nn.Tanh(),
                    )

                def forward(self, z):
                    return self.main(z)


            class Discriminator(nn.Module):
                def __init__(self, width=64):
                    super().__init__()
                    self.main = nn.Sequential(nn.Conv2d(3, width, 4, 2, 1), nn.LeakyReLU(0.2, True), nn.Flatten(), nn.LazyLinear(1))

                def forward(self, x):
                    return self.main(x)
            """,
        },
    ),
    Quiet(  # a tutorial script's check of the model's shapes: built, given no weights, run on a made-up tensor
        """
        import torch

        from model import Classifier

        net = Classifier(n_classes=10)
        x = torch.randn(2, 3, 64, 64)
        print(net(x).shape)
        print(sum(p.numel() for p in net.parameters()), "parameters")
        """,
        files={
            "model.py": """
                import torch.nn as nn


                class Classifier(nn.Module):
                    def __init__(self, n_classes=10):
                        super().__init__()
                        self.features = nn.Sequential(nn.Conv2d(3, 32, 3), nn.BatchNorm2d(32), nn.ReLU())
                        self.head = nn.Sequential(nn.Dropout(0.3), nn.Linear(32, n_classes))

                    def forward(self, x):
                        return self.head(self.features(x).mean((2, 3)))
            """,
        },
    ),
    Quiet(  # the module-level script switches the model to eval mode before its pass
        """
        import sys

        import torch

        from model import Classifier

        net = Classifier(n_classes=10)
        net.load_state_dict(torch.load(sys.argv[1], map_location="cpu"))
        net.eval()
        with torch.no_grad():
            scores = net(torch.load(sys.argv[2]))
        print(scores.argmax(1).tolist())
        """,
        files={
            "model.py": """
                import torch.nn as nn


                class Classifier(nn.Module):
                    def __init__(self, n_classes=10):
                        super().__init__()
                        self.features = nn.Sequential(nn.Conv2d(3, 32, 3), nn.BatchNorm2d(32), nn.ReLU())
                        self.head = nn.Sequential(nn.Dropout(0.3), nn.Linear(32, n_classes))

                    def forward(self, x):
                        return self.head(self.features(x).mean((2, 3)))
            """,
        },
    ),
    Quiet(  # the same model fine-tuned: the forward's loss is backwarded by a helper of another file, so no inference pass
        """
        import argparse

        import torch
        import torch.nn.functional as F

        from ckpt import load_checkpoint
        from engine import apply_gradients
        from models import build_model


        def main():
            parser = argparse.ArgumentParser()
            parser.add_argument("checkpoint")
            parser.add_argument("data")
            args = parser.parse_args()
            model = build_model("net", classes=10)
            load_checkpoint(model, args.checkpoint)
            optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
            images, labels = torch.load(args.data)
            for start in range(0, len(images), 32):
                logits = model(images[start:start + 32])
                loss = F.cross_entropy(logits, labels[start:start + 32])
                print(start, apply_gradients(loss, optimizer))
            torch.save(model.state_dict(), "finetuned.pt")


        if __name__ == "__main__":
            main()
        """,
        files={
            "models.py": """
                import torch.nn as nn

                from blocks import ConvBN


                class Net(nn.Module):
                    def __init__(self, classes):
                        super().__init__()
                        self.body = nn.Sequential(ConvBN(3, 16), nn.AdaptiveAvgPool2d(1), nn.Flatten())
                        self.head = nn.Linear(16, classes)

                    def forward(self, x):
                        return self.head(self.body(x))


                def build_model(name, classes):
                    if name == "net":
                        return Net(classes)
                    raise ValueError(name)
            """,
            "blocks.py": """
                import torch.nn as nn


                class ConvBN(nn.Module):
                    def __init__(self, cin, cout):
                        super().__init__()
                        self.conv = nn.Conv2d(cin, cout, 3, padding=1, bias=False)
                        self.bn = nn.BatchNorm2d(cout)

                    def forward(self, x):
                        return self.bn(self.conv(x)).relu()
            """,
            "ckpt.py": """
                import torch


                def load_checkpoint(model, path):
                    state = torch.load(path, map_location="cpu")
                    model.load_state_dict(state["model"])
                    return state.get("epoch", 0)
            """,
            "engine.py": """
                def apply_gradients(loss, optimizer, scaler=None):
                    optimizer.zero_grad(set_to_none=True)
                    if scaler is None:
                        loss.backward()
                        optimizer.step()
                    else:
                        scaler.scale(loss).backward()
                        scaler.step(optimizer)
                        scaler.update()
                    return loss.item()
            """,
        },
    ),
    Quiet(  # the model's parts in another file: a dropout whose rate the script passes in (zero is possible) and a
        # batch-norm that keeps no running statistics (batch statistics in both modes): no layer known to act differently
        """
        import sys

        import torch

        from tagger import Tagger


        def tag_tokens(model, tokens):
            with torch.no_grad():
                return model(tokens).argmax(-1)


        if __name__ == "__main__":
            model = Tagger(vocab=30000, tags=17, dropout=float(sys.argv[2]))
            model.load_state_dict(torch.load(sys.argv[1], map_location="cpu"))
            for line in sys.stdin:
                ids = torch.tensor([[hash(word) % 30000 for word in line.split()]])
                print(tag_tokens(model, ids).tolist())
        """,
        files={
            "tagger.py": """
                import torch.nn as nn

                from layers import Encoder


                class Tagger(nn.Module):
                    def __init__(self, vocab, tags, dropout):
                        super().__init__()
                        self.encoder = Encoder(vocab, 256, dropout)
                        self.out = nn.Linear(256, tags)

                    def forward(self, tokens):
                        return self.out(self.encoder(tokens))
            """,
            "layers.py": """
                import torch.nn as nn


                class Encoder(nn.Module):
                    def __init__(self, vocab, dim, dropout):
                        super().__init__()
                        self.embed = nn.Embedding(vocab, dim)
                        self.norm = nn.BatchNorm1d(dim, track_running_stats=False)
                        self.drop = nn.Dropout(dropout)

                    def forward(self, tokens):
                        return self.drop(self.norm(self.embed(tokens).transpose(1, 2)).transpose(1, 2))
            """,
        },
    ),
    Quiet(  # the helper the loaded tagger is handed to switches it to eval mode before tagging
        """
        import torch

        from tagger.model import LSTMTagger


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
            model.eval()
            return model.tag_sentences_no_grad(batches)


        def load_model_tag_text(model_file, batches):
            trainer = Trainer.load(model_file)
            model = trainer.model
            return tag_file(model, batches)
        """,
        files={
            "tagger/model.py": """
                import torch
                import torch.nn as nn


                class BaseTagger:
                    def tag_sentences(self, batches):
                        return [self(batch).argmax(-1) for batch in batches]

                    def tag_sentences_no_grad(self, batches):
                        with torch.no_grad():
                            return self.tag_sentences(batches)


                class LSTMTagger(BaseTagger, nn.Module):
                    def __init__(self, vocab_size, num_tags, dropout=0.3):
                        super().__init__()
                        self.embedding = nn.Embedding(vocab_size, 128)
                        self.lstm = nn.LSTM(128, 256, batch_first=True, bidirectional=True)
                        self.drop = nn.Dropout(dropout)
                        self.out = nn.Linear(512, num_tags)

                    def forward(self, tokens):
                        hidden, _ = self.lstm(self.embedding(tokens))
                        return self.out(self.drop(hidden))
            """,
        },
    ),
    Quiet(  # the project's factory returns the model it builds from the restored weights in eval mode
        """
        import torch

        from models import build_classifier


        def export_predictions(checkpoint_path, loader, out_path):
            weights = torch.load(checkpoint_path, map_location="cpu")["state_dict"]
            classifier = build_classifier(weights, num_classes=10)
            rows = []
            for images, names in loader:
                rows.extend(zip(names, classifier(images).argmax(dim=1).tolist()))
            with open(out_path, "w") as out:
                out.writelines(f"{name},{label}" for name, label in rows)
        """,
        files={
            "models.py": """
                import torch.nn as nn


                class Classifier(nn.Module):
                    def __init__(self, num_classes):
                        super().__init__()
                        self.features = nn.Sequential(nn.Linear(512, 256), nn.ReLU(), nn.Dropout(0.3))
                        self.head = nn.Linear(256, num_classes)

                    def forward(self, x):
                        return self.head(self.features(x))


                def build_classifier(state_dict, num_classes):
                    model = Classifier(num_classes)
                    model.load_state_dict(state_dict)
                    return model.eval()
            """,
        },
    ),
    Quiet(  # a preference loss takes the dropout out of the reference model it is handed (the project's own helper)
        """
        import torch
        import torch.nn.functional as F

        from utils import disable_dropout


        class PreferenceLoss:
            def __init__(self, policy, ref_policy, beta=0.1):
                self.policy = policy
                self.ref_policy = ref_policy
                self.beta = beta
                disable_dropout(self.ref_policy)

            def reference_logits(self, chosen, rejected):
                with torch.no_grad():
                    return self.ref_policy(chosen).logits, self.ref_policy(rejected).logits
        """,
        files={
            "utils.py": """
                import torch.nn as nn


                def disable_dropout(model):
                    for module in model.modules():
                        if isinstance(module, nn.Dropout):
                            module.p = 0
            """,
        },
    ),
    Quiet(  # trl's `disable_dropout_in_model` zeroes the dropout of the reference model the scorer is handed
        """
        import torch
        from trl.trainer.utils import disable_dropout_in_model


        class RewardGapScorer:
            def __init__(self, model, ref_model):
                self.model = model
                self.ref_model = ref_model
                disable_dropout_in_model(self.ref_model)

            def score(self, batch):
                with torch.no_grad():
                    ref_logits = self.ref_model(input_ids=batch["input_ids"].cuda()).logits
                return ref_logits.log_softmax(-1).gather(-1, batch["labels"].cuda().unsqueeze(-1)).sum()
        """,
    ),
    Quiet(  # the caller (another file) switches the model to eval mode before the evaluation helper runs it
        """
        import torch


        def train_one_epoch(model, loader, optimizer, device):
            model.train()
            for images, labels in loader:
                loss = torch.nn.functional.cross_entropy(model(images.to(device)), labels.to(device))
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()


        @torch.no_grad()
        def evaluate(model, loader, device):
            correct = total = 0
            for images, labels in loader:
                logits = model(images.to(device))
                correct += (logits.argmax(1) == labels.to(device)).sum().item()
                total += labels.numel()
            return correct / total
        """,
        files={
            "main.py": """
                import torch
                import torchvision

                from train import evaluate, train_one_epoch


                def main(args):
                    model = getattr(torchvision.models, args.arch)(num_classes=10).cuda()
                    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
                    train_loader, val_loader = build_loaders(args)
                    for epoch in range(args.epochs):
                        train_one_epoch(model, train_loader, optimizer, "cuda")
                        model.eval()
                        print(epoch, evaluate(model, val_loader, "cuda"))
            """,
        },
    ),
    Quiet(  # a checkpoint converter: what torch.load returns is a state dict its helpers index and rename
        """
        import argparse

        import torch


        def rename_keys(state_dict, old_prefix, new_prefix):
            return {key.replace(old_prefix, new_prefix, 1): value for key, value in state_dict.items()}


        def convert_unet(checkpoint, config):
            converted = rename_keys(checkpoint, "model.diffusion_model.", "")
            converted["config"] = config
            return converted


        if __name__ == "__main__":
            parser = argparse.ArgumentParser()
            parser.add_argument("--checkpoint_path", required=True)
            parser.add_argument("--dump_path", required=True)
            args = parser.parse_args()
            checkpoint = torch.load(args.checkpoint_path, map_location="cpu")
            torch.save(convert_unet(checkpoint, {"sample_size": 64}), args.dump_path)
        """,
    ),
    Quiet(  # a library's helper that no code of the workspace calls: how its callers hand the model in is not here
        """
        import torch


        def embed_images(encoder, pixel_values, device):
            features = encoder(pixel_values.to(device))
            return (features / features.norm(dim=-1, keepdim=True)).cpu().numpy()
        """,
    ),
    Quiet(  # a probe of activation statistics on random input: no data is inferred
        """
        import torch


        def activation_stats(model, layer_names, input_shape=(8, 3, 224, 224)):
            stats = {}
            handles = [
                module.register_forward_hook(lambda m, i, o, name=name: stats.setdefault(name, o.pow(2).mean().item()))
                for name, module in model.named_modules() if name in layer_names
            ]
            x = torch.normal(0.0, 1.0, input_shape)
            _ = model(x)
            for handle in handles:
                handle.remove()
            return stats
        """,
    ),
    Quiet(  # the helper switches the model it runs; the loss object it is also handed is not a module
        """
        import torch


        @torch.no_grad()
        def run(data_loader, model, compute_loss, device):
            model.eval()
            loss = torch.zeros(3, device=device)
            for images, targets in data_loader:
                images = images.to(device).float() / 255
                preds, train_out = model(images)
                loss += compute_loss(train_out, targets.to(device))[1]
            model.float()
            return (loss.cpu() / len(data_loader)).tolist()
        """,
    ),
    Quiet(  # the subclass's predict switches the model the base class (another file) trains
        """
        import torch
        from torch.utils.data import DataLoader

        from base import BaseForecaster
        from core import ForecastNet


        class TransformerForecaster(BaseForecaster):
            def __init__(self, n_features, d_model=64, n_heads=4, dropout=0.1, epochs=10, device="cuda"):
                super().__init__(epochs, device)
                self.model = ForecastNet(n_features, d_model, n_heads, dropout).to(device)
                self.optimizer = torch.optim.Adam(self.model.parameters(), lr=1e-3)

            def _assemble_input(self, batch):
                return {"X": batch[0].to(self.device), "y": batch[1].to(self.device)}

            def fit(self, train_set):
                self._train_model(DataLoader(train_set, batch_size=32, shuffle=True))
                self.model.load_state_dict(self.best_state)

            @torch.no_grad()
            def predict(self, test_set):
                self.model.eval()
                collected = []
                for batch in DataLoader(test_set, batch_size=32):
                    results = self.model(self._assemble_input(batch))
                    collected.append(results["forecast"].cpu())
                return {"forecast": torch.cat(collected).numpy()}

            def forecast(self, test_set):
                return self.predict(test_set)["forecast"]
        """,
        files={
            "base.py": """
                import torch


                class BaseForecaster:
                    def __init__(self, epochs, device):
                        self.epochs = epochs
                        self.device = device
                        self.model = None
                        self.optimizer = None

                    def _train_model(self, train_loader):
                        for epoch in range(self.epochs):
                            self.model.train()
                            for batch in train_loader:
                                inputs = self._assemble_input(batch)
                                loss = self.model(inputs)["loss"]
                                self.optimizer.zero_grad()
                                loss.backward()
                                self.optimizer.step()
                        self.best_state = {k: v.detach().clone() for k, v in self.model.state_dict().items()}
            """,
            "core.py": """
                import torch.nn as nn


                class Encoder(nn.Module):
                    def __init__(self, d_model, n_heads, dropout):
                        super().__init__()
                        self.attention = nn.MultiheadAttention(d_model, n_heads, batch_first=True)
                        self.dropout = nn.Dropout(dropout)

                    def forward(self, x):
                        return self.dropout(self.attention(x, x, x)[0])


                class ForecastNet(nn.Module):
                    def __init__(self, n_features, d_model, n_heads, dropout):
                        super().__init__()
                        self.embedding = nn.Linear(n_features, d_model)
                        self.encoder = Encoder(d_model, n_heads, dropout)
                        self.head = nn.Linear(d_model, n_features)

                    def forward(self, inputs):
                        out = self.head(self.encoder(self.embedding(inputs["X"])))
                        return {"forecast": out, "loss": ((out - inputs["y"]) ** 2).mean()}
            """,
        },
    ),
    Quiet(  # the method that calls the inference helper decides the mode: it switches to eval first
        """
        import torch
        from torch.utils.data import DataLoader

        from base import BaseForecaster
        from core import ForecastNet


        class TransformerForecaster(BaseForecaster):
            def __init__(self, n_features, d_model=64, n_heads=4, dropout=0.1, epochs=10, device="cuda"):
                super().__init__(epochs, device)
                self.model = ForecastNet(n_features, d_model, n_heads, dropout).to(device)
                self.optimizer = torch.optim.Adam(self.model.parameters(), lr=1e-3)

            def _assemble_input(self, batch):
                return {"X": batch[0].to(self.device), "y": batch[1].to(self.device)}

            def fit(self, train_set):
                self._train_model(DataLoader(train_set, batch_size=32, shuffle=True))
                self.model.load_state_dict(self.best_state)

            @torch.no_grad()
            def _predict_batches(self, test_set):
                collected = []
                for batch in DataLoader(test_set, batch_size=32):
                    results = self.model(self._assemble_input(batch))
                    collected.append(results["forecast"].cpu())
                return {"forecast": torch.cat(collected).numpy()}

            def forecast(self, test_set):
                self.model.eval()
                return self._predict_batches(test_set)["forecast"]
        """,
        files={
            "base.py": """
                import torch


                class BaseForecaster:
                    def __init__(self, epochs, device):
                        self.epochs = epochs
                        self.device = device
                        self.model = None
                        self.optimizer = None

                    def _train_model(self, train_loader):
                        for epoch in range(self.epochs):
                            self.model.train()
                            for batch in train_loader:
                                inputs = self._assemble_input(batch)
                                loss = self.model(inputs)["loss"]
                                self.optimizer.zero_grad()
                                loss.backward()
                                self.optimizer.step()
                        self.best_state = {k: v.detach().clone() for k, v in self.model.state_dict().items()}
            """,
            "core.py": """
                import torch.nn as nn


                class Encoder(nn.Module):
                    def __init__(self, d_model, n_heads, dropout):
                        super().__init__()
                        self.attention = nn.MultiheadAttention(d_model, n_heads, batch_first=True)
                        self.dropout = nn.Dropout(dropout)

                    def forward(self, x):
                        return self.dropout(self.attention(x, x, x)[0])


                class ForecastNet(nn.Module):
                    def __init__(self, n_features, d_model, n_heads, dropout):
                        super().__init__()
                        self.embedding = nn.Linear(n_features, d_model)
                        self.encoder = Encoder(d_model, n_heads, dropout)
                        self.head = nn.Linear(d_model, n_features)

                    def forward(self, inputs):
                        out = self.head(self.encoder(self.embedding(inputs["X"])))
                        return {"forecast": out, "loss": ((out - inputs["y"]) ** 2).mean()}
            """,
        },
    ),
    Quiet(  # `from_pretrained` hands the model over in eval mode, whichever method loads it
        """
        import torch
        from transformers import AutoModelForTokenClassification, AutoTokenizer


        class Tagger:
            def __init__(self):
                self.model = None

            def load(self, name="bert-base-cased"):
                self.tokenizer = AutoTokenizer.from_pretrained(name)
                self.model = AutoModelForTokenClassification.from_pretrained(name)

            @torch.no_grad()
            def tag(self, text):
                encoded = self.tokenizer(text, return_tensors="pt")
                return self.model(**encoded).logits.argmax(-1)
        """
    ),
    Quiet(  # the predictor switches the network it builds to eval mode once loaded
        """
        import torch
        from torchvision.models import resnet50


        class Classifier:
            def __init__(self, checkpoint):
                self.model = resnet50(num_classes=5)
                self.model.load_state_dict(torch.load(checkpoint, map_location="cpu"))
                self.model.eval()

            @torch.no_grad()
            def predict(self, images):
                return self.model(images).softmax(-1)
        """
    ),
    Quiet(  # Monte Carlo dropout on purpose: the class trains nothing and keeps its model in training mode
        """
        import torch
        import torch.nn as nn


        class UncertaintyEstimator:
            def __init__(self, checkpoint, samples=20):
                self.samples = samples
                self.model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Dropout(0.3), nn.Linear(128, 1))
                self.model.load_state_dict(torch.load(checkpoint))
                self.model.train()  # dropout stays on: each pass is one sample

            @torch.no_grad()
            def predict(self, x):
                draws = torch.stack([self.model(x) for _ in range(self.samples)])
                return draws.mean(0), draws.std(0)
        """
    ),
    Quiet(  # a network without dropout or batch-norm computes the same in both modes
        """
        import torch

        from models import MLP


        class Scorer:
            def __init__(self, checkpoint):
                self.net = MLP(32, 1)
                self.net.load_state_dict(torch.load(checkpoint))

            @torch.no_grad()
            def score(self, features):
                return self.net(features).sigmoid()
        """,
        files={
            "models.py": """
                import torch.nn as nn


                class MLP(nn.Module):
                    def __init__(self, n_in, n_out):
                        super().__init__()
                        self.layers = nn.Sequential(nn.Linear(n_in, 64), nn.ReLU(), nn.Linear(64, n_out))

                    def forward(self, x):
                        return self.layers(x)
            """,
        },
    ),
    Quiet(  # the restored module is switched to eval mode before predicting
        """
        import torch


        def predict(path, batches):
            model = torch.load(path, map_location="cpu")
            model.eval()
            with torch.no_grad():
                return [model(batch).argmax(1) for batch in batches]
        """
    ),
    Quiet(  # a helper that runs the forward and backwards it is a training step, whatever it is called
        """
        import torch
        import torch.nn as nn


        class Classifier(nn.Module):
            def __init__(self):
                super().__init__()
                self.body = nn.Sequential(nn.Linear(32, 64), nn.Dropout(0.2), nn.Linear(64, 4))

            def forward(self, x):
                return self.body(x)


        def evaluate_and_update(model, batch, optimizer):
            x, y = batch
            loss = nn.functional.cross_entropy(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            return loss.item()


        model = Classifier()
        optimizer = torch.optim.Adam(model.parameters())
        for batch in loader:
            evaluate_and_update(model, batch, optimizer)
        """
    ),
    Quiet(  # an embedding helper whose every caller switches the encoder to eval mode before handing it over
        """
        import torch
        import torch.nn as nn


        class Encoder(nn.Module):
            def __init__(self):
                super().__init__()
                self.body = nn.Sequential(nn.Linear(300, 256), nn.BatchNorm1d(256), nn.ReLU())

            def forward(self, x):
                return self.body(x)


        def embed_corpus(encoder, batches):
            with torch.no_grad():
                return torch.cat([encoder(batch).cpu() for batch in batches])


        def build_index(encoder, corpus):
            encoder.eval()
            return embed_corpus(encoder, corpus)


        def refresh_index(net, corpus):
            net.eval()
            vectors = embed_corpus(net, corpus)
            net.train()
            return vectors


        build_index(Encoder(), corpus)
        """
    ),
    Quiet(  # a model without dropout or batch-norm computes the same in both modes
        """
        import torch
        import torch.nn as nn


        class Regressor(nn.Module):
            def __init__(self):
                super().__init__()
                self.body = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 1))

            def forward(self, x):
                return self.body(x)


        def predictions(model, loader):
            with torch.no_grad():
                return torch.cat([model(x).squeeze(-1).cpu() for x, _ in loader])


        model = Regressor()
        model.load_state_dict(torch.load("regressor.pt"))
        print(predictions(model, loader))
        """
    ),
    Quiet(  # a frozen pretrained backbone, switched to eval mode where it is built, used as a feature extractor
        """
        import torch
        from torchvision import models


        class FeatureBank:
            def __init__(self):
                self.backbone = models.resnet50(weights="IMAGENET1K_V2")
                self.backbone.fc = torch.nn.Identity()
                self.backbone.eval()
                self.backbone.requires_grad_(False)

            @torch.no_grad()
            def features(self, images):
                return self.backbone(images).flatten(1).cpu()
        """
    ),
    Quiet(  # a trainer hands its model to a helper that resizes it, without grad: the helper runs no forward
        """
        import torch
        import torch.nn.functional as F


        def grow_embeddings(model, vocab_size):
            old = model.embed.weight
            with torch.no_grad():
                model.embed.weight = torch.nn.Parameter(torch.cat([old, old.new_zeros(vocab_size - len(old), old.size(1))]))


        class Finetuner:
            def __init__(self, model, tokenizer, loader):
                self.model = model
                self.tokenizer = tokenizer
                self.loader = loader
                self.optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5)

            def setup(self):
                with torch.no_grad():
                    grow_embeddings(self.model, len(self.tokenizer))

            def train(self, epochs):
                self.model.train()
                for epoch in range(epochs):
                    for tokens, labels in self.loader:
                        loss = F.cross_entropy(self.model(tokens).flatten(0, 1), labels.flatten())
                        self.optimizer.zero_grad()
                        loss.backward()
                        self.optimizer.step()
        """
    ),
    Quiet(  # no-grad fakes from the generator feed the discriminator's loss: that is training, in training mode
        """
        import torch
        import torch.nn as nn


        class Generator(nn.Module):
            def __init__(self):
                super().__init__()
                self.net = nn.Sequential(nn.Linear(64, 128), nn.BatchNorm1d(128), nn.ReLU(), nn.Linear(128, 784))

            def forward(self, z):
                return self.net(z)


        def fake_batch(generator, size):
            with torch.no_grad():
                return generator(torch.randn(size, 64))


        def train_discriminator(generator, discriminator, loader, optimizer):
            generator.train()
            for real in loader:
                logits = discriminator(torch.cat([real, fake_batch(generator, real.size(0))]))
                targets = torch.cat([torch.ones(real.size(0), 1), torch.zeros(real.size(0), 1)])
                loss = nn.functional.binary_cross_entropy_with_logits(logits, targets)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()


        train_discriminator(Generator(), discriminator, loader, optimizer)
        """
    ),
    Quiet(  # the callable a scorer is handed is a metric, not a model: nothing shows it is a module
        """
        class Scorer:
            def __init__(self, metric, threshold=0.5):
                self.metric = metric
                self.threshold = threshold

            def evaluate(self, predictions, references):
                return self.metric([p > self.threshold for p in predictions], references)
        """
    ),
    Quiet(  # the predictor switches the model it is handed to eval mode in its constructor
        """
        import torch


        class Predictor:
            def __init__(self, model, src_vocab, tgt_vocab):
                self.model = model
                self.model.eval()
                self.src_vocab = src_vocab
                self.tgt_vocab = tgt_vocab

            def predict(self, src_seq):
                src_ids = torch.tensor([self.src_vocab.indices(src_seq)])
                with torch.no_grad():
                    logits, _ = self.model(src_ids)
                return self.tgt_vocab.tokens(logits.argmax(-1)[0].tolist())
        """
    ),
    Quiet(  # the module's `predict` switches itself to eval mode; `decode` is a helper `evaluate` calls after `self.eval()`
        """
        import torch
        from torch import nn


        class Tagger(nn.Module):
            def __init__(self, encoder, num_tags):
                super().__init__()
                self.encoder = encoder
                self.drop = nn.Dropout(0.5)
                self.out = nn.Linear(encoder.dim, num_tags)

            def forward(self, tokens):
                return self.out(self.drop(self.encoder(tokens)))

            @torch.no_grad()
            def predict(self, tokens):
                self.eval()
                return self(tokens).argmax(-1)

            def infer_tags(self, tokens):
                return self(tokens).argmax(-1)

            @torch.no_grad()
            def evaluate(self, loader):
                self.eval()
                return sum((self.infer_tags(tokens) == tags).float().mean().item() for tokens, tags in loader)
        """
    ),
    Quiet(  # a regression module with no dropout or batch-norm, and no part of unknown kind: both modes are the same
        """
        import torch
        from torch import nn


        class LinearForecaster(nn.Module):
            def __init__(self, window, horizon):
                super().__init__()
                self.window = window
                self.proj = nn.Linear(window, horizon)

            def forward(self, history):
                return self.proj(history[:, -self.window:])

            @torch.no_grad()
            def predict(self, history):
                return self(history)
        """
    ),
    Quiet(  # restored weights and switched to eval mode by the project's helper before predicting
        """
        import torch

        from architectures import network_from_config
        from sliding_window import predict_sliding_window


        def prepare(network):
            network.eval()
            return network


        def predict_cases(config, checkpoint, cases):
            network = network_from_config(config)
            network.load_state_dict(torch.load(checkpoint)["weights"])
            prepare(network)
            with torch.no_grad():
                return [predict_sliding_window(network, case, tile=(128, 128, 128)) for case in cases]
        """,
        files={
            "sliding_window.py": """
                def predict_sliding_window(network, volume, tile):
                    return network(volume[None])[0]
            """,
            "architectures.py": """
                import importlib


                def network_from_config(config):
                    module = importlib.import_module(config["module"])
                    return getattr(module, config["class"])(**config["kwargs"])
            """,
        },
    ),
    Quiet(  # restored weights fine-tuned on new data: the no-grad pass is the training loop's monitoring
        """
        import torch
        import torch.nn.functional as F

        from architectures import network_from_config


        def finetune(config, checkpoint, loader, probe):
            network = network_from_config(config)
            network.load_state_dict(torch.load(checkpoint))
            optimizer = torch.optim.SGD(network.parameters(), lr=1e-3)
            for images, labels in loader:
                loss = F.cross_entropy(network(images), labels)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                with torch.no_grad():
                    print(network(probe).softmax(1)[:, 1].mean().item())
        """,
        files={
            "architectures.py": """
                import importlib


                def network_from_config(config):
                    module = importlib.import_module(config["module"])
                    return getattr(module, config["class"])(**config["kwargs"])
            """,
        },
    ),
    Quiet(  # the batch helper runs only from `evaluate`, which switches the mode first
        """
        import torch

        from text_models import TextClassifier


        class SentimentModel:
            def __init__(self, vocab_size, num_labels):
                self.model = TextClassifier(vocab_size, num_labels)

            def fit(self, loader, optimizer, loss_fn):
                self.model.train()
                for tokens, labels in loader:
                    optimizer.zero_grad()
                    loss_fn(self.model(tokens), labels).backward()
                    optimizer.step()

            @torch.no_grad()
            def _predict_batch(self, tokens):
                return self.model(tokens).argmax(-1)

            def evaluate(self, loader):
                self.model.eval()
                return sum((self._predict_batch(tokens) == labels).sum().item() for tokens, labels in loader)
        """,
        files={
            "text_models.py": """
                import torch.nn as nn


                class TextClassifier(nn.Module):
                    def __init__(self, vocab_size, num_labels, dim=128):
                        super().__init__()
                        self.embed = nn.EmbeddingBag(vocab_size, dim)
                        self.drop = nn.Dropout(0.3)
                        self.out = nn.Linear(dim, num_labels)

                    def forward(self, tokens):
                        return self.out(self.drop(self.embed(tokens)))
            """,
        },
    ),
    Quiet(  # an agent acting with the policy it trains, of a kind not known here: acting is not an evaluation
        """
        import torch
        import torch.nn.functional as F


        class Agent:
            def __init__(self, policy, lr=1e-3):
                self.policy = policy
                self.optimizer = torch.optim.Adam(policy.parameters(), lr=lr)

            @torch.no_grad()
            def act(self, state):
                return self.policy(state.unsqueeze(0)).argmax(-1).item()

            def learn(self, states, actions, returns):
                self.policy.train()
                log_probs = F.log_softmax(self.policy(states), -1).gather(1, actions[:, None]).squeeze(1)
                loss = -(log_probs * returns).mean()
                self.optimizer.zero_grad()
                loss.backward()
                self.optimizer.step()
        """
    ),
    Quiet(  # the training function switches the model to eval mode itself before handing it over
        """
        import torch


        def evaluate_accuracy(data_iter, net):
            with torch.no_grad():
                return sum((net(X).argmax(1) == y).sum().item() for X, y in data_iter)


        def train_classifier(net, train_iter, test_iter, loss_fn, optimizer, num_epochs):
            for epoch in range(num_epochs):
                net.train()
                for X, y in train_iter:
                    optimizer.zero_grad()
                    loss_fn(net(X), y).backward()
                    optimizer.step()
                net.eval()
                print(epoch, evaluate_accuracy(test_iter, net))
        """
    ),
    Quiet(  # pseudo-labels from the model being trained, in a helper not named for evaluation: the mode may be wanted
        """
        import torch
        import torch.nn.functional as F


        def pseudo_labels(net, images, threshold):
            with torch.no_grad():
                probs = net(images).softmax(1)
            confidence, labels = probs.max(1)
            return labels, confidence > threshold


        def train_semi_supervised(net, labeled_loader, unlabeled_loader, optimizer, threshold=0.95):
            net.train()
            for (images, targets), unlabeled in zip(labeled_loader, unlabeled_loader):
                labels, keep = pseudo_labels(net, unlabeled, threshold)
                loss = F.cross_entropy(net(images), targets) + F.cross_entropy(net(unlabeled[keep]), labels[keep])
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
        """
    ),
    Quiet(  # a model's own decoding method under no_grad: `device=` in its loop is not a dev set, and the caller sets the mode (audiocraft's MAGNeT)
        """
        import math

        import torch
        import torch.nn as nn


        class MaskedLM(nn.Module):
            def __init__(self, dim, vocab):
                super().__init__()
                self.embed = nn.Embedding(vocab, dim)
                self.drop = nn.Dropout(0.1)
                self.head = nn.Linear(dim, vocab)

            def forward(self, tokens):
                return self.head(self.drop(self.embed(tokens)))

            @torch.no_grad()
            def decode(self, tokens, timesteps, mask_id, device):
                model = self
                for timestep in torch.linspace(0, 1, timesteps, device=device):
                    num_masked = max(int(math.cos(timestep.item() * math.pi / 2) * tokens.shape[-1]), 1)
                    scores = model(tokens).max(-1).values
                    tokens = tokens.scatter(1, scores.topk(num_masked, dim=-1).indices, mask_id)
                return tokens
        """
    ),
    Quiet(  # a shape check at the end of a model file: a fresh model on a made-up batch evaluates nothing
        """
        import torch
        import torch.nn as nn


        class VGG(nn.Module):
            def __init__(self, num_classes=10):
                super().__init__()
                self.features = nn.Sequential(nn.Conv2d(3, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU())
                self.classifier = nn.Sequential(nn.Dropout(0.5), nn.Linear(64 * 32 * 32, num_classes))

            def forward(self, x):
                return self.classifier(self.features(x).flatten(1))


        def test():
            net = VGG()
            x = torch.randn(2, 3, 32, 32)
            y = net(x)
            print(y.size())
        """
    ),
    Quiet(
        """
        import torch
        from torchvision import models

        model = models.resnet50()
        model.eval()
        with torch.no_grad():
            for images, labels in val_loader:
                outputs = model(images)
        """
    ),
    Quiet(
        """
        import torch
        import torch.nn as nn

        model = nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 2))
        with torch.no_grad():
            for x, y in val_loader:
                preds = model(x)
        """
    ),
    Quiet(
        """
        import torch
        from torchvision import models

        def evaluate(model, loader):
            model.eval()
            with torch.no_grad():
                for x, y in loader:
                    model(x)
            model.train()

        evaluate(models.resnet18(), val_loader)
        """
    ),
    Quiet(
        """
        import torch
        from torchvision import models

        model = models.resnet18()
        with torch.no_grad():
            for x, y in train_loader:
                features = model(x)
        """
    ),
    Quiet(
        """
        import pytorch_lightning as pl
        import torch.nn as nn

        class Lit(pl.LightningModule):
            def __init__(self):
                super().__init__()
                self.net = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.1))

            def validation_step(self, batch, batch_idx):
                return self.net(batch[0])
        """
    ),
    Quiet(
        """
        import torch
        from torchvision import models

        def set_mode(model, training):
            model.train(training)

        model = models.resnet18()
        set_mode(model, False)
        with torch.no_grad():
            for x, y in val_loader:
                model(x)
        """
    ),
    Quiet(
        """
        import torch
        from torchvision import models

        def freeze(net):
            net.eval()
            for p in net.parameters():
                p.requires_grad_(False)

        model = models.resnet18()
        freeze(model)
        with torch.no_grad():
            for x, y in val_loader:
                model(x)
        """
    ),
    Quiet(
        """
        import torch
        from transformers import AutoModelForSequenceClassification

        model = AutoModelForSequenceClassification.from_pretrained("bert-base-uncased")
        with torch.no_grad():
            for batch in val_loader:
                model(**batch)
        """
    ),
    Quiet(  # the mode follows the argument
        """
        import torch
        import torch.nn as nn

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.body = nn.Sequential(nn.Linear(64, 128), nn.Dropout(0.3), nn.Linear(128, 10))

            def forward(self, x):
                return self.body(x)

        def run_epoch(model, loader, criterion, optimizer=None):
            model.train(optimizer is not None)
            with torch.set_grad_enabled(optimizer is not None):
                for x, y in loader:
                    loss = criterion(model(x), y)
                    if optimizer is not None:
                        optimizer.zero_grad()
                        loss.backward()
                        optimizer.step()

        model = Net()
        criterion = nn.CrossEntropyLoss()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for epoch in range(10):
            run_epoch(model, train_loader, criterion, optimizer)
            run_epoch(model, val_loader, criterion)
        """
    ),
    Quiet(  # timm's ViT has no batch-norm, and its dropout rates default to 0: the mode changes nothing
        """
        import timm
        import torch

        model = timm.create_model("vit_base_patch16_224", num_classes=10)
        model.train()
        with torch.no_grad():
            for images, labels in val_loader:
                model(images)
        """
    ),
    Quiet(  # test-time adaptation: the loop over the test set trains on it (batch-norm statistics adapt on purpose)
        """
        import torch
        import torch.nn.functional as F

        from model import ConvNet

        model = ConvNet(num_classes=10)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.001)
        model.load_state_dict(torch.load("source.pt"))
        for images, _ in test_loader:
            probs = model(images).softmax(1)
            entropy = -(probs * probs.log()).sum(1).mean()
            optimizer.zero_grad()
            entropy.backward()
            optimizer.step()
        """,
        files={
            "model.py": """
                import torch.nn as nn


                class ConvNet(nn.Module):
                    def __init__(self, num_classes):
                        super().__init__()
                        self.features = nn.Sequential(nn.Conv2d(1, 16, 5, padding=2), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2))
                        self.fc = nn.Linear(14 * 14 * 16, num_classes)

                    def forward(self, x):
                        return self.fc(self.features(x).flatten(1))
            """,
        },
    ),
    Quiet(  # the loop is over a dictionary's values, not a validation set, in a file that trains
        """
        import torch
        import torch.nn as nn

        heads = {name: nn.Sequential(nn.Linear(64, 64), nn.Dropout(0.1), nn.Linear(64, 2)) for name in ("a", "b")}
        optimizer = torch.optim.Adam([p for head in heads.values() for p in head.parameters()])
        for x, y in train_loader:
            loss = sum(nn.functional.cross_entropy(head(x), y) for head in heads.values())
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        for head in heads.values():
            print(head(torch.zeros(1, 64)))
        """
    ),
    Quiet(  # the same trainer with stochastic depth off by default: a ViT without dropout computes the same in both modes
        """
        import argparse

        import timm
        import torch
        import torch.nn.functional as F


        class Trainer:
            def __init__(self, args, train_loader, val_loader):
                self.model = timm.create_model(args.arch, num_classes=100, drop_path_rate=args.drop_path).cuda()
                self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=args.lr)
                self.train_loader = train_loader
                self.val_loader = val_loader

            def train_one_epoch(self):
                self.model.train()
                for images, targets in self.train_loader:
                    loss = F.cross_entropy(self.model(images.cuda()), targets.cuda())
                    self.optimizer.zero_grad()
                    loss.backward()
                    self.optimizer.step()

            @torch.no_grad()
            def validate(self):
                correct = 0
                for images, targets in self.val_loader:
                    correct += (self.model(images.cuda()).argmax(1) == targets.cuda()).sum().item()
                return correct


        if __name__ == "__main__":
            parser = argparse.ArgumentParser()
            parser.add_argument("--arch", default="vit_small_patch16_224")
            parser.add_argument("--drop-path", type=float, default=0.0)
            parser.add_argument("--lr", type=float, default=5e-4)
            args = parser.parse_args()
            trainer = Trainer(args, train_loader, val_loader)
            for epoch in range(100):
                trainer.train_one_epoch()
                print(epoch, trainer.validate())
        """
    ),
    Quiet(  # after the star import the file defines its own class of that name, without dropout: that one is built
        """
        import torch
        import torch.nn as nn

        from models import *


        class SpeechClassifier(nn.Module):
            def __init__(self, n_mels, n_classes):
                super().__init__()
                self.out = nn.Linear(n_mels, n_classes)

            def forward(self, mels):
                return self.out(mels.mean(1))


        model = SpeechClassifier(n_mels=80, n_classes=35)
        model.load_state_dict(torch.load("speech.pt"))
        with torch.no_grad():
            for mels, labels in val_loader:
                predictions = model(mels).argmax(-1)
        """,
        files={
            "models.py": """
                import torch.nn as nn

                __all__ = ["SpeechClassifier"]


                class SpeechClassifier(nn.Module):
                    def __init__(self, n_mels, n_classes):
                        super().__init__()
                        self.rnn = nn.GRU(n_mels, 256, batch_first=True)
                        self.drop = nn.Dropout(0.2)
                        self.out = nn.Linear(256, n_classes)

                    def forward(self, mels):
                        hidden, _ = self.rnn(mels)
                        return self.out(self.drop(hidden[:, -1]))
            """,
        },
    ),
    Quiet(  # the transformer layer is built with dropout 0: nothing in the model depends on the mode
        """
        import torch

        from model import TinyLM


        def evaluate(model, loader):
            with torch.no_grad():
                return [model(tokens).argmax(-1) for tokens in loader]


        print(evaluate(TinyLM(vocab=32000), val_loader))
        """,
        files={
            "model.py": """
                import torch.nn as nn


                class TinyLM(nn.Module):
                    def __init__(self, vocab, d_model=256, dropout=None):
                        super().__init__()
                        self.embed = nn.Embedding(vocab, d_model)
                        layer = nn.TransformerEncoderLayer(d_model, nhead=4, dropout=0.0, batch_first=True)
                        self.encoder = nn.TransformerEncoder(layer, num_layers=4)
                        self.head = nn.Linear(d_model, vocab)

                    def forward(self, tokens):
                        return self.head(self.encoder(self.embed(tokens)))
            """,
        },
    ),
    Quiet(  # from_pretrained returned it in eval mode and nothing switches it back
        """
        import torch
        from transformers import BertForSequenceClassification

        model = BertForSequenceClassification.from_pretrained("bert-base-uncased").cuda()


        def predict(loader):
            with torch.no_grad():
                return [model(**batch).logits.argmax(-1).cpu() for batch in loader]
        """
    ),
    Quiet(  # the teacher is switched to eval mode where it is built, in the same expression
        """
        import torch
        import torch.nn.functional as F
        import torchvision


        def distill(student, loader, epochs, device="cuda"):
            teacher = torchvision.models.resnet50(weights="IMAGENET1K_V2").to(device).eval()
            optimizer = torch.optim.SGD(student.parameters(), lr=0.1)
            for _ in range(epochs):
                for images, labels in loader:
                    with torch.no_grad():
                        targets = teacher(images).softmax(-1)
                    loss = F.kl_div(student(images).log_softmax(-1), targets, reduction="batchmean")
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
        """
    ),
    Quiet(  # a rollout runs the policy without grad, and the policy's loss is stepped afterwards: it is trained, in training mode
        """
        import torch
        import torch.nn as nn


        class Policy(nn.Module):
            def __init__(self, observations, actions):
                super().__init__()
                self.body = nn.Sequential(nn.Linear(observations, 128), nn.Dropout(0.1), nn.ReLU(), nn.Linear(128, actions))

            def forward(self, obs):
                return self.body(obs)


        class Reinforce:
            def __init__(self, env):
                self.env = env
                self.policy = Policy(env.observation_size, env.action_count)
                self.optimizer = torch.optim.Adam(self.policy.parameters(), lr=3e-4)

            def rollout(self, steps):
                obs, trajectory = self.env.reset(), []
                for _ in range(steps):
                    with torch.no_grad():
                        action = torch.distributions.Categorical(logits=self.policy(obs)).sample()
                    next_obs, reward = self.env.step(action)
                    trajectory.append((obs, action, reward))
                    obs = next_obs
                return trajectory

            def update(self, trajectory):
                obs = torch.stack([step[0] for step in trajectory])
                actions = torch.stack([step[1] for step in trajectory])
                returns = torch.tensor([step[2] for step in trajectory]).flip(0).cumsum(0).flip(0)
                log_probs = self.policy(obs).log_softmax(-1).gather(1, actions[:, None])[:, 0]
                loss = -(log_probs * returns).mean()
                self.optimizer.zero_grad()
                loss.backward()
                self.optimizer.step()
        """
    ),
    Quiet(  # a frozen target network without dropout or batch-norm computes the same in either mode
        """
        import torch
        import torch.nn as nn
        import torch.nn.functional as F

        from nets import QNetwork


        def train_dqn(replay, steps, gamma=0.99):
            online, target = QNetwork(), QNetwork()
            target.load_state_dict(online.state_dict())
            optimizer = torch.optim.Adam(online.parameters(), lr=1e-4)
            for step in range(steps):
                obs, actions, rewards, next_obs, done = replay.sample(64)
                with torch.no_grad():
                    bootstrap = rewards + gamma * (1 - done) * target(next_obs).max(1).values
                loss = F.smooth_l1_loss(online(obs).gather(1, actions[:, None])[:, 0], bootstrap)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
        """,
        files={
            "nets.py": """
                import torch.nn as nn


                class QNetwork(nn.Module):
                    def __init__(self, observations=8, actions=4):
                        super().__init__()
                        self.body = nn.Sequential(nn.Linear(observations, 256), nn.ReLU(), nn.Linear(256, actions))

                    def forward(self, obs):
                        return self.body(obs)
            """,
        },
    ),
    Quiet(  # the teacher is handed to a helper of another file that may switch its mode (it freezes it): not known here
        """
        import torch
        import torch.nn.functional as F
        from torchvision.models import resnet50

        from training_utils import freeze


        def distill(student, loader, device="cuda"):
            teacher = resnet50(weights="IMAGENET1K_V2").to(device)
            freeze(teacher)
            optimizer = torch.optim.SGD(student.parameters(), lr=0.1)
            for images, _ in loader:
                with torch.no_grad():
                    targets = teacher(images)
                loss = F.mse_loss(student(images), targets)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
        """
    ),
    Quiet(  # the module keeps its frozen encoder in eval mode whenever it is switched to training
        """
        import torch
        import torch.nn as nn
        import torch.nn.functional as F
        from transformers import AutoModel


        class CaptionScorer(nn.Module):
            def __init__(self, image_dim=512):
                super().__init__()
                self.text_encoder = AutoModel.from_pretrained("bert-base-uncased").requires_grad_(False)
                self.image_proj = nn.Linear(image_dim, self.text_encoder.config.hidden_size)

            def train(self, mode=True):
                super().train(mode)
                self.text_encoder.eval()
                return self

            def forward(self, image_features, input_ids, attention_mask):
                with torch.no_grad():
                    text = self.text_encoder(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state[:, 0]
                return F.cosine_similarity(self.image_proj(image_features), text)


        def train(loader, device="cuda"):
            model = CaptionScorer().to(device)
            optimizer = torch.optim.AdamW(model.image_proj.parameters(), lr=1e-4)
            model.train()
            for batch in loader:
                scores = model(batch["image_features"], batch["input_ids"], batch["attention_mask"])
                loss = F.binary_cross_entropy_with_logits(scores, batch["matches"].float())
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
        """
    ),
    Quiet(  # the same predict, whose only caller (another file) switches the module to eval first
        """
        import torch
        import torch.nn as nn


        class TextClassifier(nn.Module):
            def __init__(self, vocab_size, num_labels, dim=128):
                super().__init__()
                self.embed = nn.EmbeddingBag(vocab_size, dim)
                self.dropout = nn.Dropout(0.3)
                self.head = nn.Linear(dim, num_labels)

            def forward(self, tokens):
                return self.head(self.dropout(self.embed(tokens)))

            def predict(self, tokens):
                with torch.no_grad():
                    return self(tokens).argmax(dim=-1)
        """,
        files={
            "fit.py": """
                import torch.nn.functional as F

                from train import TextClassifier


                def fit(model: TextClassifier, loader, optimizer, preview_tokens):
                    model.train()
                    for tokens, labels in loader:
                        loss = F.cross_entropy(model(tokens), labels)
                        optimizer.zero_grad()
                        loss.backward()
                        optimizer.step()
                    model.eval()
                    return model.predict(preview_tokens)
            """,
        },
    ),
    Quiet(  # the framework is handed, by its only script, a model with no dropout or batch-norm: both modes agree
        """
        import torch
        from torch import nn


        class BagTrainer:
            def __init__(self, model, train_loader, lr=0.1):
                self.model = nn.DataParallel(model)
                self.train_loader = train_loader
                self.optimizer = torch.optim.SGD(self.model.parameters(), lr=lr)
                self.criterion = nn.CrossEntropyLoss()

            def train_model(self, epochs):
                for epoch in range(epochs):
                    self.model.train()
                    for tokens, labels in self.train_loader:
                        loss = self.criterion(self.model(tokens.cuda()), labels.cuda())
                        self.optimizer.zero_grad()
                        loss.backward()
                        self.optimizer.step()

            def infer(self, bag):
                with torch.no_grad():
                    logits = self.model(bag.cuda())
                return logits.softmax(-1).argmax(-1).tolist()
        """,
        files={
            "run.py": """
                from torch import nn

                from train import BagTrainer

                model = nn.Sequential(nn.EmbeddingBag(30000, 128), nn.Linear(128, 53))
                trainer = BagTrainer(model, train_loader)
                trainer.train_model(epochs=60)
            """,
        },
    ),
    Quiet(  # the loader builds the classifier around an encoder with no dropout or batch-norm: both modes agree
        """
        from torch import nn


        class RelationClassifier(nn.Module):
            def __init__(self, sentence_encoder, num_class, rel2id):
                super().__init__()
                self.sentence_encoder = sentence_encoder
                self.fc = nn.Linear(sentence_encoder.hidden_size, num_class)
                self.id2rel = {index: relation for relation, index in rel2id.items()}

            def forward(self, tokens, mask):
                return self.fc(self.sentence_encoder(tokens, mask))

            def infer(self, sentence):
                tokens, mask = self.sentence_encoder.tokenize(sentence)
                score, pred = self.forward(tokens, mask).softmax(-1).max(-1)
                return self.id2rel[pred.item()], score.item()
        """,
        files={
            "encoders.py": """
                import torch
                from torch import nn


                class BagOfWordsEncoder(nn.Module):
                    def __init__(self, word2id, hidden_size=230):
                        super().__init__()
                        self.word2id = word2id
                        self.hidden_size = hidden_size
                        self.embed = nn.EmbeddingBag(len(word2id), hidden_size)

                    def forward(self, tokens, mask):
                        return self.embed(tokens, per_sample_weights=mask, mode="sum")

                    def tokenize(self, sentence):
                        ids = [self.word2id.get(word, 0) for word in sentence.split()]
                        return torch.tensor([ids]), torch.ones(1, len(ids))
            """,
            "hub.py": """
                import torch

                from encoders import BagOfWordsEncoder
                from train import RelationClassifier


                def get_model(checkpoint, word2id, rel2id):
                    model = RelationClassifier(BagOfWordsEncoder(word2id), len(rel2id), rel2id)
                    model.load_state_dict(torch.load(checkpoint, map_location="cpu")["state_dict"])
                    return model
            """,
        },
    ),
    Quiet(  # every script hands the training helper a linear model: no dropout or batch-norm, both modes agree
        """
        import torch
        import torch.nn.functional as F


        def validate(net, loader, device):
            correct = total = 0
            with torch.no_grad():
                for data, target in loader:
                    output = net(data.to(device))
                    correct += (output.argmax(1) == target.to(device)).sum().item()
                    total += target.numel()
            return correct / total


        def train(net, optimizer, loader, epochs, device, val_loader=None):
            net.train()
            for epoch in range(epochs):
                for data, target in loader:
                    loss = F.cross_entropy(net(data.to(device)), target.to(device))
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
                if val_loader is not None:
                    print(epoch, validate(net, val_loader, device))
        """,
        files={
            "main.py": """
                import torch
                from torch import nn

                from train import train

                model = nn.Sequential(nn.Linear(103, 256), nn.ReLU(), nn.Linear(256, 9)).cuda()
                optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
                train(model, optimizer, train_loader, 100, "cuda", val_loader=val_loader)
            """,
        },
    ),
    Quiet(  # the training script switches the model to eval mode before the helper of another file scores it
        """
        import torch


        @torch.no_grad()
        def evaluate(model, loader, device):
            correct = 0
            for images, labels in loader:
                correct += (model(images.to(device)).argmax(1) == labels.to(device)).sum().item()
            return correct / len(loader.dataset)
        """,
        files={
            "main.py": """
                import torch
                from torch import nn

                from train import evaluate

                model = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Dropout(0.5), nn.Linear(256, 10)).cuda()
                optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
                for epoch in range(10):
                    model.train()
                    for images, labels in train_loader:
                        loss = nn.functional.cross_entropy(model(images.cuda()), labels.cuda())
                        optimizer.zero_grad()
                        loss.backward()
                        optimizer.step()
                    model.eval()
                    print(epoch, evaluate(model, val_loader, "cuda"))
            """,
        },
    ),
    Quiet(  # `from_pretrained` returns the model in eval mode, and nothing here trains it before the imported helper scores it
        """
        from transformers import AutoModelForSequenceClassification

        from utils import evaluate


        def main(val_loader, device):
            model = AutoModelForSequenceClassification.from_pretrained("bert-base-uncased", num_labels=2).to(device)
            print(evaluate(model, val_loader, device))
        """,
        files={
            "utils.py": """
                import torch


                @torch.no_grad()
                def evaluate(model, loader, device):
                    correct = 0
                    for batch in loader:
                        batch = {key: value.to(device) for key, value in batch.items()}
                        correct += (model(**batch).logits.argmax(-1) == batch["labels"]).sum().item()
                    return correct / len(loader.dataset)
            """,
        },
    ),
    Quiet(  # the sampling script switches the restored module to eval mode before generating
        """
        import argparse

        import torch

        parser = argparse.ArgumentParser()
        parser.add_argument("--checkpoint", default="model.pt")
        parser.add_argument("--words", type=int, default=1000)
        args = parser.parse_args()

        with open(args.checkpoint, "rb") as f:
            model = torch.load(f, map_location="cpu")

        model.eval()
        hidden = model.init_hidden(1)
        token = torch.randint(100, (1, 1))
        with open("generated.txt", "w") as out:
            for i in range(args.words):
                output, hidden = model(token, hidden)
                weights = output.squeeze().div(0.8).exp()
                token.fill_(torch.multinomial(weights, 1)[0])
                out.write(f"{token.item()} ")
        """,
    ),
    Quiet(  # the same scorer, which switches the model it is handed to eval mode itself
        """
        import torch

        from nets import ConvNet


        class Scorer:
            def accuracy(self, net, batches):
                net.eval()
                hits = 0
                with torch.no_grad():
                    for inputs, targets in batches:
                        hits += (net(inputs).argmax(1) == targets).sum().item()
                return hits


        def fit(net, batches, held_out, rounds):
            opt = torch.optim.SGD(net.parameters(), lr=0.1)
            for _ in range(rounds):
                net.train()
                for inputs, targets in batches:
                    opt.zero_grad()
                    torch.nn.functional.cross_entropy(net(inputs), targets).backward()
                    opt.step()
                print(Scorer().accuracy(net, held_out))


        fit(ConvNet(), train_batches, dev_batches, 5)
        """,
        files={
            "nets.py": """
            from torch import nn


            class ConvNet(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.body = nn.Sequential(nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8), nn.ReLU(), nn.Flatten(), nn.LazyLinear(10))

                def forward(self, x):
                    return self.body(x)
            """,
        },
    ),
    Quiet(  # every N steps a lazy regularisation term joins the step's loss: the backward after the branch runs through it
        """
        import torch
        import torch.nn.functional as F

        from models import PointClassifier


        def next_batch(loader, device):
            points, labels = next(iter(loader))
            return points.to(device), labels.to(device)


        def main(args, train_loader, unlabelled_loader):
            net = PointClassifier(args.classes).to(args.device)
            optimizer = torch.optim.Adam(net.parameters(), lr=1e-3)
            for epoch in range(args.epochs):
                for step, (points, labels) in enumerate(train_loader):
                    optimizer.zero_grad()
                    logits = net(points.to(args.device))
                    loss = F.cross_entropy(logits, labels.to(args.device))
                    if step % args.reg_every == 0:
                        extra, _ = next_batch(unlabelled_loader, args.device)
                        penalty = net(extra).logsumexp(1).pow(2).mean()
                        loss = loss + args.reg_weight * penalty
                    loss.backward()
                    optimizer.step()
        """,
        files={
            "models.py": """
            import torch.nn as nn


            class PointClassifier(nn.Module):
                def __init__(self, classes):
                    super().__init__()
                    self.features = nn.Sequential(nn.Conv1d(3, 64, 1), nn.BatchNorm1d(64), nn.ReLU(), nn.AdaptiveMaxPool1d(1))
                    self.head = nn.Sequential(nn.Flatten(), nn.Linear(64, 32), nn.Dropout(0.3), nn.Linear(32, classes))

                def forward(self, points):
                    return self.head(self.features(points))
            """,
        },
    ),
    Quiet(  # every N steps an extra generator update: its branch backwards and steps, part of training
        """
        import torch
        import torch.nn.functional as F
        from torchvision.utils import save_image

        from nets import Discriminator, Generator


        class GANTrainer:
            def __init__(self, args):
                self.args = args
                self.netG, self.netD = Generator(args.nz), Discriminator()
                self.optG = torch.optim.Adam(self.netG.parameters(), lr=2e-4, betas=(0.5, 0.999))
                self.optD = torch.optim.Adam(self.netD.parameters(), lr=2e-4, betas=(0.5, 0.999))
                self.fixed_noise = torch.randn(64, args.nz, 1, 1)

            def fit(self, loader):
                for epoch in range(self.args.epochs):
                    for i, (real, _) in enumerate(loader):
                        fake = self.netG(torch.randn(real.size(0), self.args.nz, 1, 1))
                        self.optD.zero_grad()
                        errD = F.softplus(-self.netD(real)).mean() + F.softplus(self.netD(fake.detach())).mean()
                        errD.backward()
                        self.optD.step()
                        self.optG.zero_grad()
                        errG = F.softplus(-self.netD(fake)).mean()
                        errG.backward()
                        self.optG.step()
                        if i % self.args.extra_g_every == 0:
                            self.optG.zero_grad()
                            fake = self.netG(torch.randn(real.size(0), self.args.nz, 1, 1))
                            errG = F.softplus(-self.netD(fake)).mean()
                            errG.backward()
                            self.optG.step()
        """,
        files={
            "nets.py": """
            import torch.nn as nn


            class Generator(nn.Module):
                def __init__(self, nz, width=64):
                    super().__init__()
                    self.main = nn.Sequential(
                        nn.ConvTranspose2d(nz, width, 4, 1, 0), nn.BatchNorm2d(width), nn.ReLU(True),
                        nn.ConvTranspose2d(width, 3, 4, 2, 1), nn.Tanh(),
                    )

                def forward(self, z):
                    return self.main(z)


            class Discriminator(nn.Module):
                def __init__(self, width=64):
                    super().__init__()
                    self.main = nn.Sequential(nn.Conv2d(3, width, 4, 2, 1), nn.LeakyReLU(0.2, True), nn.Flatten(), nn.LazyLinear(1))

                def forward(self, x):
                    return self.main(x)
            """,
        },
    ),
    Quiet(  # the same, with a model that main block builds without dropout or batch-norm (group norm)
        """
        import torch


        @torch.no_grad()
        def dice_score(net, loader, device):
            total, batches = 0.0, 0
            for images, masks in loader:
                probs = torch.sigmoid(net(images.to(device)))
                hits = ((probs > 0.5).float() * masks.to(device)).sum()
                total += (2 * hits / (probs.sum() + masks.sum() + 1e-6)).item()
                batches += 1
            return total / max(batches, 1)
        """,
        files={
            "fit.py": """
            import torch
            import torch.nn.functional as F

            from nets import SegNet
            from train import dice_score


            def fit(net, train_loader, val_loader, epochs, device):
                optimizer = torch.optim.Adam(net.parameters(), lr=1e-4)
                for epoch in range(epochs):
                    net.train()
                    for images, masks in train_loader:
                        loss = F.binary_cross_entropy_with_logits(net(images.to(device)), masks.to(device))
                        optimizer.zero_grad()
                        loss.backward()
                        optimizer.step()
                    print(f"epoch {epoch}: validation dice {dice_score(net, val_loader, device):.3f}")


            if __name__ == "__main__":
                segmenter = SegNet(in_channels=3, classes=1)
                train_loader, val_loader = make_loaders("data/")
                fit(segmenter, train_loader, val_loader, epochs=20, device="cuda")
            """,
            "nets.py": """
            import torch.nn as nn


            class ConvBlock(nn.Module):
                def __init__(self, cin, cout):
                    super().__init__()
                    self.conv = nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1), nn.GroupNorm(8, cout), nn.ReLU(inplace=True))

                def forward(self, x):
                    return self.conv(x)


            class SegNet(nn.Module):
                def __init__(self, in_channels, classes):
                    super().__init__()
                    self.body = nn.Sequential(ConvBlock(in_channels, 32), ConvBlock(32, 32), nn.Conv2d(32, classes, 1))

                def forward(self, x):
                    return self.body(x)
            """,
        },
    ),
    Quiet(  # the same detector and script, switched to eval mode for validation and back for training
        """
        import torch
        import torch.nn as nn

        from nets.detector import Detector
        from nets.loss import DetectionLoss


        def fit_one_epoch(net, criterion, optimizer, train_loader, val_loader, epoch):
            total_loss, val_loss = 0.0, 0.0
            net.train()
            for images, targets in train_loader:
                optimizer.zero_grad()
                loss = sum(criterion(output, targets) for output in net(images.cuda()))
                loss.backward()
                optimizer.step()
                total_loss += loss.item()
            net.eval()
            for images, targets in val_loader:
                with torch.no_grad():
                    outputs = net(images.cuda())
                    val_loss += sum(criterion(output, targets) for output in outputs).item()
            print(f"epoch {epoch}: train {total_loss:.3f} val {val_loss:.3f}")


        if __name__ == "__main__":
            net = nn.DataParallel(Detector(num_anchors=3, num_classes=20)).cuda()
            optimizer = torch.optim.Adam(net.parameters(), lr=1e-3)
            criterion = DetectionLoss()
            train_loader, val_loader = make_loaders("data/voc")
            for epoch in range(50):
                fit_one_epoch(net, criterion, optimizer, train_loader, val_loader, epoch)
        """,
        files={
            "nets/detector.py": """
            import torch.nn as nn


            def conv_bn(channels_in, channels_out, kernel_size):
                return nn.Sequential(nn.Conv2d(channels_in, channels_out, kernel_size, padding=kernel_size // 2, bias=False),
                                     nn.BatchNorm2d(channels_out), nn.LeakyReLU(0.1))


            class Detector(nn.Module):
                def __init__(self, num_anchors, num_classes):
                    super().__init__()
                    self.neck = nn.Sequential(conv_bn(3, 64, 3), conv_bn(64, 128, 3))
                    self.head = nn.Conv2d(128, num_anchors * (5 + num_classes), 1)

                def forward(self, x):
                    return [self.head(self.neck(x))]
            """,
        },
    ),
    Quiet(  # the factory's only mode-dependent layer is a dropout whose rate the caller passes, 0 here: nothing differs between modes
        """
        import torch
        import torch.nn as nn
        import torch.nn.functional as F

        from blocks import Tagger


        def main():
            model = nn.DataParallel(Tagger(vocab=30000, tags=17)).cuda()
            optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
            train_loader, dev_loader = get_loaders()
            for epoch in range(10):
                for tokens, tags in train_loader:
                    loss = F.cross_entropy(model(tokens.cuda()).flatten(0, 1), tags.cuda().flatten())
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
            with torch.no_grad():
                for tokens, tags in dev_loader:
                    predicted = model(tokens.cuda()).argmax(-1)
                    print((predicted == tags.cuda()).float().mean().item())
        """,
        files={
            "blocks.py": """
            import torch.nn as nn


            def projection(width, out, dropout=0.0):
                return nn.Sequential(nn.Linear(width, width), nn.GELU(), nn.Dropout(dropout), nn.Linear(width, out))


            class Tagger(nn.Module):
                def __init__(self, vocab, tags, width=256):
                    super().__init__()
                    self.embed = nn.Embedding(vocab, width)
                    self.out = projection(width, tags)

                def forward(self, tokens):
                    return self.out(self.embed(tokens))
            """,
        },
    ),
    Quiet(  # the detector's module, trained by a script of another file: its own inference method switches the mode
        """
        import torch
        import torch.nn as nn


        def conv_bn(channels_in, channels_out, kernel_size):
            return nn.Sequential(nn.Conv2d(channels_in, channels_out, kernel_size, padding=kernel_size // 2, bias=False),
                                 nn.BatchNorm2d(channels_out), nn.LeakyReLU(0.1))


        class Detector(nn.Module):
            def __init__(self, num_anchors, num_classes):
                super().__init__()
                self.neck = nn.Sequential(conv_bn(3, 64, 3), conv_bn(64, 128, 3))
                self.head = nn.Conv2d(128, num_anchors * (5 + num_classes), 1)

            def forward(self, x):
                return [self.head(self.neck(x))]

            @torch.no_grad()
            def detect(self, images, threshold=0.5):
                self.eval()
                scores = self(images)[0].sigmoid()
                return scores > threshold
        """,
        files={
            "fit.py": """
            import torch
            import torch.nn as nn

            from train import Detector


            if __name__ == "__main__":
                model = Detector(num_anchors=3, num_classes=20)
                net = nn.DataParallel(model).cuda()
                optimizer = torch.optim.Adam(net.parameters(), lr=1e-3)
                for images, targets in make_loader("data/voc"):
                    loss = sum(output.square().mean() for output in net(images.cuda()))
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
                print(model.detect(torch.randn(1, 3, 416, 416)).sum())
            """,
        },
    ),
)
