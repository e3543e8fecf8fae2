"""Inputs built to break a linter: FIFOs and devices where files should be, link loops, file names
and configurations that are not text, patterns that are not patterns, notebooks of the wrong
shape. Each must end in one clear line naming the file (and key), the documented exit status,
no traceback, and in bounded time."""

from __future__ import annotations

import json
import os
import re
import resource
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from trainlint.analysis.files import MAX_SOURCE_BYTES

LIMIT_S = 60  # far above what any case needs (about a second): only a hang reaches it
# TL101: the stored outputs keep their graphs (nothing backwards them)
RETAINED = (
    "import torch\nfrom torchvision.models import resnet18\n\nencoder = resnet18()\nfeatures = []\n"
    "for images, _ in loader:\n    features.append(encoder(images))\ntorch.save(features, 'feats.pt')\n"
)

def _children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def trainlint(*args: str, cwd: Path) -> tuple[int, str, str]:
    environment = {**os.environ, "NO_COLOR": "1"}
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "trainlint", *args], cwd=cwd, capture_output=True,
                          env=environment, timeout=LIMIT_S, stdin=subprocess.DEVNULL)
    assert time.monotonic() - started < LIMIT_S
    out, err = done.stdout.decode("utf-8", "replace"), done.stderr.decode("utf-8", "replace")
    assert "Traceback" not in out + err, out + err
    return done.returncode, out, err


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    (tmp_path / "clean.py").write_text("x = 1\n")
    return tmp_path


# ---------------------------------------------------------------------------- what is not a regular file


@pytest.mark.parametrize("name", ["train.py", "train.ipynb"])
def test_a_fifo_named_like_a_source_is_reported_not_waited_on(folder, name):
    os.mkfifo(folder / name)
    message = f"{name}:1:1: error TL000 syntax-error: cannot read the file: a named pipe (FIFO), not a regular file"
    status, out, _ = trainlint("check", name, cwd=folder)
    assert status == 1 and message in out
    status, out, _ = trainlint("check", ".", cwd=folder)  # met while walking the folder
    assert status == 1 and message in out and "in 2 files" in out


def test_a_fifo_gitignore_is_told_and_left_out(folder):
    os.mkfifo(folder / ".gitignore")
    status, out, err = trainlint("check", ".", cwd=folder)
    assert status == 0 and "All checks passed (1 file)." in out
    assert err == "trainlint: warning: .gitignore: cannot read: a named pipe (FIFO), not a regular file; its patterns are not applied\n"


def test_a_fifo_configuration_is_a_configuration_error(folder):
    os.mkfifo(folder / "pyproject.toml")
    status, out, err = trainlint("check", ".", cwd=folder)
    assert status == 2 and out == ""
    assert err == "trainlint: error: pyproject.toml: cannot read: a named pipe (FIFO), not a regular file\n"


def test_a_source_linked_to_a_device(folder):
    (folder / "train.py").symlink_to("/dev/zero")
    status, out, _ = trainlint("check", "train.py", cwd=folder)
    assert status == 1
    assert "train.py:1:1: error TL000 syntax-error: cannot read the file: a character device, not a regular file" in out
    status, out, err = trainlint("estimate", "train.py", cwd=folder)
    assert status == 2 and out == ""
    assert err == "trainlint estimate: cannot read train.py: a character device, not a regular file\n"


def test_a_socket_named_like_a_source(folder):
    server = socket.socket(socket.AF_UNIX)
    try:
        server.bind(str(folder / "s.py"))
        status, out, _ = trainlint("check", ".", cwd=folder)
    finally:
        server.close()
    assert status == 1 and "s.py:1:1: error TL000 syntax-error: cannot read the file: a socket, not a regular file" in out


def test_a_source_over_the_size_limit(folder):
    with (folder / "huge.py").open("wb") as stream:
        stream.truncate(MAX_SOURCE_BYTES + 2**20)  # sparse: no disk, no time
    status, out, _ = trainlint("check", "huge.py", cwd=folder)
    assert status == 1 and "huge.py:1:1: error TL000 syntax-error: cannot read the file: 11.0 MiB, over the 10 MiB limit" in out


def test_a_coding_declaration_of_no_text_encoding(folder):
    """`# coding: rot13` made the decoder raise LookupError: the run ended in a traceback."""
    (folder / "odd.py").write_text("# coding: rot13\nx = 1\n")
    status, out, _ = trainlint("check", ".", cwd=folder)
    assert status == 1
    assert "odd.py:1:1: error TL000 syntax-error: 'rot13', which the coding declaration names, is not a text encoding" in out
    status, out, err = trainlint("estimate", "odd.py", cwd=folder)
    assert status == 2 and err.startswith("trainlint estimate: cannot read odd.py: 'rot13'")


def test_symbolic_link_loops(folder):
    (folder / "loop.py").symlink_to("loop.py")
    (folder / "a.py").symlink_to("b.py")
    (folder / "b.py").symlink_to("a.py")
    (folder / "cycle").symlink_to(".", target_is_directory=True)  # a folder loop: links are not walked into
    status, out, err = trainlint("check", "loop.py", cwd=folder)
    assert status == 2 and err == "trainlint: error: cannot read loop.py: Too many levels of symbolic links\n"
    status, out, _ = trainlint("check", ".", cwd=folder)
    assert status == 1
    for name in ("a.py", "b.py", "loop.py"):
        assert f"{name}:1:1: error TL000 syntax-error: cannot read the file: Too many levels of symbolic links" in out
    assert "in 4 files" in out


def test_a_file_name_that_is_not_utf8(folder):
    (folder / os.fsdecode(b"caf\xe9.py")).write_text(RETAINED)
    for output in ("json", "sarif", "github", "terminal"):
        status, out, _ = trainlint("check", "--select", "TL101", "--format", output, ".", cwd=folder)
        assert status == 1, output
        assert "caf\ufffd.py" in out or "caf%EF%BF%BD.py" in out, output
        if output in ("json", "sarif"):
            json.loads(out)
    status, out, _ = trainlint("check", "--show-files", ".", cwd=folder)
    assert status == 0 and out == "caf\ufffd.py\nclean.py\n"


def test_show_settings_in_a_folder_whose_name_is_not_utf8(folder):
    """The root's name went into a UTF-8 encoder as the OS handed it over: a traceback."""
    odd = folder / os.fsdecode(b"caf\xe9")
    odd.mkdir()
    (odd / "pyproject.toml").write_text("[tool.trainlint]\nfail-on = 'warning'\n")
    (odd / "train.py").write_text("x = 1\n")
    status, out, _ = trainlint("check", "--show-settings", ".", cwd=odd)
    assert status == 0
    assert out.splitlines()[:4] == [
        "# settings for train.py", 'configuration = "pyproject.toml"', f'root = "{folder}/caf\ufffd"', "select = []",
    ]


# ---------------------------------------------------------------------------- configurations


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"\x00\x01\x02\xff\xfe binary", "pyproject.toml: invalid TOML: not UTF-8 text (byte 0xff on line 1); TOML files are UTF-8"),
        ("[tool.trainlint]\n# auteur: Jos\xe9\nfail-on = 'note'\n".encode("latin-1"),
         "pyproject.toml: invalid TOML: not UTF-8 text (byte 0xe9 on line 2); TOML files are UTF-8"),
        (("a = " + "[" * 50_000 + "]" * 50_000 + "\n").encode(),
         "pyproject.toml: invalid TOML: arrays or tables nested too deeply to read"),
        # 200 KB of one dotted key: the TOML reader's time grows with the square of its parts
        (("[tool.trainlint]\nx" + ".x" * 100_000 + " = 1\n").encode(),
         "pyproject.toml: invalid TOML: a dotted key of more than 16 parts on line 2"),
        (b"[tool.trainlint]\nexclude = ['\\']\n",
         "pyproject.toml: [tool.trainlint] exclude[0]: invalid pattern '\\\\': not a gitignore pattern"),
        (b"[tool.trainlint]\nexclude = ['ok/', '**/[z-a]']\n",
         "pyproject.toml: [tool.trainlint] exclude[1]: invalid pattern '**/[z-a]': bad character range z-a"),
        (b'[tool.trainlint]\ncache-dir = "a\\u0000b"\n',  # the cache's folder raised ValueError: a traceback
         "pyproject.toml: [tool.trainlint] cache-dir: a path cannot hold a NUL character"),
        (b"[tool.trainlint.per-file-ignores]\n'!' = ['TL101']\n",
         "pyproject.toml: [tool.trainlint] per-file-ignores.'!': invalid pattern '!': not a gitignore pattern"),
    ],
)
def test_a_broken_configuration_is_one_line_naming_file_and_key(folder, content, message):
    (folder / "pyproject.toml").write_bytes(content)
    status, out, err = trainlint("check", ".", cwd=folder)
    assert (status, out) == (2, "")
    assert err == f"trainlint: error: {message}\n"


def test_a_bad_exclude_flag(folder):
    status, out, err = trainlint("check", "--exclude", "ok,\\", ".", cwd=folder)
    assert (status, out) == (2, "")
    assert err == "trainlint check: error: argument --exclude: invalid pattern '\\\\': not a gitignore pattern\n"


def test_a_bad_gitignore_pattern_is_told_and_skipped(folder):
    (folder / ".gitignore").write_text("\\\nclean.py\n")
    status, out, err = trainlint("check", ".", cwd=folder)
    assert status == 0 and "All checks passed (0 files)." in out  # the good line still applies
    assert err == (
        "trainlint: warning: .gitignore:1: invalid pattern '\\\\': not a gitignore pattern; the line is not applied\n"
        "trainlint: warning: no Python files found under .\n"
    )


BACKTRACKING = "*a" * 20 + "b"  # a regular expression of it tries every split of a long name among its stars


@pytest.mark.parametrize("where", [".gitignore", "exclude", "per-file-ignores", "--exclude"])
def test_a_pattern_that_backtracks_is_matched_in_linear_time(folder, where):
    (folder / ("a" * 200 + ".py")).write_text(RETAINED)
    args = ["check", "--select", "TL101", "."]
    if where == ".gitignore":
        (folder / ".gitignore").write_text(BACKTRACKING + "\n")
    elif where == "--exclude":
        args[1:1] = ["--exclude", BACKTRACKING]
    else:
        table = f"exclude = ['{BACKTRACKING}']" if where == "exclude" else f"per-file-ignores = {{ '{BACKTRACKING}' = ['TL101'] }}"
        (folder / "pyproject.toml").write_text(f"[tool.trainlint]\n{table}\n")
    started = _children_cpu_s()
    status, out, _ = trainlint(*args, cwd=folder)
    assert _children_cpu_s() - started < 5  # CPU seconds: a loaded machine stretches the wall clock, not this
    assert status == 1 and "Found 1 error (1 fixable with --fix) in 2 files." in out


def test_a_pattern_longer_than_any_path_is_refused_in_a_line(folder):
    long = "x" * 200_000
    (folder / "pyproject.toml").write_text(f"[tool.trainlint]\nexclude = ['{long}']\n")
    status, out, err = trainlint("check", ".", cwd=folder)
    assert (status, out) == (2, "")
    assert err == (f"trainlint: error: pyproject.toml: [tool.trainlint] exclude[0]: invalid pattern '{'x' * 60}'... "
                   "(200,000 characters): longer than 4096 characters\n")
    (folder / "pyproject.toml").unlink()
    (folder / ".gitignore").write_text(f"{long}\nclean.py\n")
    status, out, err = trainlint("check", ".", cwd=folder)
    assert status == 0 and "All checks passed (0 files)." in out
    assert err.startswith("trainlint: warning: .gitignore:1: invalid pattern 'xxx") and err.count("\n") == 2
    assert err.endswith("trainlint: warning: no Python files found under .\n")  # clean.py: the good line applies


# ---------------------------------------------------------------------------- notebooks


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"cells": [{"cell_type": "code", "source": 7}]}',
         "cells[0].source: expected a string or a list of strings, got a number"),
        ('{"cells": [], "metadata": {"kernelspec": []}}', "metadata.kernelspec: expected an object, got a list"),
        ('{"cells": [], "metadata": ' + "[" * 100_000 + "]" * 100_000 + "}", "not a notebook: its JSON is nested too deeply to read"),
        ('{"cells": [', "not a notebook: Expecting value: line 1 column 12 (char 11)"),
        ("\udcff", None),  # not UTF-8 at all: written as raw bytes below
    ],
)
def test_a_notebook_of_the_wrong_shape(folder, text, message):
    path = folder / "odd.ipynb"
    if message is None:
        path.write_bytes(b"\xff\xfe{}")
        message = "'utf-8' codec can't decode byte 0xff in position 0: invalid start byte"
    else:
        path.write_text(text)
    status, out, _ = trainlint("check", "odd.ipynb", cwd=folder)
    assert status == 1
    assert f"odd.ipynb:1:1: error TL000 syntax-error: cannot read the notebook: {message}\n" in out


# ---------------------------------------------------------------------------- plugins


def test_a_plugin_that_is_no_regular_file_is_reported_not_read(folder):
    """Its fingerprint for the cache was read with a plain read: a FIFO blocked it for ever."""
    os.mkfifo(folder / "rules.py")
    (folder / "pyproject.toml").write_text("[tool.trainlint]\nplugins = ['rules.py']\nexclude = ['rules.py']\n")
    status, out, err = trainlint("check", "--allow-plugins", ".", cwd=folder)
    assert status == 0 and "All checks passed (1 file)." in out
    assert err == f"trainlint: warning: plugin {folder / 'rules.py'}: failed to import: cannot read it: a named pipe (FIFO), not a regular file\n"


def test_a_plugin_linked_to_a_device_is_refused_before_it_is_read(folder):
    """/dev/zero filled the memory; a plugin path that leads out of the project is now refused outright."""
    (folder / "rules.py").symlink_to("/dev/zero")
    (folder / "pyproject.toml").write_text("[tool.trainlint]\nplugins = ['rules.py']\nexclude = ['rules.py']\n")
    status, out, err = trainlint("check", "--allow-plugins", ".", cwd=folder)
    assert (status, out) == (2, "")
    assert "plugins[0]: rules.py lies outside the project" in err and err.count("\n") == 1


# ---------------------------------------------------------------------------- what reaches the terminal

_TERMINAL_CONTROLS = re.compile(r"[\x00-\x09\x0b-\x1f\x7f-\x9f]")  # all but the line break


def test_control_characters_from_the_checked_folder_never_reach_the_terminal(folder):
    """A comment on a reported line that sets the clipboard (OSC 52) and clears the screen, file
    and folder names that hold escape sequences: every output a person's terminal (or GitHub's
    log) shows them in has them escaped."""
    (folder / "\x1b[2Jtrain.py").write_text(RETAINED.replace(
        "features.append(encoder(images))",
        "features.append(encoder(images))  # \x1b]52;c;cHduZWQ=\x07\x1b[2J",
    ))
    odd = folder / "\x1b]0;owned\x07"
    odd.mkdir()
    (odd / "ok.py").write_text("x = 1\n")
    os.mkfifo(odd / ".gitignore")  # a warning names it
    outputs = []
    for output in ("terminal", "github"):
        status, out, err = trainlint("check", "--select", "TL101", "--format", output, ".", cwd=folder)
        assert status == 1, output
        outputs.append(out + err)
    terminal, github = outputs
    assert "\\x1b[2Jtrain.py:7:21: error TL101 retained-graph" in terminal
    assert "# \\x1b]52;c;cHduZWQ=\\x07\\x1b[2J" in terminal
    assert "trainlint: warning: \\x1b]0;owned\\x07/.gitignore: cannot read" in terminal
    assert "::error file=\\x1b[2Jtrain.py,line=7" in github
    status, out, err = trainlint("check", "--show-files", ".", cwd=folder)
    outputs.append(out + err)
    assert status == 0 and "\\x1b[2Jtrain.py\n" in out
    (odd / "pyproject.toml").write_text("[tool.trainlint]\nfail-on = 'never'\n")
    status, out, err = trainlint("check", "--show-settings", odd.name, cwd=folder)
    outputs.append(out + err)
    assert status == 2 and "\\x1b]0;owned\\x07/pyproject.toml: [tool.trainlint] fail-on" in err
    for text in outputs:
        assert not _TERMINAL_CONTROLS.search(text), text


@pytest.mark.parametrize("config", ['"ds\\x00config.json"', '"ds\x00config.json"'])
def test_estimate_reads_past_a_nul_in_a_deepspeed_config_name(folder, config):
    """The name went to the file system as it was, which raised ValueError: a traceback."""
    (folder / "train.py").write_text(
        "import deepspeed\nfrom transformers import AutoModelForCausalLM\n"
        'model = AutoModelForCausalLM.from_pretrained("gpt2")\n'
        f"engine, *_ = deepspeed.initialize(model=model, config={config})\n"
    )
    status, out, _ = trainlint("estimate", "train.py", "--gpu", "h100-sxm", cwd=folder)
    assert status == 0 and "gpt2" in out


def test_estimate_shows_a_model_name_with_escapes(folder):
    (folder / "train.py").write_text(
        'from transformers import AutoModel\nmodel = AutoModel.from_pretrained("\x1b[2Jgpt\\x1b]0;x\\x07")\n'
    )
    status, out, err = trainlint("estimate", "train.py", cwd=folder)
    assert status == 2 and out == ""
    assert err.startswith("trainlint estimate: `\\x1b[2Jgpt\\x1b]0;x\\x07` is neither in the model catalog")
    assert not _TERMINAL_CONTROLS.search(err)
# ---------------------------------------------------------------------------- --fix writes only inside the paths given

NOTEBOOK = json.dumps({
    "cells": [{"cell_type": "code", "metadata": {}, "execution_count": None, "outputs": [], "source": RETAINED}],
    "metadata": {}, "nbformat": 4, "nbformat_minor": 5,
})


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A project folder next to the one checked, whose files a link in the checked one leads to."""
    other = tmp_path / "other"
    other.mkdir()
    (other / "victim.py").write_text(RETAINED)
    (other / "victim.ipynb").write_text(NOTEBOOK)
    return other


@pytest.mark.parametrize("flags", [["--fix"], ["--fix", "--unsafe-fixes"]])
@pytest.mark.parametrize("suffix", [".py", ".ipynb"])
def test_a_link_in_a_checked_folder_to_a_file_outside_it_is_checked_not_written(tmp_path, outside, suffix, flags):
    project = tmp_path / "project"
    project.mkdir()
    (project / f"train{suffix}").symlink_to(outside / f"victim{suffix}")
    before = (outside / f"victim{suffix}").read_bytes()
    status, out, err = trainlint("check", *flags, "project", cwd=tmp_path)
    assert (outside / f"victim{suffix}").read_bytes() == before
    assert status == 1 and "TL101" in out, "the file is still checked and its findings reported"
    assert err == (
        f"trainlint: warning: not fixing project/train{suffix}: it resolves to {outside / f'victim{suffix}'}, "
        "outside the paths given on the command line\n"
    )


def test_a_link_to_a_file_inside_the_checked_folder_is_fixed_once_at_its_target(tmp_path):
    project = tmp_path / "project"
    (project / "lib").mkdir(parents=True)
    (project / "lib" / "real.py").write_text(RETAINED)
    (project / "train.py").symlink_to("lib/real.py")
    status, _, err = trainlint("check", "--fix", "project", cwd=tmp_path)
    assert (status, err) == (0, "")
    assert (project / "train.py").is_symlink()
    assert (project / "lib" / "real.py").read_text().count(".detach()") == 1
    assert sorted(path.name for path in (project / "lib").iterdir()) == ["real.py"]


def test_a_named_link_is_fixed_only_inside_the_folders_the_command_line_gives(tmp_path, outside):
    # A file named on the command line gives the folder that holds it; its own link is followed only
    # into that folder, or into a folder named too. A link to anywhere else is named by the user in
    # full to be fixed there.
    project = tmp_path / "project"
    (project / "lib").mkdir(parents=True)
    (project / "lib" / "real.py").write_text(RETAINED)
    (project / "inside.py").symlink_to("lib/real.py")
    (project / "away.py").symlink_to(outside / "victim.py")
    status, _, err = trainlint("check", "--fix", "project/away.py", cwd=tmp_path)
    assert status == 1 and (outside / "victim.py").read_text() == RETAINED
    assert "not fixing project/away.py: it resolves to" in err
    assert trainlint("check", "--fix", "project/inside.py", cwd=tmp_path)[0] == 0
    assert ".detach()" in (project / "lib" / "real.py").read_text()
    assert trainlint("check", "--fix", "project/away.py", "other", cwd=tmp_path)[0] == 0
    assert ".detach()" in (outside / "victim.py").read_text()


def test_a_linked_folder_inside_a_checked_folder_is_not_written_through(tmp_path, outside):
    project = tmp_path / "project"
    project.mkdir()
    (project / "vendored").symlink_to(outside, target_is_directory=True)
    status, out, _ = trainlint("check", "--fix", "project", cwd=tmp_path)
    assert status == 0 and "(0 files)" in out, "links to folders are not walked into"
    assert (outside / "victim.py").read_text() == RETAINED


def test_a_folder_that_turns_into_a_link_after_the_check_is_not_written_through(tmp_path, outside, monkeypatch):
    from trainlint.analysis import files

    project = tmp_path / "project"
    (project / "lib").mkdir(parents=True)
    (project / "lib" / "victim.py").write_text(RETAINED)
    roots = files.WriteRoots.given([str(project)])
    (project / "lib").rename(tmp_path / "moved")
    (project / "lib").symlink_to(outside, target_is_directory=True)
    with pytest.raises(files.OutsideWriteRoots):
        files.replace_file(str(project / "lib" / "victim.py"), b"written", roots)
    # Turned into a link between the check of the real path and the write: the folders are opened
    # one by one without following links.
    monkeypatch.setattr(os.path, "realpath", lambda path: os.path.normpath(os.path.abspath(path)))
    with pytest.raises(NotADirectoryError):
        files.replace_file(str(project / "lib" / "victim.py"), b"written", roots)
    assert (outside / "victim.py").read_text() == RETAINED
    assert sorted(path.name for path in outside.iterdir()) == ["victim.ipynb", "victim.py"]


# ---------------------------------------------------------------------------- what a killed --fix leaves


def _fix_stopped_before_its_rename(folder: Path, how: str) -> subprocess.Popen:
    """A --fix of train.py whose rename never comes: it kills itself there (a kill during --fix), or
    waits there (a fix still running)."""
    stop = "os.kill(os.getpid(), signal.SIGKILL)" if how == "killed" else "time.sleep(60)"
    code = (
        "import os, signal, sys, time\nfrom trainlint.analysis import files\n"
        f"files.os.replace = lambda *args, **kwargs: {stop}\n"
        "sys.stdout.write('writing\\n'); sys.stdout.flush()\n"
        "from trainlint.cli import main\nmain(['check', '--fix', '--no-cache', 'train.py'])\n"
    )
    return subprocess.Popen([sys.executable, "-c", code], cwd=folder, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)


def _temporaries(folder: Path) -> list[str]:
    return sorted(path.name for path in folder.iterdir() if path.name.endswith(".trainlint"))


def test_a_temporary_a_killed_fix_left_is_removed_by_the_next_fix(folder):
    (folder / "train.py").write_text(RETAINED)
    killed = _fix_stopped_before_its_rename(folder, "killed")
    assert killed.wait(timeout=LIMIT_S) == -9
    [left] = _temporaries(folder)
    assert left.startswith(".train.py.")
    assert (folder / "train.py").read_text() == RETAINED
    status, _, err = trainlint("check", "--fix", "train.py", cwd=folder)
    assert (status, err) == (0, "")
    assert _temporaries(folder) == []
    assert ".detach()" in (folder / "train.py").read_text()


def test_a_running_fixs_temporary_is_left_to_it(folder):
    (folder / "train.py").write_text(RETAINED)
    running = _fix_stopped_before_its_rename(folder, "running")
    try:
        assert running.stdout is not None and running.stdout.readline() == b"writing\n"
        deadline = time.monotonic() + LIMIT_S
        while not _temporaries(folder) and time.monotonic() < deadline:
            time.sleep(0.05)
        [held] = _temporaries(folder)
        trainlint("check", "--fix", "clean.py", "train.py", cwd=folder)
        assert _temporaries(folder) == [held]
    finally:
        running.kill()
        running.wait(timeout=LIMIT_S)
    trainlint("check", "--fix", "clean.py", cwd=folder)  # checking the file is enough: nothing to write
    assert _temporaries(folder) == [held], "only the temporaries of the files checked are looked at"
    trainlint("check", "--fix", "train.py", cwd=folder)
    assert _temporaries(folder) == []


def test_only_what_trainlint_names_as_its_temporaries_is_removed(folder, outside):
    (folder / "train.py").write_text("x = 1\n")
    kept = [".train.py.short.trainlint", ".train.py.abcdefgh.trainlint.bak", "train.py.abcdefgh.trainlint",
            ".notes.txt.abcdefgh.trainlint"]
    for name in [*kept, ".train.py.abcdefgh.trainlint", ".train.py.ab_de9gh.trainlint"]:
        (folder / name).write_text("left")
    (folder / ".train.py.linkedxx.trainlint").symlink_to(outside / "victim.py")  # a link, not a file we wrote
    before = sorted(path.name for path in folder.iterdir())
    trainlint("check", "--diff", "--no-cache", "train.py", cwd=folder)
    assert sorted(path.name for path in folder.iterdir()) == before, "--diff writes nothing, and removes nothing"
    trainlint("check", "--fix", "--no-cache", "train.py", cwd=folder)
    assert sorted(path.name for path in folder.iterdir()) == sorted(
        ["clean.py", "train.py", "other", *kept, ".train.py.linkedxx.trainlint"]
    )
    assert (outside / "victim.py").read_text() == RETAINED
