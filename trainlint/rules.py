"""The public API a trainlint rule is written against: ``from trainlint.rules import ...``.

Everything a rule needs is here and nothing else is promised: the built-in rules, the estimator's
TL601 and plugin rules import only from this module, so the analysis behind it can change
without breaking them. docs/writing-rules.md explains each part with a worked example.

- **Writing a rule**: subclass :class:`Rule`, give it a ``code``, a kebab-case ``name``, a
  ``severity``, a docstring (the ``trainlint explain`` text) and examples (:class:`Fires`,
  :class:`Quiet`); ``check(ctx)`` reports through the :class:`RuleContext` it is given.
- **What a rule reads**: the context's ``scopes`` (one :class:`ScopeAnalysis` per function or
  module-level statement, holding the dataflow's events), the module (:class:`ModuleAnalysis`,
  its ``summary`` of imports, classes and functions) and the abstract :class:`Value` of each
  expression with its tags (``GRAPH``, ``TENSOR``, ``MODEL`` ...).
- **Queries** over the events (``calls_in``, ``loops_running``, ``is_backward`` ...), syntax
  helpers (``walk``, ``dotted`` ...) and domain knowledge (loss kinds, frameworks that run the
  loop for the user).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from trainlint.analysis.activations import (
    KIND_WORDS,
    LossCall,
    bound_name,
    loss_calls,
    loss_evidence,
    loss_origin,
    occurrences,
    remove_activation,
    rename_activation,
)
from trainlint.analysis.calls import transfer_destination
from trainlint.analysis.context import RuleContext
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
from trainlint.analysis.files import UnreadableFile, read_bounded
from trainlint.analysis.findings import Evidence, Finding, Fix, Severity, TextEdit
from trainlint.analysis.flow import ScopeAnalysis
from trainlint.analysis.frameworks import grad_handled_by_framework, manual_optimization, training_step_hook
from trainlint.analysis.graph_use import DroppedGraph, dropped_graph
from trainlint.analysis.libraries import DDP_SAMPLER_WHEN, DRAWS_GLOBAL_NUMPY, STARTS_FRESH_PROCESSES, call_fact
from trainlint.analysis.lines import indentation
from trainlint.analysis.module import SEED_ALL_HELPERS, ModuleAnalysis
from trainlint.analysis.names import dotted, last_part
from trainlint.analysis.parsing import ParsedChunk
from trainlint.analysis.patterns import (
    MAX_CALL_DEPTH,
    accumulates_into_grad,
    bounded_or_emptied,
    calls_in,
    clears_gradients,
    comes_from_call,
    evaluation_calls,
    events_in,
    first_written,
    is_eval_name,
    is_logging_condition,
    is_optimizer_step,
    is_scalar_loss,
    is_test_file,
    keeps_one_number,
    kept_for_one_step,
    kept_on_the_gpu,
    loops_running,
    mentions,
    mode_parameter,
    name_words,
    ordered_events,
    passed_expression,
    path_conditions,
    peeled,
    repeats_per_step,
    replaces_a_list_item,
    smoke_test_forward,
    without_host_copy_suffix,
    written,
)
from trainlint.analysis.quoting import quoted, shortened
from trainlint.analysis.rules.base import Fires, Quiet, Rule
from trainlint.analysis.summary import ClassInfo, FunctionInfo, ModuleSummary
from trainlint.analysis.torchapi import (
    HOST_SYNC_METHODS,
    LOSSES_WANTING_BINARY_LOGITS,
    LOSSES_WANTING_BINARY_PROBS,
    LOSSES_WANTING_LOG_PROBS,
    LOSSES_WANTING_LOGITS,
    NO_GRAD_CONTEXTS,
    is_dataloader,
    is_parameterless_layer,
    is_torch_name,
    mentions_rank,
)
from trainlint.analysis.tree import blocks_of, children, evaluate_literal, literal_value, string_value, walk
from trainlint.analysis.values import (
    ACCELERATOR,
    CONSTANT,
    CONTAINER,
    CRITERION,
    DATASET_ITERABLE,
    DATASET_MAP,
    DDP,
    ENGINE,
    GRAPH,
    LOADER,
    LOG_PROBS,
    LOGITS,
    LOSS,
    MODEL,
    NUMBER,
    ON_DEVICE,
    ON_HOST,
    OPTIMIZER,
    PROBS,
    SAMPLER_DISTRIBUTED,
    SAMPLER_LOCAL,
    SCALED,
    SCALER,
    SHARDED,
    SIGMOID,
    TENSOR,
    UNKNOWN,
    Site,
    Value,
    is_known_tensor,
)

if TYPE_CHECKING:
    from trainlint.rule_examples import ExampleFailure


def example_failures(rule: type[Rule]) -> list[ExampleFailure]:
    """Run a rule's own examples; what failed (empty when every example holds). ``trainlint
    test-rule`` prints these; a plugin's pytest test can assert the list is empty."""
    from trainlint.rule_examples import example_failures as run

    return run(rule)


__all__ = [
    # writing a rule
    "Rule", "Fires", "Quiet", "RuleContext", "Severity", "Evidence", "Fix", "TextEdit", "Finding", "Site",
    "example_failures",
    # the module and its parts
    "ModuleAnalysis", "ModuleSummary", "ParsedChunk", "ClassInfo", "FunctionInfo", "SEED_ALL_HELPERS",
    # dataflow: scopes, events, values
    "ScopeAnalysis", "Event", "CallEvent", "AssignEvent", "StoreEvent", "JumpEvent", "Loop", "Condition",
    "transfer_destination", "Value", "UNKNOWN", "is_known_tensor",
    "ACCELERATOR", "CONSTANT", "CONTAINER", "CRITERION", "DATASET_ITERABLE", "DATASET_MAP", "DDP", "ENGINE",
    "GRAPH", "LOADER", "LOG_PROBS", "LOGITS", "LOSS", "MODEL", "NUMBER", "ON_DEVICE", "ON_HOST", "OPTIMIZER",
    "PROBS", "SAMPLER_DISTRIBUTED", "SAMPLER_LOCAL", "SCALED", "SCALER", "SHARDED", "SIGMOID", "TENSOR",
    # queries over the events
    "MAX_CALL_DEPTH", "accumulates_into_grad", "backward_target", "bounded_or_emptied", "calls_in",
    "DroppedGraph", "dropped_graph",
    "clears_gradients", "comes_from_call", "evaluation_calls", "events_in", "first_written", "is_backward",
    "is_eval_name", "is_logging_condition", "is_optimizer_step", "is_test_file", "kept_for_one_step", "loops_running",
    "mentions", "mode_parameter", "name_words", "ordered_events", "passed_expression", "path_conditions", "peeled",
    "repeats_per_step", "replaces_a_list_item", "smoke_test_forward", "written",
    # what a container keeps across a loop
    "kept_on_the_gpu", "keeps_one_number", "is_scalar_loss", "without_host_copy_suffix",
    # syntax helpers and quoting code in messages
    "walk", "children", "blocks_of", "literal_value", "string_value", "evaluate_literal", "dotted", "last_part", "shortened",
    "quoted", "indentation",
    # domain knowledge: PyTorch, losses and their activations, frameworks
    "HOST_SYNC_METHODS", "LOSSES_WANTING_BINARY_LOGITS", "LOSSES_WANTING_BINARY_PROBS", "LOSSES_WANTING_LOG_PROBS",
    "LOSSES_WANTING_LOGITS", "NO_GRAD_CONTEXTS", "is_dataloader", "is_parameterless_layer", "is_torch_name", "mentions_rank",
    "KIND_WORDS", "LossCall", "bound_name", "loss_calls", "loss_evidence", "loss_origin", "occurrences", "remove_activation",
    "rename_activation", "grad_handled_by_framework", "manual_optimization", "training_step_hook",
    # what library calls do that their names do not say (analysis/libraries.py's CALL_FACTS)
    "call_fact", "DRAWS_GLOBAL_NUMPY", "STARTS_FRESH_PROCESSES", "DDP_SAMPLER_WHEN",
    # reading the project's other files (bounded, regular files only)
    "read_bounded", "UnreadableFile",
]
