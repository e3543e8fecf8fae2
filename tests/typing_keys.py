"""Typing one text into another a key at a time, as the incremental tests do."""

from __future__ import annotations

import os


def one_key_towards(text: str, target: str) -> str:
    """``text`` one character closer to ``target``, where they differ by what one place holds."""
    prefix = len(os.path.commonprefix([text, target]))
    if len(text) > len(target):
        return text[:prefix] + text[prefix + 1:]
    return text[:prefix] + target[prefix] + text[prefix:]
