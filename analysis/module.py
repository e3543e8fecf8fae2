"""One module's analysis: chunks, parses, summary, scopes, and facts aggregated over all of them."""

from __future__ import annotations

import re
from functools import cached_property

import libcst as cst

from . import torchapi
from .chunking import split_statements
from .flow import CallEvent, ScopeAnalysis
from .names import last_part
from .parsing import ParsedChunk
from .summary import ChunkFacts, FunctionInfo, ModuleSummary
from .values import Value

_CUDA_EVIDENCE = re.compile(r"""^[^#\n]*?(\.cuda\(|["']cuda|torch\.cuda\.|device_map|["']gpu["'])""", re.M)
_MAIN_GUARD = re.compile(r"""^if\s+__name__\s*==\s*["']__main__["']""", re.M)
SEED_ALL_HELPERS = frozenset(
    {"set_seed", "seed_everything", "seed_all", "fix_seed", "setup_seed", "init_seeds", "set_random_seed",
     "set_seeds", "fix_seeds", "seed_torch", "enable_full_determinism", "manual_seed_all_libraries"}
)


class ModuleAnalysis:
    """Everything the rules may ask of one module; built once per text."""

    def __init__(self, text: str, path: str, chunks: list[ParsedChunk] | None = None) -> None:
        self.text = text
        self.path = path
        if chunks is None:
            chunks = [ParsedChunk(chunk, index) for index, chunk in enumerate(split_statements(text))]
        self.chunks = chunks
        self.facts = [ChunkFacts(chunk) for chunk in chunks]
        self.summary = ModuleSummary(chunks, self.facts)

    def updated(self, text: str) -> "ModuleAnalysis":
        """The analysis of an edited text, re-parsing only the statements whose text changed."""
        previous: dict[str, list[ParsedChunk]] = {}
        for chunk in self.chunks:
            previous.setdefault(chunk.chunk.text, []).append(chunk)
        chunks = []
        for index, chunk in enumerate(split_statements(text)):
            reusable = previous.get(chunk.text)
            chunks.append(reusable.pop(0).moved(chunk, index) if reusable else ParsedChunk(chunk, index))
        return ModuleAnalysis(text, self.path, chunks)

    @cached_property
    def lines(self) -> list[str]:
        return self.text.splitlines()

    def scopes_of(self, chunk: ParsedChunk) -> list[ScopeAnalysis]:
        """The module-level code of a statement, and every function and method it defines."""
        return self._scopes[chunk.index]

    @cached_property
    def _scopes(self) -> list[list[ScopeAnalysis]]:
        result: list[list[ScopeAnalysis]] = []
        for chunk, facts in zip(self.chunks, self.facts):
            scopes: list[ScopeAnalysis] = []
            if chunk.module is not None:
                if any(not isinstance(s, (cst.FunctionDef, cst.ClassDef)) for s in chunk.body):
                    scopes.append(ScopeAnalysis.of_module_statement(chunk, self.summary))
                for info in facts.functions.values():
                    analysis = info.analysis(self.summary)
                    if analysis is not None:
                        scopes.append(analysis)
                        scopes.extend(_nested_scopes(analysis, self.summary))
                for class_info in facts.classes.values():
                    for method in class_info.methods.values():
                        analysis = method.analysis(self.summary)
                        if analysis is not None:
                            scopes.append(analysis)
            result.append(scopes)
        return result

    def scopes_from(self, scope: ScopeAnalysis) -> list[ScopeAnalysis]:
        """``scope`` and, for module-level code, the module-level code of every later statement."""
        if scope.function is not None:
            return [scope]
        later = [
            other
            for scopes in self._scopes[scope.chunk.index + 1 :]
            for other in scopes
            if other.function is None
        ]
        return [scope, *later]

    @cached_property
    def all_scopes(self) -> list[ScopeAnalysis]:
        return [scope for scopes in self._scopes for scope in scopes]

    def all_calls(self):
        for scope in self.all_scopes:
            yield from scope.calls()

    def arguments_for(self, function: FunctionInfo, parameter: str) -> list[tuple[CallEvent, Value]] | None:
        """What each call of a local function in this module passes for one of its parameters.

        None when a call hides it (``*args``, ``**kwargs``) or leaves it at its default.
        """
        params = function.node.params
        positional = [param.name.value for param in (*params.posonly_params, *params.params)]
        if function.owner is not None and positional[:1] in (["self"], ["cls"]):
            positional = positional[1:]
        passed: list[tuple[CallEvent, Value]] = []
        for call in self.all_calls():
            if call.function is not function:
                continue
            if any(arg.star for arg in call.arg_nodes):
                return None
            if parameter in call.kwargs:
                passed.append((call, call.kwargs[parameter]))
            elif parameter in positional and positional.index(parameter) < len(call.args):
                passed.append((call, call.args[positional.index(parameter)]))
            else:
                return None
        return passed

    # ------------------------------------------------------------------ module-wide facts
    @cached_property
    def cuda_line(self) -> int | None:
        """First line showing the script runs on a GPU."""
        match = _CUDA_EVIDENCE.search(self.text)
        return self.text.count("\n", 0, match.start(1)) + 1 if match else None

    @cached_property
    def main_guard_line(self) -> int | None:
        match = _MAIN_GUARD.search(self.text)
        return self.text.count("\n", 0, match.start()) + 1 if match else None

    @cached_property
    def backward_calls(self) -> list[CallEvent]:
        return [call for call in self.all_calls() if call.method == "backward" or (
            call.method is None and call.callee and last_part(call.callee) == "backward" and torchapi.is_torch_name(call.callee)
        )]

    @cached_property
    def ddp_wraps(self) -> list[CallEvent]:
        return [call for call in self.all_calls() if call.callee and torchapi.is_ddp_wrapper(call.callee)] + [
            call for call in self.all_calls() if call.callee == "deepspeed.initialize"
        ]

    @cached_property
    def uses_lightning(self) -> bool:
        return self.summary.uses_module("lightning", "pytorch_lightning")

    @cached_property
    def uses_hf_trainer(self) -> bool:
        return any(
            target.startswith(("transformers.", "trl.", "setfit.", "sentence_transformers."))
            and last_part(target).endswith("Trainer")
            for target in self.summary.imports.values()
        )

    @cached_property
    def uses_accelerate(self) -> bool:
        return self.summary.uses_module("accelerate")

    @cached_property
    def uses_deepspeed(self) -> bool:
        return self.summary.uses_module("deepspeed")

    @cached_property
    def framework_runs_loop(self) -> str | None:
        """A framework that owns the training loop (and zeroing, scaling, sampling), if any."""
        if self.uses_lightning:
            return "PyTorch Lightning"
        if self.uses_hf_trainer:
            return "the Hugging Face Trainer"
        return None


def _nested_scopes(analysis: ScopeAnalysis, summary: ModuleSummary) -> list[ScopeAnalysis]:
    nested: list[ScopeAnalysis] = []
    for info in analysis.local_functions.values():
        inner = info.analysis(summary)
        if inner is not None:
            nested.append(inner)
            nested.extend(_nested_scopes(inner, summary))
    return nested
