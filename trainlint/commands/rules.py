"""``trainlint rules``, ``explain`` and ``test-rule``: the rules, one rule's documentation, a plugin's own examples run."""

from __future__ import annotations

import argparse
import os
import sys
import textwrap
from pathlib import Path

import msgspec

from trainlint.analysis.engine_codes import ENGINE_CODES
from trainlint.analysis.registry import (
    all_rules,
    is_plugin_path,
    load_plugin,
    rules_for,
    take_problems,
)
from trainlint.analysis.rules.base import Rule
from trainlint.commands import UsageError, tell, warn_about_plugins
from trainlint.config import (
    ConfigError,
    ConfigFinder,
    rule_codes,
)
from trainlint.output import visible, visible_lines


def _load_local_plugins() -> None:
    """`rules` and `explain` show the plugins the configuration of the current folder names."""
    try:
        config = ConfigFinder().for_folder(Path.cwd())
    except ConfigError as error:
        tell(f"trainlint: warning: configuration ignored: {error}")
        return
    rules_for(config.plugins)
    warn_about_plugins(take_problems())


def run_rules(args: argparse.Namespace) -> int:
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


def run_test_rule(args: argparse.Namespace) -> int:
    """Exit 0 when every example of every rule holds, 1 when one fails, 2 when a plugin cannot be loaded."""
    from trainlint.rule_examples import example_failures

    status = 0
    for given in args.plugins:
        spec = os.path.abspath(given) if is_plugin_path(given) else given
        rules = load_plugin(spec)
        problems = take_problems()
        for problem in problems:
            tell(f"trainlint: error: {problem}")
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


def run_explain(args: argparse.Namespace) -> int:
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
