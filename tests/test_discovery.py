from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from trainlint.cli import main
from trainlint.discovery import Exclusions, MissingPathError, discover_files
from trainlint.git_files import tracked_paths


@pytest.fixture
def tree(tmp_path, monkeypatch):
    """Make files (and folders) relative to a fresh working directory."""
    monkeypatch.chdir(tmp_path)

    def make(*paths: str, text: str = "x = 1\n") -> None:
        for path in paths:
            target = tmp_path / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text)

    return make


def files(*paths: str, exclude: tuple[str, ...] = ()) -> list[str]:
    return discover_files(list(paths), Exclusions(exclude, Path.cwd()))


def test_python_files_only_in_sorted_order(tree):
    tree("b.py", "a.py", "pkg/z.py", "pkg/sub/y.py", "notes.txt", "script.pyc", "pkg/data.json")
    assert files(".") == ["a.py", "b.py", "pkg/sub/y.py", "pkg/z.py"]


def test_skipped_folders(tree):
    tree("keep.py", *(f"{name}/x.py" for name in
                      [".git", ".venv", "venv", "__pycache__", "node_modules", "build", "dist", "lib/site-packages"]))
    assert files(".") == ["keep.py"]


def test_cookiecutter_templates_are_not_python_yet(tree):
    """microsoft/LoRA ships transformers' cookiecutter templates: 240 statements of them are not
    Python until rendered. Named on the command line, a template is still checked."""
    template = "templates/cookiecutter-template-{{cookiecutter.modelname}}"
    tree("train.py", f"{template}/modeling_{{{{cookiecutter.lowercase_modelname}}}}.py", "templates/run_{{cookiecutter.task}}.py",
         "templates/helpers.py")
    assert files(".") == ["templates/helpers.py", "train.py"]
    assert files("templates/run_{{cookiecutter.task}}.py") == ["templates/run_{{cookiecutter.task}}.py"]


def test_display_paths_follow_what_the_user_typed(tree):
    tree("src/train.py")
    assert files("./src") == ["src/train.py"]
    assert files(str(Path.cwd() / "src")) == [str(Path.cwd() / "src" / "train.py")]


def test_duplicates_are_checked_once(tree):
    tree("src/train.py")
    assert files("src", "src/train.py", "./src/train.py") == ["src/train.py"]


def test_gitignore_is_respected(tree):
    tree("train.py", "scratch.py", "logs/run.py", "generated/model_pb2.py")
    Path(".gitignore").write_text("scratch.py\nlogs/\n*_pb2.py\n")
    assert files(".") == ["train.py"]


def test_nested_gitignore_applies_to_its_subtree_only(tree):
    tree("tmp.py", "pkg/tmp.py", "pkg/inner/tmp.py", "other/tmp.py")
    Path("pkg/.gitignore").write_text("tmp.py\n")
    assert files(".") == ["other/tmp.py", "tmp.py"]


def test_nested_gitignore_can_reinclude(tree):
    tree("gen/a.py", "gen/keep.py", "gen/b.py")
    Path(".gitignore").write_text("gen/*.py\n")
    Path("gen/.gitignore").write_text("!keep.py\n")
    assert files(".") == ["gen/keep.py"]


def test_a_gitignore_that_keeps_only_folders_and_python_files(tree):
    """git's idiom: ignore everything, take back every folder, then the files wanted. pathspec let
    the first `*` outrank the later `!*/` for a folder, and src/ was skipped whole."""
    tree("train.py", "src/model.py", "src/deep/data.py", "src/notes.py.bak")
    Path(".gitignore").write_text("*\n!*/\n!*.py\n")
    assert files(".") == ["src/deep/data.py", "src/model.py", "train.py"]


def test_gitignore_above_the_named_folder_counts_inside_a_repository(tree):
    tree("src/train.py", "src/generated/out.py")
    Path(".git").mkdir()
    Path(".gitignore").write_text("src/generated/\n")
    assert files("src") == ["src/train.py"]


def test_named_file_is_checked_even_when_gitignored(tree):
    tree("scratch.py", "tool")
    Path(".gitignore").write_text("scratch.py\n")
    assert files("scratch.py", "tool") == ["scratch.py", "tool"]


def test_exclude_globs(tree):
    tree("train.py", "tests/fixtures/bad.py", "tests/test_a.py", "proto/m_pb2.py")
    assert files(".", exclude=("tests/fixtures/", "*_pb2.py")) == ["tests/test_a.py", "train.py"]


def test_exclude_applies_to_named_files_too(tree):
    tree("m_pb2.py")
    assert files("m_pb2.py", exclude=("*_pb2.py",)) == []


def test_missing_path(tree):
    with pytest.raises(MissingPathError, match="path not found: nope.py"):
        files("nope.py")


def test_cli_respects_gitignore_and_exclude(tree, capsys):
    tree("a.py", "ignored.py", "excluded/b.py", "configured/c.py")
    Path(".gitignore").write_text("ignored.py\n")
    Path("pyproject.toml").write_text("[tool.trainlint]\nexclude = ['configured/']\n")
    assert main(["check", "."]) == 0
    assert "(2 files)" in capsys.readouterr().out  # a.py, excluded/b.py
    # --exclude replaces the configured list
    assert main(["check", ".", "--exclude", "excluded/"]) == 0
    assert "(2 files)" in capsys.readouterr().out  # a.py, configured/c.py


def test_cli_missing_path_exits_2(tree, capsys):
    assert main(["check", "nope.py"]) == 2
    assert capsys.readouterr().err == "trainlint: error: path not found: nope.py\n"


# ---------------------------------------------------------------------------- git's own ignore rules


@pytest.fixture
def repository(tree, tmp_path, monkeypatch):
    """A real git repository as the working directory, with its own global git configuration."""
    home = tmp_path / ".home"
    home.mkdir()
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(home / "gitconfig"))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / "xdg"))
    (home / "gitconfig").write_text("")
    for variable in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE"):
        monkeypatch.delenv(variable, raising=False)
    subprocess.run(["git", "init", "-q"], check=True)
    return home


def test_git_info_exclude_is_honoured(repository, tree):
    tree("train.py", "local_only.py", "mine/notes.py")
    Path(".git/info").mkdir(exist_ok=True)
    Path(".git/info/exclude").write_text("local_only.py\nmine/\n")
    assert files(".") == ["train.py"]


def test_global_excludes_file_is_honoured(repository, tree):
    tree("train.py", "train.scratch.py")
    (repository / "ignore").write_text("*.scratch.py\n")
    (repository / "gitconfig").write_text(f"[core]\n\texcludesFile = {repository / 'ignore'}\n")
    assert files(".") == ["train.py"]


def test_default_global_excludes_file_is_honoured(repository, tree):
    tree("train.py", "train.scratch.py")
    (repository / "xdg" / "git").mkdir(parents=True)
    (repository / "xdg" / "git" / "ignore").write_text("*.scratch.py\n")
    assert files(".") == ["train.py"]


def test_a_gitignore_pattern_beats_info_exclude(repository, tree):
    tree("gen/keep.py", "gen/drop.py")
    Path(".git/info").mkdir(exist_ok=True)
    Path(".git/info/exclude").write_text("gen/*.py\n")
    Path(".gitignore").write_text("!gen/keep.py\n")
    assert files(".") == ["gen/keep.py"]


def test_tracked_files_are_checked_though_a_pattern_matches_them(repository, tree):
    tree("vendor/patched.py", "vendor/other.py", "train.py")
    Path(".gitignore").write_text("vendor/\n")
    subprocess.run(["git", "add", "--force", "vendor/patched.py"], check=True)
    assert files(".") == ["train.py", "vendor/patched.py"]  # as git sees it: tracked files are never ignored


def test_without_git_the_repository_exclude_file_still_counts(repository, tree, monkeypatch):
    tree("train.py", "local_only.py")
    Path(".git/info").mkdir(exist_ok=True)
    Path(".git/info/exclude").write_text("local_only.py\n")
    monkeypatch.setenv("PATH", str(repository))  # no git to ask
    assert files(".") == ["train.py"]


def test_bad_patterns_are_told_and_skipped(tree, capsys):
    tree("train.py", "scratch.py", "odd.py")
    Path(".gitignore").write_text("\\\nscratch.py\n**/[z-a]\n")
    assert files(".") == ["odd.py", "train.py"]
    err = capsys.readouterr().err
    assert "trainlint: warning: .gitignore:1: invalid pattern '\\\\': not a gitignore pattern; the line is not applied" in err
    assert ".gitignore:3: invalid pattern '**/[z-a]': bad character range z-a" in err


# ---------------------------------------------------------------------------- nothing of a repository runs


def _git(*args: str, cwd: str | Path = ".") -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout


def test_checking_a_repository_runs_none_of_its_configured_commands(repository, tree, capsys):
    # git starts core.fsmonitor's command for `git ls-files`: a downloaded project (or a nested one
    # inside it) could run anything the moment it is checked.
    tree("train.py", "vendor/nested/model.py")
    _git("add", "train.py")
    _git("init", "-q", cwd="vendor/nested")
    _git("add", "model.py", cwd="vendor/nested")
    _git("config", "core.fsmonitor", "touch PWNED_TOP; false")
    _git("config", "core.fsmonitor", "touch ../../PWNED_NESTED; false", cwd="vendor/nested")
    main(["check", "--quiet", "--no-cache", "."])
    main(["check", "--show-files", "."])
    assert capsys.readouterr().out.split() == ["train.py", "vendor/nested/model.py"]
    assert not Path("PWNED_TOP").exists() and not Path("PWNED_NESTED").exists()


def test_discovery_runs_no_git_at_all(repository, tree, tmp_path, monkeypatch):
    # Whatever a repository configures (fsmonitor, hooks, filters, an alias of tomorrow's git), no
    # git process means none of it runs: a `git` that records being started is never started.
    tree("train.py", "vendor/patched.py")
    Path(".gitignore").write_text("vendor/\n")
    _git("add", "--force", "vendor/patched.py")
    spy = tmp_path / "bin"
    spy.mkdir()
    (spy / "git").write_text(f"#!/bin/sh\ntouch {tmp_path}/git-was-run\nexit 1\n")
    (spy / "git").chmod(0o755)
    monkeypatch.setenv("PATH", f"{spy}:{os.environ['PATH']}")
    assert files(".") == ["train.py", "vendor/patched.py"]
    assert not (tmp_path / "git-was-run").exists()


_INDEX_SHAPES = {
    "version 2": [],
    "version 3 (intent-to-add)": [["add", "-N", "deep/er/intent_to_add.py"]],
    "version 4 (prefix-compressed)": [["update-index", "--index-version", "4"]],
    "split index": [["update-index", "--split-index"], ["add", "--force", "ignored/late_addition.py"]],
    "no checksum (index.skipHash)": [["config", "index.skipHash", "true"], ["add", "--force", "ignored/late_addition.py"]],
}


@pytest.mark.parametrize("shape", list(_INDEX_SHAPES))
def test_the_index_is_read_as_git_lists_it(repository, tree, shape):
    names = [f"pkg/module_{index:03}.py" for index in range(40)] + ["pkg/module_0001_longer_name.py", "a.py",
             "deep/er/" + "/".join(["long" * 50] * 5) + ".py", "ignored/tracked.py", "ignored/late_addition.py", "ünïcode/naïve.py",
             "deep/er/intent_to_add.py"]
    tree(*names)
    Path(".gitignore").write_text("ignored/\n")
    _git("add", "--force", *[name for name in names if name not in ("ignored/late_addition.py", "deep/er/intent_to_add.py")])
    for command in _INDEX_SHAPES[shape]:
        _git(*command)
    listed = _git("-c", "core.quotePath=false", "ls-files", "-z", "--cached").split("\0")
    assert tracked_paths(Path(".git/index")) == frozenset(name for name in listed if name)


def test_a_sha256_repository_and_a_linked_worktree(repository, tree, tmp_path):
    tree("ignored/tracked.py", "train.py")
    shutil.rmtree(".git")
    _git("init", "-q", "--object-format=sha256", "-b", "main")
    Path(".gitignore").write_text("ignored/\n")
    _git("add", "--force", ".gitignore", "ignored/tracked.py", "train.py")
    _git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "first")
    assert tracked_paths(Path(".git/index")) == {".gitignore", "ignored/tracked.py", "train.py"}
    _git("worktree", "add", "-q", str(tmp_path / "linked"))
    Path(".git/info").mkdir(exist_ok=True)
    Path(".git/info/exclude").write_text("local_only.py\n")
    (tmp_path / "linked" / "local_only.py").write_text("x = 1\n")
    assert discover_files([str(tmp_path / "linked")], Exclusions((), tmp_path / "linked")) == sorted(
        str(tmp_path / "linked" / name) for name in ("ignored/tracked.py", "train.py")
    )


def test_a_damaged_index_leaves_the_ignore_files_to_decide(repository, tree):
    tree("train.py", "ignored/tracked.py")
    Path(".gitignore").write_text("ignored/\n")
    _git("add", "--force", "ignored/tracked.py")
    assert files(".") == ["ignored/tracked.py", "train.py"]
    Path(".git/index").write_bytes(Path(".git/index").read_bytes()[:-30])
    assert files(".") == ["train.py"]
    Path(".git/index").unlink()
    os.mkfifo(".git/index")  # never read: a FIFO would block
    assert files(".") == ["train.py"]


def test_a_sparse_index_tracks_whole_folders(repository, tree):
    tree("pkg/train.py", "ignored/tracked.py", "ignored/deeper/also.py")
    Path(".gitignore").write_text("ignored/\n")
    _git("add", "--force", ".gitignore", "pkg/train.py", "ignored/tracked.py", "ignored/deeper/also.py")
    _git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "first")
    _git("sparse-checkout", "set", "--cone", "--sparse-index", "pkg")
    listed = _git("ls-files", "-z", "--sparse").split("\0")
    assert "ignored/" in listed, "git keeps the folder out of the cone as one entry"
    assert tracked_paths(Path(".git/index")) == frozenset(name for name in listed if name)
    tree("ignored/tracked.py", "ignored/deeper/also.py")  # put back by hand outside the cone: still tracked
    assert files(".") == ["ignored/deeper/also.py", "ignored/tracked.py", "pkg/train.py"]
