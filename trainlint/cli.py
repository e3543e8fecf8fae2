"""The ``trainlint`` command: check, rules, explain.

Exit codes: 0 nothing at or above ``fail-on``; 1 findings at or above it (or, with --diff, a
diff); 2 a usage or configuration problem, told in one line on stderr.
"""

from __future__ import annotations

import argparse
import os
import sys
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn, Sequence, TextIO

import msgspec

import trainlint
from trainlint.analysis.engine import SYNTAX_ERROR, DecodeError, analyze_source
from trainlint.analysis.workspace import Workspace
from trainlint import estimate_cli
from trainlint.notebooks import Notebook, NotebookError
from trainlint.analysis.model import Finding, Severity
from trainlint.analysis.registry import all_rules
from trainlint.analysis.rules.base import Rule
from trainlint.analysis.settings import AnalysisSettings
from trainlint.config import (
    Config,
    ConfigError,
    discover_config,
    engine_codes_in,
    load_config,
    rule_codes,
    without_engine_codes,
)
from trainlint.discovery import Exclusions, MissingPathError, discover_files
from trainlint.fixing import SourceFile, fix_until_stable, unified_diff
from trainlint.output import Report
from trainlint.output.github import render_github
from trainlint.output.json_format import render_json
from trainlint.output.sarif import render_sarif
from trainlint.output.terminal import render_terminal, wants_colour

FORMATS = ("terminal", "json", "github", "sarif")
SEVERITIES = ("error", "warning", "note")
STDIN = "-"
CHECK_PROG = "trainlint check"
# Below this many files a process pool costs more to start than it saves.
PARALLEL_THRESHOLD = 8
MAX_DEFAULT_JOBS = 8


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
    parser.add_argument("--version", action="version", version=f"trainlint {trainlint.__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    check = commands.add_parser("check", help="check Python files for training bugs")
    check.add_argument("paths", nargs="*", default=["."], metavar="PATH", help="files or folders ('-' reads stdin)")
    check.add_argument("--format", choices=FORMATS, default="terminal")
    check.add_argument("--output", metavar="FILE", help="write the report to FILE instead of stdout")
    fixing = check.add_mutually_exclusive_group()
    fixing.add_argument("--fix", action="store_true", help="apply fixes to the files, then report what remains")
    fixing.add_argument("--diff", action="store_true", help="print the fixes as a diff without writing them")
    check.add_argument("--select", type=_comma_list, action="extend", metavar="RULES",
                       help="only these codes, prefixes or names (replaces the config's select)")
    check.add_argument("--ignore", type=_comma_list, action="extend", metavar="RULES",
                       help="skip these codes, prefixes or names (replaces the config's ignore)")
    check.add_argument("--fail-on", choices=SEVERITIES, help="lowest severity that fails the run (default: error)")
    check.add_argument("--exclude", type=_comma_list, action="extend", metavar="GLOBS",
                       help="gitignore-style globs to skip, relative to the config file's folder "
                            "(replaces the config's exclude)")
    check.add_argument("--config", metavar="FILE", help="read settings from FILE instead of searching for one")
    check.add_argument("--jobs", type=_positive_int, metavar="N", help="files checked in parallel")
    check.add_argument("--target-gpu", metavar="NAME", help="GPU that memory estimates are checked against")
    check.add_argument("--report-unused-ignores", action="store_true", help="report suppressions that hide nothing")
    check.add_argument("--quiet", "-q", action="store_true", help="print findings only, no summary")
    check.add_argument("--stdin-filename", metavar="NAME", help="name to report for code read from stdin ('-')")

    rules = commands.add_parser("rules", help="list every rule")
    rules.add_argument("--format", choices=("text", "json"), default="text")

    explain = commands.add_parser("explain", help="show a rule's documentation")
    explain.add_argument("rule", metavar="RULE", help="code (TL101) or name (retained-graph)")

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
        args = parser.parse_args(argv)
        if args.command == "check":
            return _check(args)
        if args.command == "rules":
            return _rules(args)
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
        print(f"{prog}: error: {error}", file=sys.stderr)
        return 2


# ---------------------------------------------------------------------------- check


@dataclass(frozen=True)
class _Task:
    path: str  # as shown to the user and reported by the engine
    settings: AnalysisSettings
    ignored: frozenset[str]  # codes dropped after analysis (per-file-ignores, engine codes)
    fix: bool
    data: bytes | None = None  # stdin's content; None: read the file at path
    roots: tuple[str, ...] = ()  # where imports of the user's own files are looked for


@dataclass(frozen=True)
class _Outcome:
    path: str
    findings: list[Finding]
    text: str | None  # decoded source, kept only when there are findings to show it for
    fixed: bytes | None = None  # the file after fixes, when fixing changed it
    diff: str = ""  # the same change as a unified diff
    fix_count: int = 0
    fix_rejected: bool = False


def _run_task(task: _Task) -> _Outcome:
    data = task.data
    if data is None:
        try:
            data = Path(task.path).read_bytes()
        except OSError as error:
            return _Outcome(task.path, [_unreadable(task.path, error)], None)

    workspace = _workspace(task.roots)

    def analyze(source: str | bytes) -> list[Finding]:
        return [f for f in analyze_source(source, task.path, task.settings, workspace=workspace) if f.code not in task.ignored]

    if task.path.endswith(".ipynb"):
        return _run_notebook(task, data, analyze)

    findings = analyze(data)
    try:
        source = SourceFile.decode(data)
    except DecodeError:  # reported by the analysis as TL000
        return _Outcome(task.path, findings, None)
    if not task.fix or not any(finding.fix is not None for finding in findings):
        return _Outcome(task.path, findings, source.text if findings else None)
    outcome = fix_until_stable(source.text, analyze, findings=findings)
    changed = outcome.text != source.text
    return _Outcome(
        task.path,
        outcome.findings,
        outcome.text if outcome.findings else None,
        fixed=source.encode(outcome.text) if changed else None,
        diff=unified_diff(source.text, outcome.text, task.path) if changed else "",
        fix_count=outcome.applied,
        fix_rejected=outcome.rejected,
    )


_WORKSPACES: dict[tuple[str, ...], Workspace] = {}


def _workspace(roots: tuple[str, ...]) -> Workspace:
    """One per set of roots in each process, so every file of a run shares the parsed imports."""
    workspace = _WORKSPACES.get(roots)
    if workspace is None:
        workspace = _WORKSPACES[roots] = Workspace([Path(root) for root in roots])
    return workspace


def _run_notebook(task: _Task, data: bytes, analyze) -> _Outcome:
    """A notebook's code cells as one program; findings placed in cells and in the file; fixes written into the cells."""
    try:
        raw = data.decode("utf-8")
        notebook = Notebook(raw)
    except (UnicodeDecodeError, NotebookError) as error:
        code, name = SYNTAX_ERROR
        return _Outcome(task.path, [Finding(
            path=task.path, line=1, column=1, end_line=1, end_column=2, code=code, name=name,
            severity=Severity.ERROR, message=f"cannot read the notebook: {error}",
        )], None)
    if not notebook.is_python or not notebook.cells:
        return _Outcome(task.path, [], None)
    findings = analyze(notebook.text)
    if not task.fix or not any(finding.fix is not None for finding in findings):
        return _Outcome(task.path, _in_notebook(notebook, findings), raw if findings else None)
    outcome = fix_until_stable(notebook.text, analyze, findings=findings)
    fixed_raw = notebook.with_program(outcome.text)
    changed = fixed_raw != raw
    remaining = _in_notebook(Notebook(fixed_raw), analyze(Notebook(fixed_raw).text)) if changed else _in_notebook(notebook, findings)
    return _Outcome(
        task.path, remaining, fixed_raw if remaining else None,
        fixed=fixed_raw.encode("utf-8") if changed else None,
        diff=unified_diff(raw, fixed_raw, task.path) if changed else "",
        fix_count=outcome.applied, fix_rejected=outcome.rejected,
    )


def _in_notebook(notebook: Notebook, findings: list[Finding]) -> list[Finding]:
    """Program positions to file positions (line, column) and cell positions; the markers' lines never hold findings."""
    placed = []
    for finding in findings:
        cell = notebook.cell_position(finding.line, finding.column)
        line, column = notebook.file_position(finding.line, finding.column)
        end_line, end_column = notebook.file_position(finding.end_line, finding.end_column)
        evidence = tuple(
            msgspec.structs.replace(item, line=notebook.file_position(item.line, 1)[0]) if item.path is None else item
            for item in finding.evidence
        )
        placed.append(msgspec.structs.replace(
            finding, line=line, column=column, end_line=end_line, end_column=end_column, evidence=evidence,
            cell=cell.cell if cell else None, cell_line=cell.line if cell else None, cell_column=cell.column if cell else None,
            # a fix's edits are positions in the joined program: `--fix` applies them; they are not file edits
            fix=msgspec.structs.replace(finding.fix, edits=()) if finding.fix is not None else None,
        ))
    return placed


def _unreadable(path: str, error: OSError) -> Finding:
    code, name = SYNTAX_ERROR
    return Finding(
        path=path, line=1, column=1, end_line=1, end_column=2, code=code, name=name,
        severity=Severity.ERROR, message=f"cannot read the file: {error.strerror or error}",
    )


def _default_jobs(file_count: int) -> int:
    return 1 if file_count < PARALLEL_THRESHOLD else min(os.cpu_count() or 1, MAX_DEFAULT_JOBS)


def _run_all(tasks: list[_Task], jobs: int | None) -> list[_Outcome]:
    jobs = min(jobs or _default_jobs(len(tasks)), len(tasks))
    if jobs <= 1:
        return [_run_task(task) for task in tasks]
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        # map keeps the order of tasks, so output does not depend on which worker finished first
        return list(pool.map(_run_task, tasks, chunksize=max(1, len(tasks) // (jobs * 4))))


def _validated(flag: str, tokens: list[str] | None, *, allow_engine_codes: bool) -> list[str] | None:
    for token in tokens or ():
        try:
            rule_codes(token, allow_engine_codes=allow_engine_codes)
        except ValueError as error:
            raise UsageError(f"argument {flag}: {error}", CHECK_PROG) from None
    return tokens


@dataclass(frozen=True)
class _Options:
    """Config and command line merged: a flag replaces the config's value for its key."""

    settings: AnalysisSettings
    always_ignored: frozenset[str]  # engine codes named in ignore, dropped after analysis
    exclude: tuple[str, ...]
    fail_on: Severity


def _options(args: argparse.Namespace, config: Config) -> _Options:
    select = _validated("--select", args.select, allow_engine_codes=False)
    ignore = _validated("--ignore", args.ignore, allow_engine_codes=True)
    select = tuple(select if select is not None else config.select)
    ignore = tuple(ignore if ignore is not None else config.ignore)
    settings = AnalysisSettings(
        select=select,
        ignore=without_engine_codes(ignore),
        severity=config.severity,
        target_gpu=args.target_gpu or config.target_gpu,
        report_unused_ignores=args.report_unused_ignores,
    )
    return _Options(
        settings=settings,
        always_ignored=engine_codes_in(ignore),
        exclude=tuple(args.exclude if args.exclude is not None else config.exclude),
        fail_on=Severity.parse(args.fail_on) if args.fail_on else config.fail_on,
    )


def _check(args: argparse.Namespace) -> int:
    reading_stdin = STDIN in args.paths
    if reading_stdin and len(args.paths) > 1:
        raise UsageError(f"'{STDIN}' (read standard input) cannot be combined with other paths", CHECK_PROG)
    if args.stdin_filename and not reading_stdin:
        raise UsageError(f"argument --stdin-filename: needs '{STDIN}' as the path", CHECK_PROG)
    if reading_stdin:
        anchors = [Path(args.stdin_filename)] if args.stdin_filename else []
    else:
        for given in args.paths:
            if not os.path.exists(given):
                raise MissingPathError(given)
        anchors = [Path(given) for given in args.paths]
    config = load_config(Path(args.config)) if args.config else discover_config(anchors)
    options = _options(args, config)
    fixing = args.fix or args.diff

    if reading_stdin:
        name = args.stdin_filename or STDIN
        ignored = options.always_ignored
        if args.stdin_filename:
            ignored |= config.per_file_ignores.codes_for(Path(name))
        roots = (str(config.root),)
        tasks = [_Task(name, options.settings, ignored, fixing, data=sys.stdin.buffer.read(), roots=roots)]
    else:
        files = discover_files(args.paths, Exclusions(options.exclude, config.root))
        roots = tuple(dict.fromkeys([*(given for given in args.paths if os.path.isdir(given)), str(config.root)]))
        tasks = []
        for path in files:
            ignored = options.always_ignored | config.per_file_ignores.codes_for(Path(path))
            tasks.append(_Task(path, options.settings, ignored, fixing, roots=roots))
    outcomes = _run_all(tasks, args.jobs)
    for outcome in outcomes:
        if outcome.fix_rejected:
            print(f"trainlint: warning: some fixes for {outcome.path} were not applied: "
                  "the result would not parse", file=sys.stderr)
    if args.diff:
        return _report_diff(args, outcomes)

    write_failed = False
    if args.fix and reading_stdin:
        sys.stdout.buffer.write(outcomes[0].fixed if outcomes[0].fixed is not None else tasks[0].data or b"")
        sys.stdout.flush()
    elif args.fix:
        write_failed = not _write_fixes(outcomes)

    findings = [finding for outcome in outcomes for finding in outcome.findings]
    report = Report(
        findings=findings,
        files=len(outcomes),
        sources={outcome.path: outcome.text for outcome in outcomes if outcome.text is not None},
        fixed=sum(outcome.fix_count for outcome in outcomes if outcome.fixed is not None),
    )
    # With --fix on stdin, stdout carries the fixed source, so the report goes to stderr.
    stream = sys.stderr if args.fix and reading_stdin else sys.stdout
    _emit(args, _render(args, report, stream), stream)
    if write_failed:
        return 2
    return 1 if any(finding.severity >= options.fail_on for finding in findings) else 0


def _write_fixes(outcomes: list[_Outcome]) -> bool:
    """Write every fixed file; False when one could not be written (each is told on stderr)."""
    all_written = True
    for outcome in outcomes:
        if outcome.fixed is None:
            continue
        try:
            Path(outcome.path).write_bytes(outcome.fixed)
        except OSError as error:
            print(f"trainlint: error: cannot write {outcome.path}: {error.strerror or error}", file=sys.stderr)
            all_written = False
    return all_written


def _render(args: argparse.Namespace, report: Report, stream: TextIO) -> str:
    if args.format == "json":
        return render_json(report)
    if args.format == "github":
        return render_github(report)
    if args.format == "sarif":
        return render_sarif(report, all_rules())
    colour = args.output is None and wants_colour(stream)
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


def _report_diff(args: argparse.Namespace, outcomes: list[_Outcome]) -> int:
    changed = [outcome for outcome in outcomes if outcome.diff]
    _emit(args, "".join(outcome.diff for outcome in changed), sys.stdout)
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


def _rules(args: argparse.Namespace) -> int:
    rules = all_rules()
    if args.format == "json":
        entries = [
            {
                "code": rule.code,
                "name": rule.name,
                "severity": rule.severity.label,
                "fixable": rule.fixable,
                "summary": rule.summary(),
                "help_uri": rule.help_uri(),
            }
            for rule in rules
        ]
        sys.stdout.write(msgspec.json.format(msgspec.json.encode(entries), indent=2).decode("utf-8") + "\n")
        return 0
    header = ("CODE", "NAME", "SEVERITY", "FIXABLE", "SUMMARY")
    rows = [
        (rule.code, rule.name, rule.severity.label, "yes" if rule.fixable else "no", rule.summary()) for rule in rules
    ]
    widths = [max(len(row[column]) for row in [header, *rows]) for column in range(len(header) - 1)]
    for row in [header, *rows]:
        cells = [cell.ljust(width) for cell, width in zip(row, widths)]
        sys.stdout.write("  ".join([*cells, row[-1]]).rstrip() + "\n")
    return 0


def _explain(args: argparse.Namespace) -> int:
    try:
        codes = rule_codes(args.rule)
    except ValueError as error:
        raise UsageError(str(error), "trainlint explain") from None
    by_code: dict[str, type[Rule]] = {rule.code: rule for rule in all_rules()}
    sys.stdout.write("\n\n".join(_explanation(by_code[code]) for code in codes) + "\n")
    return 0


def _explanation(rule: type[Rule]) -> str:
    fixable = ", fixable with --fix" if rule.fixable else ""
    heading = f"{rule.code} {rule.name} (default severity: {rule.severity.label}{fixable})"
    return f"{heading}\n\n{rule.explain()}\n\nMore: {rule.help_uri()}"
