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
