"""The engine's promises: bad input gets an answer, statement order matters, suppressions work,
and the user's code is never imported."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
import warnings

import pytest

from trainlint.analysis.engine import DecodeError, analyze_source, read_source
from trainlint.analysis.findings import Severity
from trainlint.analysis.settings import AnalysisSettings

RETAINED = textwrap.dedent(
    """
    import torch.nn as nn

    criterion = nn.CrossEntropyLoss()
    history = []
    for x, y in loader:
        loss = criterion(model(x), y)
        history.append(loss)
    """
).lstrip()


def codes(findings):
    return [(f.code, f.line) for f in findings]


def test_syntax_error_is_one_finding_and_the_rest_is_still_checked():
    text = "def broken(:\n    pass\n\n" + RETAINED
    findings = analyze_source(text, "train.py")
    assert codes(findings) == [("TL000", 1), ("TL101", 10)]
    syntax = findings[0]
    assert syntax.severity is Severity.ERROR and syntax.message.startswith("syntax error")


def test_unclosed_bracket_mid_edit_stays_inside_its_statement():
    text = "x = foo(1,\n\n" + RETAINED
    assert codes(analyze_source(text, "train.py")) == [("TL000", 1), ("TL101", 9)]


def test_undecodable_bytes_are_reported_not_raised():
    findings = analyze_source(b"x = '\xff\xfe'\n", "bad.py")
    assert codes(findings) == [("TL000", 1)]
    assert "cannot decode line 1 as utf-8" in findings[0].message


def test_coding_cookie_and_bom_are_honoured():
    latin = "# -*- coding: latin-1 -*-\n# caf\xe9\n".encode("latin-1") + RETAINED.encode()
    assert [c for c, _ in codes(analyze_source(latin, "a.py"))] == ["TL101"]
    bom = b"\xef\xbb\xbf" + RETAINED.encode()
    assert codes(analyze_source(bom, "b.py")) == [("TL101", 7)]


def test_decoding_follows_pythons_cookie_rules():
    text = "é = 1\n"
    # line 2 counts only below a blank or comment line; a BOM wins, and may not contradict a cookie
    assert read_source(b"x = 1\n# coding: latin-1\n" + text.encode()) == ("x = 1\n# coding: latin-1\n" + text, "utf-8")
    assert read_source(b"#!/usr/bin/env python\n# coding: latin-1\n\xe9 = 1\n")[1] == "iso-8859-1"
    assert read_source(b"\n# coding: latin-1\n\xe9 = 1\n")[1] == "iso-8859-1"
    assert read_source(b"\xef\xbb\xbf" + text.encode()) == (text, "utf-8-sig")
    with pytest.raises(DecodeError, match="byte-order mark but its coding declaration names another"):
        read_source(b"\xef\xbb\xbf# coding: latin-1\n")
    with pytest.raises(DecodeError, match="unknown encoding 'klingon' in the coding declaration"):
        read_source(b"# coding: klingon\n")
    # a package's codec that rewrites UTF-8 source on import (future-fstrings): read as the UTF-8 it is
    fstrings = "# -*- coding: future_fstrings -*-\nname = 'é'\nprint(f'{name}')\n"
    assert read_source(fstrings.encode()) == (fstrings, "utf-8")
    with pytest.raises(DecodeError, match="cannot decode line 2 as utf-8"):
        read_source(b"# coding: future-fstrings\nx = '\xe9'\n")
    with pytest.raises(DecodeError, match="cannot decode line 3 as utf-8"):
        read_source(b"x = 1\ny = 2\nz = '\xff'\n")
    # lines end at \r too, as the interpreter reads them (tokenize's own reader splits at \n only)
    assert read_source(b"# coding: latin-1\rx = '\xe9'\r") == ("# coding: latin-1\rx = '\xe9'\r", "iso-8859-1")
    with pytest.raises(DecodeError, match="cannot decode line 3 as utf-8"):
        read_source(b"x = 1\r# coding: latin-1\ry = '\xe9'\r")


@pytest.mark.parametrize(("encoding", "problem"), [
    ("rot13", "'rot13', which the coding declaration names, is not a text encoding"),
    ("zlib_codec", "'zlib_codec', which the coding declaration names, is not a text encoding"),
    ("undefined", "cannot decode the file as undefined: "),
    ("utf-16", "Python does not read source files in 'utf-16', which the coding declaration names"),
    ("utf_32_be", "Python does not read source files in 'utf_32_be', which the coding declaration names"),
    ("punycode", "Python does not read source files in 'punycode', which the coding declaration names"),
])
def test_a_coding_declaration_python_refuses_is_a_decode_error(encoding, problem):
    """The codecs that are no text encodings raised LookupError, 'undefined' a bare UnicodeError (a
    traceback in `check`); punycode decodes in quadratic time (600 KB: about 25 s)."""
    data = f"# coding: {encoding}\n".encode() + b"a" * 300_000 + b"-" + b"ba" * 75_000
    with pytest.raises(DecodeError, match=f"^{re.escape(problem)}"):
        read_source(data)


def test_empty_and_blank_files():
    assert analyze_source("", "empty.py") == []
    assert analyze_source("\n\n   \n# just a comment\n", "blank.py") == []


def test_fifty_thousand_lines_are_answered():
    body = "".join(f"value_{i} = {i}\n" for i in range(50_000))
    assert analyze_source(body + RETAINED, "huge.py")[-1].code == "TL101"


def test_deeply_nested_expression_is_answered():
    text = "x = " + "(" * 500 + "1" + ")" * 500 + "\n" + RETAINED
    findings = analyze_source(text, "deep.py")
    assert findings, "a nesting the parser cannot take is reported, not a crash"
    assert {f.code for f in findings} <= {"TL000", "TL002", "TL101"}


def test_statement_order_decides_what_carries_a_graph():
    text = textwrap.dedent(
        """
        import torch
        import torch.nn as nn

        criterion = nn.CrossEntropyLoss()

        def run(model, train_loader, val_loader, optimizer):
            kept = []
            for x, y in val_loader:
                with torch.no_grad():
                    outputs = model(x)
                kept.append(outputs)
            for x, y in train_loader:
                outputs = model(x)
                loss = criterion(outputs, y)
                loss.backward()
                optimizer.step()
                kept.append(outputs)
        """
    ).lstrip()
    assert [(c, line) for c, line in codes(analyze_source(text, "t.py")) if c == "TL101"] == [("TL101", 17)]


def test_suppression_comments():
    base = RETAINED.replace("history.append(loss)", "history.append(loss)  {}")
    for comment in ("# trainlint: ignore[TL101]", "# trainlint: ignore[retained-graph]", "# trainlint: ignore", "# noqa: TL101"):
        assert analyze_source(base.format(comment), "s.py") == [], comment
    assert codes(analyze_source(base.format("# trainlint: ignore[TL201]"), "s.py")) == [("TL101", 7)]
    assert analyze_source("# trainlint: ignore-file[TL101]\n" + RETAINED, "s.py") == []


def test_noqa_as_flake8_and_ruff_users_write_it():
    base = RETAINED.replace("history.append(loss)", "history.append(loss)  {}")
    for comment in ("# noqa: E501, TL101", "# noqa:E501,TL101", "# NOQA: TL101", "# noqa", "# noqa  (loss kept on purpose)",
                    "# type: ignore  # noqa: TL101", "# noqa: E501 TL101"):
        assert analyze_source(base.format(comment), "s.py") == [], comment
    for comment in ("# noqa: E501", "# noqa: TL201", "# noqae", "# no qa"):
        assert codes(analyze_source(base.format(comment), "s.py")) == [("TL101", 7)], comment


def test_only_real_comments_suppress():
    text = RETAINED.replace("history.append(loss)", "history.append(loss); note = '# noqa: TL101'")
    assert codes(analyze_source(text, "s.py")) == [("TL101", 7)]
    docstring = '"""\n# trainlint: ignore-file[TL101]\n"""\n' + RETAINED
    assert codes(analyze_source(docstring, "s.py")) == [("TL101", 10)]
    # lines as Python counts them: a form feed is no line break, a lone CR is one
    feed = "\f" + RETAINED.replace("history.append(loss)", "history.append(loss)  # noqa: TL101")
    assert analyze_source(feed, "s.py") == []


def test_unused_suppressions_are_reported_on_request():
    text = "x = 1  # trainlint: ignore[TL101]\n"
    assert analyze_source(text, "u.py") == []
    findings = analyze_source(text, "u.py", AnalysisSettings(report_unused_ignores=True))
    assert codes(findings) == [("TL001", 1)]
    assert "unused suppression" in findings[0].message
    # a bare noqa, or one naming other tools' codes only, is theirs: never reported by trainlint
    other = "x = 1  # noqa\ny = 2  # noqa: E501\nz = 3  # noqa: E501, TL101\n"
    findings = analyze_source(other, "u.py", AnalysisSettings(report_unused_ignores=True))
    assert codes(findings) == [("TL001", 3)]
    assert findings[0].message == "unused suppression: nothing here is reported for TL101"


def test_severity_override_and_selection():
    settings = AnalysisSettings(severity={"retained-graph": Severity.WARNING})
    assert analyze_source(RETAINED, "t.py", settings)[0].severity is Severity.WARNING
    assert analyze_source(RETAINED, "t.py", AnalysisSettings(ignore=("TL1",))) == []
    assert codes(analyze_source(RETAINED, "t.py", AnalysisSettings(select=("retained-graph",)))) == [("TL101", 7)]


def test_findings_cite_their_evidence():
    finding = analyze_source(RETAINED, "t.py")[0]
    lines = [e.line for e in finding.evidence]
    assert 6 in lines and 7 in lines and 5 in lines
    assert "criterion(model(x), y)" in finding.message


def test_user_code_is_never_imported_or_executed(tmp_path):
    # A fake `torch` on the path records any import of it; the checked file raises if executed.
    fake = tmp_path / "fake_site" / "torch"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise SystemExit('torch was imported')\n")
    script = tmp_path / "train.py"
    script.write_text("import torch\nraise RuntimeError('executed')\n" + RETAINED)
    program = textwrap.dedent(
        f"""
        import sys
        sys.path.insert(0, {str(fake.parent)!r})
        from trainlint.cli import main
        status = main(["check", {str(script)!r}, "--format", "json"])
        print("torch" in sys.modules, status)
        """
    )
    result = subprocess.run([sys.executable, "-I", "-c", program], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "False 1"


def test_an_edit_reparses_only_the_statements_it_touched():
    from trainlint.analysis.engine import findings_for, select_rules
    from trainlint.analysis.module import ModuleAnalysis

    settings = AnalysisSettings()
    before = ModuleAnalysis("def helper():\n    return 1\n\n" + RETAINED, "t.py")
    edited_text = "def helper():\n    return 2\n\n" + RETAINED
    # the trees as they were: an edited function's statement object takes over its new tree (ParsedChunk.adopt)
    trees_before = [chunk.module for chunk in before.chunks]
    after = before.updated(edited_text)
    reused = [chunk for chunk in after.chunks if any(chunk.module is tree for tree in trees_before)]
    assert len(reused) == len(after.chunks) - 1
    fresh = ModuleAnalysis(edited_text, "t.py")
    rules = select_rules(settings)
    assert findings_for(after, settings, rules) == findings_for(fresh, settings, rules)


def test_a_test_suite_is_not_a_training_run():
    # diffusers' tests call an attention block without eval() and draw dummy images from numpy:
    # unit tests exercise modules on purpose; evaluation-mode, grad and seeding rules leave them alone.
    test_module = textwrap.dedent(
        """\
        import numpy as np
        import torch
        import torch.nn as nn

        class Block(nn.Module):
            def __init__(self):
                super().__init__()
                self.proj = nn.Linear(4, 4)
                self.drop = nn.Dropout(0.1)

            def forward(self, x):
                return self.drop(self.proj(x))

        def test_block_output_shape():
            block = Block()
            with torch.no_grad():
                out = block(torch.from_numpy(np.random.rand(2, 4).astype("float32")))
            assert out.shape == (2, 4)

        def test_block_trains():
            block = Block()
            torch.manual_seed(0)
            block(torch.randn(2, 4)).sum().backward()
            assert block.proj.weight.grad is not None
        """
    )
    rules = {"TL102", "TL208", "TL401"}
    as_test = {f.code for f in analyze_source(test_module, "tests/models/test_block.py")} & rules
    as_script = {f.code for f in analyze_source(test_module, "train_block.py")} & rules
    assert as_test == set()
    assert as_script, "outside a test suite the same code is reported"


def test_a_numerics_test_keeps_its_few_losses_on_purpose():
    # torchtitan's numerics tests run 20 steps and return the loss tensors to compare two set-ups:
    # what a test keeps is bounded and read once; a training script doing the same is reported.
    numerics = textwrap.dedent(
        """\
        import torch

        def run_steps(model, optimizer, loss_fn, inputs, labels, epoch=20):
            losses = []
            for _ in range(epoch):
                optimizer.zero_grad()
                loss = loss_fn(model(inputs), labels)
                loss.backward()
                optimizer.step()
                losses.append(loss)
            return losses
        """
    )
    assert [finding.code for finding in analyze_source(numerics, "tests/unit/test_numerics.py")] == []
    as_script = [finding.code for finding in analyze_source(numerics, "train_steps.py")]
    assert as_script == ["TL101"], "outside a test suite the same code is reported"


def test_a_tests_mock_training_is_not_a_training_run():
    # peft's tests run five optimizer steps to have trained weights to save: no zero_grad, a
    # constant copied to the device each step. In a training script both cost the run.
    mock_training = textwrap.dedent(
        """\
        import torch

        def mock_training(model, steps=5):
            optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
            for _ in range(steps):
                scale = torch.tensor([0.5, 2.0]).to("cuda")
                loss = (model(torch.randn(10, 5, device="cuda")) * scale).sum()
                loss.backward()
                optimizer.step()
        """
    )
    rules = {"TL201", "TL303"}
    assert {finding.code for finding in analyze_source(mock_training, "tests/test_other.py")} & rules == set()
    as_script = {finding.code for finding in analyze_source(mock_training, "finetune.py")} & rules
    assert as_script == rules, "outside a test suite the same code is reported"


def test_another_frameworks_code_is_not_read_as_pytorch():
    # YOLOX ships a MegEngine demo beside its PyTorch code: `self.model(img)` there records no torch
    # graph, whatever the names say. The same predictor written against torch is reported.
    predictor = textwrap.dedent(
        """\
        import megengine as mge
        import megengine.functional as F


        class Predictor:
            def __init__(self, model):
                self.model = model

            def inference(self, img):
                self.model.eval()
                return self.model(F.expand_dims(mge.tensor(img), 0))


        def image_demo(predictor, images):
            return [predictor.inference(image) for image in images]
        """
    )
    assert analyze_source(predictor, "demo/MegEngine/python/demo.py") == []
    in_torch = predictor.replace("import megengine as mge\nimport megengine.functional as F\n", "import torch\n")
    in_torch = in_torch.replace("F.expand_dims(mge.tensor(img), 0)", "torch.as_tensor(img).unsqueeze(0)")
    assert [finding.code for finding in analyze_source(in_torch, "demo/python/demo.py")] == ["TL102"]
    # cleanrl's JAX scripts import torch only to write TensorBoard logs
    in_jax = predictor.replace("import megengine as mge\nimport megengine.functional as F\n",
                               "import jax.numpy as jnp\nfrom torch.utils.tensorboard import SummaryWriter\n")
    in_jax = in_jax.replace("F.expand_dims(mge.tensor(img), 0)", "jnp.expand_dims(jnp.asarray(img), 0)")
    assert analyze_source(in_jax, "dqn_jax.py") == []
    broken = predictor + "\ndef unfinished(:\n"
    assert [finding.code for finding in analyze_source(broken, "demo.py")] == ["TL000"], "syntax errors are still reported"


def test_the_users_invalid_escapes_are_not_warned_about_by_the_analysis():
    # Python warns about "\s" while evaluating it (a SyntaxWarning printed by default from 3.12);
    # that is the user's linter's business, not trainlint's output
    source = (
        "import torch\n"
        "pattern = '\\s+'\n"
        "device = torch.device('cuda\\s')\n"
        "if __name__ == '__ma\\in__':\n"
        "    loader = torch.utils.data.DataLoader(data, num_workers=0)\n"
        "def broken(:\n"
        "    '\\d'\n"
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        findings = analyze_source(source, "train.py")
    assert [str(warning.message) for warning in caught] == []
    assert "TL000" in {finding.code for finding in findings}


def test_a_gpu_mentioned_only_after_a_hash_is_not_evidence_the_script_runs_on_one():
    """What shows a script runs on CUDA (for the accumulation and synchronisation rules) is the first
    mention outside a comment: a commented-out line, or the comment after code, is not one."""
    commented = (
        "import torch\n"
        "# model = model.cuda()\n"
        "model = torch.nn.Linear(16, 4)  # or .cuda() on a GPU box\n"
        "predictions = []\n"
        "with torch.no_grad():\n"
        "    for x in loader:\n"
        "        predictions.append(model(x))\n"
    )
    assert "TL104" not in [f.code for f in analyze_source(commented, "evaluate.py")]
    on_gpu = commented.replace("predictions = []\n", "torch.cuda.set_device(0)  # one GPU\npredictions = []\n")
    (finding,) = [f for f in analyze_source(on_gpu, "evaluate.py") if f.code == "TL104"]
    assert any("the script runs on CUDA, line 4" in item.note for item in finding.evidence)


def test_an_unseeded_script_is_shown_a_layer_that_draws_weights_not_a_lookup_or_a_parameterless_layer():
    """dinov2's linear evaluation picks its backbone with `arch in torchvision_models.__dict__.keys()`
    and replaces its head with `nn.Identity()`; neither draws random numbers, so neither is the
    evidence that the run needs a seed: the classifier's `nn.Linear` is."""
    script = (
        "import torch\n"
        "from torch import nn\n"
        "from torchvision import models as torchvision_models\n"
        "\n"
        "def main(arch, loader):\n"
        "    if arch in torchvision_models.__dict__.keys():\n"
        "        backbone = torchvision_models.__dict__[arch]()\n"
        "        backbone.fc = nn.Identity()\n"
        "    classifier = nn.Linear(2048, 1000)\n"
        "    optimizer = torch.optim.SGD(classifier.parameters(), lr=0.1)\n"
        "    for x, y in loader:\n"
        "        optimizer.zero_grad()\n"
        "        nn.functional.cross_entropy(classifier(backbone(x)), y).backward()\n"
        "        optimizer.step()\n"
        "\n"
        "if __name__ == '__main__':\n"
        "    main('resnet50', [])\n"
    )
    (finding,) = [f for f in analyze_source(script, "eval_linear.py") if f.code == "TL401"]
    assert "`nn.Linear(2048, 1000)`, line 9" in finding.message


def test_a_discarded_conversion_of_an_unnamed_tensor_is_described_in_words():
    """peft's BEFT layer: `bias.data.add_(delta).to(dtype)` as a statement. The conversion's receiver
    has no name to quote, and the message says so in words rather than quoting a placeholder."""
    code = (
        "import torch\n"
        "\n"
        "def merge(base_layer, delta, orig_dtype):\n"
        "    bias = torch.zeros(4)\n"
        "    bias.add_(delta).to(orig_dtype)\n"
        "    return bias\n"
    )
    (finding,) = [f for f in analyze_source(code, "layer.py") if f.code == "TL210"]
    assert "the tensor it is called on is not moved or converted" in finding.message
    assert "`the tensor`" not in finding.message


def test_a_loss_on_one_element_of_a_models_output_tuple_quotes_that_elements_layer():
    """PyTorch-GAN's ACGAN: the discriminator returns a sigmoid score and softmax class
    probabilities, and the class probabilities go to CrossEntropyLoss. The evidence names the
    softmax head, not the tuple's first element."""
    code = (
        "import torch\n"
        "import torch.nn as nn\n"
        "\n"
        "class Discriminator(nn.Module):\n"
        "    def __init__(self, features, n_classes):\n"
        "        super().__init__()\n"
        "        self.adv_layer = nn.Sequential(nn.Linear(features, 1), nn.Sigmoid())\n"
        "        self.aux_layer = nn.Sequential(nn.Linear(features, n_classes), nn.Softmax())\n"
        "\n"
        "    def forward(self, out):\n"
        "        validity = self.adv_layer(out)\n"
        "        label = self.aux_layer(out)\n"
        "        return validity, label\n"
        "\n"
        "discriminator = Discriminator(128, 10)\n"
        "adversarial_loss = torch.nn.BCELoss()\n"
        "auxiliary_loss = torch.nn.CrossEntropyLoss()\n"
        "optimizer = torch.optim.Adam(discriminator.parameters())\n"
        "for features, labels in loader:\n"
        "    optimizer.zero_grad()\n"
        "    validity, pred_label = discriminator(features)\n"
        "    loss = adversarial_loss(validity, torch.ones_like(validity)) + auxiliary_loss(pred_label, labels)\n"
        "    loss.backward()\n"
        "    optimizer.step()\n"
    )
    (finding,) = [f for f in analyze_source(code, "acgan.py") if f.code == "TL202"]
    assert "returns `self.aux_layer(out)`, whose last layer is `nn.Softmax()`" in finding.message
    assert "Sigmoid" not in finding.message


def test_a_tests_loader_is_not_a_training_runs_input_pipeline():
    # a framework's test suite builds small DataLoaders by the hundred, with CUDA named in another
    # test: loader tuning and per-step syncs cost a test nothing. A training script doing the same
    # is reported.
    tiny_training = textwrap.dedent(
        """\
        import torch
        from torch.utils.data import DataLoader, TensorDataset

        def test_trains_on_cuda():
            model = torch.nn.Linear(4, 1).cuda()
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            loader = DataLoader(TensorDataset(torch.randn(8, 4), torch.randn(8, 1)), batch_size=2)
            for x, y in loader:
                loss = torch.nn.functional.mse_loss(model(x.cuda()), y.cuda())
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                print(loss.item())
        """
    )
    rules = {"TL301", "TL302"}
    assert {finding.code for finding in analyze_source(tiny_training, "tests/test_loop.py")} & rules == set()
    as_script = {finding.code for finding in analyze_source(tiny_training, "train_tiny.py")} & rules
    assert as_script == rules, "outside a test suite the same code is reported"


def test_a_per_step_sync_note_says_it_undoes_non_blocking_copies():
    # LANfactory's trainer copied pinned batches with non_blocking=True and read float(loss) every step:
    # the note says the sync takes away the overlap the copy asks for; without such a copy it does not.
    step = textwrap.dedent(
        """\
        import torch

        def train(model, loader, optimizer, loss_fun):
            total = 0.0
            for xb, yb in loader:
                xb, yb = xb.cuda(non_blocking=True), yb.cuda(non_blocking=True)
                loss = loss_fun(model(xb), yb)
                loss.backward()
                optimizer.step()
                optimizer.zero_grad()
                total += float(loss)
            return total
        """
    )
    (finding,) = [f for f in analyze_source(step, "train_mlp.py") if f.code == "TL302"]
    assert finding.severity is Severity.NOTE and "`non_blocking` (line 6)" in finding.message
    plain = step.replace("non_blocking=True", "")
    (finding,) = [f for f in analyze_source(plain, "train_mlp.py") if f.code == "TL302"]
    assert "non_blocking" not in finding.message


def test_a_test_helpers_epochs_over_a_loader_handed_in_are_not_a_run():
    # torch's testing helpers train a DDP model for a few epochs on data handed in: TL502's note on an
    # unseen sampler is for training code, not for a test suite's helpers.
    helper = textwrap.dedent(
        """\
        import torch

        def train(model, train_data, optimizer, epochs):
            if isinstance(model, torch.nn.parallel.DistributedDataParallel):
                model = model.module
            for epoch in range(epochs):
                for data, target in train_data:
                    optimizer.zero_grad()
                    torch.nn.functional.cross_entropy(model(data), target).backward()
                    optimizer.step()
        """
    )
    assert [f.code for f in analyze_source(helper, "torch/testing/_internal/common_training.py") if f.code == "TL502"] == []
    assert [f.severity for f in analyze_source(helper, "trainer.py") if f.code == "TL502"] == [Severity.NOTE]


def test_a_bug_in_the_flow_analysis_is_a_note_not_a_crash(monkeypatch):
    """A run over many files must not end at one file the flow analysis fails on: the file gets a
    note saying its checks were skipped, and the next file is checked."""
    from trainlint.analysis import engine
    from trainlint.analysis.flow import ScopeAnalysis

    def broken(cls, chunk, summary):
        raise AttributeError("a bug of the flow analysis")

    monkeypatch.delenv(engine.STRICT_ENV, raising=False)
    with monkeypatch.context() as patched:
        patched.setattr(ScopeAnalysis, "of_module_statement", classmethod(broken))
        findings = analyze_source(RETAINED, "train.py")
    assert [(f.code, f.severity) for f in findings] == [("TL002", Severity.NOTE)], findings
    assert "internal error" in findings[0].message and "AttributeError" in findings[0].message
    assert codes(analyze_source(RETAINED, "train.py")) == [("TL101", 7)]
