"""A seed is applied only when it is truthy, so `--seed 0` silently means "not seeded".

`if args.seed: torch.manual_seed(args.seed)`, `Generator().manual_seed(s) if s else None` and
`seed = args.seed or 42` all treat 0 as "no seed given", and so do `if not seed: seed = random_seed()`
and `seed if seed else self.new_seed()` in a helper whose missing seed is None. Zero is a common, valid seed (it is the
default of many sweeps), so the run that was meant to be reproducible is not — or quietly uses
another seed — and two "identical" runs disagree. Nothing warns; the difference shows up weeks
later as an irreproducible result. A value is a seed when it is named as one, when the code hands it (or a
value computed from it) to a seeding call such as `torch.manual_seed` or a generator's `manual_seed`, also
through a helper of the project, or when a falsy one is replaced by a random integer as wide as a seed.

How to fix: test for absence explicitly, `if args.seed is not None:` (and
`args.seed if args.seed is not None else 42` for a default). `args.seed or 0` is fine: it keeps 0.
"""

from __future__ import annotations

import re

import libcst as cst

from trainlint.analysis.libraries import RANDOM_INTEGER_DRAWS, SEEDING_CALLS
from trainlint.analysis.patterns import argument_passed
from trainlint.rules import AssignEvent, Fires, Quiet, Rule, RuleContext, ScopeAnalysis, Severity, dotted, walk


class SeedZeroIgnored(Rule):
    code = "TL403"
    name = "seed-zero-ignored"
    severity = Severity.ERROR

    def check_scope(self, ctx: RuleContext, scope: ScopeAnalysis) -> None:
        # scope by scope, each scope's result kept while the flows it followed are (a key in one method of a
        # 3,700-line class checks that method's tests again, not every method's)
        if not scope.branch_tests:
            return
        seeds = _Seeds(ctx, scope)
        for node in scope.branch_tests:
            self._check_test(ctx, seeds, node)

    def _check_test(self, ctx: RuleContext, seeds: _Seeds, node: cst.CSTNode) -> None:
        if isinstance(node, cst.If) and seeds.holds(node.test) and _seeds_inside(ctx, node.body, node.test):
            self._report(ctx, node.test, "applies the seed only when it is truthy")
        elif isinstance(node, cst.If) and isinstance(node.test, cst.UnaryOperation) and isinstance(node.test.operator, cst.Not):
            replacement = _replacement(node, node.test.expression)
            if replacement is not None and seeds.holds(node.test.expression, replacement):
                self._report_replaced(ctx, node.test, replacement)
        elif isinstance(node, cst.IfExp) and seeds.holds(node.test) and _seeds_inside(ctx, node.body, node.test):
            self._report(ctx, node.test, "builds a seeded generator only when the seed is truthy")
        elif isinstance(node, cst.IfExp) and _same(node.body, node.test) and seeds.holds(node.test, node.orelse):
            if not _is_zero(node.orelse):
                self._report_kept_if_truthy(ctx, node)
        elif isinstance(node, cst.BooleanOperation) and isinstance(node.operator, cst.Or) and seeds.holds(node.left, node.right):
            if not _is_zero(node.right):
                self._report_default(ctx, node)

    def _report(self, ctx: RuleContext, test: cst.BaseExpression, what: str) -> None:
        name = ctx.chunk.code_for(test)
        ctx.report(
            test,
            f"`{name}` is false for seed 0, so this code {what}: `--seed 0` runs unseeded and two runs with the same "
            f"seed differ",
            evidence=[((ctx.chunk, test), f"`{name}` tests truthiness, not presence")],
            help=f"test `{name} is not None`",
            fix=ctx.fix(f"test `{name} is not None`", [ctx.edit_replace(test, f"{name} is not None")], safe=True),
        )

    def _report_replaced(self, ctx: RuleContext, test: cst.UnaryOperation, replacement: cst.BaseExpression) -> None:
        """`if not seed: seed = random_seed()`."""
        name = ctx.chunk.code_for(test.expression)
        ctx.report(
            test,
            f"`{ctx.chunk.code_for(test)}` is true for seed 0 too, so a requested seed 0 is replaced by "
            f"`{ctx.chunk.code_for(replacement)}`: `--seed 0` silently runs with another seed",
            evidence=[
                ((ctx.chunk, test), f"`not {name}` tests truthiness, not presence"),
                ((ctx.chunk, replacement), f"the seed that replaces `{name}`"),
            ],
            help=f"test `{name} is None`",
            fix=ctx.fix(f"test `{name} is None`", [ctx.edit_replace(test, f"{name} is None")], safe=True),
        )

    def _report_kept_if_truthy(self, ctx: RuleContext, node: cst.IfExp) -> None:
        """`seed if seed else self.new_seed()`: the conditional-expression spelling of `seed or ...`."""
        name = ctx.chunk.code_for(node.test)
        default = ctx.chunk.code_for(node.orelse)
        ctx.report(
            node,
            f"`{' '.join(ctx.chunk.code_for(node).split())}` replaces seed 0 with `{default}`: `--seed 0` silently "
            "runs with another seed",
            evidence=[((ctx.chunk, node.test), f"`{name}` tests truthiness, not presence")],
            help=f"test `{name} is not None`",
            fix=ctx.fix(f"test `{name} is not None`", [ctx.edit_replace(node.test, f"{name} is not None")], safe=True),
        )

    def _report_default(self, ctx: RuleContext, node: cst.BooleanOperation) -> None:
        name = ctx.chunk.code_for(node.left)
        default = ctx.chunk.code_for(node.right)
        ctx.report(
            node,
            f"`{ctx.chunk.code_for(node)}` replaces seed 0 with {default}: `--seed 0` silently runs with another seed",
            evidence=[((ctx.chunk, node), f"`or` treats 0 like a missing `{name}`")],
            help=f"write `{name} if {name} is not None else {default}`",
            fix=ctx.fix(
                f"keep seed 0: `{name} if {name} is not None else {default}`",
                [ctx.edit_replace(node, f"{name} if {name} is not None else {default}")], safe=True,
            ),
        )


def _seed_name(test: cst.BaseExpression) -> bool:
    """A bare name or attribute named as a seed: `seed`, `args.seed`, `cfg.random_seed`."""
    name = dotted(test)
    if name is None:
        return False
    last = name.rsplit(".", 1)[-1].lower()
    return last == "seed" or last.endswith("_seed") or last.startswith("seed_")


class _Seeds:
    """What one scope does with seeds: the names and attributes whose value it hands a seeding call as the seed
    (`SEEDING_CALLS`: `torch.manual_seed`, a generator's `manual_seed`, `seed_everything`, ...), directly, through
    values computed from them (`window_seed = int(seed) + offset`), or through a local function that hands the
    parameter it is given to one; a value tested there is a seed whatever it is named."""

    def __init__(self, ctx: RuleContext, scope: ScopeAnalysis) -> None:
        self.ctx, self.scope = ctx, scope
        self._names: frozenset[str] | None = None

    def holds(self, tested: cst.BaseExpression, replacement: cst.BaseExpression | None = None) -> bool:
        """``tested`` is a seed: named as one, handed to a seeding call, or replaced when falsy by a random
        integer as wide as a seed (`seed if seed else self.new_seed()`, where `new_seed` returns one)."""
        name = dotted(tested)
        if name is None:
            return False
        if _seed_name(tested):
            return True
        if self._names is None:
            self._names = _seeded_names(self.ctx, self.scope, _FOLLOWED_CALLS)
        return name in self._names or (replacement is not None and _draws_a_seed(self.ctx, self.scope, replacement, _FOLLOWED_CALLS))


_FOLLOWED_CALLS = 2  # levels of local functions followed from the scope tested
_SEED_WIDTH = 2**16  # a random integer drawn below at least this stands for a seed, not a count or an index


def _seeded_names(ctx: RuleContext, scope: ScopeAnalysis, depth: int) -> frozenset[str]:
    names: set[str] = set()
    for call in scope.calls():
        if call.callee in SEEDING_CALLS or call.method == "manual_seed":
            seed = call.keyword("seed") or next((arg for arg in call.arg_nodes if arg.keyword is None and not arg.star), None)
            if seed is not None:
                names |= _names_read(seed.value)
        elif depth > 0 and call.function is not None and (inner := call.function.analysis(ctx.summary)) is not None:
            for parameter in _seeded_names(ctx, inner, depth - 1) & set(inner.params):
                passed = argument_passed(call, call.function, parameter)
                if passed is not None:
                    names |= _names_read(passed.value)
    while True:  # back through the values computed from others: `window_seed = int(seed) + int(start)`
        grown = {
            read for event in scope.events
            if isinstance(event, AssignEvent) and event.value_node is not None and names.intersection(event.targets)
            for read in _names_read(event.value_node)
        } - names
        if not grown:
            return frozenset(names)
        names |= grown


def _names_read(expression: cst.BaseExpression) -> set[str]:
    """The names and attributes whose value ``expression`` passes on as a seed: itself (`args.seed`, not `args`),
    the operands of arithmetic and of `or` / a conditional expression, and what `int()` or `abs()` converts
    (`int(seed) + rank`); nothing a call or a subscript computes from them."""
    if isinstance(expression, (cst.Name, cst.Attribute)):
        name = dotted(expression)
        return {name} if name is not None else set()
    if isinstance(expression, (cst.BinaryOperation, cst.BooleanOperation)):
        return _names_read(expression.left) | _names_read(expression.right)
    if isinstance(expression, cst.UnaryOperation):
        return _names_read(expression.expression)
    if isinstance(expression, cst.IfExp):
        return _names_read(expression.body) | _names_read(expression.orelse)
    if isinstance(expression, cst.Call) and dotted(expression.func) in {"int", "abs"} and expression.args:
        return _names_read(expression.args[0].value)
    return set()


def _draws_a_seed(ctx: RuleContext, scope: ScopeAnalysis, expression: cst.BaseExpression, depth: int) -> bool:
    """``expression`` is a random integer drawn from a range at least ``_SEED_WIDTH`` wide, or the call of a
    local function that returns one (`self.new_seed()`)."""
    if not isinstance(expression, cst.Call):
        return False
    call = next((call for call in scope.calls() if call.node is expression), None)
    if call is None:
        return False
    if call.callee in RANDOM_INTEGER_DRAWS:
        bounds = [arg.value for arg in call.arg_nodes if arg.keyword is None and not arg.star]
        return bool(bounds) and (_integer(bounds[-1]) or 0) >= _SEED_WIDTH
    function = call.function
    inner = function.analysis(ctx.summary) if depth > 0 and function is not None else None
    return function is not None and inner is not None and any(
        isinstance(node, cst.Return) and node.value is not None and _draws_a_seed(ctx, inner, node.value, depth - 1)
        for node in walk(function.node)
    )


def _integer(node: cst.BaseExpression) -> int | None:
    """The value of an integer literal or of arithmetic on them (`2**32 - 1`), or None."""
    if isinstance(node, cst.Integer):
        return int(node.value, 0)
    if isinstance(node, cst.BinaryOperation):
        left, right = _integer(node.left), _integer(node.right)
        if left is None or right is None:
            return None
        operations = {cst.Add: int.__add__, cst.Subtract: int.__sub__, cst.Multiply: int.__mul__}
        if isinstance(node.operator, cst.Power):
            return left**right if 0 <= right <= 64 else None
        operation = operations.get(type(node.operator))
        return operation(left, right) if operation is not None else None
    return None


def _replacement(statement: cst.If, seed: cst.BaseExpression) -> cst.BaseExpression | None:
    """What the body of `if not seed:` assigns to the seed itself (`seed = random_seed()`), unless it
    is 0, which keeps seed 0 as it was."""
    if not isinstance(statement.body, cst.IndentedBlock):
        return None
    for line in statement.body.body:
        if not isinstance(line, cst.SimpleStatementLine):
            continue
        for small in line.body:
            if isinstance(small, cst.Assign) and any(_same(target.target, seed) for target in small.targets):
                return None if _is_zero(small.value) else small.value
    return None


def _same(one: cst.BaseExpression, other: cst.BaseExpression) -> bool:
    name = dotted(one)
    return name is not None and name == dotted(other)


def _assigned_times(node: cst.CSTNode, text: str) -> int:
    """How many statements inside ``node`` bind ``text`` itself (`self._reset_seed = False`): places where it
    is written, which use no value it holds."""
    count = 0
    for inner in walk(node):
        if isinstance(inner, cst.Assign):
            count += sum(dotted(target.target) == text for target in inner.targets)
        elif isinstance(inner, cst.AnnAssign | cst.AugAssign) and dotted(inner.target) == text:
            count += 1
    return count


def _is_zero(node: cst.BaseExpression) -> bool:
    """The literal 0: what it puts in for a falsy seed is seed 0 itself (or 0 for a missing one)."""
    return isinstance(node, cst.Integer) and int(node.value, 0) == 0


def _seeds_inside(ctx: RuleContext, node: cst.CSTNode, tested: cst.BaseExpression) -> bool:
    """``node`` seeds something and uses the tested value (`if args.seed: manual_seed(args.seed)`, or
    `tile_seed = seed + offset; manual_seed(tile_seed)`); `if self.set_seed: set_rng_seed(hash(name))`
    tests a flag it never uses, and seed 0 is not at stake."""
    text = ctx.chunk.code_for(tested)
    name = re.compile(rf"(?<![\w.]){re.escape(text)}(?!\w)")
    if len(name.findall(ctx.chunk.code_for(node))) <= _assigned_times(node, text):
        return False  # not read there, or only set: `self._reset_seed = False` clears a flag, it applies no seed
    for inner in walk(node):
        if isinstance(inner, cst.Call):
            func = inner.func
            called = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else ""
            if "seed" in called.lower():
                return True
    return False


SeedZeroIgnored.MUST_FIRE = (
    Fires(  # what `or` defaults is handed to a helper of another file that seeds a generator with it
        """
        from rng import make_generator


        class Sampler:
            def __init__(self, pipe, base=None):
                self.pipe = pipe
                self.generator = make_generator(base or 1234, "cuda")
        """,
        fixed="""
        from rng import make_generator


        class Sampler:
            def __init__(self, pipe, base=None):
                self.pipe = pipe
                self.generator = make_generator(base if base is not None else 1234, "cuda")
        """,
        files={"rng.py": """
            import torch


            def make_generator(value, device):
                return torch.Generator(device=device).manual_seed(value)
            """},
    ),
    Fires(  # a falsy value is replaced by a random integer as wide as a seed, drawn by a method of the class
        """
        import random


        class Renderer:
            def __init__(self, backend):
                self.backend = backend

            def _draw(self):
                return random.randint(0, 2**31 - 1)

            def render(self, scene, value=None):
                value = value if value else self._draw()
                return self.backend.render(scene, value), value
        """,
        fixed="""
        import random


        class Renderer:
            def __init__(self, backend):
                self.backend = backend

            def _draw(self):
                return random.randint(0, 2**31 - 1)

            def render(self, scene, value=None):
                value = value if value is not None else self._draw()
                return self.backend.render(scene, value), value
        """,
    ),
    Fires(  # a helper taking `seed: Optional[int]` draws a new seed when given 0
        """
        import random
        from typing import Optional

        import torch


        def random_seed() -> int:
            return random.randint(0, 2**32 - 1)


        class Sampler:
            def __init__(self, pipe):
                self.pipe = pipe

            def sample(self, prompt, seed: Optional[int] = None):
                if not seed:
                    seed = random_seed()
                generator = torch.Generator("cuda").manual_seed(seed)
                return self.pipe(prompt, generator=generator), seed
        """,
        fixed="""
        import random
        from typing import Optional

        import torch


        def random_seed() -> int:
            return random.randint(0, 2**32 - 1)


        class Sampler:
            def __init__(self, pipe):
                self.pipe = pipe

            def sample(self, prompt, seed: Optional[int] = None):
                if seed is None:
                    seed = random_seed()
                generator = torch.Generator("cuda").manual_seed(seed)
                return self.pipe(prompt, generator=generator), seed
        """,
        at="if not seed:",
    ),
    Fires(  # the conditional-expression spelling of `seed or self.new_seed()`
        """
        import random

        class Generator:
            def new_seed(self):
                return random.randrange(0, 4294967295)

            def generate(self, prompt, seed=None, iterations=1):
                seed = seed if seed else self.new_seed()
                for _ in range(iterations):
                    yield self.make_image(prompt, seed)
                    seed = self.new_seed()
        """,
        fixed="""
        import random

        class Generator:
            def new_seed(self):
                return random.randrange(0, 4294967295)

            def generate(self, prompt, seed=None, iterations=1):
                seed = seed if seed is not None else self.new_seed()
                for _ in range(iterations):
                    yield self.make_image(prompt, seed)
                    seed = self.new_seed()
        """,
    ),
    Fires(  # the seed is applied through a value derived from it
        """
        import torch

        def window_generator(seed, window_start, device, generator=None):
            if seed:
                window_seed = int(seed) + int(window_start)
                return torch.Generator(device=device).manual_seed(window_seed)
            return generator
        """,
        fixed="""
        import torch

        def window_generator(seed, window_start, device, generator=None):
            if seed is not None:
                window_seed = int(seed) + int(window_start)
                return torch.Generator(device=device).manual_seed(window_seed)
            return generator
        """,
    ),
    Fires(
        """
        import torch

        if args.seed:
            torch.manual_seed(args.seed)
        """,
        fixed="""
        import torch

        if args.seed is not None:
            torch.manual_seed(args.seed)
        """,
    ),
    Fires(
        """
        import torch

        generator = torch.Generator(device="cuda").manual_seed(seed) if seed else None
        """,
        fixed="""
        import torch

        generator = torch.Generator(device="cuda").manual_seed(seed) if seed is not None else None
        """,
    ),
    Fires(
        """
        from transformers import set_seed

        set_seed(args.seed or 42)
        """,
        fixed="""
        from transformers import set_seed

        set_seed(args.seed if args.seed is not None else 42)
        """,
    ),
    Fires(
        """
        import random
        import numpy as np
        import torch

        def setup(cfg):
            if cfg.random_seed:
                random.seed(cfg.random_seed)
                np.random.seed(cfg.random_seed)
                torch.manual_seed(cfg.random_seed)
        """,
        fixed="""
        import random
        import numpy as np
        import torch

        def setup(cfg):
            if cfg.random_seed is not None:
                random.seed(cfg.random_seed)
                np.random.seed(cfg.random_seed)
                torch.manual_seed(cfg.random_seed)
        """
    ),
    Fires(
        """
        import lightning as L

        def main(seed=0):
            seed = seed or 1234
            L.seed_everything(seed)
        """,
        fixed="""
        import lightning as L

        def main(seed=0):
            seed = seed if seed is not None else 1234
            L.seed_everything(seed)
        """
    ),
    Fires(
        """
        import torch

        class Trainer:
            def __init__(self, seed):
                if seed:
                    self.generator = torch.Generator().manual_seed(seed)
                elif self.deterministic:
                    torch.manual_seed(0)
        """,
        fixed="""
        import torch

        class Trainer:
            def __init__(self, seed):
                if seed is not None:
                    self.generator = torch.Generator().manual_seed(seed)
                elif self.deterministic:
                    torch.manual_seed(0)
        """
    ),
)

SeedZeroIgnored.MUST_NOT_FIRE = (
    Quiet(  # a count and a small random choice defaulted by truthiness; the generator's seed is a constant
        """
        import random

        import torch


        class Augment:
            def __init__(self, copies=None, jitter=None):
                self.copies = copies or 4
                self.jitter = jitter if jitter else random.randint(1, 8)
                self.generator = torch.Generator().manual_seed(1234)

            def __call__(self, x):
                noise = torch.randn(self.copies, *x.shape, generator=self.generator)
                return x + self.jitter * noise
        """
    ),
    Quiet(  # 0 for a missing seed: seed 0 stays 0
        """
        import torch

        def make_generator(device, seed=None):
            seed = seed or 0
            return torch.Generator(device=device).manual_seed(seed)


        def main(args):
            if not args.seed:
                args.seed = 0
            torch.manual_seed(args.seed)
        """
    ),
    Quiet(  # a missing seed is drawn at random, tested with `is None`
        """
        import random
        from typing import Optional

        import torch


        def generate(pipe, prompt, seed: Optional[int] = None):
            if seed is None:
                seed = random.randint(0, 2**32 - 1)
            seed = seed if seed is not None else random.randint(0, 2**32 - 1)
            return pipe(prompt, generator=torch.Generator("cuda").manual_seed(seed)), seed
        """
    ),
    Quiet(  # `_reset_seed` is a flag the loader clears once it has seeded; the seed itself is tested with `is not None`
        """
        class Loader:
            def __init__(self, pipe):
                self.pipe = pipe
                self._seed = None
                self._reset_seed: bool = True
                self._generator = SeedGenerator()

            def seed(self, seed: int) -> None:
                self._seed = seed
                self._reset_seed = True

            def __iter__(self):
                if self._seed is not None:
                    if self._reset_seed:
                        self._generator.seed(self._seed)
                        self._reset_seed = False
                else:
                    self._generator.seed()
                return iter(self.pipe)
        """
    ),
    Quiet(  # `set_seed` is a flag; the seed itself is computed, and 0 is never in question
        """
        import hashlib

        class RepeatedSampler:
            def __init__(self, test_fn, set_seed=True):
                self.test_fn = test_fn
                self.set_seed = set_seed

            def __next__(self):
                if self.set_seed:
                    seed = int.from_bytes(hashlib.sha256(self.test_fn.__qualname__.encode()).digest()[:4], "little")
                    set_rng_seed(seed)
                return self.test_fn()
        """
    ),
    Quiet(
        """
        import torch

        if args.seed is not None:
            torch.manual_seed(args.seed)
        """
    ),
    Quiet(
        """
        import torch

        generator = torch.Generator().manual_seed(seed) if seed is not None else None
        """
    ),
    Quiet(
        """
        import torch

        if args.seed >= 0:
            torch.manual_seed(args.seed)
        """
    ),
    Quiet(
        """
        import torch

        if args.deterministic:
            torch.use_deterministic_algorithms(True)
        """
    ),
    Quiet(
        """
        seed = args.seed if args.seed is not None else 42
        """
    ),
    Quiet(
        """
        import torch

        if args.seed:
            print("seeding with", args.seed)
        torch.manual_seed(args.seed)
        """
    ),
    Quiet(
        """
        workers = args.workers or 4
        """
    ),
    Quiet(
        """
        import torch

        if use_seedable_sampler:
            sampler.set_seed(42)
        """
    ),
)
