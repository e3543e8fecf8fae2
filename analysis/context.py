"""What a rule sees while it checks one top-level statement, and how it reports."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import libcst as cst

from .events import CallEvent
from .findings import Evidence, Fix, Severity, TextEdit
from .flow import ScopeAnalysis
from .lines import indentation, indentation_start
from .parsing import ParsedChunk
from .tree import walk
from .values import Site, Value

if TYPE_CHECKING:
    from typing_extensions import Self  # typing.Self from Python 3.11

    from .module import ModuleAnalysis
    from .rules.base import Rule
    from .settings import AnalysisSettings
    from .summary import ClassInfo, FunctionInfo, ModuleSummary

T = TypeVar("T")


class ModuleView(Protocol):
    """What a rule may read of the file it checks (``ctx.module``); docs/writing-rules.md describes
    each member. Reading anything beyond the statement being checked (every call, every scope, the
    whole text) is recorded, so that an edit elsewhere re-checks the rules that did."""

    @property
    def path(self) -> str: ...
    @property
    def text(self) -> str: ...
    @property
    def origin(self) -> str | None: ...
    @property
    def summary(self) -> ModuleSummary: ...
    @property
    def chunks(self) -> list[ParsedChunk]: ...
    @property
    def lines(self) -> list[str]: ...
    def line(self, number: int) -> str: ...

    # the dataflow of the whole file
    @property
    def all_scopes(self) -> list[ScopeAnalysis]: ...
    def scopes_of(self, chunk: ParsedChunk) -> list[ScopeAnalysis]: ...
    def scopes_from(self, scope: ScopeAnalysis) -> list[ScopeAnalysis]: ...
    def all_calls(self) -> Iterator[CallEvent]: ...
    def calls_of(self, function: FunctionInfo) -> list[CallEvent]: ...
    def arguments_for(self, function: FunctionInfo, parameter: str) -> list[tuple[CallEvent, Value]] | None: ...
    def constructor_arguments(self, owner: ClassInfo, attribute: str) -> list[tuple[CallEvent, Value]] | None: ...
    @property
    def backward_calls(self) -> list[CallEvent]: ...
    @property
    def ddp_wraps(self) -> list[CallEvent]: ...

    # module-wide facts
    @property
    def cuda_line(self) -> int | None: ...
    @property
    def cuda_line_text(self) -> str: ...
    @property
    def first_backward_line(self) -> int | None: ...
    @property
    def framework_runs_loop(self) -> str | None: ...
    @property
    def uses_hf_trainer(self) -> bool: ...
    @property
    def uses_accelerate(self) -> bool: ...
    @property
    def uses_deepspeed(self) -> bool: ...

    # values a rule computes once per file
    def module_wide(self, key: str, compute: Callable[[Self], T]) -> T: ...
    def module_fact(self, key: Hashable, compute: Callable[[Self], T]) -> T: ...
    def calls_indexed(self, key: str, compute: Callable[[Self], dict[Any, list[CallEvent]]], entry: object) -> list[CallEvent]: ...


class RawFinding:
    """A finding before suppression, selection and severity overrides are applied."""

    __slots__ = ("rule", "span", "message", "severity", "evidence", "help", "fix")

    def __init__(self, rule, span, message, severity, evidence, help, fix) -> None:
        self.rule = rule
        self.span: tuple[int, int, int, int] = span
        self.message: str = message
        self.severity: Severity = severity
        self.evidence: tuple[Evidence, ...] = evidence
        self.help: str = help
        self.fix: Fix | None = fix


class RuleContext:
    def __init__(
        self, module: ModuleAnalysis, chunk: ParsedChunk, rule: type[Rule], settings: AnalysisSettings | None = None,
    ) -> None:
        self.module: ModuleView = module
        self._analysis = module  # the engine's own view, beyond what a rule may read
        self.settings = settings
        self.chunk = chunk
        self.rule = rule
        self.summary = module.summary
        self.findings: list[RawFinding] = []
        self._foreign_edit = False

    @property
    def scopes(self) -> list[ScopeAnalysis]:
        return self._analysis.scopes_of(self.chunk)

    # ------------------------------------------------------------------ positions
    @staticmethod
    def line_of(site: Site) -> int:
        chunk, node = site
        return chunk.line_of(node)

    def evidence(self, site: Site | None, note: str) -> Evidence | None:
        if site is None:
            return None
        return Evidence(self.line_of(site), note, site[0].origin if self.in_another_file(site[0]) else None)

    def in_another_file(self, chunk: ParsedChunk) -> bool:
        """Whether a statement is another workspace file's than the one being checked (a helper the
        flow followed into ``utils.py``): a finding cannot be placed there, nor a fix edit it."""
        return chunk.origin is not None and chunk.origin != self._analysis.origin

    # ------------------------------------------------------------------ reporting
    def report(
        self,
        node: cst.CSTNode,
        message: str,
        *,
        evidence: Iterable[Evidence | tuple[Site | None, str] | None] = (),
        severity: Severity | None = None,
        help: str = "",
        fix: Fix | None = None,
        chunk: ParsedChunk | None = None,
    ) -> None:
        chunk = chunk or self.chunk
        if self.in_another_file(chunk):
            return  # a finding is placed in the file being checked; this node is in another one
        items: list[Evidence] = []
        for item in evidence:
            if item is None:
                continue
            if isinstance(item, tuple):
                converted = self.evidence(*item)
                if converted is not None:
                    items.append(converted)
            else:
                items.append(item)
        unique = tuple(dict.fromkeys(sorted(items, key=lambda e: (e.path or "", e.line))))
        self.findings.append(
            RawFinding(self.rule, chunk.range_of(node), message, severity or self.rule.severity, unique, help, fix)
        )

    # ------------------------------------------------------------------ fixes
    def _place(self, chunk: ParsedChunk | None) -> ParsedChunk:
        chunk = chunk or self.chunk
        if self.in_another_file(chunk):
            self._foreign_edit = True  # an edit of another file cannot be part of this file's fix
        return chunk

    def edit_replace(self, node: cst.CSTNode, new_text: str, chunk: ParsedChunk | None = None) -> TextEdit:
        line, column, end_line, end_column = self._place(chunk).range_of(node)
        return TextEdit(line, column, end_line, end_column, new_text)

    def edit_insert_after(self, node: cst.CSTNode, text: str, chunk: ParsedChunk | None = None) -> TextEdit:
        _, _, end_line, end_column = self._place(chunk).range_of(node)
        return TextEdit(end_line, end_column, end_line, end_column, text)

    def edit_insert_before(self, node: cst.CSTNode, text: str, chunk: ParsedChunk | None = None) -> TextEdit:
        line, column, _, _ = self._place(chunk).range_of(node)
        return TextEdit(line, column, line, column, text)

    def indent_block(self, node: cst.CSTNode, header: str, chunk: ParsedChunk | None = None) -> TextEdit | None:
        """Wrap a statement (with all its lines) in ``header:``, indenting it one level.

        None when the statement holds a multi-line string, whose text would change if indented, or
        has a form feed in the indentation of a line after its first, or of its first when it is
        indented: Python reads the result, but LibCST, which checks every fix's result, misreads a
        block whose lines do not all start alike, or one opened on an indented line that starts with a
        form feed (depending on the lines before it), and a result it rejects drops every fix of its round.
        """
        chunk = chunk or self.chunk
        line, column, end_line, _ = chunk.range_of(node)
        lines = [self._analysis.line(number) for number in range(line, end_line + 1)]
        if any(isinstance(n, (cst.SimpleString, cst.FormattedString)) and "\n" in chunk.code_for(n) for n in walk(node)):
            return None
        if any(indentation_start(text, 0) for text in lines[1:] if text.strip()):
            return None
        if indentation_start(lines[0], 0) and indentation(lines[0]):
            return None
        unit = _indent_unit(chunk.tree_text().split("\n")) or _indent_unit(self._analysis.lines) or "    "
        # The header starts as the first line did (a form feed before a top-level statement stays before it).
        first = indentation(lines[0]) + unit + lines[0][column - 1 :]
        body = "\n".join([first, *((unit + text) if text.strip() else text for text in lines[1:])])
        new_text = f"{lines[0][: column - 1]}{header}:\n{body}"
        return TextEdit(line, 1, end_line, len(lines[-1]) + 1, new_text)

    def fix(self, description: str, edits: Sequence[TextEdit | None], *, safe: bool) -> Fix | None:
        """A fix of the finding being reported; every rule says whether it is safe (see ``Fix``)."""
        if not edits or any(edit is None for edit in edits) or self._foreign_edit:
            return None
        return Fix(description, tuple(edits), safe)  # type: ignore[arg-type]

    def name_for(self, canonical_target: str) -> str | None:
        """How this module can spell ``torch.no_grad`` etc. with its current imports, if at all."""
        imports = self.summary.imports
        for alias, target in imports.items():
            if target == canonical_target:
                return alias
        for alias, target in imports.items():
            if canonical_target.startswith(target + "."):
                return alias + canonical_target[len(target):]
        return None


def _indent_unit(lines: list[str]) -> str | None:
    """The file's indentation step, from the first indented line; None when nothing is indented."""
    for text in lines:
        whitespace = indentation(text)
        if whitespace and text.strip():
            return "\t" if whitespace.startswith("\t") else " " * min(len(whitespace), 4)
    return None
