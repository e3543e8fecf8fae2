"""The released artifacts work: `python -m build` makes an sdist and a wheel (the wheel built from
the sdist, so the sdist is complete), each installs into a fresh virtual environment, and the
`trainlint` installed there checks code, estimates memory (its catalogs are package data) and
says the version that pyproject.toml takes from trainlint/__init__.py, the one place it is set.

The fresh environments get trainlint's dependencies from this test environment (a .pth line),
not from an index, so the test runs offline; trainlint itself comes only from the artifact."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import zipfile
from pathlib import Path

import pytest

import trainlint

ROOT = Path(__file__).resolve().parents[1]
RETAINED = (
    "import torch\nfrom torchvision.models import resnet18\n\nencoder = resnet18()\nfeatures = []\n"
    "for images, _ in loader:\n    features.append(encoder(images))\ntorch.save(features, 'feats.pt')\n"
)


def _run(*command: str | Path, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([str(part) for part in command], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=600, check=False)
    return done


def _source_tree(target: Path) -> Path:
    """The project's files as git would ship them (tracked and untracked, not ignored), so the
    build writes its egg-info and build/ folders here and not into the working tree."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                            capture_output=True, check=True).stdout
    for name in filter(None, listed.decode().split("\0")):
        if (ROOT / name).is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, target / name)
    return target


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    source = _source_tree(tmp_path_factory.mktemp("source"))
    dist = tmp_path_factory.mktemp("dist")
    built = _run(sys.executable, "-m", "build", "--no-isolation", "--outdir", dist, source, cwd=source)
    assert built.returncode == 0, built.stdout + built.stderr
    version = trainlint.__version__
    return {"sdist": dist / f"trainlint-{version}.tar.gz", "wheel": dist / f"trainlint-{version}-py3-none-any.whl"}


def _fresh_venv(folder: Path) -> Path:
    """A venv without pip whose only extra path is this environment's site-packages (for the dependencies)."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True, timeout=120)
    python = folder / "bin" / "python"
    site = Path(subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    (site / "dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return python


def test_the_sdist_holds_what_the_wheel_needs(artifacts):
    with tarfile.open(artifacts["sdist"]) as sdist:
        names = {name.split("/", 1)[1] for name in sdist.getnames() if "/" in name}
    assert {"pyproject.toml", "README.md", "trainlint/__init__.py", "analysis/engine.py", "server/server.py"} <= names
    with zipfile.ZipFile(artifacts["wheel"]) as wheel:
        members = set(wheel.namelist())
    assert "trainlint/py.typed" in members
    assert any(name.startswith("trainlint/estimator/data/") and name.endswith(".json") for name in members)
    assert not any(name.startswith(("tests/", "benchmarks/")) for name in members)


@pytest.mark.parametrize("kind", ["wheel", "sdist"])
def test_an_artifact_installs_into_a_fresh_venv_and_runs(artifacts, tmp_path, kind):
    python = _fresh_venv(tmp_path / "venv")
    installed = _run(sys.executable, "-m", "pip", "--python", python, "install", "--quiet", "--no-deps", "--no-index",
                     "--no-build-isolation", artifacts[kind], cwd=tmp_path)
    assert installed.returncode == 0, installed.stdout + installed.stderr
    script = python.parent / "trainlint"
    env = {**os.environ, "NO_COLOR": "1"}
    env.pop("PYTHONPATH", None)

    where = _run(python, "-c", "import trainlint, importlib.metadata as m; print(trainlint.__file__); "
                 "print(m.version('trainlint')); print(*trainlint.__path__, sep='\\n')", cwd=tmp_path, env=env)
    location, version, *searched = where.stdout.split("\n")[:-1]
    assert Path(location).is_relative_to(tmp_path / "venv"), location  # not this checkout's trainlint
    assert version == trainlint.__version__
    assert searched == [str(Path(location).parent)]  # only a source checkout searches its root too
    assert _run(script, "--version", cwd=tmp_path, env=env).stdout == f"trainlint {trainlint.__version__}\n"

    (tmp_path / "feats.py").write_text(RETAINED)
    checked = _run(script, "check", "--select", "TL101", "feats.py", cwd=tmp_path, env=env)
    assert checked.returncode == 1, checked.stdout + checked.stderr
    assert "feats.py:7:21: error TL101 retained-graph" in checked.stdout
    estimated = _run(script, "estimate", "--model", "gpt2", "--format", "json", cwd=tmp_path, env=env)
    assert estimated.returncode == 0, estimated.stdout + estimated.stderr
    assert '"verdict"' in estimated.stdout



def test_the_artifacts_pass_twine_check(artifacts):
    """What PyPI would refuse or render badly (metadata, the README as the long description), before a tag."""
    checked = _run(sys.executable, "-m", "twine", "check", "--strict", artifacts["sdist"], artifacts["wheel"], cwd=ROOT)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert checked.stdout.count("PASSED") == 2, checked.stdout
