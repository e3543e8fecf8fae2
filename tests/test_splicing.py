"""Edits inside a long function re-parse only the statement they touch, and give what a fresh analysis
of the same text gives: the same findings, the same positions, the same local syntax errors."""

from __future__ import annotations

import random
import re
import textwrap

import libcst as cst
import pytest

from trainlint.analysis import engine, parsing
from trainlint.analysis.engine import findings_for, select_rules
from trainlint.analysis.flow import ScopeAnalysis
from trainlint.analysis.module import ModuleAnalysis
from trainlint.analysis.settings import AnalysisSettings
from trainlint.analysis.tree import walk

SETTINGS = AnalysisSettings()
RULES = select_rules(SETTINGS)

# The shape of diffusers' training scripts: the whole run inside one long main().
STEP = textwrap.indent(textwrap.dedent(
    """\
    with accelerator.accumulate(unet):
        latents = vae.encode(batch["pixel_values_{n}"].to(weight_dtype)).latent_dist.sample()
        latents = latents * vae.config.scaling_factor
        noise = torch.randn_like(latents)
        if args.noise_offset:
            noise += args.noise_offset * torch.randn((latents.shape[0], 4, 1, 1), device=latents.device)
        timesteps = torch.randint(0, 1000, (latents.shape[0],), device=latents.device)
        model_pred = unet(latents + noise, timesteps, batch["input_ids_{n}"]).sample
        loss = F.mse_loss(model_pred.float(), noise.float(), reduction="mean")
        history_{n}.append(loss)

        accelerator.backward(loss)
        optimizer.step()
        optimizer.zero_grad()
    """
), " " * 12)


def _script(steps: int = 40) -> str:
    body = "".join(STEP.replace("{n}", str(n)) for n in range(steps))
    histories = "".join(f"    history_{n} = []\n" for n in range(steps))
    return (
        "import torch\nimport torch.nn.functional as F\nfrom torch.utils.data import DataLoader\n\n\n"
        "def main(args, unet, vae, accelerator, optimizer, weight_dtype, dataset):\n"
        "    train_dataloader = DataLoader(dataset, batch_size=4)\n"
        f"{histories}"
        "    for epoch in range(args.num_train_epochs):\n"
        "        for step, batch in enumerate(train_dataloader):\n"
        f"{body}"
        "    return unet\n\n\n"
        'if __name__ == "__main__":\n    main(*setup())\n'
    )


def _key(findings):
    return [(f.line, f.column, f.end_line, f.end_column, f.code, f.message, f.evidence, f.fix) for f in findings]


def _shape(chunk) -> list:
    """Every node of a chunk's tree with its position, in tree order: equal trees, equal positions."""
    positions = chunk.positions()
    return [(type(node).__name__, positions.get(node)) for node in walk(chunk.module)]


@pytest.fixture
def parsed_texts(monkeypatch):
    """The sizes (in lines) of the texts LibCST is asked to parse."""
    sizes: list[int] = []
    real = cst.parse_module

    def counting(text, *args, **kwargs):
        sizes.append(text.count("\n") + 1)
        return real(text, *args, **kwargs)

    monkeypatch.setattr(parsing.cst, "parse_module", counting)
    return sizes


def test_a_keystroke_in_a_long_main_parses_a_few_lines_and_matches_a_fresh_analysis(parsed_texts):
    text = _script()
    module = ModuleAnalysis(text, "train.py")
    findings_for(module, SETTINGS, RULES)
    main = next(chunk for chunk in module.chunks if chunk.chunk.text.lstrip().startswith("def main"))
    assert main.chunk.line_count > 500
    parsed_texts.clear()
    edited = text.replace("latents * vae.config.scaling_factor", "latents * vae.config.scaling_factors", 1)
    module = module.updated(edited)
    findings = findings_for(module, SETTINGS, RULES)
    assert parsed_texts and max(parsed_texts) < 10, f"parsed {parsed_texts} lines: the whole function again"
    fresh = ModuleAnalysis(edited, "train.py")
    assert _key(findings) == _key(findings_for(fresh, SETTINGS, RULES))
    assert [f.code for f in findings].count("TL101") == 40


def test_a_line_cleared_in_a_block_is_re_parsed_with_the_next_statement_not_the_block(parsed_texts):
    """The emptied line is the next statement's leading line: the two are parsed again, not the
    ``with`` block around them (nor main())."""
    text = _script()
    module = ModuleAnalysis(text, "train.py")
    findings_for(module, SETTINGS, RULES)
    parsed_texts.clear()
    # the statement's text selected and deleted, its indentation left
    edited = text.replace("                noise = torch.randn_like(latents)\n", " " * 16 + "\n", 1)
    module = module.updated(edited)
    findings = findings_for(module, SETTINGS, RULES)
    assert parsed_texts and max(parsed_texts) < 10, f"parsed {parsed_texts} lines: the block around the line"
    fresh = ModuleAnalysis(edited, "train.py")
    assert _key(findings) == _key(findings_for(fresh, SETTINGS, RULES))
    main, fresh_main = (next(c for c in m.chunks if c.chunk.text.lstrip().startswith("def main")) for m in (module, fresh))
    assert _shape(main) == _shape(fresh_main)


def test_random_edits_deep_inside_main_match_a_fresh_analysis_and_its_positions():
    rng = random.Random(1201)
    text = _script(12)
    module = ModuleAnalysis(text, "train.py")
    findings_for(module, SETTINGS, RULES)
    original = text
    # what typing does: characters, brackets, Enter (the editor indents the new line), deletions
    snippets = ["x", "_", " ", "(", ")", ":", "loss.item()", "#", "'", "ENTER", "optimizer.zero_grad()ENTER"]
    parsed = 0
    for step in range(150):
        if step % 5 == 0:
            text = original  # a fresh start, so that broken and whole states both come up
        lines = text.split("\n")
        candidates = [i for i, line in enumerate(lines) if line.startswith("                ")]
        index = rng.choice(candidates)
        line = lines[index]
        indent = line[: len(line) - len(line.lstrip())]
        # mostly where code is typed, sometimes inside the indentation
        column = rng.randrange(len(indent), len(line) + 1) if rng.random() < 0.85 else rng.randrange(len(line) + 1)
        if rng.random() < 0.7:
            lines[index] = line[:column] + rng.choice(snippets).replace("ENTER", "\n" + indent) + line[column:]
        else:
            lines[index] = line[:column] + line[column + rng.randint(1, 6):]
        text = "\n".join(lines)
        module = module.updated(text)
        findings = findings_for(module, SETTINGS, RULES)
        fresh = ModuleAnalysis(text, "train.py")
        assert _key(findings) == _key(findings_for(fresh, SETTINGS, RULES))
        # an unclosed bracket can make a fresh split put the next top-level statement into main()'s
        # chunk, where the edited document keeps it apart; the findings above are equal either way
        for chunk, fresh_chunk in zip(module.chunks, fresh.chunks):
            if chunk.chunk != fresh_chunk.chunk:
                continue
            assert chunk.broken == fresh_chunk.broken
            if chunk.module is not None and fresh_chunk.module is not None and chunk.chunk.line_count > 100:
                assert _shape(chunk) == _shape(fresh_chunk)
                parsed += 1
    # a few states hold two broken lines (edits pile up between resets): main() does not parse then
    assert parsed > 75, "most edits left main() parsed, whole or with a blanked line"


def test_a_long_run_of_enters_and_deleted_lines_keeps_every_later_position_as_a_fresh_parse_gives_it():
    """Enter moves every later line of main(): the move is applied to a position when it is read, and
    all of them at once every few dozen moves. Positions read between moves (the findings' and the
    next splice's) and never read must both come out as a fresh parse puts them."""
    rng = random.Random(1202)
    text = _script(8)
    module = ModuleAnalysis(text, "train.py")
    findings_for(module, SETTINGS, RULES)
    for step in range(80):
        lines = text.split("\n")
        candidates = [i for i, line in enumerate(lines) if line.startswith("                ")]
        index = rng.choice(candidates)
        if step % 4 == 3 and not lines[index].strip():
            del lines[index]  # an empty line removed: later lines move up
        else:
            indent = lines[index][: len(lines[index]) - len(lines[index].lstrip())]
            lines.insert(index + 1, indent)  # Enter at the end of a line, the new line indented
        text = "\n".join(lines)
        module = module.updated(text)
        findings = findings_for(module, SETTINGS, RULES)
        fresh = ModuleAnalysis(text, "train.py")
        assert _key(findings) == _key(findings_for(fresh, SETTINGS, RULES)), step
        main, fresh_main = (next(c for c in m.chunks if c.chunk.text.lstrip().startswith("def main")) for m in (module, fresh))
        assert main.module.code == main.tree_text(), step
        if step % 10 == 9 or step > 60:
            assert _shape(main) == _shape(fresh_main), step


_BLOCK_THEN_STATEMENTS = (
    "def main(args):\n    x = 1\n    if args.debug:\n        y = 2\n        # the block's last line: a comment\n    z = 3\n"
    + "".join(f"    w{i} = {i}\n" for i in range(5))
)


@pytest.mark.parametrize("edit", [
    pytest.param(lambda text: text.replace("    if args.debug:", "    if args.debugs:"), id="the header of a block that ends in a comment"),
    pytest.param(lambda text: text.replace("    if args.debug:\n", "    if args.debug:\n        \n"), id="Enter after the header"),
    pytest.param(lambda text: text.replace("        y = 2\n", "        y = 2\n        \n"), id="Enter after the block's last statement"),
    pytest.param(lambda text: text.replace("    z = 3\n", "        # a comment typed below the block\n    z = 3\n"), id="a comment as deep as the block after it"),
])
def test_lines_a_block_owns_after_its_last_statement_stay_in_the_tree_where_a_fresh_parse_puts_them(edit):
    """LibCST gives the blank and comment lines after a block's last statement, indented as deep as
    the block, to that block: an edit next to them re-parses them with it, so the tree keeps every
    line of the text and each node's position is a fresh parse's."""
    module = ModuleAnalysis(_BLOCK_THEN_STATEMENTS, "train.py")
    findings_for(module, SETTINGS, RULES)
    module.chunks[0].positions()
    edited = edit(_BLOCK_THEN_STATEMENTS)
    assert edited != _BLOCK_THEN_STATEMENTS
    chunk = module.updated(edited).chunks[0]
    assert chunk.module.code == edited
    assert _shape(chunk) == _shape(ModuleAnalysis(edited, "train.py").chunks[0])


def test_a_broken_line_is_blanked_alone_and_a_broken_call_over_two_lines_as_a_whole():
    """Python names the line; blanked alone when that compiles, else the logical line holding it."""
    one_line = "def main():\n    x = 1\n    loss = model(x\n    y = 2\n"
    blanked, first, last, _ = parsing.localised(one_line)
    assert (first, last) == (3, 3) and blanked == "def main():\n    x = 1\n    pass\n    y = 2\n"
    two_lines = "def main():\n    x = foo(a,\n            b c)\n    y = 1\n"
    blanked, first, last, _ = parsing.localised(two_lines)
    assert (first, last) == (2, 3) and blanked == "def main():\n    pass\n\n    y = 1\n"


def test_a_half_typed_line_is_a_local_syntax_error_and_the_rest_of_main_keeps_its_findings():
    text = _script(6)
    module = ModuleAnalysis(text, "train.py")
    before = findings_for(module, SETTINGS, RULES)
    assert [f.code for f in before].count("TL101") == 6
    lines = text.split("\n")
    row = next(i for i, line in enumerate(lines) if "history_3.append(loss)" in line)
    lines.insert(row + 1, "                running.append(")
    broken = "\n".join(lines)
    module = module.updated(broken)
    findings = findings_for(module, SETTINGS, RULES)
    syntax = [f for f in findings if f.code == "TL000"]
    assert [f.line for f in syntax] == [row + 2], "the error is on the half-typed line"
    assert [f.code for f in findings].count("TL101") == 6, "the rest of main() keeps its findings"
    assert _key(findings) == _key(findings_for(ModuleAnalysis(broken, "train.py"), SETTINGS, RULES))
    # closing the bracket makes it one statement again
    fixed = broken.replace("running.append(", "running.append(loss.item())")
    module = module.updated(fixed)
    assert not [f for f in findings_for(module, SETTINGS, RULES) if f.code == "TL000"]


def test_a_key_typed_on_a_line_that_stays_broken_compiles_main_once(monkeypatch):
    """Python compiles the function to say where it is broken; the blanked text it then checks is
    the one the previous key's analysis already compiled."""
    text = _script(6)
    lines = text.split("\n")
    row = next(i for i, line in enumerate(lines) if "history_3.append(loss)" in line)
    lines.insert(row + 1, "                running.append(loss")
    module = ModuleAnalysis("\n".join(lines), "train.py")
    findings_for(module, SETTINGS, RULES)
    compiled: list[str] = []
    real = parsing.check_syntax
    monkeypatch.setattr(parsing, "check_syntax", lambda source: (compiled.append(source), real(source))[1])
    lines[row + 1] += ".item("
    typed = "\n".join(lines)
    module = module.updated(typed)
    findings = findings_for(module, SETTINGS, RULES)
    assert len(compiled) == 1, f"{len(compiled)} compilations of main()"
    assert [f.line for f in findings if f.code == "TL000"] == [row + 2]
    assert _key(findings) == _key(findings_for(ModuleAnalysis(typed, "train.py"), SETTINGS, RULES))


def test_a_key_in_main_with_a_bytes_literal_and_non_ascii_text_compiles_nothing_and_a_new_rejected_literal_is_found(monkeypatch):
    """A statement holding a bytes literal and non-ASCII text may hold a literal Python rejects, which
    only compiling it tells; after an edit only the lines parsed again can hold a new one."""
    lines = _script(6).split("\n")
    row = next(i for i, line in enumerate(lines) if "history_3.append(loss)" in line)
    indent = lines[row][: len(lines[row]) - len(lines[row].lstrip())]
    lines[row:row] = [indent + 'header = b"PNG"  # l\u2019en-t\u00eate']
    row += 1
    module = ModuleAnalysis("\n".join(lines), "train.py")
    findings_for(module, SETTINGS, RULES)
    compiled: list[str] = []
    real = parsing.check_syntax
    monkeypatch.setattr(parsing, "check_syntax", lambda source: (compiled.append(source), real(source))[1])
    lines[row] = lines[row].replace("history_3", "history_3x")  # the line still parses
    module = module.updated("\n".join(lines))
    findings_for(module, SETTINGS, RULES)
    assert compiled == [], "a key whose lines hold no risky literal compiles nothing"
    lines.insert(row + 1, indent + 'marker = b"t\u00eate"')  # bytes with non-ASCII text: Python rejects it
    typed = "\n".join(lines)
    module = module.updated(typed)
    findings = findings_for(module, SETTINGS, RULES)
    assert [f.code for f in findings if f.code == "TL000"] == ["TL000"]
    assert _key(findings) == _key(findings_for(ModuleAnalysis(typed, "train.py"), SETTINGS, RULES))


def test_an_edit_that_dedents_to_the_top_level_is_not_spliced():
    text = _script(3)
    module = ModuleAnalysis(text, "train.py")
    findings_for(module, SETTINGS, RULES)
    edited = re.sub(r"\n                history_1\.append\(loss\)", "\nhistory_1.append(loss)", text, count=1)
    module = module.updated(edited)
    assert _key(findings_for(module, SETTINGS, RULES)) == _key(findings_for(ModuleAnalysis(edited, "train.py"), SETTINGS, RULES))



def test_text_inserted_at_the_start_of_a_line_is_re_parsed_with_the_line_above():
    # found by the server fuzzer: one change edits a line and inserts "(" at the start of the next;
    # the re-parsed region ended at the edited line, so the tree kept the old next line
    text = (
        "def parse_args():\n"
        "    parser = argparse.ArgumentParser()\n"
        '    parser.add_argument("--out", default="model.pt")\n'
        "    return parser.parse_args()\n"
        "\n"
        "import argparse\n"
    )
    module = ModuleAnalysis(text, "train.py")
    findings_for(module, SETTINGS, RULES)
    edited = text.replace('default="model.pt")\n    return', 'default\f="model.pt")\n(    return')
    incremental = findings_for(module.updated(edited), SETTINGS, RULES)
    fresh = findings_for(ModuleAnalysis(edited, "train.py"), SETTINGS, RULES)
    assert _key(incremental) == _key(fresh)
    assert [(finding.code, finding.line) for finding in fresh] == [("TL000", 4)]


@pytest.mark.parametrize("edit", [
    lambda text: text.replace("    return unet\n", "(    return unet\n", 1),
    lambda text: text.replace("    return unet\n", "x = 1\n    return unet\n", 1),  # a new top-level statement
])
def test_edits_that_start_a_statement_at_column_0_inside_main_match_a_fresh_analysis(edit):
    text = _script(3)
    module = ModuleAnalysis(text, "train.py")
    findings_for(module, SETTINGS, RULES)
    edited = edit(text)
    assert edited != text
    incremental = findings_for(module.updated(edited), SETTINGS, RULES)
    fresh = findings_for(ModuleAnalysis(edited, "train.py"), SETTINGS, RULES)
    assert _key(incremental) == _key(fresh)


def test_facts_memoised_per_node_are_handed_on_for_the_statements_an_edit_did_not_touch():
    text = _script(4)
    module = ModuleAnalysis(text, "train.py")
    findings_for(module, SETTINGS, RULES)
    main = next(chunk for chunk in module.chunks if chunk.chunk.text.lstrip().startswith("def main"))
    statements = [node for node in walk(main.module) if isinstance(node, cst.SimpleStatementLine)]
    memo = main.node_memo("facts of a statement")
    for node in statements:
        memo[node] = main.code_for(node)
    copies = [node for node in statements if "latents * vae.config.scaling_factor" in memo[node]]
    edited = min(copies, key=lambda node: main.range_of(node)[0])  # the first copy: the one edited below
    module = module.updated(text.replace("latents * vae.config.scaling_factor", "latents * vae.config.scaling_factors", 1))
    kept = module.chunks[main.index].node_memo("facts of a statement")
    assert edited not in kept
    assert [node for node in statements if node is not edited] == list(kept)  # the others, still in the tree


def _typed_key_by_key(text: str, after: str, indent: str, statement: str):
    """Each text as a statement is typed on a new line below the first line holding ``after``."""
    lines = text.split("\n")
    row = next(i for i, line in enumerate(lines) if after in line) + 1
    lines.insert(row, indent)
    yield "\n".join(lines)
    for ch in statement:
        lines[row] += ch
        yield "\n".join(lines)


def test_keys_typed_on_a_line_that_stays_broken_walk_nothing_again_and_match_a_fresh_analysis(monkeypatch):
    """While a statement is half typed, its line is blanked in the tree: each key leaves the analysed
    code as it was, so main()'s flow is not walked again, no rule checks a statement again (those
    that read the whole module included), and the findings are a fresh analysis'."""
    walks: list[str] = []
    real = ScopeAnalysis.of_function.__func__
    monkeypatch.setattr(ScopeAnalysis, "of_function", classmethod(
        lambda cls, info, summary: (walks.append(info.name), real(cls, info, summary))[1]
    ))
    checks: list[str] = []
    real_context = engine.RuleContext

    def counted_context(module, chunk, rule_class, settings):
        checks.append(rule_class.code)
        return real_context(module, chunk, rule_class, settings)

    monkeypatch.setattr(engine, "RuleContext", counted_context)
    texts = list(_typed_key_by_key(_script(6), "history_3.append(loss)", " " * 16, 'print(f"loss={loss.item():.4f}")'))
    module = ModuleAnalysis(texts[0], "train.py")
    findings_for(module, SETTINGS, RULES)
    walked_while_broken, checked_while_broken, broken_keys = 0, 0, 0
    for text in texts[1:]:
        walks.clear()
        checks.clear()
        was_broken = module.chunks[-2].broken is not None
        module = module.updated(text)
        findings = findings_for(module, SETTINGS, RULES)
        if was_broken and module.chunks[-2].broken is not None:
            broken_keys += 1
            walked_while_broken += walks.count("main")
            checked_while_broken += len(checks)
        assert _key(findings) == _key(findings_for(ModuleAnalysis(text, "train.py"), SETTINGS, RULES)), text.split("\n")[-8:]
    assert broken_keys > 20 and walked_while_broken == 0 and checked_while_broken == 0
    assert [f.code for f in findings].count("TL101") == 6


def test_a_fix_that_quotes_a_broken_line_follows_each_key_typed_on_it():
    """A fix that wraps a loop holds the text of its lines: a key typed on a broken line inside the
    loop changes the fix, though not the analysed tree."""
    script = textwrap.dedent(
        """\
        import torch


        def main(model, loader, val_loader, optimizer):
            for x, y in loader:
                loss = model(x).sum()
                loss.backward()
                optimizer.step()
                optimizer.zero_grad()
            model.eval()
            for x, y in val_loader:
                out = model(x)
                print(out.sum().item())
        """
    )
    texts = list(_typed_key_by_key(script, "out = model(x)", " " * 8, "total = sum(out.tolist("))
    module = ModuleAnalysis(texts[0], "eval.py")
    findings_for(module, SETTINGS, RULES)
    fixes = []
    for text in texts[1:]:
        module = module.updated(text)
        findings = findings_for(module, SETTINGS, RULES)
        assert _key(findings) == _key(findings_for(ModuleAnalysis(text, "eval.py"), SETTINGS, RULES))
        fixes.extend(f.fix.edits[0].new_text for f in findings if f.code == "TL102" and f.fix is not None)
    assert any("total = sum(out.tolist(" in fix for fix in fixes), "the fix wraps the line as it is typed"
