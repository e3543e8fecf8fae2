"""Bytes as the estimator's reports write them: GiB (2**30 bytes), one decimal unless asked."""

from __future__ import annotations

import math

GIB = 1024**3


def gib(value: float, digits: int = 1) -> str:
    """``value`` bytes in GiB with ``digits`` decimals; an unbounded value is ``∞``."""
    return "∞" if math.isinf(value) else f"{value / GIB:.{digits}f}"
