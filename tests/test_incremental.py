"""What the server shows after many edits equals a fresh analysis of the same text.

The server re-parses only the statements an edit touched and keeps the rest; this drives its
document state through random edits of the kinds people make mid-typing (insertions, deletions,
pasted code, unbalanced brackets, non-ASCII) and compares, after each batch, with a fresh run.
"""

from __future__ import annotations

import os
import random
from pathlib import Path

from trainlint.analysis.engine import analyze_source
from trainlint.analysis.settings import AnalysisSettings
from trainlint.server.documents import DocumentState
from trainlint.server.settings import EffectiveSettings

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
SNIPPETS = [
    "\n", "(", ")", "[", "]", "{", "}", ":", "'", '"', '"""', "#", "\\\n", "    ", "é", "😋", "日本",
    "loss.backward()\n", "history.append(loss)\n", "    optimizer.zero_grad()\n",
    "\ndef helper(model, x):\n    return model(x)\n", "\nclass Net(nn.Module):\n    pass\n",
    "with torch.no_grad():\n    ", "for x, y in loader:\n    ", "import torch\n", "@torch.no_grad()\n",
    "model.eval()\n", "total += criterion(model(x), y)\n",
]
SETTINGS = EffectiveSettings(AnalysisSettings(), frozenset())
# The suite runs a short sequence; set TRAINLINT_EDIT_BATCHES=300 for a long soak (about 2,000 edits at random).
BATCHES = int(os.environ.get("TRAINLINT_EDIT_BATCHES", "4"))


def _edit(text: str, rng: random.Random) -> str:
    position = rng.randrange(len(text) + 1)
    kind = rng.random()
    if kind < 0.45:
        return text[:position] + rng.choice(SNIPPETS) + text[position:]
    if kind < 0.8:
        return text[:position] + text[position + rng.randint(1, 40):]
    start = rng.randrange(len(text) + 1)
    pasted = text[start:start + rng.randint(1, 200)]
    return text[:position] + pasted + text[position:]


def _fresh(text: str, path: str) -> list:
    return analyze_source(text, path, SETTINGS.analysis)


def test_random_edits_give_what_a_fresh_analysis_gives():
    rng = random.Random(20261130)
    sources = sorted((EXAMPLES / "buggy").glob("*.py"))
    edits_done = 0
    for round_index in range(BATCHES):
        source = sources[round_index % len(sources)]
        text = source.read_text(encoding="utf-8")
        state = DocumentState(source.as_uri(), source)
        state.analyse(text, 1, SETTINGS)
        for batch in range(2):
            for _ in range(rng.randint(1, 8)):
                text = _edit(text, rng)
                edits_done += 1
                if rng.random() < 0.3:  # the editor sometimes asks mid-batch, too
                    state.analyse(text, batch, SETTINGS)
            incremental = state.analyse(text, batch + 100, SETTINGS).findings
            assert incremental == _fresh(text, str(source)), f"{source.name}, batch {batch}"
    assert edits_done >= BATCHES * 2
