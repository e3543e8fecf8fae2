"""What libraries do that their names do not say: documented facts, one a row, with their sources.

Rules need positive evidence before they call a value a model whose output carries an autograd
graph. ``StableDiffusionPipeline.from_pretrained(...)`` is not a model: a diffusers pipeline is a
plain object whose ``__call__`` runs under ``@torch.no_grad()`` and returns PIL images or arrays.
``UNet2DConditionModel.from_pretrained(...)`` is one (``ModelMixin`` subclasses ``torch.nn.Module``).
What a class is comes first from the installed package's source
(:mod:`trainlint.analysis.library_source`), then from ``TABLE`` below when the package is not
installed where trainlint runs: a few documented naming facts of diffusers, transformers and peft.

Below it, ``CALL_FACTS``: what some library calls do that their names do not say (which ones draw
from numpy's global generator, start fresh processes, or shard the data with a DistributedSampler),
one documented fact a row, for the rules that depend on them (``call_fact``); ``TRAINERS_TRUSTING_LOSS``:
which trainers leave an overriding ``compute_loss`` undivided by the accumulation count
(``trainer_trusting_loss``); and the modes and dropout of library models after loading.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

MODULE = "module"  # an nn.Module: calling it runs forward, which records a graph when grad is on
PIPELINE = "pipeline"  # a callable that runs without grad and returns host objects (images, text)
OTHER = "other"  # a class that is neither (a tokenizer, a scheduler, a config, an EMA helper)



@dataclass(frozen=True)
class ClassKind:
    kind: str  # MODULE, PIPELINE or OTHER
    evidence: str  # where it was established, for messages: "diffusers/.../pipeline_x.py:780: ..."


# ---------------------------------------------------------------------------------------------- table
# Facts used when a package is not installed. Each row: top-level package, a pattern the class name
# matches in full, the kind, and why. Rows are tried in order; the first match wins.
TABLE: tuple[tuple[str, re.Pattern[str], str, str], ...] = (
    ("diffusers", re.compile(r"AutoPipeline\w*|\w*Pipeline"), PIPELINE,
     "diffusers pipelines are not nn.Modules; their `__call__` runs under `@torch.no_grad()`"),
    ("diffusers", re.compile(r"\w*(Scheduler|Config|Mixin|Output)|EMAModel"), OTHER,
     "a diffusers scheduler, config or helper, not an nn.Module"),
    ("diffusers", re.compile(r"(UNet|Autoencoder|ControlNet|VQModel|PriorTransformer|\w*Transformer\w*Model)\w*"), MODULE,
     "diffusers models subclass `ModelMixin`, an nn.Module"),
    ("transformers", re.compile(r"\w*Pipeline"), PIPELINE,
     "transformers pipelines are not nn.Modules; they run the model under `no_grad`/`inference_mode`"),
    ("transformers", re.compile(r"\w*(Tokenizer|TokenizerFast|Processor|Config|FeatureExtractor|ImageProcessor|Output|Trainer|Arguments)"), OTHER,
     "a transformers tokenizer, processor, config or helper, not an nn.Module"),
    ("transformers", re.compile(r"AutoModel\w*|\w*(Model|For[A-Z]\w*)"), MODULE,
     "transformers models subclass `PreTrainedModel`, an nn.Module"),
    ("peft", re.compile(r"PeftModel\w*"), MODULE, "peft models wrap an nn.Module"),
    ("pytorch_fid", re.compile(r"InceptionV3"), MODULE, "pytorch_fid's `InceptionV3` subclasses nn.Module"),
)
# Base classes whose subclasses are pipelines, whatever their own `__call__` says.
PIPELINE_BASES = {
    "diffusers.pipelines.pipeline_utils.DiffusionPipeline": "a diffusers `DiffusionPipeline`, which is not an nn.Module",
    "transformers.pipelines.base.Pipeline": "a transformers `Pipeline`, which runs its model under `inference_mode`",
}
# Functions that build a pipeline: `transformers.pipeline("text-generation", ...)`.
PIPELINE_FACTORIES = frozenset({"transformers.pipeline", "transformers.pipelines.pipeline"})


# ---------------------------------------------------------------------------------------------- calls
# What some library calls do that their names do not say, which rules depend on. One fact a row: the
# call's canonical name, the fact, the keyword arguments that change it (any one of them), and its source.
DRAWS_GLOBAL_NUMPY = "draws from numpy's global generator unless the argument is given"
STARTS_FRESH_PROCESSES = "runs a function in fresh processes that do not inherit the parent's generators"
SEEDS_WHEN_BUILT = "seeds torch, numpy and `random` from its arguments' seed when it is built, not before"
SEEDS_ITS_WORKERS = (
    "runs its dataset (`__getitem__`, the transforms it calls) in worker processes when the argument is given and not "
    "0, and seeds torch, numpy and `random` in each worker from a base seed drawn from torch's generator"
)
DDP_SAMPLER_WHEN = "splits the data with a DistributedSampler, whose epoch `loader.set_epoch` advances, when the argument is true"
LEAVES_GRADIENTS = "reads or gathers parameters and leaves their gradients alone"
SERVES_REQUESTS = "registers the decorated function as a request handler, which the server calls with grad on"
RUNS_ENTRY_POINT = "runs the function it is handed as the program's command, with no torch grad context of its own"
ARGUMENT_PARSING_DECORATOR = "parses the command line for the decorated function and calls it unchanged (grad mode untouched)"
UNPICKLES_OBJECT = "returns the object saved, as saved: called, only a whole module (nn.Module) runs, its forward with grad on"
KEEPS_NO_GRAPH = "takes a tensor and keeps none of its autograd graph: it detaches it and keeps host data (an image)"
DISABLES_DROPOUT = "sets the rate of every nn.Dropout in the module it is handed to 0: dropout is off in either mode"
RUNS_WRAPPED_MODULE = "wraps the module it is handed (first argument, `module`): calling the wrapper returns that module's forward output"
ACCUMULATES_ONLY_INSIDE = (
    "divides every loss its `backward` is given by the argument, while its prepared optimizers skip a step only "
    "inside its `accumulate` context"
)
PREPARED_CLEARS_WITH_STEP = (
    "its prepared optimizers' `zero_grad` clears only on the micro-steps their `step` steps (inside `accumulate`, "
    "every argument-th); a module's own `zero_grad` is not theirs and clears on every call"
)


# What holds a tensor by torch's own contract, whatever the code around it is named. The annotated types:
# PyTorch, torch.Tensor and its legacy typed aliases (`torch.FloatTensor`, ...; "Tensor Attributes" and the
# `torch.Tensor` page); a parameter annotated so (or `Optional[...]` of one) is a tensor or None.
TENSOR_TYPES = frozenset({
    "torch.Tensor", "torch.FloatTensor", "torch.DoubleTensor", "torch.HalfTensor", "torch.BFloat16Tensor",
    "torch.LongTensor", "torch.IntTensor", "torch.ShortTensor", "torch.ByteTensor", "torch.CharTensor",
    "torch.BoolTensor", "torch.cuda.FloatTensor", "torch.cuda.LongTensor",
})
ELEMENTWISE_COMPARISON = ("PyTorch, torch.eq / torch.ne / torch.lt / torch.le / torch.gt / torch.ge (Tensor.__eq__, __lt__, ...): "
                          "\"Computes element-wise\" comparison, broadcasting; returns \"A boolean tensor\": `==`, `!=`, `<`, `<=`, "
                          "`>`, `>=` with a tensor operand make a tensor")
REGISTERED_BUFFER = ("PyTorch, nn.Module.register_buffer: `tensor (Tensor or None)`, any other value raises TypeError "
                     "('torch Tensor or None required'); Module.__setattr__ enforces the same for a later assignment to "
                     "the buffer's name: a registered buffer holds a tensor or None")


@dataclass(frozen=True)
class CallFact:
    callee: str  # canonical dotted name of the library call
    fact: str  # one of the kinds above
    arguments: tuple[str, ...]  # keywords any one of which changes it (none: nothing does)
    source: str  # where the library documents it
    when: str | None = None  # a keyword the fact needs given as a literal True (`shuffle=True`); None: always


CALL_FACTS: tuple[CallFact, ...] = (
    *(
        CallFact(wrapper, RUNS_WRAPPED_MODULE, (),
                 "PyTorch, DataParallel and DistributedDataParallel (`module (Module) – module to be parallelized`): "
                 "forward scatters the input, runs the module (its replicas) and returns its outputs, gathered "
                 "(DataParallel) or as they are (DistributedDataParallel)")
        for wrapper in ("torch.nn.DataParallel", "torch.nn.parallel.DataParallel", "torch.nn.parallel.data_parallel.DataParallel",
                        "torch.nn.parallel.DistributedDataParallel", "torch.nn.parallel.distributed.DistributedDataParallel")
    ),
    CallFact("torch.load", UNPICKLES_OBJECT, (),
             "PyTorch, torch.load: 'Loads an object saved with torch.save() from a file'; the serialization notes: "
             "`torch.save(model)` saves the entire module, which `torch.load` returns (weights_only=False, the default "
             "before 2.6)"),
    CallFact("accelerate.Accelerator", ACCUMULATES_ONLY_INSIDE, ("gradient_accumulation_steps",),
             "Accelerate, Accelerator.backward: `loss = loss / self.gradient_accumulation_steps` (all but DeepSpeed; "
             "the count defaults to 1, or ACCELERATE_GRADIENT_ACCUMULATION_STEPS, which `accelerate launch` sets for DeepSpeed); "
             "AcceleratedOptimizer.step steps when `gradient_state.sync_gradients`, True unless "
             "`Accelerator.accumulate` set it (usage guide 'Performing gradient accumulation with Accelerate')"),
    CallFact("accelerate.Accelerator", PREPARED_CLEARS_WITH_STEP, ("gradient_accumulation_steps",),
             "Accelerate, accelerate/optimizer.py: AcceleratedOptimizer.zero_grad calls the optimizer's zero_grad only "
             "`if self.gradient_state.sync_gradients`, the flag its step skips on, which `Accelerator.accumulate` leaves "
             "False on all but every gradient_accumulation_steps-th call; torch.nn.Module.zero_grad resets every "
             "parameter's gradient whenever it is called"),
    CallFact("sklearn.model_selection.train_test_split", DRAWS_GLOBAL_NUMPY, ("random_state",),
             "scikit-learn glossary, random_state: None uses the global RandomState instance of numpy.random"),
    CallFact("sklearn.utils.shuffle", DRAWS_GLOBAL_NUMPY, ("random_state",),
             "scikit-learn, sklearn.utils.shuffle: random_state=None uses numpy.random's global state"),
    CallFact("sklearn.utils.resample", DRAWS_GLOBAL_NUMPY, ("random_state",),
             "scikit-learn, sklearn.utils.resample: random_state=None uses numpy.random's global state"),
    *(
        CallFact(f"sklearn.model_selection.{splitter}", DRAWS_GLOBAL_NUMPY, ("random_state",),
                 f"scikit-learn, {splitter}: with shuffle=True, random_state=None shuffles with numpy.random's global "
                 "RandomState (glossary: random_state)", when="shuffle")
        for splitter in ("KFold", "StratifiedKFold", "GroupKFold", "StratifiedGroupKFold")
    ),
    *(
        CallFact(f"sklearn.model_selection.{splitter}", DRAWS_GLOBAL_NUMPY, ("random_state",),
                 f"scikit-learn, {splitter}: random_state=None draws the splits from numpy.random's global RandomState")
        for splitter in ("ShuffleSplit", "StratifiedShuffleSplit", "GroupShuffleSplit")
    ),
    *(
        CallFact(f"sklearn.datasets.{generator}", DRAWS_GLOBAL_NUMPY, ("random_state",),
                 f"scikit-learn, {generator}: random_state=None draws the samples from numpy.random's global RandomState")
        for generator in ("make_classification", "make_regression", "make_blobs", "make_moons", "make_circles")
    ),
    *(
        CallFact(f"transformers.{trainer}", SEEDS_WHEN_BUILT, (),
                 "transformers, Trainer.__init__ (trainer.py): `enable_full_determinism(self.args.seed) if "
                 "self.args.full_determinism else set_seed(self.args.seed)`, where the Trainer is built: a draw made "
                 "before that runs unseeded (Seq2SeqTrainer subclasses Trainer and calls its __init__)")
        for trainer in ("Trainer", "Seq2SeqTrainer")
    ),
    *(
        CallFact(loader, SEEDS_ITS_WORKERS, ("num_workers",),
                 "PyTorch, torch/utils/data/_utils/worker.py, _worker_loop: `seed = base_seed + worker_id; random.seed(seed); "
                 "torch.manual_seed(seed)`, numpy seeded from `_generate_state(base_seed, worker_id)` (since 1.9); "
                 "dataloader.py: the iterator draws `_base_seed` from `loader.generator`, torch's default generator when none is given")
        for loader in ("torch.utils.data.DataLoader", "torch.utils.data.dataloader.DataLoader")
    ),
    CallFact("torch.multiprocessing.spawn", STARTS_FRESH_PROCESSES, (),
             "torch.multiprocessing.spawn starts each process with the 'spawn' method: a new interpreter that "
             "imports the main module as __mp_main__ (its `if __name__ == '__main__':` block does not run)"),
    CallFact("torch.multiprocessing.start_processes", STARTS_FRESH_PROCESSES, (),
             "torch.multiprocessing.start_processes with its default start_method='spawn': as spawn"),
    *(
        CallFact(f"datasets.Dataset.{method}", DRAWS_GLOBAL_NUMPY, ("seed", "generator"),
                 "Hugging Face datasets: a randomized method given neither seed nor generator takes its seed from "
                 "np.random.get_state() (datasets/fingerprint.py, arrow_dataset.py)")
        for method in ("shuffle", "train_test_split")
    ),
    CallFact("datasets.DatasetDict.shuffle", DRAWS_GLOBAL_NUMPY, ("seed", "seeds", "generators"),
             "Hugging Face datasets: DatasetDict.shuffle shuffles each split as Dataset.shuffle does"),
    CallFact("deepspeed.zero.GatheredParameters", LEAVES_GRADIENTS, (),
             "DeepSpeed, deepspeed.zero.GatheredParameters: a context that gathers ZeRO-3-partitioned parameters so that "
             "their values can be read or modified, and partitions them again on exit; gradients are not its concern"),
    *(
        CallFact(f"{app}.{method}", SERVES_REQUESTS, (),
                 f"{app}.{method} registers a path operation: the server calls the function for every request, "
                 "with no torch grad context of its own (FastAPI, Flask: routing)")
        for app in ("fastapi.FastAPI", "fastapi.APIRouter", "flask.Flask", "flask.Blueprint")
        for method in ("get", "post", "put", "patch", "delete", "route", "websocket", "api_route")
    ),
    CallFact("wandb.Image", KEEPS_NO_GRAPH, (),
             "Weights & Biases, wandb/sdk/data_types/image.py, Image._initialize_from_data: a torch tensor that requires grad "
             "is detached, made a grid and kept as a PIL image"),
    *(
        CallFact(f"{package}.disable_dropout_in_model", DISABLES_DROPOUT, (),
                 "TRL, trl/trainer/utils.py, disable_dropout_in_model: `for module in model.modules(): if isinstance(module, "
                 "torch.nn.Dropout): module.p = 0`; DPOConfig, KTOConfig and RewardConfig default `disable_dropout=True` (GRPOConfig "
                 "and RLOOConfig False), and the trainers call it on the model and the reference model when it is set")
        for package in ("trl", "trl.trainer", "trl.trainer.utils")
    ),
    CallFact("fire.Fire", RUNS_ENTRY_POINT, (),
             "Python Fire, fire.Fire(component): calls the function with the command line's arguments (guide: 'Calling Functions')"),
    CallFact("typer.run", RUNS_ENTRY_POINT, (),
             "Typer, typer.run(main): builds a command from the function and calls it (docs: 'First Steps')"),
    CallFact("jsonargparse.CLI", RUNS_ENTRY_POINT, (),
             "jsonargparse, CLI(components): parses the arguments from the function's signature and calls it"),
    *(
        CallFact(f"click.{decorator}", ARGUMENT_PARSING_DECORATOR, (),
                 f"Click, click.{decorator}: builds a command whose callback is the decorated function, called with "
                 "the parsed values when the command runs")
        for decorator in ("command", "option", "argument", "group", "pass_context")
    ),
    *(
        CallFact(f"dgl.dataloading.{loader}", DDP_SAMPLER_WHEN, ("use_ddp",),
                 "DGL, dgl.dataloading.DataLoader: use_ddp=True splits the indices with "
                 "torch.utils.data.distributed.DistributedSampler; set_epoch(epoch) sets its epoch (use_ddp only)")
        for loader in ("DataLoader", "NodeDataLoader", "EdgeDataLoader", "GraphDataLoader")
    ),
)
_CALL_FACTS = {(row.callee, row.fact): row for row in CALL_FACTS}


@dataclass(frozen=True)
class ShardedLoaderFact:
    """A library call that, handed a dataset, returns (in a tuple) a loader whose shuffling DistributedSampler
    only an explicit `set_epoch` advances, and nothing in the library calls it."""

    callee: str  # canonical dotted name
    dataset: str  # the keyword that hands it the dataset
    position: int  # the element of the returned tuple that is the loader
    sampler: str  # the loader's attribute holding the sampler
    source: str


SHARDED_LOADERS: tuple[ShardedLoaderFact, ...] = (
    ShardedLoaderFact(
        "deepspeed.initialize", "training_data", 2, "data_sampler",
        "DeepSpeed, deepspeed.initialize: returns `engine, optimizer, training_dataloader, lr_scheduler`, the loader "
        "a DeepSpeedDataLoader when `training_data` is given; runtime/dataloader.py: its `data_sampler` is "
        "`DistributedSampler(dataset, num_replicas, rank)` (shuffle=True) whenever local_rank >= 0 (any launch by "
        "its launcher) and curriculum learning is off; nothing in the deepspeed package calls `set_epoch`",
    ),
)
_SHARDED_LOADERS = {row.callee: row for row in SHARDED_LOADERS}


def sharded_loader(callee: str | None) -> ShardedLoaderFact | None:
    return _SHARDED_LOADERS.get(callee) if callee is not None else None


def call_fact(callee: str | None, fact: str) -> CallFact | None:
    """The row saying that the library call ``callee`` (canonical: ``dgl.dataloading.NodeDataLoader``)
    has ``fact``, or None."""
    return _CALL_FACTS.get((callee, fact)) if callee else None


# Model methods that a library runs without grad itself, whatever model they belong to: a model whose class
# is not known here may be one of that library's. One method a row, with its source.
LIBRARY_NO_GRAD_METHODS = {
    "generate": "transformers, GenerationMixin.generate is decorated `@torch.no_grad()` (generation/utils.py)",
}

# Methods of a library model that run the model's own forward over and over, in whatever mode the model is in: a call
# of one is a forward of that model (its dropout and batch-norm act as the mode says). One method a row, with its source.
LIBRARY_FORWARD_METHODS = {
    "generate": "transformers, GenerationMixin.generate (generation/utils.py): its decoding loops (`_sample`, "
    "`_beam_search`) run `outputs = self(**model_inputs, return_dict=True)` and switch no mode; it is only `@torch.no_grad()`",
}

# Methods of a diffusers pipeline that run some of its component models with the grad mode the caller leaves on (only
# the pipeline's `__call__` is decorated `@torch.no_grad()`): the method, the components it runs, the source. One a row.
PIPELINE_COMPONENT_METHODS = {
    "encode_prompt": (("text_encoder", "text_encoder_2", "text_encoder_3"),
                      "diffusers, StableDiffusionPipeline.encode_prompt (and the XL and 3 pipelines'): undecorated, it runs "
                      "`self.text_encoder(text_input_ids.to(device), ...)`; `__call__` alone is `@torch.no_grad()`"),
}
# Methods of a library model, other than its forward, that run its layers with the grad mode the caller leaves on.
LIBRARY_LAYER_METHODS = {
    "encode": "diffusers, AutoencoderKL.encode / VQModel.encode: the encoder's layers, decorated only `@apply_forward_hook`",
    "decode": "diffusers, AutoencoderKL.decode / VQModel.decode: the decoder's layers, decorated only `@apply_forward_hook`",
    "get_text_features": "transformers, CLIPModel.get_text_features: runs the text model and its projection",
    "get_image_features": "transformers, CLIPModel.get_image_features: runs the vision model and its projection",
}
# A pipeline's model components come in eval mode: diffusers, DiffusionPipeline.from_pretrained loads each with that
# component's own `from_pretrained` (pipeline_loading_utils.load_sub_model), which returns it in eval mode (above).

# Keyword arguments that only a library model's forward takes: calling a value with one of them runs that
# model, whatever the value was loaded by (a project's own `load_model` helper hands back a transformers
# model the analysis cannot see built). One keyword a row, with its source.
MODEL_FORWARD_KEYWORDS = {
    "output_hidden_states": "transformers, PreTrainedModel subclasses' forward: `output_hidden_states (bool, optional)`, "
    "returns the hidden states of all layers (docs: model outputs)",
    "output_attentions": "transformers, PreTrainedModel subclasses' forward: `output_attentions (bool, optional)`, "
    "returns the attention weights of all layers (docs: model outputs)",
}

# Model methods that a library leaves the model in eval mode after, whatever model they belong to (the
# library switches it and does not switch it back). One method a row, with its source.
_CONTINUOUS_BATCHING = (
    "transformers, generation/continuous_batching/continuous_api.py: ContinuousMixin.{method} builds a "
    "ContinuousBatchingManager, whose __init__ runs `self.model = model.eval()`; nothing restores training mode"
)
LIBRARY_EVAL_METHODS = {
    method: _CONTINUOUS_BATCHING.format(method=method) for method in ("generate_batch", "init_continuous_batching")
}


# Methods of a trainer class that its training loop calls for every step, after switching the model to training
# mode and before computing the loss (or that are the step): whatever such a method (an override) leaves in eval
# mode before the step's backward, the step's loss is computed in. One method a row, with its source.
TRAINER_STEP_HOOKS = {
    "_prepare_inputs": "transformers, Trainer.training_step (trainer.py): `model.train()`, then "
                       "`inputs = self._prepare_inputs(inputs)`, then `loss = self.compute_loss(model, inputs, ...)`",
    # an override is the whole step: what it leaves in eval mode before its own backward, that backward runs in
    "training_step": "transformers, Trainer._inner_training_loop (trainer.py) calls `self.training_step(model, inputs, "
                     "num_items_in_batch)` once per step; the override computes the step's loss and runs its backward",
}

# Functions that hand back the module they are given, unwrapped from its distributed or accelerated wrapper:
# switching the mode of what they yield switches the trained model's. One function a row, with its source.
MODEL_UNWRAPPERS = {
    name: "trl, models/utils.py: unwrap_model_for_generation is a context manager that yields "
          "`accelerator.unwrap_model(model)` (the same module, its DeepSpeed ZeRO-3 parameters gathered)"
    for name in ("trl.models.unwrap_model_for_generation", "trl.models.utils.unwrap_model_for_generation")
}

# Calls whose first argument (or `seed=`) is the seed of a generator: a value handed there is a seed, whatever it
# is named. One call a row (the method row: any receiver's `manual_seed`, torch.Generator's), with its source.
SEEDING_CALLS = {
    **dict.fromkeys(("torch.manual_seed", "torch.random.manual_seed", "torch.cuda.manual_seed", "torch.cuda.manual_seed_all"),
                    "PyTorch: `torch.manual_seed(seed)`, `torch.cuda.manual_seed[_all](seed)` set the seed of the generators"),
    ".manual_seed": "PyTorch: `torch.Generator.manual_seed(seed)` sets the seed of that generator and returns it",
    "random.seed": "Python, random: `seed(a=None)` initializes the generator; None seeds it from the OS",
    "random.Random": "Python, random: `Random(x=None)` a generator seeded with x, from the OS when None",
    **dict.fromkeys(("numpy.random.seed", "numpy.random.RandomState", "numpy.random.default_rng"),
                    "NumPy: `seed(seed=None)`, `RandomState(seed=None)`, `default_rng(seed=None)`: None draws fresh OS entropy"),
    **dict.fromkeys(("transformers.set_seed", "accelerate.utils.set_seed"),
                    "transformers / accelerate: `set_seed(seed)` seeds random, numpy and torch (all devices)"),
    **dict.fromkeys(("lightning.seed_everything", "lightning.pytorch.seed_everything", "pytorch_lightning.seed_everything",
                     "lightning.fabric.seed_everything", "lightning_fabric.seed_everything"),
                    "Lightning: `seed_everything(seed=None)` seeds random, numpy and torch; None reads PL_GLOBAL_SEED or picks 0"),
    "tensorflow.random.set_seed": "TensorFlow: `tf.random.set_seed(seed)` sets the global random seed",
    **dict.fromkeys(("jax.random.PRNGKey", "jax.random.key"), "JAX: `jax.random.key(seed)` a PRNG key made from an integer seed"),
}
# Python random (`randint(a, b)`, `randrange(start, stop)`), NumPy (`randint(low, high=None)`): a random integer
RANDOM_INTEGER_DRAWS = frozenset({"random.randint", "random.randrange", "numpy.random.randint"})  # bounded by the last argument

# Attention functions whose dropout rate is a plain argument: they drop whenever it is non-zero, as a function
# cannot see the mode of the module that calls it. One function a row: where the rate goes (keyword, position).
@dataclass(frozen=True)
class AttentionDropout:
    function: str  # canonical dotted name
    keyword: str  # the rate's keyword
    position: int  # the rate's position among the positional arguments
    source: str


_FLASH_SOURCE = ("flash-attn, flash_attn_interface.py: `dropout_p: float. Dropout probability.`; README: \"dropout_p should be "
                 "set to 0.0 during evaluation\"")
ATTENTION_DROPOUT: tuple[AttentionDropout, ...] = (
    AttentionDropout("torch.nn.functional.scaled_dot_product_attention", "dropout_p", 4,
                     "PyTorch, torch.nn.functional.scaled_dot_product_attention: `dropout_p (float) - Dropout probability; "
                     "if greater than 0.0, dropout is applied`"),
    *(
        AttentionDropout(f"{module}.{name}", "dropout_p", position, _FLASH_SOURCE)
        for module in ("flash_attn", "flash_attn.flash_attn_interface")
        for name, position in (("flash_attn_func", 3), ("flash_attn_qkvpacked_func", 1), ("flash_attn_kvpacked_func", 2),
                               ("flash_attn_varlen_func", 7), ("flash_attn_varlen_qkvpacked_func", 3),
                               ("flash_attn_varlen_kvpacked_func", 6))
    ),
    *(
        AttentionDropout(f"{module}.memory_efficient_attention", "p", 4,
                         "xformers, xformers.ops.memory_efficient_attention: `p (float) - Dropout probability. Disabled if "
                         "set to 0.0`")
        for module in ("xformers.ops", "xformers.ops.fmha")
    ),
)
_ATTENTION_DROPOUT = {row.function: row for row in ATTENTION_DROPOUT}


def attention_dropout(canonical: str | None) -> AttentionDropout | None:
    """The row saying that the attention function ``canonical`` drops at the rate it is given, or None."""
    return _ATTENTION_DROPOUT.get(canonical) if canonical else None


# ------------------------------------------------------------------------------------------- trainers
# Trainers whose training step divides the loss by the gradient-accumulation count only when the model
# cannot normalise it itself: transformers' `Trainer.training_step` runs
# `if (not self.model_accepts_loss_kwargs or num_items_in_batch is None) and self.compute_loss_func is None:
# loss = loss / self.current_gradient_accumulation_steps`, and `model_accepts_loss_kwargs` is True for a
# model whose `forward` takes `**kwargs` (transformers' models do). An overriding `compute_loss` is then
# trusted to normalise by `num_items_in_batch`. trl's preference and RL trainers (DPO, GRPO, KTO, RLOO,
# Reward) set `self.model_accepts_loss_kwargs = False` in their `__init__`; SFTTrainer does not.
@dataclass(frozen=True)
class TrainerFact:
    trainer: str  # canonical dotted name of the trainer class
    trains: str  # for messages: what models it is given
    transformers_models_only: bool  # its model is a transformers model (forward takes **kwargs), not any nn.Module
    source: str


_GA_SOURCE = ("transformers, Trainer.training_step: the loss is divided by current_gradient_accumulation_steps only "
              "`if (not self.model_accepts_loss_kwargs or num_items_in_batch is None) and self.compute_loss_func is None`")
TRAINERS_TRUSTING_LOSS: tuple[TrainerFact, ...] = (
    *(TrainerFact(name, "any nn.Module", False, _GA_SOURCE)
      for name in ("transformers.Trainer", "transformers.trainer.Trainer", "transformers.Seq2SeqTrainer",
                   "transformers.trainer_seq2seq.Seq2SeqTrainer")),
    *(TrainerFact(name, "a transformers model", True,
                  _GA_SOURCE + "; trl.SFTTrainer subclasses it, loads a transformers model and leaves "
                  "model_accepts_loss_kwargs as the model's signature sets it (trl/trainer/sft_trainer.py)")
      for name in ("trl.SFTTrainer", "trl.trainer.SFTTrainer", "trl.trainer.sft_trainer.SFTTrainer")),
)
_TRAINERS_TRUSTING_LOSS = {row.trainer: row for row in TRAINERS_TRUSTING_LOSS}


def trainer_trusting_loss(canonical: str) -> TrainerFact | None:
    """The row saying that the trainer class ``canonical`` leaves the loss of an overriding
    ``compute_loss`` undivided by the accumulation count when the model takes loss keywords, or None."""
    return _TRAINERS_TRUSTING_LOSS.get(canonical)


# ---------------------------------------------------------------------------------------------- modes
# A library model's train/eval mode when the library hands it over, and whether the mode changes
# what it computes (it does only through dropout and batch-norm layers that act by default).
@dataclass(frozen=True)
class ModeFact:
    says: str  # what holds, for messages: "`resnet50` has batch-norm layers"
    source: str  # where the library documents it


# Packages whose `Model.from_pretrained(...)` calls `model.eval()` before returning the model.
_EVAL_AFTER_LOADING = {
    "transformers": "transformers, PreTrainedModel.from_pretrained: \"The model is set in evaluation mode by default using "
                    "model.eval() (Dropout modules are deactivated). To train the model, you should first set it back in "
                    "training mode with model.train()\" (huggingface.co/docs/transformers/main_classes/model)",
    "diffusers": "diffusers, ModelMixin.from_pretrained: \"The model is set in evaluation mode - model.eval() - by default, "
                 "and dropout modules are deactivated. To train the model, set it back in training mode with "
                 "model.train()\" (huggingface.co/docs/diffusers/api/models/overview)",
}

# torchvision and timm architectures built with batch-norm (or, for alexnet and vgg, dropout in the classifier).
_BATCH_NORM_FAMILIES = re.compile(
    r"(?:resnet|resnext|wide_resnet|efficientnet|mobilenet|densenet|inception|googlenet|regnet|vgg|alexnet|"
    r"squeezenet|shufflenet|mnasnet|xception|seresnet|seresnext|resnest|cspresnet|cspdarknet|dla|hrnet|dpn)"
)
_TIMM_BATCH_NORM = re.compile(  # not the group-norm variants (`resnet50_gn`, BiT's `resnetv2_50x1_bit`)
    r"(?!\w*(?:_gn|gn_|_bit|_evos))(?:resnet|resnext|wide_resnet|efficientnet|mobilenet|densenet|inception|regnet|xception|seresnet|seresnext|"
    r"resnest|cspresnet|cspdarknet|dla|hrnet|dpn|mnasnet|tf_efficientnet)"
)
# transformers architectures whose default configuration drops out hidden states (0.1), by class-name
# prefix and by the name of the published checkpoints (`bert-base-uncased`, `FacebookAI/roberta-base`).
_DROPOUT_ARCHITECTURES = (
    ("Bert", "bert", "BertConfig: hidden_dropout_prob=0.1"),
    ("Roberta", "roberta", "RobertaConfig: hidden_dropout_prob=0.1"),
    ("XLMRoberta", "xlm-roberta", "XLMRobertaConfig: hidden_dropout_prob=0.1"),
    ("DistilBert", "distilbert", "DistilBertConfig: dropout=0.1"),
    ("Electra", "electra", "ElectraConfig: hidden_dropout_prob=0.1"),
    ("Deberta", "deberta", "DebertaConfig: hidden_dropout_prob=0.1"),
    ("GPT2", "gpt2", "GPT2Config: resid_pdrop=0.1"),
    ("T5", "t5", "T5Config: dropout_rate=0.1"),
    ("Bart", "bart", "BartConfig: dropout=0.1"),
)


def eval_mode_after_loading(owner: str, method: str) -> ModeFact | None:
    """``owner.method(...)`` (``transformers.BertModel``, ``from_pretrained``) returns the model in eval mode."""
    source = _EVAL_AFTER_LOADING.get(owner.partition(".")[0]) if method == "from_pretrained" else None
    if source is None:
        return None
    return ModeFact(f"`{owner.rpartition('.')[2]}.from_pretrained` returns the model in eval mode", source)


# Keywords of a library's model builder that set a dropout rate for the model it builds, and where the
# library says so. timm.create_model passes them to the architecture, which applies them in training
# mode only; transformers' from_pretrained passes keywords its configuration knows to the configuration.
_TIMM_RATES = {
    "drop_rate": "timm.create_model: drop_rate, \"classifier dropout rate for training\" (huggingface.co/docs/timm/reference/models)",
    "drop_path_rate": "timm.create_model: drop_path_rate, \"stochastic depth drop rate for training\" (huggingface.co/docs/timm/reference/models)",
}
_TRANSFORMERS_RATE = re.compile(r"\w*(?:dropout|dropout_prob|pdrop|dropout_rate)")
_TRANSFORMERS_RATES_SOURCE = ("transformers, PreTrainedModel.from_pretrained: keyword arguments that match configuration "
                              "attributes update the configuration (huggingface.co/docs/transformers/main_classes/model)")


# torch.nn layers that drop out by default, the position of their `dropout` parameter, and where
# PyTorch documents the default.
_TORCH_DROPOUT_DEFAULTS = {
    "TransformerEncoderLayer": (3, "torch.nn.TransformerEncoderLayer: dropout, \"the dropout value (default=0.1)\" "
                   "(pytorch.org/docs/stable/generated/torch.nn.TransformerEncoderLayer.html)"),
    "TransformerDecoderLayer": (3, "torch.nn.TransformerDecoderLayer: dropout, \"the dropout value (default=0.1)\" "
                   "(pytorch.org/docs/stable/generated/torch.nn.TransformerDecoderLayer.html)"),
    "Transformer": (5, "torch.nn.Transformer: dropout, \"the dropout value (default=0.1)\" "
                   "(pytorch.org/docs/stable/generated/torch.nn.Transformer.html)"),
}


def torch_layer_dropout(name: str, given: float | None, positional: Sequence[float | None], passed: bool) -> str | None:
    """Where PyTorch says the torch.nn layer ``name`` (``TransformerEncoderLayer``) drops out in training
    mode as built: ``given`` is its ``dropout=`` keyword's value when a number, ``positional`` the numbers
    (None: not a number) passed by position, ``passed`` whether a ``dropout`` was passed at all. None when
    the layer drops nothing or what it was given is not known."""
    entry = _TORCH_DROPOUT_DEFAULTS.get(name)
    if entry is None:
        return None
    position, source = entry
    if given is None and len(positional) > position:
        given, passed = positional[position], True
    if given is None and passed:
        return None  # a name or an expression: the rate is not known
    return source if given is None or given > 0 else None


# torch.nn layers that act differently in training mode as built, whatever a caller's arguments leave unsaid:
# the argument (position, keyword) that can turn that off, the value that does, and where PyTorch says so.
_BATCH_NORM_SOURCE = ("torch.nn.BatchNorm2d: \"during training this layer keeps running estimates of its computed mean "
                      "and variance\", used \"for normalization during evaluation\"; with track_running_stats=False batch "
                      "statistics are used in both modes (pytorch.org/docs/stable/generated/torch.nn.BatchNorm2d.html)")
_DROPOUT_SOURCE = ("torch.nn.Dropout: \"during training, randomly zeroes some of the elements\", p default 0.5; "
                   "in evaluation mode it is the identity (pytorch.org/docs/stable/generated/torch.nn.Dropout.html)")
_TORCH_MODE_LAYERS = {
    **{name: ((4, "track_running_stats"), False, _BATCH_NORM_SOURCE)
       for name in ("BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "SyncBatchNorm")},
    **{name: ((0, "p"), 0, _DROPOUT_SOURCE) for name in ("Dropout", "Dropout1d", "Dropout2d", "Dropout3d", "AlphaDropout")},
}


def torch_layer_mode(name: str, arguments: Mapping[int | str, object]) -> str | None:
    """Where PyTorch says the torch.nn layer ``name`` (``BatchNorm2d``, ``Dropout``) acts differently in training
    mode as built with ``arguments`` (literal values by position or keyword; ``...`` for one that is not a
    literal): None when it is no such layer, or its switch (``p``, ``track_running_stats``) is given a value
    that turns it off or one that is not known."""
    entry = _TORCH_MODE_LAYERS.get(name)
    if entry is None:
        return None
    (position, keyword), off, source = entry
    given = arguments.get(keyword, arguments.get(position, None))
    if given is Ellipsis or given == off:
        return None
    return source


def mode_layers(built_by: str, checkpoint: str | None = None, rates: Mapping[str, float] | None = None) -> ModeFact | None:
    """Whether a library model has dropout or batch-norm layers that act by default: ``built_by`` is the
    canonical function or class that built it (``torchvision.models.resnet50``, ``timm.create_model``,
    ``transformers.AutoModel``), ``checkpoint`` the model name it was given (a literal, or what a name
    passed for it is known to hold), ``rates`` the dropout keywords it was given with their known values
    (``drop_rate=0.1``)."""
    top, _, rest = built_by.partition(".")
    name = built_by.rpartition(".")[2]
    for keyword, rate in (rates or {}).items():
        if rate <= 0:
            continue
        if built_by == "timm.create_model" and keyword in _TIMM_RATES:
            return ModeFact(f"timm builds it with `{keyword}={rate:g}`: dropout in training mode", _TIMM_RATES[keyword])
        if top == "transformers" and rest and _TRANSFORMERS_RATE.fullmatch(keyword):
            return ModeFact(f"`from_pretrained` sets `{keyword}={rate:g}`: dropout in training mode", _TRANSFORMERS_RATES_SOURCE)
    if built_by.startswith("torchvision.models.") and _BATCH_NORM_FAMILIES.match(name):
        return ModeFact(f"torchvision's `{name}` has batch-norm or dropout layers",
                        "torchvision.models: the architecture's reference implementation (pytorch.org/vision/stable/models)")
    if built_by == "timm.create_model" and checkpoint is not None and _TIMM_BATCH_NORM.match(checkpoint.rpartition("/")[2]):
        return ModeFact(f"timm's `{checkpoint}` has batch-norm layers",
                        "timm: the architecture's implementation in timm/models/ (huggingface.co/docs/timm/models)")
    if built_by == "pytorch_fid.inception.InceptionV3" or (top == "pytorch_fid" and name == "InceptionV3"):
        return ModeFact("pytorch_fid's `InceptionV3` has batch-norm layers",
                        "pytorch_fid/inception.py: InceptionV3 is built from torchvision's Inception-v3 blocks, each "
                        "convolution followed by BatchNorm2d")
    if top != "transformers" or not rest:
        return None
    for prefix, published, default in _DROPOUT_ARCHITECTURES:
        if re.match(rf"{prefix}(?:Model|For|LM|LMHead|Encoder|Decoder)", name) or (
            name.startswith("Auto") and checkpoint is not None
            and re.match(rf"{re.escape(published)}(?:-|$)", checkpoint.rpartition("/")[2].lower())
        ):
            return ModeFact(f"`{checkpoint or name}` drops out hidden states by default ({default})",
                            f"transformers, {default.partition(':')[0]} (huggingface.co/docs/transformers/model_doc)")
    return None


# Hub repositories whose `hubconf.py` entry points are a library's model builders, by name: torch.hub.load
# on them builds what the library function of the same name builds.
_HUB_LIBRARIES = {
    "pytorch/vision": "torchvision.models",  # pytorch/vision, hubconf.py: its entry points are imported from torchvision.models
}


def hub_builder(repository: str, entry: str) -> str | None:
    """The library function ``torch.hub.load(repository, entry)`` runs (``torchvision.models.resnet18`` for
    ``("pytorch/vision:v0.10.0", "resnet18")``), or None for a repository whose entry points are not known."""
    package = _HUB_LIBRARIES.get(repository.partition(":")[0].lower())
    return f"{package}.{entry}" if package is not None and entry.isidentifier() else None


def table_kind(canonical: str) -> ClassKind | None:
    top, _, rest = canonical.partition(".")
    name = canonical.rsplit(".", 1)[-1]
    if not rest:
        return None
    for package, pattern, kind, why in TABLE:
        if top == package and pattern.fullmatch(name):
            return ClassKind(kind, f"`{name}`: {why}")
    return None
