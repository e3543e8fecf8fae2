"""The commands of ``trainlint`` (``check``, ``rules``, ``explain``, ``test-rule``), a module each, and
what they share: the error a bad command line raises and the lines they tell the user on stderr."""

from __future__ import annotations

import sys
from collections.abc import Sequence

from trainlint.analysis.registry import PluginProblem
from trainlint.output import visible

CHECK_PROG = "trainlint check"


class UsageError(Exception):
    """A bad command line; the message is the one line the user sees before exit code 2."""

    def __init__(self, message: str, prog: str = "trainlint") -> None:
        super().__init__(message)
        self.prog = prog


def tell(message: str) -> None:
    """A line for the person at the terminal, on stderr: what it quotes of file names, the
    configuration or the code never reaches the terminal as a control character."""
    print(visible(message), file=sys.stderr)


def printable(path: str) -> str:
    """A path as text every output can carry: bytes of a file name that are not UTF-8 (which the
    OS hands over as surrogate escapes, and no UTF-8 encoder accepts) are shown as U+FFFD."""
    return path.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def warn_about_plugins(problems: Sequence[PluginProblem]) -> None:
    """Each plugin problem once (every worker may have met it): the other rules' findings stand."""
    for problem in dict.fromkeys(problems):
        tell(f"trainlint: warning: {problem}")
