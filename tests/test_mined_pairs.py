"""The mined bug corpus (benchmarks/mined): every pair file follows the format run.py reads, and the
split into dev and test halves is the fixed one. No network and no mirrors: only the files."""

from __future__ import annotations

import importlib.util
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
