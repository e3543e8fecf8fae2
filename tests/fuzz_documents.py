"""Hypothesis strategies for the fuzz suites: training scripts (the bundled buggy examples, cut,
shuffled and half-typed) dressed in what breaks line and position handling — the characters
str.splitlines() takes for line breaks, CRLF and CR line ends, a byte-order mark, tabs, non-BMP
text — and random edits to them.

TRAINLINT_FUZZ_EXAMPLES=N runs N edit sequences through the server and N/4 `--fix` inputs (the
default is a short run for `make test`); the long run is `TRAINLINT_FUZZ_EXAMPLES=20000`.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from trainlint.analysis.chunking import split_statements

FUZZ_EXAMPLES = int(os.environ.get("TRAINLINT_FUZZ_EXAMPLES", "0"))
LONG_RUN = FUZZ_EXAMPLES > 0
EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "buggy"
SOURCES = [path.read_text(encoding="utf-8") for path in sorted(EXAMPLES.glob("*.py"))]

# Characters str.splitlines() breaks at and LSP does not; then other text that trips position code.
NOT_LINE_BREAKS = ["\x0c", "\x0b", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029"]
AWKWARD = [*NOT_LINE_BREAKS, "\t", "é", "日本", "😋", "𝔘𝔫𝔦", "\u200b", "\ufeff", "\\"]
NEWLINES = ["\n", "\r\n", "\r"]
# Half-typed and pasted code.
SNIPPETS = [
    "(", ")", "[", "]", "{", "}", ":", "'", '"', '"""', "#", "\\\n", "    ", ",", ".", "=",
    "loss.backward()\n", "history.append(loss)\n", "    optimizer.zero_grad()\n", "optimizer.step()\n",
    "\ndef helper(model, x):\n    return model(x)\n", "\nclass Net(nn.Module):\n    pass\n",
    "with torch.no_grad():\n    ", "for x, y in loader:\n    ", "import torch\n", "@torch.no_grad()\n",
    "model.eval()\n", "total += criterion(model(x), y)\n", "loader = DataLoader(ds, batch_size=8)\n",
    "if epoch % 2 == 0:\n    ", "elif ", "else:\n", "def f(", "lambda x: ", "async def g():\n    await ",
    "x = [i for i in", "print(f\"{loss.item():.3f}\")\n", "# trainlint: ignore[TL101]", "  # noqa: TL301",
]

FUZZ_SETTINGS = settings(
    max_examples=FUZZ_EXAMPLES or 24,
    deadline=None,
    derandomize=not LONG_RUN,  # `make test` runs the same short sequence every time
    database=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture],
)
FIX_SETTINGS = settings(FUZZ_SETTINGS, max_examples=FUZZ_EXAMPLES // 4 if LONG_RUN else 12)

_LINE_BREAK = re.compile(r"\r\n|\r|\n")


def splits_a_line_break(text: str, offset: int) -> bool:
    """Whether an offset falls between the \\r and the \\n of one line break (no LSP position names it)."""
    return 0 < offset < len(text) and text[offset - 1] == "\r" and text[offset] == "\n"


def clean_offset(text: str, offset: int) -> int:
    return offset + 1 if splits_a_line_break(text, offset) else offset


def rarely(one_in: int):
    """True once in about ``one_in`` draws (Hypothesis favours small integers: 0 of 0..n far more often)."""
    return st.sampled_from([False] * (one_in - 1) + [True])


CHUNKS = [[chunk.text for chunk in split_statements(source)] for source in SOURCES]


def _comment(draw) -> str:
    return "  # " + "".join(draw(st.lists(st.sampled_from(AWKWARD), min_size=1, max_size=4)))


@st.composite
def scripts(draw, max_statements: int = 40) -> str:
    """A training script with LF line ends: a run of an example's top-level statements under its
    imports, statements dropped or pasted twice, awkward characters in comments, and now and then
    half-typed code (most scripts parse, so that their fixes are exercised too)."""
    chunks = draw(st.sampled_from(CHUNKS))
    imports = [chunk for chunk in chunks if chunk.lstrip().startswith(("import ", "from "))]
    start = draw(st.integers(0, len(chunks) - 1))
    body = chunks[start:start + draw(st.integers(1, max_statements))]
    statements = [*imports, *(chunk for chunk in body if chunk not in imports)]
    for _ in range(draw(st.integers(0, 2))):
        at = draw(st.integers(0, len(statements)))
        if draw(st.booleans()):
            del statements[at:at + 1]
        else:
            statements.insert(at, draw(st.sampled_from(chunks)))
    lines = "".join(statements).split("\n")
    for _ in range(draw(st.integers(0, 3))):
        at = draw(st.integers(0, len(lines) - 1))
        if lines[at].strip() and not lines[at].rstrip().endswith("\\"):
            lines[at] += _comment(draw)
    if draw(rarely(6)):
        lines.insert(draw(st.integers(0, len(lines))), draw(st.sampled_from(SNIPPETS)).rstrip("\n"))
    return "\n".join(lines)


# What Python reads as whitespace, dressed differently: junk before a form feed in a line's
# leading whitespace (Python counts indentation after the last one), a line holding only a
# backslash before a statement, spaces or form feeds at a line's end, tabs for indentation, line
# ends mixed line by line.
_FORM_FEED_PREFIXES = ["\f", " \f", "\t\f", "\f\f", "    \f"]
_STATEMENT_WORDS = ("def ", "for ", "class ", "if ", "with ", "@", "return ", "while ")


@st.composite
def dressed(draw, text: str) -> str:
    """``text`` (LF line ends) with the same program dressed in odd whitespace; the caller checks
    that Python reads it alike (a form feed inside a multi-line string would change the string)."""
    lines = text.split("\n")
    if draw(rarely(4)):
        lines = [re.sub(r"^(?:    )+", lambda match: "\t" * (len(match.group()) // 4), line) for line in lines]
    out: list[str] = []
    for line in lines:
        code = line.lstrip(" \t")
        indent = line[: len(line) - len(code)]
        if code.startswith(_STATEMENT_WORDS) and draw(rarely(4)):
            out.append(indent + "\\")
        if code and draw(rarely(3)):
            line = draw(st.sampled_from(_FORM_FEED_PREFIXES)) + line
        if code and not code.endswith("\\") and draw(rarely(8)):
            line += draw(st.sampled_from([" ", "\t", "\f", " \f "]))
        out.append(line)
    if draw(st.booleans()):
        newline = draw(st.sampled_from(NEWLINES))
        return newline.join(out)
    ends = [draw(st.sampled_from(NEWLINES)) for _ in out[:-1]]
    return "".join(line + end for line, end in zip(out, ends)) + out[-1]


@st.composite
def documents(draw) -> str:
    """A script as an editor may hold it: its own line ends, maybe a byte-order mark, and maybe
    awkward characters anywhere (in code too, where Python rejects most of them)."""
    text = draw(scripts(max_statements=12))
    newline = draw(st.sampled_from(NEWLINES))
    text = text.replace("\n", newline)
    for _ in range(draw(st.sampled_from([0, 0, 0, 1, 2]))):
        at = clean_offset(text, draw(st.integers(0, len(text))))
        text = text[:at] + draw(st.sampled_from(AWKWARD)) + text[at:]
    if draw(rarely(10)):
        text = "\ufeff" + text
    return text


def inserted_texts():
    return st.one_of(
        st.sampled_from(SNIPPETS),
        st.sampled_from(AWKWARD),
        st.sampled_from(NEWLINES),
        st.lists(st.sampled_from(["a", "x", " ", "(", ")", "\n", "\r", "\r\n", *AWKWARD]), max_size=8).map("".join),
    )


@st.composite
def edits(draw, text: str) -> tuple[int, int, str]:
    """(start, end, new text) in code points, anywhere in the text (uniformly: Hypothesis' own
    integers cluster at the ends), never between the \r and \n of a line break."""
    place = draw(st.randoms(use_true_random=False))
    start = clean_offset(text, place.randint(0, len(text)))
    end = clean_offset(text, min(len(text), start + draw(st.sampled_from([0, 0, 1, 2, 5, 20, 80]))))
    return start, end, draw(inserted_texts())
