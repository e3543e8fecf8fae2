#!/usr/bin/env python3
"""Recall on real bug fixes mined from public git histories (benchmarks/mined/pairs/*.toml).

    .venv/bin/python benchmarks/mined/run.py                       # the dev half, per rule and per pair
    .venv/bin/python benchmarks/mined/run.py --half all --json out.json
    .venv/bin/python benchmarks/mined/run.py --rule TL201
    .venv/bin/python benchmarks/mined/run.py --check               # validate the pair files against the mirrors

Each pair names a fix commit, its first parent (which holds the bug), the rule whose description
covers the bug and, per file, the parent's lines the fix removed or changed and the fix's lines
that replaced them. The runner extracts both trees from a bare mirror (``--mirrors``, the fetch
tool's layout ``owner+name/...``) into benchmarks/.work/mined/<id>/{parent,fix}/ and analyses the
pair's files there as ``trainlint check TREE`` would: the workspace is the tree, and the settings
are those of the file's nearest trainlint.toml or pyproject.toml [tool.trainlint] inside the tree
(local plugins are never loaded: the trees are other people's code).

A pair's parent is **flagged** when a finding of the pair's rule is about one of its ``parent_lines``:
reported within 3 lines of one, or naming one (within 3 lines) in its evidence, as a rule that reports
a function on its ``def`` names the statement at fault (counted at warning or error, and separately
with notes too; the count by the reported line alone is printed under each table). Its fix is
**quiet** when no warning or error of that rule is about one of its ``fix_lines`` in the same sense.

The split into halves is by repository (split.py). Per-pair lines are printed for the dev half only:
the test half is reported as totals unless ``--show-test-pairs`` is given, which whoever develops the
rules must not use. Standard library plus the trainlint of the interpreter that runs the script.
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import json
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from split import DEV, TEST, half, kept_out

from trainlint.analysis.engine import analyze_source
from trainlint.analysis.engine_codes import NOT_ANALYSED, SYNTAX_ERROR
from trainlint.analysis.findings import Severity
from trainlint.analysis.registry import all_rules, forbid_local_plugins
from trainlint.analysis.workspace import Workspace
from trainlint.config import Config, ConfigError, find_config_file_in, load_config
from trainlint.discovery import Exclusions
from trainlint.notebooks import Notebook, NotebookError
from trainlint.settings import Overrides, resolve_settings

if sys.version_info >= (3, 11):
    import tomllib
else:  # tomli is trainlint's dependency on Python 3.10
    import tomli as tomllib  # pyright: ignore[reportMissingImports]

HERE = Path(__file__).resolve().parent
PAIRS = HERE / "pairs"
WORK = HERE.parent / ".work" / "mined"
NEAR = 3  # lines between a finding and a line of the bug (or of the fix) for them to count as the same place
CONFIG_SUFFIXES = (".ipynb", ".toml", ".cfg", ".json", ".yaml", ".yml")
CONFIG_LIMIT = 1 << 20  # bytes; larger data files are not configuration
REQUIRED = {"repository": str, "commit": str, "parent": str, "subject": str, "rule": str, "bug": str, "found_by": str}
HEX40 = re.compile(r"[0-9a-f]{40}")
REPOSITORY = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9_.][A-Za-z0-9_.-]*")
RULE_CODE = re.compile(r"TL[0-9]{3}")
REAL_FIXES = HERE.parent.parent / "tests" / "real_fixes"  # hand-written cases: a mined pair must not repeat one


class PairError(ValueError):
    """A pair file that does not follow the format (one line: the file and what is wrong)."""


@dataclass(frozen=True)
class PairFile:
    path: str  # relative to the repository's root, with forward slashes
    parent_lines: tuple[int, ...]
    fix_lines: tuple[int, ...]


@dataclass(frozen=True)
class Pair:
    id: str  # the file's stem: owner__name__sha7
    repository: str
    commit: str
    parent: str
    subject: str
    rule: str
    bug: str
    found_by: str
    files: tuple[PairFile, ...]

    @property
    def half(self) -> str:
        return half(self.repository)


def pair_id(repository: str, commit: str) -> str:
    return f"{repository.replace('/', '__')}__{commit[:7]}"


def read_pair(path: Path) -> Pair:
    """One pair file, checked for the format alone (no git): raises PairError."""
    try:
        document = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as error:
        raise PairError(f"{path.name}: cannot read: {error}") from None
    for key, kind in REQUIRED.items():
        value = document.get(key)
        if not isinstance(value, kind) or not value.strip():
            raise PairError(f"{path.name}: `{key}` must be a non-empty string")
    repository, commit, parent = document["repository"], document["commit"], document["parent"]
    if not REPOSITORY.fullmatch(repository):
        raise PairError(f"{path.name}: `repository` must be owner/name, not {repository!r}")
    if kept_out(repository):
        raise PairError(f"{path.name}: {repository} is kept out of the corpus (issue 30's independent measure)")
    for key in ("commit", "parent"):
        if not HEX40.fullmatch(document[key]):
            raise PairError(f"{path.name}: `{key}` must be 40 lower-case hex digits")
    if commit == parent:
        raise PairError(f"{path.name}: `parent` is the commit itself")
    if not RULE_CODE.fullmatch(document["rule"]):
        raise PairError(f"{path.name}: `rule` must be a code like TL201, not {document['rule']!r}")
    if path.stem != pair_id(repository, commit):
        raise PairError(f"{path.name}: the file must be named {pair_id(repository, commit)}.toml")
    unknown = set(document) - set(REQUIRED) - {"files"}
    if unknown:
        raise PairError(f"{path.name}: unknown keys {', '.join(sorted(unknown))}")
    files = document.get("files")
    if not isinstance(files, list) or not files:
        raise PairError(f"{path.name}: needs at least one [[files]] table")
    return Pair(path.stem, repository, commit, parent, document["subject"], document["rule"], document["bug"],
                document["found_by"], tuple(_pair_file(path, entry) for entry in files))


def _pair_file(path: Path, entry: object) -> PairFile:
    if not isinstance(entry, dict) or set(entry) != {"path", "parent_lines", "fix_lines"}:
        raise PairError(f"{path.name}: each [[files]] has exactly `path`, `parent_lines` and `fix_lines`")
    name = entry["path"]
    if not isinstance(name, str) or not name or name.startswith("/") or "\\" in name or ".." in name.split("/"):
        raise PairError(f"{path.name}: a file's `path` must be relative to the repository, with forward slashes")
    lines = {}
    for key in ("parent_lines", "fix_lines"):
        value = entry[key]
        if not isinstance(value, list) or not value or not all(type(n) is int and n > 0 for n in value):
            raise PairError(f"{path.name}: {name}: `{key}` must be a non-empty list of line numbers (from 1)")
        lines[key] = tuple(value)
    return PairFile(name, lines["parent_lines"], lines["fix_lines"])


def read_pairs(folder: Path) -> tuple[list[Pair], list[str]]:
    """Every pair in ``folder`` that follows the format, and one line per file that does not."""
    pairs, problems = [], []
    for path in sorted(folder.glob("*.toml")):
        try:
            pairs.append(read_pair(path))
        except PairError as error:
            problems.append(str(error))
    return pairs, problems


# ---------------------------------------------------------------------------- mirrors and trees


def git_dir(mirrors: Path, repository: str) -> Path | None:
    """The bare repository the fetch tool made for ``repository`` (``owner+name/...``), or None."""
    wanted = repository.replace("/", "+").lower()
    folders = [mirrors / repository.replace("/", "+")]
    if mirrors.is_dir() and not folders[0].is_dir():
        folders = [entry for entry in mirrors.iterdir() if entry.name.lower() == wanted]
    for folder in folders:
        for candidate in (folder, *sorted(folder.glob("*")), *sorted(folder.glob("*/*"))):
            if (candidate / "HEAD").is_file() and (candidate / "objects").is_dir():
                return candidate
    return None


def git(repository: Path, *args: str, input: bytes | None = None) -> bytes:
    return subprocess.run(["git", f"--git-dir={repository}", *args], input=input, capture_output=True, check=True).stdout


def wanted(path: str, size: int) -> bool:
    """Whether a blob belongs in an extracted tree: Python files, and configuration under 1 MB."""
    return path.endswith(".py") or (path.endswith(CONFIG_SUFFIXES) and size < CONFIG_LIMIT)


def extract(repository: Path, commit: str, destination: Path, keep: Callable[[str, int], bool] | None = None) -> Path:
    """The tree of ``commit`` (its Python and configuration files, or the blobs ``keep(path, size)`` accepts) at
    ``destination``; an earlier extraction is reused (it is written under another name and renamed when complete)."""
    keep = keep or wanted
    if destination.is_dir():
        return destination
    partial = destination.with_name(destination.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    listing = git(repository, "ls-tree", "-r", "-l", "-z", commit).split(b"\0")
    blobs: list[tuple[str, str]] = []
    for entry in filter(None, listing):
        meta, name = entry.split(b"\t", 1)
        mode, kind, sha, size = meta.split()
        path = name.decode("utf-8", "surrogateescape")
        if not size.isdigit():  # a snapshot without the object (the fetch tool leaves out files of 4 MiB and more)
            continue
        if kind == b"blob" and mode != b"120000" and keep(path, int(size)):
            blobs.append((sha.decode(), path))
    contents = git(repository, "cat-file", "--batch", input="".join(f"{sha}\n" for sha, _ in blobs).encode())
    position = 0
    for _, path in blobs:
        header_end = contents.index(b"\n", position)
        header = contents[position:header_end].split()
        if header[-1] == b"missing":
            position = header_end + 1
            continue
        size = int(header[2])
        target = partial / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(contents[header_end + 1: header_end + 1 + size])
        position = header_end + 1 + size + 1  # the blob and the newline after it
    partial.mkdir(parents=True, exist_ok=True)  # a tree without a single wanted file
    partial.rename(destination)
    return destination


# ---------------------------------------------------------------------------- analysis


@dataclass(frozen=True)
class Hit:
    line: int  # where the finding is reported
    severity: str
    evidence: tuple[int, ...] = ()  # the lines of this file its evidence points at (the statement at fault)
    by_evidence_only: bool = False  # matched the pair's lines through its evidence, not where it is reported

    def at(self, lines: tuple[int, ...], *, own_line_only: bool = False) -> bool:
        """Whether the finding is about one of ``lines``: its own line, or (unless ``own_line_only``) one
        of its evidence lines, within NEAR lines. A rule that reports a function (TL102 on the ``def``)
        names the offending statement in its evidence."""
        candidates = (self.line,) if own_line_only else (self.line, *self.evidence)
        return any(abs(candidate - n) <= NEAR for candidate in candidates for n in lines)


class Tree:
    """One extracted tree, checked as ``trainlint check TREE`` checks it."""

    def __init__(self, root: Path) -> None:
        self.root = root.resolve()
        self._workspaces: dict[tuple[Path, ...], Workspace] = {}
        self.problems: list[str] = []
        self.unchecked: dict[str, list[int]] = {}  # per file, the lines of its syntax errors and not-analysed notes
        self.skipped: set[str] = set()  # files the tree's settings exclude, or where they drop the rule

    def config_for(self, file: Path) -> Config:
        """The nearest configuration at or above ``file``'s folder, inside the tree; else the defaults
        rooted at the tree (the folder ``trainlint check`` would be run in)."""
        folder = file.parent
        while True:
            found = find_config_file_in(folder)
            if found is not None:
                try:
                    return load_config(found)
                except ConfigError as error:  # `trainlint check` would stop here with this line
                    self.problems.append(f"{error} (checked with the defaults)")
                    break
            if folder == self.root or self.root not in folder.parents:
                break
            folder = folder.parent
        return Config(root=self.root)

    def findings(self, relative: str, rule: str) -> list[Hit] | None:
        """The rule's findings in one file of the tree (lines of the file); None when the file is not there."""
        file = self.root / relative
        if not file.is_file():
            return None
        config = self.config_for(file)
        resolved = resolve_settings(config, Overrides(), file)
        if Exclusions(config.exclude, config.root).excludes(file, is_dir=False) or rule in resolved.analysis.dropped:
            self.skipped.add(relative)
            return []  # `trainlint check TREE` skips the file, or drops the rule's findings in it
        roots = tuple(dict.fromkeys([self.root, config.root.resolve()]))
        workspace = self._workspaces.get(roots)
        if workspace is None:
            workspace = self._workspaces[roots] = Workspace(list(roots), files_fixed=True)
        data = file.read_bytes()
        notebook = None
        if relative.endswith(".ipynb"):
            try:
                notebook = Notebook(data.decode("utf-8"))
            except (UnicodeDecodeError, NotebookError):
                return []
            if not notebook.is_python or not notebook.cells:
                return []
            data = notebook.text.encode("utf-8")
        hits, unchecked = [], self.unchecked.setdefault(relative, [])
        for finding in analyze_source(data, str(file), resolved.analysis, workspace=workspace):
            if finding.code not in (rule, SYNTAX_ERROR.code, NOT_ANALYSED.code):
                continue
            line = notebook.file_position(finding.line, finding.column)[0] if notebook is not None else finding.line
            if finding.code != rule:
                unchecked.append(line)
                continue
            evidence = tuple(item.line if notebook is None else notebook.file_position(item.line, 1)[0]
                             for item in finding.evidence if item.path is None)
            hits.append(Hit(line, finding.severity.label, evidence))
        return hits


def near(hits: list[Hit], lines: tuple[int, ...], lowest: Severity) -> list[Hit]:
    return [dataclasses.replace(hit, by_evidence_only=not hit.at(lines, own_line_only=True))
            for hit in hits if Severity.parse(hit.severity) >= lowest and hit.at(lines)]


@dataclass
class Result:
    pair: Pair
    flagged: bool = False  # a warning or error of the rule near the bug
    flagged_on_own_line: bool = False  # the same, counting only where findings are reported (not their evidence)
    flagged_with_notes: bool = False  # a finding of any severity, notes too
    fix_quiet: bool = True  # no warning or error of the rule near the fix's lines
    parent_hits: list[Hit] = field(default_factory=list)  # the rule's findings near the bug
    fix_hits: list[Hit] = field(default_factory=list)  # its warnings and errors near the fix
    problems: list[str] = field(default_factory=list)
    miss: str = ""  # why a pair not flagged at warning/error was missed (MISSES' keys)

    def as_json(self) -> dict:
        return {
            "id": self.pair.id, "repository": self.pair.repository, "commit": self.pair.commit, "rule": self.pair.rule,
            "half": self.pair.half, "flagged": self.flagged, "flagged_on_own_line": self.flagged_on_own_line,
            "flagged_with_notes": self.flagged_with_notes,
            "fix_quiet": self.fix_quiet, "parent_hits": [hit.__dict__ for hit in self.parent_hits],
            "fix_hits": [hit.__dict__ for hit in self.fix_hits], "problems": self.problems, "miss": self.miss,
        }


def score(pair: Pair, mirrors: Path, work: Path) -> Result:
    result = Result(pair)
    repository = git_dir(mirrors, pair.repository)
    if repository is None:
        result.problems.append(f"no mirror of {pair.repository} under {mirrors}")
        return result
    try:
        parent = Tree(extract(repository, pair.parent, work / pair.id / "parent"))
        fix = Tree(extract(repository, pair.commit, work / pair.id / "fix"))
    except subprocess.CalledProcessError as error:
        result.problems.append(f"git failed: {error.stderr.decode(errors='replace').strip()}")
        return result
    parent_findings: dict[str, list[Hit]] = {}
    for file in pair.files:
        parent_hits = parent.findings(file.path, pair.rule)
        fix_hits = fix.findings(file.path, pair.rule)
        if parent_hits is None:
            result.problems.append(f"{file.path} is not in the parent's tree")
        else:
            parent_findings[file.path] = parent_hits
            found = near(parent_hits, file.parent_lines, Severity.NOTE)
            result.parent_hits += found
            result.flagged_on_own_line |= any(
                Severity.parse(hit.severity) >= Severity.WARNING and not hit.by_evidence_only for hit in found
            )
        if fix_hits is not None:  # a fix may delete the file
            result.fix_hits += near(fix_hits, file.fix_lines, Severity.WARNING)
    result.problems += parent.problems + fix.problems
    result.flagged_with_notes = bool(result.parent_hits)
    result.flagged = any(Severity.parse(hit.severity) >= Severity.WARNING for hit in result.parent_hits)
    result.fix_quiet = not result.fix_hits
    if not result.flagged:
        result.miss = _miss(result, parent, parent_findings)
    return result


MISSES = {
    "problem": "the pair could not be scored (a mirror, a commit or a file missing)",
    "note only": "a note of the rule near the bug, no warning or error",
    "settings": "the project's own trainlint settings exclude the file or drop the rule",
    "not analysed": "a syntax error or a not-analysed note (TL000/TL002) within 3 lines of the bug",
    "reported elsewhere": "the rule warns in the pair's files, but not near the bug",
    "silent": "no warning or error of the rule anywhere in the pair's files, which call backward()",
    "silent, no backward": "no warning or error of the rule, and no backward() call in the pair's files (training elsewhere)",
}


def _miss(result: Result, parent: Tree, parent_findings: dict[str, list[Hit]]) -> str:
    """Why a pair was not flagged, from what the parent's analysis showed: counts of these say where
    the misses of a half lie without showing any of its pairs."""
    if result.problems and not parent_findings:
        return "problem"
    if result.flagged_with_notes:
        return "note only"
    if parent.skipped:
        return "settings"
    lines = {file.path: file.parent_lines for file in result.pair.files}
    if any(abs(line - n) <= NEAR for path, found in parent.unchecked.items() for line in found for n in lines.get(path, ())):
        return "not analysed"
    if any(Severity.parse(hit.severity) >= Severity.WARNING for hits in parent_findings.values() for hit in hits):
        return "reported elsewhere"
    texts = (parent.root / path for path in parent_findings)
    return "silent" if any("backward(" in text.read_text(errors="replace") for text in texts) else "silent, no backward"


# ---------------------------------------------------------------------------- --check


def check(pairs: list[Pair], mirrors: Path) -> list[str]:
    """Problems with the pairs that need the mirrors: the parent, the files and their lines."""
    problems = []
    known_rules = {rule.code for rule in all_rules()}
    seen: dict[str, str] = {}
    hand_written = _hand_written_commits()
    for pair in pairs:
        where = f"{pair.id}.toml"
        if pair.rule not in known_rules:
            problems.append(f"{where}: unknown rule {pair.rule}")
        if pair.commit in seen:  # also across repositories: a fork or a merged history carries the same commit
            problems.append(f"{where}: the same commit as {seen[pair.commit]}")
        seen[pair.commit] = where
        if pair.commit in hand_written:  # a fork's history holds the same commit (OpenNMT-py has pytorch/examples')
            problems.append(f"{where}: already a hand-written case in tests/real_fixes")
        repository = git_dir(mirrors, pair.repository)
        if repository is None:
            problems.append(f"{where}: no mirror of {pair.repository} under {mirrors} (fetch it to check this pair)")
            continue
        try:
            first_parent = git(repository, "rev-parse", f"{pair.commit}^1").decode().strip()
        except subprocess.CalledProcessError:
            problems.append(f"{where}: the mirror has no commit {pair.commit} with a parent")
            continue
        if first_parent != pair.parent:
            problems.append(f"{where}: the first parent of the commit is {first_parent}, not {pair.parent}")
        for file in pair.files:
            for commit, lines, side in ((pair.parent, file.parent_lines, "parent"), (pair.commit, file.fix_lines, "fix")):
                try:
                    text = git(repository, "show", f"{commit}:{file.path}")
                except subprocess.CalledProcessError:
                    problems.append(f"{where}: {file.path} is not in the {side}'s tree")
                    continue
                length = len(text.splitlines())
                outside = [n for n in lines if n > length]
                if outside:
                    problems.append(f"{where}: {file.path}: {side} lines {outside} past the end ({length} lines)")
    return problems


def _hand_written_commits() -> set[str]:
    return {str(tomllib.loads(path.read_text(encoding="utf-8")).get("commit", "")) for path in REAL_FIXES.glob("*.toml")}


# ---------------------------------------------------------------------------- report


def table(results: list[Result]) -> list[str]:
    by_rule: dict[str, list[Result]] = collections.defaultdict(list)
    for result in results:
        by_rule[result.pair.rule].append(result)
    rows = ["| rule | pairs | flagged (w/e) | flagged (incl. notes) | fixes quiet |", "|---|---|---|---|---|"]
    for rule in sorted(by_rule):
        rows.append(_row(rule, by_rule[rule]))
    rows.append(_row("**all**", results))
    own_line = sum(result.flagged_on_own_line for result in results)
    rows.append(f"\n(flagged at warning/error by the finding's own line alone, evidence lines not counted: {own_line})")
    misses = collections.Counter(result.miss for result in results if not result.flagged)
    if misses:
        rows.append("\nNot flagged at warning/error, by why:")
        rows += [f"- {kind}: {misses[kind]} ({MISSES[kind]})" for kind in MISSES if misses[kind]]
        rows += ["\nThe same, per rule (counts only, so a half's misses can be sized without showing its pairs):", ""]
        rows += _misses_by_rule(results)
    return rows


def _misses_by_rule(results: list[Result]) -> list[str]:
    kinds = [kind for kind in MISSES if any(not result.flagged and result.miss == kind for result in results)]
    by_rule: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    for result in results:
        if not result.flagged:
            by_rule[result.pair.rule][result.miss] += 1
    rows = ["| rule | " + " | ".join(kinds) + " |", "|---|" + "---|" * len(kinds)]
    for rule in sorted(by_rule):
        rows.append(f"| {rule} | " + " | ".join(str(by_rule[rule][kind] or "") for kind in kinds) + " |")
    return rows


def _row(label: str, results: list[Result]) -> str:
    count = len(results)

    def share(n: int) -> str:
        return f"{n} ({100 * n / count:.0f} %)" if count else "0"

    flagged = sum(result.flagged for result in results)
    with_notes = sum(result.flagged_with_notes for result in results)
    quiet = sum(result.fix_quiet for result in results)
    return f"| {label} | {count} | {share(flagged)} | {share(with_notes)} | {share(quiet)} |"


def summary(results: list[Result]) -> dict:
    by_rule: dict[str, list[Result]] = collections.defaultdict(list)
    for result in results:
        by_rule[result.pair.rule].append(result)

    def counts(group: list[Result]) -> dict:
        return {
            "pairs": len(group), "flagged": sum(r.flagged for r in group),
            "flagged_on_own_line": sum(r.flagged_on_own_line for r in group),
            "flagged_with_notes": sum(r.flagged_with_notes for r in group), "fixes_quiet": sum(r.fix_quiet for r in group),
            "repositories": len({r.pair.repository.lower() for r in group}),
            "misses": dict(collections.Counter(r.miss for r in group if not r.flagged)),
        }

    return {"all": counts(results), "rules": {rule: counts(group) for rule, group in sorted(by_rule.items())}}


def pair_line(result: Result) -> str:
    mark = "flagged" if result.flagged else "note only" if result.flagged_with_notes else "missed"
    quiet = "fix quiet" if result.fix_quiet else "fix still reported"
    hits = ", ".join(f"{hit.line}:{hit.severity}" + (" via evidence" if hit.by_evidence_only else "")
                     for hit in result.parent_hits)
    line = f"  {result.pair.rule} {mark:9} {quiet:18} {result.pair.id}  {result.pair.subject[:70]}"
    if hits:
        line += f"  [{hits}]"
    for problem in result.problems:
        line += f"\n      problem: {problem}"
    return line


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--pairs", type=Path, default=PAIRS, help=f"the pair files' folder (default {PAIRS})")
    parser.add_argument("--mirrors", type=Path, default=Path("/work/.mirror"), help="bare mirrors, owner+name/... each")
    parser.add_argument("--work", type=Path, default=WORK, help=f"where trees are extracted (default {WORK})")
    parser.add_argument("--half", choices=(DEV, TEST, "all"), default=DEV)
    parser.add_argument("--rule", help="only the pairs of this rule (TLxxx)")
    parser.add_argument("--json", type=Path, help="write the results (the test half's as totals only)")
    parser.add_argument("--check", action="store_true", help="validate every pair file against the mirrors, then stop")
    parser.add_argument("--show-test-pairs", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    forbid_local_plugins("a mined tree is someone else's code")

    pairs, problems = read_pairs(args.pairs)
    if args.check:
        problems += check(pairs, args.mirrors)
        for problem in problems:
            print(problem)
        halves = collections.Counter(pair.half for pair in pairs)
        print(f"{len(pairs)} pair files read ({halves[DEV]} dev, {halves[TEST]} test), {len(problems)} problems")
        return 1 if problems else 0
    for problem in problems:
        print(f"skipped: {problem}", file=sys.stderr)
    if args.rule:
        pairs = [pair for pair in pairs if pair.rule == args.rule]
    halves = (DEV, TEST) if args.half == "all" else (args.half,)
    report: dict = {}
    for name in halves:
        chosen = [pair for pair in pairs if pair.half == name]
        results = [score(pair, args.mirrors, args.work) for pair in chosen]
        shown = name == DEV or args.show_test_pairs
        print(f"\n## {name} half: {len(results)} pairs from {len({p.repository.lower() for p in chosen})} repositories\n")
        print("\n".join(table(results)))
        if shown:
            print()
            for result in results:
                print(pair_line(result))
        else:
            failed = sum(bool(result.problems) for result in results)
            if failed:
                print(f"\n{failed} pairs had problems (extraction or files); run --check")
        report[name] = summary(results)
        if shown:
            report[name]["pairs"] = [result.as_json() for result in results]
    if args.json:
        args.json.write_text(json.dumps(report, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
