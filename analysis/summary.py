"""Module-level facts: what each top-level statement binds, merged into one cheap summary.

Per statement: imports, function and class definitions, module-level assignments. The summary
merges them (a dictionary merge, no parsing) and answers the cross-statement questions every
rule asks: what does ``nn`` stand for, is ``Net`` an ``nn.Module``, what was ``model`` bound to.
Values of module-level names are computed on demand and memoised for one analysis.
"""

from __future__ import annotations

import builtins
import itertools
import threading
from collections.abc import Callable, Collection, Iterator
from typing import TYPE_CHECKING, Protocol

import libcst as cst

from . import libraries, library_source, torchapi
from .dependencies import WholeModuleDict, note_flow
from .dispatch import is_stub, overriding_method
from .events import CallEvent, backward_target, is_backward
from .names import canonical, dotted, imports_of, last_part, star_imported, star_target
from .parsing import DEFERRED_PARSE_LOCK, ParsedChunk, UnparsedChunk
from .tree import small_statement_facts
from .values import CONSTANT, UNKNOWN, Value, value_key

if TYPE_CHECKING:
    from .flow import ScopeAnalysis
    from .workspace import Workspace

_BUILTINS = frozenset(dir(builtins))
# Top-level packages that are never a workspace file: not worth a look on disk.
_NEVER_LOCAL = frozenset({
    "torch", "torchvision", "torchaudio", "torchtext", "numpy", "np", "transformers", "accelerate", "datasets",
    "lightning", "pytorch_lightning", "deepspeed", "timm", "peft", "trl", "os", "sys", "math", "random", "json",
    "collections", "functools", "itertools", "typing", "dataclasses", "argparse", "logging", "pathlib", "time",
})


class Flow(Protocol):
    """The dataflow walk over one scope (flow.py's ``ScopeAnalysis``). The facts below that come from a
    body's flow (what a function returns, what ``__init__`` binds to ``self.x``, what a module-level
    name holds) run it; the walk reads these facts in turn. So the summary is handed the walk by
    whoever builds it (module.py) rather than importing it."""

    def of_function(self, info: FunctionInfo, summary: ModuleSummary) -> ScopeAnalysis: ...

    def value_of_expression(self, expression: cst.BaseExpression, chunk: ParsedChunk, summary: ModuleSummary) -> Value: ...


# The functions whose flow each walk in progress on this thread has asked for (innermost last), and
# those whose text it read (``texts``).
_walks = threading.local()


def asked_so_far() -> int:
    """How many functions' flows the innermost walk in progress has asked for."""
    walking = getattr(_walks, "reads", None)
    return len(walking[-1]) if walking else 0


# A question a walk asked of a function's text: a function of it and further arguments, with those arguments.
TextQuestion = tuple  # (ask, *arguments): ask(function, *arguments)


def note_text_read(function: FunctionInfo, question: TextQuestion | None = None, answer: object = None) -> None:
    """The walk in progress read a function's text rather than its flow (which of its parameters a
    method appends to ``self``: ``calls.attribute_keeping``), asking it ``question`` and getting
    ``answer``. Its kept flow holds while the question asked of the function as it is now gets the
    same answer (with no question: while the function has the tree it read), so that after an edit
    of that method the callers in its class whose answer changed are walked again, and only those."""
    texts = getattr(_walks, "texts", None)
    if texts:
        texts[-1].setdefault((function, question), function.node if question is None else answer)


def _text_answer(function: FunctionInfo, question: TextQuestion | None) -> object:
    return function.node if question is None else question[0](function, *question[1:])


class FunctionInfo:
    __slots__ = (
        "name", "node", "chunk", "owner", "home", "reads", "texts_read", "pending", "previous", "checkpointed", "resume", "_analysis", "_analysing",
    )

    def __init__(self, name: str, node: cst.FunctionDef, chunk: ParsedChunk, owner: ClassInfo | None) -> None:
        self.name = name
        self.node = node
        self.chunk = chunk
        self.owner = owner
        self.home: ModuleSummary | None = None  # set for definitions in another workspace file
        # The functions whose flow this one's walk asked for, in order, each with whether it was
        # being walked then (recursion: the walk got none): after an edit of one method of a class,
        # the other methods whose walk read none of what changed keep theirs, if the walks would
        # come in the same order (``ModuleAnalysis._methods_kept``).
        self.reads: tuple[tuple[FunctionInfo, bool], ...] = ()
        # The functions whose text (not flow) the walk read, each with the question it asked of it and the
        # answer (``note_text_read``).
        self.texts_read: tuple[tuple[FunctionInfo, tuple[TextQuestion | None, object]], ...] = ()
        # Set on the kept flow of a method after an edit of another method of its class: checked
        # (``_still_holds``) the first time it is asked for, walked again if it does not hold.
        self.pending = False
        # What other walks read of this function's flow before it was walked again (``exported``).
        self.previous: tuple | None = None
        # A function being edited (``ModuleAnalysis._function_resumed``): its walk keeps the state at
        # each statement of its body, and ``resume`` (its flow, rewound to the first statement the
        # edit changed, and that statement's path: ``flow_checkpoints``) is where the next ask goes on from.
        self.checkpointed = False
        self.resume: tuple[ScopeAnalysis, tuple[int, ...]] | None = None
        self._analysis: ScopeAnalysis | None = None
        self._analysing = False

    def analysis(self, summary: ModuleSummary) -> ScopeAnalysis | None:
        """The function's own flow; None while it is being analysed (recursion)."""
        walking = getattr(_walks, "reads", None)
        if walking:
            walking[-1].setdefault(self, self._analysing)  # the first ask decides: a walk in progress stays so
        if self.pending:
            self.pending = False
            if not self._still_holds(summary) and self._analysis is not None:
                self.previous = exported(self._analysis)
                if self.owner is not None:
                    self.owner.forget_flows({self})
                FunctionInfo.release(self)  # its flow only: a local function is still defined where it was
        if self._analysis is None:
            if self._analysing:
                return None
            summary = self.home or summary
            if walking is None:
                walking = _walks.reads = []
            resume, self.resume = self.resume, None
            # a resumed walk asked, before the statement it goes on from, for what the walk it goes on asked for then
            reads: dict[FunctionInfo, bool] = dict(self.reads[: resume[0].reads_before(resume[1])]) if resume else {}
            # and of the texts it read, all of them (those read after that statement too: kept, they can
            # only make the flow walked again)
            texts: dict[tuple, object] = {(read, question): answer for read, (question, answer) in self.texts_read} if resume else {}
            walking.append(reads)
            texts_walking = getattr(_walks, "texts", None)
            if texts_walking is None:
                texts_walking = _walks.texts = []
            texts_walking.append(texts)
            self._analysing = True
            try:
                self._analysis = (
                    resume[0].resumed(self, resume[1], summary) if resume is not None else summary.flow.of_function(self, summary)
                )
            finally:
                self._analysing = False
                walking.pop()
                texts_walking.pop()
            self.reads = tuple(reads.items())
            self.texts_read = tuple((read, (question, answer)) for (read, question), answer in texts.items())
        note_flow(self, self._analysis)
        return self._analysis

    def _still_holds(self, summary: ModuleSummary) -> bool:
        """Whether this kept flow is what walking the function again would give: every flow its walk
        asked for is, as far as a walk reads it (``exported``), what it was then, and is being walked
        now exactly when it was then. Asked with this function counted as being walked, as its walk
        would be; the flows it asks for are walked now if they have to be, as its walk would. What it
        asked of functions' texts gets the same answers."""
        walking = getattr(_walks, "reads", None)
        if walking is None:
            walking = _walks.reads = []
        texts_walking = getattr(_walks, "texts", None)
        if texts_walking is None:
            texts_walking = _walks.texts = []
        walking.append({})  # what is asked here is not a new walk's reads
        texts_walking.append({})
        self._analysing = True
        try:
            for read, (question, answer) in self.texts_read:
                now = _text_answer(read, question)
                if now is not answer and now != answer:
                    return False
            for read, was_walking in self.reads:
                if read is self:
                    continue
                analysis = read.analysis(summary)
                if was_walking:
                    if not read._analysing:
                        return False
                elif analysis is None or (read.previous is not None and read.previous != exported(analysis)):
                    return False
            return True
        finally:
            self._analysing = False
            walking.pop()
            texts_walking.pop()

    def release(self) -> None:
        """Let go of the function's flow, which refers back to it, and of the functions defined in it
        (``ChunkFacts.release``)."""
        if self._analysis is not None:
            for inner in (*self._analysis.local_functions.values(), *self._analysis.defined_later.values()):
                inner.release()
            self._analysis.release()
        self._analysis = None
        if self.resume is not None:
            rewound = self.resume[0]
            for inner in (*rewound.local_functions.values(), *rewound.defined_later.values()):
                inner.release()
            rewound.release()
            self.resume = None
        self.reads = ()
        self.texts_read = ()

    @property
    def positional_parameters(self) -> list[str]:
        """The parameters a call's positional arguments fill, in order (a method's ``self`` or ``cls``
        left out)."""
        params = self.node.params
        names = [param.name.value for param in (*params.posonly_params, *params.params)]
        return names[1:] if self.owner is not None and names[:1] in (["self"], ["cls"]) else names

    @property
    def qualified_name(self) -> str:
        return f"{self.owner.name}.{self.name}" if self.owner else self.name


class ClassInfo:
    __slots__ = ("name", "node", "chunk", "bases", "methods", "home", "asked_subclasses", "_attributes", "_output", "_assigned", "_placeholders")

    def __init__(self, name: str, node: cst.ClassDef, chunk: ParsedChunk, bases: tuple[str, ...]) -> None:
        self.name = name
        self.node = node
        self.chunk = chunk
        self.bases = bases  # canonical dotted names as written
        self.methods: dict[str, FunctionInfo] = {}
        self.home: ModuleSummary | None = None  # set for definitions in another workspace file
        # A walk of a method asked which subclass overrides a method it calls on ``self`` (dispatch.py): the
        # class's statement is walked again when a statement defining one of its subclasses changes.
        self.asked_subclasses = False
        self._attributes: dict[str, Value] | None = None
        self._output: Value | None = None
        self._assigned: dict[str, str] | None = None  # "self.x" -> the first method (after __init__) that binds it
        self._placeholders: frozenset[str] | None = None  # the "self.x" that __init__ binds to None

    def forget_flows(self, walked_again: set[FunctionInfo]) -> None:
        """Forget what was read of the flows of methods that are walked again (after an edit). What
        ``attributes`` read stays when none of its methods is: a fresh analysis would have read it
        as it was read then, while ``__init__`` was being walked perhaps."""
        if any(self.methods.get(name) in walked_again for name in ("__init__", "setup", "build")):
            self._attributes = None
        if self.methods.get("forward") in walked_again:
            self._output = None

    def attributes(self, summary: ModuleSummary) -> dict[str, Value]:
        """Values bound to ``self.<name>`` in ``__init__`` (and ``setup`` for Lightning-style modules)."""
        summary = self.home or summary
        # asked of each method every time, not only the first: a walk records what it reads (FunctionInfo.reads)
        analyses = [method.analysis(summary) for method in map(self.methods.get, ("__init__", "setup", "build")) if method]
        if self._attributes is None:
            self._attributes = {}
            for analysis in analyses:
                if analysis is not None:
                    for key, value in analysis.final_env.items():
                        if key.startswith("self."):
                            self._attributes.setdefault(key, value)
        return self._attributes

    def attribute(self, key: str, summary: ModuleSummary) -> Value | None:
        """What ``self.<name>`` holds in any method: bound in ``__init__`` (or ``setup``/``build``), or
        else in the one method that binds it (``initialize_module``); None when no method binds it."""
        known = self.attributes(summary).get(key)
        if known is not None and key in self._none_placeholders():
            return self._filled_by_a_method(key, summary) or known
        if known is not None:
            return known
        binder = self.assigned_attributes().get(key)
        method = self.methods.get(binder) if binder else None
        analysis = method.analysis(self.home or summary) if method is not None else None
        if analysis is None:  # being analysed: what it binds is not known yet
            return UNKNOWN if binder else None
        return analysis.final_env.get(key, UNKNOWN)

    def _none_placeholders(self) -> frozenset[str]:
        """The ``self.<name>`` keys ``__init__`` binds to ``None`` (``self._model = None``, filled by a `load()`)."""
        init = self.methods.get("__init__")
        if self._placeholders is not None or init is None or not isinstance(init.node.body, cst.IndentedBlock):
            return self._placeholders or frozenset()
        self._placeholders = frozenset(
            f"self.{target.target.attr.value}"
            for line in init.node.body.body if isinstance(line, cst.SimpleStatementLine)
            for small in line.body if isinstance(small, cst.Assign) and isinstance(small.value, cst.Name) and small.value.value == "None"
            for target in small.targets
            if isinstance(target.target, cst.Attribute) and isinstance(target.target.value, cst.Name) and target.target.value.value == "self"
        )
        return self._placeholders

    def _filled_by_a_method(self, key: str, summary: ModuleSummary) -> Value | None:
        """What another method of the class binds to ``key`` where ``__init__`` leaves ``None`` as a placeholder: the
        value the methods that read it after that method ran see (a model a lazy `load()` builds); None if no other
        method binds a value that is not a constant."""
        for method in self.methods.values():
            if method.name in ("__init__", "setup", "build") or key not in self_targets_kept(self.chunk, method.node):
                continue
            analysis = method.analysis(self.home or summary)
            found = analysis.final_env.get(key) if analysis is not None else None
            if found is not None and found.tags and not found.tags <= {CONSTANT}:
                return found
        return None

    def assigned_attributes(self) -> dict[str, str]:
        """Every ``self.<name>`` some method of the class assigns (read from the text, no flow), with the
        method that assigns it first in the class body (``__init__`` and ``setup`` first)."""
        if self._assigned is None:
            assigned: dict[str, str] = {}
            order = sorted(self.methods.values(), key=lambda m: m.name not in ("__init__", "setup", "build"))
            for method in order:  # kept per method: a key in one method of a long class reads that method again
                for target in self_targets_kept(self.chunk, method.node):
                    assigned.setdefault(target, method.name)
            self._assigned = assigned
        return self._assigned

    def find_method(self, name: str, summary: ModuleSummary, depth: int = 0) -> FunctionInfo | None:
        """The method ``name`` of this class or of a base class defined in the workspace."""
        found = self.methods.get(name)
        if found is not None or depth >= 8:
            return found
        summary = self.home or summary
        for base in self.bases:
            parent = summary.local_class(summary.canonical(base)) if base else None
            if parent is not None and parent is not self:
                found = parent.find_method(name, summary, depth + 1)
                if found is not None:
                    return found
        return None

    def method_run(self, name: str, summary: ModuleSummary) -> FunctionInfo | None:
        """The method that ``self.<name>()`` runs in this class's methods: its own or a workspace base's, or
        where those leave it to subclasses (none, or a stub), the one subclass override (dispatch.py)."""
        found = self.find_method(name, summary)
        if found is None and name in self.assigned_attributes():
            return None  # `self.criterion(...)`: an attribute called, not a method
        if found is not None and not is_stub(found):
            return found
        return overriding_method(summary, self, name, found) or found

    def forward_output(self, summary: ModuleSummary) -> Value:
        """What ``forward`` returns (softmax? log-probabilities? raw logits?), or unknown."""
        summary = self.home or summary
        forward = self.methods.get("forward")
        analysis = forward.analysis(summary) if forward else None  # every time: a walk records what it reads
        if self._output is None:
            self._output = analysis.return_value if analysis is not None else UNKNOWN
        return self._output


class ChunkFacts:
    """What one top-level statement contributes to the module summary."""

    __slots__ = ("imports", "stars", "functions", "classes", "bindings", "global_bindings")

    @property
    def defined_names(self) -> set[str]:
        """Every module-level name this statement binds."""
        return {*self.imports, *self.functions, *self.classes, *(name for name, _, _ in self.bindings)}

    def __init__(self, chunk: ParsedChunk) -> None:
        self.imports: dict[str, str] = {}
        self.stars: list[str] = []  # modules imported with `from module import *`
        self.functions: dict[str, FunctionInfo] = {}
        self.classes: dict[str, ClassInfo] = {}
        self.bindings: list[tuple[str, cst.BaseExpression, int | None]] = []
        # module-level names a top-level function declares `global` and binds (`global _model; _model = Net()` in a
        # `load_model()`): what functions read once it has run, where the module level binds only a placeholder
        self.global_bindings: list[tuple[str, cst.BaseExpression]] = []
        for statement in chunk.body:
            self._collect(statement, chunk)

    def release(self) -> None:
        """Let go of what these facts refer to, once no analysis uses them (an edit replaced the
        statement): a class's methods name it as their owner and a function's flow names the
        function, cycles that only the cyclic collector frees, and the server runs that only when
        the user pauses. Until then each key typed in a class kept the replaced statement's text,
        tree and memos (0.7 MB a key in a 3,300-line class)."""
        for class_info in self.classes.values():
            for method in class_info.methods.values():
                method.release()
            class_info.methods = {}
        for function in self.functions.values():
            function.release()

    def _collect(self, statement: cst.CSTNode, chunk: ParsedChunk) -> None:
        if isinstance(statement, cst.SimpleStatementLine):
            for small in statement.body:
                if isinstance(small, (cst.Import, cst.ImportFrom)):
                    self.imports.update(imports_of(small))
                    star = star_imported(small)
                    if star is not None:
                        self.stars.append(star)
                elif isinstance(small, cst.Assign) :
                    for target in small.targets:
                        self._bind(target.target, small.value)
                elif isinstance(small, cst.AnnAssign) and small.value is not None:
                    self._bind(small.target, small.value)
        elif isinstance(statement, cst.FunctionDef):
            self.functions[statement.name.value] = FunctionInfo(statement.name.value, statement, chunk, None)
            self.global_bindings.extend(_global_bindings(statement))
        elif isinstance(statement, cst.ClassDef):
            bases = tuple(dotted(arg.value) or "" for arg in statement.bases)
            info = ClassInfo(statement.name.value, statement, chunk, bases)
            if isinstance(statement.body, cst.IndentedBlock):
                for item in statement.body.body:
                    if isinstance(item, cst.FunctionDef):
                        info.methods[item.name.value] = FunctionInfo(item.name.value, item, chunk, info)
            self.classes[statement.name.value] = info
        elif isinstance(statement, (cst.If, cst.Try, cst.With, cst.For, cst.While)):
            for block in _blocks_of(statement):
                for inner in block:
                    self._collect(inner, chunk)

    def _bind(self, target: cst.BaseExpression, value: cst.BaseExpression) -> None:
        if isinstance(target, cst.Name):
            self.bindings.append((target.value, value, None))
        elif isinstance(target, (cst.Tuple, cst.List)):
            for index, element in enumerate(target.elements):
                if isinstance(element.value, cst.Name):
                    self.bindings.append((element.value.value, value, index))


def _is_none(expression: cst.BaseExpression) -> bool:
    return isinstance(expression, cst.Name) and expression.value == "None"


def _global_bindings(function: cst.FunctionDef) -> list[tuple[str, cst.BaseExpression]]:
    """The assignments of the names ``function`` declares ``global``, in its body's statements and the blocks of its
    `if`/`try`/`with` statements (not in nested functions, whose names are their own)."""
    declared: set[str] = set()
    assigned: list[tuple[str, cst.BaseExpression]] = []
    # in source order through a stack of the blocks being read, not a nested function calling itself: that would be
    # a reference cycle (the function and its own cell), left for the collector after every analysis
    reading: list[Iterator[cst.CSTNode]] = [iter(function.body.body)] if isinstance(function.body, cst.IndentedBlock) else []
    while reading:
        statement = next(reading[-1], None)
        if statement is None:
            reading.pop()
        elif isinstance(statement, cst.SimpleStatementLine):
            for small in statement.body:
                if isinstance(small, cst.Global):
                    declared.update(item.name.value for item in small.names)
                elif isinstance(small, cst.Assign):
                    assigned.extend((target.target.value, small.value) for target in small.targets if isinstance(target.target, cst.Name))
        elif isinstance(statement, (cst.If, cst.Try, cst.With)):
            reading.append(itertools.chain.from_iterable(_blocks_of(statement)))
    return [(name, value) for name, value in assigned if name in declared]


def exported(analysis: ScopeAnalysis) -> tuple:
    """What a walk of another function reads of a function's flow (calls.py, ``ClassInfo``): what it
    returns, with the calls it makes when that value holds graph seeds, and what it binds to
    ``self.x``; compared by identity (a value made anew, or of a node parsed anew, differs)."""
    value = analysis.return_value
    calls = tuple(map(_event_key, analysis.calls())) if value.roots or value.items is not None else ()
    bound = tuple((key, value_key(found)) for key, found in analysis.final_env.items() if key.startswith("self."))
    return value_key(value), calls, bound


def _event_key(event: CallEvent) -> tuple:
    return event.node, event.method, event.callee, backward_target(event).roots if is_backward(event) else None


def self_targets_kept(chunk: ParsedChunk, node: cst.FunctionDef) -> tuple[str, ...]:
    """The ``self.x`` keys a method of ``chunk``'s tree binds (``self_targets``), kept per node (a key in a method
    asks it of the method before the edit, read at the key before, and after), each compound statement's part kept
    too: the method holding the edit is a new node at each key, its statements off the edit's path are not."""
    kept = chunk.node_memo("self targets")
    found = kept.get(node)
    if found is None:
        found = kept[node] = small_statement_facts(node, kept, self_targets)
    return found


def self_targets(inner: cst.CSTNode):
    """``self.x`` keys an assignment binds: ``self.x = ...``, ``self.x: T = ...``, ``self.x, self.y = ...``."""
    if isinstance(inner, cst.Assign):
        targets = [target.target for target in inner.targets]
    elif isinstance(inner, (cst.AnnAssign, cst.AugAssign)):
        targets = [inner.target]
    else:
        return
    for target in targets:
        elements = [element.value for element in target.elements] if isinstance(target, (cst.Tuple, cst.List)) else [target]
        for element in elements:
            key = dotted(element) if isinstance(element, cst.Attribute) else None
            if key is not None and key.startswith("self.") and key.count(".") == 1:
                yield key


def _is_no_grad_decorator(summary: ModuleSummary, expression: cst.BaseExpression) -> bool:
    name = dotted(expression.func if isinstance(expression, cst.Call) else expression)
    if name is None:
        return False
    resolved = summary.canonical(name)
    return last_part(resolved) in torchapi.NO_GRAD_CONTEXTS and (torchapi.is_torch_name(resolved) or resolved == last_part(resolved))


def _blocks_of(statement: cst.CSTNode) -> list[tuple[cst.CSTNode, ...]]:
    blocks: list[tuple[cst.CSTNode, ...]] = []
    body = getattr(statement, "body", None)
    if isinstance(body, cst.IndentedBlock):
        blocks.append(tuple(body.body))
    for attribute in ("orelse", "finalbody"):
        extra = getattr(statement, attribute, None)
        if isinstance(extra, cst.If):
            blocks.extend(_blocks_of(extra))
        elif extra is not None and isinstance(getattr(extra, "body", None), cst.IndentedBlock):
            blocks.append(tuple(extra.body.body))
    for handler in getattr(statement, "handlers", ()):
        if isinstance(handler.body, cst.IndentedBlock):
            blocks.append(tuple(handler.body.body))
    return blocks


class _Definitions(WholeModuleDict):
    """A summary's ``functions`` or ``classes`` while some of its file's top-level definitions are
    not parsed yet (an imported file's: ``UnparsedChunk``). A lookup by name parses the
    definitions of that name first; a walk of the whole table parses all of them and orders it as
    the whole file parsed at once would. Until every definition is parsed, reads and parses hold
    ``DEFERRED_PARSE_LOCK``: two analysis threads of the server may read one imported file."""

    __slots__ = ("_summary",)

    def __init__(self, summary: ModuleSummary) -> None:
        super().__init__()
        self._summary = summary

    # Each lookup is written out, not routed through one helper: the flow's name lookups in an
    # imported file come here, and a shared helper measured 1.5 % of a cold run over torchtune.
    def get(self, name, default=None):
        if self._summary.complete:
            return dict.get(self, name, default)
        with DEFERRED_PARSE_LOCK:  # another thread's parse may be rebuilding the table
            self._summary.parse_definitions(name)
            return dict.get(self, name, default)

    def __getitem__(self, name):
        if self._summary.complete:
            return dict.__getitem__(self, name)
        with DEFERRED_PARSE_LOCK:  # another thread's parse may be rebuilding the table
            self._summary.parse_definitions(name)
            return dict.__getitem__(self, name)

    def __contains__(self, name) -> bool:
        if self._summary.complete:
            return dict.__contains__(self, name)
        with DEFERRED_PARSE_LOCK:  # another thread's parse may be rebuilding the table
            self._summary.parse_definitions(name)
            return dict.__contains__(self, name)

    def __iter__(self):
        self._summary.parse_definitions()
        return super().__iter__()

    def keys(self):
        self._summary.parse_definitions()
        return super().keys()

    def values(self):
        self._summary.parse_definitions()
        return super().values()

    def items(self):
        self._summary.parse_definitions()
        return super().items()

    def __len__(self) -> int:
        self._summary.parse_definitions()
        return super().__len__()


class ModuleSummary:
    """The merge of every statement's facts, plus memoised values of module-level names."""

    def __init__(
        self, chunks: list[ParsedChunk], facts: list[ChunkFacts | None], flow: Flow, path: str = "",
        workspace: Workspace | None = None, on_parsed: Callable[[ChunkFacts], None] | None = None,
    ) -> None:
        """``facts`` is None for a top-level definition not parsed yet (``UnparsedChunk``), whose
        facts are made when its name is looked up; ``on_parsed`` is told of them then. ``flow`` is the
        walk that the facts derived from a body's dataflow run on."""
        self.chunks = chunks
        self.flow = flow
        self.path = path
        self.workspace = workspace
        # Workspace files this module's names were resolved to, with their (mtime, size) then.
        self.resolved: dict[str, tuple[int, int] | None] = {}
        # Imports are not tracked: an edit that changes any import recomputes everything.
        self.imports: dict[str, str] = {}
        # Modules imported with `from module import *`, in order: a name defined nowhere else may be theirs.
        self.stars: list[str] = []
        # name -> [(chunk index, value expression, tuple index)], in order
        self.bindings: dict[str, list[tuple[int, cst.BaseExpression, int | None]]] = WholeModuleDict()
        # name -> [(chunk index of the function, value expression)]: ChunkFacts.global_bindings
        self.global_bindings: dict[str, list[tuple[int, cst.BaseExpression]]] = WholeModuleDict()
        self._facts = facts
        self._on_parsed = on_parsed
        # name -> indexes of the unparsed definitions of that name (a def or class binds nothing else)
        self._unparsed: dict[str, list[int]] = {}
        for chunk, chunk_facts in zip(chunks, facts):
            if chunk_facts is None:
                assert isinstance(chunk, UnparsedChunk), "only an unparsed definition has no facts yet"
                self._unparsed.setdefault(chunk.defined_name, []).append(chunk.index)
                continue
            self.imports.update(chunk_facts.imports)
            self.stars.extend(chunk_facts.stars)
            for name, expression, index in chunk_facts.bindings:
                self.bindings.setdefault(name, []).append((chunk.index, expression, index))
            for name, expression in chunk_facts.global_bindings:
                self.global_bindings.setdefault(name, []).append((chunk.index, expression))
        # set once every definition is parsed and in the tables (another thread may be parsing them)
        self.complete = not self._unparsed
        self.functions: dict[str, FunctionInfo] = _Definitions(self) if self._unparsed else WholeModuleDict()
        self.classes: dict[str, ClassInfo] = _Definitions(self) if self._unparsed else WholeModuleDict()
        self._merge_definitions()
        self._values: dict[tuple[str, int], Value] = {}
        self._evaluating: set[tuple[str, int]] = set()
        self._module_classes: dict[str, bool] = {}
        self._star_names: dict[str, str | None] = {}  # a name from a star import -> the import it stands for there

    def _merge_definitions(self) -> None:
        """``functions`` and ``classes`` from the facts made so far, in statement order (a later
        definition of a name replaces an earlier one, as at run time)."""
        functions: dict[str, FunctionInfo] = {}
        classes: dict[str, ClassInfo] = {}
        for chunk_facts in self._facts:
            if chunk_facts is not None:
                functions.update(chunk_facts.functions)
                classes.update(chunk_facts.classes)
        for table, merged in ((self.functions, functions), (self.classes, classes)):
            dict.clear(table)
            dict.update(table, merged)

    def parse_definitions(self, name: str | None = None) -> None:
        """Parse the unparsed top-level definitions of ``name`` (None: all of them), so that the
        tables answer as if the whole file had been parsed."""
        if self.complete:
            return
        with DEFERRED_PARSE_LOCK:
            if name is not None and name not in self._unparsed:
                return  # none of that name, or another thread parsed them while this one waited
            if name is None:
                indexes = sorted(index for indexes in self._unparsed.values() for index in indexes)
                self._unparsed.clear()
            else:
                indexes = self._unparsed.pop(name, [])
            for index in indexes:
                chunk_facts = self._facts[index] = ChunkFacts(self.chunks[index])
                for bound, expression in chunk_facts.global_bindings:
                    self.global_bindings.setdefault(bound, []).append((index, expression))
                if self._on_parsed is not None:
                    self._on_parsed(chunk_facts)
            if indexes:
                self._merge_definitions()
            self.complete = not self._unparsed

    def facts_at(self, index: int) -> ChunkFacts:
        """One statement's facts, parsing it if it is an unparsed definition."""
        chunk_facts = self._facts[index]
        if chunk_facts is None:
            chunk = self.chunks[index]
            assert isinstance(chunk, UnparsedChunk), "only an unparsed definition has no facts yet"
            with DEFERRED_PARSE_LOCK:  # another thread may be parsing it: wait for its facts
                self.parse_definitions(chunk.defined_name)
                chunk_facts = self._facts[index]
            assert chunk_facts is not None, "every unparsed statement is listed under the name it defines"
        return chunk_facts

    def canonical(self, raw: str) -> str:
        head = raw.partition(".")[0]
        if self.stars and head not in self.imports and self._from_star(head):
            imported = self._star_imported_name(head)
            if imported is not None:
                return canonical(raw, {head: imported})
        return canonical(raw, self.imports)

    def star_exports(self, name: str) -> bool:
        """Whether ``from this_module import *`` copies ``name`` as far as the text shows: no ``__all__``,
        or an ``__all__`` of string literals that lists it (one built otherwise is not known: no)."""
        entries = self.bindings.get("__all__")
        if not entries:
            return True
        if len(entries) > 1:
            return False  # extended or rebuilt: what it ends up listing is not read here
        listed = entries[0][1]
        if not isinstance(listed, (cst.List, cst.Tuple)):
            return False
        return any(isinstance(element.value, cst.SimpleString) and element.value.evaluated_value == name
                   for element in listed.elements)

    def _star_imported_name(self, name: str) -> str | None:
        """What ``name`` stands for when a star-imported workspace module binds it by an import of its own
        (``from utils import *`` where utils.py has ``import torch.nn.functional as F``: ``F`` is
        ``torch.nn.functional`` here too, as Python's star import copies every public name, imported
        modules included, unless ``__all__`` leaves it out)."""
        if name not in self._star_names:
            self._star_names[name] = self._find_star_import(name)
        return self._star_names[name]

    def _find_star_import(self, name: str) -> str | None:
        assert self.workspace is not None, "_from_star holds only in a workspace"
        for module in reversed(self.stars):  # the last star import wins, as in Python
            found = self.workspace.star_imported_name(self.path, star_target(module, name))
            if found is not None:
                target, path = found
                self._note_resolved_path(path)
                return target
        return None

    def is_variable(self, name: str) -> bool:
        return name in self.bindings

    def value_of(self, name: str, before_chunk: int | None = None) -> Value | None:
        """The value of module-level ``name`` as seen from a statement (or, with None, from a function)."""
        entries = self.bindings.get(name)
        if not entries:
            return None
        candidates = entries if before_chunk is None else [e for e in entries if e[0] < before_chunk]
        if not candidates:
            return None
        chunk_index, expression, item = candidates[-1]
        filled = self._filled_by_functions(name) if before_chunk is None and _is_none(expression) else None
        if filled:  # a placeholder the module level leaves for a loader function to fill: functions read what it binds
            (chunk_index, expression), item = max(filled, key=lambda entry: entry[0]), None
        key = (name, chunk_index)
        cached = self._values.get(key)
        if cached is not None:
            return cached
        if key in self._evaluating:
            return UNKNOWN
        self._evaluating.add(key)
        try:
            value = self.flow.value_of_expression(expression, self.chunks[chunk_index], self)
            if item is not None:
                value = value.items[item] if value.items and item < len(value.items) else value
        finally:
            self._evaluating.discard(key)
        self._values[key] = value
        return value

    def _filled_by_functions(self, name: str) -> list[tuple[int, cst.BaseExpression]] | None:
        """The bindings of ``name`` by top-level functions that declare it ``global`` (``ChunkFacts.global_bindings``),
        parsing first the unparsed definitions whose words hold both ``global`` and the name."""
        if not self.complete:
            with DEFERRED_PARSE_LOCK:
                for defined, indexes in list(self._unparsed.items()):
                    if any({"global", name} <= self.chunks[index].words for index in indexes):
                        self.parse_definitions(defined)
        return self.global_bindings.get(name)

    def local_class(self, raw: str) -> ClassInfo | None:
        """A class defined in this module, or (``raw`` canonical and dotted) imported from a workspace file."""
        if "." not in raw:
            found = self.classes.get(raw)
            if found is None and self._from_star(raw):
                for module in reversed(self.stars):  # the last star import wins, as in Python
                    found = self.local_class(star_target(module, raw))
                    if found is not None:
                        break
            return found
        if self.workspace is None or raw.split(".", 1)[0] in _NEVER_LOCAL:
            return None
        return self._note_resolved(self.workspace.resolve_class(self.path, raw))

    def imported_function(self, raw: str) -> FunctionInfo | None:
        """A function imported from a workspace file (``from utils import evaluate``; ``utils.evaluate``;
        ``evaluate`` after ``from utils import *``)."""
        target = self.canonical(raw)
        if "." not in target and self._from_star(target):
            found = None
            for module in reversed(self.stars):
                found = self.imported_function(star_target(module, target))
                if found is not None:
                    break
            return found
        if self.workspace is None or "." not in target or target.split(".", 1)[0] in _NEVER_LOCAL:
            return None
        return self._note_resolved(self.workspace.resolve_function(self.path, target))

    def own_module_function(self, node: cst.BaseExpression | None, method: str, shadowing: Collection[str]) -> FunctionInfo | None:
        """``d2l.grad_clipping`` where this module binds ``d2l = sys.modules[__name__]`` once, and the scope does not
        shadow the name (``shadowing``: its parameters): Python's import system keeps the module being run in
        ``sys.modules`` under its ``__name__``, so the alias is this very module and the call runs its own function."""
        if not isinstance(node, cst.Name) or node.value in shadowing:
            return None
        entries = self.bindings.get(node.value) or []
        bound = entries[0][1] if len(entries) == 1 and entries[0][2] is None else None
        if not isinstance(bound, cst.Subscript) or self.canonical(dotted(bound.value) or "") != "sys.modules" or len(bound.slice) != 1:
            return None
        key = bound.slice[0].slice
        named = isinstance(key, cst.Index) and isinstance(key.value, cst.Name) and key.value.value == "__name__"
        return self.functions.get(method) if named else None

    def _from_star(self, name: str) -> bool:
        """Whether a bare name may come from a star import: one is there, and nothing in this module binds
        the name (a definition, an import, an assignment) and it is no builtin."""
        return bool(self.stars) and self.workspace is not None and not (
            name in self.functions or name in self.classes or name in self.imports or name in self.bindings
            or name in _BUILTINS or name.startswith("_")
        )

    def defined_elsewhere(self, info: FunctionInfo | ClassInfo) -> bool:
        """Whether a definition this module reaches is another workspace file's."""
        return info.home is not None and info.home is not self

    def _note_resolved(self, info):
        if info is not None and self.defined_elsewhere(info):
            self._note_resolved_path(info.home.path)
        return info

    def note_caller_file(self, path: str) -> None:
        """This module's analysis read how another workspace file calls its functions (analysis/callers.py):
        a change of that file makes what was read stale, as a change of an imported file does."""
        assert self.workspace is not None, "callers are looked for in a workspace"
        self._note_resolved_path(path)
        self.workspace.note_caller_read(self.path, path)

    def _note_resolved_path(self, path: str) -> None:
        assert self.workspace is not None, "a name was resolved to another workspace file"
        if path not in self.resolved:
            self.resolved[path] = self.workspace.stamps([path])[path]

    def is_module_class(self, info: ClassInfo, depth: int = 0) -> bool:
        if info.home is not None and info.home is not self:
            return info.home.is_module_class(info, depth)
        if info.name in self._module_classes:
            return self._module_classes[info.name]
        self._module_classes[info.name] = False  # a cycle of local bases is not a module
        result = False
        for base in info.bases:
            resolved = self.canonical(base)
            if resolved in torchapi.MODULE_BASES or last_part(resolved) in {"Module", "LightningModule", "PreTrainedModel"}:
                result = True
            elif depth < 8 and (parent := self.local_class(resolved)) is not None and parent is not info:
                result = self.is_module_class(parent, depth + 1)
            elif (kind := self.library_class_kind(resolved)) is not None:
                result = kind.kind == libraries.MODULE  # `class Net(ModelMixin)`: diffusers' base is an nn.Module
            if result:
                break
        self._module_classes[info.name] = result
        return result

    def library_class_kind(self, canonical: str) -> libraries.ClassKind | None:
        """What a class of an installed (or tabled) library is; None for torch's own and unknown names."""
        if "." not in canonical or torchapi.is_torch_name(canonical) or canonical.startswith("."):
            return None
        return library_source.library_index().class_kind(canonical)

    def kind_of(self, raw: str, depth: int = 0) -> libraries.ClassKind | None:
        """What instances of the class ``raw`` (as written here) are: an nn.Module, a pipeline, other."""
        local = self.local_class(self.canonical(raw))
        if local is not None:
            return self.local_class_kind(local, depth)
        return self.library_class_kind(self.canonical(raw))

    def local_class_kind(self, info: ClassInfo, depth: int = 0) -> libraries.ClassKind:
        """A class of the workspace: an nn.Module, a pipeline (its ``__call__`` runs without grad, or it
        subclasses a library pipeline), or other."""
        summary = info.home or self
        where = f"`{info.name}`"
        if summary.is_module_class(info):
            return libraries.ClassKind(libraries.MODULE, f"{where} is an nn.Module")
        call = info.methods.get("__call__")
        if call is not None and any(_is_no_grad_decorator(summary, d.decorator) for d in call.node.decorators):
            return libraries.ClassKind(libraries.PIPELINE, f"`{info.name}.__call__` runs under `no_grad`")
        if depth < 8:
            for base in info.bases:
                parent = summary.kind_of(base, depth + 1) if base != info.name else None
                if parent is not None and parent.kind == libraries.PIPELINE:
                    return libraries.ClassKind(libraries.PIPELINE, f"{where} subclasses {parent.evidence}")
        return libraries.ClassKind(libraries.OTHER, f"{where} is neither an nn.Module nor a pipeline")

    def class_kind(self, info: ClassInfo, depth: int = 0) -> str | None:
        """'iterable-dataset', 'map-dataset', 'lightning' or None, following local base classes."""
        if info.home is not None and info.home is not self:
            return info.home.class_kind(info, depth)
        for base in info.bases:
            resolved = self.canonical(base)
            if resolved in torchapi.ITERABLE_DATASET_BASES or last_part(resolved) == "IterableDataset":
                return "iterable-dataset"
            if resolved in torchapi.MAP_DATASET_BASES or last_part(resolved) == "Dataset":
                return "map-dataset"
            if resolved in torchapi.LIGHTNING_MODULE_BASES or last_part(resolved) == "LightningModule":
                return "lightning"
            parent = self.local_class(resolved)
            if depth < 8 and parent is not None and parent is not info:
                kind = self.class_kind(parent, depth + 1)
                if kind:
                    return kind
        return None

    def uses_module(self, *prefixes: str) -> bool:
        return any(
            target == prefix or target.startswith(prefix + ".")
            for target in self.imports.values()
            for prefix in prefixes
        )
