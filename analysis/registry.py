"""Every rule trainlint runs. Adding a rule is one line here."""

from __future__ import annotations

from .rules.base import Rule
from .rules.retained_graph import RetainedGraph

BUILTIN_RULES: tuple[type[Rule], ...] = (
    RetainedGraph,
)

_extra_rules: list[type[Rule]] = []


def register(rule: type[Rule]) -> None:
    """For rules that live outside `analysis` (the estimator's TL601), which analysis must not import."""
    if rule not in _extra_rules:
        _extra_rules.append(rule)


def all_rules() -> list[type[Rule]]:
    return sorted((*BUILTIN_RULES, *_extra_rules), key=lambda rule: rule.code)
