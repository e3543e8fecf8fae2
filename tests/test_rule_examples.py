"""Every registered rule's own examples: each MUST_FIRE fires (and its fix gives the fixed text),
each MUST_NOT_FIRE stays quiet; and the invariants the registry keeps for every rule."""

from __future__ import annotations

import ast
import inspect
import sys
import types

import pytest

from trainlint.analysis import registry
from trainlint.analysis.registry import BUILTIN_RULES, RuleProblem, all_rules, invariant_problems, rules_in
from trainlint.rule_examples import fires_problem, quiet_problem
from trainlint.rules import Fires, Quiet, Rule, Severity

MIN_EXAMPLES = 6


def _cases(kind: str):
    for rule in all_rules():
        for index, example in enumerate(getattr(rule, kind)):
            yield pytest.param(rule, example, id=f"{rule.code}-{rule.name}-{index}")


@pytest.fixture(autouse=True)
def strict_rules(monkeypatch):
    monkeypatch.setenv("TRAINLINT_STRICT", "1")


@pytest.mark.parametrize("rule", all_rules(), ids=lambda rule: rule.code)
def test_rule_documents_and_tests_itself(rule):
    assert rule.explain().count("\n") >= 3, "the docstring is the `explain` text: what, why it costs money, how to fix"
    assert len(rule.MUST_FIRE) >= MIN_EXAMPLES
    assert len(rule.MUST_NOT_FIRE) >= MIN_EXAMPLES


@pytest.mark.parametrize("rule, example", list(_cases("MUST_FIRE")))
def test_must_fire(rule, example, tmp_path):
    problem = fires_problem(rule, example, tmp_path)
    assert problem is None, problem


@pytest.mark.parametrize("rule, example", list(_cases("MUST_NOT_FIRE")))
def test_must_not_fire(rule, example, tmp_path):
    problem = quiet_problem(rule, example, tmp_path)
    assert problem is None, problem


def _is_example(statement: ast.stmt, rule: str) -> bool:
    """``Rule.MUST_FIRE = (...)`` or ``Rule.MUST_NOT_FIRE = (...)``: an example list assigned onto the class."""
    if not isinstance(statement, ast.Assign) or len(statement.targets) != 1:
        return False
    target = statement.targets[0]
    return (
        isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id == rule
        and target.attr in ("MUST_FIRE", "MUST_NOT_FIRE")
    )


@pytest.mark.parametrize("rule", all_rules(), ids=lambda rule: rule.code)
def test_rule_file_puts_its_logic_first_and_its_examples_last(rule):
    # A reader opening a rule file meets the docstring, the metadata, the check and its helpers;
    # the examples (most of each file) follow all of them, assigned onto the class.
    tree = ast.parse(inspect.getsource(sys.modules[rule.__module__]))
    (definition,) = [node for node in tree.body if isinstance(node, ast.ClassDef) and node.name == rule.__name__]
    class_attributes = {
        target.id for node in definition.body if isinstance(node, (ast.Assign, ast.AnnAssign))
        for target in (node.targets if isinstance(node, ast.Assign) else [node.target]) if isinstance(target, ast.Name)
    }
    assert not class_attributes & {"MUST_FIRE", "MUST_NOT_FIRE"}, "the examples are assigned after the module's logic"
    examples = [index for index, node in enumerate(tree.body) if _is_example(node, rule.__name__)]
    assert [_is_example(node, rule.__name__) for node in tree.body[examples[0]:]] == [True, True], (
        "the file ends with exactly `MUST_FIRE = ...` and `MUST_NOT_FIRE = ...`, nothing between or after"
    )
    assert [ast.unparse(node.targets[0]) for node in tree.body[examples[0]:] if isinstance(node, ast.Assign)] == [
        f"{rule.__name__}.MUST_FIRE", f"{rule.__name__}.MUST_NOT_FIRE"
    ]
    definitions = [index for index, node in enumerate(tree.body) if isinstance(node, (ast.FunctionDef, ast.ClassDef))]
    assert max(definitions) < examples[0], "every function and class (the check's helpers) comes before the examples"


def test_discovery_finds_every_rule_module_and_tl601():
    codes = [rule.code for rule in all_rules()]
    assert len(codes) == len(set(codes)) == 24
    assert "TL601" in codes and "TL601" not in [rule.code for rule in BUILTIN_RULES]  # the estimator's, by entry point
    assert [rule.code for rule in BUILTIN_RULES] == sorted(rule.code for rule in BUILTIN_RULES)


def test_registered_rules_keep_the_invariants():
    assert invariant_problems(all_rules(), own=True) == []


def test_fixable_is_derived_from_the_examples():
    for rule in all_rules():
        assert rule.fixable == any(example.fixed is not None and not example.unsafe for example in rule.MUST_FIRE), rule.code
    assert "fixable" not in {name for rule in all_rules() for name in vars(rule)}, "fixable is never set by hand"


def _module_with(*rules: type[Rule], name: str = "fake_rules") -> types.ModuleType:
    module = types.ModuleType(name)
    for rule in rules:
        rule.__module__ = name
        setattr(module, rule.__name__, rule)
    return module


def test_a_duplicate_code_fails_discovery(monkeypatch):
    class First(Rule):
        code, name, severity = "TL901", "first-rule", Severity.NOTE

    class Second(Rule):
        code, name, severity = "TL901", "second-rule", Severity.NOTE

    module = _module_with(First, Second)
    monkeypatch.setattr(registry.pkgutil, "iter_modules", lambda path: [types.SimpleNamespace(name="fake")])
    monkeypatch.setattr(registry.importlib, "import_module", lambda name: module)
    with pytest.raises(RuleProblem, match="code TL901 is already"):
        registry._discover_builtin()


def test_a_duplicate_name_and_a_malformed_code_are_named():
    class Named(Rule):
        code, name, severity = "TL902", "retained-graph", Severity.NOTE

    class Malformed(Rule):
        code, name, severity = "tl-1", "malformed", Severity.NOTE

    problems = invariant_problems([Named, Malformed], own=True, known=BUILTIN_RULES)
    assert any("name retained-graph is already TL101's" in problem for problem in problems), problems
    assert any("code 'tl-1' is not letters then digits" in problem for problem in problems), problems


def test_a_plugin_code_must_stay_out_of_the_tl_namespace():
    class Squatter(Rule):
        code, name, severity = "TL999", "squatter", Severity.NOTE

    class Own(Rule):
        code, name, severity = "ACME1", "own-code", Severity.NOTE

    assert invariant_problems([Own], own=False) == []
    assert invariant_problems([Squatter], own=False) == [
        f"{__name__}.test_a_plugin_code_must_stay_out_of_the_tl_namespace.<locals>.Squatter: code TL999 must "
        "not start with TL (trainlint's own codes)"
    ]


def test_rules_in_takes_only_the_rules_a_module_defines():
    class Defined(Rule):
        code, name, severity = "ACME2", "defined-here", Severity.NOTE

    module = _module_with(Defined)
    module.Imported = next(iter(BUILTIN_RULES))  # imported from elsewhere: not this module's rule
    module.Rule = Rule
    assert rules_in(module) == [Defined]


def test_a_fix_without_an_expected_result_fails_its_example(tmp_path):
    from trainlint.analysis.rules.discarded_transfer import DiscardedTransfer

    example = DiscardedTransfer.MUST_FIRE[0]
    bare = Fires(example.code)  # the same code, no `fixed=`
    assert "offers a fix here but the example has no expected result" in (fires_problem(DiscardedTransfer, bare, tmp_path) or "")
    assert quiet_problem(DiscardedTransfer, Quiet(example.code), tmp_path) is not None
