"""What a transformer layer keeps under CUDA autocast (AMP), against the same layer in pure 16 bits.

On CPU fake tensors ``torch.autocast("cpu")`` follows the CPU policy, which runs softmax and layer
norm in 16 bits; CUDA's runs them in fp32. So this emulates CUDA's policy at the function level, for
the ops a transformer layer calls: matmuls, linears and attention take 16-bit inputs (a parameter's
cast is cached, as autocast caches casts of leaf tensors that require grad; an activation is cast
again at every op), and the ops on CUDA's fp32 list (softmax, log_softmax, layer_norm, pow, rsqrt,
exp, sum, cross_entropy, ...) take fp32. The model keeps fp32 weights, as under AMP ("amp"), or 16-bit
weights, as FSDP's MixedPrecision(param_dtype=bf16) gathers them under the same autocast ("amp16"). Then the
same saved-tensor count as ``activations.py`` (the second of three layers).
``layer_activations.autocast_layer_adjustment`` derives both differences from the config; this checks it.

    python amp_activations.py OUT.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch
import torch.nn.functional as F
import transformers
from torch.overrides import TorchFunctionMode

sys.path.insert(0, str(Path(__file__).resolve().parent))
import activations  # noqa: E402
from param_counts import DEFAULT_CATALOG  # noqa: E402

ARCHITECTURES = ("llama-3.2-1b", "llama-3-8b", "qwen2.5-0.5b", "gemma-2b", "gpt2", "bert-base-uncased", "phi-3-mini-4k")
SHAPES = ((2, 256), (2, 512))
LOW = torch.bfloat16
_LOW_OPS = {F.linear, torch.matmul, torch.Tensor.matmul, torch.bmm, torch.baddbmm, torch.addmm, torch.mm, torch.Tensor.__matmul__,
            F.scaled_dot_product_attention, torch.Tensor.bmm, torch.Tensor.mm, torch.conv1d, torch.conv2d, F.conv1d, F.conv2d}
_FP32_OPS = {F.softmax, torch.softmax, torch.Tensor.softmax, F.log_softmax, torch.log_softmax, torch.Tensor.log_softmax,
             F.layer_norm, torch.layer_norm, torch.Tensor.pow, torch.pow, torch.rsqrt, torch.Tensor.rsqrt, torch.exp,
             torch.Tensor.exp, torch.sum, torch.Tensor.sum, F.cross_entropy, F.nll_loss, torch.Tensor.__pow__}


class CudaAutocast(TorchFunctionMode):
    """CUDA autocast's casts, applied where the function is called."""

    def __init__(self) -> None:
        super().__init__()
        self.cache: dict[int, torch.Tensor] = {}

    def _cast(self, value, dtype):
        if not isinstance(value, torch.Tensor) or not value.is_floating_point() or value.dtype == dtype:
            return value
        if isinstance(value, torch.nn.Parameter) and value.requires_grad:
            key = id(value)
            if key not in self.cache:
                self.cache[key] = value.to(dtype)
            return self.cache[key]
        return value.to(dtype)

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        dtype = LOW if func in _LOW_OPS else torch.float32 if func in _FP32_OPS else None
        if dtype is not None:
            args = tuple(self._cast(a, dtype) for a in args)
            kwargs = {k: self._cast(v, dtype) for k, v in kwargs.items()}
            if func in _FP32_OPS and "dtype" in kwargs:
                kwargs.pop("dtype")
        return func(*args, **kwargs)


def _fp32_weights(model):
    for parameter in model.parameters():
        parameter.data = parameter.data.float()
    return model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", type=Path)
    args = parser.parse_args()
    catalog = {a["id"]: a for a in json.loads(DEFAULT_CATALOG.read_text())}
    results = {}
    for arch_id in ARCHITECTURES:
        a = catalog[arch_id]
        entry = {}
        for attention in ("sdpa", "eager"):
            rows = {}
            for name, transform, mode in (("bf16", None, None), ("amp", _fp32_weights, CudaAutocast), ("amp16", None, CudaAutocast)):
                per_token = []
                for batch, seq in SHAPES:
                    if mode is None:
                        row = activations.measure(a, attention, batch, seq, 0.0)
                    else:
                        with mode():
                            row = activations.measure(a, attention, batch, seq, 0.0, transform=transform)
                    per_token.append(activations._per_token(row, a["hidden"]))
                rows[name] = [round(value, 3) for value in per_token]
            entry[attention] = rows
        results[arch_id] = entry
        print(arch_id, entry, flush=True)
    meta = {"torch": torch.__version__, "transformers": transformers.__version__, "shapes": SHAPES, "low": "bf16",
            "unit": "bytes per token and hidden unit, one layer, no dropout"}
    args.out.write_text(json.dumps({**meta, "layers": results}, indent=1) + "\n")


if __name__ == "__main__":
    main()
