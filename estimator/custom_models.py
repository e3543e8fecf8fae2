"""Parameters of an `nn.Module` class defined in the user's code, counted from its `__init__`.

`self.fc = nn.Linear(512, 256)` is 512·256 + 256 parameters; `nn.Conv2d`, `nn.Embedding`,
norms, recurrent layers and attention have closed forms too. Nested local modules are counted
with the arguments they are built with, `nn.Sequential(...)` adds its members, and
`nn.ModuleList([Block(d) for _ in range(n)])` multiplies. Sizes come from literals, constructor
arguments and their defaults, module constants, argparse and dataclass defaults. Whatever cannot
be resolved (a size computed at run time, a layer built in a loop) is listed, and the count is
then unknown: never a guess.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, cast

import libcst as cst

from trainlint.analysis.module import ModuleAnalysis
from trainlint.rules import ClassInfo, dotted, last_part, shortened

from .architectures import Architecture
from .reading import MAX_MAGNITUDE, UNKNOWN, _Reader, bounded, workspace_roots
from .script_plan import NO_MODEL

_MAX_DEPTH = 12
_FREE_LAYERS = frozenset({
    "ReLU", "GELU", "SiLU", "Tanh", "Sigmoid", "LeakyReLU", "ELU", "Softmax", "LogSoftmax", "Dropout", "Dropout1d",
    "Dropout2d", "Dropout3d", "AlphaDropout", "Identity", "Flatten", "Unflatten", "MaxPool1d", "MaxPool2d", "MaxPool3d",
    "AvgPool1d", "AvgPool2d", "AvgPool3d", "AdaptiveAvgPool1d", "AdaptiveAvgPool2d", "AdaptiveAvgPool3d",
    "AdaptiveMaxPool2d", "Upsample", "PixelShuffle", "Mish", "Hardswish", "Softplus", "ReLU6",
})


_FUNCTIONS = "<helper functions>"  # key in the value environment: helpers defined in __init__


@dataclass(frozen=True)
class _Where:
    """Where code being counted lives: its statement and a name for messages."""

    chunk: Any
    name: str


@dataclass
class Count:
    params: int = 0
    unresolved: list[str] = field(default_factory=list)

    @property
    def known(self) -> bool:
        return not self.unresolved

    def add(self, other: Count, times: int = 1) -> None:
        self.params += other.params * times
        self.unresolved.extend(other.unresolved)


def count_parameters(module: ModuleAnalysis, info: ClassInfo, call: cst.Call | None = None, call_chunk=None) -> Count:
    """The parameters of ``info`` built by ``call`` (in ``call_chunk``), or with its defaults."""
    counter = _Counter(module)
    return counter.instance(info, call if call_chunk is not None else None, {}, depth=0, chunk=call_chunk)


def resolve_model(module: ModuleAnalysis | None, read, planned) -> tuple[Architecture | None, str | None]:
    """The architecture a plan is for: a catalog model by name, or the script's own model class
    counted from its ``__init__``; else why there is none."""
    from .model_configs import resolve_model_name

    if planned.model_name is not None:
        # A name the user typed may point anywhere; one written in the script, only into its workspace.
        from_script = planned.model_source not in ("command line", "the targetModel setting") and module is not None
        architecture, reason = resolve_model_name(str(planned.model_name), workspace_roots(module) if from_script and module is not None else None)
        if architecture is None and from_script:
            reason = f"{reason} ({planned.model_source})"
        return architecture, reason
    if module is not None and read is not None and read.local_model_class is not None:
        return custom_architecture(module, read.local_model_class)
    return None, planned.unknown_reason or NO_MODEL


def custom_architecture(module: ModuleAnalysis, found) -> tuple[Architecture | None, str | None]:
    """A catalog-like entry for the script's own model class (``found``: the reading of its construction),
    or why its parameters cannot be counted."""
    info = module.summary.local_class(found.value)
    if info is None:
        return None, f"the model class `{found.value}` was not found"
    call = found.node if isinstance(found.node, cst.Call) else None
    count = count_parameters(module, info, call, found.chunk)
    if not count.known:
        listed = "; ".join(dict.fromkeys(count.unresolved[:3]))
        return None, f"the parameters of `{info.name}` ({found.source}) cannot all be counted: {listed}"
    if count.params == 0:
        return None, f"no layer with parameters found in `{info.name}.__init__` ({found.source})"
    if count.params > MAX_MAGNITUDE:
        return None, f"`{info.name}` ({found.source}) would have {count.params:.3g} parameters: not a model that runs"
    return Architecture(
        id=info.name, family="custom", kind="custom", published_params=count.params,
        source=f"counted from `{info.name}.__init__` ({found.source})",
    ), None


class _Counter:
    def __init__(self, module: ModuleAnalysis) -> None:
        self.module = module
        self.summary = module.summary
        self.reader = _Reader(module)

    # ------------------------------------------------------------------ values
    def value(self, node: cst.BaseExpression | None, chunk, env: dict[str, Any]) -> Any:
        if isinstance(node, cst.Name) and node.value in env:
            return env[node.value]
        if isinstance(node, cst.BinaryOperation):
            left, right = self.value(node.left, chunk, env), self.value(node.right, chunk, env)
            if isinstance(left, int) and isinstance(right, int) and not isinstance(left, bool):
                operator = type(node.operator).__name__
                operations = {"Add": left + right, "Subtract": left - right, "Multiply": left * right}
                if operator in operations:
                    return bounded(operations[operator])
                if operator == "FloorDivide" and right:
                    return left // right
            return UNKNOWN
        if isinstance(node, (cst.Tuple, cst.List)):
            items = [self.value(element.value, chunk, env) for element in node.elements]
            return UNKNOWN if any(item is UNKNOWN for item in items) else tuple(items)
        return self.reader.value(node, chunk) if node is not None else UNKNOWN

    def arguments(self, call: cst.Call, parameters: list[str], defaults: dict[str, Any], chunk, env) -> dict[str, Any]:
        bound = dict(defaults)
        positional = [arg for arg in call.args if arg.keyword is None and not arg.star]
        for name, arg in zip(parameters, positional):
            bound[name] = self.value(arg.value, chunk, env)
        for arg in call.args:
            if arg.keyword is not None:
                bound[arg.keyword.value] = self.value(arg.value, chunk, env)
        return bound

    # ------------------------------------------------------------------ modules
    def instance(self, info: ClassInfo, call: cst.Call | None, env: dict[str, Any], depth: int, chunk=None) -> Count:
        total = Count()
        if depth > _MAX_DEPTH:
            total.unresolved.append(f"`{info.name}` nests too deeply")
            return total
        init = info.methods.get("__init__")
        if init is None:
            return total
        home = self._home(info)  # the class's own file reads its body: its imports, constants, classes
        params = init.node.params
        names = [param.name.value for param in (*params.posonly_params, *params.params)][1:]
        defaults = {
            param.name.value: home.value(param.default, info.chunk, {})
            for param in (*params.posonly_params, *params.params, *params.kwonly_params) if param.default is not None
        }
        bound = self.arguments(call, names, defaults, chunk, env) if call is not None else defaults
        local: dict[str, Any] = dict(bound)
        body = init.node.body.body if isinstance(init.node.body, cst.IndentedBlock) else ()
        # helpers defined inside __init__ (`def block(c_in, c_out): return nn.Sequential(...)`)
        local[_FUNCTIONS] = {statement.name.value: statement for statement in body if isinstance(statement, cst.FunctionDef)}
        for statement in body:
            home.statement(statement, info, local, total, depth)
        return total

    def _home(self, info: ClassInfo) -> _Counter:
        """The counter of the file that defines ``info``: this one, or another workspace file's."""
        workspace = self.module.workspace
        if info.home is None or not self.summary.defined_elsewhere(info) or workspace is None:
            return self
        home = workspace.analysis_of(info.home.path)
        return _Counter(home) if home is not None else self

    def statement(self, statement: cst.CSTNode, info: ClassInfo, env: dict[str, Any], total: Count, depth: int) -> None:
        if isinstance(statement, cst.SimpleStatementLine):
            for small in statement.body:
                if isinstance(small, cst.Assign) and len(small.targets) == 1:
                    target = small.targets[0].target
                    if isinstance(target, cst.Attribute) and dotted(target.value) == "self":
                        total.add(self.expression(small.value, info, env, depth))
                    elif isinstance(target, cst.Name):
                        env[target.value] = self.value(small.value, info.chunk, env)
                elif isinstance(small, cst.AnnAssign) and small.value is not None and isinstance(small.target, cst.Attribute):
                    total.add(self.expression(small.value, info, env, depth))
        elif isinstance(statement, (cst.If, cst.For, cst.While, cst.With, cst.Try)):
            if "self." in info.chunk.code_for(statement) and "nn." in info.chunk.code_for(statement):
                total.unresolved.append(f"layers built under `{info.chunk.code_for(statement).splitlines()[0].strip()}` in `{info.name}`")

    def expression(self, node: cst.BaseExpression, info, env: dict[str, Any], depth: int) -> Count:
        """The parameters of a module expression (a layer, a container, a local module, a list of them,
        or what a helper function returns); ``info`` gives the code's statement (``chunk``) and a name."""
        count = Count()
        if isinstance(node, (cst.List, cst.Tuple)):
            for element in node.elements:
                count.add(self.expression(element.value, info, env, depth))
            return count
        if not isinstance(node, cst.Call):
            return count  # a tensor, a number, an alias of another attribute
        raw = dotted(node.func)
        if raw is None:
            count.unresolved.append(f"`{shortened(info.chunk.code_for(node), 50)}`")
            return count
        helper = self._helper(raw, info, env)
        if helper is not None and depth < _MAX_DEPTH:
            return self.helper_result(helper, node, info, env, depth + 1)
        canonical = self.summary.canonical(raw)
        head = last_part(canonical)
        if canonical.startswith("torch.nn.") and canonical.count(".") == 2:
            return self.layer(head, node, info, env, depth)
        local = self.summary.local_class(raw)
        if local is not None and self.summary.is_module_class(local):
            return self.instance(local, node, env, depth + 1, info.chunk)
        if canonical.startswith("torch.nn.Parameter") or head == "Parameter":
            # _is_shaped_tensor: `Parameter(torch.zeros(n, ...))`, the shape the first argument of a call
            shape = self.value(cast(cst.Call, node.args[0].value).args[0].value, info.chunk, env) if _is_shaped_tensor(node) else UNKNOWN
            if isinstance(shape, int):
                count.params += shape
            elif isinstance(shape, tuple) and all(isinstance(item, int) for item in shape):
                count.params += math.prod(shape)
            else:
                count.unresolved.append(f"`{shortened(info.chunk.code_for(node), 50)}`")
            return count
        count.unresolved.append(f"`{shortened(info.chunk.code_for(node), 50)}` (not a layer trainlint can count)")
        return count

    def _helper(self, raw: str, info, env: dict[str, Any]):
        """(function definition, its statement) for a call of a helper defined in __init__ or in the module."""
        nested = env.get(_FUNCTIONS, {})
        if raw in nested:
            return nested[raw], info.chunk
        function = self.summary.functions.get(raw) if "." not in raw else None
        return (function.node, function.chunk) if function is not None else None

    def helper_result(self, helper, call: cst.Call, info, env: dict[str, Any], depth: int) -> Count:
        """What a helper returns, counted with the arguments this call passes."""
        definition, chunk = helper
        params = definition.params
        names = [param.name.value for param in (*params.posonly_params, *params.params)]
        defaults = {
            param.name.value: self.value(param.default, chunk, {})
            for param in (*params.posonly_params, *params.params, *params.kwonly_params) if param.default is not None
        }
        local = self.arguments(call, names, defaults, info.chunk, env)
        local[_FUNCTIONS] = env.get(_FUNCTIONS, {})
        body = definition.body.body if isinstance(definition.body, cst.IndentedBlock) else ()
        returned = next((
            small.value for statement in reversed(body) if isinstance(statement, cst.SimpleStatementLine)
            for small in statement.body if isinstance(small, cst.Return)
        ), None)
        where = _Where(chunk, definition.name.value)
        if returned is None or len(body) > 8:
            count = Count()
            count.unresolved.append(f"what `{definition.name.value}(...)` returns")
            return count
        for statement in body:  # simple assignments before the return: sizes computed from the arguments
            if isinstance(statement, cst.SimpleStatementLine):
                for small in statement.body:
                    if isinstance(small, cst.Assign) and len(small.targets) == 1 and isinstance(small.targets[0].target, cst.Name):
                        local[small.targets[0].target.value] = self.value(small.value, chunk, local)
        return self.expression(returned, where, local, depth)

    def layer(self, head: str, node: cst.Call, info: ClassInfo, env: dict[str, Any], depth: int) -> Count:
        count = Count()
        chunk = info.chunk
        if head in _FREE_LAYERS:
            return count
        if head == "Sequential":
            for arg in node.args:
                if arg.star == "*" and isinstance(arg.value, (cst.Call, cst.List, cst.Tuple)):
                    count.add(self.expression(arg.value, info, env, depth))  # `*block(...)`: the layers it returns
                elif arg.star:
                    count.unresolved.append(f"`nn.Sequential(*{shortened(chunk.code_for(arg.value), 50)})`")
                else:
                    count.add(self.expression(arg.value, info, env, depth))
            return count
        if head in ("ModuleList", "ModuleDict"):
            return self.module_list(node, info, env, depth)
        specification = _LAYERS.get(head)
        if specification is None:
            count.unresolved.append(f"`nn.{head}(...)`")
            return count
        parameters, defaults, formula = specification
        bound = self.arguments(node, parameters, defaults, chunk, env)
        try:
            value = formula(**{name: bound.get(name, UNKNOWN) for name in parameters})
        except (TypeError, ValueError, ZeroDivisionError):
            value = None
        if value is None:
            count.unresolved.append(f"`{shortened(chunk.code_for(node), 50)}`")
        else:
            count.params += value
        return count

    def module_list(self, node: cst.Call, info: ClassInfo, env: dict[str, Any], depth: int) -> Count:
        count = Count()
        if not node.args:
            return count
        items = node.args[0].value
        if isinstance(items, (cst.List, cst.Tuple)):
            for element in items.elements:
                count.add(self.expression(element.value, info, env, depth))
            return count
        if isinstance(items, cst.ListComp) and isinstance(items.for_in.iter, cst.Call) and dotted(items.for_in.iter.func) == "range":
            bounds = [self.value(arg.value, info.chunk, env) for arg in items.for_in.iter.args]
            if bounds and all(isinstance(bound, int) for bound in bounds):
                repeats = len(range(*bounds))
                count.add(self.expression(items.elt, info, env, depth), repeats)
                return count
        count.unresolved.append(f"`{shortened(info.chunk.code_for(node), 50)}`")
        return count


def _is_shaped_tensor(node: cst.Call) -> bool:
    if not node.args or not isinstance(node.args[0].value, cst.Call):
        return False
    inner = node.args[0].value
    return last_part(dotted(inner.func) or "") in {"randn", "zeros", "ones", "empty", "rand"} and bool(inner.args)


def _int(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError
    return value


def _flag(value: Any) -> bool:
    if not isinstance(value, bool):
        raise TypeError
    return value


def _kernel(size: Any, dims: int) -> int:
    if isinstance(size, int) and not isinstance(size, bool):
        return size**dims
    if isinstance(size, tuple) and len(size) == dims:
        return math.prod(_int(item) for item in size)
    raise TypeError


def _conv(dims: int):
    def formula(in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias):
        weights = _int(in_channels) // _int(groups) * _int(out_channels) * _kernel(kernel_size, dims)
        return weights + (_int(out_channels) if _flag(bias) else 0)
    return (["in_channels", "out_channels", "kernel_size", "stride", "padding", "dilation", "groups", "bias"],
            {"stride": 1, "padding": 0, "dilation": 1, "groups": 1, "bias": True}, formula)


def _recurrent(gates: int):
    def formula(input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional):
        directions = 2 if _flag(bidirectional) else 1
        hidden = _int(hidden_size)
        total = 0
        for layer in range(_int(num_layers)):
            width = _int(input_size) if layer == 0 else hidden * directions
            per_direction = gates * hidden * (width + hidden) + (2 * gates * hidden if _flag(bias) else 0)
            total += per_direction * directions
        return total
    return (["input_size", "hidden_size", "num_layers", "bias", "batch_first", "dropout", "bidirectional"],
            {"num_layers": 1, "bias": True, "batch_first": False, "dropout": 0.0, "bidirectional": False}, formula)


def _cell(gates: int):
    def formula(input_size, hidden_size, bias):
        hidden = _int(hidden_size)
        return gates * hidden * (_int(input_size) + hidden) + (2 * gates * hidden if _flag(bias) else 0)
    return (["input_size", "hidden_size", "bias"], {"bias": True}, formula)


def _norm_shape(shape: Any) -> int:
    return _int(shape) if not isinstance(shape, tuple) else math.prod(_int(item) for item in shape)


# layer -> (constructor parameters in order, defaults, parameter count); torch.nn's signatures
_LAYERS = {
    "Linear": (["in_features", "out_features", "bias"], {"bias": True},
               lambda in_features, out_features, bias: _int(in_features) * _int(out_features) + (_int(out_features) if _flag(bias) else 0)),
    "Bilinear": (["in1_features", "in2_features", "out_features", "bias"], {"bias": True},
                 lambda in1_features, in2_features, out_features, bias: _int(in1_features) * _int(in2_features) * _int(out_features) + (_int(out_features) if _flag(bias) else 0)),
    "Conv1d": _conv(1), "Conv2d": _conv(2), "Conv3d": _conv(3),
    "ConvTranspose1d": _conv(1), "ConvTranspose2d": _conv(2), "ConvTranspose3d": _conv(3),
    "Embedding": (["num_embeddings", "embedding_dim"], {}, lambda num_embeddings, embedding_dim: _int(num_embeddings) * _int(embedding_dim)),
    "LayerNorm": (["normalized_shape", "eps", "elementwise_affine", "bias"], {"eps": 1e-5, "elementwise_affine": True, "bias": True},
                  lambda normalized_shape, eps, elementwise_affine, bias: (_norm_shape(normalized_shape) * (2 if _flag(bias) else 1)) if _flag(elementwise_affine) else 0),
    "RMSNorm": (["normalized_shape", "eps", "elementwise_affine"], {"eps": None, "elementwise_affine": True},
                lambda normalized_shape, eps, elementwise_affine: _norm_shape(normalized_shape) if _flag(elementwise_affine) else 0),
    "GroupNorm": (["num_groups", "num_channels", "eps", "affine"], {"eps": 1e-5, "affine": True},
                  lambda num_groups, num_channels, eps, affine: 2 * _int(num_channels) if _flag(affine) else 0),
    **{name: (["num_features", "eps", "momentum", "affine"], {"eps": 1e-5, "momentum": 0.1, "affine": True},
              lambda num_features, eps, momentum, affine: 2 * _int(num_features) if _flag(affine) else 0)
       for name in ("BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "SyncBatchNorm")},
    **{name: (["num_features", "eps", "momentum", "affine"], {"eps": 1e-5, "momentum": 0.1, "affine": False},
              lambda num_features, eps, momentum, affine: 2 * _int(num_features) if _flag(affine) else 0)
       for name in ("InstanceNorm1d", "InstanceNorm2d", "InstanceNorm3d")},
    "LSTM": _recurrent(4), "GRU": _recurrent(3), "RNN": _recurrent(1),
    "LSTMCell": _cell(4), "GRUCell": _cell(3), "RNNCell": _cell(1),
    "MultiheadAttention": (["embed_dim", "num_heads", "dropout", "bias"], {"dropout": 0.0, "bias": True},
                           lambda embed_dim, num_heads, dropout, bias: 4 * _int(embed_dim) ** 2 + (4 * _int(embed_dim) if _flag(bias) else 0)),
    "PReLU": (["num_parameters"], {"num_parameters": 1}, lambda num_parameters: _int(num_parameters)),
}
