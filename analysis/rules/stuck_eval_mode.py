"""The model is switched to eval mode inside the training loop and never switched back.

`model.eval()` turns dropout off and makes batch-norm normalise with its frozen running
statistics. Called for a validation pass inside the epoch loop (directly, or in a
`validate()`/`evaluate()` helper), it stays in force until something calls `model.train()`.
If nothing does, every epoch after the first validation trains without dropout and with
batch-norm statistics that no longer update: the model overfits or converges to something
worse, and nothing in the logs says why. The compute for those epochs is wasted. A step helper's
backward that the call after the switch rules out (`apply_model_and_loss(x, y, backward=False)`, or
`if self.phase != "train": return` after the caller set `self.phase = "valid"`: analysis/helper_branches.py)
is no training step: that call is the evaluation itself.

The same holds for a model that starts in eval mode: transformers' and diffusers' `from_pretrained`
return the model with `.eval()` already called, so a hand-written fine-tuning loop that never calls
`model.train()` trains with dropout off from its first step (reported when the library documents
dropout for that architecture, e.g. BERT's `hidden_dropout_prob=0.1`), whether the loop is in the
same file or in a training helper another file hands the loaded model to.

Under a Hugging Face `Trainer`, the library's `training_step` calls `model.train()` and then the
subclass's `_prepare_inputs` before computing the loss: an override that generates there (an online RL
trainer's completions through `generate_batch`, which leaves the model in eval mode) or scores with
`.eval()`, and does not switch back, makes every step's loss run in eval mode; so does an overriding
`training_step` that does it before its own backward (reported as a warning: the facts are the
libraries', `TRAINER_STEP_HOOKS` and `MODEL_UNWRAPPERS` in analysis/libraries.py).

How to fix: call `model.train()` at the start of each epoch (or of `train_one_epoch()`), or at
the end of the validation helper, so the next training step always runs in training mode.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TypeGuard

import libcst as cst

from trainlint.analysis.callers import callers_elsewhere
from trainlint.analysis.events import modules_looped_over
from trainlint.analysis.helper_branches import runs_as_called
from trainlint.analysis.libraries import LIBRARY_EVAL_METHODS, MODEL_UNWRAPPERS, TRAINER_STEP_HOOKS, ModeFact
from trainlint.analysis.library_models import library_model_facts
from trainlint.analysis.torchapi import NO_GRAD_CONTEXTS
from trainlint.rules import (
    AssignEvent,
    CallEvent,
    Event,
    Evidence,
    Fires,
    JumpEvent,
    Loop,
    Quiet,
    Rule,
    RuleContext,
    ScopeAnalysis,
    Severity,
    Tag,
    dotted,
    is_backward,
    is_optimizer_step,
    last_part,
    ordered_events,
    walk,
    written,
)

Item = tuple[int, Event, tuple[CallEvent, ...]]

# The attributes under which a transformers Trainer holds the model it trains (wrapped or not).
_TRAINER_MODELS = frozenset({"self.model", "self.model_wrapped"})
_WRAPPERS = re.compile(r"^self\.|(?:\.module|\._orig_mod)+$")


def _needed(event: Event) -> bool:
    """What every finding needs: a switch to eval mode, or the optimizer step of a loop that trains."""
    return _sets_eval(event) or (isinstance(event, CallEvent) and is_optimizer_step(event))


class StuckEvalMode(Rule):
    code = "TL205"
    name = "stuck-eval-mode"
    severity = Severity.ERROR
    scope_needs = _needed

    def check_scope(self, ctx: RuleContext, scope: ScopeAnalysis) -> None:
        if ctx.module.framework_runs_loop is not None:
            if ctx.module.uses_hf_trainer:
                self._check_trainer_hook(ctx, scope)
            return
        items = [(index, event, chain) for index, (event, chain) in enumerate(ordered_events(scope, None))]
        reported: set[Loop] = set()
        for index, event, chain in items:
            if not _sets_eval(event):
                continue
            # `for net in (self.G, self.D): net.eval()`: a switch of each module the loop names, not a loop over data
            looped = modules_looped_over(event)
            own_loops = [loop for loop in event.context.loops if looped is None or loop is not looped[0]]
            if chain and (own_loops or any(link.context.loops for link in chain[1:])):
                continue
            for switched in looped[1] if looped is not None else (_receiver_key(event),):
                key = _outer_key(switched, chain)
                site = chain[0] if chain else event
                found = _training_loop(items, site, key) if key is not None else None
                if found is None or found[0] in reported or _runs_on_last_iteration(event, chain, found[0]):
                    continue
                loop, in_loop, forward = found
                assert key is not None, "a training loop is looked for with a key only"
                step = _next_training_step(in_loop, index, event, chain, loop)
                if step is not None and not _frozen_by_its_class(ctx, forward) and not _parameters_frozen(scope, key):
                    reported.add(loop)
                    self._report(ctx, event, chain, key, loop, step, forward)
        if not reported:
            self._check_loaded_in_eval_mode(ctx, scope, items)

    def _check_trainer_hook(self, ctx: RuleContext, scope: ScopeAnalysis) -> None:
        """A trainer subclass's override of a method the library's training step calls between switching the model
        to training mode and computing the loss (``_prepare_inputs``: an online RL trainer generates its completions
        there, ``TRAINER_STEP_HOOKS``) that leaves the trained model in eval mode (``.eval()``, a library method such
        as ``generate_batch``) and does not switch it back: every step's loss is computed with dropout off. The
        model is the trainer's (``self.model``, ``self.model_wrapped``) or what an unwrapping context yields for it
        (``MODEL_UNWRAPPERS``)."""
        function = scope.function
        if function is None or function.owner is None or function.name not in TRAINER_STEP_HOOKS or not function.owner.bases:
            return
        items = list(ordered_events(scope, None))
        hook_model = "model" if function.name == "training_step" and "model" in scope.params else None
        for index, (event, chain) in enumerate(items):
            if not _sets_eval(event):
                continue
            model = _trainer_model(event, chain, hook_model)
            if model is None:
                continue
            later = [item for item, _ in items[index + 1:]]
            until = next((position for position, item in enumerate(later) if _sets_train(item)), len(later))
            if function.name == "training_step" and not any(isinstance(item, CallEvent) and is_backward(item) for item in later[:until]):
                continue  # the step's own backward runs after a switch back to training mode, or not at all
            if function.name != "training_step" and until < len(later):
                return
            switched = (f"leaves `{model}` in eval mode: {LIBRARY_EVAL_METHODS[event.method]}" if event.method in LIBRARY_EVAL_METHODS
                        else f"switches `{model}` to eval mode")
            site = chain[0] if chain else event
            ctx.report(
                event.node,
                f"`{_code(event)}` {switched.partition(':')[0]} inside `{function.owner.name}.{function.name}`, "
                + ("the step the trainer runs for every batch, before its backward" if function.name == "training_step" else
                   "which the trainer's training step calls after `model.train()` and before it computes the loss")
                + "; nothing switches it back, so every step's loss is computed with dropout off and batch-norm frozen",
                severity=Severity.WARNING,
                evidence=[
                    ((event.chunk, event.node), switched),
                    ((scope.chunk, function.node.name), f"`{function.name}`: {TRAINER_STEP_HOOKS[function.name]}"),
                    ((site.chunk, site.node), f"`{function.name}` calls `{_code(site)}`, which switches to eval mode") if chain else None,
                ],
                chunk=event.chunk,
                help=f"call `{model}.train()` after it (before `{function.name}` returns)",
            )
            return

    def _check_loaded_in_eval_mode(self, ctx: RuleContext, scope: ScopeAnalysis, items: list[Item]) -> None:
        """A model that ``from_pretrained`` returned in eval mode is trained by a loop, and nothing switches it
        to training mode: every step runs with its dropout off."""
        for _, event, chain in items:
            if chain or not _is_forward(event) or event.context.grad_off is not None or not event.context.loops:
                continue
            key = event.receiver_key
            loaded = _loaded_in_eval_mode(ctx, scope, event)
            handed = loaded is None and _handed_from_another_file(ctx, scope, event)
            found = _training_loop(items, event, key) if key is not None and (loaded is not None or handed) else None
            if found is not None and handed:
                loaded = _loaded_elsewhere(ctx, scope, event)  # the other files last: asked for a loop that trains
            if found is None or loaded is None or key is None:
                continue
            loop, in_loop, forward = found
            if _parameters_frozen(scope, key) or not (handed or _optimized(ctx, scope, event)) or _frozen_by_its_class(ctx, forward):
                continue
            if _may_switch_to_training(ctx, items, key, loaded[0]):
                continue  # this model may be switched; another the loop trains (a second encoder) may not
            step = next(item for _, item, _ in in_loop if _is_training_step(item))
            site, mode, layers = loaded
            message = (
                f"`{key}` is trained by the loop on line {ctx.line_of((scope.chunk, loop.node))} in eval mode: "
                f"{mode.says} (line {ctx.line_of(site)}), and nothing calls `{key}.train()`, so every step runs with "
                f"its dropout off ({layers.says})"
            )
            ctx.report(
                forward.node, message,
                evidence=[
                    (site, f"{mode.says}; {mode.source}"),
                    (site, f"{layers.says}; {layers.source}"),
                    ((forward.chunk, forward.node), f"`{key}` runs with grad enabled here"),
                    ((step.chunk, step.node), "a training step, in eval mode"),
                ],
                help=f"call `{key}.train()` before the training loop (and after each evaluation inside it)",
            )
            return

    def _report(self, ctx: RuleContext, event: CallEvent, chain, key: str, loop: Loop, step: tuple[Event, bool], forward: CallEvent) -> None:
        site = chain[0] if chain else event
        training_step, wrapped = step
        reached = "called" if len(chain) == 1 else "reached through the call"
        through = f" (in `{_code(chain[-1])}`, {reached} on line {ctx.line_of((site.chunk, site.node))})" if chain else ""
        when = "in the next iteration" if wrapped else "later in the same iteration"
        message = (
            f"`{_code(event)}`{through} puts `{key}` in eval mode inside the loop on line "
            f"{ctx.line_of((site.chunk, loop.node))}, and no `.train()` runs before the next training step, "
            f"`{_code(training_step)}` on line {ctx.line_of((training_step.chunk, training_step.node))} {when}: "
            f"dropout stays off and batch-norm stops updating its statistics for the rest of training"
        )
        switched = f"`{key}` switched to eval mode"
        if event.method in LIBRARY_EVAL_METHODS:
            switched = f"`{key}` left in eval mode: {LIBRARY_EVAL_METHODS[event.method]}"
        evidence = [
            ((event.chunk, event.node), switched),
            ((forward.chunk, forward.node), f"`{key}` is the model being trained: it runs with grad enabled here"),
            ((training_step.chunk, training_step.node), "the next training step, still in eval mode"),
            ((site.chunk, loop.node), "the training loop"),
        ]
        if chain:
            evidence.append(((site.chunk, site.node), f"the loop calls `{_code(site)}`, which switches to eval mode"))
        block = next((condition for condition in site.context.conditions if condition.loop is loop), None)
        if block is not None:  # a periodic evaluation: where its block ends is where the mode should be restored
            end = site.chunk.range_of(block.node)[2]
            origin = site.chunk.origin if ctx.in_another_file(site.chunk) else None
            evidence.append(Evidence(end, f"the evaluation block ends here, with `{key}` still in eval mode", origin))
        placed = site if ctx.in_another_file(event.chunk) else event  # the helper is in another file: its call site
        ctx.report(
            placed.node, message, evidence=evidence, chunk=placed.chunk,
            help=f"call `{key}.train()` at the start of each epoch or training step (or at the end of the evaluation helper)",
        )


def _loaded_in_eval_mode(ctx: RuleContext, scope: ScopeAnalysis, forward: CallEvent) -> tuple[tuple, ModeFact, ModeFact] | None:
    """Where the model ``forward`` runs was loaded in eval mode, what says so, and what in it acts
    differently in training mode; None unless the library documents both (for a parameter: for what
    every call in this file passes)."""
    receiver, function = forward.receiver, scope.function
    if receiver is None:
        return None
    values = [receiver]
    if receiver.detail is None and function is not None and forward.receiver_key in scope.params:
        values = [value for _, value in ctx.module.arguments_for(function, forward.receiver_key) or []]
    found = [(value.site, *library_model_facts(value, ctx.module)) for value in values]
    if not found or any(mode is None or layers is None or site is None for site, mode, layers in found):
        return None
    return found[0]  # type: ignore[return-value]  # checked above: no None in it


def _trainer_model(event: CallEvent, chain: tuple[CallEvent, ...], hook_model: str | None) -> str | None:
    """The trainer's own model that ``event`` switches, as the hook names it (``self.model``, ``self.model_wrapped``,
    or ``hook_model``, the model a ``training_step`` is handed), directly, through the methods it calls, or through
    the name a ``with`` over an unwrapping context binds for it (``MODEL_UNWRAPPERS``)."""
    key = _receiver_key(event)
    if key is None:
        return None
    unwrapped = _unwrapped_by(event.scope, key) if "." not in key else None
    outer = _outer_key(unwrapped or key, chain)
    return outer if outer is not None and (outer in _TRAINER_MODELS or outer == hook_model) else None


def _unwrapped_by(scope: ScopeAnalysis, name: str) -> str | None:
    """What a ``with unwrap_model_for_generation(model, ...) as name:`` of the scope's function unwraps."""
    function = scope.function
    if function is None:
        return None
    for node in walk(function.node.body):
        for item in node.items if isinstance(node, cst.With) else ():
            call = item.item
            if not (isinstance(call, cst.Call) and item.asname is not None and isinstance(item.asname.name, cst.Name)
                    and item.asname.name.value == name and call.args):
                continue
            raw = dotted(call.func)
            if raw is not None and _library_name(scope.summary, raw) in MODEL_UNWRAPPERS:
                return dotted(call.args[0].value)
    return None


def _library_name(summary, raw: str) -> str:
    """The canonical dotted name of what ``raw`` calls, a relative import inside the library's own tree
    (``..models.unwrap_model_for_generation`` in trl's trainers) named by the workspace file that defines it."""
    canonical = summary.canonical(raw)
    if not canonical.startswith("."):
        return canonical
    found = summary.imported_function(raw)
    workspace = summary.workspace
    if found is None or found.home is None or found.home.path is None or workspace is None:
        return canonical
    path = Path(found.home.path).resolve()
    for root in workspace.roots:
        if path.is_relative_to(Path(root).resolve()):
            return ".".join((*path.relative_to(Path(root).resolve()).with_suffix("").parts, found.name))
    return canonical


def _handed_from_another_file(ctx: RuleContext, scope: ScopeAnalysis, forward: CallEvent) -> bool:
    """``forward`` runs a parameter of a function that no call in this file passes anything for (a training helper
    in ``engine.py`` that ``main.py`` hands the model to): what it runs is decided by the callers in other files."""
    function, key = scope.function, forward.receiver_key
    return (function is not None and key in scope.params and forward.receiver is not None and forward.receiver.detail is None
            and not ctx.module.arguments_for(function, key))


def _loaded_elsewhere(ctx: RuleContext, scope: ScopeAnalysis, forward: CallEvent) -> tuple[tuple, ModeFact, ModeFact] | None:
    """For a training helper handed its model by other files: where the model was loaded in eval mode, what says so,
    and what in it acts differently in training mode, when every such call passes a model ``from_pretrained``
    returned, whose parameters the caller's file optimizes and that nothing there switches to training mode."""
    function, key = scope.function, forward.receiver_key
    assert function is not None and key is not None, "_handed_from_another_file checked both"

    def read(module, call: CallEvent) -> tuple[tuple, ModeFact, ModeFact] | None:
        if call.function is None:
            return None  # a method's name on an object of unknown class (`net.train()` beside `LocalUpdate.train(net)`)
        argument = _argument_for(call, key)
        name = (dotted(argument) or "").rpartition(".")[2] if argument is not None else ""
        value = call.kwargs.get(key) if key in call.kwargs else _positional_value(call, function, key)
        if not name or value is None or value.site is None:
            return None
        mode, layers = library_model_facts(value, module)
        if mode is None or layers is None or not re.search(rf"\b{re.escape(name)}\.(?:named_)?parameters\(", module.text):
            return None
        if any(other.method == "train" and (other.receiver_key or "").rpartition(".")[2] == name for other in module.all_calls()):
            return None
        return value.site, mode, layers

    found = callers_elsewhere(ctx.summary, function, read)
    if not found or any(item is None for item in found):
        return None
    return found[0]


def _positional_value(call: CallEvent, function, parameter: str):
    """The value a call passes by position for ``parameter`` of ``function``, or None."""
    params = [p.name.value for p in (*function.node.params.posonly_params, *function.node.params.params)]
    positional = [arg for arg in call.arg_nodes if arg.keyword is None and not arg.star]
    if parameter not in params or params.index(parameter) >= len(positional) or len(positional) > len(call.args):
        return None
    return call.args[params.index(parameter)]


def _may_switch_to_training(ctx, items: list[Item], key: str, site: tuple) -> bool:
    """A ``.train()`` in this file that may reach the model: on its name, or on something not known to be
    another model (a loop over ``models``, an alias); or a helper we cannot see named ``train...``."""
    wanted = key.rpartition(".")[2]
    for call in ctx.module.all_calls():
        if call.method != "train" or _false_mode(call):
            continue
        other = call.receiver
        if (call.receiver_key or "").rpartition(".")[2] == wanted:
            return True
        if other is None or Tag.MODEL not in other.tags or other.site is None or other.site == site:
            return True  # not known to be another model
    return any(_sets_train(event) and event.method != "train" for _, event, _ in items)


def _optimized(ctx, scope: ScopeAnalysis, forward: CallEvent) -> bool:
    """The model's parameters are handed to something in this file (``AdamW(model.parameters())``, or the
    grouped ``model.named_parameters()`` of a fine-tuning script): it is the model being trained, not a
    frozen teacher or feature extractor that runs with grad on."""
    names = {(forward.receiver_key or "").rpartition(".")[2]}
    if scope.function is not None and forward.receiver_key in scope.params:
        for call, _ in ctx.module.arguments_for(scope.function, forward.receiver_key) or []:
            argument = _argument_for(call, forward.receiver_key) if call.function is not None else None
            names.add((dotted(argument) or "").rpartition(".")[2] if argument is not None else "")
    names.discard("")
    return any(re.search(rf"\b{re.escape(name)}\.(?:named_)?parameters\(", ctx.module.text) for name in names)


def _sets_eval(event: Event) -> TypeGuard[CallEvent]:
    """``m.eval()``, ``m.train(False)``, or a library method that leaves its model in eval mode
    (``model.generate_batch(...)``, ``LIBRARY_EVAL_METHODS``)."""
    if not isinstance(event, CallEvent) or _receiver_key(event) is None:
        return False
    if event.method == "eval":
        return not event.arg_nodes
    if event.method in LIBRARY_EVAL_METHODS:
        return event.function is None  # the project's own method of that name is not the library's
    return event.method == "train" and _false_mode(event)


def _sets_train(event: Event) -> TypeGuard[CallEvent]:
    """Any ``.train()`` (conditional or not, whatever its receiver), or a helper or method named ``train...`` we
    cannot see, which may call it."""
    if not isinstance(event, CallEvent):
        return False
    if event.method == "train":
        return not _false_mode(event)
    if event.function is None and event.method is not None and event.method.startswith("train"):
        return True  # `discriminator.train_custom()`, a method we cannot see that may switch its layers back
    return event.function is None and event.callee is not None and last_part(event.callee).startswith("train")


def _false_mode(call: CallEvent) -> bool:
    mode = call.keyword("mode") or next((arg for arg in call.arg_nodes if arg.keyword is None), None)
    return mode is not None and isinstance(mode.value, cst.Name) and mode.value.value == "False"


def _receiver_key(call: CallEvent) -> str | None:
    if call.receiver_key is not None:
        return call.receiver_key
    return dotted(call.node.func.value) if isinstance(call.node.func, cst.Attribute) else None


def _outer_key(key: str | None, chain: tuple[CallEvent, ...]) -> str | None:
    """What ``key`` inside the called functions is called at the outermost call site (``net`` → ``model``)."""
    for call in reversed(chain):
        if key is None:
            return None
        root, dot, rest = key.partition(".")
        attribute = _alias_of_attribute(call, root)
        if attribute is not None:  # `model = self.model` in the helper: the object's own model
            key, root, dot, rest = f"self.{attribute}{dot}{rest}", "self", ".", attribute + dot + rest
        if root == "self":
            if call.receiver_key != "self":
                # a method of another object: its ``self`` is ours only where its constructor was handed ours
                attribute, _, further = rest.partition(".")
                passed = _passed_at_construction(call, attribute)
                outer = dotted(passed) if passed is not None else None
                if outer is None:
                    return None
                key = outer + ("." + further if further else "")
            continue
        argument = _argument_for(call, root)
        if argument is not None:
            outer = dotted(argument)
            key = None if outer is None else outer + dot + rest
        elif _binds_locally(call, root):
            return None  # the helper's own model (cleanrl's `evaluate` builds one from a checkpoint), not ours
    return key


def _passed_at_construction(call: CallEvent, attribute: str) -> cst.BaseExpression | None:
    """For ``evaluator.get_scores()`` where the caller bound ``evaluator = Evaluator(self.model, ...)``: what
    the construction passes for the ``__init__`` parameter that ``self.<attribute>`` is bound from."""
    function = call.function
    assert function is not None, "a call of the chain that ordered_events followed into a local function"
    binding = call.scope.last_binding(call.receiver_key, before=call) if call.receiver_key else None
    built = binding.value_node if binding is not None else None
    owner = function.owner
    init = owner.find_method("__init__", call.scope.summary) if owner is not None else None
    analysis = init.analysis(call.scope.summary) if init is not None else None
    if not isinstance(built, cst.Call) or init is None or analysis is None:
        return None
    bound = [event for event in analysis.events if isinstance(event, AssignEvent) and event.targets == (f"self.{attribute}",)]
    if len(bound) != 1 or not isinstance(bound[0].value_node, cst.Name) or bound[0].value_node.value not in analysis.params:
        return None
    parameter = bound[0].value_node.value
    for arg in built.args:
        if arg.keyword is not None and arg.keyword.value == parameter:
            return arg.value
    names = init.positional_parameters
    positional = [arg for arg in built.args if arg.keyword is None and not arg.star]
    if parameter in names and names.index(parameter) < len(positional) and not any(arg.star for arg in built.args):
        return positional[names.index(parameter)].value
    return None


def _alias_of_attribute(call: CallEvent, name: str) -> str | None:
    """The attribute of ``self`` that the function ``call`` runs binds ``name`` to (``model = self.model``,
    simpletransformers' ``evaluate``), when each of its bindings is that attribute or a wrapper of the name
    itself (``model = torch.nn.DataParallel(model)``, ``model = model.to(device)``), which shares the
    module's mode: the name is then the object's model under a local name."""
    assert call.function is not None, "a call of the chain that ordered_events followed into a local function"
    callee = call.function.analysis(call.scope.summary)
    if callee is None or name == "self":
        return None
    attributes: set[str] = set()
    for event in callee.events:
        if not isinstance(event, AssignEvent) or name not in event.targets:
            continue
        if event.targets != (name,):
            return None  # unpacked from something else
        value = event.value_node
        written = dotted(value) if value is not None else None
        if written is not None and written.startswith("self.") and written.count(".") == 1:
            attributes.add(written.partition(".")[2])
        elif not _wraps_name(value, name):
            return None
    return attributes.pop() if len(attributes) == 1 else None


def _wraps_name(value: cst.BaseExpression | None, name: str) -> bool:
    """``Wrapper(name, ...)`` or ``name.method(...)``: the same module, wrapped or moved."""
    if not isinstance(value, cst.Call):
        return False
    if isinstance(value.func, cst.Attribute) and isinstance(value.func.value, cst.Name) and value.func.value.value == name:
        return True
    first = value.args[0] if value.args else None
    return first is not None and first.keyword is None and isinstance(first.value, cst.Name) and first.value.value == name


def _binds_locally(call: CallEvent, name: str) -> bool:
    """The function ``call`` runs assigns ``name`` itself: a local of its own, not the caller's object."""
    assert call.function is not None, "a call of the chain that ordered_events followed into a local function"
    callee = call.function.analysis(call.scope.summary)
    return callee is not None and any(isinstance(event, AssignEvent) and name in event.targets for event in callee.events)


def _argument_for(call: CallEvent, parameter: str) -> cst.BaseExpression | None:
    """The expression the call passes for ``parameter`` of the local function it runs."""
    assert call.function is not None, "a call of the chain that ordered_events followed into a local function"
    names = call.function.positional_parameters
    for arg in call.arg_nodes:
        if arg.keyword is not None and arg.keyword.value == parameter:
            return arg.value
    positional = [arg for arg in call.arg_nodes if arg.keyword is None and not arg.star]
    if parameter in names and names.index(parameter) < len(positional):
        return positional[names.index(parameter)].value
    return None


def _normalised(key: str) -> str:
    return _WRAPPERS.sub("", key)


def _training_loop(items: list[Item], site: Event, key: str) -> tuple[Loop, list[Item], CallEvent] | None:
    """The innermost loop around ``site`` that trains ``key``: it runs a backward or an optimizer step,
    and a forward of ``key`` with grad enabled."""
    wanted = _normalised(key)
    for loop in reversed(site.context.loops):
        in_loop = [(i, event, chain) for i, event, chain in items if loop in (chain[0] if chain else event).context.loops]
        if not any(_is_training_step(event) and runs_as_called(event, chain) for _, event, chain in in_loop):
            continue
        if not any(isinstance(event, CallEvent) and is_optimizer_step(event) for _, event, _ in in_loop):
            return None  # backward without a step: gradients for importance scores or saliency, nothing trains
        forward = next(
            (event for _, event, chain in in_loop if _is_forward(event) and all(link.context.grad_off is None for link in (*chain, event))
             and _normalised(_outer_key(event.receiver_key, chain) or "") == wanted),
            None,
        )
        return (loop, in_loop, forward) if forward is not None else None
    return None


def _frozen_by_its_class(ctx: RuleContext, forward: CallEvent) -> bool:
    """The model is built from a class whose ``forward`` runs entirely without grad (a frozen feature
    extractor: ``with torch.inference_mode(): return self.backbone(x)``): no gradient reaches it, so
    eval mode is where it belongs, and the model being trained is another one (dinov2's linear
    evaluation trains classifiers on such a wrapper's features). Built in the loop's function, or
    passed to it by every call of that function in this file."""
    receiver, function = forward.receiver, forward.scope.function
    if receiver is None or receiver.site is None:
        return False
    if isinstance(receiver.site[1], cst.Call):
        return _constructs_a_frozen_model(ctx, receiver.site[1])
    if not isinstance(receiver.site[1], cst.Param) or function is None:
        return False
    passed = ctx.module.arguments_for(function, receiver.site[1].name.value)
    return bool(passed) and all(value.site is not None and _constructs_a_frozen_model(ctx, value.site[1]) for _, value in passed)


def _parameters_frozen(scope, key: str) -> bool:
    """The function froze the model's parameters before training (``for name, param in
    model.named_parameters(): ... param.requires_grad = False``, or ``model.requires_grad_(False)``):
    the linear-evaluation protocol of MoCo and SimSiam, which keeps the model in eval mode on
    purpose so that batch-norm's statistics of the frozen layers do not move."""
    wanted = _normalised(key)
    for event in scope.events:
        if isinstance(event, CallEvent) and event.method == "requires_grad_" and _normalised(event.receiver_key or "") == wanted:
            if event.arg_nodes and isinstance(event.arg_nodes[0].value, cst.Name) and event.arg_nodes[0].value.value == "False":
                return True
        if not isinstance(event, AssignEvent) or len(event.targets) != 1 or not event.targets[0].endswith(".requires_grad"):
            continue
        if not (isinstance(event.value_node, cst.Name) and event.value_node.value == "False"):
            continue
        parameter = event.targets[0][: -len(".requires_grad")]
        if any(
            parameter in loop.targets and re.match(rf"{re.escape(key)}\.(?:named_)?parameters\(", loop.iterable_text)
            for loop in event.context.loops
        ):
            return True
    return False


def _constructs_a_frozen_model(ctx: RuleContext, expression: cst.CSTNode | None) -> bool:
    if not isinstance(expression, cst.Call):
        return False
    name = dotted(expression.func)
    info = ctx.summary.local_class(ctx.summary.canonical(name)) if name else None
    forward = info.methods.get("forward") if info is not None else None
    scope = forward.analysis(ctx.summary) if forward is not None else None
    if scope is None:
        return False
    calls = list(scope.calls())
    under_no_grad = [call for call in calls if call.context.grad_off is not None]
    # the with-statement's own `torch.inference_mode()` is called before grad is off
    return bool(under_no_grad) and all(call.context.grad_off is not None or _is_no_grad_context(ctx, call) for call in calls)


def _is_no_grad_context(ctx: RuleContext, call: CallEvent) -> bool:
    return call.callee is not None and last_part(call.callee) in NO_GRAD_CONTEXTS and call.callee.startswith("torch.")


def _is_forward(event: Event) -> TypeGuard[CallEvent]:
    if not isinstance(event, CallEvent) or event.receiver_key is None or event.function is not None:
        return False
    if event.receiver is not None and Tag.CRITERION in event.receiver.tags:
        return False
    return event.method is None or (event.method == "forward" and event.receiver is not None and Tag.MODEL in event.receiver.tags)


def _is_training_step(event: Event) -> TypeGuard[CallEvent]:
    return isinstance(event, CallEvent) and (
        (is_backward(event) and event.callee != "torch.autograd.grad") or is_optimizer_step(event)
    )


def _runs_on_last_iteration(event: Event, chain, loop: Loop) -> bool:
    """Under ``if epoch == epochs - 1``: an equality test picks out single iterations, often the last one."""
    first, *rest = (*chain, event)
    guarded = [(first.chunk, c) for c in first.context.conditions_inside(loop)]
    guarded += [(link.chunk, c) for link in rest for c in link.context.conditions]
    return any(
        condition.branch == "if" and isinstance(condition.test, cst.Comparison)
        and any(isinstance(target.operator, cst.Equal) for target in condition.test.comparisons)
        and "%" not in chunk.code_for(condition.test)
        for chunk, condition in guarded
    )


def _next_training_step(in_loop: list[Item], index: int, eval_call: CallEvent, chain, loop: Loop) -> tuple[Event, bool] | None:
    """The training step that runs next after ``eval_call``, reading on to the end of the loop body and
    wrapping round to its start; None when a ``.train()`` or a way out of the loop comes first."""
    site = chain[0] if chain else eval_call
    site_conditions = site.context.conditions_inside(loop)
    after = [(item, False) for item in in_loop if item[0] > index]
    before = [(item, True) for item in in_loop if item[0] < index]
    for (_, event, event_chain), wrapped in (*after, *before):
        if _sets_train(event):
            return None
        if not wrapped and not event_chain and _leaves_loop(event, loop, site_conditions):
            return None
        if _is_training_step(event) and runs_as_called(event, event_chain):  # not a helper's `if backward:` told False
            return event, wrapped
    return None


def _leaves_loop(event: Event, loop: Loop, site_conditions) -> bool:
    """A ``break``/``return``/``raise`` that runs whenever the eval call ran: no next iteration follows."""
    if not isinstance(event, JumpEvent) or event.kind == "continue":
        return False
    if event.kind == "break" and event.context.loop is not loop:
        return False
    return all(condition in site_conditions for condition in event.context.conditions_inside(loop))


def _code(event: Event, limit: int = 60) -> str:
    return written(event, limit)


StuckEvalMode.MUST_FIRE = (
    Fires(  # a sampling method switches both networks to eval through a loop over them and never back; the loop calls it every 500 steps
        """
        import torch
        import torch.nn.functional as F
        from torchvision.utils import save_image

        from nets import Critic, Generator


        class AdversarialTrainer:
            def __init__(self, loader, device="cuda"):
                self.generator = Generator().to(device)
                self.critic = Critic().to(device)
                self.opt_g = torch.optim.Adam(self.generator.parameters(), lr=2e-4)
                self.opt_c = torch.optim.Adam(self.critic.parameters(), lr=2e-4)
                self.loader = loader
                self.device = device
                self.fixed_z = torch.randn(64, 64, device=device)

            @torch.no_grad()
            def snapshot(self, step):
                for net in (self.generator, self.critic):
                    net.eval()
                save_image(self.generator(self.fixed_z).view(-1, 1, 28, 28), f"step_{step}.png")

            def fit(self):
                self.generator.train()
                self.critic.train()
                for step, (real, _) in enumerate(self.loader):
                    real = real.flatten(1).to(self.device)
                    fake = self.generator(torch.randn(real.size(0), 64, device=self.device))
                    critic_loss = F.softplus(self.critic(fake.detach())).mean() + F.softplus(-self.critic(real)).mean()
                    self.opt_c.zero_grad()
                    critic_loss.backward()
                    self.opt_c.step()
                    generator_loss = F.softplus(-self.critic(fake)).mean()
                    self.opt_g.zero_grad()
                    generator_loss.backward()
                    self.opt_g.step()
                    if step % 500 == 0:
                        self.snapshot(step)
        """,
        files={"nets.py": """
            import torch.nn as nn


            class Generator(nn.Module):
                def __init__(self, latent=64):
                    super().__init__()
                    self.net = nn.Sequential(nn.Linear(latent, 256), nn.BatchNorm1d(256), nn.ReLU(), nn.Linear(256, 784), nn.Tanh())

                def forward(self, z):
                    return self.net(z)


            class Critic(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.net = nn.Sequential(nn.Linear(784, 256), nn.LeakyReLU(0.2), nn.Dropout(0.3), nn.Linear(256, 1))

                def forward(self, x):
                    return self.net(x)
            """},
        at="net.eval()",
    ),
    Fires(  # a training helper that another file hands the model `from_pretrained` returned
        """
        def train_one_epoch(model, loader, optimizer, scheduler):
            for batch in loader:
                loss = model(**batch).loss
                loss.backward()
                optimizer.step()
                scheduler.step()
                optimizer.zero_grad()
        """,
        files={
            "main.py": """
                import torch
                from transformers import AutoModelForSequenceClassification, get_linear_schedule_with_warmup

                from train import train_one_epoch


                def main(train_loader, epochs=3):
                    model = AutoModelForSequenceClassification.from_pretrained("bert-base-uncased", num_labels=2)
                    optimizer = torch.optim.AdamW(model.parameters(), lr=2e-5)
                    scheduler = get_linear_schedule_with_warmup(optimizer, 100, epochs * len(train_loader))
                    for epoch in range(epochs):
                        train_one_epoch(model, train_loader, optimizer, scheduler)
                        model.save_pretrained(f"checkpoints/epoch-{epoch}")
            """,
        },
        at="loss = model(**batch).loss",
    ),
    Fires(  # transformers' continuous batching leaves the policy in eval mode, and the update runs in it
        """
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer


        class OnlineTrainer:
            def __init__(self, model_name, lr=1e-5):
                self.policy = AutoModelForCausalLM.from_pretrained(model_name).cuda()
                self.tokenizer = AutoTokenizer.from_pretrained(model_name)
                self.optimizer = torch.optim.AdamW(self.policy.parameters(), lr=lr)

            def sample(self, prompts):
                ids = self.tokenizer(prompts).input_ids
                with torch.no_grad():
                    outputs = self.policy.generate_batch(ids)
                completions = [torch.tensor(output.generated_tokens) for output in outputs.values()]
                return torch.nn.utils.rnn.pad_sequence(completions, batch_first=True).cuda()

            def fit(self, prompt_loader):
                self.policy.train()
                for prompts in prompt_loader:
                    batch = self.sample(prompts)
                    loss = self.policy(batch, labels=batch).loss
                    loss.backward()
                    self.optimizer.step()
                    self.optimizer.zero_grad()
        """,
        no_fix=True,
    ),
    Fires(  # the wrapper's forward runs with grad: the backbone is fine-tuned, and stays in eval mode
        """
        import torch
        import torch.nn.functional as F

        from features import Features, evaluate


        def fine_tune(*, feature_model, classifier, train_loader, val_loader, optimizer, eval_every):
            for step, (images, labels) in enumerate(train_loader):
                features = feature_model(images.cuda(non_blocking=True))
                loss = F.cross_entropy(classifier(features), labels.cuda(non_blocking=True))
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                if (step + 1) % eval_every == 0:
                    evaluate(feature_model, classifier, val_loader)
            return classifier


        def run_fine_tuning(backbone, train_loader, val_loader, num_classes, eval_every=1250):
            feature_model = Features(backbone)
            classifier = torch.nn.Linear(backbone.embed_dim, num_classes).cuda()
            params = [*feature_model.parameters(), *classifier.parameters()]
            optimizer = torch.optim.SGD(params, lr=1e-3, momentum=0.9)
            return fine_tune(
                feature_model=feature_model, classifier=classifier, train_loader=train_loader,
                val_loader=val_loader, optimizer=optimizer, eval_every=eval_every,
            )
        """,
        files={
            "features.py": """
                import torch


                class Features(torch.nn.Module):
                    def __init__(self, backbone):
                        super().__init__()
                        self.backbone = backbone

                    def forward(self, images):
                        return self.backbone(images)


                @torch.inference_mode()
                def evaluate(feature_model, classifier, loader):
                    feature_model.eval()
                    return [classifier(feature_model(images.cuda())).argmax(1) for images, _ in loader]
            """,
        },
        at="evaluate(feature_model, classifier, val_loader)",
    ),
    Fires(
        """
        import torch
        import torch.nn as nn
        from torchvision.models import resnet18

        model = resnet18(num_classes=10).cuda()
        criterion = nn.CrossEntropyLoss()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        model.train()
        for epoch in range(90):
            for images, labels in train_loader:
                optimizer.zero_grad()
                loss = criterion(model(images.cuda()), labels.cuda())
                loss.backward()
                optimizer.step()
            model.eval()
            correct = 0
            with torch.no_grad():
                for images, labels in val_loader:
                    correct += (model(images.cuda()).argmax(1) == labels.cuda()).sum().item()
            print(epoch, correct)
        """,
        severity=Severity.ERROR,
    ),
    Fires(
        """
        import torch
        import torch.nn.functional as F

        @torch.no_grad()
        def validate(model, loader):
            model.eval()
            losses = [F.cross_entropy(model(x), y).item() for x, y in loader]
            return sum(losses) / len(losses)

        def fit(model, optimizer, train_loader, val_loader, epochs):
            model.train()
            for epoch in range(epochs):
                for x, y in train_loader:
                    optimizer.zero_grad()
                    F.cross_entropy(model(x), y).backward()
                    optimizer.step()
                print(epoch, validate(model, val_loader))
        """
    ),
    Fires(
        """
        import torch

        def evaluate(net, loader):
            net.eval()
            with torch.no_grad():
                return sum(net(x).sum().item() for x, _ in loader)

        def train(model, optimizer, criterion, train_loader, val_loader, eval_every):
            for epoch in range(10):
                model.train()
                for step, (x, y) in enumerate(train_loader):
                    optimizer.zero_grad()
                    criterion(model(x), y).backward()
                    optimizer.step()
                    if step % eval_every == 0:
                        evaluate(model, val_loader)
        """
    ),
    Fires(
        """
        import torch
        import torch.nn as nn

        class Trainer:
            def __init__(self, model, loader, val_loader):
                self.model = model
                self.loader = loader
                self.val_loader = val_loader
                self.criterion = nn.CrossEntropyLoss()
                self.optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)

            def train_epoch(self):
                for x, y in self.loader:
                    self.optimizer.zero_grad()
                    self.criterion(self.model(x), y).backward()
                    self.optimizer.step()

            @torch.no_grad()
            def validate(self):
                self.model.eval()
                return [self.model(x) for x, _ in self.val_loader]

            def fit(self, epochs):
                self.model.train()
                for epoch in range(epochs):
                    self.train_epoch()
                    self.validate()
        """
    ),
    Fires(
        """
        import torch.nn.functional as F

        def run(model, optimizer, batches, probe):
            for step, (x, y) in enumerate(batches):
                loss = F.mse_loss(model(x), y)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                if step % 500 == 0:
                    model.train(False)
                    probe(model)
        """
    ),
    Fires(
        """
        import torch
        from torch.nn.parallel import DistributedDataParallel as DDP

        def main(model, optimizer, loader, val_loader, criterion, epochs):
            model = DDP(model.cuda())
            for epoch in range(epochs):
                loader.sampler.set_epoch(epoch)
                for x, y in loader:
                    optimizer.zero_grad()
                    criterion(model(x), y).backward()
                    optimizer.step()
                model.module.eval()
                with torch.no_grad():
                    accuracy = sum((model(x).argmax(1) == y).sum().item() for x, y in val_loader)
        """
    ),
    Fires(
        """
        import torch
        from transformers import AutoModelForSequenceClassification

        model = AutoModelForSequenceClassification.from_pretrained("bert-base-uncased", num_labels=2)
        optimizer = torch.optim.AdamW(model.parameters(), lr=2e-5)
        for epoch in range(3):
            for batch in train_dataloader:
                outputs = model(**batch)
                outputs.loss.backward()
                optimizer.step()
                optimizer.zero_grad()
            model.eval()
            for batch in eval_dataloader:
                with torch.no_grad():
                    logits = model(**batch).logits
        """
    ),
    Fires(  # from_pretrained returns the model in eval mode; a fine-tuning loop written by hand never switches it back
        """
        import torch
        from torch.utils.data import DataLoader
        from transformers import AutoModelForSequenceClassification, get_linear_schedule_with_warmup


        def fine_tune(train_dataset, epochs=3, device="cuda"):
            model = AutoModelForSequenceClassification.from_pretrained("roberta-base", num_labels=3).to(device)
            no_decay = ["bias", "LayerNorm.weight"]
            grouped = [
                {"params": [p for n, p in model.named_parameters() if not any(nd in n for nd in no_decay)], "weight_decay": 0.01},
                {"params": [p for n, p in model.named_parameters() if any(nd in n for nd in no_decay)], "weight_decay": 0.0},
            ]
            optimizer = torch.optim.AdamW(grouped, lr=2e-5)
            loader = DataLoader(train_dataset, batch_size=16, shuffle=True)
            scheduler = get_linear_schedule_with_warmup(optimizer, 0, epochs * len(loader))
            for epoch in range(epochs):
                for batch in loader:
                    batch = {k: v.to(device) for k, v in batch.items()}
                    loss = model(**batch).loss
                    loss.backward()
                    optimizer.step()
                    scheduler.step()
                    optimizer.zero_grad()
            return model
        """,
        at="loss = model(**batch).loss",
    ),
    Fires(  # the checkpoint is named by a command-line option whose default is a BERT model: dropout by default
        """
        import argparse

        import torch
        from transformers import AutoModelForSequenceClassification


        def main():
            parser = argparse.ArgumentParser()
            parser.add_argument("--model-name-or-path", default="bert-base-uncased")
            parser.add_argument("--epochs", type=int, default=3)
            args = parser.parse_args()
            model = AutoModelForSequenceClassification.from_pretrained(args.model_name_or_path, num_labels=2).cuda()
            optimizer = torch.optim.AdamW(model.parameters(), lr=2e-5)
            for epoch in range(args.epochs):
                for batch in train_loader:
                    loss = model(**{k: v.cuda() for k, v in batch.items()}).loss
                    loss.backward()
                    optimizer.step()
                    optimizer.zero_grad()
        """,
        at="loss = model(**{k: v.cuda() for k, v in batch.items()}).loss",
    ),
    Fires(  # the generator is switched to training mode; the discriminator, loaded the same way, never is
        """
        import torch
        from transformers import BertForSequenceClassification, GPT2LMHeadModel

        generator = GPT2LMHeadModel.from_pretrained("gpt2").cuda()
        discriminator = BertForSequenceClassification.from_pretrained("bert-base-uncased", num_labels=2).cuda()
        g_opt = torch.optim.Adam(generator.parameters(), lr=1e-5)
        d_opt = torch.optim.Adam(discriminator.parameters(), lr=1e-5)

        generator.train()
        for real_ids, fake_ids in loader:
            d_loss = discriminator(real_ids.cuda(), labels=torch.ones_like(real_ids[:, 0]).cuda()).loss
            d_loss = d_loss + discriminator(fake_ids.cuda(), labels=torch.zeros_like(fake_ids[:, 0]).cuda()).loss
            d_opt.zero_grad()
            d_loss.backward()
            d_opt.step()
            g_loss = generator(fake_ids.cuda(), labels=fake_ids.cuda()).loss
            g_opt.zero_grad()
            g_loss.backward()
            g_opt.step()
        """,
        at="d_loss = discriminator(real_ids.cuda(), labels=torch.ones_like(real_ids[:, 0]).cuda()).loss",
    ),
    Fires(  # the evaluator object is handed the model being trained, and its method switches it to eval mode
        """
        import torch
        import torch.nn.functional as F


        class Evaluator:
            def __init__(self, model, loader, device):
                self.model = model
                self.loader = loader
                self.device = device

            def get_scores(self):
                self.model.eval()
                correct = 0
                with torch.no_grad():
                    for x, y in self.loader:
                        correct += (self.model(x.to(self.device)).argmax(-1) == y.to(self.device)).sum().item()
                return correct / len(self.loader.dataset)


        class Trainer:
            def __init__(self, model, optimizer, train_loader, dev_loader, device):
                self.model = model
                self.optimizer = optimizer
                self.train_loader = train_loader
                self.dev_loader = dev_loader
                self.device = device

            def train_epoch(self):
                for x, y in self.train_loader:
                    loss = F.cross_entropy(self.model(x.to(self.device)), y.to(self.device))
                    self.optimizer.zero_grad()
                    loss.backward()
                    self.optimizer.step()

            def train(self, epochs):
                self.model.train()
                for epoch in range(epochs):
                    self.train_epoch()
                    dev_evaluator = Evaluator(self.model, self.dev_loader, self.device)
                    print(epoch, dev_evaluator.get_scores())
        """,
        at="self.model.eval()",
    ),
    Fires(  # the wrapper's evaluation reads its model under a local name, mid-epoch; `.train()` runs once per epoch
        """
        import torch
        import torch.nn.functional as F

        from model import TextClassifier


        class ClassificationModel:
            def __init__(self, vocab_size, num_labels, n_gpu=1):
                self.model = TextClassifier(vocab_size, num_labels)
                self.n_gpu = n_gpu

            def train(self, train_loader, eval_loader, epochs, evaluate_every):
                model = self.model
                optimizer = torch.optim.AdamW(model.parameters(), lr=2e-5)
                step = 0
                for epoch in range(epochs):
                    model.train()
                    for tokens, labels in train_loader:
                        loss = F.cross_entropy(model(tokens), labels)
                        loss.backward()
                        optimizer.step()
                        optimizer.zero_grad()
                        step += 1
                        if step % evaluate_every == 0:
                            print(step, self.eval_model(eval_loader))

            def eval_model(self, eval_loader):
                return self.evaluate(eval_loader)

            def evaluate(self, eval_loader):
                model = self.model
                if self.n_gpu > 1:
                    model = torch.nn.DataParallel(model)
                model.eval()
                correct = 0
                with torch.no_grad():
                    for tokens, labels in eval_loader:
                        correct += (model(tokens).argmax(-1) == labels).sum().item()
                return correct
        """,
        files={
            "model.py": """
                import torch.nn as nn


                class TextClassifier(nn.Module):
                    def __init__(self, vocab_size, num_labels):
                        super().__init__()
                        self.embed = nn.EmbeddingBag(vocab_size, 128)
                        self.drop = nn.Dropout(0.1)
                        self.out = nn.Linear(128, num_labels)

                    def forward(self, tokens):
                        return self.out(self.drop(self.embed(tokens)))
            """,
        },
        at="model.eval()",
    ),
    Fires(  # an online RL trainer generates its completions with continuous batching before each step's loss
        """
        import torch
        from transformers import Trainer
        from trl.models import unwrap_model_for_generation


        class OnlineRLTrainer(Trainer):
            def _prepare_inputs(self, inputs):
                prompts = inputs["input_ids"].tolist()
                with unwrap_model_for_generation(self.model_wrapped, self.accelerator) as unwrapped_model:
                    with torch.no_grad():
                        outputs = unwrapped_model.generate_batch(prompts, generation_config=self.generation_config)
                completions = [torch.tensor(output.generated_tokens) for output in outputs.values()]
                return {"input_ids": inputs["input_ids"], "completions": completions}
        """,
        severity=Severity.WARNING,
        at="outputs = unwrapped_model.generate_batch(prompts, generation_config=self.generation_config)",
    ),
    Fires(  # a helper scores the batch with the policy in eval mode; the loss computed next runs in eval mode too
        """
        import torch
        from transformers import Trainer


        class RewardWeightedTrainer(Trainer):
            def _score(self, batch):
                self.model.eval()
                with torch.no_grad():
                    return self.model(**batch).logits[:, -1, 0]

            def _prepare_inputs(self, inputs):
                inputs = super()._prepare_inputs(inputs)
                inputs["weights"] = self._score(inputs).softmax(0)
                return inputs
        """,
        severity=Severity.WARNING,
        at="self.model.eval()",
    ),
    Fires(  # the trainer's own step generates with the model it is handed, then computes the loss in eval mode
        """
        import torch
        from transformers import Trainer
        from trl.models import unwrap_model_for_generation


        class OnlinePreferenceTrainer(Trainer):
            def _generate(self, model, prompt_ids):
                with unwrap_model_for_generation(model, self.accelerator) as unwrapped_model:
                    outputs = unwrapped_model.generate_batch(prompt_ids.tolist(), generation_config=self.generation_config)
                return [torch.tensor(output.generated_tokens) for output in outputs.values()]

            def training_step(self, model, inputs, num_items_in_batch=None):
                model.train()
                completions = self._generate(model, inputs["prompt_ids"])
                batch = self.collate(inputs["prompt_ids"], completions)
                loss = model(**batch).loss
                self.accelerator.backward(loss)
                return loss.detach()
        """,
        severity=Severity.WARNING,
        at="outputs = unwrapped_model.generate_batch(prompt_ids.tolist(), generation_config=self.generation_config)",
    ),
    Fires(  # two encoders from `from_pretrained`, trained together; only the query encoder is switched to training mode
        """
        import torch
        from transformers import BertModel


        class Trainer:
            def __init__(self, args):
                self.query_encoder = BertModel.from_pretrained(args.query_model)
                self.context_encoder = BertModel.from_pretrained(args.context_model)
                self.optimizer = torch.optim.AdamW(
                    list(self.query_encoder.parameters()) + list(self.context_encoder.parameters()), lr=args.lr
                )

            def train(self, loader, epochs):
                self.query_encoder.train()
                for epoch in range(epochs):
                    for batch in loader:
                        q = self.query_encoder(**batch["query"]).pooler_output
                        c = self.context_encoder(**batch["context"]).pooler_output
                        scores = q @ c.T
                        loss = torch.nn.functional.cross_entropy(scores, torch.arange(len(q)))
                        loss.backward()
                        self.optimizer.step()
                        self.optimizer.zero_grad()
        """,
        at='c = self.context_encoder(**batch["context"]).pooler_output',
    ),
)

StuckEvalMode.MUST_NOT_FIRE = (
    Quiet(  # the same sampling method switches both back to training mode through the same kind of loop
        """
        import torch
        import torch.nn.functional as F
        from torchvision.utils import save_image

        from nets import Critic, Generator


        class AdversarialTrainer:
            def __init__(self, loader, device="cuda"):
                self.generator = Generator().to(device)
                self.critic = Critic().to(device)
                self.opt_g = torch.optim.Adam(self.generator.parameters(), lr=2e-4)
                self.opt_c = torch.optim.Adam(self.critic.parameters(), lr=2e-4)
                self.loader = loader
                self.device = device
                self.fixed_z = torch.randn(64, 64, device=device)

            @torch.no_grad()
            def snapshot(self, step):
                for net in (self.generator, self.critic):
                    net.eval()
                save_image(self.generator(self.fixed_z).view(-1, 1, 28, 28), f"step_{step}.png")
                for net in (self.generator, self.critic):
                    net.train()

            def fit(self):
                self.generator.train()
                self.critic.train()
                for step, (real, _) in enumerate(self.loader):
                    real = real.flatten(1).to(self.device)
                    fake = self.generator(torch.randn(real.size(0), 64, device=self.device))
                    critic_loss = F.softplus(self.critic(fake.detach())).mean() + F.softplus(-self.critic(real)).mean()
                    self.opt_c.zero_grad()
                    critic_loss.backward()
                    self.opt_c.step()
                    generator_loss = F.softplus(-self.critic(fake)).mean()
                    self.opt_g.zero_grad()
                    generator_loss.backward()
                    self.opt_g.step()
                    if step % 500 == 0:
                        self.snapshot(step)
        """,
        files={"nets.py": """
            import torch.nn as nn


            class Generator(nn.Module):
                def __init__(self, latent=64):
                    super().__init__()
                    self.net = nn.Sequential(nn.Linear(latent, 256), nn.BatchNorm1d(256), nn.ReLU(), nn.Linear(256, 784), nn.Tanh())

                def forward(self, z):
                    return self.net(z)


            class Critic(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.net = nn.Sequential(nn.Linear(784, 256), nn.LeakyReLU(0.2), nn.Dropout(0.3), nn.Linear(256, 1))

                def forward(self, x):
                    return self.net(x)
            """},
    ),
    Quiet(  # the monitoring pass after `eval()` sets `self.phase = "valid"`, and the batch method returns before its
        # backward in any phase but "train": no training step runs until the next epoch's `train()`
        """
        import torch


        class Learner:
            def __init__(self, model, loss_func, lr=1e-3):
                self.model = model
                self.loss_func = loss_func
                self.opt = torch.optim.AdamW(model.parameters(), lr=lr)
                self.phase = "train"

            def _run_batch(self, x, y):
                loss = self.loss_func(self.model(x), y)
                if self.phase != "train":
                    return loss.item()
                self.opt.zero_grad()
                loss.backward()
                self.opt.step()
                return loss.item()

            def fit(self, epochs, batches, monitor):
                for epoch in range(epochs):
                    self.model.train()
                    self.phase = "train"
                    for x, y in batches:
                        self._run_batch(x, y)
                    self.model.eval()
                    self.phase = "valid"
                    with torch.no_grad():
                        scores = [self._run_batch(x, y) for x, y in monitor]
                    print(epoch, sum(scores) / len(scores))
        """,
        files={"train.py": """
            from torch import nn

            from learner import Learner


            def main(model, batches, monitor):
                Learner(model, nn.MSELoss()).fit(10, batches, monitor)
        """},
    ),
    Quiet(  # the validation pass after `eval()` runs the step helper with `backward=False`, which skips its backward: the
        # next training step is the next epoch's, after its `train()`
        """
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

            @torch.no_grad()
            def validate(self):
                self.model.eval()
                total = 0.0
                for inputs, target in self.loaders["validate"]:
                    _, loss = self.apply_model_and_loss(inputs, target, backward=False)
                    total += loss.item()
                return total / len(self.loaders["validate"])

            def fit(self, epochs):
                for epoch in range(epochs):
                    self.train_epoch()
                    print(epoch, self.validate())
        """,
        files={"losses.py": """
            from torch import nn


            def build_criterion():
                return nn.CrossEntropyLoss(label_smoothing=0.1)
        """},
    ),
    Quiet(  # the caller in another file switches the model to training mode before handing it to the helper
        """
        def train_one_epoch(model, loader, optimizer, scheduler):
            for batch in loader:
                loss = model(**batch).loss
                loss.backward()
                optimizer.step()
                scheduler.step()
                optimizer.zero_grad()
        """,
        files={
            "main.py": """
                import torch
                from transformers import AutoModelForSequenceClassification, get_linear_schedule_with_warmup

                from train import train_one_epoch


                def main(train_loader, epochs=3):
                    model = AutoModelForSequenceClassification.from_pretrained("bert-base-uncased", num_labels=2)
                    model.train()
                    optimizer = torch.optim.AdamW(model.parameters(), lr=2e-5)
                    scheduler = get_linear_schedule_with_warmup(optimizer, 100, epochs * len(train_loader))
                    for epoch in range(epochs):
                        train_one_epoch(model, train_loader, optimizer, scheduler)
            """,
        },
    ),
    Quiet(  # the same trainer switching the policy back to training mode after sampling
        """
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer


        class OnlineTrainer:
            def __init__(self, model_name, lr=1e-5):
                self.policy = AutoModelForCausalLM.from_pretrained(model_name).cuda()
                self.tokenizer = AutoTokenizer.from_pretrained(model_name)
                self.optimizer = torch.optim.AdamW(self.policy.parameters(), lr=lr)

            def sample(self, prompts):
                ids = self.tokenizer(prompts).input_ids
                with torch.no_grad():
                    outputs = self.policy.generate_batch(ids)
                completions = [torch.tensor(output.generated_tokens) for output in outputs.values()]
                return torch.nn.utils.rnn.pad_sequence(completions, batch_first=True).cuda()

            def fit(self, prompt_loader):
                self.policy.train()
                for prompts in prompt_loader:
                    batch = self.sample(prompts)
                    self.policy.train()
                    loss = self.policy(batch, labels=batch).loss
                    loss.backward()
                    self.optimizer.step()
                    self.optimizer.zero_grad()
        """
    ),
    Quiet(  # the evaluation helper builds its own model from the checkpoint and puts that one in eval mode (cleanrl)
        """
        import torch
        import torch.nn as nn
        import torch.nn.functional as F

        from utils.evals import evaluate


        class QNetwork(nn.Module):
            def __init__(self, envs):
                super().__init__()
                self.network = nn.Sequential(nn.Linear(4, 120), nn.ReLU(), nn.Dropout(0.1), nn.Linear(120, 2))

            def forward(self, x):
                return self.network(x)


        def train(envs, make_env, replay_buffer, total_steps, device):
            model = QNetwork(envs).to(device)
            optimizer = torch.optim.Adam(model.parameters(), lr=2.5e-4)
            for global_step in range(total_steps):
                data = replay_buffer.sample(32)
                loss = F.mse_loss(model(data.observations).gather(1, data.actions).squeeze(), data.returns)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                if global_step % 100_000 == 0:
                    torch.save(model.state_dict(), "model.pt")
                    evaluate("model.pt", make_env, eval_episodes=10, Model=QNetwork, device=device)
        """,
        files={
            "utils/__init__.py": "",
            "utils/evals.py": """
                import torch


                def evaluate(model_path, make_env, eval_episodes, Model: torch.nn.Module, device=torch.device("cpu")):
                    envs = make_env()
                    model = Model(envs).to(device)
                    model.load_state_dict(torch.load(model_path, map_location=device))
                    model.eval()
                    returns = []
                    obs = envs.reset()
                    while len(returns) < eval_episodes:
                        with torch.no_grad():
                            actions = model(torch.as_tensor(obs, device=device)).argmax(dim=1)
                        obs, reward, done = envs.step(actions.cpu().numpy())
                        if done:
                            returns.append(reward)
                    return returns
            """,
        },
    ),
    Quiet(  # gradients without a step: head importance scores, computed in eval mode on purpose
        """
        import torch


        def compute_heads_importance(model, eval_dataloader, num_layers, num_heads, device):
            head_importance = torch.zeros(num_layers, num_heads, device=device)
            head_mask = torch.ones(num_layers, num_heads, device=device, requires_grad=True)
            for batch in eval_dataloader:
                model.eval()
                outputs = model(**{k: v.to(device) for k, v in batch.items()}, head_mask=head_mask)
                outputs.loss.backward()
                head_importance += head_mask.grad.abs().detach()
                head_mask.grad = None
            return head_importance
        """
    ),
    Quiet(  # the model's own method switches its trainable head back (PPLM's discriminator)
        """
        import torch


        class Discriminator(torch.nn.Module):
            def __init__(self, encoder, class_size):
                super().__init__()
                self.encoder = encoder
                self.classifier_head = torch.nn.Linear(encoder.config.hidden_size, class_size)

            def train_custom(self):
                for param in self.encoder.parameters():
                    param.requires_grad = False
                self.classifier_head.train()

            def forward(self, x):
                hidden = self.encoder(x).last_hidden_state.mean(dim=1)
                return torch.nn.functional.log_softmax(self.classifier_head(hidden), dim=-1)


        def train_epoch(data_loader, discriminator, optimizer):
            discriminator.train_custom()
            for input_t, target_t in data_loader:
                optimizer.zero_grad()
                torch.nn.functional.nll_loss(discriminator(input_t), target_t).backward()
                optimizer.step()


        def evaluate_performance(data_loader, discriminator):
            discriminator.eval()
            with torch.no_grad():
                return sum((discriminator(x).argmax(1) == y).sum().item() for x, y in data_loader)


        def train_discriminator(discriminator, train_loader, test_loader, optimizer, epochs):
            for epoch in range(epochs):
                train_epoch(train_loader, discriminator, optimizer)
                evaluate_performance(test_loader, discriminator)
        """
    ),
    Quiet(  # linear evaluation of frozen features: eval mode on purpose, all but the classifier frozen
        """
        import torch
        import torchvision.models as models


        def train(train_loader, model, criterion, optimizer):
            # the frozen backbone's batch-norm statistics must not move: eval mode, on purpose
            model.eval()
            for images, target in train_loader:
                loss = criterion(model(images.cuda(non_blocking=True)), target.cuda(non_blocking=True))
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()


        def main_worker(args, train_loader):
            model = models.resnet50(num_classes=1000)
            for name, param in model.named_parameters():
                if name not in ["fc.weight", "fc.bias"]:
                    param.requires_grad = False
            model = model.cuda()
            parameters = [p for p in model.parameters() if p.requires_grad]
            optimizer = torch.optim.SGD(parameters, lr=args.lr, momentum=0.9)
            criterion = torch.nn.CrossEntropyLoss().cuda()
            for epoch in range(args.epochs):
                train(train_loader, model, criterion, optimizer)
        """
    ),
    Quiet(  # the model put in eval mode is a frozen feature extractor: its forward runs without grad
        """
        import torch
        import torch.nn.functional as F

        from features import FrozenFeatures, evaluate


        def train_linear_probe(*, feature_model, classifier, train_loader, val_loader, optimizer, eval_every):
            for step, (images, labels) in enumerate(train_loader):
                features = feature_model(images.cuda(non_blocking=True))
                loss = F.cross_entropy(classifier(features), labels.cuda(non_blocking=True))
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                if (step + 1) % eval_every == 0:
                    evaluate(feature_model, classifier, val_loader)
            return classifier


        def run_linear_probe(backbone, train_loader, val_loader, num_classes, eval_every=1250):
            feature_model = FrozenFeatures(backbone)
            classifier = torch.nn.Linear(backbone.embed_dim, num_classes).cuda()
            optimizer = torch.optim.SGD(classifier.parameters(), lr=1e-3, momentum=0.9)
            return train_linear_probe(
                feature_model=feature_model, classifier=classifier, train_loader=train_loader,
                val_loader=val_loader, optimizer=optimizer, eval_every=eval_every,
            )
        """,
        files={
            "features.py": """
                import torch


                class FrozenFeatures(torch.nn.Module):
                    def __init__(self, backbone):
                        super().__init__()
                        self.backbone = backbone
                        self.backbone.eval()

                    def forward(self, images):
                        with torch.inference_mode():
                            features = self.backbone(images)
                        return features


                @torch.inference_mode()
                def evaluate(feature_model, classifier, loader):
                    feature_model.eval()
                    return [classifier(feature_model(images.cuda())).argmax(1) for images, _ in loader]
            """,
        },
    ),
    Quiet(
        """
        import torch
        import torch.nn.functional as F

        def train_one_epoch(model, loader, optimizer):
            model.train()
            for x, y in loader:
                optimizer.zero_grad()
                F.cross_entropy(model(x), y).backward()
                optimizer.step()

        @torch.no_grad()
        def validate(model, loader):
            model.eval()
            return sum(F.cross_entropy(model(x), y).item() for x, y in loader)

        def fit(model, optimizer, train_loader, val_loader, epochs):
            for epoch in range(epochs):
                train_one_epoch(model, train_loader, optimizer)
                validate(model, val_loader)
        """
    ),
    Quiet(
        """
        import torch

        def evaluate(model, loader):
            model.eval()
            with torch.no_grad():
                score = sum(model(x).sum().item() for x in loader)
            model.train()
            return score

        def train(model, optimizer, criterion, loader, val_loader):
            model.train()
            for step, (x, y) in enumerate(loader):
                optimizer.zero_grad()
                criterion(model(x), y).backward()
                optimizer.step()
                if step % 1000 == 0:
                    evaluate(model, val_loader)
        """
    ),
    Quiet(
        """
        import torch

        def train(model, optimizer, criterion, loader, val_loader, args):
            for epoch in range(args.epochs):
                if not args.frozen_bn:
                    model.train()
                for x, y in loader:
                    optimizer.zero_grad()
                    criterion(model(x), y).backward()
                    optimizer.step()
                model.eval()
                with torch.no_grad():
                    val = [model(x) for x, _ in val_loader]
        """
    ),
    Quiet(
        """
        from engine import train_one_epoch, evaluate

        def main(model, optimizer, loader, val_loader, epochs):
            for epoch in range(epochs):
                train_one_epoch(model, optimizer, loader, epoch)
                model.eval()
                evaluate(model, val_loader)
        """
    ),
    Quiet(
        """
        import torch
        import lightning as L

        class LitClassifier(L.LightningModule):
            def __init__(self, net):
                super().__init__()
                self.net = net

            def training_step(self, batch, batch_idx):
                x, y = batch
                return torch.nn.functional.cross_entropy(self.net(x), y)

            def fit_probe(self, loader, optimizer):
                for x, y in loader:
                    optimizer.zero_grad()
                    torch.nn.functional.cross_entropy(self.net(x), y).backward()
                    optimizer.step()
                    self.net.eval()
        """
    ),
    Quiet(
        """
        import torch
        import torch.nn.functional as F

        def distill(student, teacher, optimizer, loader, temperature):
            student.train()
            for x, _ in loader:
                teacher.eval()
                with torch.no_grad():
                    target = F.softmax(teacher(x) / temperature, dim=-1)
                loss = F.kl_div(F.log_softmax(student(x) / temperature, dim=-1), target, reduction="batchmean")
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
        """
    ),
    Quiet(
        """
        import torch

        def train(model, optimizer, criterion, loader, val_loader, max_steps):
            model.train()
            for step, (x, y) in enumerate(loader):
                optimizer.zero_grad()
                criterion(model(x), y).backward()
                optimizer.step()
                if step + 1 >= max_steps:
                    model.eval()
                    with torch.no_grad():
                        print([model(v).mean().item() for v, _ in val_loader])
                    break
        """
    ),
    Quiet(
        """
        import torch

        def train(model, optimizer, criterion, loader, test_loader, epochs):
            model.train()
            for epoch in range(epochs):
                for x, y in loader:
                    optimizer.zero_grad()
                    criterion(model(x), y).backward()
                    optimizer.step()
                if epoch == epochs - 1:
                    model.eval()
                    with torch.no_grad():
                        print([model(x).argmax(1) for x, _ in test_loader])
        """
    ),
    Quiet(
        """
        import torch

        def train(model, optimizer, criterion, loader, val_loader, epochs):
            for epoch in range(epochs):
                model.eval()
                with torch.no_grad():
                    before = [model(x) for x, _ in val_loader]
                model.train()
                for x, y in loader:
                    optimizer.zero_grad()
                    criterion(model(x), y).backward()
                    optimizer.step()
        """
    ),
    Quiet(  # switched to training mode before the loop
        """
        import torch
        from transformers import AutoModelForSequenceClassification

        model = AutoModelForSequenceClassification.from_pretrained("bert-base-uncased", num_labels=2).cuda()
        optimizer = torch.optim.AdamW(model.parameters(), lr=2e-5)
        model.train()
        for batch in train_loader:
            loss = model(**{k: v.cuda() for k, v in batch.items()}).loss
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
        """
    ),
    Quiet(  # a frozen teacher that runs with grad on: only the student's parameters are optimized
        """
        import torch
        import torch.nn.functional as F
        from transformers import AutoModelForSequenceClassification

        teacher = AutoModelForSequenceClassification.from_pretrained("bert-large-uncased", num_labels=2).cuda()
        student = AutoModelForSequenceClassification.from_pretrained("distilbert-base-uncased", num_labels=2).cuda()
        optimizer = torch.optim.AdamW(student.parameters(), lr=5e-5)
        student.train()
        for batch in train_loader:
            targets = F.softmax(teacher(**batch).logits.detach() / 2.0, dim=-1)
            loss = F.kl_div(F.log_softmax(student(**batch).logits / 2.0, dim=-1), targets, reduction="batchmean")
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
        """
    ),
    Quiet(  # the option's default is overwritten before the model is built: what it names is not known
        """
        import argparse

        import torch
        from transformers import AutoModelForSequenceClassification


        def main():
            parser = argparse.ArgumentParser()
            parser.add_argument("--model-name-or-path", default="bert-base-uncased")
            args = parser.parse_args()
            args.model_name_or_path = resolve_checkpoint(args.model_name_or_path)
            model = AutoModelForSequenceClassification.from_pretrained(args.model_name_or_path, num_labels=2)
            optimizer = torch.optim.AdamW(model.parameters(), lr=2e-5)
            for batch in train_loader:
                model(**batch).loss.backward()
                optimizer.step()
                optimizer.zero_grad()
        """
    ),
    Quiet(  # Llama's configuration drops nothing out by default: eval and training mode compute the same
        """
        import torch
        from transformers import AutoModelForCausalLM

        model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-2-7b-hf", torch_dtype=torch.bfloat16).cuda()
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5)
        for batch in train_loader:
            loss = model(**batch, labels=batch["input_ids"]).loss
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
        """
    ),
    Quiet(  # the evaluator object is handed an exponential moving average of the weights, not the trained model
        """
        import copy

        import torch
        import torch.nn.functional as F


        class Evaluator:
            def __init__(self, model, loader):
                self.model = model
                self.loader = loader

            def get_scores(self):
                self.model.eval()
                with torch.no_grad():
                    return sum((self.model(x).argmax(-1) == y).sum().item() for x, y in self.loader)


        def train(model, optimizer, train_loader, dev_loader, epochs):
            ema = copy.deepcopy(model)
            model.train()
            for epoch in range(epochs):
                for x, y in train_loader:
                    loss = F.cross_entropy(model(x), y)
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
                    with torch.no_grad():
                        for average, current in zip(ema.parameters(), model.parameters()):
                            average.mul_(0.999).add_(current, alpha=0.001)
                evaluator = Evaluator(ema, dev_loader)
                print(epoch, evaluator.get_scores())
        """
    ),
    Quiet(  # the wrapper's evaluation reads another of its models under the local name: the averaged copy
        """
        import copy

        import torch
        import torch.nn.functional as F


        class ClassificationModel:
            def __init__(self, model):
                self.model = model
                self.ema_model = copy.deepcopy(model)

            def train(self, train_loader, eval_loader, epochs, evaluate_every):
                model = self.model
                optimizer = torch.optim.AdamW(model.parameters(), lr=2e-5)
                step = 0
                for epoch in range(epochs):
                    model.train()
                    for tokens, labels in train_loader:
                        loss = F.cross_entropy(model(tokens), labels)
                        loss.backward()
                        optimizer.step()
                        optimizer.zero_grad()
                        step += 1
                        if step % evaluate_every == 0:
                            print(step, self.evaluate(eval_loader))

            def evaluate(self, eval_loader):
                model = self.ema_model
                model.eval()
                with torch.no_grad():
                    return sum((model(tokens).argmax(-1) == labels).sum().item() for tokens, labels in eval_loader)
        """
    ),
    Quiet(  # the scoring helper switches the policy back to training mode before the step computes its loss
        """
        import torch
        from transformers import Trainer


        class RewardWeightedTrainer(Trainer):
            def _score(self, batch):
                self.model.eval()
                with torch.no_grad():
                    scores = self.model(**batch).logits[:, -1, 0]
                self.model.train()
                return scores

            def _prepare_inputs(self, inputs):
                inputs = super()._prepare_inputs(inputs)
                inputs["weights"] = self._score(inputs).softmax(0)
                return inputs
        """,
    ),
    Quiet(  # generation in the evaluation hook: the trainer switches back to training mode at the next step
        """
        import torch
        from transformers import Trainer
        from trl.models import unwrap_model_for_generation


        class OnlineRLTrainer(Trainer):
            def prediction_step(self, model, inputs, prediction_loss_only, ignore_keys=None):
                with unwrap_model_for_generation(self.model_wrapped, self.accelerator) as unwrapped_model:
                    with torch.no_grad():
                        outputs = unwrapped_model.generate_batch(inputs["input_ids"].tolist())
                return None, [output.generated_tokens for output in outputs.values()], None
        """,
    ),
    Quiet(  # the step samples in eval mode on purpose and switches back before computing its loss
        """
        import torch
        from transformers import Trainer


        class OnlinePreferenceTrainer(Trainer):
            def training_step(self, model, inputs, num_items_in_batch=None):
                model.eval()
                with torch.no_grad():
                    completions = model.generate(inputs["prompt_ids"], max_new_tokens=64)
                model.train()
                loss = model(input_ids=completions, labels=completions).loss
                self.accelerator.backward(loss)
                return loss.detach()
        """,
    ),
    Quiet(  # both encoders `from_pretrained` returned in eval mode are switched to training mode before the loop
        """
        import torch
        from transformers import BertModel


        class Trainer:
            def __init__(self, args):
                self.query_encoder = BertModel.from_pretrained(args.query_model)
                self.context_encoder = BertModel.from_pretrained(args.context_model)
                self.optimizer = torch.optim.AdamW(
                    list(self.query_encoder.parameters()) + list(self.context_encoder.parameters()), lr=args.lr
                )

            def train(self, loader, epochs):
                self.query_encoder.train()
                self.context_encoder.train()
                for epoch in range(epochs):
                    for batch in loader:
                        q = self.query_encoder(**batch["query"]).pooler_output
                        c = self.context_encoder(**batch["context"]).pooler_output
                        scores = q @ c.T
                        loss = torch.nn.functional.cross_entropy(scores, torch.arange(len(q)))
                        loss.backward()
                        self.optimizer.step()
                        self.optimizer.zero_grad()
        """,
    ),
)
