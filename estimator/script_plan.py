"""From what a script says to a plan's settings: the command line's overrides first, then the script's
values, then the defaults, each setting named with where it came from.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .script_inputs import Found, ScriptInputs

_PLAN_FIELDS = (
    "mode", "batch_size", "seq_len", "image_size", "dtype", "optimizer", "lora_rank", "lora_targets", "lora_dropout", "modules_to_save",
    "quant", "gradient_checkpointing", "attention", "sharding", "offload", "grad_accum", "foreach", "head",
    "cpu_offload", "vae_tiling", "vae_slicing", "attention_slicing", "kv_cache_len", "checkpoint_every", "checkpoint_policy", "checkpoint_reentrant", "kbit_prepared",
    "model_code", "previous_graph_alive", "compiled", "fsdp_param_dtype", "omitted_components", "trainer_default_optimizer",
    "optimizer_in_backward", "activation_offloading", "tensor_parallel", "loss", "quant_keeps_inputs", "lengths_vary",
    "use_cache", "trl_default_checkpointing", "trl_default_loss", "zero_grad_frees", "zero_grad_accelerated", "outputs_freed",
    "quant_compute_fp32", "default_load_dtype", "loads_checkpoint_dtype", "trainer_eval_logits",
)
DEFAULTS = {"mode": "train", "batch_size": 1, "dtype": "fp32", "optimizer": "adamw", "attention": "sdpa", "sharding": "ddp"}


@dataclass
class ScriptPlan:
    settings: dict[str, Any]  # Plan keyword arguments, model excluded
    inputs: dict[str, tuple[Any, str]]  # what the report lists: value and where it came from
    model_name: str | None
    model_source: str | None
    unknown_reason: str | None = None
    notes: list[str] = field(default_factory=list)  # values of the script that were not usable


NO_MODEL = "no model found in the script"


def plan_settings(read: ScriptInputs | None, overrides: dict[str, Any], fallback_model: str | None = None) -> ScriptPlan:
    """Merge what the script says with the command line's overrides and the defaults, naming each source.
    The model: the command line's, a `# trainlint: model=` comment's, the script's, else ``fallback_model``
    (the editor's `targetModel` setting)."""
    settings: dict[str, Any] = {}
    inputs: dict[str, tuple[Any, str]] = {}
    found = read.found() if read is not None else {}
    for name in _PLAN_FIELDS:
        if name == "trainer_default_optimizer" and overrides.get("optimizer") is not None:
            continue  # the command line names the optimizer
        if overrides.get(name) is not None:
            settings[name] = overrides[name]
            inputs[name] = (overrides[name], "command line")
        elif name in found:
            settings[name] = found[name].value
            inputs[name] = (found[name].value, found[name].source)
        elif name in DEFAULTS:
            settings[name] = DEFAULTS[name]
            inputs[name] = (DEFAULTS[name], "assumed")
    for name in ("lora_targets", "offload", "omitted_components"):
        if name in settings:
            settings[name] = tuple(settings[name])
    autocast = found.get("autocast")
    if (autocast is not None and "dtype" in found and found["dtype"].value in ("bf16", "fp16") and overrides.get("dtype") is None
            and settings.get("lora_rank") is not None and settings.get("quant") is None):
        # a 16-bit base loaded for adapters and trained under an autocast: amp with adapters is that (costmodel)
        settings["dtype"] = autocast.value
        settings["lora_base_16bit"] = True
        inputs["dtype"] = (autocast.value, f"{found['dtype'].source}, under the autocast of {autocast.source}")
    if overrides.get("dtype") is not None:  # the command line states the weights' dtype
        for name in ("default_load_dtype", "loads_checkpoint_dtype"):
            settings.pop(name, None)
            inputs.pop(name, None)
    if inputs["attention"][1] == "assumed":  # nobody chose the kernel: the estimate covers eager attention too
        settings["attention"] = None
    new_tokens = overrides.get("max_new_tokens") or (found["max_new_tokens"].value if "max_new_tokens" in found else None)
    if overrides.get("max_context") is not None:
        settings["max_context"] = overrides["max_context"]
        inputs["max_context"] = (overrides["max_context"], "command line")
    elif new_tokens is not None and settings.get("seq_len"):
        settings["max_context"] = settings["seq_len"] + new_tokens
        inputs["max_context"] = (settings["max_context"], f"sequence length plus {new_tokens} new tokens ({found['max_new_tokens'].source})")
    model_name, model_source, reason = None, None, None
    if overrides.get("model"):
        model_name, model_source = overrides["model"], "command line"
    elif "model_comment" in found:
        model_name, model_source = found["model_comment"].value, found["model_comment"].source
    elif "model" in found:
        model_name, model_source = found["model"].value, found["model"].source
    elif "local_model_class" in found:
        local = found["local_model_class"]
        inputs = {"model": (_local_class_shown(read, local), local.source), **inputs}
    elif fallback_model:
        model_name, model_source = fallback_model, "the targetModel setting"
    else:
        reason = NO_MODEL
    if model_name is not None and model_source is not None:  # every branch that names a model names its source
        inputs = {"model": (model_name, model_source), **{k: v for k, v in inputs.items() if k != "model"}}
    notes = list(read.notes) if read is not None else []
    if read is not None:
        notes += [note for name, note in read.setting_notes.items() if overrides.get(name) is None]
    return ScriptPlan(settings, inputs, model_name, model_source, reason, notes)


def _local_class_shown(read: ScriptInputs | None, local: Found) -> str:
    """`Net (a class of the script)`, or `GPT (a class of model.py)` for one imported from a workspace file."""
    name, home = str(local.value), read.local_class_home if read is not None else None
    if home is None:
        return f"{name} (a class of the script)"
    return f"{name.rsplit('.', 1)[-1]} (a class of {home})"
