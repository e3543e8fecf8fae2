"""What reaches a loss's input, where its activation was decided, and how to take it out again.

TL202 and TL203 ask the same questions of a loss call: what kind of tensor its input holds
(probabilities, log-probabilities, sigmoid output, raw logits) and where that was decided — an
inline `F.softmax`, a variable assigned from one, the last layer of an `nn.Sequential`, the end
of a model's `forward`. The answers carry the evidence to cite and, where the activation serves
only this loss, the text edits that remove or rename it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import TYPE_CHECKING, cast

import libcst as cst

from . import torchapi
from .callers import argument_at, arguments_elsewhere
from .calls import model_output_kind
from .events import AssignEvent, CallEvent
from .findings import TextEdit
from .flow import ScopeAnalysis
from .libraries import RUNS_WRAPPED_MODULE, call_fact
from .names import last_part
from .quoting import quoted
from .summary import ClassInfo
from .values import CRITERION, LOG_PROBS, LOGITS, MODEL, OUTPUT_KINDS, PROBS, SIGMOID, Site, Value

if TYPE_CHECKING:
    from .context import ModuleView, RuleContext
    from .parsing import ParsedChunk

# The activation whose output each tag marks, spelled as a function and as a layer. The keys
# include None for the lookups of a kind not known (LossCall.kind), which none of them names.
ACTIVATION_FUNCTIONS: dict[str | None, str] = {PROBS: "softmax", LOG_PROBS: "log_softmax", SIGMOID: "sigmoid"}
ACTIVATION_LAYERS: dict[str | None, str] = {PROBS: "Softmax", LOG_PROBS: "LogSoftmax", SIGMOID: "Sigmoid"}
KIND_WORDS: dict[str | None, str] = {
    PROBS: "softmax probabilities",
    LOG_PROBS: "log-probabilities",
    SIGMOID: "sigmoid outputs",
    LOGITS: "raw logits",
}
# Methods that only reshape or move a tensor: an activation under them still feeds the loss alone.
_SHAPE_METHODS = frozenset(
    {"view", "reshape", "permute", "transpose", "squeeze", "unsqueeze", "flatten", "contiguous",
     "float", "double", "half", "to", "cuda", "view_as", "reshape_as", "t", "type"}
)
# Module methods that leave a model's outputs as they are: using them does not block a fix.
_HARMLESS_MODEL_METHODS = frozenset(
    {"to", "cuda", "cpu", "train", "eval", "parameters", "named_parameters", "state_dict",
     "load_state_dict", "zero_grad", "half", "float", "double", "bfloat16", "requires_grad_"}
)
_MAX_DEPTH = 3


class LossCall:
    """A call of a loss class or function whose input kind matters."""

    __slots__ = ("event", "loss", "input", "input_node", "criterion", "kind", "model_argument", "passed", "by_parameter")

    def __init__(self, event: CallEvent, loss: str, value: Value, input_node: cst.BaseExpression, criterion: Value | None):
        self.event = event
        self.loss = loss  # "CrossEntropyLoss", "nll_loss", ...
        self.input = value
        self.input_node = input_node
        self.criterion = criterion  # the criterion object when called through one
        kinds = value.tags & OUTPUT_KINDS
        # the one thing the input is known to hold, or None when unknown or ambiguous
        self.kind: str | None = next(iter(kinds)) if len(kinds) == 1 else None
        # when the input is the output of a model parameter: the model its callers pass, and that call
        self.model_argument: tuple[Value, CallEvent, CallEvent] | None = None
        self.passed: list = []  # evidence: where a parameter's object was handed in
        self.by_parameter = False  # the input's kind comes from what the callers pass (a fix there could reach other uses)

    @property
    def chunk(self) -> ParsedChunk:
        return self.event.chunk


def loss_calls(module: ModuleView, scope: ScopeAnalysis, losses: frozenset[str]) -> Iterator[LossCall]:
    """Calls in ``scope`` of the named losses (class names for criteria, function names for `F.*`)."""
    for event in scope.calls():
        criterion = None
        passed = []
        if event.callee is not None and torchapi.is_functional_loss(event.callee):
            loss = last_part(event.callee)
        elif event.method in (None, "forward") and event.receiver is not None:
            criterion = event.receiver
            if criterion.detail is None and MODEL not in criterion.tags and event.receiver_key in scope.params:
                handed = argument_of(module, scope, event.receiver_key)
                if handed is not None:
                    criterion, call = handed
                    passed.append(((call.chunk, call.node), f"{criterion.note} is passed in as `{event.receiver_key}`"))
            if CRITERION in criterion.tags and isinstance(criterion.detail, str):
                loss = criterion.detail
            else:  # a loss module of the workspace that applies a torch loss to its input (a focal loss)
                wrapped = wrapped_loss(criterion, scope.summary) if MODEL in criterion.tags else None
                if wrapped is None:
                    continue
                loss, inner = wrapped
                passed.append((inner, f"`{cast(ClassInfo, criterion.detail).name}.forward` hands its input to {loss} here"))
        else:
            continue
        if loss not in losses:
            continue
        input_node = _input_argument(event.node)
        if input_node is None:
            continue
        call = LossCall(event, loss, scope.evaluate(input_node, event.context), input_node, criterion)
        call.passed = passed
        if call.kind is None and not call.input.tags & OUTPUT_KINDS:
            _resolve_model_parameter(module, scope, call)
        if call.kind is None and not call.input.tags & OUTPUT_KINDS:
            _resolve_value_parameter(module, scope, call)
        yield call


def wrapped_loss(module: Value, summary) -> tuple[str, Site] | None:
    """The torch loss a workspace module's ``forward`` applies to its first input (``F.binary_cross_entropy_with_logits
    (inputs, targets, reduction="none")`` in a focal loss), and where, or None."""
    owner = module.detail
    forward = owner.find_method("forward", summary) if isinstance(owner, ClassInfo) else None
    analysis = forward.analysis(summary) if forward is not None else None
    inputs = forward.positional_parameters[:1] if forward is not None else []  # `self` is not listed
    if analysis is None or not inputs:
        return None
    for event in analysis.calls():
        if event.callee is not None and torchapi.is_functional_loss(event.callee):
            loss = last_part(event.callee)
        elif event.method in (None, "forward") and event.receiver is not None and CRITERION in event.receiver.tags \
                and isinstance(event.receiver.detail, str):
            loss = event.receiver.detail
        else:
            continue
        given = _input_argument(event.node)
        if given is not None and isinstance(spine(given), cst.Name) and cast(cst.Name, spine(given)).value == inputs[0]:
            return loss, (event.chunk, event.node)
    return None


def _resolve_model_parameter(module: ModuleView, scope: ScopeAnalysis, loss: LossCall) -> None:
    """The input is ``model(x)`` (maybe via one variable) for a parameter ``model``: ask the callers what it is."""
    producer = spine(loss.input_node)
    if isinstance(producer, cst.Name):
        assigned = [
            event.value_node for event in scope.events
            if isinstance(event, AssignEvent) and event.targets == (producer.value,) and event.value_node is not None
        ]
        producer = spine(assigned[0]) if len(assigned) == 1 else None
    name = called_name(producer) if isinstance(producer, cst.Call) else None
    if name is None:
        return
    model_call = next((event for event in scope.calls() if event.node is producer), None)
    handed = arguments_passed(module, scope, name)
    if model_call is None or not handed or any(MODEL not in value.tags for value, _ in handed):
        return
    kinds = {model_output_kind(value, scope.summary) for value, _ in handed}  # the models may differ: their outputs must agree
    kind = kinds.pop()
    if kind is not None and not kinds:
        loss.kind = kind
        loss.model_argument = (handed[0][0], handed[0][1], model_call)
        loss.passed.extend(((call.chunk, call.node), f"{value.note} is passed in as `{name}` here") for value, call in handed[1:3])


def called_name(call: cst.Call) -> str | None:
    """The name a call runs as a module: ``model`` in ``model(x)`` and in ``model.forward(x)``."""
    func = call.func
    if isinstance(func, cst.Attribute) and func.attr.value == "forward":
        func = func.value
    return func.value if isinstance(func, cst.Name) else None


def _resolve_value_parameter(module: ModuleView, scope: ScopeAnalysis, loss: LossCall) -> None:
    """The input is a parameter of a helper (``def auxiliary_loss(self, y_hat, y): return F.cross_entropy(y_hat, y)``):
    when every call in this module passes something of the same kind, that is the input's kind."""
    name = spine(loss.input_node)
    if not isinstance(name, cst.Name) or scope.function is None or name.value not in scope.params:
        return
    passed = arguments_passed(module, scope, name.value)
    if not passed:
        return
    kinds = {frozenset(value.tags & OUTPUT_KINDS) for value, _ in passed}
    if len(kinds) != 1 or len(next(iter(kinds))) != 1:
        return
    loss.kind = next(iter(next(iter(kinds))))
    loss.input = passed[0][0]
    loss.by_parameter = True
    loss.passed.extend(((call.chunk, call.node), f"passed in as `{name.value}` here") for _, call in passed[:3])


def arguments_passed(module: ModuleView, scope: ScopeAnalysis, name: str, depth: int = 0) -> list[tuple[Value, CallEvent]] | None:
    """What each call of the function ``scope`` runs passes for its parameter ``name``: the calls in this module
    (a caller's own parameter followed to what its callers pass) and those in the workspace's other files
    (``callers.arguments_elsewhere``), a wrapper that runs the module handed to it (``nn.DataParallel(model)``)
    seen through; None when a call hides it (``*args``), leaves it at its default, or the function rebinds the name."""
    function = scope.function
    if function is None or name not in scope.params or depth > _MAX_DEPTH:
        return None
    if any(isinstance(event, AssignEvent) and name in event.targets for event in scope.events):
        return None
    positional = function.positional_parameters
    index = positional.index(name) if name in positional else None
    here = [(call, argument_at(call.node, name, index)) for call in module.calls_of(function)]
    elsewhere = arguments_elsewhere(scope.summary, function, name)
    if elsewhere is None:
        return None
    found: list[tuple[Value, CallEvent]] = []
    for call, argument in (*here, *elsewhere):
        if argument is None:
            return None
        callers = call.scope
        value = unwrapped(callers, callers.evaluate(argument, call.context))
        if isinstance(argument, cst.Name) and argument.value in callers.params and callers.summary is scope.summary:
            handed = argument_of(module, callers, argument.value, depth + 1)
            value = handed[0] if handed is not None else value
        found.append((value, call))
    return found


def unwrapped(scope: ScopeAnalysis, value: Value) -> Value:
    """The module a wrapper that runs it was handed where ``scope`` built it (``nn.DataParallel(model, device_ids=ids)``:
    the wrapper returns that module's outputs), else the value as it is."""
    while isinstance(value.detail, str) and call_fact(value.detail, RUNS_WRAPPED_MODULE) and value.site is not None:
        built = value.site[1]
        event = next((event for event in scope.calls() if event.node is built), None)
        wrapped = argument_at(event.node, "module", 0) if event is not None else None
        if event is None or wrapped is None:
            break
        value = scope.evaluate(wrapped, event.context)
    return value


def argument_of(module: ModuleView, scope: ScopeAnalysis, name: str, depth: int = 0) -> tuple[Value, CallEvent] | None:
    """What every caller in this module passes for parameter ``name`` of the function ``scope`` runs.

    None unless the function is called, every call passes the parameter explicitly, all of them
    pass the same object, and the function never rebinds the name.
    """
    found = arguments_passed(module, scope, name, depth)
    if not found:
        return None
    sites = {value.site[1] if value.site else None for value, _ in found}
    if len(sites) != 1 or None in sites:
        return None
    return found[0]


def _input_argument(call: cst.Call) -> cst.BaseExpression | None:
    for arg in call.args:
        if arg.star:
            return None
        if arg.keyword is None or arg.keyword.value == "input":
            return arg.value
    return None


class Origin:
    """Where a tensor's kind was decided: evidence to cite, and what a fix may edit."""

    __slots__ = ("description", "evidence", "activation", "sequential", "producer")

    def __init__(self, description: str, evidence: list, *, activation=None, sequential=None, producer=None):
        self.description = description  # for the message: what produced the tensor
        self.evidence = evidence  # [(site, note)]
        self.activation: ActivationCall | None = activation  # an inline activation call, removable
        self.sequential: SequentialHead | None = sequential  # an nn.Sequential whose last layer decided it
        self.producer: tuple[ParsedChunk, cst.Call] | None = producer  # the model call, for sequential


class ActivationCall:
    """``F.softmax(x, dim=1)``, ``x.softmax(1)``, ``torch.sigmoid(x)`` or a layer call ``nn.Softmax(1)(x)``."""

    __slots__ = ("chunk", "node", "inner", "name_node")

    def __init__(self, chunk: ParsedChunk, node: cst.Call, inner: cst.BaseExpression, name_node: cst.Name | None):
        self.chunk = chunk
        self.node = node
        self.inner = inner  # what the activation is applied to
        self.name_node = name_node  # the function or method name (None for a layer object)


class SequentialHead:
    """An ``nn.Sequential(...)`` construction and its last layer."""

    __slots__ = ("chunk", "node", "last", "previous")

    def __init__(self, chunk: ParsedChunk, node: cst.Call, last: cst.Arg, previous: cst.Arg | None):
        self.chunk = chunk
        self.node = node
        self.last = last
        self.previous = previous


def loss_evidence(loss: LossCall, origin: Origin) -> list:
    """Evidence for a finding about what a loss gets: where its input comes from, where the
    criterion is built, and, when the origin shows nothing, the loss call itself."""
    evidence: list = list(origin.evidence)
    criterion = loss.criterion
    if criterion is not None and criterion.site is not None:
        evidence.append((criterion.site, f"{criterion.note} is built here"))
    if not origin.evidence:
        evidence.append(((loss.chunk, loss.event.node), f"{loss.loss} gets {KIND_WORDS.get(loss.kind, 'its input')} here"))
    return evidence


def loss_origin(module: ModuleView, loss: LossCall) -> Origin:
    """Where the kind of this loss's input was decided, with the evidence (and the handing-in of parameters)."""
    if loss.model_argument is None:
        origin = origin_of(module, loss.input)
    else:
        model, handed_at, model_call = loss.model_argument
        words = KIND_WORDS[loss.kind]
        origin = _model_call_origin(module, model_call, model, loss.kind, words, 0) or Origin(
            f"`{quoted(model_call.chunk, model_call.node)}`", [((model_call.chunk, model_call.node), f"{words} come from here")]
        )
        # the model arrives as a parameter: an edit to its construction could reach other callers
        origin.sequential = origin.producer = None
        name = called_name(model_call.node)  # _resolve_model_parameter: a call of a parameter's name
        origin.evidence.append(((handed_at.chunk, handed_at.node), f"{model.note} is passed in as `{name}`"))
    if loss.by_parameter:
        origin.activation = origin.sequential = origin.producer = None
    origin.evidence.extend(loss.passed)
    return origin


def origin_of(module: ModuleView, value: Value, depth: int = 0) -> Origin:
    """What produced ``value``'s kind, with the evidence for it."""
    kind = next(iter(value.tags & OUTPUT_KINDS), None)
    words = KIND_WORDS.get(kind, "its output")
    if value.site is None:
        return Origin(value.note or "the input", [])
    chunk, node = value.site
    event = _call_at(module, chunk, node)
    plain = Origin(value.note or f"`{quoted(chunk, node)}`", [(value.site, f"{words} come from here")])
    if event is None:
        return plain
    receiver = event.receiver
    if event.method in (None, "forward") and receiver is not None and MODEL in receiver.tags:
        return _model_call_origin(module, event, receiver, kind, words, depth) or plain
    activation = _activation_call(event, kind)
    if activation is not None:
        return Origin(f"`{quoted(chunk, node)}`", [(value.site, f"{words} come from `{quoted(chunk, node)}`")], activation=activation)
    return plain


def _model_call_origin(module, event: CallEvent, receiver: Value, kind, words: str, depth: int) -> Origin | None:
    chunk, node = event.chunk, event.node
    call_text = f"`{quoted(chunk, node)}`"
    detail = receiver.detail
    site = (chunk, node)
    if isinstance(detail, str) and last_part(detail) == ACTIVATION_LAYERS.get(kind):
        inner = _input_argument(node)
        activation = ActivationCall(chunk, node, inner, None) if inner is not None else None
        return Origin(call_text, [(site, f"{words} from the `{last_part(detail)}` layer {call_text}")], activation=activation)
    if isinstance(detail, tuple) and detail and detail[0] == "sequential" and receiver.site is not None:
        seq_chunk, seq_node = receiver.site
        last = detail[2]
        positional = [arg for arg in seq_node.args if arg.keyword is None and not arg.star] if isinstance(seq_node, cst.Call) else []
        if not positional and isinstance(last, cst.Arg):  # filled by `add_module` (added_layers.py): no fix offered
            layer = quoted(seq_chunk, last.value)
            return Origin(f"{call_text}, whose last added module is `{layer}`", [
                (site, f"{call_text} returns {words}"),
                ((seq_chunk, last.value), f"the last module added to {receiver.note} is `{layer}`"),
            ])
        if not positional or positional[-1] is not last:
            return None  # wrapped (DDP, compile): the construction is not at the model's site
        assert isinstance(seq_node, cst.Call), "positional arguments are a call's"
        previous = positional[-2] if len(positional) >= 2 else None
        layer = quoted(seq_chunk, last.value)
        evidence = [
            (site, f"{call_text} returns {words}"),
            ((seq_chunk, last.value), f"the last layer of {receiver.note} is `{layer}`"),
        ]
        return Origin(
            f"{call_text}, whose last layer is `{layer}`", evidence,
            sequential=SequentialHead(seq_chunk, seq_node, last, previous), producer=(chunk, node),
        )
    if isinstance(detail, ClassInfo):
        output = detail.forward_output(module.summary)
        if output.items and kind is not None:
            # `return validity, label`: the element of that kind, not the tuple's first (ACGAN's
            # discriminator returns a sigmoid score and softmax class probabilities)
            output = next((item for item in output.items if kind in item.tags), output)
        evidence: list[tuple[Site, str]] = [(site, f"{call_text} returns {words}")]
        if output.site is not None and depth < _MAX_DEPTH:
            inner = origin_of(module, output, depth + 1)
            evidence.append((output.site, f"`{detail.name}.forward` returns {inner.description}"))
            evidence.extend(inner.evidence[1:])
            return Origin(f"{call_text}, whose `{detail.name}.forward` returns {inner.description}", evidence)
        return Origin(call_text, evidence)
    if isinstance(detail, str) and kind == LOGITS and torchapi.is_torch_layer(detail):
        return Origin(f"{call_text} (a `{last_part(detail)}` layer)", [(site, f"{call_text} returns {words}")])
    return None


def _activation_call(event: CallEvent, kind: str | None) -> ActivationCall | None:
    name = ACTIVATION_FUNCTIONS.get(kind)
    call = event.node
    if name is None:
        return None
    if event.callee is not None:
        if not (torchapi.is_torch_name(event.callee) and last_part(event.callee) == name):
            return None
        inner = _input_argument(call)
        # a torch function's name resolves through a Name or an Attribute only
        name_node = call.func.attr if isinstance(call.func, cst.Attribute) else cast(cst.Name, call.func)
        return ActivationCall(event.chunk, call, inner, name_node) if inner is not None else None
    if event.method == name and isinstance(call.func, cst.Attribute):
        return ActivationCall(event.chunk, call, call.func.value, call.func.attr)
    return None


def _call_at(module: ModuleView, chunk: ParsedChunk, node: cst.CSTNode) -> CallEvent | None:
    """The call event of ``node`` in one of the module's own statements; None for a statement of
    another workspace file (a model class imported from ``model.py``), whose events this module's
    scopes do not hold: looking there by its index read another statement of this file, or none."""
    if chunk.origin != module.origin:
        return None
    for scope in module.scopes_of(chunk):
        for event in scope.calls():
            if event.node is node:
                return event
    return None


# ---------------------------------------------------------------------- fixes
def remove_activation(ctx: RuleContext, loss: LossCall, origin: Origin) -> list[TextEdit] | None:
    """Edits that take the activation out of this loss's input, or None when that is not safe.

    An inline activation call is replaced by its input; a last layer of an ``nn.Sequential`` is
    dropped. Either only when what it produces feeds this loss and nothing else.
    """
    module = ctx.module
    activation = origin.activation
    if activation is not None:
        if not _feeds_only(module, loss, activation.chunk, activation.node):
            return None
        text = _inner_text(activation)
        return None if text is None else [ctx.edit_replace(activation.node, text, chunk=activation.chunk)]
    if origin.sequential is not None and _sequential_serves_only(module, loss, origin):
        return _drop_last_layer(module, origin.sequential)
    return None


def rename_activation(ctx: RuleContext, loss: LossCall, origin: Origin, function: str, layer: str) -> list[TextEdit] | None:
    """Edits that turn the activation into another (``softmax`` -> ``log_softmax``), or None."""
    module = ctx.module
    activation = origin.activation
    if activation is not None:
        if activation.name_node is None or not _feeds_only(module, loss, activation.chunk, activation.node):
            return None
        call = activation.node
        if isinstance(call.func, cst.Name):
            spelled = ctx.name_for(f"torch.nn.functional.{function}")
            if spelled is None:
                return None
            return [ctx.edit_replace(call.func, spelled, chunk=activation.chunk)]
        return [ctx.edit_replace(activation.name_node, function, chunk=activation.chunk)]
    head = origin.sequential
    if head is not None and _sequential_serves_only(module, loss, origin):
        func = head.last.value.func if isinstance(head.last.value, cst.Call) else None
        if isinstance(func, cst.Attribute):
            return [ctx.edit_replace(func.attr, layer, chunk=head.chunk)]
        spelled = ctx.name_for(f"torch.nn.{layer}")
        if isinstance(func, cst.Name) and spelled is not None:
            return [ctx.edit_replace(func, spelled, chunk=head.chunk)]
    return None


def _inner_text(activation: ActivationCall) -> str | None:
    chunk = activation.chunk
    whole = chunk.code_for(activation.node)
    text = chunk.code_for(activation.inner).strip()
    if "#" in whole and "#" not in text:
        return None  # a comment inside the call would be lost
    atomic = isinstance(activation.inner, (cst.Name, cst.Attribute, cst.Call, cst.Subscript)) or activation.inner.lpar
    return text if atomic and "\n" not in text else f"({text})"


def _feeds_only(module: ModuleView, loss: LossCall, chunk: ParsedChunk, produced: cst.CSTNode) -> bool:
    """``produced`` reaches the loss input directly, or through a variable used nowhere else."""
    reached = spine(loss.input_node)
    if reached is produced:
        return True
    if not isinstance(reached, cst.Name):
        return False
    name = reached.value
    for scope in module.scopes_of(chunk):
        for event in scope.events:
            if isinstance(event, AssignEvent) and event.targets == (name,) and event.value_node is not None and spine(event.value_node) is produced:
                return len(occurrences(module.text, name)) == 2
    return False


def _sequential_serves_only(module: ModuleView, loss: LossCall, origin: Origin) -> bool:
    """The Sequential is bound to one name whose only call is the one feeding this loss."""
    head = origin.sequential
    assert head is not None, "remove_activation asks only of a Sequential's last layer"
    if head.previous is None or origin.producer is None:
        return False
    producer_chunk, producer = origin.producer
    if not _feeds_only(module, loss, producer_chunk, producer):
        return False
    name = bound_name(module, head.chunk, head.node)
    if name is None or not isinstance(producer.func, cst.Name) or producer.func.value != name:
        return False
    bindings = calls = 0
    text = module.text
    for match in occurrences(text, name):
        rest = text[match.end():]
        rebinding = re.match(rf"\s*=\s*{re.escape(name)}\.(\w+)\s*\(", rest)
        if rebinding and rebinding.group(1) in _HARMLESS_MODEL_METHODS:
            continue  # model = model.to(device)
        if re.match(r"\s*=(?!=)", rest):
            bindings += 1
        elif re.match(r"\s*\(", rest):
            calls += 1
        elif not ((method := re.match(r"\.(\w+)\s*\(", rest)) and method.group(1) in _HARMLESS_MODEL_METHODS):
            return False
    return bindings == 1 and calls == 1


def bound_name(module: ModuleView, chunk: ParsedChunk, node: cst.Call) -> str | None:
    """The one name (``model``, ``self.criterion``) that the object built by ``node`` is bound to."""
    for scope in module.scopes_of(chunk):
        for event in scope.events:
            if isinstance(event, AssignEvent) and event.value_node is not None and _receiver_chain_reaches(event.value_node, node):
                return event.targets[0] if len(event.targets) == 1 else None
    return None


def _receiver_chain_reaches(expression: cst.BaseExpression, node: cst.CSTNode) -> bool:
    """``node`` is ``expression`` itself or the receiver of a chain like ``node.to(device).train()``."""
    while True:
        if expression is node:
            return True
        if isinstance(expression, cst.Call) and isinstance(expression.func, cst.Attribute):
            expression = expression.func.value
        else:
            return False


def _drop_last_layer(module: ModuleView, head: SequentialHead) -> list[TextEdit] | None:
    chunk = head.chunk
    assert head.previous is not None, "_sequential_serves_only: a layer comes before the last"
    _, _, start_line, start_column = chunk.range_of(head.previous.value)
    _, _, end_line, end_column = chunk.range_of(head.last.value)
    removed = _text_between(module.lines, start_line, start_column, end_line, end_column)
    if "#" in removed:
        return None
    return [TextEdit(start_line, start_column, end_line, end_column, "")]


def _text_between(lines: list[str], line: int, column: int, end_line: int, end_column: int) -> str:
    if line == end_line:
        return lines[line - 1][column - 1 : end_column - 1]
    parts = [lines[line - 1][column - 1 :], *lines[line : end_line - 1], lines[end_line - 1][: end_column - 1]]
    return "\n".join(parts)


def spine(expression: cst.BaseExpression) -> cst.BaseExpression:
    """The tensor under reshapes, moves and indexing: ``probs`` in ``probs.view(-1, C)[mask]``."""
    while True:
        if isinstance(expression, cst.Call) and isinstance(expression.func, cst.Attribute) and expression.func.attr.value in _SHAPE_METHODS:
            expression = expression.func.value
        elif isinstance(expression, cst.Subscript):
            expression = expression.value
        else:
            return expression


def occurrences(text: str, name: str) -> list[re.Match]:
    """Every occurrence of ``name`` (a name or ``self.attr``) as a whole word, comments included."""
    return list(re.finditer(rf"(?<![\w.]){re.escape(name)}(?!\w)", text))

