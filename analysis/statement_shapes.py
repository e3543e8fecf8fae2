"""What a statement's syntax says, for the scope walk (``flow.py``) to read without re-walking it:
running totals (``total = total + x``), assignment targets, division, ``isinstance`` checks for a
Python number, and which names a statement calls a role method on (``NAME.zero_grad(``)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import libcst as cst

from .names import dotted
from .parsing import common_prefix, common_suffix

if TYPE_CHECKING:
    from .parsing import ParsedChunk


# `.zero_grad(` and the like after a NAME, which tells a parameter's role (``_bind_parameters``). The
# NAME is read backwards from the dot: a pattern starting with `\w+` tried every position of the text
# (14 ms on DeepSpeed's 3,900-line engine.py, on every key typed in its class; now 0.2 ms).
_ROLE_CALL = re.compile(r"\.(zero_grad|step|parameters|named_parameters|train|eval)\(")
_WORD = re.compile(r"\w+")


def names_calling(chunk: ParsedChunk) -> dict[str, set[str]]:
    """For each method ``_bind_parameters`` asks about, every NAME for which the statement's text holds
    ``NAME.method(``: each end of the word before an occurrence. Read once per text, not once per
    parameter of every method (a 3,300-line class has hundreds)."""
    text = chunk.tree_text()  # the analysed code: a broken line, blanked in the tree, is not read
    kept = chunk.memo.get("names calling")
    if kept is not None and kept[0] is text:  # a broken line's new text may keep the tree
        return kept[1]
    calling = names_calling_in(text)
    chunk.memo["names calling"] = (text, calling)
    return calling


def same_names_calling(old: ParsedChunk, new: ParsedChunk) -> bool:
    """Whether ``names_calling`` is the same for a statement after an edit (``new``) as before it
    (``old``). Read from the lines the edit changed: every line outside them is the same text, and a
    line's names are its own, so when those lines hold the same names before and after, ``new`` is
    given ``old``'s answer without reading its whole text (a 3,700-line class, 0.6 ms of a key)."""
    before = names_calling(old)
    old_text, new_text = old.tree_text(), new.tree_text()
    start = common_prefix(old_text, new_text)
    suffix = common_suffix(old_text, new_text, min(len(old_text), len(new_text)) - start)
    first = old_text.rfind("\n", 0, start) + 1  # the texts agree up to start
    if names_calling_in(old_text[first:_line_end(old_text, len(old_text) - suffix)]) == names_calling_in(
        new_text[first:_line_end(new_text, len(new_text) - suffix)],
    ):
        new.memo["names calling"] = (new_text, before)
        return True
    return before == names_calling(new)


def _line_end(text: str, offset: int) -> int:
    """Where the line holding ``offset`` ends."""
    end = text.find("\n", offset)
    return len(text) if end < 0 else end


def names_calling_in(text: str) -> dict[str, set[str]]:
    """``_names_calling`` of a text."""
    calling: dict[str, set[str]] = {}
    for match in _ROLE_CALL.finditer(text):
        end = start = match.start()
        while start and (text[start - 1].isalnum() or text[start - 1] == "_"):  # what `\w` matches
            start -= 1
        word = text[start:end]
        if word:
            calling.setdefault(match.group(1), set()).update(word[cut:] for cut in range(len(word)))
    return calling


def calls_method(calling: dict[str, set[str]], text: str, name: str, method: str) -> bool:
    """Whether ``text`` holds ``name.method(``, from ``names_calling_in(text)`` when ``name`` is a word."""
    if _WORD.fullmatch(name) is None:
        return f"{name}.{method}(" in text
    return name in calling.get(method, ())


def self_accumulation(target: cst.BaseExpression, value: cst.BaseExpression) -> cst.BaseExpression | None:
    """For ``total = total + x`` (either order) and running averages such as ``avg = 0.98 * avg + 0.02 * x``,
    the ``x`` being accumulated."""
    if not isinstance(target, cst.Name) or not isinstance(value, cst.BinaryOperation):
        return None
    if not isinstance(value.operator, cst.Add):
        return None
    if scaled_name(value.left, target.value):
        return value.right
    if scaled_name(value.right, target.value):
        return value.left
    return None


def accumulating_parameters(function: cst.FunctionDef) -> tuple[str, cst.BaseExpression] | None:
    """(the parameter, the term accumulated into it) for a helper that returns a running total or average
    of one of its parameters (``def ema(avg, x, beta=0.98): return beta * avg + (1 - beta) * x``, also as
    one branch of ``x if avg is None else ...``): ``avg = ema(avg, loss)`` accumulates like ``avg = 0.98 *
    avg + 0.02 * loss``. Only a body of a single ``return`` (docstring aside) is read."""
    body = function.body.body if isinstance(function.body, cst.IndentedBlock) else ()
    statements = [
        statement for statement in body
        if not (isinstance(statement, cst.SimpleStatementLine) and isinstance(statement.body[0], cst.Expr)
                and isinstance(statement.body[0].value, (cst.SimpleString, cst.ConcatenatedString)))
    ]
    if len(statements) != 1 or not isinstance(statements[0], cst.SimpleStatementLine):
        return None
    returned = statements[0].body[0]
    if not isinstance(returned, cst.Return) or returned.value is None:
        return None
    value = returned.value
    branches = (value.body, value.orelse) if isinstance(value, cst.IfExp) else (value,)
    params = [param.name.value for param in (*function.params.posonly_params, *function.params.params)]
    for branch in branches:
        for name in params:
            term = self_accumulation(cst.Name(name), branch)
            if term is not None:
                return name, term
    return None


def scaled_name(expression: cst.BaseExpression, name: str) -> bool:
    """``name``, or ``name`` times (or divided by) something: ``avg``, ``0.98 * avg``, ``avg * decay``."""
    if isinstance(expression, cst.Name):
        return expression.value == name
    if isinstance(expression, cst.BinaryOperation) and isinstance(expression.operator, (cst.Multiply, cst.Divide)):
        return scaled_name(expression.left, name) or (
            isinstance(expression.operator, cst.Multiply) and scaled_name(expression.right, name)
        )
    return False


def target_names(target: cst.BaseExpression) -> tuple[str, ...]:
    if isinstance(target, cst.Name):
        return (target.value,)
    if isinstance(target, (cst.Tuple, cst.List)):
        names: list[str] = []
        for element in target.elements:
            names.extend(target_names(element.value))
        return tuple(names)
    return ()


def method_name(call: cst.Call) -> str | None:
    return call.func.attr.value if isinstance(call.func, cst.Attribute) else None


def mentions_division(expression: cst.BaseExpression) -> bool:
    return isinstance(expression, cst.BinaryOperation) and isinstance(expression.operator, cst.Divide)


_PYTHON_NUMBERS = frozenset({"float", "int", "bool", "numbers.Number", "numbers.Real"})


def checked_to_be_a_number(test: cst.BaseExpression, body: cst.BaseExpression) -> bool:
    """``isinstance(x, float)`` (or a tuple of Python number types) as the test and ``x`` as the value."""
    if not (isinstance(test, cst.Call) and dotted(test.func) == "isinstance" and len(test.args) == 2):
        return False
    subject, kinds = test.args[0].value, test.args[1].value
    names = [element.value for element in kinds.elements] if isinstance(kinds, cst.Tuple) else [kinds]
    return (
        dotted(subject) is not None and dotted(subject) == dotted(body)
        and all(dotted(name) in _PYTHON_NUMBERS for name in names)
    )
