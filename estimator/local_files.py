"""JSON files the estimator reads from disk: a DeepSpeed config a script names, a model's
``config.json`` in a folder or in the local Hugging Face cache.

Each is read only when it is a regular file of bounded size, inside the folders it may come from
(after resolving symlinks and ``..``, so a link or a path cannot lead out), and nested no deeper
than a config ever is. Anything else is unknown, with the reason; nothing is fetched.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from trainlint.analysis.files import UnreadableFile, read_bounded

MAX_JSON_BYTES = 1_000_000
MAX_JSON_DEPTH = 32

_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.S)
_BRACKET = re.compile(r"[\[\]{}]")


class Unreadable(ValueError):
    """Why a file cannot be used (outside the workspace, not a regular file, too large, not JSON)."""


def inside(path: Path, roots: Iterable[Path]) -> Path:
    """``path`` with symlinks and ``..`` resolved, when that lies inside one of ``roots``."""
    try:
        resolved = path.resolve(strict=True)
    except (OSError, RuntimeError) as error:  # missing, or a symlink loop
        raise Unreadable(f"{path} does not exist") from error
    except ValueError as error:  # a NUL in the name, which no file can have
        raise Unreadable(f"{path!r} cannot name a file: it holds a NUL character") from error
    if not any(resolved == root or root in resolved.parents for root in roots):
        raise Unreadable(f"{path} lies outside the workspace")
    return resolved


def read_json(path: Path, roots: Iterable[Path] | None = None) -> Any:
    """The JSON document in ``path``; ``roots``: the folders it must resolve into (None: anywhere)."""
    resolved = inside(Path(path), [Path(root).resolve() for root in roots]) if roots is not None else Path(path)
    try:
        data = read_bounded(resolved, MAX_JSON_BYTES)
    except UnreadableFile as error:
        raise Unreadable(f"cannot read {path}: {error}") from error
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise Unreadable(f"{path} is not UTF-8 text") from error
    if _depth(text) > MAX_JSON_DEPTH:
        raise Unreadable(f"{path} nests deeper than {MAX_JSON_DEPTH} levels")
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as error:
        raise Unreadable(f"{path} is not valid JSON") from error


def _depth(text: str) -> int:
    """The deepest nesting of arrays and objects, strings left out (no parse needed)."""
    depth = deepest = 0
    for match in _BRACKET.finditer(_STRING.sub("", text)):
        if match.group() in "[{":
            depth += 1
            if depth > deepest:
                deepest = depth
                if deepest > MAX_JSON_DEPTH:
                    return deepest
        else:
            depth -= 1
    return deepest
