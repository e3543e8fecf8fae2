#!/usr/bin/env python3
"""Which half of the mined bug corpus a repository belongs to: "dev" or "test".

    python3 benchmarks/mined/split.py owner/name [owner/name ...]

The split is by repository, never by pair, so no repository has bugs on both sides, and it is
fixed before anyone looks at a pair: the first byte of the SHA-256 of the lower-cased
``owner/name``, odd for "test", even for "dev". Rules are developed against the dev half only;
the test half is measured, and only its totals are read. Standard library only.
"""

from __future__ import annotations

import argparse
import hashlib
import sys

DEV = "dev"
TEST = "test"


def half(repository: str) -> str:
    """The half of ``repository`` ("owner/name", any case)."""
    return TEST if hashlib.sha256(repository.lower().encode()).digest()[0] & 1 else DEV


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("repositories", nargs="+", metavar="owner/name")
    args = parser.parse_args(argv)
    for repository in args.repositories:
        print(f"{half(repository)}\t{repository}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
