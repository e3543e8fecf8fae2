"""What the script reader gives: each setting it found in a training script (``ScriptInputs``), with
the value, the line and the code it came from (``Found``), and the notes on what it left open."""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from typing import Any

import libcst as cst

from trainlint.rules import ParsedChunk


@dataclass(frozen=True, eq=False)
class Found:
    value: Any
    known_line: int | None  # None: read off ``node`` when asked (placing a node of a long class can cost a second)
    code: str
    node: cst.CSTNode | None = field(default=None, repr=False)
    chunk: ParsedChunk | None = field(default=None, repr=False)

    @property
    def line(self) -> int:
        assert self.known_line is not None or (self.node is not None and self.chunk is not None)
        return self.known_line if self.known_line is not None else self.chunk.line_of(self.node)  # type: ignore[union-attr,arg-type]

    def __eq__(self, other: object) -> bool:  # by the line, read or not yet
        return isinstance(other, Found) and (self.value, self.line, self.code) == (other.value, other.line, other.code)

    @property
    def source(self) -> str:
        return f"line {self.line}: `{self.code}`"


@dataclass
class ScriptInputs:
    model_comment: Found | None = None  # value: what a `# trainlint: model=...` comment names
    model: Found | None = None  # value: a model id (Hugging Face id, torchvision/timm name)
    # value: the name of an nn.Module class of the script, or the dotted name of one imported from a workspace file
    local_model_class: Found | None = None
    local_class_home: str | None = None  # the file that defines local_model_class, when not the script
    mode: Found | None = None
    batch_size: Found | None = None
    seq_len: Found | None = None
    image_size: Found | None = None
    dtype: Found | None = None
    autocast: Found | None = None  # the training's autocast (Trainer's bf16/fp16, accelerate's, torch.autocast): amp-*
    optimizer: Found | None = None
    lora_rank: Found | None = None
    lora_targets: Found | None = None
    lora_dropout: Found | None = None
    modules_to_save: Found | None = None  # LoraConfig(modules_to_save=...): "embeddings" and/or "lm_head"
    grad_accum: Found | None = None
    foreach: Found | None = None  # False for fused=True or foreach=False optimizers
    head: Found | None = None  # "classifier" for ...ForSequenceClassification and friends
    cpu_offload: Found | None = None  # diffusers' enable_model_cpu_offload / enable_sequential_cpu_offload
    vae_tiling: Found | None = None
    vae_slicing: Found | None = None
    attention_slicing: Found | None = None
    kv_cache_len: Found | None = None  # StaticCache(max_cache_len=...)
    kbit_prepared: Found | None = None  # peft's prepare_model_for_kbit_training(model)
    model_code: Found | None = None  # "litgpt": the script runs LitGPT's own model classes
    # False where a Trainer runs each step inside a method (transformers', TRL's, Lightning's): the
    # step's graph is gone when it returns, so the next step never holds the previous one's
    previous_graph_alive: Found | None = None
    outputs_freed: Found | None = None  # True: the training step deletes the model's output before its backward
    quant: Found | None = None
    gradient_checkpointing: Found | None = None
    compiled: Found | None = None  # torch.compile (or nn.Module.compile) of the model
    fsdp_param_dtype: Found | None = None  # FSDP's MixedPrecision(param_dtype=...): the gathered units' dtype
    omitted_components: Found | None = None  # diffusers: components loaded as None (text_encoder_3=None)
    trainer_default_optimizer: Found | None = None  # True: TrainingArguments leaves the optimizer to the Trainer
    trainer_eval_logits: Found | None = None  # True: the Trainer's evaluation keeps its logits on the device
    # zero_grad(set_to_none=...) stated: True frees the gradients before the next forward, False zeroes them in place
    zero_grad_frees: Found | None = None
    zero_grad_accelerated: Found | None = None  # zero_grad() of an optimizer an Accelerator prepared, set_to_none not given
    # each parameter's optimizer step in its post-accumulate-grad hook (torchtune's optimizer_in_bwd)
    optimizer_in_backward: Found | None = None
    activation_offloading: Found | None = None  # saved tensors in CPU memory (torchtune's OffloadActivations)
    loss: Found | None = None  # "chunked": the loss over the vocabulary a chunk of tokens at a time
    quant_keeps_inputs: Found | None = None  # whether the quantised linears keep their inputs (a known library's)
    quant_compute_fp32: Found | None = None  # BitsAndBytesConfig's bnb_4bit_compute_dtype is fp32 (or left to its default)
    lengths_vary: Found | None = None  # whether training batches differ in length (unpacked samples padded per batch)
    trl_default_checkpointing: Found | None = None  # True: a TRL SFTConfig leaves gradient checkpointing to TRL's default
    trl_default_loss: Found | None = None  # True: a TRL SFTConfig leaves loss_type to TRL's default
    # True: a model loaded by `from_pretrained` without a dtype, so in the checkpoint's from transformers 5 on (Plan's)
    default_load_dtype: Found | None = None
    loads_checkpoint_dtype: Found | None = None  # True: `dtype="auto"` stated, the checkpoint's dtype in every release
    attention: Found | None = None
    use_cache: Found | None = None  # use_cache=True/False in a call: whether a causal LM's forward returns its KV cache
    sharding: Found | None = None
    offload: Found | None = None
    max_new_tokens: Found | None = None
    notes: list[str] = field(default_factory=list)
    # notes on a setting the script leaves off or open, by the setting (dropped where the command line states it)
    setting_notes: dict[str, str] = field(default_factory=dict)

    def found(self) -> dict[str, Found]:
        return {name: value for name, value in vars(self).items() if isinstance(value, Found)}


# `# trainlint: model=meta-llama/Meta-Llama-3-8B` (or a catalog id, or a path to a config.json): the model to
# estimate this file for, when the script does not name it in a form that can be read.
MODEL_COMMENT = re.compile(r"#\s*trainlint:\s*model\s*=\s*(?P<model>[^\s#]+)", re.I)


def with_model_comment(inputs: ScriptInputs, text: str) -> ScriptInputs:
    """``inputs`` with the model the text's first ``# trainlint: model=...`` comment names (over a config's);
    ``inputs`` itself when there is none (it may be a value kept across edits: never changed here)."""
    if "trainlint:" not in text:
        return inputs
    for number, line in enumerate(text.splitlines(), start=1):
        match = MODEL_COMMENT.search(line) if "#" in line else None
        if match is not None:
            return dataclasses.replace(inputs, model_comment=Found(match.group("model"), number, match.group(0).strip()))
    return inputs
