"""``trainlint check``: the options each file is checked with (its configuration under the command line's
flags), the cache, and what a run reports, fixes or shows as a diff."""

from __future__ import annotations

import argparse
import contextlib
import functools
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

import msgspec

from trainlint.analysis.engine import (
    select_rules,
)
from trainlint.analysis.engine_codes import STRICT_ENV
from trainlint.analysis.files import (
    OutsideWriteRoots,
    WriteRoots,
    remove_stale_temporaries,
    replace_file,
)
from trainlint.analysis.findings import Finding, Severity
from trainlint.analysis.registry import (
    all_rules,
    local_plugins_allowed,
    plugin_fingerprint,
    rules_for,
    take_problems,
)
from trainlint.analysis.rules.base import Rule
from trainlint.analysis.settings import AnalysisSettings
from trainlint.cache import ENVIRONMENT_VARIABLE as CACHE_ENVIRONMENT_VARIABLE
from trainlint.cache import FOLDER_NAME as CACHE_FOLDER_NAME
from trainlint.cache import CacheUnavailable, ResultCache
from trainlint.commands import CHECK_PROG, UsageError, printable, tell, warn_about_plugins
from trainlint.commands.check_files import Outcome, Progress, Task, run_all
from trainlint.config import (
    BadGlob,
    Config,
    check_before_plugins,
    display_path,
    glob_spec,
    load_config,
    rule_codes,
    target_gpu_problem,
)
from trainlint.discovery import Exclusions, MissingPathError, discover_files, repository_top
from trainlint.linter import Linter
from trainlint.output import Report, repository_root, visible
from trainlint.output.github import render_github
from trainlint.output.json_format import render_json
from trainlint.output.sarif import render_sarif
from trainlint.output.statistics import render_statistics, render_statistics_json
from trainlint.output.terminal import render_terminal, wants_colour
from trainlint.settings import Overrides

STDIN = "-"
PROJECTED_OOM = "TL601"


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
    settings: AnalysisSettings  # any file's (without per-file-ignores)
    exclusions: Exclusions
    fail_on: Severity


class _Settings:
    """The options for each file: its nearest configuration (or --config's, for every file)
    under the command line's flags; the run's ``Linter`` finds the configurations and resolves
    each file's settings."""

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
        explicit = load_config(Path(args.config)) if args.config else Config(root=Path.cwd()) if args.isolated else None
        self.linter = Linter(config=explicit)
        self._options: dict[int, _Options] = {}

    def for_path(self, path: Path) -> _Options:
        return self._merged(self.linter.config_for(path))

    def for_folder(self, folder: Path) -> _Options:
        return self._merged(self.linter.config_for_folder(folder))

    def for_file(self, options: _Options, path: str) -> AnalysisSettings:
        """The settings of one file: ``options``' under its per-file-ignores."""
        return self.linter.settings(options.config, options.overrides, Path(path)).analysis

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
        return _Options(
            config=config,
            overrides=overrides,
            settings=self.linter.settings(config, overrides).analysis,
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


def run_check(args: argparse.Namespace) -> int:
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
        analysis = settings.for_file(options, name) if args.stdin_filename else options.settings
        roots = (str(options.config.root),)
        data = sys.stdin.buffer.read()
        tasks = [Task(name, analysis, fixing, options.fail_on, unsafe, data=data, roots=roots)]
        cache = None
    else:
        files = discover_files(args.paths, _NearestExclusions(settings))
        if not files:  # a mistyped folder, or everything excluded: "All checks passed" alone would mislead
            print(f"trainlint: warning: no Python files found under {', '.join(args.paths)}", file=sys.stderr)
        if args.show_files:
            _emit(args, "".join(f"{visible(printable(path))}\n" for path in files), sys.stdout)
            return 0
        folders = [given for given in args.paths if os.path.isdir(given)]
        cache = None if args.show_settings else _open_cache(args, settings)
        tasks = []
        for path in files:
            options = settings.for_path(Path(path))
            analysis = settings.for_file(options, path)
            roots = tuple(dict.fromkeys([*folders, str(options.config.root)]))
            fingerprint = _fingerprint(path, analysis, roots) if cache is not None else None
            fixes = fixing and _may_write(path, writable)
            tasks.append(Task(path, analysis, fixes, options.fail_on, unsafe, roots=roots,
                               fingerprint=fingerprint, patch_name=_patch_path(path) if args.diff else ""))
    if args.show_settings:
        shown = tasks[0].path if tasks else args.paths[0]
        options = settings.for_path(Path(shown))
        _emit(args, _settings_text(shown, options, settings.for_file(options, shown), settings.linter), sys.stdout)
        return 0
    _warn_about_idle_tl601(settings.all())
    progress = Progress(sys.stderr if shows_progress(args) else None, len(tasks))
    outcomes = run_all(tasks, args.jobs, cache, progress, settings.linter)
    if cache is not None:
        cache.prune()
    warn_about_plugins([*take_problems(), *(problem for outcome in outcomes for problem in outcome.plugin_problems)])
    for outcome in outcomes:
        if outcome.fix_rejected:
            tell(f"trainlint: warning: some fixes for {outcome.path} were not applied: the result would not parse")
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
        findings=[printable_finding(finding) for outcome in outcomes for finding in outcome.findings],
        files=len(outcomes),
        sources={printable(outcome.path): outcome.text for outcome in outcomes if outcome.text is not None},
        cells={printable(outcome.path): outcome.cells for outcome in outcomes if outcome.cells and outcome.findings},
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
        tell(f"trainlint: warning: {error}; checking without a cache")
        return None


def _fingerprint(path: str, settings: AnalysisSettings, roots: tuple[str, ...]) -> bytes | None:
    """Everything but its bytes that a file's findings depend on, for its cache key; None when
    they depend on more than the cache can tell: TL601 with a target GPU reads model configs
    (a model folder's config.json, the Hugging Face cache) that no entry records."""
    if settings.target_gpu and _selects_projected_oom(settings.select, settings.ignore):
        return None
    strict = bool(os.environ.get(STRICT_ENV))  # rules raise instead of reporting
    paths = [os.fsencode(name) for name in (path, os.path.abspath(path), *roots)]  # bytes: any file name
    plugins = plugin_fingerprint(settings.plugins) if settings.plugins else b""  # a plugin edited: checked again
    return msgspec.msgpack.encode([paths, settings, strict, plugins])  # the settings' dropped codes among them


@functools.lru_cache(maxsize=64)
def _selects_projected_oom(select: tuple[str, ...], ignore: tuple[str, ...]) -> bool:
    """Whether TL601 is among the rules chosen (a file's settings are few, its files many)."""
    chosen = select_rules(AnalysisSettings(select=select, ignore=ignore))
    return any(rule.code == PROJECTED_OOM for rule in chosen)


def shows_progress(args: argparse.Namespace) -> bool:
    """A progress line only for a person watching a terminal: not on a pipe or in a file, not in CI,
    not for the machine formats, not with --quiet."""
    if args.format != "terminal" or args.quiet or os.environ.get("CI"):
        return False
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):  # a replaced or closed stream
        return False




def printable_finding(finding: Finding) -> Finding:
    if printable(finding.path) == finding.path and all(item.path is None or printable(item.path) == item.path for item in finding.evidence):
        return finding
    evidence = tuple(msgspec.structs.replace(item, path=printable(item.path)) if item.path else item for item in finding.evidence)
    return msgspec.structs.replace(finding, path=printable(finding.path), evidence=evidence)


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


def _settings_text(path: str, options: _Options, own: AnalysisSettings, linter: Linter) -> str:
    """What --show-settings prints: where the settings for ``path`` come from and what they are
    (``own``: the file's, its per-file-ignores among the codes it drops)."""
    config, settings = options.config, options.settings
    source = display_path(config.source) if config.source else "none found: built-in defaults"
    rules = [rule.code for rule in linter.rules_for(settings)]

    def toml(value: object) -> str:
        """As a TOML value; a string's control characters escaped and a file name's bytes that
        are not UTF-8 shown as U+FFFD (TOML is UTF-8)."""
        if isinstance(value, str):
            value = printable(value)
        elif isinstance(value, list):
            value = [printable(item) if isinstance(item, str) else item for item in value]
        return msgspec.json.encode(value).decode("utf-8")

    lines = [
        f"# settings for {visible(printable(path))}",
        f"configuration = {toml(source)}",
        f"root = {toml(str(config.root))}",
        f"select = {toml(list(settings.select))}",
        f"ignore = {toml(list(settings.ignore) + list(settings.dropped))}",  # any file's drops: the engine codes
        f"exclude = {toml(list(options.exclusions.patterns))}",
        f"fail-on = {toml(options.fail_on.label)}",
        f"target-gpu = {toml(settings.target_gpu or '')}",
        f"severity = {{{', '.join(f'{code} = {toml(level.label)}' for code, level in sorted(settings.severity.items()))}}}",
        f"per-file-ignores = {toml(list(own.dropped))}  # dropped for this file",
        f"rules = {toml(rules)}  # what runs on this file",
    ]
    return "\n".join(lines) + "\n"


def _may_write(path: str, writable: WriteRoots) -> bool:
    """Whether --fix may write the file at ``path``: where it really is lies inside the paths given on
    the command line. A link to a file outside them is checked, not fixed, and told on stderr."""
    real = os.path.realpath(path)
    if writable.start(real) is not None:
        return True
    print(f"trainlint: warning: not fixing {printable(path)}: it resolves to {printable(real)}, outside the paths "
          "given on the command line", file=sys.stderr)
    return False


def _write_fixes(outcomes: list[Outcome], writable: WriteRoots) -> bool:
    """Write every fixed file; False when one could not be written (each is told on stderr)."""
    all_written = True
    for outcome in outcomes:
        if outcome.fixed is None:
            continue
        try:
            replace_file(outcome.path, outcome.fixed, writable)
        except OutsideWriteRoots as error:  # it, or a folder on its way, became a link after it was read
            print(f"trainlint: error: cannot write {printable(outcome.path)}: it now resolves to {printable(error.real)}, "
                  "outside the paths given on the command line; the file is unchanged", file=sys.stderr)
            all_written = False
        except OSError as error:
            tell(f"trainlint: error: cannot write {outcome.path}: {error.strerror or error}; the file is unchanged")
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


def _print_applied_fixes(outcomes: list[Outcome], verb: str) -> None:
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
        tell(f"  {printable(finding.path)}:{where} {finding.code} ({safety}): {finding.fix.description}")


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


def _report_diff(args: argparse.Namespace, outcomes: list[Outcome]) -> int:
    changed = [outcome for outcome in outcomes if outcome.diff]
    _emit(args, "".join(outcome.diff for outcome in changed), sys.stdout)
    for top in sorted({top for outcome in changed if (top := _outside_top(outcome.path)) is not None}):
        where = f"from {printable(top)}: apply it there (`git -C {printable(top)} apply`)" if top != "/" else \
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
