"""The codes the engine itself reports: no rule class stands behind them.

This table is the one place that knows them: the engine reports them, selection accepts them in
``ignore`` (they cannot be selected: they are no rules), ``explain`` and SARIF describe them.
"""

from __future__ import annotations

from typing import NamedTuple

from .findings import Severity

# Rules raise instead of reporting when this is set, so their tests see their bugs. (Here, not in
# ``engine``: the server reads it before it has imported the analysis.)
STRICT_ENV = "TRAINLINT_STRICT"


class EngineCode(NamedTuple):
    code: str
    name: str
    severity: Severity
    explanation: str


SYNTAX_ERROR = EngineCode("TL000", "syntax-error", Severity.ERROR, (
    "A statement that does not parse, or a file that cannot be checked at all: one that cannot be\n"
    "decoded (a bad coding cookie, bytes that are not in the file's encoding), one that cannot be\n"
    "read (no permission, a FIFO or device instead of a regular file, over the size limit) or a\n"
    "notebook that is not valid notebook JSON. Only the broken statement is skipped: the rest of\n"
    "the file is still checked. It is not a rule, so it cannot be selected; `ignore` drops it."
))
UNUSED_SUPPRESSION = EngineCode("TL001", "unused-suppression", Severity.WARNING, (
    "A suppression comment (`# trainlint: ignore[...]`, `# trainlint: ignore-file[...]`,\n"
    "`# noqa: TL...`) that hides nothing: the code it names is not reported on its line (or in\n"
    "its file). Reported only with --report-unused-ignores. A bare `# noqa`, or one that names only\n"
    "other tools' codes, belongs to those tools and is never reported."
))
NOT_ANALYSED = EngineCode("TL002", "not-analysed", Severity.NOTE, (
    "A statement trainlint could not fully check: it is nested too deeply to analyse, or a rule\n"
    "failed on it (an internal error, worth a bug report). The other statements are checked."
))

ENGINE_CODES: dict[str, EngineCode] = {engine.code: engine for engine in (SYNTAX_ERROR, UNUSED_SUPPRESSION, NOT_ANALYSED)}


def engine_code_named(token: str) -> EngineCode | None:
    """The engine code a user's token names (its code or its name, in any case), if any."""
    wanted = token.strip()
    return next((e for e in ENGINE_CODES.values() if wanted.upper() == e.code or wanted.lower() == e.name), None)
