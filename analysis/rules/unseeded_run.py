"""A training run seeds some of its random number generators and leaves others unseeded.

torch, numpy and Python's `random` each keep their own generator. Seeding one does nothing for
the others: a script that calls `torch.manual_seed(0)` but shuffles its file list with
`random.shuffle` (or augments with `np.random`) still trains on a different order and different
augmentations on every launch. A training entry point that seeds nothing at all starts every run
from different initial weights, dropout masks and batch orders.

Why it costs money: an unreproducible run cannot be compared with the next one. A 0.3-point
change after a code edit might be the edit or might be the seed, so every comparison needs
several repeated runs, regressions cannot be bisected, and a good result cannot be re-created
for the paper or the model card. The partial case is the worse one: the script looks seeded,
so nobody suspects the noise.

How to fix: seed every library the run draws from, once at start-up — `torch.manual_seed(s)`,
`np.random.seed(s)` and `random.seed(s)`, or one helper that does all three
(`transformers.set_seed`, `lightning.seed_everything`, `accelerate.utils.set_seed`). Seeding
under `if args.seed is not None:` is fine. Scripts driven by the Hugging Face `Trainer` are left
alone: it seeds all three from `TrainingArguments.seed`.
"""

from __future__ import annotations

import re
from typing import NamedTuple

import libcst as cst

from trainlint.rules import (
    DDP,
    ENGINE,
    MODEL,
    SEED_ALL_HELPERS,
    CallEvent,
    Fires,
    ModuleAnalysis,
    ParsedChunk,
    Quiet,
    Rule,
    Severity,
    calls_in,
    first_written,
    is_dataloader,
    is_parameterless_layer,
    is_test_file,
    is_torch_name,
    last_part,
    literal_value,
    mentions_rank,
    quoted,
)
from trainlint.rules import walk as _walk

TORCH, NUMPY, RANDOM = "torch", "numpy", "random"
LIBRARIES = (TORCH, NUMPY, RANDOM)
_DISPLAY = {TORCH: "torch", NUMPY: "numpy", RANDOM: "`random`"}

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
_TORCH_SAMPLING = frozenset({"RandomSampler", "SubsetRandomSampler", "WeightedRandomSampler", "random_split"})
# In-place tensor methods that fill from torch's generator.
_TORCH_DRAW_METHODS = frozenset(
    {"uniform_", "normal_", "bernoulli_", "random_", "exponential_", "cauchy_", "log_normal_", "geometric_"}
)
_SEED_OR_PORT = re.compile(r"seed|port", re.I)
_NON_RANDOM_INIT = frozenset({"calculate_gain", "zeros_", "ones_", "constant_", "eye_", "dirac_"})
# torch.nn layers built without random weights (no parameters, or none drawn): building one draws nothing.


class _Verdict(NamedTuple):
    severity: Severity
    chunk: ParsedChunk
    node: cst.CSTNode
    seeded: dict[str, list[CallEvent]]
    used: dict[str, list[tuple[CallEvent, str]]]  # library -> (call, what it draws for)
    unseeded: tuple[str, ...]


# One verdict per module: the rule runs once per statement but the question is module-wide.
class UnseededRun(Rule):
    code = "TL401"
    name = "unseeded-run"
    severity = Severity.WARNING

    def check(self, ctx) -> None:
        if ctx.module.module_fact("TL401 verdict statement", _verdict_statement) != ctx.chunk.index:
            return
        verdict = ctx.module.module_wide("TL401 verdict", _verdict)
        if verdict is None or verdict.chunk.index != ctx.chunk.index:
            return
        if verdict.severity is Severity.WARNING:
            self._report_partial(ctx, verdict)
        else:
            self._report_unseeded(ctx, verdict)

    def _report_partial(self, ctx, verdict: _Verdict) -> None:
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
        ctx.report(
            verdict.node, message, evidence=evidence, severity=Severity.WARNING,
            help=f"seed {_join([_DISPLAY[library] for library in verdict.unseeded])} too, or use one helper that seeds all three "
            "(`transformers.set_seed`, `lightning.seed_everything`)",
        )

    def _report_unseeded(self, ctx, verdict: _Verdict) -> None:
        draws = []
        entry = "backward runs at module level" if isinstance(verdict.node, cst.Call) else "the script's entry point"
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
        ctx.report(
            verdict.node, message, evidence=evidence, severity=Severity.NOTE,
            help="seed torch, numpy and `random` at start-up (e.g. `transformers.set_seed(args.seed)` "
            "or `lightning.seed_everything(args.seed)`)",
        )

    MUST_FIRE = (
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
    )

    MUST_NOT_FIRE = (
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
            # the Hugging Face Trainer seeds torch, numpy and random itself
            """
            import random
            from transformers import Trainer, TrainingArguments

            random.shuffle(examples)
            trainer = Trainer(model=model, args=TrainingArguments("out", seed=1), train_dataset=ds)
            if __name__ == "__main__":
                trainer.train()
            """
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
    )


def _verdict_statement(module: ModuleAnalysis) -> int | None:
    verdict = module.module_wide("TL401 verdict", _verdict)
    return verdict.chunk.index if verdict is not None else None


def _verdict(module: ModuleAnalysis) -> _Verdict | None:
    if module.uses_hf_trainer or is_test_file(module.path):
        return None  # the Trainer seeds all three; a test suite is not a training run
    trains = bool(module.backward_calls)
    guard = _main_guard(module)
    module_level_backward = [call for call in module.backward_calls if call.scope.function is None]
    if guard is None and not trains:
        return None  # a library: its callers own the seeding
    seeded: dict[str, list[CallEvent]] = {library: [] for library in LIBRARIES}
    used: dict[str, list[tuple[CallEvent, str]]] = {library: [] for library in LIBRARIES}
    calls = list(module.all_calls())
    seed_arguments = {id(node) for call in calls if call.method == "manual_seed" for arg in call.arg_nodes for node in _walk(arg.value)}
    for call in calls:
        if not _seeds_per_process(call):
            for library in _seeds(call, module):
                seeded[library].append(call)
        drawn = _draw(call)
        if drawn is not None and not _draws_a_seed_or_port(call) and id(call.node) not in seed_arguments:
            # `generator.manual_seed(random.randint(...))` picks a random seed on purpose: not a use
            used[drawn[0]].append((call, drawn[1]))
    if trains and not used[TORCH]:
        # training draws from torch anyway: weight initialisation, dropout. Every backward call is a
        # use; the one written first is picked only if a finding quotes it (positions cost).
        used[TORCH].extend((call, "weight initialisation and dropout in training") for call in module.backward_calls)
    if any(used[library] and not seeded[library] for library in LIBRARIES):
        for library, call in _seeded_through_other_files(module, calls).items():
            seeded[library].append(call)
    if any(seeded.values()):
        unseeded = tuple(library for library in LIBRARIES if used[library] and not seeded[library])
        if not unseeded:
            return None
        first, _ = _first_use([use for library in unseeded for use in used[library]])
        return _Verdict(Severity.WARNING, first.chunk, first.node, seeded, used, unseeded)
    if not trains or (guard is None and not module_level_backward):
        return None
    if guard is not None:
        chunk, node = guard
    else:
        first = first_written(module_level_backward)
        chunk, node = first.chunk, first.node
    return _Verdict(Severity.NOTE, chunk, node, seeded, used, ())


def _seeded_through_other_files(module: ModuleAnalysis, calls: list[CallEvent]) -> dict[str, CallEvent]:
    """The libraries seeded by what the script's calls of functions from its other files run, each
    with the first such call: dinov2's `linear.py` calls `setup_and_build_model(args)`, which reaches
    `fix_random_seeds` three files away. Without this, "never seeds" was said of a seeded run."""
    found: dict[str, CallEvent] = {}
    for call in calls:
        if call.function is None or not module.summary.defined_elsewhere(call.function):
            continue
        inner = call.function.analysis(module.summary)
        for reached in calls_in(inner, None) if inner is not None else ():
            if reached.function is None and not _seeds_per_process(reached):
                for library in _seeds(reached, module):
                    found.setdefault(library, call)
    return found


def _seeds(call: CallEvent, module: ModuleAnalysis) -> tuple[str, ...]:
    """The libraries whose global generator (or a private one) this call seeds."""
    callee = call.callee or ""
    name = call.method or last_part(callee)
    if name == "manual_seed" and (call.callee is None or is_torch_name(callee)):  # also a torch.Generator
        return (TORCH,)
    if is_torch_name(callee) and name == "manual_seed_all":
        return (TORCH,)
    if callee in _GLOBAL_SEEDERS and _has_seed_argument(call):  # without one they reseed from the OS
        return (_GLOBAL_SEEDERS[callee],)
    if callee in _GENERATOR_CONSTRUCTORS and _has_seed_argument(call) and not _fixed_draw(call):
        return (_GENERATOR_CONSTRUCTORS[callee],)
    if name in SEED_ALL_HELPERS:
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
    """(library, what for) when this call draws from a generator that the library's seed controls."""
    callee, method = call.callee, call.method
    if _initialises_weights(call):
        return TORCH, "dropout" if "Dropout" in last_part(call.callee or "") else "weight initialisation"
    if callee is None:
        return (TORCH, "random tensor fill") if method in _TORCH_DRAW_METHODS else None
    head = last_part(callee)
    if callee in _GENERATOR_CONSTRUCTORS:
        return None if _has_seed_argument(call) else (_GENERATOR_CONSTRUCTORS[callee], "unseeded generator")
    if callee.startswith("numpy.random."):
        return None if head in _NUMPY_NOT_DRAWS else (NUMPY, "sampling")
    if callee.startswith("random.") and head in _RANDOM_DRAWS:
        return RANDOM, "sampling"
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


def _initialises_weights(call: CallEvent) -> bool:
    """A model built here (not wrapped, not loaded from a checkpoint) draws its initial weights."""
    result = call.result
    if MODEL not in result.tags or result.tags & {DDP, ENGINE} or result.site is None or result.site[1] is not call.node:
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


def _fixed_draw(call: CallEvent) -> bool:
    """``np.random.RandomState(1).permutation(n)``: a generator with a literal seed, used once on the spot,
    makes one fixed value (a permutation a model registers as a buffer); it seeds nothing else the run draws."""
    seed = next((arg.value for arg in call.arg_nodes if arg.keyword is None or arg.keyword.value == "seed"), None)
    statement = call.statement
    if not isinstance(seed, cst.Integer) or statement is None:
        return False
    return any(isinstance(node, cst.Attribute) and node.value is call.node for node in _walk(statement))


def _has_seed_argument(call: CallEvent) -> bool:
    for arg in call.arg_nodes:
        if arg.keyword is None or arg.keyword.value == "seed":
            return not (isinstance(arg.value, cst.Name) and arg.value.value == "None")
    return False


def _main_guard(module: ModuleAnalysis) -> tuple[ParsedChunk, cst.BaseExpression] | None:
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
