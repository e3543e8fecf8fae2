"""Turn what a user writes to pick rules (``TL101``, ``TL2``, ``retained-graph``) into rule codes."""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence

from .rules.base import Rule

_CODE_OR_PREFIX = re.compile(r"TL\d*", re.IGNORECASE)
# A plugin's codes have their own letters (``ACME101``; ``ACME`` selects them all).
_PLUGIN_CODE_OR_PREFIX = re.compile(r"[A-Z]+\d*", re.IGNORECASE)


def resolve_selector(token: str, rules: Sequence[type[Rule]]) -> list[str]:
    """Codes of the rules ``token`` names, in the order of ``rules``.

    A token is a full code, a code prefix (``TL2`` is every TL2xx rule, ``TL`` every built-in
    rule, ``ACME`` every rule of a plugin whose codes are ACMExxx) or a kebab-case rule name;
    case does not matter. Raises ValueError when it names no rule.
    """
    selector = token.strip()
    if not selector:
        raise ValueError("empty rule selector")
    if _CODE_OR_PREFIX.fullmatch(selector):
        prefix = selector.upper()
        codes = [rule.code for rule in rules if rule.code.startswith(prefix)]
        if codes:
            return codes
        if any(len(prefix) >= len(rule.code) for rule in rules):
            raise ValueError(f"unknown rule code {token!r}")
        raise ValueError(f"no rule code starts with {token!r}")
    name = selector.lower()
    codes = [rule.code for rule in rules if rule.name == name]
    if codes:
        return codes
    if _PLUGIN_CODE_OR_PREFIX.fullmatch(selector):
        prefix = selector.upper()
        codes = [rule.code for rule in rules if rule.code.startswith(prefix) and not rule.code.startswith("TL")]
        if codes:
            return codes
        namespace = prefix.rstrip("0123456789")
        if namespace != prefix and any(rule.code.startswith(namespace) for rule in rules):
            raise ValueError(f"unknown rule code {token!r}")  # a plugin's namespace, not one of its codes
    close = difflib.get_close_matches(name, [rule.name for rule in rules], n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    raise ValueError(f"unknown rule {token!r}{hint}; expected a code like TL101, a prefix like TL2, or a rule name")
