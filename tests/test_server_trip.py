"""docs/server.md ("Reading the server") lists the modules an edit runs through on its way to the
diagnostics it changes; the list is held to a trace of the server answering one keystroke.

``edit_trip.py`` runs the server in a process of its own, opens one of the examples, types a space into
its training loop and records every trainlint function that runs until the edited text's own
diagnostics are published (after the carried report a push-only client gets first). The modules they belong to must be the ones the page lists, no more and no fewer.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

from package_layout import ROOT, package_modules

TRIP = Path(__file__).with_name("edit_trip.py")
DOC = ROOT / "docs" / "server.md"
EXAMPLE = ROOT / "examples" / "buggy" / "lm_finetune.py"
TYPED_AFTER = "        total_loss += "  # the space goes between `+=` and `loss`: the loop's text changes, its meaning not


def documented_trip() -> tuple[str, set[str]]:
    """The paragraph before the marked list of docs/server.md, and the modules the list names
    (``analysis/rules/*.py``: every rule)."""
    text = DOC.read_text(encoding="utf-8")
    marked = re.search(r"\n\n((?:[^\n]+\n)+)\n<!-- edit-trip -->(.*?)<!-- /edit-trip -->", text, re.S)
    assert marked is not None, "docs/server.md marks the edit's trip with <!-- edit-trip --> ... <!-- /edit-trip -->"
    by_path = {path.relative_to(ROOT).as_posix(): name for name, path in package_modules().items()}
    named: set[str] = set()
    for path in re.findall(r"`([\w/]+(?:\.py|/\*\.py))`", marked.group(2)):
        matches = [name for file, name in by_path.items() if Path(file).match(path) and (path.endswith("__init__.py") or not file.endswith("__init__.py"))]
        assert matches, f"docs/server.md names `{path}`, which is no module of the package"
        named.update(matches)
    return " ".join(marked.group(1).split()), named


def test_the_documented_trip_of_an_edit_is_the_one_it_takes(tmp_path):
    script = tmp_path / EXAMPLE.name
    shutil.copy(EXAMPLE, script)
    lines = script.read_text(encoding="utf-8").split("\n")
    line = next(index for index, text in enumerate(lines) if text.startswith(TYPED_AFTER))
    done = subprocess.run([sys.executable, "-I", str(TRIP), str(script), str(line), str(len(TYPED_AFTER))],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    trip = json.loads(done.stdout)
    assert trip["findings"] == [3, 3, 3], "the example's three findings: before the space, carried past it, after it"
    ran = set(trip["modules"])
    introduction, documented = documented_trip()
    assert {"missing from the page": sorted(ran - documented), "on the page, but not run": sorted(documented - ran)} == {
        "missing from the page": [], "on the page, but not run": []
    }, f"the modules in the order the edit entered them: {trip['modules']}"
    assert f"through {len(ran)} of trainlint's modules" in introduction
