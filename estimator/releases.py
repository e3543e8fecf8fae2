"""The library releases a run used where nobody stated them: the ones current on its date. A published measurement
was made with the releases current when it was published (its source's date, from its commit or its page), a script
run today with today's. The days come from PyPI (data/releases.json, written by calibration/release_dates.py); what
each release does to memory from versions.py.
"""

from __future__ import annotations

import datetime
import functools
import json
from pathlib import Path

from .versions import VERSIONED_BEHAVIOURS, _release, settings_for_versions

_DATA_PATH = Path(__file__).parent / "data" / "releases.json"

# The libraries whose release changes the estimate (versions.py), alphabetically.
FOLLOWED = tuple(sorted({library for library, *_ in VERSIONED_BEHAVIOURS}))


@functools.cache
def _published() -> dict[str, list[tuple[str, datetime.date]]]:
    table = json.loads(_DATA_PATH.read_text(encoding="utf-8"))["libraries"]
    return {library: [(version, datetime.date.fromisoformat(day)) for version, day in releases]
            for library, releases in table.items()}


def source_date(text: str) -> datetime.date:
    """A source's date as the dataset records it: a day (2024-06-11), or a month (2023-03) or a year (2025) where the
    page gives no more, read as its first day, by when the release it ran had surely been published."""
    parts = [int(part) for part in text.split("-")]
    return datetime.date(*parts, *[1] * (3 - len(parts)))


def current_on(day: datetime.date) -> dict[str, str]:
    """The newest release of each library published on or before ``day`` (none for a library not yet published)."""
    current = {}
    for library, releases in _published().items():
        out = [version for version, published in releases if published <= day]
        if out:
            current[library] = max(out, key=_release)
    return current


def latest_day() -> datetime.date:
    """The day of the newest release in the table: how far it reaches."""
    return max(published for releases in _published().values() for _, published in releases)


def releases_assumed(stated: dict[str, str], day: datetime.date) -> dict[str, str]:
    """The followed libraries' releases a run on ``day`` used: the stated ones, else the ones current then."""
    current = {library: version for library, version in current_on(day).items() if library in FOLLOWED}
    return {**current, **{library: version for library, version in stated.items() if library in FOLLOWED}}


def dated_settings(stated: dict[str, str], day: datetime.date, family: str | None) -> dict[str, bool]:
    """The plan settings (versions.py) of the releases a run on ``day`` used, the stated ones first."""
    return settings_for_versions(releases_assumed(stated, day), family)
