"""Per-file analysis cost of trainlint and the peer, measured side by side in one run.

    python benchmarks/per_file_speed.py DIR [DIR ...] [--sample N] [--rounds R] [--peer-venv PATH]

Wall-clock times of whole runs are unusable on a shared, oversubscribed machine: the same
command varies by a factor of five from one minute to the next. This script makes the two
tools share whatever the machine is doing. It starts one long-lived worker per tool (trainlint
in the running interpreter, the peer in its own venv), then, file by file, asks each worker to
analyse the same file, alternating which goes first, for several rounds. Each worker reports
the CPU time (``time.process_time``) its analysis of that file took; the script keeps the
fastest round per file and tool, since noise only ever adds time.

It prints, per corpus and overall, the summed best CPU seconds of each tool and the ratio
peer / trainlint. Start-up (interpreter, imports, argument parsing) is paid once per run, not
per file, so it is measured apart: the CPU time of ``<tool> --version`` in a fresh process,
the fastest of ``--rounds`` interleaved runs. "One run" adds it to the per-file sum, which is
what a user checking that corpus in one command pays (less the peer's multiprocessing, which
spends more CPU, not less).

Files are a deterministic sample: every k-th ``.py`` file of each directory in sorted order
(``--sample 0`` takes all). Standard library only; needs the peer's venv from compare_peer.py.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_PEER_VENV = REPO_ROOT / "benchmarks" / ".work" / "peer-venv"

# Each worker says it is ready, then reads one path per line and answers one JSON line each.
_TRAINLINT_WORKER = r"""
import json, sys, time
from trainlint.analysis.engine import analyze_source
print(json.dumps({"ready": True}), flush=True)
for line in sys.stdin:
    path = line.rstrip("\n")
    data = open(path, "rb").read()
    t = time.process_time()
    findings = analyze_source(data, path)
    print(json.dumps({"cpu": time.process_time() - t, "findings": len(findings)}), flush=True)
"""

_PEER_WORKER = r"""
import json, sys, time
from pathlib import Path
from torch_preflight.config import Config
from torch_preflight.engine import check_file
print(json.dumps({"ready": True}), flush=True)
for line in sys.stdin:
    path = Path(line.rstrip("\n"))
    t = time.process_time()
    result = check_file(path, Config())
    print(json.dumps({"cpu": time.process_time() - t, "findings": len(result.diagnostics)}), flush=True)
"""


class Worker:
    def __init__(self, name: str, python: str, code: str) -> None:
        self.name = name
        self.process = subprocess.Popen(
            [python, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1
        )
        self._answer()  # "ready": imports done

    def _answer(self) -> dict:
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError(f"{self.name} worker stopped")
        return json.loads(line)

    def measure(self, path: Path) -> dict:
        self.process.stdin.write(f"{path}\n")
        self.process.stdin.flush()
        return self._answer()

    def close(self) -> None:
        self.process.stdin.close()
        self.process.wait(timeout=60)


def startup_seconds(commands: dict[str, list[str]], rounds: int) -> dict[str, float]:
    best = {name: float("inf") for name in commands}
    for _ in range(rounds):
        for name, command in commands.items():
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            spent = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
            best[name] = min(best[name], spent)
    return best


def sample(directory: Path, every: int) -> list[Path]:
    files = sorted(p for p in directory.rglob("*.py") if p.is_file())
    return files if every <= 1 else files[::every]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("directories", nargs="+", type=Path)
    parser.add_argument("--sample", type=int, default=1, help="take every N-th file (default: all)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--peer-venv", type=Path, default=DEFAULT_PEER_VENV)
    parser.add_argument("--json", type=Path, help="write every measurement here")
    args = parser.parse_args(argv)

    peer_python = args.peer_venv / "bin" / "python"
    if not peer_python.exists():
        parser.error(f"no peer venv at {args.peer_venv}: run compare_peer.py once, or pass --peer-venv")
    startup = startup_seconds({
        "trainlint": [sys.executable, "-m", "trainlint", "--version"],
        "torch-preflight": [str(peer_python), "-m", "torch_preflight", "--version"],
    }, args.rounds)
    print(f"start-up CPU s (--version): trainlint {startup['trainlint']:.2f}, "
          f"torch-preflight {startup['torch-preflight']:.2f}")
    ours = Worker("trainlint", sys.executable, _TRAINLINT_WORKER)
    peer = Worker("torch-preflight", str(peer_python), _PEER_WORKER)

    records = []
    try:
        for directory in args.directories:
            for path in sample(directory, args.sample):
                best = {"trainlint": float("inf"), "torch-preflight": float("inf")}
                counts = {}
                for round_index in range(args.rounds):
                    order = (ours, peer) if round_index % 2 == 0 else (peer, ours)
                    for worker in order:
                        answer = worker.measure(path)
                        best[worker.name] = min(best[worker.name], answer["cpu"])
                        counts[worker.name] = answer["findings"]
                records.append({"corpus": str(directory), "path": str(path), "bytes": path.stat().st_size,
                                "cpu": best, "findings": counts})
                print(f"  {path}: trainlint {best['trainlint']:.3f} s, peer {best['torch-preflight']:.3f} s",
                      flush=True)
    finally:
        ours.close()
        peer.close()

    def summary(rows: list[dict]) -> tuple[float, float]:
        return sum(r["cpu"]["trainlint"] for r in rows), sum(r["cpu"]["torch-preflight"] for r in rows)

    print("\nCPU seconds     files   trainlint    peer  files ratio   one run: trainlint    peer  ratio")
    groups = [(str(d)[-14:], [r for r in records if r["corpus"] == str(d)]) for d in args.directories]
    for label, rows in [*groups, ("all", records)]:
        mine, theirs = summary(rows)
        run_mine, run_theirs = mine + startup["trainlint"], theirs + startup["torch-preflight"]
        print(f"{label:14} {len(rows):6}  {mine:10.2f}  {theirs:6.2f}  {theirs / max(mine, 1e-9):10.1f}x"
              f"   {run_mine:17.2f}  {run_theirs:6.2f}  {run_theirs / max(run_mine, 1e-9):5.1f}x")
    if args.json:
        args.json.write_text(json.dumps({"startup": startup, "rounds": args.rounds, "files": records}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
