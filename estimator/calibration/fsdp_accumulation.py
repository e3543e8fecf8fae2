"""The gradients FSDP accumulates between micro-batches without syncing them: torch's own FSDP code on the CPU.

Under ``no_sync()`` (FSDP1) or ``set_requires_gradient_sync(False)`` (FSDP2, ``fully_shard``), which accelerate's
``accumulate`` and the HF Trainer enter on every micro-batch but the last, FSDP does not reduce-scatter the gradients:
each unit keeps the gradient autograd computed for its gathered (unsharded) parameters, added up over the
micro-batches. This replays two micro-batches of a two-unit model on one process (gloo, world size 1) under each
mixed-precision policy and reads, per parameter, the bytes of every unsharded gradient tensor FSDP then holds:
FSDP1 keeps its flat parameter's gradient in ``param_dtype``; FSDP2 keeps it in ``param_dtype`` unless its
``reduce_dtype`` is wider, when it upcasts it (``FSDPParam.to_accumulated_grad_if_needed``). accelerate sets both
to the mixed-precision dtype. Needs torch only:

    python fsdp_accumulation.py OUT.json
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn

_BYTES = {torch.float32: 4, torch.bfloat16: 2, torch.float16: 2}
_DTYPES = {"bf16": torch.bfloat16, "fp32": torch.float32}


def _model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 64))


def _micro_batches(model: nn.Module) -> None:
    for _ in range(2):
        model(torch.randn(4, 64)).float().sum().backward()


def fsdp1(param_dtype: str, reduce_dtype: str) -> tuple[int, int]:
    from torch.distributed.fsdp import FullyShardedDataParallel, MixedPrecision

    model = FullyShardedDataParallel(_model(), device_id=torch.device("cpu"), use_orig_params=True, mixed_precision=MixedPrecision(
        param_dtype=_DTYPES[param_dtype], reduce_dtype=_DTYPES[reduce_dtype]))
    with model.no_sync():
        _micro_batches(model)
    flat = model._handle.flat_param  # the unit's one flat parameter: its gradient is what FSDP1 holds
    return flat.grad.numel() * _BYTES[flat.grad.dtype], flat.numel()


def fsdp2(param_dtype: str, reduce_dtype: str) -> tuple[int, int]:
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    model = _model()
    fully_shard(model, mp_policy=MixedPrecisionPolicy(param_dtype=_DTYPES[param_dtype], reduce_dtype=_DTYPES[reduce_dtype]))
    model.set_requires_gradient_sync(False)
    _micro_batches(model)
    held = 0
    for fsdp_param in model._get_fsdp_state()._fsdp_param_group.fsdp_params:
        for grad in (fsdp_param.unsharded_accumulated_grad, fsdp_param._unsharded_param.grad):
            held += 0 if grad is None else grad.numel() * _BYTES[grad.dtype]
    return held, sum(parameter.numel() for parameter in model.parameters())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path)
    args = parser.parse_args()
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29517")
    dist.init_process_group("gloo", rank=0, world_size=1)
    rows = []
    for version, replay in (("fsdp1", fsdp1), ("fsdp2", fsdp2)):
        for param_dtype, reduce_dtype in (("bf16", "bf16"), ("bf16", "fp32"), ("fp32", "fp32")):
            held, params = replay(param_dtype, reduce_dtype)
            rows.append({"fsdp": version, "param_dtype": param_dtype, "reduce_dtype": reduce_dtype,
                         "bytes_per_parameter": held / params})
    dist.destroy_process_group()
    args.out.write_text(json.dumps({
        "torch": torch.__version__, "micro_batches": 2,
        "unit": "bytes of the unsharded gradients FSDP holds between micro-batches, per parameter",
        "rows": rows,
    }, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
