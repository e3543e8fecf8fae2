"""Run the rules over one module's text and turn what they report into findings."""

from __future__ import annotations

import codecs
import contextlib
import gc
import logging
import os
import re
import tokenize
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING

from .context import RawFinding, RuleContext
from .dependencies import NOTHING_FOUND, KeptResult, KeptStatement, ScopeResult, recording
from .engine_codes import NOT_ANALYSED, STRICT_ENV, SYNTAX_ERROR, UNUSED_SUPPRESSION, EngineCode
from .findings import Finding, Severity
from .module import ModuleAnalysis, Superseded
from .patterns import follows_none
from .registry import RESERVED_PREFIX, has_failed, local_plugins_allowed, rule_failed, rules_for
from .rules.base import Rule, needs_none
from .settings import AnalysisSettings
from .suppressions import SuppressionIndex, find_suppressions

if TYPE_CHECKING:
    from .flow import ScopeAnalysis
    from .workspace import Workspace

log = logging.getLogger("trainlint")
_LINE = re.compile(rb"[^\r\n]*(?:\r\n|\r|\n)?")
_LINE_BREAK = re.compile(rb"\r\n|\r|\n")
# Encodings a coding declaration may name but Python refuses to read a source file in ("encoding
# problem"): UTF-16 and UTF-32, and punycode, whose decoder takes time that grows with the square
# of the text (600 KB: about 25 s).
_REFUSED_ENCODINGS = ("utf-16", "utf-32", "punycode")


@contextlib.contextmanager
def collector_paused():
    """Pause Python's cyclic garbage collector while one file is analysed.

    Parsing allocates tens of thousands of small objects that live until the analysis ends;
    each allocation burst makes the collector re-scan all of them, which measured six times
    the analysis itself on a 2,000-statement file. Nothing analysed here needs the collector
    to free it in the meantime (the trees are acyclic and freed by reference counting).
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


class DecodeError(Exception):
    pass


def read_source(data: bytes) -> tuple[str, str]:
    """A Python file's text and the encoding Python itself reads it with (``tokenize.detect_encoding``'s
    rules, on lines ended as the interpreter ends them: a UTF-8 byte-order mark, else a PEP 263
    cookie on line 1, or on line 2 when line 1 holds only a comment or nothing, else UTF-8). The encoding is ``utf-8-sig`` for a file with a BOM, so that
    encoding the text with it writes the BOM back. The one decoder of check, fix and the server."""
    try:
        encoding, _ = tokenize.detect_encoding(_first_lines(data).__next__)
    except SyntaxError as error:
        declared = str(error).rpartition("unknown encoding: ")[2] if str(error).startswith("unknown encoding") else ""
        if declared.lower().replace("-", "_") not in _UTF8_SOURCE_CODECS:
            raise DecodeError(_encoding_problem(data, str(error))) from None
        encoding = "utf-8"  # a package's codec that rewrites UTF-8 source as it is imported
    if codecs.lookup(encoding).name.startswith(_REFUSED_ENCODINGS):
        raise DecodeError(f"Python does not read source files in {encoding!r}, which the coding declaration names")
    try:
        return data.decode(encoding), encoding
    except UnicodeDecodeError as error:
        line = _line_of(data, error.start)
        raise DecodeError(f"cannot decode line {line} as {encoding}: {error.reason}") from None
    except UnicodeError as error:  # a codec that tells no position ('undefined')
        raise DecodeError(f"cannot decode the file as {encoding}: {error}") from None
    except LookupError:  # a codec from bytes to bytes or str to str (zlib_codec, rot13)
        raise DecodeError(f"{encoding!r}, which the coding declaration names, is not a text encoding") from None


# Codecs that packages register to rewrite a module's source as it is imported, reading UTF-8 Python: the
# file is the source the project wrote, valid Python 3.6+ as it stands (future-fstrings: "# -*- coding:
# future_fstrings -*-" backports f-strings to older interpreters; future-annotations does the same for
# annotations). Their codecs are never looked up or run here.
_UTF8_SOURCE_CODECS = frozenset({"future_fstrings", "future_annotations"})


def _first_lines(data: bytes):
    """The first two lines, ended as the interpreter ends them (``\\r`` too: tokenize's own reader splits
    at ``\\n`` only, and so misses the cookie of a CR-only file that Python honours), then b""."""
    position = 0
    for _ in range(2):
        match = _LINE.match(data, position)
        assert match is not None, "the pattern matches an empty line too"
        line = match.group()
        position += len(line)
        yield line
    while True:
        yield b""


def _line_of(data: bytes, offset: int) -> int:
    return len(_LINE_BREAK.findall(data, 0, offset)) + 1


def _encoding_problem(data: bytes, message: str) -> str:
    """tokenize's complaint about the first two lines, in the words the rest of trainlint uses."""
    if message.startswith("unknown encoding"):
        declared = message.rpartition(": ")[2]
        return f"unknown encoding {declared!r} in the coding declaration"
    if message.startswith("encoding problem"):
        return "the file starts with a UTF-8 byte-order mark but its coding declaration names another encoding"
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as error:  # "invalid or missing encoding declaration": not UTF-8, no cookie
        line = _line_of(data, error.start)
        return f"cannot decode line {line} as utf-8: {error.reason}"
    return message


def decode_source(source: str | bytes) -> str:
    """Text of a Python file as Python itself would read it (see ``read_source``); a str loses its BOM."""
    if isinstance(source, str):
        return source[1:] if source.startswith("\ufeff") else source
    return read_source(source)[0]


def select_rules(settings: AnalysisSettings, rules: Sequence[type[Rule]] | None = None) -> list[type[Rule]]:
    from .selection import resolve_selector

    available = list(rules) if rules is not None else rules_for(settings.plugins)
    plugins_held_back = bool(settings.plugins) and not local_plugins_allowed()

    def codes(token: str) -> set[str]:
        try:
            return set(resolve_selector(token, available))
        except ValueError:
            if plugins_held_back:  # a code of a plugin the user did not allow (checked where settings are read)
                return set()
            raise

    selected = {rule.code for rule in available}
    if settings.select:
        selected = set()
        for token in settings.select:
            selected |= codes(token)
    for token in settings.ignore:
        selected -= codes(token)
    return [rule for rule in available if rule.code in selected]


def analyze_source(
    source: str | bytes,
    path: str,
    settings: AnalysisSettings | None = None,
    *,
    rules: Sequence[type[Rule]] | None = None,
    workspace: Workspace | None = None,
    selected: Sequence[type[Rule]] | None = None,
) -> list[Finding]:
    """All findings for one file, sorted by position. Never raises on bad input.

    The rules run are those ``settings`` select among ``rules`` (default: every rule), or
    ``selected``, when the caller chose them already (``trainlint.linter.Linter.rules_for``)."""
    settings = settings or AnalysisSettings()
    try:
        text = decode_source(source)
    except DecodeError as error:
        undecoded = _engine_finding(path, SYNTAX_ERROR, 1, 1, str(error), Severity.ERROR)
        return [] if SYNTAX_ERROR.code in settings.dropped else [undecoded]
    with collector_paused():
        module = workspace.checked_analysis(path, text) if workspace is not None else None
        if module is None:
            module = ModuleAnalysis(text, path, workspace=workspace)
        return findings_for(module, settings, selected if selected is not None else select_rules(settings, rules))


def findings_for(
    module: ModuleAnalysis, settings: AnalysisSettings, rules: Iterable[type[Rule]],
    superseded: Callable[[], bool] | None = None,
) -> list[Finding]:
    """Run the rules over a module; a rule's findings for a statement the edit could not reach are kept.

    ``superseded`` is asked before each statement's flow analysis and before each rule's check of
    a statement; when it says yes, :class:`Superseded` is raised. What was done until then stays
    with the module (flow analyses, and every statement's results whether new or inherited), so
    the next analysis of this module, or of its update to the newer text, continues from there and
    gives what a fresh analysis gives.
    """
    rules = list(rules)
    raw: list[RawFinding] = []
    engine_findings: list[Finding] = []
    strict = bool(os.environ.get(STRICT_ENV))
    results_key = (settings, tuple(rule.code for rule in rules), strict)
    inherited = module.rule_results if module.rule_results_key == results_key else {}
    module.rule_results, module.rule_results_key = {}, results_key
    try:
        _check_statements(module, settings, rules, inherited, raw, engine_findings, strict, superseded)
    except Superseded:
        module.rule_results = {**inherited, **module.rule_results}
        raise
    return _reported(module, settings, rules, raw, engine_findings)


def _check_statements(
    module: ModuleAnalysis, settings: AnalysisSettings, rules: list[type[Rule]],
    inherited: dict[int, KeptStatement], raw: list[RawFinding], engine_findings: list[Finding], strict: bool,
    superseded: Callable[[], bool] | None,
) -> None:
    # another framework's code (MegEngine, TensorFlow, JAX, ...): the rules' PyTorch semantics do not apply
    checked = module.another_framework is None
    if checked:
        try:
            module.prepare_scopes(superseded)
        except Superseded:
            raise
        except Exception as error:  # a bug of the flow analysis must not end a run over many files
            if strict:
                raise
            engine_findings.append(_flow_failed(module.path, 1, "this file", error))
            checked = False
    for chunk in module.chunks:
        if chunk.syntax_error is not None:
            problem = chunk.syntax_error
            code, severity = (SYNTAX_ERROR, Severity.ERROR) if problem.analysed else (NOT_ANALYSED, Severity.NOTE)
            engine_findings.append(_engine_finding(module.path, code, problem.line, problem.column, problem.message, severity))
            if chunk.broken is None:
                continue  # a top-level statement that does not parse: nothing of it to check
            # else only a statement inside it is broken, blanked in its tree: the rest is checked
        if not checked:
            continue
        whole_kept = chunk.index in module.kept
        # an edit inside one method of a class, or one function walked on from the edited statement: the
        # scopes of its other methods, or of the functions defined in it and kept, may keep their results
        previous = inherited.get(chunk.index) if whole_kept or chunk.index == module.scopes_edited else None
        if previous is not None and whole_kept and previous.complete and module.still_holds(previous):
            module.rule_results[chunk.index] = previous  # the common case after an edit: nothing to re-check
            for kept_result in previous.results.values():
                raw.extend(kept_result.findings)
            continue
        try:
            scopes = module.scopes_of(chunk)
        except RecursionError:
            engine_findings.append(_engine_finding(
                module.path, NOT_ANALYSED, chunk.start_line + 1, 1,
                "statement is nested too deeply to analyse; its checks were skipped", Severity.NOTE,
            ))
            continue
        except Superseded:
            raise
        except Exception as error:  # as above, for one statement
            if strict:
                raise
            engine_findings.append(_flow_failed(module.path, chunk.start_line + 1, "this statement", error))
            continue
        results: dict[str, KeptResult] = {}
        for rule_class in rules:
            if has_failed(rule_class):
                continue
            kept_result = previous.results.get(rule_class.code) if previous is not None else None
            if kept_result is not None and whole_kept and kept_result.whole and module.still_holds(kept_result):
                results[rule_class.code] = kept_result
                raw.extend(kept_result.findings)
                continue
            if superseded is not None and superseded():
                raise Superseded
            context = RuleContext(module, chunk, rule_class, settings)
            by_scope = rule_class.checks_by_scope() and len(scopes) > 1
            try:
                if by_scope:
                    # only where the edit was, in one method: their lines are checked against it
                    kept_scopes = kept_result.scopes if kept_result is not None and chunk.index == module.scopes_edited else None
                    results[rule_class.code] = _checked_by_scope(module, context, scopes, kept_scopes)
                    raw.extend(context.findings)
                    continue
                with recording(chunk) as reads:
                    rule_class().check(context)
            except RecursionError:
                continue
            except Exception as error:  # one rule's bug must not take the others down
                if strict:
                    raise
                if not rule_class.code.startswith(RESERVED_PREFIX):  # a plugin's: reported once, then off
                    rule_failed(rule_class, error, module.path)
                    continue
                log.exception("rule %s failed on %s", rule_class.code, module.path)
                engine_findings.append(_engine_finding(
                    module.path, NOT_ANALYSED, chunk.start_line + 1, 1,
                    f"internal error in {rule_class.code} ({type(error).__name__}); this statement was not fully checked",
                    Severity.NOTE,
                ))
                continue
            if not reads.whole_module:
                nothing = not context.findings and not reads.facts and not reads.placed and not reads.calls
                results[rule_class.code] = NOTHING_FOUND if nothing else KeptResult(context.findings, reads)
            elif not reads.text:  # kept while no statement's tree changes (a key on a line that stays broken)
                results[rule_class.code] = KeptResult(context.findings, reads, program=module.program)
            raw.extend(context.findings)
        module.rule_results[chunk.index] = KeptStatement(results, len(rules))


def _checked_by_scope(
    module: ModuleAnalysis, context: RuleContext, scopes: list[ScopeAnalysis], kept: dict[ScopeAnalysis, ScopeResult] | None,
) -> KeptResult:
    """A rule that checks scope by scope (``Rule.check_scope``), run over a statement of several
    scopes: each scope's result is kept from ``kept`` when it still holds, else checked and recorded
    on its own. ``context.findings`` ends as the statement's findings."""
    rule = context.rule()
    chunk = context.chunk
    results: dict[ScopeAnalysis, ScopeResult] = {}
    whole = True
    needs = type(rule).scope_needs
    none_needed = (lambda flow: follows_none(flow, needs)) if needs is not None else None
    for scope in scopes:
        previous = kept.get(scope) if kept and scope is not module.resumed_flow else None
        if previous is not None and not previous.bare:
            previous = module.scope_result_holds(previous, none_needed)
        if previous is not None:
            results[scope] = previous
            if previous.findings:
                context.findings.extend(previous.findings)
            continue
        start = len(context.findings)
        with recording(chunk, scope) as reads:
            if not needs_none(type(rule), scope):
                rule.check_scope(context, scope)
        if reads.whole_module:
            whole = False
            continue
        result = results[scope] = ScopeResult.of(context.findings[start:], reads)
        if needs is not None and result.flows and not result.findings:
            result.needs_absent = follows_none(scope, needs)  # what lets it be kept when a flow it followed changes
    return KeptResult.of_scopes(chunk, context.findings, results, whole)


def _reported(
    module: ModuleAnalysis, settings: AnalysisSettings, rules: list[type[Rule]],
    raw: list[RawFinding], engine_findings: list[Finding],
) -> list[Finding]:
    """The findings as reported: suppressions applied, severities overridden, the settings' dropped
    codes left out, sorted, deduplicated."""
    suppressions = SuppressionIndex(find_suppressions(module.text, ((c.chunk.start_line, c.chunk.text) for c in module.chunks)))
    overrides = _severity_overrides(settings, rules)
    findings: list[Finding] = []
    for item in raw:
        rule = item.rule
        line, column, end_line, end_column = item.span
        if suppressions.suppresses(rule.code, rule.name, line, end_line):
            continue
        severity = overrides.get(rule.code, item.severity)
        findings.append(Finding(
            path=module.path, line=line, column=column, end_line=end_line, end_column=end_column,
            code=rule.code, name=rule.name, severity=severity, message=item.message,
            evidence=item.evidence, help=item.help, fix=item.fix,
        ))
    for finding in engine_findings:
        if finding.code == SYNTAX_ERROR[0] or not suppressions.suppresses(finding.code, finding.name, finding.line, finding.end_line):
            findings.append(finding)
    if settings.report_unused_ignores:
        for suppression in suppressions.unused():
            what = ", ".join(suppression.tokens) if suppression.tokens else "all rules"
            findings.append(Finding(
                path=module.path, line=suppression.line, column=suppression.column, end_line=suppression.line,
                end_column=suppression.end_column, code=UNUSED_SUPPRESSION[0], name=UNUSED_SUPPRESSION[1],
                severity=Severity.WARNING, message=f"unused suppression: nothing here is reported for {what}",
                help="remove the comment, or fix the code it names",
            ))
    if settings.dropped:  # after the suppressions were read: what a dropped rule found still uses its comment
        findings = [finding for finding in findings if finding.code not in settings.dropped]
    findings.sort(key=Finding.sort_key)
    return _deduplicate(findings)


def _severity_overrides(settings: AnalysisSettings, rules: list[type[Rule]]) -> dict[str, Severity]:
    overrides: dict[str, Severity] = {}
    for key, severity in settings.severity.items():
        for rule in rules:
            if key in (rule.code, rule.name):
                overrides[rule.code] = severity
    return overrides


def _deduplicate(findings: list[Finding]) -> list[Finding]:
    seen: set[tuple] = set()
    unique = []
    for finding in findings:
        key = (finding.line, finding.column, finding.end_line, finding.end_column, finding.code, finding.message)
        if key not in seen:
            seen.add(key)
            unique.append(finding)
    return unique


def _flow_failed(path: str, line: int, what: str, error: Exception) -> Finding:
    """The note for a part of a file whose flow analysis raised (logged with its traceback)."""
    log.exception("the flow analysis failed on %s:%d", path, line)
    return _engine_finding(
        path, NOT_ANALYSED, line, 1,
        f"internal error while analysing {what} ({type(error).__name__}); its checks were skipped", Severity.NOTE,
    )


def _engine_finding(path: str, engine: EngineCode, line: int, column: int, message: str, severity: Severity) -> Finding:
    return Finding(
        path=path, line=line, column=column, end_line=line, end_column=column + 1,
        code=engine.code, name=engine.name, severity=severity, message=message,
    )
