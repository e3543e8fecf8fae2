"""The method ``self.name()`` runs when the class that calls it leaves that method to its subclasses.

A base trainer's loop often calls a hook it does not define, or defines only as a stub
(``raise NotImplementedError``, ``pass``, ``...``, an ``@abstractmethod``), and a subclass supplies it::

    class BaseTrainer:                          # base.py
        def fit(self, loader):
            for batch in loader:
                self.train_step(batch)
                self.optimizer.step()

    class ClassifierTrainer(BaseTrainer):       # trainer.py
        def train_step(self, batch):
            self.model(batch).mean().backward()

What ``fit`` runs at ``self.train_step(batch)`` is the override of the class the object was built from.
When exactly one override exists, the flow follows it as it follows any method; two different overrides,
or none, leave the call unfollowed, as before. A stub is looked for in the module and in the workspace
files that import it and name the class among a class's bases; a method no class defines, in the module
only, and only for a class whose bases are all the workspace's (see ``overriding_method``). Nothing is
imported or run.

Which classes subclass which is a module-wide fact: a class that asked has its
statement walked again when an edit changes a statement that defines a class naming it as a base
(``ClassInfo.asked_subclasses``, read by ``ModuleAnalysis._reachable_unchanged``).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import libcst as cst

from .dependencies import unrecorded
from .parsing import UnparsedChunk

if TYPE_CHECKING:
    from .summary import ChunkFacts, ClassInfo, FunctionInfo, ModuleSummary

# How many classes deep a subclass's bases are followed to reach the class that calls the hook.
_MAX_DEPTH = 8
# Bases that define no method a class's own code calls on ``self``.
_PLAIN_BASES = frozenset({"object", "ABC", "Generic", "Protocol"})


def overriding_method(summary: ModuleSummary, owner: ClassInfo, name: str, found: FunctionInfo | None) -> FunctionInfo | None:
    """The one subclass method that runs for ``self.<name>()`` in a method of ``owner``, where ``owner`` and its
    workspace bases define no method ``name`` (``found`` is None) or only a stub; None when the subclasses define
    none or several.

    A name no class defines is looked for in the module only, and only when every base of ``owner`` is a workspace
    class (or ``object``, ``ABC``, ``Generic``, ``Protocol``): on an ``nn.Module`` or a Lightning module,
    ``self.register_buffer()`` or ``self.log()`` comes from the library. A stub says that subclasses supply the
    method, and is looked for in the workspace's other files too."""
    home = owner.home or summary
    if found is None and _library_based(home, owner, 0):
        return None
    owner.asked_subclasses = True
    overrides: list[FunctionInfo] = []
    with unrecorded():  # which classes exist is kept valid by walking the asking class again (see above)
        elsewhere = _subclasses_elsewhere(home, owner) if found is not None else []
        for subclass in (*_subclasses_in(home, owner, home.path), *elsewhere):
            method = subclass.find_method(name, subclass.home or home)
            if method is not None and method is not found and not is_stub(method) and all(method is not seen for seen in overrides):
                overrides.append(method)
    return overrides[0] if len(overrides) == 1 else None


def _library_based(summary: ModuleSummary, info: ClassInfo, depth: int) -> bool:
    """Whether a base of the class, directly or not, is a library's class that may define methods."""
    if depth >= _MAX_DEPTH:
        return True
    home = info.home or summary
    for base in info.bases:
        if base.rpartition(".")[2] in _PLAIN_BASES:
            continue
        parent = home.local_class(home.canonical(base)) if base else None
        if parent is None or parent is not info and _library_based(home, parent, depth + 1):
            return True
    return False


def bases_asking(summary: ModuleSummary, unchanged: set[int], changed_old: list[int], new_facts: dict[int, ChunkFacts],
                 tainted: set[str]) -> set[int]:
    """The unchanged statements that define a class which asked which subclass overrides a method, and which a
    changed statement's class (as it was: ``changed_old`` of ``summary``; as it is: ``new_facts``) names among its
    bases: their walks may follow another override now. The names those statements define join ``tainted``."""
    changed = [*map(summary.facts_at, changed_old), *new_facts.values()]
    named = {base.rpartition(".")[2] for facts in changed for info in facts.classes.values() for base in info.bases}
    asking: set[int] = set()
    for index in unchanged if named else ():
        facts = summary.facts_at(index)
        if any(info.asked_subclasses and name in named for name, info in facts.classes.items()):
            asking.add(index)
            tainted |= facts.defined_names
    return asking


def is_stub(function: FunctionInfo) -> bool:
    """A method that only marks a place for subclasses: an ``@abstractmethod``, or a body of a docstring,
    ``pass``, ``...`` or ``raise NotImplementedError``."""
    node = function.node
    if any(_names_abstract(decorator.decorator) for decorator in node.decorators):
        return True
    body = node.body
    statements = body.body if isinstance(body, cst.IndentedBlock) else (body,)
    small = [
        part for statement in statements
        for part in (statement.body if isinstance(statement, cst.SimpleStatementLine | cst.SimpleStatementSuite) else (statement,))
    ]
    if small and isinstance(small[0], cst.Expr) and isinstance(small[0].value, cst.SimpleString | cst.ConcatenatedString):
        small = small[1:]  # the docstring
    return bool(small) and all(_marks_a_place(part) for part in small)


def _marks_a_place(statement: cst.CSTNode) -> bool:
    if isinstance(statement, cst.Pass):
        return True
    if isinstance(statement, cst.Expr) and isinstance(statement.value, cst.Ellipsis):
        return True
    if isinstance(statement, cst.Raise) and statement.exc is not None:
        raised = statement.exc.func if isinstance(statement.exc, cst.Call) else statement.exc
        return isinstance(raised, cst.Name) and raised.value == "NotImplementedError"
    return False


def _names_abstract(decorator: cst.BaseExpression) -> bool:
    target = decorator.attr if isinstance(decorator, cst.Attribute) else decorator
    return isinstance(target, cst.Name) and target.value == "abstractmethod"


def _subclasses_in(summary: ModuleSummary, owner: ClassInfo, owner_path: str | None) -> list[ClassInfo]:
    """The module's classes that have ``owner`` (defined in ``owner_path``) among their bases, directly or not.
    An imported file's definitions not parsed yet are parsed only where their text names ``owner``."""
    found: list[ClassInfo] = []
    for index, chunk in enumerate(summary.chunks):
        if isinstance(chunk, UnparsedChunk) and not chunk.parsed and owner.name not in chunk.chunk.text:
            continue
        for info in summary.facts_at(index).classes.values():
            if info is not owner and info not in found and _inherits(summary, info, owner, owner_path, 0):
                found.append(info)
    return found


def _inherits(summary: ModuleSummary, info: ClassInfo, owner: ClassInfo, owner_path: str | None, depth: int) -> bool:
    if depth >= _MAX_DEPTH:
        return False
    home = info.home or summary
    for base in info.bases:
        parent = home.local_class(home.canonical(base)) if base else None
        if parent is None or parent is info:
            continue
        if _same_class(parent, home, owner, owner_path) or _inherits(home, parent, owner, owner_path, depth + 1):
            return True
    return False


def _same_class(info: ClassInfo, summary: ModuleSummary, owner: ClassInfo, owner_path: str | None) -> bool:
    """The same class, read from the text being checked or from its file on disk (another object)."""
    if info is owner:
        return True
    path = (info.home or summary).path
    return info.name == owner.name and path is not None and owner_path is not None and Path(path).resolve() == Path(owner_path).resolve()


def _subclasses_elsewhere(summary: ModuleSummary, owner: ClassInfo) -> list[ClassInfo]:
    """The classes of the workspace's other files (those that import this one and name ``owner`` in a class's
    bases) that have ``owner`` among their bases; the files read are recorded as read by this one."""
    workspace = summary.workspace
    if workspace is None or summary.path is None:
        return []
    found = []
    for module in workspace.caller_index().modules_subclassing(Path(summary.path), owner.name):
        summary.note_caller_file(module.summary.path)
        found.extend(_subclasses_in(module.summary, owner, summary.path))
    return found
