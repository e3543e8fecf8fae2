"""Dropout that `model.eval()` cannot reach: functional dropout in a module, or dropout layers kept in a plain list.

`F.dropout(x, p)` defaults to `training=True`. Unlike the `nn.Dropout` layer, the function does not
know whether its module is in training mode, so `model.eval()` does not turn it off: validation
scores are computed with random units dropped (noisy, pessimistic, and they move run to run),
checkpoint selection picks on noise, and the deployed model predicts with dropout on. Nothing
fails; the numbers are just wrong. The same holds for attention's own dropout,
`F.scaled_dot_product_attention(q, k, v, dropout_p=p)`: the rate is a plain argument (so is flash-attn's
`dropout_p` and xformers' `memory_efficient_attention(..., p=p)`). `training=self.train` passes the method
that sets the mode, which is always true, not the mode.

A dropout layer kept in a plain Python list or dict (`self.drops = []`, then
`self.drops.append(nn.Dropout(p))`) is the same bug by another road: `nn.Module` registers only the
modules, `nn.ModuleList`s and `nn.ModuleDict`s assigned to it, so `model.eval()` never reaches the
layers in the list and they drop out at evaluation too. So does a dropout layer built inside `forward`
(`nn.Dropout(p)(x)`): a new module on every call, and a new module is in training mode.

How to fix: pass the module's mode, `F.dropout(x, p, training=self.training)`, or use an
`nn.Dropout(p)` layer built in `__init__`; for attention, `dropout_p=p if self.training else 0.0`;
for layers in a list or dict, hold them in an `nn.ModuleList` or `nn.ModuleDict`; build a layer once, in
`__init__`.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import cast

import libcst as cst

from trainlint.analysis.dependencies import kept_with_scope
from trainlint.analysis.libraries import AttentionDropout, attention_dropout
from trainlint.analysis.patterns import argument_passed
from trainlint.rules import (
    AssignEvent,
    CallEvent,
    ClassInfo,
    Fires,
    ParsedChunk,
    Quiet,
    Rule,
    RuleContext,
    ScopeAnalysis,
    Severity,
    Tag,
    Value,
    dotted,
    last_part,
    literal_value,
    shortened,
    walk,
)

_FUNCTIONAL_DROPOUT = frozenset({
    "torch.nn.functional.dropout", "torch.nn.functional.dropout1d", "torch.nn.functional.dropout2d",
    "torch.nn.functional.dropout3d", "torch.nn.functional.alpha_dropout", "torch.nn.functional.feature_alpha_dropout",
})
# Functional dropouts whose `training` defaults to False (torch.nn.functional's signatures: `alpha_dropout(input,
# p=0.5, training=False, inplace=False)`, the same for `feature_alpha_dropout`): without the argument they never drop.
_OFF_BY_DEFAULT = frozenset({"torch.nn.functional.alpha_dropout", "torch.nn.functional.feature_alpha_dropout"})
# Positions of `p` and `training` in those functions: (input, p, training, inplace).
_RATE_POSITION = 1
_TRAINING_POSITION = 2


class DropoutAlwaysOn(Rule):
    code = "TL211"
    name = "dropout-always-on"
    severity = Severity.ERROR

    def check(self, ctx: RuleContext) -> None:
        for scope in ctx.scopes:
            owner = scope.function.owner if scope.function is not None else None
            if owner is None or not ctx.summary.is_module_class(owner):
                continue
            for call in kept_with_scope(scope, "TL211 dropout calls", lambda scope=scope: _dropout_calls(scope)):
                if call.callee in _FUNCTIONAL_DROPOUT and (method := _train_method_given(call)) is not None:
                    self._report_train_method(ctx, scope, call, owner.name, method)
                elif call.callee in _FUNCTIONAL_DROPOUT and not _sets_training(call) and not _only_while_training(call) \
                        and not _asked_for_by_the_caller(scope, call):
                    self._report(ctx, scope, call, owner.name)
                elif (attention := attention_dropout(call.callee)) is not None and not _only_while_training(call):
                    rate = _attention_dropout(scope, call, attention)
                    if rate is not None:
                        self._report_attention(ctx, scope, call, owner.name, rate, attention)
            for handed in kept_with_scope(scope, "TL211 rates handed to helpers", lambda scope=scope: _rates_handed_to_helpers(scope)):
                self._report_handed(ctx, scope, owner.name, handed)
            for built, used in kept_with_scope(scope, "TL211 layers built per call", lambda scope=scope: _layers_built_per_call(scope)):
                self._report_built_per_call(ctx, scope, owner.name, built, used)
            if scope.function is not None and scope.function.name == "forward":
                for site, maker in _hand_made_masks(scope):
                    self._report_hand_made(ctx, scope, owner.name, site, maker)
        for owner in {id(scope.function.owner): scope.function.owner for scope in ctx.scopes
                      if scope.function is not None and scope.function.owner is not None}.values():
            if ctx.summary.is_module_class(owner):
                for unregistered in _dropout_in_plain_containers(ctx, owner):
                    self._report_unregistered(ctx, owner, unregistered)

    def _report(self, ctx: RuleContext, scope: ScopeAnalysis, call: CallEvent, owner: str) -> None:
        assert call.callee is not None and scope.function is not None and scope.function.owner is not None, (
            "check() reports a call to a dropout function in a method of a module class"
        )
        written = scope.chunk.code_for(call.node)
        function = call.callee.rpartition(".")[2]
        method = scope.function.name
        ctx.report(
            call.node,
            f"`{shortened(written, 60)}` in `{owner}.{method}` runs with `training=True` whatever the module's mode: "
            f"`model.eval()` does not turn it off, so evaluation and inference drop units at random",
            evidence=[
                ((scope.chunk, scope.function.owner.node.name), f"`{owner}` is an `nn.Module`: `eval()` only switches its layers"),
                ((scope.chunk, call.node), f"`{function}` without `training=`: always on"),
            ],
            help="pass `training=self.training` (or use an `nn.Dropout` layer)",
            fix=ctx.fix("pass `training=self.training`", [_add_training(ctx, call.node)], safe=True) if _has_self(scope) else None,
        )


    def _report_hand_made(self, ctx: RuleContext, scope: ScopeAnalysis, owner: str, site: cst.CSTNode,
                          maker: cst.FunctionDef) -> None:
        """Inverted dropout written by hand (a Bernoulli mask scaled by one over its keep rate) that nothing gates."""
        assert scope.function is not None, "check() reports in a module's forward"
        where = "here" if maker is scope.function.node else f"by `{maker.name.value}`"
        ctx.report(
            site,
            f"`{shortened(scope.chunk.code_for(site), 60)}` in `{owner}.forward` applies a dropout mask drawn {where} "
            "(a Bernoulli mask divided by its keep rate) on every call: nothing tests `self.training`, so "
            "`model.eval()` does not turn it off and evaluation and inference drop units at random",
            evidence=[((scope.chunk, scope.function.owner.node.name), f"`{owner}` is an `nn.Module`: `eval()` only switches its layers")]
            if scope.function.owner is not None else [],
            help="use an `nn.Dropout` layer built in `__init__`, or draw the mask only `if self.training:`",
        )

    def _report_train_method(self, ctx: RuleContext, scope: ScopeAnalysis, call: CallEvent, owner: str,
                             method: cst.Attribute) -> None:
        """`training=self.train` hands the function the bound method `Module.train`, which is always true."""
        assert scope.function is not None, "check() reports a call in a method of a module class"
        ctx.report(
            call.node,
            f"`training={scope.chunk.code_for(method)}` in `{owner}.{scope.function.name}` passes the method "
            "`nn.Module.train`, not the mode: a bound method is always true, so the dropout runs in evaluation and "
            "inference too",
            evidence=[
                ((scope.chunk, method), "`train` is the method that sets the mode; `training` is the mode"),
            ],
            help="pass `training=self.training`",
            fix=ctx.fix("pass `self.training`", [ctx.edit_replace(method.attr, "training")], safe=True),
        )

    def _report_attention(self, ctx: RuleContext, scope: ScopeAnalysis, call: CallEvent, owner: str, rate: cst.Arg,
                          attention: AttentionDropout) -> None:
        assert scope.function is not None, "check() reports a call in a method of a module class"
        method = scope.function.name
        written = scope.chunk.code_for(rate.value)
        guarded = f"{written} if self.training else 0.0"
        fix = None
        if _has_self(scope) and rate.keyword is not None:
            value = guarded if not isinstance(rate.value, (cst.IfExp, cst.Lambda)) else f"({written}) if self.training else 0.0"
            fix = ctx.fix("drop only in training mode", [ctx.edit_replace(rate.value, value)], safe=True)
        ctx.report(
            call.node,
            f"`{last_part(attention.function)}(..., {attention.keyword}={shortened(written, 40)})` in `{owner}.{method}` drops "
            f"attention weights whatever the module's mode: `model.eval()` does not reach a function's argument, so "
            f"evaluation and inference drop them at random",
            evidence=[
                ((scope.chunk, scope.function.owner.node.name) if scope.function.owner else None,
                 f"`{owner}` is an `nn.Module`: `eval()` only switches its layers"),
                ((scope.chunk, rate.value), f"the dropout rate, the same in training and evaluation ({attention.source})"),
            ],
            help=f"pass `{attention.keyword}={shortened(guarded, 60)}`",
            fix=fix,
        )


    def _report_handed(self, ctx: RuleContext, scope: ScopeAnalysis, owner: str, handed: _HandedRate) -> None:
        """A method hands a fixed rate to a helper that drops out with it, unconditionally: the helper leaves
        the mode to its caller, and this caller does not pass it."""
        assert scope.function is not None, "check() reports a call in a method of a module class"
        written = scope.chunk.code_for(handed.rate.value)
        dropping = handed.dropout.chunk.code_for(handed.dropout.node)
        guarded = f"{written} if self.training else 0.0"
        value = guarded if not isinstance(handed.rate.value, (cst.IfExp, cst.Lambda)) else f"({written}) if self.training else 0.0"
        ctx.report(
            handed.call.node,
            f"`{shortened(scope.chunk.code_for(handed.call.node), 50)}` in `{owner}.{scope.function.name}` hands the rate "
            f"`{shortened(written, 40)}` to `{handed.parameter}`, which `{shortened(dropping, 50)}` drops out with whatever "
            f"the module's mode: `model.eval()` does not reach a function's argument, so evaluation and inference drop "
            f"at random too",
            evidence=[
                ((scope.chunk, scope.function.owner.node.name) if scope.function.owner else None,
                 f"`{owner}` is an `nn.Module`: `eval()` only switches its layers"),
                ((scope.chunk, handed.rate.value), "the same rate in training and evaluation"),
                ((handed.dropout.chunk, handed.dropout.node), f"`{handed.parameter}` is the dropout rate here, under no test of the mode"),
            ],
            help=f"pass `{shortened(guarded, 60)}`",
            fix=ctx.fix("drop only in training mode", [ctx.edit_replace(handed.rate.value, value)], safe=True) if _has_self(scope) else None,
        )

    def _report_built_per_call(self, ctx: RuleContext, scope: ScopeAnalysis, owner: str, built: cst.Call, used: cst.Call) -> None:
        """`nn.Dropout(p)(x)` in `forward`: a new layer every call, in training mode as every new module is."""
        assert scope.function is not None, "check() reports a call in a method of a module class"
        layer = shortened(scope.chunk.code_for(built), 40)
        ctx.report(
            used,
            f"`{layer}` is built anew on every call of `{owner}.{scope.function.name}`, and a new module starts in training "
            "mode: `model.eval()` switches only the layers the model holds, so this one drops units at evaluation and "
            "inference too",
            evidence=[
                ((scope.chunk, built), "a new dropout layer on every call, in training mode"),
                ((scope.chunk, used), "drops units whatever the model's mode"),
            ],
            help=f"build the layer once in `__init__` (`self.dropout = {layer}`) and call `self.dropout(x)` here, or use "
                 "`F.dropout(x, p, training=self.training)`",
        )

    def _report_unregistered(self, ctx: RuleContext, owner: ClassInfo, found: _Unregistered) -> None:
        kind = "dict" if found.container_kind == "dict" else "list"
        ctx.report(
            found.use,
            f"`{found.attribute}` is a plain Python {kind}, so `{owner.name}` never registers the dropout layers in it: "
            f"`model.eval()` does not reach them, and `{shortened(ctx.chunk.code_for(found.use), 50)}` drops units "
            f"at evaluation and inference too",
            evidence=[
                ((ctx.chunk, found.bound), f"`{found.attribute}` holds a plain {kind}: an `nn.Module` registers only "
                                           f"modules, `nn.ModuleList`s and `nn.ModuleDict`s assigned to it"),
                ((ctx.chunk, found.member), f"a layer that drops out in training mode goes into it ({found.why})"),
            ],
            help=f"hold the layers in an `nn.Module{'Dict' if kind == 'dict' else 'List'}` so that `eval()` and `train()` reach them",
        )


class _Unregistered:
    """A plain container attribute of a module class that holds dropout layers and is called through."""

    __slots__ = ("attribute", "container_kind", "bound", "member", "why", "use")

    def __init__(self, attribute: str, container_kind: str, bound: cst.CSTNode, member: cst.CSTNode, why: str, use: cst.CSTNode):
        self.attribute = attribute
        self.container_kind = container_kind
        self.bound = bound  # the assignment of the plain container
        self.member = member  # where a dropout layer goes into it
        self.why = why
        self.use = use  # a call of one of its elements


_TORCH_DROPOUT_LAYERS = frozenset({
    "torch.nn.Dropout", "torch.nn.Dropout1d", "torch.nn.Dropout2d", "torch.nn.Dropout3d",
    "torch.nn.AlphaDropout", "torch.nn.FeatureAlphaDropout",
})
_PLAIN_CONTAINERS = {cst.List: "list", cst.ListComp: "list", cst.Dict: "dict", cst.DictComp: "dict"}
_ADDING = frozenset({"append", "insert"})
# A method, its `append`/`insert` calls by what they add to and its assignments by what they bind.
_Filled = tuple[ScopeAnalysis, dict[str, list[CallEvent]], dict[str, list[AssignEvent]]]


def _dropout_in_plain_containers(ctx: RuleContext, owner: ClassInfo) -> list[_Unregistered]:
    """Attributes of a module class bound to a list or dict literal (or comprehension) that receive a
    layer dropping out in training mode, are called through, and are never handed to anything that could
    register them (`nn.ModuleList(self.layers)`, `add_module`)."""
    scopes = [scope for scope in ctx.scopes if scope.function is not None and scope.function.owner is owner]
    plain: dict[str, tuple[str, cst.CSTNode]] = {}
    # read per method and kept with its tree: a key in one method of a long class reads that method only
    memo = owner.chunk.node_memo("TL211 plain containers bound")
    for scope in scopes:
        assert scope.function is not None, "the scopes of the class's methods"
        bound = memo.get(scope.function.node)
        if bound is None:
            bound = memo[scope.function.node] = _plain_containers_bound(scope)
        for target, kind, node in bound:
            plain.setdefault(target, (kind, node))
    found: list[_Unregistered] = []
    handed_on: set[str] | None = None  # read from every statement of the class: only once a container gets a dropout layer
    filled: list[_Filled] = [
        (scope, *found) for scope in scopes if plain
        for found in (kept_with_scope(scope, "TL211 containers filled", lambda scope=scope: _containers_filled(scope)),)
        if found[0] or found[1]
    ]
    for attribute, (kind, bound) in plain.items():
        member = _dropout_member(ctx, filled, attribute)
        if member is None:
            continue
        if handed_on is None:
            handed_on = _attributes_handed_on(owner)
        if attribute in handed_on:
            continue
        use = _call_through(owner.node, attribute)
        if use is not None:
            found.append(_Unregistered(attribute, kind, bound, member[0], member[1], use))
    return found


def _plain_containers_bound(scope: ScopeAnalysis) -> tuple[tuple[str, str, cst.CSTNode], ...]:
    """The `self.x = []` (a list or dict literal or comprehension) of one method, in order."""
    return tuple(
        (target, kind, event.node)
        for event in scope.events if isinstance(event, AssignEvent) and event.value_node is not None
        for kind in (_PLAIN_CONTAINERS.get(type(event.value_node)),) if kind is not None
        for target in event.targets if _is_self_attribute(target)
    )


def _is_self_attribute(key: str) -> bool:
    head, dot, name = key.partition(".")
    return head == "self" and bool(dot) and "." not in name


def _attributes_handed_on(owner: ClassInfo) -> set[str]:
    """`self.x` used in the class other than by indexing it, looping over it, measuring it or adding
    to it: passed to a call (`nn.ModuleList(self.x)`, `nn.Sequential(*self.x)`), bound again to
    something else, or the class registers modules by name (`add_module`, `setattr`), which may be
    how they are registered. Read per statement of the class body and kept with it, so that a key
    typed in one method of a long class reads that method again, not the whole class."""
    class_node = owner.node
    memo = owner.chunk.node_memo("TL211 attributes handed on")
    handed: set[str] = set()
    header = (*class_node.decorators, *class_node.bases, *class_node.keywords)
    for part in (*header, *class_node.body.body):
        found = memo.get(part)
        if found is None:
            found = memo[part] = _handed_on_in(part)
        registers, names = found
        if registers:
            return {"*"} | _every_self_attribute(class_node)
        handed |= names
    return handed


def _handed_on_in(node: cst.CSTNode) -> tuple[bool, frozenset[str]]:
    """Whether a part of a class registers modules by name, and else the `self.x` it hands on
    (``_attributes_handed_on``)."""
    handed: set[str] = set()
    for inner in walk(node):
        if isinstance(inner, cst.Call):
            name = dotted(inner.func)
            if name is not None and last_part(name) in {"add_module", "register_module", "setattr"}:
                return True, frozenset()
            reader = last_part(name) if name is not None else None
            if reader in {"len", "enumerate", "zip", "range", "reversed", "iter"}:
                continue
            for arg in inner.args:
                key = dotted(arg.value)
                if key is not None and _is_self_attribute(key):
                    handed.add(key)
        elif isinstance(inner, (cst.Assign, cst.AnnAssign, cst.AugAssign)):
            targets = [t.target for t in inner.targets] if isinstance(inner, cst.Assign) else [inner.target]
            for target in targets:
                key = dotted(target)
                value = inner.value
                if key is not None and _is_self_attribute(key) and value is not None and type(value) not in _PLAIN_CONTAINERS:
                    handed.add(key)
    return False, frozenset(handed)


def _every_self_attribute(class_node: cst.ClassDef) -> set[str]:
    return {key for node in walk(class_node) if isinstance(node, cst.Attribute)
            for key in (dotted(node),) if key is not None and _is_self_attribute(key)}


def _dropout_member(ctx: RuleContext, filled: list[_Filled], attribute: str) -> tuple[cst.CSTNode, str] | None:
    """Where a layer that drops out in training mode goes into the container: `append`ed or `insert`ed
    (the layer itself, or a name bound to it that nothing else in the method takes on every path the
    append runs on), or built in its literal. ``filled``: each method with its ``_containers_filled``."""
    for scope, adding, binding in filled:
        for call in adding.get(attribute, ()):
            why = _drops_out(ctx, call.args[-1])
            if why is not None and not _also_kept_elsewhere(scope, call):
                return call.node, why
        calls: dict[int, CallEvent] | None = None  # only for a method that binds the attribute
        for event in binding.get(attribute, ()):
            members = _literal_members(cast(cst.BaseExpression, event.value_node))
            if members and calls is None:
                calls = {id(call.node): call for call in scope.calls()}
            for element in members:
                built = calls.get(id(element)) if calls is not None else None
                why = _drops_out(ctx, built.result) if built is not None else None
                if why is not None and built is not None:
                    return built.node, why
    return None


def _dropout_calls(scope: ScopeAnalysis) -> list[CallEvent]:
    """One method's calls of functional or attention dropout, kept with its flow (read per method)."""
    return [call for call in scope.calls() if call.callee in _FUNCTIONAL_DROPOUT or attention_dropout(call.callee) is not None]


def _containers_filled(scope: ScopeAnalysis) -> tuple[dict[str, list[CallEvent]], dict[str, list[AssignEvent]]]:
    """One method's `append`/`insert` calls by the `self.x` they add to, and its assignments by the
    `self.x` they bind, in order: kept with the method's flow, so that a key in one method of a long
    class reads that method again, not every method once per container."""
    adding: dict[str, list[CallEvent]] = {}
    binding: dict[str, list[AssignEvent]] = {}
    for call in scope.calls():
        key = call.receiver_key
        if call.method in _ADDING and key is not None and _is_self_attribute(key) and call.args and call.arg_nodes:
            adding.setdefault(key, []).append(call)
    for event in scope.events:
        if isinstance(event, AssignEvent) and event.value_node is not None:
            for target in dict.fromkeys(event.targets):
                if _is_self_attribute(target):
                    binding.setdefault(target, []).append(event)
    return adding, binding


def _literal_members(node: cst.BaseExpression) -> list[cst.BaseExpression]:
    if isinstance(node, cst.List):
        return [element.value for element in node.elements if isinstance(element, cst.Element)]
    if isinstance(node, cst.ListComp):
        return [node.elt]
    if isinstance(node, cst.Dict):
        return [element.value for element in node.elements if isinstance(element, cst.DictElement)]
    if isinstance(node, cst.DictComp):
        return [node.value]
    return []


def _also_kept_elsewhere(scope: ScopeAnalysis, adding: CallEvent) -> bool:
    """The appended name is also bound to `self.x` or passed to another call wherever the append runs
    (a module built with it may register it): then `eval()` may reach it another way."""
    member = adding.arg_nodes[-1].value
    if not isinstance(member, cst.Name):
        return False
    on_its_path = {(id(condition.node), condition.branch) for condition in adding.context.conditions}
    for event in scope.events:
        if event is adding:
            continue
        takes = False
        if isinstance(event, CallEvent):
            takes = any(isinstance(arg.value, cst.Name) and arg.value.value == member.value for arg in event.arg_nodes)
        elif isinstance(event, AssignEvent) and isinstance(event.value_node, cst.Name):
            takes = event.value_node.value == member.value and any(_is_self_attribute(t) for t in event.targets)
        if takes and {(id(c.node), c.branch) for c in event.context.conditions} <= on_its_path:
            return True
    return False


def _drops_out(ctx: RuleContext, value: Value) -> str | None:
    """Why a layer drops out in training mode: a torch dropout layer, or a module class of the
    workspace that reads `self.training` or builds one."""
    if Tag.MODEL not in value.tags:
        return None
    detail = value.detail
    if isinstance(detail, str) and detail in _TORCH_DROPOUT_LAYERS:
        return f"`{last_part(detail)}`"
    if isinstance(detail, ClassInfo) and ctx.summary.is_module_class(detail):
        summary = detail.home or ctx.summary
        for node in walk(detail.node):
            if isinstance(node, cst.Attribute) and dotted(node) == "self.training":
                return f"`{detail.name}` acts on `self.training`"
            if isinstance(node, cst.Call):
                name = dotted(node.func)
                if name is not None and (summary.canonical(name) in _TORCH_DROPOUT_LAYERS or summary.canonical(name) in _FUNCTIONAL_DROPOUT):
                    return f"`{detail.name}` applies `{last_part(name)}`"
    return None


def _call_through(class_node: cst.ClassDef, attribute: str) -> cst.CSTNode | None:
    """A call of an element of the container: `self.x[i](h)`, or a loop over it calling its variable."""
    for node in walk(class_node):
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Subscript) and dotted(node.func.value) == attribute:
            return node
        if isinstance(node, cst.For) and isinstance(node.target, cst.Name) and dotted(node.iter) == attribute:
            called = node.target.value
            for inner in walk(node.body):
                if isinstance(inner, cst.Call) and isinstance(inner.func, cst.Name) and inner.func.value == called:
                    return inner
    return None


def _attention_dropout(scope: ScopeAnalysis, call: CallEvent, attention: AttentionDropout) -> cst.Arg | None:
    """The `dropout_p` argument of an attention call when it can be non-zero in evaluation: not a zero
    literal, not a test of `self.training` (`p if self.training else 0.0`, or a name bound to one),
    not a parameter of the method (its caller decides, as Hugging Face's attention helpers do)."""
    if any(arg.star for arg in call.arg_nodes):
        return None
    positional = [arg for arg in call.arg_nodes if arg.keyword is None]
    rate = call.keyword(attention.keyword) or (positional[attention.position] if len(positional) > attention.position else None)
    if rate is None:
        return None
    value = rate.value
    if isinstance(value, (cst.Integer, cst.Float)) and not literal_value(value):
        return None
    if _tests_training(value):
        return None
    if isinstance(value, cst.Name):
        if value.value in scope.params:
            return None
        binding = scope.last_binding(value.value)
        if binding is None or binding.value_node is None or _tests_training(binding.value_node):
            return None
        if any(isinstance(event, AssignEvent) and value.value in event.targets for event in scope.events if event is not binding):
            return None  # bound more than once: one binding may depend on the mode
    return rate


class _HandedRate:
    """A call in a module's method (`attention(q, k, v, self.dropout)`) whose argument ``rate`` becomes the
    parameter ``parameter`` of the called helper, which hands it as the rate of the dropout call ``dropout``."""

    __slots__ = ("call", "rate", "parameter", "dropout")

    def __init__(self, call: CallEvent, rate: cst.Arg, parameter: str, dropout: CallEvent):
        self.call, self.rate, self.parameter, self.dropout = call, rate, parameter, dropout


def _rates_handed_to_helpers(scope: ScopeAnalysis) -> list[_HandedRate]:
    """The calls of this method that hand a fixed dropout rate to a function of the project (a plain
    function or another method) whose functional or attention dropout takes that parameter as its rate
    under no test of the mode: the helper leaves the mode to its caller, as Hugging Face's attention
    functions do, and this caller passes a rate that is the same in evaluation."""
    found = []
    for call in scope.calls():
        function = call.function
        if function is None or _only_while_training(call) or any(arg.star for arg in call.arg_nodes):
            continue
        helper = function.analysis(scope.summary)
        if helper is None:
            continue
        for dropout in kept_with_scope(helper, "TL211 dropout calls", lambda helper=helper: _dropout_calls(helper)):
            parameter = _rate_parameter(helper, dropout)
            rate = argument_passed(call, function, parameter) if parameter is not None else None
            if parameter is not None and rate is not None and _fixed_rate(scope, rate.value):
                found.append(_HandedRate(call, rate, parameter, dropout))
    return found


def _rate_parameter(helper: ScopeAnalysis, dropout: CallEvent) -> str | None:
    """The helper's parameter that ``dropout`` drops out with, when nothing in the helper ties it to the mode."""
    if _only_while_training(dropout) or any(arg.star for arg in dropout.arg_nodes):
        return None
    positional = [arg for arg in dropout.arg_nodes if arg.keyword is None]
    attention = attention_dropout(dropout.callee)
    if attention is not None:
        keyword, position = attention.keyword, attention.position
    elif dropout.callee in _FUNCTIONAL_DROPOUT and not _sets_training(dropout):
        keyword, position = "p", _RATE_POSITION
    else:
        return None
    rate = dropout.keyword(keyword) or (positional[position] if len(positional) > position else None)
    if rate is None or not isinstance(rate.value, cst.Name) or rate.value.value not in helper.params:
        return None
    name = rate.value.value
    if helper.last_binding(name) is not None or _tests_training(helper.function.node if helper.function is not None else dropout.node):
        return None  # rebound (`dropout_p = dropout_p if training else 0.0`), or the helper reads a mode itself
    return name


def _fixed_rate(scope: ScopeAnalysis, value: cst.BaseExpression) -> bool:
    """A rate the caller fixes for both modes: a non-zero number or one of the module's attributes
    (`self.attn_pdrop`), not a test of the mode and not the method's own parameter (its caller decides)."""
    if isinstance(value, (cst.Integer, cst.Float)):
        return bool(literal_value(value))
    return isinstance(value, cst.Attribute) and (dotted(value) or "").startswith("self.") and not _tests_training(value)


def _hand_made_masks(scope: ScopeAnalysis) -> list[tuple[cst.CSTNode, cst.FunctionDef]]:
    """Where a module's ``forward`` applies inverted dropout written by hand, ungated by the mode: a Bernoulli draw
    scaled by one over its keep rate (``mask = x.new_empty(...).bernoulli_(1 - p); mask /= 1 - p``) in the forward
    itself (the draw), or in a method of the class the forward calls (the call), when neither tests
    ``training``. Sampling that is meant to stay on (a stochastic binary unit) is not divided by a keep rate.
    What it reads of a method is read statement by statement, each statement's part kept with the tree
    (``ParsedChunk.facts_under``): a key in a long ``forward`` reads again the statements on its path only."""
    function = scope.function
    assert function is not None and function.owner is not None, "a module's forward"
    chunk = scope.chunk
    if _method_tests_training(chunk, function.node):
        return []
    found: list[tuple[cst.CSTNode, cst.FunctionDef]] = []
    draw = _inverted_dropout_draw(chunk, function.node)
    if draw is not None:
        found.append((draw, function.node))
    for call in scope.calls():
        helper = call.function
        if helper is None or helper.owner is not function.owner or helper.node is function.node or _only_while_training(call):
            continue
        if not _method_tests_training(chunk, helper.node) and _inverted_dropout_draw(chunk, helper.node) is not None:
            found.append((call.node, helper.node))
    return found


_TESTS_TRAINING, _DRAWS, _DIVIDES_BY = "tests training", "draws", "divides by"


def _mask_marks(node: cst.CSTNode) -> Iterator[tuple[str, cst.CSTNode]]:
    """What ``_hand_made_masks`` reads of one node: a read of the mode (``_tests_training``), a Bernoulli draw,
    or what it divides by."""
    if (isinstance(node, cst.Attribute) and dotted(node) == "self.training") or (isinstance(node, cst.Name) and node.value == "training"):
        yield _TESTS_TRAINING, node
    elif isinstance(node, cst.Call) and _called_as(node) in {"bernoulli", "bernoulli_"}:
        yield _DRAWS, node
    elif isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Divide):
        yield _DIVIDES_BY, node.right
    elif isinstance(node, cst.AugAssign) and isinstance(node.operator, cst.DivideAssign):
        yield _DIVIDES_BY, node.value


def _method_tests_training(chunk: ParsedChunk, function: cst.FunctionDef) -> bool:
    """``_tests_training`` of a whole method, from its statements' kept parts."""
    return any(mark == _TESTS_TRAINING for mark, _ in chunk.facts_under("TL211 mask marks", function, _mask_marks))


def _inverted_dropout_draw(chunk: ParsedChunk, function: cst.FunctionDef) -> cst.CSTNode | None:
    """The Bernoulli draw of a function that also divides by a keep rate written ``1 - p``; None otherwise."""
    marks = chunk.facts_under("TL211 mask marks", function.body, _mask_marks)
    draw = next((node for mark, node in marks if mark == _DRAWS), None)
    if draw is None:
        return None
    return draw if any(mark == _DIVIDES_BY and _one_minus(cast(cst.BaseExpression, node)) for mark, node in marks) else None


def _called_as(call: cst.Call) -> str | None:
    """The last name of what ``call`` calls: ``bernoulli_`` in ``torch.empty_like(x).bernoulli_(q)``."""
    func = call.func
    return func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else None


def _one_minus(expression: cst.BaseExpression) -> bool:
    return isinstance(expression, cst.BinaryOperation) and isinstance(expression.operator, cst.Subtract) \
        and isinstance(expression.left, (cst.Integer, cst.Float)) and literal_value(expression.left) == 1


def _tests_training(node: cst.CSTNode) -> bool:
    return any(
        (isinstance(part, cst.Attribute) and dotted(part) == "self.training") or (isinstance(part, cst.Name) and part.value == "training")
        for part in walk(node)
    )


def _train_method_given(call: CallEvent) -> cst.Attribute | None:
    """``self.train`` given as the ``training`` argument (by keyword or position): the method, not the mode."""
    positional = [arg for arg in call.arg_nodes if arg.keyword is None and not arg.star]
    given = call.keyword("training") or (positional[_TRAINING_POSITION] if len(positional) > _TRAINING_POSITION else None)
    if given is not None and isinstance(given.value, cst.Attribute) and dotted(given.value) == "self.train":
        return given.value
    return None


def _layers_built_per_call(scope: ScopeAnalysis) -> list[tuple[cst.Call, cst.Call]]:
    """(the construction, the call through it) for each torch dropout layer that `forward` builds and applies itself:
    `nn.Dropout(p)(x)`, or a local name bound to one and called (`drop = nn.Dropout(0.1)`, `drop(x)`). A rate of a
    literal 0 drops nothing, and under `if self.training:` it drops in training only, as it should."""
    assert scope.function is not None, "asked of a method's scope"
    if scope.function.name not in {"forward", "__call__"}:
        return []
    summary = scope.summary
    layers: dict[str, cst.Call] = {}
    found: list[tuple[cst.Call, cst.Call]] = []
    for event in scope.events:
        if isinstance(event, AssignEvent) and len(event.targets) == 1 and "." not in event.targets[0]:
            value = event.value_node
            if isinstance(value, cst.Call) and _builds_dropping_layer(summary, value):
                layers[event.targets[0]] = value
            else:
                layers.pop(event.targets[0], None)
        elif isinstance(event, CallEvent) and not _only_while_training(event):
            func = event.node.func
            if isinstance(func, cst.Call) and _builds_dropping_layer(summary, func):
                found.append((func, event.node))
            elif isinstance(func, cst.Name) and func.value in layers:
                found.append((layers[func.value], event.node))
    return found


def _builds_dropping_layer(summary, call: cst.Call) -> bool:
    name = dotted(call.func)
    if name is None or summary.canonical(name) not in _TORCH_DROPOUT_LAYERS:
        return False
    rate = next((arg.value for arg in call.args if arg.keyword is None or arg.keyword.value == "p"), None)
    return not (isinstance(rate, (cst.Integer, cst.Float)) and literal_value(rate) == 0)


def _sets_training(call: CallEvent) -> bool:
    """The call says whether it drops: `training=` given, or a function whose default is off."""
    if call.callee in _OFF_BY_DEFAULT or call.keyword("training") is not None or any(arg.star for arg in call.arg_nodes):
        return True
    positional = [arg for arg in call.arg_nodes if arg.keyword is None]
    return len(positional) > _TRAINING_POSITION


def _asked_for_by_the_caller(scope: ScopeAnalysis, call: CallEvent) -> bool:
    """Outside ``forward``, a rate that is the method's own parameter (latent diffusion's
    ``p_sample(..., noise_dropout=0.)`` drops sampling noise when its caller asks): each call says
    whether to drop, which is the point, not the module's mode."""
    assert scope.function is not None, "check() passes a method's scope"
    if scope.function.name in {"forward", "__call__"}:
        return False
    positional = [arg for arg in call.arg_nodes if arg.keyword is None]
    rate = call.keyword("p") or (positional[_RATE_POSITION] if len(positional) > _RATE_POSITION else None)
    return rate is not None and isinstance(rate.value, cst.Name) and rate.value.value in scope.params


def _only_while_training(call: CallEvent) -> bool:
    """The call sits under ``if self.training:`` (``if self.training and p > 0:``): in eval mode it
    does not run, which is what ``training=self.training`` would give."""
    return any(condition.branch == "if" and _requires_training(condition.test) for condition in call.context.conditions)


def _requires_training(test: cst.BaseExpression | None) -> bool:
    if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.And):
        return _requires_training(test.left) or _requires_training(test.right)
    return dotted(test) == "self.training" if test is not None else False


def _has_self(scope: ScopeAnalysis) -> bool:
    assert scope.function is not None, "a method's scope"
    params = scope.function.node.params.params
    return bool(params) and params[0].name.value == "self"


def _add_training(ctx: RuleContext, node: cst.Call):
    if not node.args:
        return None
    last = node.args[-1]
    if isinstance(last.comma, cst.Comma):
        return ctx.edit_insert_after(last.comma, " training=self.training,")
    return ctx.edit_insert_after(last, ", training=self.training")


DropoutAlwaysOn.MUST_FIRE = (
    Fires(  # the rate is forward's own parameter: every call drops, in eval mode too
        """
        import torch.nn as nn
        import torch.nn.functional as F


        class Head(nn.Module):
            def __init__(self, dim, classes):
                super().__init__()
                self.fc = nn.Linear(dim, classes)

            def forward(self, x, drop_rate=0.1):
                return self.fc(F.dropout(x, p=drop_rate))
        """,
        fixed="""
        import torch.nn as nn
        import torch.nn.functional as F


        class Head(nn.Module):
            def __init__(self, dim, classes):
                super().__init__()
                self.fc = nn.Linear(dim, classes)

            def forward(self, x, drop_rate=0.1):
                return self.fc(F.dropout(x, p=drop_rate, training=self.training))
        """,
    ),
    Fires(
        """
        import torch.nn as nn
        import torch.nn.functional as F

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc1 = nn.Linear(784, 256)
                self.fc2 = nn.Linear(256, 10)

            def forward(self, x):
                x = F.relu(self.fc1(x))
                x = F.dropout(x, 0.5)
                return self.fc2(x)
        """,
        fixed="""
        import torch.nn as nn
        import torch.nn.functional as F

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc1 = nn.Linear(784, 256)
                self.fc2 = nn.Linear(256, 10)

            def forward(self, x):
                x = F.relu(self.fc1(x))
                x = F.dropout(x, 0.5, training=self.training)
                return self.fc2(x)
        """,
    ),
    Fires(
        """
        import torch
        from torch import nn

        class Block(nn.Module):
            def forward(self, x):
                return torch.nn.functional.dropout(x, p=0.1)
        """,
        fixed="""
        import torch
        from torch import nn

        class Block(nn.Module):
            def forward(self, x):
                return torch.nn.functional.dropout(x, p=0.1, training=self.training)
        """,
    ),
    Fires(
        """
        import torch.nn as nn
        from torch.nn.functional import dropout2d

        class ConvNet(nn.Module):
            def forward(self, x):
                x = dropout2d(x, 0.25)
                return x
        """,
        fixed="""
        import torch.nn as nn
        from torch.nn.functional import dropout2d

        class ConvNet(nn.Module):
            def forward(self, x):
                x = dropout2d(x, 0.25, training=self.training)
                return x
        """,
    ),
    Fires(
        """
        import torch.nn as nn
        import torch.nn.functional as F

        class Encoder(nn.Module):
            def _embed(self, tokens):
                return F.dropout(self.embedding(tokens), p=self.p)

            def forward(self, tokens):
                return self._embed(tokens)
        """,
        fixed="""
        import torch.nn as nn
        import torch.nn.functional as F

        class Encoder(nn.Module):
            def _embed(self, tokens):
                return F.dropout(self.embedding(tokens), p=self.p, training=self.training)

            def forward(self, tokens):
                return self._embed(tokens)
        """,
    ),
    Fires(
        """
        import torch.nn as nn
        import torch.nn.functional as F

        class Base(nn.Module):
            pass

        class Head(Base):
            def forward(self, x):
                return F.dropout3d(
                    x,
                    0.2,
                )
        """,
        fixed="""
        import torch.nn as nn
        import torch.nn.functional as F

        class Base(nn.Module):
            pass

        class Head(Base):
            def forward(self, x):
                return F.dropout3d(
                    x,
                    0.2, training=self.training,
                )
        """,
    ),
    Fires(
        """
        import pytorch_lightning as pl
        import torch.nn.functional as F

        class LitModel(pl.LightningModule):
            def forward(self, x):
                return self.head(F.dropout(self.body(x), 0.3))
        """,
        fixed="""
        import pytorch_lightning as pl
        import torch.nn.functional as F

        class LitModel(pl.LightningModule):
            def forward(self, x):
                return self.head(F.dropout(self.body(x), 0.3, training=self.training))
        """,
    ),
    Fires(  # a per-task dropout kept in a plain list: `eval()` on the network never reaches it
        """
        import torch.nn as nn

        from layers import StochasticMask


        class MultiTaskHead(nn.Module):
            def __init__(self, encoder, hidden, label_counts, task_rates):
                super().__init__()
                self.encoder = encoder
                self.task_masks = []
                self.classifiers = nn.ModuleList()
                for task, labels in enumerate(label_counts):
                    mask = StochasticMask(task_rates[task])
                    self.task_masks.append(mask)
                    self.classifiers.append(nn.Linear(hidden, labels))

            def forward(self, tokens, task_id):
                pooled = self.encoder(tokens)[:, 0]
                pooled = self.task_masks[task_id](pooled)
                return self.classifiers[task_id](pooled)
        """,
        files={"layers.py": """
            import torch
            import torch.nn as nn


            class StochasticMask(nn.Module):
                def __init__(self, rate):
                    super().__init__()
                    self.rate = rate

                def forward(self, x):
                    if not self.training or self.rate == 0:
                        return x
                    keep = torch.bernoulli(torch.full_like(x, 1 - self.rate))
                    return x * keep / (1 - self.rate)
            """},
        no_fix=True,
        at="pooled = self.task_masks[task_id](pooled)",
    ),
    Fires(  # torch's own dropout layers in a list comprehension, called in a loop
        """
        import torch.nn as nn


        class ResidualMLP(nn.Module):
            def __init__(self, width, depth, rate):
                super().__init__()
                self.layers = nn.ModuleList(nn.Linear(width, width) for _ in range(depth))
                self.drops = [nn.Dropout(rate) for _ in range(depth)]

            def forward(self, x):
                for layer, drop in zip(self.layers, self.drops):
                    x = x + layer(x).relu()
                for drop in self.drops:
                    x = drop(x)
                return x
        """,
        no_fix=True,
    ),
    Fires(  # attention's own dropout: `dropout_p` is a plain argument, which `eval()` cannot reach
        """
        import torch.nn as nn
        import torch.nn.functional as F


        class CausalSelfAttention(nn.Module):
            def __init__(self, config):
                super().__init__()
                self.n_head = config.n_head
                self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd)
                self.c_proj = nn.Linear(config.n_embd, config.n_embd)
                self.attn_dropout = config.attn_pdrop

            def forward(self, x):
                B, T, C = x.size()
                q, k, v = self.c_attn(x).split(C, dim=2)
                q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
                k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
                v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
                y = F.scaled_dot_product_attention(q, k, v, dropout_p=self.attn_dropout, is_causal=True)
                return self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))
        """,
        fixed="""
        import torch.nn as nn
        import torch.nn.functional as F


        class CausalSelfAttention(nn.Module):
            def __init__(self, config):
                super().__init__()
                self.n_head = config.n_head
                self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd)
                self.c_proj = nn.Linear(config.n_embd, config.n_embd)
                self.attn_dropout = config.attn_pdrop

            def forward(self, x):
                B, T, C = x.size()
                q, k, v = self.c_attn(x).split(C, dim=2)
                q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
                k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
                v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
                y = F.scaled_dot_product_attention(q, k, v, dropout_p=self.attn_dropout if self.training else 0.0, is_causal=True)
                return self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))
        """,
    ),
    Fires(  # flash-attn's kernel takes the rate as an argument too, and its README asks for 0.0 in evaluation
        """
        import torch.nn as nn
        from flash_attn import flash_attn_qkvpacked_func


        class FlashBlock(nn.Module):
            def __init__(self, width, heads, attention_dropout=0.1):
                super().__init__()
                self.heads = heads
                self.to_qkv = nn.Linear(width, 3 * width, bias=False)
                self.out = nn.Linear(width, width)
                self.attention_dropout = attention_dropout

            def forward(self, hidden):
                batch, length, width = hidden.shape
                qkv = self.to_qkv(hidden).view(batch, length, 3, self.heads, width // self.heads)
                mixed = flash_attn_qkvpacked_func(qkv, self.attention_dropout, causal=True)
                return self.out(mixed.reshape(batch, length, width))
        """,
        no_fix=True,
        at="mixed = flash_attn_qkvpacked_func(qkv, self.attention_dropout, causal=True)",
    ),
    Fires(  # xformers' memory-efficient attention: `p` is the dropout rate
        """
        import torch.nn as nn
        from xformers.ops import memory_efficient_attention


        class CrossAttention(nn.Module):
            def __init__(self, query_dim, context_dim, heads=8, dropout=0.0):
                super().__init__()
                self.heads = heads
                self.to_q = nn.Linear(query_dim, query_dim, bias=False)
                self.to_kv = nn.Linear(context_dim, 2 * query_dim, bias=False)
                self.dropout = dropout

            def forward(self, x, context):
                q = self.to_q(x)
                k, v = self.to_kv(context).chunk(2, dim=-1)
                return memory_efficient_attention(q, k, v, p=self.dropout)
        """,
        fixed="""
        import torch.nn as nn
        from xformers.ops import memory_efficient_attention


        class CrossAttention(nn.Module):
            def __init__(self, query_dim, context_dim, heads=8, dropout=0.0):
                super().__init__()
                self.heads = heads
                self.to_q = nn.Linear(query_dim, query_dim, bias=False)
                self.to_kv = nn.Linear(context_dim, 2 * query_dim, bias=False)
                self.dropout = dropout

            def forward(self, x, context):
                q = self.to_q(x)
                k, v = self.to_kv(context).chunk(2, dim=-1)
                return memory_efficient_attention(q, k, v, p=self.dropout if self.training else 0.0)
        """,
    ),
    Fires(  # `self.train` is the method that switches the mode; a bound method is always true
        """
        import torch.nn as nn
        import torch.nn.functional as F


        class ResidualMLP(nn.Module):
            def __init__(self, width, rate=0.2):
                super().__init__()
                self.inner = nn.Linear(width, 4 * width)
                self.outer = nn.Linear(4 * width, width)
                self.rate = rate

            def forward(self, x):
                hidden = F.dropout(F.gelu(self.inner(x)), self.rate, self.train)
                return x + self.outer(hidden)
        """,
        fixed="""
        import torch.nn as nn
        import torch.nn.functional as F


        class ResidualMLP(nn.Module):
            def __init__(self, width, rate=0.2):
                super().__init__()
                self.inner = nn.Linear(width, 4 * width)
                self.outer = nn.Linear(4 * width, width)
                self.rate = rate

            def forward(self, x):
                hidden = F.dropout(F.gelu(self.inner(x)), self.rate, self.training)
                return x + self.outer(hidden)
        """,
    ),
    Fires(  # the rate handed to an attention helper in another file, which leaves the mode to its caller
        """
        import torch.nn as nn
        from layers.attention import attend


        class EncoderLayer(nn.Module):
            def __init__(self, dim, heads, attn_dropout=0.1):
                super().__init__()
                self.heads = heads
                self.qkv = nn.Linear(dim, 3 * dim)
                self.proj = nn.Linear(dim, dim)
                self.attn_dropout = attn_dropout

            def forward(self, x, mask=None):
                q, k, v = self.qkv(x).chunk(3, dim=-1)
                out = attend(q, k, v, mask=mask, dropout_p=self.attn_dropout)
                return x + self.proj(out)
        """,
        files={"layers/attention.py": """
        import torch.nn.functional as F


        def attend(q, k, v, mask=None, dropout_p=0.0):
            return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p)
        """},
        fixed="""
        import torch.nn as nn
        from layers.attention import attend


        class EncoderLayer(nn.Module):
            def __init__(self, dim, heads, attn_dropout=0.1):
                super().__init__()
                self.heads = heads
                self.qkv = nn.Linear(dim, 3 * dim)
                self.proj = nn.Linear(dim, dim)
                self.attn_dropout = attn_dropout

            def forward(self, x, mask=None):
                q, k, v = self.qkv(x).chunk(3, dim=-1)
                out = attend(q, k, v, mask=mask, dropout_p=self.attn_dropout if self.training else 0.0)
                return x + self.proj(out)
        """,
        at="out = attend(",
    ),
    Fires(  # a dropout layer built inside `forward`: a new module on every call, in training mode
        """
        import torch.nn as nn
        import torch.nn.functional as F


        class ConvBlock(nn.Module):
            def __init__(self, channels, drop_rate):
                super().__init__()
                self.conv = nn.Conv2d(channels, channels, 3, padding=1)
                self.norm = nn.BatchNorm2d(channels)
                self.drop_rate = drop_rate

            def forward(self, x):
                x = F.relu(self.norm(self.conv(x)))
                return nn.Dropout2d(self.drop_rate)(x)
        """,
        at="return nn.Dropout2d(self.drop_rate)(x)",
    ),
    Fires(  # the same through a local name
        """
        import torch
        from torch import nn


        class Classifier(nn.Module):
            def __init__(self, features, classes):
                super().__init__()
                self.fc = nn.Linear(features, classes)

            def forward(self, x):
                dropout = nn.Dropout(p=0.5)
                return self.fc(dropout(torch.flatten(x, 1)))
        """,
        at="return self.fc(dropout(torch.flatten(x, 1)))",
    ),
    Fires(  # a reasoning cell's initial state goes through a mask its own helper draws: inverted dropout by hand
        """
        import torch
        import torch.nn as nn

        from base import ReasoningModel


        class MemoryNetwork(ReasoningModel):
            def __init__(self, dim, steps, dropout=0.15):
                super().__init__()
                self.control_0 = nn.Parameter(torch.zeros(1, dim))
                self.cell = nn.GRUCell(dim, dim)
                self.steps = steps
                self.dropout = dropout

            def state_mask(self, x, rate):
                keep = torch.empty_like(x).bernoulli_(1 - rate)
                keep /= (1 - rate)
                return keep

            def forward(self, questions):
                control = self.control_0.expand(questions.size(0), -1)
                control = control * self.state_mask(control, self.dropout)
                for _ in range(self.steps):
                    control = self.cell(questions, control)
                return control
        """,
        files={"base.py": """
            import torch
            import torch.nn as nn


            class ReasoningModel(nn.Module):
                def save(self, path):
                    torch.save(self.state_dict(), path)
            """},
        no_fix=True,
        at="        control = control * self.state_mask(control, self.dropout)",
    ),
    Fires(  # the same mask drawn inside forward
        """
        import torch
        import torch.nn as nn


        class TokenDrop(nn.Module):
            def __init__(self, rate=0.1):
                super().__init__()
                self.rate = rate

            def forward(self, embeddings):
                mask = torch.bernoulli(torch.full(embeddings.shape[:2], 1 - self.rate, device=embeddings.device))
                return embeddings * mask.unsqueeze(-1) / (1 - self.rate)
        """,
        no_fix=True,
        at="        mask = torch.bernoulli(torch.full(embeddings.shape[:2], 1 - self.rate, device=embeddings.device))",
    ),
)

DropoutAlwaysOn.MUST_NOT_FIRE = (
    Quiet(  # flash-attn and xformers given a rate that follows the mode
        """
        import torch.nn as nn
        from flash_attn import flash_attn_func
        import xformers.ops as xops


        class DualAttention(nn.Module):
            def __init__(self, width, heads, dropout=0.1):
                super().__init__()
                self.heads, self.dropout = heads, dropout
                self.qkv = nn.Linear(width, 3 * width)

            def forward(self, x):
                q, k, v = self.qkv(x).unflatten(-1, (3, self.heads, -1)).unbind(2)
                rate = self.dropout if self.training else 0.0
                local = flash_attn_func(q, k, v, dropout_p=rate, causal=True)
                glob = xops.memory_efficient_attention(q, k, v, p=self.dropout if self.training else 0.0)
                return local + glob
        """
    ),
    Quiet(  # the same layers registered: a ModuleList made from the list, or the list unpacked into Sequential
        """
        import torch.nn as nn


        class Tower(nn.Module):
            def __init__(self, width, depth, rate):
                super().__init__()
                self.drops = [nn.Dropout(rate) for _ in range(depth)]
                self.registered = nn.ModuleList(self.drops)
                self.stages = []
                for _ in range(depth):
                    self.stages.append(nn.Dropout(rate))
                self.body = nn.Sequential(*self.stages)

            def forward(self, x):
                for drop in self.drops:
                    x = drop(x)
                return self.stages[0](x)
        """
    ),
    Quiet(  # the mask is also given to the classifier that registers it, wherever it is appended
        """
        import torch.nn as nn


        class Classifier(nn.Module):
            def __init__(self, hidden, labels, dropout):
                super().__init__()
                self.dropout = dropout
                self.out = nn.Linear(hidden, labels)

            def forward(self, x):
                return self.out(self.dropout(x))


        class Heads(nn.Module):
            def __init__(self, hidden, label_counts, rate):
                super().__init__()
                self.masks = []
                self.heads = nn.ModuleList()
                for labels in label_counts:
                    mask = nn.Dropout(rate)
                    self.masks.append(mask)
                    self.heads.append(Classifier(hidden, labels, mask))

            def forward(self, x, task):
                return self.heads[task](self.masks[task](x))
        """
    ),
    Quiet(  # a plain list of layers that do not drop out: not this rule's matter
        """
        import torch.nn as nn


        class Stack(nn.Module):
            def __init__(self, width, depth):
                super().__init__()
                self.norms = [nn.LayerNorm(width) for _ in range(depth)]

            def forward(self, x):
                for norm in self.norms:
                    x = norm(x)
                return x
        """
    ),
    Quiet(  # attention dropout only in training: inline, through a name, or zero
        """
        import torch
        import torch.nn as nn


        class Attention(nn.Module):
            def __init__(self, dim, heads, dropout=0.1):
                super().__init__()
                self.heads = heads
                self.qkv = nn.Linear(dim, dim * 3)
                self.dropout = dropout

            def forward(self, x, mask=None):
                q, k, v = self.qkv(x).chunk(3, dim=-1)
                a = torch.nn.functional.scaled_dot_product_attention(q, k, v, dropout_p=self.dropout if self.training else 0.0)
                dropout_p = 0.0 if not self.training else self.dropout
                b = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p)
                c = torch.nn.functional.scaled_dot_product_attention(q, k, v, mask, 0.0, False)
                return a + b + c
        """
    ),
    Quiet(  # the caller decides the rate: it passes `self.attention_dropout if self.training else 0.0`
        """
        import torch.nn as nn
        import torch.nn.functional as F


        class SdpaAttention(nn.Module):
            def __init__(self, config):
                super().__init__()
                self.attention_dropout = config.attention_dropout
                self.o_proj = nn.Linear(config.hidden_size, config.hidden_size)

            def attend(self, query, key, value, mask, dropout=0.0):
                return F.scaled_dot_product_attention(query, key, value, attn_mask=mask, dropout_p=dropout)

            def forward(self, query, key, value, mask):
                out = self.attend(query, key, value, mask, dropout=self.attention_dropout if self.training else 0.0)
                return self.o_proj(out)
        """
    ),
    Quiet(  # a sampling method drops its noise when the caller asks for it: latent diffusion's p_sample
        """
        import torch
        import torch.nn as nn


        class LatentDiffusion(nn.Module):
            def __init__(self, unet):
                super().__init__()
                self.unet = unet

            @torch.no_grad()
            def p_sample(self, x, t, temperature=1.0, noise_dropout=0.0):
                model_mean, model_log_variance = self.unet(x, t).chunk(2, dim=1)
                noise = torch.randn_like(x) * temperature
                if noise_dropout > 0.0:
                    noise = torch.nn.functional.dropout(noise, p=noise_dropout)
                nonzero_mask = (t != 0).float().reshape(-1, *((1,) * (x.dim() - 1)))
                return model_mean + nonzero_mask * (0.5 * model_log_variance).exp() * noise
        """
    ),
    Quiet(  # dropout applied only while training, EfficientNet's head as pytorch-cifar writes it
        """
        import torch.nn as nn
        import torch.nn.functional as F


        class EfficientNet(nn.Module):
            def __init__(self, cfg, num_classes=10):
                super().__init__()
                self.cfg = cfg
                self.conv1 = nn.Conv2d(3, 32, kernel_size=3, stride=1, padding=1, bias=False)
                self.bn1 = nn.BatchNorm2d(32)
                self.linear = nn.Linear(32, num_classes)

            def forward(self, x):
                out = F.relu(self.bn1(self.conv1(x)))
                out = F.adaptive_avg_pool2d(out, 1).flatten(1)
                dropout_rate = self.cfg["dropout_rate"]
                if self.training and dropout_rate > 0:
                    out = F.dropout(out, p=dropout_rate)
                return self.linear(out)
        """
    ),
    Quiet(
        """
        import torch.nn as nn
        import torch.nn.functional as F

        class Net(nn.Module):
            def forward(self, x):
                return F.dropout(x, 0.5, training=self.training)
        """
    ),
    Quiet(
        """
        import torch.nn as nn
        import torch.nn.functional as F

        class Net(nn.Module):
            def forward(self, x):
                return F.dropout(x, 0.5, self.training)
        """
    ),
    Quiet(
        """
        import torch.nn as nn

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.drop = nn.Dropout(0.5)

            def forward(self, x):
                return self.drop(x)
        """
    ),
    Quiet(
        """
        import torch.nn as nn
        import torch.nn.functional as F

        class MCDropoutNet(nn.Module):
            def forward(self, x):
                return F.dropout(x, 0.5, training=True)  # Monte Carlo dropout: on at inference on purpose
        """
    ),
    Quiet(
        """
        import torch.nn.functional as F

        def augment(x, p=0.1):
            return F.dropout(x, p)
        """
    ),
    Quiet(
        """
        import torch.nn as nn
        import torch.nn.functional as F

        class Net(nn.Module):
            def forward(self, x, **kwargs):
                return F.dropout(x, **kwargs)
        """
    ),
    Quiet(
        """
        class Helper:
            def forward(self, x):
                import torch.nn.functional as F
                return F.dropout(x, 0.5)
        """
    ),
    Quiet(  # the caller passes the mode's rate (`0.0` in evaluation), as Hugging Face's attention layers do
        """
        import torch.nn as nn
        import torch.nn.functional as F


        def eager_attention(q, k, v, dropout=0.0):
            weights = F.softmax(q @ k.transpose(-1, -2), dim=-1)
            weights = F.dropout(weights, p=dropout, training=True)
            return weights @ v


        def sdpa_attention(q, k, v, dropout=0.0):
            return F.scaled_dot_product_attention(q, k, v, dropout_p=dropout)


        class Attention(nn.Module):
            def __init__(self, dim, dropout):
                super().__init__()
                self.qkv = nn.Linear(dim, 3 * dim)
                self.attention_dropout = dropout

            def forward(self, x):
                q, k, v = self.qkv(x).chunk(3, dim=-1)
                rate = 0.0 if not self.training else self.attention_dropout
                eager = eager_attention(q, k, v, dropout=rate)
                return sdpa_attention(q, k, v, dropout=self.attention_dropout if self.training else 0.0) + eager
        """,
    ),
    Quiet(  # `alpha_dropout` defaults to `training=False`: without the argument it never drops, in evaluation neither
        """
        import torch.nn as nn
        import torch.nn.functional as F


        class SelfNormalizingNet(nn.Module):
            def __init__(self, dims, p):
                super().__init__()
                self.layers = nn.ModuleList(nn.Linear(a, b) for a, b in zip(dims, dims[1:]))
                self.p = p

            def forward(self, x):
                for layer in self.layers:
                    x = F.alpha_dropout(F.selu(layer(x)), self.p)
                return x
        """
    ),
    Quiet(  # built in `forward` but run only in training mode; a rate of 0 drops nothing
        """
        import torch.nn as nn


        class Head(nn.Module):
            def __init__(self, features, classes, p):
                super().__init__()
                self.fc = nn.Linear(features, classes)
                self.p = p

            def forward(self, x):
                if self.training:
                    x = nn.Dropout(self.p)(x)
                x = nn.Dropout(0.0)(x)
                return self.fc(x)
        """
    ),
    Quiet(  # the fixed cell: the mask is drawn only in training mode
        """
        import torch
        import torch.nn as nn


        class MemoryNetwork(nn.Module):
            def __init__(self, dim, steps, dropout=0.15):
                super().__init__()
                self.control_0 = nn.Parameter(torch.zeros(1, dim))
                self.cell = nn.GRUCell(dim, dim)
                self.steps = steps
                self.dropout = dropout

            def state_mask(self, x, rate):
                keep = torch.empty_like(x).bernoulli_(1 - rate)
                keep /= (1 - rate)
                return keep

            def forward(self, questions):
                control = self.control_0.expand(questions.size(0), -1)
                if self.training:
                    control = control * self.state_mask(control, self.dropout)
                for _ in range(self.steps):
                    control = self.cell(questions, control)
                return control
        """,
    ),
    Quiet(  # the helper is told the mode and returns ones outside training
        """
        import torch
        import torch.nn as nn


        class TokenDrop(nn.Module):
            def __init__(self, rate=0.1):
                super().__init__()
                self.rate = rate

            def keep_mask(self, x, training):
                if not training:
                    return torch.ones_like(x)
                return torch.empty_like(x).bernoulli_(1 - self.rate) / (1 - self.rate)

            def forward(self, embeddings):
                return embeddings * self.keep_mask(embeddings, self.training)
        """,
    ),
    Quiet(  # stochastic binary units sample on purpose, in every mode: no keep rate scales them
        """
        import torch
        import torch.nn as nn


        class BinaryHidden(nn.Module):
            def __init__(self, visible, hidden):
                super().__init__()
                self.weight = nn.Linear(visible, hidden)

            def forward(self, v):
                p = torch.sigmoid(self.weight(v))
                h = torch.bernoulli(p)
                return h, p / (p.sum() + 1e-6)
        """,
    ),
)
