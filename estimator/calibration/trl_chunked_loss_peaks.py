"""What TRL's chunked loss (SFTTrainer's ``loss_type="chunked_nll"``, its default from TRL 1.7.0) holds at its peak.

TRL's SFTTrainer patches the model's forward so that the LM head is never applied to the whole batch: the final hidden
states of the positions whose label is not -100 are gathered (``hidden[valid]``, a copy kept for the backward), and the
head and the cross-entropy run on 256 of them at a time (``_CHUNKED_LM_HEAD_CHUNK_SIZE``), each chunk under
``torch.utils.checkpoint`` so that its logits are freed after its forward and recomputed in its backward. Inside a
chunk (``_chunk``) the head is applied in fp32, ``h.float() @ w.float().t()``: an fp32 copy of the whole head's weight
lives while the chunk's matmul and its backward run.

This replays TRL's own two functions, read from an installed TRL's ``trl/trainer/sft_trainer.py`` (``pip install
--no-deps --target DIR trl==1.7.0``; nothing else of TRL is imported, and DeepSpeed's gather is not active), on real
CPU tensors (boolean indexing has no fake-tensor form), with ``allocator_replay.Recorder`` writing every storage's
allocation and release. As in the trainer, the counts it returns beside the loss (correct tokens, the entropy's
sum) are dropped before the backward: held, their graphs would keep every chunk's recomputed entropy operands (8 bytes
per logit) until the backward ends. The peak of live bytes over the loss's forward and backward, beyond what was alive before it
(the head's weight, the hidden states, the labels) and the hidden states' gradient, is compared with the cost model's term
(``activation_terms.trl_chunked_loss_bytes``, ``tests/test_estimator_trl_loss.py``), for a frozen head (LoRA) and a
trained one. Needs torch only:

    python trl_chunked_loss_peaks.py DIR/trl/trainer/sft_trainer.py ../calibration/trl_chunked_loss_peaks.json
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import json
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
from allocator_replay import Recorder, live_over_time  # noqa: E402

_FUNCTIONS = ("_chunk", "_chunked_cross_entropy_loss")

# (vocabulary, hidden, batch, sequence): a Llama-2-sized vocabulary and a Qwen-sized one, several chunks and fewer
# tokens than one chunk, a head's fp32 copy smaller and larger than a chunk's logits; small hidden sizes keep the CPU
# run short, and every term scales with them.
CASES = [(32000, 128, 2, 1024), (151936, 128, 4, 512), (32000, 384, 1, 200)]


def load_trl_loss(path: Path):
    """TRL's chunked cross-entropy, compiled from its source file (the two functions, no other import; its DeepSpeed
    ZeRO-3 gather of the head, `_maybe_gather_lm_head_ctx`, is a no-op without ZeRO-3 and stands here as one)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    kept = [node for node in tree.body if isinstance(node, ast.FunctionDef) and node.name in _FUNCTIONS]
    if {node.name for node in kept} != set(_FUNCTIONS):
        raise SystemExit(f"{path}: not TRL's chunked loss (looked for {', '.join(_FUNCTIONS)})")
    namespace = {"torch": torch, "F": F, "_maybe_gather_lm_head_ctx": lambda weight, bias: contextlib.nullcontext()}
    exec(compile(ast.Module(body=kept, type_ignores=[]), str(path), "exec"), namespace)  # noqa: S102 - TRL's own code
    chunk_size = next(node.value.value for node in tree.body if isinstance(node, ast.Assign)
                      and any(getattr(target, "id", None) == "_CHUNKED_LM_HEAD_CHUNK_SIZE" for target in node.targets))
    return namespace["_chunked_cross_entropy_loss"], chunk_size


def peak_beyond_inputs(loss_fn, chunk_size: int, vocab: int, hidden: int, batch: int, seq: int, head_trained: bool) -> int:
    torch.manual_seed(0)
    weight = (torch.randn(vocab, hidden) * 0.02).to(torch.bfloat16).requires_grad_(head_trained)
    states = torch.randn(batch, seq, hidden, dtype=torch.bfloat16, requires_grad=True)
    labels = torch.randint(0, vocab, (batch, seq))
    recorder = Recorder()
    recorder.track([weight, states, labels])
    before = live_over_time(recorder.events)[-1]
    with recorder:
        loss, *metrics = loss_fn(states, weight, chunk_size, labels=labels)
        del metrics  # the trainer's compute_loss reads them with .item() and returns the loss alone
        loss.backward()
    return max(live_over_time(recorder.events)) - before - states.grad.untyped_storage().nbytes()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("sft_trainer", type=Path, help="trl/trainer/sft_trainer.py of an installed TRL")
    parser.add_argument("out", type=Path)
    args = parser.parse_args()
    loss_fn, chunk_size = load_trl_loss(args.sft_trainer)
    rows = [
        {"vocab": vocab, "hidden": hidden, "batch": batch, "seq": seq, "head_trained": trained,
         "peak_bytes": peak_beyond_inputs(loss_fn, chunk_size, vocab, hidden, batch, seq, trained)}
        for vocab, hidden, batch, seq in CASES for trained in (False, True)
    ]
    version = args.sft_trainer.parents[2].glob("trl-*.dist-info")
    args.out.write_text(json.dumps({
        "torch": torch.__version__, "trl": next(version).name.removeprefix("trl-").removesuffix(".dist-info"),
        "chunk_size": chunk_size, "dtype": "bf16",
        "unit": "peak live bytes over the loss's forward and backward, beyond the head's weight, the hidden states, the "
                "labels and the hidden states' gradient (a trained head's gradient included)",
        "rows": rows,
    }, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
