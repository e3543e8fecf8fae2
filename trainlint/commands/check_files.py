"""``trainlint check``, one file at a time: a file's task and its outcome (findings, a fixed text, a
diff), notebooks, the pool of worker processes that runs the tasks, and the progress line meanwhile."""

from __future__ import annotations

import dataclasses
import gc
import multiprocessing
import multiprocessing.context
import os
import sys
import time
from collections.abc import Sequence
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

import msgspec

from trainlint.analysis.engine import (
    DecodeError,
    analyze_source,
    collector_paused,
)
from trainlint.analysis.engine_codes import SYNTAX_ERROR
from trainlint.analysis.files import (
    UnreadableFile,
    limit_for,
    read_bounded,
)
from trainlint.analysis.findings import Evidence, Finding, Severity
from trainlint.analysis.registry import (
    PluginProblem,
    take_problems,
)
from trainlint.analysis.settings import AnalysisSettings
from trainlint.analysis.workspace import Workspace
from trainlint.cache import ResultCache
from trainlint.commands import tell
from trainlint.fixing import SourceFile, applicable, fix_until_stable, unified_diff
from trainlint.linter import Linter
from trainlint.notebooks import CellPosition, Notebook, NotebookError

# Below this many files a process pool costs more to start than it saves.
PARALLEL_THRESHOLD = 8
MAX_DEFAULT_JOBS = 8
# Files handed to a worker at a time: enough that the files of one folder (which import the same
# workspace files, parsed once per worker) go together, few enough that results arrive steadily.
MAX_BATCH = 16


@dataclass(frozen=True)
class Task:
    path: str  # as shown to the user and reported by the engine
    settings: AnalysisSettings  # the file's own: the codes its per-file-ignores drop among them
    fix: bool
    fail_on: Severity  # from the file's own configuration (or --fail-on)
    unsafe: bool = False  # unsafe fixes are applied too (--unsafe-fixes)
    data: bytes | None = None  # stdin's content; None: read the file at path
    patch_name: str = ""  # what --diff calls the file (``_patch_path``); standard input keeps its name
    roots: tuple[str, ...] = ()  # where imports of the user's own files are looked for
    fingerprint: bytes | None = None  # what besides its bytes the file's findings depend on; None: not cached


@dataclass(frozen=True)
class Outcome:
    path: str
    findings: list[Finding]
    text: str | None  # decoded source, kept only when there are findings to show it for
    fixed: bytes | None = None  # the file after fixes, when fixing changed it
    diff: str = ""  # the same change as a unified diff
    fix_count: int = 0
    fix_rejected: bool = False
    cells: dict[int, str] | None = None  # a notebook's code cells, to show findings in their own lines
    applied: tuple[Finding, ...] = ()  # the findings whose fixes were applied, for --show-fixes
    plugin_problems: tuple[PluginProblem, ...] = ()  # reported once by the main process, workers' too


def _run_task(task: Task, cache: ResultCache | None, linter: Linter) -> Outcome:
    """Check one file (and fix it, when asked) with the rules ``linter`` chose for its settings; with
    a cache, keep what the check found; with the plugin problems this process met doing it."""
    outcome = _checked(task, cache, linter)
    problems = take_problems()
    return dataclasses.replace(outcome, plugin_problems=tuple(problems)) if problems else outcome


def _checked(task: Task, cache: ResultCache | None, linter: Linter) -> Outcome:
    data = task.data
    if data is None:
        try:
            data = read_bounded(task.path, limit_for(task.path))
        except UnreadableFile as error:
            return Outcome(task.path, [_unreadable(task.path, str(error))], None)

    workspace = workspace_of(task.roots)
    rules = linter.rules_for(task.settings)

    def analyze(source: str | bytes) -> list[Finding]:
        return analyze_source(source, task.path, task.settings, workspace=workspace, selected=rules)

    def keep(findings: list[Finding]) -> None:
        if cache is not None and task.fingerprint is not None:
            cache.store(ResultCache.key(task.fingerprint, data), findings, workspace, task.path)

    if task.path.endswith(".ipynb"):
        return _run_notebook(task, data, analyze, keep)

    findings = analyze(data)
    keep(findings)
    if not task.fix or not any(applicable(finding, task.unsafe) for finding in findings):
        return _unfixed_outcome(task, data, findings)
    try:
        source = SourceFile.decode(data)
    except DecodeError:  # reported by the analysis as TL000
        return Outcome(task.path, findings, None)
    outcome = fix_until_stable(source.text, analyze, findings=findings, unsafe=task.unsafe)
    changed = outcome.text != source.text
    return Outcome(
        task.path,
        outcome.findings,
        outcome.text if outcome.findings else None,
        fixed=source.encode(outcome.text) if changed else None,
        diff=unified_diff(source.text, outcome.text, task.patch_name or task.path) if changed else "",
        fix_count=outcome.resolved,
        fix_rejected=outcome.rejected,
        applied=tuple(outcome.applied_findings),
    )


_WORKSPACES: dict[tuple[str, ...], Workspace] = {}


def workspace_of(roots: tuple[str, ...]) -> Workspace:
    """One per set of roots in each process, so every file of a run shares the parsed imports."""
    workspace = _WORKSPACES.get(roots)
    if workspace is None:
        workspace = _WORKSPACES[roots] = Workspace([Path(root) for root in roots], files_fixed=True)
    return workspace


def _unfixed_outcome(task: Task, data: bytes, findings: list[Finding]) -> Outcome:
    """What checking ``data`` without fixing shows: the findings, and the text they are shown in."""
    if task.path.endswith(".ipynb"):
        try:
            notebook = Notebook(data.decode("utf-8"))
        except (UnicodeDecodeError, NotebookError):
            return Outcome(task.path, findings, None)
        return Outcome(task.path, findings, notebook.raw if findings else None, cells=notebook.cell_sources())
    try:
        text = SourceFile.decode(data).text if findings else None
    except DecodeError:  # reported by the analysis as TL000
        text = None
    return Outcome(task.path, findings, text)


def _run_notebook(task: Task, data: bytes, analyze, keep) -> Outcome:
    """A notebook's code cells as one program; findings placed in cells and in the file; fixes written into the cells."""
    try:
        raw = data.decode("utf-8")
        notebook = Notebook(raw)
    except (UnicodeDecodeError, NotebookError) as error:
        code, name = SYNTAX_ERROR.code, SYNTAX_ERROR.name
        unreadable = [Finding(
            path=task.path, line=1, column=1, end_line=1, end_column=2, code=code, name=name,
            severity=Severity.ERROR, message=f"cannot read the notebook: {error}",
        )]
        keep(unreadable)
        return Outcome(task.path, unreadable, None)
    if not notebook.is_python or not notebook.cells:
        keep([])
        return Outcome(task.path, [], None)
    findings = analyze(notebook.text)
    unfixed = Outcome(task.path, _in_notebook(notebook, findings), raw if findings else None, cells=notebook.cell_sources())
    keep(unfixed.findings)
    if not task.fix or not any(applicable(finding, task.unsafe) for finding in findings):
        return unfixed
    outcome = fix_until_stable(notebook.text, analyze, findings=findings, unsafe=task.unsafe)
    try:
        fixed_raw = notebook.with_program(outcome.text)
    except NotebookError as error:
        tell(f"trainlint: warning: the fixes for {task.path} were not applied: {error}")
        return unfixed
    if fixed_raw == raw:
        return unfixed
    fixed = Notebook(fixed_raw)
    remaining = _in_notebook(fixed, analyze(fixed.text))
    return Outcome(
        task.path, remaining, fixed_raw if remaining else None,
        fixed=fixed_raw.encode("utf-8"),
        diff=unified_diff(raw, fixed_raw, task.patch_name or task.path),
        fix_count=outcome.resolved, fix_rejected=outcome.rejected, cells=fixed.cell_sources(),
        applied=tuple(_in_notebook(notebook, outcome.applied_findings)),
    )


def _in_notebook(notebook: Notebook, findings: Sequence[Finding]) -> list[Finding]:
    """Program positions to file positions (line, column) and cell positions, and the program's
    line numbers in messages to cells' ones; the markers' lines never hold findings."""
    placed = []
    for finding in findings:
        cell = notebook.cell_position(finding.line, finding.column)
        end = notebook.cell_position(finding.end_line, finding.end_column)
        line, column = notebook.file_position(finding.line, finding.column)
        end_line, end_column = notebook.file_position(finding.end_line, finding.end_column)
        if cell is not None and (end is None or end.cell != cell.cell):
            end = CellPosition(cell.cell, cell.line, cell.column + 1)  # a span never leaves its cell
        evidence = tuple(_evidence_in_notebook(notebook, item) for item in finding.evidence)
        placed.append(msgspec.structs.replace(
            finding, line=line, column=column, end_line=end_line, end_column=end_column, evidence=evidence,
            message=notebook.in_cells(finding.message), help=notebook.in_cells(finding.help),
            cell=cell.cell if cell else None, cell_line=cell.line if cell else None, cell_column=cell.column if cell else None,
            cell_end_line=end.line if cell and end else None, cell_end_column=end.column if cell and end else None,
            # a fix's edits are positions in the joined program: `--fix` applies them; they are not file edits
            fix=msgspec.structs.replace(finding.fix, edits=()) if finding.fix is not None else None,
        ))
    return placed


def _evidence_in_notebook(notebook: Notebook, item: Evidence) -> Evidence:
    if item.path is not None:  # another file of the workspace: its own numbering
        return item
    cell = notebook.cell_position(item.line, 1)
    return msgspec.structs.replace(
        item, line=notebook.file_position(item.line, 1)[0], note=notebook.in_cells(item.note),
        cell=cell.cell if cell else None, cell_line=cell.line if cell else None,
    )


def _unreadable(path: str, reason: str) -> Finding:
    code, name = SYNTAX_ERROR.code, SYNTAX_ERROR.name
    return Finding(
        path=path, line=1, column=1, end_line=1, end_column=2, code=code, name=name,
        severity=Severity.ERROR, message=f"cannot read the file: {reason}",
    )


def _default_jobs(file_count: int) -> int:
    return 1 if file_count < PARALLEL_THRESHOLD else min(os.cpu_count() or 1, MAX_DEFAULT_JOBS)


def run_all(
    tasks: list[Task], jobs: int | None, cache: ResultCache | None, progress: Progress, linter: Linter,
) -> list[Outcome]:
    """Every task's outcome, in the order of the tasks whichever worker finished first: kept
    results from the cache, the rest checked in this process (with the rules ``linter`` chooses)
    or a pool of workers (a Linter to each batch)."""
    _WORKSPACES.clear()  # a run reads the workspace as it is now (main() may run more than once in a process)
    outcomes: list[Outcome | None] = [None] * len(tasks)
    remaining = []
    for index, task in enumerate(tasks):
        outcome = outcomes[index] = _cached_outcome(task, cache) if cache is not None else None
        if outcome is None:
            remaining.append(index)
        else:
            progress.advance(outcome)
    jobs = min(jobs or _default_jobs(len(remaining)), len(remaining))
    if jobs <= 1:
        with collector_paused():
            for index in remaining:
                outcomes[index] = _run_task(tasks[index], cache, linter)
                gc.collect(1)  # once per file (see _run_batch)
                progress.advance(outcomes[index])
    else:
        with ProcessPoolExecutor(max_workers=jobs, mp_context=_worker_context()) as pool:
            batches = {pool.submit(_run_batch, [tasks[index] for index in batch], cache): batch
                       for batch in _batches(remaining, jobs)}
            waiting = set(batches)
            while waiting:
                done, waiting = wait(waiting, timeout=progress.interval_s, return_when=FIRST_COMPLETED)
                for future in done:
                    for index, outcome in zip(batches[future], future.result()):
                        outcomes[index] = outcome
                        progress.advance(outcome)
                progress.refresh()
    progress.finish()
    return [outcome for outcome in outcomes if outcome is not None]


def _batches(indexes: list[int], jobs: int) -> list[list[int]]:
    """Consecutive runs of files (sorted paths: a folder's files together), at least four per worker."""
    size = max(1, min(MAX_BATCH, len(indexes) // (jobs * 4)))
    return [indexes[start:start + size] for start in range(0, len(indexes), size)]


def _run_batch(tasks: list[Task], cache: ResultCache | None) -> list[Outcome]:
    """A worker's share: files checked one after another in this process.

    Python's cyclic garbage collector runs once after each file instead of during it: when it
    came back after a file's analysis (engine.collector_paused) while the trees were still alive,
    its passes walked all of them (13% of the CPU time of a run over litgpt). After a file, a
    young-generation pass costs only what survived it (the outcome, the workspace's parsed
    imports) and frees the file's cyclic garbage; long-lived survivors are never walked again (no
    full pass), which a run of separate files can afford.

    The batch's files share a Linter, so that each selection of rules is made once per batch."""
    outcomes = []
    linter = Linter()
    with collector_paused():
        for task in tasks:
            outcomes.append(_run_task(task, cache, linter))
            gc.collect(1)
    return outcomes


def _worker_context() -> multiprocessing.context.BaseContext | None:
    """Workers forked from this process start with trainlint imported and cost milliseconds to
    start; spawned ones import it again (about 0.3 s of CPU each). Python 3.14 no longer forks by
    default on Linux, so ask for it where it is safe (Linux; macOS frameworks break after fork)."""
    if sys.platform.startswith("linux"):
        return multiprocessing.get_context("fork")
    return None


def _cached_outcome(task: Task, cache: ResultCache) -> Outcome | None:
    """The outcome kept for the file as it is now, None when it must be checked."""
    if task.fingerprint is None:
        return None
    try:
        data = read_bounded(task.path, limit_for(task.path))
    except UnreadableFile:
        return None
    findings = cache.load(ResultCache.key(task.fingerprint, data), workspace_of(task.roots), task.path)
    if findings is None or (task.fix and any(applicable(finding, task.unsafe) for finding in findings)):
        return None
    return _unfixed_outcome(task, data, findings)




class Progress:
    """One line on stderr while a long run goes: files done of all, findings so far, time taken.
    Rewritten in place (a carriage return, no escape sequences) and wiped at the end."""

    delay_s = 2.0  # a run that ends sooner shows nothing
    interval_s = 0.25  # at most this often

    def __init__(self, stream: TextIO | None, total: int) -> None:
        self._stream = stream
        self._total = total
        self._done = 0
        self._findings = 0
        self._start = time.monotonic()
        self._drawn_at = float("-inf")
        self._line = ""  # on screen
        self._width = 0  # of the longest line drawn since the last wipe

    def advance(self, outcome: Outcome) -> None:
        self._done += 1
        self._findings += len(outcome.findings)
        self.refresh()

    def refresh(self) -> None:
        now = time.monotonic()
        if self._stream is None or now - self._start < self.delay_s or now - self._drawn_at < self.interval_s:
            return
        self._drawn_at = now
        findings = f"{self._findings:,} finding{'s' * (self._findings != 1)}"
        line = f"Checked {self._done:,}/{self._total:,} files, {findings} so far ({now - self._start:.0f} s)"
        if line != self._line:  # a slow terminal or a log of the session gets only what changed
            self._write("\r" + line.ljust(self._width))
            self._line = line
            self._width = max(self._width, len(line))

    def finish(self) -> None:
        if self._width:
            self._write("\r" + " " * self._width + "\r")
            self._line, self._width = "", 0

    def _write(self, text: str) -> None:
        if self._stream is None:  # gone since an earlier write failed: finish() has nothing to wipe
            return
        try:
            self._stream.write(text)
            self._stream.flush()
        except (OSError, ValueError):  # the terminal went away: the report still goes to stdout
            self._stream = None
