#!/usr/bin/env python3
"""Which half of the mined bug corpus a repository belongs to: "dev" or "test".

    python3 benchmarks/mined/split.py owner/name [owner/name ...]

The split is by repository, never by pair, so no repository has bugs on both sides, and it is
fixed before anyone looks at a pair: the first byte of the SHA-256 of the lower-cased
``owner/name``, odd for "test", even for "dev". Rules are developed against the dev half only;
the test half is measured, and only its totals are read. A repository issue 30 keeps out of all
work prints "kept out" instead (``KEPT_OUT``): run.py refuses a pair from it. Standard library only.
"""

from __future__ import annotations

import argparse
import hashlib
import sys

DEV = "dev"
TEST = "test"

# Repositories issue 30 keeps out of all work (mining, triage, examples, benchmarks) so that they stay
# an independent measure of the rules: no pair may come from one. (skorch: beyond the one case already
# in tests/real_fixes/, which is not a mined pair.)
KEPT_OUT = frozenset(name.lower() for name in (
    "Lightning-AI/pytorch-lightning", "hiyouga/LLaMA-Factory", "mosaicml/composer", "DLR-RM/stable-baselines3",
    "OpenRLHF/OpenRLHF", "jik876/hifi-gan", "CompVis/latent-diffusion", "meta-llama/llama-recipes",
    "lucidrains/vit-pytorch", "lucidrains/DALLE-pytorch", "lucidrains/denoising-diffusion-pytorch",
    "axolotl-ai-cloud/axolotl", "huggingface/alignment-handbook", "kohya-ss/sd-scripts", "coqui-ai/TTS",
    "salesforce/LAVIS", "Lightning-AI/lightning-bolts", "allenai/allennlp", "speechbrain/speechbrain",
    "open-mmlab/mmengine", "thu-ml/tianshou", "huggingface/optimum", "udacity/deep-learning-v2-pytorch",
    "skorch-dev/skorch",
))


def half(repository: str) -> str:
    """The half of ``repository`` ("owner/name", any case)."""
    return TEST if hashlib.sha256(repository.lower().encode()).digest()[0] & 1 else DEV


def kept_out(repository: str) -> bool:
    """Whether ``repository`` ("owner/name", any case) is one the corpus must never draw on."""
    return repository.lower() in KEPT_OUT


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("repositories", nargs="+", metavar="owner/name")
    args = parser.parse_args(argv)
    for repository in args.repositories:
        print(f"{'kept out' if kept_out(repository) else half(repository)}\t{repository}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
