"""What a rule is: metadata, its own documentation, its own examples, and a check.

A rule's docstring is the text `trainlint explain` prints (what it catches, why it costs
money, how to fix it). ``MUST_FIRE`` and ``MUST_NOT_FIRE`` are run by the test suite for
every registered rule, so a rule documents and tests itself.
"""

from __future__ import annotations

import inspect
import sys
import textwrap
from typing import TYPE_CHECKING, ClassVar

from ..findings import Severity

if TYPE_CHECKING:
    from collections.abc import Callable

    from ..context import RuleContext
    from ..events import Event
    from ..flow import ScopeAnalysis

DOCS_URL = "https://trainlint.dev/rules/"


class Fires:
    """Code the rule must flag.

    ``fixed`` is the whole text after applying every fix; those fixes must be safe, or all unsafe
    with ``unsafe=True`` (the text ``--unsafe-fixes`` gives). ``no_fix=True``: the finding must
    offer no fix at all (a list is not a tensor to detach). ``files``: other files of the same
    project (path -> text), which the example (``train.py``) imports from. ``at``: text of the line
    every finding must be reported on (the statement that is wrong, not a call that leads to it).
    """

    __slots__ = ("_code", "_fixed", "unsafe", "no_fix", "severity", "count", "settings", "_files", "at")

    def __init__(
        self,
        code: str,
        *,
        fixed: str | None = None,
        unsafe: bool = False,
        no_fix: bool = False,
        severity: Severity | None = None,
        count: int = 1,
        settings: dict | None = None,
        files: dict[str, str] | None = None,
        at: str | None = None,
    ) -> None:
        self._code, self._fixed, self._files = code, fixed, files
        self.unsafe = unsafe
        self.no_fix = no_fix
        self.severity = severity
        self.count = count
        self.settings = settings or {}  # AnalysisSettings fields the example runs with (target_gpu)
        self.at = at

    # Dedented when read: the examples are read by the tests and `trainlint test-rule`, and dedenting
    # the 900 texts of the built-in rules as they are imported was a fifth of the analysis' own import.
    @property
    def code(self) -> str:
        return _dedented(self._code)

    @property
    def fixed(self) -> str | None:
        return None if self._fixed is None else _dedented(self._fixed)

    @property
    def files(self) -> dict[str, str]:
        return _project(self._files)


class Quiet:
    """Code the rule must leave alone (``files``: other files of the project, as for ``Fires``)."""

    __slots__ = ("_code", "settings", "_files")

    def __init__(self, code: str, *, settings: dict | None = None, files: dict[str, str] | None = None) -> None:
        self._code, self._files = code, files
        self.settings = settings or {}

    @property
    def code(self) -> str:
        return _dedented(self._code)

    @property
    def files(self) -> dict[str, str]:
        return _project(self._files)


def _dedented(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


def _project(files: dict[str, str] | None) -> dict[str, str]:
    return {path: _dedented(text) for path, text in (files or {}).items()}


class _RuleType(type):
    @property
    def fixable(cls) -> bool:
        """Whether ``--fix`` can fix it: derived from the examples (one shows a safe fix's result)."""
        examples: tuple[Fires, ...] = getattr(cls, "MUST_FIRE", ())
        return any(example.fixed is not None and not example.unsafe for example in examples)


class Rule(metaclass=_RuleType):
    """A check: ``code`` (``TL101``; a plugin's own prefix, never ``TL``), kebab-case ``name``,
    default ``severity``, a docstring (the rule's or its module's) that ``trainlint explain``
    prints, and examples that are its tests. ``check`` reports through the context it is given."""

    code: ClassVar[str]
    name: ClassVar[str]
    severity: ClassVar[Severity]
    help_url: ClassVar[str | None] = None  # a plugin's documentation page; trainlint's rules have theirs
    MUST_FIRE: ClassVar[tuple[Fires, ...]] = ()
    MUST_NOT_FIRE: ClassVar[tuple[Quiet, ...]] = ()
    # For a rule that checks scope by scope and follows calls (``patterns.ordered_events``): the events
    # without one of which, among those a scope follows, its ``check_scope`` reports nothing (a backward
    # for a rule about gradients). A caller's result that found none is kept after an edit of a function
    # it follows while that function's events still hold none (``dependencies.flows_hold``).
    scope_needs: ClassVar[Callable[[Event], bool] | None] = None

    def check(self, ctx: RuleContext) -> None:
        """Check one top-level statement; by default, each of its scopes on its own (``check_scope``), but
        not a scope whose followed events hold none of what its findings need (``scope_needs``)."""
        for scope in ctx.scopes:
            if not needs_none(type(self), scope):
                self.check_scope(ctx, scope)

    def check_scope(self, ctx: RuleContext, scope: ScopeAnalysis) -> None:
        """Check one scope of the statement (its module-level code, a function, a method): for a
        rule whose findings for a statement are those it finds in each of its scopes looked at
        alone. What it reads of other scopes goes through their flows (``FunctionInfo.analysis``),
        never ``ctx.scopes`` or the statement's whole tree; the engine then keeps each method's
        findings across an edit of another method of its class (``dependencies``)."""
        raise NotImplementedError

    @classmethod
    def checks_by_scope(cls) -> bool:
        """Whether the rule defines ``check_scope`` rather than ``check``."""
        return cls.check is Rule.check and cls.check_scope is not Rule.check_scope

    @classmethod
    def explain(cls) -> str:
        # the rule's module docstring is its documentation; a class docstring may override it
        return inspect.cleandoc(cls.__doc__ or sys.modules[cls.__module__].__doc__ or "")

    @classmethod
    def summary(cls) -> str:
        return cls.explain().split("\n", 1)[0].strip()

    @classmethod
    def help_uri(cls) -> str | None:
        """Where the rule is documented: ``help_url``, else trainlint's page for its own rules,
        else None (a plugin rule that names no page)."""
        if cls.help_url is not None:
            return cls.help_url
        return f"{DOCS_URL}{cls.code}-{cls.name}" if cls.code.startswith("TL") else None


def needs_none(rule: type[Rule], scope: ScopeAnalysis) -> bool:
    """Whether none of the events ``scope`` follows is one the rule's findings need (``Rule.scope_needs``),
    so that its ``check_scope`` would report nothing there: a key in a long function that trains nothing
    does not run the gradient rules' searches over its loops. Asking it reads the flows the scope follows."""
    from ..patterns import follows_none  # here, not at the top: the server imports this module before LibCST

    return rule.scope_needs is not None and follows_none(scope, rule.scope_needs)
