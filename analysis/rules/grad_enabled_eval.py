"""An evaluation or inference pass runs the model with autograd on.

`model.eval()` switches dropout and batch-norm to inference behaviour; it does not stop autograd.
Without `torch.no_grad()` (or `inference_mode()`), every validation forward records the graph
and keeps each layer's activations alive until the output is dropped: the pass needs the memory
of a training step — evaluation at a larger batch size is where runs die of out-of-memory — and
runs measurably slower, every epoch, for gradients nobody uses. It also applies to one function
used for both (`run_epoch(model, loader, optimizer=None)`, `train=False`) when the evaluation
call leaves grad on, and to an overridden `Trainer.prediction_step`, which the Hugging Face
`evaluation_loop` calls with grad enabled (the base method disables it itself). A step helper that backwards
only when its flag or its caller's phase says so trains nothing in a call that rules it out with a literal
(`apply_model_and_loss(x, y, backward=False)`, `run_batch(batch, mode="eval")` under `if mode == "train":`, or
`if self.phase != "train": return` after the caller set `self.phase = "valid"`: analysis/helper_branches.py): that
call is an inference pass, whatever the helper does in the training loop. An evaluation helper
of another file (`eval_model(model, dev_data)`) that runs a method of what it is handed (a wrapper's
`predict` calling `self.network.eval()` and then the network) is reported where this file calls it
with grad on: the helper's own file cannot see what it is handed.

A function handed to ignite's `Engine` that steps nothing (`evaluator = Engine(validation_step)`) runs once per batch of
the engine's `run`, in the grad mode of that call (ignite turns none off; analysis/frameworks.py): a warning when a
`run` of it sits in a handler of an engine that trains or at a script's module level, a note when that call's own
callers decide, quiet when every `run` is under `no_grad()`.

An evaluation function or loop is known by what it does too, not only by its name: a function that itself switches
a model to eval mode and runs it in a loop (`score(net, batches)`) is read as an evaluation function, once no other check
reported it; so is a loop after such a switch, whatever its data is called; and a parameter a function calls
(`pick(state)`) is a forward when every call of the function in this file hands it a model. With no caller in view,
an evaluation function that switches the model it runs to eval itself, runs it over a loop and returns no graph is
a warning (a whole pass of its own, which only a caller's `no_grad()` would make right); without that evidence it
stays a note.

An inference pass is also recognised by what it does, whatever its names: a model's forward in a
loop whose graph nothing uses — no backward goes through its output, and nothing derived from it
leaves the function (a rollout that turns the policy's output into an action number, a sample grid
drawn with the generator inside the training loop and saved as an image, a prediction loop that
writes its results out). That needs grad to be known on there: the function steps an optimizer (no
caller can turn grad off around training), this file runs it itself, or it is a script's module-level
loop in a file that runs no backward; a function whose caller in this file steps an optimizer runs with grad on
too (an FID pass between epochs). The pass may sit in a helper that hands the model's output back (a sampling
loop, `trainer.sample(16)`, `render_grid(generator, noise)`): the training function that only saves or prints
what it returns (or logs it as `wandb.Image(...)`, which detaches it: a library fact) is where its graph dies.
A script's one forward outside any loop counts when the file trains nothing, its module level runs the function,
and the script reads the output's values (a waveform written out), not only its shape. A model the analysis cannot see built is known by a keyword only a library model's
forward takes (`output_hidden_states=True`). A frozen model (`requires_grad_(False)` on it as a whole) or a
module without parameters records nothing and is left alone. The forward may also sit in another
class: `trainer.predict(batch)` over the dev set, where the trainer object's `predict` switches its
network to eval and runs it with grad left to the caller; the trainer object may be one the class keeps in an attribute
(`self.trainer.predict(b)` in a pipeline stage, where a set-up method bound `self._trainer = Trainer(...)` and a base
class's property hands it back: analysis/held_instances.py reads every assignment of the attribute in the class and
its workspace bases). In a model server that trains nothing, one
such forward outside any loop is a warning when a web framework's request handler calls it (FastAPI's
or Flask's `@app.post(...)`: the server runs it for every request, as a loop would). Where only other
files call the function (a library's `encode_sentences`, a model's own `slide` over windows), whether
grad is on is theirs to decide: their calls are read (analysis/callers.py). One at a script's module level or in a
function that steps an optimizer makes the forward a warning that shows that call; callers that all run it under
`no_grad()` keep the rule quiet (so do they for an evaluation helper whose only callers, in other files, wrap it in
`no_grad()`); with no caller found, or one whose grad its own callers decide, it is a note that says so. A caller
whose own callers decide is followed up to two callers further, in its file and the workspace's others (the trainer's
final validation, which the training script's `run_training()` calls, which its `__main__` block runs): one path that
reaches grad on with no `no_grad()` on the way makes it a warning, as grad is on unless a caller turns it off. So are
the callers elsewhere of the functions of this file that run it, when only other files call those (an embedder's
`embed_file` running its own `slide`, called by an extraction script). An evaluation
function that this file calls only under `no_grad()` is still reported when a caller in another file leaves grad on (a
predictor's sliding-window pass that its own `predict` wraps in `inference_mode()`, called by a trainer's final
validation): a warning where grad is known on there, a note where that caller's own callers decide.
The model may be built from a class picked first, by a branch or out of a table of the project's model
classes (`backbone_class, dim = BACKBONES[arch]`, `model_class.from_pretrained(name)`), and its output
may pass through a function picked out of a table of the file's own functions (`pool = POOLINGS[mode]`):
every candidate is read, and one that is not a module (or that backwards) keeps the rule quiet.
The forward may be a method of the model the function switched to eval (`model.eval()` then
`model.decode(words)`, a trainer's `self.network.eval()` then `self.network.score(batch)`): a workspace
class's method counts when it runs the model itself or returns what its layers compute; a model whose class
is not known here counts, as a warning that says so, unless the method is `nn.Module`'s own, is fed
nothing, has its result dropped, or is one its library runs without grad (transformers' `generate`). An attribute
switched to eval and then called (`self.model.eval()`, then `self.model(x)`: a model handed to the trainer's
constructor, whose kind nothing else here shows) is that module's forward.

A script that trains nothing (`detect.py`, `inference.py`) needs no dataflow at all: when its module level (or
a command-line library it hands the function to, `fire.Fire(main)`, `typer.run(main)`: library facts) runs a loop
of a model's forward with grad on, and nothing the program runs, in this file or in the workspace functions it
calls, backwards, steps an optimizer or calls `torch.autograd`, no graph it records is ever used, wherever the
output goes (a post-processing function the analysis cannot read, a list of results); a `no_grad()` block elsewhere
in it (the prompt prefilled without grad) does not cover the generation loop it leaves out. The model is one the
dataflow knows, one the function switched to eval (`net = load_detector(weights); net.eval()`), or one its
library returns in eval mode; one the script builds with no weights is a demo, unless its class's constructor loads
its checkpoint itself (`torch.load`, `load_state_dict`). A warning, as the program's reach is followed only so deep. A helper's one forward
outside any loop counts too when the helper is called inside the loop of a function that steps an optimizer,
in this file or another (`self.write_preview(epoch)` once per epoch, a sample grid saved as an image), and its
graph dies in the helper.

A helper that runs a model it is handed in a loop (`decode_batches(model, batches)`, whatever its name) is reported
at its `def`, as a warning, when every call of it in this file hands it a model the caller switched to eval just
before, with grad on, in code that trains nothing: the helper's loop is where the grad mode belongs. The models
may sit in a container (`self.nets[name].eval()` for each name): calling another of its elements is a forward.
A script that trains at its module level and then runs a test loop there is reported too when no later statement
(nor any function, which runs later) reads what the loop leaves. A whole module that `torch.load` gives back
(`torch.save(model)` saved it) is a model when a program that trains nothing calls it in a loop. Code written
before PyTorch 0.4 turned the graph off with `Variable(x, volatile=True)`: every computation fed from such a value
runs as under `no_grad()`, and `Variable` alone is no sign that a program trains.

A training step may also run a second model that nothing trains, with grad on: a distillation teacher,
a preference trainer's reference model. When the file puts that model in eval mode (or its library
returns it so, `from_pretrained`) and never back in training mode, no optimizer stepped there holds its
parameters, and its input carries no graph, the graph it records serves nothing, yet the backward
through the loss computes a gradient for every one of its parameters, kept in `.grad` with nothing to
clear it (so too when a helper runs it: `encode_prompt(text_encoder, tokenizer, prompts)`, or a loss module built
around it, `SoftTargetLoss(teacher)`, whose forward runs `self.teacher(images)` on inputs that carry no graph). The model
may run one level in: a method of the trainer object (`self.compute_loss(batch)` handing `self.reference` to a helper),
or the forward of a workspace module built around it (`model(images, labels)`, a `DistillationModel` whose `__init__`
calls `self.teacher.eval()`, perhaps in another file, and whose forward runs `self.teacher(images)`); its inputs carry no
graph when nothing in that body gave them one and the arguments passed for them carry none. A diffusers pipeline's
components are models too, loaded in eval mode, and run with grad on outside its `__call__`: `pipe.encode_prompt(...)`
runs `pipe.text_encoder`, `pipe.vae.encode(pixels)` the VAE (library facts); a component frozen under a name bound to it
(`vae = pipe.vae`) records nothing, and an optimizer holding `pipe.unet` does not hold its sibling `pipe.text_encoder`.
What an optimizer holds is read from its parameters (the first argument or `params=`), not its settings (`lr=args.lr`).
A perceptual loss, whose network takes the trained model's output, must keep its graph and
is left alone.

A verdict depends on what the code does, not on its names or on where the pass sits. A script's module-level
forward is the same pass as the same body in a `main()` it calls, and is reported alike (a warning: one forward
outside any loop in a program that trains nothing, whose numbers the script reads). How grad stands decides the
tier: a pass this file runs with grad on is an error; one whose only calls are in other files is a warning when one
of them is known to run it with grad on (a function that steps an optimizer, a script's module level), and a note
when none is (no caller in view, or one whose own callers decide): grad is then unknown, whether the function is
called `evaluate` or `accuracy_on`.

How to fix: decorate the evaluation function with `@torch.no_grad()` (or
`@torch.inference_mode()`), or wrap the validation loop (or the one forward) in `with torch.no_grad():`. Leave grad
on only where the evaluation needs gradients (adversarial attacks, saliency, test-time
adaptation) — those call `backward`/`autograd.grad`, which keeps this rule quiet. A model that nothing trains is
better frozen once (`teacher.requires_grad_(False)`): it then records no graph anywhere.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, replace
from functools import partial
from typing import TypeGuard

import libcst as cst

from trainlint.analysis.callers import callers_elsewhere, callers_further
from trainlint.analysis.calls import held_layer
from trainlint.analysis.dependencies import kept_with_scope
from trainlint.analysis.frameworks import grad_handled_by_framework, ignite_engines, ignite_registrations
from trainlint.analysis.graph_use import DroppedGraph, dropped_graph, own_returns, program_trains
from trainlint.analysis.held_instances import builds_own_class, held_instance
from trainlint.analysis.helper_branches import runs_as_called
from trainlint.analysis.libraries import (
    ARGUMENT_PARSING_DECORATOR,
    LIBRARY_LAYER_METHODS,
    LIBRARY_NO_GRAD_METHODS,
    MODEL_FORWARD_KEYWORDS,
    MODULE,
    PIPELINE_COMPONENT_METHODS,
    RUNS_ENTRY_POINT,
    SERVES_REQUESTS,
    UNPICKLES_OBJECT,
    ModeFact,
    call_fact,
)
from trainlint.analysis.library_models import library_model_facts
from trainlint.analysis.patterns import (
    MAX_CALL_DEPTH,
    argument_passed,
    evaluation_calls,
    loads_weights_into,
    mode_parameter,
    name_words,
    ordered_calls,
    restores_own_weights,
    smoke_test_forward,
)
from trainlint.analysis.torchapi import (
    MODULE_SELF_METHODS,
    is_optimizer_class,
    is_parameterless_layer,
)
from trainlint.analysis.tree import STATEMENT_NODES, is_statement, statement_level
from trainlint.rules import (
    AssignEvent,
    CallEvent,
    ClassInfo,
    Fires,
    Fix,
    Loop,
    ModuleView,
    ParsedChunk,
    Quiet,
    Rule,
    RuleContext,
    ScopeAnalysis,
    Severity,
    Site,
    StoreEvent,
    Tag,
    TextEdit,
    Value,
    backward_target,
    calls_in,
    children,
    dotted,
    indentation,
    is_backward,
    is_eval_name,
    is_optimizer_step,
    is_test_file,
    last_part,
    ordered_events,
    passed_expression,
    quoted,
    written,
)
from trainlint.rules import walk as _walk

# Words of a loop's iterable that mark held-out data.
_EVAL_DATA_WORDS = frozenset(
    {"val", "valid", "validation", "test", "testing", "eval", "evaluation", "dev", "holdout"}
)
# What a method or function that puts trained weights into a model is called.
_LOADS_WEIGHTS = re.compile(r"load|restore|from_pretrained|from_checkpoint", re.I)
# nn.Module's own methods (torch.nn.Module's documented API): bookkeeping, moving, hooks; none runs the
# model's forward, so calling one after `.eval()` is not an inference pass.
_MODULE_OWN_METHODS = frozenset({
    "add_module", "apply", "bfloat16", "buffers", "children", "compile", "cpu", "cuda", "double", "eval",
    "extra_repr", "float", "get_buffer", "get_extra_state", "get_parameter", "get_submodule", "half", "ipu",
    "load_state_dict", "modules", "mtia", "named_buffers", "named_children", "named_modules", "named_parameters",
    "parameters", "register_backward_hook", "register_buffer", "register_forward_hook", "register_forward_pre_hook",
    "register_full_backward_hook", "register_full_backward_pre_hook", "register_module", "register_parameter",
    "requires_grad_", "set_extra_state", "share_memory", "state_dict", "to", "to_empty", "train", "type", "xpu",
    "zero_grad",
})
# Said of a forward taken from a method of a model whose class is not known here (a warning, not an error).
_UNKNOWN_CLASS_NOTE = (
    " (the model's class is not known here: `{method}()`, a method of the module switched to eval whose result is "
    "kept, is taken to run its layers)"
)
# Decorators known not to change grad mode; any other decorator may, so the rule stays quiet.
_NEUTRAL_DECORATORS = frozenset({"staticmethod", "classmethod", "torch.compile", "functools.wraps", "wraps"})


class GradEnabledEval(Rule):
    code = "TL102"
    name = "grad-enabled-eval"
    severity = Severity.ERROR

    def check_scope(self, ctx: RuleContext, scope: ScopeAnalysis) -> None:
        module = ctx.module
        if is_test_file(module.path) or self._check_engine_step(ctx, scope):
            return
        named = scope.function is not None and is_eval_name(scope.function.name)
        if named:
            reported = self._check_eval_function(ctx, scope)
        else:
            reported = self._check_eval_loops(ctx, scope)
            reported = self._check_shared_function(ctx, scope) or reported
        if not reported:
            reported = self._check_imported_evaluation(ctx, scope)
        if not reported:
            reported = self._check_evaluating_method(ctx, scope)
        if not reported:
            reported = self._check_unused_graph(ctx, scope)
        if not reported:
            reported = self._check_helper_of_evaluations(ctx, scope)
        if not reported:
            reported = self._check_pass_per_step(ctx, scope)
        if not reported:
            reported = self._check_unstepped_model(ctx, scope)
        if not reported:
            reported = self._check_single_forward(ctx, scope)
        if not reported:
            reported = self._check_detached_forward(ctx, scope)
        # what is left: an evaluation by what the code does, whatever it is called (a function that switches a model
        # to eval mode and runs it in a loop; a loop after such a switch, whatever its data is called)
        if not reported and not named and scope.function is not None and _switches_and_runs(scope):
            reported = self._check_eval_function(ctx, scope)
        if not reported:
            self._check_eval_loops(ctx, scope, switched=True)

    # ------------------------------------------------------------------ an ignite engine's process function
    def _check_engine_step(self, ctx: RuleContext, scope: ScopeAnalysis) -> bool:
        """A function of the file handed to ignite's ``Engine`` (``evaluator = Engine(validation_step)``) that trains
        nothing and runs a model's forward with grad on: the engine calls it once per batch of ``evaluator.run(...)``,
        in the grad mode of that call, and ignite disables none (analysis/frameworks.py). Every run under
        ``no_grad()``: quiet. A run in a handler of an engine that trains (it runs inside that engine's ``run``, with
        grad on for training) or at a script's module level: a warning; otherwise a note, the run's callers deciding.
        True when it reported, or when every run is under ``no_grad()`` (no other check of the rule reads it then)."""
        info = scope.function
        if info is None or info.owner is not None or not any(target.startswith("ignite") for target in ctx.summary.imports.values()):
            return False
        engines = ctx.module.module_wide("TL102 ignite engines", _ignite_engines)
        bound = next((
            (name, built) for name, (function, built) in engines.items()
            if function == info.name and (built.chunk is info.chunk or ctx.summary.functions.get(info.name) is info)
        ), None)
        if bound is None:
            return False
        name, built = bound
        if any(is_backward(call) or is_optimizer_step(call) for call in calls_in(scope, None)):
            return False  # a training step: the other checks read it as any training function
        forward = next((
            call for call in scope.calls()
            if call.context.grad_off is None and _records_graph(call) and _is_model_forward(call, set()) and not _parameterless(ctx, call)
        ), None)
        runs = [call for call in ctx.module.all_calls() if call.receiver_key == name and call.method == "run" and call.chunk is built.chunk]
        open_runs = [run for run in runs if run.context.grad_off is None]
        if forward is None or not open_runs:
            return bool(runs) and forward is not None  # every run under no_grad(): grad is off where it runs
        run = open_runs[0]
        trainer = _run_by_a_training_engine(ctx, run, engines)
        known = run.scope.function is None or trainer is not None
        why = (f"which runs inside `{trainer}.run`, an engine that trains, with grad on" if trainer is not None
               else "at the script's module level, with grad on" if run.scope.function is None
               else "whose grad is decided by its callers")
        ctx.report(
            forward.node,
            f"`{info.name}` is the process function of the ignite engine `{name}`, which calls it once per batch of "
            f"`{written(run)}` (line {ctx.line_of((run.chunk, run.node))}), {why}; nothing here turns grad off, so every "
            f"batch's forward `{written(forward)}` records a graph nobody uses"
            + ("" if known else " (if those callers leave grad on)"),
            evidence=[
                ((built.chunk, built.node), f"`{name}` runs `{info.name}` once per batch, in the grad mode of its `run`"),
                ((run.chunk, run.node), "the engine's run, not under `no_grad()`"),
                ((forward.chunk, forward.node), "a forward with grad on; the function steps nothing"),
            ],
            severity=Severity.WARNING if known else Severity.NOTE,
            help=f"decorate `{info.name}` with `@torch.no_grad()` (ignite's `create_supervised_evaluator` does the same)",
        )
        return True

    # ------------------------------------------------------------------ (d') a helper's one pass, per training step
    def _check_pass_per_step(self, ctx, scope: ScopeAnalysis) -> bool:
        """One forward outside any loop, whose graph dies in the helper (a sample grid saved as an image, a
        metric printed), where the helper is called inside a loop of a function that steps an optimizer, in this
        file or another (``self.save_samples(epoch)`` at the end of every epoch): grad is on there, as no caller
        turns it off around training, and every call records a graph and keeps its activations for nothing. A
        helper some call runs under ``no_grad()``, or one handed around as a value, is left to its callers."""
        info = scope.function
        module = ctx.module
        if info is None or scope.loops or _framework_hook(ctx, info) or _test_function(info) or any(
            not _neutral(d, scope) for d in info.node.decorators
        ):
            return False
        forwards = [
            call for call in scope.calls()
            if call.context.grad_off is None and _records_graph(call)
            and (_is_model_forward(call, set()) or _runs_model_layers(ctx, call)) and not _parameterless(ctx, call)
        ]
        if not forwards or _passed_around(module, info):
            return False
        if info.owner is not None and ctx.summary.is_module_class(info.owner):
            return False  # a model's own method (`transcribe`): the pass is reported where the training loop calls it
        calls = list(calls_in(scope, None))
        if _trains(calls) or _grad_off_anywhere(scope, calls) or _grad_disabled_globally(module):
            return False
        per_step = _called_per_training_step(ctx, info)
        if per_step is None or _feeds_a_backward(per_step[0]):
            return False
        frozen = module.module_fact("tl102-frozen-models", _frozen_models)
        for forward in forwards:
            dropped = None if forward.receiver_key in frozen else dropped_graph(scope, forward.node)
            if dropped is None or _built_on_the_spot(module, scope, forward):
                continue
            site, step = per_step
            text = _text(forward)
            where = "" if not ctx.in_another_file(site.chunk) else " (in another file)"
            evidence: list[tuple[Site, str]] = [((forward.chunk, forward.node), f"`{text}` records the autograd graph")]
            cuts = sorted(dropped.cuts, key=forward.chunk.line_of)
            if cuts:
                evidence.append(((forward.chunk, cuts[0]), f"`{quoted(forward.chunk, cuts[0])}` keeps none of the graph"))
            evidence.append(((site.chunk, site.node), f"`{_text(site)}` runs it in the training loop, with grad on"))
            evidence.append(((step.chunk, step.node), f"`{_text(step)}`: the loop trains, so grad is on there"))
            line = _statement_line(info.node, forward.statement)
            ctx.report(
                forward.node,
                f"`{text}` runs with autograd on, but nothing uses its graph: no backward goes through its output and "
                f"nothing derived from it leaves `{info.qualified_name}()`. `{_text(site)}`{where} calls it inside a "
                "training loop, where grad is on, so every call records a graph and keeps its activations for nothing: "
                "an inference pass in the middle of training, at the memory of a training step",
                evidence=evidence,
                severity=Severity.WARNING,
                help=f"run `{text}` under `with torch.no_grad():` (or decorate `{info.name}` with `@torch.no_grad()`)",
                fix=_forward_under_no_grad(ctx, line),
            )
            return True
        return False

    # ------------------------------------------------------------------ (d'') a loop its callers run as evaluation
    def _check_helper_of_evaluations(self, ctx, scope: ScopeAnalysis) -> bool:
        """A helper that runs a model it is handed in a loop (``parse_sentences(batches, model)``, whatever its
        name), where every call in this file hands it a model the caller switched to eval just before, with grad
        on, in a caller that trains nothing: each caller is an inference pass, and the helper is where the grad
        mode belongs (its loop is the one that records a graph per batch). A caller that some call runs under
        ``no_grad()``, or a helper that turns grad off itself, trains, or is handed around, is left alone."""
        info = scope.function
        module = ctx.module
        if info is None or not scope.loops or _framework_hook(ctx, info) or _test_function(info) or any(
            not _neutral(d, scope) for d in info.node.decorators
        ):
            return False
        if info.owner is not None and ctx.summary.is_module_class(info.owner):
            return False  # a model's own method: its caller decides the grad mode
        parameters = {param.name.value for param in info.node.params.params}
        loop_calls = [
            call for call in scope.calls()
            if call.context.loops and call.context.grad_off is None and call.receiver_key in parameters
        ]
        if not loop_calls:
            return False
        calls = list(calls_in(scope, None))
        if _grad_off_anywhere(scope, calls) or _trains(calls) or _grad_disabled_globally(module) or _passed_around(module, info):
            return False
        sites = _call_sites(module, info)
        if not sites:
            return False
        for forward in loop_calls:
            key = forward.receiver_key
            assert key is not None, "chosen by its receiver's name"
            if not (_is_model_forward(forward, {key}) or _switched_model_method(ctx, forward, {key})):
                continue
            switches = [_evaluated_before(ctx, site, info, key) for site in sites]
            if not all(switches):
                return False
            unknown = _unknown_model_method(ctx, forward)
            text = _text(forward)
            evidence: list[tuple[Site, str]] = [((forward.chunk, forward.node), f"`{text}` records the autograd graph on every pass")]
            for site, switch in list(zip(sites, switches))[:2]:
                assert switch is not None, "every call was checked"
                evidence.append(((switch.chunk, switch.node), f"`{_text(switch)}` switches layers to inference, not autograd"))
                evidence.append(((site.chunk, site.node), f"`{_text(site)}` runs it with grad enabled and trains nothing"))
            calls_here = "its only call in this file hands" if len(sites) == 1 else f"all {len(sites)} of its calls in this file hand"
            ctx.report(
                info.node.name,
                f"`{info.qualified_name}()` runs `{text}` in a loop with autograd on, and {calls_here} it a model "
                "switched to eval, with grad enabled, from code that trains nothing: an inference pass whose every "
                "batch records a graph and keeps its activations for nothing"
                + (_UNKNOWN_CLASS_NOTE.format(method=forward.method) if unknown else ""),
                evidence=evidence, severity=Severity.WARNING,
                help="decorate the function with `@torch.no_grad()` (or `@torch.inference_mode()`)",
                # unsafe: what it returns no longer says `requires_grad`, which a caller elsewhere could read
                fix=ctx.fix("decorate with torch.no_grad()", [_decorate(ctx, info.node)], safe=False),
            )
            return True
        return False

    # ------------------------------------------------------------------ (c) one function for both
    def _check_shared_function(self, ctx: RuleContext, scope: ScopeAnalysis) -> bool:
        """``run_epoch(model, loader, optimizer=None)`` used for training and, without an optimizer, for
        evaluation: the evaluation call runs every forward with autograd on."""
        parameter = mode_parameter(scope)
        if parameter is None or _framework_hook(ctx, scope.function):
            return False
        assert scope.function is not None, "mode_parameter names a parameter of a function"
        evaluations = [call for call in evaluation_calls(ctx.module, scope, parameter) if call.context.grad_off is None]
        if not evaluations:
            return False
        followed = list(ordered_calls(scope, None))
        calls = [call for call, _chain in followed]
        forwards = [(call, chain) for call, chain in followed if _is_model_forward(call, set()) and call.context.grad_off is None]
        # a helper it calls that turns grad off on some path (`forward(model, x, train)` with a no_grad branch): the
        # author chose where grad is off, as in the function itself
        if not forwards or _grad_off_anywhere(scope, calls) or any(c.context.grad_off is not None for c in calls) \
                or _grad_disabled_globally(ctx.module):
            return False
        (forward, chain), call = forwards[0], evaluations[0]
        guarded = next(c for c in calls if is_backward(c) or is_optimizer_step(c))
        ctx.report(
            (chain[0] if chain else forward).node,  # a forward in a helper: reported at this function's call of it
            f"`{_text(forward)}` records the autograd graph even when `{scope.function.qualified_name}()` only evaluates: "
            f"`{_text(call)}` on line {call.chunk.line_of(call.node)} leaves `{parameter}` off, so nothing backwards, "
            "yet every batch keeps its activations for a graph nobody uses",
            evidence=[
                ((forward.chunk, forward.node), f"`{_text(forward)}` records the autograd graph here"),
                ((guarded.chunk, guarded.node), f"training happens only when `{parameter}` is given"),
                ((call.chunk, call.node), "called here to evaluate, with grad enabled"),
            ],
            help=f"run the forward under `torch.set_grad_enabled(...)` on `{parameter}` (or `torch.no_grad()` "
            "at the evaluation call)",
        )
        return True

    # ------------------------------------------------------------------ (a) evaluation functions
    def _check_eval_function(self, ctx: RuleContext, scope: ScopeAnalysis) -> bool:
        info = scope.function
        assert info is not None, "check() looks at a function's scope here"
        node = info.node
        if _framework_hook(ctx, info) or _test_function(info) or any(not _neutral(d, scope) for d in node.decorators):
            return False
        calls = list(calls_in(scope, None))
        eval_calls = [call for call in calls if _is_mode_switch(call) and _mode(call) == "eval"]
        switched = {_switched_model(call) for call in eval_calls}
        forwards = [
            call for call in calls
            if (_is_model_forward(call, switched) or _switched_model_method(ctx, call, switched) or _handed_a_model(ctx.module, call))
            and call.context.grad_off is None and not _builds_a_module(ctx, call, calls) and not smoke_test_forward(ctx.summary, call)
        ]
        if not forwards or _grad_off_anywhere(scope, calls) or _trains_as_called(scope, None):
            return False
        if any(call.scope is not scope for call in forwards):
            with_grad = _reached_with_grad(scope)
            inner = _reached_through_evaluation(ctx, scope, eval_calls)
            forwards = [call for call in forwards if call.scope is scope or id(call) in with_grad and id(call) not in inner]
        if forwards:
            decorated = _decorated_reach(ctx, calls)
            forwards = [call for call in forwards if call.scope not in decorated]
        if not forwards:
            return False
        if info.owner is not None and ctx.summary.is_module_class(info.owner) and not eval_calls:
            return False  # a model's own method: its caller decides the grad mode
        sites = _call_sites(ctx.module, info)
        if _passed_around(ctx.module, info):
            return False
        elsewhere: CallerElsewhere | None = None
        if any(site.context.grad_off is not None for site in sites):
            # this file chose where grad is off: only when each of its calls turns it off, a caller in another file
            # that leaves it on is what is left to report
            elsewhere = _caller_elsewhere_with_grad(ctx, info) if all(site.context.grad_off is not None for site in sites) else None
            if elsewhere is None:
                return False
            sites = []
        if not sites and _only_called_without_grad(ctx, info):
            return False  # its callers, all in other files, turn grad off around it
        returned = scope.return_value.roots | {site.node for site in sites}
        if _output_backwarded(ctx.module, forwards, returned, _not_run_as_called(scope, None)) or _grad_disabled_globally(ctx.module):
            return False
        forward = next((call for call in forwards if not _unknown_model_method(ctx, call)), forwards[0])
        unknown = _unknown_model_method(ctx, forward)
        if unknown and not sites:
            return False  # a model of unknown class, handed in by callers elsewhere: too little to go on
        evidence = [((forward.chunk, forward.node), f"`{_text(forward)}` records the autograd graph here")]
        if forward.scope is not scope:  # reached through a call: the statement of this function that runs it
            chain = next((chain for event, chain in ordered_events(scope, None) if event is forward and chain), ())
            evidence.extend(((link.chunk, link.node), f"runs `{_text(forward)}` with grad enabled") for link in chain[:1])
        if eval_calls:
            evidence.append(((eval_calls[0].chunk, eval_calls[0].node), f"`{_text(eval_calls[0])}` does not turn autograd off"))
        evidence.extend(((site.chunk, site.node), "called here with grad enabled") for site in sites[:2])
        called = f"; it is called on line {sites[0].chunk.line_of(sites[0].node)} with grad enabled" if sites else ""
        severity = Severity.WARNING if unknown else None
        if not sites and elsewhere is None:
            # no call in this file: how grad stands is its callers' in other files, as for any function that drops
            # its pass's graph (`_report_unknown_grad`), whatever its name says
            caller = _caller_elsewhere_with_grad(ctx, info)
            if caller is not None:
                known = caller.grad == "on"
                evidence.append(((caller.call.chunk, caller.call.node), (
                    f"`{_text(caller.call)}` runs it with grad on: {caller.why}" if known
                    else f"`{_text(caller.call)}` calls it without `no_grad()`; grad there is its own callers' to decide"
                )))
                called = f"; `{caller.path}` calls it on line {caller.line} " + (
                    f"with grad on ({caller.why})" if known else "in a function whose own callers decide how grad stands (not known here)"
                )
                severity = Severity.WARNING if known else Severity.NOTE
            elif _whole_evaluation(scope, forward, eval_calls):
                # no caller in view, but the function is a whole pass of its own: it switches the model it runs to eval
                # mode, runs it over a loop and hands back none of its graph, so nothing of it is left for a caller
                called = (
                    f"; no call in view says how grad stands, but it is a whole evaluation pass of its own: it switches "
                    f"`{_switched_model(eval_calls[0])}` to eval mode itself, runs it on every pass of a loop and returns "
                    "none of its graph, so only a caller that wraps it in `no_grad()` would make it right"
                )
                severity = Severity.WARNING
            else:
                called = (
                    "; no call in view says how grad stands (its callers are outside the workspace, or it is a library's "
                    "entry point), so this holds when it is called with grad on"
                )
                severity = Severity.NOTE
        if elsewhere is not None:
            # this file's calls turn grad off: only the other file's call runs it with grad on (or may)
            known = elsewhere.grad == "on"
            evidence.append(((elsewhere.call.chunk, elsewhere.call.node), (
                f"`{_text(elsewhere.call)}` runs it with grad on: {elsewhere.why}" if known
                else f"`{_text(elsewhere.call)}` calls it without `no_grad()`; grad there is its own callers' to decide"
            )))
            called = (
                f"; this file calls it under `no_grad()`/`inference_mode()`, but `{elsewhere.path}` calls it on line "
                f"{elsewhere.line} without, " + ("with grad on there" if known else "in a function whose own callers decide how grad stands (not known here)")
            )
            severity = Severity.WARNING if known else Severity.NOTE
        message = (
            f"`{info.qualified_name}()` looks like an evaluation pass but runs `{_text(forward)}` with autograd on: "
            f"no `no_grad()`/`inference_mode()` and no backward or optimizer step{called}. Each forward keeps its "
            "activations for a graph nobody uses: training-step memory and extra time on every evaluation"
            + (_UNKNOWN_CLASS_NOTE.format(method=forward.method) if unknown else "")
        )
        ctx.report(
            node.name, message, evidence=evidence, severity=severity,
            help="decorate the function with `@torch.no_grad()` (or `@torch.inference_mode()`)",
            # safe when what it returns carries no graph, or its callers (all in this file) backward
            # through none of it; a caller in another file might need the graph it returns
            fix=ctx.fix(
                "decorate with torch.no_grad()", [_decorate(ctx, node)],
                safe=elsewhere is None and (Tag.GRAPH not in scope.return_value.tags or bool(sites)),
            ),
        )
        return True

    # ------------------------------------------------------------------ (b) validation loops
    def _check_eval_loops(self, ctx: RuleContext, scope: ScopeAnalysis, *, switched: bool = False) -> bool:
        """A loop over evaluation data (with ``switched``, a loop over other data after a switch to eval mode: what the
        code does, whatever its data is called) that runs the evaluated model with grad on and trains nothing."""
        if switched and scope.function is not None and any(not _neutral(d, scope) for d in scope.function.node.decorators):
            return False  # a project's decorator may turn grad off (`@smart_inference_mode()`), as for _check_eval_function
        candidates = [loop for loop in scope.loops if _is_eval_data(loop.iterable_text) != switched
                      and (not switched or _after_eval_switch(ctx.module, scope, loop))]
        if not candidates or scope.function is not None and (
            _framework_hook(ctx, scope.function)
            or any(site.context.grad_off is not None for site in _call_sites(ctx.module, scope.function))
            or _only_called_without_grad(ctx, scope.function)
        ):
            return False
        reported: list[Loop] = []
        for loop in candidates:
            if not any(outer.encloses(loop) for outer in reported) and self._check_loop(ctx, scope, loop, known=switched):
                reported.append(loop)
        return bool(reported)

    def _check_loop(self, ctx: RuleContext, scope: ScopeAnalysis, loop: Loop, *, known: bool = False) -> bool:
        """``known`` (a loop found by a switch alone, not by its data): only a forward of a model whose class is known,
        run by the loop itself (a helper it calls is checked, and reported, as a function of its own)."""
        inside = [event for event in scope.events if loop in event.context.loops]
        if not inside or any(event.context.grad_off is not None for event in inside):
            return False
        mode = _mode_before(ctx.module, scope, loop, inside[0])
        if mode is not None and _mode(mode) != "eval":
            return False
        calls = list(calls_in(scope, loop))
        if mode is not None:
            switched = {_switched_model(mode)}
            forwards = [
                call for call in calls
                if (_is_model_forward(call, switched) or _switched_model_method(ctx, call, switched)) and call.context.grad_off is None
            ]
        else:  # no switch: a model its library returned in eval mode, which nothing switches to training
            forwards = [
                call for call in calls
                if _is_model_forward(call, set()) and call.context.grad_off is None and _left_in_eval_mode(ctx, call.receiver, call.receiver_key) is not None
            ]
        if known:
            told_not_to_train = _in_helpers_told_not_to_train(scope, loop)
            forwards = [call for call in forwards if call.scope is scope or id(call) in told_not_to_train]
        if not forwards or _trains_as_called(scope, loop) or _disables_grad(scope, list(scope.calls())):
            return False
        if _output_backwarded(ctx.module, forwards, frozenset(), _not_run_as_called(scope, loop)) or _grad_disabled_globally(ctx.module):
            return False
        forward = next((call for call in forwards if not _unknown_model_method(ctx, call)), forwards[0])
        unknown = _unknown_model_method(ctx, forward)
        if unknown and known:
            return False
        header = quoted(scope.chunk, loop.node.iter) if isinstance(loop.node, cst.For) else loop.iterable_text
        if mode is not None:
            switched = f"after `{_text(mode)}`"
            why = "`eval()` does not turn autograd off"
            evidence = [((mode.chunk, mode.node), f"`{_text(mode)}` switches layers to inference, not autograd")]
        else:
            loaded = _left_in_eval_mode(ctx, forward.receiver, forward.receiver_key)
            assert loaded is not None, "the forwards were chosen for it"
            switched = f"in eval mode ({loaded[1].says})"
            why = "eval mode does not turn autograd off"
            evidence = [(loaded[0], f"{loaded[1].says}: layers in inference mode, autograd still on; {loaded[1].source}")]
        message = (
            f"the loop over `{header}` runs `{_text(forward)}` {switched} with autograd on and no "
            f"backward: {why}, so every batch records a graph and keeps its "
            "activations — training-step memory and extra time on every validation pass"
            + (_UNKNOWN_CLASS_NOTE.format(method=forward.method) if unknown else "")
        )
        evidence.append(((forward.chunk, forward.node), f"`{_text(forward)}` records the autograd graph here"))
        no_grad = ctx.name_for("torch.no_grad")
        edit = ctx.indent_block(loop.node, f"with {no_grad}()") if no_grad else None
        ctx.report(
            loop.node.iter if isinstance(loop.node, cst.For) else loop.node.test, message, evidence=evidence,
            severity=Severity.WARNING if unknown else None,
            help="wrap the loop in `with torch.no_grad():` (or `torch.inference_mode()`)",
            fix=ctx.fix("wrap the loop in torch.no_grad()", [edit], safe=True),
        )
        return True


    # ------------------------------------------------------------------ (e) evaluation helpers of other files
    def _check_imported_evaluation(self, ctx: RuleContext, scope: ScopeAnalysis) -> bool:
        """``eval_model(model, dev_data)`` where the evaluation helper lives in another workspace file and
        leaves grad to its caller: it runs a method of the object it is handed (a wrapper's ``predict`` that
        calls ``self.network.eval()`` and then the network) with no ``no_grad()``, no backward and no
        optimizer step. The helper's file cannot see what it is handed; the caller's can. The call is reported where grad is known to be on:
        a script's module level, a function that trains, or one this file runs itself with grad on."""
        info = scope.function
        module = ctx.module
        if info is not None and (_framework_hook(ctx, info) or _test_function(info)):
            return False
        candidates = [
            call for call in scope.calls()
            if call.function is not None and ctx.summary.defined_elsewhere(call.function) and call.context.grad_off is None
        ]
        if not candidates or _grad_off_anywhere(scope, list(scope.calls())) or _grad_disabled_globally(module):
            return False
        for call in candidates:
            helper = call.function
            assert helper is not None, "the candidates call a function of another file"
            found = _inference_helper(ctx, scope, call, helper)
            if found is None or _output_backwarded(module, [call], frozenset()):
                continue
            if not _grad_known_on(module, scope):
                return False
            forward, switch, through = found
            evidence: list[tuple[Site, str]] = [
                ((call.chunk, call.node), f"`{_text(call)}` runs with grad enabled"),
                ((through.chunk, through.node), f"`{helper.name}` calls `{_text(through)}`"),
                ((switch.chunk, switch.node), f"`{_text(switch)}` switches layers to inference, not autograd"),
                ((forward.chunk, forward.node), f"`{_text(forward)}` records the autograd graph here"),
            ]
            ctx.report(
                call.node,
                f"`{_text(call)}` evaluates with autograd on: `{helper.name}` (in another file) calls `{_text(through)}`, "
                f"which runs `{_text(forward)}` after `{_text(switch)}` without `no_grad()`/`inference_mode()` and never "
                "backwards, so every forward records a graph and keeps its activations for nothing — training-step "
                "memory and extra time on every evaluation"
                + (_UNKNOWN_CLASS_NOTE.format(method=forward.method) if _unknown_model_method(ctx, forward) else ""),
                evidence=evidence,
                severity=Severity.WARNING if _unknown_model_method(ctx, forward) else None,
                help=f"call `{helper.name}(...)` under `with torch.no_grad():` (or decorate `{helper.name}` with "
                "`@torch.no_grad()`)",
            )
            return True
        return False

    # ------------------------------------------------------------------ (f) an object's evaluating method
    def _check_evaluating_method(self, ctx: RuleContext, scope: ScopeAnalysis) -> bool:
        """``trainer.predict(batch)`` over a data set, where ``trainer`` is an instance of a workspace class
        (built here, or handed in by this file's callers) whose ``predict`` switches its model to eval and
        runs it with grad left to its caller: the call is the forward, under another name and in another
        class. Reported where grad is known to be on (a script's module level, a function that trains, one
        this file runs itself with grad on); a caller that turns grad off somewhere chose where."""
        info = scope.function
        module = ctx.module
        if info is not None and (_framework_hook(ctx, info) or _test_function(info)):
            return False
        candidates = [
            call for call in scope.calls()
            if call.method is not None and call.receiver_key is not None and _held_or_named(call.receiver_key, info)
            and call.context.grad_off is None and call.context.loops
        ]
        if not candidates or _grad_off_anywhere(scope, list(scope.calls())) or _grad_disabled_globally(module):
            return False
        if _trains(list(calls_in(scope, None))):
            return False  # before resolving each receiver's class: a training function's calls are many
        for call in candidates:
            owner = _evaluator_class(ctx, scope, call)
            method = owner.find_method(call.method, ctx.summary) if owner is not None and call.method is not None else None
            found = _evaluates(ctx, method) if method is not None else None
            if owner is None or found is None or _output_backwarded(module, [call], frozenset()):
                continue
            caller: CallerElsewhere | None = None
            if not _grad_known_on(module, scope):
                if info is None or not _grad_left_to_other_files(module, info):
                    return False  # a call in this file chose how grad stands
                elsewhere = _callers_elsewhere_through(ctx, info)
                if elsewhere and all(other.grad == "off" for other in elsewhere):
                    return False  # every caller, in other files, runs it under no_grad()/inference_mode()
                caller = next((other for other in elsewhere if other.grad == "on"), None)
                if caller is None:
                    self._report_evaluating_method_unknown_grad(ctx, scope, call, owner, found)
                    return True
            forward, switch = found
            unknown = _unknown_model_method(ctx, forward)
            evidence: list[tuple[Site, str]] = [
                ((call.chunk, call.node), f"`{_text(call)}` runs with grad enabled"),
                ((switch.chunk, switch.node), f"`{_text(switch)}` switches layers to inference, not autograd"),
                ((forward.chunk, forward.node), f"`{_text(forward)}` records the autograd graph here"),
            ]
            if caller is not None:
                evidence.append(((caller.call.chunk, caller.call.node), f"`{_text(caller.call)}` runs it with grad on: {caller.why}"))
            ctx.report(
                call.node,
                f"`{_text(call)}` runs the model with autograd on: `{owner.name}.{call.method}` runs `{_text(forward)}` after "
                f"`{_text(switch)}` without `no_grad()`/`inference_mode()` and never backwards, so every call in the loop "
                "records a graph and keeps its activations for nothing: training-step memory and extra time on every pass"
                + (f" (`{caller.path}` calls `{info.qualified_name}()` on line {caller.line} with grad on)" if caller is not None and info is not None else "")
                + (_UNKNOWN_CLASS_NOTE.format(method=forward.method) if unknown else ""),
                severity=Severity.WARNING if unknown or caller is not None else None,
                evidence=evidence,
                help=f"run the loop under `with torch.no_grad():` (or decorate `{owner.name}.{call.method}` with `@torch.no_grad()`)",
            )
            return True
        return False

    def _report_evaluating_method_unknown_grad(
        self, ctx: RuleContext, scope: ScopeAnalysis, call: CallEvent, owner: ClassInfo, found: tuple[CallEvent, CallEvent],
    ) -> None:
        """``_check_evaluating_method``'s pass in a function that only other files call, none found with grad on
        (a pipeline stage's ``process(document)``, run by a pipeline that picks it from a table): a note that says
        what is not known."""
        info = scope.function
        assert info is not None, "a function's scope"
        forward, switch = found
        ctx.report(
            call.node,
            f"`{_text(call)}` runs the model with autograd on unless the caller of `{info.qualified_name}()` turns it off: "
            f"`{owner.name}.{call.method}` runs `{_text(forward)}` after `{_text(switch)}` without `no_grad()`/"
            "`inference_mode()` and never backwards, but no call in this file says how grad stands (its callers are in "
            "other files, or it is a library's entry point). Called with grad on, every call in the loop records a graph "
            "and keeps its activations for nothing",
            severity=Severity.NOTE,
            evidence=[
                ((call.chunk, call.node), f"`{_text(call)}` runs with the grad mode of `{info.qualified_name}()`'s callers"),
                ((switch.chunk, switch.node), f"`{_text(switch)}` switches layers to inference, not autograd"),
                ((forward.chunk, forward.node), f"`{_text(forward)}` records the autograd graph when grad is on"),
            ],
            help=f"run the loop under `with torch.no_grad():` (or decorate `{owner.name}.{call.method}` with `@torch.no_grad()`)",
        )

    # ------------------------------------------------------------------ (d) inference passes by what they do
    def _check_unused_graph(self, ctx, scope: ScopeAnalysis) -> bool:
        """A forward in a loop whose graph nothing uses, whatever the code is called: no backward goes
        through its output and nothing derived from it leaves the function (a rollout's policy forward,
        a sample grid drawn inside the training loop, a prediction loop over a data set). Only where
        grad is known to be on: in a function that steps an optimizer (no caller can turn grad off
        around training), in one this file runs itself with grad on along the way (a helper called
        from other files may run under their `no_grad()`), or at module level in a script that runs
        no backward at all. A function that backwards without stepping an optimizer wants gradients
        of something else (an attack, a saliency map): quiet."""
        info = scope.function
        module = ctx.module
        if not scope.loops or info is not None and (
            _framework_hook(ctx, info) or _test_function(info) or any(not _neutral(d, scope) for d in info.node.decorators)
        ):
            return False
        forwards = [
            call for call in scope.calls()
            if call.context.loops and call.context.grad_off is None and (_records_graph(call) or _handed_a_model(module, call))
            and (_is_model_forward(call, set()) or _runs_model_layers(ctx, call) or _handed_a_model(module, call))
            and not _parameterless(ctx, call)
            and not (not module.backward_calls and _built_untrained(module, scope, call))
        ]
        calls = list(calls_in(scope, None))
        if _disables_grad(scope, calls) or _grad_disabled_globally(module):
            return False
        if _grad_off_anywhere(scope, calls):
            # the function turns grad off in a block: it chose where, for its own passes; only a program that trains
            # nothing (`_inference_program_pass`) wants none anywhere, the loop its block left out included
            forwards = []
        training = next((call for call in calls if is_optimizer_step(call)), None)
        if training is None and any(is_backward(call) for call in calls):
            return False  # gradients for an attack, a saliency map, test-time adaptation: grad is managed on purpose
        # a script that trains elsewhere (a test loop after the training loop): no later statement may read what this
        # one leaves in its names, as a later backward could go through it
        script_trains = info is None and _trains_anywhere(module)
        frozen = module.module_fact("tl102-frozen-models", _frozen_models)
        unknown: tuple[CallEvent, DroppedGraph] | None = None  # the first forward whose grad mode only callers elsewhere decide
        stop_gradient: tuple[CallEvent, cst.Call, CallEvent] | None = None  # the first stop-gradient pass feeding training
        for forward in forwards:
            dropped = None if forward.receiver_key in frozen else dropped_graph(scope, forward.node)
            if dropped is not None and info is None and _read_later(module, scope.chunk, dropped.names):
                continue  # a module-level name the rest of the script reads (`features`, saved later) keeps it
            if dropped is not None and _collected_detached(scope, forward, dropped):
                continue  # TL101's fix wrote this: the rules agree on one fix for outputs kept across the loop
            # a function that trains runs with grad on wherever it is called from
            if dropped is not None and (info is None or training is not None or _runs_from_this_file(module, info)):
                if (found := _stop_gradient_for_training(ctx, scope, forward, dropped)) is not None:
                    stop_gradient = stop_gradient or (forward, *found)
                    continue  # the cost of one forward, not an inference pass: a note, if nothing else is reported
                self._report_unused_graph(ctx, scope, forward, dropped, training)
                return True
            if dropped is not None and unknown is None and not _built_on_the_spot(module, scope, forward):
                unknown = (forward, dropped)
        # after the forwards whose graph is dropped in sight (an error): a pass of a program that trains nothing is
        # a warning whatever its output feeds
        if training is None and not script_trains and (found := _inference_program_pass(ctx, scope, frozen)) is not None:
            self._report_unused_graph(ctx, scope, found, DroppedGraph((), frozenset()), None, program=True)
            return True
        if stop_gradient is not None:
            self._report_stop_gradient(ctx, scope, *stop_gradient)
            return True
        if unknown is not None and info is not None and _grad_left_to_other_files(module, info):
            elsewhere = _callers_elsewhere_through(ctx, info)
            if elsewhere and all(caller.grad == "off" for caller in elsewhere):
                return False  # every caller, in other files, runs it under no_grad()/inference_mode()
            with_grad = next((caller for caller in elsewhere if caller.grad == "on"), None)
            undecided = next((caller for caller in elsewhere if caller.grad == "unknown"), None)
            self._report_unknown_grad(ctx, scope, *unknown, with_grad or undecided)
            return True
        return False

    def _report_stop_gradient(self, ctx, scope: ScopeAnalysis, forward: CallEvent, cut: cst.Call, trained: CallEvent) -> None:
        """A stop-gradient pass of a network the same code trains (``generator(z).detach()`` for the discriminator's
        step, ``discriminator(real).detach()`` for a relativistic target): the detached output is data for a loss
        that is backwarded, and the network's own graph is freed as soon as the forward returns. What it costs is
        that forward's saved activations and autograd's bookkeeping on every step, not a graph kept across steps,
        and the peak stays below the trained pass's own; ``torch.no_grad()`` says the same thing cheaper. A note."""
        info = scope.function
        text = _text(forward)
        evidence: list[tuple[Site, str]] = [
            ((forward.chunk, forward.node), f"`{text}` records the autograd graph"),
            ((forward.chunk, cut), f"`{quoted(forward.chunk, cut)}` stops the gradient; the detached value goes on in the step"),
            ((trained.chunk, trained.node), f"`{_text(trained)}`: the same network's pass that is trained"),
        ]
        line = _statement_line(info.node if info is not None else scope.chunk.module, forward.statement)
        ctx.report(
            forward.node,
            f"`{text}` runs with autograd on and its output is used only through `{quoted(forward.chunk, cut)}` (line "
            f"{forward.chunk.line_of(cut)}), a stop-gradient pass of a network this code trains (line "
            f"{trained.chunk.line_of(trained.node)}): the graph it records is freed as soon as the forward returns, so the "
            "cost is that forward's saved activations and autograd's bookkeeping on every step, not a graph kept",
            evidence=evidence,
            severity=Severity.NOTE,
            help=f"run `{text}` under `with torch.no_grad():` (then `.detach()` is not needed)",
            fix=_forward_under_no_grad(ctx, line),
        )

    def _report_unknown_grad(
        self, ctx, scope: ScopeAnalysis, forward: CallEvent, dropped: DroppedGraph, caller: CallerElsewhere | None,
    ) -> None:
        """The inference pass of ``_check_unused_graph`` in a function whose callers are all in other files
        (or nowhere in the workspace: a library's public method): whether grad is on depends on them. When
        one of them is found running it with grad on (in a function that trains, or at a script's module
        level), a warning that shows that call; otherwise a note that says what is not known (naming a caller
        found whose own callers decide)."""
        info = scope.function
        assert info is not None, "a function's scope"
        loop = forward.context.loops[-1]
        named = f"the loop over `{quoted(scope.chunk, loop.node.iter)}`" if isinstance(loop.node, cst.For) else f"the `while {loop.iterable_text}` loop"
        text = _text(forward)
        evidence: list[tuple[Site, str]] = [((forward.chunk, forward.node), f"`{text}` records the autograd graph when grad is on")]
        cuts = sorted(dropped.cuts, key=forward.chunk.line_of)
        cut = ""
        if cuts:
            evidence.append(((forward.chunk, cuts[0]), f"`{quoted(forward.chunk, cuts[0])}` keeps none of the graph"))
            cut = f" (`{quoted(forward.chunk, cuts[0])}` on line {forward.chunk.line_of(cuts[0])} drops it)"
        line = _statement_line(info.node, forward.statement)
        if caller is not None and caller.grad == "unknown":
            through = f" ({caller.why})" if caller.why else ""
            evidence.append(((caller.call.chunk, caller.call.node), f"`{_text(caller.call)}` calls it{through}; grad there is its own callers' to decide"))
            message = (
                f"`{text}` runs with autograd on unless the caller of `{info.qualified_name}()` turns it off: nothing uses "
                f"its graph{cut}, no backward goes through it and nothing derived from it leaves the function. `{caller.path}` "
                f"calls it on line {caller.line} without `no_grad()`, in a function whose own callers decide how grad stands "
                f"(not known here). Called with grad on, every pass of {named} records a graph and keeps its activations for nothing"
            )
        elif caller is not None:
            evidence.append(((caller.call.chunk, caller.call.node), f"`{_text(caller.call)}` runs it with grad on: {caller.why}"))
            message = (
                f"`{text}` runs with autograd on, but nothing uses its graph{cut}: no backward goes through it and nothing "
                f"derived from it leaves `{info.qualified_name}()`. `{caller.path}` calls it on line {caller.line} with grad "
                f"on ({caller.why}), so every pass of {named} records a graph and keeps its activations for nothing"
            )
        else:
            message = (
                f"`{text}` runs with autograd on unless the caller of `{info.qualified_name}()` turns it off: nothing uses "
                f"its graph{cut}, no backward goes through it and nothing derived from it leaves the function, but no call "
                "in this file says how grad stands (its callers are in other files, or it is a library's entry point). "
                f"Called with grad on, every pass of {named} records a graph and keeps its activations for nothing"
            )
        ctx.report(
            forward.node,
            message,
            evidence=evidence,
            severity=Severity.WARNING if caller is not None and caller.grad == "on" else Severity.NOTE,
            help=f"run `{text}` under `with torch.no_grad():` (or decorate `{info.name}` with `@torch.inference_mode()`)",
            fix=_forward_under_no_grad(ctx, line),
        )

    def _report_unused_graph(
        self, ctx, scope: ScopeAnalysis, forward: CallEvent, dropped: DroppedGraph, training: CallEvent | None,
        *, program: bool = False,
    ) -> None:
        info = scope.function
        if info is not None:
            where = f"`{info.qualified_name}()`"
        elif _trains_anywhere(ctx.module):
            where = "this statement, and no later statement of the script reads what it leaves"
        else:
            where = "this statement, and nothing in the file runs a backward"
        loop = forward.context.loops[-1]
        if isinstance(loop.node, cst.For):
            named = f"the loop over `{quoted(scope.chunk, loop.node.iter)}`"
        else:
            named = f"the `while {loop.iterable_text}` loop"
        text = _text(forward)
        evidence: list[tuple[Site, str]] = [
            ((forward.chunk, forward.node), f"`{text}` records the autograd graph on every pass of {named}"),
        ]
        cuts = sorted(dropped.cuts, key=forward.chunk.line_of)
        cut = ""
        if cuts:
            evidence.append(((forward.chunk, cuts[0]), f"`{quoted(forward.chunk, cuts[0])}` keeps none of the graph"))
            cut = f"; `{quoted(forward.chunk, cuts[0])}` on line {forward.chunk.line_of(cuts[0])} drops it"
        if training is not None and not ctx.in_another_file(training.chunk):
            evidence.append(((training.chunk, training.node), f"`{_text(training)}`: the function trains, so grad is on here"))
        elif training is None and info is not None:
            evidence.extend(((site.chunk, site.node), "called here with grad enabled") for site in _callers(ctx.module, info)[:1])
        if program:
            message = (
                f"`{text}` runs with autograd on in a program that trains nothing: "
                + (f"`{info.qualified_name}()` runs from the script's module level with grad on" if info is not None else "a script's module-level loop")
                + ", and nothing the script runs (in this file or the workspace functions it calls) backwards, steps an "
                f"optimizer or calls `torch.autograd`. An inference pass: every pass of {named} records a graph and keeps "
                "its activations for nothing"
            )
        else:
            message = (
                f"`{text}` runs with autograd on, but nothing uses its graph: no backward goes through its output, "
                f"and nothing derived from it leaves {where}{cut}. An inference pass: every pass of "
                f"{named} records a graph and keeps its activations for nothing"
            )
        line = _statement_line(info.node if info is not None else scope.chunk.module, forward.statement)
        ctx.report(
            forward.node, message, evidence=evidence, severity=Severity.WARNING if program else None,
            help=f"run `{text}` under `with torch.no_grad():` (or `torch.inference_mode()`)",
            fix=_forward_under_no_grad(ctx, line),
        )


    # ------------------------------------------------------------------ (g) a model no optimizer steps
    def _check_unstepped_model(self, ctx: RuleContext, scope: ScopeAnalysis) -> bool:
        """A training step that runs, with grad on, a second model that nothing trains: a teacher, a
        reference or target network. The file puts it in eval mode (or its library returns it so) and never
        back in training mode, no optimizer stepped here holds its parameters, and its input carries no
        graph, so nothing needs the graph its forward records; yet the backward through the loss built
        from it computes gradients for all its parameters, kept in their ``.grad`` with nothing to clear
        them, and its activations live until then. A model frozen as a whole records nothing; one whose
        input comes from the trained model (a perceptual loss) must keep its graph."""
        info = scope.function
        module = ctx.module
        if info is not None and (
            _framework_hook(ctx, info) or _test_function(info) or any(not _neutral(d, scope) for d in info.node.decorators)
        ):
            return False
        calls = list(scope.calls())
        steps = [call for call in calls if is_optimizer_step(call)]
        # what the function freezes (`vae.requires_grad_(False)`) is read per model below, as `_frozen_models`
        if not steps or not any(is_backward(call) for call in calls) or _sets_grad_mode(calls) or _grad_disabled_globally(module):
            return False
        stepped = _stepped_parameters(ctx, scope, steps)
        if not stepped:
            return False  # an optimizer built elsewhere: what it trains is not known
        owners, sources = stepped
        frozen = module.module_fact("tl102-frozen-models", _frozen_models)
        for forward in calls:
            key, receiver, inputs = forward.receiver_key, forward.receiver, [*forward.args, *forward.kwargs.values()]
            held: CallEvent | None = None  # the held model's own forward, for a module that runs one inside
            held_as: str | None = None  # its name there (`self.teacher`), for a model run one level in
            component = _pipeline_component_run(scope, forward)  # `pipe.encode_prompt(...)`, `pipe.vae.encode(pixels)`
            if component is not None:
                key, receiver = component
            elif (
                key is not None and (not _is_model_forward(forward, set()) or _parameterless(ctx, forward))
                or key is None and forward.function is not None
            ):
                key, receiver, inputs = _model_run_by_helper(ctx, scope, forward)
            elif key is not None and any(Tag.GRAPH in value.tags for value in inputs):
                # a loss module holding a teacher (`DistillationLoss(teacher)`): its forward runs it on some inputs only
                key, receiver, inputs, held = _model_held_by_module(ctx, scope, forward)
            if (
                key is None or forward.context.grad_off is not None or Tag.GRAPH not in forward.result.tags and component is None
                or key in frozen or component is not None and _frozen_through_name(ctx, scope, forward, key, frozen)
                or any(Tag.GRAPH in value.tags for value in inputs) or _shares_parameters(ctx, scope, forward, key, owners)
            ):
                # the model may run one level in: a method of this object (`self.loss(batch)` running `self.ref_model`),
                # or the forward of a module built here that holds it (`model(images)` running `self.teacher`)
                inside = [
                    found for found in _models_run_inside(ctx, scope, forward)
                    if not {found[0], found[1]} & frozen and not _shares_parameters(ctx, scope, forward, found[0], owners)
                ] if forward.context.grad_off is None and Tag.GRAPH in forward.result.tags else []
                if not inside:
                    continue
                key, held_as, receiver, held = inside[0]
            kept_in_eval = _kept_in_eval_mode(ctx, forward, key, receiver)
            if kept_in_eval is None and held_as is not None and held is not None:
                kept_in_eval = _kept_in_eval_by_holder(ctx, held, held_as, key)
            if kept_in_eval is None and component is not None:
                kept_in_eval = _component_loaded_in_eval(ctx, key, receiver)
            if kept_in_eval is None:
                continue
            step = steps[0]
            text = _text(forward)
            runner = held.scope.function.qualified_name if held is not None and held.scope.function is not None else None
            inside = f" (`{runner}()` runs `{_text(held)}`)" if held is not None else ""
            evidence: list[tuple[Site, str]] = [((forward.chunk, forward.node), f"`{text}` records the autograd graph here")]
            if held is not None:
                evidence.append(((held.chunk, held.node), f"`{_text(held)}` runs `{key}` on inputs that carry no graph"))
            ctx.report(
                forward.node,
                f"`{text}` runs with autograd on in a training step, but nothing trains `{key}`{inside}: {kept_in_eval[1]}, and "
                f"the optimizers stepped here hold only the parameters of {', '.join(f'`{source}`' for source in sources)}. Its input "
                "carries no graph, so the graph it records serves nothing: the backward computes a gradient for each of "
                f"`{key}`'s parameters, kept in `.grad` with nothing to clear it, and its activations live until then",
                evidence=[*evidence, (kept_in_eval[0], kept_in_eval[1]), ((step.chunk, step.node), f"`{_text(step)}` does not step `{key}`")],
                severity=Severity.WARNING,
                help=f"freeze it once: `{key}.requires_grad_(False)` (or run `{_text(held)}` under `with torch.no_grad():`)" if held else
                f"run `{text}` under `with torch.no_grad():` (or freeze it once: `{key}.requires_grad_(False)`)",
            )
            return True
        return False

    def _check_detached_forward(self, ctx: RuleContext, scope: ScopeAnalysis) -> bool:
        """A second network run where grad is on for training, whose output is used only ``.detach()``ed: a
        momentum target encoder inside a module's ``forward`` (``target_encoder(view).detach()`` as the
        regression target), a target network in a step that backwards. The code itself says no gradient
        may go through it, so the graph its forward records serves nothing, yet it keeps every layer's
        activations until the output is dropped. Grad is on where the function backwards or steps an
        optimizer, or in a module's ``forward`` that also runs another network whose output goes on
        (the trained path). A model the file freezes records nothing, and is left alone; so is a network
        whose output goes on elsewhere in the function, detached on a second pass only (a stop-gradient
        branch of the trained network itself)."""
        info = scope.function
        module = ctx.module
        if info is None or is_eval_name(info.name) or _framework_hook(ctx, info) or _test_function(info) or any(
            not _neutral(d, scope) for d in info.node.decorators
        ):
            return False
        calls = list(calls_in(scope, None))
        if _sets_grad_mode(calls) or _grad_disabled_globally(module):
            return False
        trains = next((call for call in calls if is_backward(call) or is_optimizer_step(call)), None)
        in_forward = info.name == "forward" and info.owner is not None and ctx.summary.local_class_kind(info.owner).kind == MODULE
        if trains is None and not in_forward:
            return False
        frozen = module.module_fact("tl102-frozen-models", _frozen_models)
        runs = [call for call in scope.calls() if call.context.grad_off is None and _calls_an_object(call)]
        kept = [call for call in runs if dropped_graph(scope, call.node) is None]
        for forward in runs:
            key = forward.receiver_key
            if key in frozen or forward in kept:
                continue
            dropped = dropped_graph(scope, forward.node)
            if any(call.receiver_key == key for call in kept):
                # a stop-gradient on a second pass of the trained network itself (SimSiam, DoRA's norm) is a choice; one this
                # step's optimizer trains (the generator's pass for the discriminator's step) costs a forward's activations
                found = _stop_gradient_for_training(ctx, scope, forward, dropped) if dropped is not None else None
                if found is not None:
                    self._report_stop_gradient(ctx, scope, forward, *found)
                    return True
                continue
            if dropped is None or not dropped.cuts or not all(_detaches(cut) for cut in dropped.cuts):
                continue
            others = [call for call in kept if call.receiver_key != key]
            trained = next((call for call in others if call.receiver is not None and Tag.MODEL in call.receiver.tags), others[-1] if others else None)
            if trains is None and trained is None:
                continue  # a forward that runs no other network: what its caller does with grad is not known here
            text = _text(forward)
            cuts = sorted(dropped.cuts, key=forward.chunk.line_of)
            evidence: list[tuple[Site, str]] = [
                ((forward.chunk, forward.node), f"`{text}` records the autograd graph"),
                ((forward.chunk, cuts[0]), f"`{quoted(forward.chunk, cuts[0])}`: every use of its output is detached"),
            ]
            if trains is not None:
                evidence.append(((trains.chunk, trains.node), f"`{_text(trains)}`: the function trains, so grad is on here"))
                where = f"`{info.qualified_name}()` trains, so grad is on"
            else:
                assert trained is not None, "a forward with another network's output going on"
                evidence.append(((trained.chunk, trained.node), f"`{_text(trained)}`: the network this forward trains"))
                where = (
                    f"`{info.qualified_name}()` is a module's forward that also runs `{_text(trained)}`, whose output "
                    "goes on to be trained, so it runs with grad on in training"
                )
            line = _statement_line(info.node, forward.statement)
            ctx.report(
                forward.node,
                f"`{text}` runs with autograd on, but its output is used only detached "
                f"(`{quoted(forward.chunk, cuts[0])}` on line {forward.chunk.line_of(cuts[0])}): no gradient may go through it, "
                f"so the graph it records serves nothing. {where}: each call keeps every layer's activations of "
                f"`{key}` until its output is dropped (unless `{key}`'s parameters are frozen where this file cannot see)",
                evidence=evidence,
                severity=Severity.WARNING,
                help=f"run `{text}` under `with torch.no_grad():` (then `.detach()` is not needed)",
                fix=_forward_under_no_grad(ctx, line),
            )
            return True
        return False

    # ------------------------------------------------------------------ (e) one inference forward
    def _check_single_forward(self, ctx, scope: ScopeAnalysis) -> bool:
        """One forward, outside any loop, whose graph nothing uses, in a file that runs no backward and
        steps no optimizer, where grad is known on and the pass is the program's work: a web framework's
        request handler of this file calls the function (the server runs it for every request, an
        embedding endpoint, as a loop would), or the file's own module level runs it (an inference
        script's `synthesize()`) and turns what the forward computes into results (`.cpu().numpy()`,
        `.tolist()`: a waveform written out, labels printed). A script's one forward whose output is
        dropped (a warm-up, a check after exporting a model) costs one graph, and is left alone. Turning
        grad off around another forward of the function does not cover this one. The forward may be a
        method of the model the function switched to eval (`vocoder.eval()`, then `vocoder.infer(mels)`).
        A script's module-level statement is the same pass as the same body in `main()` (`_check_script_forward`)."""
        info = scope.function
        module = ctx.module
        if info is None:
            return self._check_script_forward(ctx, scope)
        if _framework_hook(ctx, info) or _test_function(info) or any(not _neutral(d, scope) for d in info.node.decorators):
            return False
        if module.module_fact("TL102 the file trains", _trains_anywhere):
            return False
        calls = list(calls_in(scope, None))
        switched = {_switched_model(call) for call in calls if _is_mode_switch(call) and _mode(call) == "eval"}
        forwards = [
            call for call in scope.calls()
            if not call.context.loops and call.context.grad_off is None
            and (
                _records_graph(call) and (_is_model_forward(call, set()) or _runs_model_layers(ctx, call))
                or _switched_model_method(ctx, call, switched)
            )
            and not _parameterless(ctx, call) and not _built_untrained(module, scope, call)
        ]
        if not forwards:
            return False
        if _trains(calls) or _disables_grad(scope, calls) or _grad_disabled_globally(module):
            return False
        served = _served_per_request(ctx, info)
        script = served is None and _runs_from_this_file(module, info)
        # neither: grad is its callers' to decide, where they are in other files (an agent's `act`, held by a rollout
        # object; a predictor's `predict`, run by a command-line script), or nowhere in view (a library's entry point)
        left_to_callers = served is None and not script
        if left_to_callers and not _grad_left_to_other_files(module, info):
            return False  # a caller in this file decides how grad stands (under no_grad(), or run by its module level)
        # a model handed in by a caller of this file is that caller's pass, which its own checks read
        parameters = info.node.params
        handed = frozenset(
            param.name.value for param in (*parameters.posonly_params, *parameters.params, *parameters.kwonly_params)
        ) if left_to_callers and _callers(module, info) else frozenset()
        frozen = module.module_fact("tl102-frozen-models", _frozen_models)
        for forward in forwards:
            dropped = None if forward.receiver_key in frozen else dropped_graph(scope, forward.node)
            if dropped is None or script and not any(_reads_values(cut) for cut in dropped.cuts):
                continue  # in a script, only a pass whose numbers are used: not a shape check, not a warm-up
            if left_to_callers:
                if (forward.receiver_key or "").split(".")[0] in handed:
                    continue
                numbers = next((cut for cut in dropped.cuts if _turned_into_numbers(scope, info.node, cut)), None)
                if numbers is None and not dropped.cuts:
                    # consumed by graph-free operations (a comparison, an index): what the function returns says
                    numbers = next((node.value for node in own_returns(info.node) if isinstance(node, cst.Return) and node.value is not None
                                    and _turned_into_numbers(scope, node.value, node.value)), None)
                if numbers is None:
                    continue  # a detached tensor computed on (a stop-gradient target), not a decoded result
                return self._report_single_forward_left_to_callers(ctx, scope, forward, numbers)
            text = _text(forward)
            evidence: list[tuple[Site, str]] = [((forward.chunk, forward.node), f"`{text}` records the autograd graph")]
            cuts = sorted(dropped.cuts, key=forward.chunk.line_of)
            cut = ""
            if cuts:
                evidence.append(((forward.chunk, cuts[0]), f"`{quoted(forward.chunk, cuts[0])}` keeps none of the graph"))
                cut = f"; `{quoted(forward.chunk, cuts[0])}` on line {forward.chunk.line_of(cuts[0])} drops it"
            if served is not None:
                site, decorator = served
                evidence.append(((site.chunk, decorator), "the web server calls this handler for every request, with grad on"))
                evidence.append(((site.chunk, site.node), "the handler calls it here"))
                evidence.append(((forward.chunk, info.node.name), f"`@torch.inference_mode()` on `{info.name}` covers every request it serves"))
                why = (
                    "An inference pass the server runs for every request: each keeps every layer's activations until it "
                    "returns, for gradients nobody computes"
                )
            else:
                evidence.extend(((site.chunk, site.node), "called here with grad enabled") for site in _callers(module, info)[:1])
                why = (
                    "An inference script's pass: it keeps every layer's activations until the function returns, for "
                    "gradients nobody computes (a long input's graph is what runs it out of memory)"
                )
            line = _statement_line(info.node, forward.statement)
            ctx.report(
                forward.node,
                f"`{text}` runs with autograd on, but nothing uses its graph: no backward goes through its output, "
                f"nothing derived from it leaves `{info.qualified_name}()`{cut}, and nothing in this file trains. {why}"
                + (_UNKNOWN_CLASS_NOTE.format(method=forward.method) if _unknown_model_method(ctx, forward) else ""),
                evidence=evidence,
                severity=Severity.WARNING,
                help=f"run `{text}` under `with torch.no_grad():` (or decorate `{info.name}` with `@torch.inference_mode()`)",
                fix=_forward_under_no_grad(ctx, line),
            )
            return True
        return False


    def _report_single_forward_left_to_callers(self, ctx: RuleContext, scope: ScopeAnalysis, forward: CallEvent, cut: cst.CSTNode) -> bool:
        """``_check_single_forward``'s pass in a function whose callers are all in other files, or nowhere in view:
        its output leaves autograd in sight as numbers (``.item()``, ``.numpy()``, ``.tolist()``, an ``argmax`` read
        into Python), so the function is an inference pass whatever calls it. Quiet when every caller found runs it
        under ``no_grad()``/``inference_mode()``; a warning that shows a caller found running it with grad on (at a
        script's module level, in a function that steps an optimizer or that its file runs); otherwise a note that
        says grad is not known here."""
        info = scope.function
        assert info is not None, "a function's scope"
        elsewhere = _callers_elsewhere_through(ctx, info)
        if elsewhere and all(caller.grad == "off" for caller in elsewhere):
            return False  # every caller, in other files, runs it under no_grad()/inference_mode()
        caller = next((other for other in elsewhere if other.grad == "on"), None)
        undecided = next((other for other in elsewhere if other.grad == "unknown"), None)
        text = _text(forward)
        evidence: list[tuple[Site, str]] = [
            ((forward.chunk, forward.node), f"`{text}` records the autograd graph when grad is on"),
            ((forward.chunk, cut), f"`{quoted(forward.chunk, cut)}` turns its output into numbers: none of the graph is kept"),
            ((forward.chunk, info.node.name), f"`@torch.no_grad()` on `{info.name}` would cover every call"),
        ]
        uses = (
            f"`{text}` runs with autograd on{{unless}}, but `{info.qualified_name}()` only turns its output into numbers "
            f"(`{quoted(forward.chunk, cut)}` on line {forward.chunk.line_of(cut)}): no backward goes through it and nothing "
            "derived from it that carries the graph leaves the function. An inference pass"
        )
        if caller is not None:
            evidence.append(((caller.call.chunk, caller.call.node), f"`{_text(caller.call)}` runs it with grad on: {caller.why}"))
            message = uses.format(unless="") + (
                f": `{caller.path}` calls it on line {caller.line} with grad on ({caller.why}), so each call keeps every "
                "layer's activations until it returns, for gradients nobody computes"
            )
        else:
            if undecided is not None:
                evidence.append(((undecided.call.chunk, undecided.call.node), f"`{_text(undecided.call)}` calls it; grad there is its own callers' to decide"))
                known = f"`{undecided.path}` calls it on line {undecided.line} without `no_grad()`, in a function whose own callers decide how grad stands"
            else:
                known = "no call in the workspace says how grad stands (its callers hold it as an attribute or a value, or it is a library's entry point)"
            message = uses.format(unless=f" unless the caller of `{info.qualified_name}()` turns it off") + (
                f": {known}. Called with grad on, each call keeps every layer's activations until it returns, for "
                "gradients nobody computes"
            )
        line = _statement_line(info.node, forward.statement)
        ctx.report(
            forward.node,
            message + (_UNKNOWN_CLASS_NOTE.format(method=forward.method) if _unknown_model_method(ctx, forward) else ""),
            evidence=evidence,
            severity=Severity.WARNING if caller is not None else Severity.NOTE,
            help=f"run `{text}` under `with torch.no_grad():` (or decorate `{info.name}` with `@torch.inference_mode()`)",
            fix=_forward_under_no_grad(ctx, line),
        )
        return True

    def _check_script_forward(self, ctx: RuleContext, scope: ScopeAnalysis) -> bool:
        """``_check_single_forward`` at a script's module level: one forward outside any loop, with grad on, in a
        program that trains nothing (nothing in this file, or in the workspace functions its module level runs,
        backwards, steps an optimizer or calls ``torch.autograd``), whose graph dies in sight and whose numbers the
        script reads (a cut that reads values, or a later statement that reads the names it binds: a prediction
        printed or saved). Its module level is what the script runs, so grad is known on there, as it is in a
        ``main()`` called from it; a forward whose output nothing reads (a warm-up) is left alone, as there. A warning
        for a model of a workspace class, whose forward is read; a note for a library object, whose call may turn grad
        off itself."""
        module = ctx.module
        if module.module_fact("the program trains", program_trains) or _grad_disabled_globally(module):
            return False
        frozen = module.module_fact("tl102-frozen-models", _frozen_models)
        for forward in scope.calls():
            if forward.context.loops or forward.context.grad_off is not None or forward.receiver_key in frozen:
                continue
            if not (_records_graph(forward) and (_is_model_forward(forward, set()) or _runs_model_layers(ctx, forward))):
                continue
            if _parameterless(ctx, forward) or _built_untrained(module, scope, forward):
                continue
            dropped = dropped_graph(scope, forward.node)
            if dropped is None:
                continue
            read_later = _read_later(module, scope.chunk, dropped.names)
            if not read_later and not any(_reads_values(cut) for cut in dropped.cuts):
                continue  # nothing reads what it computes: a warm-up, a shape check
            text = _text(forward)
            evidence: list[tuple[Site, str]] = [((forward.chunk, forward.node), f"`{text}` records the autograd graph")]
            cuts = sorted(dropped.cuts, key=forward.chunk.line_of)
            if cuts:
                evidence.append(((forward.chunk, cuts[0]), f"`{quoted(forward.chunk, cuts[0])}` keeps none of the graph"))
            names = ", ".join(f"`{name}`" for name in sorted(dropped.names))
            read = f"; later statements read {names}" if read_later and names else ""
            # a workspace class's forward is read; a library object's call may turn grad off itself (an annotator
            # whose `__call__` runs under `no_grad()` and returns an image): what it does is not known here
            known = forward.receiver is not None and isinstance(forward.receiver.detail, ClassInfo)
            unread = "" if known else (
                f". `{forward.receiver_key or text}` is not a class of the workspace: whether its call records a graph "
                "(or turns grad off itself) is not read, so this is a note"
            )
            line = _statement_line(scope.chunk.module, forward.statement)
            ctx.report(
                forward.node,
                f"`{text}` runs with autograd on at the script's module level, in a program that trains nothing: nothing "
                "in this file, or in the workspace functions it runs, backwards, steps an optimizer or calls "
                f"`torch.autograd`{read}. An inference script's pass: it keeps every layer's activations for gradients "
                "nobody computes (a long input's graph is what runs it out of memory)" + unread
                + (_UNKNOWN_CLASS_NOTE.format(method=forward.method) if _unknown_model_method(ctx, forward) else ""),
                evidence=evidence,
                severity=Severity.WARNING if known else Severity.NOTE,
                help=f"run `{text}` under `with torch.no_grad():` (or `torch.inference_mode()`)",
                fix=_forward_under_no_grad(ctx, line),
            )
            return True
        return False


# ---------------------------------------------------------------------- helpers
def _inference_helper(
    ctx: RuleContext, scope: ScopeAnalysis, call: CallEvent, helper,
) -> tuple[CallEvent, CallEvent, CallEvent] | None:
    """How ``helper`` (an evaluation function of another file, run by ``call``) evaluates with grad left to
    its caller through the object it is handed: the forward, the ``.eval()`` before it, and the helper's
    call of the object's method (``model.predict(batch)``, resolved by what ``call`` passes). A forward the
    helper runs on its own is its file's finding; this is what only the caller's file can see."""
    inner = helper.analysis(ctx.summary)
    if inner is None or not is_eval_name(helper.name) or not _leaves_grad_to_caller(ctx, helper, inner):
        return None
    for through in inner.calls():
        key = through.receiver_key
        if key not in inner.params or through.method is None or through.function is not None:
            continue
        expression = passed_expression(call, helper, key)
        owner = _instance_of(ctx, scope, call, expression) if expression is not None else None
        method = owner.find_method(through.method, ctx.summary) if owner is not None else None
        found = _evaluates(ctx, method) if method is not None else None
        if found is not None:
            return (*found, through)
    return None


def _instance_of(ctx: RuleContext, scope: ScopeAnalysis, call: CallEvent, expression: cst.BaseExpression) -> ClassInfo | None:
    """The workspace class ``expression`` is an instance of: its value says so, or the name was last bound
    (in this scope before ``call``, or for a script, by an earlier top-level statement) by calling the class
    (``model = MTDNNModel(config)``)."""
    value = scope.value_at(expression)
    if value is not None and isinstance(value.detail, ClassInfo):
        return value.detail
    if isinstance(expression, cst.Call):  # passed_expression already followed the name to what built it
        raw = dotted(expression.func)
        return ctx.summary.local_class(ctx.summary.canonical(raw)) if raw is not None else None
    if not isinstance(expression, cst.Name):
        return None
    binding = scope.last_binding(expression.value, before=call)
    if binding is None and scope.function is None:
        earlier = [
            event for chunk in ctx.module.chunks[: scope.chunk.index] for other in ctx.module.scopes_of(chunk)
            if other.function is None for event in other.events
            if isinstance(event, AssignEvent) and event.targets == (expression.value,)
        ]
        binding = earlier[-1] if earlier else None
    built = binding.value_node if binding is not None else None
    raw = dotted(built.func) if isinstance(built, cst.Call) else None
    return ctx.summary.local_class(ctx.summary.canonical(raw)) if raw is not None else None


def _held_or_named(receiver: str, info) -> bool:
    """A receiver ``_evaluator_class`` may resolve: a plain name, or one attribute of ``self`` in a method."""
    if not receiver.startswith("self"):
        return True
    return info is not None and info.owner is not None and receiver.count(".") == 1 and receiver.startswith("self.")


def _evaluator_class(ctx: RuleContext, scope: ScopeAnalysis, call: CallEvent) -> ClassInfo | None:
    """The workspace class of the object whose method ``call`` runs: a name's (``_receiver_class``), or what the
    class keeps in ``self.<attribute>`` (analysis/held_instances.py: ``self._trainer = Trainer(...)`` in a set-up
    method, read through a base class's ``trainer`` property)."""
    receiver = call.receiver_key
    assert receiver is not None, "the candidates call a method of a receiver"
    if receiver.startswith("self."):
        info = scope.function
        return held_instance(ctx.summary, info.owner, receiver.split(".", 1)[1]) if info is not None and info.owner is not None else None
    return _receiver_class(ctx, scope, call)


def _receiver_class(ctx: RuleContext, scope: ScopeAnalysis, call: CallEvent) -> ClassInfo | None:
    """The workspace class the receiver of ``call`` (a name) is an instance of: bound here by building it,
    or a parameter that a call of the function in this file fills with an instance of a class whose
    method of that name is the same one."""
    assert call.receiver_key is not None and call.method is not None, "the candidates call a method of a name"
    name = call.receiver_key
    info = scope.function
    if "." in name:
        return None
    if info is None or name not in scope.params:
        return _built_instance(ctx, scope, call, cst.Name(name))
    owners = [
        owner for site in _callers(ctx.module, info)
        if (expression := passed_expression(site, info, name)) is not None
        and (owner := _built_instance(ctx, site.scope, site, expression)) is not None
    ]
    methods = {id(owner.find_method(call.method, ctx.summary)) for owner in owners}
    return owners[0] if len(methods) == 1 else None


def _built_instance(ctx: RuleContext, scope: ScopeAnalysis, call: CallEvent, expression: cst.BaseExpression) -> ClassInfo | None:
    """``_instance_of``, and two more ways a name gets an instance: a class picked into a name first
    (``model_type = GraphTrainer``, then ``model_type(args)``), and a class method that builds one
    (``Trainer.load(path)`` whose body returns ``cls(...)``)."""
    found = _instance_of(ctx, scope, call, expression)
    if found is not None or not isinstance(expression, cst.Name):
        return found
    binding = scope.last_binding(expression.value, before=call)
    built = binding.value_node if binding is not None else None
    if not isinstance(built, cst.Call):
        return None
    if isinstance(built.func, cst.Name):
        picked = scope.last_binding(built.func.value, before=binding)
        raw = dotted(picked.value_node) if picked is not None and picked.value_node is not None else None
        return ctx.summary.local_class(ctx.summary.canonical(raw)) if raw is not None else None
    if isinstance(built.func, cst.Attribute) and (raw := dotted(built.func.value)) is not None:
        owner = ctx.summary.local_class(ctx.summary.canonical(raw))
        factory = owner.find_method(built.func.attr.value, ctx.summary) if owner is not None else None
        return owner if factory is not None and builds_own_class(factory.node) else None
    return None


def _evaluates(ctx: RuleContext, function) -> tuple[CallEvent, CallEvent] | None:
    """The forward a method runs after switching its model to eval mode, with grad left to its caller, and
    that switch: None when it controls grad itself, trains, or switches nothing to eval."""
    inner = function.analysis(ctx.summary)
    if inner is None or not _leaves_grad_to_caller(ctx, function, inner):
        return None
    calls = list(calls_in(inner, None))
    switches = [c for c in calls if _is_mode_switch(c) and _mode(c) == "eval"]
    switched = {_switched_model(c) for c in switches}
    forward = next(
        (c for c in calls if (_is_model_forward(c, switched) or _switched_model_method(ctx, c, switched)) and c.context.grad_off is None),
        None,
    )
    if forward is None or not switches:
        return None
    return forward, switches[0]


def _switched_model_method(ctx: RuleContext, call: CallEvent, switched: set[str | None]) -> bool:
    """``self.network.predict(batch)`` right after ``self.network.eval()``: a method of the module the
    function switched to inference, fed data, whose result the function goes on with. A workspace class's method
    counts when it returns what the model's layers compute (``_runs_model_layers``); a model whose class is
    not known here (built by a subclass's factory, loaded from another file) counts unless the method is
    one of ``nn.Module``'s own (``parameters()``, ``to()``, ``state_dict()``) or one its library runs
    without grad (``LIBRARY_NO_GRAD_METHODS``); a library class's is never guessed."""
    if call.method is None or call.receiver_key is None or call.receiver_key not in switched:
        return False
    if call.method in _MODULE_OWN_METHODS or call.method in LIBRARY_NO_GRAD_METHODS or not _result_used(call):
        return False
    if not any(isinstance(arg.value, (cst.Name, cst.Attribute, cst.Subscript, cst.Call)) for arg in call.arg_nodes):
        return False  # `model.get_input_embeddings()`, `model.num_parameters(True)`: nothing is fed to the model
    receiver = call.receiver
    detail = receiver.detail if receiver is not None else None
    if isinstance(detail, ClassInfo):
        return _runs_model_layers(ctx, call) or _runs_own_forward(ctx, detail, call.method)
    if detail is not None:
        return False
    owner = _model_class_of(ctx, call)
    return owner is None or _runs_own_forward(ctx, owner, call.method)


def _runs_own_forward(ctx: RuleContext, owner: ClassInfo, name: str) -> bool:
    """Whether the workspace model class's method ``name`` runs the model with grad left to its caller:
    the model itself (``self(x)``, ``self.forward(x)``), whatever it makes of the output (``.argmax(-1)``),
    or its layers (``return self.decoder(self.embed(tokens), memory)``)."""
    method = owner.find_method(name, ctx.summary)
    inner = method.analysis(ctx.summary) if method is not None else None
    if method is None or inner is None or not _leaves_grad_to_caller(ctx, method, inner):
        return False
    return Tag.GRAPH in inner.return_value.tags or any(
        call.context.grad_off is None and (
            call.receiver_key == "self" and (call.method is None or call.method == "forward")
            or (call.receiver_key or "").startswith("self.") and _is_model_forward(call, set())
        )
        for call in calls_in(inner, None)
    )


def _model_class_of(ctx: RuleContext, call: CallEvent) -> ClassInfo | None:
    """The workspace class of the model ``call`` runs a method of: its value says so, or (a parameter or
    a name built in the function) what this file's callers hand in or the function built."""
    receiver = call.receiver
    if receiver is not None and isinstance(receiver.detail, ClassInfo):
        return receiver.detail
    if call.receiver_key is None or "." in call.receiver_key:
        return None
    return _receiver_class(ctx, call.scope, call)


def _unknown_model_method(ctx: RuleContext, forward: CallEvent) -> bool:
    """A forward taken from ``_switched_model_method`` on a model of unknown class: a warning, not an error."""
    receiver = forward.receiver
    switched = {_switched_model(call) for call in calls_in(forward.scope, None) if _is_mode_switch(call)}
    return (
        forward.method is not None and "forward" not in name_words(forward.method) and not _calls_switched_attribute(forward, switched)
        and (receiver is None or receiver.detail is None) and _model_class_of(ctx, forward) is None
    )


def _feeds_a_backward(site: CallEvent) -> bool:
    """The caller backwards what the call returns (``loss = self.objective()`` then ``loss.backward()``, also
    through a function the value is handed to, or ``self.objective().backward()``): the helper computes the step's
    loss, and its forwards may reach that loss through what no output shows (forward hooks that keep a layer's
    output for the objective, as an input optimiser's do). Grad must stay on there."""
    scope, statement = site.scope, site.statement
    backwards = [call for call in scope.calls() if is_backward(call)]
    if any(node is site.node for call in backwards for node in _walk(call.node)):
        return True
    if not (isinstance(statement, cst.Assign) and any(node is site.node for node in _walk(statement.value))):
        return False
    names = {target.target.value for target in statement.targets if isinstance(target.target, cst.Name)}
    return any(isinstance(node, cst.Name) and node.value in names for call in backwards for node in _walk(call.node))


def _result_used(call: CallEvent) -> bool:
    """Whether the statement keeps or passes on what ``call`` returns (not a bare ``model.method(...)``)."""
    statement = call.statement
    return not (isinstance(statement, cst.Expr) and statement.value is call.node)


def _leaves_grad_to_caller(ctx: RuleContext, function, inner: ScopeAnalysis) -> bool:
    calls = list(calls_in(inner, None))
    return not (
        any(not _neutral(decorator, inner) for decorator in function.node.decorators)
        or _grad_off_anywhere(inner, calls) or _trains(calls) or _framework_hook(ctx, function) or _test_function(function)
    )


def _grad_known_on(module: ModuleView, scope: ScopeAnalysis) -> bool:
    """Grad is on where ``scope`` runs: a script's module level, a function that steps an optimizer (no
    caller turns grad off around training), or one this file runs itself with grad on along the way."""
    info = scope.function
    if info is None:
        return True
    return any(is_optimizer_step(call) for call in calls_in(scope, None)) or _runs_from_this_file(module, info)


def _after_eval_switch(module: ModuleView, scope: ScopeAnalysis, loop: Loop) -> bool:
    inside = next((event for event in scope.events if loop in event.context.loops), None)
    mode = _mode_before(module, scope, loop, inside) if inside is not None else None
    return mode is not None and _mode(mode) == "eval"


def _whole_evaluation(scope: ScopeAnalysis, forward: CallEvent, eval_calls: list[CallEvent]) -> bool:
    """The function's own forward runs, in a loop, a model the function itself switched to eval mode, and what the
    function returns carries no graph: the evidence, in the function, of an evaluation pass complete in itself."""
    switched = {_switched_model(call) for call in eval_calls if call.scope is scope} - {None}
    return forward.scope is scope and bool(forward.context.loops) and (forward.receiver_key in switched or _element_of(forward.node.func) in switched) \
        and Tag.GRAPH not in scope.return_value.tags


def _switches_and_runs(scope: ScopeAnalysis) -> bool:
    """The function itself switches a model to eval mode and runs it in a loop: an evaluation pass by what it does,
    whatever the function is called (a function that only calls one, ``main()``, is not one)."""
    calls = list(scope.calls())
    switched = {_switched_model(call) for call in calls if _is_mode_switch(call) and _mode(call) == "eval"} - {None}
    return bool(switched) and any(call.context.loops and _is_model_forward(call, switched) for call in calls)


def _is_eval_data(iterable_text: str) -> bool:
    return bool(name_words(iterable_text) & _EVAL_DATA_WORDS)


def _left_in_eval_mode(ctx: RuleContext, receiver: Value | None, receiver_key: str | None) -> tuple[tuple, ModeFact] | None:
    """Where the model ``receiver`` (named ``receiver_key``) was returned in eval mode by its library
    (``from_pretrained``), and what says so, when nothing in the file switches it to training mode."""
    mode = library_model_facts(receiver)[0] if receiver is not None else None
    if mode is None or receiver is None or receiver.site is None:
        return None
    key = (receiver_key or "").rpartition(".")[2]
    if any(call.method == "train" and (call.receiver_key or "").rpartition(".")[2] == key for call in ctx.module.all_calls()):
        return None
    return receiver.site, mode


def _ignite_engines(module: ModuleView) -> dict[str, tuple[str, CallEvent]]:
    assignments = [
        (event.targets[0], event.value_node) for scope in module.all_scopes for event in scope.events
        if isinstance(event, AssignEvent) and len(event.targets) == 1
    ]
    return ignite_engines(module.all_calls(), assignments)


def _run_by_a_training_engine(ctx: RuleContext, run: CallEvent, engines: dict[str, tuple[str, CallEvent]]) -> str | None:
    """The ignite engine that runs the function making ``run`` as a handler of its events (``@trainer.on(Events.X)``,
    ``trainer.add_event_handler(Events.X, handler)``) and whose process function backwards, or None."""
    handler = run.scope.function
    if handler is None:
        return None
    registered = {receiver for receiver, _ in ignite_registrations((), [handler.node])}
    registered |= {
        call.receiver_key for call in ctx.module.all_calls()
        if call.method == "add_event_handler" and call.receiver_key is not None and len(call.arg_nodes) > 1
        and isinstance(call.arg_nodes[1].value, cst.Name) and call.arg_nodes[1].value.value == handler.name
    }
    for name in sorted(name for name in registered if name in engines):
        function, built = engines[name]
        steps = next((scope for scope in ctx.module.all_scopes if scope.function is not None and scope.function.name == function
                      and scope.chunk is built.chunk), None)
        if steps is not None and any(is_backward(call) for call in calls_in(steps, None)):
            return name
    return None


def _is_model_forward(call: CallEvent, switched: set[str | None]) -> bool:
    """A forward of a known model (calling it, `forward`, or a variant of it a model defines under that
    word: `incremental_forward`, `forward_features`), a call of something that was switched to
    ``eval()`` (so a module), or a call passing a keyword only a library model's forward takes."""
    receiver = call.receiver
    if receiver is not None and Tag.MODEL in receiver.tags:
        if isinstance(receiver.detail, str) and is_parameterless_layer(receiver.detail):
            return False  # `nn.CosineSimilarity()(a, b)` records a graph only if `a` or `b` came from a forward
        return call.method is None or "forward" in name_words(call.method)
    if call.method is None and _element_of(call.node.func) in switched - {None}:
        return True
    if _calls_switched_attribute(call, switched):
        return True
    return call.method is None and (call.receiver_key or call.callee) in switched - {None} or _forward_by_keyword(call)


def _calls_switched_attribute(call: CallEvent, switched: set[str | None]) -> bool:
    """``self.model(x)`` after ``self.model.eval()``: the attribute switched to eval mode is a module, and calling it
    is its forward (the flow reads the call as a method ``model`` of ``self`` when nothing here says what the
    attribute holds: a model handed to the trainer's constructor)."""
    return call.method is not None and isinstance(call.node.func, cst.Attribute) and dotted(call.node.func) in switched - {None}


def _forward_by_keyword(call: CallEvent) -> bool:
    """``self.model(input_ids, output_hidden_states=True)``: calling a value (of unknown kind) with a keyword
    that only a library model's forward takes (``MODEL_FORWARD_KEYWORDS``)."""
    if call.method not in {None, "forward"} or call.function is not None:
        return False  # a workspace function taking the flag on is followed as one
    return any(arg.keyword is not None and arg.keyword.value in MODEL_FORWARD_KEYWORDS for arg in call.arg_nodes)


def _handed_a_model(module: ModuleView, call: CallEvent) -> bool:
    """``fn(net, x)`` calling its parameter ``net``, a value of unknown kind, where every call of the function in this
    file hands it a model: a forward, known by what is passed rather than by the parameter's name."""
    function = call.scope.function
    key = call.receiver_key
    if call.method is not None or function is None or key is None or key not in function.positional_parameters:
        return False
    if call.receiver is not None and call.receiver.tags:
        return False  # its kind is known: _is_model_forward reads it
    passed = module.arguments_for(function, key)
    return bool(passed) and all(Tag.MODEL in value.tags for _, value in passed)


def _calls_an_object(call: CallEvent) -> bool:
    """``net(x)`` (or ``net.forward(x)``) on a value that is not a workspace function: a model, or a value of
    unknown kind (a network a helper returns). A parameterless layer records nothing of its own."""
    receiver = call.receiver
    if call.function is not None or call.receiver_key is None or call.method not in {None, "forward"}:
        return False
    if receiver is None or not receiver.tags:
        return True
    return Tag.MODEL in receiver.tags and not (isinstance(receiver.detail, str) and is_parameterless_layer(receiver.detail))


def _detaches(cut: cst.CSTNode) -> bool:
    """``out.detach()`` or ``out.data``: the code says that no gradient goes through the value."""
    if isinstance(cut, cst.Call) and isinstance(cut.func, cst.Attribute):
        return cut.func.attr.value in {"detach", "detach_"}
    return isinstance(cut, cst.Attribute) and cut.attr.value == "data"



def _forward_under_no_grad(ctx: RuleContext, statement: cst.CSTNode | None) -> Fix | None:
    """The fix that runs the forward's statement (``_statement_line``) under ``torch.no_grad()``; unsafe: the output
    no longer says ``requires_grad``, which code that inspects it could read."""
    no_grad = ctx.name_for("torch.no_grad")
    edit = ctx.indent_block(statement, f"with {no_grad}()") if no_grad and statement is not None else None
    return ctx.fix("run the forward under torch.no_grad()", [edit], safe=False)

def _stop_gradient_for_training(
    ctx: RuleContext, scope: ScopeAnalysis, forward: CallEvent, dropped: DroppedGraph,
) -> tuple[cst.Call, CallEvent] | None:
    """The cut and the trained pass when ``forward`` is a stop-gradient pass of a network the same code trains: its
    graph dies only where the code detaches it (``.detach()``, ``.data``), one detached value goes on in the step (the
    discriminator's input, a relativistic target), an optimizer stepped here holds the network's parameters, and
    another pass of it in the scope keeps its graph (the generator's own step). A sample grid's
    ``generator(z).detach()`` that ``save_image`` reads is dropped there, and a frozen feature extractor run on the
    targets is trained by nothing: inference passes, reported as such."""
    key = forward.receiver_key
    if key is None or not dropped.cuts or not all(_detaches(cut) for cut in dropped.cuts):
        return None
    stepped = _stepped_parameters(ctx, scope, [call for call in scope.calls() if is_optimizer_step(call)])
    if not stepped or key not in stepped[0]:
        return None
    trained = next((
        call for call in scope.calls()
        if call.receiver_key == key and call is not forward and call.context.grad_off is None and dropped_graph(scope, call.node) is None
    ), None)
    cut = next((cut for cut in dropped.cuts if isinstance(cut, cst.Call) and dropped_graph(scope, cut) is None), None)
    return None if trained is None or cut is None else (cut, trained)


def _records_graph(call: CallEvent) -> bool:
    """The call's result carries an autograd graph: the dataflow says so, or it is a library model's forward
    (by its keywords) run with grad on."""
    return Tag.GRAPH in call.result.tags or call.context.grad_off is None and _forward_by_keyword(call)


def _builds_a_module(ctx: RuleContext, forward: CallEvent, calls: list[CallEvent]) -> bool:
    """The "model" a helper calls is its parameter (a model by its name only: ``module``, ``net``)
    and every call into the helper passes a class there, or a ``functools.partial`` of one: calling
    it builds a module and runs no forward (dinov2's k-NN evaluation hands
    ``partial(KnnModule, ...)`` to the helper that builds one per try)."""
    receiver, helper = forward.receiver, forward.scope.function
    if receiver is None or receiver.site is None or not isinstance(receiver.site[1], cst.Param) or helper is None:
        return False
    links = [call for call in calls if call.function is helper]
    return bool(links) and all(_passes_a_class(ctx, link, helper, receiver.site[1]) for link in links)


def _passes_a_class(ctx: RuleContext, link: CallEvent, helper, param: cst.Param) -> bool:
    expression = passed_expression(link, helper, param.name.value)
    if isinstance(expression, cst.Call) and ctx.summary.canonical(dotted(expression.func) or "") == "functools.partial":
        expression = expression.args[0].value if expression.args and expression.args[0].keyword is None else None
    return expression is not None and _names_a_class(ctx, expression)


def _names_a_class(ctx: RuleContext, expression: cst.BaseExpression) -> bool:
    raw = dotted(expression)
    if raw is None:
        return False
    target = ctx.summary.canonical(raw)
    if target.startswith("torch.nn.") and last_part(target)[:1].isupper():
        return True
    return ctx.summary.local_class(target) is not None


def _reached_with_grad(scope: ScopeAnalysis) -> set[int]:
    """The calls of helpers the function reaches through a chain of calls with grad on at every
    link: a helper called under `torch.no_grad()` runs its forward without grad, however the helper
    reads alone (an old `Trainer.prediction_step` calls `compute_loss` inside `no_grad()`)."""
    return {
        id(event) for event, chain in ordered_events(scope, None)
        if isinstance(event, CallEvent) and all(link.context.grad_off is None for link in chain)
    }


def _evaluated_before(ctx: RuleContext, site: CallEvent, helper, parameter: str) -> CallEvent | None:
    """The ``model.eval()`` with which the caller at ``site`` switched the model it hands to ``helper``'s
    ``parameter`` to inference, when the call runs with grad on in a caller that trains nothing and that no
    call in this file runs under ``no_grad()``."""
    passed = _argument_for(site, helper, parameter)
    name = dotted(passed) if passed is not None else None
    caller = site.scope
    if name is None or site.context.grad_off is not None:
        return None
    calls = list(calls_in(caller, None))
    if _trains(calls) or _grad_off_anywhere(caller, calls):
        return None
    if caller.function is not None and (
        _framework_hook(ctx, caller.function)
        or any(call.context.grad_off is not None for call in _call_sites(ctx.module, caller.function))
        or _only_called_without_grad(ctx, caller.function)
    ):
        return None
    line = site.chunk.line_of(site.node)
    return next(
        (
            call for call in caller.calls()
            if _is_mode_switch(call) and _mode(call) == "eval" and _switched_model(call) == name
            and call.chunk is site.chunk and call.chunk.line_of(call.node) < line
        ),
        None,
    )


def _reached_through_evaluation(ctx: RuleContext, scope: ScopeAnalysis, eval_calls: list[CallEvent]) -> set[int]:
    """The calls the function reaches through a helper of this file that looks like an evaluation pass and
    switches the model to eval itself (``self._eval_epoch()`` called by ``_check_eval_interval``): that helper
    reports them, once."""
    switching = {id(call.scope.function) for call in eval_calls if call.scope is not scope and call.scope.function is not None}
    return {
        id(event) for event, chain in ordered_events(scope, None)
        if isinstance(event, CallEvent) and any(
            link.function is not None and id(link.function) in switching and is_eval_name(link.function.name)
            and not ctx.in_another_file(link.function.chunk)
            for link in chain
        )
    }


def _decorated_reach(ctx: RuleContext, calls: list[CallEvent]) -> set[ScopeAnalysis]:
    """The helpers the evaluation reaches through one with a decorator that may change the grad mode
    (yolov5's `export.run` under its own `@smart_inference_mode()`), and what they call: how grad
    stands in them is not known."""
    reach: set[ScopeAnalysis] = set()
    for call in calls:
        helper = call.function
        inner = helper.analysis(ctx.summary) if helper is not None else None
        if helper is None or inner is None or inner in reach:
            continue
        if all(_neutral(decorator, inner) for decorator in helper.node.decorators):  # read in the helper's own file
            continue
        reach.add(inner)
        reach.update(reached.scope for reached in calls_in(inner, None))
    return reach


def _trains(calls: list[CallEvent]) -> bool:
    return any(is_backward(call) or is_optimizer_step(call) for call in calls)


def _trains_as_called(scope: ScopeAnalysis, loop: Loop | None) -> bool:
    """A backward or an optimizer step runs in ``loop`` (the whole scope when None) as its calls run the helpers: a
    step helper's `if backward: loss.backward()` that the call hands `backward=False` trains nothing there, and that
    call is an inference pass (`apply_model_and_loss(x, y, backward=False)` in a validation loop)."""
    return any(_trains([call]) and runs_as_called(call, chain) for call, chain in ordered_calls(scope, loop))


def _in_helpers_told_not_to_train(scope: ScopeAnalysis, loop: Loop) -> set[int]:
    """The calls ``loop`` reaches in a helper whose backward or step the loop's call rules out (`self.state = "valid"`,
    then `self._fit_batch(b)` under `if self.state != "train": return`): checked alone the helper trains, so its
    inference pass shows only here."""
    items = list(ordered_calls(scope, loop))
    told = {id(chain[0]) for call, chain in items if chain and _trains([call]) and not runs_as_called(call, chain)}
    return {id(call) for call, chain in items if chain and id(chain[0]) in told}


def _not_run_as_called(scope: ScopeAnalysis, loop: Loop | None) -> frozenset[int]:
    """The backwards that ``loop`` (the whole scope when None) reaches only in helpers' branches its calls rule out
    with a literal (`if backward:` under `backward=False`): a graph they would take is not taken on this path."""
    reached = [(call, runs_as_called(call, chain)) for call, chain in ordered_calls(scope, loop) if is_backward(call)]
    return frozenset(id(call) for call, runs in reached if not runs) - {id(call) for call, runs in reached if runs}


def _grad_off_anywhere(scope: ScopeAnalysis, calls: list[CallEvent]) -> bool:
    """The function disables grad somewhere (a block, a decorator, a call): its author chose where. A block
    that only switches modes (``with torch.no_grad(): model.eval()``) computes nothing: it says nothing of
    where grad is off for the forwards after it."""
    computing = {
        id(event.context.grad_off) for event in scope.events
        if event.context.grad_off is not None and not _is_mode_switch(event)
    }
    return bool(computing) or _disables_grad(scope, calls)


def _disables_grad(scope: ScopeAnalysis, calls: list[CallEvent]) -> bool:
    """Grad turned off (or frozen) by a call rather than a with-block: ``set_grad_enabled(False)``,
    ``requires_grad_(False)``. Parameters frozen and others given back (``requires_grad = True``: the
    base frozen, the head fine-tuned) are a choice of what trains, not of where grad is off."""
    if _sets_grad_mode(calls):
        return True
    settings = [call.arg_nodes[0].value if call.arg_nodes else cst.Name("True") for call in calls if call.method == "requires_grad_"]
    settings += [
        event.value_node
        for event in scope.events
        if isinstance(event, AssignEvent)  # the events with targets
        and any(target.endswith(".requires_grad") for target in event.targets)
    ]
    return any(_is_false(value) for value in settings) and not any(_is_true(value) for value in settings)


def _sets_grad_mode(calls: list[CallEvent]) -> bool:
    """``torch.set_grad_enabled(False)`` called as a statement, not as a with-block's item."""
    return any(call.callee is not None and last_part(call.callee) == "set_grad_enabled" and not _is_with_item(call) for call in calls)


def _is_with_item(call: CallEvent) -> bool:
    """``with torch.set_grad_enabled(...):`` (already seen as the block's context), not a bare call."""
    scope = call.scope
    root = scope.function.node if scope.function is not None else scope.chunk.module
    assert root is not None, "a scope is of a statement that parsed"
    return any(
        item.item is call.node for node in _walk(root) if isinstance(node, cst.With) for item in node.items
    )


def _is_false(node) -> bool:
    return isinstance(node, cst.Name) and node.value == "False"


def _trains_anywhere(module: ModuleView) -> bool:
    """The file backwards or steps an optimizer somewhere."""
    return bool(module.backward_calls) or any(is_optimizer_step(call) for call in module.all_calls())


def _grad_disabled_globally(module: ModuleView) -> bool:
    """An inference script that turns grad off for the whole process at module level. Recorded as a
    module fact (its value, not a read of every call): a key typed in one method keeps the others'
    results while the answer stays the same."""
    return module.module_fact("TL102 grad disabled globally", _turns_grad_off_at_module_level)


def _turns_grad_off_at_module_level(module: ModuleView) -> bool:
    return any(
        call.callee is not None and last_part(call.callee) == "set_grad_enabled"
        and call.context.grad_off is None and not call.context.loops
        for scope in module.all_scopes if scope.function is None
        for call in scope.calls()
    )


def _framework_hook(ctx: RuleContext, info) -> bool:
    """A method whose grad mode the framework decides: LightningModule methods, Trainer overrides
    other than the evaluation ones (`prediction_step` runs with grad on when overridden)."""
    return info.owner is not None and grad_handled_by_framework(ctx.summary, info)


def _test_function(info) -> bool:
    """A test: `test_*` with an `assert` (pytest), or a `test_*` method of a `Test*` class (unittest's
    `self.assertEqual`), wherever its file is (`_test_seq2seq_examples.py`)."""
    node = info.node
    if not node.name.value.startswith("test_"):
        return False
    if info.owner is not None and info.owner.name.startswith("Test"):
        return True
    return any(isinstance(inner, cst.Assert) for inner in _walk(node))


def _neutral(decorator: cst.Decorator, scope: ScopeAnalysis) -> bool:
    expression = decorator.decorator
    name = dotted(expression.func if isinstance(expression, cst.Call) else expression)
    if name is None:
        return False
    canonical = scope.canonical(name)
    return canonical in _NEUTRAL_DECORATORS or call_fact(canonical, ARGUMENT_PARSING_DECORATOR) is not None


def _call_sites(module: ModuleView, info) -> list[CallEvent]:
    """Where the function is called in this module (by identity, or by name for methods)."""
    return [
        call for call in module.calls_indexed("TL102 calls by name", _calls_by_name, info.name)
        if call.function is info
        or (info.owner is not None and call.method == info.name and call.function is None)
    ]


def _calls_by_name(module: ModuleView) -> dict[str, list[CallEvent]]:
    """The file's calls by the name of the method or local function they call (a call resolved to a
    function has its name), in statement order: the call sites of a function are among its name's."""
    index: dict[str, list[CallEvent]] = {}
    for call in module.all_calls():
        for name in {call.method, call.function.name if call.function is not None else None}:
            if name is not None:
                index.setdefault(name, []).append(call)
    return index


@dataclass(frozen=True)
class CallerElsewhere:
    """A call of a function of the checked file in another workspace file, and how grad stands there."""

    call: CallEvent
    path: str
    line: int
    grad: str  # "off": under no_grad()/inference_mode(); "on": known on there; "unknown": that file's callers decide
    why: str  # how grad is known to be on there


def _callers_elsewhere(ctx: RuleContext, info) -> list[CallerElsewhere]:
    """The calls of ``info`` in the workspace's other files (analysis/callers.py), each with its grad mode."""
    folder = os.path.dirname(os.path.abspath(ctx.module.path))
    return callers_elsewhere(ctx.summary, info, lambda module, call: _grad_at_call(module, call, folder, ctx.summary))


# How many callers up from a call in another file whose own callers decide grad are followed (a trainer's final
# validation, called by the training entry script's `run_training()`, which its `__main__` block runs).
_CALLER_HOPS = 2


def _callers_elsewhere_through(ctx: RuleContext, info, depth: int = 0) -> list[CallerElsewhere]:
    """As ``_callers_elsewhere``; for a function this file calls only from functions that other files call (whose grad
    is left to them: ``_grad_left_to_other_files``), the calls of those functions in the other files, which decide how
    grad stands in it too (a predictor's `predict_case` calling its own `_predict_windows`, a trainer calling
    `predict_case`)."""
    elsewhere = _callers_elsewhere(ctx, info)
    if elsewhere or depth >= _CALLER_HOPS:
        return elsewhere
    for site in _callers(ctx.module, info):
        outer = site.scope.function
        if site.context.grad_off is not None or outer is None or outer is info:
            continue
        for caller in _callers_elsewhere_through(ctx, outer, depth + 1):
            through = f"it runs `{info.qualified_name}()` through `{outer.qualified_name}()` (line {site.chunk.line_of(site.node)})"
            elsewhere.append(replace(caller, why=f"{caller.why}; {through}" if caller.why else through))
    return elsewhere


def _grad_at_call(module: ModuleView, call: CallEvent, folder: str, checked=None, hops: int = 0) -> CallerElsewhere:
    """How grad stands at ``call`` (in another workspace file): off under ``no_grad()``; on at a script's module level,
    in a function that steps an optimizer, in one that file's module level runs, or (``checked``: the checked file's
    summary, which records the files read) in one whose own callers, here or further up, run it with grad on."""
    grad, why = "unknown", ""
    if call.context.grad_off is not None or _grad_disabled_globally(module):
        grad = "off"
    elif call.scope.function is None:
        grad, why = "on", "a script's module level"
    elif step := next((other for other in calls_in(call.scope, None) if is_optimizer_step(other)), None):
        grad, why = "on", f"`{call.scope.function.qualified_name}()` steps an optimizer (`{_text(step)}`), so grad is on there"
    elif _run_by_this_file(module, call.scope.function, set()):
        grad, why = "on", f"`{call.scope.function.qualified_name}()` is run from that file's module level with grad on"
    elif checked is not None and hops < _CALLER_HOPS and (upstream := _grad_on_upstream(module, call.scope.function, folder, checked, hops)):
        grad, why = "on", upstream
    return CallerElsewhere(call, os.path.relpath(module.path, folder), call.chunk.line_of(call.node), grad, why)


def _grad_on_upstream(module: ModuleView, info, folder: str, checked, hops: int) -> str | None:
    """Why grad is on in ``info`` (a function of another workspace file that calls the checked one and turns grad off
    nowhere): a call of it, in its own file or a further one, known to run it with grad on; None when none is. Grad is
    on unless a caller turns it off, so one such path is enough: the pass records its graph every time it is taken."""
    sites = [(module, site) for site in _callers(module, info)]
    sites += callers_further(checked, module.path, info, lambda other, site: (other, site))
    for other, site in sites:
        if site.scope.function is info:
            continue  # recursion
        caller = _grad_at_call(other, site, folder, checked, hops + 1)
        if caller.grad == "on":
            return (f"`{info.qualified_name}()` is called with grad on by `{_text(site)}` ({caller.path}, line {caller.line}): "
                    f"{caller.why}")
    return None


def _caller_elsewhere_with_grad(ctx: RuleContext, info) -> CallerElsewhere | None:
    """A call of ``info`` in another workspace file that does not turn grad off: one known to run with grad on
    first, else one whose own callers decide; None when every call elsewhere turns it off, or there is none."""
    elsewhere = [caller for caller in _callers_elsewhere(ctx, info) if caller.grad != "off"]
    return next((caller for caller in elsewhere if caller.grad == "on"), elsewhere[0] if elsewhere else None)


def _only_called_without_grad(ctx: RuleContext, info) -> bool:
    """Every call of the function is in other files, each under ``no_grad()``/``inference_mode()``: an
    evaluation helper whose callers chose where grad is off. Not known when a call here or none is found."""
    if _call_sites(ctx.module, info):
        return False
    elsewhere = _callers_elsewhere(ctx, info)
    return bool(elsewhere) and all(caller.grad == "off" for caller in elsewhere)


def _passed_around(module: ModuleView, info) -> bool:
    """The function is referenced without being called (a callback, a registry): its caller is unknown.
    Recorded as a fact of its name, so a result that asked it is kept while the answer stays the same."""
    return module.module_fact(f"TL102 passed around: {info.name}", partial(_named_as_a_value, info.name))


def _named_as_a_value(name: str, module: ModuleView) -> bool:
    return name in module.module_wide("TL102 names not called", _every_name_not_called)


def _every_name_not_called(module: ModuleView) -> frozenset[str]:
    return frozenset().union(*(_names_not_called(chunk) for chunk in module.chunks if chunk.module is not None))


def _names_not_called(chunk) -> frozenset[str]:
    """Names a statement uses as values: not as the function of a call, a definition, a parameter,
    a keyword, an import or another object's attribute."""
    cached = chunk.memo.get("names_not_called")
    if cached is None:
        # statement by statement, each kept: after an edit only the statements on its path are read again,
        # and of a compound one on the path (a `def`, a loop), only its parts the edit changed
        parts = chunk.node_memo("names not called, by part of a compound statement")
        cached = frozenset(chunk.facts_by_statement("names_not_called", partial(_values_named_in_statement, parts)))
        chunk.memo["names_not_called"] = cached
    return cached


def _values_named_in_statement(parts: dict, node: cst.CSTNode) -> frozenset[str]:
    """For a statement, ``_names_not_called`` of its own nodes, not those of a statement nested in it
    (what excludes a name is always in the name's statement); nothing for any other node. A compound
    statement's are those of each of its parts (its header's expressions, its parameters, its blocks'
    own nodes), kept in ``parts`` (node -> names): what excludes a name is in the name's part, but for
    the name a ``def`` or ``class`` defines."""
    if not isinstance(node, STATEMENT_NODES):
        return frozenset()
    if not isinstance(node, cst.BaseCompoundStatement):
        return _values_named_in(node)
    defined = node.name if isinstance(node, (cst.FunctionDef, cst.ClassDef)) else None
    found: set[str] = set()
    for part in children(node):
        if part is defined or is_statement(part):
            continue
        names = parts.get(part)
        if names is None:
            names = parts[part] = _values_named_in(part)
        found |= names
    return frozenset(found)


def _values_named_in(root: cst.CSTNode) -> frozenset[str]:
    """The names ``root``'s nodes use as values, not entering the statements nested in it."""
    excluded: set[int] = set()
    nodes = list(statement_level(root))
    for inner in nodes:
        if isinstance(inner, cst.Call):
            excluded.add(id(inner.func))
            if isinstance(inner.func, cst.Attribute):
                excluded.add(id(inner.func.attr))
        elif isinstance(inner, (cst.FunctionDef, cst.ClassDef)):
            excluded.add(id(inner.name))
        elif isinstance(inner, cst.Param):
            excluded.add(id(inner.name))
        elif isinstance(inner, cst.Arg) and inner.keyword is not None:
            excluded.add(id(inner.keyword))
        elif isinstance(inner, (cst.Import, cst.ImportFrom)):
            excluded.update(id(imported) for imported in _walk(inner))
        elif isinstance(inner, cst.Attribute):
            self_reference = isinstance(inner.value, cst.Name) and inner.value.value in {"self", "cls"}
            if not self_reference:
                excluded.add(id(inner.attr))
    return frozenset(inner.value for inner in nodes if isinstance(inner, cst.Name) and id(inner) not in excluded)


def _inference_program_pass(ctx: RuleContext, scope: ScopeAnalysis, frozen: frozenset[str]) -> CallEvent | None:
    """A model's forward in a loop of a script that trains nothing (``detect.py``, ``inference.py``): the
    function runs from this file's module level with grad on at every call (or the loop is the module level's),
    and nothing the program runs backwards, steps an optimizer or calls ``torch.autograd``, in this file or in
    the workspace functions it calls. Then no graph is ever used, wherever the forward's output goes (an unknown
    post-processing call, a list of results): the one question is whether it is a trained model's forward. It
    is when the dataflow says the call records a graph, or when it calls what the function switched to eval
    (``model = load_detector(weights); model.eval()``), or a model its library returns in eval mode. A function
    that hands a graph back to callers in other files may feed their backward: left to them."""
    module = ctx.module
    info = scope.function
    if module.module_fact("the program trains", program_trains):
        return None
    if info is not None and not _runs_from_this_file(module, info):
        return None
    if info is None:  # a script's model is switched (or loaded) by another top-level statement
        switched = module.module_fact("TL102 switched to eval at module level", _switched_at_module_level)
        switched |= module.module_fact("TL102 unpickled at module level", _unpickled_at_module_level)
    else:
        switched = _switched_to_eval(scope.calls()) | _unpickled(scope.calls())
    for call in scope.calls():
        if not call.context.loops or call.context.grad_off is not None or call.receiver_key in frozen:
            continue
        if _parameterless(ctx, call) or _built_on_the_spot(module, scope, call):
            continue
        if info is not None and _builds_a_module(ctx, call, _callers(module, info)):
            continue  # the "model" is a class (or a `partial` of one) every caller hands in: calling it builds one
        graph = _records_graph(call) and (_is_model_forward(call, set()) or _runs_model_layers(ctx, call))
        loaded = call.method is None and _left_in_eval_mode(ctx, call.receiver, call.receiver_key) is not None
        if graph or loaded or call.method is None and call.receiver_key in switched:
            dropped = dropped_graph(scope, call.node)
            if dropped is not None and _collected_detached(scope, call, dropped) or _graph_kept_across(scope, call):
                continue  # TL101's finding (a graph kept across the loop), or its fix: as `_check_unused_graph` reads them
            if info is not None and Tag.GRAPH in scope.return_value.tags and _callers_elsewhere(ctx, info):
                return None  # what it hands back may be backwarded by another file's caller
            return call
    return None


def _switched_to_eval(calls) -> frozenset[str]:
    return frozenset(key for call in calls if _is_mode_switch(call) and _mode(call) == "eval" and (key := _switched_model(call)))


def _unpickled(calls) -> frozenset[str]:
    """The names bound to what ``torch.load`` returns (``model = torch.load(path).cuda()``): called with inputs, such
    an object is a whole module saved by ``torch.save(model)`` (``UNPICKLES_OBJECT``), whose call runs its forward."""
    names = set()
    for call in calls:
        statement = call.statement
        if call_fact(call.callee, UNPICKLES_OBJECT) is None or not isinstance(statement, cst.Assign) or len(statement.targets) != 1:
            continue
        value = statement.value
        while value is not call.node and isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and (
            value.func.attr.value in _MODULE_OWN_METHODS
        ):
            value = value.func.value  # `.cuda()`, `.to(device)`, `.eval()` give the module back
        if value is call.node and (name := dotted(statement.targets[0].target)) is not None:
            names.add(name)
    return frozenset(names)


def _unpickled_at_module_level(module: ModuleView) -> frozenset[str]:
    return _unpickled(call for scope in module.all_scopes if scope.function is None for call in scope.calls())


def _switched_at_module_level(module: ModuleView) -> frozenset[str]:
    return _switched_to_eval(call for scope in module.all_scopes if scope.function is None for call in scope.calls())


def _output_backwarded(
    module: ModuleView, forwards: list[CallEvent], returned_roots: frozenset, not_run: frozenset[int] = frozenset(),
) -> bool:
    """A backward somewhere runs through these forwards (or what the function returns, or one of
    its calls: a call's result stands for the graph the function builds); ``not_run``: the ids of backwards this
    pass never runs (a helper's branch its call rules out)."""
    roots = returned_roots | {call.node for call in forwards}
    return any(backward_target(call).roots & roots for call in module.backward_calls if id(call) not in not_run)


def _mode_before(module: ModuleView, scope: ScopeAnalysis, loop: Loop, first_inside) -> CallEvent | None:
    """The last ``x.train()``/``x.eval()`` before the loop's body starts (in earlier top-level
    statements too, for module-level code), else the first one inside the loop."""
    earlier = []
    if scope.function is None:
        for chunk in module.chunks[: scope.chunk.index]:
            earlier.extend(event for other in module.scopes_of(chunk) if other.function is None for event in other.events)
    mode = None
    for event in [*earlier, *scope.events]:
        if event is first_inside:
            break
        if _is_mode_switch(event):
            mode = event
    if mode is None:
        for event in scope.events:
            if loop in event.context.loops and _is_mode_switch(event):
                return event
    return mode


def _is_mode_switch(event) -> TypeGuard[CallEvent]:
    """``model.eval()``, ``model.train()``, ``model.train(False)`` (the model may be an unbound global)."""
    if not isinstance(event, CallEvent) or event.method not in {"train", "eval"} or len(event.arg_nodes) > 1:
        return False
    if event.callee is not None:
        return "." in event.callee and not event.callee.startswith("torch.")
    return event.receiver is not None


def _mode(event: CallEvent) -> str:
    assert event.method is not None, "a mode switch (_is_mode_switch) is a method call"
    if event.method == "train" and event.arg_nodes and _is_false(event.arg_nodes[0].value):
        return "eval"
    return event.method


def _switched_model(event: CallEvent) -> str | None:
    """The dotted name of what a mode switch was called on; for one that ends a chain whose value a name
    takes (``vocoder = torch.load(path)["model"].cuda().eval()``), that name."""
    if event.callee is not None:
        return event.callee.rpartition(".")[0]
    statement = event.statement
    if event.receiver_key is None and isinstance(statement, cst.Assign) and statement.value is event.node and len(statement.targets) == 1:
        return dotted(statement.targets[0].target)
    if event.receiver_key is None and isinstance(event.node.func, cst.Attribute):
        return _element_of(event.node.func.value)
    return event.receiver_key


def _element_of(expression: cst.BaseExpression) -> str | None:
    """``self.model[key]`` as ``self.model[]``: an element of a container of modules (a GAN trainer's
    ``self.model["generator"]``). Switching one element to eval (``for key in self.model: self.model[key].eval()``)
    says the container holds modules, so calling another of its elements is a forward too."""
    if not isinstance(expression, cst.Subscript):
        return None
    base = dotted(expression.value)
    return f"{base}[]" if base is not None else None


def _decorate(ctx: RuleContext, node: cst.FunctionDef) -> TextEdit | None:
    if node.asynchronous is not None:
        return None  # torch.no_grad() as a decorator does not cover a coroutine's body
    spelled = ctx.name_for("torch.no_grad")
    if spelled is None:
        return None
    # Right above `def`, below any decorator already there (outside `@staticmethod` it would turn the
    # method into a plain function). `def` begins its line, which may be above the name's (`def \`);
    # a form feed in front of it stays in front, and the decorator gets the indentation Python reads.
    line = ctx.chunk.range_of(node.name)[0] - node.whitespace_after_def.value.count("\n")
    text = ctx.module.line(line)
    column = len(text) - len(text.lstrip(" \t\f")) + 1
    return TextEdit(line, column, line, column, f"@{spelled}()\n{indentation(text)}")


def _text(call: CallEvent) -> str:
    return quoted(call.chunk, call.node)


def _runs_from_this_file(module, info) -> bool:
    """``_run_by_this_file`` of a function of the checked file, recorded as a fact of the function: a result
    that asked it holds while the answer does, whatever the callers it went through read (a key in the
    function that calls it, which walks that function again, rarely changes the answer)."""
    return module.module_fact(("TL102 run by this file", info), partial(_run_by_this_file_alone, info))


def _run_by_this_file_alone(info, module) -> bool:
    return _run_by_this_file(module, info, set())


def _run_by_this_file(module, info, seen: set[int]) -> bool:
    """The function runs as part of this file's own program with grad on: called from module level (a
    script's `main()`) or from a function that steps an optimizer (no caller turns grad off around
    training: an FID pass between epochs), directly or through functions of this file, with grad on at
    every call. A helper only other files call may run under their `no_grad()`, which this file cannot see."""
    if info.owner is None and info.name in module.module_fact("TL102 entry points", _entry_points):
        return True  # `fire.Fire(main)` at module level: the command line runs it, with grad on
    if id(info) in seen or len(seen) > MAX_CALL_DEPTH or _passed_around(module, info):
        return False
    seen.add(id(info))
    sites = _callers(module, info)
    if not sites or any(site.context.grad_off is not None for site in sites):
        return False
    return any(
        site.scope.function is None or _steps_optimizer(site.scope) or _run_by_this_file(module, site.scope.function, seen)
        for site in sites
    )


def _called_per_training_step(ctx: RuleContext, info) -> tuple[CallEvent, CallEvent] | None:
    """A call of ``info`` inside a loop of a function that steps an optimizer (this file's calls, else those of the
    workspace's other files), and that step, when no call of it, here or elsewhere, runs under ``no_grad()``."""
    sites = _callers(ctx.module, info)
    if any(site.context.grad_off is not None for site in sites):
        return None
    if not sites:
        elsewhere = _callers_elsewhere(ctx, info)
        if any(caller.grad == "off" for caller in elsewhere):
            return None
        sites = [caller.call for caller in elsewhere]
    for site in sites:
        if site.context.loops and site.scope.function is not None:
            step = next((call for call in calls_in(site.scope, None) if is_optimizer_step(call)), None)
            if step is not None:
                return site, step
    return None


def _entry_points(module: ModuleView) -> frozenset[str]:
    """The functions the script's module level hands, with grad on, to a library that runs them as the program's
    command (``fire.Fire(main)``, ``typer.run(main)``: ``RUNS_ENTRY_POINT``)."""
    return frozenset(
        call.arg_nodes[0].value.value
        for scope in module.all_scopes if scope.function is None
        for call in scope.calls()
        if call.context.grad_off is None and call_fact(call.callee, RUNS_ENTRY_POINT) is not None
        and call.arg_nodes and isinstance(call.arg_nodes[0].value, cst.Name)
    )


def _steps_optimizer(scope: ScopeAnalysis) -> bool:
    # kept with the scope: asked of a long caller once for each function it calls (``_run_by_this_file``)
    return kept_with_scope(scope, "TL102 steps an optimizer", lambda: any(is_optimizer_step(call) for call in calls_in(scope, None)))


def _built_on_the_spot(module: ModuleView, scope: ScopeAnalysis, forward: CallEvent) -> bool:
    """The module ``forward`` runs is built where it runs (``ROIAlign(size, 1.0, 0)(masks, boxes)``) or in
    the function with no weights loaded into it: fresh parameters, if it has any, and a pass that is a
    computation with a layer (resampling a mask), not a trained model's inference."""
    func = forward.node.func
    built_inline = isinstance(func, cst.Call) or isinstance(func, cst.Attribute) and isinstance(func.value, cst.Call)
    return built_inline or _built_untrained(module, scope, forward)


def _grad_left_to_other_files(module, info, seen: set[int] | None = None) -> bool:
    """Only callers outside this file decide how grad stands in the function: this file calls it nowhere,
    or only with grad on from functions of which the same holds (``embed_corpus`` calling
    ``encode_sentences``), and never hands it on as a value (a callback, whose caller is unknown). A call
    here under ``no_grad()`` is this file's own answer; one that reaches module level with grad on is
    ``_run_by_this_file``'s."""
    seen = set() if seen is None else seen
    if id(info) in seen:
        return True  # a call from inside the chain (a method calling itself on another object) answers nothing new
    if len(seen) > MAX_CALL_DEPTH or _passed_around(module, info):
        return False
    seen.add(id(info))
    return all(
        site.context.grad_off is None and site.scope.function is not None
        and _grad_left_to_other_files(module, site.scope.function, seen)
        for site in _callers(module, info)
    )


def _stepped_parameters(ctx: RuleContext, scope: ScopeAnalysis, steps: list[CallEvent]) -> tuple[set[str], list[str]] | None:
    """The models whose parameters the optimizers of ``steps`` hold (``torch.optim.AdamW(student.parameters())``,
    param groups of ``model.head.parameters()``, a list of them built first), as keys (``student``,
    ``self.model``), and the expressions that name them; None when one optimizer was built where this
    scope cannot read it (a parameter, another file, ``accelerator.prepare``) or from what it cannot follow."""
    owners: set[str] = set()
    sources: list[str] = []
    for step in steps:
        if step.method != "step":
            return None
        optimizer = step.arg_nodes[0].value if step.receiver is not None and Tag.SCALER in step.receiver.tags and step.arg_nodes else None
        key = dotted(optimizer) if optimizer is not None else step.receiver_key
        binding = _bound_value(ctx, scope, key, step) if key is not None else None
        built = binding.value_node if binding is not None else None
        if not isinstance(built, cst.Call) or not is_optimizer_class(ctx.summary.canonical(dotted(built.func) or "")):
            return None
        # torch.optim's optimizers take the parameters first or as `params=`; their other keywords are settings
        held = [arg.value for arg in built.args if arg.keyword is None and not arg.star or arg.keyword is not None and arg.keyword.value == "params"]
        found = _parameter_sources(ctx, scope, held[:1], step, depth=0)
        if not found:
            return None
        for source in found:
            owners.add(source)
            if source not in sources:
                sources.append(source)
    return owners, sources


def _parameter_sources(ctx: RuleContext, scope: ScopeAnalysis, expressions: list[cst.BaseExpression], before: CallEvent, depth: int) -> list[str] | None:
    """The receivers of ``.parameters()`` (or ``named_parameters()``) calls in ``expressions``, following names
    bound in the scope to what they were built from; None when a name leads where this cannot follow."""
    found: list[str] = []
    for expression in expressions:
        named = set()  # the nodes of the receivers found: `unet` of `unet.parameters()` is the answer, not a name to follow
        for node in _walk(expression):
            if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value in {"parameters", "named_parameters"}:
                receiver = dotted(node.func.value)
                if receiver is None:
                    return None
                found.append(receiver)
                named.update(id(part) for part in _walk(node.func.value))
            elif isinstance(node, cst.Name) and id(node) not in named and depth < 3 and _is_value_name(expression, node):
                bound = _bound_value(ctx, scope, node.value, before)
                if bound is None or bound.value_node is None:
                    if node.value in scope.params:
                        return None  # handed in: what it holds is the caller's
                    continue  # a builtin or a function (`list`, `filter`), or a setting (`lr`)
                inner = _parameter_sources(ctx, scope, [bound.value_node], before, depth + 1)
                if inner is None:
                    return None
                found.extend(inner)
    return found


def _is_value_name(root: cst.BaseExpression, name: cst.Name) -> bool:
    """``name`` is read as a value in ``root``: not the attribute of another object, a keyword or a lambda's parameter."""
    for node in _walk(root):
        if isinstance(node, cst.Attribute) and node.attr is name:
            return False
        if isinstance(node, cst.Arg) and node.keyword is name:
            return False
        if isinstance(node, cst.Param) and node.name is name:
            return False
    return True


def _bound_value(ctx: RuleContext, scope: ScopeAnalysis, key: str, before: CallEvent) -> AssignEvent | None:
    """Where ``key`` was last bound: in this scope before ``before``; for ``self.<name>``, in the method of the
    class that assigns it; for a script's name, by an earlier top-level statement."""
    binding = scope.last_binding(key, before=before)
    if binding is not None:
        return binding
    info = scope.function
    if key.startswith("self.") and key.count(".") == 1 and info is not None and info.owner is not None:
        binder = info.owner.assigned_attributes().get(key)
        method = info.owner.methods.get(binder) if binder else None
        inner = method.analysis(ctx.summary) if method is not None else None
        return inner.last_binding(key) if inner is not None else None
    if info is None and "." not in key:
        earlier = [
            event for chunk in ctx.module.chunks[: scope.chunk.index] for other in ctx.module.scopes_of(chunk)
            if other.function is None for event in other.events
            if isinstance(event, AssignEvent) and event.targets == (key,)
        ]
        return earlier[-1] if earlier else None
    return None


def _shares_parameters(ctx: RuleContext, scope: ScopeAnalysis, forward: CallEvent, key: str, owners: set[str]) -> bool:
    """The model ``key`` may hold parameters an optimizer steps, or be held by a model whose parameters it
    steps: the same name, a part or a whole of one (``model.backbone``), a wrapper built from one
    (``DDP(model)``), or one built from it (``Student(teacher)``)."""
    if any(key == owner or key.startswith(owner + ".") or owner.startswith(key + ".") for owner in owners):
        return True
    binding = _bound_value(ctx, scope, key, forward)
    built = binding.value_node if binding is not None else None
    if built is not None and _names_in(built) & ({owner.partition(".")[0] for owner in owners} | owners):
        return True
    root = key.split(".")[0] if not key.startswith("self.") else ".".join(key.split(".")[:2])
    for owner in owners:
        bound = _bound_value(ctx, scope, owner, forward)
        if bound is None or bound.value_node is None:
            continue
        path = _module_path(bound.value_node)
        if path is not None and path != root:
            # a part taken out of a whole (`unet = pipe.unet`): it shares parameters with the parts it holds or is part of,
            # not with its siblings (`pipe.text_encoder`)
            if path == key or key.startswith(path + ".") or path.startswith(key + "."):
                return True
        elif key in _names_in(bound.value_node) or root in _names_in(bound.value_node):
            return True
    return False


def _module_path(node: cst.BaseExpression) -> str | None:
    """The dotted name a module expression reads, past the module's own methods that return it (``pipe.unet`` for
    ``pipe.unet.to(device)``); None for anything else (a wrapper built around it, a call)."""
    while isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value in MODULE_SELF_METHODS:
        node = node.func.value
    return dotted(node) if isinstance(node, (cst.Name, cst.Attribute)) else None


def _pipeline_component_run(scope: ScopeAnalysis, forward: CallEvent) -> tuple[str, Value] | None:
    """A diffusers pipeline's component model run outside the pipeline's ``__call__`` (which alone disables grad):
    a pipeline method that runs one (``pipe.encode_prompt(prompts, ...)`` runs ``pipe.text_encoder``:
    ``PIPELINE_COMPONENT_METHODS``), or a layer-running method of a component (``pipe.vae.encode(pixels)``:
    ``LIBRARY_LAYER_METHODS``). The component's name here, and the value of the pipeline or the component."""
    func = forward.node.func
    if not isinstance(func, cst.Attribute) or forward.receiver_key is None:
        return None
    base = scope.value_at(func.value)
    if base is not None and Tag.PIPELINE in base.tags and forward.method in PIPELINE_COMPONENT_METHODS:
        return f"{forward.receiver_key}.{PIPELINE_COMPONENT_METHODS[forward.method][0][0]}", base
    owner = scope.value_at(func.value.value) if isinstance(func.value, cst.Attribute) else None
    if base is not None and owner is not None and Tag.PIPELINE in owner.tags and forward.method in LIBRARY_LAYER_METHODS:
        return forward.receiver_key, base
    return None


def _frozen_through_name(ctx: RuleContext, scope: ScopeAnalysis, forward: CallEvent, key: str, frozen: frozenset[str]) -> bool:
    """The component ``key`` (``pipe.vae``) was frozen under a name bound to it (``vae = pipe.vae``, then
    ``vae.requires_grad_(False)``)."""
    return any(
        (bound := _bound_value(ctx, scope, name, forward)) is not None and bound.value_node is not None
        and _module_path(bound.value_node) == key
        for name in frozen
    )


def _component_loaded_in_eval(ctx: RuleContext, key: str, pipeline: Value | None) -> tuple[Site, str] | None:
    """Where the pipeline holding the component ``key`` was loaded (``StableDiffusionPipeline.from_pretrained``), which
    loads each model component with its own ``from_pretrained``, in eval mode (libraries.py), when nothing in the file
    switches one of that name to training mode."""
    if pipeline is None or pipeline.site is None:
        return None
    chunk, built = pipeline.site
    if not isinstance(built, cst.Call) or not isinstance(built.func, cst.Attribute) or built.func.attr.value != "from_pretrained":
        return None
    name = key.rpartition(".")[2]
    if any(_is_mode_switch(call) and (_switched_model(call) or "").rpartition(".")[2] == name for call in ctx.module.all_calls()):
        return None
    return (chunk, built), (
        f"`{quoted(chunk, built.func)}` loads `{name}` in eval mode (each component through its own `from_pretrained`), and "
        "nothing in this file puts it in training mode"
    )


def _names_in(expression: cst.BaseExpression) -> set[str]:
    """The names and dotted names ``expression`` reads."""
    names: set[str] = set()
    for node in _walk(expression):
        if isinstance(node, (cst.Name, cst.Attribute)):
            text = dotted(node)
            if text is not None:
                names.add(text)
    return names


def _model_run_by_helper(ctx: RuleContext, scope: ScopeAnalysis, call: CallEvent) -> tuple[str | None, Value | None, list[Value]]:
    """The model a workspace helper runs for ``call`` and hands the output of back (``encode_prompt(text_encoder,
    tokenizer, prompts)``, whose forward is of its parameter ``text_encoder``): the name passed for it here, its
    value, and the values of the other arguments (the model's inputs, as far as this call shows them)."""
    helper = call.function
    inner = helper.analysis(ctx.summary) if helper is not None else None
    if helper is None or inner is None or Tag.GRAPH not in inner.return_value.tags or not _leaves_grad_to_caller(ctx, helper, inner):
        return None, None, []
    inner_calls = list(calls_in(inner, None))
    if _trains(inner_calls):
        return None, None, []
    run = {
        inner_call.receiver_key for inner_call in inner_calls
        if inner_call.scope is inner and inner_call.receiver_key in inner.params and inner_call.context.grad_off is None
        and _is_model_forward(inner_call, set()) and not _parameterless(ctx, inner_call)
    }
    if len(run) != 1:
        return None, None, []
    parameter = run.pop()
    assert parameter is not None, "a parameter's name"
    passed = call.keyword(parameter)
    if passed is None:
        positional = helper.positional_parameters
        plain = [arg for arg in call.arg_nodes if arg.keyword is None and not arg.star]
        passed = plain[positional.index(parameter)] if parameter in positional and positional.index(parameter) < len(plain) else None
    key = dotted(passed.value) if passed is not None else None
    if passed is None or key is None:
        return None, None, []
    others = [scope.value_at(arg.value) for arg in call.arg_nodes if arg is not passed]
    return key, scope.value_at(passed.value), [value for value in others if value is not None]


def _model_held_by_module(
    ctx: RuleContext, scope: ScopeAnalysis, call: CallEvent,
) -> tuple[str | None, Value | None, list[Value], CallEvent | None]:
    """The model a workspace module's ``forward`` runs for ``call`` when the module was built here around it
    (``criterion = DistillationLoss(teacher)``, whose ``__init__`` keeps ``self.teacher = teacher`` and whose forward
    runs ``self.teacher(images)`` on some of its own inputs): the name passed for it when the module was built, its
    value, the values ``call`` passes for the inputs the held model is run on, and its forward there. Nothing when the
    forward runs it on anything but its plain parameters, or runs more than one held model."""
    nothing: tuple[str | None, Value | None, list[Value], CallEvent | None] = (None, None, [], None)
    owner = call.receiver.detail if call.receiver is not None else None
    if call.method is not None or not isinstance(owner, ClassInfo) or call.receiver_key is None:
        return nothing
    forward, init = owner.find_method("forward", ctx.summary), owner.find_method("__init__", ctx.summary)
    inner = forward.analysis(ctx.summary) if forward is not None else None
    built = scope.last_binding(call.receiver_key, before=call)
    if forward is None or inner is None or init is None or built is None or not isinstance(built.value_node, cst.Call):
        return nothing
    runs = [
        held for held in inner.calls()
        if held.method is None and (held.receiver_key or "").startswith("self.") and held.context.grad_off is None
        and _is_model_forward(held, set()) and not _parameterless(ctx, held)
    ]
    if len({held.receiver_key for held in runs}) != 1:
        return nothing
    attribute = runs[0].receiver_key
    assert attribute is not None, "chosen for its receiver"
    arguments = [arg.value for held in runs for arg in held.arg_nodes]
    fed = {argument.value for argument in arguments if isinstance(argument, cst.Name)}
    if not all(isinstance(argument, cst.Name) for argument in arguments) or not fed <= set(forward.positional_parameters):
        return nothing
    init_analysis = init.analysis(ctx.summary)
    kept_from = next((
        event.value_node.value for event in (init_analysis.events if init_analysis is not None else ())
        if isinstance(event, AssignEvent) and event.targets == (attribute,) and isinstance(event.value_node, cst.Name)
    ), None)
    built_call = next((other for other in scope.calls() if other.node is built.value_node), None)
    passed = _argument_for(built_call, init, kept_from) if built_call is not None and kept_from is not None else None
    key = dotted(passed) if passed is not None else None
    inputs = [found for name in fed if (found := _argument_for(call, forward, name)) is not None]
    if passed is None or key is None or len(inputs) != len(fed):
        return nothing
    values = [scope.value_at(expression) for expression in inputs]
    return key, scope.value_at(passed), [value for value in values if value is not None], runs[0]


def _models_run_inside(ctx: RuleContext, scope: ScopeAnalysis, call: CallEvent) -> list[tuple[str, str, Value | None, CallEvent]]:
    """The models that ``call`` runs one level in, with grad left to it, on inputs that carry no graph: a method of
    this object (``self.compute_loss(batch)``, whose body runs ``self.ref_model(...)`` or hands it to a helper,
    ``sequence_logps(self.ref_model, ...)``), or the ``forward`` of a workspace module built here
    (``model(images, labels)``, whose forward runs ``self.teacher(images)``). Each is given as its name here
    (``self.ref_model``, ``model.teacher``), its name in that body, its value there, and the call that runs it.
    An input counts as carrying no graph when nothing in the body gave it one and the arguments ``call`` passes
    for the parameters it is computed from carry none (a perceptual loss's network, run on the prediction, is
    not one of these)."""
    owner = call.receiver.detail if call.receiver is not None else None
    if call.method is None and isinstance(owner, ClassInfo) and call.receiver_key is not None:
        helper, prefix = owner.find_method("forward", ctx.summary), call.receiver_key
    elif call.function is not None and call.function.owner is not None and call.receiver_key == "self":
        helper, prefix = call.function, "self"
    else:
        return []
    inner = helper.analysis(ctx.summary) if helper is not None else None
    if helper is None or inner is None or not _leaves_grad_to_caller(ctx, helper, inner) or _trains(list(calls_in(inner, None))):
        return []
    found: list[tuple[str, str, Value | None, CallEvent]] = []
    fed_a_graph: set[str] = set()  # a model also run on what carries a graph (a perceptual loss's network) must keep it
    for run in inner.calls():
        if run.context.grad_off is not None or Tag.GRAPH not in run.result.tags:
            continue
        fed = [arg.value for arg in run.arg_nodes]
        if run.method is None and (run.receiver_key or "").startswith("self.") and _is_model_forward(run, set()) and not _parameterless(ctx, run):
            key, receiver = run.receiver_key, run.receiver
        elif run.function is not None:
            key, receiver, _ = _model_run_by_helper(ctx, inner, run)
            fed = [expression for expression in fed if dotted(expression) != key]
        else:
            continue
        if key is None or not key.startswith("self."):
            continue
        if not _fed_without_graph(scope, call, helper, inner, fed):
            fed_a_graph.add(key)
            continue
        found.append((prefix + key[len("self"):], key, receiver, run))
    return [model for model in found if model[1] not in fed_a_graph]


def _kept_in_eval_by_holder(ctx: RuleContext, held: CallEvent, held_as: str, key: str) -> tuple[Site, str] | None:
    """Where the class whose method runs the model as ``held_as`` (``self.teacher``), perhaps in another file,
    switches it to eval mode (``self.teacher.eval()`` in its ``__init__``), when none of its methods, nor this
    file for ``key``, switches it back to training mode."""
    owner = held.scope.function.owner if held.scope.function is not None else None
    if owner is None:
        return None
    switches = [
        call for method in owner.methods.values() if (inner := method.analysis(ctx.summary)) is not None
        for call in inner.calls() if _is_mode_switch(call) and _switched_model(call) == held_as
    ]
    name = key.rpartition(".")[2]
    here = [call for call in ctx.module.all_calls() if _is_mode_switch(call) and (_switched_model(call) or "").rpartition(".")[2] == name]
    if not switches or any(_mode(call) != "eval" for call in (*switches, *here)):
        return None
    return (switches[0].chunk, switches[0].node), f"`{_text(switches[0])}` puts it in eval mode, and nothing switches it back to training mode"


def _fed_without_graph(scope: ScopeAnalysis, call: CallEvent, helper, inner: ScopeAnalysis, fed: list[cst.BaseExpression]) -> bool:
    """No expression of ``fed`` (in ``helper``'s body, called by ``call``) carries a graph: not by what the body
    computed, nor through a parameter whose argument carries one at ``call``."""
    parameters = set(helper.positional_parameters) | {param.name.value for param in helper.node.params.kwonly_params}
    for expression in fed:
        value = inner.value_at(expression)
        if value is None or Tag.GRAPH in value.tags:
            return False
        for name in _names_in(expression) & parameters:
            passed = _argument_for(call, helper, name)
            if passed is None and any(arg.star for arg in call.arg_nodes):
                return False  # hidden by `*args`: what it carries is not known
            given = scope.value_at(passed) if passed is not None else None
            if given is not None and Tag.GRAPH in given.tags:
                return False
    return True


def _argument_for(call: CallEvent, function, parameter: str) -> cst.BaseExpression | None:
    """The expression ``call`` writes for ``parameter`` of ``function`` (not followed to what built it: the name
    is the key the rule reads); None when hidden by ``*args``/``**kwargs``."""
    passed = argument_passed(call, function, parameter)
    return passed.value if passed is not None else None


def _kept_in_eval_mode(ctx: RuleContext, forward: CallEvent, key: str, receiver: Value | None) -> tuple[Site, str] | None:
    """Where the file shows that the model ``key`` is not trained: it switches it to eval mode (or its library
    returns it so, `from_pretrained`), and nothing in the file switches it back to training mode."""
    name = key.rpartition(".")[2]
    switches = [call for call in ctx.module.all_calls() if _is_mode_switch(call) and (_switched_model(call) or "").rpartition(".")[2] == name]
    if any(_mode(call) != "eval" for call in switches):
        return None
    if switches:
        return (switches[0].chunk, switches[0].node), f"`{_text(switches[0])}` puts it in eval mode, and nothing in this file back in training mode"
    binding = _bound_value(ctx, forward.scope, key, forward)
    built = binding.value_node if binding is not None else None
    if binding is not None and isinstance(built, cst.Call) and isinstance(built.func, cst.Attribute) and built.func.attr.value == "eval" and not built.args:
        return (binding.chunk, built), f"`{quoted(binding.chunk, built)}` puts it in eval mode, and nothing in this file back in training mode"
    loaded = _left_in_eval_mode(ctx, receiver, key)
    if loaded is not None:
        return loaded[0], f"{loaded[1].says}, and nothing in this file puts it in training mode"
    return None


# What a tensor says about itself rather than its values: reading only these, a script checks shapes.
_METADATA = frozenset({
    "shape", "device", "dtype", "ndim", "is_cuda", "requires_grad", "grad_fn", "size", "dim", "numel", "stride",
    "element_size", "nelement", "get_device", "is_contiguous", "data_ptr",
})


def _reads_values(cut: cst.CSTNode) -> bool:
    """A cut of the graph that still reads the output's values (``.numpy()``, ``.argmax(1)``, ``float(x)``), not
    only its metadata (``.shape``, ``.size(0)``)."""
    if isinstance(cut, cst.Attribute):
        return cut.attr.value not in _METADATA
    if isinstance(cut, cst.Call) and isinstance(cut.func, cst.Attribute):
        return cut.func.attr.value not in _METADATA
    return True


# Calls that hand a tensor's values on as Python or NumPy numbers, and those that give indices (no graph) of them.
_TO_NUMBERS = frozenset({"item", "tolist", "numpy", "argmax", "argmin", "argsort"})
_TO_ARRAYS = frozenset({"numpy.asarray", "numpy.array"})


def _turned_into_numbers(scope: ScopeAnalysis, root: cst.CSTNode, cut: cst.CSTNode) -> bool:
    """The cut of a forward's graph is, or sits inside, an expression that turns the output into numbers: `.item()`,
    `.tolist()`, `.numpy()`, `np.asarray(...)`, indices (`argmax`) or a comparison (a mask): a decoded result, where a
    `.detach()` alone may be a tensor the code computes on further (a stop-gradient target)."""
    def numbers(node: cst.CSTNode) -> bool:
        if isinstance(node, cst.Comparison):
            return True
        if not isinstance(node, cst.Call):
            return False
        if isinstance(node.func, cst.Attribute) and node.func.attr.value in _TO_NUMBERS:
            return True
        name = dotted(node.func)
        return name is not None and scope.canonical(name) in _TO_ARRAYS

    return numbers(cut) or any(
        numbers(node) and any(inner is cut for inner in _walk(node)) for node in _walk(root) if isinstance(node, (cst.Call, cst.Comparison))
    )


def _served_per_request(ctx: RuleContext, info) -> tuple[CallEvent, cst.Decorator] | None:
    """Where a request handler of this file (``@app.post(...)`` of a FastAPI or Flask app) calls the
    function with grad on, and the decorator that registers it: the server runs it for every request."""
    for site in _callers(ctx.module, info):
        handler = site.scope.function
        if handler is None or site.context.grad_off is not None:
            continue
        decorator = next((d for d in handler.node.decorators if _registers_handler(ctx, d)), None)
        if decorator is not None:
            return site, decorator
    return None


def _registers_handler(ctx: RuleContext, decorator: cst.Decorator) -> bool:
    """``@app.post("/embed")`` where the module binds ``app = FastAPI()`` (the library facts' table)."""
    expression = decorator.decorator
    func = expression.func if isinstance(expression, cst.Call) else None
    if not isinstance(func, cst.Attribute) or not isinstance(func.value, cst.Name):
        return False
    app = func.value.value
    built = [
        event.value_node for scope in ctx.module.all_scopes if scope.function is None for event in scope.events
        if isinstance(event, AssignEvent) and event.targets == (app,) and isinstance(event.value_node, cst.Call)
    ]
    raw = dotted(built[-1].func) if built else None
    return raw is not None and call_fact(f"{ctx.summary.canonical(raw)}.{func.attr.value}", SERVES_REQUESTS) is not None


def _callers(module, info) -> list[CallEvent]:
    """The calls of the function in this file; for a method named `train` or `eval`, not the mode
    switches of models (`self.generator.train()`) that share its name."""
    return [site for site in _call_sites(module, info) if info.owner is None or not _is_mode_switch(site) or site.function is info]


def _frozen_models(module) -> frozenset[str]:
    """The models the file freezes as a whole (`teacher.requires_grad_(False)`, `for p in
    teacher.parameters(): p.requires_grad = False`): their forwards record no graph. Freezing a part
    (`model.encoder.parameters()`) leaves the rest recording, and is not one of these; nor is a model
    frozen and then given a trainable part back (`for p in model.get_classifier().parameters():
    p.requires_grad = True`, `model.head.requires_grad_(True)`): fine-tuning only the head is the
    common case, and its forward records the head's graph."""
    frozen: set[str] = set()
    thawed: set[str] = set()  # what the file turns requires_grad back on for
    for chunk in module.chunks:
        # kept per statement: a key typed in a 1,000-line main() reads the edited statement again, not
        # the whole file (walking every tree took about 40 ms of CPU a key on diffusers' SDXL script)
        for freezes, target in chunk.facts_by_statement("TL102 requires_grad switches", _requires_grad_switches):
            (frozen if freezes else thawed).add(target)
    return frozenset(name for name in frozen if not any(part == name or part.startswith(name + ".") for part in thawed))


def _requires_grad_switches(node: cst.CSTNode) -> list[tuple[bool, str]]:
    """What one node turns requires_grad off (True) or on (False) for: `x.requires_grad_(...)`, or a
    loop over `x.parameters()` that sets `p.requires_grad`."""
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value == "requires_grad_":
        return [(bool(node.args) and not _is_true(node.args[0].value), _owner_path(node.func.value))]
    if isinstance(node, cst.For) and isinstance(node.iter, cst.Call) and isinstance(node.iter.func, cst.Attribute) \
            and node.iter.func.attr.value in {"parameters", "named_parameters"}:
        target = _owner_path(node.iter.func.value)
        return [(to_false, target) for to_false in (True, False) if _sets_requires_grad(node.body, to=not to_false)]
    return []


def _owner_path(node: cst.BaseExpression) -> str:
    """The dotted name a module expression starts from: `model.fc` for `model.fc`, `model.get_classifier`
    for `model.get_classifier()` (a part of `model` either way); "" when it starts elsewhere."""
    while isinstance(node, (cst.Call, cst.Subscript)):
        node = node.func if isinstance(node, cst.Call) else node.value
    return dotted(node) or ""


def _sets_requires_grad(body: cst.BaseSuite, *, to: bool) -> bool:
    is_value = _is_true if to else _is_false
    return any(
        isinstance(node, cst.Assign) and is_value(node.value)
        and any(isinstance(target.target, cst.Attribute) and target.target.attr.value == "requires_grad" for target in node.targets)
        for node in _walk(body)
    )


def _is_true(node) -> bool:
    return isinstance(node, cst.Name) and node.value == "True"


def _runs_model_layers(ctx, call: CallEvent) -> bool:
    """A method of a workspace model class that returns what its layers compute (`policy.pi(state)`,
    `self.encode(x)`), or a helper of the workspace (a function, or a method of another object: a
    trainer's `self.sample(16)`) that returns what a model it runs computes (`generate_images(generator,
    noise)`, a sampling loop handing back its last step): a forward under another name, whose graph the
    helper's own check cannot see dropped, since it hands it back. One that backwards or steps an
    optimizer is a training step, whatever it returns."""
    receiver = call.receiver
    helper = call.function
    if receiver is None or helper is not None and Tag.MODEL not in receiver.tags:
        if helper is None or receiver is None and call.callee is None:
            return False
        analysis = helper.analysis(ctx.summary)
        if analysis is None or Tag.GRAPH not in analysis.return_value.tags or analysis.loops and (is_eval_name(helper.name) or _switches_and_runs(analysis)):
            return False  # an evaluation function's own pass is reported where it is defined
        inner_calls = list(calls_in(analysis, None))
        return any(_is_model_forward(inner, set()) or _model_method_returns_graph(ctx, inner) for inner in inner_calls) and not _trains(inner_calls)
    return _model_method_returns_graph(ctx, call)


def _model_method_returns_graph(ctx, call: CallEvent) -> bool:
    """A method of a workspace model class (other than its forward) that returns what its layers compute."""
    receiver = call.receiver
    helper = call.function
    if receiver is None or Tag.MODEL not in receiver.tags or call.method is None:
        return False
    if helper is None and isinstance(receiver.detail, ClassInfo):
        helper = receiver.detail.find_method(call.method, ctx.summary)
    if helper is None:
        return held_layer(ctx.summary, receiver, call.method) is not None  # `gen.synthesis(w)`: a layer it holds
    analysis = helper.analysis(ctx.summary)
    return analysis is not None and Tag.GRAPH in analysis.return_value.tags and not _trains(list(calls_in(analysis, None)))


def _parameterless(ctx, call: CallEvent) -> bool:
    """A workspace module class with no `__init__` of its own or in its workspace bases holds no
    parameters (`class Scale(nn.Module): def forward(self, x, y): return x * y`): its forward records
    nothing unless its inputs do."""
    receiver = call.receiver
    owner = receiver.detail if receiver is not None else None
    return isinstance(owner, ClassInfo) and owner.find_method("__init__", ctx.summary) is None


def _built_untrained(module: ModuleView, scope: ScopeAnalysis, call: CallEvent) -> bool:
    """The model is built here and nothing loads weights into it (in a file that trains nothing):
    running it shows shapes, as a tutorial's demo does, not predictions worth a pass. In a script,
    the model is built by an earlier top-level statement: its value says where."""
    key = call.receiver_key
    binding = scope.last_binding(key) if key is not None else None
    if binding is not None:
        chunk, made = binding.chunk, binding.value_node
    elif scope.function is None and call.receiver is not None and call.receiver.site is not None:
        chunk, made = call.receiver.site
    else:
        return False
    if not isinstance(made, cst.Call):
        return False
    if _LOADS_WEIGHTS.search(chunk.code_for(made)):
        return False  # `AutoModel.from_pretrained(...)`, `load_model(path)`
    model = call.receiver.detail if call.receiver is not None else None
    if isinstance(model, ClassInfo) and restores_own_weights(module.summary, model) is not None:
        return False  # its constructor loads the checkpoint itself (`torch.load`, then `nn.Parameter(w[...])`)
    return not loads_weights_into(key, scope.calls() if scope.function is not None else module.all_calls(), _LOADS_WEIGHTS)


def _read_later(module: ModuleView, chunk: ParsedChunk, names: frozenset[str]) -> bool:
    """Whether a top-level statement that may run after ``chunk`` uses one of ``names``: a later statement, or a
    function or class defined anywhere (called later, it reads the module's names then). An earlier statement of
    the script has run by the time ``chunk`` runs."""
    wanted = set(names)
    return any(
        other is not chunk and (other.index > chunk.index or _defines(other)) and other.refers_to_any(wanted)
        for other in module.chunks
    )


def _defines(chunk: ParsedChunk) -> bool:
    tree = chunk.module
    return tree is None or any(isinstance(statement, (cst.FunctionDef, cst.ClassDef)) for statement in tree.body)


# The stores that keep one item per pass in a container (flow's StoreEvent kinds), as TL101's fix writes them.
_COLLECTING = frozenset({"append", "extend", "insert", "subscript"})


def _collected_detached(scope: ScopeAnalysis, forward: CallEvent, dropped: DroppedGraph) -> bool:
    """``outputs.append(model(x).detach())`` (or ``.detach().cpu()``): the output is detached where it is
    made and kept in a container across the loop. Kept undetached, it is TL101's retained graph, whose
    fix writes exactly this; reporting the line again would breed a finding on a fixed line, so what
    is left (a graph recorded for the length of one forward) is not reported here."""
    detached_at_once = bool(dropped.cuts) and all(
        isinstance(cut, cst.Call) and isinstance(cut.func, cst.Attribute)
        and cut.func.attr.value == "detach" and cut.func.value is forward.node
        for cut in dropped.cuts
    )
    if not detached_at_once:
        return False
    cuts = {id(cut) for cut in dropped.cuts}
    loop = forward.context.loops[-1]
    return any(
        isinstance(event, StoreEvent) and event.kind in _COLLECTING and event.outlives(loop)
        and any(id(node) in cuts for node in _walk(event.value_node))
        for event in scope.events
    )


def _graph_kept_across(scope: ScopeAnalysis, forward: CallEvent) -> bool:
    """A graph-carrying value is collected in the forward's loop into a container that outlives it: TL101 reports
    that graph as kept, and its fix (``.detach()``) is the one the rules agree on."""
    loop = forward.context.loops[-1]
    return any(
        isinstance(event, StoreEvent) and event.kind in _COLLECTING and loop in event.context.loops
        and event.outlives(loop) and Tag.GRAPH in event.value.tags
        for event in scope.events
    )


def _statement_line(root: cst.CSTNode | None, statement: cst.CSTNode | None) -> cst.SimpleStatementLine | None:
    """The line that holds ``statement`` alone: a forward's statement can be wrapped in a block."""
    for node in _walk(root) if root is not None else ():
        if isinstance(node, cst.SimpleStatementLine) and len(node.body) == 1 and node.body[0] is statement:
            return node
    return None


# A trainer whose subclass measures the model it handed in, between training epochs (TL102's examples below).
_PAIR_TRAINER = """
        import torch

        from matching import pair_distance


        class PairTrainer:
            def __init__(self, model, optimizer, train_pairs, held_out_pairs):
                self.model = model
                self.optimizer = optimizer
                self.train_pairs = train_pairs
                self.held_out_pairs = held_out_pairs

            def fit(self, epochs):
                for epoch in range(epochs):
                    self.train_epoch(epoch)
                    {call}
                    print(epoch, scores)


        class SiameseTrainer(PairTrainer):
            def train_epoch(self, epoch):
                self.model.train()
                for first, second in self.train_pairs:
                    self.optimizer.zero_grad()
                    loss = (self.model(first) - self.model(second)).pow(2).mean()
                    loss.backward()
                    self.optimizer.step()

{decorator}            def measure(self):
                self.model.eval()
                distances = []
                for first, second in self.held_out_pairs:
                    features_a = self.model(first).features
                    features_b = self.model(second).features
                    distances.append(pair_distance(features_a, features_b))
                return torch.stack(distances).mean()
        """
_PAIR_FILES = {"matching.py": """
                def pair_distance(features_a, features_b):
                    return (features_a - features_b).norm(dim=1).mean()
            """}

# A trainer whose step helper backwards only when its flag says so: the validation pass calls it with the flag's
# literal (`{flag}`), which turns the backward off there.
_FLAG_TRAINER = """
        import torch

        from losses import build_criterion


        class Trainer:
            def __init__(self, model, loaders, lr=1e-3):
                self.model = model
                self.criterion = build_criterion()
                self.optimizer = torch.optim.SGD(model.parameters(), lr=lr)
                self.loaders = loaders

            def apply_model_and_loss(self, inputs, target, backward=True):
                prediction = self.model(inputs)
                loss = self.criterion(prediction, target)
                if backward:
                    loss.backward()
                return prediction, loss

            def train_epoch(self):
                self.model.train()
                for inputs, target in self.loaders["train"]:
                    self.optimizer.zero_grad()
                    self.apply_model_and_loss(inputs, target)
                    self.optimizer.step()

{decorator}            def validate(self):
                self.model.eval()
                total = 0.0
                for inputs, target in self.loaders["validate"]:
                    _, loss = self.apply_model_and_loss(inputs, target, backward={flag})
                    total += loss.item()
                return total / len(self.loaders["validate"])

            def fit(self, epochs):
                for epoch in range(epochs):
                    self.train_epoch()
                    print(epoch, self.validate())
        """
_FLAG_FILES = {"losses.py": """
                from torch import nn


                def build_criterion():
                    return nn.CrossEntropyLoss(label_smoothing=0.1)
            """}
# One step function for both passes, told by a string which it runs (`mode="eval"` for the dev set).
_MODE_ENGINE = """
        import torch
        import torch.nn.functional as F

        from models import TextClassifier


        def run_batch(model, batch, optimizer, mode="train"):
            logits = model(batch["tokens"])
            loss = F.cross_entropy(logits, batch["labels"])
            if mode == "train":
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
            return logits, loss.item()


        def main(train_loader, dev_loader, epochs):
            model = TextClassifier(vocab=30000)
            optimizer = torch.optim.AdamW(model.parameters(), lr=2e-5)
            for epoch in range(epochs):
                model.train()
                for batch in train_loader:
                    run_batch(model, batch, optimizer)
                model.eval()
                correct = 0
                {dev_loop}
                print(epoch, correct)
        """
_MODE_FILES = {"models.py": """
                from torch import nn


                class TextClassifier(nn.Module):
                    def __init__(self, vocab, dim=128, classes=2):
                        super().__init__()
                        self.embed = nn.EmbeddingBag(vocab, dim)
                        self.drop = nn.Dropout(0.1)
                        self.head = nn.Linear(dim, classes)

                    def forward(self, tokens):
                        return self.head(self.drop(self.embed(tokens)))
            """}
_MODE_DEV_LOOP = (
    "for batch in dev_loader:\n"
    "                    logits, _ = run_batch(model, batch, optimizer, mode={mode})\n"
    "                    correct += (logits.argmax(-1) == batch[\"labels\"]).sum().item()"
)
_MODE_DEV_LOOP_WITHOUT_GRAD = "with torch.no_grad():\n                    " + _MODE_DEV_LOOP.format(mode='"eval"').replace(
    "\n                    ", "\n                        "
)

# A learner whose batch method trains only in the phase its caller set on it (`self.phase`), returning early otherwise;
# `{monitor_phase}` is what `fit` sets before the pass over the monitoring batches.
_PHASE_LEARNER = """
        import torch

        from callbacks import notify


        class Learner:
            def __init__(self, model, loss_func, lr=1e-3):
                self.model = model
                self.loss_func = loss_func
                self.opt = torch.optim.AdamW(model.parameters(), lr=lr)
                self.phase = "train"
                self.losses = []

            def _run_batch(self, x, y):
                pred = self.model(x)
                loss = self.loss_func(pred, y)
                self.losses.append(loss.item())
                notify("batch_end", phase=self.phase, loss=self.losses[-1])
                if self.phase != "train":
                    return
                self.opt.zero_grad()
                loss.backward()
                self.opt.step()

            def fit(self, epochs, batches, monitor):
                for epoch in range(epochs):
                    self.model.train()
                    self.phase = "train"
                    for x, y in batches:
                        self._run_batch(x, y)
                    self.model.eval()
                    self.phase = {monitor_phase}
{monitor_loop}
        """
_PHASE_FILES = {"callbacks.py": """
                LISTENERS = []


                def notify(event, **values):
                    for listener in LISTENERS:
                        listener(event, values)
            """}
_PHASE_MONITOR_LOOP = "                    for x, y in monitor:\n                        self._run_batch(x, y)"

_TARGET_ENCODER_MODULE = """
import torch
import torch.nn as nn
import torch.nn.functional as F

from ema import momentum_copy


class MomentumDistillation(nn.Module):
    def __init__(self, encoder, dim, hidden=1024):
        super().__init__()
        self.online_encoder = encoder
        self.target_encoder = momentum_copy(self.online_encoder)
        self.predictor = nn.Sequential(nn.Linear(dim, hidden), nn.ReLU(), nn.Linear(hidden, dim))

    def forward(self, view_one, view_two):
        pred_one = self.predictor(self.online_encoder(view_one))
        pred_two = self.predictor(self.online_encoder(view_two))
{target}
        loss = regression_loss(pred_one, target_two.detach()) + regression_loss(pred_two, target_one.detach())
        return loss.mean()


def regression_loss(pred, target):
    return 2 - 2 * F.cosine_similarity(pred, target, dim=-1)
"""
_TARGET_RUN = "        target_one, target_two = self.target_encoder(torch.cat([view_one, view_two])).chunk(2)"
_TARGET_ENCODER_FILES = {"ema.py": """
    import copy

    import torch


    def momentum_copy(module):
        return copy.deepcopy(module)


    @torch.no_grad()
    def update_momentum(target, online, decay=0.99):
        for t, o in zip(target.parameters(), online.parameters()):
            t.mul_(decay).add_(o, alpha=1 - decay)
"""}

_TILE_PREDICTOR = """
import numpy as np
import torch


class TilePredictor:
    def __init__(self, model, device):
        self.model = model
        self.device = device

{decorator}    def __call__(self, tiles):
        predictions = []
        for tile in tiles:
{run}
            predictions.append(output.cpu().data.numpy())
        return np.concatenate(predictions)
"""
_TILE_RUN_AFTER_SWITCH = """            with torch.no_grad():
                self.model.eval()
            batch = torch.from_numpy(tile).float().to(self.device)
            output = self.model(batch)"""

# A sliding-window predictor whose own `predict` wraps the window pass in `inference_mode()`, while the trainer of
# another file calls the window pass directly for its final validation, and the training script's `__main__` block
# runs that validation: grad is on two callers up.
_WINDOW_PREDICTOR = """
import numpy as np
import torch


class WindowPredictor:
    def __init__(self, network, window, device):
        self.network = network
        self.window = window
        self.device = device

{decorator}    def predict_windows(self, volume):
        self.network.eval()
        logits = torch.zeros((2, *volume.shape[1:]))
        for start in range(0, volume.shape[1] - self.window + 1, self.window // 2):
            patch = volume[:, start:start + self.window].to(self.device)
            logits[:, start:start + self.window] += self.network(patch[None])[0].cpu()
        return logits

    @torch.inference_mode()
    def predict_case(self, volume):
        return self.predict_windows(volume).argmax(0).numpy()
"""
_WINDOW_TRAINER = """
    import torch

    from train import WindowPredictor


    class SegmentationTrainer:
        def __init__(self, network, loader, cases, device):
            self.network = network.to(device)
            self.loader = loader
            self.cases = cases
            self.device = device
            self.optimizer = torch.optim.SGD(self.network.parameters(), lr=0.01, momentum=0.99)

        def fit(self, epochs):
            self.network.train()
            for _ in range(epochs):
                for image, target in self.loader:
                    self.optimizer.zero_grad()
                    loss = torch.nn.functional.cross_entropy(self.network(image.to(self.device)), target.to(self.device))
                    loss.backward()
                    self.optimizer.step()

        def final_validation(self):
            predictor = WindowPredictor(self.network, window=64, device=self.device)
            dice = []
            for volume, target in self.cases:
                segmentation = predictor.predict_windows(volume).argmax(0)
                dice.append(float((2 * (segmentation * target).sum() / (segmentation.sum() + target.sum() + 1e-8))))
            return sum(dice) / len(dice)
"""
_WINDOW_RUN = """
    import argparse

    from models import build_network
    from data import case_loaders
    from trainer import SegmentationTrainer


    def run_training(fold, epochs, only_validate):
        loader, cases = case_loaders(fold)
        trainer = SegmentationTrainer(build_network(), loader, cases, "cuda")
        if not only_validate:
            trainer.fit(epochs)
{validation}

    def main():
        parser = argparse.ArgumentParser()
        parser.add_argument("fold", type=int)
        parser.add_argument("--epochs", type=int, default=100)
        parser.add_argument("--val", action="store_true")
        args = parser.parse_args()
        run_training(args.fold, args.epochs, args.val)


    if __name__ == "__main__":
        main()
"""
_WINDOW_VALIDATION = "        print(\"validation dice\", trainer.final_validation())"


# An embedder whose public `embed_file` runs its own `slide` over windows, detaching each batch, and a script of
# another file that calls `embed_file` for every file: grad is decided there, one call of this file further in.
_FRAME_EMBEDDER = """
import numpy as np
import torch
from torch import nn


class FrameEmbedder(nn.Module):
    def __init__(self, n_features, dimension):
        super().__init__()
        self.rnn = nn.LSTM(n_features, 256, batch_first=True)
        self.linear = nn.Linear(256, dimension)

    def forward(self, frames):
        output, _ = self.rnn(frames)
        return self.linear(output)

    def slide(self, features, window, batch_size=32):
        chunks = [features[i:i + window] for i in range(0, len(features) - window + 1, window // 2)]
        embeddings = []
        for start in range(0, len(chunks), batch_size):
            batch = torch.tensor(np.stack(chunks[start:start + batch_size]), dtype=torch.float32)
{run}
            embeddings.append(embedded.detach().cpu().numpy())
        return np.vstack(embeddings)

    def embed_file(self, features, window=200):
        return self.slide(features, window).mean(axis=1)
"""
_FRAME_EMBED_RUN = "            embedded = self(batch)"
_EXTRACT_SCRIPT = """
    import sys

    import numpy as np
    import torch

    from train import FrameEmbedder

    model = FrameEmbedder(40, 128)
    model.load_state_dict(torch.load(sys.argv[1]))
{extract}
"""
_EXTRACT_LOOP = """    for path in sys.argv[2:]:
        np.save(path + ".emb.npy", model.embed_file(np.load(path)))"""


# A recurrent language model whose constructor loads its own checkpoint (`torch.load`, then each tensor made a
# parameter), and a sampling script that prefills the prompt under `no_grad()` and then generates token by token.
_SELF_LOADING_LM = {"recurrent_lm.py": """
                import torch
                import torch.nn as nn


                class RecurrentLM(nn.Module):
                    def __init__(self, checkpoint_path):
                        super().__init__()
                        weights = torch.load(checkpoint_path, map_location="cpu")
                        vocab, width = weights["embed"].shape
                        self.embed = nn.Embedding(vocab, width)
                        self.embed.weight = nn.Parameter(weights["embed"])
                        self.cell = nn.GRUCell(width, width)
                        self.head = nn.Linear(width, vocab)
                        self.head.weight = nn.Parameter(weights["head"])

                    def forward(self, token, state):
                        state = self.cell(self.embed(token), state)
                        return self.head(state), state
            """}
_UNTRAINED_LM = {"recurrent_lm.py": """
                import torch.nn as nn


                class RecurrentLM(nn.Module):
                    def __init__(self, vocab=256, width=64):
                        super().__init__()
                        self.embed = nn.Embedding(vocab, width)
                        self.cell = nn.GRUCell(width, width)
                        self.head = nn.Linear(width, vocab)

                    def forward(self, token, state):
                        state = self.cell(self.embed(token), state)
                        return self.head(state), state
            """}
_SAMPLE_SCRIPT = """
import torch

from recurrent_lm import RecurrentLM

if __name__ == "__main__":
    model = RecurrentLM({built})
    prompt = torch.tensor([3, 17, 42, 8])
    state = torch.zeros(1, model.cell.hidden_size)
    with torch.no_grad():
        for token in prompt:
            logits, state = model(token.view(1), state)
    generated = []
    for step in range(200):
{generate}
    print(" ".join(str(token) for token in generated))
"""
_SAMPLE_STEP = """        token = torch.multinomial(logits.softmax(-1), 1).view(1)
        generated.append(token.item())
        logits, state = model(token, state)"""
_SAMPLE_STEP_NO_GRAD = _SAMPLE_STEP.replace(
    "        logits, state = model(token, state)", "        with torch.no_grad():\n            logits, state = model(token, state)")

# An inference method with no loop whose callers are in other files: a speaker verifier's `score` (a command-line
# script of another file runs it at module level, so grad is on), and a trained agent's `act`, whose only caller holds
# the agent in an attribute (a rollout collector), so how grad stands there is not known. Each turns the network's output
# into numbers before returning.
_VERIFIER = """
    import torch
    import torch.nn as nn
    import torch.nn.functional as F


    class SpeakerEncoder(nn.Module):
        def __init__(self, n_mels=40, dim=192):
            super().__init__()
            self.rnn = nn.LSTM(n_mels, dim, batch_first=True)
            self.project = nn.Linear(dim, dim)

        def forward(self, mels):
            frames, _ = self.rnn(mels)
            return F.normalize(self.project(frames.mean(dim=1)), dim=-1)


    class SpeakerVerifier:
        def __init__(self, checkpoint, device="cuda"):
            self.encoder = SpeakerEncoder().to(device)
            self.encoder.load_state_dict(torch.load(checkpoint, map_location=device))
            self.encoder.eval()
            self.device = device

{decorator}        def score(self, enrolment, trial):
            pair = torch.stack([enrolment, trial]).to(self.device)
            embeddings = self.encoder(pair)
            return (embeddings[0] @ embeddings[1]).item()
"""
_VERIFIER_RUN = "            embeddings = self.encoder(pair)"
_TRIALS_SCRIPT = """
    import sys

    import torch

    from train import SpeakerVerifier

    verifier = SpeakerVerifier(sys.argv[1])
    features = torch.load(sys.argv[2])
{trials}
"""
_TRIALS_LOOP = """    for enrolled, tested in torch.load(sys.argv[3]):
        print(enrolled, tested, verifier.score(features[enrolled], features[tested]))"""
_AGENT = """
    import torch
    import torch.nn as nn


    class QNetwork(nn.Module):
        def __init__(self, n_observations, n_actions, hidden=256):
            super().__init__()
            self.layers = nn.Sequential(nn.Linear(n_observations, hidden), nn.ReLU(), nn.Linear(hidden, n_actions))

        def forward(self, state):
            return self.layers(state)


    class EpsilonGreedyAgent:
        def __init__(self, checkpoint, n_observations, n_actions, epsilon=0.05, device="cpu"):
            self.q_network = QNetwork(n_observations, n_actions).to(device)
            self.q_network.load_state_dict(torch.load(checkpoint, map_location=device))
            self.q_network.eval()
            self.n_actions = n_actions
            self.epsilon = epsilon
            self.device = device

{decorator}        def act(self, observation):
            if torch.rand(()) < self.epsilon:
                return int(torch.randint(self.n_actions, ()))
            state = torch.as_tensor(observation, dtype=torch.float32, device=self.device).unsqueeze(0)
            q_values = self.q_network(state)
            return int(q_values.argmax(dim=1).item())
"""
_AGENT_RUN = "            q_values = self.q_network(state)"
_COLLECTOR = {"collector.py": """
    class TransitionCollector:
        def __init__(self, env, agent, buffer):
            self.env = env
            self.agent = agent
            self.buffer = buffer

        def collect(self, steps):
            observation = self.env.reset()
            for _ in range(steps):
                action = self.agent.act(observation)
                following, reward, done, _ = self.env.step(action)
                self.buffer.append((observation, action, reward, following, done))
                observation = self.env.reset() if done else following
"""}
# A speaker-embedding module whose encoder a loader function fills in (`global`) after the module level bound a
# placeholder `None`, and whose helper only this file calls, from a function only other files call
_SPEAKER_EMBEDDER = """
    import numpy as np
    import torch

    from nets import SpeakerNet

    _encoder = None


    def load_encoder(path):
        global _encoder
        _encoder = SpeakerNet()
        _encoder.load_state_dict(torch.load(path, map_location="cpu"))
        _encoder.eval()


    def _embed_frames(frames):
        x = torch.from_numpy(frames)
        return _encoder(x).cpu().numpy()


    def embed_recording(wav, hop=160):
        frames = np.stack([wav[i:i + hop] for i in range(0, len(wav) - hop, hop)])
        mean = _embed_frames(frames).mean(axis=0)
        return mean / np.linalg.norm(mean)
"""
_SPEAKER_FILES = {"build_index.py": """
    import sys

    import numpy as np

    import train as voices

    voices.load_encoder(sys.argv[1])
    for path in sys.argv[2:]:
        np.save(path + ".npy", voices.embed_recording(np.load(path)))
""", "nets.py": """
    from torch import nn


    class SpeakerNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.rnn = nn.GRU(160, 128, batch_first=True)
            self.head = nn.Linear(128, 64)

        def forward(self, x):
            out, _ = self.rnn(x.unsqueeze(0))
            return self.head(out[0])
"""}
# A vocoder wrapper whose network a lazy `load()` builds where `__init__` left `None`
_VOCODER = """
    import torch

    from nets import Upsampler


    class Vocoder:
        def __init__(self, checkpoint):
            self.checkpoint = checkpoint
            self._net = None

        def load(self):
            self._net = Upsampler()
            self._net.load_state_dict(torch.load(self.checkpoint))
            self._net.eval()

        def render(self, mel):
            if self._net is None:
                self.load()
            wave = self._net(torch.as_tensor(mel).unsqueeze(0))
            return wave.squeeze(0).cpu().numpy()
"""
_VOCODER_FILES = {"speak.py": """
    import sys

    import numpy as np

    from train import Vocoder

    vocoder = Vocoder(sys.argv[1])
    np.save(sys.argv[3], vocoder.render(np.load(sys.argv[2])))
""", "nets.py": """
    from torch import nn


    class Upsampler(nn.Module):
        def __init__(self):
            super().__init__()
            self.body = nn.Sequential(nn.ConvTranspose1d(80, 32, 16, stride=8), nn.Tanh(), nn.Conv1d(32, 1, 7, padding=3))

        def forward(self, mel):
            return self.body(mel)
"""}
# A latent walk run through the layers a trained generator holds (`generator.mapping`, `generator.synthesis`)
_LATENT_WALK = """
    import sys

    import torch
    from torchvision.utils import save_image

    from nets import StyleGenerator

    generator = StyleGenerator(256)
    generator.load_state_dict(torch.load(sys.argv[1])["ema"])
    generator.eval()
    direction = torch.load(sys.argv[2])
    codes = generator.mapping(torch.randn(8, 256))
    images = generator.synthesis(torch.cat([codes - direction, codes + direction]))
    save_image(images, "walk.png", nrow=8, normalize=True)
"""
_STYLE_NETS = {"nets.py": """
    from torch import nn


    class StyleGenerator(nn.Module):
        def __init__(self, width):
            super().__init__()
            self.mapping = nn.Sequential(nn.Linear(width, width), nn.LeakyReLU(0.2), nn.Linear(width, width))
            self.synthesis = nn.Sequential(nn.Linear(width, 3 * 32 * 32), nn.Tanh(), nn.Unflatten(1, (3, 32, 32)))

        def forward(self, z):
            return self.synthesis(self.mapping(z))
"""}
# REINFORCE's agent: the log-probability it returns carries the graph to the update's backward
_SAMPLING_AGENT = """
    import torch
    from torch.distributions import Categorical


    class SamplingAgent:
        def __init__(self, policy_network):
            self.policy_network = policy_network

        def act(self, observation):
            logits = self.policy_network(torch.as_tensor(observation).unsqueeze(0))
            distribution = Categorical(logits=logits)
            action = distribution.sample()
            return int(action.item()), distribution.log_prob(action)
"""


_GAN_NETS = """
import torch.nn as nn


class Generator(nn.Module):
    def __init__(self, latent_dim):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(latent_dim, 256), nn.ReLU(), nn.Linear(256, 784), nn.Tanh())

    def forward(self, z):
        return self.net(z).view(-1, 1, 28, 28)


class Critic(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Flatten(), nn.Linear(784, 256), nn.LeakyReLU(0.2), nn.Linear(256, 1))

    def forward(self, images):
        return self.net(images)
"""
_GAN_TRAINER = """
import torch
from torchvision.utils import save_image

from gan_nets import Critic, Generator


class AdversarialTrainer:
    def __init__(self, latent_dim, device):
        self.latent_dim = latent_dim
        self.device = device
        self.generator = Generator(latent_dim).to(device)
        self.critic = Critic().to(device)
        self.opt_g = torch.optim.RMSprop(self.generator.parameters(), lr=5e-5)
        self.opt_c = torch.optim.RMSprop(self.critic.parameters(), lr=5e-5)
        self.fixed_z = torch.randn(64, latent_dim, device=device)

    def fit(self, loader, epochs):
        for epoch in range(epochs):
            for step, (images, _) in enumerate(loader):
                images = images.to(self.device)
                z = torch.randn(images.size(0), self.latent_dim, device=self.device)
{critic_step}
                self.opt_c.zero_grad()
                loss_c.backward()
                self.opt_c.step()

                loss_g = -self.critic({generated}).mean()
                self.opt_g.zero_grad()
                loss_g.backward()
                self.opt_g.step()
{sample}"""
_GAN_DETACHED_PASS = """                fakes = self.generator(z).detach()
                loss_c = self.critic(fakes).mean() - self.critic(images).mean()"""
_GAN_SHARED_PASS = """                fakes = self.generator(z)
                loss_c = self.critic(fakes.detach()).mean() - self.critic(images).mean()"""
_GAN_GRID = """            grid = self.generator(self.fixed_z).detach()
            save_image(grid, f"samples/epoch_{epoch}.png", normalize=True)
"""


GradEnabledEval.MUST_FIRE = (
    Fires(  # the generator run for the critic's step and detached: a stop-gradient pass of a network the loop trains, a note
        _GAN_TRAINER.format(critic_step=_GAN_DETACHED_PASS, generated="self.generator(z)", sample=""),
        fixed=_GAN_TRAINER.format(
            critic_step=_GAN_DETACHED_PASS.replace(
                "                fakes = ", "                with torch.no_grad():\n                    fakes = "),
            generated="self.generator(z)", sample=""),
        unsafe=True,
        files={"gan_nets.py": _GAN_NETS},
        at="                fakes = self.generator(z).detach()",
        severity=Severity.NOTE,
    ),
    Fires(  # twin: the same network sampled into an image grid that only `save_image` reads: an inference pass
        _GAN_TRAINER.format(critic_step=_GAN_SHARED_PASS, generated="fakes", sample=_GAN_GRID),
        fixed=_GAN_TRAINER.format(
            critic_step=_GAN_SHARED_PASS, generated="fakes",
            sample=_GAN_GRID.replace("            grid = ", "            with torch.no_grad():\n                grid = ")),
        unsafe=True,
        files={"gan_nets.py": _GAN_NETS},
        at="            grid = self.generator(self.fixed_z).detach()",
        severity=Severity.ERROR,
    ),
    Fires(  # `score` turns the encoder's output into a float; a script of another file calls it at module level
        _VERIFIER.format(decorator=""),
        fixed=_VERIFIER.format(decorator="").replace(_VERIFIER_RUN, "            with torch.no_grad():\n    " + _VERIFIER_RUN),
        unsafe=True,
        files={"verify_trials.py": _TRIALS_SCRIPT.format(trials=_TRIALS_LOOP)},
        at=_VERIFIER_RUN.strip(),
        severity=Severity.WARNING,
    ),
    Fires(  # `act` turns the Q-values into an action; its only caller holds the agent in an attribute: a note
        _AGENT.format(decorator=""),
        fixed=_AGENT.format(decorator="").replace(_AGENT_RUN, "            with torch.no_grad():\n    " + _AGENT_RUN),
        unsafe=True,
        files=_COLLECTOR,
        at=_AGENT_RUN.strip(),
        severity=Severity.NOTE,
    ),
    Fires(  # the script of another file calls `embed_file`, which runs `slide` of this file: grad is on there
        _FRAME_EMBEDDER.format(run=_FRAME_EMBED_RUN),
        fixed=_FRAME_EMBEDDER.format(run="            with torch.no_grad():\n    " + _FRAME_EMBED_RUN),
        unsafe=True,
        files={"extract.py": _EXTRACT_SCRIPT.format(extract=_EXTRACT_LOOP)},
        at=_FRAME_EMBED_RUN,
        severity=Severity.WARNING,
    ),
    Fires(  # the trainer's final validation calls the window pass with grad on: its caller's caller is a script's main
        _WINDOW_PREDICTOR.format(decorator=""),
        fixed=_WINDOW_PREDICTOR.format(decorator="    @torch.no_grad()\n"),
        unsafe=True,
        files={"trainer.py": _WINDOW_TRAINER, "run_training.py": _WINDOW_RUN.format(validation=_WINDOW_VALIDATION)},
        at="    def predict_windows(self, volume):",
        severity=Severity.WARNING,
    ),
    Fires(  # twin: the script runs the final validation under `no_grad()`: grad is the trainer's callers' elsewhere
        _WINDOW_PREDICTOR.format(decorator=""),
        fixed=_WINDOW_PREDICTOR.format(decorator="    @torch.no_grad()\n"),
        unsafe=True,
        files={"trainer.py": _WINDOW_TRAINER, "run_training.py": _WINDOW_RUN.format(
            validation="        with torch.no_grad():\n    " + _WINDOW_VALIDATION).replace("import argparse", "import argparse\n\n    import torch")},
        at="    def predict_windows(self, volume):",
        severity=Severity.NOTE,
    ),
    Fires(  # a sampling script that trains nothing: the prompt is prefilled under `no_grad()`, the generation loop after
        # it is not, and the model's constructor loaded its trained weights itself (a checkpoint read by `torch.load`)
        _SAMPLE_SCRIPT.format(built='"lm.pt"', generate=_SAMPLE_STEP),
        files=_SELF_LOADING_LM,
        fixed=_SAMPLE_SCRIPT.format(built='"lm.pt"', generate=_SAMPLE_STEP_NO_GRAD),
        unsafe=True,
        at="logits, state = model(token, state)",
        severity=Severity.WARNING,
    ),
    Fires(  # `no_grad()` covers only the switch to eval mode, so it says nothing of grad for the forward after it
        _TILE_PREDICTOR.format(decorator="", run=_TILE_RUN_AFTER_SWITCH),
        fixed=_TILE_PREDICTOR.format(decorator="", run=_TILE_RUN_AFTER_SWITCH.replace(
            "            output = self.model(batch)", "            with torch.no_grad():\n                output = self.model(batch)")),
        unsafe=True,
        at="output = self.model(batch)",
        severity=Severity.NOTE,  # its callers, which decide how grad stands, are not in view
    ),
    Fires(  # a momentum target encoder, made by a helper of another file, run in the training forward and only detached
        _TARGET_ENCODER_MODULE.format(target=_TARGET_RUN),
        fixed=_TARGET_ENCODER_MODULE.format(target="        with torch.no_grad():\n    " + _TARGET_RUN),
        unsafe=True,
        files=_TARGET_ENCODER_FILES,
        at="target_one, target_two = self.target_encoder(torch.cat([view_one, view_two])).chunk(2)",
        severity=Severity.WARNING,
    ),
    Fires(  # a DQN learner's update step: the target network's values are detached, so its graph serves nothing
        """
        import torch
        import torch.nn.functional as F


        class Learner:
            def __init__(self, q_net, target_net, lr, gamma):
                self.q_net = q_net
                self.target_net = target_net
                self.gamma = gamma
                self.optimizer = torch.optim.Adam(q_net.parameters(), lr=lr)

            def update(self, obs, actions, rewards, next_obs, done):
                next_values = self.target_net(next_obs)
                target = rewards + self.gamma * (1 - done) * next_values.max(1).values.detach()
                q = self.q_net(obs).gather(1, actions.unsqueeze(1)).squeeze(1)
                loss = F.smooth_l1_loss(q, target)
                self.optimizer.zero_grad()
                loss.backward()
                self.optimizer.step()
                return loss.item()
        """,
        fixed="""
        import torch
        import torch.nn.functional as F


        class Learner:
            def __init__(self, q_net, target_net, lr, gamma):
                self.q_net = q_net
                self.target_net = target_net
                self.gamma = gamma
                self.optimizer = torch.optim.Adam(q_net.parameters(), lr=lr)

            def update(self, obs, actions, rewards, next_obs, done):
                with torch.no_grad():
                    next_values = self.target_net(next_obs)
                target = rewards + self.gamma * (1 - done) * next_values.max(1).values.detach()
                q = self.q_net(obs).gather(1, actions.unsqueeze(1)).squeeze(1)
                loss = F.smooth_l1_loss(q, target)
                self.optimizer.zero_grad()
                loss.backward()
                self.optimizer.step()
                return loss.item()
        """,
        unsafe=True,
        at="next_values = self.target_net(next_obs)",
        severity=Severity.WARNING,
    ),
    Fires(  # the caller sets `self.phase = "valid"` before the pass, and the batch method returns before its backward in
        # any phase but "train": after `self.model.eval()` that pass only records graphs (lumin's `_fit_batch`)
        _PHASE_LEARNER.format(monitor_phase='"valid"', monitor_loop=_PHASE_MONITOR_LOOP),
        files=_PHASE_FILES,
        fixed=_PHASE_LEARNER.format(monitor_phase='"valid"', monitor_loop="                    with torch.no_grad():\n    " + _PHASE_MONITOR_LOOP.replace(
            "\n", "\n    ")),
        at="for x, y in monitor:",
        severity=Severity.ERROR,
    ),
    Fires(  # the step helper backwards only under `if backward:`, and the validation pass hands it `backward=False`: an
        # inference pass, run by `fit` with grad on between the training epochs (inferno's apply_model_and_loss)
        _FLAG_TRAINER.format(flag="False", decorator=""),
        files=_FLAG_FILES,
        fixed=_FLAG_TRAINER.format(flag="False", decorator="            @torch.no_grad()\n"),
        at="    def validate(self):",
        severity=Severity.ERROR,
    ),
    Fires(  # the same helper told by a string: `mode="eval"` skips its `if mode == "train":` step, so the dev loop after
        # `model.eval()` only records graphs
        _MODE_ENGINE.format(dev_loop=_MODE_DEV_LOOP.format(mode='"eval"')),
        files=_MODE_FILES,
        fixed=_MODE_ENGINE.format(dev_loop=_MODE_DEV_LOOP_WITHOUT_GRAD),
        at="for batch in dev_loader:",
        severity=Severity.ERROR,
    ),
    Fires(  # the model handed to the trainer's constructor is known as a module by `self.model.eval()`: calling the
        # attribute is its forward, whatever the function is called, and `fit` runs it with grad on between steps
        _PAIR_TRAINER.format(call="scores = self.measure()", decorator=""),
        files=_PAIR_FILES,
        fixed=_PAIR_TRAINER.format(call="scores = self.measure()", decorator="            @torch.no_grad()\n"),
        at="    def measure(self):",
        severity=Severity.ERROR,
    ),
    Fires(  # ignite calls the evaluator's process function once per batch of its run, inside the trainer's handler: grad on
        """
        import torch
        from ignite.engine import Engine, Events
        from ignite.metrics import Accuracy

        from model import Net


        def run(train_loader, val_loader, epochs, device):
            model = Net().to(device)
            optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
            criterion = torch.nn.CrossEntropyLoss()

            def train_step(engine, batch):
                model.train()
                x, y = batch[0].to(device), batch[1].to(device)
                optimizer.zero_grad()
                loss = criterion(model(x), y)
                loss.backward()
                optimizer.step()
                return loss.item()

            def validation_step(engine, batch):
                model.eval()
                x, y = batch[0].to(device), batch[1].to(device)
                y_pred = model(x)
                return y_pred, y

            trainer = Engine(train_step)
            evaluator = Engine(validation_step)
            Accuracy().attach(evaluator, "accuracy")

            @trainer.on(Events.EPOCH_COMPLETED)
            def log_validation(engine):
                evaluator.run(val_loader)
                print(evaluator.state.metrics["accuracy"])

            trainer.run(train_loader, max_epochs=epochs)
        """,
        files={"model.py": """
        from torch import nn


        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Sequential(nn.Linear(784, 256), nn.Dropout(0.5), nn.Linear(256, 10))

            def forward(self, x):
                return self.fc(x.flatten(1))
        """},
        at="y_pred = model(x)",
        severity=Severity.WARNING,
        no_fix=True,
    ),
    Fires(  # the backbone is frozen but the head it gives back trains: the forward records the head's graph
        """
        import torch
        from timm import create_model


        def fine_tune_head(loader, eval_loader, epochs):
            model = create_model("resnet50d", pretrained=True, num_classes=37).cuda()
            for param in model.parameters():
                param.requires_grad = False
            for param in model.get_classifier().parameters():
                param.requires_grad = True
            optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
            for epoch in range(epochs):
                model.train()
                for images, labels in loader:
                    loss = torch.nn.functional.cross_entropy(model(images.cuda()), labels.cuda())
                    loss.backward()
                    optimizer.step()
                    optimizer.zero_grad()
                model.eval()
                correct = 0
                for images, labels in eval_loader:
                    predictions = model(images.cuda()).argmax(dim=-1)
                    correct += (predictions == labels.cuda()).sum().item()
                print(epoch, correct)
        """,
        fixed="""
        import torch
        from timm import create_model


        def fine_tune_head(loader, eval_loader, epochs):
            model = create_model("resnet50d", pretrained=True, num_classes=37).cuda()
            for param in model.parameters():
                param.requires_grad = False
            for param in model.get_classifier().parameters():
                param.requires_grad = True
            optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
            for epoch in range(epochs):
                model.train()
                for images, labels in loader:
                    loss = torch.nn.functional.cross_entropy(model(images.cuda()), labels.cuda())
                    loss.backward()
                    optimizer.step()
                    optimizer.zero_grad()
                model.eval()
                correct = 0
                with torch.no_grad():
                    for images, labels in eval_loader:
                        predictions = model(images.cuda()).argmax(dim=-1)
                        correct += (predictions == labels.cuda()).sum().item()
                print(epoch, correct)
        """,
    ),
    Fires(  # trained weights go into the freshly built model: running it is inference
        """
        import torch

        from model import ResNet18


        def test(checkpoint):
            net = ResNet18()
            net.load_state_dict(torch.load(checkpoint, map_location="cpu"))
            net.eval()
            return net(torch.randn(1, 3, 32, 32)).softmax(-1)
        """,
        files={
            "model.py": """
                import torch.nn as nn


                def ResNet18():
                    return nn.Sequential(nn.Conv2d(3, 64, 3), nn.BatchNorm2d(64), nn.Flatten(), nn.LazyLinear(10))
            """,
        },
        fixed="""
        import torch

        from model import ResNet18


        @torch.no_grad()
        def test(checkpoint):
            net = ResNet18()
            net.load_state_dict(torch.load(checkpoint, map_location="cpu"))
            net.eval()
            return net(torch.randn(1, 3, 32, 32)).softmax(-1)
        """,
        unsafe=True,
    ),
    Fires(  # the helper's `module` is handed the model itself: its call is a forward
        """
        import torch

        def collect_outputs(*, module, loader):
            return [module(x).argmax(1) for x, _ in loader]

        def eval_classifier(model, val_loader):
            model.eval()
            predictions = collect_outputs(module=model, loader=val_loader)
            return sum((p == y).sum().item() for p, (_, y) in zip(predictions, val_loader))
        """,
        fixed="""
        import torch

        def collect_outputs(*, module, loader):
            return [module(x).argmax(1) for x, _ in loader]

        @torch.no_grad()
        def eval_classifier(model, val_loader):
            model.eval()
            predictions = collect_outputs(module=model, loader=val_loader)
            return sum((p == y).sum().item() for p, (_, y) in zip(predictions, val_loader))
        """,
        at="def eval_classifier(model, val_loader):",
    ),
    Fires(
        """
        import torch
        import torch.nn as nn

        def validate(model, loader, criterion):
            model.eval()
            total, correct = 0.0, 0
            for x, y in loader:
                out = model(x.cuda())
                total += criterion(out, y.cuda()).item()
                correct += (out.argmax(1) == y.cuda()).sum().item()
            return total / len(loader), correct

        def train_one_epoch(model, loader, criterion, optimizer):
            model.train()
            for x, y in loader:
                optimizer.zero_grad()
                criterion(model(x.cuda()), y.cuda()).backward()
                optimizer.step()

        model = nn.Linear(10, 2).cuda()
        criterion = nn.CrossEntropyLoss()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for epoch in range(10):
            train_one_epoch(model, train_loader, criterion, optimizer)
            val_loss, val_correct = validate(model, val_loader, criterion)
        """,
        fixed="""
        import torch
        import torch.nn as nn

        @torch.no_grad()
        def validate(model, loader, criterion):
            model.eval()
            total, correct = 0.0, 0
            for x, y in loader:
                out = model(x.cuda())
                total += criterion(out, y.cuda()).item()
                correct += (out.argmax(1) == y.cuda()).sum().item()
            return total / len(loader), correct

        def train_one_epoch(model, loader, criterion, optimizer):
            model.train()
            for x, y in loader:
                optimizer.zero_grad()
                criterion(model(x.cuda()), y.cuda()).backward()
                optimizer.step()

        model = nn.Linear(10, 2).cuda()
        criterion = nn.CrossEntropyLoss()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for epoch in range(10):
            train_one_epoch(model, train_loader, criterion, optimizer)
            val_loss, val_correct = validate(model, val_loader, criterion)
        """,
    ),
    Fires(
        """
        import torch

        class Trainer:
            def __init__(self, model, val_loader):
                self.model = model
                self.val_loader = val_loader

            def evaluate(self):
                self.model.eval()
                preds = []
                for batch in self.val_loader:
                    preds.append(self.model(batch["x"]).argmax(-1).cpu())
                return torch.cat(preds)
        """,
        fixed="""
        import torch

        class Trainer:
            def __init__(self, model, val_loader):
                self.model = model
                self.val_loader = val_loader

            @torch.no_grad()
            def evaluate(self):
                self.model.eval()
                preds = []
                for batch in self.val_loader:
                    preds.append(self.model(batch["x"]).argmax(-1).cpu())
                return torch.cat(preds)
        """,
    ),
    Fires(
        """
        import torch
        import torch.nn.functional as F

        def test(model, device, test_loader):
            model.eval()
            test_loss = 0
            for data, target in test_loader:
                data, target = data.to(device), target.to(device)
                output = model(data)
                test_loss += F.nll_loss(output, target, reduction="sum").item()
            print(test_loss / len(test_loader.dataset))
        """,
        fixed="""
        import torch
        import torch.nn.functional as F

        @torch.no_grad()
        def test(model, device, test_loader):
            model.eval()
            test_loss = 0
            for data, target in test_loader:
                data, target = data.to(device), target.to(device)
                output = model(data)
                test_loss += F.nll_loss(output, target, reduction="sum").item()
            print(test_loss / len(test_loader.dataset))
        """,
    ),
    Fires(
        """
        import torch

        def train(model, ema, train_loader, val_loader, optimizer, criterion, epochs):
            for epoch in range(epochs):
                model.train()
                for x, y in train_loader:
                    optimizer.zero_grad()
                    loss = criterion(model(x), y)
                    loss.backward()
                    optimizer.step()
                    with torch.no_grad():
                        ema.update_parameters(model)
                model.eval()
                val_loss = 0.0
                for x, y in val_loader:
                    val_loss += criterion(model(x), y).item()
                print(epoch, val_loss)
        """,
        fixed="""
        import torch

        def train(model, ema, train_loader, val_loader, optimizer, criterion, epochs):
            for epoch in range(epochs):
                model.train()
                for x, y in train_loader:
                    optimizer.zero_grad()
                    loss = criterion(model(x), y)
                    loss.backward()
                    optimizer.step()
                    with torch.no_grad():
                        ema.update_parameters(model)
                model.eval()
                val_loss = 0.0
                with torch.no_grad():
                    for x, y in val_loader:
                        val_loss += criterion(model(x), y).item()
                print(epoch, val_loss)
        """,
    ),
    Fires(
        """
        import torch
        from torchvision.models import resnet50

        model = resnet50().cuda()
        model.eval()
        correct = 0
        for images, labels in test_dataloader:
            logits = model(images.cuda())
            correct += (logits.argmax(1) == labels.cuda()).sum().item()
        print(correct)
        """,
        fixed="""
        import torch
        from torchvision.models import resnet50

        model = resnet50().cuda()
        model.eval()
        correct = 0
        with torch.no_grad():
            for images, labels in test_dataloader:
                logits = model(images.cuda())
                correct += (logits.argmax(1) == labels.cuda()).sum().item()
        print(correct)
        """,
    ),
    Fires(
        """
        from transformers import AutoModelForSequenceClassification

        model = AutoModelForSequenceClassification.from_pretrained("distilbert-base-uncased")

        def run_inference(batches):
            model.eval()
            return [model(**batch).logits.argmax(-1).tolist() for batch in batches]
        """,
    ),
    Fires(
        """
        from torch import no_grad

        def val_epoch(net, loader, loss_fn):
            net.eval()
            losses = []
            for inputs, targets in loader:
                losses.append(loss_fn(net(inputs), targets).item())
            return sum(losses) / len(losses)
        """,
        fixed="""
        from torch import no_grad

        @no_grad()
        def val_epoch(net, loader, loss_fn):
            net.eval()
            losses = []
            for inputs, targets in loader:
                losses.append(loss_fn(net(inputs), targets).item())
            return sum(losses) / len(losses)
        """,
    ),
    Fires(  # objects: the module lives in an attribute bound outside __init__, called through a helper method
        """
        import torch

        class NeuralNet:
            def __init__(self, module, criterion):
                self.module = module
                self.criterion = criterion

            def initialize_module(self):
                self.module_ = self.module().to("cuda")

            def infer(self, x):
                return self.module_(x.to("cuda"))

            def validation_step(self, Xi, yi):
                self.module_.eval()
                y_pred = self.infer(Xi)
                return {"loss": self.criterion(y_pred, yi.to("cuda")), "y_pred": y_pred}

            def fit_loop(self, train_batches, valid_batches, optimizer, epochs):
                for _ in range(epochs):
                    for Xi, yi in train_batches:
                        self.module_.train()
                        optimizer.zero_grad()
                        self.criterion(self.infer(Xi), yi.to("cuda")).backward()
                        optimizer.step()
                    for Xi, yi in valid_batches:
                        step = self.validation_step(Xi, yi)
                        print(step["loss"].item())
        """,
        fixed="""
        import torch

        class NeuralNet:
            def __init__(self, module, criterion):
                self.module = module
                self.criterion = criterion

            def initialize_module(self):
                self.module_ = self.module().to("cuda")

            def infer(self, x):
                return self.module_(x.to("cuda"))

            @torch.no_grad()
            def validation_step(self, Xi, yi):
                self.module_.eval()
                y_pred = self.infer(Xi)
                return {"loss": self.criterion(y_pred, yi.to("cuda")), "y_pred": y_pred}

            def fit_loop(self, train_batches, valid_batches, optimizer, epochs):
                for _ in range(epochs):
                    for Xi, yi in train_batches:
                        self.module_.train()
                        optimizer.zero_grad()
                        self.criterion(self.infer(Xi), yi.to("cuda")).backward()
                        optimizer.step()
                    for Xi, yi in valid_batches:
                        step = self.validation_step(Xi, yi)
                        print(step["loss"].item())
        """
    ),
    Fires(  # mode by argument: one function trains with an optimizer and evaluates without one
        """
        import torch
        import torch.nn as nn

        def run_epoch(model, loader, criterion, optimizer=None):
            total = 0.0
            for x, y in loader:
                loss = criterion(model(x), y)
                if optimizer is not None:
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
                total += loss.item()
            return total / len(loader)

        def main(model, train_loader, val_loader, epochs):
            criterion = nn.CrossEntropyLoss()
            optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
            for epoch in range(epochs):
                train_loss = run_epoch(model, train_loader, criterion, optimizer)
                val_loss = run_epoch(model, val_loader, criterion)
                print(epoch, train_loss, val_loss)
        """
    ),
    Fires(  # framework hooks: the Trainer's evaluation_loop calls an overridden prediction_step with grad on
        """
        import torch
        from transformers import Trainer

        class RankingTrainer(Trainer):
            def prediction_step(self, model, inputs, prediction_loss_only, ignore_keys=None):
                inputs = self._prepare_inputs(inputs)
                outputs = model(**inputs)
                loss = outputs.loss.mean().detach()
                return (loss, outputs.logits, inputs["labels"])
        """,
        fixed="""
        import torch
        from transformers import Trainer

        class RankingTrainer(Trainer):
            @torch.no_grad()
            def prediction_step(self, model, inputs, prediction_loss_only, ignore_keys=None):
                inputs = self._prepare_inputs(inputs)
                outputs = model(**inputs)
                loss = outputs.loss.mean().detach()
                return (loss, outputs.logits, inputs["labels"])
        """,
        unsafe=True
    ),
    Fires(  # the loss helper the training step backwards through, called again to validate (litgpt)
        """
        import torch
        from models import GPT
        from losses import chunked_cross_entropy

        def fit(model, optimizer, train_loader, val_loader, max_iters):
            for step, (input_ids, targets) in enumerate(train_loader):
                logits = model(input_ids)
                loss = chunked_cross_entropy(logits, targets)
                loss.backward()
                optimizer.step()
                optimizer.zero_grad()
                if step % 100 == 0:
                    print(validate(model, val_loader, max_iters).item())

        def validate(model: GPT, val_loader, max_iters: int) -> torch.Tensor:
            model.eval()
            losses = torch.zeros(max_iters)
            for k, (input_ids, targets) in enumerate(val_loader):
                if k >= max_iters:
                    break
                logits = model(input_ids)
                losses[k] = chunked_cross_entropy(logits, targets)
            model.train()
            return losses.mean()
        """,
        fixed="""
        import torch
        from models import GPT
        from losses import chunked_cross_entropy

        def fit(model, optimizer, train_loader, val_loader, max_iters):
            for step, (input_ids, targets) in enumerate(train_loader):
                logits = model(input_ids)
                loss = chunked_cross_entropy(logits, targets)
                loss.backward()
                optimizer.step()
                optimizer.zero_grad()
                if step % 100 == 0:
                    print(validate(model, val_loader, max_iters).item())

        @torch.no_grad()
        def validate(model: GPT, val_loader, max_iters: int) -> torch.Tensor:
            model.eval()
            losses = torch.zeros(max_iters)
            for k, (input_ids, targets) in enumerate(val_loader):
                if k >= max_iters:
                    break
                logits = model(input_ids)
                losses[k] = chunked_cross_entropy(logits, targets)
            model.train()
            return losses.mean()
        """,
        files={
            "models.py": """
                import torch.nn as nn

                class GPT(nn.Module):
                    def __init__(self, vocab_size=256, n_embd=64):
                        super().__init__()
                        self.wte = nn.Embedding(vocab_size, n_embd)
                        self.lm_head = nn.Linear(n_embd, vocab_size, bias=False)

                    def forward(self, idx):
                        return self.lm_head(self.wte(idx))
            """,
            "losses.py": """
                import torch

                def chunked_cross_entropy(logits, targets, chunk_size=128):
                    logit_chunks = logits.reshape(-1, logits.size(-1)).split(chunk_size)
                    target_chunks = targets.reshape(-1).split(chunk_size)
                    loss_chunks = [
                        torch.nn.functional.cross_entropy(logit_chunk, target_chunk, reduction="none")
                        for logit_chunk, target_chunk in zip(logit_chunks, target_chunks)
                    ]
                    return torch.cat(loss_chunks).mean()
            """,
        },
    ),
    Fires(  # the same evaluation with embeddings made with autograd on: the encoder's forward is the one quoted
        """
        import torch
        import torch.nn as nn


        def embed(encoder, batch):
            return encoder(batch)


        def report_cosine_sims(encoder, loader):
            cos = nn.CosineSimilarity(dim=1)
            sims = []
            for images, texts in loader:
                sims.append(cos(embed(encoder, images), embed(encoder, texts)).mean().item())
            return sum(sims) / len(sims)


        def eval_model(encoder, loader):
            encoder.eval()
            return report_cosine_sims(encoder, loader)
        """,
        fixed="""
        import torch
        import torch.nn as nn


        def embed(encoder, batch):
            return encoder(batch)


        def report_cosine_sims(encoder, loader):
            cos = nn.CosineSimilarity(dim=1)
            sims = []
            for images, texts in loader:
                sims.append(cos(embed(encoder, images), embed(encoder, texts)).mean().item())
            return sum(sims) / len(sims)


        @torch.no_grad()
        def eval_model(encoder, loader):
            encoder.eval()
            return report_cosine_sims(encoder, loader)
        """,
    ),
    Fires(  # a model's own variant of forward (`incremental_forward`) is a forward too
        """
        import torch
        import torchaudio

        from wavenet import WaveNet


        def eval_model(model: WaveNet, mel, step):
            model.eval()
            audio = model.incremental_forward(mel, length=mel.size(-1) * 256)
            torchaudio.save(f"eval/step{step:07d}.wav", audio.cpu(), 22050)
            model.train()
        """,
        files={
            "wavenet.py": """
                import torch
                import torch.nn as nn


                class WaveNet(nn.Module):
                    def __init__(self):
                        super().__init__()
                        self.conv = nn.Conv1d(80, 1, 1)

                    def forward(self, mel):
                        return torch.tanh(self.conv(mel))

                    def incremental_forward(self, mel, length):
                        return self(mel)[..., :length]
            """,
        },
        fixed="""
        import torch
        import torchaudio

        from wavenet import WaveNet


        @torch.no_grad()
        def eval_model(model: WaveNet, mel, step):
            model.eval()
            audio = model.incremental_forward(mel, length=mel.size(-1) * 256)
            torchaudio.save(f"eval/step{step:07d}.wav", audio.cpu(), 22050)
            model.train()
        """,
    ),
    Fires(  # a prediction script: the loop's forwards feed printed labels, and nothing in the file backwards
        """
        import sys

        import torch
        from PIL import Image
        from torchvision import transforms

        from net import Classifier

        model = Classifier()
        model.load_state_dict(torch.load("classifier.pt", map_location="cpu"))
        model.eval()
        preprocess = transforms.Compose([transforms.Resize(224), transforms.ToTensor()])
        for path in sys.argv[1:]:
            logits = model(preprocess(Image.open(path).convert("RGB")).unsqueeze(0))
            print(path, logits.argmax(1).item())
        """,
        files={
            "net.py": """
                import torch.nn as nn


                class Classifier(nn.Module):
                    def __init__(self):
                        super().__init__()
                        self.features = nn.Sequential(nn.Conv2d(3, 16, 3), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten())
                        self.head = nn.Linear(16, 10)

                    def forward(self, x):
                        return self.head(self.features(x))
            """,
        },
        fixed="""
        import sys

        import torch
        from PIL import Image
        from torchvision import transforms

        from net import Classifier

        model = Classifier()
        model.load_state_dict(torch.load("classifier.pt", map_location="cpu"))
        model.eval()
        preprocess = transforms.Compose([transforms.Resize(224), transforms.ToTensor()])
        for path in sys.argv[1:]:
            with torch.no_grad():
                logits = model(preprocess(Image.open(path).convert("RGB")).unsqueeze(0))
            print(path, logits.argmax(1).item())
        """,
        unsafe=True,
        at='logits = model(preprocess(Image.open(path).convert("RGB")).unsqueeze(0))',
    ),
    Fires(  # a helper that runs the generator once and hands the images back: a forward too
        """
        import torch
        import torch.nn as nn
        import torch.nn.functional as F
        from torchvision.utils import make_grid, save_image


        def generate_images(generator: nn.Module, noise):
            return generator(noise).clamp(-1, 1) * 0.5 + 0.5


        def train(generator: nn.Module, discriminator: nn.Module, loader, epochs):
            opt_g = torch.optim.Adam(generator.parameters(), lr=2e-4)
            opt_d = torch.optim.Adam(discriminator.parameters(), lr=2e-4)
            fixed_noise = torch.randn(16, 128)
            for epoch in range(epochs):
                for real in loader:
                    fake = generator(torch.randn(real.size(0), 128))
                    d_loss = F.softplus(discriminator(fake.detach())).mean() + F.softplus(-discriminator(real)).mean()
                    opt_d.zero_grad()
                    d_loss.backward()
                    opt_d.step()
                    g_loss = F.softplus(-discriminator(fake)).mean()
                    opt_g.zero_grad()
                    g_loss.backward()
                    opt_g.step()
                images = generate_images(generator, fixed_noise)
                save_image(make_grid(images, nrow=4), f"samples/{epoch:03d}.png")
        """,
        fixed="""
        import torch
        import torch.nn as nn
        import torch.nn.functional as F
        from torchvision.utils import make_grid, save_image


        def generate_images(generator: nn.Module, noise):
            return generator(noise).clamp(-1, 1) * 0.5 + 0.5


        def train(generator: nn.Module, discriminator: nn.Module, loader, epochs):
            opt_g = torch.optim.Adam(generator.parameters(), lr=2e-4)
            opt_d = torch.optim.Adam(discriminator.parameters(), lr=2e-4)
            fixed_noise = torch.randn(16, 128)
            for epoch in range(epochs):
                for real in loader:
                    fake = generator(torch.randn(real.size(0), 128))
                    d_loss = F.softplus(discriminator(fake.detach())).mean() + F.softplus(-discriminator(real)).mean()
                    opt_d.zero_grad()
                    d_loss.backward()
                    opt_d.step()
                    g_loss = F.softplus(-discriminator(fake)).mean()
                    opt_g.zero_grad()
                    g_loss.backward()
                    opt_g.step()
                with torch.no_grad():
                    images = generate_images(generator, fixed_noise)
                save_image(make_grid(images, nrow=4), f"samples/{epoch:03d}.png")
        """,
        unsafe=True,
        at="images = generate_images(generator, fixed_noise)",
    ),
    Fires(  # a rollout drives the policy with grad on: the action is a number, the graph is never backwarded
        """
        import gymnasium as gym
        import torch

        from agent import Policy


        def collect(env, policy, steps):
            state, _ = env.reset()
            transitions = []
            for _ in range(steps):
                logits = policy(torch.as_tensor(state, dtype=torch.float32))
                action = logits.argmax().item()
                next_state, reward, terminated, truncated, _ = env.step(action)
                transitions.append((state, action, reward, next_state, terminated))
                state = env.reset()[0] if terminated or truncated else next_state
            return transitions


        def main():
            env = gym.make("CartPole-v1")
            policy = Policy(4, 2)
            optimizer = torch.optim.Adam(policy.parameters(), lr=1e-3)
            for episode in range(500):
                batch = collect(env, policy, 200)
                loss = policy.loss(batch)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()


        if __name__ == "__main__":
            main()
        """,
        files={
            "agent.py": """
                import torch
                import torch.nn as nn
                import torch.nn.functional as F


                class Policy(nn.Module):
                    def __init__(self, observations, actions):
                        super().__init__()
                        self.body = nn.Sequential(nn.Linear(observations, 64), nn.Tanh(), nn.Linear(64, actions))

                    def forward(self, state):
                        return self.body(state)

                    def loss(self, batch):
                        states = torch.tensor([t[0] for t in batch], dtype=torch.float32)
                        actions = torch.tensor([t[1] for t in batch])
                        return F.cross_entropy(self(states), actions)
            """,
        },
        fixed="""
        import gymnasium as gym
        import torch

        from agent import Policy


        def collect(env, policy, steps):
            state, _ = env.reset()
            transitions = []
            for _ in range(steps):
                with torch.no_grad():
                    logits = policy(torch.as_tensor(state, dtype=torch.float32))
                action = logits.argmax().item()
                next_state, reward, terminated, truncated, _ = env.step(action)
                transitions.append((state, action, reward, next_state, terminated))
                state = env.reset()[0] if terminated or truncated else next_state
            return transitions


        def main():
            env = gym.make("CartPole-v1")
            policy = Policy(4, 2)
            optimizer = torch.optim.Adam(policy.parameters(), lr=1e-3)
            for episode in range(500):
                batch = collect(env, policy, 200)
                loss = policy.loss(batch)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()


        if __name__ == "__main__":
            main()
        """,
        unsafe=True,
        at="logits = policy(torch.as_tensor(state, dtype=torch.float32))",
    ),
    Fires(  # the sample grid drawn inside the training loop: saved as an image, never backwarded
        """
        import torch
        import torch.nn.functional as F
        from torchvision.utils import save_image

        from models import Discriminator, Generator


        class GANTrainer:
            def __init__(self, loader, device):
                self.generator = Generator().to(device)
                self.discriminator = Discriminator().to(device)
                self.opt_g = torch.optim.Adam(self.generator.parameters(), lr=2e-4)
                self.opt_d = torch.optim.Adam(self.discriminator.parameters(), lr=2e-4)
                self.loader = loader
                self.device = device

            def fit(self, epochs):
                fixed_noise = torch.randn(64, 128, device=self.device)
                for epoch in range(epochs):
                    for real, _ in self.loader:
                        real = real.to(self.device)
                        fake = self.generator(torch.randn(real.size(0), 128, device=self.device))
                        real_score, fake_score = self.discriminator(real), self.discriminator(fake.detach())
                        d_loss = F.softplus(-real_score).mean() + F.softplus(fake_score).mean()
                        self.opt_d.zero_grad()
                        d_loss.backward()
                        self.opt_d.step()
                        g_loss = F.softplus(-self.discriminator(fake)).mean()
                        self.opt_g.zero_grad()
                        g_loss.backward()
                        self.opt_g.step()
                    grid = self.generator(fixed_noise)
                    save_image(grid.detach(), f"samples/epoch_{epoch:03d}.png", normalize=True)


        if __name__ == "__main__":
            GANTrainer(torch.load("data/loader.pt"), "cuda").fit(100)
        """,
        files={
            "models.py": """
                import torch.nn as nn


                class Generator(nn.Module):
                    def __init__(self):
                        super().__init__()
                        self.net = nn.Sequential(nn.Linear(128, 784), nn.Tanh(), nn.Unflatten(1, (1, 28, 28)))

                    def forward(self, z):
                        return self.net(z)


                class Discriminator(nn.Module):
                    def __init__(self):
                        super().__init__()
                        self.net = nn.Sequential(nn.Flatten(), nn.Linear(784, 1))

                    def forward(self, x):
                        return self.net(x)
            """,
        },
        fixed="""
        import torch
        import torch.nn.functional as F
        from torchvision.utils import save_image

        from models import Discriminator, Generator


        class GANTrainer:
            def __init__(self, loader, device):
                self.generator = Generator().to(device)
                self.discriminator = Discriminator().to(device)
                self.opt_g = torch.optim.Adam(self.generator.parameters(), lr=2e-4)
                self.opt_d = torch.optim.Adam(self.discriminator.parameters(), lr=2e-4)
                self.loader = loader
                self.device = device

            def fit(self, epochs):
                fixed_noise = torch.randn(64, 128, device=self.device)
                for epoch in range(epochs):
                    for real, _ in self.loader:
                        real = real.to(self.device)
                        fake = self.generator(torch.randn(real.size(0), 128, device=self.device))
                        real_score, fake_score = self.discriminator(real), self.discriminator(fake.detach())
                        d_loss = F.softplus(-real_score).mean() + F.softplus(fake_score).mean()
                        self.opt_d.zero_grad()
                        d_loss.backward()
                        self.opt_d.step()
                        g_loss = F.softplus(-self.discriminator(fake)).mean()
                        self.opt_g.zero_grad()
                        g_loss.backward()
                        self.opt_g.step()
                    with torch.no_grad():
                        grid = self.generator(fixed_noise)
                    save_image(grid.detach(), f"samples/epoch_{epoch:03d}.png", normalize=True)


        if __name__ == "__main__":
            GANTrainer(torch.load("data/loader.pt"), "cuda").fit(100)
        """,
        unsafe=True,
        at="grid = self.generator(fixed_noise)",
    ),
    Fires(  # from_pretrained hands the model over in eval mode, so this is an evaluation; nothing turns autograd off
        """
        import torch
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained("textattack/bert-base-uncased-SST-2")
        model = AutoModelForSequenceClassification.from_pretrained("textattack/bert-base-uncased-SST-2").cuda()
        correct = 0
        for texts, labels in test_batches:
            inputs = tokenizer(texts, padding=True, truncation=True, return_tensors="pt").to("cuda")
            predictions = model(**inputs).logits.argmax(-1).cpu()
            correct += (predictions == labels).sum().item()
        print(correct)
        """,
        fixed="""
        import torch
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained("textattack/bert-base-uncased-SST-2")
        model = AutoModelForSequenceClassification.from_pretrained("textattack/bert-base-uncased-SST-2").cuda()
        correct = 0
        with torch.no_grad():
            for texts, labels in test_batches:
                inputs = tokenizer(texts, padding=True, truncation=True, return_tensors="pt").to("cuda")
                predictions = model(**inputs).logits.argmax(-1).cpu()
                correct += (predictions == labels).sum().item()
        print(correct)
        """,
    ),
    Fires(  # the evaluation helper of another file runs the wrapper's predict, which switches to eval mode but leaves grad on
        """
        import torch

        from evaluation import evaluate
        from wrapper import Tagger

        tagger = Tagger(vocab=30000, tags=17)
        tagger.network.load_state_dict(torch.load("tagger.pt"))
        print(evaluate(tagger, test_batches))
        """,
        files={
            "wrapper.py": """
                import torch.nn as nn


                class TaggerNetwork(nn.Module):
                    def __init__(self, vocab, tags):
                        super().__init__()
                        self.embed = nn.Embedding(vocab, 128)
                        self.drop = nn.Dropout(0.1)
                        self.out = nn.Linear(128, tags)

                    def forward(self, tokens):
                        return self.out(self.drop(self.embed(tokens)))


                class Tagger:
                    def __init__(self, vocab, tags):
                        self.network = TaggerNetwork(vocab, tags)

                    def predict(self, tokens):
                        self.network.eval()
                        scores = self.network(tokens)
                        return scores.argmax(-1).tolist()
            """,
            "evaluation.py": """
                def evaluate(model, batches):
                    correct = total = 0
                    for tokens, tags in batches:
                        predicted = model.predict(tokens)
                        correct += sum(p == t for p, t in zip(predicted, tags.tolist()))
                        total += len(predicted)
                    return correct / total
            """,
        },
        at="print(evaluate(tagger, test_batches))",
    ),
    Fires(  # the trainer object's `predict` switches its network to eval and runs it; the dev loop leaves grad on
        """
        import argparse

        from tagger.trainer import TaggerTrainer


        def predict_dataset(trainer, dev_batches):
            predictions = []
            for batch in dev_batches:
                predictions += trainer.predict(batch)
            return predictions


        def train(args):
            if args.checkpoint is None:
                trainer = TaggerTrainer(args.hidden)
            else:
                trainer = TaggerTrainer.load(args.checkpoint)
            for step, batch in enumerate(args.train_batches):
                trainer.update(batch)
                if step % 1000 == 0:
                    print(step, predict_dataset(trainer, args.dev_batches))


        if __name__ == "__main__":
            train(argparse.ArgumentParser().parse_args())
        """,
        files={
            "tagger/__init__.py": "",
            "tagger/trainer.py": """
                import torch
                import torch.nn as nn


                class TaggerTrainer:
                    def __init__(self, hidden):
                        self.model = nn.Sequential(nn.Embedding(1000, hidden), nn.Dropout(0.3), nn.Linear(hidden, 17))
                        self.optimizer = torch.optim.Adam(self.model.parameters())

                    @classmethod
                    def load(cls, path):
                        trainer = cls(256)
                        trainer.model.load_state_dict(torch.load(path))
                        return trainer

                    def update(self, batch):
                        words, tags = batch
                        self.model.train()
                        loss = nn.functional.cross_entropy(self.model(words).flatten(0, 1), tags.flatten())
                        self.optimizer.zero_grad()
                        loss.backward()
                        self.optimizer.step()

                    def predict(self, batch):
                        words, _ = batch
                        self.model.eval()
                        return self.model(words).argmax(-1).tolist()
            """,
        },
        at="trainer.predict(batch)",
    ),
    Fires(  # a model server's request handler runs one forward per request with grad on
        """
        import torch
        from fastapi import FastAPI
        from transformers import AutoModel, AutoTokenizer

        app = FastAPI()


        class EmbeddingWorker:
            def __init__(self, name):
                self.tokenizer = AutoTokenizer.from_pretrained(name)
                self.model = AutoModel.from_pretrained(name).cuda()

            def embed(self, text):
                tokens = self.tokenizer(text, return_tensors="pt").to("cuda")
                hidden = self.model(**tokens).last_hidden_state
                return {"embedding": hidden[0].mean(0).tolist()}


        worker = EmbeddingWorker("bert-base-uncased")


        @app.post("/embed")
        async def embed(request: dict):
            return worker.embed(request["text"])
        """,
        severity=Severity.WARNING,
        at="self.model(**tokens)",
        fixed="""
        import torch
        from fastapi import FastAPI
        from transformers import AutoModel, AutoTokenizer

        app = FastAPI()


        class EmbeddingWorker:
            def __init__(self, name):
                self.tokenizer = AutoTokenizer.from_pretrained(name)
                self.model = AutoModel.from_pretrained(name).cuda()

            def embed(self, text):
                tokens = self.tokenizer(text, return_tensors="pt").to("cuda")
                with torch.no_grad():
                    hidden = self.model(**tokens).last_hidden_state
                return {"embedding": hidden[0].mean(0).tolist()}


        worker = EmbeddingWorker("bert-base-uncased")


        @app.post("/embed")
        async def embed(request: dict):
            return worker.embed(request["text"])
        """,
        unsafe=True,
    ),
    Fires(  # a library's public encoder: its callers, in other files, decide the grad mode
        """
        import numpy as np
        import torch

        from .modeling import SentenceEncoder


        class RepresentationModel:
            def __init__(self, checkpoint, device="cuda"):
                self.device = device
                self.model = SentenceEncoder(vocab_size=30522, hidden=768)
                self.model.load_state_dict(torch.load(checkpoint, map_location="cpu"))
                self.model.to(device).eval()

            def encode_sentences(self, token_batches):
                embeddings = []
                for tokens in token_batches:
                    vectors = self.model(tokens.to(self.device))
                    embeddings.append(vectors.mean(dim=1).detach().cpu().numpy())
                return np.concatenate(embeddings)
        """,
        files={
            "modeling.py": """
                import torch.nn as nn


                class SentenceEncoder(nn.Module):
                    def __init__(self, vocab_size, hidden):
                        super().__init__()
                        self.embed = nn.Embedding(vocab_size, hidden)
                        self.layers = nn.TransformerEncoder(nn.TransformerEncoderLayer(hidden, 12, batch_first=True), 6)

                    def forward(self, tokens):
                        return self.layers(self.embed(tokens))
            """,
        },
        severity=Severity.NOTE,
        at="vectors = self.model(tokens.to(self.device))",
        fixed="""
        import numpy as np
        import torch

        from .modeling import SentenceEncoder


        class RepresentationModel:
            def __init__(self, checkpoint, device="cuda"):
                self.device = device
                self.model = SentenceEncoder(vocab_size=30522, hidden=768)
                self.model.load_state_dict(torch.load(checkpoint, map_location="cpu"))
                self.model.to(device).eval()

            def encode_sentences(self, token_batches):
                embeddings = []
                for tokens in token_batches:
                    with torch.no_grad():
                        vectors = self.model(tokens.to(self.device))
                    embeddings.append(vectors.mean(dim=1).detach().cpu().numpy())
                return np.concatenate(embeddings)
        """,
        unsafe=True,
    ),
    Fires(  # a distillation step runs the teacher with grad on: no optimizer steps it, its input is data
        """
        import torch
        import torch.nn.functional as F

        from models import Student, Teacher


        def distill(loader, epochs, teacher_checkpoint):
            teacher = Teacher()
            teacher.load_state_dict(torch.load(teacher_checkpoint))
            teacher.eval()
            student = Student()
            optimizer = torch.optim.SGD(student.parameters(), lr=0.1, momentum=0.9)
            for epoch in range(epochs):
                for images, labels in loader:
                    soft_targets = F.softmax(teacher(images) / 4.0, dim=1)
                    logits = student(images)
                    loss = F.kl_div(F.log_softmax(logits / 4.0, dim=1), soft_targets, reduction="batchmean")
                    loss = loss + F.cross_entropy(logits, labels)
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
        """,
        files={
            "models.py": """
                import torch.nn as nn


                class Teacher(nn.Module):
                    def __init__(self):
                        super().__init__()
                        self.net = nn.Sequential(nn.Linear(784, 512), nn.Dropout(0.1), nn.Linear(512, 10))

                    def forward(self, x):
                        return self.net(x.flatten(1))


                class Student(nn.Module):
                    def __init__(self):
                        super().__init__()
                        self.net = nn.Linear(784, 10)

                    def forward(self, x):
                        return self.net(x.flatten(1))
            """,
        },
        severity=Severity.WARNING,
        at="soft_targets = F.softmax(teacher(images) / 4.0, dim=1)",
        no_fix=True,
    ),
    Fires(  # a preference trainer's reference model, from `from_pretrained` (eval mode), run with grad on
        """
        import torch
        import torch.nn.functional as F
        from transformers import AutoModelForCausalLM


        class PreferenceTrainer:
            def __init__(self, name, beta=0.1):
                self.model = AutoModelForCausalLM.from_pretrained(name)
                self.ref_model = AutoModelForCausalLM.from_pretrained(name)
                self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=5e-7)
                self.beta = beta

            def sequence_logps(self, logits, labels):
                return torch.gather(logits.log_softmax(-1), 2, labels.unsqueeze(2)).squeeze(2).sum(-1)

            def step(self, chosen, rejected):
                self.model.train()
                policy = self.sequence_logps(self.model(chosen).logits, chosen) - self.sequence_logps(self.model(rejected).logits, rejected)
                reference = self.sequence_logps(self.ref_model(chosen).logits, chosen) - self.sequence_logps(self.ref_model(rejected).logits, rejected)
                loss = -F.logsigmoid(self.beta * (policy - reference)).mean()
                self.optimizer.zero_grad()
                loss.backward()
                self.optimizer.step()
                return loss.item()
        """,
        severity=Severity.WARNING,
        at="reference = self.sequence_logps(self.ref_model(chosen).logits, chosen) - self.sequence_logps(self.ref_model(rejected).logits, rejected)",
        no_fix=True,
    ),
    Fires(  # the backbone class comes out of a table of the package's model classes, the pooling out of a table of functions
        """
        import numpy as np
        import torch

        from .backbones import ConvBackbone, ResidualBackbone

        BACKBONES = {
            "conv": (ConvBackbone, 512),
            "resnet": (ResidualBackbone, 2048),
        }


        def average_pool(features):
            return features.mean(dim=(2, 3))


        def max_pool(features):
            return features.amax(dim=(2, 3))


        POOLINGS = {"avg": average_pool, "max": max_pool}


        class FeatureExtractor:
            def __init__(self, arch, weights, pooling="avg", device="cuda"):
                backbone_class, self.dim = BACKBONES[arch]
                self.backbone = backbone_class(width=64)
                self.backbone.load_state_dict(torch.load(weights, map_location="cpu"))
                self.backbone.to(device).eval()
                self.pooling = pooling
                self.device = device

            def extract(self, image_batches):
                pool = POOLINGS[self.pooling]
                rows = []
                for images in image_batches:
                    features = self.backbone(images.to(self.device))
                    rows.append(pool(features).detach().cpu().numpy())
                return np.concatenate(rows)
        """,
        files={
            "backbones.py": """
                import torch.nn as nn


                class ConvBackbone(nn.Module):
                    def __init__(self, width):
                        super().__init__()
                        self.stem = nn.Conv2d(3, width, 3, padding=1)
                        self.body = nn.Sequential(nn.Conv2d(width, 512, 3, padding=1), nn.BatchNorm2d(512), nn.ReLU())

                    def forward(self, images):
                        return self.body(self.stem(images))


                class ResidualBackbone(ConvBackbone):
                    def forward(self, images):
                        stem = self.stem(images)
                        return self.body(stem) + stem.mean(dim=1, keepdim=True)
            """,
        },
        severity=Severity.NOTE,
        at="features = self.backbone(images.to(self.device))",
        fixed="""
        import numpy as np
        import torch

        from .backbones import ConvBackbone, ResidualBackbone

        BACKBONES = {
            "conv": (ConvBackbone, 512),
            "resnet": (ResidualBackbone, 2048),
        }


        def average_pool(features):
            return features.mean(dim=(2, 3))


        def max_pool(features):
            return features.amax(dim=(2, 3))


        POOLINGS = {"avg": average_pool, "max": max_pool}


        class FeatureExtractor:
            def __init__(self, arch, weights, pooling="avg", device="cuda"):
                backbone_class, self.dim = BACKBONES[arch]
                self.backbone = backbone_class(width=64)
                self.backbone.load_state_dict(torch.load(weights, map_location="cpu"))
                self.backbone.to(device).eval()
                self.pooling = pooling
                self.device = device

            def extract(self, image_batches):
                pool = POOLINGS[self.pooling]
                rows = []
                for images in image_batches:
                    with torch.no_grad():
                        features = self.backbone(images.to(self.device))
                    rows.append(pool(features).detach().cpu().numpy())
                return np.concatenate(rows)
        """,
        unsafe=True,
    ),
    Fires(  # the generator class is picked by the run's options; its sample grid inside the training loop keeps grad on
        """
        import torch
        import torch.nn.functional as F
        from torchvision.utils import save_image

        from gan.networks import Critic, DeepGenerator, ShallowGenerator


        def train(args, loader):
            generator_class = DeepGenerator if args.deep else ShallowGenerator
            generator = generator_class(args.latent).cuda()
            critic = Critic().cuda()
            g_opt = torch.optim.Adam(generator.parameters(), lr=2e-4)
            d_opt = torch.optim.Adam(critic.parameters(), lr=2e-4)
            fixed = torch.randn(64, args.latent, device="cuda")
            for step, real in enumerate(loader):
                fake = generator(torch.randn(real.size(0), args.latent, device="cuda"))
                d_loss = F.softplus(critic(fake.detach())).mean() + F.softplus(-critic(real.cuda())).mean()
                d_opt.zero_grad()
                d_loss.backward()
                d_opt.step()
                g_loss = F.softplus(-critic(fake)).mean()
                g_opt.zero_grad()
                g_loss.backward()
                g_opt.step()
                if step % 500 == 0:
                    for row in range(4):
                        grid = generator(fixed[row * 16:(row + 1) * 16])
                        save_image(grid.detach().cpu(), f"samples/{step}_{row}.png")
        """,
        files={
            "gan/__init__.py": "",
            "gan/networks.py": """
                import torch.nn as nn


                class ShallowGenerator(nn.Module):
                    def __init__(self, latent):
                        super().__init__()
                        self.net = nn.Sequential(nn.Linear(latent, 784), nn.Tanh())

                    def forward(self, z):
                        return self.net(z).view(-1, 1, 28, 28)


                class DeepGenerator(ShallowGenerator):
                    def __init__(self, latent):
                        super().__init__(latent)
                        self.net = nn.Sequential(nn.Linear(latent, 256), nn.ReLU(), nn.Linear(256, 784), nn.Tanh())


                class Critic(nn.Module):
                    def __init__(self):
                        super().__init__()
                        self.net = nn.Sequential(nn.Flatten(), nn.Linear(784, 1))

                    def forward(self, images):
                        return self.net(images)
            """,
        },
        at="grid = generator(fixed[row * 16:(row + 1) * 16])",
        fixed="""
        import torch
        import torch.nn.functional as F
        from torchvision.utils import save_image

        from gan.networks import Critic, DeepGenerator, ShallowGenerator


        def train(args, loader):
            generator_class = DeepGenerator if args.deep else ShallowGenerator
            generator = generator_class(args.latent).cuda()
            critic = Critic().cuda()
            g_opt = torch.optim.Adam(generator.parameters(), lr=2e-4)
            d_opt = torch.optim.Adam(critic.parameters(), lr=2e-4)
            fixed = torch.randn(64, args.latent, device="cuda")
            for step, real in enumerate(loader):
                fake = generator(torch.randn(real.size(0), args.latent, device="cuda"))
                d_loss = F.softplus(critic(fake.detach())).mean() + F.softplus(-critic(real.cuda())).mean()
                d_opt.zero_grad()
                d_loss.backward()
                d_opt.step()
                g_loss = F.softplus(-critic(fake)).mean()
                g_opt.zero_grad()
                g_loss.backward()
                g_opt.step()
                if step % 500 == 0:
                    for row in range(4):
                        with torch.no_grad():
                            grid = generator(fixed[row * 16:(row + 1) * 16])
                        save_image(grid.detach().cpu(), f"samples/{step}_{row}.png")
        """,
        unsafe=True,
    ),
    Fires(  # the model's own decoding method runs its forward: calling it after `eval()` is an inference pass
        """
        import torch
        from torch import nn


        class SpeechRecognizer(nn.Module):
            def __init__(self, n_mels, vocab_size):
                super().__init__()
                self.encoder = nn.GRU(n_mels, 256, batch_first=True)
                self.classifier = nn.Linear(256, vocab_size)

            def forward(self, features):
                hidden, _ = self.encoder(features)
                return self.classifier(hidden)

            def transcribe(self, features):
                return self(features).argmax(dim=-1)


        def fit(train_loader, dev_loader, epochs):
            model = SpeechRecognizer(80, 32)
            optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)
            for epoch in range(epochs):
                model.train()
                for features, targets in train_loader:
                    logits = model(features)
                    loss = nn.functional.cross_entropy(logits.transpose(1, 2), targets)
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
                model.eval()
                errors = 0
                for features, targets in dev_loader:
                    hypotheses = model.transcribe(features)
                    errors += (hypotheses != targets).sum().item()
                print(epoch, errors)
        """,
        fixed="""
        import torch
        from torch import nn


        class SpeechRecognizer(nn.Module):
            def __init__(self, n_mels, vocab_size):
                super().__init__()
                self.encoder = nn.GRU(n_mels, 256, batch_first=True)
                self.classifier = nn.Linear(256, vocab_size)

            def forward(self, features):
                hidden, _ = self.encoder(features)
                return self.classifier(hidden)

            def transcribe(self, features):
                return self(features).argmax(dim=-1)


        def fit(train_loader, dev_loader, epochs):
            model = SpeechRecognizer(80, 32)
            optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)
            for epoch in range(epochs):
                model.train()
                for features, targets in train_loader:
                    logits = model(features)
                    loss = nn.functional.cross_entropy(logits.transpose(1, 2), targets)
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
                model.eval()
                errors = 0
                with torch.no_grad():
                    for features, targets in dev_loader:
                        hypotheses = model.transcribe(features)
                        errors += (hypotheses != targets).sum().item()
                print(epoch, errors)
        """,
    ),
    Fires(  # a wrapper of another file switches its network to eval and runs one of its methods: the
        # network's class comes from a factory, so the method is taken to run it (a warning)
        """
        import torch

        from corpus import load_batches, parse_options
        from tagging import TaggerWrapper


        def tag_all(tagger, batches):
            predictions = []
            for batch in batches:
                predictions += tagger.predict(batch)
            return predictions


        def train(args, train_batches, dev_batches):
            tagger = TaggerWrapper(args)
            for step, batch in enumerate(train_batches):
                tagger.update(batch)
                if step % args.eval_every == 0:
                    print(step, len(tag_all(tagger, dev_batches)))


        if __name__ == "__main__":
            options = parse_options()
            train(options, load_batches(options.train_file), load_batches(options.dev_file))
        """,
        files={
            "tagging.py": """
                import torch

                from networks import build_network


                class TaggerWrapper:
                    def __init__(self, args):
                        self.network = build_network(args)
                        self.optimizer = torch.optim.Adam(self.network.parameters(), lr=args.lr)

                    def update(self, batch):
                        self.network.train()
                        loss = self.network.loss(batch)
                        self.optimizer.zero_grad()
                        loss.backward()
                        self.optimizer.step()

                    def predict(self, batch):
                        self.network.eval()
                        scores = self.network.score(batch["words"], batch["lengths"])
                        return scores.argmax(-1).tolist()
            """,
        },
        severity=Severity.WARNING,
        at="predictions += tagger.predict(batch)",
        no_fix=True,
    ),
    Fires(  # a sampling method only another file calls, from a script's training loop: grad is on there
        """
        import torch
        import torch.nn.functional as F
        from torchvision.utils import save_image


        class GanTrainer:
            def __init__(self, generator, discriminator, g_optimizer, d_optimizer, latent_dim=128, device="cuda"):
                self.generator = generator
                self.discriminator = discriminator
                self.g_optimizer = g_optimizer
                self.d_optimizer = d_optimizer
                self.latent_dim = latent_dim
                self.device = device

            def train_epoch(self, loader):
                for real in loader:
                    real = real.to(self.device)
                    noise = torch.randn(real.size(0), self.latent_dim, device=self.device)
                    fake = self.generator(noise)
                    d_loss = F.softplus(self.discriminator(fake.detach())).mean() + F.softplus(-self.discriminator(real)).mean()
                    self.d_optimizer.zero_grad()
                    d_loss.backward()
                    self.d_optimizer.step()
                    g_loss = F.softplus(-self.discriminator(fake)).mean()
                    self.g_optimizer.zero_grad()
                    g_loss.backward()
                    self.g_optimizer.step()

            def save_samples(self, folder, rows=8):
                self.generator.eval()
                for row in range(rows):
                    noise = torch.randn(rows, self.latent_dim, device=self.device)
                    save_image(self.generator(noise), f"{folder}/row{row}.png", nrow=rows)
                self.generator.train()
        """,
        files={
            "main.py": """
                import argparse

                from data import image_loader
                from models import Discriminator, Generator
                from torch.optim import Adam
                from train import GanTrainer

                parser = argparse.ArgumentParser()
                parser.add_argument("--epochs", type=int, default=50)
                args = parser.parse_args()

                generator, discriminator = Generator().cuda(), Discriminator().cuda()
                trainer = GanTrainer(generator, discriminator, Adam(generator.parameters(), 2e-4), Adam(discriminator.parameters(), 2e-4))
                for epoch in range(args.epochs):
                    trainer.train_epoch(image_loader("data/faces", batch_size=64))
                    trainer.save_samples(f"samples/epoch{epoch:03d}")
            """,
        },
        fixed="""
        import torch
        import torch.nn.functional as F
        from torchvision.utils import save_image


        class GanTrainer:
            def __init__(self, generator, discriminator, g_optimizer, d_optimizer, latent_dim=128, device="cuda"):
                self.generator = generator
                self.discriminator = discriminator
                self.g_optimizer = g_optimizer
                self.d_optimizer = d_optimizer
                self.latent_dim = latent_dim
                self.device = device

            def train_epoch(self, loader):
                for real in loader:
                    real = real.to(self.device)
                    noise = torch.randn(real.size(0), self.latent_dim, device=self.device)
                    fake = self.generator(noise)
                    d_loss = F.softplus(self.discriminator(fake.detach())).mean() + F.softplus(-self.discriminator(real)).mean()
                    self.d_optimizer.zero_grad()
                    d_loss.backward()
                    self.d_optimizer.step()
                    g_loss = F.softplus(-self.discriminator(fake)).mean()
                    self.g_optimizer.zero_grad()
                    g_loss.backward()
                    self.g_optimizer.step()

            def save_samples(self, folder, rows=8):
                self.generator.eval()
                for row in range(rows):
                    noise = torch.randn(rows, self.latent_dim, device=self.device)
                    with torch.no_grad():
                        save_image(self.generator(noise), f"{folder}/row{row}.png", nrow=rows)
                self.generator.train()
        """,
        unsafe=True,
        severity=Severity.WARNING,
    ),
    Fires(  # a trainer's sampling method hands its last step back; the training method saves it as an image: the graph of every denoising step is recorded for nothing
        """
        import torch
        import torch.nn.functional as F
        from torchvision.utils import save_image


        class DenoiserTrainer:
            def __init__(self, model, loader, lr=1e-4, device="cuda"):
                self.model = model.to(device)
                self.loader = loader
                self.device = device
                self.optimizer = torch.optim.Adam(self.model.parameters(), lr=lr)

            def sample(self, count, steps=50):
                x = torch.randn(count, 3, 32, 32, device=self.device)
                for step in reversed(range(steps)):
                    level = torch.full((count,), step, device=self.device)
                    x = x - self.model(x, level) / steps
                return x.clamp(-1, 1)

            def fit(self, epochs):
                for epoch in range(epochs):
                    for images in self.loader:
                        images = images.to(self.device)
                        noise = torch.randn_like(images)
                        level = torch.randint(0, 50, (images.size(0),), device=self.device)
                        loss = F.mse_loss(self.model(images + noise, level), noise)
                        self.optimizer.zero_grad()
                        loss.backward()
                        self.optimizer.step()
                    save_image(self.sample(16), f"samples/epoch{epoch:03d}.png", nrow=4)
        """,
        fixed="""
        import torch
        import torch.nn.functional as F
        from torchvision.utils import save_image


        class DenoiserTrainer:
            def __init__(self, model, loader, lr=1e-4, device="cuda"):
                self.model = model.to(device)
                self.loader = loader
                self.device = device
                self.optimizer = torch.optim.Adam(self.model.parameters(), lr=lr)

            def sample(self, count, steps=50):
                x = torch.randn(count, 3, 32, 32, device=self.device)
                for step in reversed(range(steps)):
                    level = torch.full((count,), step, device=self.device)
                    x = x - self.model(x, level) / steps
                return x.clamp(-1, 1)

            def fit(self, epochs):
                for epoch in range(epochs):
                    for images in self.loader:
                        images = images.to(self.device)
                        noise = torch.randn_like(images)
                        level = torch.randint(0, 50, (images.size(0),), device=self.device)
                        loss = F.mse_loss(self.model(images + noise, level), noise)
                        self.optimizer.zero_grad()
                        loss.backward()
                        self.optimizer.step()
                    with torch.no_grad():
                        save_image(self.sample(16), f"samples/epoch{epoch:03d}.png", nrow=4)
        """,
        unsafe=True,
    ),
    Fires(  # a sampling helper of another file returns the generator's images; the training loop only saves them
        """
        import torch
        import torch.nn.functional as F
        from torchvision.utils import save_image

        from sampling import render_grid
        from networks import Generator, Critic


        def main(loader, iterations=20000, every=500, latent_dim=64):
            generator, critic = Generator(latent_dim).cuda(), Critic().cuda()
            g_opt = torch.optim.Adam(generator.parameters(), lr=2e-4, betas=(0.5, 0.9))
            c_opt = torch.optim.Adam(critic.parameters(), lr=2e-4, betas=(0.5, 0.9))
            fixed = torch.randn(64, latent_dim, device="cuda")
            for iteration, real in zip(range(iterations), loader):
                real = real.cuda()
                fake = generator(torch.randn(real.size(0), latent_dim, device="cuda"))
                c_loss = critic(fake.detach()).mean() - critic(real).mean()
                c_opt.zero_grad()
                c_loss.backward()
                c_opt.step()
                g_loss = -critic(fake).mean()
                g_opt.zero_grad()
                g_loss.backward()
                g_opt.step()
                if iteration % every == 0:
                    save_image(render_grid(generator, fixed), f"progress/{iteration:06d}.png")


        if __name__ == "__main__":
            main(torch.load("faces.pt"))
        """,
        fixed="""
        import torch
        import torch.nn.functional as F
        from torchvision.utils import save_image

        from sampling import render_grid
        from networks import Generator, Critic


        def main(loader, iterations=20000, every=500, latent_dim=64):
            generator, critic = Generator(latent_dim).cuda(), Critic().cuda()
            g_opt = torch.optim.Adam(generator.parameters(), lr=2e-4, betas=(0.5, 0.9))
            c_opt = torch.optim.Adam(critic.parameters(), lr=2e-4, betas=(0.5, 0.9))
            fixed = torch.randn(64, latent_dim, device="cuda")
            for iteration, real in zip(range(iterations), loader):
                real = real.cuda()
                fake = generator(torch.randn(real.size(0), latent_dim, device="cuda"))
                c_loss = critic(fake.detach()).mean() - critic(real).mean()
                c_opt.zero_grad()
                c_loss.backward()
                c_opt.step()
                g_loss = -critic(fake).mean()
                g_opt.zero_grad()
                g_loss.backward()
                g_opt.step()
                if iteration % every == 0:
                    with torch.no_grad():
                        save_image(render_grid(generator, fixed), f"progress/{iteration:06d}.png")


        if __name__ == "__main__":
            main(torch.load("faces.pt"))
        """,
        unsafe=True,
        files={
            "sampling.py": """
                import torch


                def render_grid(generator, latents, chunk=16):
                    images = [generator(part) for part in latents.split(chunk)]
                    return torch.cat(images) * 0.5 + 0.5
            """,
            "networks.py": """
                import torch.nn as nn


                class Generator(nn.Module):
                    def __init__(self, latent_dim):
                        super().__init__()
                        self.net = nn.Sequential(nn.Linear(latent_dim, 3 * 32 * 32), nn.Tanh())

                    def forward(self, z):
                        return self.net(z).view(-1, 3, 32, 32)


                class Critic(nn.Module):
                    def __init__(self):
                        super().__init__()
                        self.net = nn.Sequential(nn.Flatten(), nn.Linear(3 * 32 * 32, 1))

                    def forward(self, x):
                        return self.net(x)
            """,
        },
    ),
    Fires(  # an FID pass between epochs: its only caller trains, so grad is on in it
        """
        import numpy as np
        import torch
        from scipy import linalg
        from torchvision.models import inception_v3

        from networks import Critic, Generator


        def pooled_features(inception, images):
            return inception(torch.nn.functional.interpolate(images, size=299)).cpu().numpy()


        def frechet_distance(real, fake):
            mean_gap = ((real.mean(0) - fake.mean(0)) ** 2).sum()
            covariance, _ = linalg.sqrtm(np.cov(real, rowvar=False) @ np.cov(fake, rowvar=False), disp=False)
            return float(mean_gap + np.trace(np.cov(real, rowvar=False) + np.cov(fake, rowvar=False) - 2 * covariance.real))


        def fid(generator, inception, reference_batches, latent_dim):
            real, fake = [], []
            for batch in reference_batches:
                real.append(pooled_features(inception, batch.cuda()))
                fake.append(pooled_features(inception, generator(torch.randn(batch.size(0), latent_dim, device="cuda"))))
            return frechet_distance(np.concatenate(real), np.concatenate(fake))


        def train(loader, reference_batches, epochs=100, latent_dim=64):
            generator, critic = Generator(latent_dim).cuda(), Critic().cuda()
            inception = inception_v3(weights="IMAGENET1K_V1", aux_logits=True).cuda().eval()
            g_opt = torch.optim.Adam(generator.parameters(), lr=2e-4)
            c_opt = torch.optim.Adam(critic.parameters(), lr=2e-4)
            for epoch in range(epochs):
                for real in loader:
                    fake = generator(torch.randn(real.size(0), latent_dim, device="cuda"))
                    c_loss = critic(fake.detach()).mean() - critic(real.cuda()).mean()
                    c_opt.zero_grad()
                    c_loss.backward()
                    c_opt.step()
                    g_loss = -critic(fake).mean()
                    g_opt.zero_grad()
                    g_loss.backward()
                    g_opt.step()
                print(f"epoch {epoch}: FID {fid(generator, inception, reference_batches, latent_dim):.2f}")
        """,
        fixed="""
        import numpy as np
        import torch
        from scipy import linalg
        from torchvision.models import inception_v3

        from networks import Critic, Generator


        def pooled_features(inception, images):
            return inception(torch.nn.functional.interpolate(images, size=299)).cpu().numpy()


        def frechet_distance(real, fake):
            mean_gap = ((real.mean(0) - fake.mean(0)) ** 2).sum()
            covariance, _ = linalg.sqrtm(np.cov(real, rowvar=False) @ np.cov(fake, rowvar=False), disp=False)
            return float(mean_gap + np.trace(np.cov(real, rowvar=False) + np.cov(fake, rowvar=False) - 2 * covariance.real))


        def fid(generator, inception, reference_batches, latent_dim):
            real, fake = [], []
            for batch in reference_batches:
                real.append(pooled_features(inception, batch.cuda()))
                with torch.no_grad():
                    fake.append(pooled_features(inception, generator(torch.randn(batch.size(0), latent_dim, device="cuda"))))
            return frechet_distance(np.concatenate(real), np.concatenate(fake))


        def train(loader, reference_batches, epochs=100, latent_dim=64):
            generator, critic = Generator(latent_dim).cuda(), Critic().cuda()
            inception = inception_v3(weights="IMAGENET1K_V1", aux_logits=True).cuda().eval()
            g_opt = torch.optim.Adam(generator.parameters(), lr=2e-4)
            c_opt = torch.optim.Adam(critic.parameters(), lr=2e-4)
            for epoch in range(epochs):
                for real in loader:
                    fake = generator(torch.randn(real.size(0), latent_dim, device="cuda"))
                    c_loss = critic(fake.detach()).mean() - critic(real.cuda()).mean()
                    c_opt.zero_grad()
                    c_loss.backward()
                    c_opt.step()
                    g_loss = -critic(fake).mean()
                    g_opt.zero_grad()
                    g_loss.backward()
                    g_opt.step()
                print(f"epoch {epoch}: FID {fid(generator, inception, reference_batches, latent_dim):.2f}")
        """,
        unsafe=True,
        files={
            "networks.py": """
                import torch.nn as nn


                class Generator(nn.Module):
                    def __init__(self, latent_dim):
                        super().__init__()
                        self.net = nn.Sequential(nn.Linear(latent_dim, 3 * 32 * 32), nn.Tanh())

                    def forward(self, z):
                        return self.net(z).view(-1, 3, 32, 32)


                class Critic(nn.Module):
                    def __init__(self):
                        super().__init__()
                        self.net = nn.Sequential(nn.Flatten(), nn.Linear(3 * 32 * 32, 1))

                    def forward(self, x):
                        return self.net(x)
            """,
        },
    ),
    Fires(  # an inference script guards one forward and forgets the other, whose result it writes out
        """
        import argparse

        import numpy as np
        import torch
        from PIL import Image

        from models import Denoiser, Upscaler


        def enhance(denoiser_path, upscaler_path, image_path, output_path):
            denoiser = Denoiser()
            denoiser.load_state_dict(torch.load(denoiser_path, map_location="cuda"))
            denoiser.cuda().eval()
            upscaler = torch.load(upscaler_path, map_location="cuda").eval()
            image = torch.from_numpy(np.asarray(Image.open(image_path))).permute(2, 0, 1).float().div(255).unsqueeze(0).cuda()
            with torch.no_grad():
                clean = denoiser(image)
            large = upscaler.upscale(clean, factor=4).clamp(0, 1)
            pixels = (large[0].permute(1, 2, 0).cpu().numpy() * 255).astype(np.uint8)
            Image.fromarray(pixels).save(output_path)


        if __name__ == "__main__":
            parser = argparse.ArgumentParser()
            parser.add_argument("--denoiser", default="denoiser.pt")
            parser.add_argument("--upscaler", default="upscaler.pt")
            parser.add_argument("image")
            parser.add_argument("output")
            args = parser.parse_args()
            enhance(args.denoiser, args.upscaler, args.image, args.output)
        """,
        fixed="""
        import argparse

        import numpy as np
        import torch
        from PIL import Image

        from models import Denoiser, Upscaler


        def enhance(denoiser_path, upscaler_path, image_path, output_path):
            denoiser = Denoiser()
            denoiser.load_state_dict(torch.load(denoiser_path, map_location="cuda"))
            denoiser.cuda().eval()
            upscaler = torch.load(upscaler_path, map_location="cuda").eval()
            image = torch.from_numpy(np.asarray(Image.open(image_path))).permute(2, 0, 1).float().div(255).unsqueeze(0).cuda()
            with torch.no_grad():
                clean = denoiser(image)
            with torch.no_grad():
                large = upscaler.upscale(clean, factor=4).clamp(0, 1)
            pixels = (large[0].permute(1, 2, 0).cpu().numpy() * 255).astype(np.uint8)
            Image.fromarray(pixels).save(output_path)


        if __name__ == "__main__":
            parser = argparse.ArgumentParser()
            parser.add_argument("--denoiser", default="denoiser.pt")
            parser.add_argument("--upscaler", default="upscaler.pt")
            parser.add_argument("image")
            parser.add_argument("output")
            args = parser.parse_args()
            enhance(args.denoiser, args.upscaler, args.image, args.output)
        """,
        unsafe=True,
        files={
            "models.py": """
                import torch.nn as nn


                class Denoiser(nn.Module):
                    def __init__(self):
                        super().__init__()
                        self.net = nn.Sequential(nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(), nn.Conv2d(32, 3, 3, padding=1))

                    def forward(self, x):
                        return x - self.net(x)


                class Upscaler(nn.Module):
                    def __init__(self):
                        super().__init__()
                        self.body = nn.Conv2d(3, 48, 3, padding=1)
                        self.shuffle = nn.PixelShuffle(4)

                    def upscale(self, x, factor=4):
                        return self.shuffle(self.body(x))
            """,
        },
    ),
    Fires(  # a model loaded by the project's own helper, recognised as a transformers model by `output_hidden_states`, run per request
        """
        import argparse

        import torch
        import uvicorn
        from fastapi import FastAPI, Request

        from serving.loading import load_checkpoint

        app = FastAPI()


        class EncoderService:
            def __init__(self, checkpoint, device="cuda"):
                self.model, self.tokenizer = load_checkpoint(checkpoint, device)
                self.device = device

            def embed(self, text):
                ids = self.tokenizer(text, return_tensors="pt").input_ids.to(self.device)
                outputs = self.model(ids, output_hidden_states=True)
                vector = outputs.hidden_states[-1][0].mean(dim=0)
                return {"embedding": vector.tolist(), "tokens": ids.size(1)}


        @app.post("/embed")
        async def embed(request: Request):
            payload = await request.json()
            return service.embed(payload["text"])


        if __name__ == "__main__":
            parser = argparse.ArgumentParser()
            parser.add_argument("--checkpoint", required=True)
            args = parser.parse_args()
            service = EncoderService(args.checkpoint)
            uvicorn.run(app, port=8080)
        """,
        fixed="""
        import argparse

        import torch
        import uvicorn
        from fastapi import FastAPI, Request

        from serving.loading import load_checkpoint

        app = FastAPI()


        class EncoderService:
            def __init__(self, checkpoint, device="cuda"):
                self.model, self.tokenizer = load_checkpoint(checkpoint, device)
                self.device = device

            def embed(self, text):
                ids = self.tokenizer(text, return_tensors="pt").input_ids.to(self.device)
                with torch.no_grad():
                    outputs = self.model(ids, output_hidden_states=True)
                vector = outputs.hidden_states[-1][0].mean(dim=0)
                return {"embedding": vector.tolist(), "tokens": ids.size(1)}


        @app.post("/embed")
        async def embed(request: Request):
            payload = await request.json()
            return service.embed(payload["text"])


        if __name__ == "__main__":
            parser = argparse.ArgumentParser()
            parser.add_argument("--checkpoint", required=True)
            args = parser.parse_args()
            service = EncoderService(args.checkpoint)
            uvicorn.run(app, port=8080)
        """,
        unsafe=True,
        files={
            "serving/__init__.py": "",
            "serving/loading.py": """
                from transformers import AutoModelForCausalLM, AutoTokenizer


                def load_checkpoint(path, device):
                    tokenizer = AutoTokenizer.from_pretrained(path)
                    model = AutoModelForCausalLM.from_pretrained(path, torch_dtype="auto").to(device)
                    return model, tokenizer
            """,
        },
    ),
    Fires(  # a caption encoder that nothing trains, run through a helper in the training step: the backward fills its `.grad` for nothing
        """
        import torch
        import torch.nn.functional as F
        from diffusers import AutoencoderKL, DDPMScheduler, UNet2DConditionModel
        from transformers import CLIPTextModel, CLIPTokenizer


        def embed_captions(encoder, tokenizer, captions):
            tokens = tokenizer(captions, padding="max_length", max_length=77, truncation=True, return_tensors="pt")
            return encoder(tokens.input_ids.to(encoder.device))[0]


        def fine_tune(loader, base="stabilityai/sd-turbo", steps=2000):
            tokenizer = CLIPTokenizer.from_pretrained(base, subfolder="tokenizer")
            encoder = CLIPTextModel.from_pretrained(base, subfolder="text_encoder").cuda()
            autoencoder = AutoencoderKL.from_pretrained(base, subfolder="vae").cuda()
            autoencoder.requires_grad_(False)
            denoiser = UNet2DConditionModel.from_pretrained(base, subfolder="unet").cuda()
            noise_schedule = DDPMScheduler.from_pretrained(base, subfolder="scheduler")
            optimizer = torch.optim.AdamW(denoiser.parameters(), lr=1e-5)
            for step, batch in zip(range(steps), loader):
                latents = autoencoder.encode(batch["images"].cuda()).latent_dist.sample() * 0.18215
                noise = torch.randn_like(latents)
                timesteps = torch.randint(0, 1000, (latents.size(0),), device=latents.device)
                context = embed_captions(encoder, tokenizer, batch["captions"])
                prediction = denoiser(noise_schedule.add_noise(latents, noise, timesteps), timesteps, context).sample
                loss = F.mse_loss(prediction, noise)
                loss.backward()
                optimizer.step()
                optimizer.zero_grad()
        """,
    ),
    Fires(  # an inference script: its module level runs `main()`, and nothing the program runs trains; the boxes go
        # through post-processing the analysis cannot read, but no graph is ever used in a program that never backwards
        """
        import argparse
        from pathlib import Path

        import cv2
        import torch

        from detector.weights import load_detector
        from detector.postprocess import suppress_overlaps


        def run(weights, source, out_dir, threshold=0.3):
            device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
            net = load_detector(weights, device)
            net.eval()
            for image_path in sorted(Path(source).glob("*.jpg")):
                frame = cv2.imread(str(image_path))
                tensor = torch.from_numpy(frame).permute(2, 0, 1).float().div(255).unsqueeze(0).to(device)
                raw = net(tensor)
                for x1, y1, x2, y2, score in suppress_overlaps(raw, threshold):
                    cv2.rectangle(frame, (int(x1), int(y1)), (int(x2), int(y2)), (0, 0, 255), 2)
                cv2.imwrite(str(Path(out_dir) / image_path.name), frame)


        def main():
            parser = argparse.ArgumentParser()
            parser.add_argument("--weights", default="best.pt")
            parser.add_argument("--source", default="images")
            parser.add_argument("--out", default="out")
            args = parser.parse_args()
            run(args.weights, args.source, args.out)


        if __name__ == "__main__":
            main()
        """,
        severity=Severity.WARNING,
        unsafe=True,
        fixed="""
        import argparse
        from pathlib import Path

        import cv2
        import torch

        from detector.weights import load_detector
        from detector.postprocess import suppress_overlaps


        def run(weights, source, out_dir, threshold=0.3):
            device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
            net = load_detector(weights, device)
            net.eval()
            for image_path in sorted(Path(source).glob("*.jpg")):
                frame = cv2.imread(str(image_path))
                tensor = torch.from_numpy(frame).permute(2, 0, 1).float().div(255).unsqueeze(0).to(device)
                with torch.no_grad():
                    raw = net(tensor)
                for x1, y1, x2, y2, score in suppress_overlaps(raw, threshold):
                    cv2.rectangle(frame, (int(x1), int(y1)), (int(x2), int(y2)), (0, 0, 255), 2)
                cv2.imwrite(str(Path(out_dir) / image_path.name), frame)


        def main():
            parser = argparse.ArgumentParser()
            parser.add_argument("--weights", default="best.pt")
            parser.add_argument("--source", default="images")
            parser.add_argument("--out", default="out")
            args = parser.parse_args()
            run(args.weights, args.source, args.out)


        if __name__ == "__main__":
            main()
        """,
    ),
    Fires(  # a vocoder script run by Python Fire: the command line calls `synthesize`, with grad on
        """
        from glob import glob

        import fire
        import numpy as np
        import soundfile
        import torch

        from vocoder.model import Vocoder


        def synthesize(checkpoint, mel_dir, out_dir, sample_rate=22050):
            vocoder = Vocoder.from_checkpoint(checkpoint).cuda()
            vocoder.eval()
            for mel_path in sorted(glob(f"{mel_dir}/*.npy")):
                mel = torch.from_numpy(np.load(mel_path)).unsqueeze(0).cuda()
                waveform = vocoder(mel)
                soundfile.write(mel_path.replace(mel_dir, out_dir).replace(".npy", ".wav"), waveform.squeeze().detach().cpu().numpy(), sample_rate)


        if __name__ == "__main__":
            fire.Fire(synthesize)
        """,
        fixed="""
        from glob import glob

        import fire
        import numpy as np
        import soundfile
        import torch

        from vocoder.model import Vocoder


        def synthesize(checkpoint, mel_dir, out_dir, sample_rate=22050):
            vocoder = Vocoder.from_checkpoint(checkpoint).cuda()
            vocoder.eval()
            for mel_path in sorted(glob(f"{mel_dir}/*.npy")):
                mel = torch.from_numpy(np.load(mel_path)).unsqueeze(0).cuda()
                with torch.no_grad():
                    waveform = vocoder(mel)
                soundfile.write(mel_path.replace(mel_dir, out_dir).replace(".npy", ".wav"), waveform.squeeze().detach().cpu().numpy(), sample_rate)


        if __name__ == "__main__":
            fire.Fire(synthesize)
        """,
        unsafe=True,
        severity=Severity.WARNING,
        at="waveform = vocoder(mel)",
    ),
    Fires(  # a sample grid drawn by a helper method once per epoch of the loop that steps the optimizers
        """
        import torch
        from torch import nn
        from torchvision.utils import save_image


        class AdversarialTrainer:
            def __init__(self, generator, critic, loader, latent_dim=128):
                self.generator = generator
                self.critic = critic
                self.loader = loader
                self.gen_optimizer = torch.optim.Adam(generator.parameters(), lr=2e-4, betas=(0.5, 0.999))
                self.critic_optimizer = torch.optim.Adam(critic.parameters(), lr=2e-4, betas=(0.5, 0.999))
                self.preview_noise = torch.randn(64, latent_dim)
                self.latent_dim = latent_dim

            def write_preview(self, epoch):
                grid = self.generator(self.preview_noise)
                save_image(grid, f"previews/{epoch:04d}.png", nrow=8, normalize=True)

            def train(self, epochs):
                bce = nn.BCEWithLogitsLoss()
                for epoch in range(epochs):
                    for real, _ in self.loader:
                        fake = self.generator(torch.randn(real.size(0), self.latent_dim))
                        real_logits, fake_logits = self.critic(real), self.critic(fake.detach())
                        critic_loss = bce(real_logits, torch.ones_like(real_logits)) + bce(fake_logits, torch.zeros_like(fake_logits))
                        self.critic_optimizer.zero_grad()
                        critic_loss.backward()
                        self.critic_optimizer.step()
                        gen_logits = self.critic(fake)
                        gen_loss = bce(gen_logits, torch.ones_like(gen_logits))
                        self.gen_optimizer.zero_grad()
                        gen_loss.backward()
                        self.gen_optimizer.step()
                    self.write_preview(epoch)
        """,
        fixed="""
        import torch
        from torch import nn
        from torchvision.utils import save_image


        class AdversarialTrainer:
            def __init__(self, generator, critic, loader, latent_dim=128):
                self.generator = generator
                self.critic = critic
                self.loader = loader
                self.gen_optimizer = torch.optim.Adam(generator.parameters(), lr=2e-4, betas=(0.5, 0.999))
                self.critic_optimizer = torch.optim.Adam(critic.parameters(), lr=2e-4, betas=(0.5, 0.999))
                self.preview_noise = torch.randn(64, latent_dim)
                self.latent_dim = latent_dim

            def write_preview(self, epoch):
                with torch.no_grad():
                    grid = self.generator(self.preview_noise)
                save_image(grid, f"previews/{epoch:04d}.png", nrow=8, normalize=True)

            def train(self, epochs):
                bce = nn.BCEWithLogitsLoss()
                for epoch in range(epochs):
                    for real, _ in self.loader:
                        fake = self.generator(torch.randn(real.size(0), self.latent_dim))
                        real_logits, fake_logits = self.critic(real), self.critic(fake.detach())
                        critic_loss = bce(real_logits, torch.ones_like(real_logits)) + bce(fake_logits, torch.zeros_like(fake_logits))
                        self.critic_optimizer.zero_grad()
                        critic_loss.backward()
                        self.critic_optimizer.step()
                        gen_logits = self.critic(fake)
                        gen_loss = bce(gen_logits, torch.ones_like(gen_logits))
                        self.gen_optimizer.zero_grad()
                        gen_loss.backward()
                        self.gen_optimizer.step()
                    self.write_preview(epoch)
        """,
        unsafe=True,
        severity=Severity.WARNING,
        at="grid = self.generator(self.preview_noise)",
    ),
    Fires(  # a preview helper (of `train.py`) whose only caller, in `main.py`, runs it inside the loop that steps the optimizer
        """
        from torchvision.utils import save_image


        def render_samples(autoencoder, images, path):
            reconstructions = autoencoder(images)
            save_image(reconstructions, path, nrow=4)
        """,
        files={
            "main.py": """
                import torch

                from train import render_samples


                def train(autoencoder, loader, steps):
                    optimizer = torch.optim.AdamW(autoencoder.parameters(), lr=3e-4)
                    probe = torch.randn(16, 3, 64, 64)
                    for step, images in zip(range(steps), loader):
                        loss = torch.nn.functional.mse_loss(autoencoder(images), images)
                        optimizer.zero_grad()
                        loss.backward()
                        optimizer.step()
                        if step % 500 == 0:
                            render_samples(autoencoder, probe, f"recon/{step}.png")
            """,
        },
        severity=Severity.WARNING,
        at="reconstructions = autoencoder(images)",
        no_fix=True,
    ),
    Fires(  # a distillation loss module holding the teacher runs it inside its forward, on the images only
        """
        import torch
        import torchvision

        from losses import SoftTargetLoss


        def distill(loader, epochs):
            teacher = torchvision.models.resnet101(weights="IMAGENET1K_V2").cuda().eval()
            student = torchvision.models.mobilenet_v3_small(num_classes=1000).cuda()
            criterion = SoftTargetLoss(teacher, temperature=3.0)
            optimizer = torch.optim.SGD(student.parameters(), lr=0.05, momentum=0.9)
            for _ in range(epochs):
                for images, labels in loader:
                    images, labels = images.cuda(), labels.cuda()
                    loss = criterion(images, student(images), labels)
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
        """,
        files={
            "losses.py": """
                import torch.nn.functional as F
                from torch import nn


                class SoftTargetLoss(nn.Module):
                    def __init__(self, teacher, temperature):
                        super().__init__()
                        self.teacher = teacher
                        self.temperature = temperature

                    def forward(self, images, student_logits, labels):
                        soft_targets = F.softmax(self.teacher(images) / self.temperature, dim=-1)
                        distill = F.kl_div(F.log_softmax(student_logits / self.temperature, dim=-1), soft_targets, reduction="batchmean")
                        return distill + F.cross_entropy(student_logits, labels)
            """,
        },
        severity=Severity.WARNING,
        at="loss = criterion(images, student(images), labels)",
    ),
    Fires(  # PyTorch 0.3: the test loop after training wraps its batches without `volatile=True`
        """
        import torch
        import torch.nn as nn
        from torch.autograd import Variable

        from data import mnist_loaders

        train_loader, test_loader = mnist_loaders(batch_size=100)
        net = nn.Sequential(nn.Linear(784, 500), nn.ReLU(), nn.Linear(500, 10))
        criterion = nn.CrossEntropyLoss()
        optimizer = torch.optim.Adam(net.parameters(), lr=0.001)

        for epoch in range(5):
            for images, labels in train_loader:
                images = Variable(images.view(-1, 784))
                optimizer.zero_grad()
                loss = criterion(net(images), Variable(labels))
                loss.backward()
                optimizer.step()

        correct = 0
        for images, labels in test_loader:
            images = Variable(images.view(-1, 784))
            _, predicted = torch.max(net(images).data, 1)
            correct += (predicted.cpu() == labels).sum()
        print("accuracy: %d %%" % (100 * correct / len(test_loader.dataset)))
        """,
        fixed="""
        import torch
        import torch.nn as nn
        from torch.autograd import Variable

        from data import mnist_loaders

        train_loader, test_loader = mnist_loaders(batch_size=100)
        net = nn.Sequential(nn.Linear(784, 500), nn.ReLU(), nn.Linear(500, 10))
        criterion = nn.CrossEntropyLoss()
        optimizer = torch.optim.Adam(net.parameters(), lr=0.001)

        for epoch in range(5):
            for images, labels in train_loader:
                images = Variable(images.view(-1, 784))
                optimizer.zero_grad()
                loss = criterion(net(images), Variable(labels))
                loss.backward()
                optimizer.step()

        correct = 0
        for images, labels in test_loader:
            images = Variable(images.view(-1, 784))
            with torch.no_grad():
                _, predicted = torch.max(net(images).data, 1)
            correct += (predicted.cpu() == labels).sum()
        print("accuracy: %d %%" % (100 * correct / len(test_loader.dataset)))
        """,
        unsafe=True,
        at="_, predicted = torch.max(net(images).data, 1)",
    ),
    Fires(  # a decoding loop whatever its name: every caller hands it a tagger switched to eval, with grad on
        """
        import torch

        from tagging.io import read_sentences, write_tags


        def tag_in_batches(tagger, sentences, batch_size=32):
            tags = []
            for start in range(0, len(sentences), batch_size):
                scores = tagger.score(sentences[start:start + batch_size])
                tags.extend(scores.argmax(-1).tolist())
            return tags


        def tag_file(tagger, path, out_path):
            tagger.eval()
            write_tags(out_path, tag_in_batches(tagger, read_sentences(path)))


        def tag_stdin(tagger, lines):
            tagger.eval()
            return tag_in_batches(tagger, [line.split() for line in lines])
        """,
        fixed="""
        import torch

        from tagging.io import read_sentences, write_tags


        @torch.no_grad()
        def tag_in_batches(tagger, sentences, batch_size=32):
            tags = []
            for start in range(0, len(sentences), batch_size):
                scores = tagger.score(sentences[start:start + batch_size])
                tags.extend(scores.argmax(-1).tolist())
            return tags


        def tag_file(tagger, path, out_path):
            tagger.eval()
            write_tags(out_path, tag_in_batches(tagger, read_sentences(path)))


        def tag_stdin(tagger, lines):
            tagger.eval()
            return tag_in_batches(tagger, [line.split() for line in lines])
        """,
        unsafe=True,
        severity=Severity.WARNING,
        at="def tag_in_batches(tagger, sentences, batch_size=32):",
    ),
    Fires(  # the networks live in a dict: switching each entry to eval says the dict holds modules
        """
        import torch


        class GanTrainer:
            def __init__(self, nets, optimizers, loaders, criterion):
                self.nets = nets
                self.optimizers = optimizers
                self.loaders = loaders
                self.criterion = criterion

            def _step(self, batch):
                noise, real = batch
                fake = self.nets["generator"](noise)
                loss = self.criterion(self.nets["critic"](fake), torch.ones(len(real)))
                self.optimizers["generator"].zero_grad()
                loss.backward()
                self.optimizers["generator"].step()

            def _valid_step(self, batch):
                noise, real = batch
                fake = self.nets["generator"](noise)
                return self.criterion(self.nets["critic"](fake), torch.ones(len(real))).item()

            def _valid_epoch(self):
                for name in self.nets:
                    self.nets[name].eval()
                total = 0.0
                for batch in self.loaders["valid"]:
                    total += self._valid_step(batch)
                for name in self.nets:
                    self.nets[name].train()
                return total

            def run(self, epochs):
                for epoch in range(epochs):
                    for batch in self.loaders["train"]:
                        self._step(batch)
                    print(epoch, self._valid_epoch())
        """,
        fixed="""
        import torch


        class GanTrainer:
            def __init__(self, nets, optimizers, loaders, criterion):
                self.nets = nets
                self.optimizers = optimizers
                self.loaders = loaders
                self.criterion = criterion

            def _step(self, batch):
                noise, real = batch
                fake = self.nets["generator"](noise)
                loss = self.criterion(self.nets["critic"](fake), torch.ones(len(real)))
                self.optimizers["generator"].zero_grad()
                loss.backward()
                self.optimizers["generator"].step()

            def _valid_step(self, batch):
                noise, real = batch
                fake = self.nets["generator"](noise)
                return self.criterion(self.nets["critic"](fake), torch.ones(len(real))).item()

            @torch.no_grad()
            def _valid_epoch(self):
                for name in self.nets:
                    self.nets[name].eval()
                total = 0.0
                for batch in self.loaders["valid"]:
                    total += self._valid_step(batch)
                for name in self.nets:
                    self.nets[name].train()
                return total

            def run(self, epochs):
                for epoch in range(epochs):
                    for batch in self.loaders["train"]:
                        self._step(batch)
                    print(epoch, self._valid_epoch())
        """,
        at="def _valid_epoch(self):",
    ),
    Fires(  # the distillation model's forward runs its teacher with grad on; the optimizer holds the student only
        """
        import torch

        from models import DistillationModel, build_backbone


        def train(args, loader):
            model = DistillationModel(build_backbone(args.student), build_backbone(args.teacher, args.teacher_weights)).cuda()
            optimizer = torch.optim.AdamW(model.student.parameters(), lr=args.lr, weight_decay=args.weight_decay)
            for epoch in range(args.epochs):
                for images, labels in loader:
                    loss = model(images.cuda(non_blocking=True), labels.cuda(non_blocking=True))
                    optimizer.zero_grad(set_to_none=True)
                    loss.backward()
                    optimizer.step()
        """,
        files={
            "models.py": """
                import torch
                import torch.nn.functional as F
                import torchvision
                from torch import nn


                def build_backbone(name, weights=None):
                    net = getattr(torchvision.models, name)(num_classes=100)
                    if weights is not None:
                        net.load_state_dict(torch.load(weights, map_location="cpu"))
                    return net


                class DistillationModel(nn.Module):
                    def __init__(self, student, teacher, temperature=4.0, alpha=0.9):
                        super().__init__()
                        self.student = student
                        self.teacher = teacher
                        self.teacher.eval()
                        self.temperature = temperature
                        self.alpha = alpha

                    def forward(self, images, labels):
                        logits = self.student(images)
                        teacher_logits = self.teacher(images)
                        soft = F.kl_div(
                            F.log_softmax(logits / self.temperature, dim=-1),
                            F.softmax(teacher_logits / self.temperature, dim=-1),
                            reduction="batchmean",
                        )
                        return self.alpha * soft * self.temperature**2 + (1 - self.alpha) * F.cross_entropy(logits, labels)
            """,
        },
        severity=Severity.WARNING,
        at="loss = model(images.cuda(non_blocking=True), labels.cuda(non_blocking=True))",
    ),
    Fires(  # a preference trainer's loss method hands its reference model to a helper, with grad on
        """
        import torch
        import torch.nn.functional as F
        from transformers import AutoModelForCausalLM


        def sequence_logps(model, input_ids, attention_mask):
            logits = model(input_ids, attention_mask=attention_mask).logits[:, :-1]
            logps = torch.gather(logits.log_softmax(-1), 2, input_ids[:, 1:].unsqueeze(2)).squeeze(2)
            return (logps * attention_mask[:, 1:]).sum(-1)


        class PreferenceTrainer:
            def __init__(self, config):
                self.policy = AutoModelForCausalLM.from_pretrained(config.model_name)
                self.policy.train()
                self.reference = AutoModelForCausalLM.from_pretrained(config.model_name)
                self.optimizer = torch.optim.AdamW(self.policy.parameters(), lr=config.lr)
                self.beta = config.beta

            def compute_loss(self, batch):
                chosen = sequence_logps(self.policy, batch["chosen_ids"], batch["chosen_mask"])
                rejected = sequence_logps(self.policy, batch["rejected_ids"], batch["rejected_mask"])
                ref_chosen = sequence_logps(self.reference, batch["chosen_ids"], batch["chosen_mask"])
                ref_rejected = sequence_logps(self.reference, batch["rejected_ids"], batch["rejected_mask"])
                margin = (chosen - ref_chosen) - (rejected - ref_rejected)
                return -F.logsigmoid(self.beta * margin).mean()

            def train(self, loader):
                for batch in loader:
                    loss = self.compute_loss(batch)
                    self.optimizer.zero_grad()
                    loss.backward()
                    self.optimizer.step()
        """,
        severity=Severity.WARNING,
        at="loss = self.compute_loss(batch)",
    ),
    Fires(  # the text encoder `from_pretrained` gives back in eval mode runs in the helper; the optimizer's settings come from args
        """
        import torch
        import torch.nn.functional as F
        from diffusers import DDPMScheduler, UNet2DConditionModel
        from transformers import CLIPTextModel, CLIPTokenizer


        def encode_prompt(text_encoder, tokenizer, prompts):
            ids = tokenizer(prompts, padding="max_length", max_length=tokenizer.model_max_length, truncation=True, return_tensors="pt").input_ids
            return text_encoder(ids.to(text_encoder.device))[0]


        def main(args, loader):
            tokenizer = CLIPTokenizer.from_pretrained(args.pretrained, subfolder="tokenizer")
            text_encoder = CLIPTextModel.from_pretrained(args.pretrained, subfolder="text_encoder").cuda()
            unet = UNet2DConditionModel.from_pretrained(args.pretrained, subfolder="unet").cuda()
            unet.train()
            scheduler = DDPMScheduler.from_pretrained(args.pretrained, subfolder="scheduler")
            optimizer = torch.optim.AdamW(unet.parameters(), lr=args.learning_rate, weight_decay=args.adam_weight_decay)
            for batch in loader:
                latents = batch["latents"].cuda()
                noise = torch.randn_like(latents)
                timesteps = torch.randint(0, scheduler.config.num_train_timesteps, (latents.shape[0],), device=latents.device)
                states = encode_prompt(text_encoder, tokenizer, batch["captions"])
                prediction = unet(scheduler.add_noise(latents, noise, timesteps), timesteps, states).sample
                loss = F.mse_loss(prediction.float(), noise.float())
                loss.backward()
                optimizer.step()
                optimizer.zero_grad()
        """,
        severity=Severity.WARNING,
        at='states = encode_prompt(text_encoder, tokenizer, batch["captions"])',
    ),
    Fires(  # a sample grid logged to Weights & Biases every few hundred steps: wandb.Image detaches it, nothing else reads it
        """
        import torch
        import torch.nn.functional as F
        import wandb

        from networks import Discriminator, Generator


        def train(cfg, loader):
            netG, netD = Generator(cfg.nz).cuda(), Discriminator().cuda()
            optG = torch.optim.Adam(netG.parameters(), lr=cfg.lr, betas=(0.5, 0.999))
            optD = torch.optim.Adam(netD.parameters(), lr=cfg.lr, betas=(0.5, 0.999))
            fixed_noise = torch.randn(64, cfg.nz, device="cuda")
            step = 0
            for epoch in range(cfg.epochs):
                for real, _ in loader:
                    real = real.cuda()
                    fake = netG(torch.randn(real.size(0), cfg.nz, device="cuda"))
                    lossD = F.softplus(-netD(real)).mean() + F.softplus(netD(fake.detach())).mean()
                    optD.zero_grad()
                    lossD.backward()
                    optD.step()
                    lossG = F.softplus(-netD(fake)).mean()
                    optG.zero_grad()
                    lossG.backward()
                    optG.step()
                    if step % cfg.sample_every == 0:
                        wandb.log({"samples": wandb.Image(netG(fixed_noise)), "lossD": lossD.item()}, step=step)
                    step += 1
        """,
        fixed="""
        import torch
        import torch.nn.functional as F
        import wandb

        from networks import Discriminator, Generator


        def train(cfg, loader):
            netG, netD = Generator(cfg.nz).cuda(), Discriminator().cuda()
            optG = torch.optim.Adam(netG.parameters(), lr=cfg.lr, betas=(0.5, 0.999))
            optD = torch.optim.Adam(netD.parameters(), lr=cfg.lr, betas=(0.5, 0.999))
            fixed_noise = torch.randn(64, cfg.nz, device="cuda")
            step = 0
            for epoch in range(cfg.epochs):
                for real, _ in loader:
                    real = real.cuda()
                    fake = netG(torch.randn(real.size(0), cfg.nz, device="cuda"))
                    lossD = F.softplus(-netD(real)).mean() + F.softplus(netD(fake.detach())).mean()
                    optD.zero_grad()
                    lossD.backward()
                    optD.step()
                    lossG = F.softplus(-netD(fake)).mean()
                    optG.zero_grad()
                    lossG.backward()
                    optG.step()
                    if step % cfg.sample_every == 0:
                        with torch.no_grad():
                            wandb.log({"samples": wandb.Image(netG(fixed_noise)), "lossD": lossD.item()}, step=step)
                    step += 1
        """,
        files={
            "networks.py": """
                from torch import nn


                class Generator(nn.Module):
                    def __init__(self, nz):
                        super().__init__()
                        self.main = nn.Sequential(nn.Linear(nz, 1024), nn.ReLU(True), nn.Linear(1024, 3 * 32 * 32), nn.Tanh())

                    def forward(self, z):
                        return self.main(z).view(-1, 3, 32, 32)


                class Discriminator(nn.Module):
                    def __init__(self):
                        super().__init__()
                        self.main = nn.Sequential(nn.Flatten(), nn.Linear(3 * 32 * 32, 512), nn.LeakyReLU(0.2), nn.Linear(512, 1))

                    def forward(self, x):
                        return self.main(x)
            """,
        },
        at='wandb.log({"samples": wandb.Image(netG(fixed_noise)), "lossD": lossD.item()}, step=step)',
        unsafe=True,
    ),
    Fires(  # a LoRA script encodes each batch's prompts with the pipeline's method: the text encoder records a graph
        """
        import torch
        import torch.nn.functional as F
        from diffusers import DDPMScheduler, StableDiffusionPipeline


        def train_lora(args, loader):
            pipe = StableDiffusionPipeline.from_pretrained(args.pretrained_model, torch_dtype=torch.float32).to("cuda")
            vae = pipe.vae
            vae.requires_grad_(False)
            pipe.unet.train()
            noise_scheduler = DDPMScheduler.from_config(pipe.scheduler.config)
            optimizer = torch.optim.AdamW(filter(lambda p: p.requires_grad, pipe.unet.parameters()), lr=args.learning_rate)
            for batch in loader:
                latents = vae.encode(batch["pixel_values"].to("cuda")).latent_dist.sample() * vae.config.scaling_factor
                noise = torch.randn_like(latents)
                timesteps = torch.randint(0, noise_scheduler.config.num_train_timesteps, (latents.shape[0],), device="cuda")
                prompt_embeds, _ = pipe.encode_prompt(batch["prompts"], "cuda", 1, False)
                model_pred = pipe.unet(noise_scheduler.add_noise(latents, noise, timesteps), timesteps, prompt_embeds).sample
                loss = F.mse_loss(model_pred.float(), noise.float())
                loss.backward()
                optimizer.step()
                optimizer.zero_grad()
        """,
        severity=Severity.WARNING,
        at='prompt_embeds, _ = pipe.encode_prompt(batch["prompts"], "cuda", 1, False)',
    ),
    Fires(  # a pipeline stage runs its trainer object's predict over a document's batches; only other files call it
        """
        from pipeline.base import Stage
        from tagger.data import batches_of
        from tagger.trainer import Trainer


        class TaggingStage(Stage):
            def _set_up(self, config):
                self._trainer = Trainer(config["model_path"], device=config["device"])

            def process(self, document):
                tags = []
                for batch in batches_of(document, self.config["batch_size"]):
                    tags += self.trainer.predict(batch)
                document.set_tags(tags)
                return document
        """,
        files={
            "tagger/trainer.py": """
                import torch

                from tagger.model import Tagger


                class Trainer:
                    def __init__(self, model_file, device="cpu"):
                        checkpoint = torch.load(model_file, map_location="cpu")
                        self.vocab = checkpoint["vocab"]
                        self.model = Tagger(len(self.vocab), checkpoint["hidden"]).to(device)
                        self.model.load_state_dict(checkpoint["model"])
                        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=1e-3)

                    def update(self, batch):
                        self.model.train()
                        loss = self.model.loss(batch["words"], batch["tags"])
                        loss.backward()
                        self.optimizer.step()
                        self.optimizer.zero_grad()
                        return loss.item()

                    def predict(self, batch):
                        self.model.eval()
                        scores = self.model(batch["words"], batch["chars"])
                        return [self.vocab.unmap(row) for row in scores.argmax(-1).tolist()]
            """,
            "tagger/model.py": """
                import torch.nn as nn
                import torch.nn.functional as F


                class Tagger(nn.Module):
                    def __init__(self, n_tags, hidden):
                        super().__init__()
                        self.embed = nn.EmbeddingBag(50000, hidden)
                        self.drop = nn.Dropout(0.3)
                        self.out = nn.Linear(hidden, n_tags)

                    def forward(self, words, chars):
                        return self.out(self.drop(self.embed(words)))

                    def loss(self, words, tags):
                        return F.cross_entropy(self(words, None), tags)
            """,
            "pipeline/base.py": """
                class Stage:
                    def __init__(self, config):
                        self.config = config
                        self._trainer = None
                        self._set_up(config)

                    def _set_up(self, config):
                        raise NotImplementedError

                    @property
                    def trainer(self):
                        return self._trainer
            """,
        },
        severity=Severity.NOTE,
        at="tags += self.trainer.predict(batch)",
    ),
    Fires(  # the same stage, run by a script's module level in another file: grad is on there
        """
        from pipeline.base import Stage
        from tagger.data import batches_of
        from tagger.trainer import Trainer


        class TaggingStage(Stage):
            def _set_up(self, config):
                self._trainer = Trainer(config["model_path"], device=config["device"])

            def process(self, document):
                tags = []
                for batch in batches_of(document, self.config["batch_size"]):
                    tags += self.trainer.predict(batch)
                document.set_tags(tags)
                return document
        """,
        files={
            "tagger/trainer.py": """
                import torch

                from tagger.model import Tagger


                class Trainer:
                    def __init__(self, model_file, device="cpu"):
                        checkpoint = torch.load(model_file, map_location="cpu")
                        self.vocab = checkpoint["vocab"]
                        self.model = Tagger(len(self.vocab), checkpoint["hidden"]).to(device)
                        self.model.load_state_dict(checkpoint["model"])
                        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=1e-3)

                    def update(self, batch):
                        self.model.train()
                        loss = self.model.loss(batch["words"], batch["tags"])
                        loss.backward()
                        self.optimizer.step()
                        self.optimizer.zero_grad()
                        return loss.item()

                    def predict(self, batch):
                        self.model.eval()
                        scores = self.model(batch["words"], batch["chars"])
                        return [self.vocab.unmap(row) for row in scores.argmax(-1).tolist()]
            """,
            "tagger/model.py": """
                import torch.nn as nn
                import torch.nn.functional as F


                class Tagger(nn.Module):
                    def __init__(self, n_tags, hidden):
                        super().__init__()
                        self.embed = nn.EmbeddingBag(50000, hidden)
                        self.drop = nn.Dropout(0.3)
                        self.out = nn.Linear(hidden, n_tags)

                    def forward(self, words, chars):
                        return self.out(self.drop(self.embed(words)))

                    def loss(self, words, tags):
                        return F.cross_entropy(self(words, None), tags)
            """,
            "pipeline/base.py": """
                class Stage:
                    def __init__(self, config):
                        self.config = config
                        self._trainer = None
                        self._set_up(config)

                    def _set_up(self, config):
                        raise NotImplementedError

                    @property
                    def trainer(self):
                        return self._trainer
            """,
            "annotate.py": """
                import json
                import sys

                from train import TaggingStage

                stage = TaggingStage(json.load(open(sys.argv[1])))
                for line in open(sys.argv[2]):
                    print(stage.process(json.loads(line)))
            """,
        },
        severity=Severity.WARNING,
        at="tags += self.trainer.predict(batch)",
    ),
    Fires(  # a predictor's pass that this file runs under inference_mode(), called by a trainer's validation in another file
        """
        import torch


        class VolumePredictor:
            def __init__(self, network, patch_size, device="cuda"):
                self.network = network
                self.patch_size = patch_size
                self.device = device

            def _windows(self, shape):
                step = self.patch_size // 2
                return [
                    (slice(None), slice(y, y + self.patch_size), slice(x, x + self.patch_size))
                    for y in range(0, shape[1] - self.patch_size + 1, step)
                    for x in range(0, shape[2] - self.patch_size + 1, step)
                ]

            def predict_volume_logits(self, volume, n_classes):
                self.network.eval()
                logits = torch.zeros((n_classes, *volume.shape[1:]), device=self.device)
                for window in self._windows(volume.shape):
                    logits[window] += self.network(volume[window][None].to(self.device))[0]
                return logits

            @torch.inference_mode()
            def predict_files(self, volumes, n_classes):
                return [self.predict_volume_logits(volume, n_classes).argmax(0).cpu() for volume in volumes]
        """,
        files={
            "segtrain/trainer.py": """
                import numpy as np
                import torch

                from segtrain.network import build_unet
                from train import VolumePredictor


                class SegmentationTrainer:
                    def __init__(self, config):
                        self.config = config
                        self.network = build_unet(config["channels"], config["classes"]).cuda()
                        self.optimizer = torch.optim.SGD(self.network.parameters(), lr=config["lr"], momentum=0.99)

                    def run_final_validation(self, cases, out_dir):
                        predictor = VolumePredictor(self.network, self.config["patch_size"])
                        for name, volume in cases:
                            logits = predictor.predict_volume_logits(volume, self.config["classes"])
                            np.save(f"{out_dir}/{name}.npy", logits.argmax(0).cpu().numpy())
            """,
        },
        severity=Severity.NOTE,
        at="def predict_volume_logits(self, volume, n_classes):",
        fixed="""
        import torch


        class VolumePredictor:
            def __init__(self, network, patch_size, device="cuda"):
                self.network = network
                self.patch_size = patch_size
                self.device = device

            def _windows(self, shape):
                step = self.patch_size // 2
                return [
                    (slice(None), slice(y, y + self.patch_size), slice(x, x + self.patch_size))
                    for y in range(0, shape[1] - self.patch_size + 1, step)
                    for x in range(0, shape[2] - self.patch_size + 1, step)
                ]

            @torch.no_grad()
            def predict_volume_logits(self, volume, n_classes):
                self.network.eval()
                logits = torch.zeros((n_classes, *volume.shape[1:]), device=self.device)
                for window in self._windows(volume.shape):
                    logits[window] += self.network(volume[window][None].to(self.device))[0]
                return logits

            @torch.inference_mode()
            def predict_files(self, volumes, n_classes):
                return [self.predict_volume_logits(volume, n_classes).argmax(0).cpu() for volume in volumes]
        """,
        unsafe=True,
    ),
    Fires(  # the same pass, called by a script's module-level loop in another file: grad is on there
        """
        import torch


        class VolumePredictor:
            def __init__(self, network, patch_size, device="cuda"):
                self.network = network
                self.patch_size = patch_size
                self.device = device

            def _windows(self, shape):
                step = self.patch_size // 2
                return [
                    (slice(None), slice(y, y + self.patch_size), slice(x, x + self.patch_size))
                    for y in range(0, shape[1] - self.patch_size + 1, step)
                    for x in range(0, shape[2] - self.patch_size + 1, step)
                ]

            def predict_volume_logits(self, volume, n_classes):
                self.network.eval()
                logits = torch.zeros((n_classes, *volume.shape[1:]), device=self.device)
                for window in self._windows(volume.shape):
                    logits[window] += self.network(volume[window][None].to(self.device))[0]
                return logits

            @torch.inference_mode()
            def predict_files(self, volumes, n_classes):
                return [self.predict_volume_logits(volume, n_classes).argmax(0).cpu() for volume in volumes]
        """,
        files={
            "export.py": """
                import sys

                import numpy as np
                import torch

                from segtrain.network import build_unet
                from train import VolumePredictor

                network = build_unet(1, 4)
                network.load_state_dict(torch.load(sys.argv[1], map_location="cpu"))
                predictor = VolumePredictor(network.cuda(), 128)
                for path in sys.argv[2:]:
                    logits = predictor.predict_volume_logits(torch.from_numpy(np.load(path)), 4)
                    np.save(path.replace(".npy", "_seg.npy"), logits.argmax(0).cpu().numpy())
            """,
        },
        severity=Severity.WARNING,
        at="def predict_volume_logits(self, volume, n_classes):",
        fixed="""
        import torch


        class VolumePredictor:
            def __init__(self, network, patch_size, device="cuda"):
                self.network = network
                self.patch_size = patch_size
                self.device = device

            def _windows(self, shape):
                step = self.patch_size // 2
                return [
                    (slice(None), slice(y, y + self.patch_size), slice(x, x + self.patch_size))
                    for y in range(0, shape[1] - self.patch_size + 1, step)
                    for x in range(0, shape[2] - self.patch_size + 1, step)
                ]

            @torch.no_grad()
            def predict_volume_logits(self, volume, n_classes):
                self.network.eval()
                logits = torch.zeros((n_classes, *volume.shape[1:]), device=self.device)
                for window in self._windows(volume.shape):
                    logits[window] += self.network(volume[window][None].to(self.device))[0]
                return logits

            @torch.inference_mode()
            def predict_files(self, volumes, n_classes):
                return [self.predict_volume_logits(volume, n_classes).argmax(0).cpu() for volume in volumes]
        """,
        unsafe=True,
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
        scores = net(image)
        label = scores.softmax(1).argmax(1).item()
        print(f"{sys.argv[2]}: class {label}")
        """,
        fixed="""
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
        label = scores.softmax(1).argmax(1).item()
        print(f"{sys.argv[2]}: class {label}")
        """,
        unsafe=True,
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
    Fires(  # an evaluation helper no call in view runs: grad is its callers' to decide, a note whatever its name
        """
        import torch


        def evaluate(model, loader, device):
            correct = total = 0
            for images, labels in loader:
                outputs = model(images.to(device))
                correct += (outputs.argmax(1) == labels.to(device)).sum().item()
                total += labels.size(0)
            return correct / total
        """,
        fixed="""
        import torch


        @torch.no_grad()
        def evaluate(model, loader, device):
            correct = total = 0
            for images, labels in loader:
                outputs = model(images.to(device))
                correct += (outputs.argmax(1) == labels.to(device)).sum().item()
                total += labels.size(0)
            return correct / total
        """,
        severity=Severity.NOTE,
    ),
    Fires(  # a library's detector run by a script's module level: its call may turn grad off itself, so a note
        """
        import torch
        from controlnet_aux import HEDdetector
        from PIL import Image

        hed = HEDdetector.from_pretrained("lllyasviel/Annotators")
        edges = hed(Image.open("input.jpg"), detect_resolution=512)
        edges.save("edges.jpg")
        """,
        fixed="""
        import torch
        from controlnet_aux import HEDdetector
        from PIL import Image

        hed = HEDdetector.from_pretrained("lllyasviel/Annotators")
        with torch.no_grad():
            edges = hed(Image.open("input.jpg"), detect_resolution=512)
        edges.save("edges.jpg")
        """,
        unsafe=True,
        severity=Severity.NOTE,
    ),
    Fires(  # a function that switches the model it runs to eval mode and scores a loop of batches: an evaluation by what
        # it does, whatever it is called; the training function calls it with grad on
        """
        import torch
        import torch.nn.functional as F

        from nets import ConvNet


        def score(net, batches, loss_fn):
            net.eval()
            total, hits = 0.0, 0
            for inputs, targets in batches:
                outputs = net(inputs)
                total += loss_fn(outputs, targets).item()
                hits += (outputs.argmax(1) == targets).sum().item()
            net.train()
            return total / len(batches), hits


        def fit(net, batches, held_out, rounds):
            opt = torch.optim.SGD(net.parameters(), lr=0.1)
            for _ in range(rounds):
                for inputs, targets in batches:
                    opt.zero_grad()
                    F.cross_entropy(net(inputs), targets).backward()
                    opt.step()
                print(score(net, held_out, F.cross_entropy))


        fit(ConvNet(), train_batches, dev_batches, 5)
        """,
        fixed="""
        import torch
        import torch.nn.functional as F

        from nets import ConvNet


        @torch.no_grad()
        def score(net, batches, loss_fn):
            net.eval()
            total, hits = 0.0, 0
            for inputs, targets in batches:
                outputs = net(inputs)
                total += loss_fn(outputs, targets).item()
                hits += (outputs.argmax(1) == targets).sum().item()
            net.train()
            return total / len(batches), hits


        def fit(net, batches, held_out, rounds):
            opt = torch.optim.SGD(net.parameters(), lr=0.1)
            for _ in range(rounds):
                for inputs, targets in batches:
                    opt.zero_grad()
                    F.cross_entropy(net(inputs), targets).backward()
                    opt.step()
                print(score(net, held_out, F.cross_entropy))


        fit(ConvNet(), train_batches, dev_batches, 5)
        """,
        files={
            "nets.py": """
            from torch import nn


            class ConvNet(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.body = nn.Sequential(nn.Conv2d(3, 8, 3), nn.ReLU(), nn.Flatten(), nn.LazyLinear(10))

                def forward(self, x):
                    return self.body(x)
            """,
        },
        at="def score(net, batches, loss_fn):",
    ),
    Fires(  # the same pass with no caller in view: it switches the model itself, runs it over a loop and returns no
        # graph, evidence enough for a warning
        """
        import torch


        def score(net, batches, loss_fn):
            net.eval()
            total, hits = 0.0, 0
            for inputs, targets in batches:
                outputs = net(inputs)
                total += loss_fn(outputs, targets).item()
                hits += (outputs.argmax(1) == targets).sum().item()
            net.train()
            return total / len(batches), hits
        """,
        fixed="""
        import torch


        @torch.no_grad()
        def score(net, batches, loss_fn):
            net.eval()
            total, hits = 0.0, 0
            for inputs, targets in batches:
                outputs = net(inputs)
                total += loss_fn(outputs, targets).item()
                hits += (outputs.argmax(1) == targets).sum().item()
            net.train()
            return total / len(batches), hits
        """,
        severity=Severity.WARNING,
    ),
    Fires(  # a rollout helper calls what every caller hands it, a model: a forward, whatever the parameter is called
        """
        import torch

        from nets import ConvNet


        def collect(env, pick, steps):
            state = env.reset()
            memory = []
            for _ in range(steps):
                choice = pick(torch.as_tensor(state, dtype=torch.float32)).argmax().item()
                state, reward, done = env.step(choice)
                memory.append((state, choice, reward))
            return memory


        def fit(env, rounds):
            agent = ConvNet()
            opt = torch.optim.Adam(agent.parameters(), lr=1e-3)
            for _ in range(rounds):
                memory = collect(env, agent, 200)
                opt.zero_grad()
                agent.loss(memory).backward()
                opt.step()
        """,
        fixed="""
        import torch

        from nets import ConvNet


        def collect(env, pick, steps):
            state = env.reset()
            memory = []
            for _ in range(steps):
                with torch.no_grad():
                    choice = pick(torch.as_tensor(state, dtype=torch.float32)).argmax().item()
                state, reward, done = env.step(choice)
                memory.append((state, choice, reward))
            return memory


        def fit(env, rounds):
            agent = ConvNet()
            opt = torch.optim.Adam(agent.parameters(), lr=1e-3)
            for _ in range(rounds):
                memory = collect(env, agent, 200)
                opt.zero_grad()
                agent.loss(memory).backward()
                opt.step()
        """,
        files={
            "nets.py": """
            from torch import nn


            class ConvNet(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.body = nn.Sequential(nn.Conv2d(3, 8, 3), nn.ReLU(), nn.Flatten(), nn.LazyLinear(10))

                def forward(self, x):
                    return self.body(x)
            """,
        },
        unsafe=True,
        at="choice = pick(torch.as_tensor(state, dtype=torch.float32)).argmax().item()",
    ),
    Fires(  # the encoder a loader fills into a module-level placeholder; the helper's one caller here is itself left to
        # other files, one of which runs it from its module level
        _SPEAKER_EMBEDDER,
        fixed=_SPEAKER_EMBEDDER.replace(
            "    return _encoder(x).cpu().numpy()", "    with torch.no_grad():\n            return _encoder(x).cpu().numpy()"
        ),
        files=_SPEAKER_FILES,
        unsafe=True,
        at="return _encoder(x).cpu().numpy()",
    ),
    Fires(  # the network a lazy `load()` builds where `__init__` left `None`, run by a script's module level elsewhere
        _VOCODER,
        fixed=_VOCODER.replace(
            "        wave = self._net(", "        with torch.no_grad():\n                wave = self._net("
        ),
        files=_VOCODER_FILES,
        unsafe=True,
        at="wave = self._net(torch.as_tensor(mel).unsqueeze(0))",
    ),
    Fires(  # the trained generator's layers, run one by one at a script's module level, the images saved
        _LATENT_WALK,
        fixed=_LATENT_WALK.replace("    codes = ", "    with torch.no_grad():\n        codes = ").replace(
            "    images = ", "    with torch.no_grad():\n        images = "
        ),
        files=_STYLE_NETS,
        unsafe=True,
        count=2,
    ),
)

GradEnabledEval.MUST_NOT_FIRE = (
    Quiet(  # the loader returns the model and its image transform on either path; the transform is called on every image, not the model
        """
        import os

        from PIL import Image

        import vision

        model, preprocess = vision.load("weights/encoder.pt")
        model.cuda().eval()
        images = []
        for filename in sorted(os.listdir("pictures")):
            images.append(preprocess(Image.open(os.path.join("pictures", filename)).convert("RGB")))
        print(len(images))
        """,
        files={"vision/__init__.py": "from .loading import load\n", "vision/loading.py": """
            import torch
            import torch.nn as nn
            from torchvision.transforms import CenterCrop, Compose, Normalize, Resize, ToTensor


            class ImageEncoder(nn.Module):
                def __init__(self, width=512):
                    super().__init__()
                    self.input_resolution = 224
                    self.proj = nn.Linear(3 * 224 * 224, width)

                def forward(self, images):
                    return self.proj(images.flatten(1))


            def _transform(size):
                return Compose([Resize(size), CenterCrop(size), ToTensor(), Normalize((0.5, 0.5, 0.5), (0.25, 0.25, 0.25))])


            def load(path, jit=False):
                if jit:
                    model = torch.jit.load(path).eval()
                    return model, _transform(model.input_resolution)
                model = ImageEncoder()
                model.load_state_dict(torch.load(path, map_location="cpu"))
                return model, _transform(model.input_resolution)
            """},
    ),
    Quiet(  # twin: the embedding helper turns grad off itself
        _SPEAKER_EMBEDDER.replace("    def _embed_frames(", "    @torch.no_grad()\n    def _embed_frames("),
        files=_SPEAKER_FILES,
    ),
    Quiet(  # twin: the module-level placeholder filled by a set-up function is the model a training step backwards through
        """
        import torch
        import torch.nn.functional as F

        from nets import SpeakerNet

        _encoder = None
        _optimizer = None


        def setup(lr):
            global _encoder, _optimizer
            _encoder = SpeakerNet()
            _optimizer = torch.optim.Adam(_encoder.parameters(), lr=lr)


        def train_step(frames, targets):
            loss = F.mse_loss(_encoder(torch.from_numpy(frames)), targets)
            _optimizer.zero_grad()
            loss.backward()
            _optimizer.step()
            return loss.item()
        """,
        files=_SPEAKER_FILES,
    ),
    Quiet(  # twin: the vocoder renders under inference_mode()
        _VOCODER.replace("    def render(", "    @torch.inference_mode()\n        def render("),
        files=_VOCODER_FILES,
    ),
    Quiet(  # twin: the generator's layers run one by one in training: the loss backwards through both
        """
        import torch

        from nets import StyleGenerator

        generator = StyleGenerator(256)
        opt = torch.optim.Adam(generator.parameters(), lr=2e-4)
        for target in torch.load("targets.pt"):
            codes = generator.mapping(torch.randn(target.size(0), 256))
            loss = (generator.synthesis(codes) - target).abs().mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        """,
        files=_STYLE_NETS,
    ),
    Quiet(  # twin: the script scores its trials under `no_grad()`
        _VERIFIER.format(decorator=""),
        files={"verify_trials.py": _TRIALS_SCRIPT.format(trials="    with torch.no_grad():\n    " + _TRIALS_LOOP.replace("\n", "\n    "))},
    ),
    Quiet(  # twin: `act` turns grad off itself
        _AGENT.format(decorator="        @torch.no_grad()\n"),
        files=_COLLECTOR,
    ),
    Quiet(  # twin: the sampled action's log-probability leaves with the graph, for the policy-gradient update
        _SAMPLING_AGENT,
        files=_COLLECTOR,
    ),
    Quiet(  # twin: a model's method that hands back its logits with the labels, used by a training script
        """
        import torch.nn as nn


        class Classifier(nn.Module):
            def __init__(self, n_features, n_classes):
                super().__init__()
                self.head = nn.Linear(n_features, n_classes)

            def forward(self, x):
                return self.head(x)

            def logits_and_labels(self, x):
                logits = self(x)
                return logits, logits.argmax(dim=1)
        """,
        files={"fit.py": """
            import torch
            import torch.nn.functional as F

            from train import Classifier

            model = Classifier(32, 4)
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            for features, labels in torch.load("batches.pt"):
                logits, _ = model.logits_and_labels(features)
                loss = F.cross_entropy(logits, labels)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
        """},
    ),
    Quiet(  # twin: the script extracts under `no_grad()`
        _FRAME_EMBEDDER.format(run=_FRAME_EMBED_RUN),
        files={"extract.py": _EXTRACT_SCRIPT.format(extract="    with torch.no_grad():\n    " + _EXTRACT_LOOP.replace("\n", "\n    "))},
    ),
    Quiet(  # twin: the window pass turns grad off itself
        _WINDOW_PREDICTOR.format(decorator="    @torch.inference_mode()\n"),
        files={"trainer.py": _WINDOW_TRAINER, "run_training.py": _WINDOW_RUN.format(validation=_WINDOW_VALIDATION)},
    ),
    Quiet(  # twin: the model is built with fresh weights and nothing loads any: a demo of the loop, not a trained model's pass
        _SAMPLE_SCRIPT.format(built="", generate=_SAMPLE_STEP),
        files=_UNTRAINED_LM,
    ),
    Quiet(  # twin: the generation step's forward runs under `no_grad()` too
        _SAMPLE_SCRIPT.format(built='"lm.pt"', generate=_SAMPLE_STEP_NO_GRAD),
        files=_SELF_LOADING_LM,
    ),
    Quiet(  # twin: the script freezes the model as a whole (`requires_grad_(False)`): its forwards record no graph
        _SAMPLE_SCRIPT.format(built='"lm.pt"', generate=_SAMPLE_STEP).replace(
            '    model = RecurrentLM("lm.pt")', '    model = RecurrentLM("lm.pt")\n    model.requires_grad_(False)'),
        files=_SELF_LOADING_LM,
    ),
    Quiet(  # twin: the forward runs inside the `no_grad()` block
        _TILE_PREDICTOR.format(decorator="", run=_TILE_RUN_AFTER_SWITCH.replace(
            "\n            batch = torch.from_numpy(tile).float().to(self.device)\n            output = self.model(batch)",
            "\n                batch = torch.from_numpy(tile).float().to(self.device)\n                output = self.model(batch)")),
    ),
    Quiet(  # twin: the target encoder runs under `no_grad()`
        _TARGET_ENCODER_MODULE.format(target="        with torch.no_grad():\n    " + _TARGET_RUN),
        files=_TARGET_ENCODER_FILES,
    ),
    Quiet(  # twin: the helper freezes the copy (`requires_grad_(False)`), so its forward records nothing
        _TARGET_ENCODER_MODULE.format(target=_TARGET_RUN).replace("self.target_encoder = momentum_copy(self.online_encoder)", "self.target_encoder = momentum_copy(self.online_encoder)\n        self.target_encoder.requires_grad_(False)"),
        files=_TARGET_ENCODER_FILES,
    ),
    Quiet(  # stop-gradient on one branch only: each encoder output also feeds the predictor, which trains it
        """
        import torch.nn as nn
        import torch.nn.functional as F


        class SiameseStopGrad(nn.Module):
            def __init__(self, encoder, predictor):
                super().__init__()
                self.encoder = encoder
                self.predictor = predictor

            def forward(self, view_one, view_two):
                z_one, z_two = self.encoder(view_one), self.encoder(view_two)
                p_one, p_two = self.predictor(z_one), self.predictor(z_two)
                return -(F.cosine_similarity(p_one, z_two.detach()).mean() + F.cosine_similarity(p_two, z_one.detach()).mean()) / 2
        """,
    ),
    Quiet(  # the trained adapter itself run a second time for a detached norm: a stop-gradient branch, by choice
        """
        import torch
        import torch.nn as nn
        import torch.nn.functional as F


        class NormScaledAdapter(nn.Module):
            def __init__(self, base: nn.Linear, rank=8):
                super().__init__()
                self.base = base
                self.down = nn.Linear(base.in_features, rank, bias=False)
                self.up = nn.Linear(rank, base.out_features, bias=False)
                self.magnitude = nn.Parameter(base.weight.norm(p=2, dim=1))

            def forward(self, x):
                update = self.up(self.down(x))
                eye = torch.eye(self.down.in_features, device=x.device, dtype=x.dtype)
                delta = self.up(self.down(eye)).T
                norm = (self.base.weight + delta.detach()).norm(p=2, dim=1)
                return (self.magnitude / norm) * (self.base(x) + update)
        """,
    ),
    Quiet(  # an agent's acting method beside its update: it trains nothing, and its callers decide how grad stands
        """
        import torch


        class Agent:
            def __init__(self, q_net, lr):
                self.q_net = q_net
                self.optimizer = torch.optim.Adam(q_net.parameters(), lr=lr)

            def act(self, obs):
                values = self.q_net(obs)
                return values.detach().argmax(-1).item()

            def update(self, obs, target):
                loss = (self.q_net(obs).max(-1).values - target).pow(2).mean()
                self.optimizer.zero_grad()
                loss.backward()
                self.optimizer.step()
        """,
    ),
    Quiet(  # twin: the phase is the caller's run-time argument, which may be "train"
        _PHASE_LEARNER.format(monitor_phase="monitor_phase", monitor_loop=_PHASE_MONITOR_LOOP).replace(
            "def fit(self, epochs, batches, monitor):", 'def fit(self, epochs, batches, monitor, monitor_phase="valid"):'
        ),
        files=_PHASE_FILES,
    ),
    Quiet(  # twin: the monitoring pass runs under `no_grad()`
        _PHASE_LEARNER.format(monitor_phase='"valid"', monitor_loop="                    with torch.no_grad():\n    " + _PHASE_MONITOR_LOOP.replace(
            "\n", "\n    ")),
        files=_PHASE_FILES,
    ),
    Quiet(  # twin: the validation call leaves the helper's flag at its default, so it backwards there (a trained pass)
        _FLAG_TRAINER.format(flag="True", decorator=""),
        files=_FLAG_FILES,
    ),
    Quiet(  # twin: the flag is the caller's run-time value, which may train (`backward=self.training_pass`)
        _FLAG_TRAINER.format(flag="self.training_pass", decorator=""),
        files=_FLAG_FILES,
    ),
    Quiet(  # twin: the dev loop with `mode="eval"` runs under `no_grad()`
        _MODE_ENGINE.format(dev_loop=_MODE_DEV_LOOP_WITHOUT_GRAD),
        files=_MODE_FILES,
    ),
    Quiet(  # a forward run for its hooks inside the helper whose returned loss the training loop backwards
        """
        import torch


        class LayerCatcher:
            def __init__(self, layer):
                self.caught = None
                self.handle = layer.register_forward_hook(self._keep)

            def _keep(self, module, inputs, output):
                self.caught = output

            def take(self):
                caught, self.caught = self.caught, None
                return caught


        class ChannelVisualiser:
            def __init__(self, model, layer, channel, size=224):
                self.model = model.eval()
                self.catcher = LayerCatcher(layer)
                self.channel = channel
                self.image = torch.randn(1, 3, size, size, requires_grad=True)

            def objective(self):
                _ignored = self.model(torch.sigmoid(self.image))
                activations = self.catcher.take()
                return -activations[:, self.channel].mean()

            def optimise(self, steps=256, lr=0.05):
                optimizer = torch.optim.Adam([self.image], lr=lr)
                for _ in range(steps):
                    optimizer.zero_grad()
                    loss = self.objective()
                    loss.backward()
                    optimizer.step()
                return torch.sigmoid(self.image).detach()
        """,
        files={
            "visualise.py": """
                import torchvision

                from visualiser import ChannelVisualiser

                model = torchvision.models.googlenet(weights="DEFAULT")
                image = ChannelVisualiser(model, model.inception4a, channel=97).optimise()
                torchvision.utils.save_image(image, "channel97.png")
            """,
        },
    ),
    Quiet(  # twin: `fit` runs the pass under `no_grad()`
        _PAIR_TRAINER.format(call="with torch.no_grad():\n                        scores = self.measure()", decorator=""),
        files=_PAIR_FILES,
    ),
    Quiet(  # a script's module-level warm-up whose output nothing reads: one graph, left alone as in a main()
        """
        import torch

        from model import Classifier

        net = Classifier().cuda()
        net.load_state_dict(torch.load("classifier.pt"))
        net(torch.zeros(1, 3, 224, 224, device="cuda"))
        torch.onnx.export(net, torch.zeros(1, 3, 224, 224, device="cuda"), "classifier.onnx")
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
    Quiet(  # the script's module level goes on to fine-tune the model: the program trains, grad is wanted
        """
        import torch

        from model import Classifier
        from finetune import finetune

        net = Classifier()
        net.load_state_dict(torch.load("classifier.pt"))
        probe = torch.randn(4, 3, 224, 224)
        before = net(probe)
        print(before.argmax(1))
        finetune(net, "data/new_classes")
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
            "finetune.py": """
                import torch
                import torch.nn.functional as F


                def finetune(model, folder, steps=100):
                    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
                    for _ in range(steps):
                        images, labels = torch.randn(8, 3, 224, 224), torch.randint(0, 10, (8,))
                        loss = F.cross_entropy(model(images), labels)
                        optimizer.zero_grad()
                        loss.backward()
                        optimizer.step()
            """,
        },
    ),
    Quiet(  # the fix: the process function disables grad itself, as ignite's create_supervised_evaluator does
        """
        import torch
        from ignite.engine import Engine, Events
        from ignite.metrics import Accuracy

        from model import Net


        def run(train_loader, val_loader, epochs, device):
            model = Net().to(device)
            optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
            criterion = torch.nn.CrossEntropyLoss()

            def train_step(engine, batch):
                model.train()
                x, y = batch[0].to(device), batch[1].to(device)
                optimizer.zero_grad()
                loss = criterion(model(x), y)
                loss.backward()
                optimizer.step()
                return loss.item()

            @torch.no_grad()
            def validation_step(engine, batch):
                model.eval()
                x, y = batch[0].to(device), batch[1].to(device)
                y_pred = model(x)
                return y_pred, y

            trainer = Engine(train_step)
            evaluator = Engine(validation_step)
            Accuracy().attach(evaluator, "accuracy")

            @trainer.on(Events.EPOCH_COMPLETED)
            def log_validation(engine):
                evaluator.run(val_loader)
                print(evaluator.state.metrics["accuracy"])

            trainer.run(train_loader, max_epochs=epochs)
        """,
        files={"model.py": """
        from torch import nn


        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Sequential(nn.Linear(784, 256), nn.Dropout(0.5), nn.Linear(256, 10))

            def forward(self, x):
                return self.fc(x.flatten(1))
        """},
    ),
    Quiet(  # the evaluator runs under no_grad() where the handler calls it
        """
        import torch
        from ignite.engine import Engine, Events
        from ignite.metrics import Accuracy

        from model import Net


        def run(train_loader, val_loader, epochs, device):
            model = Net().to(device)
            optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
            criterion = torch.nn.CrossEntropyLoss()

            def train_step(engine, batch):
                model.train()
                x, y = batch[0].to(device), batch[1].to(device)
                optimizer.zero_grad()
                loss = criterion(model(x), y)
                loss.backward()
                optimizer.step()
                return loss.item()

            def validation_step(engine, batch):
                model.eval()
                x, y = batch[0].to(device), batch[1].to(device)
                y_pred = model(x)
                return y_pred, y

            trainer = Engine(train_step)
            evaluator = Engine(validation_step)
            Accuracy().attach(evaluator, "accuracy")

            @trainer.on(Events.EPOCH_COMPLETED)
            def log_validation(engine):
                with torch.no_grad():
                    evaluator.run(val_loader)
                print(evaluator.state.metrics["accuracy"])

            trainer.run(train_loader, max_epochs=epochs)
        """,
        files={"model.py": """
        from torch import nn


        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Sequential(nn.Linear(784, 256), nn.Dropout(0.5), nn.Linear(256, 10))

            def forward(self, x):
                return self.fc(x.flatten(1))
        """},
    ),
    Quiet(  # PyTorch 0.3: a volatile input records no graph, in every computation made from it
        """
        import torch
        import torch.nn as nn
        from torch.autograd import Variable

        from data import mnist_loaders

        train_loader, test_loader = mnist_loaders(batch_size=100)
        net = nn.Sequential(nn.Linear(784, 500), nn.ReLU(), nn.Linear(500, 10))
        criterion = nn.CrossEntropyLoss()
        optimizer = torch.optim.Adam(net.parameters(), lr=0.001)

        for epoch in range(5):
            for images, labels in train_loader:
                images = Variable(images.view(-1, 784))
                optimizer.zero_grad()
                loss = criterion(net(images), Variable(labels))
                loss.backward()
                optimizer.step()

        correct = 0
        for images, labels in test_loader:
            images = Variable(images.view(-1, 784), volatile=True)
            _, predicted = torch.max(net(images).data, 1)
            correct += (predicted.cpu() == labels).sum()
        print("accuracy: %d %%" % (100 * correct / len(test_loader.dataset)))
        """,
    ),
    Quiet(  # the decoding loop's one caller runs it under no_grad(): the caller chose where grad is off
        """
        import torch


        def logits_in_batches(classifier, inputs, batch_size=64):
            chunks = []
            for start in range(0, len(inputs), batch_size):
                chunks.append(classifier(inputs[start:start + batch_size]))
            return torch.cat(chunks)


        def fit_temperature(classifier, inputs, labels):
            classifier.eval()
            with torch.no_grad():
                logits = logits_in_batches(classifier, inputs)
            temperature = torch.ones(1, requires_grad=True)
            optimizer = torch.optim.LBFGS([temperature], lr=0.01)

            def closure():
                optimizer.zero_grad()
                loss = torch.nn.functional.cross_entropy(logits / temperature, labels)
                loss.backward()
                return loss

            optimizer.step(closure)
            return temperature.item()
        """,
    ),
    Quiet(  # one class of the table is no nn.Module: what the table builds is not known to be a model
        """
        import numpy as np

        from .scorers import BagOfWordsScorer, NeuralScorer

        SCORERS = {"bow": BagOfWordsScorer, "neural": NeuralScorer}


        class Ranker:
            def __init__(self, kind, device="cuda"):
                self.scorer = SCORERS[kind](dim=300)
                self.device = device

            def rank(self, query_batches):
                scores = []
                for queries in query_batches:
                    scores.append(self.scorer(queries.to(self.device)).detach().cpu().numpy())
                return np.concatenate(scores)
        """,
        files={
            "scorers.py": """
                import torch
                import torch.nn as nn


                class BagOfWordsScorer:
                    def __init__(self, dim):
                        self.weights = torch.ones(dim)

                    def __call__(self, queries):
                        return queries.float() @ self.weights


                class NeuralScorer(nn.Module):
                    def __init__(self, dim):
                        super().__init__()
                        self.out = nn.Linear(dim, 1)

                    def forward(self, queries):
                        return self.out(queries.float()).squeeze(-1)
            """,
        },
    ),
    Quiet(  # one of the attributions picked from the table backwards through the output: the graph is used
        """
        import torch

        from .nets import Classifier


        def input_gradients(logits, images):
            logits.max(dim=1).values.sum().backward()
            return images.grad.abs()


        def activation_map(logits, images):
            return logits.softmax(dim=1)[:, :1, None, None].expand_as(images)


        ATTRIBUTIONS = {"gradients": input_gradients, "activations": activation_map}


        class Explainer:
            def __init__(self, weights, method):
                self.model = Classifier()
                self.model.load_state_dict(torch.load(weights))
                self.model.eval()
                self.method = method

            def explain(self, batches):
                attribute = ATTRIBUTIONS[self.method]
                maps = []
                for images in batches:
                    images.requires_grad_(True)
                    logits = self.model(images)
                    maps.append(attribute(logits, images).detach().cpu())
                return maps
        """,
        files={
            "nets.py": """
                import torch.nn as nn


                class Classifier(nn.Module):
                    def __init__(self):
                        super().__init__()
                        self.net = nn.Sequential(nn.Conv2d(3, 8, 3), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 10))

                    def forward(self, images):
                        return self.net(images)
            """,
        },
    ),
    Quiet(  # a benchmark helper typed to take any callable: a compiled function as much as a module, so not a model
        """
        import time
        from typing import Any, Callable, Sequence

        import torch


        def best_of(model: Callable[..., Any], inputs: Sequence[Any], repeats: int = 5) -> float:
            timings = []
            for _ in range(repeats):
                torch.cuda.synchronize()
                start = time.perf_counter()
                model(*inputs)
                torch.cuda.synchronize()
                timings.append(time.perf_counter() - start)
            return min(timings)
        """
    ),
    Quiet(  # a layer built where it runs resamples each mask: a computation, not a trained model's inference
        """
        import torch

        from .layers import MaskResampler


        class InstanceMapper:
            def __init__(self, mask_size):
                self.mask_size = mask_size

            def masks_to_image(self, annotations, image_size):
                for annotation in annotations:
                    mask = annotation["mask"].float()[None, None]
                    resampled = MaskResampler(self.mask_size).forward(mask).squeeze()
                    annotation["segmentation"] = (resampled >= 0.5).numpy()
        """,
        files={
            "layers.py": """
                import torch.nn as nn
                import torch.nn.functional as F


                class MaskResampler(nn.Module):
                    def __init__(self, size):
                        super().__init__()
                        self.size = size

                    def forward(self, masks):
                        return F.interpolate(masks, size=self.size, mode="bilinear", align_corners=True)
            """,
        },
    ),
    Quiet(  # a perceptual loss: the frozen-by-eval network's input is the generator's output, whose graph it must keep
        """
        import torch
        import torch.nn.functional as F

        from models import Student, Teacher


        def train_generator(loader, features_checkpoint):
            features = Teacher()
            features.load_state_dict(torch.load(features_checkpoint))
            features.eval()
            generator = Student()
            optimizer = torch.optim.Adam(generator.parameters(), lr=2e-4)
            for noisy, clean, clean_features in loader:  # the clean images' features, computed once
                restored = generator(noisy)
                loss = F.l1_loss(restored, clean) + F.mse_loss(features(restored), clean_features)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
        """,
        files={
            "models.py": """
                import torch.nn as nn


                class Teacher(nn.Module):
                    def __init__(self):
                        super().__init__()
                        self.net = nn.Sequential(nn.Linear(784, 512), nn.Dropout(0.1), nn.Linear(512, 10))

                    def forward(self, x):
                        return self.net(x.flatten(1))


                class Student(nn.Module):
                    def __init__(self):
                        super().__init__()
                        self.net = nn.Linear(784, 10)

                    def forward(self, x):
                        return self.net(x.flatten(1))
            """,
        },
    ),
    Quiet(  # the model is stepped through the DDP wrapper built from it, evaluated in eval mode by BN's choice
        """
        import torch
        import torch.nn.functional as F
        from torch.nn.parallel import DistributedDataParallel as DDP

        from models import Student


        def finetune(loader, rank):
            model = Student().to(rank)
            ddp_model = DDP(model, device_ids=[rank])
            ddp_model.eval()  # keep the pretrained batch statistics while fine-tuning
            optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
            for images, labels in loader:
                loss = F.cross_entropy(ddp_model(images.to(rank)), labels.to(rank))
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
        """,
        files={
            "models.py": """
                import torch.nn as nn


                class Teacher(nn.Module):
                    def __init__(self):
                        super().__init__()
                        self.net = nn.Sequential(nn.Linear(784, 512), nn.Dropout(0.1), nn.Linear(512, 10))

                    def forward(self, x):
                        return self.net(x.flatten(1))


                class Student(nn.Module):
                    def __init__(self):
                        super().__init__()
                        self.net = nn.Linear(784, 10)

                    def forward(self, x):
                        return self.net(x.flatten(1))
            """,
        },
    ),
    Quiet(  # the optimizer is handed in: which models it steps is the caller's
        """
        import torch.nn.functional as F


        def distill_epoch(teacher, student, loader, optimizer):
            teacher.eval()
            student.train()
            for images, labels in loader:
                loss = F.kl_div(F.log_softmax(student(images), 1), F.softmax(teacher(images), 1), reduction="batchmean")
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
        """
    ),
    Quiet(  # the same encoder, which this file only runs under no_grad(): its author chose where
        """
        import numpy as np
        import torch

        from .modeling import SentenceEncoder


        class RepresentationModel:
            def __init__(self, checkpoint):
                self.model = SentenceEncoder(vocab_size=30522, hidden=768)
                self.model.load_state_dict(torch.load(checkpoint, map_location="cpu"))
                self.model.eval()

            def encode_sentences(self, token_batches):
                embeddings = []
                for tokens in token_batches:
                    vectors = self.model(tokens)
                    embeddings.append(vectors.mean(dim=1).detach().cpu().numpy())
                return np.concatenate(embeddings)


        def embed_corpus(checkpoint, token_batches):
            with torch.no_grad():
                return RepresentationModel(checkpoint).encode_sentences(token_batches)
        """,
        files={
            "modeling.py": """
                import torch.nn as nn


                class SentenceEncoder(nn.Module):
                    def __init__(self, vocab_size, hidden):
                        super().__init__()
                        self.embed = nn.Embedding(vocab_size, hidden)
                        self.layers = nn.TransformerEncoder(nn.TransformerEncoderLayer(hidden, 12, batch_first=True), 6)

                    def forward(self, tokens):
                        return self.layers(self.embed(tokens))
            """,
        },
    ),
    Quiet(  # the teacher is frozen as a whole; only the student gets requires_grad back
        """
        import torch


        def distil(teacher, student, loader):
            for param in teacher.parameters():
                param.requires_grad = False
            for param in student.parameters():
                param.requires_grad = True
            teacher.eval()
            optimizer = torch.optim.AdamW(student.parameters(), lr=1e-4)
            for images in loader:
                targets = teacher(images).softmax(-1)
                loss = torch.nn.functional.cross_entropy(student(images), targets)
                loss.backward()
                optimizer.step()
                optimizer.zero_grad()
        """
    ),
    Quiet(  # `Model` is a class handed in (annotated as a module): calling it builds the agent, it runs no forward (cleanrl)
        """
        from typing import Callable

        import torch


        def evaluate(model_path: str, make_env: Callable, eval_episodes: int, Model: torch.nn.Module, device=torch.device("cpu")):
            envs = make_env()
            agent = Model(envs).to(device)
            agent.load_state_dict(torch.load(model_path, map_location=device))
            agent.eval()
            obs = envs.reset()
            episodic_returns = []
            while len(episodic_returns) < eval_episodes:
                actions, _, _, _ = agent.get_action_and_value(torch.Tensor(obs).to(device))
                obs, reward, done = envs.step(actions.cpu().numpy())
                if done:
                    episodic_returns.append(reward)
            return episodic_returns
        """
    ),
    Quiet(  # a cosine similarity of embeddings made under no_grad: a layer without parameters records nothing (DALLE2-pytorch)
        """
        import torch
        import torch.nn as nn


        @torch.no_grad()
        def embed(encoder, batch):
            return encoder(batch)


        def report_cosine_sims(encoder, loader):
            cos = nn.CosineSimilarity(dim=1)
            sims = []
            for images, texts in loader:
                sims.append(cos(embed(encoder, images), embed(encoder, texts)).mean().item())
            return sum(sims) / len(sims)


        def eval_model(encoder, loader):
            encoder.eval()
            return report_cosine_sims(encoder, loader)
        """
    ),
    Quiet(  # fairseq's trainer calls a task's valid_step inside torch.no_grad()
        """
        from fairseq.tasks import FairseqTask


        class UnpairedAudioText(FairseqTask):
            def valid_step(self, sample, model, criterion):
                res = model(**sample["net_input"], dense_x_only=True)
                predictions = res["logits"].argmax(-1)
                correct = (predictions == sample["target"]).sum().item()
                return correct, sample["target"].numel(), {"correct": correct}
        """
    ),
    Quiet(  # a unittest case, in a file whose name does not say so
        """
        import unittest

        import torch
        from transformers import AutoModelForSeq2SeqLM


        class TestSummarizationDistiller(unittest.TestCase):
            def test_loss_fn(self):
                model = AutoModelForSeq2SeqLM.from_pretrained("sshleifer/bart-tiny-random")
                target_ids = torch.tensor([[0, 4, 8, 2], [0, 8, 2, 1]], dtype=torch.long)
                outputs = model(target_ids, labels=target_ids)
                self.assertGreater(outputs.loss.item(), 0)
        """
    ),
    Quiet(  # the forward runs in a helper that the evaluation calls under `no_grad()`
        """
        import torch


        class Trainer:
            def __init__(self, model, eval_dataloader):
                self.model = model
                self.eval_dataloader = eval_dataloader

            def compute_loss(self, model, inputs):
                outputs = model(**inputs)
                return outputs["loss"]

            def prediction_step(self, model, inputs):
                with torch.no_grad():
                    loss = self.compute_loss(model, inputs)
                return loss.detach()

            def evaluate(self):
                model = self.model
                model.eval()
                losses = [self.prediction_step(model, inputs) for inputs in self.eval_dataloader]
                return torch.stack(losses).mean().item()
        """
    ),
    Quiet(  # a model file's shape check: a freshly built model on a made-up batch is no evaluation
        """
        import torch
        import torch.nn as nn
        import torch.nn.functional as F


        class ResNet(nn.Module):
            def __init__(self, widths, num_classes=10):
                super().__init__()
                self.stem = nn.Conv2d(3, widths[0], 3, padding=1, bias=False)
                self.bn = nn.BatchNorm2d(widths[0])
                self.fc = nn.Linear(widths[0], num_classes)

            def forward(self, x):
                out = F.relu(self.bn(self.stem(x)))
                return self.fc(F.adaptive_avg_pool2d(out, 1).flatten(1))


        def ResNet18():
            return ResNet([64, 128, 256, 512])


        def test():
            net = ResNet18()
            y = net(torch.randn(1, 3, 32, 32))
            print(y.size())

        # test()
        """
    ),
    Quiet(  # the forward runs in a helper under the project's own grad-off decorator
        """
        import torch

        from utils import smart_inference_mode


        @smart_inference_mode()
        def export_and_check(model, im, path):
            for _ in range(2):
                y = model(im)  # dry runs
            torch.jit.trace(model, im).save(path)
            return y


        def test(model, im, formats):
            return {f: export_and_check(model, im, f"model.{f}") for f in formats}
        """,
        files={
            "utils.py": """
                import torch


                def smart_inference_mode(torch_1_9=True):
                    def decorate(fn):
                        return (torch.inference_mode if torch_1_9 else torch.no_grad)()(fn)

                    return decorate
            """,
        },
    ),
    Quiet(  # `module` is handed a factory (a partial of a module class): calling it builds, no forward
        """
        from functools import partial

        import torch

        from .utils import evaluate


        class KnnModule(torch.nn.Module):
            def __init__(self, train_features, train_labels, k, temperature):
                super().__init__()
                self.register_buffer("train_features", train_features)
                self.train_labels = train_labels
                self.k = k
                self.temperature = temperature

            def forward(self, features):
                similarity = (features @ self.train_features.T) / self.temperature
                return self.train_labels[similarity.topk(self.k).indices]


        def create_module_dict(*, module, k_values, train_features, train_labels):
            modules = {str(k): module(train_features=train_features, train_labels=train_labels, k=k) for k in k_values}
            return torch.nn.ModuleDict(modules)


        def eval_knn(model, train_features, train_labels, val_loader, k_values):
            partial_module = partial(KnnModule, temperature=0.07)
            knn_modules = create_module_dict(
                module=partial_module, k_values=k_values, train_features=train_features, train_labels=train_labels
            )
            return evaluate(torch.nn.Sequential(model, knn_modules), val_loader)
        """,
        files={
            "utils.py": """
                import torch

                @torch.inference_mode()
                def evaluate(model, loader):
                    model.eval()
                    return [model(x) for x, _ in loader]
            """,
        },
    ),
    Quiet(  # "metadata inference" works out output shapes, it is no evaluation pass
        """
        import torch

        class PipelineStage:
            def __init__(self, submod: torch.nn.Module):
                self.submod = submod

            def _forward_metadata_inference(self, args):
                outputs = self.submod(*args)
                return [(o.shape, o.dtype) for o in outputs]

            def step(self, args):
                return self._forward_metadata_inference(args)
        """
    ),
    Quiet(  # decorated
        """
        import torch

        @torch.no_grad()
        def evaluate(model, loader):
            model.eval()
            return sum((model(x).argmax(1) == y).sum().item() for x, y in loader)
        """
    ),
    Quiet(  # the only call site is already under no_grad
        """
        import torch

        def validate(model, loader, criterion):
            model.eval()
            return sum(criterion(model(x), y).item() for x, y in loader)

        for epoch in range(10):
            train(model)
            with torch.no_grad():
                val = validate(model, val_loader, criterion)
        """
    ),
    Quiet(  # adversarial evaluation needs input gradients
        """
        import torch.nn.functional as F

        def evaluate_fgsm(model, test_loader, eps):
            model.eval()
            correct = 0
            for data, target in test_loader:
                data.requires_grad = True
                loss = F.cross_entropy(model(data), target)
                model.zero_grad()
                loss.backward()
                adv = data + eps * data.grad.sign()
                correct += (model(adv).argmax(1) == target).sum().item()
            return correct
        """
    ),
    Quiet(  # Hugging Face generate() turns grad off itself
        """
        def predict(model, tokenizer, prompts):
            model.eval()
            inputs = tokenizer(prompts, return_tensors="pt", padding=True)
            out = model.generate(**inputs, max_new_tokens=32)
            return tokenizer.batch_decode(out, skip_special_tokens=True)
        """
    ),
    Quiet(  # "test" only inside a longer word
        """
        import torch

        def warmup_latest(model, path):
            model.load_state_dict(torch.load(path))
            model.eval()
            return model(torch.zeros(1, 3, 224, 224))
        """
    ),
    Quiet(  # set_grad_enabled by phase, as in the transfer-learning tutorial
        """
        import torch

        for phase in ["train", "val"]:
            model.train() if phase == "train" else model.eval()
            for inputs, labels in dataloaders[phase]:
                with torch.set_grad_enabled(phase == "train"):
                    outputs = model(inputs)
                    loss = criterion(outputs, labels)
                    if phase == "train":
                        loss.backward()
                        optimizer.step()
        """
    ),
    Quiet(  # test-time adaptation trains on the test stream
        """
        import torch

        model.eval()
        for x, _ in test_loader:
            loss = entropy(model(x)).mean()
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
        """
    ),
    Quiet(  # an eval-named helper whose output is trained on
        """
        import torch.nn as nn

        criterion = nn.CrossEntropyLoss()

        def predict_logits(model, x):
            return model(x)

        for x, y in train_loader:
            loss = criterion(predict_logits(model, x), y)
            loss.backward()
            optimizer.step()
        """
    ),
    Quiet(  # grad turned off through an ExitStack, as detectron2's inference_on_dataset does
        """
        from contextlib import ExitStack

        import torch
        from torch import nn

        def inference_on_dataset(model, data_loader, evaluator):
            evaluator.reset()
            with ExitStack() as stack:
                if isinstance(model, nn.Module):
                    model.eval()
                stack.enter_context(torch.no_grad())
                for idx, inputs in enumerate(data_loader):
                    outputs = model(inputs)
                    evaluator.process(inputs, outputs)
            return evaluator.evaluate()

        def do_test(cfg, model, build_test_loader, evaluator):
            return inference_on_dataset(model, build_test_loader(cfg), evaluator)
        """
    ),
    Quiet(  # a model's inference branch (the model subclasses an nn.Module): its caller decides
        """
        from torch import nn

        class GeneralizedRCNN(nn.Module):
            def __init__(self, channels=256, classes=54):
                super().__init__()
                self.backbone = nn.Conv2d(3, channels, 3, padding=1)
                self.sem_seg_head = nn.Conv2d(channels, classes, 1)

        class PanopticFPN(GeneralizedRCNN):
            def forward(self, images):
                if not self.training:
                    return self.inference(images)
                return self.sem_seg_head(self.backbone(images)).mean()

            def inference(self, images):
                features = self.backbone(images)
                return self.sem_seg_head(features)
        """
    ),
    Quiet(  # Lightning runs validation_step under no_grad
        """
        import lightning as L
        import torch.nn.functional as F

        class LitModel(L.LightningModule):
            def __init__(self, net):
                super().__init__()
                self.net = net

            def validation_step(self, batch, batch_idx):
                x, y = batch
                self.log("val_loss", F.cross_entropy(self.net(x), y))
        """
    ),
    Quiet(  # a pytest unit test of the model
        """
        import torch
        import torch.nn as nn

        def test_forward_shape():
            model = nn.Linear(8, 4)
            model.eval()
            out = model(torch.zeros(2, 8))
            assert out.shape == (2, 4)
        """
    ),
    Quiet(  # mode by argument done right: grad follows the argument
        """
        import torch

        def run_epoch(model, loader, criterion, optimizer=None):
            training = optimizer is not None
            model.train(training)
            total = 0.0
            with torch.set_grad_enabled(training):
                for x, y in loader:
                    loss = criterion(model(x), y)
                    if optimizer is not None:
                        optimizer.zero_grad()
                        loss.backward()
                        optimizer.step()
                    total += loss.item()
            return total / len(loader)

        def main(model, train_loader, val_loader, criterion, optimizer, epochs):
            for epoch in range(epochs):
                run_epoch(model, train_loader, criterion, optimizer)
                run_epoch(model, val_loader, criterion)
        """
    ),
    Quiet(  # the Trainer calls compute_loss with grad on to train and under no_grad from its own prediction_step
        """
        from transformers import Trainer

        class WeightedLossTrainer(Trainer):
            def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
                labels = inputs.pop("labels")
                outputs = model(**inputs)
                loss = self.loss_fct(outputs.logits.view(-1, self.model.config.num_labels), labels.view(-1))
                return (loss, outputs) if return_outputs else loss
        """
    ),
    Quiet(  # an overridden prediction_step that disables grad itself, as the base class does
        """
        import torch
        from transformers import Trainer

        class RankingTrainer(Trainer):
            def prediction_step(self, model, inputs, prediction_loss_only, ignore_keys=None):
                inputs = self._prepare_inputs(inputs)
                with torch.no_grad():
                    outputs = model(**inputs)
                return (outputs.loss.detach(), outputs.logits, inputs["labels"])
        """
    ),
    Quiet(  # the teacher's output feeds the student's loss, which is backwarded
        """
        import torch
        import torch.nn.functional as F

        from models import Student, Teacher


        def distill(loader, epochs):
            teacher, student = Teacher(), Student()
            optimizer = torch.optim.SGD(student.parameters(), lr=0.1)
            for epoch in range(epochs):
                for images, _ in loader:
                    soft_targets = F.softmax(teacher(images) / 4.0, dim=1)
                    loss = F.kl_div(F.log_softmax(student(images) / 4.0, dim=1), soft_targets, reduction="batchmean")
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()


        if __name__ == "__main__":
            distill(torch.load("loader.pt"), 10)
        """,
        files={
            "models.py": """
                import torch.nn as nn


                class Teacher(nn.Module):
                    def __init__(self):
                        super().__init__()
                        self.net = nn.Linear(784, 10)

                    def forward(self, x):
                        return self.net(x.flatten(1))


                class Student(Teacher):
                    pass
            """,
        },
    ),
    Quiet(  # a frozen teacher records no graph: nothing to turn off
        """
        import torch
        import torch.nn as nn


        def pseudo_label(teacher, loader):
            teacher.requires_grad_(False)
            labels = []
            for images in loader:
                labels.append(teacher(images).argmax(1).tolist())
            print(sum(len(batch) for batch in labels))


        if __name__ == "__main__":
            pseudo_label(nn.Linear(784, 10), torch.load("unlabelled.pt"))
        """
    ),
    Quiet(  # a helper no code in this file calls: its callers, in other files, may run it under no_grad()
        """
        import json

        import torch.nn as nn


        class Tagger(nn.Module):
            def __init__(self):
                super().__init__()
                self.proj = nn.Linear(256, 17)

            def forward(self, features):
                return self.proj(features)


        def write_predictions(tagger: Tagger, batches, path):
            with open(path, "w") as out:
                for features in batches:
                    tags = tagger(features).argmax(-1)
                    out.write(json.dumps(tags.tolist()) + "\n")
        """
    ),
    Quiet(  # REINFORCE keeps each step's log-probability for the episode's backward
        """
        import gymnasium as gym
        import torch
        import torch.nn as nn
        from torch.distributions import Categorical


        def run_episode(env, policy, optimizer):
            state, _ = env.reset()
            log_probs, rewards = [], []
            done = False
            while not done:
                dist = Categorical(logits=policy(torch.as_tensor(state, dtype=torch.float32)))
                action = dist.sample()
                log_probs.append(dist.log_prob(action))
                state, reward, terminated, truncated, _ = env.step(action.item())
                rewards.append(reward)
                done = terminated or truncated
            loss = -torch.stack(log_probs).sum() * sum(rewards)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()


        if __name__ == "__main__":
            policy = nn.Sequential(nn.Linear(4, 64), nn.Tanh(), nn.Linear(64, 2))
            run_episode(gym.make("CartPole-v1"), policy, torch.optim.Adam(policy.parameters()))
        """
    ),
    Quiet(  # a module without parameters records no graph from inputs that need none
        """
        import torch


        class FusedScale(torch.nn.Module):
            def forward(self, x, y):
                return x * y + y


        module = FusedScale()
        scripted = torch.jit.script(module)
        for _ in range(50):
            x, y = torch.randn(10, 20), torch.randn(10, 20)
            torch.testing.assert_close(scripted(x, y), module(x, y))
        """
    ),
    Quiet(  # the helper runs the whole training step and returns the loss for logging
        """
        import torch
        from accelerate import Accelerator
        from transformers import AutoModelForCausalLM


        def forward(model, batch, optimizer, accelerator):
            loss = model(**batch).loss
            accelerator.backward(loss)
            optimizer.step()
            optimizer.zero_grad()
            return loss


        def train(loader, steps):
            accelerator = Accelerator()
            model = AutoModelForCausalLM.from_pretrained("gpt2")
            optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5)
            model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
            for step, batch in enumerate(loader):
                loss = forward(model, batch, optimizer, accelerator)
                accelerator.log({"loss": loss.item()}, step=step)


        if __name__ == "__main__":
            train(torch.load("loader.pt"), 100)
        """
    ),
    Quiet(  # outputs detached where they are made and collected: TL101's fix, which TL102 does not report again
        """
        import torch
        from torchvision.models import resnet18

        encoder = resnet18()
        encoder.load_state_dict(torch.load("encoder.pt"))  # trained weights: not a shape demo
        features = []
        for images, _ in loader:
            features.append(encoder(images.cuda()).detach().cpu())
        torch.save(features, "feats.pt")
        """,
    ),
    Quiet(  # a script's demo: the model an earlier statement built is untrained, nothing loads weights into it
        """
        import torch
        from torch import nn

        model = nn.Linear(10, 1)
        data = [(torch.randn(8, 10), torch.randn(8, 1)) for _ in range(100)]

        history = []
        for x, y in data:
            loss = nn.functional.mse_loss(model(x), y)
            history.append(loss.item())
        print(sum(history) / len(history))
        """,
    ),
    Quiet(  # the kept outputs carry their graph into `torch.save`, a later statement: TL101's retained graph, not a pass to wrap
        """
        import torch
        from torchvision.models import resnet18

        encoder = resnet18()
        encoder.load_state_dict(torch.load("encoder.pt"))
        features = []
        for images, _ in loader:
            features.append(encoder(images.cuda()))
        torch.save(features, "feats.pt")
        """,
    ),
    Quiet(  # the same evaluation, called under no_grad
        """
        import torch

        from evaluation import evaluate
        from wrapper import Tagger

        tagger = Tagger(vocab=30000, tags=17)
        tagger.network.load_state_dict(torch.load("tagger.pt"))
        with torch.no_grad():
            print(evaluate(tagger, test_batches))
        """,
        files={
            "wrapper.py": """
                import torch.nn as nn


                class TaggerNetwork(nn.Module):
                    def __init__(self, vocab, tags):
                        super().__init__()
                        self.embed = nn.Embedding(vocab, 128)
                        self.drop = nn.Dropout(0.1)
                        self.out = nn.Linear(128, tags)

                    def forward(self, tokens):
                        return self.out(self.drop(self.embed(tokens)))


                class Tagger:
                    def __init__(self, vocab, tags):
                        self.network = TaggerNetwork(vocab, tags)

                    def predict(self, tokens):
                        self.network.eval()
                        scores = self.network(tokens)
                        return scores.argmax(-1).tolist()
            """,
            "evaluation.py": """
                def evaluate(model, batches):
                    correct = total = 0
                    for tokens, tags in batches:
                        predicted = model.predict(tokens)
                        correct += sum(p == t for p, t in zip(predicted, tags.tolist()))
                        total += len(predicted)
                    return correct / total
            """,
        },
    ),
    Quiet(  # the object handed to the evaluation helper turns grad off in its own predict
        """
        import torch

        from evaluation import evaluate
        from wrapper import Tagger

        tagger = Tagger(vocab=30000, tags=17)
        tagger.network.load_state_dict(torch.load("tagger.pt"))
        print(evaluate(tagger, test_batches))
        """,
        files={
            "wrapper.py": """
                import torch
                import torch.nn as nn


                class TaggerNetwork(nn.Module):
                    def __init__(self, vocab, tags):
                        super().__init__()
                        self.embed = nn.Embedding(vocab, 128)
                        self.drop = nn.Dropout(0.1)
                        self.out = nn.Linear(128, tags)

                    def forward(self, tokens):
                        return self.out(self.drop(self.embed(tokens)))


                class Tagger:
                    def __init__(self, vocab, tags):
                        self.network = TaggerNetwork(vocab, tags)

                    @torch.no_grad()
                    def predict(self, tokens):
                        self.network.eval()
                        scores = self.network(tokens)
                        return scores.argmax(-1).tolist()
            """,
            "evaluation.py": """
                def evaluate(model, batches):
                    correct = total = 0
                    for tokens, tags in batches:
                        predicted = model.predict(tokens)
                        correct += sum(p == t for p, t in zip(predicted, tags.tolist()))
                        total += len(predicted)
                    return correct / total
            """,
        },
    ),
    Quiet(  # the dev loop runs under no_grad() in the caller: the trainer's `predict` leaves grad to it
        """
        import argparse

        import torch

        from tagger.trainer import TaggerTrainer


        def predict_dataset(trainer, dev_batches):
            predictions = []
            for batch in dev_batches:
                predictions += trainer.predict(batch)
            return predictions


        def train(args):
            trainer = TaggerTrainer(args.hidden)
            for step, batch in enumerate(args.train_batches):
                trainer.update(batch)
                if step % 1000 == 0:
                    with torch.no_grad():
                        print(step, predict_dataset(trainer, args.dev_batches))


        if __name__ == "__main__":
            train(argparse.ArgumentParser().parse_args())
        """,
        files={
            "tagger/__init__.py": "",
            "tagger/trainer.py": """
                import torch
                import torch.nn as nn


                class TaggerTrainer:
                    def __init__(self, hidden):
                        self.model = nn.Sequential(nn.Embedding(1000, hidden), nn.Dropout(0.3), nn.Linear(hidden, 17))
                        self.optimizer = torch.optim.Adam(self.model.parameters())

                    def update(self, batch):
                        words, tags = batch
                        self.model.train()
                        loss = nn.functional.cross_entropy(self.model(words).flatten(0, 1), tags.flatten())
                        self.optimizer.zero_grad()
                        loss.backward()
                        self.optimizer.step()

                    def predict(self, batch):
                        words, _ = batch
                        self.model.eval()
                        return self.model(words).argmax(-1).tolist()
            """,
        },
    ),
    Quiet(  # the handler's forward runs under inference_mode(); the server trains nothing, and nothing else runs
        """
        import torch
        from fastapi import FastAPI
        from transformers import AutoModel, AutoTokenizer

        app = FastAPI()
        tokenizer = AutoTokenizer.from_pretrained("bert-base-uncased")
        model = AutoModel.from_pretrained("bert-base-uncased").cuda()


        def embed_text(text):
            tokens = tokenizer(text, return_tensors="pt").to("cuda")
            with torch.inference_mode():
                hidden = model(**tokens).last_hidden_state
            return hidden[0].mean(0).tolist()


        @app.post("/embed")
        async def embed(request: dict):
            return {"embedding": embed_text(request["text"])}
        """
    ),
    Quiet(  # the forward's output is handed back to the caller, who may backward it: not a dropped graph
        """
        from fastapi import FastAPI
        from transformers import AutoModel

        app = FastAPI()
        model = AutoModel.from_pretrained("bert-base-uncased")


        def encode(tokens):
            return model(**tokens).last_hidden_state


        @app.post("/encode")
        async def handle(request: dict):
            return {"shape": list(encode(request["tokens"]).shape)}
        """
    ),
    Quiet(  # an export script runs the model once to check it: one graph, not an inference pass repeated
        """
        import argparse

        import torch

        from models.experimental import attempt_load


        def run(weights, imgsz=(640, 640)):
            im = torch.zeros((1, 3, *imgsz))
            model = attempt_load(weights, device=torch.device("cpu"))
            _ = model(im)
            torch.onnx.export(model, im, str(weights).replace(".pt", ".onnx"))


        if __name__ == "__main__":
            parser = argparse.ArgumentParser()
            parser.add_argument("--weights", default="yolov5s.pt")
            run(parser.parse_args().weights)
        """,
        files={
            "models/__init__.py": "",
            "models/experimental.py": """
                import torch
                import torch.nn as nn


                def attempt_load(weights, device=None):
                    model = nn.Sequential(nn.Conv2d(3, 16, 3), nn.BatchNorm2d(16), nn.SiLU())
                    model.load_state_dict(torch.load(weights, map_location=device))
                    return model.eval()
            """,
        },
    ),
    Quiet(  # what the model's method returns is bookkeeping, not its layers' output; `generate` runs without grad
        """
        import torch
        from torch import nn


        class Captioner(nn.Module):
            def __init__(self, vocab_size):
                super().__init__()
                self.embed = nn.Embedding(vocab_size, 128)
                self.head = nn.Linear(128, vocab_size)

            def forward(self, tokens):
                return self.head(self.embed(tokens))

            def footprint(self, tokens):
                return sum(p.numel() for p in self.parameters()) + tokens.numel()


        def validate(model, val_loader):
            model.eval()
            sizes = []
            for tokens in val_loader:
                sizes.append(model.footprint(tokens))
            return sizes


        def sample_captions(language_model, val_prompts):
            language_model.eval()
            return [language_model.generate(prompt, max_new_tokens=20) for prompt in val_prompts]


        def fit(loader, val_loader):
            model = Captioner(1000)
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            for tokens in loader:
                loss = nn.functional.cross_entropy(model(tokens[:, :-1]).flatten(0, 1), tokens[:, 1:].flatten())
                loss.backward()
                optimizer.step()
                optimizer.zero_grad()
            print(validate(model, val_loader))
        """,
    ),
    Quiet(  # the same sampling method, which its only caller (another file) runs under no_grad()
        """
        import torch
        import torch.nn.functional as F
        from torchvision.utils import save_image


        class GanTrainer:
            def __init__(self, generator, discriminator, g_optimizer, d_optimizer, latent_dim=128, device="cuda"):
                self.generator = generator
                self.discriminator = discriminator
                self.g_optimizer = g_optimizer
                self.d_optimizer = d_optimizer
                self.latent_dim = latent_dim
                self.device = device

            def train_epoch(self, loader):
                for real in loader:
                    real = real.to(self.device)
                    noise = torch.randn(real.size(0), self.latent_dim, device=self.device)
                    fake = self.generator(noise)
                    d_loss = F.softplus(self.discriminator(fake.detach())).mean() + F.softplus(-self.discriminator(real)).mean()
                    self.d_optimizer.zero_grad()
                    d_loss.backward()
                    self.d_optimizer.step()
                    g_loss = F.softplus(-self.discriminator(fake)).mean()
                    self.g_optimizer.zero_grad()
                    g_loss.backward()
                    self.g_optimizer.step()

            def save_samples(self, folder, rows=8):
                self.generator.eval()
                for row in range(rows):
                    noise = torch.randn(rows, self.latent_dim, device=self.device)
                    save_image(self.generator(noise), f"{folder}/row{row}.png", nrow=rows)
                self.generator.train()
        """,
        files={
            "main.py": """
                import argparse

                import torch

                from data import image_loader
                from models import Discriminator, Generator
                from torch.optim import Adam
                from train import GanTrainer

                parser = argparse.ArgumentParser()
                parser.add_argument("--epochs", type=int, default=50)
                args = parser.parse_args()

                generator, discriminator = Generator().cuda(), Discriminator().cuda()
                trainer = GanTrainer(generator, discriminator, Adam(generator.parameters(), 2e-4), Adam(discriminator.parameters(), 2e-4))
                for epoch in range(args.epochs):
                    trainer.train_epoch(image_loader("data/faces", batch_size=64))
                    with torch.no_grad():
                        trainer.save_samples(f"samples/epoch{epoch:03d}")
            """,
        },
    ),
    Quiet(  # an evaluation helper whose only caller, in another file, wraps it in no_grad()
        """
        import torch.nn.functional as F


        def train_one_epoch(model, loader, optimizer, device):
            model.train()
            for images, labels in loader:
                images, labels = images.to(device), labels.to(device)
                loss = F.cross_entropy(model(images), labels)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()


        def evaluate(model, loader, device):
            model.eval()
            correct = total = 0
            for images, labels in loader:
                logits = model(images.to(device))
                correct += (logits.argmax(dim=1) == labels.to(device)).sum().item()
                total += labels.size(0)
            return correct / total
        """,
        files={
            "main.py": """
                import torch
                from torch.optim import SGD
                from torchvision.models import resnet18

                from data import cifar_loaders
                from train import evaluate, train_one_epoch


                def main(epochs=30, device="cuda"):
                    model = resnet18(num_classes=10).to(device)
                    optimizer = SGD(model.parameters(), lr=0.1, momentum=0.9)
                    train_loader, val_loader = cifar_loaders(batch_size=128)
                    for epoch in range(epochs):
                        train_one_epoch(model, train_loader, optimizer, device)
                        with torch.no_grad():
                            accuracy = evaluate(model, val_loader, device)
                        print(f"epoch {epoch}: val accuracy {accuracy:.3f}")


                if __name__ == "__main__":
                    main()
            """,
        },
    ),
    Quiet(  # the helper's images feed the generator's loss, which is backwarded: not an inference pass
        """
        import torch

        from networks import Critic, Generator
        from sampling import render_batch


        def main(loader, iterations=20000, latent_dim=64):
            generator, critic = Generator(latent_dim).cuda(), Critic().cuda()
            g_opt = torch.optim.Adam(generator.parameters(), lr=2e-4)
            c_opt = torch.optim.Adam(critic.parameters(), lr=2e-4)
            for iteration, real in zip(range(iterations), loader):
                real = real.cuda()
                fake = render_batch(generator, torch.randn(real.size(0), latent_dim, device="cuda"))
                c_loss = critic(fake.detach()).mean() - critic(real).mean()
                c_opt.zero_grad()
                c_loss.backward()
                c_opt.step()
                g_loss = -critic(fake).mean()
                g_opt.zero_grad()
                g_loss.backward()
                g_opt.step()


        if __name__ == "__main__":
            main(torch.load("faces.pt"))
        """,
        files={
            "sampling.py": """
                import torch


                def render_batch(generator, latents, chunk=16):
                    images = [generator(part) for part in latents.split(chunk)]
                    return torch.cat(images)
            """,
            "networks.py": """
                import torch.nn as nn


                class Generator(nn.Module):
                    def __init__(self, latent_dim):
                        super().__init__()
                        self.net = nn.Sequential(nn.Linear(latent_dim, 3 * 32 * 32), nn.Tanh())

                    def forward(self, z):
                        return self.net(z).view(-1, 3, 32, 32)


                class Critic(nn.Module):
                    def __init__(self):
                        super().__init__()
                        self.net = nn.Sequential(nn.Flatten(), nn.Linear(3 * 32 * 32, 1))

                    def forward(self, x):
                        return self.net(x)
            """,
        },
    ),
    Quiet(  # the sampling method runs under no_grad() where the training method calls it
        """
        import torch
        import torch.nn.functional as F
        from torchvision.utils import save_image


        class DenoiserTrainer:
            def __init__(self, model, loader, lr=1e-4, device="cuda"):
                self.model = model.to(device)
                self.loader = loader
                self.device = device
                self.optimizer = torch.optim.Adam(self.model.parameters(), lr=lr)

            def sample(self, count, steps=50):
                x = torch.randn(count, 3, 32, 32, device=self.device)
                for step in reversed(range(steps)):
                    level = torch.full((count,), step, device=self.device)
                    x = x - self.model(x, level) / steps
                return x.clamp(-1, 1)

            def fit(self, epochs):
                for epoch in range(epochs):
                    for images in self.loader:
                        images = images.to(self.device)
                        noise = torch.randn_like(images)
                        level = torch.randint(0, 50, (images.size(0),), device=self.device)
                        loss = F.mse_loss(self.model(images + noise, level), noise)
                        self.optimizer.zero_grad()
                        loss.backward()
                        self.optimizer.step()
                    with torch.no_grad():
                        save_image(self.sample(16), f"samples/epoch{epoch:03d}.png", nrow=4)
        """,
    ),
    Quiet(  # an inference script's one unguarded forward is a warm-up whose output is dropped
        """
        import argparse
        import time

        import torch

        from models import Upscaler


        def measure(checkpoint, size=256, runs=50):
            model = Upscaler()
            model.load_state_dict(torch.load(checkpoint, map_location="cuda"))
            model.cuda().eval()
            image = torch.rand(1, 3, size, size, device="cuda")
            model.upscale(image)
            torch.cuda.synchronize()
            start = time.perf_counter()
            with torch.no_grad():
                for _ in range(runs):
                    model.upscale(image)
            torch.cuda.synchronize()
            print(f"{(time.perf_counter() - start) / runs * 1000:.1f} ms")


        if __name__ == "__main__":
            parser = argparse.ArgumentParser()
            parser.add_argument("checkpoint")
            measure(parser.parse_args().checkpoint)
        """,
        files={
            "models.py": """
                import torch.nn as nn


                class Denoiser(nn.Module):
                    def __init__(self):
                        super().__init__()
                        self.net = nn.Sequential(nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(), nn.Conv2d(32, 3, 3, padding=1))

                    def forward(self, x):
                        return x - self.net(x)


                class Upscaler(nn.Module):
                    def __init__(self):
                        super().__init__()
                        self.body = nn.Conv2d(3, 48, 3, padding=1)
                        self.shuffle = nn.PixelShuffle(4)

                    def upscale(self, x, factor=4):
                        return self.shuffle(self.body(x))
            """,
        },
    ),
    Quiet(  # the hidden states of a keyword-recognised forward feed a loss that is backwarded
        """
        import torch
        import torch.nn.functional as F

        from loading import load_checkpoint


        class ContrastiveTuner:
            def __init__(self, path, device="cuda"):
                self.model, self.tokenizer = load_checkpoint(path, device)
                self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=1e-5)

            def embed(self, ids):
                outputs = self.model(ids, output_hidden_states=True)
                return outputs.hidden_states[-1].mean(dim=1)

            def step(self, anchors, positives):
                a, p = self.embed(anchors), self.embed(positives)
                loss = F.cross_entropy(a @ p.T, torch.arange(a.size(0), device=a.device))
                loss.backward()
                self.optimizer.step()
                self.optimizer.zero_grad()
                return loss.item()
        """,
        files={
            "loading.py": """
                from transformers import AutoModelForCausalLM, AutoTokenizer


                def load_checkpoint(path, device):
                    tokenizer = AutoTokenizer.from_pretrained(path)
                    model = AutoModelForCausalLM.from_pretrained(path, torch_dtype="auto").to(device)
                    return model, tokenizer
            """,
        },
    ),
    Quiet(  # the same caption encoder frozen as a whole: it records nothing
        """
        import torch
        import torch.nn.functional as F
        from diffusers import AutoencoderKL, DDPMScheduler, UNet2DConditionModel
        from transformers import CLIPTextModel, CLIPTokenizer


        def embed_captions(encoder, tokenizer, captions):
            tokens = tokenizer(captions, padding="max_length", max_length=77, truncation=True, return_tensors="pt")
            return encoder(tokens.input_ids.to(encoder.device))[0]


        def fine_tune(loader, base="stabilityai/sd-turbo", steps=2000):
            tokenizer = CLIPTokenizer.from_pretrained(base, subfolder="tokenizer")
            encoder = CLIPTextModel.from_pretrained(base, subfolder="text_encoder").cuda()
            autoencoder = AutoencoderKL.from_pretrained(base, subfolder="vae").cuda()
            autoencoder.requires_grad_(False)
            encoder.requires_grad_(False)
            denoiser = UNet2DConditionModel.from_pretrained(base, subfolder="unet").cuda()
            noise_schedule = DDPMScheduler.from_pretrained(base, subfolder="scheduler")
            optimizer = torch.optim.AdamW(denoiser.parameters(), lr=1e-5)
            for step, batch in zip(range(steps), loader):
                latents = autoencoder.encode(batch["images"].cuda()).latent_dist.sample() * 0.18215
                noise = torch.randn_like(latents)
                timesteps = torch.randint(0, 1000, (latents.size(0),), device=latents.device)
                context = embed_captions(encoder, tokenizer, batch["captions"])
                prediction = denoiser(noise_schedule.add_noise(latents, noise, timesteps), timesteps, context).sample
                loss = F.mse_loss(prediction, noise)
                loss.backward()
                optimizer.step()
                optimizer.zero_grad()
        """,
    ),
    Quiet(  # the caption encoder trains with the denoiser: its graph is needed
        """
        import torch
        import torch.nn.functional as F
        from diffusers import AutoencoderKL, DDPMScheduler, UNet2DConditionModel
        from transformers import CLIPTextModel, CLIPTokenizer


        def embed_captions(encoder, tokenizer, captions):
            tokens = tokenizer(captions, padding="max_length", max_length=77, truncation=True, return_tensors="pt")
            return encoder(tokens.input_ids.to(encoder.device))[0]


        def fine_tune(loader, base="stabilityai/sd-turbo", steps=2000):
            tokenizer = CLIPTokenizer.from_pretrained(base, subfolder="tokenizer")
            encoder = CLIPTextModel.from_pretrained(base, subfolder="text_encoder").cuda()
            autoencoder = AutoencoderKL.from_pretrained(base, subfolder="vae").cuda()
            autoencoder.requires_grad_(False)
            denoiser = UNet2DConditionModel.from_pretrained(base, subfolder="unet").cuda()
            noise_schedule = DDPMScheduler.from_pretrained(base, subfolder="scheduler")
            encoder.train()
            optimizer = torch.optim.AdamW([*denoiser.parameters(), *encoder.parameters()], lr=1e-5)
            for step, batch in zip(range(steps), loader):
                latents = autoencoder.encode(batch["images"].cuda()).latent_dist.sample() * 0.18215
                noise = torch.randn_like(latents)
                timesteps = torch.randint(0, 1000, (latents.size(0),), device=latents.device)
                context = embed_captions(encoder, tokenizer, batch["captions"])
                prediction = denoiser(noise_schedule.add_noise(latents, noise, timesteps), timesteps, context).sample
                loss = F.mse_loss(prediction, noise)
                loss.backward()
                optimizer.step()
                optimizer.zero_grad()
        """,
    ),
    Quiet(  # an export script's one forward, of which it reads only the shape and device: a check, not an inference pass
        """
        import argparse

        import torch

        from models import Upscaler


        def check(checkpoint, size=64):
            model = Upscaler()
            model.load_state_dict(torch.load(checkpoint, map_location="cpu"))
            model.eval()
            sample = torch.rand(1, 3, size, size)
            output = model.upscale(sample)
            print("output shape", tuple(output.shape), "on", output.device)
            torch.onnx.export(model, sample, checkpoint.replace(".pt", ".onnx"))


        if __name__ == "__main__":
            parser = argparse.ArgumentParser()
            parser.add_argument("checkpoint")
            check(parser.parse_args().checkpoint)
        """,
        files={
            "models.py": """
                import torch.nn as nn


                class Denoiser(nn.Module):
                    def __init__(self):
                        super().__init__()
                        self.net = nn.Sequential(nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(), nn.Conv2d(32, 3, 3, padding=1))

                    def forward(self, x):
                        return x - self.net(x)


                class Upscaler(nn.Module):
                    def __init__(self):
                        super().__init__()
                        self.body = nn.Conv2d(3, 48, 3, padding=1)
                        self.shuffle = nn.PixelShuffle(4)

                    def upscale(self, x, factor=4):
                        return self.shuffle(self.body(x))
            """,
        },
    ),
    Quiet(  # an inference script whose module level runs a fine-tuning step from another file: the program trains,
        # and a graph handed to code the analysis cannot read may be backwarded there
        """
        import torch

        from finetune import adapt_on
        from scoring import score_predictions

        def main(checkpoint, batches):
            model = torch.load(checkpoint)
            model.eval()
            for inputs, targets in batches:
                adapt_on(model, inputs)
                score_predictions(model(inputs), targets)


        if __name__ == "__main__":
            main("model.pt", torch.load("batches.pt"))
        """,
        files={
            "finetune.py": """
                import torch


                def adapt_on(model, inputs):
                    entropy = -(model(inputs).softmax(-1) * model(inputs).log_softmax(-1)).sum(-1).mean()
                    entropy.backward()
                    torch.optim.SGD(model.parameters(), lr=1e-4).step()
            """,
        },
    ),
    Quiet(  # the epoch clears the optimizer and hands it, with the loss, to a scaler object whose `__call__` steps it
        """
        import torch

        from helpers import GradScaleStepper, build_model, build_loader


        def run_epoch(model, loader, optimizer, stepper):
            model.train()
            for images, labels in loader:
                optimizer.zero_grad()
                loss = torch.nn.functional.cross_entropy(model(images.cuda()), labels.cuda())
                stepper(loss, optimizer, parameters=model.parameters())


        if __name__ == "__main__":
            model = build_model().cuda()
            optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
            for epoch in range(90):
                run_epoch(model, build_loader(), optimizer, GradScaleStepper())
        """,
        files={
            "helpers.py": """
                import torch


                class GradScaleStepper:
                    def __init__(self):
                        self.scaler = torch.cuda.amp.GradScaler()

                    def __call__(self, loss, optimizer, parameters=None):
                        self.scaler.scale(loss).backward()
                        self.scaler.step(optimizer)
                        self.scaler.update()
            """,
        },
    ),
    Quiet(  # the script runs its pass under `@torch.inference_mode()`: the entry point turns grad off
        """
        import torch

        from detector.weights import load_detector
        from detector.postprocess import draw_boxes


        @torch.inference_mode()
        def detect(weights, frames):
            net = load_detector(weights)
            net.eval()
            for frame in frames:
                draw_boxes(frame, net(frame))


        def main():
            for _ in range(3):
                detect("best.pt", torch.load("frames.pt"))


        if __name__ == "__main__":
            main()
        """,
    ),
    Quiet(  # the preview helper's call sits under `no_grad()` in the training loop: the caller chose where grad is off
        """
        import torch
        import torch.nn.functional as F


        class ReconstructionTrainer:
            def __init__(self, model, loader):
                self.model = model
                self.loader = loader
                self.optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)

            def report(self, batch, epoch):
                reconstruction = self.model(batch)
                print(epoch, F.mse_loss(reconstruction, batch).item())

            def fit(self, epochs):
                for epoch in range(epochs):
                    for batch in self.loader:
                        loss = F.mse_loss(self.model(batch), batch)
                        self.optimizer.zero_grad()
                        loss.backward()
                        self.optimizer.step()
                    with torch.no_grad():
                        self.report(batch, epoch)
        """,
    ),
    Quiet(  # a helper called in the training loop whose output feeds the loss (a perceptual term): its graph is used
        """
        import torch
        import torch.nn.functional as F


        def feature_distance(extractor, fake, real):
            return F.l1_loss(extractor(fake), extractor(real))


        def train(generator, extractor, loader, epochs):
            optimizer = torch.optim.Adam(generator.parameters(), lr=1e-4)
            for _ in range(epochs):
                for noise, real in loader:
                    loss = feature_distance(extractor, generator(noise), real)
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
        """,
    ),
    Quiet(  # a perceptual loss module: its network runs on the restorer's output, whose graph the backward needs
        """
        import torch
        import torch.nn.functional as F
        from torch import nn
        from torchvision.models import vgg16


        class PerceptualLoss(nn.Module):
            def __init__(self, features):
                super().__init__()
                self.features = features

            def forward(self, restored, target):
                return F.l1_loss(self.features(restored), self.features(target))


        def train(restorer, loader, epochs):
            extractor = vgg16(weights="IMAGENET1K_V1").features[:16].cuda().eval()
            criterion = PerceptualLoss(extractor)
            optimizer = torch.optim.Adam(restorer.parameters(), lr=1e-4)
            for _ in range(epochs):
                for degraded, clean in loader:
                    loss = criterion(restorer(degraded), clean)
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
        """,
    ),
    Quiet(  # a script's helper calls what it is handed, a `partial` of a classifier class: each call builds a module
        """
        from functools import partial

        import torch
        from torch import nn


        class NearestCentroid(nn.Module):
            def __init__(self, bank, labels, temperature):
                super().__init__()
                self.register_buffer("bank", bank)
                self.register_buffer("labels", labels)
                self.temperature = temperature

            def forward(self, features):
                return (features @ self.bank.T / self.temperature).softmax(-1) @ self.labels


        def build_per_split(*, module, banks, labels):
            built = {}
            for name, bank in banks.items():
                built[name] = nn.ModuleList([module(bank=bank, labels=labels[name])])
            return built


        def main():
            banks, labels = torch.load("banks.pt"), torch.load("labels.pt")
            classifiers = build_per_split(module=partial(NearestCentroid, temperature=0.07), banks=banks, labels=labels)
            torch.save(classifiers, "classifiers.pt")


        if __name__ == "__main__":
            main()
        """,
    ),
    Quiet(  # the distillation model runs its teacher under no_grad inside its forward
        """
        import torch

        from models import DistillationModel, build_backbone


        def train(args, loader):
            model = DistillationModel(build_backbone(args.student), build_backbone(args.teacher)).cuda()
            optimizer = torch.optim.AdamW(model.student.parameters(), lr=args.lr)
            for images, labels in loader:
                loss = model(images.cuda(), labels.cuda())
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
        """,
        files={
            "models.py": """
                import torch
                import torch.nn.functional as F
                import torchvision
                from torch import nn


                def build_backbone(name):
                    return getattr(torchvision.models, name)(num_classes=100)


                class DistillationModel(nn.Module):
                    def __init__(self, student, teacher):
                        super().__init__()
                        self.student = student
                        self.teacher = teacher
                        self.teacher.eval()

                    def forward(self, images, labels):
                        logits = self.student(images)
                        with torch.no_grad():
                            teacher_logits = self.teacher(images)
                        soft = F.kl_div(F.log_softmax(logits, dim=-1), F.softmax(teacher_logits, dim=-1), reduction="batchmean")
                        return soft + F.cross_entropy(logits, labels)
            """,
        },
    ),
    Quiet(  # the class freezes its teacher as a whole: its forward records no graph
        """
        import torch
        import torch.nn.functional as F
        from torch import nn


        class Distiller(nn.Module):
            def __init__(self, student, teacher):
                super().__init__()
                self.student = student
                self.teacher = teacher.eval()
                self.teacher.requires_grad_(False)

            def forward(self, images):
                logits = self.student(images)
                return F.kl_div(F.log_softmax(logits, -1), F.softmax(self.teacher(images), -1), reduction="batchmean")


        def fit(student, teacher, loader, lr):
            model = Distiller(student, teacher)
            optimizer = torch.optim.SGD(model.student.parameters(), lr=lr, momentum=0.9)
            for images, _ in loader:
                loss = model(images)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
        """,
    ),
    Quiet(  # a perceptual loss: its network also runs on the prediction, whose gradient goes through it
        """
        import torch
        import torch.nn.functional as F
        import torchvision
        from torch import nn


        class PerceptualLoss(nn.Module):
            def __init__(self):
                super().__init__()
                self.features = torchvision.models.vgg16(weights="IMAGENET1K_V1").features[:16].eval()

            def forward(self, prediction, target):
                return F.l1_loss(self.features(prediction), self.features(target))


        def train(generator, loader, lr):
            criterion = PerceptualLoss().cuda()
            optimizer = torch.optim.Adam(generator.parameters(), lr=lr, betas=(0.5, 0.999))
            for low, high in loader:
                loss = criterion(generator(low.cuda()), high.cuda())
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
        """,
    ),
    Quiet(  # the loss method runs the reference model under no_grad; the policy's forward is what trains
        """
        import torch
        import torch.nn.functional as F
        from transformers import AutoModelForCausalLM


        class PreferenceTrainer:
            def __init__(self, name, lr):
                self.policy = AutoModelForCausalLM.from_pretrained(name)
                self.policy.train()
                self.reference = AutoModelForCausalLM.from_pretrained(name)
                self.optimizer = torch.optim.AdamW(self.policy.parameters(), lr=lr)

            def compute_loss(self, batch):
                logps = self.policy(batch["input_ids"]).logits.log_softmax(-1)
                with torch.no_grad():
                    ref_logps = self.reference(batch["input_ids"]).logits.log_softmax(-1)
                return F.kl_div(ref_logps, logps, log_target=True, reduction="batchmean")

            def train(self, loader):
                for batch in loader:
                    loss = self.compute_loss(batch)
                    self.optimizer.zero_grad()
                    loss.backward()
                    self.optimizer.step()
        """,
    ),
    Quiet(  # the logged grid is drawn under no_grad
        """
        import torch
        import wandb


        def train(netG, netD, loader, optimizer, fixed_noise, sample_every):
            for step, (real, _) in enumerate(loader):
                loss = netD(netG(torch.randn_like(fixed_noise))).mean() - netD(real).mean()
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                if step % sample_every == 0:
                    with torch.no_grad():
                        grid = netG(fixed_noise)
                    wandb.log({"samples": wandb.Image(grid)}, step=step)
        """,
    ),
    Quiet(  # the prediction logged as an image is the one the loss backwards through
        """
        import torch.nn.functional as F
        import wandb


        def train_epoch(model, loader, optimizer):
            for step, (images, masks) in enumerate(loader):
                logits = model(images)
                loss = F.binary_cross_entropy_with_logits(logits, masks)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                if step % 100 == 0:
                    wandb.log({"prediction": wandb.Image(logits.sigmoid()), "loss": loss.item()})
        """,
    ),
    Quiet(  # the pipeline's text encoder and VAE are frozen; only the UNet's parameters are stepped
        """
        import torch
        import torch.nn.functional as F
        from diffusers import DDPMScheduler, StableDiffusionPipeline


        def train_unet(args, loader):
            pipe = StableDiffusionPipeline.from_pretrained(args.pretrained_model).to("cuda")
            pipe.text_encoder.requires_grad_(False)
            pipe.vae.requires_grad_(False)
            unet = pipe.unet
            unet.train()
            noise_scheduler = DDPMScheduler.from_config(pipe.scheduler.config)
            optimizer = torch.optim.AdamW(unet.parameters(), lr=args.learning_rate, weight_decay=args.weight_decay)
            for batch in loader:
                latents = pipe.vae.encode(batch["pixel_values"].to("cuda")).latent_dist.sample() * pipe.vae.config.scaling_factor
                noise = torch.randn_like(latents)
                timesteps = torch.randint(0, noise_scheduler.config.num_train_timesteps, (latents.shape[0],), device="cuda")
                prompt_embeds, _ = pipe.encode_prompt(batch["prompts"], "cuda", 1, False)
                loss = F.mse_loss(unet(noise_scheduler.add_noise(latents, noise, timesteps), timesteps, prompt_embeds).sample, noise)
                loss.backward()
                optimizer.step()
                optimizer.zero_grad()
        """,
    ),
    Quiet(  # the text encoder is trained with the UNet: the optimizer holds both
        """
        import itertools

        import torch
        import torch.nn.functional as F
        from diffusers import StableDiffusionPipeline


        def train_both(args, loader, noise_scheduler):
            pipe = StableDiffusionPipeline.from_pretrained(args.pretrained_model).to("cuda")
            optimizer = torch.optim.AdamW(itertools.chain(pipe.unet.parameters(), pipe.text_encoder.parameters()), lr=args.lr)
            for batch in loader:
                latents, noise, timesteps = batch["latents"], batch["noise"], batch["timesteps"]
                prompt_embeds, _ = pipe.encode_prompt(batch["prompts"], "cuda", 1, False)
                loss = F.mse_loss(pipe.unet(noise_scheduler.add_noise(latents, noise, timesteps), timesteps, prompt_embeds).sample, noise)
                loss.backward()
                optimizer.step()
                optimizer.zero_grad()
        """,
    ),
    Quiet(  # the loop's output is rebound in the other branch only: the list it was stored in is returned
        """
        import torch
        import torch.nn as nn


        class RegionEncoder(nn.Module):
            def __init__(self, channels, width, max_regions=64):
                super().__init__()
                self.stem = nn.Conv2d(channels, width, kernel_size=4, stride=4)
                self.norm = nn.LayerNorm(width)
                self.slots = nn.Parameter(torch.zeros(1, max_regions, width))

            def _tokens(self, crop):
                return self.norm(self.stem(crop).flatten(2).transpose(1, 2))

            def forward(self, crops, masks=None):
                if isinstance(crops, (list, tuple)):
                    masks = masks if masks is not None else [None] * len(crops)
                    encoded = []
                    for crop, mask in zip(crops, masks):
                        count = crop.shape[-1] // 4
                        crop = self._tokens(crop)
                        crop = crop + self.slots[:, :crop.shape[1]]
                        if mask is not None:
                            crop = crop * mask.unsqueeze(-1)
                        encoded.append(crop[:, :count * count])
                else:
                    encoded = self._tokens(crops) + self.slots[:, :1]
                return encoded
        """,
    ),
    Quiet(  # the stage's one caller, in another file, runs it under inference_mode()
        """
        from pipeline.base import Stage
        from tagger.data import batches_of
        from tagger.trainer import Trainer


        class TaggingStage(Stage):
            def _set_up(self, config):
                self._trainer = Trainer(config["model_path"], device=config["device"])

            def process(self, document):
                tags = []
                for batch in batches_of(document, self.config["batch_size"]):
                    tags += self.trainer.predict(batch)
                document.set_tags(tags)
                return document
        """,
        files={
            "tagger/trainer.py": """
                import torch

                from tagger.model import Tagger


                class Trainer:
                    def __init__(self, model_file, device="cpu"):
                        checkpoint = torch.load(model_file, map_location="cpu")
                        self.vocab = checkpoint["vocab"]
                        self.model = Tagger(len(self.vocab), checkpoint["hidden"]).to(device)
                        self.model.load_state_dict(checkpoint["model"])
                        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=1e-3)

                    def update(self, batch):
                        self.model.train()
                        loss = self.model.loss(batch["words"], batch["tags"])
                        loss.backward()
                        self.optimizer.step()
                        self.optimizer.zero_grad()
                        return loss.item()

                    def predict(self, batch):
                        self.model.eval()
                        scores = self.model(batch["words"], batch["chars"])
                        return [self.vocab.unmap(row) for row in scores.argmax(-1).tolist()]
            """,
            "tagger/model.py": """
                import torch.nn as nn
                import torch.nn.functional as F


                class Tagger(nn.Module):
                    def __init__(self, n_tags, hidden):
                        super().__init__()
                        self.embed = nn.EmbeddingBag(50000, hidden)
                        self.drop = nn.Dropout(0.3)
                        self.out = nn.Linear(hidden, n_tags)

                    def forward(self, words, chars):
                        return self.out(self.drop(self.embed(words)))

                    def loss(self, words, tags):
                        return F.cross_entropy(self(words, None), tags)
            """,
            "pipeline/base.py": """
                class Stage:
                    def __init__(self, config):
                        self.config = config
                        self._trainer = None
                        self._set_up(config)

                    def _set_up(self, config):
                        raise NotImplementedError

                    @property
                    def trainer(self):
                        return self._trainer
            """,
            "annotate.py": """
                import json
                import sys

                import torch

                from train import TaggingStage

                stage = TaggingStage(json.load(open(sys.argv[1])))
                with torch.inference_mode():
                    for line in open(sys.argv[2]):
                        print(stage.process(json.loads(line)))
            """,
        },
    ),
    Quiet(  # the predictor's pass: this file runs it under inference_mode(), and so does the trainer's validation elsewhere
        """
        import torch


        class VolumePredictor:
            def __init__(self, network, patch_size, device="cuda"):
                self.network = network
                self.patch_size = patch_size
                self.device = device

            def _windows(self, shape):
                step = self.patch_size // 2
                return [
                    (slice(None), slice(y, y + self.patch_size), slice(x, x + self.patch_size))
                    for y in range(0, shape[1] - self.patch_size + 1, step)
                    for x in range(0, shape[2] - self.patch_size + 1, step)
                ]

            def predict_volume_logits(self, volume, n_classes):
                self.network.eval()
                logits = torch.zeros((n_classes, *volume.shape[1:]), device=self.device)
                for window in self._windows(volume.shape):
                    logits[window] += self.network(volume[window][None].to(self.device))[0]
                return logits

            @torch.inference_mode()
            def predict_files(self, volumes, n_classes):
                return [self.predict_volume_logits(volume, n_classes).argmax(0).cpu() for volume in volumes]
        """,
        files={
            "segtrain/trainer.py": """
                import numpy as np
                import torch

                from segtrain.network import build_unet
                from train import VolumePredictor


                class SegmentationTrainer:
                    def __init__(self, config):
                        self.config = config
                        self.network = build_unet(config["channels"], config["classes"]).cuda()
                        self.optimizer = torch.optim.SGD(self.network.parameters(), lr=config["lr"], momentum=0.99)

                    def run_final_validation(self, cases, out_dir):
                        predictor = VolumePredictor(self.network, self.config["patch_size"])
                        for name, volume in cases:
                            with torch.no_grad():
                                logits = predictor.predict_volume_logits(volume, self.config["classes"])
                            np.save(f"{out_dir}/{name}.npy", logits.argmax(0).cpu().numpy())
            """,
        },
    ),
    Quiet(  # the scoring function runs under no_grad
        """
        import torch
        import torch.nn.functional as F

        from nets import ConvNet


        @torch.no_grad()
        def score(net, batches, loss_fn):
            net.eval()
            total, hits = 0.0, 0
            for inputs, targets in batches:
                outputs = net(inputs)
                total += loss_fn(outputs, targets).item()
                hits += (outputs.argmax(1) == targets).sum().item()
            net.train()
            return total / len(batches), hits


        def fit(net, batches, held_out, rounds):
            opt = torch.optim.SGD(net.parameters(), lr=0.1)
            for _ in range(rounds):
                for inputs, targets in batches:
                    opt.zero_grad()
                    F.cross_entropy(net(inputs), targets).backward()
                    opt.step()
                print(score(net, held_out, F.cross_entropy))


        fit(ConvNet(), train_batches, dev_batches, 5)
        """,
        files={
            "nets.py": """
            from torch import nn


            class ConvNet(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.body = nn.Sequential(nn.Conv2d(3, 8, 3), nn.ReLU(), nn.Flatten(), nn.LazyLinear(10))

                def forward(self, x):
                    return self.body(x)
            """,
        },
    ),
    Quiet(  # the pass with no caller in view, under no_grad
        """
        import torch


        @torch.no_grad()
        def score(net, batches, loss_fn):
            net.eval()
            total, hits = 0.0, 0
            for inputs, targets in batches:
                outputs = net(inputs)
                total += loss_fn(outputs, targets).item()
                hits += (outputs.argmax(1) == targets).sum().item()
            net.train()
            return total / len(batches), hits
        """,
    ),
    Quiet(  # the rollout helper runs the model it is handed without grad
        """
        import torch

        from nets import ConvNet


        def collect(env, pick, steps):
            state = env.reset()
            memory = []
            for _ in range(steps):
                with torch.no_grad():
                    choice = pick(torch.as_tensor(state, dtype=torch.float32)).argmax().item()
                state, reward, done = env.step(choice)
                memory.append((state, choice, reward))
            return memory


        def fit(env, rounds):
            agent = ConvNet()
            opt = torch.optim.Adam(agent.parameters(), lr=1e-3)
            for _ in range(rounds):
                memory = collect(env, agent, 200)
                opt.zero_grad()
                agent.loss(memory).backward()
                opt.step()
        """,
        files={
            "nets.py": """
            from torch import nn


            class ConvNet(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.body = nn.Sequential(nn.Conv2d(3, 8, 3), nn.ReLU(), nn.Flatten(), nn.LazyLinear(10))

                def forward(self, x):
                    return self.body(x)
            """,
        },
    ),
)
