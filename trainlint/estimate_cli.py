"""`trainlint estimate` and `trainlint gpus`: the memory model from the command line."""

from __future__ import annotations

import argparse
import json
import sys

# Exit statuses: the configuration fits (or might: `tight`), it does not, the estimate is impossible.
EXIT_FITS, EXIT_OOM, EXIT_UNKNOWN = 0, 1, 2


def add_parsers(commands, positive_int, comma_list) -> None:
    from trainlint.estimator.costmodel import ATTENTIONS, DTYPES, MODES, OFFLOADS, OPTIMIZERS, QUANTS, SHARDINGS

    estimate = commands.add_parser("estimate", help="estimate the GPU memory a training or inference run needs")
    estimate.add_argument("--model", required=True, help="catalog id or Hugging Face id (see the estimator docs)")
    estimate.add_argument("--batch-size", type=positive_int, help="per-device micro-batch (default 1)")
    estimate.add_argument("--seq-len", type=positive_int, help="tokens per sample (default: the model's maximum)")
    estimate.add_argument("--image-size", type=positive_int, help="image side in pixels (vision models)")
    estimate.add_argument("--dtype", choices=DTYPES, help="precision (default fp32)")
    estimate.add_argument("--optimizer", choices=OPTIMIZERS, help="default adamw")
    estimate.add_argument("--lora-rank", type=positive_int)
    estimate.add_argument("--lora-targets", type=comma_list, metavar="NAMES", help="e.g. q_proj,v_proj")
    estimate.add_argument("--quant", choices=QUANTS, help="quantised base weights (with --lora-rank to train)")
    estimate.add_argument("--gradient-checkpointing", action="store_true")
    estimate.add_argument("--attention", choices=ATTENTIONS, help="default sdpa")
    estimate.add_argument("--mode", choices=MODES, default="train")
    estimate.add_argument("--max-context", type=positive_int, help="generation: prompt plus new tokens")
    estimate.add_argument("--gpu", default="h100-sxm", help="GPU, count x GPU (8xa100-80gb) or cloud instance name")
    estimate.add_argument("--gpus", type=positive_int, help="number of GPUs (overrides the count in --gpu)")
    estimate.add_argument("--sharding", choices=SHARDINGS, help="default ddp")
    estimate.add_argument("--offload", choices=OFFLOADS, action="append", help="optimizer or params (repeatable)")
    estimate.add_argument("--format", choices=("text", "json"), default="text")

    gpus = commands.add_parser("gpus", help="list the GPUs (or cloud instances) the estimator knows")
    gpus.add_argument("--instances", action="store_true", help="list cloud instance types instead")


def run_estimate(args: argparse.Namespace) -> int:
    from trainlint.estimator.architectures import find_architecture
    from trainlint.estimator.costmodel import CannotEstimate, Plan
    from trainlint.estimator.hardware import UnknownTarget, resolve_target
    from trainlint.estimator.report import build, to_json, to_text

    try:
        target = resolve_target(args.gpu, args.gpus)
    except UnknownTarget as error:
        print(f"trainlint estimate: {error}", file=sys.stderr)
        return EXIT_UNKNOWN
    architecture = find_architecture(args.model)
    if architecture is None:
        message = f"unknown model {args.model!r}: not in the catalog, so there is no honest number to give (`trainlint gpus` lists hardware; the estimator docs list models)"
        if args.format == "json":
            print(json.dumps({"verdict": "unknown", "reason": message}))
        else:
            print(f"trainlint estimate: {message}", file=sys.stderr)
        return EXIT_UNKNOWN
    inputs: dict[str, tuple[object, str]] = {}
    settings: dict[str, object] = {}
    for name, attribute, default in (
        ("batch_size", "batch_size", 1), ("seq_len", "seq_len", None), ("image_size", "image_size", None),
        ("dtype", "dtype", "fp32"), ("optimizer", "optimizer", "adamw"), ("lora_rank", "lora_rank", None),
        ("lora_targets", "lora_targets", None), ("quant", "quant", None), ("attention", "attention", "sdpa"),
        ("max_context", "max_context", None), ("sharding", "sharding", "ddp"),
    ):
        given = getattr(args, attribute)
        if given is not None:
            settings[name] = tuple(given) if isinstance(given, list) else given
            inputs[name] = (given, "command line")
        elif default is not None:
            inputs[name] = (default, "assumed")
    settings["gradient_checkpointing"] = args.gradient_checkpointing
    settings["offload"] = tuple(args.offload or ())
    settings["mode"] = args.mode
    settings["gpus"] = target.count
    inputs["mode"] = (args.mode, "command line")
    try:
        report = build(Plan(model=architecture, **settings), target, inputs)
    except CannotEstimate as error:
        print(f"trainlint estimate: {error}", file=sys.stderr)
        return EXIT_UNKNOWN
    print(json.dumps(to_json(report), indent=2) if args.format == "json" else to_text(report))
    return EXIT_OOM if report.verdict == "oom" else EXIT_FITS


def run_gpus(args: argparse.Namespace) -> int:
    from trainlint.estimator.hardware import gpu_table

    print(gpu_table(instances=args.instances))
    return 0
