"""What trainlint knows about the PyTorch ecosystem's names, as data the dataflow consults."""

from __future__ import annotations

import re

from .names import last_part

# Tensor methods whose result never carries a graph (host values, integer or boolean results, shapes).
GRAPH_FREE_METHODS = frozenset(
    {
        "detach", "item", "tolist", "numpy", "argmax", "argmin", "argsort", "long", "int", "bool",
        "short", "byte", "size", "dim", "numel", "eq", "ne", "gt", "lt", "ge", "le", "nonzero",
        "sign", "isnan", "isinf", "isfinite", "all", "any", "topk_indices", "element_size",
        "nelement", "stride", "data_ptr", "is_contiguous", "get_device", "count_nonzero", "equal",
    }
)
HOST_SYNC_METHODS = frozenset({"item", "cpu", "numpy", "tolist"})
GRAPH_FREE_ATTRIBUTES = frozenset(
    {"shape", "device", "dtype", "grad", "data", "ndim", "is_cuda", "requires_grad", "grad_fn"}
)
GRAPH_FREE_BUILTINS = frozenset(
    {"float", "int", "bool", "len", "str", "repr", "round", "isinstance", "type", "hash", "id", "format"}
)
# Module methods that return the module itself.
MODULE_SELF_METHODS = frozenset(
    {"to", "cuda", "cpu", "half", "float", "double", "bfloat16", "train", "eval", "requires_grad_", "to_empty"}
)
TENSOR_FACTORIES = frozenset(
    {
        "tensor", "as_tensor", "from_numpy", "zeros", "ones", "empty", "full", "arange", "linspace",
        "logspace", "eye", "rand", "randn", "randint", "randperm", "normal", "zeros_like", "ones_like",
        "empty_like", "full_like", "rand_like", "randn_like", "randint_like", "Tensor", "FloatTensor",
        "LongTensor",
    }
)
# `Variable(t)` has returned `t`, a plain tensor, since PyTorch 0.4 ("Variable (deprecated)" in the
# torch.autograd documentation); code written before then still wraps every tensor in it.
VARIABLE_WRAPPERS = frozenset({"torch.autograd.Variable", "torch.autograd.variable.Variable"})
FUNCTIONAL_LOSSES = frozenset(
    {
        "cross_entropy", "nll_loss", "binary_cross_entropy", "binary_cross_entropy_with_logits",
        "mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss", "kl_div", "cosine_embedding_loss",
        "margin_ranking_loss", "triplet_margin_loss", "ctc_loss", "poisson_nll_loss",
        "gaussian_nll_loss", "hinge_embedding_loss", "multilabel_margin_loss", "soft_margin_loss",
        "multilabel_soft_margin_loss", "multi_margin_loss",
    }
)
SAMPLERS_LOCAL = frozenset(
    {"RandomSampler", "SequentialSampler", "WeightedRandomSampler", "SubsetRandomSampler"}
)
NO_GRAD_CONTEXTS = frozenset({"no_grad", "inference_mode"})
NOT_MODEL_SUFFIXES = (
    "Tokenizer", "TokenizerFast", "Processor", "Config", "FeatureExtractor", "ImageProcessor",
    "GenerationConfig", "Dataset", "Scheduler", "Pipeline",
)
MODULE_BASES = frozenset(
    {
        "torch.nn.Module", "torch.nn.modules.module.Module", "nn.Module", "Module",
        "lightning.LightningModule", "pytorch_lightning.LightningModule", "lightning.pytorch.LightningModule",
        "L.LightningModule", "pl.LightningModule", "transformers.PreTrainedModel", "PreTrainedModel",
        "torch.nn.Sequential", "torch.nn.ModuleList",
    }
)
LIGHTNING_MODULE_BASES = frozenset(
    {"lightning.LightningModule", "pytorch_lightning.LightningModule", "lightning.pytorch.LightningModule"}
)
ITERABLE_DATASET_BASES = frozenset({"torch.utils.data.IterableDataset", "torch.utils.data.dataset.IterableDataset"})
MAP_DATASET_BASES = frozenset({"torch.utils.data.Dataset", "torch.utils.data.dataset.Dataset"})
# Loss classes by what input they expect.
LOSSES_WANTING_LOGITS = frozenset({"CrossEntropyLoss", "cross_entropy"})
LOSSES_WANTING_LOG_PROBS = frozenset({"NLLLoss", "nll_loss"})
LOSSES_WANTING_BINARY_LOGITS = frozenset({"BCEWithLogitsLoss", "binary_cross_entropy_with_logits"})
LOSSES_WANTING_BINARY_PROBS = frozenset({"BCELoss", "binary_cross_entropy"})

# Names that say data is split per process: `ds[rank::world_size]`, `shard(index=rank)`, `get_rank()`.
_RANK_WORDS = re.compile(
    r"\b(?:rank|local_rank|global_rank|world_size|num_replicas|process_index|num_processes|get_rank|get_world_size)\b",
    re.I,
)


def mentions_rank(text: str) -> bool:
    return _RANK_WORDS.search(text) is not None


_MODEL_PARAM = re.compile(
    r"(?:model|net|network|module|generator|discriminator|encoder|decoder|backbone|classifier|"
    r"netg|netd|net_g|net_d|policy|critic|actor|student|teacher|unet|transformer|vae)$",
    re.I,
)
# `make_net`, `build_model`, `create_encoder`: a function that builds one; calling it runs no forward.
_FACTORY_PARAM = re.compile(r"(?:make|build|create|get|new|init|construct|load)_")
_OPTIMIZER_PARAM = re.compile(r"(?:optimizer|optim|opt|optimizer_[a-z]+|opt_[a-z]+|optim_[a-z]+)$", re.I)
_CRITERION_PARAM = re.compile(r"(?:criterion|loss_fn|loss_func|loss_function|lossfn|loss_fct)$", re.I)


def is_torch_name(name: str) -> bool:
    return name == "torch" or name.startswith("torch.")


def is_loss_class(name: str) -> bool:
    return name.startswith("torch.nn.") and name.endswith("Loss")


def is_functional_loss(name: str) -> bool:
    return name.startswith("torch.nn.functional.") and last_part(name) in FUNCTIONAL_LOSSES


def is_optimizer_class(name: str) -> bool:
    if ".lr_scheduler" in name or "swa_utils" in name:
        return False
    head = last_part(name)
    if not head[:1].isupper() or head in {"Optimizer"}:
        return False
    return name.startswith(("torch.optim.", "bitsandbytes.optim.", "apex.optimizers.", "timm.optim.")) or (
        name.startswith("transformers.") and head in {"AdamW", "Adafactor"}
    )


def is_scheduler(name: str) -> bool:
    """A learning-rate scheduler's constructor: torch.optim.lr_scheduler's classes; transformers.optimization's
    `get_scheduler` and `get_*_schedule*` functions, which return a `LambdaLR` (its source). It has `.step()`
    and no `.zero_grad()`: it steps no weights."""
    if name.startswith("torch.optim.lr_scheduler."):
        return True
    head = last_part(name)
    return name.startswith("transformers.") and (head == "get_scheduler" or (head.startswith("get_") and "_schedule" in head))


def is_scaler(name: str) -> bool:
    return is_torch_name(name) and last_part(name) == "GradScaler"


def is_dataloader(name: str) -> bool:
    """torch's DataLoader, or torchdata's drop-in ``StatefulDataLoader`` (torchtune's recipes use it)."""
    return name in {
        "torch.utils.data.DataLoader", "torch.utils.data.dataloader.DataLoader",
        "torchdata.stateful_dataloader.StatefulDataLoader", "torchdata.stateful_dataloader.stateful_dataloader.StatefulDataLoader",
    }


# A DistributedSampler by another name: torchdata's resumable one shuffles by epoch the same way.
DISTRIBUTED_SAMPLERS = frozenset({
    "torchdata.stateful_dataloader.sampler.StatefulDistributedSampler",
})


def is_ddp_wrapper(name: str) -> bool:
    return name in {
        "torch.nn.parallel.DistributedDataParallel",
        "torch.nn.parallel.distributed.DistributedDataParallel",
        "torch.distributed.fsdp.FullyShardedDataParallel",
        "torch.distributed.fsdp.fully_sharded_data_parallel.FullyShardedDataParallel",
        "torch.distributed.fsdp.fully_shard",
        "torch.distributed._composable.fsdp.fully_shard",
    }


# torch.nn layers that hold no parameters: calling one records a graph only when its input carries
# one, and building one draws nothing (dropout draws when it is called, not when it is built).
_PARAMETERLESS_LAYER = re.compile(
    r"Identity|Flatten|Unflatten|ReLU6?|LeakyReLU|GELU|SiLU|Mish|ELU|SELU|CELU|Sigmoid|Tanh|Softmax|LogSoftmax|Softplus"
    r"|Hardswish|Hardsigmoid|Hardtanh|(?:Adaptive)?(?:Max|Avg)Pool[123]d|Upsample|PixelShuffle|ZeroPad[123]d"
    r"|CosineSimilarity|PairwiseDistance|(?:Alpha|FeatureAlpha)?Dropout[123]?d?"
)


def is_parameterless_layer(name: str) -> bool:
    return name.startswith("torch.nn.") and _PARAMETERLESS_LAYER.fullmatch(last_part(name)) is not None


def is_torch_layer(name: str) -> bool:
    if not name.startswith("torch.nn.") or name.startswith("torch.nn.functional"):
        return False
    head = last_part(name)
    return head[:1].isupper() and not head.endswith("Loss") and head not in {"Parameter", "Module"}


def is_model_factory(name: str) -> bool:
    head = last_part(name)
    if head.endswith(NOT_MODEL_SUFFIXES):
        return False
    if name.startswith("torchvision.models.") and head[:1].islower():
        # `models.resnet50`, `models.detection.fasterrcnn_resnet50_fpn`, `models.get_model`; not the
        # module's own attributes (`models.__dict__.keys()`) nor the registry's other functions
        return not any(part.startswith("_") for part in name.split(".")) and head not in _TORCHVISION_NOT_MODELS
    if name in {"timm.create_model", "peft.get_peft_model", "torch.hub.load"}:
        return True
    if head == "from_pretrained":
        owner = last_part(name[: -len(".from_pretrained")])
        return not owner.endswith(NOT_MODEL_SUFFIXES)
    return False


# torchvision.models functions that return no model: names, a weights enum, a builder function.
_TORCHVISION_NOT_MODELS = frozenset({"list_models", "get_model_weights", "get_weight", "get_model_builder"})


# Annotations that rule out every role a parameter's name could suggest.
_NOT_TRAINING_OBJECTS = frozenset({
    "str", "bytes", "int", "float", "bool", "dict", "list", "tuple", "set", "Path", "PathLike", "ModuleType",
})


def param_role(name: str, annotation: str | None) -> str | None:
    """What a function parameter most likely is, from its annotation or, failing that, its name."""
    if name[:1].isupper() and not name.isupper():
        return None  # `Model`, `QNetwork`: a class handed in, which the function calls to build one (cleanrl)
    if annotation:
        head = last_part(annotation)
        if head in {"Module", "PreTrainedModel", "LightningModule", "DistributedDataParallel"}:
            return "model"
        if head in {"Optimizer"} or "optim" in annotation.lower():
            return "optimizer"
        if head == "GradScaler":
            return "scaler"
        if head.endswith("Loss"):
            return "criterion"
        if head == "DataLoader":
            return "loader"
        if (head == "Fabric" and annotation.startswith(("lightning", "lightning_fabric"))) or (
            head == "Accelerator" and annotation.startswith("accelerate")
        ):
            return "accelerator"
        if head in _NOT_TRAINING_OBJECTS:
            return None  # `module: types.ModuleType`, `model: str`: the annotation says what the name does not
        if head == "Callable":
            return None  # `model: Callable[..., Any]`: any callable, a compiled function as much as a module
    lowered = name.lower()
    if _CRITERION_PARAM.search(lowered):
        return "criterion"
    if _OPTIMIZER_PARAM.fullmatch(lowered):
        return "optimizer"
    if lowered == "scaler" or lowered.endswith("_scaler"):
        return "scaler"
    if _MODEL_PARAM.search(lowered) and not lowered.endswith(("_name", "_path", "_dir")) and not _FACTORY_PARAM.match(lowered):
        return "model"
    return None


_CUDA_EVIDENCE = re.compile(r"""\.cuda\(|["']cuda|torch\.cuda\.|device_map|["']gpu["']""")


def cuda_evidence(text: str, start: int = 0, end: int | None = None) -> tuple[int, int] | None:
    """The first line of ``text[start:end]`` (whole lines) that shows CUDA, and where the text showing it ends."""
    # Searched for on its own, not as `^[^#\n]*?(...)` per line: that anchored form tried every
    # position of every line of a file without any (2 % of a batch run over torchtune). An
    # occurrence after a `#` rules out the rest of its line, as the anchored form would.
    for match in _CUDA_EVIDENCE.finditer(text, start, len(text) if end is None else end):
        line_start = text.rfind("\n", 0, match.start()) + 1
        if "#" not in text[line_start:match.start()]:
            return text.count("\n", 0, line_start) + 1, match.end()
    return None
