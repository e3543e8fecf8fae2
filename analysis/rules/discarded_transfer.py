"""A tensor is moved or cast as a bare statement, and the result is thrown away.

`t.to(device)`, `t.cuda()`, `t.cpu()`, `t.half()`, `t.float()` return a new tensor; they do not
change `t`. Written as a statement of its own, the call copies the tensor, drops the copy, and
the code goes on with the original: the batch stays on the CPU (the forward then fails, or, on
a model that is on the CPU too, the run trains at CPU speed while the GPU idles), or the tensor
keeps the dtype the line was meant to change. Modules are different: `model.to(device)` moves
the module in place, so it is not reported, nor is any receiver trainlint cannot tell is a
tensor. A part of a loader's batch is one (`inputs, labels = data` or `batch["mask"]`, in the loop
or in a helper that every call in the file hands the batch): the default collation makes each part
a batched tensor, and a part that were anything else would have no `.to()`. A whole batch may be a
`BatchEncoding` or a graph batch whose `.to()` works in place, so it is left alone. A helper's parameter that every
call in the file hands one of the tensors a batch unpacks into (`for x, y in loader: objective(net, x, y)`) is one too.

How to fix: assign the result back, `x = x.to(device)`, or use it where it is needed.
"""

from __future__ import annotations

from typing import cast

import libcst as cst

from trainlint.analysis.libraries import TENSOR_TYPES
from trainlint.analysis.patterns import argument_passed
from trainlint.rules import (
    AssignEvent,
    CallEvent,
    Fires,
    Loop,
    ModuleView,
    Quiet,
    Rule,
    RuleContext,
    ScopeAnalysis,
    Severity,
    Tag,
    dotted,
    is_known_tensor,
    string_value,
    walk,
)

_TRANSFERS = frozenset({"to", "cuda", "cpu", "half", "float", "double", "bfloat16", "long", "int", "bool", "contiguous", "pin_memory"})
# What shows a name holds a module rather than a tensor (modules move in place).
_MODULE_USES = frozenset({"parameters", "named_parameters", "train", "eval", "state_dict", "load_state_dict", "modules", "children", "zero_grad", "apply"})


class DiscardedTransfer(Rule):
    code = "TL210"
    name = "discarded-transfer"
    severity = Severity.WARNING

    def check_scope(self, ctx: RuleContext, scope: ScopeAnalysis) -> None:
        for call in scope.calls():
            statement = call.statement
            bare = isinstance(statement, cst.Expr) and statement.value is call.node
            if call.method in _TRANSFERS and bare and isinstance(call.node.func, cst.Attribute):
                why = _why_a_tensor(ctx.module, scope, call)
                if why is not None:
                    self._report(ctx, scope, call, why)

    def _report(self, ctx: RuleContext, scope: ScopeAnalysis, call: CallEvent, why: tuple) -> None:
        key = call.receiver_key
        written = scope.chunk.code_for(call.node)
        fix = None
        method = cast(cst.Attribute, call.node.func)  # check() reports `x.to(...)`-style method calls
        walked = any(key in loop.targets and _element_of_tensors(scope, loop) is not None for loop in call.context.loops)
        if key is not None and scope.chunk.code_for(method.value) == key and not walked:
            fix = ctx.fix(f"assign the result back to `{key}`", [ctx.edit_insert_before(call.node, f"{key} = ")], safe=True)
        target = f"`{key}` itself" if key else "the tensor it is called on"
        ctx.report(
            call.node,
            f"`{written}` returns a new tensor and this statement throws it away: {target} is not "
            f"moved or converted, so the code after this line still uses the original",
            evidence=[why, ((scope.chunk, call.node), "the result of this call is discarded")],
            help=(
                "bind each tensor to its own copy where it is used (`inputs = inputs.to(device)`): rebinding the loop's name moves none"
                if walked else f"write `{key} = {written}`" if key else "assign the result to a name and use it"
            ),
            fix=fix,
        )


def _why_a_tensor(module: ModuleView, scope: ScopeAnalysis, call: CallEvent) -> tuple | None:
    """Evidence that the receiver is a tensor (not a module, not something unknown)."""
    receiver = call.receiver
    if receiver is None or Tag.MODEL in receiver.tags:
        return None
    key = call.receiver_key
    if key is not None and _used_as_module(scope, key):
        return None
    for loop in call.context.loops:
        if key in loop.targets and (walked := _element_of_tensors(scope, loop)) is not None:
            return walked
        if key in loop.targets and key not in _unpacked_batch_names(loop.node):
            # a whole batch: maybe a dict or a `BatchEncoding`, whose `.to()` works in place, unless the
            # loader's own `collate_fn` makes each batch one tensor
            return _collated_tensor(scope, loop, key)
    if receiver.tags & {Tag.TENSOR, Tag.GRAPH}:
        note = receiver.note or f"`{key}`"
        site = receiver.site or (scope.chunk, call.node)
        return (site, f"{note} is a tensor")
    declared = _annotated_tensor(scope, call) or _registered_buffer(scope, call) or _compared_tensors(scope, call)
    if declared is not None:
        return declared
    encoded = _item_of_encoding(scope, call)
    if encoded is not None:
        return encoded
    item = _item_of_unpacked_batch(scope, call)
    if item is not None:
        return item
    part = _part_of_a_whole_batch(module, scope, call)
    if part is not None:
        return part
    if key is None or "." in key:
        return None
    for loop in call.context.loops:
        if _iterates_a_loader(loop) and key in _unpacked_batch_names(loop.node):
            return ((scope.chunk, loop.node), f"`{key}` is one of the tensors each batch of `{loop.iterable_text}` unpacks into")
    if key in scope.params and not call.context.loops and scope.last_binding(key, before=call) is None:
        return _handed_a_part(module, scope, key)
    return None


def _handed_a_part(module: ModuleView, scope: ScopeAnalysis, parameter: str) -> tuple | None:
    """Every call of this function in the file hands ``parameter`` one of the tensors a loader's batch is
    unpacked into (`for x, y in loader: objective(net, x, y)`), not rebound before the call."""
    function = scope.function
    if function is None or parameter not in function.positional_parameters:
        return None
    found = None
    for outer in module.calls_of(function):
        passed = argument_passed(outer, function, parameter)
        if passed is None or not isinstance(passed.value, cst.Name):
            return None
        name = passed.value.value
        loop = next((loop for loop in outer.context.loops if _iterates_a_loader(loop) and name in _unpacked_batch_names(loop.node)), None)
        if loop is None or _rebound_in(outer.scope, name, loop, before=outer):
            return None
        found = found or ((outer.scope.chunk, outer.node), f"every call hands `{parameter}` `{name}`, one of the tensors each batch of `{loop.iterable_text}` unpacks into")
    return found


def _element_of_tensors(scope: ScopeAnalysis, loop: Loop) -> tuple | None:
    """The loop walks a tuple or list written out (`for t in (inputs, labels):`) and each element is a tensor:
    known as one where the loop starts, or one of the names a loader's batch unpacks into in a loop around it.
    The loop's name is bound to each tensor in turn, so a transfer of it moves none of them."""
    node = loop.node
    if not isinstance(node, cst.For) or not isinstance(node.target, cst.Name) or not isinstance(node.iter, (cst.Tuple, cst.List)):
        return None
    names = [element.value.value for element in node.iter.elements if isinstance(element.value, cst.Name)]
    if not names or len(names) != len(node.iter.elements):
        return None
    for element in node.iter.elements:
        value = scope.value_at(element.value)
        known = value is not None and bool(value.tags & {Tag.TENSOR, Tag.GRAPH}) and Tag.MODEL not in value.tags
        unpacked = any(
            _iterates_a_loader(outer) and cast(cst.Name, element.value).value in _unpacked_batch_names(outer.node)
            for outer in scope.loops if outer is not loop and outer.encloses(loop)
        )
        if not (known or unpacked):
            return None
    return ((scope.chunk, node), f"the loop binds `{node.target.value}` to each of {', '.join(f'`{name}`' for name in names)}, each a tensor")


def _compared_tensors(scope: ScopeAnalysis, call: CallEvent) -> tuple | None:
    """The receiver was last bound to an element-wise comparison with a tensor operand (`mask = ids != pad`),
    which makes a bool tensor (libraries.ELEMENTWISE_COMPARISON)."""
    receiver = cast(cst.Attribute, call.node.func).value
    if not isinstance(receiver, cst.Name):
        return None
    binding = scope.last_binding(receiver.value, before=call)
    compared = binding.value_node if binding is not None else None
    if binding is None or not isinstance(compared, cst.Comparison):
        return None
    elementwise = (cst.Equal, cst.NotEqual, cst.LessThan, cst.LessThanEqual, cst.GreaterThan, cst.GreaterThanEqual)
    if not all(isinstance(target.operator, elementwise) for target in compared.comparisons):
        return None
    operands = [compared.left, *(target.comparator for target in compared.comparisons)]
    for operand in operands:
        value = scope.value_at(operand)
        if value is not None and value.tags & {Tag.TENSOR, Tag.GRAPH} and Tag.MODEL not in value.tags:
            return ((scope.chunk, binding.node), f"`{receiver.value}` is `{scope.chunk.code_for(compared)}`, an element-wise comparison "
                    f"with the tensor `{scope.chunk.code_for(operand)}`, which makes a bool tensor")
    return None


def _annotated_tensor(scope: ScopeAnalysis, call: CallEvent) -> tuple | None:
    """The receiver is a parameter annotated as a tensor (`x: torch.Tensor`, `Optional[Tensor]`), not bound
    again before the call."""
    receiver = cast(cst.Attribute, call.node.func).value
    function = scope.function
    if not isinstance(receiver, cst.Name) or function is None or receiver.value not in scope.params:
        return None
    if any(isinstance(event, AssignEvent) and receiver.value in event.targets for event in scope.events[: _index(scope, call)]):
        return None
    params = function.node.params
    param = next((p for p in (*params.posonly_params, *params.params, *params.kwonly_params) if p.name.value == receiver.value), None)
    if param is None or param.annotation is None:
        return None
    written = _declared_type(param.annotation.annotation)
    if written is None or scope.summary.canonical(written) not in TENSOR_TYPES:
        return None
    return ((scope.chunk, param), f"`{receiver.value}` is annotated `{scope.chunk.code_for(param.annotation.annotation)}`")


def _declared_type(annotation: cst.BaseExpression) -> str | None:
    """`torch.Tensor`, and the type inside `Optional[...]` or `... | None`."""
    if isinstance(annotation, cst.Subscript) and dotted(annotation.value) in {"Optional", "typing.Optional"} and len(annotation.slice) == 1:
        element = annotation.slice[0].slice
        annotation = element.value if isinstance(element, cst.Index) else annotation
    if isinstance(annotation, cst.BinaryOperation) and isinstance(annotation.operator, cst.BitOr):
        sides = [side for side in (annotation.left, annotation.right) if not (isinstance(side, cst.Name) and side.value == "None")]
        annotation = sides[0] if len(sides) == 1 else annotation
    return dotted(annotation)


def _registered_buffer(scope: ScopeAnalysis, call: CallEvent) -> tuple | None:
    """The receiver is `self.<name>` in a method of a class whose `__init__` registers the buffer `<name>`:
    torch lets a buffer hold only a tensor or None (libraries.REGISTERED_BUFFER)."""
    receiver = cast(cst.Attribute, call.node.func).value
    function = scope.function
    owner = function.owner if function is not None else None
    if owner is None or not (isinstance(receiver, cst.Attribute) and isinstance(receiver.value, cst.Name) and receiver.value.value == "self"):
        return None
    init = owner.find_method("__init__", scope.summary)
    analysis = init.analysis(scope.summary) if init is not None else None
    if analysis is None:
        return None
    name = receiver.attr.value
    for registered in analysis.calls():
        if registered.method == "register_buffer" and registered.receiver_key == "self" and registered.arg_nodes:
            if string_value(registered.arg_nodes[0].value) == name:
                return ((analysis.chunk, registered.node), f"`self.{name}` is a registered buffer, which holds a tensor")
    return None


def _index(scope: ScopeAnalysis, event) -> int:
    return scope.events.index(event) if event in scope.events else len(scope.events)


def _iterates_a_loader(loop: Loop) -> bool:
    return Tag.LOADER in loop.iterable.tags or "loader" in loop.iterable_text.lower()


def _part_of_a_whole_batch(module: ModuleView, scope: ScopeAnalysis, call: CallEvent) -> tuple | None:
    """The receiver is a part of a batch bound whole (`for batch in loader`, or a helper's parameter every call
    in the file hands such a batch): `batch[0]`, `batch["image"]`, `batch.x`, or a name the batch is unpacked
    into in the body (`images, labels = batch`, `x = batch[0]`). A loader yields data, and the default
    collation turns each part of a sample into a batched tensor; a part that were a dict or a list would
    have no `.to()` at all, so the part moved is a tensor (a whole batch, whose `.to()` may work in place,
    is left to `_collated_tensor`)."""
    receiver = cast(cst.Attribute, call.node.func).value
    if isinstance(receiver, (cst.Subscript, cst.Attribute)) and isinstance(receiver.value, cst.Name):
        if isinstance(receiver, cst.Subscript) and not _plain_index(receiver):
            return None
        batch = receiver.value.value
        unpacked_at = None
    elif isinstance(receiver, cst.Name):
        binding = _unpacking_of(scope, receiver.value, call)
        if binding is None:
            return None
        batch, unpacked_at = binding
    else:
        return None
    part = scope.chunk.code_for(receiver)
    for loop in call.context.loops:
        if _binds_whole_batch(loop.node, batch) and _iterates_a_loader(loop):
            if unpacked_at is not None and loop not in unpacked_at.context.loops:
                return None  # unpacked before the loop: not this batch
            if _rebound_in(scope, batch, loop, before=call):
                return None
            return ((scope.chunk, loop.node), f"`{batch}` is a whole batch of `{loop.iterable_text}`, and `{part}` one of its parts")
    if batch not in scope.params or call.context.loops or (unpacked_at is not None and unpacked_at.context.loops):
        return None
    return _handed_a_batch(module, scope, batch, part)


def _plain_index(subscript: cst.Subscript) -> bool:
    """`batch[0]`, `batch["image"]`: one item by a literal key, not a slice or a computed key."""
    if len(subscript.slice) != 1 or not isinstance(element := subscript.slice[0].slice, cst.Index):
        return False
    return isinstance(element.value, cst.Integer) or string_value(element.value) is not None


def _unpacking_of(scope: ScopeAnalysis, name: str, call: CallEvent) -> tuple[str, AssignEvent] | None:
    """(the batch's name, the assignment) where the last binding of ``name`` before ``call`` takes it from a
    name by unpacking (`images, labels = batch`) or by a literal index (`x = batch[0]`)."""
    binding = next(
        (event for event in reversed(scope.events[: _index(scope, call)]) if isinstance(event, AssignEvent) and name in event.targets),
        None,
    )
    if binding is None or not isinstance(binding.node, cst.Assign) or len(binding.node.targets) != 1:
        return None
    target = binding.node.targets[0].target
    value = binding.node.value
    if isinstance(target, (cst.Tuple, cst.List)) and isinstance(value, cst.Name):
        if not all(isinstance(element.value, cst.Name) for element in target.elements):
            return None
        return value.value, binding
    if isinstance(target, cst.Name) and isinstance(value, cst.Subscript) and isinstance(value.value, cst.Name) and _plain_index(value):
        return value.value.value, binding
    return None


def _rebound_in(scope: ScopeAnalysis, name: str, loop: Loop, before: CallEvent) -> bool:
    for event in scope.events:
        if event is before:
            return False
        if isinstance(event, AssignEvent) and name in event.targets and loop in event.context.loops:
            return True
    return False


def _handed_a_batch(module: ModuleView, scope: ScopeAnalysis, parameter: str, part: str) -> tuple | None:
    """Every call of this function in the file passes a whole batch of a loader for ``parameter``
    (`for batch in loader: inputs, targets = self._prepare(batch)`)."""
    function = scope.function
    if function is None or parameter not in function.positional_parameters:
        return None
    found = None
    for outer in module.calls_of(function):
        passed = argument_passed(outer, function, parameter)
        if passed is None or not isinstance(passed.value, cst.Name):
            return None
        name = passed.value.value
        loop = next((loop for loop in outer.context.loops if _binds_whole_batch(loop.node, name) and _iterates_a_loader(loop)), None)
        if loop is None or _rebound_in(outer.scope, name, loop, before=outer):
            return None
        found = found or ((outer.scope.chunk, outer.node), f"every call hands `{parameter}` a whole batch of `{loop.iterable_text}`, so `{part}` is one of its parts")
    return found


def _item_of_encoding(scope: ScopeAnalysis, call: CallEvent) -> tuple | None:
    """`inputs[name].to(device)` where `inputs` came from a call asking for PyTorch tensors,
    `tokenizer(texts, return_tensors="pt")`: a Hugging Face `BatchEncoding` (or a processor's
    `BatchFeature`), whose every item is then a `torch.Tensor` (transformers' `BatchEncoding.convert_to_tensors`)."""
    receiver = cast(cst.Attribute, call.node.func).value
    if not isinstance(receiver, cst.Subscript) or not isinstance(receiver.value, cst.Name):
        return None
    index = receiver.slice[0].slice if len(receiver.slice) == 1 else None
    if not isinstance(index, cst.Index) or isinstance(index.value, (cst.Integer, cst.UnaryOperation)):
        return None  # `encoding[0]` is the first text's `Encoding` (fast tokenizers), not a tensor
    binding = scope.last_binding(receiver.value.value, before=call)
    if binding is None or not isinstance(made := binding.value_node, cst.Call):
        return None
    asked = next((arg.value for arg in made.args if arg.keyword is not None and arg.keyword.value == "return_tensors"), None)
    if asked is None or string_value(asked) != "pt":
        return None
    name = receiver.value.value
    return ((binding.scope.chunk, made), f"`{name}` holds PyTorch tensors (`return_tensors=\"pt\"`), so each item of it is one")


def _item_of_unpacked_batch(scope: ScopeAnalysis, call: CallEvent) -> tuple | None:
    """`x[name].to(device)` where `x` is one of the parts a loader's batch is unpacked into
    (`for x, y in loader`): a loader yields data, never modules, and the default collation turns a
    part that is a dict of samples' tensors into a dict of batched tensors, so the item moved is a
    tensor (the `BatchEncoding` whose `.to()` works in place is a whole batch, left to `_collated_tensor`)."""
    receiver = cast(cst.Attribute, call.node.func).value
    if not isinstance(receiver, cst.Subscript) or not isinstance(receiver.value, cst.Name):
        return None
    name = receiver.value.value
    binding = scope.last_binding(name, before=call)
    for loop in call.context.loops:
        if binding is not None and loop in binding.context.loops:
            return None  # bound again inside the loop: no longer the batch's part
        if _iterates_a_loader(loop) and name in _unpacked_batch_names(loop.node):
            return ((call.chunk, loop.node), f"`{name}` is a part of each batch of `{loop.iterable_text}`, so its items are tensors")
    return None


def _collated_tensor(scope: ScopeAnalysis, loop: Loop, key: str) -> tuple | None:
    """Evidence that each batch of ``loop``, bound whole to ``key``, is one tensor: the loop iterates a
    `DataLoader` built in sight whose `collate_fn` is a workspace function returning a tensor on every path."""
    if not _binds_whole_batch(loop.node, key):
        return None
    loader = loop.iterable
    while isinstance(loader.detail, tuple) and loader.detail and loader.detail[0] == "enumerate":
        loader = loader.detail[1]
    construction = loader.detail
    if Tag.LOADER not in loader.tags or not isinstance(construction, CallEvent):
        return None
    collate = construction.keyword("collate_fn")
    if collate is None or not isinstance(collate.value, cst.Name):
        return None
    name = collate.value.value
    function = scope.summary.functions.get(name) or scope.summary.imported_function(name)
    if function is None or function.owner is not None:
        return None
    analysis = function.analysis(scope.summary)
    if analysis is None:
        return None
    returns = [node for node in walk(function.node.body) if isinstance(node, cst.Return)]
    if not returns or _may_fall_off(function.node) or any(not _returns_tensor(analysis, node) for node in returns):
        return None
    return (
        (construction.chunk, construction.node),
        f"`{key}` is a whole batch of this loader, whose `collate_fn={name}` returns one tensor on every path",
    )


def _binds_whole_batch(node, key: str) -> bool:
    """`for batch in loader` or `for i, batch in enumerate(loader)`."""
    if not isinstance(node, cst.For):
        return False
    target = node.target
    if isinstance(node.iter, cst.Call) and isinstance(node.iter.func, cst.Name) and node.iter.func.value == "enumerate":
        if not isinstance(target, (cst.Tuple, cst.List)) or len(target.elements) != 2:
            return False
        target = target.elements[1].value
    return isinstance(target, cst.Name) and target.value == key


def _returns_tensor(analysis: ScopeAnalysis, node: cst.Return) -> bool:
    if node.value is None:
        return False
    value = analysis.value_at(node.value)
    return value is not None and is_known_tensor(value)


def _may_fall_off(function: cst.FunctionDef) -> bool:
    """The body can end without a `return` (a nested function's returns are not its own: not counted)."""
    body = function.body
    statements = body.body if isinstance(body, cst.IndentedBlock) else ()
    last = statements[-1] if statements else None
    return not (isinstance(last, cst.SimpleStatementLine) and any(isinstance(small, cst.Return) for small in last.body))


def _unpacked_batch_names(node) -> set[str]:
    """Names a batch is unpacked into: `for x, y in loader`, `for i, (x, y) in enumerate(loader)`.

    A batch bound whole (`for batch in loader`, `for i, batch in enumerate(loader)`) may be a
    dict or a `BatchEncoding`, whose `.to()` moves it in place: not a tensor for this rule.
    """
    if not isinstance(node, cst.For):
        return set()
    target = node.target
    iterable = node.iter
    if isinstance(iterable, cst.Call) and isinstance(iterable.func, cst.Name) and iterable.func.value == "enumerate":
        if not isinstance(target, (cst.Tuple, cst.List)) or len(target.elements) != 2:
            return set()
        target = target.elements[1].value
    if not isinstance(target, (cst.Tuple, cst.List)):
        return set()
    return {element.value.value for element in target.elements if isinstance(element.value, cst.Name)}


def _used_as_module(scope: ScopeAnalysis, key: str) -> bool:
    for call in scope.calls():
        if call.receiver_key == key and call.method in _MODULE_USES:
            return True
        if call.method is None and call.receiver_key == key:  # called: `key(x)`
            return True
    return False


DiscardedTransfer.MUST_FIRE = (
    Fires(
        """
        import torch

        def train(model, loader, optimizer, device):
            model.to(device)
            for x, y in loader:
                x.to(device)
                y = y.to(device)
                loss = torch.nn.functional.cross_entropy(model(x), y)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
        """,
        fixed="""
        import torch

        def train(model, loader, optimizer, device):
            model.to(device)
            for x, y in loader:
                x = x.to(device)
                y = y.to(device)
                loss = torch.nn.functional.cross_entropy(model(x), y)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
        """,
    ),
    Fires(
        """
        import torch

        weights = torch.ones(10)
        weights.cuda()
        criterion = torch.nn.CrossEntropyLoss(weight=weights)
        """,
        fixed="""
        import torch

        weights = torch.ones(10)
        weights = weights.cuda()
        criterion = torch.nn.CrossEntropyLoss(weight=weights)
        """,
    ),
    Fires(
        """
        import torch

        mask = torch.zeros(8, 8)
        mask.half()
        """,
        fixed="""
        import torch

        mask = torch.zeros(8, 8)
        mask = mask.half()
        """,
    ),
    Fires(
        """
        import torch
        from torch.utils.data import DataLoader

        loader = DataLoader(dataset, batch_size=32)
        for i, (images, labels) in enumerate(loader):
            images.cuda(non_blocking=True)
            labels.cuda(non_blocking=True)
        """,
        fixed="""
        import torch
        from torch.utils.data import DataLoader

        loader = DataLoader(dataset, batch_size=32)
        for i, (images, labels) in enumerate(loader):
            images = images.cuda(non_blocking=True)
            labels = labels.cuda(non_blocking=True)
        """,
        count=2,
    ),
    Fires(
        """
        import torch

        def evaluate(model, batch):
            logits = model(batch)
            logits.cpu()
            return logits.argmax(-1)
        """,
        fixed="""
        import torch

        def evaluate(model, batch):
            logits = model(batch)
            logits = logits.cpu()
            return logits.argmax(-1)
        """,
    ),
    Fires(
        """
        import torch

        def make_inputs(device):
            noise = torch.randn(16, 100)
            noise.to(device)
            return noise
        """,
        fixed="""
        import torch

        def make_inputs(device):
            noise = torch.randn(16, 100)
            noise = noise.to(device)
            return noise
        """,
    ),
    Fires(  # a network built by name through a helper whose `module: types.ModuleType` is a Python module (NVlabs' EDM)
        """
        import torch

        import dnnlib.util


        def training_loop(network_kwargs, train_loader, loss_fn, optimizer_kwargs, device=torch.device("cuda")):
            net = dnnlib.util.construct_class_by_name(**network_kwargs)  # subclass of torch.nn.Module
            net.train().requires_grad_(True).to(device)
            optimizer = torch.optim.Adam(net.parameters(), **optimizer_kwargs)
            for images, labels in train_loader:
                images = images.to(device).to(torch.float32) / 127.5 - 1
                labels.to(device)
                loss = loss_fn(net=net, images=images, labels=labels)
                optimizer.zero_grad(set_to_none=True)
                loss.sum().backward()
                optimizer.step()
        """,
        files={
            "dnnlib/__init__.py": "",
            "dnnlib/util.py": """
                import importlib
                import types
                from typing import Any


                def get_obj_from_module(module: types.ModuleType, obj_name: str) -> Any:
                    if obj_name == "":
                        return module
                    obj = module
                    for part in obj_name.split("."):
                        obj = getattr(obj, part)
                    return obj


                def construct_class_by_name(*args, class_name: str = None, **kwargs) -> Any:
                    module_name, _, obj_name = class_name.rpartition(".")
                    cls = get_obj_from_module(importlib.import_module(module_name), obj_name)
                    return cls(*args, **kwargs)
            """,
        },
        fixed="""
        import torch

        import dnnlib.util


        def training_loop(network_kwargs, train_loader, loss_fn, optimizer_kwargs, device=torch.device("cuda")):
            net = dnnlib.util.construct_class_by_name(**network_kwargs)  # subclass of torch.nn.Module
            net.train().requires_grad_(True).to(device)
            optimizer = torch.optim.Adam(net.parameters(), **optimizer_kwargs)
            for images, labels in train_loader:
                images = images.to(device).to(torch.float32) / 127.5 - 1
                labels = labels.to(device)
                loss = loss_fn(net=net, images=images, labels=labels)
                optimizer.zero_grad(set_to_none=True)
                loss.sum().backward()
                optimizer.step()
        """,
        at="labels.to(device)",
    ),
    Fires(  # the loader's collate function, in another file, makes each batch one padded tensor
        """
        import torch
        from torch.utils.data import DataLoader

        from data import DialogueDataset, pad_batch


        def train(model, optimizer, args, device):
            dataset = DialogueDataset(args.train_path)
            loader = DataLoader(dataset, batch_size=args.batch_size, shuffle=True, collate_fn=pad_batch)
            model.train()
            for epoch in range(args.epochs):
                for step, input_ids in enumerate(loader):
                    input_ids.to(device)
                    outputs = model(input_ids=input_ids, labels=input_ids)
                    optimizer.zero_grad()
                    outputs.loss.backward()
                    optimizer.step()
        """,
        files={"data.py": """
            import torch
            from torch.utils.data import Dataset

            PAD_ID = 0


            class DialogueDataset(Dataset):
                def __init__(self, path):
                    with open(path) as f:
                        self.samples = [[int(t) for t in line.split()] for line in f]

                def __len__(self):
                    return len(self.samples)

                def __getitem__(self, index):
                    return self.samples[index]


            def pad_batch(batch):
                longest = max(len(ids) for ids in batch)
                padded = [ids + [PAD_ID] * (longest - len(ids)) for ids in batch]
                return torch.tensor(padded, dtype=torch.long)
            """},
        fixed="""
        import torch
        from torch.utils.data import DataLoader

        from data import DialogueDataset, pad_batch


        def train(model, optimizer, args, device):
            dataset = DialogueDataset(args.train_path)
            loader = DataLoader(dataset, batch_size=args.batch_size, shuffle=True, collate_fn=pad_batch)
            model.train()
            for epoch in range(args.epochs):
                for step, input_ids in enumerate(loader):
                    input_ids = input_ids.to(device)
                    outputs = model(input_ids=input_ids, labels=input_ids)
                    optimizer.zero_grad()
                    outputs.loss.backward()
                    optimizer.step()
        """,
    ),
    Fires(  # code from before PyTorch 0.4 wraps tensors in `Variable`, which returns the tensor itself
        """
        import torch
        from torch.autograd import Variable

        inputs = Variable(torch.Tensor([[0.0, 1.0], [1.0, 0.0]]))
        labels = Variable(torch.LongTensor([1, 0]))
        if torch.cuda.is_available():
            inputs.cuda()
            labels.cuda()
        """,
        fixed="""
        import torch
        from torch.autograd import Variable

        inputs = Variable(torch.Tensor([[0.0, 1.0], [1.0, 0.0]]))
        labels = Variable(torch.LongTensor([1, 0]))
        if torch.cuda.is_available():
            inputs = inputs.cuda()
            labels = labels.cuda()
        """,
        count=2,
    ),
    Fires(  # an encoder class: the tokenizer's tensors are moved one by one, and each copy dropped
        """
        import torch
        from transformers import AutoModel, AutoTokenizer


        class SentenceEncoder:
            def __init__(self, name, device="cuda"):
                self.tokenizer = AutoTokenizer.from_pretrained(name)
                self.model = AutoModel.from_pretrained(name).to(device)
                self.device = device

            @torch.no_grad()
            def encode(self, sentences):
                inputs = self.tokenizer(sentences, padding=True, truncation=True, return_tensors="pt")
                for name in inputs:
                    inputs[name].to(self.device)
                return self.model(**inputs).pooler_output.cpu()
        """,
        no_fix=True,
    ),
    Fires(  # a forecasting model's predict method: each batch's inputs are a dict, moved item by item, and each copy dropped
        """
        import torch
        from torch import nn


        class Forecaster(nn.Module):
            def __init__(self, hidden_size):
                super().__init__()
                self.encoder = nn.LSTM(1, hidden_size, batch_first=True)
                self.head = nn.Linear(hidden_size, 1)

            @property
            def device(self):
                return next(self.parameters()).device

            def forward(self, x):
                output, _ = self.encoder(x["encoder_target"])
                return self.head(output[:, -1])

            def predict(self, dataloader):
                self.eval()
                predictions = []
                with torch.no_grad():
                    for x, _ in dataloader:
                        for name in x.keys():
                            if x[name].device != self.device:
                                x[name].to(self.device)
                        predictions.append(self(x))
                return torch.cat(predictions)
        """,
        no_fix=True,
    ),
    Fires(  # a tutorial-style loop: the whole batch is unpacked in the body, and one part's copy is dropped
        """
        import torch
        import torchvision


        def train(net, trainloader, criterion, optimizer, device):
            for epoch in range(2):
                for i, data in enumerate(trainloader, 0):
                    inputs, labels = data
                    inputs.to(device)
                    labels = labels.to(device)
                    optimizer.zero_grad()
                    loss = criterion(net(inputs), labels)
                    loss.backward()
                    optimizer.step()
        """,
        fixed="""
        import torch
        import torchvision


        def train(net, trainloader, criterion, optimizer, device):
            for epoch in range(2):
                for i, data in enumerate(trainloader, 0):
                    inputs, labels = data
                    inputs = inputs.to(device)
                    labels = labels.to(device)
                    optimizer.zero_grad()
                    loss = criterion(net(inputs), labels)
                    loss.backward()
                    optimizer.step()
        """,
    ),
    Fires(  # a trainer's helper unpacks the batch its loop hands it; the mask is an item of the batch's dict
        """
        import torch
        import torch.nn.functional as F


        class SegmentationTrainer:
            def __init__(self, model, train_loader, optimizer, device):
                self.model = model
                self.train_loader = train_loader
                self.optimizer = optimizer
                self.device = device

            def _unpack(self, batch):
                images = batch["image"].to(self.device)
                batch["mask"].to(self.device)
                return images, batch["mask"]

            def train_epoch(self):
                for batch in self.train_loader:
                    images, masks = self._unpack(batch)
                    loss = F.cross_entropy(self.model(images), masks)
                    self.optimizer.zero_grad()
                    loss.backward()
                    self.optimizer.step()
        """,
        no_fix=True,
        at='batch["mask"].to(self.device)',
    ),
    Fires(  # a positional encoding: the registered table is cast and the copy dropped
        """
        import math

        import torch
        from torch import nn


        class PositionalEncoding(nn.Module):
            def __init__(self, dim, max_len=4096):
                super().__init__()
                position = torch.arange(max_len).unsqueeze(1)
                div = torch.exp(torch.arange(0, dim, 2) * (-math.log(10000.0) / dim))
                table = torch.zeros(max_len, dim)
                table[:, 0::2] = torch.sin(position * div)
                table[:, 1::2] = torch.cos(position * div)
                self.register_buffer("table", table)

            def forward(self, x):
                self.table.to(x.dtype)
                return x + self.table[: x.size(1)]
        """,
        fixed="""
        import math

        import torch
        from torch import nn


        class PositionalEncoding(nn.Module):
            def __init__(self, dim, max_len=4096):
                super().__init__()
                position = torch.arange(max_len).unsqueeze(1)
                div = torch.exp(torch.arange(0, dim, 2) * (-math.log(10000.0) / dim))
                table = torch.zeros(max_len, dim)
                table[:, 0::2] = torch.sin(position * div)
                table[:, 1::2] = torch.cos(position * div)
                self.register_buffer("table", table)

            def forward(self, x):
                self.table = self.table.to(x.dtype)
                return x + self.table[: x.size(1)]
        """,
    ),
    Fires(  # a typed helper: its parameter is a tensor by annotation, and the cast is dropped
        """
        from typing import Optional

        import torch
        from torch import Tensor


        def masked_mean(values: Tensor, mask: Optional[torch.Tensor] = None) -> Tensor:
            if mask is None:
                return values.mean()
            mask.float()
            return (values * mask).sum() / mask.sum()
        """,
        fixed="""
        from typing import Optional

        import torch
        from torch import Tensor


        def masked_mean(values: Tensor, mask: Optional[torch.Tensor] = None) -> Tensor:
            if mask is None:
                return values.mean()
            mask = mask.float()
            return (values * mask).sum() / mask.sum()
        """,
    ),
    Fires(  # a helper every call hands the tensors a batch unpacks into moves one and drops the copy
        """
        import torch


        def objective(net, crit, x, y, dev):
            x.to(dev)
            return crit(net(x), y.to(dev))


        def run(net, crit, loader, opt):
            dev = torch.device("cuda")
            net.to(dev)
            for epoch in range(10):
                for i, (x, y) in enumerate(loader):
                    obj = objective(net, crit, x, y, dev)
                    obj.backward()
                    opt.step()
                    opt.zero_grad()
        """,
        fixed="""
        import torch


        def objective(net, crit, x, y, dev):
            x = x.to(dev)
            return crit(net(x), y.to(dev))


        def run(net, crit, loader, opt):
            dev = torch.device("cuda")
            net.to(dev)
            for epoch in range(10):
                for i, (x, y) in enumerate(loader):
                    obj = objective(net, crit, x, y, dev)
                    obj.backward()
                    opt.step()
                    opt.zero_grad()
        """,
        at="x.to(dev)",
    ),
    Fires(  # a trainer moves each part of the batch in a loop over the parts: the loop's name is rebound, no part moves
        """
        import torch

        from nets import Classifier


        class Trainer:
            def __init__(self, loader, device):
                self.model = Classifier(10).to(device)
                self.loader = loader
                self.device = device
                self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.1)

            def train_epoch(self):
                for images, labels in self.loader:
                    for tensor in (images, labels):
                        tensor.to(self.device)
                    loss = torch.nn.functional.cross_entropy(self.model(images), labels)
                    self.optimizer.zero_grad()
                    loss.backward()
                    self.optimizer.step()
        """,
        files={
            "nets.py": """
                from torch import nn


                class Classifier(nn.Module):
                    def __init__(self, classes):
                        super().__init__()
                        self.body = nn.Sequential(nn.Flatten(), nn.LazyLinear(classes))

                    def forward(self, x):
                        return self.body(x)
            """,
        },
        no_fix=True,
        at="tensor.to(self.device)",
    ),
    Fires(  # a padding mask made by comparing with a tensor is a bool tensor; its cast to float is dropped
        """
        import torch


        def padding_mask(lengths, max_len):
            mask = torch.arange(max_len, device=lengths.device)[None, :] < lengths[:, None]
            mask.float()
            return mask


        def masked_loss(model, tokens, lengths, targets):
            mask = padding_mask(lengths, tokens.size(1))
            losses = torch.nn.functional.mse_loss(model(tokens), targets, reduction="none")
            return (losses * mask).sum() / mask.sum()
        """,
        fixed="""
        import torch


        def padding_mask(lengths, max_len):
            mask = torch.arange(max_len, device=lengths.device)[None, :] < lengths[:, None]
            mask = mask.float()
            return mask


        def masked_loss(model, tokens, lengths, targets):
            mask = padding_mask(lengths, tokens.size(1))
            losses = torch.nn.functional.mse_loss(model(tokens), targets, reduction="none")
            return (losses * mask).sum() / mask.sum()
        """,
    ),
)

DiscardedTransfer.MUST_NOT_FIRE = (
    Quiet(  # the loop walks modules (moved in place), and the batch's tensors are each bound to their copy
        """
        import torch

        from nets import Decoder, Encoder


        def fit(loader, device):
            encoder, decoder = Encoder(), Decoder()
            for part in (encoder, decoder):
                part.to(device)
            params = [*encoder.parameters(), *decoder.parameters()]
            optimizer = torch.optim.Adam(params)
            for images, masks in loader:
                images, masks = (tensor.to(device) for tensor in (images, masks))
                loss = torch.nn.functional.mse_loss(decoder(encoder(images)), masks)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
        """,
        files={
            "nets.py": """
                from torch import nn


                class Encoder(nn.Module):
                    def __init__(self):
                        super().__init__()
                        self.conv = nn.Conv2d(3, 8, 3, padding=1)

                    def forward(self, x):
                        return self.conv(x)


                class Decoder(nn.Module):
                    def __init__(self):
                        super().__init__()
                        self.conv = nn.Conv2d(8, 1, 3, padding=1)

                    def forward(self, x):
                        return self.conv(x)
            """,
        },
    ),
    Quiet(  # numpy's comparison makes an array, whose `astype` is not a transfer; `is` makes a Python bool
        """
        import numpy as np


        def select(scores, threshold):
            chosen = np.asarray(scores) > threshold
            chosen.astype("float32")
            missing = scores is None
            return chosen, missing
        """
    ),
    Quiet(  # the encoders a batch's keys pick are modules, which move in place; the batch's own items are assigned back
        """
        import torch
        from torch import nn


        class MultiModalNet(nn.Module):
            def __init__(self, encoders):
                super().__init__()
                self.encoders = nn.ModuleDict(encoders)

            def fit(self, train_loader, optimizer, device):
                for inputs, target in train_loader:
                    for name in inputs:
                        self.encoders[name].to(device)
                        inputs[name] = inputs[name].to(device)
                    features = torch.cat([self.encoders[name](inputs[name]) for name in inputs], dim=-1)
                    loss = nn.functional.mse_loss(features.mean(-1), target.to(device))
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
        """
    ),
    Quiet(  # the part is bound again in the loop (to a model's outputs): what is moved is no longer the batch's
        """
        import torch


        def collect(model, loader, device):
            kept = []
            for inputs, _ in loader:
                inputs = model.summarise(inputs)
                for name in inputs:
                    inputs[name].cpu()
                kept.append(inputs)
            return kept
        """
    ),
    Quiet(  # a whole `BatchEncoding` moves in place
        """
        import torch


        def embed(model, tokenizer, texts, device):
            inputs = tokenizer(texts, padding=True, return_tensors="pt")
            inputs.to(device)
            with torch.no_grad():
                return model(**inputs).last_hidden_state[:, 0]
        """
    ),
    Quiet(  # the collate function returns a dict of tensors: a whole batch bound to a name may move in place
        """
        import torch
        from torch.utils.data import DataLoader


        def collate(samples):
            ids = torch.stack([s["ids"] for s in samples])
            return {"input_ids": ids, "labels": ids.clone()}


        def train(model, dataset, device):
            loader = DataLoader(dataset, batch_size=8, collate_fn=collate)
            for batch in loader:
                batch.to(device)
        """
    ),
    Quiet(  # one path of the collate function returns something else
        """
        import torch
        from torch.utils.data import DataLoader


        def collate(samples, tokenizer=None):
            if tokenizer is not None:
                return tokenizer([s["text"] for s in samples], padding=True, return_tensors="pt")
            return torch.stack([s["ids"] for s in samples])


        def train(model, dataset, device):
            loader = DataLoader(dataset, batch_size=8, collate_fn=collate)
            for batch in loader:
                batch.to(device)
        """
    ),
    Quiet(
        """
        import torch

        model = torch.nn.Linear(4, 2)
        model.to("cuda")
        model.half()
        """
    ),
    Quiet(
        """
        def train(net, loader, device):
            net.cuda()
            for x, y in loader:
                out = net(x.to(device))
        """
    ),
    Quiet(
        """
        def setup(model, device):
            model.to(device)
            model.train()
        """
    ),
    Quiet(
        """
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained("gpt2")
        inputs = tokenizer("hello", return_tensors="pt")
        inputs.to("cuda")
        """
    ),
    Quiet(
        """
        import torch

        x = torch.randn(4, 4)
        x = x.to("cuda")
        y = x.cpu().numpy()
        """
    ),
    Quiet(
        """
        def move(batch, device):
            batch.to(device)
            return batch
        """
    ),
    Quiet(
        """
        import torch

        def train(model, loader, device):
            for batch in loader:
                batch.to(device)
                model(**batch)
        """
    ),
    Quiet(
        """
        def train(model, train_dataloader, accelerator):
            for step, batch in enumerate(train_dataloader):
                batch.to(accelerator.device)
                outputs = model(**batch)
        """
    ),
    Quiet(  # `.to()` on a module moves it in place; the helper's `module` parameter is annotated as a Python module
        """
        import torch

        import dnnlib.util


        def training_loop(network_kwargs, train_loader, loss_fn, optimizer_kwargs, device=torch.device("cuda")):
            net = dnnlib.util.construct_class_by_name(**network_kwargs)  # subclass of torch.nn.Module
            net.train().requires_grad_(True).to(device)
            optimizer = torch.optim.Adam(net.parameters(), **optimizer_kwargs)
            for images, labels in train_loader:
                images = images.to(device).to(torch.float32) / 127.5 - 1
                loss = loss_fn(net=net, images=images, labels=labels)
                optimizer.zero_grad(set_to_none=True)
                loss.sum().backward()
                optimizer.step()
        """,
        files={
            "dnnlib/__init__.py": "",
            "dnnlib/util.py": """
                import importlib
                import types
                from typing import Any


                def get_obj_from_module(module: types.ModuleType, obj_name: str) -> Any:
                    if obj_name == "":
                        return module
                    obj = module
                    for part in obj_name.split("."):
                        obj = getattr(obj, part)
                    return obj


                def construct_class_by_name(*args, class_name: str = None, **kwargs) -> Any:
                    module_name, _, obj_name = class_name.rpartition(".")
                    cls = get_obj_from_module(importlib.import_module(module_name), obj_name)
                    return cls(*args, **kwargs)
            """,
        },
    ),
    Quiet(  # a whole graph batch (torch_geometric's `Batch.to` moves it in place) handed to a helper
        """
        import torch
        import torch.nn.functional as F


        def _step(model, data, device):
            data.to(device)
            return F.nll_loss(model(data.x, data.edge_index), data.y)


        def train(model, loader, optimizer, device):
            for data in loader:
                loss = _step(model, data, device)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
        """
    ),
    Quiet(  # the helper is also handed a list built by hand, not only a loader's batch: what its parts are is unknown
        """
        import torch


        def to_inputs(sample, device):
            features, extra = sample
            features.to(device)
            return features, extra


        def run(model, loader, records, device):
            for batch in loader:
                model(*to_inputs(batch, device))
            for record in records:
                model(*to_inputs([record.tokens, record.meta], device))
        """
    ),
    Quiet(  # annotated as a graph batch (its `.to()` moves it in place), and a buffer-free attribute of unknown kind
        """
        import torch
        from torch_geometric.data import Batch


        class GraphRegressor(torch.nn.Module):
            def __init__(self, encoder, head):
                super().__init__()
                self.encoder = encoder
                self.head = head

            def predict(self, batch: Batch, device: torch.device) -> torch.Tensor:
                batch.to(device)
                self.encoder.to(device)
                return self.head(self.encoder(batch.x, batch.edge_index))
        """
    ),
    Quiet(  # one call hands the helper something other than a batch's tensor: what `x` is stays unknown
        """
        import torch


        def prepare(x, dev):
            x.to(dev)
            return x


        def run(net, loader, dev):
            prepare(net, dev)
            for x, y in loader:
                prepare(x, dev)
        """
    ),
)
