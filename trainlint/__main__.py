"""``python -m trainlint``.

``-m`` puts the working directory first on ``sys.path``, and the working directory is usually
the user's project: a ``libcst.py`` or ``json.py`` there would be imported instead of the real
module, running the project's code. So the entry is dropped before anything else is imported.
This cannot help against what Python itself imports before this file runs (a ``trainlint/``
folder in the working directory shadows this very package): start with ``python -P -m
trainlint`` (Python 3.11+) or ``python -I -m trainlint``, or use the ``trainlint`` script.
"""

import os
import sys

if not getattr(sys.flags, "safe_path", False) and sys.path and sys.path[0] in ("", os.getcwd()):
    del sys.path[0]

from trainlint.cli import console_main  # noqa: E402 (after the guard above, on purpose)

console_main()
