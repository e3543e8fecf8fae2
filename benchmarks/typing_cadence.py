"""What someone typing into a long script sees, as each kind of editor asks for it.

    .venv/bin/python benchmarks/typing_cadence.py SCRIPT MARKER [--client neovim|refresh|push] [--key-ms 100] [--server CMD]

Starts the real `trainlint server`, opens SCRIPT, waits for its first diagnostics, then types a
50-character statement on a new line below the first line past a third of the file that starts
with MARKER, one key every ``--key-ms``. The clients:

- ``neovim``: Neovim 0.10/0.11. Each key: a change, a cancel of the pull still pending, a new
  pull, an inlay-hint request (never cancelled), and a hover on the script's first VRAM line.
  It does not declare ``workspace.diagnostics.refreshSupport`` and shows the answer to a pull it
  cancelled (its RPC layer drops only ``RequestCancelled`` answers).
- ``refresh``: the same, declaring refreshSupport; a ``workspace/diagnostic/refresh`` is
  answered and followed by a pull, as VS Code does.
- ``push``: Helix, Neovim before 0.10: no pull; each key a change and a hover; the server's
  ``publishDiagnostics`` are counted.

A report is what the client shows when it arrives (a pull's answer, a publish). It is the
analysis of its own text, or one of an older text carried through the edits since: the server's
result id then ends in ``~<version analysed>`` (``server/diagnostics.py``); a publish during
typing is counted as its text's own only when its items equal the last publish after typing
ended (so only the last key's is known). Printed: the longest stretch of typing without a report, the share of keys followed by a
report before the next key, key to the next report (p50/p95), key to a report of an analysis of
that key's text or a later one (p50/p95), last key to its text's own report, the hover's wait
(p50/p95/max) and that of a hover on a document that is not open (the event loop's own wait), the most inlay-hint requests outstanding at once, the server's CPU per key.
Run it with the machine busy (two ``yes > /dev/null``) to see what a loaded laptop sees.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shlex
import sys
import time
from pathlib import Path

TEXT = 'print(f"step={step} loss={loss.item():.4f} lr={lr}")'
SERVER = [sys.executable, "-P", "-m", "trainlint", "server"]


def percentile(values: list[float], share: float) -> float | None:
    ordered = sorted(values)
    return ordered[int(share * (len(ordered) - 1))] if ordered else None


def cpu_ms(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * 1000 / os.sysconf("SC_CLK_TCK")


class Client:
    def __init__(self, process: asyncio.subprocess.Process, kind: str, uri: str) -> None:
        self.process, self.kind, self.uri = process, kind, uri
        self.next_id = 0
        self.waiting: dict[int, tuple[asyncio.Future, str, float]] = {}
        # (arrival, version the report is of (None: unknown), version analysed, items)
        self.reports: list[tuple[float, int | None, int | None, list]] = []
        self.hover_waits: list[float] = []
        self.noops: set[int] = set()  # hovers on a document that is not open: the event loop's own wait
        self.noop_waits: list[float] = []
        self.most_hints_outstanding = 0
        self.version = 0

    def send(self, message: dict) -> None:
        body = json.dumps(message).encode()
        assert self.process.stdin is not None
        self.process.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)

    def request(self, method: str, params) -> tuple[int, asyncio.Future]:
        self.next_id += 1
        future = asyncio.get_running_loop().create_future()
        self.waiting[self.next_id] = (future, method, time.perf_counter())
        self.send({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        if method == "textDocument/inlayHint":
            outstanding = sum(1 for _, name, _ in self.waiting.values() if name == method)
            self.most_hints_outstanding = max(self.most_hints_outstanding, outstanding)
        return self.next_id, future

    def notify(self, method: str, params) -> None:
        self.send({"jsonrpc": "2.0", "method": method, "params": params})

    def pull(self) -> int:
        msg_id, _ = self.request("textDocument/diagnostic", {"textDocument": {"uri": self.uri}})
        return msg_id

    async def read(self) -> None:
        stream = self.process.stdout
        assert stream is not None
        while True:
            head = await stream.readuntil(b"\r\n\r\n")
            length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length"))
            message = json.loads(await stream.readexactly(length))
            now = time.perf_counter()
            if "method" in message and "id" in message:  # the server asks
                self.send({"jsonrpc": "2.0", "id": message["id"], "result": None})
                if message["method"] == "workspace/diagnostic/refresh" and self.kind == "refresh":
                    self.pull()
            elif message.get("method") == "textDocument/publishDiagnostics":
                params = message["params"]
                self.reports.append((now, params.get("version"), None, params["diagnostics"]))
            elif "id" in message and message["id"] in self.waiting:
                future, method, sent = self.waiting.pop(message["id"])
                if method == "textDocument/hover":
                    (self.noop_waits if message.get("id") in self.noops else self.hover_waits).append(now - sent)
                if method == "textDocument/diagnostic" and "result" in message and message["result"].get("kind") == "full":
                    result_id = message["result"].get("resultId", "")
                    version = int(result_id.split(":")[0])
                    analysed = int(result_id.split("~")[1]) if "~" in result_id else version
                    self.reports.append((now, version, analysed, message["result"]["items"]))
                if not future.done():
                    future.set_result(message)


async def run(script: Path, marker: str, kind: str, key_ms: float, server: list[str]) -> dict:
    uri = script.resolve().as_uri()
    process = await asyncio.create_subprocess_exec(
        *server, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL,
        cwd=script.resolve().parent,
    )
    client = Client(process, kind, uri)
    reader = asyncio.create_task(client.read())
    text_document: dict = {"inlayHint": {}, "hover": {"contentFormat": ["markdown"]}, "publishDiagnostics": {"versionSupport": True}}
    workspace: dict = {"inlayHint": {"refreshSupport": True}}
    if kind != "push":
        text_document["diagnostic"] = {"dynamicRegistration": False}
    if kind == "refresh":
        workspace["diagnostics"] = {"refreshSupport": True}
    _, initialized = client.request("initialize", {
        "processId": os.getpid(), "rootUri": script.resolve().parent.as_uri(),
        "capabilities": {"textDocument": text_document, "workspace": workspace, "general": {"positionEncodings": ["utf-16"]}},
    })
    await asyncio.wait_for(initialized, 60)
    client.notify("initialized", {})
    text = script.read_text(encoding="utf-8")
    lines = text.split("\n")
    client.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "python", "version": 0, "text": text}})
    started = time.perf_counter()
    if kind == "push":
        while not client.reports:
            await asyncio.sleep(0.01)
    else:
        _, first = client.request("textDocument/diagnostic", {"textDocument": {"uri": uri}})
        await asyncio.wait_for(first, 120)
    open_ms = 1000 * (time.perf_counter() - started)
    everything = {"start": {"line": 0, "character": 0}, "end": {"line": len(lines), "character": 0}}
    _, hints = client.request("textDocument/inlayHint", {"textDocument": {"uri": uri}, "range": everything})
    hinted = (await asyncio.wait_for(hints, 60)).get("result") or []
    hover_line = hinted[0]["position"]["line"] if hinted else 0
    row = next(i for i, line in enumerate(lines) if line.strip().startswith(marker) and i > len(lines) // 3)
    indent = lines[row][: len(lines[row]) - len(lines[row].lstrip())]
    pending: int | None = None

    def change(line: int, character: int, new_text: str) -> tuple[int, float]:
        nonlocal pending
        client.version += 1
        point = {"line": line, "character": character}
        client.notify("textDocument/didChange", {
            "textDocument": {"uri": uri, "version": client.version},
            "contentChanges": [{"range": {"start": point, "end": point}, "text": new_text}],
        })
        if kind != "push":
            if pending is not None and pending in client.waiting:
                client.notify("$/cancelRequest", {"id": pending})
            pending = client.pull()
            window = {"start": {"line": max(0, row - 40), "character": 0}, "end": {"line": row + 40, "character": 0}}
            client.request("textDocument/inlayHint", {"textDocument": {"uri": uri}, "range": window})
        client.request("textDocument/hover", {"textDocument": {"uri": uri}, "position": {"line": hover_line, "character": 4}})
        noop, _ = client.request("textDocument/hover", {"textDocument": {"uri": "file:///nowhere.py"}, "position": {"line": 0, "character": 0}})
        client.noops.add(noop)
        return client.version, time.perf_counter()

    change(row, len(lines[row]), "\n" + indent)
    await asyncio.sleep(1.5)
    cpu_before = cpu_ms(process.pid)
    keys: list[tuple[int, float]] = []
    column = len(indent)
    for character in TEXT:
        keys.append(change(row + 1, column, character))
        column += 1
        await asyncio.sleep(key_ms / 1000)
    cpu_after = cpu_ms(process.pid)
    last_version, last_at = keys[-1]
    deadline = time.perf_counter() + 30
    own_at = None
    while time.perf_counter() < deadline and own_at is None:
        await asyncio.sleep(0.05)
        if kind == "push":
            quiet = [r for r in client.reports if r[0] > last_at]
            if quiet and time.perf_counter() - quiet[-1][0] > 2:  # nothing more for 2 s: the last publish is final
                own_at = next(r[0] for r in quiet if r[1] == last_version and r[3] == quiet[-1][3])
        else:
            own_at = next((r[0] for r in client.reports if r[2] is not None and r[2] >= last_version), None)
    final_items = [r for r in client.reports if r[0] > last_at][-1][3] if kind == "push" else None

    def analysed(report: tuple) -> int | None:
        if kind != "push":
            return report[2]
        return report[1] if report[3] == final_items and report[1] == last_version else None

    typing_reports = [r[0] for r in client.reports if keys[0][1] <= r[0] <= last_at]
    marks = [keys[0][1], *typing_reports, last_at]
    to_next, to_own, before_next = [], [], 0
    for index, (version, at) in enumerate(keys):
        later = [r for r in client.reports if r[0] >= at]
        if later:
            to_next.append(later[0][0] - at)
            if index + 1 < len(keys) and later[0][0] < keys[index + 1][1]:
                before_next += 1
        own = [r[0] for r in later if (analysed(r) or -1) >= version]
        if own and kind != "push":  # a publish does not say which analysis it is of
            to_own.append(own[0] - at)
    figures = {
        "client": kind, "lines": len(lines), "open_ms": round(open_ms), "keys": len(keys),
        "longest_gap_ms": round(1000 * max(b - a for a, b in zip(marks, marks[1:]))),
        "report_before_next_key": f"{before_next}/{len(keys) - 1}",
        "key_to_report_p50_p95_ms": [round(1000 * (percentile(to_next, q) or 0)) for q in (0.5, 0.95)],
        "key_to_own_p50_p95_ms": [round(1000 * (percentile(to_own, q) or 0)) for q in (0.5, 0.95)] if to_own else None,
        "last_key_to_own_ms": round(1000 * (own_at - last_at)) if own_at is not None else None,
        "hover_p50_p95_max_ms": [round(1000 * (percentile(client.hover_waits, q) or 0)) for q in (0.5, 0.95, 1.0)],
        "noop_p50_p95_max_ms": [round(1000 * (percentile(client.noop_waits, q) or 0)) for q in (0.5, 0.95, 1.0)],
        "most_inlay_hints_outstanding": client.most_hints_outstanding,
        "cpu_ms_per_key": round((cpu_after - cpu_before) / len(keys), 1),
        "load": Path("/proc/loadavg").read_text().split()[0],
    }
    _, shutdown = client.request("shutdown", None)
    await asyncio.wait_for(shutdown, 30)
    client.notify("exit", None)
    reader.cancel()
    try:
        await asyncio.wait_for(process.wait(), 10)
    except asyncio.TimeoutError:
        process.kill()
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("script", type=Path)
    parser.add_argument("marker")
    parser.add_argument("--client", choices=["neovim", "refresh", "push"], default="neovim")
    parser.add_argument("--key-ms", type=float, default=100)
    parser.add_argument("--server", help="the server's command line (default: this Python's trainlint server)")
    args = parser.parse_args()
    server = shlex.split(args.server) if args.server else SERVER
    figures = asyncio.run(run(args.script, args.marker, args.client, args.key_ms, server))
    print(" · ".join(f"{name} {value}" for name, value in figures.items()))


if __name__ == "__main__":
    main()
