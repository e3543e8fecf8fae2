"""`trainlint check` keeps results between runs: what a cached run reports equals a fresh run's,
and an edit to a file an import resolved to (a model class in model.py) reaches the importer."""

from __future__ import annotations

import errno
import json
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from cli_process import TRAINLINT
from two_file_project import HELPERS_TRAINING_A_MODEL, IMPORTING_THE_HELPER, MODEL
from two_file_project import TRAIN as UNSEEDED_TRAIN

import trainlint
import trainlint.commands.check_files as check_files
from trainlint.cache import ResultCache, installation_fingerprint
from trainlint.cli import main

ROOT = Path(__file__).resolve().parent.parent

# The same model returning logits: nothing for TL202 (softmax before cross-entropy) to report.
MODEL_WITH_LOGITS = MODEL.replace("F.softmax(self.fc(x), dim=1)", "self.fc(x)")
# Seeded, so that TL202 is train.py's one finding.
TRAIN = UNSEEDED_TRAIN.replace("model = Net()\n", "torch.manual_seed(0)\nmodel = Net()\n")


@pytest.fixture
def project(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("TRAINLINT_CACHE_DIR", raising=False)
    monkeypatch.delenv("CI", raising=False)

    def write(**files: str) -> Path:
        for name, text in files.items():
            path = tmp_path / name.replace("__", "/")
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        return tmp_path

    return write


def _json(capsys, *args: str) -> list[dict]:
    main(["check", "--format", "json", *args])
    return json.loads(capsys.readouterr().out)["findings"]


def _codes_in(findings: list[dict], path: str) -> list[str]:
    return [finding["code"] for finding in findings if finding["path"] == path]


class _AnalysisCounter:
    """Counts the files analysed in this process (the in-process path, with --jobs 1)."""

    def __init__(self, monkeypatch) -> None:
        self.paths: list[str] = []
        real = check_files.analyze_source

        def counting(source, path, *args, **kwargs):
            self.paths.append(path)
            return real(source, path, *args, **kwargs)

        monkeypatch.setattr(check_files, "analyze_source", counting)


def test_the_bundled_examples_report_the_same_cached_and_fresh(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(ROOT)
    cache = ["--cache-dir", str(tmp_path / "cache")]
    fresh = _json(capsys, "--no-cache", "examples")
    assert fresh, "the buggy examples report findings"
    assert _json(capsys, *cache, "examples") == fresh  # fills the cache, in a pool of workers
    analysed = _AnalysisCounter(monkeypatch)
    assert _json(capsys, *cache, "--jobs", "1", "examples") == fresh
    assert analysed.paths == [], "every file came from the cache"
    main(["check", *cache, "examples"])
    terminal_cached = capsys.readouterr().out
    main(["check", "--no-cache", "examples"])
    assert capsys.readouterr().out == terminal_cached, "the source lines under each finding too"


def test_an_edit_to_an_imported_model_reaches_the_importer(project, monkeypatch, capsys):
    project(**{"model.py": MODEL, "train.py": TRAIN, "utils.py": "x = 1\n"})
    assert _codes_in(_json(capsys, "--jobs", "1", "."), "train.py") == ["TL202"]
    analysed = _AnalysisCounter(monkeypatch)
    assert _codes_in(_json(capsys, "--jobs", "1", "."), "train.py") == ["TL202"]
    assert analysed.paths == []

    Path("model.py").write_text(MODEL_WITH_LOGITS, encoding="utf-8")
    findings = _json(capsys, "--jobs", "1", ".")
    assert _codes_in(findings, "train.py") == [], "the model returns logits now"
    assert sorted(analysed.paths) == ["model.py", "train.py"], "utils.py imports nothing that changed"
    assert findings == _json(capsys, "--no-cache", ".")


def test_a_file_checked_after_an_import_led_to_it_keeps_its_own_imports_in_its_entry(project, monkeypatch, capsys):
    """b_helpers.py is imported by a_train.py, which is checked first: b_helpers.py's check uses the
    analysis that import made, and its entry must still name c_model.py, which b_helpers.py imports."""
    project(**{"a_train.py": IMPORTING_THE_HELPER, "b_helpers.py": HELPERS_TRAINING_A_MODEL, "c_model.py": MODEL})
    assert _codes_in(_json(capsys, "--jobs", "1", "."), "b_helpers.py") == ["TL202"]
    Path("c_model.py").write_text(MODEL_WITH_LOGITS, encoding="utf-8")
    analysed = _AnalysisCounter(monkeypatch)
    findings = _json(capsys, "--jobs", "1", ".")
    assert _codes_in(findings, "b_helpers.py") == [], "the model returns logits now"
    assert "b_helpers.py" in analysed.paths
    assert findings == _json(capsys, "--no-cache", ".")


def test_a_module_that_reexports_a_class_is_followed_too(project, capsys):
    """`from models import Net` resolves through models/__init__.py to models/net.py: a class defined
    in the __init__ instead changes what the import means, though net.py is as it was."""
    project(**{"models__net.py": MODEL, "models__init__.py": "", "train.py": TRAIN.replace("from model", "from models")})
    Path("models/__init__.py").write_text("from .net import Net\n", encoding="utf-8")
    assert _codes_in(_json(capsys, "."), "train.py") == ["TL202"]
    Path("models/__init__.py").write_text(MODEL_WITH_LOGITS, encoding="utf-8")
    assert _codes_in(_json(capsys, "."), "train.py") == []


def test_a_module_created_after_the_run_is_found(project, capsys):
    project(**{"train.py": TRAIN})
    assert _codes_in(_json(capsys, "."), "train.py") == [], "model.py is not there: Net is unknown"
    project(**{"model.py": MODEL})
    assert _codes_in(_json(capsys, "."), "train.py") == ["TL202"]


def test_settings_are_part_of_the_key(project, capsys):
    project(**{"model.py": MODEL, "train.py": TRAIN})
    assert _codes_in(_json(capsys, "."), "train.py") == ["TL202"]
    assert _codes_in(_json(capsys, "--ignore", "TL202", "."), "train.py") == []
    assert _codes_in(_json(capsys, "--select", "TL2", "."), "train.py") == ["TL202"]
    project(**{"pyproject.toml": "[tool.trainlint]\nignore = ['TL202']\n"})
    assert _codes_in(_json(capsys, "."), "train.py") == []


def test_fix_still_fixes_a_file_whose_findings_were_cached(project, capsys):
    retained = "import torch\n\nmodel = torch.nn.Linear(2, 2)\nlosses = []\nfor x in loader:\n    losses.append(model(x).sum())\n"
    project(**{"train.py": retained})
    assert _codes_in(_json(capsys, "."), "train.py") == ["TL101"]
    assert main(["check", "--fix", "--quiet", "."]) == 0
    assert ".detach()" in Path("train.py").read_text() or ".item()" in Path("train.py").read_text()
    assert _codes_in(_json(capsys, "."), "train.py") == []


def test_the_cache_folder_ignores_itself_and_no_cache_writes_nothing(project, capsys):
    project(**{"train.py": TRAIN})
    main(["check", "--no-cache", "."])
    assert not Path(".trainlint_cache").exists()
    main(["check", "."])
    assert Path(".trainlint_cache/.gitignore").read_text().splitlines()[-1] == "*"
    assert Path(".trainlint_cache/CACHEDIR.TAG").read_text().startswith("Signature: 8a477f597d28d172789f06886806bc55")
    entries = [path for path in Path(".trainlint_cache").rglob("*") if path.is_file() and path.parent.parent.name.startswith("results-")]
    assert len(entries) == 1


def test_where_the_cache_goes_flag_then_environment_then_configuration(project, monkeypatch, capsys):
    project(**{"train.py": TRAIN, "pyproject.toml": "[tool.trainlint]\ncache-dir = 'build/lint'\n"})
    main(["check", "."])
    assert Path("build/lint/.gitignore").exists() and not Path(".trainlint_cache").exists()
    monkeypatch.setenv("TRAINLINT_CACHE_DIR", "from-env")
    main(["check", "."])
    assert Path("from-env/.gitignore").exists()
    main(["check", "--cache-dir", "from-flag", "."])
    assert Path("from-flag/.gitignore").exists()


def test_an_unwritable_cache_folder_costs_one_warning_and_nothing_else(project, capsys):
    project(**{"model.py": MODEL, "train.py": TRAIN, "blocker": "a file where the folder would go\n"})
    status = main(["check", "--format", "json", "--cache-dir", "blocker/cache", "."])
    captured = capsys.readouterr()
    assert status == 1 and _codes_in(json.loads(captured.out)["findings"], "train.py") == ["TL202"]
    warnings = captured.err.splitlines()
    assert len(warnings) == 1 and warnings[0].startswith("trainlint: warning: cannot write the cache folder blocker/cache")


def _aged_results_folders(parent: Path, count: int) -> list[Path]:
    """Folders named like the cache's own results, each older than the next, with a file the user keeps."""
    month_ago = time.time() - 31 * 24 * 3600
    folders = []
    for index in range(count):
        folder = parent / f"results-run{index + 1}"
        folder.mkdir(parents=True)
        (folder / "metrics.csv").write_text("step,loss\n1,0.5\n")
        os.utime(folder, (month_ago + index, month_ago + index))
        folders.append(folder)
    return folders


def test_a_committed_cache_link_out_of_the_project_is_not_used(tmp_path, monkeypatch, capsys):
    # A repository commits `.trainlint_cache -> ../experiments`: a plain check used to prune every
    # results-* folder there but the two newest, and write a .gitignore of `*` into it.
    experiments = _aged_results_folders(tmp_path / "experiments", 4)
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "train.py").write_text(TRAIN)
    (workspace / "model.py").write_text(MODEL)
    (workspace / ".trainlint_cache").symlink_to("../experiments")
    monkeypatch.chdir(workspace)
    monkeypatch.delenv("TRAINLINT_CACHE_DIR", raising=False)
    status = main(["check", "--format", "json", "."])
    captured = capsys.readouterr()
    assert status == 1 and _codes_in(json.loads(captured.out)["findings"], "train.py") == ["TL202"]
    assert all((folder / "metrics.csv").exists() for folder in experiments)
    assert sorted(path.name for path in (tmp_path / "experiments").iterdir()) == [folder.name for folder in experiments]
    assert captured.err == (
        f"trainlint: warning: the cache folder {workspace}/.trainlint_cache is a link out of the project "
        f"{workspace}; only --cache-dir or $TRAINLINT_CACHE_DIR can put it elsewhere; checking without a cache\n"
    )


def test_a_configured_cache_folder_outside_the_project_is_not_used(project, tmp_path, capsys):
    project(**{"ws__train.py": TRAIN, "ws__model.py": MODEL, "ws__pyproject.toml": "[tool.trainlint]\ncache-dir = '../experiments'\n"})
    experiments = _aged_results_folders(tmp_path / "experiments", 3)
    os.chdir(tmp_path / "ws")
    assert main(["check", "--quiet", "."]) == 1
    assert "lies outside the project" in capsys.readouterr().err
    assert sorted(path.name for path in (tmp_path / "experiments").iterdir()) == [folder.name for folder in experiments]


@pytest.mark.parametrize("how", ["--cache-dir", "TRAINLINT_CACHE_DIR", "cache-dir"])
def test_a_folder_of_someone_elses_files_is_never_written_or_pruned(project, tmp_path, monkeypatch, capsys, how):
    project(**{"train.py": TRAIN})
    experiments = _aged_results_folders(tmp_path / "experiments", 4)
    before = sorted(str(path) for path in (tmp_path / "experiments").rglob("*"))
    if how == "--cache-dir":
        main(["check", "--quiet", "--cache-dir", "experiments", "."])
    elif how == "TRAINLINT_CACHE_DIR":
        monkeypatch.setenv("TRAINLINT_CACHE_DIR", str(tmp_path / "experiments"))
        main(["check", "--quiet", "."])
    else:
        Path("pyproject.toml").write_text("[tool.trainlint]\ncache-dir = 'experiments'\n")
        main(["check", "--quiet", "."])
    assert "is not trainlint's cache" in capsys.readouterr().err
    assert sorted(str(path) for path in (tmp_path / "experiments").rglob("*")) == before
    assert all((folder / "metrics.csv").exists() for folder in experiments)


def test_pruning_removes_only_results_folders_the_cache_made(tmp_path):
    cache = ResultCache.open(tmp_path / "cache")
    user_results = _aged_results_folders(tmp_path / "cache", 3)  # named like the cache's, made by someone else
    outside = _aged_results_folders(tmp_path / "elsewhere", 1)[0]
    (outside / ".trainlint-results").write_bytes(b"")
    (tmp_path / "cache" / "results-linked").symlink_to(outside)
    (tmp_path / "cache" / ".last-pruned").symlink_to(tmp_path / "created-through-a-link")
    cache.prune()
    assert all((folder / "metrics.csv").exists() for folder in user_results)
    assert (outside / "metrics.csv").exists()
    assert not (tmp_path / "created-through-a-link").exists()
    assert cache.entries.exists()


def test_a_cache_of_an_earlier_trainlint_is_still_used(project, capsys):
    # Same tag, results folders without the marker: the folder is trainlint's; its old results stay.
    project(**{"train.py": TRAIN})
    old = Path(".trainlint_cache/results-0.0.1-0")
    old.mkdir(parents=True)
    Path(".trainlint_cache/CACHEDIR.TAG").write_text(
        "Signature: 8a477f597d28d172789f06886806bc55\n# This folder is trainlint's cache (https://bford.info/cachedir/).\n"
    )
    main(["check", "--quiet", "."])
    assert capsys.readouterr().err == ""
    assert len(list(Path(".trainlint_cache").glob("results-*/.trainlint-results"))) == 1
    assert old.exists()


def test_a_damaged_entry_is_analysed_again(project, capsys):
    project(**{"model.py": MODEL, "train.py": TRAIN})
    fresh = _json(capsys, ".")
    for entry in Path(".trainlint_cache").glob("results-*/**/*"):
        if entry.is_file():
            entry.write_bytes(b"\x93not an entry")
    assert _json(capsys, ".") == fresh


def test_concurrent_runs_share_the_folder(project):
    project(**{f"pkg__train_{index}.py": TRAIN for index in range(12)}, **{"pkg__model.py": MODEL})
    command = [*TRAINLINT, "check", "--format", "json", "--jobs", "2", "pkg"]
    runs = [subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE) for _ in range(2)]
    outputs = [run.communicate(timeout=600) for run in runs]
    assert [run.returncode for run in runs] == [1, 1] and all(err == b"" for _, err in outputs)
    fresh = subprocess.run([*command, "--no-cache"], capture_output=True, timeout=600).stdout
    assert outputs[0][0] == outputs[1][0] == fresh
    assert not list(Path(".trainlint_cache").rglob("*.tmp")), "every write was renamed into place"


def test_a_new_installation_starts_a_new_generation(monkeypatch):
    before = installation_fingerprint()
    monkeypatch.setattr(trainlint, "__version__", "99.0")
    assert installation_fingerprint() != before and installation_fingerprint().startswith("99.0-")


def test_pruning_drops_unused_entries_and_old_installations(tmp_path):
    cache = ResultCache.open(tmp_path / "cache")
    month_ago = time.time() - 31 * 24 * 3600
    old_generations = []
    for index in range(4):
        folder = tmp_path / "cache" / f"results-0.0.{index}-0"
        folder.mkdir()
        (folder / ".trainlint-results").write_bytes(b"")  # what each installation's results folder holds
        os.utime(folder, (month_ago + index, month_ago + index))
        old_generations.append(folder)
    (tmp_path / "cache" / "libraries").mkdir()  # the library indexes share $TRAINLINT_CACHE_DIR
    shard = cache.entries / "ab"
    shard.mkdir()
    unused, used = shard / "unused", shard / "used"
    for entry in (unused, used):
        entry.write_bytes(b"")
    os.utime(unused, (month_ago, month_ago))
    cache.prune()
    assert not unused.exists() and used.exists()
    assert [folder.exists() for folder in old_generations] == [False, False, True, True]
    assert (tmp_path / "cache" / "libraries").exists()
    used.unlink()
    cache.prune()  # pruned within the day already: nothing is looked at
    assert old_generations[2].exists()


# ---------------------------------------------------------------------------- progress


def _files(count: int) -> dict[str, str]:
    return {f"train_{index:02}.py": TRAIN for index in range(count)}


def _stderr_of_run(argv: list[str], stream_pair, monkeypatch) -> str:
    """Run the CLI in this process with stderr on one end of a terminal or a pipe; what came out the other."""
    reader, writer = stream_pair
    monkeypatch.setattr(check_files.Progress, "delay_s", 0.0)  # every run counts as long
    monkeypatch.setattr(check_files.Progress, "interval_s", 0.01)
    chunks: list[bytes] = []

    def drain() -> None:  # a terminal's buffer is small: read while the run writes
        while True:
            try:
                chunk = os.read(reader, 65536)
            except OSError:  # a terminal whose other end closed
                return
            if not chunk:
                return
            chunks.append(chunk)

    draining = threading.Thread(target=drain)
    draining.start()
    try:
        with open(writer, "w", encoding="utf-8") as stream:
            monkeypatch.setattr(sys, "stderr", stream)
            main(argv)
    finally:
        monkeypatch.undo()
        draining.join(timeout=60)
        os.close(reader)
    return b"".join(chunks).decode("utf-8")


def test_a_terminal_sees_a_progress_line_that_moves_and_is_wiped(project, monkeypatch, capsys):
    # files that take tens of milliseconds each, so that results arrive over several redraws
    project(**{name: text * 25 for name, text in _files(10).items()})
    shown = _stderr_of_run(["check", "--no-cache", "--jobs", "2", "."], os.openpty(), monkeypatch)
    updates = [part.strip() for part in shown.split("\r") if part.strip()]
    assert all(re.fullmatch(r"Checked \d+/10 files, 0 findings so far \(\d+ s\)", update) for update in updates), updates
    done = [int(update.split()[1].split("/")[0]) for update in updates]
    assert done == sorted(done) and len(set(done)) > 2, "results arrive from the workers as they finish"
    assert all(before != after for before, after in zip(updates, updates[1:])), "a line is drawn only when it changes"
    assert shown.endswith("\r" + " " * max(len(update) for update in updates) + "\r"), "the line is wiped"
    assert capsys.readouterr().out == "All checks passed (10 files).\n", "the report itself goes to stdout as ever"


@pytest.mark.parametrize("setting", ["pipe", "json", "ci", "quiet"])
def test_no_progress_line_on_a_pipe_in_ci_or_for_machine_formats(project, monkeypatch, capsys, setting):
    project(**_files(10))
    argv = ["check", "--no-cache", "--jobs", "2", "."]
    pair = os.pipe() if setting == "pipe" else os.openpty()
    if setting == "json":
        argv.insert(1, "--format=json")
    if setting == "quiet":
        argv.insert(1, "--quiet")
    if setting == "ci":
        monkeypatch.setenv("CI", "true")
    assert _stderr_of_run(argv, pair, monkeypatch) == ""


class _TerminalThatGoesAway:
    """stderr on a terminal that is closed once the first progress line is drawn: each later write
    fails as writing to a hung-up terminal does."""

    def __init__(self) -> None:
        self.written: list[str] = []

    def isatty(self) -> bool:
        return True

    def write(self, text: str) -> int:
        if self.written:
            raise OSError(errno.EIO, "Input/output error")
        self.written.append(text)
        return len(text)

    def flush(self) -> None:
        pass


def test_a_terminal_that_goes_away_during_a_run_stops_the_progress_line_not_the_run(project, monkeypatch, capsys):
    project(**_files(3))
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.setattr(check_files.Progress, "delay_s", 0.0)
    monkeypatch.setattr(check_files.Progress, "interval_s", 0.0)  # a line for every file, so the second write fails
    terminal = _TerminalThatGoesAway()
    monkeypatch.setattr(sys, "stderr", terminal)
    assert main(["check", "--no-cache", "--jobs", "1", "."]) == 0  # the wipe at the end finds the terminal gone
    assert len(terminal.written) == 1 and re.fullmatch(r"\rChecked 1/3 files, 0 findings so far \(\d+ s\)", terminal.written[0])
    assert capsys.readouterr().out == "All checks passed (3 files).\n"


def test_a_fifo_where_an_entry_would_be_is_not_waited_on(project):
    # A repository can commit a cache folder with a FIFO at an entry's path: reading it must not block.
    # Both runs are processes of the same installation, so that they share one results folder.
    project(**{"model.py": MODEL, "train.py": TRAIN})
    command = [*TRAINLINT, "check", "--format", "json", "."]
    fresh = subprocess.run(command, capture_output=True, text=True, timeout=120).stdout
    entries = list(Path(".trainlint_cache").glob("results-*/??/*"))
    assert entries
    for entry in entries:
        entry.unlink()
        os.mkfifo(entry)
    done = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert json.loads(done.stdout)["findings"] == json.loads(fresh)["findings"]


def test_a_user_cache_folder_an_earlier_server_left_untagged_is_used(project, tmp_path, monkeypatch, capsys):
    # Before the server marked the folder, $TRAINLINT_CACHE_DIR held its parts and no CACHEDIR.TAG.
    project(**{"train.py": TRAIN})
    cache = tmp_path / "user-cache"
    for part in ("compiled", "libraries", "reports"):
        (cache / part).mkdir(parents=True)
    monkeypatch.setenv("TRAINLINT_CACHE_DIR", str(cache))
    main(["check", "--quiet", "."])
    assert "not trainlint's cache" not in capsys.readouterr().err
    assert (cache / "CACHEDIR.TAG").is_file() and list(cache.glob("results-*/.trainlint-results"))
