"""What the caller (CLI, server, tests) tells the engine about one analysis."""

from __future__ import annotations

import msgspec

from .findings import Severity


class AnalysisSettings(msgspec.Struct, frozen=True):
    """Rule selection is by code, code prefix (``TL2``) or rule name, as users write it."""

    select: tuple[str, ...] = ()  # empty: every rule
    ignore: tuple[str, ...] = ()
    severity: dict[str, Severity] = {}  # code or name -> severity override
    target_gpu: str | None = None
    report_unused_ignores: bool = False
    # Local plugins the project's configuration names: absolute paths of .py files or module names.
    plugins: tuple[str, ...] = ()
    # Codes not reported for this file whatever finds them, sorted: engine codes named in ``ignore``
    # (TL000 and the like are no rules to leave unselected) and the file's per-file-ignores. The
    # rules still run, so a suppression comment they use is not reported as unused.
    dropped: tuple[str, ...] = ()
