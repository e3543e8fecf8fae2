"""A torchtune recipe configuration: the YAML file `tune run RECIPE --config FILE` reads, as memory sees it.

torchtune's recipes take every setting that changes memory from this file (the model builder and its LoRA
options, the batch size, the sequence length, the dtype, the optimizer, the loss, checkpointing, activation
offloading, the optimizer step in the backward, compilation), so `trainlint estimate config.yaml` reads it
instead of a script. Only the plain subset of YAML these files are written in is read (block mappings by
indentation, block and flow sequences of scalars, comments, quoted and plain scalars); anything else leaves
its key unread, never guessed. Every value found names its line, as a script's do.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from .script_inputs import MODEL_COMMENT, Found, ScriptInputs

# torchtune's model builders, as `model._component_` names them (`torchtune.models.llama3_1.lora_llama3_1_8b`), to the
# catalog's ids; `lora_`/`qlora_` and `_instruct`/`_base` name the same architecture.
_BUILDERS = (
    (re.compile(r"^llama(\d)_(\d)_(\d+b)$"), r"llama-\1.\2-\3"),
    (re.compile(r"^llama(\d)_(\d+b)$"), r"llama-\1-\2"),
    (re.compile(r"^qwen2_5_(\d+)_(\d+b)$"), r"qwen2.5-\1.\2"),
    (re.compile(r"^qwen2_5_(\d+b)$"), r"qwen2.5-\1"),
    (re.compile(r"^qwen2_(\d+)_(\d+b)$"), r"qwen2-\1.\2"),
    (re.compile(r"^qwen2_(\d+b)$"), r"qwen2-\1"),
    (re.compile(r"^qwen3_(\d+)_(\d+b)$"), r"qwen3-\1.\2"),
    (re.compile(r"^qwen3_(\d+b)$"), r"qwen3-\1"),
    (re.compile(r"^gemma2_(\d+b)$"), r"gemma-2-\1"),
    (re.compile(r"^gemma_(\d+b)$"), r"gemma-\1"),
    (re.compile(r"^mistral_7b$"), "mistral-7b-v0.1"),  # torchtune's mistral_7b: a 32,000-token vocabulary
    (re.compile(r"^phi3_mini$"), "phi-3-mini-4k"),
    (re.compile(r"^phi4_14b$"), "phi-4"),
)
# torchtune's LoRA module names to the linears of the catalog (Llama's names)
_LORA_MODULES = {"q_proj": "q_proj", "k_proj": "k_proj", "v_proj": "v_proj", "output_proj": "o_proj"}
_OPTIMIZERS = {
    "torch.optim.AdamW": "adamw", "torch.optim.Adam": "adam", "torch.optim.SGD": "sgd",
    "bitsandbytes.optim.PagedAdamW8bit": "paged-adamw-8bit", "bitsandbytes.optim.AdamW8bit": "adamw-8bit",
    "bitsandbytes.optim.PagedAdamW": "paged-adamw", "torchao.optim.AdamW8bit": "adamw-8bit",
}
# torchtune's losses that take the cross-entropy a chunk of tokens at a time: over the model's chunked output, or
# applying the output projection to each chunk of hidden states itself
_CHUNKED_LOSSES = {"CEWithChunkedOutputLoss": "chunked", "LinearCrossEntropyLoss": "projected-chunked"}
_DTYPES = {"bf16": "bf16", "fp32": "fp32"}  # torchtune refuses fp16
_MAX_LINES = 20_000
# A configuration's header names the recipe it is for (`# Config for multi-device full finetuning in
# full_finetune_distributed.py`): the distributed recipes shard the model with FSDP2's fully_shard.
_DISTRIBUTED_RECIPE = re.compile(r"#.*\b\w+_distributed(?:\.py)?\b")


class NotAConfig(ValueError):
    """The file is not a torchtune configuration that can be read."""


@dataclass(frozen=True)
class _Entry:
    value: Any  # a scalar, a list of scalars, a dict of entries, or None
    line: int
    code: str  # the line as written, without its comment


# ---------------------------------------------------------------------- the YAML subset
def _without_comment(line: str) -> str:
    quote = None
    for index, char in enumerate(line):
        if quote is not None:
            quote = None if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#" and (index == 0 or line[index - 1] in " \t"):
            return line[:index].rstrip()
    return line.rstrip()


def _lines(text: str) -> list[tuple[int, int, str]]:
    """(indentation, line number, content) of every line holding something, a flow sequence over several lines
    joined into its first."""
    found: list[tuple[int, int, str]] = []
    pending: tuple[int, int, str] | None = None
    for number, raw in enumerate(text.splitlines()[:_MAX_LINES], start=1):
        content = _without_comment(raw)
        if pending is not None:
            indent, first, joined = pending
            joined += " " + content.strip()
            if joined.count("[") <= joined.count("]"):
                found.append((indent, first, joined))
                pending = None
            else:
                pending = (indent, first, joined)
            continue
        if not content.strip() or content.strip() in ("---", "..."):
            continue
        indent = len(content) - len(content.lstrip(" "))
        if content.count("[") > content.count("]"):
            pending = (indent, number, content.strip())
        else:
            found.append((indent, number, content.strip()))
    return found


def _scalar(text: str) -> Any:
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1]
    if text.startswith("[") and text.endswith("]"):
        items = [item for item in text[1:-1].split(",") if item.strip()]
        return [_scalar(item) for item in items]
    if text.startswith(("{", "&", "*", "!", "|", ">")):
        return _Unreadable
    lowered = text.lower()
    if lowered in ("true", "yes", "on"):
        return True
    if lowered in ("false", "no", "off"):
        return False
    if lowered in ("", "null", "~", "none"):
        return None
    if re.fullmatch(r"[-+]?\d[\d_]*", text):
        return int(text.replace("_", ""))
    if re.fullmatch(r"[-+]?(\d[\d_]*)?\.\d+([eE][-+]?\d+)?", text):
        return float(text.replace("_", ""))
    return text


class _Unreadable:
    """A value in a form this reader does not take (a flow mapping, an anchor, a block scalar): left unread."""


def _block(lines: list[tuple[int, int, str]], start: int, indent: int, depth: int = 0) -> tuple[Any, int]:
    """The mapping or sequence whose lines start at ``start`` with this indentation, and the index after it."""
    if depth > 32:
        return _Unreadable, len(lines)
    if start < len(lines) and lines[start][2].startswith("- "):
        items: list[Any] = []
        index = start
        while index < len(lines) and lines[index][0] == indent and lines[index][2].startswith("- "):
            items.append(_scalar(lines[index][2][2:]))
            index += 1
            while index < len(lines) and lines[index][0] > indent:
                index += 1  # an item's own mapping: not read
        return items, index
    mapping: dict[str, _Entry] = {}
    index = start
    while index < len(lines) and lines[index][0] >= indent:
        line_indent, number, content = lines[index]
        if line_indent > indent or ":" not in content:
            index += 1  # deeper than a key of this mapping, or not a key: skipped
            continue
        key, _, rest = content.partition(":")
        key = key.strip().strip("'\"")
        index += 1
        if rest.strip():
            mapping[key] = _Entry(_scalar(rest), number, content)
        elif index < len(lines) and lines[index][0] > line_indent:
            value, index = _block(lines, index, lines[index][0], depth + 1)
            mapping[key] = _Entry(value, number, content)
        elif index < len(lines) and lines[index][0] == line_indent and lines[index][2].startswith("- "):
            value, index = _block(lines, index, line_indent, depth + 1)  # a sequence at the key's own indentation
            mapping[key] = _Entry(value, number, content)
        else:
            mapping[key] = _Entry(None, number, content)
    return mapping, index


def parse(text: str) -> dict[str, _Entry]:
    """The top-level mapping of a configuration in the YAML subset above."""
    lines = _lines(text)
    if not lines:
        return {}
    mapping, _ = _block(lines, 0, lines[0][0])
    return mapping if isinstance(mapping, dict) else {}


# ---------------------------------------------------------------------- what it says about memory
def read_config(text: str) -> ScriptInputs:
    """What a torchtune configuration says about memory, each value with its line; NotAConfig when the file
    is not one (no torchtune model, optimizer or recipe setting in it)."""
    config = parse(text)
    model = config.get("model")
    component = _component(model)
    if not (component or "").startswith("torchtune.") and not {"optimizer_in_bwd", "enable_activation_checkpointing"} & set(config):
        raise NotAConfig("not a torchtune configuration (a YAML file is read as one: `model: _component_: torchtune.models...`)")
    reader = _ConfigReader(config)
    reader.read_model(model, component)
    reader.read_training()
    for number, line in enumerate(text.splitlines()[:_MAX_LINES], start=1):
        if "#" not in line:
            continue
        match = MODEL_COMMENT.search(line)
        if match is not None and reader.inputs.model_comment is None:
            reader.inputs.model_comment = Found(match.group("model"), number, match.group(0).strip())
        recipe = _DISTRIBUTED_RECIPE.search(line)
        if recipe is not None and reader.inputs.sharding is None:  # the config's own header names its recipe
            reader.inputs.sharding = Found("fsdp", number, line.strip()[:70])
    return reader.inputs


def _component(entry: _Entry | None) -> str | None:
    if entry is None or not isinstance(entry.value, dict):
        return None
    inner = entry.value.get("_component_")
    return inner.value if inner is not None and isinstance(inner.value, str) else None


def _found(entry: _Entry, value: Any) -> Found:
    code = entry.code if len(entry.code) <= 70 else entry.code[:67] + "..."
    return Found(value, entry.line, code)


class _ConfigReader:
    def __init__(self, config: dict[str, _Entry]) -> None:
        self.config = config
        self.inputs = ScriptInputs()

    def _set(self, name: str, entry: _Entry | None, value: Any) -> None:
        if entry is not None and value is not None and value is not _Unreadable and getattr(self.inputs, name) is None:
            setattr(self.inputs, name, _found(entry, value))

    def _flag(self, name: str, key: str) -> None:
        entry = self.config.get(key)
        if entry is not None and isinstance(entry.value, bool):
            self._set(name, entry, entry.value)

    def read_model(self, model: _Entry | None, component: str | None) -> None:
        if model is None or component is None or not isinstance(model.value, dict):
            return
        component_entry = model.value["_component_"]
        builder = component.rsplit(".", 1)[-1]
        quantised = builder.startswith("qlora_")
        adapters = quantised or builder.startswith("lora_")
        name = re.sub(r"_(instruct|base)$", "", re.sub(r"^q?lora_", "", builder))
        model_id = next((pattern.sub(replacement, name) for pattern, replacement in _BUILDERS if pattern.match(name)), None)
        if model_id is not None:
            self._set("model", component_entry, model_id)
        else:
            self.inputs.notes.append(f"torchtune's model builder {builder} (line {component_entry.line}) is not in the catalog: give --model")
        # torchtune's TransformerDecoder: transformers' layers as memory sees them, adapters in the model's dtype
        self._set("model_code", component_entry, "torchtune")
        if component.startswith("torchtune.models."):  # its attention modules call SDPA (flex attention on packed samples)
            self._set("attention", component_entry, "sdpa")
        if quantised:  # torchao's NF4: blocks of 64 with 8-bit scales (as double quantisation); its linear keeps no input
            self._set("quant", component_entry, "nf4-dq")
            self._set("quant_keeps_inputs", component_entry, False)
            self._set("kbit_prepared", component_entry, False)  # torchtune's recipes do not use peft: nothing cast to fp32
            self.inputs.notes.append("torchtune's QLoRA quantises with torchao's NF4 (blocks of 64, 8-bit scales), whose linear "
                                     "keeps no input for the backward (LinearNF4 saves only the weight)")
        if not adapters:
            return
        options = model.value
        rank = options.get("lora_rank")
        self._set("lora_rank", rank, rank.value if rank is not None and isinstance(rank.value, int) and not isinstance(rank.value, bool) else None)
        dropout = options.get("lora_dropout")
        if dropout is not None and isinstance(dropout.value, (int, float)) and not isinstance(dropout.value, bool):
            self._set("lora_dropout", dropout, float(dropout.value))
        elif dropout is None and component.startswith("torchtune.models."):  # the builders' default: lora_dropout=0.0
            self._set("lora_dropout", component_entry, 0.0)
        targets: list[str] = []
        attention = options.get("lora_attn_modules")
        if attention is not None and isinstance(attention.value, list):
            targets += [_LORA_MODULES[module] for module in attention.value if module in _LORA_MODULES]
        if options.get("apply_lora_to_mlp") is not None and options["apply_lora_to_mlp"].value is True:
            targets += ["gate_proj", "up_proj", "down_proj"]
        if options.get("apply_lora_to_output") is not None and options["apply_lora_to_output"].value is True:
            targets.append("lm_head")
        if targets:
            self._set("lora_targets", attention or component_entry, tuple(targets))

    def read_training(self) -> None:
        config = self.config
        for name, key in (("batch_size", "batch_size"), ("grad_accum", "gradient_accumulation_steps")):
            entry = config.get(key)
            if entry is not None and isinstance(entry.value, int) and not isinstance(entry.value, bool) and entry.value >= 1:
                self._set(name, entry, entry.value)
        tokenizer = config.get("tokenizer")
        length = tokenizer.value.get("max_seq_len") if tokenizer is not None and isinstance(tokenizer.value, dict) else None
        dataset = config.get("dataset")
        packed = dataset.value.get("packed") if dataset is not None and isinstance(dataset.value, dict) else None
        if dataset is not None and isinstance(dataset.value, dict) and (packed is None or isinstance(packed.value, bool)):
            # torchtune's datasets are unpacked unless `packed: True`, and its SFT collate pads each batch to its own
            # longest sample, so the batches differ in length; packed samples are all max_seq_len long
            self._set("lengths_vary", packed or dataset, packed is None or packed.value is False)
        if length is not None and isinstance(length.value, int) and not isinstance(length.value, bool) and length.value >= 1:
            self._set("seq_len", length, length.value)
            if packed is None or packed.value is not True:
                self.inputs.notes.append(f"max_seq_len (line {length.line}) caps each sample; unpacked samples are often shorter, "
                                         "so the estimate is for the longest batch")
        elif tokenizer is not None:
            self.inputs.setting_notes["seq_len"] = "the tokenizer's max_seq_len is not set: the sequence length is the dataset's (give --seq-len)"
        dtype = config.get("dtype")
        if dtype is not None and isinstance(dtype.value, str):
            self._set("dtype", dtype, _DTYPES.get(dtype.value))
        self._flag("gradient_checkpointing", "enable_activation_checkpointing")
        self._flag("activation_offloading", "enable_activation_offloading")
        self._flag("optimizer_in_backward", "optimizer_in_bwd")
        self._flag("compiled", "compile")
        optimizer = config.get("optimizer")
        component = _component(optimizer)
        if optimizer is not None and component is not None and isinstance(optimizer.value, dict):
            self._set("optimizer", optimizer.value["_component_"], _OPTIMIZERS.get(component))
            if component not in _OPTIMIZERS:
                self.inputs.notes.append(f"the optimizer {component} (line {optimizer.line}) is not modelled: AdamW assumed")
            fused = optimizer.value.get("fused")
            if fused is not None and fused.value is True:
                self._set("foreach", fused, False)
        loss = _component(config.get("loss"))
        if loss is not None:
            loss_entry = config["loss"].value["_component_"]
            self._set("loss", loss_entry, _CHUNKED_LOSSES.get(loss.rsplit(".", 1)[-1], "standard"))
        self._read_sharding()
        new_tokens = config.get("max_new_tokens")
        if new_tokens is not None and "optimizer" not in config and isinstance(new_tokens.value, int):
            self._set("mode", new_tokens, "generate")
            self._set("max_new_tokens", new_tokens, new_tokens.value)
        elif optimizer is not None:
            self._set("mode", optimizer, "train")
            # the recipes take the loss in `_loss_step`, which deletes the model's outputs before returning it: the
            # backward starts with the loss alone, as in the HF Trainer's step
            self._set("previous_graph_alive", config["loss"] if "loss" in config else optimizer, False)
            # and they zero the gradients with `zero_grad(set_to_none=True)` after each step
            self._set("zero_grad_frees", optimizer, True)

    def _read_sharding(self) -> None:
        """The distributed recipes shard with FSDP2's fully_shard: their configs set its options."""
        config = self.config
        keys = [key for key in ("fsdp_cpu_offload", "fsdp_reshard_after_forward", "data_parallel_shard_dim") if key in config]
        if not keys:
            return
        reshard = config.get("fsdp_reshard_after_forward")
        self._set("sharding", config[keys[0]], "fsdp-grad-op" if reshard is not None and reshard.value is False else "fsdp")
        offload = config.get("fsdp_cpu_offload")
        if offload is not None and offload.value is True:
            self._set("offload", offload, ("optimizer", "params"))
