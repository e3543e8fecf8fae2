"""`trainlint estimate` and `trainlint gpus`: the memory model from the command line."""

from __future__ import annotations

import argparse
import json
import sys

from trainlint.output import visible, visible_lines

# Exit statuses: the configuration fits (or might: `tight`), it does not, the estimate is impossible.
EXIT_FITS, EXIT_OOM, EXIT_UNKNOWN = 0, 1, 2
DEFAULT_GPU = "h100-sxm"


def add_parsers(commands, positive_int, comma_list) -> None:
    from trainlint.estimator.plan import (
        ATTENTIONS,
        DTYPES,
        HEADS,
        MODEL_CODES,
        MODES,
        OFFLOADS,
        OPTIMIZERS,
        QUANTS,
        SHARDINGS,
    )

    estimate = commands.add_parser("estimate", help="estimate the GPU memory a training or inference run needs")
    estimate.add_argument(
        "script", nargs="?", metavar="SCRIPT",
        help="training script to read the configuration from, or a torchtune recipe's YAML configuration",
    )
    estimate.add_argument(
        "--model", metavar="NAME_OR_PATH",
        help="a config.json or model folder, a Hugging Face id (read from the local cache, else the catalog), "
        "or a catalog id; overrides the script's",
    )
    estimate.add_argument("--batch-size", type=positive_int, help="per-device micro-batch (default 1)")
    estimate.add_argument("--seq-len", type=positive_int, help="tokens per sample (default: the model's maximum)")
    estimate.add_argument("--image-size", type=positive_int, help="image side in pixels (vision models)")
    estimate.add_argument("--dtype", choices=DTYPES, help="precision (default fp32)")
    estimate.add_argument("--optimizer", choices=OPTIMIZERS, help="default adamw")
    estimate.add_argument("--lora-rank", type=positive_int)
    estimate.add_argument("--lora-targets", type=comma_list, metavar="NAMES", help="e.g. q_proj,v_proj")
    estimate.add_argument("--lora-dropout", type=float, metavar="P", help="LoraConfig's lora_dropout (default: unknown)")
    estimate.add_argument("--modules-to-save", type=comma_list, metavar="MODULES",
                          help="LoraConfig's modules_to_save: embeddings and/or lm_head, trained whole beside the adapters")
    estimate.add_argument("--grad-accum", type=positive_int, metavar="N", help="gradient accumulation steps (default 1)")
    estimate.add_argument("--quant", choices=QUANTS, help="quantised base weights (with --lora-rank to train)")
    estimate.add_argument("--gradient-checkpointing", action="store_true")
    estimate.add_argument(
        "--activation-checkpointing", metavar="full|selective|alternate|every-N",
        help="checkpoint every layer (full, the same as --gradient-checkpointing), every layer keeping its matmul "
        "and attention outputs (selective) or every other matmul's (alternate: torchtitan's op policy), or every "
        "N-th layer (every-2, ...)",
    )
    estimate.add_argument(
        "--compile", action="store_true",
        help="the model runs under torch.compile (its partitioner keeps fewer activations for the backward)",
    )
    estimate.add_argument(
        "--optimizer-in-backward", action="store_true",
        help="each parameter's optimizer step runs in the backward as its gradient is ready (torchtune's optimizer_in_bwd)",
    )
    estimate.add_argument(
        "--activation-offloading", action="store_true",
        help="saved activations wait in CPU memory (torchtune's enable_activation_offloading)",
    )
    lengths = estimate.add_mutually_exclusive_group()
    lengths.add_argument(
        "--lengths-vary", dest="lengths_vary", action="store_const", const=True,
        help="training samples differ in length (no packing, each batch padded to its longest; --seq-len the longest): "
        "the reserved peak counts the segments the allocator keeps cached from shorter steps",
    )
    lengths.add_argument(
        "--fixed-lengths", dest="lengths_vary", action="store_const", const=False,
        help="every training batch has the same shape (packed, or padded to a fixed length)",
    )
    reentrant = estimate.add_mutually_exclusive_group()
    reentrant.add_argument(
        "--non-reentrant-checkpointing", dest="checkpoint_reentrant", action="store_const", const=False,
        help="checkpointing runs with use_reentrant=False: bitsandbytes before 0.43.2 then keeps every checkpointed "
        "layer's 4-bit linear inputs through the forward",
    )
    reentrant.add_argument(
        "--reentrant-checkpointing", dest="checkpoint_reentrant", action="store_const", const=True,
        help="checkpointing runs with use_reentrant=True (transformers' default): each layer keeps only its input",
    )
    estimate.add_argument(
        "--omit-component", action="append", metavar="NAME", choices=("text_encoder", "text_encoder_2", "text_encoder_3"),
        help="diffusion: a pipeline component loaded as None (text_encoder_3 for SD3 without T5); repeatable",
    )
    estimate.add_argument("--kv-cache-len", type=positive_int, metavar="N", help="generation: a static KV cache allocated for N tokens")
    estimate.add_argument("--attention", choices=ATTENTIONS, help="default: not stated (sdpa, eager at the high end)")
    estimate.add_argument("--head", choices=HEADS,
                          help="what the model's output feeds: lm, a loss over the vocabulary (a causal or masked LM: the "
                               "default), or classifier, a few labels (sequence or token classification: no vocabulary logits)")
    estimate.add_argument("--model-code", choices=MODEL_CODES,
                          help="whose code runs the model: transformers' modules (the default), LitGPT's (`litgpt finetune_lora`, "
                               "`litgpt pretrain`: its fused GELU, adapters in the model's dtype, chunked loss), gpt-fast's, torchtune's "
                               "(transformers' layers, adapters in the model's dtype, no dropout unless stated), or the "
                               "model's own (trust_remote_code: estimated between a compiled and an eager layer); a script says it "
                               "by what it calls")
    kbit = estimate.add_mutually_exclusive_group()
    kbit.add_argument("--kbit-prepared", dest="kbit_prepared", action="store_const", const=True,
                      help="QLoRA: peft's prepare_model_for_kbit_training is called (TRL's SFTTrainer calls it for a quantised "
                           "model): the unquantised parameters and checkpointed inputs in fp32")
    kbit.add_argument("--no-kbit-prepared", dest="kbit_prepared", action="store_const", const=False,
                      help="QLoRA: it is not called (get_peft_model alone, LitGPT, torchtune): they stay in 16 bits")
    estimate.add_argument("--no-use-cache", dest="use_cache", action="store_false", default=None,
                          help="inference: the forward keeps no KV cache (use_cache=False; default: transformers' True)")
    estimate.add_argument("--outputs-freed", dest="outputs_freed", action="store_const", const=True,
                          help="training: the step deletes the model's output before the backward and keeps only the "
                               "loss (`del pred` before `loss.backward()`, as the HF Trainer's step does): the loss holds "
                               "12 bytes per logit, not the 16 of a loop that holds the logits through the backward")
    estimate.add_argument("--mode", choices=MODES)
    estimate.add_argument("--max-context", type=positive_int, help="generation: prompt plus new tokens")
    estimate.add_argument(
        "--tensor-parallel", type=positive_int, metavar="N",
        help="inference or generation split over N GPUs by tensor parallelism (weights and KV heads split N ways)",
    )
    estimate.add_argument("--gpu", help=f"GPU, count x GPU (8xa100-80gb) or cloud instance name (default {DEFAULT_GPU})")
    estimate.add_argument("--gpus", type=positive_int, help="number of GPUs (overrides the count in --gpu)")
    estimate.add_argument("--sharding", choices=SHARDINGS, help="default ddp")
    estimate.add_argument("--offload", choices=OFFLOADS, action="append", help="optimizer or params (repeatable)")
    estimate.add_argument(
        "--fsdp-param-dtype", choices=("bf16", "fp16", "fp32"),
        help="FSDP's MixedPrecision param_dtype: the dtype units are gathered in (default: bf16, fp32 at the high end)",
    )
    estimate.add_argument(
        "--library-version", action="append", type=_library_version, metavar="NAME=VERSION",
        help="an installed library whose memory use changed between releases (bitsandbytes, transformers, torch, trl, diffusers), "
        "e.g. bitsandbytes=0.41.1; repeatable. Without it the estimate takes current releases",
    )
    estimate.add_argument("--format", choices=("text", "json"), default="text")
    estimate.add_argument(
        "--list-models", nargs="?", const="", metavar="QUERY",
        help="list the models a name resolves to without a config file (those whose names hold each word of QUERY)",
    )

    gpus = commands.add_parser("gpus", help="list the GPUs (or cloud instances) the estimator knows")
    gpus.add_argument("--instances", action="store_true", help="list cloud instance types instead")


def run_estimate(args: argparse.Namespace) -> int:
    from trainlint.estimator.custom_models import resolve_model
    from trainlint.estimator.hardware import UnknownTarget, resolve_target
    from trainlint.estimator.plan import CannotEstimate, Plan
    from trainlint.estimator.reading import PIPELINE_COMPONENTS
    from trainlint.estimator.report import build, to_json, to_text
    from trainlint.estimator.script_plan import plan_settings

    if args.list_models is not None:
        return _list_models(args.list_models)
    try:
        target = resolve_target(args.gpu or DEFAULT_GPU, args.gpus)
        if args.tensor_parallel and not _devices_stated(args, target):
            target = resolve_target(args.gpu or DEFAULT_GPU, args.tensor_parallel)  # the degree is the GPU count
    except UnknownTarget as error:
        return _unknown(args, str(error))
    module = read = None
    if args.script is not None:
        loaded = _read_script(args.script)
        if isinstance(loaded, str):
            return _unknown(args, loaded)
        module, read = loaded
    overrides = {
        "model": args.model, "batch_size": args.batch_size, "seq_len": args.seq_len, "image_size": args.image_size,
        "dtype": args.dtype, "optimizer": args.optimizer, "lora_rank": args.lora_rank,
        "lora_targets": tuple(args.lora_targets) if args.lora_targets else None, "quant": args.quant,
        "lora_dropout": args.lora_dropout, "modules_to_save": tuple(args.modules_to_save) if args.modules_to_save else None,
        "grad_accum": args.grad_accum, "kv_cache_len": args.kv_cache_len,
        "gradient_checkpointing": True if args.gradient_checkpointing else None, "attention": args.attention,
        "mode": args.mode, "max_context": args.max_context, "sharding": args.sharding,
        "offload": tuple(args.offload) if args.offload else None, "compiled": True if args.compile else None,
        "fsdp_param_dtype": args.fsdp_param_dtype, "optimizer_in_backward": True if args.optimizer_in_backward else None,
        "activation_offloading": True if args.activation_offloading else None, "tensor_parallel": args.tensor_parallel,
        "lengths_vary": args.lengths_vary, "use_cache": args.use_cache, "head": args.head, "outputs_freed": args.outputs_freed,
        "kbit_prepared": args.kbit_prepared, "model_code": args.model_code, "checkpoint_reentrant": args.checkpoint_reentrant,
        "omitted_components": tuple(PIPELINE_COMPONENTS[name] for name in args.omit_component) if args.omit_component else None,
    }
    if args.activation_checkpointing in ("selective", "alternate"):
        overrides["gradient_checkpointing"], overrides["checkpoint_policy"] = True, args.activation_checkpointing
    elif args.activation_checkpointing is not None:
        every = _checkpoint_every(args.activation_checkpointing)
        if every is None:
            return _unknown(args, f"--activation-checkpointing takes full, selective, alternate or every-N, not {args.activation_checkpointing!r}")
        overrides["gradient_checkpointing"], overrides["checkpoint_every"] = True, every
    planned = plan_settings(read, overrides)
    architecture, reason = resolve_model(module, read, planned)
    if architecture is None:
        hint = " (name it with --model, or a `# trainlint: model=...` comment in the script)" if planned.model_name is None else ""
        return _unknown(args, f"{reason}{hint}: there is no honest number to give")
    settings = dict(planned.settings)
    settings["gpus"] = target.count
    inputs, notes = _with_devices(args, target, planned.inputs, planned.notes)
    if args.library_version:
        from trainlint.estimator.versions import settings_for_versions

        versions = dict(args.library_version)
        try:
            settings.update(settings_for_versions(versions, architecture.family))
        except CannotEstimate as error:
            return _unknown(args, str(error))
        inputs.update({f"{library} version": (version, "command line") for library, version in versions.items()})
        if settings.get("attention") is None and "sdpa_dispatch" in settings:  # the release picks the kernel
            from trainlint.estimator.unstated import released_kernel

            inputs["attention"] = (released_kernel(settings["sdpa_dispatch"]), f"transformers {versions['transformers']}'s default")
        if settings.get("trl_default_checkpointing") and "trl_checkpointing" in settings:  # the release's SFTConfig default
            inputs["gradient_checkpointing"] = (settings["trl_checkpointing"], f"trl {versions['trl']}'s SFTConfig default")
        if settings.get("trl_default_loss") and "trl_chunked_loss" in settings:  # the release's SFTTrainer loss_type
            from trainlint.estimator.architectures import LM_HEAD_NAMES

            head_adapter = any(target in LM_HEAD_NAMES for target in settings.get("lora_targets") or ())  # TRL refuses it
            chunked = settings["trl_chunked_loss"] and not head_adapter
            loss = "checkpointed-chunked" if chunked else settings.get("loss", "standard")
            inputs["loss"] = (loss, f"trl {versions['trl']}'s SFTTrainer default")
    inputs.update(_releases_assumed(dict(args.library_version or ())))
    try:
        report = build(Plan(model=architecture, **settings), target, inputs, notes)
    except CannotEstimate as error:
        return _unknown(args, str(error))
    print(json.dumps(to_json(report), indent=2) if args.format == "json" else visible_lines(to_text(report)))
    if report.verdict == "unknown":
        return EXIT_UNKNOWN  # the model states are counted, the rest is not: no verdict
    return EXIT_OOM if report.verdict == "oom" else EXIT_FITS


def _list_models(query: str) -> int:
    from trainlint.estimator.model_configs import model_table

    table = model_table(query)
    if table is None:
        print(f"trainlint estimate: no model in the catalog matches {query!r}", file=sys.stderr)
        return 1
    print(table)
    return 0


def _devices_stated(args: argparse.Namespace, target) -> bool:
    """Whether the command line says how many GPUs: --gpus, a count in --gpu, or an instance."""
    from trainlint.estimator.hardware import states_count

    return args.gpus is not None or target.instance is not None or bool(args.gpu and states_count(args.gpu))


def _with_devices(args: argparse.Namespace, target, inputs: dict, notes: list[str]) -> tuple[dict, list[str]]:
    """The report's inputs with the devices added, each with where it came from, and a note when the
    script shards or replicates the model over a GPU count that nobody stated."""
    from trainlint.estimator.hardware import states_count

    inputs, notes = dict(inputs), list(notes)
    name = target.instance.name if target.instance is not None else target.gpu.id
    inputs["gpu"] = (name, "command line" if args.gpu else "assumed (give --gpu)")
    if args.gpus is not None:
        inputs["gpus"] = (target.count, "command line (--gpus)")
    elif args.gpu and (target.instance is not None or states_count(args.gpu)):
        inputs["gpus"] = (target.count, f"command line (--gpu {args.gpu})")
    elif args.tensor_parallel:
        inputs["gpus"] = (target.count, "command line (--tensor-parallel)")
    else:
        inputs["gpus"] = (target.count, "assumed: one device (give --gpus N, or --gpu Nx<gpu>)")
        sharding, source = inputs.get("sharding", (None, "assumed"))
        if sharding is not None and source not in ("assumed", "command line"):
            notes.append(
                f"{sharding} ({source.split(':', 1)[0]}) over 1 GPU: the script does not say how many GPUs run it, so one is "
                f"assumed, which {'shards' if sharding != 'ddp' else 'replicates'} nothing; give --gpus N"
            )
    return inputs, notes


def _releases_assumed(stated: dict[str, str]) -> dict[str, tuple[str, str]]:
    """The report's input naming the releases the estimate takes for the followed libraries nobody stated: today's,
    the newest published by today in the release table (PyPI's days)."""
    import datetime

    from trainlint.estimator.releases import latest_day, releases_assumed
    from trainlint.estimator.versions import LIBRARY_VERSION_FLAG

    today = datetime.date.today()
    assumed = {library: version for library, version in releases_assumed({}, today).items() if library not in stated}
    if not assumed:
        return {}
    releases = ", ".join(f"{library} {version}" for library, version in assumed.items())
    return {"library releases": (releases, f"assumed: the current ones (PyPI, as of {min(today, latest_day()).isoformat()}); "
                                           f"{LIBRARY_VERSION_FLAG} NAME=VERSION states the installed one")}


def _library_version(text: str) -> tuple[str, str]:
    name, _, version = text.partition("=")
    if not name.strip() or not version.strip():
        raise argparse.ArgumentTypeError(f"expected NAME=VERSION (e.g. bitsandbytes=0.41.1), not {text!r}")
    return name.strip().lower(), version.strip()


def _checkpoint_every(text: str) -> int | None:
    if text == "full":
        return 1
    head, _, count = text.partition("-")
    return int(count) if head == "every" and count.isdigit() and int(count) >= 1 else None


def _read_script(path: str):
    """The script's inputs, or a message saying why it cannot be read."""
    from pathlib import Path

    from trainlint.analysis.engine import DecodeError, decode_source
    from trainlint.analysis.files import MAX_SOURCE_BYTES, UnreadableFile, read_bounded
    from trainlint.analysis.module import ModuleAnalysis
    from trainlint.analysis.workspace import Workspace
    from trainlint.estimator.reading import read_inputs

    try:
        text = decode_source(read_bounded(path, MAX_SOURCE_BYTES))
    except UnreadableFile as error:
        return f"cannot read {path}: {error}"
    except DecodeError as error:
        return f"cannot read {path}: {error}"
    if Path(path).suffix.lower() in (".yaml", ".yml"):  # a torchtune recipe's configuration
        from trainlint.estimator.torchtune_config import NotAConfig, read_config

        try:
            return None, read_config(text)
        except NotAConfig as error:
            return f"cannot read {path}: {error}"
    # The workspace: the script's folder, and the current folder when the script lies under it (a config
    # named relative to the project root, as the script is run from there).
    folder, here = Path(path).resolve().parent, Path.cwd().resolve()
    roots = [folder, here] if folder == here or here in folder.parents else [folder]
    module = ModuleAnalysis(text, path, workspace=Workspace(roots))
    return module, read_inputs(module)


def _unknown(args: argparse.Namespace, reason: str) -> int:
    if args.format == "json":
        print(json.dumps({"verdict": "unknown", "reason": reason}))
    else:
        print(f"trainlint estimate: {visible(reason)}", file=sys.stderr)  # it may quote the script's strings
    return EXIT_UNKNOWN


def run_gpus(args: argparse.Namespace) -> int:
    from trainlint.estimator.hardware import gpu_table

    print(gpu_table(instances=args.instances))
    return 0
