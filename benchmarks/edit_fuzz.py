"""Random typing into the rules' own examples: after every key, the editor's incremental analysis
must report exactly what a fresh analysis of the same text reports.

    .venv/bin/python -P benchmarks/edit_fuzz.py SEED [--examples 40] [--keys-per-file 12]

Each example (a rule's MUST_FIRE or MUST_NOT_FIRE project, chosen by SEED, written into a
temporary folder with its other files) is opened as a language-server document
(``DocumentState.analyse``, positions warmed as the server does after its first report), and then
edited a key at a time: a training-loop line typed a character a key below a random statement
(with that statement's indentation, one level deeper after a block's header), a random line
deleted a character a key from its end, or one character typed at a random place. After each key
the document's findings are compared with those of a new document given the same text. Prints the
keys run and every key whose findings differ (file, key, text of the edited line, both findings),
and exits 1 if any did. The same SEED replays the same keys.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
from pathlib import Path

from trainlint.analysis.registry import builtin_rules
from trainlint.analysis.settings import AnalysisSettings
from trainlint.server.documents import DocumentState
from trainlint.settings import EffectiveSettings

# Lines training code is made of: each one can start, end or move a finding of some rule.
TYPED_LINES = (
    "optimizer.zero_grad()",
    "loss = criterion(model(inputs), targets)",
    "loss.backward()",
    "optimizer.step()",
    "model.eval()",
    "model.train()",
    "with torch.no_grad():",
    "losses.append(loss)",
    "total += loss.item()",
    "outputs = model(inputs).softmax(dim=1)",
    "torch.manual_seed(0)",
    "sampler.set_epoch(epoch)",
    "x = x.to(device)",
    "return loss",
    "for batch in loader:",
    "if step % 4 == 0:",
)
STRAY_CHARACTERS = "()[]:.,=#\"' xq1\n"


def examples() -> list[tuple[str, str, dict[str, str]]]:
    """(name, train.py's text, other files) of every built-in rule's examples."""
    found = []
    for rule in builtin_rules():
        for kind in ("MUST_FIRE", "MUST_NOT_FIRE"):
            for index, example in enumerate(getattr(rule, kind, ())):
                found.append((f"{rule.code}-{kind}-{index}", example.code, example.files))
    return found


def keys(text: str, rng: random.Random, count: int) -> list[str]:
    """The texts after each of ``count`` keys typed into ``text``."""
    texts: list[str] = []
    while len(texts) < count:
        lines = text.split("\n")
        statements = [i for i, line in enumerate(lines) if line.strip() and not line.lstrip().startswith("#")]
        if not statements:
            break
        kind = rng.random()
        if kind < 0.6:  # a line typed below a statement
            at = rng.choice(statements)
            indent = lines[at][: len(lines[at]) - len(lines[at].lstrip())]
            if lines[at].rstrip().endswith(":"):
                indent += "    "
            typed = rng.choice(TYPED_LINES)
            lines.insert(at + 1, indent)
            for end in range(len(typed) + 1):
                lines[at + 1] = indent + typed[:end]
                texts.append("\n".join(lines))
        elif kind < 0.8:  # a line deleted from its end
            at = rng.choice(statements)
            for end in range(len(lines[at]) - 1, -1, -1):
                lines[at] = lines[at][:end]
                texts.append("\n".join(lines))
        else:  # one stray character
            at = rng.choice(statements)
            column = rng.randrange(len(lines[at]) + 1)
            lines[at] = lines[at][:column] + rng.choice(STRAY_CHARACTERS) + lines[at][column:]
            texts.append("\n".join(lines))
        text = texts[-1] if texts else text
    return texts[:count]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("seed", type=int)
    parser.add_argument("--examples", type=int, default=40)
    parser.add_argument("--keys-per-file", type=int, default=12)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    chosen = rng.sample(examples(), args.examples)
    settings = EffectiveSettings(AnalysisSettings())
    run = differences = reported = 0
    for name, code, files in chosen:
        with tempfile.TemporaryDirectory() as folder:
            root = Path(folder)
            for relative, text in files.items():
                (root / relative).parent.mkdir(parents=True, exist_ok=True)
                (root / relative).write_text(text, encoding="utf-8")
            path = root / "train.py"
            path.write_text(code, encoding="utf-8")
            document = DocumentState(path.as_uri(), path)
            document.analyse(code, 0, settings)
            document.warm_positions(document.edits)
            for version, text in enumerate(keys(code, rng, args.keys_per_file), 1):
                edited = document.analyse(text, version, settings).findings
                fresh = DocumentState(path.as_uri(), path).analyse(text, 0, settings).findings
                run += 1
                reported += bool(fresh)
                if edited != fresh:
                    differences += 1
                    print(f"{name} key {version}: incremental {[(f.code, f.line) for f in edited]} "
                          f"!= fresh {[(f.code, f.line) for f in fresh]}")
    print(f"seed {args.seed}: {args.examples} examples, {run} keys ({reported} with findings), {differences} differences")
    return 1 if differences else 0


if __name__ == "__main__":
    sys.exit(main())
