"""The server's start reuses lsprotocol's compiled classes from the user's cache folder.

Each launch runs in a fresh interpreter (a subprocess), as an editor starts the server, with
$TRAINLINT_CACHE_DIR pointing into the test's folder.
"""

from __future__ import annotations
import __future__

import marshal
import os
import subprocess
import sys
from pathlib import Path

from attr import _make

IMPORT_THE_SERVER = """
import sys
from trainlint.server.compiled_code_cache import compiled_code_cache
with compiled_code_cache():
    from trainlint.server.server import start
from lsprotocol import types
a, b = types.Position(line=3, character=4), types.Position(line=3, character=4)
assert a == b and a != types.Position(line=3, character=5), "generated __eq__"
assert types.Range(start=a, end=b).end.character == 4, "generated __init__"
from attr import _make
assert "compile" not in vars(_make), "attrs' compile is its own again after the import"
print("ok")
"""


def launch(cache: Path, cwd: Path) -> str:
    environment = {**os.environ, "TRAINLINT_CACHE_DIR": str(cache)}
    done = subprocess.run([sys.executable, "-P", "-c", IMPORT_THE_SERVER], cwd=cwd, env=environment,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


def tables(cache: Path, generator: str = "attrs") -> list[Path]:
    """The tables of one code generator (attrs, dataclasses) in the cache folder."""
    return sorted((cache / "compiled").glob(f"{generator}-*.marshal")) if (cache / "compiled").is_dir() else []


def test_the_first_launch_writes_the_table_and_the_next_reuses_it_unchanged(tmp_path):
    cache, project = tmp_path / "cache", tmp_path / "project"
    project.mkdir()
    assert launch(cache, project) == "ok\n"
    [table] = tables(cache)
    assert "attrs-" in table.name and sys.implementation.cache_tag in table.name
    written = table.stat()
    os.utime(table, ns=(written.st_atime_ns, written.st_mtime_ns - 10**9))
    before = table.stat().st_mtime_ns
    assert launch(cache, project) == "ok\n"
    assert table.stat().st_mtime_ns == before, "a launch that compiled almost nothing does not rewrite the table"
    assert not list(project.iterdir()), "nothing is written into the folder the server starts in"


def test_every_entry_is_what_compile_returns_for_its_key(tmp_path):
    cache = tmp_path / "cache"
    launch(cache, tmp_path)
    [table] = tables(cache)
    entries = marshal.loads(table.read_bytes())
    assert len(entries) > 100
    flags = __future__.annotations.compiler_flag if vars(_make).get("annotations") is __future__.annotations else 0
    for (source, filename, mode), code in list(entries.items())[::25]:
        assert code == compile(source, filename, mode, flags, True), filename


def test_a_damaged_or_foreign_table_only_costs_the_time_it_would_save(tmp_path):
    cache = tmp_path / "cache"
    launch(cache, tmp_path)
    [table] = tables(cache)
    for damage in (b"\x00garbage", table.read_bytes()[: 1000], marshal.dumps({"not": "an entry"})):
        table.write_bytes(damage)
        assert launch(cache, tmp_path) == "ok\n"
    assert len(marshal.loads(table.read_bytes())) > 100, "a launch that found no usable table writes a new one"


IMPORT_THE_ANALYSIS = """
import dataclasses
from trainlint.server.documents import import_analysis
import_analysis()
import libcst
assert libcst.parse_module("x = f(1)\\n").code == "x = f(1)\\n", "generated __init__ of LibCST's nodes"
from trainlint.analysis.settings import AnalysisSettings
assert "exec" not in vars(dataclasses), "dataclasses' exec is the builtin again after the import"
print("ok")
"""


def test_the_analysis_import_reuses_the_dataclasses_code_compiled_at_the_last_launch(tmp_path):
    cache = tmp_path / "cache"
    environment = {**os.environ, "TRAINLINT_CACHE_DIR": str(cache)}

    def launch() -> None:
        done = subprocess.run([sys.executable, "-P", "-c", IMPORT_THE_ANALYSIS], cwd=tmp_path, env=environment,
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0 and done.stdout == "ok\n", done.stderr

    launch()
    [table] = tables(cache, "dataclasses")
    entries = marshal.loads(table.read_bytes())
    assert len(entries) > 500, "LibCST's nodes and the analysis' classes"
    for (source, filename, mode), code in list(entries.items())[::50]:
        assert code == compile(source, filename, mode, 0, True), source[:80]  # dataclasses has no future imports
    before = table.stat().st_mtime_ns
    launch()
    assert table.stat().st_mtime_ns == before, "the second launch found everything in the table"


def test_the_server_marks_a_new_cache_folder_as_trainlints_so_check_uses_it_too(tmp_path):
    # $TRAINLINT_CACHE_DIR is both the server's cache folder and `check`'s results folder: a folder
    # the server made must not look like someone else's to `check`, which prunes only its own.
    cache, project = tmp_path / "cache", tmp_path / "project"
    project.mkdir()
    (project / "train.py").write_text("import torch\nmodel = torch.nn.Linear(2, 2)\n")
    assert launch(cache, project) == "ok\n"
    assert (cache / "CACHEDIR.TAG").read_text().startswith("Signature: 8a477f597d28d172789f06886806bc55")
    environment = {**os.environ, "TRAINLINT_CACHE_DIR": str(cache)}
    checked = subprocess.run([sys.executable, "-P", "-m", "trainlint", "check", "--quiet", "."], cwd=project,
                             env=environment, capture_output=True, text=True, timeout=120)
    assert "not trainlint's cache" not in checked.stderr and checked.returncode in (0, 1), checked.stderr
    assert list(cache.glob("results-*/.trainlint-results")), "check kept its results in the server's folder"


def test_a_shared_folder_the_user_named_is_written_into_but_not_marked(tmp_path):
    shared, project = tmp_path / "shared", tmp_path / "project"
    project.mkdir()
    shared.mkdir()
    (shared / "notes.txt").write_text("someone else's file\n")
    assert launch(shared, project) == "ok\n"
    assert tables(shared) and not (shared / "CACHEDIR.TAG").exists()
