"""Measures real training-step memory peaks on a CUDA GPU, for a matrix of models and settings.

Runs on a machine with torch (and transformers, peft, optionally torchvision/timm/bitsandbytes),
never in the product's venv, and needs no network: every model is random-initialised from a
config built from the catalog's fields (``param_counts._decoder_config`` for decoders). From the
repository root:

    python estimator/calibration/gpu_peaks.py OUT.json [--budget 420] [--only SUBSTRING ...]
    python estimator/calibration/gpu_peaks.py OUT.json --dry-run    # tiny models on the CPU
    python estimator/calibration/gpu_peaks.py --list                # the matrix, nothing run

Each configuration runs in its own subprocess (an OOM, a CUDA error or a hang cannot reach the
next one), is killed at its timeout, and is recorded with ``error`` set when it fails. The whole
run has a time budget: configurations that no longer fit are recorded as skipped, and OUT.json is
rewritten after every configuration, so a run cut short still leaves its measurements.

Per configuration: three training steps (forward with the loss, backward, optimizer step,
``zero_grad``) after ``torch.cuda.reset_peak_memory_stats()``, then ``max_memory_allocated``,
``max_memory_reserved`` and the process's GPU memory as the driver reports it (NVML, else
``nvidia-smi``). Once per run: the CUDA context (process memory after ``torch.cuda.init()`` and
a one-element allocation, minus what the allocator reserved). trainlint's own estimates are added
later, on the development machine, by ``compare_gpu_peaks.py`` (GPU.md explains the steps).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
CATALOG = HERE.parent / "data" / "architectures.json"
STEPS = 3
DEFAULT_BUDGET_S = 420.0
LLAMA_ALL_LINEAR = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


def _spec(model, batch, seq, dtype, optimizer="adamw", *, gc=False, attention="sdpa", lora=None, quant=None,
          image_size=None, expect=15, timeout=90, mode="train", new_tokens=None, cache=None, fsdp=False,
          accumulate=1, fused=False):
    """One configuration. ``expect``: seconds it is expected to take (start it only if that much budget is
    left); ``timeout``: seconds after which its subprocess is killed. ``mode`` "generate": ``new_tokens``
    greedy tokens after a ``seq``-token prompt (``cache`` "static": transformers' StaticCache); ``fsdp``:
    FSDP2 ``fully_shard`` on one rank (each layer, then the root); ``accumulate``: micro-batches per
    optimizer step; ``fused``: the fused optimizer."""
    parts = [model, f"b{batch}-" + (f"img{image_size}" if image_size else f"s{seq}"), dtype, optimizer if mode == "train" else mode]
    if new_tokens:
        parts.append(f"new{new_tokens}" + (f"-{cache}" if cache else ""))
    if fsdp:
        parts.append("fsdp1rank")
    if accumulate > 1:
        parts.append(f"accum{accumulate}")
    if fused:
        parts.append("fused")
    if attention:
        parts.append(attention)
    if gc:
        parts.append("gc")
    if lora:
        targets = "qv" if tuple(lora["targets"]) == ("q_proj", "v_proj") else "all" if tuple(lora["targets"]) == LLAMA_ALL_LINEAR else "+".join(lora["targets"])
        parts.append(f"lora-r{lora['rank']}-{targets}")
    if quant:
        parts.append(quant)
    return {
        "id": "/".join(parts), "model": model, "batch_size": batch, "seq_len": seq, "image_size": image_size,
        "dtype": dtype, "optimizer": optimizer, "gradient_checkpointing": gc, "attention": attention,
        "lora": lora, "quant": quant, "expect": expect, "timeout": timeout, "mode": mode, "new_tokens": new_tokens,
        "cache": cache, "fsdp": fsdp, "accumulate": accumulate, "fused": fused,
    }


def _lora(rank=16, targets=("q_proj", "v_proj")):
    return {"rank": rank, "alpha": 2 * rank, "targets": list(targets), "dropout": 0.0}


# Ordered by value: the first ~20 cover every model and every setting once, so a run cut short by its
# budget still calibrates each term; the rest vary one setting at a time against a base row.
MATRIX = [
    _spec("gpt2", 8, 1024, "amp-bf16"),
    _spec("llama-3.2-1b", 4, 2048, "bf16"),
    _spec("qwen2.5-0.5b", 8, 1024, "amp-bf16"),
    _spec("gpt2", 8, 1024, "bf16"),
    _spec("gpt2", 8, 1024, "amp-bf16", "sgd"),
    _spec("gpt2", 8, 1024, "amp-bf16", attention="eager"),
    _spec("gpt2", 8, 1024, "amp-bf16", gc=True),
    _spec("llama-3.2-1b", 4, 2048, "amp-bf16"),
    _spec("llama-3.2-1b", 4, 2048, "amp-bf16", gc=True),
    _spec("mistral-7b-v0.1", 4, 2048, "amp-bf16", gc=True, lora=_lora(), expect=45, timeout=150),
    _spec("llama-3-8b", 4, 2048, "amp-bf16", gc=True, lora=_lora(), quant="nf4-dq", expect=60, timeout=180),
    _spec("bert-base-uncased", 32, 512, "amp-bf16"),
    _spec("vit-base-patch16-224", 64, None, "amp-bf16", image_size=224),
    _spec("resnet50", 64, None, "amp-bf16", "sgd-momentum", attention=None, image_size=224),
    _spec("smollm2-135m", 16, 1024, "amp-bf16"),
    _spec("smollm2-360m", 8, 2048, "bf16"),
    _spec("tinyllama-1.1b", 4, 2048, "amp-bf16", expect=25),
    _spec("gpt2-medium", 8, 1024, "amp-bf16"),
    _spec("phi-2", 4, 2048, "bf16", expect=30),
    _spec("phi-3-mini-4k", 4, 2048, "bf16", gc=True, expect=35),
    # QLoRA without checkpointing (bitsandbytes keeps each quantised linear's input), the peak phases
    # (accumulated gradients, the fused step without its parameter-sized temporary), FSDP on one rank,
    # and generation with a dynamic and a static KV cache
    _spec("llama-3.2-1b", 2, 1024, "bf16", lora=_lora(), quant="nf4-dq", expect=30, timeout=120),
    _spec("llama-3.2-1b", 4, 1024, "bf16", accumulate=2),
    _spec("llama-3.2-1b", 1, 128, "bf16", fused=True),
    _spec("llama-3.2-1b", 1, 128, "bf16"),
    _spec("llama-3.2-1b", 4, 1024, "bf16", fsdp=True, expect=30, timeout=120),
    _spec("llama-3.2-1b", 4, 1024, "amp-bf16", fsdp=True, expect=30, timeout=120),
    _spec("llama-3.2-1b", 4, 512, "bf16", mode="generate", new_tokens=256, expect=30, timeout=120),
    _spec("llama-3.2-1b", 4, 512, "bf16", mode="generate", new_tokens=256, cache="static", expect=45, timeout=150),
    _spec("llama-3-8b", 1, 1024, "bf16", mode="generate", new_tokens=128, quant="nf4-dq", expect=60, timeout=180),
    # one setting at a time
    _spec("llama-3.2-1b", 2, 1024, "amp-bf16", attention="eager"),
    _spec("llama-3.2-1b", 4, 2048, "bf16", "sgd"),
    _spec("qwen2.5-0.5b", 8, 1024, "bf16"),
    _spec("qwen2.5-0.5b", 4, 1024, "amp-bf16", attention="eager"),
    _spec("smollm2-360m", 8, 2048, "bf16", gc=True),
    _spec("tinyllama-1.1b", 8, 2048, "bf16", gc=True, expect=25),
    _spec("gpt2-medium", 4, 1024, "bf16", attention="eager"),
    _spec("gpt2", 4, 1024, "fp32"),
    _spec("gpt2", 2, 512, "amp-bf16"),
    _spec("mistral-7b-v0.1", 2, 2048, "amp-bf16", lora=_lora(16, LLAMA_ALL_LINEAR), expect=45, timeout=150),
    _spec("bert-base-uncased", 32, 128, "bf16", attention="eager"),
    _spec("vit-base-patch16-224", 64, None, "bf16", attention="eager", image_size=224),
    _spec("vit-base-patch16-224", 64, None, "amp-bf16", gc=True, image_size=224),
    _spec("resnet50", 64, None, "amp-bf16", "adamw", attention=None, image_size=224),
    _spec("phi-2", 4, 2048, "amp-bf16", gc=True, expect=35),
    _spec("llama-3.2-1b", 1, 8192, "bf16", gc=True),
    _spec("qwen2.5-0.5b", 4, 4096, "amp-bf16", gc=True),
    _spec("smollm2-135m", 32, 512, "bf16", "sgd-momentum"),
]


# ====================================================================== worker (one configuration)
class Skip(Exception):
    """The configuration cannot run here for a reason that is not a failure (a package is missing)."""


def _tiny(a: dict) -> dict:
    """Dry run: the same architecture with 2 layers and hidden 64, so the CPU can train it in seconds."""
    a = dict(a)
    heads, kv = a.get("heads") or 4, a.get("kv_heads") or a.get("heads") or 4
    a.update(layers=2, hidden=64, heads=4, head_dim=16, intermediate=128)
    a["kv_heads"] = 4 if kv == heads else (1 if kv == 1 else 2)
    if a.get("vocab"):  # kept up to 32,768: configs' default pad_token_id must stay inside it (Phi-3's is 32,000)
        a["vocab"] = min(a["vocab"], 32768)
    if a.get("max_positions"):
        a["max_positions"] = 512
    if a.get("learned_positions"):
        a["learned_positions"] = 512
    if a.get("image_size"):
        a.update(image_size=32, patch_size=8, num_labels=10)
    return a


def _dropout_in(config) -> bool:
    return any(isinstance(v, float) and v > 0 and ("dropout" in k or "pdrop" in k) for k, v in config.to_dict().items())


def _hf_model(a: dict, spec: dict, torch, device):
    """(model, inputs-maker, info) for a transformers model built from the catalog's fields."""
    import transformers

    sys.path.insert(0, str(HERE))
    from param_counts import _decoder_config  # the catalog -> config mapping the parameter counts use

    family, kind = a["family"], a["kind"]
    if kind == "decoder":
        config = _decoder_config(a)
        config.use_cache = False
        model_class = transformers.AutoModelForCausalLM
    elif family == "bert":
        config = transformers.BertConfig(
            vocab_size=a["vocab"], hidden_size=a["hidden"], num_hidden_layers=a["layers"],
            num_attention_heads=a["heads"], intermediate_size=a["intermediate"],
            max_position_embeddings=a["learned_positions"], type_vocab_size=a["token_types"],
        )
        model_class = transformers.AutoModelForMaskedLM
    elif family == "vit":
        config = transformers.ViTConfig(
            hidden_size=a["hidden"], num_hidden_layers=a["layers"], num_attention_heads=a["heads"],
            intermediate_size=a["intermediate"], image_size=a["image_size"], patch_size=a["patch_size"],
            num_labels=a["num_labels"],
        )
        model_class = transformers.AutoModelForImageClassification
    else:
        raise Skip(f"no builder for family {family!r}")
    with torch.device(device):
        model = model_class.from_config(config, attn_implementation=spec["attention"])
    info = {"dropout": _dropout_in(config), "attention_used": getattr(model.config, "_attn_implementation", None),
            "transformers": transformers.__version__}

    if kind == "vision-transformer":
        size = a["image_size"]

        def inputs(dtype):
            return {"pixel_values": torch.randn(spec["batch_size"], 3, size, size, device=device, dtype=dtype),
                    "labels": torch.randint(0, a["num_labels"], (spec["batch_size"],), device=device)}
    else:
        def inputs(dtype):
            ids = torch.randint(0, a["vocab"], (spec["batch_size"], spec["seq_len"]), device=device)
            return {"input_ids": ids, "labels": ids}
    return model, inputs, info


def _cnn_model(a: dict, spec: dict, torch, device):
    try:
        import torchvision

        model = getattr(torchvision.models, a["id"].replace("-", "_"))(weights=None)
        built = f"torchvision {torchvision.__version__}"
    except ImportError:
        try:
            import timm
        except ImportError:
            raise Skip("neither torchvision nor timm is importable") from None
        model = timm.create_model(a["id"].replace("-", "_"), pretrained=False)
        built = f"timm {timm.__version__}"
    model.to(device)
    size = spec["image_size"]

    def inputs(dtype):
        return {"x": torch.randn(spec["batch_size"], 3, size, size, device=device, dtype=dtype),
                "labels": torch.randint(0, 1000, (spec["batch_size"],), device=device)}
    return model, inputs, {"dropout": False, "built_with": built}


def _quantise_nf4(model, torch, device) -> int:
    """Replaces every nn.Linear but the LM head by a bitsandbytes NF4 Linear4bit (double quantisation,
    bf16 compute), quantising the random weights in place; embeddings, norms and the head stay bf16."""
    try:
        import bitsandbytes as bnb
    except ImportError:
        raise Skip("bitsandbytes is not importable: QLoRA row skipped") from None
    replaced = 0
    for parent in list(model.modules()):
        for name, child in list(parent.named_children()):
            if not isinstance(child, torch.nn.Linear) or name == "lm_head":
                continue
            new = bnb.nn.Linear4bit(child.in_features, child.out_features, bias=child.bias is not None,
                                    compute_dtype=torch.bfloat16, compress_statistics=True, quant_type="nf4",
                                    device="meta")
            options = dict(requires_grad=False, compress_statistics=True, quant_type="nf4")
            try:
                weight = bnb.nn.Params4bit(child.weight.data, module=new, **options)
            except TypeError:  # bitsandbytes before 0.43 has no module argument
                weight = bnb.nn.Params4bit(child.weight.data, **options)
            new.weight = weight.to(device)  # quantises
            if child.bias is not None:
                new.bias = torch.nn.Parameter(child.bias.data, requires_grad=False)
            setattr(parent, name, new)
            del child
            replaced += 1
    return replaced


def _process_memory(torch, pid: int) -> tuple[int | None, str | None]:
    """GPU memory the driver attributes to ``pid`` (bytes), and where the figure came from."""
    try:
        import pynvml

        pynvml.nvmlInit()
        handle = pynvml.nvmlDeviceGetHandleByIndex(torch.cuda.current_device())
        procs = pynvml.nvmlDeviceGetComputeRunningProcesses(handle)
        for proc in procs:
            if proc.pid == pid and proc.usedGpuMemory is not None:
                return int(proc.usedGpuMemory), "nvml"
        if len(procs) == 1 and procs[0].usedGpuMemory is not None:  # another PID namespace (a container)
            return int(procs[0].usedGpuMemory), "nvml, the only compute process (pid not visible)"
    except Exception:  # noqa: BLE001 - fall back to nvidia-smi
        pass
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"],
            capture_output=True, text=True, timeout=20,
        ).stdout
        rows = [line.split(",") for line in out.strip().splitlines() if "," in line]
        for row in rows:
            if int(row[0]) == pid:
                return int(float(row[1])) * 2**20, "nvidia-smi"
        if len(rows) == 1:
            return int(float(rows[0][1])) * 2**20, "nvidia-smi, the only compute process (pid not visible)"
    except Exception:  # noqa: BLE001
        pass
    return None, None


def _device_used(torch) -> int | None:
    """Device-wide used memory (bytes) before this process touches CUDA: NVML, else nvidia-smi."""
    try:
        import pynvml

        pynvml.nvmlInit()
        return int(pynvml.nvmlDeviceGetMemoryInfo(pynvml.nvmlDeviceGetHandleByIndex(0)).used)
    except Exception:  # noqa: BLE001
        pass
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits", "-i", "0"],
                             capture_output=True, text=True, timeout=20).stdout
        return int(float(out.strip().splitlines()[0])) * 2**20
    except Exception:  # noqa: BLE001
        return None


def _versions() -> dict:
    import importlib

    found = {}
    for name in ("transformers", "peft", "torchvision", "timm", "bitsandbytes", "pynvml"):
        try:
            found[name] = getattr(importlib.import_module(name), "__version__", "present")
        except Exception:  # noqa: BLE001
            found[name] = None
    return found


def context_worker(dry_run: bool) -> dict:
    """Device, versions, and the CUDA context: process memory after init and a tiny allocation, minus reserved."""
    import torch

    result = {"torch": torch.__version__, "cuda": torch.version.cuda, "packages": _versions(), "pid": os.getpid(),
              "PYTORCH_CUDA_ALLOC_CONF": os.environ.get("PYTORCH_CUDA_ALLOC_CONF")}
    if dry_run or not torch.cuda.is_available():
        result.update(device="cpu (dry run)" if dry_run else "no CUDA device", context_bytes=None)
        return result
    before = _device_used(torch)
    torch.cuda.init()
    x = torch.zeros(1, device="cuda")
    torch.cuda.synchronize()
    process, source = _process_memory(torch, os.getpid())
    free, total = torch.cuda.mem_get_info()
    props = torch.cuda.get_device_properties(0)
    result.update(
        device=torch.cuda.get_device_name(0), total_memory=props.total_memory, capability=list(torch.cuda.get_device_capability(0)),
        driver_used_before=before, device_used_after=total - free,
        allocated=torch.cuda.memory_allocated(), reserved=torch.cuda.memory_reserved(),
        process=process, process_source=source,
    )
    result["context_bytes"] = process - torch.cuda.memory_reserved() if process is not None else None
    result["context_minus_allocated"] = process - torch.cuda.memory_allocated() if process is not None else None
    # cuBLAS handles and workspace, and the kernels a matmul loads lazily, join the context on first use
    y = torch.randn(1024, 1024, device="cuda", dtype=torch.bfloat16)
    (y @ y).sum().item()
    del y
    torch.cuda.synchronize()
    process2, _ = _process_memory(torch, os.getpid())
    result["context_after_matmul_bytes"] = process2 - torch.cuda.memory_reserved() if process2 is not None else None
    del x
    return result


def worker(spec: dict, dry_run: bool) -> dict:
    """Builds the model, runs STEPS training steps, returns the measurements (raises on failure)."""
    import resource

    import torch

    catalog = {a["id"]: a for a in json.loads(CATALOG.read_text())}
    a = catalog[spec["model"]]
    if dry_run:
        a = _tiny(a)
        spec = {**spec, "batch_size": min(spec["batch_size"], 2),
                "seq_len": min(spec["seq_len"], 64) if spec["seq_len"] else None,
                "new_tokens": min(spec["new_tokens"], 16) if spec.get("new_tokens") else None,
                "image_size": a.get("image_size", 32) if spec["image_size"] else None}
    cuda = not dry_run
    if cuda and not torch.cuda.is_available():
        raise RuntimeError("no CUDA device (use --dry-run on a CPU)")
    device = torch.device("cuda" if cuda else "cpu")
    baseline = _device_used(torch) if cuda else None
    if cuda:
        torch.cuda.init()
    torch.manual_seed(0)
    out: dict = {"measured_shape": {"batch_size": spec["batch_size"], "seq_len": spec["seq_len"],
                                    "image_size": spec["image_size"]} if dry_run else None}

    # model
    if a["kind"] == "cnn":
        model, make_inputs, info = _cnn_model(a, spec, torch, device)
    else:
        model, make_inputs, info = _hf_model(a, spec, torch, device)
    out.update(info)
    amp = spec["dtype"].startswith("amp")
    half = {"bf16": torch.bfloat16, "fp16": torch.float16, "amp-bf16": torch.bfloat16, "amp-fp16": torch.float16}.get(spec["dtype"])
    lora, quant = spec["lora"], spec["quant"]
    # weights: fp32 for fp32 and AMP, 16-bit for pure 16-bit; a LoRA base is loaded in 16-bit under AMP too
    weight_dtype = half if (half is not None and (not amp or lora or quant)) else torch.float32
    model.to(device=device, dtype=weight_dtype)
    if quant:
        if quant != "nf4-dq":
            raise Skip(f"quantisation {quant!r} is not set up in this script")
        out["quantised_linears"] = _quantise_nf4(model, torch, device)
    if spec["gradient_checkpointing"]:
        if not hasattr(model, "gradient_checkpointing_enable"):
            raise Skip("the model has no gradient_checkpointing_enable")
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    if lora:
        try:
            import peft
        except ImportError:
            raise Skip("peft is not importable: LoRA row skipped") from None
        config = peft.LoraConfig(r=lora["rank"], lora_alpha=lora["alpha"], lora_dropout=lora["dropout"],
                                 target_modules=list(lora["targets"]), bias="none")
        model = peft.get_peft_model(model, config)  # peft >= 0.12 keeps adapters in fp32 (autocast_adapter_dtype)
        out["peft"] = peft.__version__
    if spec.get("mode") == "generate":
        return _generate(model, spec, out, torch, device, baseline)
    if spec.get("fsdp"):
        _fully_shard_one_rank(model, torch, device)
        out["fsdp"] = "fully_shard on one rank"
    model.train()
    trainable = [p for p in model.parameters() if p.requires_grad]
    out["params"] = sum(p.numel() for p in model.parameters())
    out["trainable_params"] = sum(p.numel() for p in trainable)
    out["trainable_dtype"] = str(trainable[0].dtype).replace("torch.", "") if trainable else None
    out["weight_dtype"] = str(weight_dtype).replace("torch.", "")
    fused = {"fused": True} if spec.get("fused") else {}
    optimizer = {
        "adamw": lambda: torch.optim.AdamW(trainable, lr=1e-5, **fused),
        "adam": lambda: torch.optim.Adam(trainable, lr=1e-5),
        "sgd": lambda: torch.optim.SGD(trainable, lr=1e-4),
        "sgd-momentum": lambda: torch.optim.SGD(trainable, lr=1e-4, momentum=0.9),
    }[spec["optimizer"]]()
    input_dtype = weight_dtype if not quant else torch.bfloat16
    inputs = make_inputs(input_dtype if a["kind"] in ("cnn", "vision-transformer") else None)

    def loss_of() -> torch.Tensor:
        if a["kind"] == "cnn":
            logits = model(inputs["x"])
            return torch.nn.functional.cross_entropy(logits.float(), inputs["labels"])
        return model(**inputs).loss

    import contextlib
    import gc

    autocast = (lambda: torch.autocast(device.type, dtype=half)) if amp else contextlib.nullcontext
    gc.collect()
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
        out["allocated_before"] = torch.cuda.memory_allocated()
    step_peaks, step_seconds, losses = [], [], []
    try:
        for _ in range(STEPS):
            start = time.perf_counter()
            if cuda:
                torch.cuda.reset_peak_memory_stats()  # max over the steps = the peak since the first reset
            for _micro in range(spec.get("accumulate", 1)):
                with autocast():
                    loss = loss_of()
                loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            losses.append(float(loss.detach().float().item()))
            del loss
            if cuda:
                torch.cuda.synchronize()
                step_peaks.append(torch.cuda.max_memory_allocated())
            step_seconds.append(round(time.perf_counter() - start, 3))
    except torch.cuda.OutOfMemoryError as error:
        out["oom_at_step"] = len(step_seconds) + 1
        out["allocated_at_oom"] = torch.cuda.max_memory_allocated()
        out["reserved_at_oom"] = torch.cuda.max_memory_reserved()
        out["error"] = f"OutOfMemoryError: {str(error)[:400]}"
        return out
    out.update(step_seconds=step_seconds, losses=[round(x, 4) for x in losses])
    if cuda:
        out["step_allocated"] = step_peaks
        out["allocated"] = max(step_peaks)
        out["reserved"] = torch.cuda.max_memory_reserved()
        out["allocated_end"] = torch.cuda.memory_allocated()
        out["reserved_end"] = torch.cuda.memory_reserved()
        out["process"], out["process_source"] = _process_memory(torch, os.getpid())
        free, total = torch.cuda.mem_get_info()
        out["device_used_delta"] = (total - free) - baseline if baseline is not None else None
        if out["process"] is None and out["device_used_delta"] is not None:
            out["process"], out["process_source"] = out["device_used_delta"], "device used memory minus before"
        if out["process"] is not None:
            out["process_overhead"] = out["process"] - out["reserved_end"]  # context, cuBLAS/cuDNN workspaces
    else:
        out["cpu_max_rss"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return out


def _fully_shard_one_rank(model, torch, device) -> None:
    """FSDP2 on a one-process group: the gathers, reduce-scatters and their buffers, without sharding."""
    import torch.distributed as dist

    try:
        from torch.distributed.fsdp import fully_shard
    except ImportError:
        raise Skip("this torch has no torch.distributed.fsdp.fully_shard") from None
    if not dist.is_initialized():
        store = tempfile.NamedTemporaryFile(prefix="gpu_peaks_store_", delete=False)
        store.close()
        backend = "nccl" if device.type == "cuda" else "gloo"
        dist.init_process_group(backend, init_method=f"file://{store.name}", rank=0, world_size=1)
    layers = [m for m in model.modules() if isinstance(m, torch.nn.ModuleList)]
    for layer in (layers[0] if layers else []):
        fully_shard(layer)
    fully_shard(model)


def _generate(model, spec: dict, out: dict, torch, device, baseline) -> dict:
    """Greedy generation after a prompt of ``seq_len`` tokens; the peak over the whole call."""
    model.eval()
    vocab = model.config.vocab_size
    prompt = torch.randint(0, vocab, (spec["batch_size"], spec["seq_len"]), device=device)
    kwargs = {"max_new_tokens": spec["new_tokens"], "do_sample": False, "min_new_tokens": spec["new_tokens"]}
    if spec.get("cache") == "static":
        kwargs["cache_implementation"] = "static"
    out["params"] = sum(p.numel() for p in model.parameters())
    cuda = device.type == "cuda"
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
        out["allocated_before"] = torch.cuda.memory_allocated()
    start = time.perf_counter()
    try:
        with torch.no_grad():
            generated = model.generate(prompt, attention_mask=torch.ones_like(prompt), **kwargs)
    except torch.cuda.OutOfMemoryError as error:
        out["error"] = f"OutOfMemoryError: {str(error)[:400]}"
        out["allocated_at_oom"] = torch.cuda.max_memory_allocated()
        return out
    out["generated_tokens"] = int(generated.shape[1] - prompt.shape[1])
    out["step_seconds"] = [round(time.perf_counter() - start, 3)]
    if cuda:
        torch.cuda.synchronize()
        out["allocated"] = torch.cuda.max_memory_allocated()
        out["reserved"] = torch.cuda.max_memory_reserved()
        out["process"], out["process_source"] = _process_memory(torch, os.getpid())
        if out["process"] is not None:
            out["process_overhead"] = out["process"] - torch.cuda.memory_reserved()
    else:
        import resource

        out["cpu_max_rss"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return out


def _worker_main(spec_json: str, result_path: str, dry_run: bool) -> None:
    try:
        if spec_json == "context":
            result = context_worker(dry_run)
        else:
            result = worker(json.loads(spec_json), dry_run)
    except Skip as skip:
        result = {"skipped": str(skip)}
    except BaseException as error:  # noqa: BLE001 - recorded, the parent goes on
        import traceback

        result = {"error": f"{type(error).__name__}: {str(error)[:600]}",
                  "traceback": traceback.format_exc()[-2000:]}
    Path(result_path).write_text(json.dumps(result))
    sys.stdout.flush()
    os._exit(0)  # skip interpreter teardown (CUDA teardown after an error can hang)


# ====================================================================== parent (the run)
_CURRENT: list[subprocess.Popen] = []


def _on_term(signum, frame) -> None:
    """Killed from outside (a timeout around the whole run): take the running worker down too. OUT.json
    already holds every configuration finished so far."""
    for proc in _CURRENT:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            pass
    raise SystemExit(128 + signum)


def _run_subprocess(what: str, timeout: float, dry_run: bool) -> tuple[dict, float]:
    with tempfile.TemporaryDirectory() as tmp:
        result_path = Path(tmp) / "result.json"
        command = [sys.executable, str(Path(__file__).resolve()), "--worker", what, str(result_path)]
        if dry_run:
            command.append("--dry-run")
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false",
               "TRANSFORMERS_VERBOSITY": "error", "PYTHONWARNINGS": "ignore"}
        start = time.monotonic()
        proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env,
                                start_new_session=True, text=True, errors="replace")
        _CURRENT[:] = [proc]
        try:
            output, _ = proc.communicate(timeout=max(timeout, 1.0))
            timed_out = False
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            output, _ = proc.communicate()
            timed_out = True
        finally:
            _CURRENT.clear()
        seconds = round(time.monotonic() - start, 2)
        if result_path.exists():
            try:
                return json.loads(result_path.read_text()), seconds
            except ValueError:
                pass
        tail = (output or "")[-1500:]
        reason = f"timed out after {timeout:.0f} s" if timed_out else f"worker exited with {proc.returncode}"
        return {"error": f"{reason}; output tail: {tail}"}, seconds


def _write(path: Path, result: dict) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(result, indent=1) + "\n")
    os.replace(tmp, path)


RUN_KEYS = ("id", "model", "batch_size", "seq_len", "image_size", "dtype", "optimizer", "gradient_checkpointing",
            "attention", "lora", "quant", "mode", "new_tokens", "cache", "fsdp", "accumulate", "fused")


def _gib(value) -> str:
    return f"{value / 2**30:7.2f}" if isinstance(value, (int, float)) else "      -"


def run(out: Path, specs: list[dict], budget: float, dry_run: bool) -> dict:
    began = time.monotonic()
    context, seconds = _run_subprocess("context", 120, dry_run)
    result = {
        "device": context.get("device"), "torch": context.get("torch"), "cuda": context.get("cuda"),
        "context_bytes": context.get("context_bytes"), "context": context, "dry_run": dry_run, "steps": STEPS,
        "budget_s": budget, "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "runs": [],
    }
    print(f"device {result['device']}  torch {result['torch']}  cuda {result['cuda']}  "
          f"context {_gib(result['context_bytes'])} GiB  ({seconds:.0f} s)", flush=True)
    if context.get("error"):
        print(f"context measurement failed: {context['error']}", flush=True)
    _write(out, result)
    for spec in specs:
        row = {key: spec[key] for key in RUN_KEYS}
        row.update(allocated=None, reserved=None, process=None, error=None, skipped=None, seconds=None)
        left = budget - (time.monotonic() - began)
        if left < spec["expect"]:
            row["skipped"] = f"time budget spent ({left:.0f} s left, {spec['expect']} s expected)"
            result["runs"].append(row)
            print(f"{spec['id']:60} skipped: budget", flush=True)
            continue
        measured, seconds = _run_subprocess(json.dumps(spec), min(spec["timeout"], left), dry_run)
        row.update(measured)
        row["seconds"] = seconds
        result["runs"].append(row)
        _write(out, result)
        status = row["error"] or (f"skipped: {row['skipped']}" if row["skipped"] else "ok")
        print(f"{spec['id']:60} alloc {_gib(row['allocated'])}  reserved {_gib(row['reserved'])}  "
              f"process {_gib(row['process'])} GiB  {seconds:5.1f} s  {status[:200]}", flush=True)
    result["seconds"] = round(time.monotonic() - began, 1)
    _write(out, result)
    done = sum(1 for r in result["runs"] if r["error"] is None and r["skipped"] is None)
    failed = sum(1 for r in result["runs"] if r["error"])
    skipped = sum(1 for r in result["runs"] if r["skipped"])
    print(f"{done} measured, {failed} failed, {skipped} skipped in {result['seconds']} s -> {out}", flush=True)
    return result


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "--worker":
        _worker_main(argv[1], argv[2], "--dry-run" in argv[3:])
        return 0
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", type=Path, nargs="?")
    parser.add_argument("--dry-run", action="store_true", help="tiny models (2 layers, hidden 64) on the CPU")
    parser.add_argument("--budget", type=float, default=DEFAULT_BUDGET_S,
                        help=f"seconds for the whole run (default {DEFAULT_BUDGET_S:.0f})")
    parser.add_argument("--timeout", type=float, help="cap on each configuration's seconds (default: its own)")
    parser.add_argument("--only", nargs="*", help="run the configurations whose id contains one of these")
    parser.add_argument("--list", action="store_true", help="print the matrix and exit")
    args = parser.parse_args(argv)
    specs = [s for s in MATRIX if not args.only or any(part in s["id"] for part in args.only)]
    if args.timeout:
        specs = [{**s, "timeout": min(s["timeout"], args.timeout), "expect": min(s["expect"], args.timeout)} for s in specs]
    if args.list:
        for spec in specs:
            print(spec["id"])
        return 0
    if args.out is None:
        parser.error("OUT.json is required")
    signal.signal(signal.SIGTERM, _on_term)
    signal.signal(signal.SIGINT, _on_term)
    run(args.out, specs, args.budget, args.dry_run)
    return 0


if __name__ == "__main__":
    sys.exit(main())
