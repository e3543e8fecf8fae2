"""trainlint's VRAM estimate beside torch-preflight's, term by term, for the same configurations.

    .venv/bin/python benchmarks/compare_estimate.py --peer /path/to/venv/bin/torch-preflight

Runs `trainlint estimate` in this process and the peer's `estimate` command as a subprocess (it
lives in its own virtual environment: `python -m venv /work/peer/.venv && /work/peer/.venv/bin/pip
install torch-preflight`). Prints per-term GiB for both and the verdicts. A configuration the peer
cannot express (QLoRA: it has no 4-bit base model) is shown for trainlint alone.
"""

from __future__ import annotations

import argparse
import json
import subprocess

from trainlint.estimator.architectures import find_architecture
from trainlint.estimator.hardware import resolve_target
from trainlint.estimator.plan import Plan
from trainlint.estimator.report import build
from trainlint.estimator.units import GIB

# (label, trainlint plan settings, peer arguments or None)
CONFIGURATIONS = [
    (
        "llama-3-8b full fine-tune, bf16, AdamW, batch 1 x 2048, eager attention, RTX 4090",
        {"batch_size": 1, "seq_len": 2048, "dtype": "bf16", "optimizer": "adamw", "attention": "eager"},
        ["--batch-size", "1", "--seq-len", "2048", "--dtype", "pure-bf16", "--optimizer", "adamw"],
    ),
    (
        "llama-3-8b full fine-tune, AMP bf16, AdamW, checkpointing + SDPA, batch 1 x 2048, RTX 4090",
        {"batch_size": 1, "seq_len": 2048, "dtype": "amp-bf16", "optimizer": "adamw", "gradient_checkpointing": True},
        ["--batch-size", "1", "--seq-len", "2048", "--dtype", "amp", "--optimizer", "adamw", "--checkpointing", "--flash"],
    ),
    (
        "llama-3-8b QLoRA (NF4 base, rank 16 on q,k,v,o), paged 8-bit AdamW, checkpointing, batch 1 x 2048, RTX 4090",
        {"batch_size": 1, "seq_len": 2048, "dtype": "amp-bf16", "optimizer": "paged-adamw-8bit", "lora_rank": 16,
         "lora_targets": ("q_proj", "k_proj", "v_proj", "o_proj"), "quant": "nf4", "gradient_checkpointing": True},
        None,
    ),
]
PEER_TERMS = {  # the peer's breakdown names, mapped onto ours
    "weights": "weights", "gradients": "gradients", "optimizer_state": "optimizer", "autocast_cache": "autocast_cache",
    "activations": "activations", "KV_cache": "kv_cache",
}


def ours(settings: dict):
    target = resolve_target("rtx-4090")
    return build(Plan(model=find_architecture("llama-3-8b"), **settings), target, {})


def peer(binary: str, arguments: list[str]) -> dict:
    command = [binary, "estimate", "--model", "llama-3-8b", "--gpu", "rtx4090", "-f", "json", *arguments]
    # the peer exits 1 when the configuration does not fit; the report is on stdout either way
    return json.loads(subprocess.run(command, capture_output=True, text=True, check=False).stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--peer", default="/work/peer/.venv/bin/torch-preflight")
    args = parser.parse_args()
    for label, settings, peer_arguments in CONFIGURATIONS:
        report = ours(settings)
        theirs = peer(args.peer, peer_arguments) if peer_arguments is not None else None
        print(f"\n{label}")
        print(f"  {'term':<16}{'trainlint GiB':>16}{'torch-preflight GiB':>22}")
        for name, value in report.result.breakdown.items():
            peer_value = next((v for key, v in (theirs or {}).get("breakdown", {}).items() if PEER_TERMS.get(key) == name), None)
            shown = "-" if peer_value is None else f"{peer_value / GIB:.1f}"
            print(f"  {name:<16}{value.estimate / GIB:>16.1f}{shown:>22}")
        if theirs is not None:
            breakdown = theirs["breakdown"]
            print(f"  {'logits':<16}{'(above)':>16}{'(in activations)':>22}")
            print(f"  {'context+frag.':<16}{(report.result.process.estimate - report.result.allocated.estimate) / GIB:>16.1f}"
                  f"{(breakdown['CUDA_context'] + breakdown['fragmentation']) / GIB:>22.1f}")
        process = report.result.process
        print(f"  {'total':<16}{process.estimate / GIB:>16.1f}{(theirs['total_bytes'] / GIB if theirs else float('nan')):>22.1f}")
        low, high = (theirs["interval_bytes"] if theirs else (float("nan"), float("nan")))
        print(f"  interval        {process.low / GIB:.1f}–{process.high / GIB:.1f}".ljust(34) + (f"{low / GIB:.1f}–{high / GIB:.1f}" if theirs else "not modelled"))
        print(f"  verdict         {report.verdict}".ljust(34) + (theirs["band"] if theirs else "-"))


if __name__ == "__main__":
    main()
