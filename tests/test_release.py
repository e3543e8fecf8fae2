"""The release machinery (.github/workflows/release.yml), as far as it runs without the registries: a
version tag is checked against every version the artifacts carry, the workflow publishes to PyPI by
trusted publishing only, attaches every artifact to the GitHub release, and sends the extension that
`make` built (tests/test_packaging.py builds and `twine check`s the Python artifacts)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import trainlint

ROOT = Path(__file__).resolve().parents[1]
WORKFLOW = ROOT / ".github" / "workflows" / "release.yml"
CHECK = ROOT / ".github" / "release_version.py"


@pytest.fixture(scope="module")
def workflow() -> dict:
    import yaml  # PyYAML: a dependency of pre-commit

    return yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))


def _check(tag: str, root: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(root / ".github" / "release_version.py"), tag], capture_output=True,
                          text=True, timeout=60, check=False)


def _release_tree(tmp_path: Path, *, changelog_section: str | None, extension_version: str | None = None) -> Path:
    """The files the version check reads, as they would be at a release."""
    for name in (".github/release_version.py", "trainlint/__init__.py", "vscode-extension/package.json", "CHANGELOG.md"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, tmp_path / name)
    if changelog_section is not None:
        changelog = tmp_path / "CHANGELOG.md"
        changelog.write_text(changelog.read_text().replace("## Unreleased", f"## {changelog_section}", 1))
    if extension_version is not None:
        package = tmp_path / "vscode-extension" / "package.json"
        package.write_text(re.sub(r'"version": "[^"]+"', f'"version": "{extension_version}"', package.read_text(), count=1))
    return tmp_path


def test_a_tag_that_names_every_version_passes(tmp_path):
    version = trainlint.__version__
    root = _release_tree(tmp_path, changelog_section=version)
    done = _check(f"v{version}", root)
    assert done.returncode == 0 and done.stdout == f"{version}\n", done.stderr


@pytest.mark.parametrize("tag, section, extension, problem", [
    ("v9.9.9", "9.9.9", None, "trainlint/__init__.py says {version}, the tag says 9.9.9"),
    ("v{version}", "{version}", "0.0.1", "vscode-extension/package.json says 0.0.1, the tag says {version}"),
    ("v{version}", None, None, "CHANGELOG.md has no '## {version}' section"),
    ("release-1", "{version}", None, "tag 'release-1' is not v<major>.<minor>.<patch>"),
])
def test_a_tag_that_disagrees_stops_the_release(tmp_path, tag, section, extension, problem):
    version = trainlint.__version__
    root = _release_tree(tmp_path, changelog_section=section.format(version=version) if section else None,
                         extension_version=extension)
    done = _check(tag.format(version=version), root)
    assert done.returncode == 1 and problem.format(version=version) in done.stderr, done.stderr
    assert done.stdout == ""


def test_the_workflow_runs_on_version_tags_only(workflow):
    assert workflow[True] == {"push": {"tags": ["v*"]}}  # YAML reads the key `on` as True
    assert workflow["permissions"] == {"contents": "read"}, "nothing may write unless its job says so"


def test_pypi_is_published_by_trusted_publishing(workflow):
    job = workflow["jobs"]["pypi"]
    assert job["needs"] == "build" and job["environment"] == "pypi"
    assert job["permissions"] == {"id-token": "write"}
    (publish,) = [step for step in job["steps"] if "pypa/gh-action-pypi-publish" in step.get("uses", "")]
    assert "with" not in publish, "no password or token: PyPI trusts the workflow's identity"
    assert "rm -f dist/*.vsix" in " ".join(step.get("run", "") for step in job["steps"]), "PyPI takes Python artifacts only"


def test_the_build_job_checks_the_tag_and_the_artifacts(workflow):
    runs = "\n".join(step.get("run", "") for step in workflow["jobs"]["build"]["steps"])
    assert 'python3 .github/release_version.py "$GITHUB_REF_NAME"' in runs
    assert "python3 -m build --outdir dist ." in runs and "twine check --strict dist/*" in runs
    assert "npm run package" in runs and "pip install --quiet dist/*.whl" in runs


def test_the_extension_goes_to_the_release_and_both_marketplaces(workflow):
    jobs = workflow["jobs"]
    assert "gh release create" in jobs["github-release"]["steps"][-1]["run"]
    assert jobs["github-release"]["permissions"] == {"contents": "write"}
    marketplace = jobs["vscode-marketplace"]["steps"][-1]
    assert "vsce" in marketplace["run"] and "publish --packagePath" in marketplace["run"]
    assert marketplace["env"] == {"VSCE_PAT": "${{ secrets.VSCE_PAT }}"}
    open_vsx = jobs["open-vsx"]["steps"][-1]
    assert "ovsx" in open_vsx["run"] and open_vsx["env"] == {"OVSX_PAT": "${{ secrets.OVSX_PAT }}"}
    for name in ("vscode-marketplace", "open-vsx"):
        assert jobs[name]["environment"] == name, "each token lives in its own environment"


def test_the_extension_package_make_built_carries_the_release_version():
    """`make test` builds vscode-extension/trainlint-<version>.vsix before pytest runs; the release
    sends that file, so it must say the version the tag will."""
    package = json.loads((ROOT / "vscode-extension" / "package.json").read_text(encoding="utf-8"))
    assert package["version"] == trainlint.__version__, "the extension and the Python package share one version"
    assert package["repository"]["url"].startswith("https://github.com/"), "the Marketplace refuses a package without one"
    vsix = ROOT / "vscode-extension" / f"trainlint-{package['version']}.vsix"
    assert vsix.is_file(), f"{vsix.name} not found: run `make vsix` (make test builds it first)"
    with zipfile.ZipFile(vsix) as archive:
        inside = json.loads(archive.read("extension/package.json"))
        assert "extension/dist/extension.js" in archive.namelist()
    assert (inside["name"], inside["version"], inside["publisher"]) == ("trainlint", trainlint.__version__, "trainlint")
