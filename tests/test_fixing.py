from __future__ import annotations

import ast
import codecs
import json
import resource
import signal
import stat
import subprocess
import sys

import msgspec
import pytest

from trainlint.analysis.engine import DecodeError
from trainlint.analysis.findings import Finding, Fix, Severity, TextEdit
from trainlint.cli import main
from trainlint.fixing import (
    SourceFile,
    apply_edits,
    apply_fixes,
    fix_until_stable,
    parses,
    unified_diff,
)

# TL101 (error, fixable): a model's output kept across iterations with its graph.
RETAINED = """\
import torch
from torchvision.models import resnet18

encoder = resnet18()
features = []
for images, _ in loader:
    features.append(encoder(images))
torch.save(features, "feats.pt")
"""


def finding(line: int, column: int, *edits: TextEdit, code: str = "TL101") -> Finding:
    return Finding(
        path="x.py", line=line, column=column, end_line=line, end_column=column + 1, code=code,
        name="retained-graph", severity=Severity.ERROR, message="m",
        fix=Fix("detach", tuple(edits)) if edits else None,
    )


class TestApplyEdits:
    def test_insertion_and_replacement(self):
        text = "a = f(x)\nb = g(y)\n"
        new, applied = apply_edits(text, [[TextEdit(1, 9, 1, 9, ".detach()")], [TextEdit(2, 5, 2, 6, "h")]])
        assert new == "a = f(x).detach()\nb = h(y)\n"
        assert applied == 2

    def test_multiline_replacement(self):
        text = "x = (1,\n     2)\ny = 3\n"
        new, applied = apply_edits(text, [[TextEdit(1, 5, 2, 8, "(1, 2)")]])
        assert new == "x = (1, 2)\ny = 3\n"
        assert applied == 1

    def test_columns_count_code_points(self):
        text = "s = '𝔘ñ'; t = s\n"
        # '𝔘' is one code point (two UTF-16 units): column 11 is the `t`.
        new, _ = apply_edits(text, [[TextEdit(1, 11, 1, 12, "u")]])
        assert new == "s = '𝔘ñ'; u = s\n"

    def test_overlapping_edit_is_skipped(self):
        text = "value = compute(a, b)\n"
        first = [TextEdit(1, 9, 1, 22, "other()")]
        overlapping = [TextEdit(1, 17, 1, 18, "z")]
        new, applied = apply_edits(text, [first, overlapping])
        assert new == "value = other()\n"
        assert applied == 1

    def test_two_insertions_at_one_spot_keep_only_the_first(self):
        new, applied = apply_edits("x\n", [[TextEdit(1, 2, 1, 2, ".a()")], [TextEdit(1, 2, 1, 2, ".b()")]])
        assert (new, applied) == ("x.a()\n", 1)

    def test_adjacent_edits_both_apply(self):
        new, applied = apply_edits("ab\n", [[TextEdit(1, 1, 1, 2, "A")], [TextEdit(1, 2, 1, 3, "B")]])
        assert (new, applied) == ("AB\n", 2)

    def test_a_fix_applies_whole_or_not_at_all(self):
        text = "a = 1\nb = 2\n"
        first = [TextEdit(1, 5, 1, 6, "10")]
        partly_overlapping = [TextEdit(2, 5, 2, 6, "20"), TextEdit(1, 5, 1, 6, "30")]
        new, applied = apply_edits(text, [first, partly_overlapping])
        assert (new, applied) == ("a = 10\nb = 2\n", 1)

    def test_edit_outside_the_text_is_skipped(self):
        text = "a = 1\n"
        assert apply_edits(text, [[TextEdit(5, 1, 5, 2, "x")]]) == (text, 0)
        assert apply_edits(text, [[TextEdit(1, 40, 1, 41, "x")]]) == (text, 0)

    def test_crlf_is_preserved_and_new_lines_follow_it(self):
        text = "if x:\r\n    y = f()\r\nz = 1\r\n"
        new, _ = apply_edits(text, [[TextEdit(2, 5, 2, 12, "with g():\n        y = f()")]])
        assert new == "if x:\r\n    with g():\r\n        y = f()\r\nz = 1\r\n"
        assert "\n" not in new.replace("\r\n", "")

    def test_edit_at_end_of_crlf_line_goes_before_the_line_break(self):
        new, _ = apply_edits("y = f()\r\nz\r\n", [[TextEdit(1, 8, 1, 8, ".detach()")]])
        assert new == "y = f().detach()\r\nz\r\n"

    def test_a_line_added_after_a_line_ends_as_that_line_did_in_a_file_of_mixed_line_ends(self):
        # The line break a fix adds at the end of `step()` used to be the file's first (LF), so
        # `step()` lost its CRLF and the moved line took it.
        text = "a = 1\nstep()\r\nb = 2\n"
        new, _ = apply_edits(text, [[TextEdit(2, 7, 2, 7, "\n    clear()")]])
        assert new == "a = 1\nstep()\r\n    clear()\r\nb = 2\n"

    def test_a_line_added_before_a_line_ends_as_that_line_does(self):
        text = "a = 1\n    def f():\r\n        pass\n"
        new, _ = apply_edits(text, [[TextEdit(2, 5, 2, 5, "@deco\n    ")]])
        assert new == "a = 1\n    @deco\r\n    def f():\r\n        pass\n"

    def test_lines_indented_under_a_new_header_keep_their_own_line_ends(self):
        text = "x\nfor a in b:\r\n    f(a)\n    g(a)\r\ny\n"
        block = "with h():\n    for a in b:\n        f(a)\n        g(a)"
        new, _ = apply_edits(text, [[TextEdit(2, 1, 4, 9, block)]])
        assert new == "x\nwith h():\r\n    for a in b:\r\n        f(a)\n        g(a)\r\ny\n"

    def test_a_line_added_on_the_last_line_ends_as_the_line_above(self):
        new, _ = apply_edits("a\nb\r\nc = f()", [[TextEdit(3, 8, 3, 8, "\nd = 1")]])
        assert new == "a\nb\r\nc = f()\r\nd = 1"

    def test_an_edit_that_would_join_a_cr_and_an_lf_into_one_line_break_is_skipped(self):
        # Deleting `gone` (a line of its own) would put the CR that ends `a` before the LF of the
        # empty line under it: "a\r\n" reads as one line, not two.
        text = "a\rgone\n\nb\n"
        assert apply_edits(text, [[TextEdit(2, 1, 3, 1, "")]]) == (text, 0)


def test_apply_fixes_uses_findings_in_position_order():
    text = "a = f(x)\n"
    later = finding(1, 5, TextEdit(1, 5, 1, 9, "g(x)"))
    earlier_overlapping = finding(1, 1, TextEdit(1, 1, 1, 9, "b = 0"))
    without_fix = finding(1, 1)
    new, applied = apply_fixes(text, [later, without_fix, earlier_overlapping])
    assert (new, applied) == ("b = 0\n", 1)


class TestFixUntilStable:
    def test_repeats_until_nothing_is_left_to_fix(self):
        # Each round one fix applies; the other collides and comes back next round.
        def analyze(text: str) -> list[Finding]:
            found = []
            for number, line in enumerate(text.splitlines(), start=1):
                if line.endswith("(x)"):
                    end = len(line) + 1
                    found.append(finding(number, end, TextEdit(number, end, number, end, ".detach()")))
                    found.append(finding(number, end, TextEdit(number, end, number, end, ".cpu()")))
            return found

        outcome = fix_until_stable("a = f(x)\nb = g(x)\n", analyze)
        assert outcome.text == "a = f(x).detach()\nb = g(x).detach()\n"
        assert outcome.applied == 2
        assert outcome.resolved == 4, "both findings of each line went away"
        assert outcome.findings == []
        assert not outcome.rejected

    def test_stops_after_max_rounds(self):
        calls = []

        def analyze(text: str) -> list[Finding]:
            calls.append(text)
            return [finding(1, 1, TextEdit(1, 1, 1, 1, "#"))]

        outcome = fix_until_stable("x = 1\n", analyze, max_rounds=3)
        assert outcome.text == "###x = 1\n"
        assert outcome.applied == 3
        assert outcome.resolved == 0, "a fix whose finding stays has fixed nothing"

    def test_a_round_that_breaks_the_syntax_is_dropped(self):
        def analyze(text: str) -> list[Finding]:
            return [finding(1, 1, TextEdit(1, 1, 1, 1, "def ("))]

        outcome = fix_until_stable("x = 1\n", analyze)
        assert outcome.text == "x = 1\n"
        assert outcome.applied == 0
        assert outcome.rejected

    def test_uses_the_callers_findings_for_the_first_round(self):
        seen = []

        def analyze(text: str) -> list[Finding]:
            seen.append(text)
            return []

        first = [finding(1, 2, TextEdit(1, 2, 1, 2, "y"))]
        outcome = fix_until_stable("x\n", analyze, findings=first)
        assert outcome.text == "xy\n"
        assert seen == ["xy\n"]


def test_unsafe_fixes_are_applied_only_on_request():
    safe = finding(1, 8, TextEdit(1, 8, 1, 8, ".detach()"))
    unsafe = msgspec.structs.replace(finding(2, 8, TextEdit(2, 8, 2, 8, ".detach()")), fix=Fix("detach", (TextEdit(2, 8, 2, 8, ".detach()"),), safe=False))
    text = "a = f()\nb = g()\n"
    assert apply_fixes(text, [safe, unsafe]) == ("a = f().detach()\nb = g()\n", 1)
    assert apply_fixes(text, [safe, unsafe], unsafe=True) == ("a = f().detach()\nb = g().detach()\n", 2)


def test_parses():
    assert parses("x = 1\n")
    assert not parses("def (:\n")


class TestUnifiedDiff:
    def test_git_style_headers(self):
        diff = unified_diff("a\nb\n", "a\nc\n", "src/x.py")
        assert diff.splitlines()[:3] == ["--- a/src/x.py", "+++ b/src/x.py", "@@ -1,2 +1,2 @@"]
        assert "-b\n+c\n" in diff

    def test_no_change_no_diff(self):
        assert unified_diff("a\n", "a\n", "x.py") == ""

    def test_missing_final_newline_is_marked(self):
        diff = unified_diff("a", "b", "x.py")
        assert diff.endswith("-a\n\\ No newline at end of file\n+b\n\\ No newline at end of file\n")


class TestSourceFile:
    def test_bom_round_trips(self):
        data = codecs.BOM_UTF8 + "x = 'é'\n".encode()
        source = SourceFile.decode(data)
        assert source.text == "x = 'é'\n"
        assert source.encode(source.text) == data

    def test_coding_cookie_round_trips(self):
        data = "# -*- coding: latin-1 -*-\nx = 'é'\n".encode("latin-1")
        source = SourceFile.decode(data)
        assert source.text.endswith("x = 'é'\n")
        assert source.encode(source.text) == data

    def test_undecodable_bytes_raise(self):
        with pytest.raises(DecodeError, match="cannot decode line 1 as utf-8"):
            SourceFile.decode(b"x = '\xff'\n")


class TestFixCommand:
    """--fix and --diff through the CLI, against the real engine."""

    def test_fix_keeps_crlf_and_bom(self, tmp_path, monkeypatch, capsys):
        monkeypatch.chdir(tmp_path)
        original = codecs.BOM_UTF8 + RETAINED.replace("\n", "\r\n").encode()
        (tmp_path / "feats.py").write_bytes(original)
        code = main(["check", "--fix", "--select", "TL101", "feats.py"])
        fixed = (tmp_path / "feats.py").read_bytes()
        assert fixed.startswith(codecs.BOM_UTF8)
        assert fixed.count(b"\r\n") == original.count(b"\r\n")
        assert b"\n" not in fixed.replace(b"\r\n", b"")
        assert b".detach()" in fixed
        assert fixed != original
        assert code == 0
        assert "Fixed 1 problem." in capsys.readouterr().out

    def test_fix_keeps_each_line_end_of_a_file_that_mixes_them(self, tmp_path, monkeypatch):
        # TL206 moves `optimizer.zero_grad()` below the step: the step line keeps its CRLF, the moved
        # line ends as the line it joins, every other line keeps its own; a second run changes nothing.
        monkeypatch.chdir(tmp_path)
        original = (
            b"for x, y in loader:\n    loss = criterion(model(x), y)\r\n    loss.backward()\n"
            b"    optimizer.zero_grad()\r\n    optimizer.step()\r\nprint(loss)\n"
        )
        (tmp_path / "train.py").write_bytes(original)
        assert main(["check", "--fix", "--select", "TL206", "train.py"]) == 0
        fixed = (tmp_path / "train.py").read_bytes()
        assert fixed == (
            b"for x, y in loader:\n    loss = criterion(model(x), y)\r\n    loss.backward()\n"
            b"    optimizer.step()\r\n    optimizer.zero_grad()\r\nprint(loss)\n"
        )
        assert main(["check", "--fix", "--select", "TL206", "train.py"]) == 0
        assert (tmp_path / "train.py").read_bytes() == fixed

    def test_a_cookie_python_ignores_is_ignored_by_the_fix_too(self, tmp_path, monkeypatch):
        # Python honours a coding cookie on line 2 only below a blank or comment line 1: this file is
        # UTF-8. Read as latin-1, each "é" became two characters and the fix landed in the comment.
        monkeypatch.chdir(tmp_path)
        text = RETAINED.replace("import torch\n", "import torch\n# -*- coding: latin-1 -*-\n", 1).replace(
            "    features.append(encoder(images))", '    features.append(encoder(images, tag="éééé"))  # café'
        )
        (tmp_path / "feats.py").write_bytes(text.encode("utf-8"))
        assert main(["check", "--fix", "--select", "TL101", "feats.py"]) == 0
        fixed = (tmp_path / "feats.py").read_bytes().decode("utf-8")
        assert fixed == text.replace('tag="éééé")', 'tag="éééé").detach()')

    def test_diff_writes_nothing_and_exits_1(self, tmp_path, monkeypatch, capsys):
        monkeypatch.chdir(tmp_path)
        (tmp_path / "feats.py").write_text(RETAINED)
        assert main(["check", "--diff", "--select", "TL101", "feats.py"]) == 1
        assert (tmp_path / "feats.py").read_text() == RETAINED
        out = capsys.readouterr().out
        assert out.startswith("--- a/feats.py\n+++ b/feats.py\n")
        assert "+    features.append(encoder(images).detach())" in out

    def test_diff_without_fixes_exits_0(self, tmp_path, monkeypatch, capsys):
        monkeypatch.chdir(tmp_path)
        (tmp_path / "clean.py").write_text("x = 1\n")
        assert main(["check", "--diff", "clean.py"]) == 0
        assert capsys.readouterr().out == ""

    def test_file_with_syntax_error_is_not_rewritten(self, tmp_path, monkeypatch):
        monkeypatch.chdir(tmp_path)
        broken = RETAINED + "def oops(:\n    pass\n"
        (tmp_path / "feats.py").write_text(broken)
        assert main(["check", "--fix", "feats.py"]) == 1
        assert (tmp_path / "feats.py").read_text() == broken


# TL101 twice: a tensor (a safe .detach()) and a Hugging Face output of unknown structure (unsafe).
MIXED = """\
import torch
from transformers import AutoModelForCausalLM

model = AutoModelForCausalLM.from_pretrained("gpt2")
losses, outputs_kept = [], []
for batch in eval_dataloader:
    outputs = model(**batch)
    losses.append(outputs.loss)
    outputs_kept.append(outputs)
"""


class TestSafeAndUnsafeFixes:
    """ruff's model: --fix and --diff apply safe fixes; --unsafe-fixes opts in; --show-fixes says which is which."""

    def test_fix_applies_only_the_safe_one_and_says_the_other_needs_opting_in(self, tmp_path, monkeypatch, capsys):
        monkeypatch.chdir(tmp_path)
        (tmp_path / "train.py").write_text(MIXED)
        assert main(["check", "--fix", "--select", "TL101", "train.py"]) == 1
        text = (tmp_path / "train.py").read_text()
        assert "losses.append(outputs.loss.detach())" in text
        assert "outputs_kept.append(outputs)\n" in text
        out = capsys.readouterr().out
        assert "Fixed 1 problem." in out
        assert "unsafe: apply with --fix --unsafe-fixes" in out
        assert "(1 more with --unsafe-fixes)" in out

    def test_unsafe_fixes_opt_in(self, tmp_path, monkeypatch, capsys):
        monkeypatch.chdir(tmp_path)
        (tmp_path / "train.py").write_text(MIXED)
        assert main(["check", "--fix", "--unsafe-fixes", "--select", "TL101", "train.py"]) == 0
        assert "outputs_kept.append(outputs.detach())" in (tmp_path / "train.py").read_text()
        assert "Fixed 2 problems." in capsys.readouterr().out

    def test_show_fixes_lists_each_with_its_safety(self, tmp_path, monkeypatch, capsys):
        monkeypatch.chdir(tmp_path)
        (tmp_path / "train.py").write_text(MIXED)
        assert main(["check", "--diff", "--show-fixes", "--unsafe-fixes", "--select", "TL101", "train.py"]) == 1
        captured = capsys.readouterr()
        assert "Would apply 2 fixes:" in captured.err
        assert "train.py:8 TL101 (safe): detach before storing" in captured.err
        assert "train.py:9 TL101 (unsafe): detach before storing" in captured.err
        assert "+    outputs_kept.append(outputs.detach())" in captured.out
        assert (tmp_path / "train.py").read_text() == MIXED

    def test_json_says_which_fix_is_safe(self, tmp_path, monkeypatch, capsys):
        monkeypatch.chdir(tmp_path)
        (tmp_path / "train.py").write_text(MIXED)
        main(["check", "--format", "json", "--select", "TL101", "train.py"])
        document = json.loads(capsys.readouterr().out)
        assert [f["fix"]["applicability"] for f in document["findings"]] == ["safe", "unsafe"]
        assert document["summary"]["fixable"] == 1

    def test_the_flags_need_fix_or_diff(self, tmp_path, monkeypatch, capsys):
        monkeypatch.chdir(tmp_path)
        (tmp_path / "train.py").write_text(MIXED)
        assert main(["check", "--unsafe-fixes", "train.py"]) == 2
        assert "--unsafe-fixes: needs --fix or --diff" in capsys.readouterr().err


class TestAtomicWrites:
    """--fix replaces a file whole or not at all, keeping what the file was (mode, link)."""

    def test_a_failed_write_leaves_the_file_as_it_was(self, tmp_path):
        # A disk quota reached halfway through the write (RLIMIT_FSIZE: larger writes fail with
        # EFBIG): the fixed text is longer than the limit allows, the original fits.
        path = tmp_path / "feats.py"
        path.write_text(RETAINED)
        limit = len(RETAINED.encode()) + 4

        def quota() -> None:
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

        done = subprocess.run(
            [sys.executable, "-m", "trainlint", "check", "--fix", "--no-cache", "--select", "TL101", "feats.py"],
            cwd=tmp_path, capture_output=True, text=True, preexec_fn=quota, timeout=120, check=False,
        )
        assert done.returncode == 2, done.stdout + done.stderr
        assert "trainlint: error: cannot write feats.py: File too large; the file is unchanged" in done.stderr
        assert path.read_text() == RETAINED
        assert sorted(item.name for item in tmp_path.iterdir()) == ["feats.py"]  # no temporary file left

    def test_mode_bits_are_kept(self, tmp_path, monkeypatch):
        monkeypatch.chdir(tmp_path)
        path = tmp_path / "feats.py"
        path.write_text(RETAINED)
        path.chmod(0o751)
        assert main(["check", "--fix", "--select", "TL101", "feats.py"]) == 0
        assert ".detach()" in path.read_text()
        assert stat.S_IMODE(path.stat().st_mode) == 0o751

    def test_a_link_stays_a_link(self, tmp_path, monkeypatch):
        monkeypatch.chdir(tmp_path)
        (tmp_path / "real").mkdir()
        (tmp_path / "real" / "feats.py").write_text(RETAINED)
        (tmp_path / "feats.py").symlink_to("real/feats.py")
        assert main(["check", "--fix", "--select", "TL101", "feats.py"]) == 0
        assert (tmp_path / "feats.py").is_symlink()
        assert ".detach()" in (tmp_path / "real" / "feats.py").read_text()
        assert sorted(item.name for item in (tmp_path / "real").iterdir()) == ["feats.py"]


    def test_without_descriptors_or_locks_writes_stay_inside_and_stale_temporaries_go(self, tmp_path, monkeypatch):
        # Windows walks folders by path and has no flock (an open file cannot be removed there):
        # the same code, made to take those branches.
        from trainlint.analysis import files

        monkeypatch.setattr(files, "_BY_DESCRIPTOR", False)
        monkeypatch.setattr(files, "fcntl", None)
        project, other = tmp_path / "project", tmp_path / "other"
        (project / "lib").mkdir(parents=True)
        other.mkdir()
        (project / "lib" / "train.py").write_text("x = 1\n")
        (project / "lib" / ".train.py.abcdefgh.trainlint").write_text("left by a kill")
        (other / "victim.py").write_text("y = 1\n")
        (project / "away.py").symlink_to(other / "victim.py")
        roots = files.WriteRoots.given([str(project)])
        files.remove_stale_temporaries([str(project / "lib" / "train.py")], roots)
        files.replace_file(str(project / "lib" / "train.py"), b"x = 2\n", roots)
        assert sorted(path.name for path in (project / "lib").iterdir()) == ["train.py"]
        assert (project / "lib" / "train.py").read_text() == "x = 2\n"
        with pytest.raises(files.OutsideWriteRoots):
            files.replace_file(str(project / "away.py"), b"y = 2\n", roots)
        assert (other / "victim.py").read_text() == "y = 1\n"

EVALUATE = """\
import torch

{before}def {name_line}evaluate(model, loader):
    model.eval()
    total = 0
    for x, y in loader:
        total += (model(x).argmax(1) == y).sum().item()
    return total
"""
# TL102's loop form: an evaluation loop at top level, wrapped in `with torch.no_grad():` by its fix.
EVALUATION_LOOP = """\
import torch
from torchvision.models import resnet50

model = resnet50().cuda()
model.eval()
correct = 0
{before}for images, labels in test_dataloader:
    logits = model(images.cuda())
{inside}    correct += (logits.argmax(1) == labels.cuda()).sum().item()
print(correct)
"""


def _analyze(text: str) -> list[Finding]:
    from trainlint.analysis.engine import analyze_source

    return analyze_source(text, "train.py")


class TestOddWhitespace:
    """Form feeds, lines holding only a backslash and decorators already there: a fix lands where
    its finding is, once, and a second --fix changes nothing (issue 33)."""

    def test_a_form_feed_before_a_def_gets_one_decorator(self, tmp_path, monkeypatch, capsys):
        # Each --fix added another `\f@torch.no_grad()`, each then a syntax error (ten after ten runs).
        monkeypatch.chdir(tmp_path)
        (tmp_path / "train.py").write_text(EVALUATE.format(before="\f", name_line=""))
        for _ in range(3):
            main(["check", "--fix", "--no-cache", "train.py"])
        assert (tmp_path / "train.py").read_text() == EVALUATE.format(before="\f@torch.no_grad()\n", name_line="")
        assert "TL000" not in capsys.readouterr().out

    def test_a_line_holding_only_a_backslash_before_a_def_gets_one_decorator(self):
        # The statement splitter read `\\` alone as the statement's first word, so the decorator under
        # it was cut from its `def`, and every round added another (found by tests/test_fuzz_fix.py).
        text = EVALUATE.format(before="\\\n", name_line="")
        outcome = fix_until_stable(text, _analyze)
        assert outcome.text == EVALUATE.format(before="\\\n@torch.no_grad()\n", name_line="")
        assert outcome.applied == 1

    def test_a_def_whose_name_is_on_a_continuation_line_is_decorated_above_the_def(self):
        text = EVALUATE.format(before="", name_line="\\\n        ")
        outcome = fix_until_stable(text, _analyze)
        assert outcome.text == EVALUATE.format(before="@torch.no_grad()\n", name_line="\\\n        ")
        assert not outcome.rejected

    def test_the_decorator_goes_below_those_already_there(self):
        # Above `@staticmethod` it would wrap the staticmethod object, and the method would take `self`.
        text = (
            "import torch\n\n\nclass Runner:\n    @staticmethod\n    def evaluate(model, loader):\n        model.eval()\n"
            "        total = 0\n        for x, y in loader:\n            total += (model(x).argmax(1) == y).sum().item()\n"
            "        return total\n"
        )
        fixed = fix_until_stable(text, _analyze).text
        assert fixed == text.replace("    @staticmethod\n", "    @staticmethod\n    @torch.no_grad()\n")

    def test_a_form_feed_at_the_start_of_a_top_level_line_moves_no_column(self):
        # LibCST leaves the form feed out of the code it prints, so its columns on that line were one
        # short: the finding pointed at `f` of `if` and the fix replaced `f args.se`.
        text = "import torch\n\n\fif args.seed:\n    torch.manual_seed(args.seed)\n"
        [found] = _analyze(text)
        assert (found.code, found.line, found.column, found.end_column) == ("TL403", 3, 5, 14)
        assert fix_until_stable(text, _analyze).text == text.replace("if args.seed:", "if args.seed is not None:")

    def test_a_line_holding_only_a_backslash_moves_no_line(self):
        # LibCST leaves such a line out too, so every line after it was counted one short: the
        # finding was on `optimizer.step()` and the fix inserted `.detach()` into that line.
        text = RETAINED.replace("for images", "\\\nfor images")
        [found] = [finding for finding in _analyze(text) if finding.code == "TL101"]
        assert found.line == text.split("\n").index("    features.append(encoder(images))") + 1
        fixed = fix_until_stable(text, _analyze).text
        assert fixed == text.replace("encoder(images))", "encoder(images).detach())")

    def test_a_loop_after_a_form_feed_is_wrapped_with_the_form_feed_before_the_header(self):
        text = EVALUATION_LOOP.format(before="\f", inside="")
        outcome = fix_until_stable(text, _analyze)
        assert not outcome.rejected
        assert "\fwith torch.no_grad():\n    for images, labels in test_dataloader:\n        logits = model(" in outcome.text
        assert fix_until_stable(outcome.text, _analyze).text == outcome.text

    def test_an_indented_statement_after_a_form_feed_is_not_wrapped(self):
        # Wrapped, `\f        with torch.no_grad():` opened a block LibCST misreads after `    for ...:`
        # (Python reads it), which rejected the round and the detach beside it.
        text = (
            "import torch\n\ndef collect(net_g, noise_batches):\n\f    samples = {}\n"
            "    for step, z in enumerate(noise_batches):\n\f        fake = net_g(z)\n"
            "        samples[step] = fake.cpu()\n    torch.save(samples, 'samples.pt')\n"
        )
        assert [(f.code, f.fix is None) for f in _analyze(text) if f.code == "TL102"] == [("TL102", True)]
        outcome = fix_until_stable(text, _analyze, unsafe=True)
        assert not outcome.rejected
        assert outcome.text == text.replace("fake.cpu()", "fake.detach().cpu()")

    def test_a_loop_with_a_form_feed_inside_is_not_wrapped(self, tmp_path, monkeypatch, capsys):
        # The wrap indented `\f    correct += ...` before its form feed, where Python does not count
        # it: the line left the loop, and the "safe" fix summed once instead of per batch.
        monkeypatch.chdir(tmp_path)
        text = EVALUATION_LOOP.format(before="", inside="\f")
        (tmp_path / "train.py").write_text(text)
        main(["check", "--fix", "--no-cache", "train.py"])
        fixed = (tmp_path / "train.py").read_text()
        loops = [node for node in ast.walk(ast.parse(fixed)) if isinstance(node, ast.For)]
        assert [len(loop.body) for loop in loops] == [2], "both statements stay in the loop"
        assert "were not applied" not in capsys.readouterr().err
