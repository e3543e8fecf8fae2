"""A training run seeds some of its random number generators and leaves others unseeded.

torch, numpy and Python's `random` each keep their own generator. Seeding one does nothing for
the others: a script that calls `torch.manual_seed(0)` but shuffles its file list with
`random.shuffle` (or augments with `np.random`) still trains on a different order and different
augmentations on every launch. The draws count wherever the run makes them: in a replay buffer or
a dataset class of another file of the project, in a library that uses numpy's global generator
(`train_test_split` without `random_state`, a Hugging Face dataset's `shuffle()` without `seed`).
Two more ways to look seeded and not be: a seed drawn at random on every launch
(`opt.seed = random.randint(...)` then `torch.manual_seed(opt.seed)`) with no way to pass one, or
drawn by the project's seeding helper when it is handed none (`if seed is None: seed = random_seed()`)
and called with none, and
seeding in a parent process whose `mp.spawn` workers start with fresh generators (they inherit
none), and seeding torch only after the model was built (its initial weights were drawn unseeded). A script that seeds nothing while it imports the project's own helper that seeds torch and
the others (`opennre.fix_seed`), never calling it, is a warning: the project seeds its runs and this
one was left out. A private generator seeded with a literal (`random.Random(12345)` for a fixed split) seeds
nothing else. A dataset's per-sample draws (`__getitem__`, a transform's `__call__`) are seeded through torch
when a DataLoader runs them in workers (`num_workers` given, not 0): PyTorch seeds torch, numpy and `random` in
each worker from a base seed drawn from torch's generator (a library fact). A training entry point that seeds
nothing at all starts every run from different initial weights, dropout masks and batch orders
(a note, on its `__main__` block or, without one, on the script's first statement).

Why it costs money: an unreproducible run cannot be compared with the next one. A 0.3-point
change after a code edit might be the edit or might be the seed, so every comparison needs
several repeated runs, regressions cannot be bisected, and a good result cannot be re-created
for the paper or the model card. The partial case is the worse one: the script looks seeded,
so nobody suspects the noise.

How to fix: seed every library the run draws from, once at start-up — `torch.manual_seed(s)`,
`np.random.seed(s)` and `random.seed(s)`, or one helper that does all three
(`transformers.set_seed`, `lightning.seed_everything`, `accelerate.utils.set_seed`). Seeding
under `if args.seed is not None:` is fine. Scripts driven by the Hugging Face `Trainer` are left
alone, as it seeds all three from `TrainingArguments.seed`, but only where it is built (a library
fact): a draw the script makes before that (a train/eval split with `np.random.permutation` in the
data module it builds first, a `random.shuffle` of the examples) is unseeded, a warning.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import NamedTuple, TypeVar, cast

import libcst as cst

from trainlint.analysis.dependencies import kept_with_scope
from trainlint.analysis.libraries import (
    DRAWS_GLOBAL_NUMPY,
    SEEDS_ITS_WORKERS,
    SEEDS_WHEN_BUILT,
    STARTS_FRESH_PROCESSES,
    call_fact,
)
from trainlint.analysis.patterns import argument_passed
from trainlint.analysis.torchapi import is_parameterless_layer, mentions_rank
from trainlint.rules import (
    AssignEvent,
    CallEvent,
    Fires,
    FunctionInfo,
    ModuleView,
    ParsedChunk,
    Quiet,
    Rule,
    RuleContext,
    ScopeAnalysis,
    Severity,
    Tag,
    calls_in,
    dotted,
    first_written,
    is_dataloader,
    is_optimizer_step,
    is_test_file,
    is_torch_name,
    last_part,
    literal_value,
    ordered_events,
    quoted,
)
from trainlint.rules import walk as _walk

TORCH, NUMPY, RANDOM = "torch", "numpy", "random"
LIBRARIES = (TORCH, NUMPY, RANDOM)
_DISPLAY = {TORCH: "torch", NUMPY: "numpy", RANDOM: "`random`"}
# Helpers that seed torch, numpy and `random` at once (transformers' set_seed, Lightning's seed_everything, ...).
_SEED_ALL_HELPERS = frozenset(
    {"set_seed", "seed_everything", "seed_all", "fix_seed", "setup_seed", "init_seeds", "set_random_seed",
     "set_seeds", "fix_seeds", "seed_torch", "enable_full_determinism", "manual_seed_all_libraries"}
)

# `random` module functions that draw from the global generator.
_RANDOM_DRAWS = frozenset(
    {
        "random", "randint", "randrange", "choice", "choices", "sample", "shuffle", "uniform", "gauss",
        "normalvariate", "lognormvariate", "expovariate", "betavariate", "gammavariate", "paretovariate",
        "weibullvariate", "vonmisesvariate", "triangular", "getrandbits", "randbytes", "binomialvariate",
    }
)
# numpy.random names that do not draw from the global generator.
_NUMPY_NOT_DRAWS = frozenset(
    {"seed", "get_state", "set_state", "SeedSequence", "Generator", "BitGenerator", "PCG64", "PCG64DXSM",
     "MT19937", "Philox", "SFC64"}
)
_GLOBAL_SEEDERS = {"numpy.random.seed": NUMPY, "random.seed": RANDOM}
# Constructors of a private generator: seeded when given a seed, otherwise a draw from OS entropy.
_GENERATOR_CONSTRUCTORS = {"numpy.random.default_rng": NUMPY, "numpy.random.RandomState": NUMPY, "random.Random": RANDOM}
_TORCH_DRAWS = frozenset(
    {"rand", "randn", "randint", "randperm", "rand_like", "randn_like", "randint_like", "normal", "bernoulli",
     "multinomial", "poisson", "dropout", "dropout1d", "dropout2d", "dropout3d", "alpha_dropout",
     "feature_alpha_dropout"}
)
# Methods of a Hugging Face dataset that shuffle (analysis/libraries.py's CALL_FACTS).
_DATASET_DRAWS = frozenset({"shuffle", "train_test_split"})
_TORCH_SAMPLING = frozenset({"RandomSampler", "SubsetRandomSampler", "WeightedRandomSampler", "random_split"})
# In-place tensor methods that fill from torch's generator.
_TORCH_DRAW_METHODS = frozenset(
    {"uniform_", "normal_", "bernoulli_", "random_", "exponential_", "cauchy_", "log_normal_", "geometric_"}
)
_SEED_OR_PORT = re.compile(r"seed|port", re.I)
_NON_RANDOM_INIT = frozenset({"calculate_gain", "zeros_", "ones_", "constant_", "eye_", "dirac_"})
# torch.nn layers built without random weights (no parameters, or none drawn): building one draws nothing.


# What a verdict says: some libraries seeded and others drawn from; nothing seeded at all; the seed
# itself drawn at random on every launch; seeded in a parent whose workers start with fresh generators.
PARTIAL, UNSEEDED, DRAWN_SEED, SPAWNED = "partial", "unseeded", "drawn seed", "spawned"
# torch seeded only after the model drew its initial weights.
LATE = "seeded after init"
# Nothing seeded, while the project's seeding helper, imported here, is never called.
UNCALLED_HELPER = "uncalled helper"
# Seeded through a helper that draws the seed itself when it is given none, called with none.
HELPER_DRAWN = "seed drawn by the helper"
# Seeded only by a trainer that seeds when it is built (the Hugging Face Trainer), after a draw it cannot reach.
BEFORE_TRAINER = "drawn before the trainer seeds"


class _Verdict(NamedTuple):
    kind: str
    severity: Severity
    chunk: ParsedChunk
    node: cst.CSTNode
    seeded: dict[str, list[CallEvent]]
    used: dict[str, list[tuple[CallEvent, str]]]  # library -> (call, what it draws for)
    unseeded: tuple[str, ...]
    cause: CallEvent | None = None  # DRAWN_SEED: the seeding call that applies it; SPAWNED: the spawn call
    # UNCALLED_HELPER: the helper, how this script would call it, what it seeds
    helper: tuple[FunctionInfo, str, tuple[str, ...]] | None = None
    drawn: tuple[AssignEvent, str] | None = None  # HELPER_DRAWN: the helper's draw and the parameter it replaces
    drawn_before: tuple[CallEvent, str, str] | None = None  # BEFORE_TRAINER: the draw, its library and what for


# One verdict per module: the rule runs once per statement but the question is module-wide.
class UnseededRun(Rule):
    code = "TL401"
    name = "unseeded-run"
    severity = Severity.WARNING

    def check(self, ctx: RuleContext) -> None:
        if ctx.module.module_fact("TL401 verdict statement", _verdict_statement) != ctx.chunk.index:
            return
        verdict = ctx.module.module_wide("TL401 verdict", _verdict)
        if verdict is None or verdict.chunk.index != ctx.chunk.index:
            return
        if verdict.kind == PARTIAL:
            self._report_partial(ctx, verdict)
        elif verdict.kind == DRAWN_SEED:
            self._report_drawn_seed(ctx, verdict)
        elif verdict.kind == HELPER_DRAWN:
            self._report_helper_drawn(ctx, verdict)
        elif verdict.kind == SPAWNED:
            self._report_spawned(ctx, verdict)
        elif verdict.kind == LATE:
            self._report_late(ctx, verdict)
        elif verdict.kind == BEFORE_TRAINER:
            self._report_before_trainer(ctx, verdict)
        elif verdict.kind == UNCALLED_HELPER:
            self._report_unseeded(ctx, verdict)
        else:
            self._report_unseeded(ctx, verdict)

    def _report_partial(self, ctx: RuleContext, verdict: _Verdict) -> None:
        seeded_parts = []
        evidence = []
        for library in LIBRARIES:
            if verdict.seeded[library]:
                first = first_written(verdict.seeded[library])
                seeded_parts.append(f"{_DISPLAY[library]} (`{quoted(first.chunk, first.node)}`, line {_line(first)})")
                evidence.append(((first.chunk, first.node), f"seeds {_DISPLAY[library]}"))
        draws = []
        for library in verdict.unseeded:
            call, purpose = _first_use(verdict.used[library])
            draws.append(f"`{quoted(call.chunk, call.node)}` draws from {_DISPLAY[library]} on line {_line(call)} ({purpose})")
            evidence.append(((call.chunk, call.node), f"draws from {_DISPLAY[library]}, which nothing seeds"))
        unseeded = _join([_DISPLAY[library] for library in verdict.unseeded], "or")
        message = (
            f"randomness is only partly seeded: {_join(seeded_parts)} "
            f"{'is' if len(seeded_parts) == 1 else 'are'} seeded, but nothing seeds {unseeded}: "
            f"{_join(draws)}; every launch still differs, so runs with the same seed cannot be "
            "reproduced or compared"
        )
        if verdict.severity is Severity.NOTE:
            message += (
                " (unless the loader's `**kwargs` give it `num_workers`: PyTorch seeds each worker's torch, numpy and "
                "`random` from torch's generator, and these draws are the dataset's per-sample code)"
            )
        ctx.report(
            verdict.node, message, evidence=evidence, severity=verdict.severity,
            help=f"seed {_join([_DISPLAY[library] for library in verdict.unseeded])} too, or use one helper that seeds all three "
            "(`transformers.set_seed`, `lightning.seed_everything`)",
        )

    def _report_drawn_seed(self, ctx: RuleContext, verdict: _Verdict) -> None:
        assert verdict.cause is not None, "a DRAWN_SEED verdict names the seeding call"
        draw, seeding = verdict.node, verdict.cause
        statement = " ".join(verdict.chunk.code_for(draw).split())
        message = (
            f"`{statement}` draws a new seed on every launch, and `{quoted(seeding.chunk, seeding.node)}` (line "
            f"{_line(seeding)}) seeds the run with it: nothing lets a run choose its seed, so every launch differs "
            "and none can be repeated without editing the code"
        )
        ctx.report(
            draw, message, severity=Severity.WARNING,
            evidence=[((verdict.chunk, draw), "a random seed, drawn unconditionally"), ((seeding.chunk, seeding.node), "the run is seeded with it")],
            help="take the seed from the command line or the configuration, and draw one only when none is given "
            "(`if args.seed is None:`), logging it",
        )

    def _report_helper_drawn(self, ctx: RuleContext, verdict: _Verdict) -> None:
        assert verdict.cause is not None and verdict.drawn is not None, "a HELPER_DRAWN verdict names the call and the draw"
        seeding, (draw, parameter) = verdict.cause, verdict.drawn
        message = (
            f"`{quoted(seeding.chunk, seeding.node)}` passes no `{parameter}`, and the helper then seeds the run with "
            f"one it draws at random (`{' '.join(draw.chunk.code_for(draw.node).split())}`): every launch differs and "
            "none can be repeated without editing the code"
        )
        ctx.report(
            seeding.node, message, severity=Severity.WARNING,
            evidence=[((draw.chunk, draw.node), f"a seed drawn at random when `{parameter}` is missing"),
                      ((seeding.chunk, seeding.node), f"called without `{parameter}`")],
            help=f"pass `{parameter}` from the command line or the configuration (and log the one drawn when none is given)",
        )

    def _report_spawned(self, ctx: RuleContext, verdict: _Verdict) -> None:
        assert verdict.cause is not None, "a SPAWNED verdict names the spawn call"
        spawn = verdict.cause
        seeding = first_written([call for calls in verdict.seeded.values() for call in calls])
        draws, evidence = [], [((spawn.chunk, spawn.node), "starts fresh worker processes")]
        for library in verdict.unseeded:
            call, purpose = _first_use(verdict.used[library])
            draws.append(f"{purpose} (`{quoted(call.chunk, call.node)}`, line {_line(call)}, from {_DISPLAY[library]})")
            evidence.append(((call.chunk, call.node), f"a worker draws from {_DISPLAY[library]}"))
        evidence.append(((seeding.chunk, seeding.node), "seeds the parent process only"))
        message = (
            f"`{quoted(spawn.chunk, spawn.node)}` starts fresh processes, which do not inherit the parent's generators: "
            f"the seeding on line {_line(seeding)} runs in the parent only, so nothing seeds {_join(draws)} in the "
            "workers, and runs with the same seed differ"
        )
        ctx.report(
            spawn.node, message, evidence=evidence, severity=Severity.WARNING,
            help="seed at the start of the function every worker runs (torch, numpy and `random`, from the seed "
            "passed in its arguments)",
        )

    def _report_late(self, ctx: RuleContext, verdict: _Verdict) -> None:
        assert verdict.cause is not None, "a LATE verdict names the seeding call"
        seeding = verdict.cause
        built = " ".join(verdict.chunk.code_for(verdict.node).split())
        message = (
            f"`{built}` draws the model's initial weights before `{quoted(seeding.chunk, seeding.node)}` (line "
            f"{_line(seeding)}) seeds torch: the seed fixes what comes after it, not the initialisation, so every "
            "launch starts from different weights and runs with the same seed differ"
        )
        ctx.report(
            verdict.node, message, severity=Severity.WARNING,
            evidence=[((verdict.chunk, verdict.node), "draws the initial weights, unseeded"), ((seeding.chunk, seeding.node), "torch is seeded only here, later")],
            help="seed before building the model (move the seeding to the start of the run)",
        )

    def _report_before_trainer(self, ctx: RuleContext, verdict: _Verdict) -> None:
        assert verdict.cause is not None and verdict.drawn_before is not None, "a BEFORE_TRAINER verdict names the trainer and the draw"
        trainer, (draw, library, purpose) = verdict.cause, verdict.drawn_before
        drawn = quoted(draw.chunk, draw.node)
        evidence: list = [((draw.chunk, draw.node), f"draws from {_DISPLAY[library]} ({purpose}), before any seed")]
        if verdict.node is not draw.node:
            evidence.append(((verdict.chunk, verdict.node), f"runs `{drawn}` (in `{_file_name(draw)}`)"))
        evidence.append(((trainer.chunk, trainer.node), "seeds torch, numpy and `random` only when it is built, here"))
        message = (
            f"`{drawn}` draws from {_DISPLAY[library]} ({purpose}) before `{quoted(trainer.chunk, trainer.node)}` "
            f"(line {_line(trainer)}) is built, and the Trainer seeds the run only when it is built: nothing seeds "
            f"{_DISPLAY[library]} before this draw, so it differs on every launch (and on every rank of a distributed run)"
        )
        ctx.report(
            verdict.node, message, evidence=evidence, severity=Severity.WARNING,
            help="seed at start-up, before the draw (`transformers.set_seed(training_args.seed)`), or give the draw "
            "its own seeded generator",
        )

    def _report_unseeded(self, ctx: RuleContext, verdict: _Verdict) -> None:
        draws = []
        entry = "the script's entry point" if isinstance(verdict.node, cst.Comparison) else "the script's run starts here"
        evidence = [((verdict.chunk, verdict.node), entry)]
        for library in LIBRARIES:
            if verdict.used[library]:
                call, purpose = _first_use(verdict.used[library])
                draws.append(f"{purpose} (`{quoted(call.chunk, call.node)}`, line {_line(call)}, from {_DISPLAY[library]})")
                evidence.append(((call.chunk, call.node), f"draws from {_DISPLAY[library]}"))
        message = (
            "this training script never seeds torch, numpy or `random`, so nothing fixes "
            f"{_join(draws)}: every launch differs and two runs of the same configuration cannot be compared"
        )
        if verdict.helper is None:
            ctx.report(
                verdict.node, message, evidence=evidence, severity=Severity.NOTE,
                help="seed torch, numpy and `random` at start-up (e.g. `transformers.set_seed(args.seed)` "
                "or `lightning.seed_everything(args.seed)`)",
            )
            return
        helper, spelled, seeded = verdict.helper
        message += (
            f"; the project's `{spelled}`, imported here, seeds {_join([_DISPLAY[library] for library in seeded])}, "
            "but this script never calls it"
        )
        evidence.append(((helper.chunk, helper.node.name), f"seeds {_join([_DISPLAY[library] for library in seeded])}; never called here"))
        ctx.report(
            verdict.node, message, evidence=evidence, severity=Severity.WARNING,
            help=f"call `{spelled}(seed)` at start-up, with a seed the run can be given",
        )


def _verdict_statement(module: ModuleView) -> int | None:
    verdict = module.module_wide("TL401 verdict", _verdict)
    return verdict.chunk.index if verdict is not None else None


def _verdict(module: ModuleView) -> _Verdict | None:
    if is_test_file(module.path):
        return None  # a test suite is not a training run
    if module.uses_hf_trainer:
        return _drawn_before_trainer(module)  # the Trainer seeds all three, from where it is built on
    guard = _main_guard(module)
    scopes = module.all_scopes
    local_training = list(module.backward_calls)
    training = local_training or [call for scope in scopes for call in _per_scope(module, scope, _training_elsewhere)]
    if guard is None and not training:
        return None  # a library: its callers own the seeding
    seeded: dict[str, list[CallEvent]] = {library: [] for library in LIBRARIES}
    used: dict[str, list[tuple[CallEvent, str]]] = {library: [] for library in LIBRARIES}
    parts = [_per_scope(module, scope, _randomness) for scope in scopes]
    workers: list[str] = []

    def in_workers() -> str:  # asked only of a per-sample draw: GIVEN, MAYBE or ""
        if not workers:
            given = {_per_scope(module, scope, _gives_workers) for scope in scopes}
            workers.append(GIVEN if GIVEN in given else MAYBE if MAYBE in given else "")
        return workers[0]

    maybe_in_workers: set[int] = set()  # the per-sample draws a loader given `**kwargs` may run in seeded workers

    def use(library: str, call: CallEvent, purpose: str, per_sample: bool) -> None:
        where = in_workers() if per_sample else ""
        if where == MAYBE:
            maybe_in_workers.add(id(call.node))
        if where != GIVEN:
            used[library].append((call, purpose))

    seed_arguments = frozenset().union(*(part.seed_arguments for part in parts))
    for part in parts:
        for call, libraries in part.seeding:
            for library in libraries:
                seeded[library].append(call)
        for call, (library, purpose) in part.drawing:
            if id(call.node) not in seed_arguments:
                # `generator.manual_seed(random.randint(...))` picks a random seed on purpose: not a use
                use(library, call, purpose, _per_sample(call.scope.function))
    if training and not used[TORCH]:
        # training draws from torch anyway: weight initialisation, dropout. Every backward call (or call of
        # another file's training) is a use; the one written first is picked only if a finding quotes it.
        used[TORCH].extend((call, "weight initialisation and dropout in training") for call in training)
    if not all(seeded.values()):
        reached_seeds: dict[str, CallEvent] = {}
        for scope in scopes:
            for call, libraries, draws in _per_scope(module, scope, _reached_in_other_files):
                for library in libraries:
                    reached_seeds.setdefault(library, call)
                for library, purpose, per_sample in draws:
                    use(library, call, purpose, per_sample)
        for library, call in reached_seeds.items():
            seeded[library].append(call)
    spawns = [spawn for part in parts for spawn in part.spawns]
    spawned = _spawned_unseeded(module, spawns, guard, seeded) if any(seeded.values()) else None
    if spawned is not None:
        spawn, worker_used, unseeded = spawned
        return _Verdict(SPAWNED, Severity.WARNING, spawn.chunk, spawn.node, seeded, worker_used, unseeded, cause=spawn)
    helper_drawn = _seed_drawn_by_helper(module, seeded)
    if helper_drawn is not None:
        seeding, draw, parameter = helper_drawn
        return _Verdict(HELPER_DRAWN, Severity.WARNING, seeding.chunk, seeding.node, seeded, used, (), cause=seeding, drawn=(draw, parameter))
    drawn_seed = _drawn_seed([drawn for part in parts for drawn in part.seeds_drawn], seeded)
    if drawn_seed is not None:
        draw, seeding = drawn_seed
        return _Verdict(DRAWN_SEED, Severity.WARNING, draw.chunk, cast(cst.CSTNode, draw.statement), seeded, used, (), cause=seeding)
    if any(seeded.values()):
        unseeded = tuple(library for library in LIBRARIES if used[library] and not seeded[library])
        if not unseeded:
            late = _seeded_after_init(seeded[TORCH], used[TORCH])
            if late is None:
                return None
            built, seeding = late
            return _Verdict(LATE, Severity.WARNING, built.chunk, built.node, seeded, used, (), cause=seeding)
        first, _ = _first_use([use for library in unseeded for use in used[library]])
        # every unseeded draw in per-sample code that may run in seeded workers: the evidence is partial, a note
        maybe = all(id(call.node) in maybe_in_workers for library in unseeded for call, _ in used[library])
        return _Verdict(PARTIAL, Severity.NOTE if maybe else Severity.WARNING, first.chunk, first.node, seeded, used, unseeded)
    module_level_training = [call for call in training if call.scope.function is None]
    if not training or (guard is None and not module_level_training):
        return None
    if guard is not None:
        chunk, node = guard
    else:
        chunk, node = _run_start(module, module_level_training)
    helper = _uncalled_seed_helper(module)
    if helper is not None:
        return _Verdict(UNCALLED_HELPER, Severity.WARNING, chunk, node, seeded, used, (), helper=helper)
    return _Verdict(UNSEEDED, Severity.NOTE, chunk, node, seeded, used, ())


def _drawn_before_trainer(module: ModuleView) -> _Verdict | None:
    """A draw from a global generator that runs before a trainer that seeds when it is built (the Hugging Face
    `Trainer`: a library fact) is built, in the order the scope that builds it runs its calls (into the functions it
    calls, `make_data_module(...)` splitting the data with `np.random.permutation`), with nothing seeding that library
    first, in this file or in what the scope ran before. Only draws made at the call count (a sampling, a shuffle, a
    library's split): a loader's shuffling or a transform's draws happen later, under the Trainer's seed."""
    seeded_in_file = {
        library for scope in module.all_scopes for _, libraries in _per_scope(module, scope, _randomness).seeding for library in libraries
    }
    for scope in module.all_scopes:
        trainers = [call for call in scope.calls() if _seeds_when_built(module, call)]
        if not trainers:
            continue
        seeded = set(seeded_in_file)
        # a script's module level runs its earlier statements first
        earlier = [other for other in module.all_scopes if other.function is None and other.chunk.index < scope.chunk.index] if scope.function is None else []
        for event, chain in (item for ran in (*earlier, scope) for item in ordered_events(ran, None)):
            if not isinstance(event, CallEvent):
                continue
            if event is trainers[0]:
                break
            seeded.update(_seeds(event, module))
            drawn = _draw(event)
            if drawn is None or drawn[0] in seeded or not _drawn_at_the_call(event, *drawn) or _draws_a_seed_or_port(event):
                continue
            library, purpose = drawn
            here = event if any(chunk is event.chunk for chunk in module.chunks) else (chain[0] if chain else None)
            if here is None:
                continue
            return _Verdict(
                BEFORE_TRAINER, Severity.WARNING, here.chunk, here.node, {}, {}, (library,), cause=trainers[0],
                drawn_before=(event, library, purpose),
            )
    return None


def _seeds_when_built(module: ModuleView, call: CallEvent, depth: int = 3) -> bool:
    """``call`` builds a trainer that seeds the run in its constructor (``SEEDS_WHEN_BUILT``), or a workspace class
    built on one (a project's ``class CustomTrainer(Trainer)`` whose ``__init__`` reaches the base's)."""
    callee = call.callee
    if callee is None:
        return False
    if call_fact(callee, SEEDS_WHEN_BUILT) is not None:
        return True
    built = module.summary.local_class(callee)
    for _ in range(depth):
        if built is None:
            return False
        home = built.home or module.summary
        bases = [home.canonical(base) for base in built.bases]
        if any(call_fact(base, SEEDS_WHEN_BUILT) is not None for base in bases):
            return True
        built = next((found for base in bases if (found := home.local_class(base)) is not None), None)
    return False


def _drawn_at_the_call(call: CallEvent, library: str, purpose: str) -> bool:
    """A draw made when the call runs, not later (a `DataLoader(shuffle=True)` draws its order when iterated, a
    `RandomCrop` when applied, a `RandomSampler` when a loader asks it) nor a private generator of its own."""
    if library == TORCH:
        return last_part(call.callee or "") in _TORCH_DRAWS | {"random_split"} and "dropout" not in purpose
    return purpose != "unseeded generator"


# Calls that replace a model's weights with stored ones.
_LOADS_WEIGHTS = frozenset({"load_state_dict", "load_checkpoint", "from_pretrained", "load"})


def _seeded_after_init(seeds: list[CallEvent], uses: list[tuple[CallEvent, str]]) -> tuple[CallEvent, CallEvent] | None:
    """(model built, seeding) when torch is seeded in one function only (or only at module level), outside
    loops, and a model is built there earlier, unconditionally and outside loops, than the first seeding: its initial
    weights are drawn before any seed applies. Quiet when that function loads weights (a checkpoint's
    replace the drawn ones)."""
    # a seeding inside a loop (`torch.manual_seed(step)`, the same inputs on every rank) is not the run's seed
    if not seeds or len({id(seed.scope.function) for seed in seeds}) != 1 or any(seed.context.loops for seed in seeds):
        return None
    first = min(seeds, key=_position)
    if any(isinstance(event, CallEvent) and event.method in _LOADS_WEIGHTS for event in first.scope.events):
        return None  # the initial weights are overwritten by a checkpoint's: their draw does not matter
    built = [
        call for call, purpose in uses
        if purpose == "weight initialisation" and call.scope.function is first.scope.function and call.scope.summary is first.scope.summary
        and not call.context.loops and not call.context.conditions and _position(call) < _position(first)
    ]
    return (min(built, key=_position), first) if built else None


def _position(call: CallEvent) -> tuple[int, int]:
    """Where a call runs in its file: its statement, then its place in the statement's flow."""
    return call.chunk.index, call.scope.events.index(call)


def _uncalled_seed_helper(module: ModuleView) -> tuple[FunctionInfo, str, tuple[str, ...]] | None:
    """A function of another workspace file that this script imports (by name, or through its module:
    `import opennre` reaches `opennre/__init__.py`'s `fix_seed`) which seeds torch and another library,
    while this script never names it: the project's own way of seeding its runs, left out here. A
    worker's re-seeding from `torch.initial_seed()` seeds nothing of the run and does not count."""
    summary, workspace = module.summary, module.summary.workspace
    if workspace is None:
        return None
    for name, target in summary.imports.items():
        candidates: list[FunctionInfo] = []
        function = summary.imported_function(name)
        if function is not None and summary.defined_elsewhere(function):
            candidates.append(function)
        elif (path := workspace.find_module(module.path, target)) is not None:
            imported = workspace.analysis_of(path)
            if imported is not None:
                candidates.extend(info for info in imported.summary.functions.values() if info.owner is None)
        for candidate in candidates:
            seeded = _seeded_by(candidate, module)
            if TORCH in seeded and len(seeded) > 1 and not _named_in(module, candidate.name, imported_as=name):
                if not _seeds_on_import(workspace, candidate, module):
                    return candidate, name if candidate is function else f"{name}.{candidate.name}", seeded
    return None


def _seeds_on_import(workspace, helper: FunctionInfo, module: ModuleView) -> bool:
    """Whether the helper's file seeds anything when it is imported (`fix_seed(0)` at its top level):
    the import itself then seeds the run."""
    home = workspace.analysis_of(helper.home.path) if helper.home is not None else None
    return home is None or any(call.scope.function is None and _seeds(call, module) for call in home.all_calls())


def _seeded_by(function: FunctionInfo, module: ModuleView) -> tuple[str, ...]:
    code = function.chunk.code_for(function.node)
    if "seed" not in code or "initial_seed" in code:
        return ()  # no seeding written in it (its flow is not worth walking), or a worker's re-seeding
    inner = function.analysis(module.summary)
    calls = [call for call in calls_in(inner, None) if not _seeds_per_process(call) and not _private_generator(call)] if inner else []
    seeded = {library for call in calls for library in _seeds(call, module)}
    return tuple(library for library in LIBRARIES if library in seeded)


def _named_in(module: ModuleView, name: str, imported_as: str) -> bool:
    """Whether the script uses ``name`` anywhere but in the import that binds it (a call, a callback
    `worker_init_fn=seed_worker`, a `partial(...)`)."""
    uses = len(re.findall(rf"(?<![\w]){re.escape(name)}(?!\w)", module.text))
    return uses > (1 if name == imported_as else 0)


class _Randomness(NamedTuple):
    """What one scope's calls do with the generators, each list in the order of its calls."""
    seeding: list[tuple[CallEvent, tuple[str, ...]]]  # a call that seeds the run, with the libraries it seeds
    drawing: list[tuple[CallEvent, tuple[str, str]]]  # a draw (not of a seed or a port), with (library, what for)
    seed_arguments: frozenset[int]  # the nodes of every `manual_seed(...)`'s arguments
    seeds_drawn: list[tuple[CallEvent, str]]  # a draw bound whole, unconditionally, to one name of a seed (``_drawn_seed``)
    spawns: list[CallEvent]  # calls that start fresh processes


def _per_scope(module: ModuleView, scope: ScopeAnalysis, part: Callable[[ModuleView, ScopeAnalysis], T]) -> T:
    """One scope's part of the verdict, kept with the scope's flow (``kept_with_scope``) while the flows it
    asked for are the same: a key walks a scope or two again, and the verdict reads the others' parts as
    they were, not every call of the file."""
    return kept_with_scope(scope, (_PARTS, part), lambda: part(module, scope))


_PARTS = "TL401 verdict part"
T = TypeVar("T")


def _randomness(module: ModuleView, scope: ScopeAnalysis) -> _Randomness:
    found = _Randomness([], [], frozenset(
        id(node) for call in scope.calls() if call.method == "manual_seed" for arg in call.arg_nodes for node in _walk(arg.value)
    ), [], [])
    for call in scope.calls():
        if not _seeds_per_process(call):
            seeded = _seeds(call, module)
            if seeded:
                found.seeding.append((call, seeded))
        drawn = _draw(call)
        if drawn is not None and not _draws_a_seed_or_port(call):
            found.drawing.append((call, drawn))
        target = _seed_drawn(call)
        if target is not None:
            found.seeds_drawn.append((call, target))
        if call_fact(call.callee, STARTS_FRESH_PROCESSES) is not None:
            found.spawns.append(call)
    return found


def _training_elsewhere(module: ModuleView, scope: ScopeAnalysis) -> list[CallEvent]:
    """Calls of the scope that train through another workspace file: a function of it that runs a
    backward and steps an optimizer, or a class of it built here whose methods do (a
    `framework.BagRE(...)` whose `train_model` holds the loop). A backward alone times kernels or
    probes gradients (yolov5's `profile`); the script's own `backward` is none of them."""
    found = []
    for call in scope.calls():
        reached = [inner for _, inner in _runs_elsewhere(module, call)]
        if any(_is_backward_call(inner) for inner in reached) and any(is_optimizer_step(inner) for inner in reached):
            found.append(call)
    return found


def _runs_elsewhere(module: ModuleView, call: CallEvent) -> Iterator[tuple[FunctionInfo, CallEvent]]:
    """What ``call`` runs in another workspace file, each call with the function it is in: the calls of
    a function of that file, or of every method of a class of that file that ``call`` builds, and what those
    calls run in turn in the project's files, three calls deep (a dataset class whose `__init__` builds a crop
    class of a third file, whose `__call__` draws from numpy)."""
    seen: set[int] = set()
    frontier = [call]
    for _ in range(3):
        following = []
        for outer in frontier:
            for function in _workspace_functions(module, outer):
                inner = function.analysis(module.summary) if id(function) not in seen else None
                seen.add(id(function))
                for reached in calls_in(inner, None) if inner is not None else ():
                    yield function, reached
                    following.append(reached)
        frontier = following


def _workspace_functions(module: ModuleView, call: CallEvent) -> list[FunctionInfo]:
    summary = module.summary
    if call.function is not None:
        return [call.function] if summary.defined_elsewhere(call.function) else []
    if call.callee is None or "." not in call.callee:
        return []  # a class of this file: its draws and seeds are this file's own calls
    built = summary.local_class(call.callee)
    return list(built.methods.values()) if built is not None and summary.defined_elsewhere(built) else []


def _is_backward_call(call: CallEvent) -> bool:
    return call.method == "backward" or (
        call.method is None and call.callee is not None and last_part(call.callee) == "backward" and is_torch_name(call.callee)
    )


def _reached_in_other_files(
    module: ModuleView, scope: ScopeAnalysis,
) -> list[tuple[CallEvent, tuple[str, ...], list[tuple[str, str, bool]]]]:
    """For each call of the scope that runs code in the script's other files, the libraries what it runs
    there seeds, and its draws there (library, what for, whether a dataset's per-sample code draws it). dinov2's `linear.py` calls `setup_and_build_model(args)`,
    which reaches `fix_random_seeds` three files away; a replay buffer built from `replay_memory.py`
    samples its batches with `random.sample` there."""
    found = []
    for call in scope.calls():
        seeds: dict[str, None] = {}  # in the order they are reached
        draws: list[tuple[str, str, bool]] = []
        for function, reached in _runs_elsewhere(module, call):
            if reached.function is None and not _seeds_per_process(reached) and not _private_generator(reached):
                # a library's own generator (a sampler's `generator.manual_seed(seed)`) is not the run's seeding
                seeds.update(dict.fromkeys(_seeds(reached, module)))
            drawn = _draw(reached)
            if drawn is not None and not _draws_a_seed_or_port(reached):
                where = f"`{function.qualified_name}`, {_file_name(reached)} line {_line(reached)}"
                draws.append((drawn[0], f"{drawn[1]}: `{quoted(reached.chunk, reached.node, 40)}` in {where}", _per_sample(function)))
        if seeds or draws:
            found.append((call, tuple(seeds), draws))
    return found


# The methods a DataLoader calls for each sample: a map-style dataset's item, an iterable one's items, a transform.
_PER_SAMPLE_METHODS = frozenset({"__getitem__", "__getitems__", "__iter__", "__call__"})


def _per_sample(function: FunctionInfo | None) -> bool:
    return function is not None and function.owner is not None and function.name in _PER_SAMPLE_METHODS


# Whether a DataLoader runs its dataset in worker processes: `num_workers` given and not 0; maybe, through `**kwargs`.
GIVEN, MAYBE = "given", "maybe"


def _gives_workers(module: ModuleView, scope: ScopeAnalysis) -> str:
    """GIVEN when the scope builds a DataLoader, here or in the files its calls reach, whose `num_workers` is given
    and is not 0: its dataset's per-sample code runs in workers that PyTorch seeds from torch's generator
    (libraries.SEEDS_ITS_WORKERS), so torch's seed reaches their numpy and `random` draws. MAYBE when a loader's
    keywords come through `**kwargs` (pytorch/examples' siamese network gives `num_workers` on an accelerator
    only); "" otherwise."""
    found = {
        _starts_workers(reached)
        for call in scope.calls() for reached in (call, *(inner for _, inner in _runs_elsewhere(module, call)))
    }
    return GIVEN if GIVEN in found else MAYBE if MAYBE in found else ""


def _starts_workers(call: CallEvent) -> str:
    fact = call_fact(call.callee, SEEDS_ITS_WORKERS)
    if fact is None:
        return ""
    given = next((call.keyword(keyword) for keyword in fact.arguments if call.keyword(keyword) is not None), None)
    if given is not None:
        return "" if isinstance(given.value, cst.Integer) and literal_value(given.value) == 0 else GIVEN
    return MAYBE if any(arg.star == "**" for arg in call.arg_nodes) else ""


def _spawned_unseeded(
    module: ModuleView, spawns: list[CallEvent], guard, seeded: dict[str, list[CallEvent]],
) -> tuple[CallEvent, dict[str, list[tuple[CallEvent, str]]], tuple[str, ...]] | None:
    """``mp.spawn(train, ...)`` (one of ``spawns``, the calls that start fresh processes) where ``train`` trains
    and draws, nothing it runs seeds, and the only seeding runs in the parent (inside a function or the
    `__main__` block; a module-level seeding statement outside it runs again in every spawned worker, which
    imports the module)."""
    guard_test = guard[1] if guard is not None else None
    for spawn in spawns:
        worker = _spawned_function(module, spawn)
        inner = worker.analysis(module.summary) if worker is not None else None
        if inner is None:
            continue
        worker_calls = list(calls_in(inner, None))
        if any(_seeds(call, module) for call in worker_calls) or any(
            call.scope.function is None and not _under(call, guard_test) for calls_ in seeded.values() for call in calls_
        ):
            continue
        backward = next((call for call in worker_calls if _is_backward_call(call)), None)
        if backward is None:
            continue
        worker_used: dict[str, list[tuple[CallEvent, str]]] = {library: [] for library in LIBRARIES}
        for call in worker_calls:
            drawn = _draw(call)
            if drawn is not None and not _draws_a_seed_or_port(call):
                worker_used[drawn[0]].append((call, drawn[1]))
        if not worker_used[TORCH]:
            worker_used[TORCH].append((backward, "weight initialisation and dropout in training"))
        unseeded = tuple(library for library in LIBRARIES if worker_used[library])
        return spawn, worker_used, unseeded
    return None


def _spawned_function(module: ModuleView, spawn: CallEvent) -> FunctionInfo | None:
    """The function of this file that ``mp.spawn(fn, ...)`` runs in its workers."""
    target = next((arg.value for arg in spawn.arg_nodes if arg.keyword is None or arg.keyword.value == "fn"), None)
    return module.summary.functions.get(target.value) if isinstance(target, cst.Name) else None


def _under(call: CallEvent, test: cst.CSTNode | None) -> bool:
    return test is not None and any(condition.test is test for condition in call.context.conditions)


def _drawn_seed(drawn: list[tuple[CallEvent, str]], seeded: dict[str, list[CallEvent]]) -> tuple[CallEvent, CallEvent] | None:
    """``opt.manualSeed = random.randint(1, 10000)`` on every launch (not only when no seed is given), and a
    seeding call in the same function applies it: the run is seeded with a number nobody chose. ``drawn``:
    the draws bound so (``_seed_drawn``), with the name each is bound to."""
    seedings = [call for library_calls in seeded.values() for call in library_calls]
    for call, target in drawn:
        for seeding in seedings:
            if seeding.scope.function is call.scope.function and _line(seeding) > _line(call) and any(
                dotted(arg.value) == target for arg in seeding.arg_nodes
            ):
                return call, seeding
    return None


def _seed_drawn(call: CallEvent) -> str | None:
    """The name a draw is bound to, whole and unconditionally, when it names a seed (`opt.manualSeed = random.randint(...)`)."""
    statement = call.statement
    if (
        _draw(call) is None or call.context.conditions or not isinstance(statement, cst.Assign)
        or statement.value is not call.node or len(statement.targets) != 1
    ):
        return None
    target = dotted(statement.targets[0].target)
    return target if target is not None and "seed" in last_part(target).lower() else None


def _seed_drawn_by_helper(module: ModuleView, seeded: dict[str, list[CallEvent]]) -> tuple[CallEvent, AssignEvent, str] | None:
    """(the call, the draw, the parameter) for a call of this file to a seeding helper of the project whose seed
    parameter defaults to None (or 0) and which, when it is missing (`if not seed:`, `if seed is None:`), binds it
    to a number drawn at random: called without that argument, it seeds every launch with a new seed."""
    for seeding in {id(call): call for calls in seeded.values() for call in calls}.values():
        function = seeding.function
        if function is None or seeding.chunk.origin != module.origin or any(arg.star for arg in seeding.arg_nodes):
            continue
        analysis = function.analysis(module.summary)
        if analysis is None:
            continue
        for parameter in _defaults_to_missing(function.node):
            if argument_passed(seeding, function, parameter) is not None:
                continue
            draw = next((
                event for event in analysis.events
                if isinstance(event, AssignEvent) and event.targets == (parameter,) and _tests(event, parameter)
                and event.value_node is not None and _draws_a_number(module, analysis, event.value_node)
            ), None)
            if draw is not None:
                return seeding, draw, parameter
    return None


def _tests(event: AssignEvent, parameter: str) -> bool:
    """The assignment runs under a condition that reads the parameter (`if not seed:`, `if seed is None:`)."""
    return any(
        condition.test is not None and condition.branch == "if"
        and any(isinstance(node, cst.Name) and node.value == parameter for node in _walk(condition.test))
        for condition in event.context.conditions
    )


def _defaults_to_missing(function: cst.FunctionDef) -> list[str]:
    """The parameters whose default is None or 0."""
    params = function.params
    return [
        param.name.value for param in (*params.params, *params.kwonly_params)
        if param.default is not None and (
            (isinstance(param.default, cst.Name) and param.default.value == "None")
            or (isinstance(param.default, cst.Integer) and param.default.value == "0")
        )
    ]


def _draws_a_number(module: ModuleView, analysis, value: cst.BaseExpression) -> bool:
    """The expression draws from a generator, or calls a function of the project that does (`random_seed()`)."""
    nodes = {id(node) for node in _walk(value)}
    for call in analysis.calls():
        if id(call.node) not in nodes:
            continue
        if _draw(call) is not None:
            return True
        inner = call.function.analysis(module.summary) if call.function is not None else None
        if inner is not None and any(_draw(nested) is not None for nested in calls_in(inner, None)):
            return True
    return False


def _run_start(module: ModuleView, training: list[CallEvent]) -> tuple[ParsedChunk, cst.CSTNode]:
    """Where a script without a `__main__` block starts doing its work: its first module-level statement
    that is not an import, a definition or a docstring. Seeding belongs there, so a note about a run
    that seeds nothing is reported there (the training itself may sit in another file)."""
    for chunk in module.chunks:
        for statement in chunk.body:
            if not _declares_only(statement):
                return chunk, statement
    first = first_written(training)
    return first.chunk, first.node


def _declares_only(statement: cst.CSTNode) -> bool:
    if isinstance(statement, (cst.FunctionDef, cst.ClassDef)):
        return True
    if isinstance(statement, cst.SimpleStatementLine):
        return all(
            isinstance(small, (cst.Import, cst.ImportFrom))
            or (isinstance(small, cst.Expr) and isinstance(small.value, (cst.SimpleString, cst.ConcatenatedString)))
            for small in statement.body
        )
    if isinstance(statement, cst.Try):  # try: import x / except ImportError: ...
        return all(_declares_only(line) for line in statement.body.body)
    return False


def _file_name(call: CallEvent) -> str:
    path = call.scope.summary.path
    return path.replace("\\", "/").rsplit("/", 1)[-1]


def _seeds(call: CallEvent, module: ModuleView) -> tuple[str, ...]:
    """The libraries whose global generator (or a private one) this call seeds."""
    callee = call.callee or ""
    name = call.method or last_part(callee)
    if name == "manual_seed" and call.callee is None and _literal_seed(call):
        return ()  # `torch.Generator().manual_seed(42)`: a private generator for one fixed split, not the run's seed
    if name == "manual_seed" and (call.callee is None or is_torch_name(callee)):  # also a torch.Generator
        return (TORCH,)
    if is_torch_name(callee) and name == "manual_seed_all":
        return (TORCH,)
    if callee in _GLOBAL_SEEDERS and _has_seed_argument(call):  # without one they reseed from the OS
        return (_GLOBAL_SEEDERS[callee],)
    if callee in _GENERATOR_CONSTRUCTORS and _has_seed_argument(call) and not _literal_seed(call):
        return (_GENERATOR_CONSTRUCTORS[callee],)
    if name in _SEED_ALL_HELPERS:
        if call.function is not None:
            inner = call.function.analysis(module.summary)
            seeded = {library for c in calls_in(inner, None) if c.function is None for library in _seeds(c, module)} if inner else set()
            if seeded and module.summary.defined_elsewhere(call.function):
                return tuple(library for library in LIBRARIES if library in seeded)  # a helper in another file
            if seeded:
                return ()  # a helper of this file seeds what its own calls seed, counted where they are
        return LIBRARIES
    return ()


def _draw(call: CallEvent) -> tuple[str, str] | None:
    """(library, what for) when this call draws from a generator that the library's seed controls.

    Kept with the call's flow (``ScopeAnalysis.followed``, which a new walk or a resumed one starts
    empty): the verdict asks it of every call of the file at every key, and a key makes new call
    events only where a flow was walked again."""
    kept = call.scope.followed.get(_DRAWS)
    if kept is None:
        kept = call.scope.followed[_DRAWS] = ({}, ())  # read no other function's flow
    draws = kept[0]
    asked = draws.get(id(call))
    if asked is not None and asked[0] is call:
        return asked[1]
    drawn = _drawn_by(call)
    draws[id(call)] = (call, drawn)
    return drawn


# The key of ``_draw``'s answers in a scope's ``followed``: each call event's, by its id, with the event.
_DRAWS = "TL401 draws"


def _drawn_by(call: CallEvent) -> tuple[str, str] | None:
    callee, method = call.callee, call.method
    if _initialises_weights(call):
        return TORCH, "dropout" if "Dropout" in last_part(call.callee or "") else "weight initialisation"
    if callee is None and method in _DATASET_DRAWS and _from_hf_datasets(call):
        facts = [call_fact(f"datasets.{kind}.{method}", DRAWS_GLOBAL_NUMPY) for kind in ("Dataset", "DatasetDict")]
        keywords = tuple(keyword for fact in facts if fact is not None for keyword in fact.arguments)
        return None if _given_any(call, keywords) else (NUMPY, f"a Hugging Face dataset's `{method}()` without `seed`")
    if callee is None:
        return (TORCH, "random tensor fill") if method in _TORCH_DRAW_METHODS else None
    head = last_part(callee)
    if callee in _GENERATOR_CONSTRUCTORS:
        return None if _has_seed_argument(call) else (_GENERATOR_CONSTRUCTORS[callee], "unseeded generator")
    if callee.startswith("numpy.random."):
        return None if head in _NUMPY_NOT_DRAWS else (NUMPY, "sampling")
    if callee.startswith("random.") and head in _RANDOM_DRAWS:
        return RANDOM, "sampling"
    numpy_draw = call_fact(callee, DRAWS_GLOBAL_NUMPY)
    if numpy_draw is not None:
        if _given_any(call, numpy_draw.arguments) or (numpy_draw.when is not None and not _given_true(call, numpy_draw.when)):
            return None
        return NUMPY, f"`{head}` without `{numpy_draw.arguments[0]}`"
    if is_dataloader(callee):
        shuffle = call.keyword("shuffle")
        if shuffle is not None and isinstance(shuffle.value, cst.Name) and shuffle.value.value == "True":
            return TORCH, "batch order"
        return None
    if callee.startswith("torchvision.transforms") and head.startswith("Random"):
        return TORCH, "augmentation"
    if not is_torch_name(callee):
        return None
    if callee.startswith("torch.nn.init.") and head not in _NON_RANDOM_INIT:
        return TORCH, "weight initialisation"
    if callee.startswith("torch.utils.data") and head in _TORCH_SAMPLING:
        return TORCH, "sampling"
    if head in _TORCH_DRAWS:
        return TORCH, "dropout" if "dropout" in head else "sampling"
    return None


def _given_true(call: CallEvent, keyword: str) -> bool:
    given = call.keyword(keyword)
    return given is not None and isinstance(given.value, cst.Name) and given.value.value == "True"


def _given_any(call: CallEvent, keywords: tuple[str, ...]) -> bool:
    return any(
        (given := call.keyword(keyword)) is not None and not (isinstance(given.value, cst.Name) and given.value.value == "None")
        for keyword in keywords
    )


def _from_hf_datasets(call: CallEvent) -> bool:
    """The receiver of ``ds.shuffle()`` comes from Hugging Face `datasets` (`load_dataset(...)["train"].map(f)`),
    followed back through the function's own bindings, subscripts and chained methods."""
    node: cst.BaseExpression | None = call.node.func.value if isinstance(call.node.func, cst.Attribute) else None
    anchor = call
    for _ in range(8):
        if isinstance(node, cst.Subscript):
            node = node.value
        elif isinstance(node, cst.Call):
            name = dotted(node.func)
            if name is not None and call.scope.canonical(name).startswith("datasets."):
                return True
            node = node.func.value if isinstance(node.func, cst.Attribute) else None
        elif isinstance(node, cst.Name):
            binding = call.scope.last_binding(node.value, before=anchor)
            if binding is None:
                return False
            node, anchor = binding.value_node, binding
        else:
            return False
    return False


def _initialises_weights(call: CallEvent) -> bool:
    """A model built here (not wrapped, not loaded from a checkpoint) draws its initial weights."""
    result = call.result
    if Tag.MODEL not in result.tags or result.tags & {Tag.DDP, Tag.ENGINE} or result.site is None or result.site[1] is not call.node:
        return False
    callee = call.callee or ""
    if (is_parameterless_layer(callee) and "Dropout" not in callee) or callee == "torch.nn.Sequential":
        return False  # its layers are built by calls of their own
    return last_part(call.callee or "") != "from_pretrained" and call.callee != "torch.hub.load"


def _draws_a_seed_or_port(call: CallEvent) -> bool:
    """``args.seed = random.randint(...)`` (then logged and applied), ``MASTER_PORT = ...randint``:
    picking a seed or a free port is not randomness the run's results depend on."""
    statement = call.statement
    if not isinstance(statement, cst.Assign):
        return False
    targets = " ".join(call.chunk.code_for(target.target) for target in statement.targets)
    return bool(_SEED_OR_PORT.search(targets))


def _seeds_per_process(call: CallEvent) -> bool:
    """``g.manual_seed(xr.host_index())``: a generator seeded by the process's rank or host so that
    each shards differently, not for reproducibility (a seed plus the rank names the seed)."""
    if call.method != "manual_seed" or not call.arg_nodes:
        return False
    text = call.chunk.code_for(call.arg_nodes[0].value)
    return "seed" not in text.lower() and (mentions_rank(text) or "host_index" in text)


def _private_generator(call: CallEvent) -> bool:
    """`generator.manual_seed(...)` or `np.random.default_rng(...)`: a generator object of its own."""
    return (call.method == "manual_seed" and call.callee is None) or call.callee in _GENERATOR_CONSTRUCTORS


def _literal_seed(call: CallEvent) -> bool:
    """A private generator seeded with a literal (``np.random.RandomState(1).permutation(n)``,
    ``split_rng = random.Random(12345)``, ``torch.Generator().manual_seed(42)``): it makes one fixed
    stream (a permutation a model registers as a buffer, a data split that must not change) and seeds
    nothing else the run draws. Neither a seeding of the run nor a draw from an unseeded generator."""
    seed = next((arg.value for arg in call.arg_nodes if arg.keyword is None or arg.keyword.value == "seed"), None)
    return isinstance(seed, cst.Integer)


def _has_seed_argument(call: CallEvent) -> bool:
    for arg in call.arg_nodes:
        if arg.keyword is None or arg.keyword.value == "seed":
            return not (isinstance(arg.value, cst.Name) and arg.value.value == "None")
    return False


def _main_guard(module: ModuleView) -> tuple[ParsedChunk, cst.BaseExpression] | None:
    """The test of ``if __name__ == "__main__":`` and its statement."""
    for chunk in module.chunks:
        for statement in chunk.body:
            if isinstance(statement, cst.If) and _is_main_test(statement.test):
                return chunk, statement.test
    return None


def _is_main_test(test: cst.BaseExpression) -> bool:
    if not isinstance(test, cst.Comparison) or len(test.comparisons) != 1:
        return False
    sides = (test.left, test.comparisons[0].comparator)
    names = [side.value for side in sides if isinstance(side, cst.Name)]
    strings = [literal_value(side) for side in sides if isinstance(side, cst.SimpleString)]
    return names == ["__name__"] and strings == ["__main__"]


def _first_use(uses: list[tuple[CallEvent, str]]) -> tuple[CallEvent, str]:
    first = first_written([call for call, _ in uses])
    return next(use for use in uses if use[0] is first)


def _line(call: CallEvent) -> int:
    return call.chunk.line_of(call.node)


def _join(parts: list[str], conjunction: str = "and") -> str:
    return parts[0] if len(parts) == 1 else f"{', '.join(parts[:-1])} {conjunction} {parts[-1]}"


# A project's data module that splits its records with numpy's global generator (used by the examples below).
_SPLIT_MODULE = """
    import json

    import numpy as np
    from torch.utils.data import Dataset


    class ConversationDataset(Dataset):
        def __init__(self, records, tokenizer):
            self.items = [tokenizer(record["text"], truncation=True) for record in records]

        def __len__(self):
            return len(self.items)

        def __getitem__(self, index):
            return self.items[index]


    def make_data_module(tokenizer, path):
        with open(path) as f:
            records = json.load(f)
        order = np.random.permutation(len(records))
        cut = int(len(order) * 0.98)
        return dict(
            train_dataset=ConversationDataset([records[i] for i in order[:cut]], tokenizer),
            eval_dataset=ConversationDataset([records[i] for i in order[cut:]], tokenizer),
        )
"""

UnseededRun.MUST_FIRE = (
    Fires(  # the loaders are built in another file from keywords passed on as `**kwargs`: whether workers (seeded from torch) run the flips is not visible, a note
        """
        import argparse

        import numpy as np
        import torch

        from dataloaders import make_loaders


        class Trainer:
            def __init__(self, args):
                kwargs = {"num_workers": args.workers, "pin_memory": True}
                self.train_loader, self.val_loader = make_loaders(args.root, args.batch_size, **kwargs)
                self.model = torch.nn.Conv2d(3, 21, 1).cuda()
                self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.01, momentum=0.9)

            def train_epoch(self):
                self.model.train()
                for image, mask in self.train_loader:
                    loss = torch.nn.functional.cross_entropy(self.model(image.cuda()), mask.cuda())
                    self.optimizer.zero_grad()
                    loss.backward()
                    self.optimizer.step()


        if __name__ == "__main__":
            parser = argparse.ArgumentParser()
            parser.add_argument("--root", default="data")
            parser.add_argument("--batch-size", type=int, default=8)
            parser.add_argument("--workers", type=int, default=4)
            parser.add_argument("--seed", type=int, default=1)
            args = parser.parse_args()
            torch.manual_seed(args.seed)
            np.random.seed(args.seed)
            trainer = Trainer(args)
            for epoch in range(30):
                trainer.train_epoch()
        """,
        files={
            "dataloaders/__init__.py": """
                from torch.utils.data import DataLoader

                from dataloaders.segmentation import SegmentationSet


                def make_loaders(root, batch_size, **kwargs):
                    train_set = SegmentationSet(root, "train")
                    val_set = SegmentationSet(root, "val")
                    return (DataLoader(train_set, batch_size=batch_size, shuffle=True, **kwargs),
                            DataLoader(val_set, batch_size=batch_size, shuffle=False, **kwargs))
            """,
            "dataloaders/segmentation.py": """
                import random

                import numpy as np
                import torch
                from torch.utils.data import Dataset


                class SegmentationSet(Dataset):
                    def __init__(self, root, split):
                        self.items = sorted(np.load(f"{root}/{split}.npy", allow_pickle=True))
                        self.split = split

                    def __len__(self):
                        return len(self.items)

                    def __getitem__(self, index):
                        image, mask = self.items[index]
                        if self.split == "train" and random.random() < 0.5:
                            image, mask = image[:, ::-1].copy(), mask[:, ::-1].copy()
                        return torch.as_tensor(image), torch.as_tensor(mask)
            """,
        },
        severity=Severity.NOTE,
        at="self.train_loader, self.val_loader = make_loaders(args.root, args.batch_size, **kwargs)",
    ),
    Fires(  # the dataset's flips draw from `random` in the training process itself: the loader runs no workers
        """
        import random

        import torch
        from torch.utils.data import DataLoader, Dataset


        class FlipSet(Dataset):
            def __init__(self, images, labels):
                self.images, self.labels = images, labels

            def __len__(self):
                return len(self.images)

            def __getitem__(self, index):
                image = self.images[index]
                if random.random() < 0.5:
                    image = image.flip(-1)
                return image, self.labels[index]


        def main():
            torch.manual_seed(0)
            data = torch.load("train.pt")
            loader = DataLoader(FlipSet(data["images"], data["labels"]), batch_size=32, shuffle=True, num_workers=0)
            model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.LazyLinear(10))
            optimizer = torch.optim.Adam(model.parameters())
            for images, labels in loader:
                loss = torch.nn.functional.cross_entropy(model(images), labels)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()


        if __name__ == "__main__":
            main()
        """,
        at="if random.random() < 0.5:",
    ),
    Fires(  # only torch is seeded; the dataset of another file builds a crop class of a third, which draws from numpy
        """
        import argparse

        import torch
        from torch.utils.data import DataLoader

        from data.clips import ClipDataset


        def main():
            parser = argparse.ArgumentParser()
            parser.add_argument("--seed", type=int, default=0)
            args = parser.parse_args()
            torch.manual_seed(args.seed)
            loader = DataLoader(ClipDataset(torch.load("clips.pt")), batch_size=8, shuffle=True)
            model = torch.nn.Conv1d(16, 4, 3)
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            for clips in loader:
                loss = model(clips.float()).pow(2).mean()
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()


        if __name__ == "__main__":
            main()
        """,
        files={
            "data/__init__.py": "",
            "data/augment.py": """
                import numpy as np


                class RandomTemporalCrop:
                    def __init__(self, length):
                        self.length = length

                    def __call__(self, clip):
                        start = np.random.randint(0, len(clip) - self.length + 1)
                        return clip[start:start + self.length]
            """,
            "data/clips.py": """
                import torch
                from torch.utils.data import Dataset

                from data.augment import RandomTemporalCrop


                class ClipDataset(Dataset):
                    def __init__(self, clips, length=16):
                        self.clips = clips
                        self.crop = RandomTemporalCrop(length)

                    def __len__(self):
                        return len(self.clips)

                    def __getitem__(self, index):
                        return torch.as_tensor(self.crop(self.clips[index]))
            """,
        },
        at='loader = DataLoader(ClipDataset(torch.load("clips.pt")), batch_size=8, shuffle=True)',
    ),
    Fires(
        # the Trainer seeds numpy when it is built, after the data module drew its split from numpy's generator
        """
        import transformers
        from transformers import HfArgumentParser, Trainer, TrainingArguments

        from data import make_data_module


        def main():
            (training_args,) = HfArgumentParser((TrainingArguments,)).parse_args_into_dataclasses()
            model = transformers.AutoModelForCausalLM.from_pretrained("gpt2")
            tokenizer = transformers.AutoTokenizer.from_pretrained("gpt2")
            data_module = make_data_module(tokenizer, "conversations.json")
            trainer = Trainer(model=model, tokenizer=tokenizer, args=training_args, **data_module)
            trainer.train()


        if __name__ == "__main__":
            main()
        """,
        files={"data.py": _SPLIT_MODULE},
        severity=Severity.WARNING,
        at='    data_module = make_data_module(tokenizer, "conversations.json")',
    ),
    Fires(
        # a script's module level shuffles with `random` before the Trainer that would seed it is built
        """
        import random
        from transformers import Trainer, TrainingArguments

        random.shuffle(examples)
        trainer = Trainer(model=model, args=TrainingArguments("out", seed=1), train_dataset=examples)
        if __name__ == "__main__":
            trainer.train()
        """,
        severity=Severity.WARNING,
        at="random.shuffle(examples)",
    ),
    Fires(  # the setup helper two files away seeds torch only; the script shuffles with `random`
        """
        import argparse
        import random

        import torch
        import torch.nn.functional as F

        from config import setup


        def main(args):
            cfg = setup(args)
            model = torch.nn.Linear(cfg["dim"], cfg["classes"]).cuda()
            optimizer = torch.optim.SGD(model.parameters(), lr=cfg["lr"])
            batches = torch.load(args.data)
            random.shuffle(batches)
            for x, y in batches:
                optimizer.zero_grad()
                F.cross_entropy(model(x.cuda()), y.cuda()).backward()
                optimizer.step()


        if __name__ == "__main__":
            parser = argparse.ArgumentParser()
            parser.add_argument("--config")
            parser.add_argument("--data")
            main(parser.parse_args())
        """,
        files={"config.py": """
                import json

                from seeding import fix_random_seeds


                def setup(args):
                    with open(args.config) as f:
                        cfg = json.load(f)
                    fix_random_seeds(cfg.get("seed", 0))
                    return cfg
            """, "seeding.py": """
                import torch


                def fix_random_seeds(seed=31):
                    torch.manual_seed(seed)
                    torch.cuda.manual_seed_all(seed)
            """},
        severity=Severity.WARNING,
        at="random.shuffle(batches)",
    ),
    Fires(
        """
        import random
        import numpy as np
        import torch

        def main():
            torch.manual_seed(0)
            np.random.seed(0)
            files = sorted(glob_files("data/"))
            random.shuffle(files)
            model = build_model()
            for x, y in make_loader(files):
                loss = model(x).sum()
                loss.backward()

        if __name__ == "__main__":
            main()
        """,
        severity=Severity.WARNING,
    ),
    Fires(
        # seeding behind `if args.seed is not None` counts; numpy is drawn from inside a helper
        """
        import argparse
        import numpy as np
        import torch
        import torch.nn as nn

        def random_crop(image, size):
            top = np.random.randint(0, image.shape[1] - size)
            return image[:, top:top + size]

        def train(args):
            if args.seed is not None:
                torch.manual_seed(args.seed)
            model = nn.Linear(8, 2)
            opt = torch.optim.SGD(model.parameters(), lr=0.1)
            for image, y in data:
                loss = nn.functional.cross_entropy(model(random_crop(image, 8)), y)
                opt.zero_grad()
                loss.backward()
                opt.step()

        if __name__ == "__main__":
            train(argparse.ArgumentParser().parse_args())
        """,
        severity=Severity.WARNING,
    ),
    Fires(
        # aliases: numpy and `random` are seeded, torch (model init) is not
        """
        import random
        from numpy import random as npr
        import torch.nn as nn

        random.seed(1234)
        npr.seed(1234)

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 2)
                self.drop = nn.Dropout(0.5)

            def forward(self, x):
                return self.fc(self.drop(x))

        net = Net()
        for x, y in batches:
            nn.functional.mse_loss(net(x), y).backward()
        """,
        severity=Severity.WARNING,
    ),
    Fires(
        # a local seed-all helper that forgets numpy
        """
        import random
        import numpy as np
        import torch

        def seed_all(seed):
            random.seed(seed)
            torch.manual_seed(seed)

        def main():
            seed_all(42)
            index = np.random.permutation(len(dataset))
            model = torch.nn.Linear(10, 1)
            for i in index:
                model(dataset[i]).sum().backward()

        if __name__ == "__main__":
            main()
        """,
        severity=Severity.WARNING,
    ),
    Fires(
        # an unseeded private generator
        """
        import numpy as np
        import torch
        from random import shuffle

        if __name__ == "__main__":
            torch.manual_seed(0)
            rng = np.random.default_rng()
            order = rng.permutation(100)
            shuffle(names)
        """,
        severity=Severity.WARNING,
    ),
    Fires(
        """
        import torch
        import torch.nn as nn
        from torch.utils.data import DataLoader

        def main():
            model = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Dropout(0.2), nn.Linear(256, 10))
            loader = DataLoader(train_set, batch_size=64, shuffle=True)
            optimizer = torch.optim.Adam(model.parameters())
            for x, y in loader:
                optimizer.zero_grad()
                nn.functional.cross_entropy(model(x), y).backward()
                optimizer.step()

        if __name__ == "__main__":
            main()
        """,
        severity=Severity.NOTE,
    ),
    Fires(
        # a module-level training loop, no main guard
        """
        import torch

        model = torch.nn.Linear(3, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        for x, y in pairs:
            loss = (model(x) - y).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        """,
        severity=Severity.NOTE,
    ),
    Fires(  # a sampler's generator seeded by host shards differently per host; it seeds no run: a note, not a partial seeding
        """
        import random

        import torch

        def collate(examples, is_train):
            return [random.choice(e["captions"]) if is_train else e["captions"][0] for e in examples]

        def main(model, dataset, optimizer, host_index):
            g = torch.Generator()
            g.manual_seed(host_index)
            sampler = torch.utils.data.RandomSampler(dataset, generator=g)
            for batch in torch.utils.data.DataLoader(dataset, sampler=sampler, collate_fn=lambda b: collate(b, True)):
                model(batch).mean().backward()
                optimizer.step()
                optimizer.zero_grad()

        if __name__ == "__main__":
            main(*setup())
        """,
        severity=Severity.NOTE,
    ),
    Fires(  # a sampling script seeds its numpy generator from --seed, and nothing seeds torch's noise or weights
        """
        import argparse

        import numpy as np
        import torch
        import torch.nn as nn


        class Denoiser(nn.Module):
            def __init__(self, channels):
                super().__init__()
                self.net = nn.Conv2d(channels, channels, 3, padding=1)

            def forward(self, x):
                return self.net(x)


        if __name__ == "__main__":
            parser = argparse.ArgumentParser()
            parser.add_argument("--seed", type=int, default=0)
            args = parser.parse_args()
            order = np.random.RandomState(args.seed).permutation(8)
            model = Denoiser(3)
            with torch.no_grad():
                for index in order:
                    print(index, model(torch.randn(1, 3, 32, 32)).mean().item())
        """,
        severity=Severity.WARNING,
    ),
    Fires(  # the replay buffer of another file samples with `random`, which nothing seeds; the agent trains there too
        """
        import argparse

        import numpy as np
        import torch

        from agent import Agent
        from replay_memory import ReplayMemory

        parser = argparse.ArgumentParser()
        parser.add_argument("--seed", type=int, default=123)
        parser.add_argument("--capacity", type=int, default=100000)
        args = parser.parse_args()

        env = make_env(args)
        torch.manual_seed(args.seed)
        np.random.seed(args.seed)

        agent = Agent(env.observation_size, env.action_size)
        memory = ReplayMemory(args.capacity)
        for step in range(1_000_000):
            memory.push(*env.step(agent.act(env.state)))
            if len(memory) > 256:
                agent.update(memory, 256)
        """,
        files={"replay_memory.py": """
            import random

            import numpy as np


            class ReplayMemory:
                def __init__(self, capacity):
                    self.capacity = capacity
                    self.buffer = []

                def push(self, *transition):
                    self.buffer = (self.buffer + [transition])[-self.capacity:]

                def sample(self, batch_size):
                    batch = random.sample(self.buffer, batch_size)
                    return map(np.stack, zip(*batch))

                def __len__(self):
                    return len(self.buffer)
        """, "agent.py": """
            import torch
            import torch.nn.functional as F


            class Agent:
                def __init__(self, observations, actions):
                    self.policy = torch.nn.Linear(observations, actions)
                    self.optimizer = torch.optim.Adam(self.policy.parameters())

                def act(self, state):
                    return self.policy(torch.as_tensor(state)).argmax().item()

                def update(self, memory, batch_size):
                    states, actions, rewards = memory.sample(batch_size)
                    loss = F.mse_loss(self.policy(torch.as_tensor(states)).max(1).values, torch.as_tensor(rewards))
                    self.optimizer.zero_grad()
                    loss.backward()
                    self.optimizer.step()
        """},
        severity=Severity.WARNING,
        at="memory = ReplayMemory(args.capacity)",
    ),
    Fires(  # a seed drawn at random on every launch, with no way to pass one: every run differs
        """
        import argparse
        import random

        import torch
        import torch.nn as nn

        parser = argparse.ArgumentParser()
        parser.add_argument("--epochs", type=int, default=25)
        opt = parser.parse_args()

        opt.manualSeed = random.randint(1, 10000)
        print("Random Seed: ", opt.manualSeed)
        random.seed(opt.manualSeed)
        torch.manual_seed(opt.manualSeed)

        net = nn.Sequential(nn.Linear(100, 64), nn.ReLU(), nn.Linear(64, 1))
        optimizer = torch.optim.Adam(net.parameters())
        for epoch in range(opt.epochs):
            for batch in loader:
                optimizer.zero_grad()
                net(batch).mean().backward()
                optimizer.step()
        """,
        severity=Severity.WARNING,
        at="opt.manualSeed = random.randint(1, 10000)",
    ),
    Fires(  # a script with no main guard trains through a framework object of its own package: the note sits where it starts
        """
        import argparse
        import json

        import torch

        from relext import framework, model

        parser = argparse.ArgumentParser()
        parser.add_argument("--train_file")
        parser.add_argument("--max_epoch", type=int, default=100)
        args = parser.parse_args()

        rel2id = json.load(open("rel2id.json"))
        net = model.BagAttention(len(rel2id))
        trainer = framework.BagRE(net, args.train_file, max_epoch=args.max_epoch)
        trainer.train_model()
        """,
        files={"relext/__init__.py": "", "relext/model.py": """
            import torch.nn as nn


            class BagAttention(nn.Module):
                def __init__(self, classes):
                    super().__init__()
                    self.fc = nn.Linear(230, classes)
                    self.drop = nn.Dropout(0.5)

                def forward(self, x):
                    return self.fc(self.drop(x))
        """, "relext/framework.py": """
            import torch
            import torch.nn.functional as F
            from torch.utils.data import DataLoader


            class BagRE:
                def __init__(self, model, train_path, max_epoch):
                    self.model = model
                    self.loader = DataLoader(torch.load(train_path), batch_size=160, shuffle=True)
                    self.optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
                    self.max_epoch = max_epoch

                def train_model(self):
                    for epoch in range(self.max_epoch):
                        for x, y in self.loader:
                            loss = F.cross_entropy(self.model(x), y)
                            self.optimizer.zero_grad()
                            loss.backward()
                            self.optimizer.step()
        """},
        severity=Severity.NOTE,
        at="parser = argparse.ArgumentParser()",
    ),
    Fires(  # seeded in the parent only: the workers mp.spawn starts begin with fresh generators
        """
        import argparse
        import random

        import numpy as np
        import torch
        import torch.distributed as dist
        import torch.multiprocessing as mp
        from torch.nn.parallel import DistributedDataParallel as DDP


        def train(rank, world_size, args):
            dist.init_process_group("nccl", rank=rank, world_size=world_size)
            model = DDP(torch.nn.Linear(32, 2).to(rank), device_ids=[rank])
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            for x, y in make_loader(args, rank):
                loss = torch.nn.functional.cross_entropy(model(x.to(rank)), y.to(rank))
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()


        def main():
            parser = argparse.ArgumentParser()
            parser.add_argument("--seed", type=int, default=0)
            args = parser.parse_args()
            random.seed(args.seed)
            np.random.seed(args.seed)
            torch.manual_seed(args.seed)
            world_size = torch.cuda.device_count()
            mp.spawn(train, args=(world_size, args), nprocs=world_size)


        if __name__ == "__main__":
            main()
        """,
        severity=Severity.WARNING,
        at="mp.spawn(train, args=(world_size, args), nprocs=world_size)",
    ),
    Fires(  # scikit-learn's split draws from numpy's global generator when given no random_state
        """
        import argparse

        import torch
        from sklearn.model_selection import train_test_split


        def main(args):
            torch.manual_seed(args.seed)
            features, labels = load_table(args.data)
            x_train, x_val, y_train, y_val = train_test_split(features, labels, test_size=0.2)
            model = torch.nn.Linear(x_train.shape[1], 1)
            optimizer = torch.optim.Adam(model.parameters())
            for epoch in range(args.epochs):
                loss = torch.nn.functional.mse_loss(model(x_train), y_train)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()


        if __name__ == "__main__":
            main(argparse.ArgumentParser().parse_args())
        """,
        severity=Severity.WARNING,
        at="x_train, x_val, y_train, y_val = train_test_split(features, labels, test_size=0.2)",
    ),
    Fires(  # a Hugging Face dataset shuffled with no seed takes one from numpy's global generator, which nothing seeds
        """
        import torch
        from datasets import load_dataset


        def main(args, model, tokenizer, optimizer):
            torch.manual_seed(args.seed)
            dataset = load_dataset("imdb")["train"].map(lambda row: tokenizer(row["text"]), batched=True)
            dataset = dataset.shuffle()
            for batch in dataset.iter(batch_size=8):
                loss = model(**batch).loss
                loss.backward()
                optimizer.step()
                optimizer.zero_grad()


        if __name__ == "__main__":
            main(*setup())
        """,
        severity=Severity.WARNING,
        at="dataset = dataset.shuffle()",
    ),
    Fires(  # a private generator with a literal seed fixes one split; it does not seed the run, which seeds nothing
        """
        import random

        import torch


        def main(paths):
            split_rng = random.Random(12345)
            paths = sorted(paths)
            split_rng.shuffle(paths)
            train_paths = paths[: int(0.9 * len(paths))]
            model = torch.nn.Linear(16, 4)
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            for x, y in load(train_paths):
                optimizer.zero_grad()
                torch.nn.functional.cross_entropy(model(x), y).backward()
                optimizer.step()


        if __name__ == "__main__":
            main(list_files())
        """,
        severity=Severity.NOTE,
    ),
    Fires(  # cross-validation folds shuffled by numpy's global generator, which only torch's seed leaves alone
        """
        import numpy as np
        import torch
        from sklearn.model_selection import StratifiedKFold


        def cross_validate(features, labels, epochs=20, seed=0):
            torch.manual_seed(seed)
            scores = []
            for train_idx, val_idx in StratifiedKFold(n_splits=5, shuffle=True).split(features, labels):
                model = torch.nn.Linear(features.shape[1], 2)
                optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
                x, y = torch.from_numpy(features[train_idx]), torch.from_numpy(labels[train_idx])
                for epoch in range(epochs):
                    loss = torch.nn.functional.cross_entropy(model(x), y)
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
                scores.append(np.mean(model(torch.from_numpy(features[val_idx])).argmax(1).numpy() == labels[val_idx]))
            return scores
        """,
        severity=Severity.WARNING,
        at="for train_idx, val_idx in StratifiedKFold(n_splits=5, shuffle=True).split(features, labels):",
    ),
    Fires(  # the package the script imports seeds all three in a helper, which this training script never calls
        """
        import argparse
        import json

        import numpy as np
        import torch

        import relex
        from relex import encoder, framework

        parser = argparse.ArgumentParser()
        parser.add_argument("--train_file")
        parser.add_argument("--batch_size", type=int, default=160)
        args = parser.parse_args()

        word2vec = np.load("glove.6B.50d_mat.npy")
        sentence_encoder = relex.encoder.CNNEncoder(word2vec=word2vec, hidden_size=230, dropout=0.5)
        trainer = relex.framework.BagTrainer(args.train_file, sentence_encoder, batch_size=args.batch_size)
        trainer.train_model()
        torch.save(sentence_encoder.state_dict(), "ckpt/encoder.pth")
        """,
        files={
            "relex/__init__.py": """
                import random

                import numpy as np
                import torch


                def fix_seed(seed=12345):
                    random.seed(seed)
                    np.random.seed(seed)
                    torch.manual_seed(seed)
                    torch.cuda.manual_seed_all(seed)
            """,
            "relex/encoder.py": """
                import torch


                class CNNEncoder(torch.nn.Module):
                    def __init__(self, word2vec, hidden_size, dropout):
                        super().__init__()
                        self.embed = torch.nn.Embedding.from_pretrained(torch.from_numpy(word2vec))
                        self.conv = torch.nn.Conv1d(word2vec.shape[1], hidden_size, 3, padding=1)
                        self.drop = torch.nn.Dropout(dropout)

                    def forward(self, tokens):
                        return self.drop(self.conv(self.embed(tokens).transpose(1, 2)).max(-1).values)
            """,
            "relex/framework.py": """
                import torch


                class BagTrainer:
                    def __init__(self, path, model, batch_size):
                        self.model = model
                        self.loader = torch.utils.data.DataLoader(load_bags(path), batch_size=batch_size, shuffle=True)
                        self.optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

                    def train_model(self):
                        for tokens, labels in self.loader:
                            loss = torch.nn.functional.cross_entropy(self.model(tokens), labels)
                            self.optimizer.zero_grad()
                            loss.backward()
                            self.optimizer.step()
            """,
        },
        severity=Severity.WARNING,
        at="parser = argparse.ArgumentParser()",
    ),
    Fires(  # a worker's re-seeding from torch's own seed is no way of seeding the run: unseeded stays a note
        """
        import torch

        from utils import data


        def main(args):
            model = torch.nn.Linear(32, 10)
            optimizer = torch.optim.Adam(model.parameters())
            for x, y in data.loader(args.path):
                optimizer.zero_grad()
                torch.nn.functional.cross_entropy(model(x), y).backward()
                optimizer.step()


        if __name__ == "__main__":
            main(data.parse())
        """,
        files={"utils/__init__.py": "", "utils/data.py": """
            import argparse
            import random

            import numpy as np
            import torch


            def reseed_worker(worker_id):
                worker_seed = torch.initial_seed() % 2**32
                np.random.seed(worker_seed)
                random.seed(worker_seed)
                torch.manual_seed(worker_seed)


            def loader(path):
                return torch.utils.data.DataLoader(torch.load(path), batch_size=64, shuffle=True, worker_init_fn=reseed_worker)


            def parse():
                parser = argparse.ArgumentParser()
                parser.add_argument("--path")
                return parser.parse_args()
        """},
        severity=Severity.NOTE,
    ),
    Fires(  # the model is built, and draws its weights, before the seed is set
        """
        import argparse
        import random

        import numpy as np
        import torch
        import torch.nn as nn


        class TextCNN(nn.Module):
            def __init__(self, vocab, dim, classes):
                super().__init__()
                self.embed = nn.Embedding(vocab, dim)
                self.conv = nn.Conv1d(dim, 100, 3)
                self.out = nn.Linear(100, classes)

            def forward(self, tokens):
                hidden = torch.relu(self.conv(self.embed(tokens).transpose(1, 2)))
                return self.out(hidden.max(-1).values)


        def main():
            parser = argparse.ArgumentParser()
            parser.add_argument("--seed", type=int, default=13)
            parser.add_argument("--epochs", type=int, default=5)
            args = parser.parse_args()
            model = TextCNN(30000, 128, 2).cuda()
            optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
            random.seed(args.seed)
            np.random.seed(args.seed)
            torch.manual_seed(args.seed)
            for epoch in range(args.epochs):
                tokens = torch.randint(0, 30000, (32, 50)).cuda()
                labels = torch.randint(0, 2, (32,)).cuda()
                loss = nn.functional.cross_entropy(model(tokens), labels)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()


        if __name__ == "__main__":
            main()
        """,
        at="    model = TextCNN(30000, 128, 2).cuda()",
    ),
    Fires(  # the project's helper draws a seed when handed none, and the script hands it none
        """
        import torch
        from torch.utils.data import DataLoader

        from common.utils import seed_everything


        def main(dataset, epochs):
            seed_everything()
            model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.Dropout(0.1), torch.nn.Linear(64, 2))
            optimizer = torch.optim.AdamW(model.parameters())
            for epoch in range(epochs):
                for x, y in DataLoader(dataset, batch_size=16, shuffle=True):
                    loss = torch.nn.functional.cross_entropy(model(x), y)
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()


        if __name__ == "__main__":
            main(torch.load("data.pt"), 10)
        """,
        files={
            "common/__init__.py": "",
            "common/utils.py": """
                import random
                from typing import Optional

                import numpy as np
                import torch


                def random_seed() -> int:
                    return random.randint(0, 2**31 - 1)


                def seed_everything(seed: Optional[int] = None) -> int:
                    if seed is None:
                        seed = random_seed()
                    random.seed(seed)
                    np.random.seed(seed)
                    torch.manual_seed(seed)
                    return seed
            """,
        },
        at="    seed_everything()",
    ),
)

UnseededRun.MUST_NOT_FIRE = (
    Quiet(  # only torch is seeded, but the blur's `random` draws run in the loader's workers, which PyTorch seeds from torch
        """
        import argparse

        import torch
        from torch.utils.data import DataLoader
        from torchvision import datasets, transforms

        from augment import RandomBlur


        def main():
            parser = argparse.ArgumentParser()
            parser.add_argument("--seed", type=int, default=0)
            parser.add_argument("--workers", type=int, default=8)
            args = parser.parse_args()
            torch.manual_seed(args.seed)
            augment = transforms.Compose([RandomBlur(0.5), transforms.ToTensor()])
            train_set = datasets.ImageFolder("data/train", transform=augment)
            loader = DataLoader(train_set, batch_size=64, shuffle=True, num_workers=args.workers, pin_memory=True)
            model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.LazyLinear(10)).cuda()
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            for images, labels in loader:
                loss = torch.nn.functional.cross_entropy(model(images.cuda()), labels.cuda())
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()


        if __name__ == "__main__":
            main()
        """,
        files={
            "augment.py": """
                import random

                from PIL import ImageFilter


                class RandomBlur:
                    def __init__(self, p):
                        self.p = p

                    def __call__(self, image):
                        if random.random() > self.p:
                            return image
                        return image.filter(ImageFilter.GaussianBlur(radius=random.uniform(0.1, 2.0)))
            """,
        },
    ),
    Quiet(  # the same three files, with numpy seeded beside torch
        """
        import numpy as np
        import argparse

        import torch
        from torch.utils.data import DataLoader

        from data.clips import ClipDataset


        def main():
            parser = argparse.ArgumentParser()
            parser.add_argument("--seed", type=int, default=0)
            args = parser.parse_args()
            torch.manual_seed(args.seed)
            np.random.seed(args.seed)
            loader = DataLoader(ClipDataset(torch.load("clips.pt")), batch_size=8, shuffle=True)
            model = torch.nn.Conv1d(16, 4, 3)
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            for clips in loader:
                loss = model(clips.float()).pow(2).mean()
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()


        if __name__ == "__main__":
            main()
        """,
        files={
            "data/__init__.py": "",
            "data/augment.py": """
                import numpy as np


                class RandomTemporalCrop:
                    def __init__(self, length):
                        self.length = length

                    def __call__(self, clip):
                        start = np.random.randint(0, len(clip) - self.length + 1)
                        return clip[start:start + self.length]
            """,
            "data/clips.py": """
                import torch
                from torch.utils.data import Dataset

                from data.augment import RandomTemporalCrop


                class ClipDataset(Dataset):
                    def __init__(self, clips, length=16):
                        self.clips = clips
                        self.crop = RandomTemporalCrop(length)

                    def __len__(self):
                        return len(self.clips)

                    def __getitem__(self, index):
                        return torch.as_tensor(self.crop(self.clips[index]))
            """,
        },
    ),
    Quiet(  # seeded before the model is built
        """
        import random

        import numpy as np
        import torch
        import torch.nn as nn


        def train(seed, epochs):
            random.seed(seed)
            np.random.seed(seed)
            torch.manual_seed(seed)
            model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            for _ in range(epochs):
                loss = model(torch.randn(16, 64)).logsumexp(-1).mean()
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()


        if __name__ == "__main__":
            train(0, 10)
        """
    ),
    Quiet(  # built first, then given a checkpoint's weights: the drawn ones do not matter
        """
        import random

        import numpy as np
        import torch
        import torch.nn as nn


        def finetune(checkpoint, seed, epochs):
            model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))
            model.load_state_dict(torch.load(checkpoint))
            random.seed(seed)
            np.random.seed(seed)
            torch.manual_seed(seed)
            optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
            for _ in range(epochs):
                loss = model(torch.randn(16, 64)).logsumexp(-1).mean()
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()


        if __name__ == "__main__":
            finetune("base.pt", 0, 10)
        """
    ),
    Quiet(  # the replay buffer of another file seeds `random` itself when it is built
        """
        import numpy as np
        import torch

        from replay_memory import ReplayMemory

        torch.manual_seed(args.seed)
        np.random.seed(args.seed)
        memory = ReplayMemory(args.capacity, args.seed)
        model = torch.nn.Linear(4, 2)
        for step in range(1000):
            states = memory.sample(32)
            model(torch.as_tensor(states)).sum().backward()
        """,
        files={"replay_memory.py": """
            import random


            class ReplayMemory:
                def __init__(self, capacity, seed):
                    random.seed(seed)
                    self.capacity = capacity
                    self.buffer = []

                def sample(self, batch_size):
                    return random.sample(self.buffer, batch_size)
        """},
    ),
    Quiet(  # a model file's demo profiles the model with a helper that backwards once: no training run
        """
        import argparse

        import torch

        from utils.torch_utils import profile


        class Model(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.conv = torch.nn.Conv2d(3, 16, 3)

            def forward(self, x):
                return self.conv(x)


        if __name__ == "__main__":
            parser = argparse.ArgumentParser()
            parser.add_argument("--batch-size", type=int, default=1)
            opt = parser.parse_args()
            profile(torch.rand(opt.batch_size, 3, 640, 640), [Model()], n=3)
        """,
        files={"utils/__init__.py": "", "utils/torch_utils.py": """
            import time


            def profile(inputs, models, n=10):
                for model in models:
                    start = time.time()
                    for _ in range(n):
                        model(inputs).sum().backward()
                    print(model.__class__.__name__, (time.time() - start) / n)
        """},
    ),
    Quiet(  # a library's loader seeds a sampler's private generator: that seeds no run, and this tool trains nothing
        """
        import numpy as np

        from data.build import build_train_loader


        def main(cfg):
            for batch in build_train_loader(cfg):
                colors = np.random.rand(len(batch), 3)
                save_overlay(batch, colors)


        if __name__ == "__main__":
            main(load_config())
        """,
        files={"data/__init__.py": "", "data/build.py": """
            import torch


            def build_train_loader(cfg, seed=None):
                generator = torch.Generator()
                if seed is not None:
                    generator.manual_seed(seed)
                return torch.utils.data.DataLoader(cfg.dataset, batch_size=cfg.batch_size, shuffle=True, generator=generator)
        """},
    ),
    Quiet(  # the dataset's shuffle is given the run's seed
        """
        import torch
        from datasets import load_dataset


        def main(args, model, optimizer):
            torch.manual_seed(args.seed)
            dataset = load_dataset("imdb")["train"].shuffle(seed=args.seed)
            splits = dataset.train_test_split(test_size=0.1, seed=args.seed)
            for batch in splits["train"].iter(batch_size=8):
                model(**batch).loss.backward()
                optimizer.step()


        if __name__ == "__main__":
            main(*setup())
        """
    ),
    Quiet(  # every worker seeds itself first thing; the split is given a random_state
        """
        import random

        import numpy as np
        import torch
        import torch.multiprocessing as mp
        from sklearn.model_selection import train_test_split


        def train(rank, args):
            random.seed(args.seed)
            np.random.seed(args.seed)
            torch.manual_seed(args.seed)
            x_train, _, y_train, _ = train_test_split(*load(args), test_size=0.1, random_state=args.seed)
            model = torch.nn.Linear(8, 1).to(rank)
            for x, y in zip(x_train, y_train):
                torch.nn.functional.mse_loss(model(x.to(rank)), y.to(rank)).backward()


        if __name__ == "__main__":
            args = parse_args()
            torch.manual_seed(args.seed)
            mp.spawn(train, args=(args,), nprocs=2)
        """
    ),
    Quiet(  # a generator with a literal seed used once for a fixed permutation seeds nothing (taming-transformers)
        """
        import numpy as np
        import torch
        import torch.nn as nn


        class AbstractPermuter(nn.Module):
            def forward(self, x, reverse=False):
                raise NotImplementedError


        class Random(AbstractPermuter):
            def __init__(self, H, W):
                super().__init__()
                indices = np.random.RandomState(1).permutation(H * W)
                idx = torch.tensor(indices.ravel())
                self.register_buffer("forward_shuffle_idx", idx)
                self.register_buffer("backward_shuffle_idx", torch.argsort(idx))

            def forward(self, x, reverse=False):
                return x[:, self.backward_shuffle_idx if reverse else self.forward_shuffle_idx]


        class AlternateParsing(AbstractPermuter):
            def __init__(self, H, W):
                super().__init__()
                indices = np.arange(W * H).reshape(H, W)
                for i in range(1, H, 2):
                    indices[i, :] = indices[i, ::-1]
                idx = torch.tensor(indices.flatten())
                self.register_buffer("forward_shuffle_idx", idx)
                self.register_buffer("backward_shuffle_idx", torch.argsort(idx))

            def forward(self, x, reverse=False):
                return x[:, self.backward_shuffle_idx if reverse else self.forward_shuffle_idx]


        if __name__ == "__main__":
            p0 = AlternateParsing(16, 16)
            print(p0.forward_shuffle_idx)
            print(p0.backward_shuffle_idx)
        """
    ),
    Quiet(  # seeded by a setup helper of another file, through a helper of a third
        """
        import argparse

        import torch
        import torch.nn.functional as F

        from config import setup


        def main(args):
            cfg = setup(args)
            model = torch.nn.Linear(cfg["dim"], cfg["classes"]).cuda()
            optimizer = torch.optim.SGD(model.parameters(), lr=cfg["lr"])
            batches = torch.load(args.data)
            for x, y in batches:
                optimizer.zero_grad()
                F.cross_entropy(model(x.cuda()), y.cuda()).backward()
                optimizer.step()


        if __name__ == "__main__":
            parser = argparse.ArgumentParser()
            parser.add_argument("--config")
            parser.add_argument("--data")
            main(parser.parse_args())
        """,
        files={"config.py": """
                import json

                from seeding import fix_random_seeds


                def setup(args):
                    with open(args.config) as f:
                        cfg = json.load(f)
                    fix_random_seeds(cfg.get("seed", 0))
                    return cfg
            """, "seeding.py": """
                import random

                import numpy as np
                import torch


                def fix_random_seeds(seed=31):
                    torch.manual_seed(seed)
                    torch.cuda.manual_seed_all(seed)
                    np.random.seed(seed)
                    random.seed(seed)
            """},
    ),
    Quiet(  # an image server draws a fresh seed per request on purpose
        """
        import random

        import torch
        from diffusers import StableDiffusion3Pipeline

        def generate(shared, prompt):
            generator = torch.Generator(device=shared.device)
            generator.manual_seed(random.randint(0, 10_000_000))
            return shared.pipeline(prompt, generator=generator).images[0]

        if __name__ == "__main__":
            generate(load_shared(), "a photo of a cat")
        """
    ),
    Quiet(
        """
        import random
        import numpy as np
        import torch

        def main(args):
            random.seed(args.seed)
            np.random.seed(args.seed)
            torch.manual_seed(args.seed)
            torch.cuda.manual_seed_all(args.seed)
            random.shuffle(files)
            model = torch.nn.Linear(2, 2)
            for x in np.random.permutation(data):
                model(x).sum().backward()

        if __name__ == "__main__":
            main(parse())
        """
    ),
    Quiet(
        # seeding helpers from the libraries seed all three
        """
        import random
        import numpy as np
        from transformers import set_seed

        def main():
            set_seed(42)
            random.shuffle(examples)
            noise = np.random.normal(size=3)
            for batch in loader:
                model(**batch).loss.backward()

        if __name__ == "__main__":
            main()
        """
    ),
    Quiet(
        """
        import lightning as L
        import numpy as np

        L.seed_everything(7)
        idx = np.random.choice(100, 10)
        model = LitModel()
        L.Trainer(max_epochs=3).fit(model)
        """
    ),
    Quiet(
        # the Hugging Face Trainer seeds torch, numpy and random when it is built: the collator's draws come later
        """
        import random
        from transformers import Trainer, TrainingArguments


        def drop_some_labels(features):
            for feature in features:
                if random.random() < 0.1:
                    feature["labels"] = [-100] * len(feature["labels"])
            return default_collate(features)


        trainer = Trainer(model=model, args=TrainingArguments("out", seed=1), train_dataset=ds, data_collator=drop_some_labels)
        if __name__ == "__main__":
            trainer.train()
        """
    ),
    Quiet(
        # the data split is drawn after `set_seed`: seeded (twin of the split drawn before the Trainer is built)
        """
        import transformers
        from transformers import HfArgumentParser, Trainer, TrainingArguments

        from data import make_data_module


        def main():
            (training_args,) = HfArgumentParser((TrainingArguments,)).parse_args_into_dataclasses()
            transformers.set_seed(training_args.seed)
            model = transformers.AutoModelForCausalLM.from_pretrained("gpt2")
            tokenizer = transformers.AutoTokenizer.from_pretrained("gpt2")
            data_module = make_data_module(tokenizer, "conversations.json")
            trainer = Trainer(model=model, tokenizer=tokenizer, args=training_args, **data_module)
            trainer.train()


        if __name__ == "__main__":
            main()
        """,
        files={"data.py": _SPLIT_MODULE},
    ),
    Quiet(
        # a library: no entry point, no training; its callers decide about seeding
        """
        import random
        import torch

        def set_torch_seed(seed):
            torch.manual_seed(seed)

        def augment(image):
            if random.random() < 0.5:
                image = image.flip(-1)
            return image
        """
    ),
    Quiet(
        # an imported seed-all helper whose body lives in another file
        """
        import random
        import numpy as np
        import torch
        from utils.misc import init_seeds

        if __name__ == "__main__":
            init_seeds(0)
            random.shuffle(paths)
            model = torch.nn.Linear(1, 1)
            for x in np.random.rand(10, 1):
                model(torch.tensor(x)).sum().backward()
        """
    ),
    Quiet(
        # torch seeded and only torch drawn from; a seeded numpy generator
        """
        import numpy as np
        import torch

        def main():
            torch.manual_seed(0)
            rng = np.random.default_rng(0)
            perm = rng.permutation(10)
            model = torch.nn.Linear(4, 4)
            for x in data:
                model(x).sum().backward()

        if __name__ == "__main__":
            main()
        """
    ),
    Quiet(
        # `random` only picks the seed (and a free port); the seed itself is applied and logged
        """
        import os
        import random
        import numpy as np
        import torch

        def main(args):
            if args.seed is None:
                args.seed = random.randint(0, 2**31 - 1)
            os.environ["MASTER_PORT"] = str(random.randint(20000, 30000))
            print(f"seed: {args.seed}")
            torch.manual_seed(args.seed)
            np.random.seed(args.seed)
            model = torch.nn.Linear(2, 1)
            for x in np.random.permutation(data):
                model(x).sum().backward()

        if __name__ == "__main__":
            main(parse_args())
        """
    ),
    Quiet(
        # evaluation script: an entry point that never trains, nothing seeded
        """
        import torch

        if __name__ == "__main__":
            model = torch.load("model.pt")
            with torch.no_grad():
                print(model(torch.randn(1, 3)))
        """
    ),
    Quiet(  # folds in order: KFold without shuffle=True draws nothing
        """
        import torch
        from sklearn.model_selection import KFold


        def cross_validate(features, labels, epochs=20, seed=0):
            torch.manual_seed(seed)
            for train_idx, val_idx in KFold(n_splits=5).split(features):
                model = torch.nn.Linear(features.shape[1], 1)
                optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
                for epoch in range(epochs):
                    loss = torch.nn.functional.mse_loss(model(features[train_idx]), labels[train_idx])
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
        """
    ),
    Quiet(  # the same helper, handed the seed the command line gives (it draws one only when none is given)
        """
        import argparse

        import torch

        from common.utils import seed_everything


        def main():
            parser = argparse.ArgumentParser()
            parser.add_argument("--seed", type=int, default=None)
            args = parser.parse_args()
            seed_everything(args.seed)
            model = torch.nn.Linear(32, 2)
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            loss = model(torch.randn(4, 32)).sum()
            loss.backward()
            optimizer.step()


        if __name__ == "__main__":
            main()
        """,
        files={
            "common/__init__.py": "",
            "common/utils.py": """
                import random

                import numpy as np
                import torch


                def seed_everything(seed=None):
                    if seed is None:
                        seed = random.randint(0, 2**31 - 1)
                    random.seed(seed)
                    np.random.seed(seed)
                    torch.manual_seed(seed)
            """,
        },
    ),
)
