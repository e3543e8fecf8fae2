"""What a chunked cross-entropy keeps for its backward when its per-chunk function is compiled, against eager: measured
on the CPU with torch alone.

A chunked loss (torchtune's CEWithChunkedOutputLoss: the output projection applied to each of 8 chunks of tokens,
each chunk's 16-bit logits upcast to fp32 and given to the cross-entropy alone) keeps, eagerly, each chunk's fp32
log-softmax (autograd saves the result of log_softmax) beside the 16-bit logits the model returned. torchtune's
documentation of the class recommends compiling only the per-chunk function (``compute_cross_entropy``), and its
recipes do so with ``compile: True``. Compiled, AOTAutograd's default partitioner
(``aot_eager_decomp_partition``: Inductor's decompositions and partitioner, run eagerly) keeps the 16-bit chunk
and a log-sum-exp per token, and recomputes the softmax in the backward.

Method: 16-bit logits for ``TOKENS`` tokens over a ``VOCAB``-wide vocabulary, split in 8 chunks as leaves that
need a gradient; the loss of every chunk runs under ``saved_tensors_hooks``, counting each saved storage once,
eagerly and compiled; the 16-bit logits themselves are counted whether or not a chunk's function saves them
(the model's output, alive until the loss returns). Bytes per logit. The same for a loss that applies the frozen
output projection itself to each chunk of hidden states (torchtune's LinearCrossEntropyLoss): no logits outside it,
so only what the chunks' functions save counts.

    python compiled_loss_activations.py compiled_loss_activations.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch
import torch.nn.functional as F

TOKENS, VOCAB, CHUNKS, HIDDEN = 2048, 4000, 8, 256


def compute_cross_entropy(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(logits.float(), labels, ignore_index=-100, reduction="sum")


def project_and_cross_entropy(hidden: torch.Tensor, weight: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    return compute_cross_entropy(F.linear(hidden, weight), labels)


def saved_bytes_per_logit(compiled: bool, projected: bool = False) -> float:
    """Saved bytes per logit over every chunk. ``projected``: the loss takes the hidden states and applies the output
    projection itself, chunk by chunk (torchtune's LinearCrossEntropyLoss), so no logits exist outside it."""
    torch.manual_seed(0)
    labels = torch.randint(0, VOCAB, (TOKENS,)).chunk(CHUNKS)
    if projected:
        weight = torch.randn(VOCAB, HIDDEN, dtype=torch.bfloat16)  # frozen, as under LoRA; a parameter either way
        chunks = [torch.randn(TOKENS // CHUNKS, HIDDEN, dtype=torch.bfloat16, requires_grad=True) for _ in range(CHUNKS)]
        function = project_and_cross_entropy
        seen = {weight.untyped_storage()._cdata: 0} | {chunk.untyped_storage()._cdata: 0 for chunk in chunks}
    else:
        weight = None
        chunks = [torch.randn(TOKENS // CHUNKS, VOCAB, dtype=torch.bfloat16, requires_grad=True) for _ in range(CHUNKS)]
        function = compute_cross_entropy
        seen = {chunk.untyped_storage()._cdata: chunk.untyped_storage().nbytes() for chunk in chunks}
    if compiled:
        function = torch.compile(function, backend="aot_eager_decomp_partition")

    def pack(tensor: torch.Tensor) -> torch.Tensor:
        seen.setdefault(tensor.untyped_storage()._cdata, tensor.untyped_storage().nbytes())
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        total = sum(function(chunk, *([weight] if projected else []), target) for chunk, target in zip(chunks, labels, strict=True))
    total.backward()
    torch._dynamo.reset()
    return sum(seen.values()) / (TOKENS * VOCAB)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", type=Path)
    args = parser.parse_args()
    row = {"tokens": TOKENS, "vocab": VOCAB, "chunks": CHUNKS,
           "eager": round(saved_bytes_per_logit(False), 4), "compiled": round(saved_bytes_per_logit(True), 4),
           "projected_eager": round(saved_bytes_per_logit(False, projected=True), 4),
           "projected_compiled": round(saved_bytes_per_logit(True, projected=True), 4)}
    print(json.dumps(row))
    args.out.write_text(json.dumps({
        "about": "bytes per logit a chunked cross-entropy (16-bit logits, fp32 upcast per chunk) keeps for its backward, "
                 "the 16-bit logits included, eager and with the per-chunk function under AOTAutograd's default "
                 "partitioner (torch.compile, backend aot_eager_decomp_partition)",
        "torch": torch.__version__, "rows": [row],
    }, indent=1) + "\n")


if __name__ == "__main__":
    main()
