"""The mined bug corpus (benchmarks/mined): every pair file follows the format run.py reads, and the
split into dev and test halves is the fixed one. No network and no mirrors: only the files."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

MINED = Path(__file__).resolve().parent.parent / "benchmarks" / "mined"


def _load(name: str):
    spec = importlib.util.spec_from_file_location(name, MINED / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # run.py imports split by name, as it does when run as a script
    spec.loader.exec_module(module)
    return module


split = _load("split")
run = _load("run")

PAIR_FILES = sorted((MINED / "pairs").glob("*.toml"))


@pytest.mark.parametrize(("repository", "expected"), [
    ("karpathy/minGPT", "dev"),
    ("karpathy/nanoGPT", "test"),
    ("KARPATHY/NANOGPT", "test"),  # the name is lower-cased first: GitHub names are case-insensitive
    ("huggingface/transformers", "dev"),
    ("EleutherAI/gpt-neox", "test"),
])
def test_the_split_is_the_fixed_one(repository, expected):
    assert split.half(repository) == expected


def test_there_are_pairs():
    assert PAIR_FILES


@pytest.mark.parametrize("path", PAIR_FILES, ids=lambda path: path.stem)
def test_every_pair_file_has_the_format(path):
    pair = run.read_pair(path)
    assert pair.half in ("dev", "test")
    assert all(file.parent_lines and file.fix_lines for file in pair.files)


def test_no_commit_is_mined_twice():
    commits = [pair.commit for pair in map(run.read_pair, PAIR_FILES)]  # a fork's history carries the same commits
    assert len(commits) == len(set(commits))


def test_a_pair_without_its_rule_is_refused(tmp_path):
    good = PAIR_FILES[0].read_text(encoding="utf-8")
    broken = tmp_path / PAIR_FILES[0].name
    broken.write_text("\n".join(line for line in good.splitlines() if not line.startswith("rule =")), encoding="utf-8")
    with pytest.raises(run.PairError, match="`rule` must be a non-empty string"):
        run.read_pair(broken)


@pytest.mark.parametrize("repository", ["Lightning-AI/pytorch-lightning", "kohya-ss/SD-Scripts"])
def test_a_pair_from_a_repository_kept_out_is_refused(tmp_path, repository):
    pair = run.read_pair(PAIR_FILES[0])
    text = PAIR_FILES[0].read_text(encoding="utf-8").replace(f'"{pair.repository}"', f'"{repository}"', 1)
    kept_out = tmp_path / f"{run.pair_id(repository, pair.commit)}.toml"
    kept_out.write_text(text, encoding="utf-8")
    with pytest.raises(run.PairError, match="kept out of the corpus"):
        run.read_pair(kept_out)


def test_a_pair_named_after_another_commit_is_refused(tmp_path):
    renamed = tmp_path / "owner__name__0000000.toml"
    renamed.write_text(PAIR_FILES[0].read_text(encoding="utf-8"), encoding="utf-8")
    with pytest.raises(run.PairError, match="must be named"):
        run.read_pair(renamed)


def test_a_finding_on_the_def_counts_where_its_evidence_points():
    # TL102 reports `def evaluate(` and names the forward that records the graph in its evidence
    reported_on_def = run.Hit(line=49, severity="error", evidence=(62, 81))
    assert reported_on_def.at((80, 81))
    assert not reported_on_def.at((80, 81), own_line_only=True)
    assert not reported_on_def.at((120,))


def _commit_all(work: Path, message: str) -> str:
    subprocess.run(["git", "-C", str(work), "add", "-A"], check=True, capture_output=True)
    subprocess.run(["git", "-C", str(work), "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", message],
                   check=True, capture_output=True)
    return subprocess.run(["git", "-C", str(work), "rev-parse", "HEAD"], check=True, capture_output=True,
                          text=True).stdout.strip()


TRAINS = """\
import torch

def train(model, loader, optimizer):
    for x, y in loader:
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
"""
HELPER = """\
def describe(model):
    return str(model)
"""
BROKEN = """\
def describe(model)
    return str(model)
"""


@pytest.mark.parametrize(("parent_text", "why"), [
    (TRAINS, "silent"),  # the file trains, and the rule says nothing about it
    (HELPER, "silent, no backward"),  # nothing in the file trains: what the bug touches lives elsewhere
    (BROKEN, "not analysed"),  # the statement at the bug does not parse
])
def test_a_miss_says_why_without_showing_the_pair(tmp_path, parent_text, why):
    work = tmp_path / "work"
    work.mkdir()
    subprocess.run(["git", "init", "-q", str(work)], check=True)
    (work / "train.py").write_text(parent_text, encoding="utf-8")
    parent = _commit_all(work, "parent")
    (work / "train.py").write_text(parent_text + "# fixed\n", encoding="utf-8")
    commit = _commit_all(work, "fix")
    mirrors = tmp_path / "mirrors"
    subprocess.run(["git", "clone", "-q", "--bare", str(work), str(mirrors / "owner+name" / "repo")], check=True)
    pair = run.Pair(run.pair_id("owner/name", commit), "owner/name", commit, parent, "fix", "TL205", "a bug", "a test",
                    (run.PairFile("train.py", (1, 2), (1, 2)),))
    result = run.score(pair, mirrors, tmp_path / "trees")
    assert not result.flagged and result.miss == why
    assert run.summary([result])["rules"]["TL205"]["misses"] == {why: 1}
