"""Statement-ordered dataflow over one scope (a function, or a module-level statement).

The walk visits statements in program order with an environment of abstract values, so the answer to "does this
value carry a live autograd graph here?" is per program point: the same ``outputs`` can carry a graph in the training
loop and none in the ``no_grad`` loop below it. Along the way it records events (events.py: calls, stores into
containers, assignments, jumps) with their context (enclosing loops, conditions, whether grad is disabled), which the
rules read instead of walking the tree again. What a call evaluates to is calls.py's.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, cast

import libcst as cst

from . import torchapi
from .calls import (
    KEEPS_DETACHED,
    KEEPS_NOTHING,
    call_result,
    class_value,
    element_of,
    element_of_tuple,
    kept_by_method,
    kept_by_own_method,
    note_backwarded,
    reads,
)
from .closures import LocalFunctionInfo, names_bound_in
from .events import AssignEvent, CallEvent, Condition, Context, Event, JumpEvent, Loop, StoreEvent
from .flow_checkpoints import Checkpoint, defined_function, walk_body, walk_on_inside, walk_recorded
from .names import annotated_type, dotted, imports_of, last_part
from .passed_values import accumulated_by_helper, filled_by_call, holder_of_item, joined_onto, kept_by_instance
from .quoting import quoted
from .statement_shapes import (
    calls_method,
    checked_to_be_a_number,
    mentions_division,
    method_name,
    names_calling,
    self_accumulation,
    target_names,
)
from .summary import FunctionInfo
from .tree import literal_value
from .values import (
    CONSTANT,
    CONTAINER,
    CRITERION,
    DEVICE,
    GRAPH,
    LOSS,
    MODEL,
    NUMBER,
    OUTPUT_KINDS,
    PIPELINE,
    ROLE_VALUES,
    SCALED,
    SHARDED,
    STRUCTURED,
    TENSOR,
    UNKNOWN,
    VOLATILE,
    Value,
    alike,
    attribute_of,
    is_known_tensor,
    join,
    literal_dict,
    table_value,
    volatile_input,
)

if TYPE_CHECKING:
    from .parsing import ParsedChunk
    from .summary import ClassInfo, ModuleSummary


_BINDING_OUTER = "outer"


class ScopeAnalysis:
    """The events and final environment of one scope."""

    def __init__(self, chunk: ParsedChunk, summary: ModuleSummary, *, function: FunctionInfo | None = None, chunk_index: int | None = None):
        self.chunk: ParsedChunk = chunk
        self.summary: ModuleSummary = summary
        self.function = function
        self.events: list[Event] = []
        self._calls: list[CallEvent] = []
        self._calls_counted = 0
        self.loops: list[Loop] = []
        self.env: dict[str, Value] = {}
        self.binding_loop: dict[str, Loop | None] = {}
        self._dotted_heads: set[str] = set()  # every proper prefix of a dotted key ever bound ("self" for "self.fc")
        # every key of env or binding_loop written or deleted, in order (repeats kept): an `if`
        # merges its branches' environments over the keys written since it began, not all of them
        self._written: list[str] = []
        self._statement: cst.CSTNode | None = None  # the statement being walked, for CallEvent.statement
        # `if` statements, conditional expressions and and/or operations, in the order walked
        self.branch_tests: list[cst.If | cst.IfExp | cst.BooleanOperation] = []
        self.local_imports: dict[str, str] = {}
        self.local_functions: dict[str, FunctionInfo] = {}
        self.defined_later: dict[int, FunctionInfo] = {}  # walked on from an edit: ``flow_checkpoints.rewind``
        # a function defined in another: the scope whose names it reads and does not bind (a closure)
        self._enclosing: ScopeAnalysis | None = None
        # what its walk read of the enclosing scope by name (a value, or whether bound): ``reads_enclosing_as_before``
        self._enclosing_reads: dict[tuple[str, bool], Value | bool] = {}
        self._own_names: frozenset[str] | None = None
        self.return_value: Value = UNKNOWN
        self.params: dict[str, Value] = {}
        self._module_chunk_index = chunk_index  # for module-level scopes: names bound before this chunk
        self._returns: list[Value] = []
        # what it returns when a call hands graph-carrying values to these parameters (``passed_values``)
        self.returned_with_graph: dict[frozenset, tuple[Value, set]] = {}
        # Each expression is evaluated once, in order, keyed by the node's id (cheaper than LibCST's
        # Python-level __hash__): every node evaluated is of this scope's tree, which outlives the scope.
        self._memo: dict[int, Value] = {}
        # What the rules' walks through this scope's events and its callees' gave (patterns.py), and other
        # answers from them (``dependencies.kept_with_scope``), kept with the callees' flows they read.
        self.followed: dict[object, tuple[Any, tuple]] = {}
        # For a function being edited (``FunctionInfo.checkpointed``): the walk's state before each
        # statement of the function's body, which a walk of the edited body goes on from (``resumed``).
        self.checkpoints: list[Checkpoint] | None = None
        # and before each statement of the loop and ``with`` bodies inside the body statement
        # ``record_inside`` (the one last edited), by their path of indices (``flow_checkpoints``)
        self.inner_checkpoints: dict[tuple[int, ...], Checkpoint] = {}
        self.record_inside = -1
        self._path: tuple[int, ...] | None = None  # the path of the loop or `with` being walked and recorded

    def release(self, *, whole: bool = True) -> None:
        """Drop what this scope refers to, once no analysis uses it any more: its events refer back to it, a reference
        cycle that only the cyclic collector frees, and the server runs that only when the user pauses (an edit in a
        long function left its old tree and texts behind, about half a megabyte a keystroke). ``whole`` also lets go of
        its statement, summary and function, for a scope of a replaced analysis; without it, events and values taken
        from the scope keep working (a module-level expression's)."""
        if whole:
            for event in self.events:
                if isinstance(event, CallEvent):
                    event.result = UNKNOWN  # a loader's or container's value names its call: a cycle
        self.events = []
        self._calls = []
        self.loops = []
        self.env = {}
        self.binding_loop = {}
        self._written = []
        self.branch_tests = []
        self.local_functions, self.defined_later = {}, {}
        self._enclosing, self._enclosing_reads = None, {}
        self.params = {}
        self._returns = []
        self.returned_with_graph = {}
        self._memo = {}
        self.followed = {}
        self.checkpoints = None
        self.inner_checkpoints = {}
        if whole:
            self.return_value = UNKNOWN  # may name a call of this scope, whose event names the scope
            if self.function is not None and self.function._analysis is self:
                self.function._analysis = None  # the function's info and its flow refer to each other
            self.function = None
            self.summary = None  # type: ignore[assignment]
            self.chunk = None  # type: ignore[assignment]

    # ------------------------------------------------------------------ construction
    @classmethod
    def of_function(cls, info: FunctionInfo, summary: ModuleSummary, passed: dict[str, Value] | None = None) -> ScopeAnalysis:
        """The function's flow; with ``passed``, as one call runs it, those parameters bound (``passed_values``)."""
        scope = cls(info.chunk, summary, function=info)
        if isinstance(info, LocalFunctionInfo):
            scope._enclosing = info.enclosing
        node = info.node
        context = Context()
        for decorator in node.decorators:
            if scope._is_no_grad(decorator.decorator):
                context = context.without_grad(decorator)
        scope._bind_parameters(node, info.owner)
        for name, value in (passed or {}).items():
            scope.params[name] = scope.env[name] = value
        body = node.body.body if isinstance(node.body, cst.IndentedBlock) else node.body.body
        if info.checkpointed and passed is None:
            scope.checkpoints = []
            walk_body(scope, body, 0, context)
        else:
            scope._walk_block(body, context)
        scope._written.clear()  # no `if` is being walked
        scope.return_value = join(scope._returns) if scope._returns else UNKNOWN
        return scope

    def reads_before(self, path: tuple[int, ...]) -> int:
        """How many functions' flows the walk had asked for before the statement at ``path`` (``rewind``)."""
        assert self.checkpoints is not None
        return (self.checkpoints[path[0]] if len(path) == 1 else self.inner_checkpoints[path]).reads

    def resumed(self, info: FunctionInfo, path: tuple[int, ...], summary: ModuleSummary) -> ScopeAnalysis:
        """This flow, rewound to before the statement at ``path`` (``rewind``: a statement of the body, or one inside
        its loops), walked on through the function's body as it is now, in the module ``summary`` describes."""
        assert self.checkpoints is not None
        start = path[0]
        self.function, self.summary = info, summary
        node = info.node
        body = node.body.body if isinstance(node.body, cst.IndentedBlock) else node.body.body
        if len(path) == 1:
            walk_body(self, body, start, self.checkpoints.pop().context)
        else:  # the rest of the blocks that hold the statement, then the body after them
            walk_on_inside(self, body[start], path, self.checkpoints[start].context)
            walk_body(self, body, start + 1, self.checkpoints[start].context)
        self._written.clear()  # no `if` is being walked
        self.return_value = join(self._returns) if self._returns else UNKNOWN
        return self

    @classmethod
    def of_module_statement(cls, chunk: ParsedChunk, summary: ModuleSummary) -> ScopeAnalysis:
        scope = cls(chunk, summary, chunk_index=chunk.index)
        scope._walk_block([s for s in chunk.body if not isinstance(s, (cst.FunctionDef, cst.ClassDef))], Context())
        scope._written.clear()  # no `if` is being walked
        return scope

    @classmethod
    def value_of_expression(cls, expression: cst.BaseExpression, chunk: ParsedChunk, summary: ModuleSummary) -> Value:
        """The value of a module-level assignment's right-hand side, for names used in other statements."""
        scope = cls(chunk, summary, chunk_index=chunk.index)
        try:
            return scope.evaluate(expression, Context())
        finally:
            scope.release(whole=False)  # a scope of one expression: its events refer back to it

    @property
    def final_env(self) -> dict[str, Value]:
        return self.env

    @property
    def name(self) -> str:
        return self.function.qualified_name if self.function else "<module>"

    def calls(self) -> Iterator[CallEvent]:
        if self._calls_counted != len(self.events):  # still walking: the list may have grown
            self._calls = [event for event in self.events if isinstance(event, CallEvent)]
            self._calls_counted = len(self.events)
        return iter(self._calls)

    def last_binding(self, name: str, before: Event | None = None) -> AssignEvent | None:
        """The last assignment of ``name`` as a whole target, before the event ``before`` (or so far, when None)."""
        found = None
        for event in self.events:
            if event is before:
                break
            if type(event) is AssignEvent and event.targets == (name,):
                found = event
        return found

    def value_at(self, expression: cst.BaseExpression) -> Value | None:
        """The value the walk computed for ``expression`` where it ran; None if the walk never evaluated it."""
        return self._memo.get(id(expression))

    # ------------------------------------------------------------------ parameters
    def _bind_parameters(self, node: cst.FunctionDef, owner: ClassInfo | None) -> None:
        params = list(node.params.posonly_params) + list(node.params.params) + list(node.params.kwonly_params)
        text = self.chunk.tree_text()  # a broken line (blanked in the tree) is not code
        calling = names_calling(self.chunk)
        for index, param in enumerate(params):
            name = param.name.value
            if index == 0 and owner is not None and name in {"self", "cls"}:
                continue
            annotation = annotated_type(param.annotation.annotation) if param.annotation is not None else None
            role = torchapi.param_role(name, self.summary.canonical(annotation) if annotation else None)
            if role is None and calls_method(calling, text, name, "zero_grad") and calls_method(calling, text, name, "step"):
                role = "optimizer"
            if role is None and any(calls_method(calling, text, name, method) for method in ("parameters", "named_parameters", "train", "eval")):
                role = "model"
            value = ROLE_VALUES.get(role, UNKNOWN)
            if value is not UNKNOWN:
                value = Value(value.tags, site=(self.chunk, param), note=f"parameter `{name}`")
            self.params[name] = value
            self.env[name] = value
            self.binding_loop[name] = None

    # ------------------------------------------------------------------ statements
    def _walk_inner(self, statements, context: Context) -> None:
        """The body of a loop or ``with``: recorded statement by statement when it holds the last edit."""
        if self._path is None:
            self._walk_block(statements, context)
        else:
            walk_recorded(self, statements, context, self._path)

    def _walk_block(self, statements, context: Context) -> None:
        for statement in statements:
            self._walk_statement(statement, context)
            if context.grad_off is None and self._enters_no_grad(statement):
                context = context.without_grad(statement)  # the rest of the block runs without grad

    def _enters_no_grad(self, statement: cst.CSTNode) -> bool:
        """``stack.enter_context(torch.no_grad())``: grad is off until the ``with ExitStack() as stack:`` block ends."""
        if type(statement) is not cst.SimpleStatementLine or len(statement.body) != 1:
            return False
        small = statement.body[0]
        call = small.value if type(small) is cst.Expr else None
        return (
            type(call) is cst.Call and type(call.func) is cst.Attribute and call.func.attr.value == "enter_context"
            and len(call.args) == 1 and self._is_no_grad(call.args[0].value)
        )

    def _walk_statement(self, statement: cst.CSTNode, context: Context) -> None:
        self._statement = statement
        if isinstance(statement, cst.SimpleStatementLine):
            for small in statement.body:
                self._walk_small(small, context)
        elif isinstance(statement, cst.For):
            iterable = self.evaluate(statement.iter, context)
            loop = Loop(statement, context.loop, iterable, self.chunk.code_for(statement.iter), target_names(statement.target))
            self.loops.append(loop)
            inner = context.entering_loop(loop)
            self._bind_target(statement.target, element_of(iterable), inner, statement, record=False)
            self._walk_inner(statement.body.body, inner)
            if statement.orelse is not None:
                self._walk_block(statement.orelse.body.body, context)
        elif isinstance(statement, cst.While):
            self.evaluate(statement.test, context)
            loop = Loop(statement, context.loop, UNKNOWN, self.chunk.code_for(statement.test), ())
            self.loops.append(loop)
            self._walk_inner(statement.body.body, context.entering_loop(loop))
            if statement.orelse is not None:
                self._walk_block(statement.orelse.body.body, context)
        elif isinstance(statement, cst.If):
            self._walk_if(statement, context)
        elif isinstance(statement, cst.With):
            inner = context
            for item in statement.items:
                manager = item.item
                if self._is_no_grad(manager):
                    inner = inner.without_grad(statement)
                elif isinstance(manager, cst.Call) and method_name(manager) in {"accumulate", "no_sync"}:
                    inner = inner.with_accumulation()
                value = self.evaluate(manager, context)
                if isinstance(manager, cst.Call) and method_name(manager) == "scale_loss" and manager.args and manager.args[0].keyword is None:
                    # apex's `with amp.scale_loss(loss, optimizer) as scaled_loss:` yields the loss times the
                    # loss scale: what the loss was (its graph, its division by N) the scaled one is too
                    value = self.value_at(manager.args[0].value) or value
                if item.asname is not None:
                    self._bind_target(item.asname.name, value, context, statement, record=False)
            self._walk_inner(statement.body.body, inner)
        elif isinstance(statement, cst.Try):
            self._walk_block(statement.body.body, context)
            for handler in statement.handlers:
                self._walk_block(handler.body.body, context.under(self._condition(handler, None, "except", context)))
            if statement.orelse is not None:
                self._walk_block(statement.orelse.body.body, context)
            if statement.finalbody is not None:
                self._walk_block(statement.finalbody.body.body, context)
        elif isinstance(statement, cst.FunctionDef):
            self.local_functions[statement.name.value] = defined_function(self, statement)
        elif isinstance(statement, cst.Match):
            self.evaluate(statement.subject, context)
            for case in statement.cases:
                self._walk_block(case.body.body, context.under(self._condition(case, None, "case", context)))

    @staticmethod
    def _condition(node, test, branch: str, context: Context) -> Condition:
        return Condition(node, test, branch, context.loop)

    def _walk_if(self, statement: cst.If, context: Context) -> None:
        self.branch_tests.append(statement)
        self.evaluate(statement.test, context)
        before = dict(self.env)
        before_loops = dict(self.binding_loop)
        first_write = len(self._written)
        self._walk_block(statement.body.body, context.under(self._condition(statement, statement.test, "if", context)))
        after_body = self.env
        body_loops = self.binding_loop
        self.env = dict(before)
        self.binding_loop = dict(before_loops)
        orelse = statement.orelse
        if isinstance(orelse, cst.If):
            self._walk_if(orelse, context.under(self._condition(statement, statement.test, "else", context)))
        elif orelse is not None:
            self._walk_block(orelse.body.body, context.under(self._condition(statement, statement.test, "else", context)))
        # a key neither branch wrote holds the same value and loop in both
        for key in dict.fromkeys(self._written[first_write:]):
            body_value, else_value = after_body.get(key), self.env.get(key)
            if body_value is else_value and body_loops.get(key) is self.binding_loop.get(key):
                continue  # written, but to what it was
            values = [v for v in (body_value, else_value) if v is not None]
            if key not in after_body or key not in self.env:
                values.append(before.get(key, UNKNOWN))
            self.env[key] = join(values)
            self.binding_loop[key] = body_loops.get(key, self.binding_loop.get(key))
            self._written.append(key)

    def _walk_small(self, small: cst.BaseSmallStatement, context: Context) -> None:
        self._statement = small
        if type(small) is cst.Expr:
            self.evaluate(small.value, context)
        elif type(small) is cst.Assign:
            value = self.evaluate(small.value, context)
            for target in small.targets:
                accumulated = self_accumulation(target.target, small.value)
                if accumulated is not None:
                    # _self_accumulation finds one for a Name target only
                    container = cast(cst.Name, target.target).value
                    self._record_store("accumulate", container, self.evaluate(accumulated, context), accumulated, small, context)
                elif (joined := joined_onto(target.target, small.value, self.canonical)) is not None:
                    self._record_store("extend", cast(cst.Name, target.target).value, self.evaluate(joined, context), joined, small, context)
                elif isinstance(target.target, cst.Name) and isinstance(small.value, cst.Call):
                    self._record_helper_accumulation(target.target.value, small, context)
                self._bind_target(target.target, value, context, small, value_node=small.value)
        elif isinstance(small, cst.AnnAssign):
            if small.value is not None:
                value = self.evaluate(small.value, context)
                self._bind_target(small.target, value, context, small, value_node=small.value)
        elif isinstance(small, cst.AugAssign):
            self._walk_augassign(small, context)
        elif isinstance(small, cst.Return):
            if small.value is not None:
                self._returns.append(self.evaluate(small.value, context))
            self.events.append(JumpEvent(small, context, self, "return"))
        elif isinstance(small, cst.Continue):
            self.events.append(JumpEvent(small, context, self, "continue"))
        elif isinstance(small, cst.Break):
            self.events.append(JumpEvent(small, context, self, "break"))
        elif isinstance(small, cst.Raise):
            if small.exc is not None:
                self.evaluate(small.exc, context)
            self.events.append(JumpEvent(small, context, self, "raise"))
        elif isinstance(small, (cst.Import, cst.ImportFrom)):
            self.local_imports.update(imports_of(small))
        elif isinstance(small, cst.Assert):
            self.evaluate(small.test, context)

    def _record_helper_accumulation(self, name: str, small: cst.Assign, context: Context) -> None:
        """``avg = ema(avg, loss)``: what the helper accumulates into ``avg`` (``passed_values``)."""
        call = next((event for event in reversed(self.events) if isinstance(event, CallEvent) and event.node is small.value), None)
        if call is not None and (found := accumulated_by_helper(call, name)) is not None:
            self._record_store("accumulate", name, found[1], found[0], small, context)

    def _walk_augassign(self, small: cst.AugAssign, context: Context) -> None:
        value = self.evaluate(small.value, context)
        key = dotted(small.target)
        if key is None:
            if isinstance(small.target, cst.Subscript):
                container = dotted(small.target.value)
                if container is not None:
                    self._record_store("augassign", container, value, small.value, small, context)
            return
        current = self._lookup(key, context)
        if isinstance(small.operator, (cst.DivideAssign, cst.MultiplyAssign)):
            self._assign_key(key, current.with_tags(add=(SCALED,)) if current.tags else current, context)
            self.events.append(AssignEvent(small, context, self, targets=(key,), value=current, value_node=small.value))
            return
        if isinstance(small.operator, (cst.AddAssign, cst.SubtractAssign)):
            self._record_store("augassign", key, value, small.value, small, context)
        self._assign_key(key, join([current, value]), context, keep_loop=True)

    def _record_store(self, kind, container, value, value_node, node, context, bound=None) -> None:
        bound = bound or container  # what the container lives as long as (an instance's list: the instance)
        container_loop = self.binding_loop.get(bound, _BINDING_OUTER) if bound in self.env else _BINDING_OUTER
        if container.startswith("self."):
            container_loop = _BINDING_OUTER
        self.events.append(
            StoreEvent(node, context, self, kind=kind, container=container, container_loop=container_loop, value=value, value_node=value_node)
        )
        existing = self.env.get(container)
        if existing is not None:
            self.env[container] = join([existing, value.with_tags(add=(CONTAINER,))])
            self._written.append(container)

    # ------------------------------------------------------------------ binding
    def _bind_target(self, target, value: Value, context: Context, node, *, value_node=None, record=True) -> None:
        kind = type(target)
        if kind is cst.Tuple or kind is cst.List:
            for index, element in enumerate(target.elements):
                if value.items and index < len(value.items):
                    item = value.items[index]
                elif LOSS in value.tags and index > 0 and len(target.elements) > 1:
                    # `loss, sample_size, logging_output = criterion(model, sample)` (fairseq): the loss
                    # comes first; what follows it is not known to be a tensor, let alone carry the graph
                    item = UNKNOWN
                else:
                    item = element_of_tuple(value)
                inner_target = element.value
                if isinstance(element, cst.StarredElement):
                    inner_target = element.value
                self._bind_target(inner_target, item, context, node, record=record)
            return
        if kind is cst.Subscript:
            container = dotted(target.value)
            if container is not None:
                self._record_store("subscript", container, value, value_node or target, node, context)
                held = self.env.get(container)
                if held is not None and GRAPH in held.tags and GRAPH not in value.tags and not is_known_tensor(held) and (
                    reads(value_node, container)
                ):
                    # `output["loss"] = output["loss"].detach()`: the part that carried a graph was replaced
                    # (`metrics["acc"] = acc.item()` beside a graph-carrying entry replaces nothing)
                    self.env[container] = held.without_graph()
                    self._written.append(container)
            return
        key = dotted(target)
        if key is None:
            return
        if record:
            self.events.append(AssignEvent(node, context, self, targets=(key,), value=value, value_node=value_node))
        self._assign_key(key, value, context)

    def _assign_key(self, key: str, value: Value, context: Context, keep_loop: bool = False) -> None:
        self.env[key] = value
        self._written.append(key)
        if not keep_loop or key not in self.binding_loop:
            self.binding_loop[key] = context.loop
        if "." in key:
            parts = key.split(".")
            self._dotted_heads.update(".".join(parts[:end]) for end in range(1, len(parts)))
        if key in self._dotted_heads:
            # a new binding of x invalidates what was known of x.attr
            prefix = key + "."
            for stale in [k for k in self.env if k.startswith(prefix)]:
                del self.env[stale]
                self._written.append(stale)

    def _lookup(self, key: str, context: Context) -> Value:
        value = self.env.get(key)
        if value is not None:
            return value
        owner = self.function.owner if self.function is not None else None
        if owner is not None and key == "self" and self.summary.is_module_class(owner):
            # `self(x)` in a method of an nn.Module runs its forward
            return Value((MODEL,), note=f"`self` (`{owner.name}` is an nn.Module)", detail=owner)
        if key.startswith("self.") and owner is not None:
            found = owner.attribute(key, self.summary)
            if found is not None:
                return found
        if "." not in key and self._enclosing is not None and key not in self._names_bound_here():
            value = self._enclosing._lookup(key, context)  # read when the function is first called
            self._enclosing_reads[key, False] = value
            return value
        if "." not in key:
            module_value = self.summary.value_of(key, self._module_chunk_index)
            if module_value is not None:
                return module_value
        return class_value(self.summary, self.canonical(key)) if "." not in key else UNKNOWN

    def reads_enclosing_as_before(self) -> bool:
        """Whether each name this walk read of the enclosing scope reads a value alike (or binding) now: the
        enclosing function walked on from an edit before this one's first call may have rebound it."""
        enclosing = self._enclosing
        return enclosing is not None and all(
            alike(enclosing._is_bound(name) if bound else enclosing._lookup(name, Context()), found)
            for (name, bound), found in self._enclosing_reads.items()
        )

    def _names_bound_here(self) -> frozenset[str]:
        """The names this function binds (parameters, assignments, loop and `with` targets, imports, local defs, not
        those it declares `nonlocal` or `global`): Python makes them local; the rest it reads from the enclosing function."""
        if self._own_names is None:
            assert self.function is not None, "only a function's scope has an enclosing one"
            node = self.function.node
            kept = self.chunk.node_memo("names bound")  # per node: a key re-reads the functions it reached
            self._own_names = kept.get(node)
            if self._own_names is None:
                self._own_names = kept[node] = names_bound_in(node)
        return self._own_names

    def _method_of_constructed(self, receiver_node: cst.BaseExpression, method: str, receiver: Value) -> FunctionInfo | None:
        """``evaluator.get_scores()`` where this scope bound ``evaluator = BertEvaluator(model, ...)``, or ``BertEvaluator(...)
        .get_scores()``, an instance of a workspace class that is not an nn.Module: the method that runs, to be followed.
        Also a function of this module called through its own module object (``own_module_function``)."""
        if receiver.tags:
            return None
        binding = self.last_binding(receiver_node.value) if isinstance(receiver_node, cst.Name) else None
        built = binding.value_node if binding is not None else receiver_node
        if not isinstance(built, cst.Call):  # a module-level alias of this very module (`d2l = sys.modules[__name__]`)
            return self.summary.own_module_function(built, method, self.params) if binding is None else None
        name = dotted(built.func)
        info = self.summary.local_class(self.canonical(name)) if name else None
        if info is None or self.summary.is_module_class(info):
            return None
        return info.find_method(method, self.summary)

    def _is_bound(self, name: str) -> bool:
        """A variable (not an imported module or a class): bound here, in an enclosing function, or at module level."""
        if name in self.env or name in self.params:
            return True
        if self._enclosing is not None and name not in self._names_bound_here() and name not in self.local_imports:
            bound = self._enclosing_reads[name, True] = self._enclosing._is_bound(name)
            return bound
        return self.summary.is_variable(name) and name not in self.summary.imports

    def canonical(self, raw: str) -> str:
        head, dot, rest = raw.partition(".")
        if head in self.local_imports:
            return self.local_imports[head] + dot + rest
        return self.summary.canonical(raw)

    # ------------------------------------------------------------------ expressions
    def _is_no_grad(self, expression: cst.BaseExpression) -> bool:
        target = expression.func if isinstance(expression, cst.Call) else expression
        name = dotted(target)
        if name is None:
            return False
        resolved = self.canonical(name)
        head = last_part(resolved)
        if head in torchapi.NO_GRAD_CONTEXTS and (torchapi.is_torch_name(resolved) or resolved == head):
            return True
        if head == "set_grad_enabled" and isinstance(expression, cst.Call) and expression.args:
            flag = expression.args[0].value
            return not (isinstance(flag, cst.Name) and flag.value == "True")
        return False

    def evaluate(self, expression: cst.BaseExpression | None, context: Context) -> Value:
        if expression is None:
            return UNKNOWN
        key = id(expression)
        known = self._memo.get(key)
        if known is None:
            known = self._memo[key] = self._evaluate(expression, context)
        return known

    def _evaluate(self, expression: cst.BaseExpression, context: Context) -> Value:
        # one dictionary look-up by the node's exact class (LibCST's node classes have no
        # subclasses): a chain of isinstance tests costs an ABCMeta check per class that fails
        evaluator = _EVALUATORS.get(type(expression))
        return UNKNOWN if evaluator is None else evaluator(self, expression, context)

    def _evaluate_name(self, expression: cst.Name, context: Context) -> Value:
        if expression.value in ("True", "False", "None"):
            return Value((CONSTANT,))
        return self._lookup(expression.value, context)

    def _evaluate_attribute(self, expression: cst.Attribute, context: Context) -> Value:
        key = dotted(expression)
        if key is not None and (key in self.env or key.startswith("self.")):
            found = self._lookup(key, context)
            if found is not UNKNOWN:
                return found
        base = self.evaluate(expression.value, context)
        found = attribute_of(base, expression.attr.value)
        return class_value(self.summary, self.canonical(key)) if found is UNKNOWN and not base.tags and key is not None else found

    def _evaluate_number(self, expression: cst.Integer | cst.Float | cst.Imaginary, context: Context) -> Value:
        return Value((NUMBER, CONSTANT))

    def _evaluate_string(self, expression: cst.SimpleString | cst.ConcatenatedString, context: Context) -> Value:
        text = literal_value(expression) if isinstance(expression, cst.SimpleString) else None
        tags = (CONSTANT, DEVICE) if isinstance(text, str) and text.startswith("cuda") else (CONSTANT,)
        return Value(tags)

    def _evaluate_formatted_string(self, expression: cst.FormattedString, context: Context) -> Value:
        for part in expression.parts:
            if isinstance(part, cst.FormattedStringExpression):
                self.evaluate(part.expression, context)
        return UNKNOWN

    def _evaluate_binary_operation(self, expression: cst.BinaryOperation, context: Context) -> Value:
        left = self.evaluate(expression.left, context)
        right = self.evaluate(expression.right, context)
        combined = join([left, right])
        if CONSTANT in left.tags and CONSTANT in right.tags:
            return Value((CONSTANT, NUMBER))
        kinds = set(combined.tags & OUTPUT_KINDS)
        # a literal operand does not make the result a constant (`out * 0.5`), nor a tensor's a host number
        plain = {CONSTANT} | ({NUMBER} if combined.tags & {TENSOR, GRAPH} else set())
        result = combined.with_tags(remove=kinds | plain | {CONTAINER, STRUCTURED})
        if isinstance(expression.operator, cst.Divide) and GRAPH not in right.tags:
            result = result.with_tags(add=(SCALED,))
        if isinstance(expression.operator, cst.Multiply) and (
            mentions_division(expression.left) or mentions_division(expression.right)
        ):
            result = result.with_tags(add=(SCALED,))
        if len(kinds) == 1 and GRAPH not in right.tags and not right.tags & OUTPUT_KINDS and not isinstance(
            expression.operator, cst.MatrixMultiply
        ):
            result = result.with_tags(add=kinds)  # scaling keeps what the tensor holds; a product mixes it
        return result

    def _evaluate_unary_operation(self, expression: cst.UnaryOperation, context: Context) -> Value:
        value = self.evaluate(expression.expression, context)
        return Value((NUMBER,)) if isinstance(expression.operator, cst.Not) else value

    def _evaluate_comparison(self, expression: cst.Comparison, context: Context) -> Value:
        self.evaluate(expression.left, context)
        for comparison in expression.comparisons:
            self.evaluate(comparison.comparator, context)
        return Value((NUMBER,))

    def _evaluate_boolean_operation(self, expression: cst.BooleanOperation, context: Context) -> Value:
        self.branch_tests.append(expression)
        left = self.evaluate(expression.left, context)
        right = self.evaluate(expression.right, context)
        return join([left, right])

    def _evaluate_subscript(self, expression: cst.Subscript, context: Context) -> Value:
        base = self.evaluate(expression.value, context)
        for element in expression.slice:
            if isinstance(element.slice, cst.Index):
                self.evaluate(element.slice.value, context)
        if len(expression.slice) == 1 and (entry := table_value(base)) is not None:
            return entry  # `MODELS[name]`
        if base.items and len(expression.slice) == 1:
            index = expression.slice[0].slice
            if isinstance(index, cst.Index) and isinstance(index.value, cst.Integer):
                position = int(index.value.value)
                if position < len(base.items):
                    return base.items[position]
        if any(
            isinstance(element.slice, cst.Slice) and torchapi.mentions_rank(self.chunk.code_for(element.slice))
            for element in expression.slice
        ):
            return base.with_tags(add=(SHARDED,))  # `samples[rank::world_size]`: this process's share
        element = element_of(base)
        if STRUCTURED in element.tags and len(expression.slice) == 1 and isinstance(expression.slice[0].slice, cst.Index) and isinstance(
            expression.slice[0].slice.value, cst.SimpleString
        ):
            return element.with_tags(remove=(STRUCTURED,))  # `outputs["logits"]`: one field of a ModelOutput
        return element

    def _evaluate_sequence(self, expression: cst.Tuple | cst.List | cst.Set, context: Context) -> Value:
        items = tuple(self.evaluate(element.value, context) for element in expression.elements)
        if isinstance(expression, cst.Tuple):
            result = join(items)
            return Value(result.tags, site=result.site, note=result.note, roots=result.roots, items=items)
        return Value(join(items).tags | {CONTAINER}, roots=join(items).roots)

    def _evaluate_dict(self, expression: cst.Dict, context: Context) -> Value:
        values = []
        carrier = None  # the first entry that holds a graph: the evidence for the dict holding one
        for element in expression.elements:
            if isinstance(element, cst.DictElement):
                self.evaluate(element.key, context)
                values.append(self.evaluate(element.value, context))
                if carrier is None and GRAPH in values[-1].tags:
                    carrier = element
        complete = len(values) == len(expression.elements)  # no `**spread`
        if carrier is None:
            return literal_dict(values, complete)
        return literal_dict(
            values, complete, site=(self.chunk, carrier), note=f"the dict entry `{quoted(self.chunk, carrier.key)}: {quoted(self.chunk, carrier.value)}`",
        )

    def _evaluate_comprehension(
        self, expression: cst.ListComp | cst.SetComp | cst.GeneratorExp | cst.DictComp, context: Context,
    ) -> Value:
        element = expression.value if isinstance(expression, cst.DictComp) else expression.elt
        inner = self._comprehension_element(expression.for_in, element, context)
        return Value(inner.tags | {CONTAINER}, site=inner.site, note=inner.note, roots=inner.roots)

    def _evaluate_if_expression(self, expression: cst.IfExp, context: Context) -> Value:
        self.branch_tests.append(expression)
        self.evaluate(expression.test, context)
        body = self.evaluate(expression.body, context)
        if checked_to_be_a_number(expression.test, expression.body):
            body = Value((NUMBER,))  # `l_aux if isinstance(l_aux, float) else l_aux.item()`: a Python number there
        return join([body, self.evaluate(expression.orelse, context)])

    def _evaluate_await(self, expression: cst.Await, context: Context) -> Value:
        return self.evaluate(expression.expression, context)

    def _evaluate_named_expression(self, expression: cst.NamedExpr, context: Context) -> Value:
        value = self.evaluate(expression.value, context)
        self._bind_target(expression.target, value, context, expression, value_node=expression.value)
        return value

    def _evaluate_starred(self, expression: cst.StarredElement, context: Context) -> Value:
        return self.evaluate(expression.value, context)

    def _comprehension_element(self, for_in: cst.CompFor, element: cst.BaseExpression, context: Context) -> Value:
        """A comprehension's element, its targets bound to the iterables' elements in its own scope."""
        saved = dict(self.env)
        saved_loops = dict(self.binding_loop)
        try:
            clause: cst.CompFor | None = for_in
            while clause is not None:
                iterable = self.evaluate(clause.iter, context)
                for name in target_names(clause.target):
                    self.env[name] = UNKNOWN
                    self._written.append(name)
                self._bind_target(clause.target, element_of(iterable), context, clause, record=False)
                for condition in clause.ifs:
                    self.evaluate(condition.test, context)
                clause = clause.inner_for_in
            return self.evaluate(element, context)
        finally:
            self.env, self.binding_loop = saved, saved_loops

    def _evaluate_call(self, call: cst.Call, context: Context) -> Value:
        func = call.func
        receiver: Value | None = None
        receiver_key: str | None = None
        method: str | None = None
        callee: str | None = None
        function: FunctionInfo | None = None
        raw = dotted(func)
        head = raw.split(".", 1)[0] if raw else None
        is_attribute = type(func) is cst.Attribute
        attribute_value = self._lookup(raw, context) if is_attribute and raw and (raw in self.env or head == "self") else UNKNOWN
        owner = self.function.owner if self.function is not None else None
        own_method = (
            owner.method_run(cast(cst.Attribute, func).attr.value, self.summary)  # `self.name`: an Attribute
            if owner is not None and head == "self" and raw is not None and raw.count(".") == 1 else None
        )
        if attribute_value.tags & _CALLABLE_VALUES or (
            own_method is None and owner is not None and head == "self" and raw in owner.assigned_attributes()
        ):
            # `self.criterion(...)`, `self.module_(x)`: calling what an attribute holds, not a method
            receiver = attribute_value
            receiver_key = raw
        elif is_attribute and isinstance(func, cst.Attribute) and (raw is None or (head is not None and self._is_bound(head)) or head == "self"):
            receiver = self.evaluate(func.value, context)
            receiver_key = dotted(func.value)
            method = func.attr.value
            function = own_method or self._method_of_constructed(func.value, method, receiver)
        elif is_attribute and isinstance(func, cst.Attribute) and raw is not None:
            callee = self.canonical(raw)
            method = func.attr.value
            function = self.summary.imported_function(raw)
        elif isinstance(func, cst.Name):
            if self._is_bound(func.value) or (func.value == "self" and owner is not None):
                receiver = self.evaluate(func, context)
                receiver_key = func.value
            else:
                callee = self.canonical(func.value)
                function = self.local_functions.get(func.value) or (  # a bare name: this file's, or a star import's
                    self.summary.functions.get(func.value) if "." not in callee or callee == func.value else None
                ) or self.summary.imported_function(func.value)
        else:
            receiver = self.evaluate(func, context)
        args: list[Value] = []
        kwargs: dict[str, Value] = {}
        for arg in call.args:
            value = self.evaluate(arg.value, context)
            if arg.keyword is not None:
                kwargs[arg.keyword.value] = value
            elif not arg.star:
                args.append(value)
        volatile = volatile_input(receiver, *args, *kwargs.values()) if context.grad_off is None else None
        if volatile is not None:  # PyTorch < 0.4: one volatile input, no graph (shown where made if in this chunk)
            context = context.without_grad(volatile.site[1] if volatile.site and volatile.site[0] is self.chunk else call)
        event = CallEvent(
            call, context, self, callee=callee, method=method, receiver=receiver, receiver_key=receiver_key,
            args=args, kwargs=kwargs, function=function, arg_nodes=list(call.args),
        )
        self.events.append(event)
        event.result = call_result(self, event, context)
        if volatile is not None and TENSOR in event.result.tags:
            event.result = event.result.with_tags(add=(VOLATILE,))
        if method in {"backward", "manual_backward"}:
            note_backwarded(self, event)
        if own_method is not None and function is own_method and context.grad_off is None:
            for container, value, node in kept_by_own_method(event, own_method):
                self._record_store("append", container, value, node, call, context)
        elif function is not None and own_method is None and receiver_key:
            for container, value, node in kept_by_instance(event):
                self._record_store("append", container, value, node, call, context, bound=receiver_key)
        for name, value in filled_by_call(event):  # `rec(nested, "", flat)` fills `flat` with `nested`'s entries
            self._assign_key(name, join([self._lookup(name, context), value.with_tags(add=(CONTAINER,))]), context, keep_loop=True)
        receiver_key = receiver_key or holder_of_item(func)  # `history["logits"].append(x)` keeps x in `history`
        if method in {"append", "extend", "insert", "appendleft", "add", "update", "put"} and receiver_key:
            position = 1 if method == "insert" else 0
            stored_args = [a for a in call.args if a.keyword is None]
            if len(stored_args) > position:
                stored = args[position] if position < len(args) else UNKNOWN
                kept = kept_by_method(self, receiver_key, method, position)
                if kept != KEEPS_NOTHING:
                    stored = stored.without_graph() if kept == KEEPS_DETACHED else stored
                    self._record_store(method, receiver_key, stored, stored_args[position].value, call, context)
        return event.result

    # ------------------------------------------------------------------ transfer functions

# What each kind of expression evaluates to (a node of any other class: unknown, a lambda too).
_EVALUATORS: dict[type, Callable[[ScopeAnalysis, Any, Context], Value]] = {
    cst.Name: ScopeAnalysis._evaluate_name,
    cst.Attribute: ScopeAnalysis._evaluate_attribute,
    cst.Call: ScopeAnalysis._evaluate_call,
    cst.Integer: ScopeAnalysis._evaluate_number,
    cst.Float: ScopeAnalysis._evaluate_number,
    cst.Imaginary: ScopeAnalysis._evaluate_number,
    cst.SimpleString: ScopeAnalysis._evaluate_string,
    cst.ConcatenatedString: ScopeAnalysis._evaluate_string,
    cst.FormattedString: ScopeAnalysis._evaluate_formatted_string,
    cst.BinaryOperation: ScopeAnalysis._evaluate_binary_operation,
    cst.UnaryOperation: ScopeAnalysis._evaluate_unary_operation,
    cst.Comparison: ScopeAnalysis._evaluate_comparison,
    cst.BooleanOperation: ScopeAnalysis._evaluate_boolean_operation,
    cst.Subscript: ScopeAnalysis._evaluate_subscript,
    cst.Tuple: ScopeAnalysis._evaluate_sequence,
    cst.List: ScopeAnalysis._evaluate_sequence,
    cst.Set: ScopeAnalysis._evaluate_sequence,
    cst.Dict: ScopeAnalysis._evaluate_dict,
    cst.ListComp: ScopeAnalysis._evaluate_comprehension,
    cst.SetComp: ScopeAnalysis._evaluate_comprehension,
    cst.GeneratorExp: ScopeAnalysis._evaluate_comprehension,
    cst.DictComp: ScopeAnalysis._evaluate_comprehension,
    cst.IfExp: ScopeAnalysis._evaluate_if_expression,
    cst.Await: ScopeAnalysis._evaluate_await,
    cst.NamedExpr: ScopeAnalysis._evaluate_named_expression,
    cst.StarredElement: ScopeAnalysis._evaluate_starred,
}

_CALLABLE_VALUES = frozenset({MODEL, CRITERION, PIPELINE})

