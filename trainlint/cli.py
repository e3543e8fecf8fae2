"""The ``trainlint`` command: check, rules, explain.

Exit codes: 0 nothing at or above ``fail-on``; 1 findings at or above it (or, with --diff, a
diff); 2 a usage or configuration problem, told in one line on stderr.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import difflib
import functools
import gc
import io
import logging
import multiprocessing
import multiprocessing.context
import os
import sys
import textwrap
import time
from collections.abc import Sequence
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn, TextIO

import msgspec

import trainlint
from trainlint import estimate_cli
from trainlint.analysis.engine import (
    STRICT_ENV,
    DecodeError,
    analyze_source,
    collector_paused,
    select_rules,
)
from trainlint.analysis.engine_codes import ENGINE_CODES, SYNTAX_ERROR
from trainlint.analysis.files import (
    OutsideWriteRoots,
    UnreadableFile,
    WriteRoots,
    limit_for,
    read_bounded,
    remove_stale_temporaries,
    replace_file,
)
from trainlint.analysis.findings import Evidence, Finding, Severity
from trainlint.analysis.registry import (
    PluginProblem,
    all_rules,
    allow_local_plugins,
    forbid_local_plugins,
    is_plugin_path,
    load_plugin,
    local_plugins_allowed,
    plugin_fingerprint,
    rules_for,
    take_problems,
)
from trainlint.analysis.rules.base import Rule
from trainlint.analysis.settings import AnalysisSettings
from trainlint.analysis.workspace import Workspace
from trainlint.cache import ENVIRONMENT_VARIABLE as CACHE_ENVIRONMENT_VARIABLE
from trainlint.cache import FOLDER_NAME as CACHE_FOLDER_NAME
from trainlint.cache import CacheUnavailable, ResultCache
from trainlint.config import (
    BadGlob,
    Config,
    ConfigError,
    ConfigFinder,
    check_before_plugins,
    display_path,
    glob_spec,
    load_config,
    rule_codes,
    target_gpu_problem,
)
from trainlint.discovery import Exclusions, MissingPathError, discover_files, repository_top
from trainlint.fixing import SourceFile, applicable, fix_until_stable, unified_diff
from trainlint.notebooks import CellPosition, Notebook, NotebookError
from trainlint.output import Report, repository_root, visible, visible_lines
from trainlint.output.github import render_github
from trainlint.output.json_format import render_json
from trainlint.output.sarif import render_sarif
from trainlint.output.statistics import render_statistics, render_statistics_json
from trainlint.output.terminal import COLOR_CHOICES, render_terminal, wants_colour
from trainlint.settings import Overrides, resolve_settings

FORMATS = ("terminal", "json", "github", "sarif")
SEVERITIES = ("error", "warning", "note")
STDIN = "-"
ALLOW_PLUGINS_VARIABLE = "TRAINLINT_ALLOW_PLUGINS"
CHECK_PROG = "trainlint check"
# Below this many files a process pool costs more to start than it saves.
PARALLEL_THRESHOLD = 8
MAX_DEFAULT_JOBS = 8
# Files handed to a worker at a time: enough that the files of one folder (which import the same
# workspace files, parsed once per worker) go together, few enough that results arrive steadily.
MAX_BATCH = 16
EXIT_BROKEN_PIPE = 128 + 13  # what a shell reports for a tool killed by SIGPIPE
PROJECTED_OOM = "TL601"


class UsageError(Exception):
    """A bad command line; the message is the one line the user sees before exit code 2."""

    def __init__(self, message: str, prog: str = "trainlint") -> None:
        super().__init__(message)
        self.prog = prog


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(message, self.prog)


def _comma_list(text: str) -> list[str]:
    items = [item.strip() for item in text.split(",")]
    if not all(items):
        raise argparse.ArgumentTypeError(f"empty item in {text!r}")
    return items


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected at least 1, got {value}")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="trainlint", description=trainlint.__doc__)
    parser.add_argument("-V", "--version", action="version", version=f"trainlint {trainlint.__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    check = commands.add_parser("check", help="check Python files for training bugs")
    check.add_argument("paths", nargs="*", default=["."], metavar="PATH", help="files or folders ('-' reads stdin)")
    check.add_argument("--output-format", "--format", dest="format", choices=FORMATS, default="terminal",
                       help="how findings are reported (--format is the older name)")
    check.add_argument("--output", metavar="FILE", help="write the report to FILE instead of stdout")
    fixing = check.add_mutually_exclusive_group()
    fixing.add_argument("--fix", action="store_true", help="apply fixes to the files, then report what remains")
    fixing.add_argument("--diff", action="store_true", help="print the fixes as a diff without writing them")
    check.add_argument("--unsafe-fixes", action="store_true",
                       help="with --fix or --diff, apply unsafe fixes too (they may change behaviour or break the code)")
    check.add_argument("--show-fixes", action="store_true",
                       help="with --fix or --diff, list each fix and whether it is safe or unsafe")
    check.add_argument("--select", type=_comma_list, action="extend", metavar="RULES",
                       help="only these codes, prefixes or names (replaces the config's select)")
    check.add_argument("--extend-select", type=_comma_list, action="extend", metavar="RULES",
                       help="these as well as the selected ones")
    check.add_argument("--ignore", type=_comma_list, action="extend", metavar="RULES",
                       help="skip these codes, prefixes or names (replaces the config's ignore)")
    check.add_argument("--fail-on", choices=SEVERITIES,
                       help="lowest severity that fails the run (default: the config's fail-on, else error)")
    check.add_argument("--exit-zero", action="store_true", help="exit 0 even when findings (or fixes, with --diff) fail the run")
    check.add_argument("--exclude", type=_comma_list, action="extend", metavar="GLOBS",
                       help="gitignore-style globs to skip, relative to each configuration's folder "
                            "(replaces the config's exclude)")
    check.add_argument("--extend-exclude", type=_comma_list, action="extend", metavar="GLOBS",
                       help="globs to skip as well as the excluded ones")
    configuration = check.add_mutually_exclusive_group()
    configuration.add_argument("--config", metavar="FILE",
                               help="settings for every file from FILE (default: each file's nearest pyproject.toml or trainlint.toml)")
    configuration.add_argument("--isolated", action="store_true",
                               help="read no configuration file: the built-in defaults and the command line only")
    check.add_argument("--jobs", type=_positive_int, metavar="N", help="files checked in parallel")
    check.add_argument("--target-gpu", metavar="NAME", help="GPU that memory estimates are checked against")
    check.add_argument("--report-unused-ignores", action="store_true", help="report suppressions that hide nothing")
    check.add_argument("--quiet", "-q", action="store_true", help="print findings only, no summary")
    check.add_argument("--statistics", action="store_true", help="count the findings of each rule instead of listing them")
    check.add_argument("--color", choices=COLOR_CHOICES, default="auto",
                       help="colour the terminal output: auto (a terminal, unless NO_COLOR or TERM=dumb), always, never")
    check.add_argument("--show-settings", action="store_true",
                       help="print the settings the first file is checked with, and the file they come from")
    check.add_argument("--show-files", action="store_true", help="print the files that would be checked")
    check.add_argument("--stdin-filename", metavar="NAME", help="name to report for code read from stdin ('-')")
    check.add_argument("--no-cache", action="store_true", help="analyse every file afresh, and keep no results")
    check.add_argument("--cache-dir", metavar="DIR",
                       help=f"where results are kept between runs (default: ${CACHE_ENVIRONMENT_VARIABLE}, else the "
                            f"configuration's cache-dir, else {CACHE_FOLDER_NAME} in the project's folder)")

    rules = commands.add_parser("rules", help="list every rule")
    rules.add_argument("--format", choices=("text", "json"), default="text")

    test_rule = commands.add_parser(
        "test-rule", help="run a plugin's own examples (MUST_FIRE, MUST_NOT_FIRE) and report each rule's result",
    )
    test_rule.add_argument("plugins", nargs="+", metavar="FILE_OR_MODULE",
                           help="a plugin file (tools/lint_rules.py) or an importable module name")

    explain = commands.add_parser("explain", help="show a rule's documentation")
    explain.add_argument("rule", metavar="RULE", help="code (TL101) or name (retained-graph)")

    for command in (check, rules, explain):
        command.add_argument("--allow-plugins", action="store_true",
                             help=f"load the local plugins the configuration names: they run the project's code "
                                  f"(also ${ALLOW_PLUGINS_VARIABLE}=1)")

    serve = commands.add_parser("server", help="run the language server (stdio unless --tcp)")
    serve.add_argument("--tcp", metavar="HOST:PORT", type=_host_port, help="listen on a TCP port (for debugging)")

    estimate_cli.add_parsers(commands, _positive_int, _comma_list)
    return parser


def _host_port(value: str) -> str:
    host, colon, port = value.rpartition(":")
    if not colon or not port.isdigit() or not 0 < int(port) < 65536:
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, got {value!r}")
    return value


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    try:
        return _dispatch(parser, argv)
    except BrokenPipeError:
        # The reader left (`trainlint rules | head`): stop quietly, as a tool killed by SIGPIPE does.
        _silence_stdout()
        return EXIT_BROKEN_PIPE


def console_main() -> NoReturn:
    """The ``trainlint`` command (and ``python -m trainlint``): ``main()``, then the process ends
    without the interpreter's teardown.

    A check of a repository in one process holds every tree it parsed (the workspace keeps the
    analyses of the files that imports led to) until it ends, and the teardown frees them one
    object at a time: 0.7 of 7 seconds of CPU over torchtune's 498 files. What is left to do at
    the end is done here: the standard streams flushed (a reader gone counts as SIGPIPE, as in
    ``main``) and logging's handlers closed. Worker processes end so already (multiprocessing
    leaves a forked worker with ``os._exit``); ``main()`` called as a function returns as before.
    """
    code = main()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BrokenPipeError:
            code = EXIT_BROKEN_PIPE
        except (OSError, ValueError):  # closed, or no descriptor: nothing more can be written to it
            pass
    logging.shutdown()
    os._exit(code)


def _silence_stdout() -> None:
    """Point stdout at the null device, so the interpreter's last flush has nowhere to fail."""
    try:
        descriptor = os.open(os.devnull, os.O_WRONLY)
        os.dup2(descriptor, sys.stdout.fileno())
    except (OSError, ValueError, io.UnsupportedOperation):  # a test's captured stdout has no descriptor
        pass


def _dispatch(parser: argparse.ArgumentParser, argv: Sequence[str] | None) -> int:
    words = list(sys.argv[1:] if argv is None else argv)
    if not words:  # `trainlint` alone: what it can do, as ruff and git answer
        sys.stderr.write(parser.format_help())
        return 2
    try:
        args = _parsed(parser, words)
        _decide_on_local_plugins(args)
        if args.command == "check":
            return _check(args)
        if args.command == "rules":
            return _rules(args)
        if args.command == "test-rule":
            return _test_rule(args)
        if args.command == "estimate":
            return estimate_cli.run_estimate(args)
        if args.command == "gpus":
            return estimate_cli.run_gpus(args)
        if args.command == "server":
            from trainlint.server.server import start  # pygls is only imported by the server

            start(args.tcp)
            return 0
        return _explain(args)
    except SystemExit as exit:  # --help and --version
        return exit.code if isinstance(exit.code, int) else 0
    except (UsageError, ConfigError, MissingPathError) as error:
        prog = error.prog if isinstance(error, UsageError) else "trainlint"
        _tell(f"{prog}: error: {error}")
        return 2


def _parsed(parser: argparse.ArgumentParser, words: list[str]) -> argparse.Namespace:
    """The command line, or a UsageError that suggests the nearest flag or command to a mistyped one."""
    try:
        return parser.parse_args(words)
    except UsageError as error:
        hint = _nearest(parser, words, str(error))
        if hint is None:
            raise
        raise UsageError(f"{error} (did you mean {hint!r}?)", error.prog) from None


def _nearest(parser: argparse.ArgumentParser, words: list[str], message: str) -> str | None:
    commands = next(action for action in parser._actions if isinstance(action, argparse._SubParsersAction))
    if message.startswith("argument COMMAND: invalid choice:"):
        typed = next((word for word in words if not word.startswith("-")), "")
        close = difflib.get_close_matches(typed, list(commands.choices), n=1)
        return close[0] if close else None
    if not message.startswith("unrecognized arguments:"):
        return None
    command = next((commands.choices[word] for word in words if word in commands.choices), None)
    known = [flag for action in (command or parser)._actions for flag in action.option_strings]
    for word in message.removeprefix("unrecognized arguments:").split():
        if word.startswith("--"):
            close = difflib.get_close_matches(word.split("=", 1)[0], known, n=1)
            if close:
                return close[0]
    return None


def _decide_on_local_plugins(args: argparse.Namespace) -> None:
    """A configuration's local plugins run the project's code: they are loaded only when the user
    allowed it outside the project (--allow-plugins, the environment) and the command needs rules
    (listing files does not). `test-rule` loads the plugins its command line names, and those only."""
    if args.command == "test-rule" or (
        (getattr(args, "allow_plugins", False) or os.environ.get(ALLOW_PLUGINS_VARIABLE) == "1")
        and not getattr(args, "show_files", False)
    ):
        allow_local_plugins()
    elif args.command != "server":  # the server decides at `initialize`, from its client
        forbid_local_plugins(f"local plugins run the project's code; pass --allow-plugins (or set "
                             f"{ALLOW_PLUGINS_VARIABLE}=1) to load them")


# ---------------------------------------------------------------------------- check


@dataclass(frozen=True)
class _Task:
    path: str  # as shown to the user and reported by the engine
    settings: AnalysisSettings
    ignored: frozenset[str]  # codes dropped after analysis (per-file-ignores, engine codes)
    fix: bool
    fail_on: Severity  # from the file's own configuration (or --fail-on)
    unsafe: bool = False  # unsafe fixes are applied too (--unsafe-fixes)
    data: bytes | None = None  # stdin's content; None: read the file at path
    patch_name: str = ""  # what --diff calls the file (``_patch_path``); standard input keeps its name
    roots: tuple[str, ...] = ()  # where imports of the user's own files are looked for
    fingerprint: bytes | None = None  # what besides its bytes the file's findings depend on; None: not cached


@dataclass(frozen=True)
class _Outcome:
    path: str
    findings: list[Finding]
    text: str | None  # decoded source, kept only when there are findings to show it for
    fixed: bytes | None = None  # the file after fixes, when fixing changed it
    diff: str = ""  # the same change as a unified diff
    fix_count: int = 0
    fix_rejected: bool = False
    cells: dict[int, str] | None = None  # a notebook's code cells, to show findings in their own lines
    applied: tuple[Finding, ...] = ()  # the findings whose fixes were applied, for --show-fixes
    plugin_problems: tuple[PluginProblem, ...] = ()  # reported once by the main process, workers' too


def _run_task(task: _Task, cache: ResultCache | None = None) -> _Outcome:
    """Check one file (and fix it, when asked); with a cache, keep what the check found; with
    the plugin problems this process met doing it."""
    outcome = _checked(task, cache)
    problems = take_problems()
    return dataclasses.replace(outcome, plugin_problems=tuple(problems)) if problems else outcome


def _checked(task: _Task, cache: ResultCache | None) -> _Outcome:
    data = task.data
    if data is None:
        try:
            data = read_bounded(task.path, limit_for(task.path))
        except UnreadableFile as error:
            return _Outcome(task.path, [_unreadable(task.path, str(error))], None)

    workspace = _workspace(task.roots)

    def analyze(source: str | bytes) -> list[Finding]:
        return [f for f in analyze_source(source, task.path, task.settings, workspace=workspace) if f.code not in task.ignored]

    def keep(findings: list[Finding]) -> None:
        if cache is not None and task.fingerprint is not None:
            cache.store(ResultCache.key(task.fingerprint, data), findings, workspace, task.path)

    if task.path.endswith(".ipynb"):
        return _run_notebook(task, data, analyze, keep)

    findings = analyze(data)
    keep(findings)
    if not task.fix or not any(applicable(finding, task.unsafe) for finding in findings):
        return _unfixed_outcome(task, data, findings)
    try:
        source = SourceFile.decode(data)
    except DecodeError:  # reported by the analysis as TL000
        return _Outcome(task.path, findings, None)
    outcome = fix_until_stable(source.text, analyze, findings=findings, unsafe=task.unsafe)
    changed = outcome.text != source.text
    return _Outcome(
        task.path,
        outcome.findings,
        outcome.text if outcome.findings else None,
        fixed=source.encode(outcome.text) if changed else None,
        diff=unified_diff(source.text, outcome.text, task.patch_name or task.path) if changed else "",
        fix_count=outcome.resolved,
        fix_rejected=outcome.rejected,
        applied=tuple(outcome.applied_findings),
    )


_WORKSPACES: dict[tuple[str, ...], Workspace] = {}


def _workspace(roots: tuple[str, ...]) -> Workspace:
    """One per set of roots in each process, so every file of a run shares the parsed imports."""
    workspace = _WORKSPACES.get(roots)
    if workspace is None:
        workspace = _WORKSPACES[roots] = Workspace([Path(root) for root in roots], files_fixed=True)
    return workspace


def _unfixed_outcome(task: _Task, data: bytes, findings: list[Finding]) -> _Outcome:
    """What checking ``data`` without fixing shows: the findings, and the text they are shown in."""
    if task.path.endswith(".ipynb"):
        try:
            notebook = Notebook(data.decode("utf-8"))
        except (UnicodeDecodeError, NotebookError):
            return _Outcome(task.path, findings, None)
        return _Outcome(task.path, findings, notebook.raw if findings else None, cells=notebook.cell_sources())
    try:
        text = SourceFile.decode(data).text if findings else None
    except DecodeError:  # reported by the analysis as TL000
        text = None
    return _Outcome(task.path, findings, text)


def _run_notebook(task: _Task, data: bytes, analyze, keep) -> _Outcome:
    """A notebook's code cells as one program; findings placed in cells and in the file; fixes written into the cells."""
    try:
        raw = data.decode("utf-8")
        notebook = Notebook(raw)
    except (UnicodeDecodeError, NotebookError) as error:
        code, name = SYNTAX_ERROR.code, SYNTAX_ERROR.name
        unreadable = [Finding(
            path=task.path, line=1, column=1, end_line=1, end_column=2, code=code, name=name,
            severity=Severity.ERROR, message=f"cannot read the notebook: {error}",
        )]
        keep(unreadable)
        return _Outcome(task.path, unreadable, None)
    if not notebook.is_python or not notebook.cells:
        keep([])
        return _Outcome(task.path, [], None)
    findings = analyze(notebook.text)
    unfixed = _Outcome(task.path, _in_notebook(notebook, findings), raw if findings else None, cells=notebook.cell_sources())
    keep(unfixed.findings)
    if not task.fix or not any(applicable(finding, task.unsafe) for finding in findings):
        return unfixed
    outcome = fix_until_stable(notebook.text, analyze, findings=findings, unsafe=task.unsafe)
    try:
        fixed_raw = notebook.with_program(outcome.text)
    except NotebookError as error:
        _tell(f"trainlint: warning: the fixes for {task.path} were not applied: {error}")
        return unfixed
    if fixed_raw == raw:
        return unfixed
    fixed = Notebook(fixed_raw)
    remaining = _in_notebook(fixed, analyze(fixed.text))
    return _Outcome(
        task.path, remaining, fixed_raw if remaining else None,
        fixed=fixed_raw.encode("utf-8"),
        diff=unified_diff(raw, fixed_raw, task.patch_name or task.path),
        fix_count=outcome.resolved, fix_rejected=outcome.rejected, cells=fixed.cell_sources(),
        applied=tuple(_in_notebook(notebook, outcome.applied_findings)),
    )


def _in_notebook(notebook: Notebook, findings: Sequence[Finding]) -> list[Finding]:
    """Program positions to file positions (line, column) and cell positions, and the program's
    line numbers in messages to cells' ones; the markers' lines never hold findings."""
    placed = []
    for finding in findings:
        cell = notebook.cell_position(finding.line, finding.column)
        end = notebook.cell_position(finding.end_line, finding.end_column)
        line, column = notebook.file_position(finding.line, finding.column)
        end_line, end_column = notebook.file_position(finding.end_line, finding.end_column)
        if cell is not None and (end is None or end.cell != cell.cell):
            end = CellPosition(cell.cell, cell.line, cell.column + 1)  # a span never leaves its cell
        evidence = tuple(_evidence_in_notebook(notebook, item) for item in finding.evidence)
        placed.append(msgspec.structs.replace(
            finding, line=line, column=column, end_line=end_line, end_column=end_column, evidence=evidence,
            message=notebook.in_cells(finding.message), help=notebook.in_cells(finding.help),
            cell=cell.cell if cell else None, cell_line=cell.line if cell else None, cell_column=cell.column if cell else None,
            cell_end_line=end.line if cell and end else None, cell_end_column=end.column if cell and end else None,
            # a fix's edits are positions in the joined program: `--fix` applies them; they are not file edits
            fix=msgspec.structs.replace(finding.fix, edits=()) if finding.fix is not None else None,
        ))
    return placed


def _evidence_in_notebook(notebook: Notebook, item: Evidence) -> Evidence:
    if item.path is not None:  # another file of the workspace: its own numbering
        return item
    cell = notebook.cell_position(item.line, 1)
    return msgspec.structs.replace(
        item, line=notebook.file_position(item.line, 1)[0], note=notebook.in_cells(item.note),
        cell=cell.cell if cell else None, cell_line=cell.line if cell else None,
    )


def _unreadable(path: str, reason: str) -> Finding:
    code, name = SYNTAX_ERROR.code, SYNTAX_ERROR.name
    return Finding(
        path=path, line=1, column=1, end_line=1, end_column=2, code=code, name=name,
        severity=Severity.ERROR, message=f"cannot read the file: {reason}",
    )


def _default_jobs(file_count: int) -> int:
    return 1 if file_count < PARALLEL_THRESHOLD else min(os.cpu_count() or 1, MAX_DEFAULT_JOBS)


def _run_all(tasks: list[_Task], jobs: int | None, cache: ResultCache | None, progress: _Progress) -> list[_Outcome]:
    """Every task's outcome, in the order of the tasks whichever worker finished first: kept
    results from the cache, the rest checked in this process or a pool of workers."""
    _WORKSPACES.clear()  # a run reads the workspace as it is now (main() may run more than once in a process)
    outcomes: list[_Outcome | None] = [None] * len(tasks)
    remaining = []
    for index, task in enumerate(tasks):
        outcome = outcomes[index] = _cached_outcome(task, cache) if cache is not None else None
        if outcome is None:
            remaining.append(index)
        else:
            progress.advance(outcome)
    jobs = min(jobs or _default_jobs(len(remaining)), len(remaining))
    if jobs <= 1:
        with collector_paused():
            for index in remaining:
                outcomes[index] = _run_task(tasks[index], cache)
                gc.collect(1)  # once per file (see _run_batch)
                progress.advance(outcomes[index])
    else:
        with ProcessPoolExecutor(max_workers=jobs, mp_context=_worker_context()) as pool:
            batches = {pool.submit(_run_batch, [tasks[index] for index in batch], cache): batch
                       for batch in _batches(remaining, jobs)}
            waiting = set(batches)
            while waiting:
                done, waiting = wait(waiting, timeout=progress.interval_s, return_when=FIRST_COMPLETED)
                for future in done:
                    for index, outcome in zip(batches[future], future.result()):
                        outcomes[index] = outcome
                        progress.advance(outcome)
                progress.refresh()
    progress.finish()
    return [outcome for outcome in outcomes if outcome is not None]


def _batches(indexes: list[int], jobs: int) -> list[list[int]]:
    """Consecutive runs of files (sorted paths: a folder's files together), at least four per worker."""
    size = max(1, min(MAX_BATCH, len(indexes) // (jobs * 4)))
    return [indexes[start:start + size] for start in range(0, len(indexes), size)]


def _run_batch(tasks: list[_Task], cache: ResultCache | None) -> list[_Outcome]:
    """A worker's share: files checked one after another in this process.

    Python's cyclic garbage collector runs once after each file instead of during it: when it
    came back after a file's analysis (engine.collector_paused) while the trees were still alive,
    its passes walked all of them (13% of the CPU time of a run over litgpt). After a file, a
    young-generation pass costs only what survived it (the outcome, the workspace's parsed
    imports) and frees the file's cyclic garbage; long-lived survivors are never walked again (no
    full pass), which a run of separate files can afford."""
    outcomes = []
    with collector_paused():
        for task in tasks:
            outcomes.append(_run_task(task, cache))
            gc.collect(1)
    return outcomes


def _worker_context() -> multiprocessing.context.BaseContext | None:
    """Workers forked from this process start with trainlint imported and cost milliseconds to
    start; spawned ones import it again (about 0.3 s of CPU each). Python 3.14 no longer forks by
    default on Linux, so ask for it where it is safe (Linux; macOS frameworks break after fork)."""
    if sys.platform.startswith("linux"):
        return multiprocessing.get_context("fork")
    return None


def _cached_outcome(task: _Task, cache: ResultCache) -> _Outcome | None:
    """The outcome kept for the file as it is now, None when it must be checked."""
    if task.fingerprint is None:
        return None
    try:
        data = read_bounded(task.path, limit_for(task.path))
    except UnreadableFile:
        return None
    findings = cache.load(ResultCache.key(task.fingerprint, data), _workspace(task.roots), task.path)
    if findings is None or (task.fix and any(applicable(finding, task.unsafe) for finding in findings)):
        return None
    return _unfixed_outcome(task, data, findings)


def _validated(
    flag: str, tokens: list[str] | None, *, allow_engine_codes: bool, rules: Sequence[type[Rule]] | None = None,
) -> list[str] | None:
    """The tokens, checked against ``rules``; without them (before any configuration has loaded its
    plugins), only what no plugin can change (``check_before_plugins``)."""
    for token in tokens or ():
        try:
            if rules is None:
                check_before_plugins(token, allow_engine_codes=allow_engine_codes)
            else:
                rule_codes(token, allow_engine_codes=allow_engine_codes, rules=rules)
        except ValueError as error:
            raise UsageError(f"argument {flag}: {error}", CHECK_PROG) from None
    return tokens


@dataclass(frozen=True)
class _Options:
    """One configuration and the command line merged: a flag replaces the config's value for its key."""

    config: Config
    overrides: Overrides  # the command line's flags
    settings: AnalysisSettings  # any file's (``resolve_settings`` without a path)
    always_ignored: frozenset[str]  # engine codes named in ignore, dropped after analysis
    exclusions: Exclusions
    fail_on: Severity

    def ignored_for(self, path: str) -> frozenset[str]:
        """The codes dropped after analysis for one file: ``always_ignored`` and its per-file-ignores."""
        return resolve_settings(self.config, self.overrides, Path(path)).dropped


class _Settings:
    """The options for each file: its nearest configuration (or --config's, for every file)
    under the command line's flags."""

    def __init__(self, args: argparse.Namespace) -> None:
        self._args = args
        self._select = _validated("--select", args.select, allow_engine_codes=False)
        self._extend_select = _validated("--extend-select", args.extend_select, allow_engine_codes=False) or []
        self._ignore = _validated("--ignore", args.ignore, allow_engine_codes=True)
        for flag, globs in (("--exclude", args.exclude), ("--extend-exclude", args.extend_exclude)):
            try:
                glob_spec(globs or ())
            except BadGlob as error:
                raise UsageError(f"argument {flag}: {error}", CHECK_PROG) from None
        if args.target_gpu is not None:
            problem = target_gpu_problem(args.target_gpu)
            if problem:
                raise UsageError(f"argument --target-gpu: {problem}", CHECK_PROG)
        self._explicit = load_config(Path(args.config)) if args.config else Config(root=Path.cwd()) if args.isolated else None
        self._finder = ConfigFinder()
        self._options: dict[int, _Options] = {}

    def for_path(self, path: Path) -> _Options:
        return self._merged(self._explicit or self._finder.for_path(path))

    def for_folder(self, folder: Path) -> _Options:
        return self._merged(self._explicit or self._finder.for_folder(folder))

    def all(self) -> list[_Options]:
        """Every set of options handed out so far."""
        return list(self._options.values())

    def _merged(self, config: Config) -> _Options:
        options = self._options.get(id(config))
        if options is None:
            options = self._options[id(config)] = self._merge(config)
        return options

    def _merge(self, config: Config) -> _Options:
        args = self._args
        rules: list[type[Rule]] | None = rules_for(config.plugins)  # the command line's selectors may name the plugins' codes
        if config.plugins and not local_plugins_allowed():
            rules = None  # the plugins' codes are unknown, not wrong: check only what no plugin can change
        for flag, tokens in (("--select", self._select), ("--extend-select", self._extend_select), ("--ignore", self._ignore)):
            _validated(flag, tokens, allow_engine_codes=flag == "--ignore", rules=rules)
        overrides = Overrides(
            select=tuple(self._select) if self._select is not None else None,
            extend_select=tuple(self._extend_select),
            ignore=tuple(self._ignore) if self._ignore is not None else None,
            target_gpu=args.target_gpu,
            report_unused_ignores=args.report_unused_ignores,
        )
        resolved = resolve_settings(config, overrides, None)
        return _Options(
            config=config,
            overrides=overrides,
            settings=resolved.analysis,
            always_ignored=resolved.dropped,
            exclusions=Exclusions(
                (*(args.exclude if args.exclude is not None else config.exclude), *(args.extend_exclude or ())), config.root,
            ),
            fail_on=Severity.parse(args.fail_on) if args.fail_on else config.fail_on,
        )


class _NearestExclusions:
    """Each path excluded by the configuration of the folder that holds it."""

    def __init__(self, settings: _Settings) -> None:
        self._settings = settings

    def excludes(self, path: Path, *, is_dir: bool) -> bool:
        return self._settings.for_folder(path.parent).exclusions.excludes(path, is_dir=is_dir)


def _check(args: argparse.Namespace) -> int:
    reading_stdin = STDIN in args.paths
    if reading_stdin and len(args.paths) > 1:
        raise UsageError(f"'{STDIN}' (read standard input) cannot be combined with other paths", CHECK_PROG)
    if args.stdin_filename and not reading_stdin:
        raise UsageError(f"argument --stdin-filename: needs '{STDIN}' as the path", CHECK_PROG)
    if args.statistics and args.format not in ("terminal", "json"):
        raise UsageError("argument --statistics: works with --format terminal or json", CHECK_PROG)
    if not reading_stdin:
        for given in args.paths:
            _check_path(given)
    settings = _Settings(args)
    fixing = args.fix or args.diff
    if (args.unsafe_fixes or args.show_fixes) and not fixing:
        raise UsageError(f"argument {'--unsafe-fixes' if args.unsafe_fixes else '--show-fixes'}: needs --fix or --diff", CHECK_PROG)
    unsafe = args.unsafe_fixes
    writable = WriteRoots.given(() if reading_stdin else args.paths)  # where --fix may write

    if reading_stdin:
        name = args.stdin_filename or STDIN
        options = settings.for_path(Path(name)) if args.stdin_filename else settings.for_folder(Path.cwd())
        ignored = options.ignored_for(name) if args.stdin_filename else options.always_ignored
        roots = (str(options.config.root),)
        data = sys.stdin.buffer.read()
        tasks = [_Task(name, options.settings, ignored, fixing, options.fail_on, unsafe, data=data, roots=roots)]
        cache = None
    else:
        files = discover_files(args.paths, _NearestExclusions(settings))
        if not files:  # a mistyped folder, or everything excluded: "All checks passed" alone would mislead
            print(f"trainlint: warning: no Python files found under {', '.join(args.paths)}", file=sys.stderr)
        if args.show_files:
            _emit(args, "".join(f"{visible(_printable(path))}\n" for path in files), sys.stdout)
            return 0
        folders = [given for given in args.paths if os.path.isdir(given)]
        cache = None if args.show_settings else _open_cache(args, settings)
        tasks = []
        for path in files:
            options = settings.for_path(Path(path))
            ignored = options.ignored_for(path)
            roots = tuple(dict.fromkeys([*folders, str(options.config.root)]))
            fingerprint = _fingerprint(path, options.settings, ignored, roots) if cache is not None else None
            fixes = fixing and _may_write(path, writable)
            tasks.append(_Task(path, options.settings, ignored, fixes, options.fail_on, unsafe, roots=roots,
                               fingerprint=fingerprint, patch_name=_patch_path(path) if args.diff else ""))
    if args.show_settings:
        shown = tasks[0].path if tasks else args.paths[0]
        _emit(args, _settings_text(shown, settings.for_path(Path(shown))), sys.stdout)
        return 0
    _warn_about_idle_tl601(settings.all())
    outcomes = _run_all(tasks, args.jobs, cache, _Progress(sys.stderr if _shows_progress(args) else None, len(tasks)))
    if cache is not None:
        cache.prune()
    _warn_about_plugins([*take_problems(), *(problem for outcome in outcomes for problem in outcome.plugin_problems)])
    for outcome in outcomes:
        if outcome.fix_rejected:
            _tell(f"trainlint: warning: some fixes for {outcome.path} were not applied: the result would not parse")
    if args.show_fixes:
        _print_applied_fixes(outcomes, "Would apply" if args.diff else "Applied")
    if args.diff:
        status = _report_diff(args, outcomes)
        return 0 if args.exit_zero else status

    write_failed = False
    if args.fix and reading_stdin:
        sys.stdout.buffer.write(outcomes[0].fixed if outcomes[0].fixed is not None else tasks[0].data or b"")
        sys.stdout.flush()
    elif args.fix:
        remove_stale_temporaries([task.path for task in tasks], writable)
        write_failed = not _write_fixes(outcomes, writable)

    report = Report(
        findings=[_printable_finding(finding) for outcome in outcomes for finding in outcome.findings],
        files=len(outcomes),
        sources={_printable(outcome.path): outcome.text for outcome in outcomes if outcome.text is not None},
        cells={_printable(outcome.path): outcome.cells for outcome in outcomes if outcome.cells and outcome.findings},
        fixed=sum(outcome.fix_count for outcome in outcomes if outcome.fixed is not None),
        unsafe_fixes=unsafe,
    )
    # With --fix on stdin, stdout carries the fixed source, so the report goes to stderr.
    stream = sys.stderr if args.fix and reading_stdin else sys.stdout
    _emit(args, _render(args, report, stream), stream)
    if write_failed:
        return 2
    failing = any(
        finding.severity >= task.fail_on for task, outcome in zip(tasks, outcomes) for finding in outcome.findings
    )
    return 1 if failing and not args.exit_zero else 0


def _open_cache(args: argparse.Namespace, settings: _Settings) -> ResultCache | None:
    """The results cache this run uses: --cache-dir, $TRAINLINT_CACHE_DIR, the working folder's
    configuration's cache-dir, else .trainlint_cache in that configuration's folder (the project's
    root), which must stay inside that folder. None with --no-cache, or (after one warning) when the
    folder cannot be written or is not the cache's to use."""
    if args.no_cache:
        return None
    config = settings.for_folder(Path.cwd()).config
    chosen = args.cache_dir or os.environ.get(CACHE_ENVIRONMENT_VARIABLE)
    try:
        if chosen:
            return ResultCache.open(Path(chosen))
        # The project chose this folder (its configuration, or a .trainlint_cache it may commit as a link).
        return ResultCache.open(config.cache_dir or config.root / CACHE_FOLDER_NAME, project=config.root)
    except CacheUnavailable as error:
        _tell(f"trainlint: warning: {error}; checking without a cache")
        return None


def _fingerprint(path: str, settings: AnalysisSettings, ignored: frozenset[str], roots: tuple[str, ...]) -> bytes | None:
    """Everything but its bytes that a file's findings depend on, for its cache key; None when
    they depend on more than the cache can tell: TL601 with a target GPU reads model configs
    (a model folder's config.json, the Hugging Face cache) that no entry records."""
    if settings.target_gpu and _selects_projected_oom(settings.select, settings.ignore):
        return None
    strict = bool(os.environ.get(STRICT_ENV))  # rules raise instead of reporting
    paths = [os.fsencode(name) for name in (path, os.path.abspath(path), *roots)]  # bytes: any file name
    plugins = plugin_fingerprint(settings.plugins) if settings.plugins else b""  # a plugin edited: checked again
    return msgspec.msgpack.encode([paths, settings, sorted(ignored), strict, plugins])


@functools.lru_cache(maxsize=64)
def _selects_projected_oom(select: tuple[str, ...], ignore: tuple[str, ...]) -> bool:
    """Whether TL601 is among the rules chosen (a file's settings are few, its files many)."""
    chosen = select_rules(AnalysisSettings(select=select, ignore=ignore))
    return any(rule.code == PROJECTED_OOM for rule in chosen)


def _shows_progress(args: argparse.Namespace) -> bool:
    """A progress line only for a person watching a terminal: not on a pipe or in a file, not in CI,
    not for the machine formats, not with --quiet."""
    if args.format != "terminal" or args.quiet or os.environ.get("CI"):
        return False
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):  # a replaced or closed stream
        return False


class _Progress:
    """One line on stderr while a long run goes: files done of all, findings so far, time taken.
    Rewritten in place (a carriage return, no escape sequences) and wiped at the end."""

    delay_s = 2.0  # a run that ends sooner shows nothing
    interval_s = 0.25  # at most this often

    def __init__(self, stream: TextIO | None, total: int) -> None:
        self._stream = stream
        self._total = total
        self._done = 0
        self._findings = 0
        self._start = time.monotonic()
        self._drawn_at = float("-inf")
        self._line = ""  # on screen
        self._width = 0  # of the longest line drawn since the last wipe

    def advance(self, outcome: _Outcome) -> None:
        self._done += 1
        self._findings += len(outcome.findings)
        self.refresh()

    def refresh(self) -> None:
        now = time.monotonic()
        if self._stream is None or now - self._start < self.delay_s or now - self._drawn_at < self.interval_s:
            return
        self._drawn_at = now
        findings = f"{self._findings:,} finding{'s' * (self._findings != 1)}"
        line = f"Checked {self._done:,}/{self._total:,} files, {findings} so far ({now - self._start:.0f} s)"
        if line != self._line:  # a slow terminal or a log of the session gets only what changed
            self._write("\r" + line.ljust(self._width))
            self._line = line
            self._width = max(self._width, len(line))

    def finish(self) -> None:
        if self._width:
            self._write("\r" + " " * self._width + "\r")
            self._line, self._width = "", 0

    def _write(self, text: str) -> None:
        if self._stream is None:  # gone since an earlier write failed: finish() has nothing to wipe
            return
        try:
            self._stream.write(text)
            self._stream.flush()
        except (OSError, ValueError):  # the terminal went away: the report still goes to stdout
            self._stream = None


def _tell(message: str) -> None:
    """A line for the person at the terminal, on stderr: what it quotes of file names, the
    configuration or the code never reaches the terminal as a control character."""
    print(visible(message), file=sys.stderr)


def _printable(path: str) -> str:
    """A path as text every output can carry: bytes of a file name that are not UTF-8 (which the
    OS hands over as surrogate escapes, and no UTF-8 encoder accepts) are shown as U+FFFD."""
    return path.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def _printable_finding(finding: Finding) -> Finding:
    if _printable(finding.path) == finding.path and all(item.path is None or _printable(item.path) == item.path for item in finding.evidence):
        return finding
    evidence = tuple(msgspec.structs.replace(item, path=_printable(item.path)) if item.path else item for item in finding.evidence)
    return msgspec.structs.replace(finding, path=_printable(finding.path), evidence=evidence)


def _check_path(given: str) -> None:
    """A path named on the command line must exist; a link loop or a dangling link is told as such."""
    if os.path.exists(given):
        return
    if os.path.lexists(given):
        try:
            os.stat(given)
        except OSError as error:
            raise MissingPathError(given, error.strerror or str(error)) from None
    raise MissingPathError(given)


def _warn_about_plugins(problems: Sequence[PluginProblem]) -> None:
    """Each plugin problem once (every worker may have met it): the other rules' findings stand."""
    for problem in dict.fromkeys(problems):
        _tell(f"trainlint: warning: {problem}")


def _warn_about_idle_tl601(options: list[_Options]) -> None:
    """TL601 is silent without a target GPU: say so when someone asks for it by name."""
    for option in options:
        settings = option.settings
        if settings.select and not settings.target_gpu and PROJECTED_OOM in _selected_codes(settings.select):
            print(f"trainlint: warning: {PROJECTED_OOM} projected-oom is selected but checks nothing without a "
                  "target GPU (--target-gpu, or target-gpu in the configuration)", file=sys.stderr)
            return


def _selected_codes(tokens: Sequence[str]) -> set[str]:
    codes: set[str] = set()
    for token in tokens:
        with contextlib.suppress(ValueError):  # a code of a plugin that was not loaded
            codes.update(rule_codes(token))
    return codes


def _settings_text(path: str, options: _Options) -> str:
    """What --show-settings prints: where the settings for ``path`` come from and what they are."""
    config, settings = options.config, options.settings
    source = display_path(config.source) if config.source else "none found: built-in defaults"
    rules = [rule.code for rule in select_rules(settings)]
    dropped = sorted(options.ignored_for(path))

    def toml(value: object) -> str:
        """As a TOML value; a string's control characters escaped and a file name's bytes that
        are not UTF-8 shown as U+FFFD (TOML is UTF-8)."""
        if isinstance(value, str):
            value = _printable(value)
        elif isinstance(value, list):
            value = [_printable(item) if isinstance(item, str) else item for item in value]
        return msgspec.json.encode(value).decode("utf-8")

    lines = [
        f"# settings for {visible(_printable(path))}",
        f"configuration = {toml(source)}",
        f"root = {toml(str(config.root))}",
        f"select = {toml(list(settings.select))}",
        f"ignore = {toml(list(settings.ignore) + sorted(options.always_ignored))}",
        f"exclude = {toml(list(options.exclusions.patterns))}",
        f"fail-on = {toml(options.fail_on.label)}",
        f"target-gpu = {toml(settings.target_gpu or '')}",
        f"severity = {{{', '.join(f'{code} = {toml(level.label)}' for code, level in sorted(settings.severity.items()))}}}",
        f"per-file-ignores = {toml(dropped)}  # dropped for this file",
        f"rules = {toml(rules)}  # what runs on this file",
    ]
    return "\n".join(lines) + "\n"


def _may_write(path: str, writable: WriteRoots) -> bool:
    """Whether --fix may write the file at ``path``: where it really is lies inside the paths given on
    the command line. A link to a file outside them is checked, not fixed, and told on stderr."""
    real = os.path.realpath(path)
    if writable.start(real) is not None:
        return True
    print(f"trainlint: warning: not fixing {_printable(path)}: it resolves to {_printable(real)}, outside the paths "
          "given on the command line", file=sys.stderr)
    return False


def _write_fixes(outcomes: list[_Outcome], writable: WriteRoots) -> bool:
    """Write every fixed file; False when one could not be written (each is told on stderr)."""
    all_written = True
    for outcome in outcomes:
        if outcome.fixed is None:
            continue
        try:
            replace_file(outcome.path, outcome.fixed, writable)
        except OutsideWriteRoots as error:  # it, or a folder on its way, became a link after it was read
            print(f"trainlint: error: cannot write {_printable(outcome.path)}: it now resolves to {_printable(error.real)}, "
                  "outside the paths given on the command line; the file is unchanged", file=sys.stderr)
            all_written = False
        except OSError as error:
            _tell(f"trainlint: error: cannot write {outcome.path}: {error.strerror or error}; the file is unchanged")
            all_written = False
    return all_written


def _render(args: argparse.Namespace, report: Report, stream: TextIO) -> str:
    if args.statistics:
        return render_statistics_json(report) if args.format == "json" else render_statistics(report, quiet=args.quiet)
    if args.format == "json":
        return render_json(report)
    if args.format == "github":
        return render_github(report, root=repository_root(Path.cwd()))
    if args.format == "sarif":
        return render_sarif(report, all_rules(), root=repository_root(Path.cwd()))
    colour = wants_colour(stream, args.color) if args.output is None or args.color == "always" else False
    return render_terminal(report, colour=colour, quiet=args.quiet)


def _emit(args: argparse.Namespace, text: str, stream: TextIO) -> None:
    if args.output is None:
        stream.write(text)
        stream.flush()
        return
    try:
        Path(args.output).write_text(text, encoding="utf-8")
    except OSError as error:
        problem = f"argument --output: cannot write {args.output}: {error.strerror or error}"
        raise UsageError(problem, CHECK_PROG) from None


def _print_applied_fixes(outcomes: list[_Outcome], verb: str) -> None:
    """--show-fixes: one line per fix, safe or unsafe, on stderr (stdout carries the diff or the report)."""
    applied = [finding for outcome in outcomes for finding in outcome.applied]
    if not applied:
        print("No fixes applied." if verb == "Applied" else "No fixes to apply.", file=sys.stderr)
        return
    print(f"{verb} {len(applied)} fix{'es' * (len(applied) != 1)}:", file=sys.stderr)
    for finding in applied:
        assert finding.fix is not None
        where = f"cell {finding.cell}:{finding.cell_line}" if finding.cell is not None else f"{finding.line}"
        safety = "safe" if finding.fix.safe else "unsafe"
        _tell(f"  {_printable(finding.path)}:{where} {finding.code} ({safety}): {finding.fix.description}")


def _patch_path(path: str) -> str:
    """What a diff calls a file, so that `git apply` in the working folder takes it: the path from
    the working folder when the file is under it (git refuses `..` and absolute paths), else from the
    top of its repository (apply it there), else the absolute path."""
    absolute = Path(os.path.abspath(path))
    relative = os.path.relpath(absolute, Path.cwd())
    if relative != os.pardir and not relative.startswith(os.pardir + os.sep):
        return Path(relative).as_posix()
    top = repository_top(absolute.parent)
    return absolute.relative_to(top).as_posix() if top is not None else absolute.as_posix()


def _outside_top(path: str) -> str | None:
    """For a file outside the working folder, the folder its diff path starts from ("/" outside any repository)."""
    absolute = Path(os.path.abspath(path))
    if not os.path.relpath(absolute).startswith(os.pardir + os.sep):
        return None
    top = repository_top(absolute.parent)
    return str(top) if top is not None else "/"


def _report_diff(args: argparse.Namespace, outcomes: list[_Outcome]) -> int:
    changed = [outcome for outcome in outcomes if outcome.diff]
    _emit(args, "".join(outcome.diff for outcome in changed), sys.stdout)
    for top in sorted({top for outcome in changed if (top := _outside_top(outcome.path)) is not None}):
        where = f"from {_printable(top)}: apply it there (`git -C {_printable(top)} apply`)" if top != "/" else \
            "by their absolute paths (`patch -p1` applies it)"
        print(f"trainlint: note: the diff names files outside the working folder {where}", file=sys.stderr)
    if not args.quiet:
        fixes = sum(outcome.fix_count for outcome in changed)
        files = len(changed)
        message = (
            f"Would fix {fixes} problem{'s' * (fixes != 1)} in {files} file{'s' * (files != 1)}."
            if changed else "No fixes to apply."
        )
        print(message, file=sys.stderr)
    return 1 if changed else 0


# ---------------------------------------------------------------------------- rules, explain


def _load_local_plugins() -> None:
    """`rules` and `explain` show the plugins the configuration of the current folder names."""
    try:
        config = ConfigFinder().for_folder(Path.cwd())
    except ConfigError as error:
        _tell(f"trainlint: warning: configuration ignored: {error}")
        return
    rules_for(config.plugins)
    _warn_about_plugins(take_problems())


def _rules(args: argparse.Namespace) -> int:
    _load_local_plugins()
    rules = all_rules()
    if args.format == "json":
        entries = [
            {
                "code": rule.code,
                "name": rule.name,
                "severity": rule.severity.label,
                "fixable": rule.fixable,
                "summary": rule.summary(),
                "help_uri": rule.help_uri(),  # None: a plugin rule without a `help_url`
            }
            for rule in rules
        ]
        sys.stdout.write(msgspec.json.format(msgspec.json.encode(entries), indent=2).decode("utf-8") + "\n")
        return 0
    header = ("CODE", "NAME", "SEVERITY", "FIXABLE", "SUMMARY")
    rows = [
        (rule.code, rule.name, rule.severity.label, "yes" if rule.fixable else "no", visible(rule.summary()))
        for rule in rules
    ]
    widths = [max(len(row[column]) for row in [header, *rows]) for column in range(len(header) - 1)]
    for row in [header, *rows]:
        cells = [cell.ljust(width) for cell, width in zip(row, widths)]
        sys.stdout.write("  ".join([*cells, row[-1]]).rstrip() + "\n")
    return 0


def _test_rule(args: argparse.Namespace) -> int:
    """Exit 0 when every example of every rule holds, 1 when one fails, 2 when a plugin cannot be loaded."""
    from trainlint.rule_examples import example_failures

    status = 0
    for given in args.plugins:
        spec = os.path.abspath(given) if is_plugin_path(given) else given
        rules = load_plugin(spec)
        problems = take_problems()
        for problem in problems:
            _tell(f"trainlint: error: {problem}")
        if problems or not rules:
            status = 2
            continue
        for rule in rules:
            failures = example_failures(rule)
            examples = len(rule.MUST_FIRE) + len(rule.MUST_NOT_FIRE)
            verdict = "FAIL" if failures else "PASS"
            print(visible(f"{verdict} {rule.code} {rule.name}: {examples - len(failures)} of {examples} examples hold"))
            for failure in failures:
                print(textwrap.indent(visible_lines(f"{failure.kind}[{failure.index}]: {failure.message}"), "    "))
            if failures:
                status = max(status, 1)
            if not rule.MUST_FIRE or not rule.MUST_NOT_FIRE:
                print(f"    warning: {rule.code} has no {'MUST_FIRE' if not rule.MUST_FIRE else 'MUST_NOT_FIRE'} examples")
    return status


def _explain(args: argparse.Namespace) -> int:
    _load_local_plugins()
    try:
        codes = rule_codes(args.rule, allow_engine_codes=True)
    except ValueError as error:
        raise UsageError(str(error), "trainlint explain") from None
    by_code: dict[str, type[Rule]] = {rule.code: rule for rule in all_rules()}
    texts = [_explanation(by_code[code]) if code in by_code else _engine_explanation(code) for code in codes]
    sys.stdout.write(visible_lines("\n\n".join(texts)) + "\n")
    return 0


def _engine_explanation(code: str) -> str:
    engine = ENGINE_CODES[code]
    return f"{code} {engine.name} (reported by trainlint itself, severity: {engine.severity.label})\n\n{engine.explanation}"


def _explanation(rule: type[Rule]) -> str:
    fixable = ", fixable with --fix" if rule.fixable else ""
    heading = f"{rule.code} {rule.name} (default severity: {rule.severity.label}{fixable})"
    more = rule.help_uri()
    return f"{heading}\n\n{rule.explain()}" + (f"\n\nMore: {more}" if more else "")
