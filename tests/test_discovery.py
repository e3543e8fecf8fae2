from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from trainlint.cli import main
from trainlint.discovery import Exclusions, MissingPathError, discover_files


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
