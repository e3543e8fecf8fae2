"""What a training script says about its memory: the model, batch size, sequence length, precision,
optimizer, adapters, quantisation, checkpointing, attention kernel, sharding and generation length.

Values are followed through literals, module-level constants, argparse defaults, dataclass field
defaults and simple arithmetic, never by running anything. Every value found names the line it
came from; what is not found is left to the caller's defaults, which the report marks "assumed".
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import libcst as cst

from trainlint.analysis.dependencies import kept_with_scope
from trainlint.analysis.module import ModuleAnalysis
from trainlint.analysis.tree import evaluate_literal
from trainlint.rules import CallEvent, ModuleView, ParsedChunk, ScopeAnalysis, Tag, dotted, last_part, walk

from .local_files import Unreadable, read_json
from .lora_config import read_lora_config
from .script_defaults import argparse_defaults, dataclass_defaults
from .script_inputs import Found, ScriptInputs, with_model_comment
from .trainer_eval import keeps_eval_logits
from .training_loop import clears_through_accelerate, training_loop

UNKNOWN = object()
ABSURD = object()  # unknown too: a number no configuration holds (the report says which line)
_MAX_DEPTH = 8
# Numbers beyond this are no configuration anyone runs (a typo, a sentinel, a hostile file): unknown.
MAX_MAGNITUDE = 2**53
# Sizes a run can have; a value outside is not used (it stays unknown, and the report says so).
_SIZE_LIMITS = {
    "batch_size": 1 << 20, "seq_len": 1 << 24, "image_size": 1 << 16, "lora_rank": 1 << 16, "max_new_tokens": 1 << 24,
    "grad_accum": 1 << 16, "kv_cache_len": 1 << 24,
}
_ACCUMULATION_NAMES = re.compile(r"^(?:gradient_accumulation_steps|grad_accum(?:ulation)?(?:_steps)?|accumulation_steps|accum_steps)$", re.I)

_BATCH_KEYWORDS = ("per_device_train_batch_size", "micro_batch_size", "batch_size", "train_batch_size")
_LENGTH_KEYWORDS = ("max_seq_length", "max_seq_len", "max_length", "block_size", "seq_len", "seq_length", "context_length", "cutoff_len")
_LENGTH_OPTIONS = re.compile(r"^(?:max_seq_len(?:gth)?|max_len(?:gth)?|block_size|seq_len(?:gth)?|context_length|cutoff_len|sequence_length)$")
_BATCH_OPTIONS = re.compile(r"^(?:(?:per_device_)?(?:train_)?batch_size|micro_batch_size|bs|batch)$")
_OPTIMIZERS = {
    "AdamW": "adamw", "Adam": "adam", "SGD": "sgd", "RMSprop": "rmsprop", "Adagrad": "adagrad", "Adafactor": "adafactor",
    "AdamW8bit": "adamw-8bit", "Adam8bit": "adamw-8bit", "PagedAdamW8bit": "paged-adamw-8bit", "PagedAdamW": "paged-adamw",
    "Lion": "lion", "Lion8bit": "lion",
}
_TRAINER_OPTIM = {
    "adamw_torch": "adamw", "adamw_torch_fused": "adamw", "adamw_hf": "adamw", "adamw_bnb_8bit": "adamw-8bit",
    "adamw_8bit": "adamw-8bit", "paged_adamw_8bit": "paged-adamw-8bit", "paged_adamw_32bit": "paged-adamw", "adafactor": "adafactor",
    "sgd": "sgd", "adagrad": "adagrad", "lion_32bit": "lion", "lion_8bit": "lion", "rmsprop": "rmsprop",
}
_DTYPE_NAMES = {"bfloat16": "bf16", "bf16": "bf16", "float16": "fp16", "half": "fp16", "fp16": "fp16", "float32": "fp32", "float": "fp32"}
# Lightning's precision strings (Fabric, Trainer, LitGPT): "-true" casts the model, "-mixed" runs autocast.
_LIGHTNING_PRECISION = {
    "bf16-true": "bf16", "16-true": "fp16", "32-true": "fp32", "32": "fp32", "bf16-mixed": "amp-bf16", "16-mixed": "amp-fp16",
}
# LitGPT's ways of naming a model: LLM.load("phi-2"), GPT.from_name("phi-2"), Config.from_name("phi-2").
_LITGPT_MODEL_CALLS = {"load": ("model",), "from_name": ("name",)}
# The flag of `trainlint estimate` that turns on a setting the script turns on only behind an option.
_SWITCH_FLAGS = {
    "gradient_checkpointing": "--gradient-checkpointing", "compiled": "--compile", "optimizer_in_backward": "--optimizer-in-backward",
    "activation_offloading": "--activation-offloading",
}
# diffusers' names of a pipeline's text encoders, as the estimator's pipelines name them: one given as None in
# from_pretrained is not loaded (SD3's `text_encoder_3=None` leaves T5 out).
PIPELINE_COMPONENTS = {"text_encoder": "text_encoder_1", "text_encoder_2": "text_encoder_2", "text_encoder_3": "text_encoder_3"}
# FSDP's sharding strategies (torch.distributed.fsdp.ShardingStrategy; accelerate also takes their numbers, the HF
# Trainer's `fsdp` option their lower-case names): the hybrid ones shard within a node.
_FSDP_STRATEGIES: dict[str | int, str] = {
    "FULL_SHARD": "fsdp", "SHARD_GRAD_OP": "fsdp-grad-op", "NO_SHARD": "ddp", "HYBRID_SHARD": "fsdp",
    "_HYBRID_SHARD_ZERO2": "fsdp-grad-op", "HYBRID_SHARD_ZERO2": "fsdp-grad-op",
    1: "fsdp", 2: "fsdp-grad-op", 3: "ddp", 4: "fsdp", 5: "fsdp-grad-op",
}
# accelerate's Accelerator(mixed_precision=...): the forward of a model it prepares runs under autocast.
_ACCELERATE_PRECISION = {"no": "fp32", "fp16": "amp-fp16", "bf16": "amp-bf16"}


def bounded(value: Any) -> Any:
    """A number as it is when a configuration could hold it, else ABSURD (infinite, NaN, astronomically large)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return value
    if isinstance(value, float) and not math.isfinite(value):
        return ABSURD
    return value if abs(value) <= MAX_MAGNITUDE else ABSURD


def read_inputs(module: ModuleView) -> ScriptInputs:
    """What the script says of its run: what its statements' trees say (``read_tree_inputs``), with the
    model a ``# trainlint: model=...`` comment names."""
    return with_model_comment(read_tree_inputs(module), module.text)


def read_tree_inputs(module: ModuleView) -> ScriptInputs:
    """What the statements' trees say of the run, all of ``read_inputs`` but the model comment: read without
    the module's text, so an edit that changes no tree (a key on a line that stays broken) keeps it
    (``ModuleAnalysis.module_wide``), where the text's comment is read again."""
    # TL601 hands over its rule context's module; the reader also reads the workspace's other files
    # (a config, a model class), which the engine's ModuleAnalysis resolves and ModuleView does not offer.
    assert isinstance(module, ModuleAnalysis), "the engine checks a ModuleAnalysis"
    reader = _Reader(module)
    return reader.read()


class _Reader:
    def __init__(self, module: ModuleAnalysis) -> None:
        self.module = module
        self.summary = module.summary
        self.options = argparse_defaults(module)
        self.fields = dataclass_defaults(module)
        self.inputs = ScriptInputs()
        self.scaler: tuple[cst.CSTNode, ParsedChunk] | None = None
        self.pipeline: tuple[cst.CSTNode, ParsedChunk] | None = None  # a diffusers pipeline was loaded here
        self.training = training_loop(module)
        self.accelerator: tuple[cst.CSTNode, ParsedChunk] | None = None  # an Accelerator whose precision is not in the script
        # settings a call would turn on that runs only where an option off by default is set: the name, the
        # definition that keeps it off (an option, a field, a constant), the call and the test around it
        self.switched_off: dict[str, tuple[cst.CSTNode, ParsedChunk, str]] = {}
        self.trainer_arguments: tuple[cst.CSTNode, ParsedChunk] | None = None  # TrainingArguments without `optim`
        self.arguments_call: tuple[cst.Call, ParsedChunk] | None = None  # the first TrainingArguments (or SFTConfig) read
        self.trl_config: tuple[cst.CSTNode, ParsedChunk] | None = None  # a TRL SFTConfig without `gradient_checkpointing`
        self.arguments_defaults: list[tuple[str, Any, cst.CSTNode, ParsedChunk, str]] = []  # left to a Trainer's defaults
        self.cast_to_fp32 = False

    # ------------------------------------------------------------------ values
    def value(self, node: cst.BaseExpression | None, chunk: ParsedChunk, depth: int = 0) -> Any:
        """The constant an expression evaluates to, or UNKNOWN."""
        if node is None or depth > _MAX_DEPTH:
            return UNKNOWN
        if isinstance(node, (cst.Integer, cst.Float, cst.SimpleString, cst.ConcatenatedString)):
            try:
                return bounded(evaluate_literal(chunk.code_for(node)))
            except (ValueError, SyntaxError, MemoryError):  # digits beyond int's string limit, or worse
                return ABSURD if isinstance(node, cst.Integer) else UNKNOWN
        if isinstance(node, cst.Name):
            if node.value in ("True", "False", "None"):
                return {"True": True, "False": False, "None": None}[node.value]
            return self._module_constant(node.value, depth)
        if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus):
            inner = self.value(node.expression, chunk, depth + 1)
            return inner if inner is ABSURD else -inner if isinstance(inner, (int, float)) else UNKNOWN
        if isinstance(node, cst.BinaryOperation):
            left, right = self.value(node.left, chunk, depth + 1), self.value(node.right, chunk, depth + 1)
            if left is ABSURD or right is ABSURD:
                return ABSURD
            if not isinstance(left, (int, float)) or not isinstance(right, (int, float)) or isinstance(left, bool):
                return UNKNOWN
            operator = type(node.operator).__name__
            if operator == "Power" and abs(left) > 1 and abs(right) > 64:
                return ABSURD  # far beyond MAX_MAGNITUDE, and costly to compute
            try:
                return bounded({
                    "Add": lambda: left + right, "Subtract": lambda: left - right, "Multiply": lambda: left * right,
                    "FloorDivide": lambda: left // right, "Divide": lambda: left / right, "Power": lambda: left**right,
                }[operator]())
            except (KeyError, ZeroDivisionError, OverflowError, TypeError):  # TypeError: a complex power
                return UNKNOWN
        if isinstance(node, cst.Attribute):
            attribute = node.attr.value
            for table in (self.options, self.fields):
                if attribute in table:
                    expression, _, home = table[attribute]
                    return self.value(expression, home, depth + 1)
            text = dotted(node)
            if text is not None:
                canonical = self.summary.canonical(text)
                if canonical.startswith("torch."):
                    return canonical  # torch.bfloat16 and friends, as names
            return UNKNOWN
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and node.func.value in ("int", "float") and node.args:
            inner = self.value(node.args[0].value, chunk, depth + 1)
            if inner is ABSURD or isinstance(inner, bool) or not isinstance(inner, (int, float, str)):
                return inner if inner is ABSURD else UNKNOWN
            try:
                return bounded(int(inner) if node.func.value == "int" else float(inner))
            except ValueError:
                return UNKNOWN
            except OverflowError:  # int(float("inf"))
                return ABSURD
        if isinstance(node, (cst.List, cst.Tuple)):
            items = [self.value(element.value, chunk, depth + 1) for element in node.elements]
            return UNKNOWN if any(item is UNKNOWN for item in items) else tuple(items)
        if isinstance(node, cst.Dict):
            entries = {}
            for element in node.elements:
                if not isinstance(element, cst.DictElement):
                    return UNKNOWN  # `**other`
                key = self.value(element.key, chunk, depth + 1)
                if not isinstance(key, str):
                    return UNKNOWN
                entries[key] = self.value(element.value, chunk, depth + 1)
            return entries
        return UNKNOWN

    def _module_constant(self, name: str, depth: int) -> Any:
        entries = self.summary.bindings.get(name)
        if not entries or len(entries) != 1:
            return UNKNOWN  # rebound: which value applies depends on the path
        index, expression, item = entries[0]
        if item is not None:
            return UNKNOWN
        return self.value(expression, self.module.chunks[index], depth + 1)

    def keyword(self, call: cst.Call, names: tuple[str, ...] | str, position: int | None = None):
        names = (names,) if isinstance(names, str) else names
        for arg in call.args:
            if arg.keyword is not None and arg.keyword.value in names:
                return arg.value
        if position is not None:
            positional = [arg for arg in call.args if arg.keyword is None and not arg.star]
            if position < len(positional):
                return positional[position].value
        return None

    # ------------------------------------------------------------------ reading
    def read(self) -> ScriptInputs:
        inputs = self.inputs
        backward = self.module.backward_calls
        training = (backward[0].node, backward[0].chunk) if backward else None  # the evidence: a real line
        generating = None
        trainer = None  # a Trainer's construction: it runs the training steps itself
        # The training loop's own loader and autocast first: they decide, whatever else the script builds.
        for loader in self.training.loaders[:1]:
            self._read_loader_batch(loader.node, loader.chunk)
        for autocast in self.training.autocasts[:1]:
            self._read_autocast(autocast.node, autocast.chunk)
        for scope in self.module.all_scopes:
            for call, kind in kept_with_scope(scope, _CALLS_READ, lambda scope=scope: _calls_read(scope)):
                name = call.callee or ""
                head = last_part(name) if name else (call.method or "")
                if kind is _LOCAL_CLASS:
                    self._read_local_class(call, call.node, call.chunk, name)
                    continue
                if kind is _PIPELINE_CALL:
                    self._read_pipeline_call(call.node, call.chunk)
                    continue
                self._read_call(call, call.node, call.chunk, name, head)
                builds_trainer = head.endswith("Trainer") or name.endswith("Trainer")
                if training is None and (builds_trainer or head == "TrainingArguments"):
                    training = (call.node, call.chunk)
                if trainer is None and builds_trainer:
                    trainer = (call.node, call.chunk)
                if generating is None and (call.method == "generate" or head == "generate"):
                    generating = (call.node, call.chunk)
        if trainer is not None and keeps_eval_logits(self, trainer, self.arguments_call):
            self._set("trainer_eval_logits", True, *trainer)
        self._read_settings()
        self._read_fsdp_precision()
        if self.trainer_arguments is not None and inputs.optimizer is None:  # no optimizer of the script's own either
            self._set("optimizer", "adamw", *self.trainer_arguments)
            self._set("trainer_default_optimizer", True, *self.trainer_arguments)
        if self.trl_config is not None and inputs.gradient_checkpointing is None:  # nothing else turns it on or off
            self._set("gradient_checkpointing", True, *self.trl_config)
            self._set("trl_default_checkpointing", True, *self.trl_config)
        for name, value, node, chunk, note in self.arguments_defaults:  # after everything the script says itself
            if getattr(inputs, name) is None:
                self._set(name, value, node, chunk)
                inputs.notes += [note] if note not in inputs.notes else []
        if self.cast_to_fp32:  # the weights' dtype is the script's, not the release's default
            inputs.default_load_dtype = inputs.loads_checkpoint_dtype = None
        self._read_switched_off()
        if inputs.dtype is None and self.accelerator is not None:
            node, chunk = self.accelerator
            inputs.notes.append(
                f"the Accelerator at line {chunk.line_of(node)} takes its mixed precision from accelerate's own configuration "
                "(`accelerate config` or `accelerate launch --mixed_precision`), not from the script: give --dtype"
            )
        for deleted, scope in self.training.outputs_freed[:1]:
            self._set("outputs_freed", True, deleted, scope.chunk)
        if trainer is not None and not backward:
            self._set("previous_graph_alive", False, *trainer)
        if training is not None:
            self._set("mode", "train", *training)
        elif generating is not None:
            self._set("mode", "generate", *generating)
        elif self.pipeline is not None:  # a pipeline that nothing trains: it generates images
            self._set("mode", "infer", *self.pipeline)
        return inputs

    def _read_fsdp_precision(self) -> None:
        """FSDP's MixedPrecision over fp32 parameters computes in its param_dtype: where the script states no other
        precision, the run keeps fp32 sharded states and 16-bit activations, as under autocast."""
        policy = self.inputs.fsdp_param_dtype
        if self.inputs.dtype is None and policy is not None and policy.value in ("bf16", "fp16") and policy.node is not None:
            assert policy.chunk is not None, "found with its statement"
            self._set("dtype", f"amp-{policy.value}", policy.node, policy.chunk)
            self.inputs.notes.append(f"FSDP's MixedPrecision(param_dtype={policy.value}) at line {policy.line} over fp32 parameters: "
                                     f"read as amp-{policy.value} (fp32 sharded states, {policy.value} compute)")

    # ------------------------------------------------------------------ switches
    def _switch(self, name: str, call, node: cst.CSTNode, chunk: ParsedChunk, value: Any = True, unknown_is_on: bool = True) -> None:
        """A setting a call turns on (checkpointing, compilation, offloading): on, unless a condition around the
        call is false with the script's defaults (`if args.gradient_checkpointing:` over a store_true option),
        when the setting is off, read from the definition that keeps it so (_read_switched_off). A condition the
        script does not settle (a recipe's `if self._optimizer_in_bwd:` over a config file) leaves it on, or with
        ``unknown_is_on`` false not counted, with a note."""
        guard = self._false_by_default(call)
        if guard is None:
            unsettled = None if unknown_is_on else self._unsettled_condition(call)
            if unsettled is None:
                self._set(name, value, node, chunk)
            elif name not in self.inputs.setting_notes:
                flag = _SWITCH_FLAGS.get(name)
                self.inputs.setting_notes[name] = (
                    f"{name.replace('_', ' ')}: line {chunk.line_of(node)} (`{_short(chunk.code_for(node))}`) runs only when "
                    f"`{_short(chunk.code_for(unsettled))}` holds, which the script does not settle: not counted"
                    + (f"; give {flag} if the run turns it on" if flag else "")
                )
            return
        (definition, home), test = guard
        self._switch_off(name, definition, home, (
            f"line {chunk.line_of(node)} (`{_short(chunk.code_for(node))}`) runs only when `{_short(chunk.code_for(test))}` "
            f"holds, false by default (line {home.line_of(definition)})"
        ))

    def _switch_off(self, name: str, definition: cst.CSTNode, home: ParsedChunk, why: str) -> None:
        """Off, from this definition, unless something else turns the setting on (the first reason is kept)."""
        self.switched_off.setdefault(name, (definition, home, why))

    def _read_switched_off(self) -> None:
        for name, (definition, home, why) in self.switched_off.items():
            if getattr(self.inputs, name) is not None:
                continue  # another call turns it on (or states it) unconditionally
            self._set(name, False, definition, home)
            flag = _SWITCH_FLAGS.get(name)
            self.inputs.setting_notes[name] = (
                f"{name.replace('_', ' ')}: {why}: read as off" + (f"; give {flag} if the run turns it on" if flag else "")
            )

    def _false_by_default(self, call) -> tuple[tuple[cst.CSTNode, ParsedChunk], cst.BaseExpression] | None:
        """The definition (and the test) that keeps a call from running with the script's defaults: an `if`
        around it whose test is false by default, or an `else` whose test is true; the same for a conditional
        expression (`model = torch.compile(model) if args.compile else model`)."""
        for test, needs in _conditions_around(call):
            truth = self._truth(test, call.chunk)
            if truth is not None and truth[0] != needs:
                return truth[1], test
        return None

    def _unsettled_condition(self, call) -> cst.BaseExpression | None:
        """The first condition around a call whose value the script does not give (None: every one is settled)."""
        return next((test for test, _ in _conditions_around(call) if self._truth(test, call.chunk) is None), None)

    def _truth(self, test: cst.BaseExpression, chunk: ParsedChunk, depth: int = 0) -> tuple[bool, tuple[cst.CSTNode, ParsedChunk]] | None:
        """Whether a condition holds with the script's defaults, and the definition that decides it; None when unknown."""
        if depth > _MAX_DEPTH:
            return None
        if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
            inner = self._truth(test.expression, chunk, depth + 1)
            return None if inner is None else (not inner[0], inner[1])
        if isinstance(test, cst.BooleanOperation):
            left, right = self._truth(test.left, chunk, depth + 1), self._truth(test.right, chunk, depth + 1)
            deciding = False if isinstance(test.operator, cst.And) else True  # one such side decides
            for side in (left, right):
                if side is not None and side[0] is deciding:
                    return side
            return left if left is not None and right is not None else None
        if isinstance(test, cst.Name) and test.value in ("True", "False", "None"):
            return test.value == "True", (test, chunk)
        if isinstance(test, (cst.Name, cst.Attribute)):
            definition = self._definition(test)
            value = self.value(test, chunk)
            if definition is None or value is UNKNOWN or value is ABSURD or not isinstance(value, (bool, int, float, str, type(None))):
                return None
            return bool(value), definition
        return None

    def _definition(self, node: cst.Name | cst.Attribute) -> tuple[cst.CSTNode, ParsedChunk] | None:
        """Where an option (`args.x`), a config field (`cfg.x`) or a module constant (`X`) gets its default."""
        if isinstance(node, cst.Attribute):
            for table in (self.options, self.fields):
                if node.attr.value in table:
                    _, definition, home = table[node.attr.value]
                    return definition, home
            return None
        entries = self.summary.bindings.get(node.value)
        if not entries or len(entries) != 1:
            return None
        index, expression, _ = entries[0]
        return expression, self.module.chunks[index]

    def _set(self, name: str, value: Any, node: cst.CSTNode, chunk: ParsedChunk) -> None:
        if value is UNKNOWN or value is None or getattr(self.inputs, name) is not None:
            return
        if value is ABSURD and name not in _SIZE_LIMITS:
            return
        code = " ".join(chunk.code_for(node).split())
        if name in _SIZE_LIMITS:
            if isinstance(value, float) and value.is_integer():
                value = int(value)
            if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= _SIZE_LIMITS[name]:
                shown = code if len(code) <= 50 else code[:47] + "..."
                self.inputs.notes.append(f"{name.replace('_', ' ')} at line {chunk.line_of(node)} (`{shown}`) is not a usable size: ignored")
                return
        setattr(self.inputs, name, Found(value, None, code if len(code) <= 70 else code[:67] + "...", node, chunk))

    def _read_call(self, call, node: cst.Call, chunk: ParsedChunk, name: str, head: str) -> None:
        if head == "from_pretrained" and "Pipeline" in name.rsplit(".", 1)[0]:  # diffusers: the whole pipeline
            self._set("model", self.value(self.keyword(node, ("pretrained_model_name_or_path",), 0), chunk), node, chunk)
            self._read_precision_keywords(node, chunk)
            self.pipeline = (node, chunk)
            omitted = tuple(
                PIPELINE_COMPONENTS[arg.keyword.value] for arg in node.args
                if arg.keyword is not None and arg.keyword.value in PIPELINE_COMPONENTS and self.value(arg.value, chunk) is None
            )
            if omitted:
                self._set("omitted_components", omitted, node, chunk)
        elif head == "from_pretrained" and ("AutoModel" in name or "ForCausalLM" in name or "Model" in name.rsplit(".", 1)[0]):
            self._set("model", self.value(self.keyword(node, ("pretrained_model_name_or_path",), 0), chunk), node, chunk)
            if re.search(r"For(?:Sequence|Token|Image|Audio)Classification|ForMultipleChoice", name):
                self._set("head", "classifier", node, chunk)
            self._read_precision_keywords(node, chunk)
            self._read_load_dtype(node, chunk)
        elif name.startswith("timm.") and head == "create_model":
            self._set("model", self.value(self.keyword(node, ("model_name",), 0), chunk), node, chunk)
        elif name.startswith("torchvision.models.") and head[:1].islower() and head != "get_model":
            self._set("model", head, node, chunk)
        elif call.function is None and name:
            self._read_local_class(call, node, chunk, name)
        if name.startswith(("litgpt.", "lit_gpt.")):
            self._set("model_code", "litgpt", node, chunk)
            if head in _LITGPT_MODEL_CALLS:
                self._set("model", self.value(self.keyword(node, _LITGPT_MODEL_CALLS[head], 0), chunk), node, chunk)
        precision = self.value(self.keyword(node, "precision"), chunk)
        if isinstance(precision, str) and precision in _LIGHTNING_PRECISION:
            self._set("dtype", _LIGHTNING_PRECISION[precision], node, chunk)
        if head == "DataLoader" and not self.training.loaders and id(node) not in self.training.other_loaders:
            self._read_loader_batch(node, chunk)  # no training loop names its loader: any loader not known to be another's
        elif head in ("TrainingArguments", "SFTConfig", "Seq2SeqTrainingArguments"):
            self._set("batch_size", self.value(self.keyword(node, _BATCH_KEYWORDS), chunk), node, chunk)
        if head in ("TrainingArguments", "SFTConfig", "Seq2SeqTrainingArguments"):
            self._read_trainer_arguments(node, chunk, head)
        elif head == "SFTTrainer" and self.keyword(node, "args", 1) is None:  # TRL makes an SFTConfig of its defaults
            self._read_trainer_arguments(node, chunk, "SFTConfig")
        if head == "zero_grad":  # Optimizer.zero_grad and Module.zero_grad: set_to_none is their first argument
            frees = self.value(self.keyword(node, "set_to_none", 0), chunk)  # not given: a prepared optimizer's is accelerate's
            accelerated = self.keyword(node, "set_to_none", 0) is None and clears_through_accelerate(self.module, call)
            self._set(*(("zero_grad_frees", frees) if isinstance(frees, bool) else ("zero_grad_accelerated", accelerated or None)), node, chunk)
        if self.keyword(node, _LENGTH_KEYWORDS) is not None:
            self._set("seq_len", self.value(self.keyword(node, _LENGTH_KEYWORDS), chunk), node, chunk)
        if head == "autocast" and not (call.receiver is not None and Tag.ACCELERATOR in call.receiver.tags):
            if not self.training.autocasts and id(node) not in self.training.other_autocasts:
                self._read_autocast(node, chunk)  # no training loop found: any autocast not known to be elsewhere
        elif head == "Accelerator":
            backend = self.value(self.keyword(node, "dynamo_backend"), chunk)
            if isinstance(backend, str) and backend.lower() != "no":
                self._set("compiled", True, node, chunk)  # accelerate compiles the model it prepares
            precision = self.value(self.keyword(node, "mixed_precision"), chunk)
            if isinstance(precision, str) and precision in _ACCELERATE_PRECISION:
                self._set("dtype", _ACCELERATE_PRECISION[precision], node, chunk)
                self._set("autocast", _ACCELERATE_PRECISION[precision] if precision != "no" else None, node, chunk)
            elif self.accelerator is None:
                self.accelerator = (node, chunk)
        elif head == "GradScaler" and self.scaler is None:
            self.scaler = (node, chunk)  # fp16 autocast, unless an autocast call names another dtype
        if head in _OPTIMIZERS and (name.startswith(("torch.optim", "bitsandbytes", "transformers", "lion_pytorch")) or "optim" in name):
            optimizer = _OPTIMIZERS[head]
            if optimizer == "sgd" and isinstance(self.value(self.keyword(node, "momentum", 2), chunk), (int, float)):
                momentum = self.value(self.keyword(node, "momentum", 2), chunk)
                optimizer = "sgd-momentum" if momentum else "sgd"
            self._set("optimizer", optimizer, node, chunk)
            if name.startswith("torch.optim"):
                if self.value(self.keyword(node, "fused"), chunk) is True:
                    self._set("foreach", False, node, chunk)
                elif isinstance(self.value(self.keyword(node, "foreach"), chunk), bool):
                    self._set("foreach", self.value(self.keyword(node, "foreach"), chunk), node, chunk)
        if head == "LoraConfig":
            read_lora_config(self, node, chunk)
        if head == "BitsAndBytesConfig":
            self._read_quantisation(node, chunk)
        if head == "prepare_model_for_kbit_training":
            self._set("kbit_prepared", True, node, chunk)
            if self.value(self.keyword(node, "use_gradient_checkpointing"), chunk) is not False:
                self._set("gradient_checkpointing", True, node, chunk)  # its default
        if call.method in ("enable_model_cpu_offload", "enable_sequential_cpu_offload"):
            self._set("cpu_offload", True, node, chunk)
        if call.method == "enable_vae_tiling":
            self._set("vae_tiling", True, node, chunk)
        if call.method in ("enable_vae_slicing", "enable_attention_slicing"):
            self._set(call.method.removeprefix("enable_"), True, node, chunk)
        if call.method is None and call.callee is None:
            self._read_pipeline_call(node, chunk)
        if self._compiles_the_model(call, name, head):
            self._switch("compiled", call, node, chunk)
            mode = self.value(self.keyword(node, "mode"), chunk)
            if mode in ("reduce-overhead", "max-autotune"):
                self.inputs.notes.append(f"torch.compile(mode={mode!r}) at line {chunk.line_of(node)} records CUDA graphs, "
                                         "whose memory pool is not counted")
        self._read_torchtune_features(call, node, chunk, name, head)
        if head in ("gradient_checkpointing_enable", "enable_gradient_checkpointing", "apply_activation_checkpointing") or name.startswith("torch.utils.checkpoint."):
            self._switch("gradient_checkpointing", call, node, chunk)
        if self.value(self.keyword(node, ("activation_checkpointing", "enable_activation_checkpointing")), chunk) is True:
            self._set("gradient_checkpointing", True, node, chunk)
        if head == "StaticCache":
            self._set("kv_cache_len", self.value(self.keyword(node, "max_cache_len"), chunk), node, chunk)
        if isinstance(self.value(self.keyword(node, "use_cache"), chunk), bool):
            self._set("use_cache", self.value(self.keyword(node, "use_cache"), chunk), node, chunk)
        if self.keyword(node, "attn_implementation") is not None:
            attention = self.value(self.keyword(node, "attn_implementation"), chunk)
            if isinstance(attention, str):
                self._set("attention", "flash" if "flash" in attention else attention if attention in ("eager", "sdpa") else "sdpa", node, chunk)
        if name == "deepspeed.initialize" or head in ("TrainingArguments", "Seq2SeqTrainingArguments", "SFTConfig"):
            config = self.keyword(node, ("config", "config_params", "deepspeed"))
            if config is not None:
                self._read_deepspeed(self.value(config, chunk), node, chunk)
        if head == "DeepSpeedPlugin":
            stage = self.value(self.keyword(node, "zero_stage"), chunk)
            if stage in (1, 2, 3):
                self._set("sharding", f"zero{stage}", node, chunk)
            offloaded = tuple(
                part for part, keyword in (("optimizer", "offload_optimizer_device"), ("params", "offload_param_device"))
                if self.value(self.keyword(node, keyword), chunk) in ("cpu", "nvme")
            )
            if offloaded:
                self._set("offload", offloaded, node, chunk)
        if head in ("DistributedDataParallel", "DDP"):
            self._set("sharding", "ddp", node, chunk)
        elif head in ("FullyShardedDataParallel", "FSDP", "fully_shard", "FullyShardedDataParallelPlugin", "FSDPStrategy"):
            self._read_fsdp(node, chunk, head)
        if head in ("MixedPrecision", "MixedPrecisionPolicy"):  # FSDP's (1 and 2): the dtype units are gathered in
            dtype = self.value(self.keyword(node, "param_dtype", 0), chunk)
            kind = _DTYPE_NAMES.get(last_part(dtype)) if isinstance(dtype, str) else None
            if kind is not None:
                self._set("fsdp_param_dtype", kind, node, chunk)
        if (call.method == "generate" or head == "generate") and self.keyword(node, "max_new_tokens") is not None:
            self._set("max_new_tokens", self.value(self.keyword(node, "max_new_tokens"), chunk), node, chunk)
        if head in ("half", "bfloat16") and call.method in ("half", "bfloat16") and call.receiver is not None and "model" in call.receiver.tags:
            self._set("dtype", "fp16" if head == "half" else "bf16", node, chunk)
        if call.method in ("float", "to") and call.receiver is not None and "model" in call.receiver.tags:
            # `model.float()`, `model.to(device, torch.bfloat16)`: the weights' dtype whatever from_pretrained loaded
            named = [self.value(arg.value, chunk) for arg in node.args if arg.keyword is None or arg.keyword.value == "dtype"]
            kinds = [_DTYPE_NAMES.get(last_part(value)) for value in named if isinstance(value, str)]
            cast = "fp32" if call.method == "float" else next((kind for kind in kinds if kind is not None), None)
            self.cast_to_fp32 = self.cast_to_fp32 or cast == "fp32"
            if cast in ("bf16", "fp16"):
                self._set("dtype", cast, node, chunk)

    def _read_local_class(self, call, node: cst.Call, chunk: ParsedChunk, name: str) -> None:
        """A model class of the workspace built outside any model: the model the script trains."""
        if self._inside_a_model(call):
            return
        info = self.summary.local_class(name)
        if info is not None and self.summary.is_module_class(info) and self.inputs.local_model_class is None:
            elsewhere = self.summary.defined_elsewhere(info) and info.home is not None
            # a class of another workspace file keeps the dotted name it is reached by (`model.GPT`)
            self._set("local_model_class", name if elsewhere else info.name, node, chunk)
            if elsewhere and info.home is not None:
                self.inputs.local_class_home = Path(info.home.path).name

    def _read_pipeline_call(self, node: cst.Call, chunk: ParsedChunk) -> None:
        """A call of a value (`pipe(prompt, height=1024)`) after a diffusers pipeline was loaded: its image size and count."""
        if self.pipeline is None:
            return
        for keyword in ("height", "width"):
            self._set("image_size", self.value(self.keyword(node, keyword), chunk), node, chunk)
        self._set("batch_size", self.value(self.keyword(node, "num_images_per_prompt"), chunk), node, chunk)

    def _read_torchtune_features(self, call, node: cst.Call, chunk: ParsedChunk, name: str, head: str) -> None:
        """torchtune's memory features as its recipes call them, and the plain torch forms of the same: an optimizer
        step in each parameter's post-accumulate-grad hook (training.register_optim_in_bwd_hooks, or
        `p.register_post_accumulate_grad_hook(hook)` with a hook that steps an optimizer, as torch's tutorial
        writes it), and saved tensors offloaded to the CPU (training.OffloadActivations,
        training.get_act_offloading_ctx_manager(model, enable), torch's save_on_cpu). Recipes guard them with
        their config's values: a condition the script does not settle leaves them uncounted, with a note."""
        torchtune = name.startswith("torchtune")
        if (torchtune and head == "register_optim_in_bwd_hooks") or (
            call.method == "register_post_accumulate_grad_hook" and self._steps_an_optimizer(call, node)
        ):
            self._switch("optimizer_in_backward", call, node, chunk, unknown_is_on=False)
        if (torchtune and head == "OffloadActivations") or name == "torch.autograd.graph.save_on_cpu":
            self._switch("activation_offloading", call, node, chunk, unknown_is_on=False)
        elif torchtune and head == "get_act_offloading_ctx_manager":
            enabled = self.keyword(node, "enable_activation_offloading", 1)
            value = self.value(enabled, chunk)
            if value is True:
                self._switch("activation_offloading", call, node, chunk, unknown_is_on=False)
            elif value is False:
                self._set("activation_offloading", False, node, chunk)
            elif enabled is not None and "activation_offloading" not in self.inputs.setting_notes:
                self.inputs.setting_notes["activation_offloading"] = (
                    f"activation offloading: line {chunk.line_of(node)} turns it on when `{_short(chunk.code_for(enabled))}` holds, "
                    f"which the script does not settle: not counted; give {_SWITCH_FLAGS['activation_offloading']} if the run turns it on"
                )

    def _steps_an_optimizer(self, call, node: cst.Call) -> bool:
        """Whether the hook a `register_post_accumulate_grad_hook` call registers is a function of the script whose
        body calls `.step()` (an optimizer's, in the hook: the optimizer runs in the backward)."""
        hook = node.args[0].value if node.args else None
        if not isinstance(hook, cst.Name):
            return False
        function = call.scope.local_functions.get(hook.value) or self.summary.functions.get(hook.value)
        if function is None:
            return False
        return any(isinstance(inner, cst.Call) and isinstance(inner.func, cst.Attribute) and inner.func.attr.value == "step"
                   for inner in walk(function.node))

    @staticmethod
    def _compiles_the_model(call, name: str, head: str) -> bool:
        """torch.compile of a model (`model = torch.compile(model)`; not of a loss function or an optimizer step),
        nn.Module's own `model.compile()`, torchtune's `training.compile_model(model)`."""
        if name == "torch.compile" or (name.startswith("torchtune") and head == "compile_model"):
            return bool(call.args) and Tag.MODEL in call.args[0].tags
        return call.method == "compile" and call.receiver is not None and Tag.MODEL in call.receiver.tags

    def _read_fsdp(self, node: cst.Call, chunk: ParsedChunk, head: str) -> None:
        """FSDP's sharding: FullyShardedDataParallel's (accelerate's plugin's, Lightning's strategy's) sharding_strategy,
        fully_shard's reshard_after_forward (False keeps every unit gathered from its forward to its backward, as
        SHARD_GRAD_OP does). The hybrid strategies shard within a node only: noted, the GPU count is the shard group."""
        if head == "fully_shard" or self.keyword(node, "reshard_after_forward") is not None:
            reshard = self.value(self.keyword(node, "reshard_after_forward"), chunk)
            self._set("sharding", "fsdp-grad-op" if reshard is False else "fsdp", node, chunk)
            return
        strategy = self.keyword(node, "sharding_strategy")
        name = self._enum_name(strategy, chunk) if strategy is not None else "FULL_SHARD"
        sharding = _FSDP_STRATEGIES.get(name.upper() if isinstance(name, str) else name) if name is not None else None
        if sharding is None:  # a strategy that cannot be read: FSDP's default, said so
            self._set("sharding", "fsdp", node, chunk)
            self.inputs.notes.append(f"the sharding strategy at line {chunk.line_of(node)} cannot be read: FULL_SHARD (FSDP's "
                                     "default) assumed; --sharding fsdp-grad-op (SHARD_GRAD_OP) or ddp (NO_SHARD) says otherwise")
            return
        self._set("sharding", sharding, node, chunk)
        if (isinstance(name, str) and "HYBRID" in name.upper()) or name in (4, 5):
            self.inputs.notes.append(f"{name} at line {chunk.line_of(node)} shards within a node and replicates across "
                                     "nodes: give --gpus as the GPUs of one node")

    def _enum_name(self, expression: cst.BaseExpression, chunk: ParsedChunk) -> str | int | None:
        """`ShardingStrategy.SHARD_GRAD_OP`, `"SHARD_GRAD_OP"`, `2`, or a constant holding one: its name (or number)."""
        if isinstance(expression, cst.Attribute):
            return expression.attr.value
        value = self.value(expression, chunk)
        return value if isinstance(value, (str, int)) and not isinstance(value, bool) else None

    def _read_trainer_fsdp(self, node: cst.Call, chunk: ParsedChunk) -> None:
        """TrainingArguments(fsdp="full_shard auto_wrap") (or a list of the options)."""
        options = self.value(self.keyword(node, "fsdp"), chunk)
        words = options.split() if isinstance(options, str) else list(options) if isinstance(options, tuple) else []
        for word in words:
            if isinstance(word, str) and word.upper() in _FSDP_STRATEGIES:
                self._set("sharding", _FSDP_STRATEGIES[word.upper()], node, chunk)
                return

    def _read_loader_batch(self, node: cst.Call, chunk: ParsedChunk) -> None:
        self._set("batch_size", self.value(self.keyword(node, _BATCH_KEYWORDS, 1), chunk), node, chunk)

    def _read_autocast(self, node: cst.Call, chunk: ParsedChunk) -> None:
        dtype = self.value(self.keyword(node, "dtype"), chunk)
        kind = _DTYPE_NAMES.get(last_part(dtype)) if isinstance(dtype, str) else None
        for name in ("dtype", "autocast"):
            self._set(name, "amp-bf16" if kind == "bf16" else "amp-fp16", node, chunk)

    def _inside_a_model(self, call) -> bool:
        """Built inside a model class's method: a part of that model, not the model."""
        function = call.scope.function
        return function is not None and function.owner is not None and self.summary.is_module_class(function.owner)

    def _read_precision_keywords(self, node: cst.Call, chunk: ParsedChunk) -> None:
        dtype = self.value(self.keyword(node, ("torch_dtype", "dtype")), chunk)
        if isinstance(dtype, str) and _DTYPE_NAMES.get(last_part(dtype)) in ("bf16", "fp16"):
            self._set("dtype", _DTYPE_NAMES[last_part(dtype)], node, chunk)
        if self.value(self.keyword(node, "load_in_4bit"), chunk) is True:
            self._set("quant", "nf4", node, chunk)
        elif self.value(self.keyword(node, "load_in_8bit"), chunk) is True:
            self._set("quant", "int8", node, chunk)
        attention = self.value(self.keyword(node, "attn_implementation"), chunk)
        if isinstance(attention, str):
            self._set("attention", "flash" if "flash" in attention else attention if attention in ("eager", "sdpa") else "sdpa", node, chunk)

    def _read_load_dtype(self, node: cst.Call, chunk: ParsedChunk) -> None:
        """A transformers model loaded without a dtype, or with `dtype="auto"`: its weights are in the checkpoint's dtype
        (transformers 5's default, and "auto" in every release) or fp32 (an earlier release's default). A quantised load
        and keyword arguments passed on (`**kwargs`) say nothing here."""
        if any(arg.star == "**" for arg in node.args):
            return
        if self.keyword(node, ("quantization_config", "load_in_4bit", "load_in_8bit")) is not None:
            return
        stated = self.keyword(node, ("torch_dtype", "dtype"))
        if stated is None:
            self._set("default_load_dtype", True, node, chunk)
        elif self.value(stated, chunk) == "auto":
            self._set("default_load_dtype", True, node, chunk)
            self._set("loads_checkpoint_dtype", True, node, chunk)

    def _read_trainer_arguments(self, node: cst.Call, chunk: ParsedChunk, head: str) -> None:
        self.arguments_call = self.arguments_call or (node, chunk)
        for flag in ("bf16", "fp16"):
            if self.value(self.keyword(node, flag), chunk) is True:
                self._set("dtype", f"amp-{flag}", node, chunk)
                self._set("autocast", f"amp-{flag}", node, chunk)
                break
        checkpointing = self.keyword(node, "gradient_checkpointing")
        unpacked = any(arg.star == "**" for arg in node.args)
        if not unpacked and self.keyword(node, _BATCH_KEYWORDS) is None:  # transformers' TrainingArguments default
            self.arguments_defaults.append(("batch_size", 8, node, chunk, "batch size 8: the default per_device_train_batch_size"))
        if head == "SFTConfig" and not unpacked:
            if checkpointing is None:
                self.trl_config = self.trl_config or (node, chunk)  # TRL's own default decides
            if self.keyword(node, ("loss_type", "use_liger_kernel")) is None:  # TRL's default loss: Plan.trl_default_loss
                self._set("trl_default_loss", True, node, chunk)
            elif self.value(self.keyword(node, "loss_type"), chunk) == "chunked_nll":
                self._set("loss", "checkpointed-chunked", node, chunk)
            # TRL's SFTConfig: bf16 unless fp16 (0.19 on; fp32 before), samples truncated at max_length=1024 (SFTTrainer's
            # cap since 0.7, the field's default since 0.15)
            if self.keyword(node, ("bf16", "fp16")) is None:
                self.arguments_defaults += [(name, "amp-bf16", node, chunk, "bf16 autocast: TRL's SFTConfig default without bf16= or "
                                       "fp16= (TRL 0.19 on; fp32 before: give --dtype fp32)") for name in ("dtype", "autocast")]
            if self.keyword(node, ("max_length", "max_seq_length")) is None:
                self.arguments_defaults.append(("seq_len", 1024, node, chunk, "sequence length 1024: TRL's SFTConfig truncates samples "
                                          "at max_length=1024 by default; each batch is padded to its longest"))
        if self.value(checkpointing, chunk) is True:
            self._set("gradient_checkpointing", True, node, chunk)
        elif checkpointing is not None and self.value(checkpointing, chunk) is False:
            where = self._definition(checkpointing) if isinstance(checkpointing, (cst.Name, cst.Attribute)) else None
            definition, home = where if where is not None else (node, chunk)
            self._switch_off("gradient_checkpointing", definition, home, (
                f"`gradient_checkpointing={_short(chunk.code_for(checkpointing))}` at line {chunk.line_of(node)} is false"
                + (f" by default (line {home.line_of(definition)})" if where is not None else "")
            ))
        optim = self.value(self.keyword(node, "optim"), chunk)
        if self.keyword(node, "optim") is None and not any(arg.star == "**" for arg in node.args) and self.trainer_arguments is None:
            self.trainer_arguments = (node, chunk)  # the Trainer's default optimizer, unless the script builds its own
        if isinstance(optim, str) and optim in _TRAINER_OPTIM:
            self._set("optimizer", _TRAINER_OPTIM[optim], node, chunk)
            if optim == "adamw_torch_fused":
                self._set("foreach", False, node, chunk)
        self._read_trainer_fsdp(node, chunk)
        if self.value(self.keyword(node, "torch_compile"), chunk) is True:
            self._set("compiled", True, node, chunk)
        self._set("grad_accum", self.value(self.keyword(node, "gradient_accumulation_steps"), chunk), node, chunk)
        self._set("mode", "train", node, chunk)

    def _read_deepspeed(self, config: Any, node: cst.Call, chunk: ParsedChunk) -> None:
        """A DeepSpeed config given as a dict, or as the path of a JSON file next to the script."""
        if isinstance(config, str) and config.endswith(".json"):
            config = _workspace_json(self.module, config)
        if not isinstance(config, dict):
            return
        zero = config.get("zero_optimization")
        if not isinstance(zero, dict):
            return
        if zero.get("stage") in (1, 2, 3):
            self._set("sharding", f"zero{zero['stage']}", node, chunk)
        offloaded = tuple(
            part for part, key in (("optimizer", "offload_optimizer"), ("params", "offload_param"))
            if isinstance(zero.get(key), dict) and zero[key].get("device") in ("cpu", "nvme")
        )
        if offloaded:
            self._set("offload", offloaded, node, chunk)

    def _read_quantisation(self, node: cst.Call, chunk: ParsedChunk) -> None:
        if self.value(self.keyword(node, "load_in_4bit"), chunk) is True:
            double = self.value(self.keyword(node, "bnb_4bit_use_double_quant"), chunk) is True
            self._set("quant", "nf4-dq" if double else "nf4", node, chunk)
            compute = self.keyword(node, "bnb_4bit_compute_dtype")
            dtype = self.value(compute, chunk)
            if compute is None or (isinstance(dtype, str) and last_part(dtype) in _DTYPE_NAMES):  # left out: fp32
                self._set("quant_compute_fp32", compute is None or _DTYPE_NAMES[last_part(dtype)] == "fp32", node, chunk)
        elif self.value(self.keyword(node, "load_in_8bit"), chunk) is True:
            self._set("quant", "int8", node, chunk)

    def _read_settings(self) -> None:
        """Options and module-level constants, where no call set the value directly."""
        if self.scaler is not None:
            self._set("dtype", "amp-fp16", *self.scaler)
            self._set("autocast", "amp-fp16", *self.scaler)
        for option, (expression, node, chunk) in self.options.items():
            value = self.value(expression, chunk)
            if _BATCH_OPTIONS.match(option):
                self._set("batch_size", value, node, chunk)
            elif _LENGTH_OPTIONS.match(option):
                self._set("seq_len", value, node, chunk)
            elif _ACCUMULATION_NAMES.match(option):
                self._set("grad_accum", value, node, chunk)
            elif option in ("model_name", "model_name_or_path", "model", "base_model", "model_id"):
                if isinstance(value, str):
                    self._set("model", value, node, chunk)
            elif option in ("image_size", "img_size", "resolution"):
                self._set("image_size", value, node, chunk)
        for name, entries in self.summary.bindings.items():
            if len(entries) != 1:
                continue
            index, expression, _ = entries[0]
            chunk = self.module.chunks[index]
            if _BATCH_OPTIONS.match(name):
                self._set("batch_size", self.value(expression, chunk), expression, chunk)
            elif _LENGTH_OPTIONS.match(name):
                self._set("seq_len", self.value(expression, chunk), expression, chunk)
            elif _ACCUMULATION_NAMES.match(name):
                self._set("grad_accum", self.value(expression, chunk), expression, chunk)
            elif name in ("model_name", "model_id", "base_model", "model_name_or_path", "MODEL_NAME", "MODEL_ID"):
                value = self.value(expression, chunk)
                if isinstance(value, str):
                    self._set("model", value, expression, chunk)
        for name, (expression, node, chunk) in self.fields.items():
            value = self.value(expression, chunk)
            if _BATCH_OPTIONS.match(name):
                self._set("batch_size", value, node, chunk)
            elif _LENGTH_OPTIONS.match(name):
                self._set("seq_len", value, node, chunk)
            elif _ACCUMULATION_NAMES.match(name):
                self._set("grad_accum", value, node, chunk)


# What can make a call tell the reader something (``_Reader._read_call`` and ``read``): the last part of its name or
# its method, the start of its name, a keyword it is given. A call with none of them teaches nothing, unless it
# builds a class of the workspace (a model, perhaps) or calls a value (a loaded pipeline, perhaps): ``_calls_read``
# keeps a scope's calls worth reading with the scope, so that a key elsewhere in a long file reads none again.
# Keep these in step with ``_read_call``: tests/test_reading.py reads scripts both ways.
_HEADS_READ = frozenset({
    "from_pretrained", "create_model", "DataLoader", "TrainingArguments", "SFTConfig", "Seq2SeqTrainingArguments",
    "zero_grad", "autocast", "Accelerator", "GradScaler", "LoraConfig", "BitsAndBytesConfig",
    "prepare_model_for_kbit_training", "gradient_checkpointing_enable", "enable_gradient_checkpointing",
    "apply_activation_checkpointing", "StaticCache", "DeepSpeedPlugin", "DistributedDataParallel", "DDP",
    "FullyShardedDataParallel", "FSDP", "fully_shard", "FullyShardedDataParallelPlugin", "FSDPStrategy", "MixedPrecision",
    "MixedPrecisionPolicy", "generate", "half", "bfloat16", "register_optim_in_bwd_hooks", "OffloadActivations",
    "get_act_offloading_ctx_manager", "compile_model", *_OPTIMIZERS, *_LITGPT_MODEL_CALLS,
})
_METHODS_READ = frozenset({
    "enable_model_cpu_offload", "enable_sequential_cpu_offload", "enable_vae_tiling", "enable_vae_slicing",
    "enable_attention_slicing", "register_post_accumulate_grad_hook", "compile", "float", "to", "half", "bfloat16", "generate",
})
_NAMES_READ = ("torchvision.models.", "litgpt.", "lit_gpt.", "torch.utils.checkpoint.", "torchtune", "deepspeed.initialize",
               "torch.compile", "torch.autograd.graph.save_on_cpu")
_KEYWORDS_READ = frozenset({
    "precision", "activation_checkpointing", "enable_activation_checkpointing", "use_cache", "attn_implementation",
    *_LENGTH_KEYWORDS,
})
_CALLS_READ = "the script reader's calls"
_LOCAL_CLASS = "a class of the workspace, perhaps"
_PIPELINE_CALL = "a call of a value, perhaps a pipeline"


def _calls_read(scope: ScopeAnalysis) -> list[tuple[CallEvent, str | None]]:
    """The calls of ``scope`` that can tell the reader something, in order, each with what only it can be (a workspace
    class's construction, a call of a value) or None, for a call ``_read_call`` reads whole."""
    found: list[tuple[CallEvent, str | None]] = []
    for call in scope.calls():
        node = call.node
        if not isinstance(node, cst.Call):
            continue
        name = call.callee or ""
        head = last_part(name) if name else (call.method or "")
        if (head in _HEADS_READ or call.method in _METHODS_READ or name.startswith(_NAMES_READ) or head.endswith("Trainer")
                or any(arg.keyword is not None and arg.keyword.value in _KEYWORDS_READ for arg in node.args)):
            found.append((call, None))
        elif call.function is None and name:
            found.append((call, _LOCAL_CLASS))
        elif call.method is None and call.callee is None:
            found.append((call, _PIPELINE_CALL))
    return found


def _conditions_around(call) -> list[tuple[cst.BaseExpression, bool]]:
    """The tests a call runs under in its function, each with the value it needs: the `if` and `else` branches
    around it, and a conditional expression of its statement (`torch.compile(model) if args.compile else model`)."""
    tests: list[tuple[cst.BaseExpression, bool]] = [
        (condition.test, condition.branch == "if") for condition in call.context.conditions
        if condition.test is not None and condition.branch in ("if", "else")
    ]
    if call.statement is not None:
        for node in walk(call.statement):
            if isinstance(node, cst.IfExp):
                if any(inner is call.node for inner in walk(node.body)):
                    tests.append((node.test, True))
                elif any(inner is call.node for inner in walk(node.orelse)):
                    tests.append((node.test, False))
    return tests


def _short(code: str, limit: int = 60) -> str:
    code = " ".join(code.split())
    return code if len(code) <= limit else code[: limit - 3] + "..."


def workspace_roots(module: ModuleAnalysis) -> list[Path]:
    """The folders files named by the script may be read from: its workspace roots and its own folder."""
    roots = list(module.workspace.roots) if module.workspace is not None else []
    folder = Path(module.path).parent
    if folder.is_dir():  # the script may not be saved yet
        roots.append(folder.resolve())
    return list(dict.fromkeys(roots))


def _workspace_json(module: ModuleAnalysis, name: str) -> Any:
    """A JSON file the script names, relative to its folder or a workspace root (or absolute, inside
    one): workspace files only, regular, bounded in size and depth, never fetched. None otherwise."""
    roots = workspace_roots(module)
    for base in (roots[-1:] + roots[:-1]):  # the script's folder first
        try:
            return read_json(base / name, roots)
        except Unreadable:
            continue
    return None
