"""How a test starts trainlint in a process of its own: by the `trainlint` script next to the interpreter
running the tests, as a shell starts it.

Not `python -m trainlint` from the repository's root, where the tests run: `-m` (and `-c`) put the working
directory first on `sys.path`, and there `trainlint` is the checkout's folder, which lacks `analysis/`,
`estimator/` and `server/` (pyproject.toml maps them into the package only as it installs). The script
imports the installed package wherever it starts; `python -P -m trainlint` (Python 3.11+) would too.
"""

from __future__ import annotations

import sys
from pathlib import Path

TRAINLINT = [str(Path(sys.executable).parent / "trainlint")]
SERVER = [*TRAINLINT, "server"]
