"""How long a fresh server takes to its first diagnostics, over stdio as an editor starts it.

    .venv/bin/python benchmarks/first_report.py FILE [--mode pull|push|both] [--rounds 5] [--python PY]
        [--pythonpath DIR] [--cache-dir DIR [--forget-reports] | --cold] [--each] [--timeline] [--server-log FILE]

Each round starts ``PY -P -m trainlint server`` (the real server, its real transport), sends
``initialize`` with the capabilities of Neovim 0.11 (``pull``: it pulls ``textDocument/diagnostic``
right after ``didOpen`` and cannot be asked to pull again) or of Helix (``push``: no pull, it waits for
``publishDiagnostics``), then ``initialized`` and ``didOpen`` of FILE as soon as ``initialize`` is
answered, answers the server's own requests (``workspace/configuration``, registrations) as an editor
does, and stops at the first diagnostics of FILE. Per process it reports:

- **ready**: wall seconds from the start of the process to the answer to ``initialize``;
- **first**: wall seconds from ``didOpen`` to the first diagnostics (the pull's answer, or the first
  ``publishDiagnostics``);
- **cpu**: the server process' CPU seconds (user and system, from ``/proc``) when they arrived;
- **count**: how many diagnostics they hold.

The fastest of ``--rounds`` processes per figure is printed, as docs/server.md's start-up rows are.
The user's cache folder (``TRAINLINT_CACHE_DIR``) is ``--cache-dir`` when given, kept between rounds
(so every round after the first finds lsprotocol's compiled classes and the report remembered from
the round before; ``--forget-reports`` deletes the remembered reports before each process, as for a
file never opened before), or with ``--cold`` an empty folder per process. ``--python`` and ``--pythonpath``
run another checkout's server (a tree of links laid out as the installed package is), to measure a
base commit in the same minutes. ``--timeline`` has each server keep its record (``TRAINLINT_TIMELINE``,
``server/timeline.py``) and prints, per process, where the wait after ``didOpen`` went: when the
analysis' import ended (and its CPU), when the first analysis started and finished (and its CPU), and
when the report was written, each in milliseconds after ``didOpen`` was read. Linux only (``/proc``).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

NEOVIM_011 = {
    "textDocument": {
        "diagnostic": {"dynamicRegistration": False},
        "publishDiagnostics": {"relatedInformation": True},
        "hover": {"contentFormat": ["markdown", "plaintext"]},
        "synchronization": {"didSave": True, "dynamicRegistration": False},
    },
    "workspace": {"configuration": True, "didChangeWatchedFiles": {"dynamicRegistration": True}},
    "general": {"positionEncodings": ["utf-8", "utf-16", "utf-32"]},
}
HELIX = {
    "textDocument": {"publishDiagnostics": {"versionSupport": True}},
    "workspace": {"configuration": True},
    "general": {"positionEncodings": ["utf-8", "utf-32", "utf-16"]},
}
CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


class Connection:
    """A JSON-RPC client over the server's stdin and stdout (blocking reads: one request at a time)."""

    def __init__(self, process: subprocess.Popen[bytes]) -> None:
        self.process = process
        assert process.stdin is not None and process.stdout is not None
        self.input, self.output = process.stdin, process.stdout

    def send(self, message: dict) -> None:
        body = json.dumps({"jsonrpc": "2.0", **message}).encode()
        self.input.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        self.input.flush()

    def receive(self) -> dict:
        length = None
        while True:
            line = self.output.readline()
            if not line:
                raise RuntimeError(f"the server closed its output (exit status {self.process.poll()})")
            if line in (b"\r\n", b"\n"):
                break
            name, _, value = line.decode("ascii").partition(":")
            if name.strip().lower() == "content-length":
                length = int(value)
        assert length is not None
        return json.loads(self.output.read(length))

    def until(self, done) -> dict:
        """Read messages, answering the server's requests, until ``done(message)`` holds."""
        while True:
            message = self.receive()
            if "method" in message and "id" in message:  # a request of the server's
                method = message["method"]
                result = [None] * len(message["params"]["items"]) if method == "workspace/configuration" else None
                self.send({"id": message["id"], "result": result})
                continue
            if done(message):
                return message


def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS  # utime, stime


def phases(record: Path) -> str:
    """Where the first report's wait went, from a server's timeline: each stage in ms after ``didOpen``."""
    events = [json.loads(line) for line in record.read_text(encoding="utf-8").splitlines() if line.strip()]
    opened = next((e["t"] for e in events if e["event"] == "read" and e.get("method") == "textDocument/didOpen"), None)
    if opened is None:
        return "no didOpen in the timeline"

    def at(event: dict) -> str:
        return f"{(event['t'] - opened) / 1e6:+.0f} ms" + (f" ({event['cpu'] / 1e6:.0f} ms CPU)" if "cpu" in event else "")

    parts = []
    for label, found in (
        ("analysis imported", lambda e: e["event"] == "imported"),
        ("analysis started", lambda e: e["event"] == "started"),
        ("finished", lambda e: e["event"] == "finished"),
        ("report written", lambda e: e["event"] == "written" and (e.get("id") == 2 or e.get("method") == "textDocument/publishDiagnostics")),
    ):
        event = next((e for e in events if found(e)), None)
        if event is not None:
            parts.append(f"{label} {at(event)}")
    return "; ".join(parts)


def one_run(args: argparse.Namespace, mode: str, cache_dir: str) -> tuple[float, float, float, int, str]:
    env = dict(os.environ, TRAINLINT_CACHE_DIR=cache_dir)
    record = Path(tempfile.gettempdir()) / f"trainlint-timeline-{os.getpid()}-{time.monotonic_ns()}.jsonl"
    if args.timeline:
        env["TRAINLINT_TIMELINE"] = str(record)
    if args.pythonpath:
        env["PYTHONPATH"] = args.pythonpath
    text = args.file.read_text(encoding="utf-8")
    uri = args.file.resolve().as_uri()
    log = open(args.server_log, "ab") if args.server_log else subprocess.DEVNULL  # noqa: SIM115 (closed below)
    started = time.perf_counter()
    process = subprocess.Popen(
        [args.python, "-P", "-m", "trainlint", "server"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=log, env=env, cwd=args.file.resolve().parent,
    )
    client = Connection(process)
    try:
        capabilities = NEOVIM_011 if mode == "pull" else HELIX
        client.send({"id": 1, "method": "initialize", "params": {
            "processId": os.getpid(), "rootUri": args.file.resolve().parent.as_uri(), "capabilities": capabilities,
            "workspaceFolders": [{"uri": args.file.resolve().parent.as_uri(), "name": "bench"}],
        }})
        client.until(lambda message: message.get("id") == 1)
        ready = time.perf_counter() - started
        client.send({"method": "initialized", "params": {}})
        opened = time.perf_counter()
        client.send({"method": "textDocument/didOpen", "params": {
            "textDocument": {"uri": uri, "languageId": "python", "version": 0, "text": text},
        }})
        if mode == "pull":
            client.send({"id": 2, "method": "textDocument/diagnostic", "params": {"textDocument": {"uri": uri}}})
            answer = client.until(lambda message: message.get("id") == 2)
            items = answer["result"]["items"]
        else:
            published = client.until(lambda message: message.get("method") == "textDocument/publishDiagnostics"
                                      and message["params"]["uri"] == uri)
            items = published["params"]["diagnostics"]
        first = time.perf_counter() - opened
        cpu = cpu_s(process.pid)
        client.send({"id": 3, "method": "shutdown"})
        client.until(lambda message: message.get("id") == 3)
        client.send({"method": "exit"})
        process.wait(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        if log is not subprocess.DEVNULL:
            log.close()
    stages = phases(record) if args.timeline else ""
    record.unlink(missing_ok=True)
    return ready, first, cpu, len(items), stages


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("file", type=Path)
    parser.add_argument("--mode", choices=("pull", "push", "both"), default="both")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--pythonpath", help="put this folder first on the server's sys.path (another checkout's package)")
    parser.add_argument("--each", action="store_true", help="print every process' figures too")
    parser.add_argument("--server-log", help="append the servers' standard error to this file")
    parser.add_argument("--timeline", action="store_true", help="print where each process' wait after didOpen went")
    parser.add_argument("--forget-reports", action="store_true",
                        help="delete the remembered reports before each process: the file as if never opened before")
    place = parser.add_mutually_exclusive_group()
    place.add_argument("--cache-dir", help="the user's cache folder, kept between rounds (default: a new one per run)")
    place.add_argument("--cold", action="store_true", help="an empty cache folder for every process")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="trainlint-first-report-") as scratch:
        for mode in ("pull", "push") if args.mode == "both" else (args.mode,):
            runs = []
            for round_ in range(args.rounds):
                cache_dir = os.path.join(scratch, f"{mode}-{round_}") if args.cold else args.cache_dir or os.path.join(scratch, "kept")
                if args.forget_reports:
                    shutil.rmtree(os.path.join(cache_dir, "reports"), ignore_errors=True)
                runs.append(one_run(args, mode, cache_dir))
                if args.each:
                    print(f"  {mode} round {round_ + 1}: ready {runs[-1][0]:.2f} s, first {runs[-1][1]:.2f} s, "
                          f"CPU {runs[-1][2]:.2f} s, {runs[-1][3]} diagnostics", flush=True)
                if args.timeline:
                    print(f"    after didOpen: {runs[-1][4]}", flush=True)
            ready, first, cpu = (min(run[index] for run in runs) for index in range(3))
            counts = sorted({run[3] for run in runs})
            print(f"{mode}: ready {ready:.2f} s, first diagnostics {first:.2f} s after didOpen, "
                  f"server CPU {cpu:.2f} s at them, {'/'.join(map(str, counts))} diagnostics "
                  f"(fastest of {args.rounds}; load {os.getloadavg()[0]:.1f})", flush=True)


if __name__ == "__main__":
    main()
