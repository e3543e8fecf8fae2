#!/usr/bin/env python3
"""Compare trainlint with a peer linter (torch-preflight 0.5.0) on real code.

Usage:
    python benchmarks/compare_peer.py DIR [DIR ...] [--trainlint CMD] [--peer-venv PATH]
                                      [--repeat N] [--json OUT] [--no-trainlint]

For every directory it runs both tools over the same tree, times them (the first,
"cold" run and the best of --repeat runs; wall clock and CPU seconds), counts
findings per rule and per severity, and prints tables plus the speed ratio.
Findings are only counted in .py files that both tools analysed.

The peer is installed into its own virtual environment (default
benchmarks/.work/peer-venv, ignored by git) the first time it is needed. Its base
install needs only libcst and rich; torch is an optional extra that is never
installed here.

Standard library only; Python 3.10 or newer. See benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import venv
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_PEER_VENV = REPO_ROOT / "benchmarks" / ".work" / "peer-venv"
PEER_REQUIREMENT = "torch-preflight==0.5.0"
PEER_VERSION = "0.5.0"
PEER_MODULE = "torch_preflight"

# Directory names the peer never descends into (observed behaviour of 0.5.0: any
# path component equal to one of these excludes the file). Used to work out which
# files the peer saw, since its JSON reports only a count.
PEER_SKIPPED_DIRS = frozenset(
    {
        ".git", ".hg", ".svn", ".tox", ".nox", ".venv", "venv", "env", "__pycache__",
        "node_modules", "build", "dist", ".eggs", "site-packages", ".mypy_cache",
        ".pytest_cache", ".ruff_cache", ".ipynb_checkpoints",
    }
)

# Rough correspondence between the peer's rule codes and trainlint's, by the bug
# each one is about. Used only to line the two tools up side by side; the rules'
# exact scopes differ (see the README).
TOPICS: list[tuple[str, str | None, str | None]] = [
    ("autograd graph kept alive across iterations", "TG001", "TL101"),
    ("evaluation without no_grad/inference_mode", "TG002", "TL102"),
    ("backward(retain_graph=True) every iteration", None, "TL103"),
    ("GPU tensors accumulated across iterations", None, "TL104"),
    ("backward without zero_grad", "TG003", "TL201"),
    ("softmax/probabilities into CE/NLL loss", "TG005", "TL202"),
    ("BCE loss vs. activation mismatch", "TG006", "TL203"),
    ("accumulated loss not divided", "TG014", "TL204"),
    ("eval() left on in the epoch loop", "TG011", "TL205"),
    ("zero_grad between backward and step", None, "TL206"),
    ("clip before scaler.unscale_", None, "TL207"),
    ("evaluation without model.eval()", None, "TL208"),
    ("layer built inside forward()", None, "TL209"),
    ("discarded tensor .to()/.cuda()", None, "TL210"),
    ("F.dropout always on", None, "TL211"),
    ("DataLoader workers / pin_memory", "TG004", "TL301"),
    ("host sync in hot loop", "TG007", "TL302"),
    ("loop-invariant host-to-device copy", "TG013", "TL303"),
    ("unseeded / partially seeded run", "TG008", "TL401"),
    ("determinism vs. cudnn.benchmark", None, "TL402"),
    ("seed 0 ignored", None, "TL403"),
    ("DDP without DistributedSampler", "TG012", "TL501"),
    ("missing sampler.set_epoch", None, "TL502"),
    ("projected OOM on target GPU", "TG010", "TL601"),
]

SEVERITY_BY_NUMBER = {1: "note", 2: "warning", 3: "error"}
SEVERITIES = ("error", "warning", "note")


# --------------------------------------------------------------------------- data


@dataclass
class Finding:
    path: str  # relative to the directory that was checked, POSIX separators
    line: int
    code: str
    severity: str


@dataclass
class Timing:
    wall: float
    cpu: float  # user + sys of the tool and every process it waited for
    max_rss_kib: int


@dataclass
class ToolRun:
    tool: str
    directory: str
    command: list[str]
    timings: list[Timing] = field(default_factory=list)
    exit_codes: list[int] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    files_reported: int | None = None  # the tool's own count of files analysed
    failed_files: set[str] = field(default_factory=set)  # files it could not parse
    error: str | None = None  # set when the tool could not be run or read

    @property
    def cold(self) -> Timing | None:
        return self.timings[0] if self.timings else None

    @property
    def best(self) -> Timing | None:
        return min(self.timings, key=lambda t: t.wall) if self.timings else None


# ---------------------------------------------------------------- running things


def run_timed(cmd: list[str], cwd: Path, env: dict[str, str], timeout: float) -> tuple[int, str, str, Timing]:
    """Run ``cmd``; return (exit code, stdout, stderr, timing).

    stdout and stderr go to temporary files, so a large report cannot block on a
    full pipe while we wait. On POSIX the child's own resource usage (including
    the worker processes it reaped) comes from wait4.
    """
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        # A session of its own, so a timeout can stop the tool's worker processes too.
        proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=out, stderr=err, stdin=subprocess.DEVNULL,
                                start_new_session=(os.name == "posix"))
        killed = threading.Event()

        def kill() -> None:
            killed.set()
            try:
                if os.name == "posix":
                    os.killpg(proc.pid, 9)
                else:  # pragma: no cover
                    proc.kill()
            except ProcessLookupError:
                pass

        timer = threading.Timer(timeout, kill)
        timer.start()
        try:
            if hasattr(os, "wait4"):
                _, status, usage = os.wait4(proc.pid, 0)
                wall = time.perf_counter() - start
                proc.returncode = os.waitstatus_to_exitcode(status)
                cpu = usage.ru_utime + usage.ru_stime
                rss = int(usage.ru_maxrss)  # KiB on Linux
            else:  # pragma: no cover - non-POSIX
                proc.wait()
                wall = time.perf_counter() - start
                cpu, rss = float("nan"), 0
        finally:
            timer.cancel()
        out.seek(0)
        err.seek(0)
        stdout = out.read().decode("utf-8", "replace")
        stderr = err.read().decode("utf-8", "replace")
    code = proc.returncode
    if killed.is_set():
        stderr += f"\n[compare_peer] killed after {timeout:.0f}s"
        code = 124
    return code, stdout, stderr, Timing(wall, cpu, rss)


def child_env(keep_env: bool) -> dict[str, str]:
    env = dict(os.environ)
    if not keep_env:
        # Let each tool cache its bytecode like an ordinary install does; otherwise
        # every run recompiles the tool (and libcst), which dominates small runs.
        env.pop("PYTHONDONTWRITEBYTECODE", None)
    env.setdefault("NO_COLOR", "1")
    env["PYTHONIOENCODING"] = "utf-8"
    return env


def venv_python(venv_dir: Path) -> Path:
    if os.name == "nt":  # pragma: no cover
        return venv_dir / "Scripts" / "python.exe"
    return venv_dir / "bin" / "python"


def peer_version(python: Path) -> str | None:
    if not python.exists():
        return None
    probe = subprocess.run(
        [str(python), "-c", f"import {PEER_MODULE} as m; print(m.__version__)"],
        capture_output=True, text=True,
    )
    return probe.stdout.strip() if probe.returncode == 0 else None


def ensure_peer(venv_dir: Path) -> Path:
    """Create the peer's venv and install it there if needed; return its python."""
    python = venv_python(venv_dir)
    if peer_version(python) == PEER_VERSION:
        return python
    if not python.exists():
        print(f"[compare_peer] creating {venv_dir}", file=sys.stderr)
        venv.EnvBuilder(with_pip=True, clear=venv_dir.exists()).create(venv_dir)
    print(f"[compare_peer] installing {PEER_REQUIREMENT} into {venv_dir}", file=sys.stderr)
    # The base install pulls libcst and rich only; torch belongs to the [vram]
    # extra, which is deliberately not requested.
    subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", PEER_REQUIREMENT],
        check=True,
    )
    found = peer_version(python)
    if found != PEER_VERSION:
        raise SystemExit(f"compare_peer: installing {PEER_REQUIREMENT} failed (found {found!r})")
    has_torch = subprocess.run(
        [str(python), "-c", "import importlib.util,sys; sys.exit(importlib.util.find_spec('torch') is None)"],
    ).returncode == 0
    if has_torch:
        print("[compare_peer] note: torch is importable in the peer venv; the peer's check does not need it",
              file=sys.stderr)
    return python


def reference_cpu_seconds(iterations: int = 2_000_000) -> float:
    """CPU seconds this machine needs for a fixed pure-Python loop.

    Roughly 0.1-0.2 s on an idle, current x86 core. Printed next to the timings so runs on
    different or busy machines can be put on one scale (shared VMs lose CPU to
    other tenants, which inflates even CPU time).
    """
    start = time.process_time()
    total = 0
    for i in range(iterations):
        total += i ^ (i >> 3)
    return time.process_time() - start


# ------------------------------------------------------------- reading reports


def parse_json_report(text: str) -> dict[str, Any]:
    """The first JSON object on stdout, skipping anything printed before it."""
    decoder = json.JSONDecoder()
    index = text.find("{")
    while index != -1:
        try:
            value, _ = decoder.raw_decode(text, index)
        except json.JSONDecodeError:
            index = text.find("{", index + 1)
            continue
        if isinstance(value, dict):
            return value
        index = text.find("{", index + 1)
    raise ValueError("no JSON object in the output")


def _first(mapping: dict[str, Any], *keys: str, default: Any = None) -> Any:
    for key in keys:
        if key in mapping and mapping[key] is not None:
            return mapping[key]
    return default


def _severity(value: Any) -> str:
    if isinstance(value, bool):
        return "unknown"
    if isinstance(value, int):
        return SEVERITY_BY_NUMBER.get(value, str(value))
    text = str(value or "unknown").strip().lower()
    return {"notice": "note", "info": "note", "err": "error", "warn": "warning"}.get(text, text)


def _relative(path: str, cwd: Path, root: Path) -> str:
    p = Path(path)
    if not p.is_absolute():
        p = cwd / p
    try:
        return p.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return p.as_posix()


def _sarif_findings(report: dict[str, Any]) -> Iterable[dict[str, Any]]:
    for run in report.get("runs") or []:
        for result in run.get("results") or []:
            location = ((result.get("locations") or [{}])[0]).get("physicalLocation", {})
            yield {
                "code": result.get("ruleId"),
                "severity": result.get("level"),
                "path": (location.get("artifactLocation") or {}).get("uri", ""),
                "line": (location.get("region") or {}).get("startLine", 0),
            }


def read_report(run: ToolRun, stdout: str, cwd: Path, root: Path) -> None:
    """Fill ``run`` from a JSON report in either tool's format (or SARIF)."""
    report = parse_json_report(stdout)
    if "runs" in report and "findings" not in report and "diagnostics" not in report:
        raw = list(_sarif_findings(report))
    else:
        raw = _first(report, "findings", "diagnostics", "results", "issues", default=[])
    findings = []
    for item in raw:
        if not isinstance(item, dict):
            continue
        code = _first(item, "code", "rule", "rule_id", "ruleId", "id", default="?")
        location = item.get("location") if isinstance(item.get("location"), dict) else {}
        path = _first(item, "path", "file", "filename", default=None) or _first(location, "path", "file", default="")
        line = _first(item, "line", "row", default=None) or _first(location, "line", "row", default=0)
        findings.append(
            Finding(
                path=_relative(str(path), cwd, root),
                line=int(line or 0),
                code=str(code),
                severity=_severity(_first(item, "severity", "level")),
            )
        )
    run.findings = findings

    summary = report.get("summary") if isinstance(report.get("summary"), dict) else {}
    files = _first(summary, "files", "files_checked", "files_analyzed", "checked")
    run.files_reported = int(files) if isinstance(files, int) else None

    failures = _first(report, "failures", "parse_errors", "file_errors", default=[])
    for failure in failures if isinstance(failures, list) else []:
        path = failure.get("path") if isinstance(failure, dict) else failure
        if path:
            run.failed_files.add(_relative(str(path), cwd, root))


def run_tool(tool: str, base_cmd: list[str], directory: Path, *, repeat: int, env: dict[str, str],
             timeout: float, extra: list[str], untimed_first: bool = False) -> ToolRun:
    """``repeat`` timed runs of ``check DIR``; with ``untimed_first``, one more before them that
    is not timed (it fills trainlint's cache)."""
    cmd = [*base_cmd, "check", str(directory), *extra]
    run = ToolRun(tool=tool, directory=str(directory), command=cmd)
    cwd = directory
    last_stdout = ""
    for i in range(-1 if untimed_first else 0, repeat):
        code, stdout, stderr, timing = run_timed(cmd, cwd, env, timeout)
        run.exit_codes.append(code)
        if code not in (0, 1):
            tail = (stderr.strip() or stdout.strip())[-2000:]
            run.error = f"exit {code}: {tail}"
            return run
        if i < 0:
            continue
        run.timings.append(timing)
        if i == 0:
            last_stdout = stdout
    try:
        read_report(run, last_stdout, cwd, directory)
    except (ValueError, TypeError, AttributeError) as exc:
        run.error = f"could not read its JSON output: {exc}; output starts {last_stdout[:300]!r}"
    return run


# ------------------------------------------------------------------- file sets


def python_files(directory: Path) -> set[str]:
    return {p.relative_to(directory).as_posix() for p in directory.rglob("*.py") if p.is_file()}


def peer_files(all_files: set[str], peer: ToolRun) -> set[str]:
    seen = {f for f in all_files if not (set(f.split("/")[:-1]) & PEER_SKIPPED_DIRS)}
    return seen - peer.failed_files


# trainlint's own skipped folder names, for when its file list cannot be asked for.
TRAINLINT_SKIPPED_DIRS = frozenset(
    {".git", ".venv", "venv", "__pycache__", "node_modules", "build", "dist", "site-packages"}
)

# Engine findings, not rules: a file (or statement) trainlint could not analyse.
TRAINLINT_NOT_ANALYSED = frozenset({"TL002"})

_LIST_FILES = """
import json, sys
from pathlib import Path
from trainlint.discovery import Exclusions, discover_files
root = sys.argv[1]
print(json.dumps(discover_files([root], Exclusions([], Path(root)))))
"""


def trainlint_listing(cmd: list[str], directory: Path, env: dict[str, str]) -> set[str] | None:
    """The files trainlint discovers under ``directory`` (.gitignore files included).

    Only possible when trainlint is run as ``PYTHON -m trainlint``: its report carries
    a count, not a list, so the list comes from its discovery module. None otherwise.
    """
    if len(cmd) < 3 or cmd[-2:] != ["-m", "trainlint"]:
        return None
    probe = subprocess.run([*cmd[:-2], "-c", _LIST_FILES, str(directory)],
                           capture_output=True, text=True, env=env, cwd=directory)
    if probe.returncode != 0:
        return None
    try:
        listed = json.loads(probe.stdout)
    except json.JSONDecodeError:
        return None
    return {_relative(path, directory, directory) for path in listed}


def trainlint_files(all_files: set[str], trainlint: ToolRun, listing: set[str] | None) -> set[str]:
    if listing is None:
        # Approximation: trainlint also honours .gitignore files, which this ignores.
        listing = {f for f in all_files if not (set(f.split("/")[:-1]) & TRAINLINT_SKIPPED_DIRS)}
    not_analysed = {f.path for f in trainlint.findings if f.code in TRAINLINT_NOT_ANALYSED}
    return (listing & all_files) - trainlint.failed_files - not_analysed


# ------------------------------------------------------------------- reporting


def fmt_s(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def table(rows: list[list[str]], header: list[str]) -> str:
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    def line(r: list[str]) -> str:
        return "  ".join(str(c).ljust(w) if i == 0 else str(c).rjust(w) for i, (c, w) in enumerate(zip(r, widths)))
    return "\n".join([line(header), line(["-" * w for w in widths]), *map(line, rows)])


def rule_counts(findings: Iterable[Finding]) -> Counter[str]:
    return Counter(f.code for f in findings)


def severity_counts(findings: Iterable[Finding]) -> Counter[str]:
    return Counter(f.severity for f in findings)


def agreement(peer: list[Finding], ours: list[Finding]) -> dict[str, dict[str, int]]:
    """Per topic: findings both tools put on the same file and line, and the rest."""
    out: dict[str, dict[str, int]] = {}
    for _topic, peer_code, our_code in TOPICS:
        if not peer_code or not our_code:
            continue
        a = {(f.path, f.line) for f in peer if f.code == peer_code}
        b = {(f.path, f.line) for f in ours if f.code == our_code}
        if a or b:
            out[peer_code + "/" + our_code] = {"same_line": len(a & b), "peer_only": len(a - b), "trainlint_only": len(b - a)}
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dirs", nargs="+", type=Path, help="directories to check")
    parser.add_argument("--trainlint", default=None,
                        help="command that runs trainlint, before 'check' (default: "
                             f"'{sys.executable} -m trainlint'); the script appends 'check DIR --format json'")
    parser.add_argument("--no-trainlint", action="store_true", help="run the peer alone")
    parser.add_argument("--no-peer", action="store_true", help="run trainlint alone")
    parser.add_argument("--no-cached", action="store_true",
                        help="skip trainlint's cached runs (by default it also runs with a fresh cache: once to fill it, "
                             "then --repeat times)")
    parser.add_argument("--peer-venv", type=Path, default=DEFAULT_PEER_VENV,
                        help=f"virtual environment for the peer (default: {DEFAULT_PEER_VENV.relative_to(REPO_ROOT)})")
    parser.add_argument("--repeat", type=int, default=3, help="runs per tool and directory (default 3)")
    parser.add_argument("--timeout", type=float, default=1800, help="seconds allowed per run (default 1800)")
    parser.add_argument("--peer-args", default="", help="extra arguments for the peer's check, e.g. '-j 1'")
    parser.add_argument("--trainlint-args", default="", help="extra arguments for trainlint's check")
    parser.add_argument("--keep-env", action="store_true",
                        help="pass PYTHONDONTWRITEBYTECODE through to the tools (default: unset it)")
    parser.add_argument("--json", type=Path, dest="json_out", help="also write all results to this file")
    args = parser.parse_args(argv)

    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    if args.no_trainlint and args.no_peer:
        parser.error("nothing to run")
    for d in args.dirs:
        if not d.is_dir():
            parser.error(f"not a directory: {d}")
    dirs = [d.resolve() for d in args.dirs]
    env = child_env(args.keep_env)

    trainlint_cmd: list[str] | None = None
    caches = False
    if not args.no_trainlint:
        trainlint_cmd = shlex.split(args.trainlint) if args.trainlint else [sys.executable, "-m", "trainlint"]
        probe = subprocess.run([*trainlint_cmd, "check", "--help"], capture_output=True, text=True, env=env)
        if probe.returncode != 0:
            print(f"compare_peer: '{shlex.join(trainlint_cmd)} check --help' failed "
                  f"(exit {probe.returncode}); pass --trainlint CMD, or --no-trainlint to run the peer alone.\n"
                  f"{(probe.stderr or probe.stdout).strip()[-1000:]}", file=sys.stderr)
            return 2
        caches = "--no-cache" in probe.stdout  # an older trainlint has no cache: every run is cold anyway
    peer_cmd: list[str] | None = None
    if not args.no_peer:
        peer_cmd = [str(ensure_peer(args.peer_venv.resolve())), "-m", PEER_MODULE]

    reference = [reference_cpu_seconds()]
    results: list[dict[str, Any]] = []
    totals: dict[str, Counter[str]] = {"peer": Counter(), "trainlint": Counter()}
    all_peer: list[Finding] = []
    all_ours: list[Finding] = []
    file_rows, time_rows, problems, notes = [], [], [], []
    grand = {"files": 0, "peer": 0.0, "trainlint": 0.0, "peer_cpu": 0.0, "trainlint_cpu": 0.0, "cached": 0.0, "cached_cpu": 0.0}
    cache_root = Path(tempfile.mkdtemp(prefix="compare_peer-cache-"))

    def write_json(final: bool = False) -> None:
        """Written after every directory, so a long run that is stopped keeps what it had."""
        if not args.json_out:
            return
        payload = {
            "version": 1,
            "complete": final,
            "peer": {"requirement": PEER_REQUIREMENT, "venv": str(args.peer_venv)} if peer_cmd else None,
            "trainlint": {"command": trainlint_cmd} if trainlint_cmd else None,
            "repeat": args.repeat,
            "python": sys.version.split()[0],
            "cpu_count": os.cpu_count(),
            "reference_cpu_s": [round(r, 4) for r in reference],
            "load_average": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
            "directories": results,
            "totals": {tool: dict(sorted(c.items())) for tool, c in totals.items()},
        }
        args.json_out.parent.mkdir(parents=True, exist_ok=True)
        args.json_out.write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
        if final:
            print(f"\nwrote {args.json_out}", file=sys.stderr)

    for directory in dirs:
        on_disk = python_files(directory)
        print(f"[compare_peer] {directory} ({len(on_disk)} .py files)", file=sys.stderr)
        peer = ours = None
        if peer_cmd:
            peer = run_tool("peer", peer_cmd, directory, repeat=args.repeat, env=env, timeout=args.timeout,
                            extra=["--format", "json", *shlex.split(args.peer_args)])
        cached = None
        if trainlint_cmd:
            cold_flags = ["--no-cache"] if caches else []  # cold: every file analysed, as on a first run or in CI
            ours = run_tool("trainlint", trainlint_cmd, directory, repeat=args.repeat, env=env, timeout=args.timeout,
                            extra=["--format", "json", *cold_flags, *shlex.split(args.trainlint_args)])
            if caches and not args.no_cached and not ours.error:
                cache_dir = cache_root / directory.name
                cached = run_tool("trainlint cached", trainlint_cmd, directory, repeat=args.repeat, env=env,
                                  timeout=args.timeout, untimed_first=True,
                                  extra=["--format", "json", "--cache-dir", str(cache_dir), *shlex.split(args.trainlint_args)])
                shutil.rmtree(cache_dir, ignore_errors=True)
        for run in (peer, ours, cached):
            if run and run.error:
                problems.append(f"{run.tool} on {directory}: {run.error}")
        if cached and ours and not cached.error and not ours.error and cached.findings != ours.findings:
            problems.append(f"trainlint on {directory}: the cached run's findings differ from the cold run's")

        common = set(on_disk)
        if peer and not peer.error:
            common &= peer_files(on_disk, peer)
        if ours and not ours.error:
            listing = trainlint_listing(trainlint_cmd, directory, env)
            ours_seen = trainlint_files(on_disk, ours, listing)
            common &= ours_seen
            if ours.files_reported is not None and listing is not None and ours.files_reported != len(listing):
                notes.append(f"trainlint on {directory}: reported {ours.files_reported} files, "
                                f"its discovery lists {len(listing)}")
        dropped = {}
        for run in (peer, ours):
            if run and not run.error:
                kept = [f for f in run.findings if f.path in common]
                dropped[run.tool] = len(run.findings) - len(kept)
                run.findings = kept
                totals[run.tool].update(rule_counts(kept))
        if peer and not peer.error:
            all_peer.extend(Finding(f"{directory.name}/{f.path}", f.line, f.code, f.severity) for f in peer.findings)
        if ours and not ours.error:
            all_ours.extend(Finding(f"{directory.name}/{f.path}", f.line, f.code, f.severity) for f in ours.findings)

        file_rows.append([
            directory.name, str(len(on_disk)),
            "-" if not peer or peer.files_reported is None else str(peer.files_reported),
            "-" if not ours or ours.files_reported is None else str(ours.files_reported),
            str(len(common)),
        ])
        grand["files"] += len(common)
        row = [directory.name]
        for run in (peer, ours):
            ok = run is not None and not run.error and run.timings
            row += [fmt_s(run.cold.wall) if ok else "-", fmt_s(run.best.wall) if ok else "-",
                    fmt_s(run.best.cpu) if ok else "-"]
            if ok:
                grand[run.tool] += run.best.wall
                grand[run.tool + "_cpu"] += run.best.cpu
        both = peer and ours and not peer.error and not ours.error and peer.timings and ours.timings
        row.append(f"{peer.best.wall / ours.best.wall:.2f}x" if both and ours.best.wall > 0 else "-")
        row.append(f"{peer.best.cpu / ours.best.cpu:.2f}x" if both and ours.best.cpu > 0 else "-")
        has_cached = cached is not None and not cached.error and cached.timings
        row += [fmt_s(cached.best.wall) if has_cached else "-", fmt_s(cached.best.cpu) if has_cached else "-"]
        row.append(f"{peer.best.cpu / cached.best.cpu:.1f}x" if both and has_cached and cached.best.cpu > 0 else "-")
        if has_cached:
            grand["cached"] += cached.best.wall
            grand["cached_cpu"] += cached.best.cpu
        time_rows.append(row)

        entry: dict[str, Any] = {"directory": str(directory), "py_files_on_disk": len(on_disk),
                                 "common_files": len(common)}
        for run in (peer, ours, cached):
            if run is None:
                continue
            entry[run.tool] = {
                "command": run.command,
                "error": run.error,
                "exit_codes": run.exit_codes,
                "files_reported": run.files_reported,
                "failed_files": sorted(run.failed_files),
                "findings_outside_common_files": dropped.get(run.tool, 0),
                "runs": [{"wall_s": round(t.wall, 4), "cpu_s": round(t.cpu, 4), "max_rss_kib": t.max_rss_kib}
                         for t in run.timings],
                "cold_wall_s": round(run.cold.wall, 4) if run.cold else None,
                "best_wall_s": round(run.best.wall, 4) if run.best else None,
                "best_cpu_s": round(run.best.cpu, 4) if run.best else None,
                "per_rule": dict(sorted(rule_counts(run.findings).items())),
                "per_severity": dict(severity_counts(run.findings)),
                "findings": [[f.path, f.line, f.code, f.severity] for f in run.findings],
            }
        if peer and ours and not peer.error and not ours.error:
            entry["agreement"] = agreement(peer.findings, ours.findings)
        results.append(entry)
        write_json()

    # ---- print
    reference.append(reference_cpu_seconds())
    print(f"\nreference loop: {reference[0]:.2f}s / {reference[1]:.2f}s CPU before / after "
          "(roughly 0.1-0.2s on an idle modern core; more means a slow or oversubscribed machine)")
    if hasattr(os, "getloadavg"):
        load = os.getloadavg()[0]
        cpus = os.cpu_count() or 1
        print(f"{cpus} CPUs, load average {load:.1f} at the end"
              + (" -- the machine was busy: compare CPU seconds rather than wall time" if load > cpus else ""))
    print("\nFiles (.py)")
    print(table(file_rows, ["directory", "on disk", "peer saw", "trainlint saw", "counted (both)"]))
    print("\nTime in seconds (cold = first run, best = fastest of "
          f"{args.repeat}; cpu = user+sys of the best run; trainlint without its cache (tl) and with a cache "
          "filled by one run before (cached); the ratios are the peer's time over trainlint's)")
    print(table(time_rows, ["directory", "peer cold", "peer best", "peer cpu",
                            "tl cold", "tl best", "tl cpu", "peer/tl", "cpu ratio",
                            "cached", "cached cpu", "cpu ratio"]))
    if peer_cmd and trainlint_cmd and grand["trainlint"] > 0:
        print(f"\nOverall (best runs): peer {grand['peer']:.2f}s, trainlint {grand['trainlint']:.2f}s "
              f"-> trainlint is {grand['peer'] / grand['trainlint']:.2f}x the peer's speed "
              f"(cpu: {grand['peer_cpu']:.2f}s vs {grand['trainlint_cpu']:.2f}s, "
              f"{grand['peer_cpu'] / max(grand['trainlint_cpu'], 1e-9):.2f}x) over {grand['files']} files")
        if grand["cached_cpu"] > 0:
            print(f"cached: trainlint {grand['cached']:.2f}s, cpu {grand['cached_cpu']:.2f}s "
                  f"-> {grand['peer_cpu'] / grand['cached_cpu']:.1f}x the peer's cpu")

    print("\nFindings per rule and directory (counted files only)")
    codes = sorted(set(totals["peer"]) | set(totals["trainlint"]))
    names = [Path(e["directory"]).name for e in results]
    rows = []
    for code in codes:
        tool = "peer" if code in totals["peer"] else "trainlint"
        counts = [str(e.get(tool, {}).get("per_rule", {}).get(code, 0)) if e.get(tool) else "-" for e in results]
        rows.append([code, *counts, str(totals[tool][code])])
    if rows:
        print(table(rows, ["rule", *names, "total"]))
    else:
        print("(no findings)")

    sev_rows = []
    for tool in ("peer", "trainlint"):
        if (tool == "peer" and not peer_cmd) or (tool == "trainlint" and not trainlint_cmd):
            continue
        found = all_peer if tool == "peer" else all_ours
        s = severity_counts(found)
        sev_rows.append([tool, *(str(s.get(k, 0)) for k in SEVERITIES), str(len(found))])
    print("\nFindings per severity")
    print(table(sev_rows, ["tool", *SEVERITIES, "total"]))

    if peer_cmd and trainlint_cmd:
        print("\nSide by side, by the bug each rule is about (same file and line = both flagged that line)")
        by_pair = agreement(all_peer, all_ours)
        side, quiet = [], []
        for topic, pc, tc in TOPICS:
            p = totals["peer"].get(pc, 0) if pc else 0
            t = totals["trainlint"].get(tc, 0) if tc else 0
            if not p and not t:
                quiet.append(tc or pc or topic)
                continue
            same = by_pair.get(f"{pc}/{tc}", {}).get("same_line", 0) if pc and tc else "-"
            side.append([topic, pc or "-", str(p) if pc else "n/a", tc or "-", str(t) if tc else "n/a", str(same)])
        if side:
            print(table(side, ["topic", "peer", "n", "trainlint", "n", "same line"]))
        if quiet:
            print(f"no findings from either tool: {', '.join(quiet)}")

    if notes:
        print("\nNotes")
        for note in notes:
            print(f"  {note}")
    if problems:
        print("\nProblems")
        for problem in problems:
            print(f"  {problem}")

    write_json(final=True)
    shutil.rmtree(cache_root, ignore_errors=True)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
