"""What a call evaluates to, and what its receiver keeps of what it is passed.

The scope walk (flow.py) evaluates a call's callee and arguments and asks here for the result:
calling a value (a model, a criterion), a method of one (``loss.detach()``, ``accelerator.prepare(...)``)
or a name (a library class, a torch function, a builtin, or a workspace function, whose own flow says
what it returns).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, cast

import libcst as cst

from . import libraries, torchapi
from .added_layers import added_layer
from .events import CallEvent, names_owner
from .names import dotted, last_part
from .passed_values import returned_by_call
from .quoting import quoted
from .statement_shapes import method_name, target_names
from .summary import ClassInfo, note_text_read
from .values import (
    ACCELERATOR,
    CONSTANT,
    CONTAINER,
    CRITERION,
    DATASET_ITERABLE,
    DATASET_MAP,
    DDP,
    DEVICE,
    ENGINE,
    GRAPH,
    LOADER,
    LOG_PROBS,
    LOGITS,
    LOSS,
    MODEL,
    MODEL_CLASS,
    NUMBER,
    ON_DEVICE,
    ON_HOST,
    OPTIMIZER,
    OUTPUT_KINDS,
    PIPELINE,
    PROBS,
    SAMPLER_DISTRIBUTED,
    SAMPLER_LOCAL,
    SCALED,
    SCALER,
    SHARDED,
    SIGMOID,
    STRUCTURED,
    TENSOR,
    UNKNOWN,
    VOLATILE,
    Value,
    is_known_tensor,
    join,
    table_value,
)

if TYPE_CHECKING:
    from .events import Context
    from .flow import ScopeAnalysis
    from .parsing import ParsedChunk
    from .summary import ModuleSummary

# Tensor methods and torch functions that return several tensors (a tuple or a named tuple).
_STRUCTURED_RESULTS = frozenset({
    "split", "chunk", "unbind", "sort", "topk", "max", "min", "median", "mode", "kthvalue", "unique",
    "tensor_split", "hsplit", "vsplit", "dsplit", "svd", "qr", "eig", "eigh", "lstsq", "aminmax", "histogram",
    "keys", "values", "items", "get", "to_tuple", "broadcast_tensors", "meshgrid",
})
# torch.nn layers whose forward returns a tuple.
_TUPLE_LAYERS = frozenset({"LSTM", "GRU", "RNN", "LSTMCell", "MultiheadAttention"})
# Class methods that build an instance: `UNet2DConditionModel.from_pretrained(...)`.
_FACTORY_METHODS = frozenset({"from_pretrained", "from_single_file", "from_config", "from_pipe"})
_MATRIX_PRODUCTS = frozenset({"matmul", "bmm", "mm", "einsum"})
# torch.nn layers whose output is an unbounded linear map of their input: raw scores, not probabilities.
_SCORING_LAYERS = frozenset({
    "Linear", "LazyLinear", "Bilinear", "Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d",
    "ConvTranspose3d", "LazyConv1d", "LazyConv2d", "LazyConv3d",
})
_CLAMPS = frozenset({"clamp", "clamp_", "clip"})
# torch functions whose result is taken from their first argument's elements (selected, reordered, reshaped): it
# carries that argument's graph (``torch.gather(log_probs, 2, ids)`` is differentiable in ``log_probs``)
_SELECTIONS = frozenset({
    "gather", "take_along_dim", "index_select", "masked_select", "take", "narrow", "flatten", "squeeze", "unsqueeze",
    "reshape", "transpose", "permute", "movedim", "flip", "roll", "clone", "diagonal", "tril", "triu", "logsumexp", "cumsum",
})

_DEVICE_WORDS = re.compile(r"device|cuda|gpu|rank", re.I)


def call_result(scope: ScopeAnalysis, event: CallEvent, context: Context) -> Value:
    """What the call ``event`` (its callee and arguments evaluated in ``scope``) evaluates to."""
    site = (scope.chunk, event.node)
    grad_on = context.grad_off is None
    if event.callee is not None:
        return _named_call_result(scope, event, event.callee, site, grad_on)
    assert event.receiver is not None
    if event.method is None:
        return _called_value_result(scope, event, event.receiver, site, grad_on)
    return _method_result(scope, event, event.receiver, event.method, site, grad_on)


def _called_value_result(scope: ScopeAnalysis, event: CallEvent, receiver: Value, site, grad_on: bool) -> Value:
    """Calling a value: a model, a criterion, a layer."""
    args = event.args
    tags = receiver.tags
    if MODEL in tags:
        output = model_output_kind(receiver, scope.summary)
        result_tags = {TENSOR} | ({output} if output else set())
        if not _returns_one_tensor(receiver, scope.summary):
            result_tags.add(STRUCTURED)
        if grad_on:
            result_tags.add(GRAPH)
        roots = frozenset({event.node}) if grad_on else frozenset()
        note = f"`{quoted(scope.chunk, event.node)}` (a model call)"
        items = _output_items(receiver, scope.summary, grad_on, site, note, roots)
        return Value(result_tags, site=site, note=note, roots=roots, items=items)
    if CRITERION in tags:
        roots = frozenset({event.node}).union(*(a.roots for a in args)) if grad_on else frozenset()
        return Value(
            {TENSOR, LOSS} | ({GRAPH} if grad_on else set()), site=site, note=f"`{quoted(scope.chunk, event.node)}` (a loss)",
            roots=roots, detail=receiver,
        )
    if MODEL_CLASS in tags:  # `encoder_class(hidden)`, the class picked into a name or out of a table first
        return Value((MODEL,), site=site, note=f"`{quoted(scope.chunk, event.node)}` ({receiver.note or 'an nn.Module class'})", detail=receiver.detail)
    return UNKNOWN  # a pipeline's output (images, text) carries no graph; anything else is unknown


def held_layer(summary, receiver: Value, name: str) -> Value | None:
    """What ``model.<name>`` holds, where ``model`` is an instance of a workspace nn.Module class that defines no
    method ``name`` and binds ``self.<name>`` to a module in ``__init__``: calling it runs that layer's forward."""
    owner = receiver.detail if MODEL in receiver.tags else None
    if not isinstance(owner, ClassInfo) or not summary.is_module_class(owner) or owner.find_method(name, summary) is not None:
        return None
    held = owner.attributes(summary).get(f"self.{name}")
    return held if held is not None and MODEL in held.tags else None


def _method_result(scope: ScopeAnalysis, event: CallEvent, receiver: Value, method: str, site, grad_on: bool) -> Value:
    """Calling a method of a value: ``loss.detach()``, ``model.forward(x)``, ``accelerator.prepare(...)``."""
    args = event.args
    tags = receiver.tags
    if event.function is not None:  # `self.helper(...)`: what the method returns
        analysis = event.function.analysis(scope.summary)
        result = returned_by_call(analysis, event) if analysis is not None else UNKNOWN
        return result if grad_on else result.without_graph()
    if PIPELINE in tags:
        return receiver if method in torchapi.MODULE_SELF_METHODS else UNKNOWN
    if CRITERION in tags and method in torchapi.MODULE_SELF_METHODS:
        return receiver  # a loss module: `nn.CrossEntropyLoss().cuda()` returns the module
    if method == "get" and len(args) == 1 and (entry := table_value(receiver)) is not None:
        return entry  # `MODELS.get(name)`: the entry `MODELS[name]` gives, or None (a call of which fails)
    if method == "forward" and tags & {MODEL, CRITERION}:  # `model.forward(x)` computes what `model(x)` does
        return _called_value_result(scope, event, receiver, site, grad_on)
    if MODEL_CLASS in tags and method in _FACTORY_METHODS:  # `model_class.from_pretrained(name)`
        return Value((MODEL,), site=site, note=f"`{quoted(scope.chunk, event.node)}` ({receiver.note or 'an nn.Module class'})", detail=receiver.detail)
    if method == "backward":
        return UNKNOWN
    held = held_layer(scope.summary, receiver, method)
    if held is not None:  # `gen.synthesis(w)`: a layer the model holds, run on its own
        return _called_value_result(scope, event, held, site, grad_on)
    if MODEL in tags or ENGINE in tags:
        if method in torchapi.MODULE_SELF_METHODS:
            return receiver
        if method in {"forward", "generate"}:  # an engine's `forward` (a model's is read above)
            if method == "generate":
                return Value({TENSOR})
            shape = set() if _returns_one_tensor(receiver, scope.summary) else {STRUCTURED}
            return Value(({TENSOR, GRAPH} if grad_on else {TENSOR}) | shape, site=site, note=f"`{quoted(scope.chunk, event.node)}`", roots=frozenset({event.node}) if grad_on else frozenset())
        if method in {"parameters", "named_parameters", "state_dict", "modules", "children"}:
            return Value({CONTAINER})
        if method == "optimizers":  # Lightning: the optimizers `configure_optimizers` returned
            return Value({OPTIMIZER}, site=site, note=f"`{quoted(scope.chunk, event.node)}`")
        if method == "module":
            return receiver
        return UNKNOWN
    if SCALER in tags and method == "scale" and args:
        return args[0]
    if ACCELERATOR in tags and method == "prepare":
        prepared = tuple(
            value.with_tags(add=(SHARDED,)) if LOADER in value.tags else value for value in args
        )
        return Value(join(prepared).tags, items=prepared) if len(prepared) != 1 else prepared[0]
    if ACCELERATOR in tags and method in {"prepare_model", "prepare_optimizer", "prepare_scheduler"} and args:
        return args[0]  # accelerate, Accelerator.prepare_model/_optimizer/_scheduler: the one object, wrapped
    if ACCELERATOR in tags and method in {"gather", "gather_for_metrics", "reduce", "pad_across_processes"} and args:
        # the gathered tensors live on this process's device; gathering does not keep the graph
        gathered = args[0]
        items = tuple(item.without_graph().with_tags(add=(ON_DEVICE,)) for item in gathered.items) if gathered.items else None
        result = gathered.without_graph().with_tags(add=(ON_DEVICE,), remove=(ON_HOST,))
        return Value(result.tags, site=site, note=f"`{quoted(scope.chunk, event.node)}`", items=items)
    if method in {"setup_dataloaders", "prepare_data_loader"}:
        prepared = tuple(value.with_tags(add=(SHARDED,)) for value in args)
        return Value(join(prepared).tags, items=prepared) if len(prepared) != 1 else prepared[0]
    if method == "shard" and torchapi.mentions_rank(scope.chunk.code_for(event.node)):
        return receiver.with_tags(add=(SHARDED,))  # HF datasets: `ds.shard(num_shards=world_size, index=rank)`
    if method == "setup" and args and MODEL in args[0].tags:  # Fabric
        return Value(join(args).tags, items=tuple(args)) if len(args) != 1 else args[0]
    if method in torchapi.GRAPH_FREE_METHODS:
        if method in {"item", "tolist"}:
            return Value((NUMBER,))
        if method == "detach":
            return receiver.without_graph()
        return receiver.without_graph().with_tags(remove=OUTPUT_KINDS | {LOSS})
    if method in {"softmax", "log_softmax", "sigmoid", "log", "exp"}:
        return _activation(receiver, method, site, scope.chunk, event.node)
    if method in {"div", "div_", "true_divide"} and receiver.tags:
        return receiver.with_tags(add=(SCALED,))
    if CONTAINER in tags and method == "items":  # iterated, each element is a (key, entry) pair
        entry = element_of(receiver)
        return Value(entry.tags, site=entry.site, note=entry.note, roots=entry.roots, items=(Value((), items=(UNKNOWN, entry)),))
    if GRAPH in tags or TENSOR in tags:
        if method in {"to", "cuda", "cpu"}:
            return _moved(receiver, method, transfer_destination(event))
        if method in _MATRIX_PRODUCTS:  # attention weights @ values are no longer probabilities
            return receiver.with_tags(remove=OUTPUT_KINDS | {CONTAINER})
        if method in _CLAMPS:  # clamped scores may be meant as probabilities: no longer known raw logits
            return receiver.with_tags(remove=(LOGITS, CONTAINER))
        if method in {"pop", "popleft"}:
            return element_of(receiver)
        # any other tensor method proves it is one tensor, unless the method returns several
        return receiver.with_tags(remove=(CONTAINER,) if method in _STRUCTURED_RESULTS else (CONTAINER, STRUCTURED))
    if CONTAINER in tags and method in {"pop", "popleft", "get", "values", "items"}:
        return element_of(receiver)
    if not tags and method in {"to", "cuda"} and transfer_destination(event) == "device":
        return Value((ON_DEVICE,))  # whatever it is, it now lives on the accelerator
    if SHARDED in tags and LOADER not in tags:
        return receiver  # `ds.shard(...).map(...)`: a transformed share is still this process's share
    return UNKNOWN


def _built_by(summary: ModuleSummary, callee: str, head: str) -> tuple[libraries.ClassKind, str] | None:
    """For ``X.from_pretrained(...)`` (and the other factories) or ``X(...)`` of a library class:
    what X's instances are (from the library's source or the table), and X; None when unknown."""
    if callee in libraries.PIPELINE_FACTORIES:
        return libraries.ClassKind(libraries.PIPELINE, f"`{callee}` builds a pipeline"), callee
    if head in _FACTORY_METHODS:
        owner = callee[: -len(head) - 1]
        kind = summary.kind_of(owner) if owner else None
        return (kind, owner) if kind is not None else None
    if torchapi.is_torch_name(callee) or not head[:1].isupper():
        return None
    kind = summary.library_class_kind(callee)
    return (kind, callee) if kind is not None and kind.kind != libraries.OTHER else None


def class_value(summary: ModuleSummary, name: str) -> Value:
    """A name read as a value (``encoder_class = TextEncoder``, an entry of ``{"base": (TextEncoder, 256)}``)
    that stands for a class whose instances are nn.Modules: a workspace module class, or a library's
    model class (from its source or the table). Calling it, or its ``from_pretrained``, builds a model.
    Only a capitalised last part is looked up, as for calls (``_built_by``): names of functions and
    modules, read everywhere, are not worth a look in another file."""
    if not last_part(name)[:1].isupper():
        return UNKNOWN
    local = summary.local_class(name)
    if local is not None:
        module = summary.is_module_class(local) if local.home is None else local.home.is_module_class(local)
        return Value((MODEL_CLASS,), note=f"`{local.name}` (an nn.Module class)", detail=local) if module else UNKNOWN
    kind = summary.library_class_kind(name)
    if kind is not None and kind.kind == libraries.MODULE:
        return Value((MODEL_CLASS,), note=f"`{name}` ({kind.evidence})", detail=name)
    return UNKNOWN


def _named_call_result(scope: ScopeAnalysis, event: CallEvent, callee: str, site, grad_on: bool) -> Value:
    """What calling a name (``callee``, canonical and dotted) evaluates to: the first lookup that knows
    the name answers, in order: the workspace's own definitions, library classes, the objects of a
    training run, torch's functions, Python's builtins."""
    head = last_part(callee)
    for lookup in _NAMED_CALL_LOOKUPS:
        result = lookup(scope, event, callee, head, site, grad_on)
        if result is not None:
            return result
    return UNKNOWN


def _short(scope: ScopeAnalysis, event: CallEvent) -> str:
    """The call as a message quotes it, for the few results that describe it."""
    return quoted(scope.chunk, event.node)


def _workspace_result(scope: ScopeAnalysis, event: CallEvent, callee: str, head: str, site, grad_on: bool) -> Value | None:
    """A class or function of the workspace: its kind, or what its own flow returns."""
    local_class = scope.summary.local_class(callee)
    if local_class is not None:
        if scope.summary.is_module_class(local_class):
            return Value((MODEL,), site=site, note=f"`{_short(scope, event)}` (`{local_class.name}` is an nn.Module)", detail=local_class)
        if scope.summary.local_class_kind(local_class).kind == libraries.PIPELINE:
            return Value((PIPELINE,), site=site, note=f"`{_short(scope, event)}`")
        kind = scope.summary.class_kind(local_class)
        if kind == "iterable-dataset":
            return Value({DATASET_ITERABLE} | _sharded(event), site=site, note=f"`{_short(scope, event)}`", detail=local_class)
        if kind == "map-dataset":
            return Value({DATASET_MAP} | _sharded(event), site=site, note=f"`{_short(scope, event)}`", detail=local_class)
        return UNKNOWN
    if event.function is not None:
        analysis = event.function.analysis(scope.summary)
        if analysis is None:
            return UNKNOWN
        result = returned_by_call(analysis, event)
        if not grad_on:
            result = result.without_graph()
        return result
    return None


def _library_object_result(scope: ScopeAnalysis, event: CallEvent, callee: str, head: str, site, grad_on: bool) -> Value | None:
    """An instance of a library class (``X(...)``, ``X.from_pretrained(...)``): a model, a pipeline."""
    built = _built_by(scope.summary, callee, head)
    if built is not None:
        kind, owner = built
        if kind.kind == libraries.MODULE:
            return Value((MODEL,), site=site, note=f"`{_short(scope, event)}` ({kind.evidence})", detail=owner)
        if kind.kind == libraries.PIPELINE:
            return Value((PIPELINE,), site=site, note=f"`{_short(scope, event)}` ({kind.evidence})")
        return UNKNOWN
    return None


def _training_object_result(scope: ScopeAnalysis, event: CallEvent, callee: str, head: str, site, grad_on: bool) -> Value | None:
    """The objects a training run builds: losses, optimizers, scalers, loaders, samplers, datasets,
    wrappers, accelerators and models."""
    args = event.args
    if torchapi.is_loss_class(callee):
        return Value((CRITERION,), site=site, note=f"`{_short(scope, event)}`", detail=head)
    if torchapi.is_functional_loss(callee):
        roots = frozenset({event.node}).union(*(a.roots for a in args)) if grad_on else frozenset()
        return Value({TENSOR, LOSS} | ({GRAPH} if grad_on else set()), site=site, note=f"`{_short(scope, event)}` (a loss)", roots=roots, detail=head)
    if torchapi.is_optimizer_class(callee):
        return Value((OPTIMIZER,), site=site, note=f"`{_short(scope, event)}`")
    if torchapi.is_scaler(callee):
        return Value((SCALER,), site=site, note=f"`{_short(scope, event)}`")
    if torchapi.is_dataloader(callee):
        dataset = args[0] if args else event.kwargs.get("dataset", UNKNOWN)
        sharded = {SHARDED} if SHARDED in dataset.tags else set()
        return Value({LOADER} | sharded, site=site, note=f"`{_short(scope, event)}`", detail=event)
    if (callee.startswith("torch.utils.data") and head == "DistributedSampler") or callee in torchapi.DISTRIBUTED_SAMPLERS:
        return Value((SAMPLER_DISTRIBUTED,), site=site, note=f"`{_short(scope, event)}`")
    if callee.startswith("torch.utils.data") and head in torchapi.SAMPLERS_LOCAL:
        return Value((SAMPLER_LOCAL,), site=site, note=f"`{_short(scope, event)}`", detail=head)
    if callee.startswith("torch.utils.data") and head in {"TensorDataset", "ConcatDataset", "Subset", "StackDataset"}:
        on_device = {ON_DEVICE} if any(ON_DEVICE in a.tags for a in args) else set()
        return Value({DATASET_MAP} | on_device | _sharded(event), site=site, note=f"`{_short(scope, event)}`")
    if callee.startswith("torchvision.datasets."):
        return Value((DATASET_MAP,), site=site, note=f"`{_short(scope, event)}`")
    if torchapi.is_ddp_wrapper(callee):
        wrapped = args[0] if args else UNKNOWN
        return Value({MODEL, DDP}, site=site, note=f"`{_short(scope, event)}`", detail=wrapped.detail)
    if callee in {"deepspeed.initialize"}:
        # the engine runs the forward of the module it is given (`model=`, or the second positional argument)
        wrapped = event.kwargs.get("model") or (args[1] if len(args) > 1 else UNKNOWN)
        engine = Value({MODEL, ENGINE, DDP}, site=site, note=f"`{_short(scope, event)}`", detail=wrapped.detail)
        return Value({MODEL, ENGINE}, items=(engine, Value((OPTIMIZER, ENGINE)), Value((LOADER, SHARDED)), UNKNOWN))
    if head == "Accelerator" and callee.startswith("accelerate"):
        return Value((ACCELERATOR,), site=site, note=f"`{_short(scope, event)}`")
    if head == "Fabric" and "fabric" in callee.lower():
        return Value((ACCELERATOR,), site=site, note=f"`{_short(scope, event)}`")
    if callee == "torch.compile" and args:
        return args[0]
    if callee == "copy.deepcopy" and args and MODEL in args[0].tags:
        # a copy of a model (an EMA or target network): the same class and layers, in the mode the original was in
        return Value((MODEL,), site=site, note=f"`{_short(scope, event)}` (a copy of a model)", detail=args[0].detail)
    if head == "Sequential" and torchapi.is_torch_layer(callee):
        last = args[-1] if args else UNKNOWN
        last_node = [a for a in event.arg_nodes if a.keyword is None and not a.star]
        if not last_node:  # `model = nn.Sequential()`, then `model.add_module("softmax", nn.Softmax())`
            last, last_node = added_layer(scope, event.node)
        output = model_output_kind(last, scope.summary) if MODEL in last.tags else None
        detail = ("sequential", output, last_node[-1] if last_node else None)
        return Value((MODEL,), site=site, note=f"`{_short(scope, event)}`", detail=detail)
    if torchapi.is_model_factory(callee) or torchapi.is_torch_layer(callee):
        return Value((MODEL,), site=site, note=f"`{_short(scope, event)}`", detail=callee)
    return None


def _torch_function_result(scope: ScopeAnalysis, event: CallEvent, callee: str, head: str, site, grad_on: bool) -> Value | None:
    """A torch function: a tensor factory, an activation, a reduction, ... (unknown for the rest)."""
    if not torchapi.is_torch_name(callee):
        return None
    args = event.args
    if callee in torchapi.VARIABLE_WRAPPERS and args:
        volatile = event.keyword("volatile")
        if volatile is not None and isinstance(volatile.value, cst.Name) and volatile.value.value == "True":
            return Value(args[0].tags - {GRAPH} | {TENSOR, VOLATILE}, site=site, note=f"`{_short(scope, event)}` (volatile)")
        return args[0]
    if head in torchapi.TENSOR_FACTORIES:
        constant = all(CONSTANT in a.tags or _is_literal(arg.value) for a, arg in zip(args, event.arg_nodes))
        requires_grad = event.keyword("requires_grad")
        tags = {TENSOR}
        if constant and args:
            tags.add(CONSTANT)
        if _created_on_device(event, head):
            tags.add(ON_DEVICE)
        elif _created_on_host(event, head):
            tags.add(ON_HOST)
        if requires_grad is not None and isinstance(requires_grad.value, cst.Name) and requires_grad.value.value == "True" and grad_on:
            return Value(tags | {GRAPH}, site=site, note=f"`{_short(scope, event)}` (requires_grad=True)", roots=frozenset({event.node}))
        return Value(tags, site=site, note=f"`{_short(scope, event)}`")
    if head in {"softmax", "log_softmax", "sigmoid", "log", "exp"} and args:
        return _activation(args[0], head, site, scope.chunk, event.node)
    if head == "device":
        return Value((DEVICE,))
    if head in {"split", "chunk", "unbind", "tensor_split"}:
        joined = join(args) if args else UNKNOWN
        return Value(joined.tags - {CONTAINER, CONSTANT} | {TENSOR, STRUCTURED}, site=joined.site, note=joined.note, roots=joined.roots)
    if head in {"argmax", "argmin", "eq", "ne", "isnan", "isfinite", "numel", "equal", "bincount"}:
        return Value((TENSOR,))
    if head in {"div", "true_divide"} and args:
        return args[0].with_tags(add=(SCALED,))
    if head in _MATRIX_PRODUCTS and args:
        return join(args).with_tags(add=(TENSOR,), remove=OUTPUT_KINDS | {CONTAINER, CONSTANT, STRUCTURED})
    if head in _SELECTIONS and args:
        return args[0].with_tags(add=(TENSOR,), remove=OUTPUT_KINDS | {CONTAINER, CONSTANT, STRUCTURED, LOSS})
    if head in _CLAMPS and args:
        return join(args).with_tags(add=(TENSOR,), remove=(LOGITS, CONTAINER, CONSTANT, STRUCTURED))
    if head in {"stack", "cat", "sum", "mean", "where", "abs", "sqrt", "norm", "max", "min", "square"} and args:
        joined = join(args)
        removed = (CONTAINER, CONSTANT) if head in _STRUCTURED_RESULTS else (CONTAINER, CONSTANT, STRUCTURED)
        return joined.with_tags(add=(TENSOR,), remove=removed)
    if callee.startswith("torch.nn.functional.") and args and head not in _STRUCTURED_RESULTS and any(
        GRAPH in a.tags for a in args
    ):
        # an activation, a pooling, a normalisation: one tensor that carries its inputs' graph
        return join(args).with_tags(add=(TENSOR,), remove=OUTPUT_KINDS | {CONTAINER, CONSTANT, STRUCTURED, LOSS})
    return UNKNOWN


def _builtin_result(scope: ScopeAnalysis, event: CallEvent, callee: str, head: str, site, grad_on: bool) -> Value | None:
    """Python's builtins and containers, and the few dataset helpers named like them."""
    args = event.args
    if callee in torchapi.GRAPH_FREE_BUILTINS:
        return Value((NUMBER,))
    if callee in {"enumerate"} and args:
        return Value(args[0].tags, items=None, detail=("enumerate", args[0]))
    if callee in {"zip"} and args:
        return Value(join(args).tags, detail=("zip", tuple(args)))
    if callee in {"list", "tuple", "sorted", "reversed", "iter", "next"} and args:
        if callee == "next":
            return element_of(args[0])
        return args[0].with_tags(add=(CONTAINER,)) if callee in {"list", "tuple", "sorted"} else args[0]
    if callee == "dict" and (args or event.kwargs):
        # `dict(loss=loss, acc=acc)`, `dict(stats)`: holds what its entries hold, as a `{...}` literal does
        positional = [arg for arg in event.arg_nodes if arg.keyword is None and not arg.star][:1]
        entries = [*zip(positional, args[:1]), *zip([arg for arg in event.arg_nodes if arg.keyword is not None], event.kwargs.values())]
        values = [value for _, value in entries]
        carrier, carried = next(((arg, value) for arg, value in entries if GRAPH in value.tags), (None, UNKNOWN))
        if carrier is None:
            return Value(join(values).tags | {CONTAINER}, detail=event)
        if isinstance(carried.detail, CallEvent) and carried.detail.callee == "dict" and carried.site is not None:
            # a dict of dicts (`policy=dict(ratio=ratio, ...)`): the inner entry that carries the graph is the evidence
            return Value(join(values).tags | {CONTAINER}, site=carried.site, note=carried.note, detail=event)
        return Value(
            join(values).tags | {CONTAINER}, site=(scope.chunk, carrier),
            note=f"the dict entry `{_entry_text(scope, carrier)}`", detail=event,
        )
    if callee in {"list", "dict", "set", "tuple"} or callee in {"collections.deque", "collections.defaultdict", "collections.OrderedDict"}:
        return Value((CONTAINER,), detail=event)
    if callee in {"sum", "max", "min"} and args:
        return element_of(args[0])
    if callee == "range":
        return Value((NUMBER,))
    if callee.endswith("Subset") and args:
        return args[0]
    if head == "split_dataset_by_node" and args:  # HF datasets
        return args[0].with_tags(add=(SHARDED,))
    return None


_NAMED_CALL_LOOKUPS = (
    _workspace_result, _library_object_result, _training_object_result, _torch_function_result, _builtin_result,
)


def _entry_text(scope: ScopeAnalysis, arg: cst.Arg) -> str:
    value = quoted(scope.chunk, arg.value)
    return f"{arg.keyword.value}={value}" if arg.keyword is not None else value


def transfer_destination(event: CallEvent) -> str | None:
    """Where ``x.cuda()``, ``x.cpu()`` or ``x.to(...)`` sends its receiver: "device", "host", or None
    when the call is a dtype cast or the destination cannot be told from the text."""
    if event.method == "cuda":
        return "device"
    if event.method == "cpu":
        return "host"
    if event.method != "to":
        return None
    keyword = event.keyword("device")
    if keyword is not None:
        return _destination_of(event.scope.chunk, keyword.value, event.kwargs.get("device", UNKNOWN))
    positional = [arg for arg in event.arg_nodes if arg.keyword is None and not arg.star]
    if not positional or not event.args:
        return None
    return _destination_of(event.scope.chunk, positional[0].value, event.args[0])


def _destination_of(chunk: ParsedChunk, node: cst.BaseExpression, value: Value) -> str | None:
    text = chunk.code_for(node)
    if re.fullmatch(r"""(torch\.device\()?["']cpu["']\)?""", text):
        return "host"
    if DEVICE in value.tags or isinstance(node, cst.Integer) or _DEVICE_WORDS.search(text):
        return "device"
    return None


def _moved(value: Value, method: str, destination: str | None) -> Value:
    # only tensors (and modules) have .cpu() and .cuda(): a tuple or a ModelOutput would raise
    if method == "cpu":
        return value.with_tags(add=(ON_HOST,), remove=(CONTAINER, ON_DEVICE, STRUCTURED))
    moved = value.with_tags(remove=(CONSTANT, STRUCTURED) if method == "cuda" else (CONSTANT,))
    if destination == "device":
        return moved.with_tags(add=(ON_DEVICE,), remove=(ON_HOST,))
    if destination == "host":
        return moved.with_tags(add=(ON_HOST,), remove=(ON_DEVICE,))
    return moved


def _created_on_host(event: CallEvent, factory: str) -> bool:
    """``torch.randint(10, (1,))``: no ``device=``, not shaped after another tensor, and this statement
    neither sets a default device nor opens a ``with torch.device(...)`` block."""
    if event.keyword("device") is not None or factory.endswith("_like") or factory in {"tensor", "as_tensor", "from_numpy"}:
        return False
    text = event.scope.chunk.tree_text()
    return "set_default_device" not in text and "with torch.device" not in text


def _created_on_device(event: CallEvent, factory: str) -> bool:
    """``torch.zeros(n, device="cuda")``, or a ``*_like`` factory of a tensor already on the device."""
    keyword = event.keyword("device")
    if keyword is not None:
        return _destination_of(event.scope.chunk, keyword.value, event.kwargs.get("device", UNKNOWN)) == "device"
    return factory.endswith("_like") and bool(event.args) and ON_DEVICE in event.args[0].tags


def _sharded(event: CallEvent) -> set[str]:
    """A dataset built from this process's share of the data, or told its rank, is sharded."""
    if any(SHARDED in value.tags for value in (*event.args, *event.kwargs.values())):
        return {SHARDED}
    return {SHARDED} if any(torchapi.mentions_rank(event.scope.chunk.code_for(arg.value)) for arg in event.arg_nodes) else set()


def _activation(value: Value, kind: str, site, chunk, node) -> Value:
    kinds = OUTPUT_KINDS
    base = value.with_tags(add=(TENSOR,), remove=kinds | {CONSTANT, LOSS})
    note = f"`{quoted(chunk, node)}`"
    if kind == "softmax":
        add = PROBS
    elif kind == "log_softmax" or (kind == "log" and PROBS in value.tags):
        add = LOG_PROBS
    elif kind == "sigmoid":
        add = SIGMOID
    elif kind == "exp" and LOG_PROBS in value.tags:
        add = PROBS
    else:
        return base
    return Value(base.tags | {add}, site=site, note=note, roots=value.roots, detail=value.detail)


def element_of_tuple(value: Value) -> Value:
    """One element of a tuple unpacked from ``value``: a tensor stays the tensor it came from."""
    if GRAPH in value.tags or TENSOR in value.tags:
        return value
    return element_of(value) if value.tags else UNKNOWN


def element_of(value: Value) -> Value:
    """One element of an iterable value (a batch of a loader, an item of a list)."""
    if isinstance(value.detail, tuple) and value.detail and value.detail[0] == "enumerate":
        inner = element_of(value.detail[1])
        return Value(inner.tags, items=(Value((NUMBER,)), inner))
    if isinstance(value.detail, tuple) and value.detail and value.detail[0] == "zip":
        items = tuple(element_of(v) for v in value.detail[1])
        return Value(join(items).tags, items=items)
    if LOADER in value.tags:
        return Value((TENSOR,))
    if OPTIMIZER in value.tags:  # `opt_g, opt_d = self.optimizers()`
        return Value((OPTIMIZER,), site=value.site, note=value.note)
    if CONTAINER in value.tags:
        return Value(value.tags - {CONTAINER}, site=value.site, note=value.note, roots=value.roots)
    if value.items:
        return join(value.items)
    if NUMBER in value.tags:
        return Value((NUMBER,))
    return value.with_tags(remove=(CONSTANT,)) if GRAPH in value.tags or TENSOR in value.tags else UNKNOWN


def _returns_one_tensor(model: Value, summary: ModuleSummary) -> bool:
    """Positive evidence that calling the model returns one tensor (not a tuple, dict or ModelOutput)."""
    detail = model.detail
    if isinstance(detail, ClassInfo):
        return is_known_tensor(detail.forward_output(summary))
    if isinstance(detail, tuple) and detail and detail[0] == "sequential":
        return True
    if isinstance(detail, str):
        head = last_part(detail)
        if torchapi.is_torch_layer(detail):
            return head not in _TUPLE_LAYERS
        if detail == "timm.create_model":
            return True
        # torchvision's classification models return logits; detection and segmentation ones return dicts
        return detail.startswith("torchvision.models.") and detail.count(".") == 2
    return False


def _output_items(model: Value, summary: ModuleSummary, grad_on: bool, site, note: str, roots) -> tuple[Value, ...] | None:
    """The elements of what a workspace model's ``forward`` returns when it is a tuple (``return
    validity, labels``): each keeps what it holds (probabilities, logits), and a graph when grad is on."""
    if not isinstance(model.detail, ClassInfo):
        return None
    items = model.detail.forward_output(summary).items
    if not items:
        return None
    elements = []
    for item in items:
        tags = set(item.tags - {CONSTANT})
        if not grad_on:
            tags.discard(GRAPH)
        elements.append(Value(tags, site=site, note=note, roots=roots if GRAPH in tags else frozenset()))
    return tuple(elements)


def model_output_kind(model: Value, summary: ModuleSummary) -> str | None:
    detail = model.detail
    if isinstance(detail, ClassInfo):
        output = detail.forward_output(summary)
        kinds = output.tags & OUTPUT_KINDS
        return next(iter(kinds)) if len(kinds) == 1 else None
    if isinstance(detail, str):
        head = last_part(detail)
        if head in _SCORING_LAYERS:
            return LOGITS  # a linear map or convolution outputs raw scores (a DCGAN discriminator's last Conv2d)
        if head == "Softmax":
            return PROBS
        if head == "LogSoftmax":
            return LOG_PROBS
        if head == "Sigmoid":
            return SIGMOID
    if isinstance(detail, tuple) and detail and detail[0] == "sequential":
        return detail[1]
    return None


def _is_literal(expression: cst.BaseExpression) -> bool:
    if isinstance(expression, (cst.Integer, cst.Float, cst.SimpleString)):
        return True
    if isinstance(expression, (cst.List, cst.Tuple)):
        return all(_is_literal(element.value) for element in expression.elements)
    if isinstance(expression, cst.UnaryOperation):
        return _is_literal(expression.expression)
    return False


# How much of a tensor a method's parameter can leave behind in the object: nothing (only host
# values derived from it: `loss.item()`, `v.numel()`), a detached copy (`v.data`, `v.detach()`: no
# graph, still on its device), or the tensor itself.
KEEPS_NOTHING, KEEPS_DETACHED, KEEPS_ITSELF = 0, 1, 2
_HOST_VALUE_METHODS = frozenset({"item", "tolist", "numpy", "numel", "size", "dim"})
_HOST_VALUE_ATTRIBUTES = frozenset({"shape", "dtype", "device", "ndim"})
_HOST_VALUE_BUILTINS = frozenset({"float", "int", "bool", "str", "len", "isinstance", "hasattr", "callable"})


def kept_by_method(scope: ScopeAnalysis, receiver_key: str, method: str, position: int) -> int:
    """How much of what ``receiver.method(...)`` is passed at ``position`` the receiver can keep. All
    of it, unless the receiver was built in this scope from a workspace class whose ``method`` (read
    in its file) uses that parameter only through host copies or detached ones: a metrics tracker
    whose ``update(loss, n)`` keeps ``loss.item()``, an averager that sums ``v.data.sum()``."""
    binding = scope.last_binding(receiver_key)
    built = binding.value_node if binding is not None else None
    raw = dotted(built.func) if isinstance(built, cst.Call) else None
    owner = scope.summary.local_class(scope.canonical(raw)) if raw else None
    found = owner.find_method(method, scope.summary) if owner is not None else None
    if found is None or position >= len(found.positional_parameters):
        return KEEPS_ITSELF
    return _kept_form(found.positional_parameters[position], found.node.body)


def _kept_form(parameter: str, body: cst.BaseSuite) -> int:
    """The most of ``parameter`` that running ``body`` (a method's body) can leave anywhere but in
    a local name: stored in an attribute, appended, returned, handed to a call. Local names are followed
    through their assignments (``v = v.data.sum()``; ``self.sum += v`` then keeps a detached copy); an
    assignment inside a branch or loop joins with what the name held before."""
    forms = {parameter: KEEPS_ITSELF}
    kept = KEEPS_NOTHING

    def bind(target: cst.BaseExpression, form: int, joined: bool) -> None:
        nonlocal kept
        if isinstance(target, cst.Name):
            forms[target.value] = max(forms.get(target.value, KEEPS_NOTHING), form) if joined else form
        elif isinstance(target, (cst.Tuple, cst.List)):
            for element in target.elements:
                bind(element.value, form, joined)
        else:
            kept = max(kept, form)  # `self.total = v`, `history[i] = v`

    def block(suite: cst.CSTNode | None, repeated: bool = False) -> None:
        if isinstance(suite, (cst.Else, cst.Finally)):
            suite = suite.body
        if suite is None:
            return
        # an `elif` is an If; `if x: y = v` on one line is a suite of small statements, walked as a line
        statements = suite.body if isinstance(suite, cst.IndentedBlock) else [suite]
        for _ in range(2 if repeated else 1):  # a loop's body runs again after its own later assignments
            walk(statements, True)

    def walk(statements: Sequence[cst.CSTNode], joined: bool) -> None:
        nonlocal kept
        for statement in statements:
            if isinstance(statement, (cst.SimpleStatementLine, cst.SimpleStatementSuite)):
                for small in statement.body:
                    if isinstance(small, cst.Assign):
                        form = _form_of(small.value, forms)
                        for target in small.targets:
                            bind(target.target, form, joined)
                    elif isinstance(small, cst.AnnAssign) and small.value is not None:
                        bind(small.target, _form_of(small.value, forms), joined)
                    elif isinstance(small, cst.AugAssign):
                        bind(small.target, _form_of(small.value, forms), True)
                    else:
                        kept = max(kept, _form_of(small, forms))
            elif isinstance(statement, (cst.If, cst.While)):  # a condition is tested, not kept
                block(statement.body, repeated=isinstance(statement, cst.While))
                block(statement.orelse)
            elif isinstance(statement, cst.For):
                bind(statement.target, _form_of(statement.iter, forms), True)
                block(statement.body, repeated=True)
                block(statement.orelse)
            elif isinstance(statement, cst.With):
                for item in statement.items:
                    if item.asname is not None:
                        bind(item.asname.name, _form_of(item.item, forms), True)
                block(statement.body)
            elif isinstance(statement, cst.Try):
                for suite in (statement.body, *(handler.body for handler in statement.handlers), statement.orelse, statement.finalbody):
                    block(suite)
            else:
                kept = max(kept, _form_of(statement, forms))  # a nested def or class may capture it

    walk(body.body if isinstance(body, cst.IndentedBlock) else [body], False)
    return kept


def kept_by_own_method(event: CallEvent, method) -> list[tuple[str, Value, cst.BaseExpression]]:
    """``self.store_metrics(metrics)`` where the method appends what it is handed (or its entries) to
    ``self._stored_metrics``: each graph-carrying argument so kept, with the attribute, as if the caller
    had appended it itself."""
    if any(arg.star for arg in event.arg_nodes):
        return []  # which parameter an argument fills is not known
    positional = [arg.value for arg in event.arg_nodes if arg.keyword is None]
    handed = list(zip(method.positional_parameters, event.args, positional))
    handed += [(arg.keyword.value, event.kwargs[arg.keyword.value], arg.value) for arg in event.arg_nodes if arg.keyword is not None]
    return [
        (container, value, node) for name, value, node in handed
        if GRAPH in value.tags and (container := attribute_keeping(method, name)) is not None
    ]


def reads(node: cst.CSTNode | None, key: str) -> bool:
    """Whether the expression reads ``key`` (a name or a dotted attribute), or is not known (None)."""
    if node is None:
        return True
    if isinstance(node, (cst.Name, cst.Attribute)) and dotted(node) == key:
        return True
    return any(reads(child, key) for child in node.children)


def attribute_keeping(function, parameter: str) -> str | None:
    """The attribute of ``self`` (``self._stored_metrics``) where a method keeps what it is handed as
    ``parameter``, as it is: the parameter itself, or an entry of it (``for key, value in
    metrics.items(): self._stored[key].append(value)``), appended to or assigned into the attribute.
    None when it keeps only host copies (``value.item()``), detached ones, or nothing."""
    by_parameter = function.chunk.node_memo("parameters kept in attributes").setdefault(function.node, {})
    if parameter not in by_parameter:
        by_parameter[parameter] = _attribute_keeping(function.node.body, parameter)
    note_text_read(function, (attribute_keeping, parameter), by_parameter[parameter])
    return by_parameter[parameter]


def _attribute_keeping(body: cst.BaseSuite, parameter: str) -> str | None:
    held = {parameter}
    for node in _walk_nodes(body):
        if isinstance(node, cst.For) and _entries_of(node.iter, held):
            held.update(target_names(node.target))
    for node in _walk_nodes(body):
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value in {"append", "extend", "insert", "add"}:
            positional = [arg.value for arg in node.args if arg.keyword is None and not arg.star]
            stored = positional[-1] if positional else None
            target = node.func.value
        elif isinstance(node, cst.Assign) and len(node.targets) == 1 and isinstance(node.targets[0].target, cst.Subscript):
            stored, target = node.value, node.targets[0].target
        else:
            continue
        if isinstance(stored, cst.Name) and stored.value in held and (container := _self_container(target)) is not None:
            return container
    return None


def _walk_nodes(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """The nodes of a function's body, not those of functions or classes defined in it."""
    for child in node.children:
        if isinstance(child, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            continue
        yield child
        yield from _walk_nodes(child)


def _entries_of(iterable: cst.BaseExpression, held: set[str]) -> bool:
    """``metrics``, ``metrics.items()``, ``metrics.values()``: iterating it yields what ``held`` holds."""
    if isinstance(iterable, cst.Call) and isinstance(iterable.func, cst.Attribute) and not iterable.args \
            and iterable.func.attr.value in {"items", "values"}:
        iterable = iterable.func.value
    return isinstance(iterable, cst.Name) and iterable.value in held


def _self_container(target: cst.BaseExpression) -> str | None:
    """``self.history`` for ``self.history``, ``self.history[key]``, ``self.stats[mode][key]``."""
    while isinstance(target, cst.Subscript):
        target = target.value
    key = dotted(target) if isinstance(target, cst.Attribute) else None
    return key if key is not None and key.startswith("self.") and key.count(".") == 1 else None


def _form_of(node: cst.CSTNode, forms: dict[str, int]) -> int:
    """How much of the tracked tensors (``forms``: name -> how much of the parameter it holds) the value
    of ``node`` can hold."""
    if isinstance(node, cst.Name):
        return forms.get(node.value, KEEPS_NOTHING)
    if isinstance(node, cst.Attribute):
        attribute = node.attr.value
        if attribute in _HOST_VALUE_ATTRIBUTES:
            return KEEPS_NOTHING
        held = _form_of(node.value, forms)
        return min(held, KEEPS_DETACHED) if attribute == "data" else held
    if isinstance(node, cst.Call):
        func = node.func
        if isinstance(func, cst.Name) and func.value in _HOST_VALUE_BUILTINS:
            return KEEPS_NOTHING
        if isinstance(func, cst.Attribute) and func.attr.value in _HOST_VALUE_METHODS:
            return KEEPS_NOTHING
        if isinstance(func, cst.Attribute) and func.attr.value == "detach" and not node.args:
            return min(_form_of(func.value, forms), KEEPS_DETACHED)
    if isinstance(node, cst.Arg):
        return _form_of(node.value, forms)  # a keyword's name is not a use
    return max((_form_of(child, forms) for child in node.children), default=KEEPS_NOTHING)


def note_backwarded(scope: ScopeAnalysis, event: CallEvent) -> None:
    """A value something calls ``backward`` on carries a graph, whatever the analysis knew of it:
    ``output["loss"].backward()`` proves ``output`` holds one, ``accelerator.backward(loss)`` that ``loss`` is one."""
    receiver = event.receiver or UNKNOWN
    positional = [arg.value for arg in event.arg_nodes if arg.keyword is None and not arg.star]
    if event.method == "manual_backward" or receiver.tags & {ACCELERATOR, ENGINE} or (
        positional and receiver is UNKNOWN and event.receiver_key and names_owner(event.receiver_key)
    ):
        target = positional[0] if positional else None
    elif isinstance(event.node.func, cst.Attribute):
        target = event.node.func.value
    else:
        return
    while isinstance(target, cst.Call) and method_name(target) == "scale" and target.args:
        target = target.args[0].value  # `scaler.scale(loss).backward()`
    part_of = isinstance(target, (cst.Subscript, cst.Attribute)) and not (
        isinstance(target, cst.Attribute) and dotted(target) in scope.env
    )
    base = cast("cst.Subscript | cst.Attribute", target).value if part_of else target
    key = dotted(base) if isinstance(base, (cst.Name, cst.Attribute)) else None
    if key is None or key not in scope.env or GRAPH in scope.env[key].tags:
        return
    assert target is not None, "the key is the target's (or the name it is part of)"
    known = scope.env[key]
    keyed = isinstance(target, cst.Subscript) and any(
        isinstance(element.slice, cst.Index) and isinstance(element.slice.value, cst.SimpleString) for element in target.slice
    )
    # `output["loss"]`: a dict of results; `outputs.loss`: a model output object; `loss`: a tensor
    shape = {CONTAINER} if keyed else {STRUCTURED} if part_of else {TENSOR}
    scope._written.append(key)
    scope.env[key] = Value(
        known.tags | {GRAPH} | shape, site=known.site or (scope.chunk, event.node),
        note=known.note or f"`{quoted(scope.chunk, target)}` (something calls `backward` on it)",
        roots=known.roots, detail=known.detail,
    )
