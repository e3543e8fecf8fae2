"""bitsandbytes' NF4 ``Linear4bit`` as far as memory goes, for models of fake tensors (bitsandbytes itself
needs real storage): the packed weight (half a byte an element) and its absmax, a dequantised copy per
matmul, and the input kept for the backward. Shared by the LitGPT calibration scripts."""

from __future__ import annotations

import torch


class MatMul4Bit(torch.autograd.Function):
    """bitsandbytes' MatMul4Bit, memory-wise: dequantise (a new tensor of the stored dtype), cast to the
    input's dtype, multiply; the input is kept for the backward, which dequantises and casts again."""

    @staticmethod
    def forward(ctx, A, packed, shape, stored_dtype, bias):
        weight = torch.empty(shape, dtype=stored_dtype, device=A.device).to(A.dtype)
        output = torch.nn.functional.linear(A, weight, bias)
        ctx.shape, ctx.stored_dtype = shape, stored_dtype
        # bitsandbytes keeps (A, B) as ctx.tensors: alive until the graph is freed, whatever the backward
        # does. Saved as well (the same storage, no more memory) so that saved-tensor hooks see it.
        ctx.kept_input = A
        ctx.save_for_backward(A)
        return output

    @staticmethod
    def backward(ctx, grad_output):
        weight = torch.empty(ctx.shape, dtype=ctx.stored_dtype, device=grad_output.device).to(grad_output.dtype)
        return grad_output @ weight, None, None, None, None


class Linear4bit(torch.nn.Module):
    def __init__(self, linear: torch.nn.Linear, stored_dtype: torch.dtype = torch.float16) -> None:
        super().__init__()
        out_features, in_features = linear.weight.shape
        elements = out_features * in_features
        self.weight = torch.nn.Parameter(torch.empty(elements // 2, 1, dtype=torch.uint8), requires_grad=False)
        self.register_buffer("absmax", torch.empty(elements // 64, dtype=torch.float32))
        self.bias = None if linear.bias is None else torch.nn.Parameter(linear.bias.detach(), requires_grad=False)
        self.shape = (out_features, in_features)
        self.in_features, self.out_features = in_features, out_features
        self.stored_dtype = stored_dtype

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return MatMul4Bit.apply(x, self.weight, self.shape, self.stored_dtype, self.bias)


def quantise(module: torch.nn.Module) -> None:
    """Replaces every frozen ``nn.Linear`` under ``module`` by a ``Linear4bit``."""
    for name, child in module.named_children():
        if isinstance(child, torch.nn.Linear) and not child.weight.requires_grad:
            setattr(module, name, Linear4bit(child))
        else:
            quantise(child)
