"""The ``trainlint`` command line: its parser, the dispatch to each command (``trainlint.commands``:
``check``, ``rules``, ``explain``, ``test-rule``; ``trainlint.estimate_cli``: ``estimate``, ``gpus``) and
the process's end.

Exit codes: 0 nothing at or above ``fail-on``; 1 findings at or above it (or, with --diff, a
diff); 2 a usage or configuration problem, told in one line on stderr.
"""

from __future__ import annotations

import argparse
import difflib
import io
import logging
import os
import sys
from collections.abc import Sequence
from typing import NoReturn

import trainlint
from trainlint import estimate_cli
from trainlint.analysis.registry import (
    allow_local_plugins,
    forbid_local_plugins,
)
from trainlint.cache import ENVIRONMENT_VARIABLE as CACHE_ENVIRONMENT_VARIABLE
from trainlint.cache import FOLDER_NAME as CACHE_FOLDER_NAME
from trainlint.commands import UsageError, tell
from trainlint.commands.rules import run_explain, run_rules, run_test_rule
from trainlint.config import (
    ConfigError,
)
from trainlint.discovery import MissingPathError
from trainlint.output.terminal import COLOR_CHOICES

FORMATS = ("terminal", "json", "github", "sarif")
SEVERITIES = ("error", "warning", "note")
ALLOW_PLUGINS_VARIABLE = "TRAINLINT_ALLOW_PLUGINS"
EXIT_BROKEN_PIPE = 128 + 13  # what a shell reports for a tool killed by SIGPIPE


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
    check.add_argument("-o", "--output-file", "--output", dest="output", metavar="FILE",
                       help="write the report to FILE instead of stdout (--output is the older name)")
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
            from trainlint.commands.check import run_check  # the analysis (LibCST): not for `trainlint server`'s start

            return run_check(args)
        if args.command == "rules":
            return run_rules(args)
        if args.command == "test-rule":
            return run_test_rule(args)
        if args.command == "estimate":
            return estimate_cli.run_estimate(args)
        if args.command == "gpus":
            return estimate_cli.run_gpus(args)
        if args.command == "server":
            from trainlint.server.compiled_code_cache import compiled_code_cache

            with compiled_code_cache():  # lsprotocol's classes compiled at the last launch are reused
                from trainlint.server.server import start  # pygls is only imported by the server
            start(args.tcp)
            return 0
        return run_explain(args)
    except SystemExit as exit:  # --help and --version
        return exit.code if isinstance(exit.code, int) else 0
    except (UsageError, ConfigError, MissingPathError) as error:
        prog = error.prog if isinstance(error, UsageError) else "trainlint"
        tell(f"{prog}: error: {error}")
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
