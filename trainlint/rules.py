"""The public API a trainlint rule is written against: ``from trainlint.rules import ...``.

These names, and nothing else, are promised to a plugin: docs/writing-rules.md documents each of
them with a worked example, and ``tests/test_plugins.py`` checks that the page names every one.
The built-in rules use this module for everything it has; what only one rule or a family of
built-in rules needs (the loss kinds of TL202/TL203, what a kept container holds for TL101/TL104,
library facts) they import from the internal analysis module that defines it, which may change.

- **Writing a rule**: subclass :class:`Rule`, give it a ``code``, a kebab-case ``name``, a
  ``severity``, a docstring (the ``trainlint explain`` text) and examples (:class:`Fires`,
  :class:`Quiet`); ``check(self, ctx: RuleContext)`` reports through the context it is given.
- **What a rule reads**: the context's ``scopes`` (one :class:`ScopeAnalysis` per function or
  module-level statement, holding the dataflow's events), the module (:class:`ModuleView`, its
  ``summary`` of imports, classes and functions) and the abstract :class:`Value` of each
  expression with its tags (``Tag.GRAPH``, ``Tag.MODEL`` ...).
- **Queries** over the events (``calls_in``, ``loops_running``, ``is_backward`` ...) and syntax
  helpers (``walk``, ``dotted`` ...) and for quoting code in messages.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from trainlint.analysis.context import ModuleView, RuleContext
from trainlint.analysis.events import (
    AssignEvent,
    CallEvent,
    Condition,
    Event,
    JumpEvent,
    Loop,
    StoreEvent,
    backward_target,
    is_backward,
)
from trainlint.analysis.findings import Evidence, Fix, Severity, TextEdit
from trainlint.analysis.flow import ScopeAnalysis
from trainlint.analysis.lines import indentation
from trainlint.analysis.names import dotted, last_part
from trainlint.analysis.parsing import ParsedChunk
from trainlint.analysis.patterns import (
    accumulates_into_grad,
    calls_in,
    clears_gradients,
    comes_from_call,
    events_in,
    first_written,
    is_eval_name,
    is_optimizer_step,
    is_test_file,
    loops_running,
    mentions,
    optimizer_text,
    ordered_events,
    passed_expression,
    path_conditions,
    peeled,
    repeats_per_step,
    written,
)
from trainlint.analysis.quoting import quoted, shortened
from trainlint.analysis.rules.base import Fires, Quiet, Rule
from trainlint.analysis.summary import ClassInfo, FunctionInfo, ModuleSummary
from trainlint.analysis.torchapi import is_dataloader, is_torch_name
from trainlint.analysis.tree import children, literal_value, string_value, walk
from trainlint.analysis.values import UNKNOWN, Site, Tag, Value, is_known_tensor

if TYPE_CHECKING:
    from trainlint.rule_examples import ExampleFailure


def example_failures(rule: type[Rule]) -> list[ExampleFailure]:
    """Run a rule's own examples; what failed (empty when every example holds). ``trainlint
    test-rule`` prints these; a plugin's pytest test can assert the list is empty."""
    from trainlint.rule_examples import example_failures as run

    return run(rule)


__all__ = [
    # writing a rule: metadata, examples, reporting, fixes
    "Rule", "Fires", "Quiet", "RuleContext", "Severity", "Evidence", "Fix", "TextEdit", "Site", "example_failures",
    # what a rule reads of the module
    "ModuleView", "ModuleSummary", "ParsedChunk", "ClassInfo", "FunctionInfo",
    # dataflow: scopes, events, values
    "ScopeAnalysis", "Event", "CallEvent", "AssignEvent", "StoreEvent", "JumpEvent", "Loop", "Condition",
    "Value", "Tag", "UNKNOWN", "is_known_tensor",
    # queries over the events
    "calls_in", "events_in", "ordered_events", "path_conditions", "loops_running", "repeats_per_step",
    "is_backward", "backward_target", "is_optimizer_step", "optimizer_text", "clears_gradients", "accumulates_into_grad",
    "comes_from_call", "mentions", "passed_expression", "is_eval_name", "is_test_file",
    # syntax, and quoting code in messages
    "walk", "children", "dotted", "last_part", "literal_value", "string_value", "peeled", "indentation",
    "shortened", "quoted", "written", "first_written",
    # PyTorch
    "is_dataloader", "is_torch_name",
]
