"""A model a library built (``AutoModel.from_pretrained(...)``, ``timm.create_model(...)``,
``torchvision.models.vgg16()``): whether it came back in eval mode and whether it has dropout or
batch-norm layers, from the library facts in ``libraries.py``; the checkpoint or dropout rate it was
built with is read from the call, or from what a name of the file holds for certain (a module
constant, a command-line option's literal default)."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator

import libcst as cst

from . import libraries
from .quoting import shortened
from .tree import literal_value, string_value, walk
from .values import MODEL, Value


def library_model_facts(value: Value, module=None) -> tuple[libraries.ModeFact | None, libraries.ModeFact | None]:
    """For a model a library built (``AutoModel.from_pretrained("bert-base-uncased")``,
    ``timm.create_model("resnet50")``, ``torchvision.models.vgg16()``): whether the call returned it in
    eval mode, and whether it has dropout or batch-norm layers that act by default. (None, None) for
    anything else, the workspace's own classes included (their layers are read from their source).

    With ``module`` (the ``ModuleView`` of the file that built it), a checkpoint or a dropout rate
    passed by name is read from what the name holds: a module constant (``MODEL_NAME = "bert-base-uncased"``)
    or the default of a command-line option (``args.model_name`` with ``add_argument("--model_name",
    default="bert-base-uncased")``); the fact then says where the value came from."""
    if MODEL not in value.tags or not isinstance(value.detail, str) or value.site is None:
        return None, None
    chunk, built = value.site
    if not isinstance(built, cst.Call):
        return None, None
    method = built.func.attr.value if isinstance(built.func, cst.Attribute) else None
    loaded = libraries.eval_mode_after_loading(value.detail, method) if method else None
    first = next((arg.value for arg in built.args if arg.keyword is None), None)
    if first is None:
        first = next((arg.value for arg in built.args if arg.keyword is not None and arg.keyword.value in _CHECKPOINT_KEYWORDS), None)
    resolve = _configured(module, chunk)
    checkpoint, checkpoint_origin = string_value(first), None
    if checkpoint is None and first is not None and resolve is not None:
        held, checkpoint_origin = resolve(first) or (None, None)
        checkpoint = held if isinstance(held, str) else None
    rates: dict[str, float] = {}
    rate_origins: dict[str, str] = {}
    for arg in built.args:
        keyword = arg.keyword.value if arg.keyword is not None else None
        if keyword is None or not _RATE_KEYWORD.search(keyword):
            continue
        rate, origin = _plain_literal(arg.value), None
        if rate is None and resolve is not None:
            rate, origin = resolve(arg.value) or (None, None)
        if isinstance(rate, (int, float)) and not isinstance(rate, bool):
            rates[keyword] = float(rate)
            if origin is not None:
                rate_origins[keyword] = origin
    built_by = value.detail
    if built_by == "torch.hub.load":
        built_by, checkpoint = _hub_entry(built, checkpoint, resolve)
    by_name = libraries.mode_layers(built_by, checkpoint)
    layers = by_name or libraries.mode_layers(built_by, None, rates)
    said = [checkpoint_origin] if by_name is not None else [rate_origins.get(keyword) for keyword, rate in rates.items() if rate > 0]
    if layers is not None and any(said):
        layers = libraries.ModeFact(f"{layers.says}; {'; '.join(origin for origin in said if origin)}", layers.source)
    return loaded, layers


def _hub_entry(built: cst.Call, repository: str | None, resolve) -> tuple[str, str | None]:
    """What ``torch.hub.load(repository, entry, ...)`` builds, as ``mode_layers`` reads it: the library function a
    hub repository's entry point is (``libraries.hub_builder``), or the hub call itself when it is not known."""
    second = [arg.value for arg in built.args if arg.keyword is None][1:2] or [
        arg.value for arg in built.args if arg.keyword is not None and arg.keyword.value == "model"]
    entry = string_value(second[0]) if second else None
    if entry is None and second and resolve is not None:
        held, _ = resolve(second[0]) or (None, None)
        entry = held if isinstance(held, str) else None
    builder = libraries.hub_builder(repository, entry) if repository is not None and entry is not None else None
    return (builder, None) if builder is not None else ("torch.hub.load", repository)


# The keywords a library's model builder takes the checkpoint's name by, and those of dropout rates.
_CHECKPOINT_KEYWORDS = frozenset({"pretrained_model_name_or_path", "model_name"})
_RATE_KEYWORD = re.compile(r"drop", re.I)


def _configured(module, chunk) -> Callable[[cst.BaseExpression], tuple[object, str] | None] | None:
    """How to read what a name of ``chunk``'s file holds, when that file is ``module`` (a value built in
    another workspace file is read there, without its file's options: None)."""
    if module is None or not any(other is chunk for other in module.chunks):
        return None
    configured = module.module_wide("configured-literals", _configured_literals)

    def resolve(expression: cst.BaseExpression) -> tuple[object, str] | None:
        if isinstance(expression, cst.Name):
            return configured.constants.get(expression.value)
        if isinstance(expression, cst.Attribute) and isinstance(expression.value, cst.Name) \
                and expression.value.value in configured.parsed and expression.attr.value not in configured.assigned_attributes:
            return configured.options.get(expression.attr.value)
        return None

    return resolve


class _ConfiguredLiterals:
    """What names of a file hold for certain: ``constants``, module-level names bound once, to a literal, and
    nowhere else; ``options``, the literal default of each command-line option (``--model-name`` read as
    ``args.model_name``) defined once; ``parsed``, the names bound to ``parser.parse_args()``; and
    ``assigned_attributes``, the attribute names the file assigns (``args.model_name = ...`` overrides a default)."""

    def __init__(self) -> None:
        self.constants: dict[str, tuple[object, str]] = {}
        self.options: dict[str, tuple[object, str]] = {}
        self.parsed: set[str] = set()
        self.assigned_attributes: set[str] = set()


def _configured_literals(module) -> _ConfiguredLiterals:
    found = _ConfiguredLiterals()
    bindings: dict[str, int] = {}
    candidates: dict[str, tuple[object, str]] = {}
    options: dict[str, list[tuple[object, str] | None]] = {}
    for chunk in module.chunks:
        bound, attributes, parsed, declared, candidate = _statement_literals(chunk)
        for name in bound:
            bindings[name] = bindings.get(name, 0) + 1
        found.assigned_attributes.update(attributes)
        found.parsed.update(parsed)
        for dest, held in declared:
            options.setdefault(dest, []).append(held)
        if candidate is not None:
            candidates[candidate[0]] = candidate[1]
    found.constants = {name: held for name, held in candidates.items() if bindings.get(name) == 1}
    found.options = {dest: held[0] for dest, held in options.items() if len(held) == 1 and held[0] is not None}
    return found


def _statement_literals(chunk) -> tuple:
    """What one top-level statement tells ``_configured_literals``: the names it binds, the attributes it
    assigns, the names it binds to ``parse_args()``, its options (each with its literal default), and the
    literal a plain ``NAME = literal`` statement binds. Kept with the statement's tree at its first line
    (the options' and the literal's messages name their lines): a key reads again only the statements
    it changed or moved, not the hundred options of a script's ``parse_args``."""
    tree = chunk.module
    if tree is None:
        return (), (), (), (), None
    kept = chunk.memo.get(_STATEMENT_LITERALS)
    if kept is not None and kept[0] == chunk.start_line:
        return kept[1]
    bound: list[str] = []
    attributes: list[str] = []
    parsed: list[str] = []
    declared: list[tuple[str, tuple[object, str] | None]] = []
    # kept per statement: a key reads again the statements it reached, not every tree of the file
    for kind, fact in chunk.facts_by_statement("configured literals", _literal_facts):
        if kind == "bound":
            bound.append(fact)
        elif kind == "attribute":
            attributes.append(fact)
        elif kind == "parsed":
            parsed.append(fact)
        else:
            option = _option(chunk, fact)  # its message names its line: made for this text
            if option is not None:
                declared.append(option)
    candidate = None
    top = tree.body[0] if tree.body else None
    if isinstance(top, cst.SimpleStatementLine) and len(top.body) == 1 and isinstance(top.body[0], cst.Assign):
        assign = top.body[0]
        if len(assign.targets) == 1 and isinstance(assign.targets[0].target, cst.Name):
            held = _plain_literal(assign.value)
            if held is not None:
                name = assign.targets[0].target.value
                candidate = (name, (held, f"`{name}` holds {shortened(chunk.code_for(assign.value), 40)} (line {chunk.line_of(assign)})"))
    literals = (tuple(bound), tuple(attributes), tuple(parsed), tuple(declared), candidate)
    chunk.memo[_STATEMENT_LITERALS] = (chunk.start_line, literals)
    return literals


# The key of ``_statement_literals`` in a statement's per-tree memo.
_STATEMENT_LITERALS = "configured literals of the statement"


def _literal_facts(node: cst.CSTNode) -> list[tuple[str, object]]:
    """What one node tells ``_configured_literals``: the names it binds, the attributes it assigns, the
    names a `parse_args()` result is bound to, and an `add_argument(...)` call."""
    if type(node) not in _LITERAL_FACT_NODES:  # most nodes: one look-up, not a dozen isinstance tests
        return []
    facts: list[tuple[str, object]] = [("bound", target) for target in _bound_names(node)]
    if isinstance(node, (cst.Assign, cst.AugAssign, cst.AnnAssign)):
        targets = [t.target for t in node.targets] if isinstance(node, cst.Assign) else [node.target]
        facts.extend(("attribute", t.attr.value) for t in targets if isinstance(t, cst.Attribute))
        if isinstance(node, cst.Assign) and isinstance(node.value, cst.Call) and isinstance(node.value.func, cst.Attribute) \
                and node.value.func.attr.value == "parse_args":
            facts.extend(("parsed", t.value) for t in targets if isinstance(t, cst.Name))
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value == "add_argument":
        facts.append(("option", node))
    return facts


def _plain_literal(node: cst.BaseExpression | None) -> str | int | float | None:
    """The value of a string or number literal (``"bert-base-uncased"``, ``0.1``); None for anything else."""
    if isinstance(node, cst.SimpleString):
        return string_value(node)
    if isinstance(node, (cst.Integer, cst.Float)):
        try:
            held = literal_value(node)
        except (ValueError, SyntaxError):
            return None
        return held if isinstance(held, (int, float)) else None
    return None


# The node classes ``_bound_names`` reads (LibCST's node classes have no subclasses), and with calls,
# those ``_literal_facts`` reads.
_BINDING_NODES = frozenset({
    cst.Assign, cst.AnnAssign, cst.AugAssign, cst.For, cst.CompFor, cst.NamedExpr, cst.AsName, cst.Param,
    cst.FunctionDef, cst.ClassDef, cst.Global, cst.Nonlocal,
})
_LITERAL_FACT_NODES = _BINDING_NODES | {cst.Call}


def _bound_names(node: cst.CSTNode) -> Iterator[str]:
    """The names a node binds (an assignment's, a loop's, a parameter, a `with ... as`, an import)."""
    targets: list[cst.CSTNode] = []
    if isinstance(node, cst.Assign):
        targets = [target.target for target in node.targets]
    elif isinstance(node, (cst.AnnAssign, cst.AugAssign, cst.For, cst.CompFor, cst.NamedExpr)):
        targets = [node.target]
    elif isinstance(node, cst.AsName):
        targets = [node.name]
    elif isinstance(node, cst.Param):
        targets = [node.name]
    elif isinstance(node, (cst.FunctionDef, cst.ClassDef)):
        targets = [node.name]
    elif isinstance(node, (cst.Global, cst.Nonlocal)):
        targets = [item.name for item in node.names]
    for target in targets:
        if isinstance(target, cst.Name):
            yield target.value
        else:
            yield from (name.value for name in walk(target) if isinstance(name, cst.Name) and not _is_attribute_part(target, name))


def _is_attribute_part(root: cst.CSTNode, name: cst.Name) -> bool:
    """``name`` is read inside a target (``args`` of ``args.x = ...``, ``i`` of ``a[i] = ...``), not bound."""
    return any(
        (isinstance(node, cst.Attribute) and (node.value is name or node.attr is name))
        or (isinstance(node, cst.Subscript) and any(name in set(walk(element)) for element in node.slice))
        for node in walk(root)
    )


def _option(chunk, call: cst.Call) -> tuple[str, tuple[object, str] | None] | None:
    """``add_argument("--model-name", default="bert-base-uncased")``: the attribute it is read by
    (``model_name``) and its literal default with where it is said (None when the default is not a literal)."""
    names = [value for arg in call.args if arg.keyword is None and (value := string_value(arg.value)) is not None]
    dest = next((string_value(arg.value) for arg in call.args if arg.keyword is not None and arg.keyword.value == "dest"), None)
    if not isinstance(dest, str):
        long = next((name for name in names if name.startswith("--")), None)
        plain = next((name for name in names if not name.startswith("-")), None)
        dest = (long[2:] if long else plain or "").replace("-", "_")
    if not dest:
        return None
    default = next((arg.value for arg in call.args if arg.keyword is not None and arg.keyword.value == "default"), None)
    held = _plain_literal(default) if default is not None else None
    if held is None:
        return dest, None
    flag = next((name for name in names if name.startswith("--")), dest)
    return dest, (held, f"`{held}` is the default of `{flag}` (line {chunk.line_of(call)})")
