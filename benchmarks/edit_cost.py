"""What a key costs inside one method of a long file, what importing the server costs, and memory.

    .venv/bin/python benchmarks/edit_cost.py FILE [FILE ...] [--keys 40] [--memory-keys 0] [--anchors] [--new-statement] [--keys-only]
    .venv/bin/python benchmarks/edit_cost.py --import-only

Three measures, each in CPU time of the process that does the work (``time.process_time``), so
that a busy machine changes them less than wall-clock times:

- **import**: a fresh ``python -P`` importing ``trainlint.server.server`` (what ``trainlint server``
  imports before it can answer ``initialize``), the fastest of five, next to pygls' own
  ``pygls.lsp.server`` (a floor the server cannot go under); then, in a fresh process per FILE,
  the server's import, the analysis' import (which the server does on a thread of its own as it
  starts, while the client greets it) and the first analysis of FILE (what the first diagnostics
  after ``didOpen`` cost).
- **per key**: each FILE opened as a document of the language server (``DocumentState.analyse``,
  what the server runs for every change: the incremental re-parse, the flow, the rules; with
  ``--anchors``, also what the pause after a key then finds for a document a hover or inlay hint has
  asked about: the lines a VRAM estimate belongs to and the estimate, ``DocumentState.find_asked``),
  then ``--keys`` one-character edits typed
  inside the method or function in the middle of the file's longest class (else its longest
  function): a character appended to the name an assignment there binds, then removed, and so on;
  with ``--new-statement``, a new statement typed on a new line after that assignment, as an editor
  sends it (Enter with the line's indentation, then one character a key; once typed, taken back a
  key at a time), so that most keys leave the method's body not parsing.
  Median and 95th percentile of the CPU milliseconds per key. The last text's findings are checked
  against a fresh analysis.
- **memory** (``--memory-keys N``): the resident set of this process after opening all FILEs and
  typing N keys, spread over them in turn, with the garbage collector run as the server runs it
  (``server/idle_gc.py``), then after the full collection of a long pause.
"""

from __future__ import annotations

import argparse
import ast
import gc
import statistics
import subprocess
import sys
import time
from pathlib import Path

IMPORT = "import time; t = time.process_time(); import {module}; print(time.process_time() - t)"
# The server's import as `trainlint server` does it: lsprotocol's compiled classes from the user's cache.
SERVER_IMPORT = ("import time; t = time.process_time()\n"
                 "from trainlint.server.compiled_code_cache import compiled_code_cache\n"
                 "with compiled_code_cache(): import trainlint.server.server\n"
                 "print(time.process_time() - t)")
# What --new-statement types: a call of a method on `self`, its argument read back from an attribute.
NEW_STATEMENT = "checked_value = self.state_dict(destination=self.module)"
FIRST_ANALYSIS = """
import sys, time
t = time.process_time()
from trainlint.server.compiled_code_cache import compiled_code_cache
with compiled_code_cache():  # as `trainlint server` imports it
    import trainlint.server.server
from trainlint.server.documents import DocumentState, import_analysis
from trainlint.analysis.settings import AnalysisSettings
from trainlint.settings import EffectiveSettings
imported = time.process_time()
import_analysis()  # what the server does on a thread of its own as it starts
warmed = time.process_time()
text = open(sys.argv[1], encoding="utf-8").read()
DocumentState("file:///bench.py", None).analyse(text, 1, EffectiveSettings(AnalysisSettings()))
print(imported - t, warmed - imported, time.process_time() - warmed)
"""


def import_cpu(program: str, rounds: int = 5) -> float:
    return min(
        float(subprocess.run([sys.executable, "-P", "-c", program], capture_output=True, text=True, check=True).stdout)
        for _ in range(rounds)
    )


def first_analysis_cpu(path: Path, rounds: int = 3) -> tuple[float, float, float]:
    runs = [
        tuple(float(value) for value in subprocess.run(
            [sys.executable, "-P", "-c", FIRST_ANALYSIS, str(path)], capture_output=True, text=True, check=True,
        ).stdout.split())
        for _ in range(rounds)
    ]
    return min(run[0] for run in runs), min(run[1] for run in runs), min(run[2] for run in runs)


def edited_line(text: str) -> tuple[int, int, str]:
    """(line index, column, where) of the end of a name assigned in the middle of: the middle method
    of the longest class when no function is longer, else the longest function when it holds a
    tenth of the file, else the middle function of the module."""
    tree = ast.parse(text)

    def span(node: ast.AST) -> int:
        return (node.end_lineno or node.lineno) - node.lineno

    classes = [node for node in tree.body if isinstance(node, ast.ClassDef)]
    functions = [node for node in tree.body if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))]
    longest_class = max(classes, key=span, default=None)
    longest_function = max(functions, key=span, default=None)
    where = "module"
    if longest_class is not None and (longest_function is None or span(longest_class) > span(longest_function)):
        functions = [node for node in longest_class.body if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))]
        where = f"class {longest_class.name} ({span(longest_class) + 1} lines)"
    elif longest_function is not None and span(longest_function) * 10 > len(text.split("\n")):
        functions = [longest_function]
    candidates = sorted(functions, key=lambda node: node.lineno)
    for function in candidates[len(candidates) // 2:] + candidates[: len(candidates) // 2]:
        assigns = [node for node in ast.walk(function) if isinstance(node, ast.Assign)
                   and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)]
        if assigns:
            target = assigns[len(assigns) // 2].targets[0]
            assert isinstance(target, ast.Name) and target.end_col_offset is not None
            name = getattr(function, "name", "?")
            return target.lineno - 1, target.end_col_offset, f"{where}, in {name} ({span(function) + 1} lines)"
    raise SystemExit("no assignment to a name inside a function")


def rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


class Typist:
    """One document and the key typed in it: a character appended to a name, then taken back."""

    def __init__(self, path: Path, anchors: bool, new_statement: bool = False, target_gpu: str | None = None) -> None:
        from trainlint.analysis.settings import AnalysisSettings
        from trainlint.server.documents import DocumentState
        from trainlint.settings import EffectiveSettings

        self.settings = EffectiveSettings(AnalysisSettings(target_gpu=target_gpu))
        self.path = path
        self.lines = path.read_text(encoding="utf-8").split("\n")
        self.line, self.column, self.where = edited_line("\n".join(self.lines))
        self.original = self.lines[self.line]
        self.new_statement = new_statement
        self.typed = 0  # characters of NEW_STATEMENT typed so far, with the Enter before them
        self.growing = True
        self.document = DocumentState(path.as_uri(), path)
        self.anchors = anchors  # what the pause after each key finds, as after a hover or inlay hint
        self.version = 0
        self.document.analyse("\n".join(self.lines), self.version, self.settings)
        # what the server does once the first report is out (``scheduling``), off the typing path
        self.document.warm_positions(self.document.edits)

    def key(self) -> float:
        self.version += 1
        if self.new_statement:
            self._type_new_statement()
        else:
            typed = "x" if self.version % 2 else ""
            self.lines[self.line] = self.original[: self.column] + typed + self.original[self.column:]
        started = time.process_time()
        analysis = self.document.analyse("\n".join(self.lines), self.version, self.settings)
        if self.anchors:
            key = (self.settings.analysis.target_gpu, self.settings.target_model)
            self.document.find_asked(analysis, {key}, self.document.edits)
        return time.process_time() - started

    def _type_new_statement(self) -> None:
        """One key of NEW_STATEMENT typed on a line of its own after the edited one, or taken back."""
        if self.growing and self.typed > len(NEW_STATEMENT):
            self.growing = False
        elif not self.growing and self.typed == 0:
            self.growing = True
        self.typed += 1 if self.growing else -1
        if self.typed == 0:
            self.lines[self.line + 1:] = self.lines[self.line + 2:]  # the Enter taken back
            return
        indentation = self.original[: len(self.original) - len(self.original.lstrip())]
        text = indentation + NEW_STATEMENT[: self.typed - 1]
        if self.growing and self.typed == 1:
            self.lines.insert(self.line + 1, text)
        else:
            self.lines[self.line + 1] = text

    def fresh_agrees(self) -> bool:
        from trainlint.server.documents import DocumentState

        text = "\n".join(self.lines)
        fresh = DocumentState(self.path.as_uri(), self.path).analyse(text, 0, self.settings)
        latest = self.document.latest
        return latest is not None and latest.findings == fresh.findings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="*", type=Path)
    parser.add_argument("--keys", type=int, default=40)
    parser.add_argument("--memory-keys", type=int, default=0)
    parser.add_argument("--import-only", action="store_true")
    parser.add_argument("--new-statement", action="store_true",
                        help="type a new statement on a new line in the method, instead of editing a name")
    parser.add_argument("--target-gpu", metavar="GPU",
                        help="the editor's targetGpu setting (docs/editors.md sets one): TL601 then reads the script at each key")
    parser.add_argument("--anchors", action="store_true", help="and what the pause after each key finds for a hovered document (VRAM lines, estimate)")
    parser.add_argument("--keys-only", action="store_true",
                        help="measure the keys alone, not the import and first analysis (quicker side-by-side runs)")
    args = parser.parse_args()

    if args.keys_only:
        typed_keys(args)
        return
    print(f"import CPU, fastest of 5: trainlint.server.server {import_cpu(SERVER_IMPORT) * 1000:.0f} ms "
          f"({import_cpu(IMPORT.format(module='trainlint.server.server')) * 1000:.0f} ms compiling lsprotocol's classes), "
          f"pygls.lsp.server alone {import_cpu(IMPORT.format(module='pygls.lsp.server')) * 1000:.0f} ms")
    if args.import_only:
        return
    for path in args.files:
        imported, warmed, analysed = first_analysis_cpu(path)
        print(f"{path.name}: a fresh process imports the server in {imported * 1000:.0f} ms, the analysis in "
              f"{warmed * 1000:.0f} ms, then analyses the file in {analysed * 1000:.0f} ms (CPU)")

    typed_keys(args)


def typed_keys(args: argparse.Namespace) -> None:
    from trainlint.server.idle_gc import IdleGarbageCollector

    typists = [Typist(path, args.anchors, args.new_statement, args.target_gpu) for path in args.files]
    for typist in typists:
        costs = [typist.key() * 1000 for _ in range(args.keys)]
        costs.sort()
        p95 = costs[min(len(costs) - 1, round(0.95 * (len(costs) - 1)))]
        agrees = "same as a fresh analysis" if typist.fresh_agrees() else "DIFFERS FROM A FRESH ANALYSIS"
        anchors = ", with the VRAM lines and estimate a pause after each key finds" if args.anchors else ""
        typed = ", a new statement typed" if args.new_statement else ""
        print(f"{typist.path.name} ({len(typist.lines)} lines), key in {typist.where}{typed}{anchors}: CPU ms per key "
              f"median {statistics.median(costs):.1f}, p95 {p95:.1f} over {args.keys} keys; {agrees}")
    if args.memory_keys:
        # as the server runs (server/idle_gc.py): no automatic collection, what lives after each
        # analysis frozen, a full collection every `full_every` analyses and at a long pause
        collector = IdleGarbageCollector()
        collector.start()
        opened = rss_mib()
        for count in range(args.memory_keys):
            typists[count % len(typists)].key()
            gc.freeze()
            if count % collector.full_every == collector.full_every - 1:
                collector.collect()
            if count % 1000 == 999:
                print(f"  after {count + 1} keys: RSS {rss_mib():.0f} MiB")
        busy = rss_mib()
        collector.collect()
        print(f"RSS with {len(typists)} documents open: {opened:.0f} MiB after opening, {busy:.0f} MiB after "
              f"{args.memory_keys} keys, {rss_mib():.0f} MiB after the idle collection")


if __name__ == "__main__":
    main()
