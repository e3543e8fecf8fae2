"""Whether anything uses the autograd graph of one forward: followed through a function's own code.

The dataflow's values lose a graph's trail where it passes through code the analysis cannot read
(an unknown function, an attribute, a container handed elsewhere). This question is the stricter
one a rule asks before it says a graph is recorded for nothing: every name, container and call
that the forward's output reaches inside the function is followed, and the answer is yes ("the
graph may be used") as soon as something derived from it is returned, yielded, kept in an attribute
or a global, captured by a nested function, handed to a call that is not a tensor operation, a
graph-free builtin or a local helper that runs no backward, or backwarded. Only when none of that
happens is the graph known to die inside the function.
"""

from __future__ import annotations

import weakref
from typing import NamedTuple

import libcst as cst

from . import torchapi
from .dependencies import kept_with_scope
from .events import is_backward
from .flow import ScopeAnalysis
from .libraries import KEEPS_NO_GRAPH, call_fact
from .names import dotted, last_part
from .patterns import calls_in, is_optimizer_step
from .tree import blocks_of, children, is_statement, walk
from .values import Tag

# Calls that take a tensor and keep none of its graph: numbers, text, type checks.
_GRAPH_FREE_CALLS = torchapi.GRAPH_FREE_BUILTINS | {"print", "hasattr", "callable"}
# Methods that put their argument into the container they are called on.
_STORING_METHODS = frozenset({"append", "extend", "insert", "appendleft", "add", "update", "put", "setdefault"})
# Rounds of following names in source order: a loop's later assignment feeds its earlier statements.
_ROUNDS = 8


class DroppedGraph:
    """A forward whose graph nothing uses; ``cuts`` are the expressions that drop it explicitly
    (``out.detach()``, ``logits.argmax(1)``, ``out.data``), in no particular order; ``names`` the
    local names that hold it on the way (at module level, another statement reading one of them
    could still use it: the caller checks)."""

    __slots__ = ("cuts", "names")

    def __init__(self, cuts: tuple[cst.CSTNode, ...], names: frozenset[str]) -> None:
        self.cuts = cuts
        self.names = names


def dropped_graph(scope: ScopeAnalysis, forward: cst.Call) -> DroppedGraph | None:
    """How the graph of ``forward`` (a call in ``scope``'s function, or in its module-level statement)
    dies there, or None when something derived from it may be used after all: backwarded, returned,
    kept or handed on. For a module-level statement, names it binds are followed within it only:
    whether another statement reads them is for the caller to rule out (``DroppedGraph.names``).
    Kept with the scope: a key elsewhere asks it again of a training loop's every forward."""
    function = scope.function
    root = function.node.body if function is not None else scope.chunk.module
    if root is None:
        return None
    return kept_with_scope(scope, ("dropped graph", id(forward)), lambda: _Follower(scope, forward).dropped(root))


class _Follower:
    def __init__(self, scope: ScopeAnalysis, forward: cst.Call) -> None:
        self.scope = scope
        self.forward = forward
        self.calls = {id(call.node): call for call in scope.calls()}
        self.names: set[str] = set()  # local names that may hold the graph
        self.cuts: list[cst.CSTNode] = []
        self.graph_free_helpers: dict[int, tuple[cst.FunctionDef, bool]] = {}
        # the branches (ids of the blocks, outermost first) each node sits in, and where each name was given the graph
        self.branches: dict[int, tuple[int, ...]] = {}
        self.bound_in: dict[str, set[tuple[int, ...]]] = {}
        self.binding: cst.CSTNode | None = None
        # per expression, the names and the calls under it, kept with the tree (``_reach``)
        self.reach: dict[cst.CSTNode, tuple[frozenset[str], frozenset[int]]] = scope.chunk.node_memo("graph_use reach")

    def dropped(self, root: cst.CSTNode) -> DroppedGraph | None:
        """Followed in source order, round after round (a loop's later statement feeds its earlier ones); a
        name rebound to something graph-free outside any loop (``audio = audio.cpu().numpy()``) no longer
        holds the graph after that line, unless the rebinding sits in a branch that the path which gave it the
        graph goes around (``_rebind``). Each round checks what the names hold where they are used."""
        nodes = _own_nodes(self.scope, root)
        places = _places(self.scope, root)
        looped = places.looped
        self.branches = places.branches
        held: set[str] = set()  # every name that held it somewhere
        start: set[str] = set()
        for _ in range(_ROUNDS):
            self.names = set(start)
            for node in nodes.followed:
                if isinstance(node, cst.Assign) and id(node) not in looped and not self._carries(node.value):
                    self._rebind(node)
                elif not self._follow(node):
                    return None
                if isinstance(node, (cst.Return, cst.Yield)) and node.value is not None and self._carries(node.value):
                    return None
                if isinstance(node, cst.Call) and not self._stays_inside(node):
                    return None
            held |= self.names
            end = self.names & {name for node in nodes.followed if id(node) in looped for name in _bound_names(node)}
            if end <= start:
                break
            start |= end  # what a loop's later statement binds reaches its earlier ones on the next pass
        else:
            return None  # still spreading: too tangled to say it dies
        if held & nodes.declared:
            return None  # kept in a module-level name
        if held & nodes.captured:
            return None  # a nested function or class captures it and may run later
        return DroppedGraph(tuple(dict.fromkeys(self.cuts)), frozenset(held))

    def _rebind(self, node: cst.Assign) -> None:
        """An assignment of something graph-free, outside any loop: the names it binds no longer hold the graph
        after it, unless it sits in a branch that a path holding the graph goes around (``out = embed(x)`` in the
        ``else`` of an ``if`` whose body put the forward's output in ``out``: one branch rebinding a name leaves the
        other's value in it)."""
        path = self.branches.get(id(node), ())
        for target in node.targets:
            name = target.target.value if isinstance(target.target, cst.Name) else None
            if name is None or name not in self.names:
                continue
            if all(bound[: len(path)] == path for bound in self.bound_in.get(name, {()})):
                self.names.discard(name)
                self.bound_in.pop(name, None)

    def _follow(self, node: cst.CSTNode) -> bool:
        """Bind the names an assignment gives the graph; False when it keeps it outside the function."""
        self.binding = node
        if isinstance(node, cst.Assign) and self._carries(node.value):
            return all(self._bind(target.target) for target in node.targets)
        if isinstance(node, (cst.AnnAssign, cst.AugAssign)) and node.value is not None and self._carries(node.value):
            return self._bind(node.target)
        if isinstance(node, (cst.For, cst.CompFor)) and self._carries(node.iter):
            return self._bind(node.target)
        if isinstance(node, cst.NamedExpr) and self._carries(node.value):
            return self._bind(node.target)
        if isinstance(node, cst.WithItem) and node.asname is not None and self._carries(node.item):
            return self._bind(node.asname.name)
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value in _STORING_METHODS:
            if any(self._carries(arg.value) for arg in node.args):
                return self._bind(node.func.value)  # `outputs.append(out)`: the local list holds it now
        return True

    def _bind(self, target: cst.BaseExpression) -> bool:
        if isinstance(target, cst.Name):
            self.names.add(target.value)
            self.bound_in.setdefault(target.value, set()).add(self.branches.get(id(self.binding), ()))
            return True
        if isinstance(target, (cst.Tuple, cst.List)):
            return all(self._bind(element.value) for element in target.elements)
        if isinstance(target, cst.StarredElement):
            return self._bind(target.value)
        if isinstance(target, cst.Subscript) and isinstance(target.value, cst.Name):
            self.names.add(target.value.value)  # `boxes[:, :4] = ...`: a local tensor or container
            return True
        return False  # `self.cache = out`, `self.results[k] = out`

    def _carries(self, node: cst.CSTNode) -> bool:
        """Whether the value of ``node`` may hold the forward's graph (a cut is remembered as evidence).

        An expression that holds neither the forward nor a name that holds the graph carries nothing and
        holds no cut that does: that is told from what ``_reach`` kept of it, without reading it again at
        each round (every round passes over every call of a long ``main()``, a key reads them all again)."""
        if node is self.forward:
            return True
        if type(node) is cst.Name:
            return node.value in self.names
        reach = self.reach.get(node)
        if reach is None:
            reach = self.reach[node] = _reach(node)
        names, calls = reach
        return (id(self.forward) in calls or not self.names.isdisjoint(names)) and self._carried(node)

    def _carried(self, node: cst.CSTNode) -> bool:
        """``_carries``, read through the expression."""
        if node is self.forward:
            return True
        if isinstance(node, cst.Name):
            return node.value in self.names
        if isinstance(node, (cst.Comparison, cst.FormattedString, cst.SimpleString, cst.ConcatenatedString)):
            return False
        if isinstance(node, cst.Attribute):
            if node.attr.value in torchapi.GRAPH_FREE_ATTRIBUTES:
                self._note_cut(node, node.value)
                return False
            return self._carried(node.value)
        if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Modulo) and isinstance(
            node.left, (cst.SimpleString, cst.FormattedString, cst.ConcatenatedString)
        ):
            return False  # `"%g" % value` formats text
        if isinstance(node, cst.Call):
            func = node.func
            if isinstance(func, cst.Attribute) and func.attr.value in torchapi.GRAPH_FREE_METHODS | {"format"}:
                self._note_cut(node, func.value, *(arg.value for arg in node.args))
                return False
            if isinstance(func, cst.Name) and func.value in _GRAPH_FREE_CALLS:
                return False
            name = dotted(func)
            if name is not None and "." in name and last_part(name) in torchapi.GRAPH_FREE_METHODS:
                return False  # `torch.argmax(out, 1)`
            helper = self.calls.get(id(node))
            if helper is not None and call_fact(helper.callee, KEEPS_NO_GRAPH) is not None:
                self._note_cut(node, *(arg.value for arg in node.args))
                return False  # `wandb.Image(samples)`: the library detaches what it is given
            if helper is not None and helper.function is not None and self._graph_free_helper(helper.function.node):
                self._note_cut(node, *(arg.value for arg in node.args))
                return False  # a local helper whose every `return` drops the graph: `features.cpu().numpy()`, `float(fid)`
        return any(self._carried(child) for child in node.children)

    def _graph_free_helper(self, function: cst.FunctionDef) -> bool:
        """``_returns_graph_free``, read once per follower (its rounds ask again of every call they pass)."""
        known = self.graph_free_helpers.get(id(function))
        if known is None or known[0] is not function:
            known = self.graph_free_helpers[id(function)] = (function, _returns_graph_free(function))
        return known[1]

    def _note_cut(self, cut: cst.CSTNode, *inputs: cst.CSTNode) -> None:
        if any(self._carries(value) for value in inputs):
            self.cuts.append(cut)

    def _stays_inside(self, node: cst.Call) -> bool:
        """A call handed the graph keeps it where this function sees it: a tensor method, a torch,
        torchvision or numpy function (its result is followed), a graph-free call, a local container it is stored in (then
        followed), or a local helper that runs no backward. Anything else may keep or backward it."""
        func = node.func
        given = any(self._carries(arg.value) for arg in node.args)
        if isinstance(func, cst.Attribute):
            method = func.attr.value
            if method in {"backward", "manual_backward"} and (given or self._carries(func.value)):
                return False
            if not given:
                return True
            if method in torchapi.GRAPH_FREE_METHODS | {"format"}:
                return True
            if method in _STORING_METHODS:
                return isinstance(func.value, cst.Name)  # a local container, followed; not `self.outputs`
            if self._carries(func.value):
                return True  # `out.gather(1, index)`: an operation of the output itself
        elif not given:
            return True
        if isinstance(func, cst.Name) and func.value in _GRAPH_FREE_CALLS:
            return True
        call = self.calls.get(id(node))
        if call is None:
            return False
        picked = self._picked_functions(func, call) if call.function is None and isinstance(func, cst.Name) else None
        if call.function is not None or picked:
            inners = [function.analysis(self.scope.summary) for function in picked or [call.function]]
            return all(inner is not None and not any(is_backward(reached) for reached in calls_in(inner, None)) for inner in inners)
        callee = call.callee or ""
        if call_fact(callee, KEEPS_NO_GRAPH) is not None:
            return True
        if is_backward(call) or callee.startswith("torch.autograd"):
            return False
        return torchapi.is_torch_name(callee) or callee.split(".", 1)[0] in {"numpy", "torchvision"}


    def _picked_functions(self, func: cst.Name, call) -> list | None:
        """The functions of this module a local name was picked from by key: ``reduce = REDUCERS[mode]``
        (or ``{"mean": mean_tokens, ...}[mode]``), every value of the dict literal one of them. None
        when anything else could be picked."""
        binding = self.scope.last_binding(func.value, before=call)
        picked = binding.value_node if binding is not None else None
        if not isinstance(picked, cst.Subscript):
            return None
        table = picked.value
        if isinstance(table, cst.Name):
            local = self.scope.last_binding(table.value, before=binding)
            entries = self.scope.summary.bindings.get(table.value) if local is None else None
            table = local.value_node if local is not None else entries[-1][1] if entries and entries[-1][2] is None else None
        if not isinstance(table, cst.Dict) or not table.elements:
            return None
        functions = self.scope.summary.functions
        values = [element.value for element in table.elements if isinstance(element, cst.DictElement)]
        found = [functions.get(value.value) for value in values if isinstance(value, cst.Name)]
        return found if len(found) == len(table.elements) and all(found) else None


# Statements whose blocks run on some paths only: a branch's body, ``else``, ``except`` and ``case`` blocks, a ``try``'s body.
_BRANCHING = (cst.If, cst.Try, cst.TryStar, cst.Match)


class _Places(NamedTuple):
    """Where in ``root`` the nodes a follower's round acts on (``_OwnNodes.followed``) sit."""

    # for each inside a block that runs on some paths only, the ids of those blocks, outermost first; a
    # ``finally`` runs on every path
    branches: dict[int, tuple[int, ...]]
    looped: set[int]  # the ids of those inside a loop's body


def _places(scope: ScopeAnalysis, root: cst.CSTNode) -> _Places:
    """``_Places`` of ``root``, once per tree (as ``_own_nodes``), each statement's part kept with the tree (a
    node memo) relative to the statement: after a key, only the statements on the edit's path are walked again."""
    kept: dict[int, tuple[cst.CSTNode, _Places]] = scope.chunk.memo.setdefault("graph_use places", {})
    found = kept.get(id(root))
    if found is None or found[0] is not root:
        places = _places_kept(root, scope.chunk.node_memo("graph_use places of statements"))
        branches = {id(node): path for node, path, _ in places if path}
        found = kept[id(root)] = (root, _Places(branches, {id(node) for node, _, looped in places if looped}))
    return found[1]


def _places_kept(start: cst.CSTNode, memo: dict) -> list[tuple[cst.CSTNode, tuple[int, ...] | None, bool]]:
    """Each node under ``start`` that a round acts on (outside nested functions and classes), with the blocks
    that run on some paths only around it up to ``start`` (None: where the branches are not read, as a
    ``case``'s guard or a one-line ``if``'s body, which count as on every path) and whether a loop's body
    between holds it. A nested statement's part is taken from ``memo`` or walked and kept there."""
    found: list[tuple[cst.CSTNode, tuple[int, ...] | None, bool]] = []
    # a node, its blocks' path, whether in a loop's body, and the reached parts of a branching statement above
    # it (id -> path) when it is in none of them yet
    stack: list[tuple[cst.CSTNode, tuple[int, ...] | None, bool, dict[int, tuple[int, ...]] | None]] = [(start, (), False, None)]
    while stack:
        node, path, looped, reached = stack.pop()
        if reached is not None and id(node) in reached:
            path, reached = reached[id(node)], None
        if node is not start and is_statement(node):
            if type(node) is cst.FunctionDef or type(node) is cst.ClassDef:
                continue
            if path is not None:  # else a clause of a branching statement (an ``elif``), walked with it
                part = memo.get(node)
                if part is None:
                    part = memo[node] = _places_kept(node, memo)
                if path == () and not looped:
                    found.extend(part)
                else:
                    found.extend((inner, None if where is None else path + where, looped or in_loop) for inner, where, in_loop in part)
                continue
        if type(node) in _FOLLOWED:
            found.append((node, path, looped))
        if path is not None and isinstance(node, _BRANCHING):
            # its blocks, its tests and a match's subject are read, each where it runs; the rest of it is not
            parts: dict[int, tuple[int, ...]] = {}
            for between, block in blocks_of(node):
                parts[id(block)] = path if any(isinstance(clause, cst.Finally) for clause in between) else (*path, id(block))
                parts.update((id(clause.test), path) for clause in between if isinstance(clause, cst.If))
            if isinstance(node, cst.If):
                parts[id(node.test)] = path
            elif isinstance(node, cst.Match):
                parts[id(node.subject)] = path
            stack.extend((child, None, looped, parts) for child in children(node))
            continue
        loop_body = node.body if type(node) is cst.For or type(node) is cst.While else None
        stack.extend((child, path, looped or child is loop_body, reached) for child in children(node))
    return found


def _bound_names(node: cst.CSTNode) -> list[str]:
    """The plain names an assignment-like node binds (what may carry over to a loop's next pass)."""
    targets: list[cst.BaseExpression]
    if isinstance(node, cst.Assign):
        targets = [target.target for target in node.targets]
    elif isinstance(node, (cst.AnnAssign, cst.AugAssign)):
        targets = [node.target]
    elif isinstance(node, (cst.For, cst.CompFor)):
        targets = [node.target]
    elif isinstance(node, cst.NamedExpr):
        targets = [node.target]
    elif isinstance(node, cst.WithItem) and node.asname is not None:
        targets = [node.asname.name]
    elif isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value in _STORING_METHODS:
        targets = [node.func.value]
    else:
        return []
    names: list[str] = []
    while targets:
        target = targets.pop()
        if isinstance(target, cst.Name):
            names.append(target.value)
        elif isinstance(target, (cst.Tuple, cst.List)):
            targets.extend(element.value for element in target.elements)
        elif isinstance(target, (cst.StarredElement, cst.Subscript)):
            targets.append(target.value)
    return names


def _reach(node: cst.CSTNode) -> tuple[frozenset[str], frozenset[int]]:
    """The names (attributes' included) and the ids of the calls under ``node``: what ``_Follower._carries``
    may find the graph in (``node``, kept with them, keeps the calls alive and their ids unused)."""
    names: set[str] = set()
    calls: set[int] = set()
    stack = [node]
    while stack:
        current = stack.pop()
        kind = type(current)
        if kind is cst.Name:
            names.add(current.value)  # type: ignore[attr-defined]
            continue
        if kind is cst.Call:
            calls.add(id(current))
        stack.extend(children(current))
    return frozenset(names), frozenset(calls)


def _returns_graph_free(function: cst.FunctionDef) -> bool:
    """Every ``return`` of the function (none nested) hands back something that holds no graph, whatever it
    was given: a number, text, or a tensor cut off by a graph-free method (``x.cpu().numpy()``, ``float(d)``)."""
    returns = own_returns(function)
    return bool(returns) and all(node.value is not None and not isinstance(node.value, cst.From) and _graph_free_expression(node.value) for node in returns)


def _graph_free_expression(node: cst.BaseExpression) -> bool:
    if isinstance(node, (cst.Tuple, cst.List)):
        return bool(node.elements) and all(_graph_free_expression(element.value) for element in node.elements)
    if isinstance(node, (cst.Comparison, cst.FormattedString, cst.SimpleString, cst.ConcatenatedString, cst.Integer, cst.Float)):
        return True
    if isinstance(node, cst.Attribute):
        return node.attr.value in torchapi.GRAPH_FREE_ATTRIBUTES
    if isinstance(node, cst.Call):
        func = node.func
        if isinstance(func, cst.Attribute):
            return func.attr.value in torchapi.GRAPH_FREE_METHODS
        return isinstance(func, cst.Name) and func.value in _GRAPH_FREE_CALLS
    return False


class _OwnNodes(NamedTuple):
    """What the followers read of a function's tree (``_own_nodes``)."""

    followed: list[cst.CSTNode]  # the nodes outside its nested functions and classes a round acts on, in source order
    declared: frozenset[str]  # the names its ``global`` and ``nonlocal`` statements declare
    captured: frozenset[str]  # the names read or bound inside its nested functions and classes


# The kinds of node a round of ``_Follower`` acts on (binds from, rebinds, follows a call into, or checks
# what is returned); a round passes over every other node without doing anything.
_FOLLOWED = frozenset({
    cst.Assign, cst.AnnAssign, cst.AugAssign, cst.For, cst.CompFor, cst.NamedExpr, cst.WithItem, cst.Call, cst.Return,
    cst.Yield,
})


def _own_nodes(scope: ScopeAnalysis, root: cst.CSTNode) -> _OwnNodes:
    """What the followers read of ``root`` and of its nested functions and classes: once per tree, not once per
    forward followed (a training loop has many), each statement's part kept with the tree (a node memo): after a
    key, only the statements on the edit's path are read again, not every node of a long ``main()``."""
    kept: dict[int, tuple[cst.CSTNode, _OwnNodes]] = scope.chunk.memo.setdefault("graph_use own nodes", {})
    found = kept.get(id(root))
    if found is None or found[0] is not root:
        found = kept[id(root)] = (root, _own_kept(root, scope.chunk.node_memo("graph_use own nodes of statements")))
    return found[1]


def _own_kept(node: cst.CSTNode, memo: dict) -> _OwnNodes:
    """``_OwnNodes`` of ``node``, its nodes taken in source order; each statement under it taken from ``memo`` or
    read and kept there (a nested function or class: the names under it, captured)."""
    followed: list[cst.CSTNode] = []
    declared: set[str] = set()
    captured: set[str] = set()
    stack = [node]
    while stack:
        current = stack.pop()
        kind = type(current)
        if current is not node and is_statement(current):
            part = memo.get(current)
            if part is None:
                part = memo[current] = _captured(current) if kind is cst.FunctionDef or kind is cst.ClassDef else _own_kept(current, memo)
            followed.extend(part.followed)
            declared.update(part.declared)
            captured.update(part.captured)
            continue
        if kind in _FOLLOWED:
            followed.append(current)
        elif kind is cst.Global or kind is cst.Nonlocal:
            declared.update(name.name.value for name in current.names)  # type: ignore[attr-defined]
        stack.extend(reversed(current.children))
    return _OwnNodes(followed, frozenset(declared), frozenset(captured))


def _captured(definition: cst.CSTNode) -> _OwnNodes:
    """What a nested function or class adds to its function's ``_OwnNodes``: every name under it."""
    return _OwnNodes([], frozenset(), frozenset(inner.value for inner in walk(definition) if type(inner) is cst.Name))


def own_returns(function: cst.FunctionDef) -> list[cst.Return | cst.Yield]:
    """The function's own ``return`` statements and ``yield`` expressions, in source order: not those of the
    functions and classes defined inside it."""
    found: list[cst.Return | cst.Yield] = []
    # a stack of the nodes still to read, last child on top (source order), not a nested function calling itself:
    # that would be a reference cycle (the function and its own cell), left for the collector after every analysis
    unread: list[cst.CSTNode] = list(reversed(function.body.children))
    while unread:
        node = unread.pop()
        if isinstance(node, (cst.Return, cst.Yield)):
            found.append(node)
        if not isinstance(node, (cst.FunctionDef, cst.ClassDef)):
            unread.extend(reversed(node.children))
    return found


def feeds_backward(scope: ScopeAnalysis, produced: cst.Call) -> bool:
    """Whether something derived from the value of ``produced`` (a forward, or a call of a helper that runs
    one) is backwarded in ``scope``'s function: a loss built from it, or targets picked from it (pseudo-labels),
    that a ``backward`` goes through. Names, containers and tensor operations are followed as
    ``dropped_graph`` follows them, through graph-free operations too (this asks whether the value trains
    something here, not whether its graph may live on)."""
    follower = _value_follower(scope, produced)
    if follower is None:
        return False
    for call in scope.calls():
        if not is_backward(call) or not isinstance(call.node.func, cst.Attribute):
            continue
        if follower._carries(call.node.func.value) or any(follower._carries(arg.value) for arg in call.node.args):
            return True
    return False


def value_returned(scope: ScopeAnalysis, produced: cst.Call) -> bool:
    """Whether something derived from the value of ``produced`` is returned or yielded by ``scope``'s function."""
    follower = _value_follower(scope, produced)
    if follower is None:
        return False
    return any(step.binds is None and follower.carried(step) for step in _value_steps(scope, follower.root))


# graph_kept's answers per flow: a key in one method of a long class leaves the other methods' flows (and
# their trees) as they were, and the rules that ask again about them get the answer they got before
_KEPT_ANSWERS: weakref.WeakKeyDictionary[ScopeAnalysis, dict[int, tuple[cst.CSTNode, cst.Call, bool]]] = weakref.WeakKeyDictionary()


def graph_kept(scope: ScopeAnalysis, forward: cst.Call) -> bool:
    """Whether the graph of ``forward`` may leave ``scope``'s function (``_graph_kept``), answered once per flow,
    function tree and call."""
    function = scope.function
    if function is None:
        return True
    answers = _KEPT_ANSWERS.setdefault(scope, {})
    known = answers.get(id(forward))
    if known is not None and known[0] is function.node and known[1] is forward:
        return known[2]
    kept = _graph_kept(scope, forward)
    answers[id(forward)] = (function.node, forward, kept)  # the nodes held, so their ids are not reused
    return kept


def _graph_kept(scope: ScopeAnalysis, forward: cst.Call) -> bool:
    """Whether the graph of ``forward`` may leave ``scope``'s function for someone to backward: something
    derived from it (a name, a container, a tensor operation, a call it is handed to) is returned or yielded,
    kept in an attribute or a global, or captured by a nested function. Calls it is handed to are followed
    through, not counted as keeping it (whether the function itself backwards is the caller's question).
    A name rebound to something graph-free outside any loop (``score = score.item()``) no longer holds it
    after that line; inside a loop a later statement may feed an earlier one, so there it keeps holding it."""
    function = scope.function
    if function is None:
        return True
    root = function.node.body
    nodes = _own_nodes(scope, root)
    places = _places(scope, root)
    looped = places.looped
    follower = _Follower(scope, forward)
    follower.branches = places.branches
    for _ in range(_ROUNDS):
        before = set(follower.names)
        for node in nodes.followed:
            if isinstance(node, cst.Assign) and id(node) not in looped and not follower._carries(node.value):
                follower._rebind(node)
            elif not follower._follow(node):
                return True
            if isinstance(node, (cst.Return, cst.Yield)) and node.value is not None and follower._carries(node.value):
                return True
        if follower.names == before:
            break
    else:
        return True  # still spreading: too tangled to say it stays
    return bool(follower.names & (nodes.declared | nodes.captured))


def _value_follower(scope: ScopeAnalysis, produced: cst.Call) -> _ValueFollower | None:
    function = scope.function
    root = function.node.body if function is not None else scope.chunk.module
    if root is None:
        return None
    follower = _ValueFollower(scope, produced, root)
    steps = [step for step in _value_steps(scope, root) if step.binds]
    for _ in range(_ROUNDS):
        before = len(follower.names)
        for step in steps:
            if follower.carried(step):
                follower.names.update(step.binds)  # type: ignore[arg-type]
        if len(follower.names) == before:
            break
    return follower


class _ValueFollower(_Follower):
    """Follows the value itself, not its graph: `logits.argmax(1)` still carries what the forward computed."""

    def __init__(self, scope: ScopeAnalysis, forward: cst.Call, root: cst.CSTNode) -> None:
        super().__init__(scope, forward)
        self.root = root

    def _carried(self, node: cst.CSTNode) -> bool:
        if node is self.forward:
            return True
        if isinstance(node, cst.Name):
            return node.value in self.names
        if isinstance(node, _TEXT):
            return False
        return any(self._carried(child) for child in node.children)

    def carried(self, step: _ValueStep) -> bool:
        """``_carries`` of the expression a step reads, from what the step kept of it."""
        return self.forward in step.calls or not self.names.isdisjoint(step.reads)


_TEXT = (cst.FormattedString, cst.SimpleString, cst.ConcatenatedString)


class _ValueStep:
    """What ``_ValueFollower`` reads of one node of a function: the names and the calls in the expressions it
    follows (those in text left out, as ``_carries`` leaves them), and the names ``_follow`` binds when one of
    them carries the value (None for a ``return`` or ``yield``, which binds nothing)."""

    __slots__ = ("binds", "calls", "reads")

    def __init__(self, binds: tuple[str, ...] | None, *expressions: cst.CSTNode) -> None:
        reads: set[str] = set()
        calls: set[cst.CSTNode] = set()
        stack = list(expressions)
        while stack:
            node = stack.pop()
            if isinstance(node, cst.Name):
                reads.add(node.value)
            elif not isinstance(node, _TEXT):
                if isinstance(node, cst.Call):
                    calls.add(node)
                stack.extend(children(node))
        self.reads = frozenset(reads)
        self.calls = frozenset(calls)
        self.binds = binds


def _value_steps(scope: ScopeAnalysis, root: cst.CSTNode) -> list[_ValueStep]:
    """The steps of ``_ValueFollower`` over ``root``'s own nodes (``_own_nodes``), in source order, once
    per tree, each statement's kept with the tree (a node memo: after a key, only the statements on the
    edit's path are read again). Its rounds go through these few steps, not through every node of a long
    method, and read no expression again."""
    kept: dict[int, tuple[cst.CSTNode, list[_ValueStep]]] = scope.chunk.memo.setdefault("graph_use value steps", {})
    found = kept.get(id(root))
    if found is None or found[0] is not root:
        found = kept[id(root)] = (root, _steps_kept(root, scope.chunk.node_memo("graph_use value steps of statements")))
    return found[1]


def _steps_kept(node: cst.CSTNode, memo: dict) -> list[_ValueStep]:
    """``_value_steps`` of ``node``, walked as ``_own_kept`` walks it; each statement under it taken
    from ``memo`` or read and kept there, a nested function or class left out."""
    steps: list[_ValueStep] = []
    stack = [node]
    while stack:
        current = stack.pop()
        if current is not node and is_statement(current):
            if isinstance(current, (cst.FunctionDef, cst.ClassDef)):
                continue
            part = memo.get(current)
            if part is None:
                part = memo[current] = _steps_kept(current, memo)
            steps.extend(part)
            continue
        step = _value_step(current)
        if step is not None:
            steps.append(step)
        stack.extend(reversed(current.children))
    return steps


def _value_step(node: cst.CSTNode) -> _ValueStep | None:
    """``_ValueStep`` of a node that ``_ValueFollower._follow`` binds from, or that returns or yields a value."""
    if isinstance(node, (cst.Return, cst.Yield)):
        return _ValueStep(None, node.value) if node.value is not None else None
    if isinstance(node, cst.Assign):
        return _ValueStep(_names_bound(*(target.target for target in node.targets)), node.value)
    if isinstance(node, (cst.AnnAssign, cst.AugAssign)):
        return _ValueStep(_names_bound(node.target), node.value) if node.value is not None else None
    if isinstance(node, (cst.For, cst.CompFor)):
        return _ValueStep(_names_bound(node.target), node.iter)
    if isinstance(node, cst.NamedExpr):
        return _ValueStep(_names_bound(node.target), node.value)
    if isinstance(node, cst.WithItem):
        return _ValueStep(_names_bound(node.asname.name), node.item) if node.asname is not None else None
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value in _STORING_METHODS:
        return _ValueStep(_names_bound(node.func.value), *(arg.value for arg in node.args))
    return None


def _names_bound(*targets: cst.BaseExpression) -> tuple[str, ...]:
    """The names ``_Follower._bind`` adds for these targets, one after the other: up to the first it cannot
    bind (``self.cache = out``), as ``all`` stops there."""
    found: list[str] = []
    all(_bind_names(target, found) for target in targets)
    return tuple(found)


def _bind_names(target: cst.BaseExpression, found: list[str]) -> bool:
    # A module-level function, not a closure calling itself: that closure and its cell would form a reference
    # cycle at every call, which only the garbage collector frees (tests/test_idle_gc.py).
    if isinstance(target, cst.Name):
        found.append(target.value)
        return True
    if isinstance(target, (cst.Tuple, cst.List)):
        return all(_bind_names(element.value, found) for element in target.elements)
    if isinstance(target, cst.StarredElement):
        return _bind_names(target.value, found)
    if isinstance(target, cst.Subscript) and isinstance(target.value, cst.Name):
        found.append(target.value.value)
        return True
    return False


def program_trains(module) -> bool:
    """The file (a ``ModuleView``), or what its module level runs in the workspace (followed ``MAX_CALL_DEPTH``
    calls deep), backwards, steps an optimizer or asks ``torch.autograd`` for gradients: a graph recorded in it
    may be used, and a model it runs may be trained. Asked by TL102 of an inference script's passes and by TL208
    of a script's module level (keep it as a ``module_fact``)."""
    if module.backward_calls or any(is_optimizer_step(call) for call in module.all_calls()):
        return True
    return any(
        is_backward(call) or is_optimizer_step(call) or _asks_autograd(call) or _handles_an_optimizer(call)
        for scope in module.all_scopes if scope.function is None
        for call in calls_in(scope, None)
    )


def _asks_autograd(call) -> bool:
    """A call of ``torch.autograd`` (``grad``, ``backward``, a ``Function``), not its ``Variable`` wrapper, which
    has only wrapped a tensor (old code wraps every input in it)."""
    callee = call.callee or ""
    return callee.startswith("torch.autograd.") and callee not in torchapi.VARIABLE_WRAPPERS


def _handles_an_optimizer(call) -> bool:
    """An optimizer's gradients cleared, or an optimizer handed to code that may step it (Swin's
    ``loss_scaler(loss, optimizer, ...)``, an object whose ``__call__`` backwards and steps): a program
    that does either trains."""
    if call.method == "zero_grad" and call.receiver is not None and Tag.OPTIMIZER in call.receiver.tags:
        return True
    return any(Tag.OPTIMIZER in value.tags for value in (*call.args, *call.kwargs.values()))
