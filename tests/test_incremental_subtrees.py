"""Facts of a loop's or a function's tree that a rule reads whole (whether a loop works on `.grad`
itself, TL206; a function's nodes in source order, which TL102 and TL208 follow a forward's output
through) are read statement by statement and kept per statement: after a key on a line that parses,
the loop and the function holding it are new nodes, but only the statements on the edit's path are
read again. What is shown is what a fresh analysis shows, key after key, also when the edit changes
the finding."""

from __future__ import annotations

import libcst as cst
from typing_keys import one_key_towards

from trainlint.analysis import graph_use, summary, tree
from trainlint.analysis.engine import analyze_source
from trainlint.analysis.module import ModuleAnalysis
from trainlint.analysis.registry import all_rules
from trainlint.analysis.rules import zero_grad_before_step
from trainlint.analysis.settings import AnalysisSettings
from trainlint.server.documents import DocumentState
from trainlint.settings import EffectiveSettings

SETTINGS = EffectiveSettings(AnalysisSettings(), frozenset())
PATH = "file:///train.py"

SCRIPT = '''import torch
import torch.nn as nn


def evaluate(model, loader):
    model.eval()
    total = 0
    for batch in loader:
        out = model(batch.cuda())
        total += out.argmax(1).sum().item()
    return total


def main():
    model = nn.Linear(8, 2).cuda()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    loader = torch.utils.data.DataLoader(torch.randn(64, 8), batch_size=8)
    for epoch in range(3):
        model.train()
        for step, batch in enumerate(loader):
            optimizer.zero_grad()
            loss = model(batch.cuda()).sum() / 4
            loss.backward()
            if (step + 1) % 4 == 0:
                optimizer.step()
            preview = model(batch.cuda())
            print(f"epoch={epoch} step={step} preview={preview.argmax(1)}")
            print(f"loss={loss.item():.4f}")
        print(evaluate(model, loader))


if __name__ == "__main__":
    main()
'''
BACKWARD = "            loss.backward()\n"
EVALUATED = "        print(evaluate(model, loader))\n"


def _fresh(text: str) -> list:
    return analyze_source(text, PATH, SETTINGS.analysis)


def _opened() -> DocumentState:
    state = DocumentState(PATH, None)
    assert state.analyse(SCRIPT, 0, SETTINGS).findings == _fresh(SCRIPT)
    return state


def _typed(state: DocumentState, text: str, target: str, version: int) -> tuple[str, list, int]:
    """``target`` typed into ``text`` one key at a time, each key's findings checked against a fresh analysis."""
    while text != target:
        text = one_key_towards(text, target)
        version += 1
        assert state.analyse(text, version, SETTINGS).findings == _fresh(text), f"at: {text[-160:]!r}"
    return text, state.analyse(text, version, SETTINGS).findings, version


def _shown(findings: list, text: str) -> set[tuple[str, str]]:
    lines = text.split("\n")
    return {(finding.code, lines[finding.line - 1].strip()) for finding in findings}


def test_the_script_shows_what_the_edits_below_change():
    shown = _shown(_fresh(SCRIPT), SCRIPT)
    assert ("TL206", "optimizer.zero_grad()") in shown  # cleared on every batch, stepped every fourth
    assert ("TL102", "preview = model(batch.cuda())") in shown  # the preview's graph is recorded for nothing


def test_reading_the_gradients_typed_in_the_loop_ends_the_finding_and_taking_it_back_brings_it_back():
    state = _opened()
    surgery = SCRIPT.replace(BACKWARD, BACKWARD + "            norms = [p.grad.norm() for p in model.parameters()]\n")
    typed, findings, version = _typed(state, SCRIPT, surgery, 0)
    assert not any(code == "TL206" for code, _ in _shown(findings, typed))
    _, findings, _ = _typed(state, typed, SCRIPT, version)
    assert ("TL206", "optimizer.zero_grad()") in _shown(findings, SCRIPT)


def test_a_clearing_of_a_gradient_typed_in_the_loop_is_not_a_read_of_it():
    state = _opened()
    cleared = SCRIPT.replace(BACKWARD, "            model.weight.grad = None\n" + BACKWARD)
    typed, findings, _ = _typed(state, SCRIPT, cleared, 0)
    assert ("TL206", "optimizer.zero_grad()") in _shown(findings, typed)


def test_a_nested_function_typed_that_captures_the_output_ends_the_unused_graph_finding():
    state = _opened()
    captured = SCRIPT.replace(EVALUATED, EVALUATED + "\n    def last():\n        return preview\n\n")
    typed, findings, version = _typed(state, SCRIPT, captured, 0)
    assert ("TL102", "preview = model(batch.cuda())") not in _shown(findings, typed)
    _, findings, _ = _typed(state, typed, SCRIPT, version)
    assert ("TL102", "preview = model(batch.cuda())") in _shown(findings, SCRIPT)


def test_a_key_in_the_loop_reads_again_only_the_statements_on_its_path(monkeypatch):
    """The loop's statements off the edit's path keep what was read of them: of the training loop's
    nodes, a key reads again those of the statements that hold it, not the two `print` lines after it."""
    asked: list[cst.CSTNode] = []
    marks = zero_grad_before_step._gradient_marks
    monkeypatch.setattr(zero_grad_before_step, "_gradient_marks", lambda node: asked.append(node) or marks(node))
    listed: list[cst.CSTNode] = []
    own_kept = graph_use._own_kept
    monkeypatch.setattr(graph_use, "_own_kept", lambda node, memo: listed.append(node) or own_kept(node, memo))
    state = _opened()
    loop = cst.parse_module(SCRIPT).body[3].body.body[3]  # `for epoch ...` in main()
    nodes = sum(1 for _ in tree.walk(loop))
    typed = SCRIPT.replace(BACKWARD, BACKWARD + "            scale = 24\n")
    assert state.analyse(typed.replace("24", "2"), 1, SETTINGS).findings == _fresh(typed.replace("24", "2"))
    asked.clear()
    listed.clear()
    findings = state.analyse(typed, 2, SETTINGS).findings
    assert 0 < len(asked) < nodes / 2
    prints = [node for node in listed if isinstance(node, cst.SimpleStatementLine) and "print" in cst.Module([node]).code]
    assert listed and not prints
    assert findings == _fresh(typed)


def test_grad_turned_off_above_the_loop_ends_the_unused_graph_finding_below_it():
    """A finding after the edit that the edit changes: the preview's graph is no longer recorded."""
    state = _opened()
    off = SCRIPT.replace("        model.train()\n", "        model.train()\n        torch.set_grad_enabled(False)\n")
    typed, findings, version = _typed(state, SCRIPT, off, 0)
    assert ("TL102", "preview = model(batch.cuda())") not in _shown(findings, typed)
    _, findings, _ = _typed(state, typed, SCRIPT, version)
    assert ("TL102", "preview = model(batch.cuda())") in _shown(findings, SCRIPT)


SAMPLER = '''import torch
import torch.nn as nn


class Sampler:
    def __init__(self, generator, critic):
        self.generator = generator
        self.critic = critic
        self.history = []

    def fakes(self, size):
        with torch.no_grad():
            noise = torch.randn(size, 64)
            drawn = self.generator(noise)
            print(f"{drawn.mean()}")
        kept = noise
        return kept

    def critic_step(self, real, optimizer):
        loss = (self.critic(real) - self.critic(self.fakes(real.size(0)))).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
'''


def _drawn_returned(module) -> bool:
    scope = next(scope for scope in module.all_scopes if scope.name == "Sampler.fakes")
    (forward,) = [call for call in scope.calls() if isinstance(call.node.func, cst.Attribute) and call.node.func.attr.value == "generator"]
    return graph_use.value_returned(scope, forward.node)


def test_what_a_method_returns_of_a_forward_is_followed_again_after_each_key():
    """``value_returned`` (TL208 asks it of a method's forwards) reads steps kept per statement: a key that
    hands the forward's output to what is returned, through a statement the key does not touch, and one that
    takes it away again, each answered as a fresh analysis answers."""
    state = DocumentState(PATH, None)
    state.analyse(SAMPLER, 0, SETTINGS)
    assert _drawn_returned(state.module) is False
    version = 0
    for target, returned in (
        (SAMPLER.replace("kept = noise", "kept = [noise, drawn]"), True),  # a list that holds it
        (SAMPLER.replace("kept = noise", "kept = (noise)"), False),
        (SAMPLER.replace("        return kept\n", "        kept = [kept]\n        kept.append(drawn)\n        return kept\n"), True),
        (SAMPLER.replace("        return kept\n", "        self.history.append(drawn)\n        return self.history\n"), False),
        (SAMPLER.replace("        kept = noise\n", "        kept = noise\n        kept, spare = drawn, noise\n"), True),
        (SAMPLER.replace("        kept = noise\n", "        kept = noise\n        self.last, kept = drawn, noise\n"), False),
        (SAMPLER.replace("kept = noise", 'kept = f"{drawn}"'), False),  # text of it is not its value
    ):
        text = SAMPLER
        for edited in (target, SAMPLER):
            while text != edited:
                text = one_key_towards(text, edited)
                version += 1
                state.analyse(text, version, SETTINGS)
                fresh = ModuleAnalysis(text, "train.py")
                fresh.prepare_scopes()
                assert _drawn_returned(state.module) == _drawn_returned(fresh), f"at: {text[-260:]!r}"
            assert _drawn_returned(state.module) is (returned if edited is target else False), edited


def _own_walked(root):
    """The nodes of ``root`` outside its nested functions and classes, in source order: the whole tree listed."""
    own, stack = [], [root]
    while stack:
        node = stack.pop()
        if node is not root and isinstance(node, (cst.FunctionDef, cst.ClassDef)):
            continue
        own.append(node)
        stack.extend(reversed(node.children))
    return own


def _followed_node_by_node(scope, produced) -> tuple[set[str], bool]:
    """What the value follower found before its steps were kept: every node of the function in source order,
    round after round, each expression read again."""
    root = scope.function.node.body if scope.function is not None else scope.chunk.module
    follower = graph_use._ValueFollower(scope, produced, root)
    follower._carries = follower._carried  # every expression read through, none passed over by what it holds
    own = _own_walked(root)
    for _ in range(graph_use._ROUNDS):
        before = len(follower.names)
        for node in own:
            follower._follow(node)
        if len(follower.names) == before:
            break
    returned = any(isinstance(node, (cst.Return, cst.Yield)) and node.value is not None and follower._carries(node.value)
                   for node in own)
    return follower.names, returned


FOLLOWED = '''import torch


def shapes(model, batch, log, boxes):
    out = model(batch)
    text = f"{out}"
    label = "%s" % model(batch)
    log.cache, first = out, batch
    second, log.cache, third = out, batch, out
    a = b = out
    c = log.cache = d = out
    boxes[:, :4] = model(batch)
    *rest, last = out
    with torch.no_grad() as grads, open(text) as handle:
        pass
    if (picked := out.argmax(1)) is not None:
        print(picked, label=out)
    items = []
    items.append(model(batch))
    items.extend(text, key=out)
    for row in model(batch).unbind():
        total = row
    squares = [r * 2 for r in items if r is not None]
    later = lambda: out
    total += model(batch).mean()
    ann: int = squares

    def inner():
        return out

    yield f"{model(batch)}"
    yield
    return total, handle, grads


def branched(model, batch, flag, mode):
    out = model(batch)
    if flag:
        out = out.detach()
    elif mode == 1:
        out = batch
    else:
        pass
    score = out.sum()
    try:
        score = score.item()
    except ValueError:
        score = 0
    finally:
        total = score
    match mode:
        case 1 if (seen := model(batch)) is not None:
            out = seen.cpu()
        case _:
            out = 0
    if flag: kept = out
    while flag:
        kept = kept.item()
        flag = False
    else:
        kept = 1
    for row in batch:
        pass
    else:
        row = model(batch).item()
    print(kept, row, total, out)
'''


def test_the_kept_steps_follow_a_value_as_the_nodes_do():
    """Every call of every function of the scripts above and of TL208's examples (the rule that follows a
    forward's value): the names that carry its value and whether it is returned, from the kept steps
    and from every node read again, agree."""
    sources = [SCRIPT, SAMPLER, FOLLOWED]
    for rule in all_rules():
        if rule.code == "TL208":
            sources += [example.code for example in (*rule.MUST_FIRE, *rule.MUST_NOT_FIRE)]
    asked = 0
    for source in sources:
        module = ModuleAnalysis(source, "train.py")
        module.prepare_scopes()
        for scope in module.all_scopes:
            for call in scope.calls():
                follower = graph_use._value_follower(scope, call.node)
                if follower is None:
                    continue
                names, returned = _followed_node_by_node(scope, call.node)
                assert (follower.names, graph_use.value_returned(scope, call.node)) == (names, returned), source
                asked += 1
    assert asked > 1000


def _branch_paths_walked(root):
    """For each node inside a block that runs on some paths only, the ids of those blocks: the whole tree walked."""
    paths = {}
    stack = [(root, ())]
    while stack:
        node, path = stack.pop()
        if path:
            paths[id(node)] = path
        if isinstance(node, (cst.If, cst.Try, cst.TryStar, cst.Match)):
            for between, block in tree.blocks_of(node):
                stack.append((block, path if any(isinstance(clause, cst.Finally) for clause in between) else (*path, id(block))))
                stack.extend((clause.test, path) for clause in between if isinstance(clause, cst.If))
            if isinstance(node, cst.If):
                stack.append((node.test, path))
            elif isinstance(node, cst.Match):
                stack.append((node.subject, path))
            continue
        stack.extend((child, path) for child in tree.children(node))
    return paths


def _dropped_node_by_node(scope, forward, root):
    """``dropped_graph`` as it read the tree before its rounds passed over the nodes they do nothing with:
    every node of the function, and every node of its nested functions and classes for the names they capture,
    the places of the nodes found by walking the whole function, and every expression read through (none passed
    over for holding neither the forward nor a name that holds its graph)."""
    follower = graph_use._Follower(scope, forward)
    follower._carries = follower._carried
    own = _own_walked(root)
    looped = {id(inner) for node in own if isinstance(node, (cst.For, cst.While)) for inner in tree.walk(node.body)}
    follower.branches = _branch_paths_walked(root)
    held: set[str] = set()
    start: set[str] = set()
    for _ in range(graph_use._ROUNDS):
        follower.names = set(start)
        for node in own:
            if isinstance(node, cst.Assign) and id(node) not in looped and not follower._carries(node.value):
                follower._rebind(node)
            elif not follower._follow(node):
                return None
            if isinstance(node, (cst.Return, cst.Yield)) and node.value is not None and follower._carries(node.value):
                return None
            if isinstance(node, cst.Call) and not follower._stays_inside(node):
                return None
        held |= follower.names
        end = follower.names & {name for node in own if id(node) in looped for name in graph_use._bound_names(node)}
        if end <= start:
            break
        start |= end
    else:
        return None
    declared = {name.name.value for node in own if isinstance(node, (cst.Global, cst.Nonlocal)) for name in node.names}
    own_ids = {id(node) for node in own}
    if held & declared or any(isinstance(node, cst.Name) and node.value in held for node in tree.walk(root) if id(node) not in own_ids):
        return None
    return tuple(dict.fromkeys(follower.cuts)), frozenset(held)


def test_the_graph_follower_passing_over_idle_nodes_finds_what_it_found_on_every_node():
    """``dropped_graph``'s rounds go through the nodes they act on only, a nested function's captures are read
    from its kept names, and where those nodes sit (in a loop, in a branch) from what is kept per statement: the
    cuts and names it finds, for every call of the scripts above and of TL102's examples that fire, are those of
    a pass over every node, each place found by walking the whole function."""
    sources = [SCRIPT, SAMPLER, FOLLOWED]
    for rule in all_rules():
        if rule.code == "TL102":
            sources += [example.code for example in rule.MUST_FIRE]
    asked = dropped = 0
    for source in sources:
        module = ModuleAnalysis(source, "train.py")
        module.prepare_scopes()
        for scope in module.all_scopes:
            root = scope.function.node.body if scope.function is not None else scope.chunk.module
            for call in scope.calls():
                found = graph_use._Follower(scope, call.node).dropped(root)
                expected = _dropped_node_by_node(scope, call.node, root)
                assert (found.cuts, found.names) == expected if found is not None else expected is None, source
                asked += 1
                dropped += found is not None
    assert asked > 1000 and dropped > 100


def test_a_branch_typed_around_the_output_is_placed_again_key_by_key():
    """Where the follower's nodes sit (in which branch, in a loop's body) is kept per statement: a branch that cuts
    the output typed in the training loop, and a line that hands it to the model, each key read as a fresh
    analysis reads it; the finding goes, and comes back when they are taken away."""
    state = _opened()
    preview = "            preview = model(batch.cuda())\n"
    # cut on odd steps only: on the others the model keeps the graph
    branched = SCRIPT.replace(preview, preview + "            if step % 2:\n                preview = preview.detach()\n"
                              "            model.last = preview\n")
    typed, findings, version = _typed(state, SCRIPT, branched, 0)
    assert ("TL102", "preview = model(batch.cuda())") not in _shown(findings, typed)
    _, findings, _ = _typed(state, typed, SCRIPT, version)
    assert ("TL102", "preview = model(batch.cuda())") in _shown(findings, SCRIPT)


SEEDER = '''import torch


class Runner:
    def __init__(self, model, base=None):
        self.model = model
        self.set_seed(base)

    def set_seed(self, base):
        if base:
            self._seed_all(base)

    def _seed_all(self, value):
        torch.manual_seed(value)

    def step(self, batch):
        loss = self.model(batch).sum()
        loss.backward()
        return loss
'''
SEEDED = "        torch.manual_seed(value)\n"
STEP = "        loss.backward()\n"


def test_a_key_in_one_method_checks_again_only_that_methods_seed_tests(monkeypatch):
    """TL403 checks scope by scope: a key in `step` keeps `set_seed`'s result (its `if base:` is not tested
    again), and what it found stays shown."""
    from trainlint.analysis.rules.seed_zero_ignored import SeedZeroIgnored

    tested: list[str] = []
    check_scope = SeedZeroIgnored.check_scope
    monkeypatch.setattr(SeedZeroIgnored, "check_scope", lambda self, ctx, scope: tested.append(scope.name) or check_scope(self, ctx, scope))
    state = DocumentState(PATH, None)
    assert ("TL403", "if base:") in _shown(state.analyse(SEEDER, 0, SETTINGS).findings, SEEDER)
    statement = "print(loss.item())"
    for version, count in enumerate(range(len(statement) + 1), 1):  # typed as in an editor: Enter, then a key each
        typed = SEEDER.replace(STEP, STEP + "        " + statement[:count] + "\n")
        tested.clear()
        findings = state.analyse(typed, version, SETTINGS).findings
        # from the first character on (Enter, the first edit since opening, walks the class whole)
        assert count == 0 or "Runner.set_seed" not in tested, f"at {statement[:count]!r}"
        checked, tested[:] = list(tested), []
        assert findings == _fresh(typed), f"at {statement[:count]!r}"
        assert ("TL403", "if base:") in _shown(findings, typed)
    assert checked == ["Runner.step"]  # the last key parses: the edited method is checked again


def test_a_helper_that_stops_seeding_ends_the_finding_of_the_method_that_calls_it():
    """`base` is a seed because `_seed_all` hands it to `torch.manual_seed`: typing a literal seed there instead
    ends `set_seed`'s finding (its kept result read `_seed_all`'s flow), and taking it back brings it back."""
    state = DocumentState(PATH, None)
    state.analyse(SEEDER, 0, SETTINGS)
    literal = SEEDER.replace(SEEDED, "        torch.manual_seed(1234)\n")
    typed, findings, version = _typed(state, SEEDER, literal, 0)
    assert not any(code == "TL403" for code, _ in _shown(findings, typed))
    _, findings, _ = _typed(state, typed, SEEDER, version)
    assert ("TL403", "if base:") in _shown(findings, SEEDER)


def _bound_to_self_walked(method: cst.FunctionDef) -> list[str]:
    return sorted(key for node in tree.walk(method) for key in summary.self_targets(node))


def test_what_a_method_binds_to_self_is_read_again_only_on_the_edits_path(monkeypatch):
    """What `self.x` the edited method binds decides whether the class's other methods keep their flows: it is
    read statement by statement, each kept, so a key reads again the statements on its path only, and it is
    what a walk of the whole method finds, key after key, while `self.last = ...` is typed and taken back."""
    asked: list[cst.CSTNode] = []
    targets = summary.self_targets
    monkeypatch.setattr(summary, "self_targets", lambda node: asked.append(node) or targets(node))
    state = DocumentState(PATH, None)
    state.analyse(SAMPLER, 0, SETTINGS)
    bound = SAMPLER.replace("        return kept\n", "        self.last = kept\n        return kept\n")
    text, version = SAMPLER, 0
    for edited in (bound, SAMPLER):
        while text != edited:
            text = one_key_towards(text, edited)
            version += 1
            asked.clear()
            findings = state.analyse(text, version, SETTINGS).findings
            read = len(asked)
            assert findings == _fresh(text), f"at: {text[-200:]!r}"
            (chunk,) = [chunk for chunk in state.module.chunks if isinstance(chunk.body[0], cst.ClassDef)]
            method = next(node for node in chunk.body[0].body.body if isinstance(node, cst.FunctionDef) and node.name.value == "fakes")
            assert sorted(summary.self_targets_kept(chunk, method)) == _bound_to_self_walked(method)
            if "\n        return kept\n" in text:  # not while an Enter leaves it outside the class, which is parsed anew
                assert read < sum(1 for _ in tree.walk(method)) / 2, f"at: {text[-200:]!r}"
    assert "self.last" not in summary.self_targets_kept(chunk, method)


def test_the_output_handed_on_through_new_names_ends_the_unused_graph_finding_key_by_key():
    """What each expression of the loop holds (its names and calls, kept with the tree) tells the graph follower
    which expressions it may pass over: a line typed that puts the preview in a list, and one that keeps the list
    in an attribute, each key read as a fresh analysis reads it; the finding goes, and comes back."""
    state = _opened()
    preview = "            preview = model(batch.cuda())\n"
    kept = SCRIPT.replace(preview, preview + "            history = [preview.sum() * 2]\n            model.history = history\n")
    typed, findings, version = _typed(state, SCRIPT, kept, 0)
    assert ("TL102", "preview = model(batch.cuda())") not in _shown(findings, typed)
    _, findings, _ = _typed(state, typed, SCRIPT, version)
    assert ("TL102", "preview = model(batch.cuda())") in _shown(findings, SCRIPT)


GAN = '''import torch
import torch.nn.functional as F


class GANTrainer:
    def __init__(self, generator, discriminator, lr, latent_dim):
        self.generator = generator
        self.discriminator = discriminator
        self.latent_dim = latent_dim
        self.opt_g = torch.optim.Adam(generator.parameters(), lr=lr)
        self.opt_d = torch.optim.Adam(discriminator.parameters(), lr=lr)

    def train_step(self, real):
        z = torch.randn(real.size(0), self.latent_dim, device=real.device)
        fake = self.generator(z)
        fake_logits = self.discriminator(fake)
        g_loss = F.binary_cross_entropy_with_logits(fake_logits, torch.ones_like(fake_logits))
        g_loss.backward()
        self.opt_g.step()
        self.opt_g.zero_grad()

        real_logits = self.discriminator(real)
        d_loss = F.binary_cross_entropy_with_logits(real_logits, torch.ones_like(real_logits))
        d_loss.backward()
        self.opt_d.step()
        self.opt_d.zero_grad()
        return g_loss.item(), d_loss.item()


def main(loader, epochs):
    trainer = GANTrainer(torch.nn.Linear(128, 784), torch.nn.Linear(784, 1), 2e-4, 128)
    for _ in range(epochs):
        for real, _ in loader:
            trainer.train_step(real)
'''


def test_a_requires_grad_typed_in_the_step_ends_the_left_gradients_finding_key_by_key():
    """Whether the step touches ``requires_grad`` (TL201 then leaves the discriminator's left gradients alone) is
    read statement by statement and kept with the tree: typed key by key and taken back, each key's findings are a
    fresh analysis', and the warning goes and comes back."""
    step = "        self.opt_d.step()\n"
    assert ("TL201", "self.opt_d.step()") in _shown(_fresh(GAN), GAN)
    state = DocumentState(PATH, None)
    assert state.analyse(GAN, 0, SETTINGS).findings == _fresh(GAN)
    frozen = GAN.replace("        g_loss.backward()\n", "        trainable = [p for p in self.generator.parameters() if p.requires_grad]\n"
                         "        g_loss.backward()\n")
    typed, findings, version = _typed(state, GAN, frozen, 0)
    assert ("TL201", step.strip()) not in _shown(findings, typed)
    _, findings, _ = _typed(state, typed, GAN, version)
    assert ("TL201", step.strip()) in _shown(findings, GAN)


FINE_TUNE = '''import torch
from transformers import AutoModelForCausalLM


def main(loader):
    model = AutoModelForCausalLM.from_pretrained("gpt2")
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5)
    for batch in loader:
        loss = model(**batch).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
'''
ON_A_T4 = EffectiveSettings(AnalysisSettings(target_gpu="t4"), frozenset())


def test_a_model_comment_typed_on_a_broken_line_changes_the_estimate_while_the_trees_inputs_are_kept(monkeypatch):
    """TL601's script reader reads the trees without the text, so a key on a line that stays broken (the same
    trees) keeps what it read and reads the text's `# trainlint: model=...` comment again: typed on such a line,
    the comment makes gpt2's fine-tune a 13B one that does not fit, key by key as a fresh analysis shows it."""
    from trainlint.estimator import reading

    read: list[int] = []
    read_trees = reading.read_tree_inputs
    monkeypatch.setattr(reading, "read_tree_inputs", lambda module: read.append(1) or read_trees(module))
    state = DocumentState(PATH, None)
    assert state.analyse(FINE_TUNE, 0, ON_A_T4).findings == analyze_source(FINE_TUNE, PATH, ON_A_T4.analysis)
    backward = "        loss.backward()\n"
    text, version, keys_reading = FINE_TUNE, 0, 0
    for line in ('print(f"loss={loss}"', 'print(f"loss={loss}"  # trainlint: model=meta-llama/Llama-2-13b-hf'):
        target = FINE_TUNE.replace(backward, backward + "        " + line + "\n")
        keys_reading = 0
        while text != target:
            text = one_key_towards(text, target)
            version += 1
            read.clear()
            findings = state.analyse(text, version, ON_A_T4).findings
            keys_reading += bool(read)
            assert findings == analyze_source(text, PATH, ON_A_T4.analysis), text[-80:]
    assert keys_reading == 0  # the comment was typed on a line that stayed broken: no tree changed
    shown = _shown(state.analyse(text, version, ON_A_T4).findings, text)
    assert ("TL601", 'model = AutoModelForCausalLM.from_pretrained("gpt2")') in shown


TOKEN_DROP = '''import torch
import torch.nn as nn


class TokenDrop(nn.Module):
    def __init__(self, rate=0.1):
        super().__init__()
        self.rate = rate

    def forward(self, embeddings):
        scale = 1.0
        for step in range(2):
            scale = scale * 1.0
        mask = torch.bernoulli(torch.full(embeddings.shape[:2], 1 - self.rate, device=embeddings.device))
        return embeddings * mask.unsqueeze(-1) / (1 - self.rate) * scale
'''
DRAWN = "        mask = torch.bernoulli(torch.full(embeddings.shape[:2], 1 - self.rate, device=embeddings.device))\n"


def test_a_test_of_the_mode_typed_into_forward_ends_the_hand_made_mask_finding_reading_only_the_edits_path(monkeypatch):
    """TL211 reads a forward's mode tests and Bernoulli draws statement by statement, each statement's part kept:
    typing `print(self.training)` into it ends the finding and taking it back brings it back, key by key as a fresh
    analysis shows it, and a key reads again the statements on its path, not the loop above it."""
    from trainlint.analysis.rules import dropout_always_on

    marked: list[cst.CSTNode] = []
    marks = dropout_always_on._mask_marks
    monkeypatch.setattr(dropout_always_on, "_mask_marks", lambda node: marked.append(node) or marks(node))
    state = DocumentState(PATH, None)
    assert ("TL211", DRAWN.strip()) in _shown(state.analyse(TOKEN_DROP, 0, SETTINGS).findings, TOKEN_DROP)
    gated = TOKEN_DROP.replace(DRAWN, DRAWN + "        print(self.training)\n")
    state.analyse(TOKEN_DROP.replace(DRAWN, DRAWN + "        print(self.trainin)\n"), 1, SETTINGS)
    marked.clear()
    findings = state.analyse(gated, 2, SETTINGS).findings
    assert marked and not any(isinstance(node, cst.For) or (isinstance(node, cst.Name) and node.value == "step") for node in marked)
    assert findings == _fresh(gated)
    typed, findings, version = _typed(state, gated, TOKEN_DROP, 2)
    assert ("TL211", DRAWN.strip()) in _shown(findings, typed)
    _, findings, _ = _typed(state, typed, gated, version)
    assert not any(code == "TL211" for code, _ in _shown(findings, gated))


def test_a_string_typed_key_by_key_compiles_the_function_only_where_its_error_can_change(monkeypatch):
    """While a key types inside a string left open, the function's error is the last key's (the
    string still runs to the end of its line) and it is not compiled again; a backslash, which
    carries the string on to the next line, and the closing quote are compiled. Each key's
    findings, its syntax error among them, are a fresh analysis'."""
    from trainlint.analysis import parsing

    compiled: list[str] = []
    check = parsing.check_syntax
    monkeypatch.setattr(parsing, "check_syntax", lambda text: compiled.append(text) or check(text))
    state = _opened()
    text = SCRIPT.replace(BACKWARD, BACKWARD + '            print(f"l\n')
    state.analyse(text, 1, SETTINGS)
    typed = '            print(f"loss {loss.item():.4f} \\'
    keys = []
    for line in (typed, typed[:-1], typed[:-2] + '")'):
        target = SCRIPT.replace(BACKWARD, BACKWARD + line + "\n")
        while text != target:
            text = one_key_towards(text, target)
            compiled.clear()
            findings = state.analyse(text, len(keys) + 2, SETTINGS).findings
            keys.append(bool(compiled))
            assert findings == _fresh(text), f"at: {text[-160:]!r}"
    # the keys inside the string compile nothing; the backslash, its deletion and the closing quote do; the
    # lines that parse need no compile
    assert keys == [False] * len("oss {loss.item():.4f} ") + [True, True, True, False, False]
    assert not any(finding.code == "TL000" for finding in findings)


STEP_ON_THE_GPU = '''import torch


def fit_one_epoch(net, criterion, optimizer, train_loader, val_loader):
    total = 0.0
    for images, targets in train_loader:
        optimizer.zero_grad()
        loss = sum(criterion(output, targets) for output in net(images.cuda()))
        loss.backward()
        optimizer.step()
        total += loss.item()
    for images, targets in val_loader:
        with torch.no_grad():
            outputs = net(images.cuda())
    return total
'''
FIRST_ON_THE_GPU = "        loss = sum(criterion(output, targets) for output in net(images.cuda()))\n"


def test_the_line_that_shows_cuda_moves_when_keys_on_a_broken_line_delete_it():
    """The first line showing CUDA is read from the text. Keys on a line that stays broken keep every
    tree, and the line they delete `.cuda(` from is no longer the first: TL302's evidence names the
    next one at once, as a fresh analysis does, not the line it named before the key."""
    state = DocumentState(PATH, None)
    assert state.analyse(STEP_ON_THE_GPU, 0, SETTINGS).findings == _fresh(STEP_ON_THE_GPU)
    line = FIRST_ON_THE_GPU.rstrip("\n")
    for version in range(1, len("cuda()))") + 1):  # backspace at the line's end: the first key breaks it
        line = line[:-1]
        text = STEP_ON_THE_GPU.replace(FIRST_ON_THE_GPU, line + "\n")
        findings = state.analyse(text, version, SETTINGS).findings
        assert findings == _fresh(text), line
    lines = text.split("\n")
    (sync,) = (finding for finding in findings if finding.code == "TL302")
    assert any(lines[item.line - 1].strip() == "outputs = net(images.cuda())" for item in sync.evidence)
