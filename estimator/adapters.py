"""LoRA adapters as the cost model counts them: their parameters (per layer, and once on the LM head), the bytes
each parameter takes, and what the LM head's adapter keeps for the backward. The states (costmodel.py) and the
activations (activation_terms.py) both ask."""

from __future__ import annotations

from .architectures import LM_HEAD_NAMES, Shape
from .plan import PRECISION, CannotEstimate, Plan


def lora_params(plan: Plan, geometry: Shape | None) -> int:
    if plan.lora_rank is None or geometry is None:
        return 0
    per_layer = 0
    for target in plan.lora_targets:
        if target in LM_HEAD_NAMES:
            continue  # once, not per layer: head_adapter_params
        dims = adapter_dims(geometry, target)
        if dims is None:
            raise CannotEstimate(f"LoRA target {target!r} is not a linear of this model: {', '.join(sorted(geometry.lora_dims))}")
        per_layer += plan.lora_rank * (dims[0] + dims[1])
    return geometry.layers * per_layer + head_adapter_params(plan, geometry)


def adapter_dims(geometry: Shape, target: str) -> tuple[int, int] | None:
    """(d_in, d_out) of the linear an adapter on ``target`` wraps. `qkv_proj` on a model whose config has separate
    query, key and value projections is one adapter over the three fused (GPT-2's and Qwen 1.0's `c_attn`, Baichuan's
    `W_pack`): the hidden size in, the three widths out, one input kept instead of three."""
    dims = geometry.lora_dims.get(target)
    if dims is None and target == "qkv_proj" and {"q_proj", "k_proj", "v_proj"} <= geometry.lora_dims.keys():
        query, key, value = (geometry.lora_dims[name] for name in ("q_proj", "k_proj", "v_proj"))
        return query[0], query[1] + key[1] + value[1]
    return dims


def targets_the_head(plan: Plan) -> bool:
    return plan.lora_rank is not None and any(target in LM_HEAD_NAMES for target in plan.lora_targets)


def head_adapter_params(plan: Plan, geometry: Shape) -> int:
    """LoRA on the LM head (`lm_head`, GPT-NeoX's `embed_out`): one adapter from the hidden size to the vocabulary,
    A (rank x hidden) and B (vocab x rank)."""
    if not targets_the_head(plan):
        return 0
    kind = plan.model.kind if plan.model is not None else None
    if not geometry.vocab or kind not in ("decoder", "encoder-decoder") or plan.head != "lm":
        raise CannotEstimate("LoRA on the LM head: this model has no LM head over a vocabulary")
    assert plan.lora_rank is not None, "a plan with adapters"
    return plan.lora_rank * (geometry.hidden + geometry.vocab)


def head_adapter_kept(plan: Plan, geometry: Shape, tokens: int) -> float:
    """What the LM head's adapter keeps for the backward, as a layer's adapters do: its input (the final norm's
    output) cast to the adapter's dtype (peft: fp32), a dropout mask of a byte per element when lora_dropout > 0,
    and its rank-wide inner activation. Its vocabulary-wide output is added to the frozen head's logits and freed."""
    if not targets_the_head(plan) or plan.mode != "train":
        return 0.0
    assert plan.lora_rank is not None, "a plan with adapters"
    adapter = bytes_per_adapter_param(plan)
    mask = 0.5 if plan.lora_dropout is None else (1.0 if plan.lora_dropout > 0 else 0.0)
    return tokens * ((adapter + mask) * geometry.hidden + adapter * plan.lora_rank)


def bytes_per_adapter_param(plan: Plan) -> int:
    """Bytes per adapter parameter: peft keeps adapters in fp32; LitGPT builds them in the model's dtype, and so does
    torchtune (its recipes build the model under `training.set_default_dtype(self._dtype)`, the LoRALinear's
    `lora_a`/`lora_b` included, and check it with `validate_expected_param_dtype`: recipes/lora_finetune_single_device.py)."""
    return PRECISION[plan.dtype][0] if adapters_in_model_dtype(plan) else 4


def adapters_in_model_dtype(plan: Plan) -> bool:
    """Whether the plan's code builds its LoRA adapters in the model's dtype rather than peft's fp32."""
    return plan.model_code in ("litgpt", "torchtune")


def saved_module_params(plan: Plan, geometry: Shape | None) -> int:
    """Parameters of the trainable copies peft makes for `modules_to_save` (ModulesToSaveWrapper.update:
    `copy.deepcopy(self.original_module)`, the original frozen beside it, src/peft/utils/other.py): the input
    embeddings and the LM head (an untied head's own matrix; a tied one shares the embeddings')."""
    if plan.lora_rank is None or plan.mode != "train" or not plan.modules_to_save:
        return 0
    if geometry is None or not geometry.vocab:
        raise CannotEstimate("modules to save: modelled for models with a vocabulary's embeddings and LM head")
    saved = geometry.embedding_params if "embeddings" in plan.modules_to_save else 0
    if "lm_head" in plan.modules_to_save:
        saved += geometry.lm_head_params or (0 if "embeddings" in plan.modules_to_save else geometry.embedding_params)
    return saved
