"""A long top-level function or class is parsed in pieces (so that LibCST's parser never holds the
GIL for long while the language server's event loop waits); the tree must be the one LibCST gives
for the whole text, whatever the body holds at the cuts."""

from __future__ import annotations

import libcst as cst
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trainlint.analysis.parsing import PIECE_LINES, PIECES_FROM_LINES, _parse_in_pieces, parse_module

# Body statements as real training scripts write them, each indented for the body of `main()`;
# several hold what a cut must not fall into: strings and brackets whose lines look like body
# statements, decorators, `else:` at body level, comments indented deeper after a nested block.
SNIPPETS = [
    "    args = parse_args()\n",
    "    accelerator = Accelerator(gradient_accumulation_steps=args.gradient_accumulation_steps)\n",
    "    x = 1; y = 2\n",
    "    logger.info(\n        \"***** Running training *****\"\n    )\n",
    "    optimizer = torch.optim.AdamW(\n    params,\n        lr=args.learning_rate,\n    )\n",
    "    help_text = \"\"\"\n    not_a_statement = 1\n    def nor_this():\n    \"\"\"\n",
    "    total = first + \\\n        second\n",
    "\n",
    "    # Train!\n",
    "        # a comment indented deeper than the body\n",
    "    for step, batch in enumerate(train_dataloader):\n        loss = model(batch).loss\n        accelerator.backward(loss)\n",
    "    for epoch in range(3):\n        train_one_epoch()\n\n        # deeper comment after the loop's body\n",
    "    if accelerator.is_main_process:\n        save()\n    else:\n        wait()\n",
    "    try:\n        resume()\n    except FileNotFoundError:\n        pass\n    finally:\n        cleanup()\n",
    "    @torch.no_grad()\n    def evaluate(model):\n        return model.eval()\n",
    "    @functools.lru_cache\n    @staticmethod\n    def helper():\n        pass\n",
    "    with torch.autocast(\"cuda\"):\n        out = model(x)\n",
    "    class Batch:\n        size: int = 4\n",
    "    weights = {\n        \"a\": 1,\n    \"b\": 2,\n    }\n",
    "    global_step += 1\n",
    "\t# a comment indented with a tab\n",
    "    w = [\n        1,\n# a column-0 comment inside brackets\n    ]\n",
    "    match command:\n        case \"train\":\n            run()\n",
    "    if resume: load()\n",
    "    z = 1  # a trailing comment\n",
    "    async def fetch():\n        await source()\n",
]


def _function(snippets: list[str], header: str = "def main(args):\n", trailer: str = "\n\n") -> str:
    body = "".join(snippets)
    return header + "    \"\"\"The whole run.\"\"\"\n" + body + "    return global_step\n" + trailer


def _long(count: int) -> list[str]:
    return [SNIPPETS[(index * 7) % len(SNIPPETS)] for index in range(count)]


def test_a_long_training_function_is_parsed_in_pieces_into_libcsts_own_tree():
    text = _function(_long(400))
    assert text.count("\n") >= PIECES_FROM_LINES
    pieces = _parse_in_pieces(text)
    assert pieces is not None, "the body has places to cut"
    assert pieces.deep_equals(cst.parse_module(text))
    assert pieces.code == text
    assert parse_module(text).deep_equals(cst.parse_module(text))


@pytest.mark.parametrize("header", [
    "@click.command()\n@click.option(\"--seed\")\ndef main(\n    seed,\n):\n",
    "# Copyright notice above the function\n\nasync def main(args) -> None:\n",
    "class Trainer(BaseTrainer):\n",
])
def test_decorated_multi_line_and_class_headers_and_comments_above_them(header):
    text = _function(_long(300), header=header, trailer="\n# a comment after the function\n")
    pieces = _parse_in_pieces(text)
    assert pieces is not None
    assert pieces.deep_equals(cst.parse_module(text))


def test_text_that_is_not_one_long_definition_is_parsed_whole():
    two = _function(_long(200)) + "x = 1\n"
    assert _parse_in_pieces(two) is None
    one_liner = "def f(): return 1\n" + "\n" * PIECES_FROM_LINES
    assert _parse_in_pieces(one_liner) is None
    no_cuts = "def main():\n" + "\n".join(f"    step_{n}()\n" for n in range(PIECES_FROM_LINES))  # blank line between all
    assert _parse_in_pieces(no_cuts) is None
    assert parse_module(no_cuts).deep_equals(cst.parse_module(no_cuts))


def test_a_syntax_error_anywhere_in_the_body_is_libcsts_own_error():
    snippets = _long(300)
    snippets[150] = "    running.append(\n"
    text = _function(snippets)
    with pytest.raises(cst.ParserSyntaxError) as whole:
        cst.parse_module(text)
    with pytest.raises(cst.ParserSyntaxError) as ours:
        parse_module(text)
    assert (ours.value.raw_line, ours.value.raw_column, str(ours.value)) == (whole.value.raw_line, whole.value.raw_column, str(whole.value))


@settings(max_examples=40, deadline=None)
@given(st.lists(st.sampled_from(SNIPPETS), min_size=PIECE_LINES, max_size=2 * PIECES_FROM_LINES))
def test_any_mix_of_body_statements_gives_libcsts_tree(snippets):
    text = _function(snippets)
    try:
        whole = cst.parse_module(text)
    except cst.ParserSyntaxError:
        return
    pieces = _parse_in_pieces(text)
    if pieces is not None:
        assert pieces.deep_equals(whole)
        assert pieces.code == text
