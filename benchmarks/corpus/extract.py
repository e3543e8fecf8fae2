#!/usr/bin/env python3
"""Put the triage corpus (benchmarks/corpus/repos.json) into a folder outside the checkout.

    python3 benchmarks/corpus/extract.py ../corpus            # every repository and the torch wheel
    python3 benchmarks/corpus/extract.py ../corpus diffusers  # one of them

Each repository's Python files are taken at the commit recorded in repos.json, from a bare
mirror when one is given (``--mirrors DIR`` holding ``OWNER+NAME/repo``, the layout the
session's fetch tool leaves in /work/.mirror) or else from a shallow ``git clone``. The torch
package comes from an installed wheel of the recorded version (``--site-packages``, default:
this interpreter's). Nothing fetched is ever committed: only repos.json and the triage data.
Standard library only.
"""

from __future__ import annotations

import argparse
import io
import json
import shutil
import subprocess
import sys
import sysconfig
import tarfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
MANIFEST = HERE / "repos.json"


def load_manifest() -> dict:
    return json.loads(MANIFEST.read_text(encoding="utf-8"))


def _git(git_dir: Path, *args: str) -> bytes:
    return subprocess.run(["git", f"--git-dir={git_dir}", *args], check=True, capture_output=True).stdout


def _bare_repository(entry: dict, mirrors: Path | None, scratch: Path) -> Path:
    if mirrors is not None:
        candidate = mirrors / entry["repo"].replace("/", "+") / "repo"
        if candidate.is_dir():
            return candidate
    clone = scratch / entry["repo"].replace("/", "+")
    if not clone.exists():
        subprocess.run(
            ["git", "clone", "--bare", "--filter=blob:none", f"https://github.com/{entry['repo']}", str(clone)],
            check=True,
        )
    return clone


def extract_repository(entry: dict, target: Path, mirrors: Path | None) -> int:
    """Write the repository's .py files at the recorded commit under target/NAME; return how many."""
    destination = target / entry["name"]
    scratch = target / ".clones"
    git_dir = _bare_repository(entry, mirrors, scratch)
    commit = entry["commit"]
    names = [
        name for name in _git(git_dir, "ls-tree", "-r", "--name-only", commit).decode("utf-8", "surrogateescape").splitlines()
        if name.endswith(".py") and (entry["folder"] in (".", "") or name.startswith(entry["folder"].rstrip("/") + "/"))
    ]
    if destination.exists():
        shutil.rmtree(destination)
    destination.mkdir(parents=True)
    archive = _git(git_dir, "archive", "--format=tar", commit, "--", *names) if names else b""
    if archive:
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            tar.extractall(destination, filter="data")
    (destination / ".corpus-commit").write_text(f"{entry['repo']} {commit}\n", encoding="utf-8")
    return len(names)


def extract_wheel(entry: dict, target: Path, site_packages: Path) -> int:
    """Copy an installed package's .py files (the torch wheel's torch/) under target/NAME."""
    source = site_packages / entry["folder"]
    version_file = source / "version.py"
    if not version_file.is_file() or f"'{entry['version']}'" not in version_file.read_text(encoding="utf-8"):
        raise SystemExit(f"{source}: not the {entry['package']} {entry['version']} wheel (see {version_file})")
    destination = target / entry["name"] / entry["folder"]
    if destination.parent.exists():
        shutil.rmtree(destination.parent)
    count = 0
    for path in sorted(source.rglob("*.py")):
        relative = path.relative_to(source)
        (destination / relative).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, destination / relative)
        count += 1
    (destination.parent / ".corpus-commit").write_text(f"{entry['package']}=={entry['version']}\n", encoding="utf-8")
    return count


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("target", type=Path, help="folder to write the corpus into (outside the checkout)")
    parser.add_argument("names", nargs="*", help="only these entries of repos.json")
    parser.add_argument("--mirrors", type=Path, default=Path("/work/.mirror"), help="folder of bare mirrors (OWNER+NAME/repo)")
    parser.add_argument("--site-packages", type=Path, default=Path(sysconfig.get_paths()["purelib"]))
    args = parser.parse_args(argv)
    manifest = load_manifest()
    known = {entry["name"] for entry in manifest["repos"] + manifest["wheels"]}
    unknown = sorted(set(args.names) - known)
    if unknown:
        parser.error(f"not in repos.json: {', '.join(unknown)} (known: {', '.join(sorted(known))})")
    args.target.mkdir(parents=True, exist_ok=True)
    mirrors = args.mirrors if args.mirrors.is_dir() else None
    for entry in manifest["repos"]:
        if not args.names or entry["name"] in args.names:
            count = extract_repository(entry, args.target, mirrors)
            print(f"{entry['name']}: {count} .py files at {entry['commit'][:12]}")
    for entry in manifest["wheels"]:
        if not args.names or entry["name"] in args.names:
            count = extract_wheel(entry, args.target, args.site_packages)
            expected = entry.get("python_files")
            warning = f" (expected {expected})" if expected is not None and expected != count else ""
            print(f"{entry['name']}: {count} .py files from {entry['package']} {entry['version']}{warning}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
