"""Write estimator/data/releases.json: the day each final release of the libraries the estimate depends on was
published, read from PyPI's JSON API (https://pypi.org/pypi/NAME/json: the earliest upload time of the release's files).

    python estimator/calibration/release_dates.py [DIR]

reads the pages from the network, or, given DIR, the saved NAME.json files in it. Pre-releases (a, b, rc, dev) are
left out; a release with no files is left out.
"""

from __future__ import annotations

import datetime
import json
import re
import sys
import urllib.request
from pathlib import Path

LIBRARIES = ("transformers", "torch", "peft", "trl", "accelerate", "bitsandbytes", "diffusers")
OUTPUT = Path(__file__).resolve().parent.parent / "data" / "releases.json"
_PRE_RELEASE = re.compile(r"(a|b|rc|dev)\d*", re.IGNORECASE)


def _page(library: str, saved: Path | None) -> dict:
    if saved is not None:
        return json.loads((saved / f"{library}.json").read_text(encoding="utf-8"))
    with urllib.request.urlopen(f"https://pypi.org/pypi/{library}/json", timeout=60) as response:
        return json.load(response)


def published(page: dict) -> list[tuple[str, str]]:
    """(version, day of its first upload) of each final release on a PyPI JSON page, oldest first."""
    days = []
    for version, files in page["releases"].items():
        if not files or any(_PRE_RELEASE.fullmatch(part) or _PRE_RELEASE.match(part.lstrip("0123456789"))
                            for part in version.split(".")):
            continue
        days.append((version, min(file["upload_time_iso_8601"] for file in files)[:10]))
    return sorted(days, key=lambda pair: (pair[1], pair[0]))


def main() -> None:
    saved = Path(sys.argv[1]) if len(sys.argv) > 1 else None
    table = {
        "about": "The day each final release was published on PyPI (the earliest upload time of its files, "
                 "https://pypi.org/pypi/NAME/json), written by estimator/calibration/release_dates.py on "
                 f"{datetime.date.today().isoformat()}. estimator/releases.py reads it: a measurement or a run that states "
                 "no release of a library runs the one current on its date.",
        "libraries": {library: published(_page(library, saved)) for library in LIBRARIES},
    }
    OUTPUT.write_text(json.dumps(table, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
