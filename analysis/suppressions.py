"""Suppression comments: ``# trainlint: ignore[TL101]``, ``# trainlint: ignore-file[TL401]``, ``# noqa: TL101``."""

from __future__ import annotations

import re

import msgspec

from .lines import split_lines

_INLINE = re.compile(r"#\s*trainlint:\s*ignore(?!-)(?:\[(?P<codes>[^\]]*)\])?", re.I)
_FILE = re.compile(r"#\s*trainlint:\s*ignore-file(?:\[(?P<codes>[^\]]*)\])?", re.I)
_NOQA = re.compile(r"#\s*noqa:\s*(?P<codes>TL\d+(?:[\s,]+TL\d+)*)", re.I)


class Suppression(msgspec.Struct):
    line: int  # 1-based
    column: int  # 1-based start of the comment
    end_column: int
    tokens: tuple[str, ...]  # empty: every rule
    file_wide: bool = False
    used: bool = False

    def covers(self, code: str, name: str) -> bool:
        return not self.tokens or code in self.tokens or name in self.tokens


def _tokens(raw: str | None) -> tuple[str, ...]:
    if raw is None:
        return ()
    return tuple(token.strip().upper() if token.strip().upper().startswith("TL") else token.strip().lower()
                 for token in re.split(r"[,\s]+", raw) if token.strip())


def find_suppressions(text: str) -> list[Suppression]:
    if "trainlint:" not in text and "noqa" not in text:
        return []
    found: list[Suppression] = []
    for index, line in enumerate(split_lines(text), start=1):
        if "#" not in line:
            continue
        for pattern, file_wide in ((_FILE, True), (_INLINE, False), (_NOQA, False)):
            for match in pattern.finditer(line):
                found.append(
                    Suppression(index, match.start() + 1, match.end() + 1, _tokens(match.group("codes")), file_wide)
                )
    return found


class SuppressionIndex:
    def __init__(self, suppressions: list[Suppression]) -> None:
        self.all = suppressions
        self.by_line: dict[int, list[Suppression]] = {}
        self.file_wide = [s for s in suppressions if s.file_wide]
        for suppression in suppressions:
            if not suppression.file_wide:
                self.by_line.setdefault(suppression.line, []).append(suppression)

    def suppresses(self, code: str, name: str, line: int, end_line: int) -> bool:
        hit = False
        candidates = self.file_wide + self.by_line.get(line, []) + (self.by_line.get(end_line, []) if end_line != line else [])
        for suppression in candidates:
            if suppression.covers(code, name):
                suppression.used = True
                hit = True
        return hit

    def unused(self) -> list[Suppression]:
        return [s for s in self.all if not s.used]
