"""Language-server latency: typing in a large training file, timed end to end.

    .venv/bin/python benchmarks/lsp_latency.py [--lines 3000] [--edits 60] [--documents 20]
    .venv/bin/python benchmarks/lsp_latency.py --script A.py --script B.py ...

Starts the real `trainlint server` and opens one document: the ``--script`` files one after
another (real training scripts: see benchmarks/README.md for the diffusers ones), or else about
``--lines`` lines built from the bundled examples. Where the document has a training loop
(``for step, batch in enumerate(...)``), edits go into its body, otherwise into the first
function. Then, each followed by a pull of the diagnostics, timed from sending the change to
receiving the report:

- one character at a time, a new statement typed on a new line of the loop (every half-typed
  state between, syntax errors included), then more characters at the end of that line;
- Enter, which moves every later line down;
- keys typed each after a pause of a little over a second (``--pauses``), when the server
  collects its garbage;
- a burst: ``--burst`` keys sent without waiting, each with a pull that cancels the one before
  (as VS Code and Neovim do); timed from the last key to the last pull's report;

and a no-op request (a hover on a document that is not open) every 10 ms during the first
analysis and the burst: how long the event loop keeps a request waiting while an analysis runs.
Last, the server's resident memory after opening ``--documents`` documents of 1,000 lines each
(the document's first 1,000 lines), while busy and after a pause. With ``--pin`` the client runs on one CPU and
the server on the others, so that on a machine of few cores the waits are the server's own, not
the client's work (it builds and reads every message) taking the server's core.
Needs the dev extra (pytest-lsp provides the client).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

from lsprotocol import types
from pytest_lsp import ClientServerConfig, client_capabilities

REPO = Path(__file__).resolve().parent.parent


def build_file(lines: int) -> str:
    sources = [path.read_text(encoding="utf-8") for path in sorted((REPO / "examples" / "buggy").glob("*.py"))]
    parts: list[str] = []
    copy = 0
    while sum(part.count("\n") for part in parts) < lines:
        source = sources[copy % len(sources)]
        # suffix every def/class name so the copies do not shadow each other
        parts.append(re.sub(r"^(\s*(?:def|class) )(\w+)", rf"\g<1>\g<2>_{copy}", source, flags=re.M))
        copy += 1
    return "\n".join(parts)


async def pull(client, uri: str) -> list[types.Diagnostic]:
    report = await client.text_document_diagnostic_async(
        types.DocumentDiagnosticParams(text_document=types.TextDocumentIdentifier(uri=uri))
    )
    return list(getattr(report, "items", []) or [])


def pin(server_pid: int) -> None:
    """This client on the first CPU, every thread of the server on the others: a request's wait
    is then the server's, not the time the client's own work kept the server off a core."""
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        raise SystemExit("--pin needs at least 2 CPUs")
    os.sched_setaffinity(0, {cpus[0]})
    for thread in os.listdir(f"/proc/{server_pid}/task"):  # threads started later inherit it
        os.sched_setaffinity(int(thread), set(cpus[1:]))


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


TRAINING_LOOP = re.compile(r"^\s+for step, batch in enumerate\(")
TYPED_STATEMENT = "seen_images = seen_images + len(batch)  # images so far"


async def main(args: argparse.Namespace) -> None:
    folder = Path(tempfile.mkdtemp(prefix="trainlint-latency-"))
    client = await ClientServerConfig(server_command=[sys.executable, "-m", "trainlint", "server"]).start()
    if args.pin:
        pin(client._server.pid)
    await client.initialize_session(types.InitializeParams(
        capabilities=client_capabilities("neovim@v0.11.0"), root_uri=folder.as_uri(),
        initialization_options={"settings": {"debounceMs": 0}},
    ))
    if args.script:
        text = "\n".join(Path(script).read_text(encoding="utf-8") for script in args.script)
    else:
        text = build_file(args.lines)
    uri = (folder / "big_train.py").as_uri()
    waits: list[float] = []
    stop = asyncio.Event()
    probing = asyncio.ensure_future(probe(client, waits, stop))
    started = time.perf_counter()
    client.text_document_did_open(types.DidOpenTextDocumentParams(
        text_document=types.TextDocumentItem(uri=uri, language_id="python", version=1, text=text)))
    first = await pull(client, uri)
    full_analysis = time.perf_counter() - started
    stop.set()
    await probing
    waits_open, waits[:] = list(waits), []

    lines = text.split("\n")
    loop_line = next((i for i, line in enumerate(lines) if TRAINING_LOOP.match(line)), None)
    if loop_line is not None:
        target = loop_line + 2  # a statement inside the loop's body
    else:
        target = next(i for i, line in enumerate(lines) if line.startswith("def ")) + 2
    indent = lines[target][: len(lines[target]) - len(lines[target].lstrip())]
    column = len(lines[target])
    version = 1
    entered = []
    for _ in range(args.edits // 2):  # Enter, which moves every later statement down a line
        version += 1
        entered.append(await timed_change(client, uri, version, target, column, "\n" + indent))
        target, column = target + 1, len(indent)
    typed = []
    statement = (TYPED_STATEMENT * (1 + args.edits // len(TYPED_STATEMENT)))[: args.edits]
    for character in statement:
        version += 1
        typed.append(await timed_change(client, uri, version, target, column, character))
        column += 1

    after_pause = []
    for pause in range(args.pauses):  # someone who stops for a second, then types on
        await asyncio.sleep(1.0 + 0.02 * (pause % 6))
        version += 1
        after_pause.append(await timed_change(client, uri, version, target, column, " " if pause % 2 else "x"))
        column += 1

    stop = asyncio.Event()
    probing = asyncio.ensure_future(probe(client, waits, stop))
    burst_started = time.perf_counter()
    pending, pending_id = None, None
    for key in range(args.burst):
        version += 1
        position = types.Position(line=target, character=column)
        column += 1
        client.text_document_did_change(types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
            content_changes=[types.TextDocumentContentChangePartial(range=types.Range(start=position, end=position), text="x" if key % 2 else " ")],
        ))
        if pending is not None:  # the next key cancels the last pull, as an editor does
            client.protocol.notify(types.CANCEL_REQUEST, types.CancelParams(id=pending_id))
            pending.add_done_callback(lambda future: future.exception())  # answered "cancelled", or at once
        pending_id = f"burst-{key}"
        pending = asyncio.ensure_future(client.protocol.send_request_async(types.TEXT_DOCUMENT_DIAGNOSTIC, types.DocumentDiagnosticParams(
            text_document=types.TextDocumentIdentifier(uri=uri)), msg_id=pending_id))
        await asyncio.sleep(args.key_interval_ms / 1000)
    last_key = time.perf_counter()
    await pending
    burst_fresh = (time.perf_counter() - last_key) * 1000
    burst_total = last_key - burst_started
    stop.set()
    await probing
    waits_burst = list(waits)

    first_lines = "\n".join(text.split("\n")[:1000]) + "\n"
    for index in range(args.documents):
        other = (folder / f"doc_{index}.py").as_uri()
        client.text_document_did_open(types.DidOpenTextDocumentParams(
            text_document=types.TextDocumentItem(uri=other, language_id="python", version=1, text=first_lines)))
        await pull(client, other)
    busy_memory = rss_mib(client._server.pid)
    await asyncio.sleep(2.0)  # the server collects garbage once the user pauses
    idle_memory = rss_mib(client._server.pid)
    await client.shutdown_session()

    print(f"file: {len(lines)} lines, {len(first)} findings on open")
    print(f"full analysis (open to first report): {full_analysis * 1000:.0f} ms")
    print(f"one-character edit to fresh report, {len(typed)} edits: {percentiles(typed)}")
    print(f"Enter (later statements move down) to fresh report, {len(entered)} edits: {percentiles(entered)}")
    print(f"a key after a pause of 1.0-1.1 s to fresh report, {len(after_pause)} keys: {percentiles(after_pause)}")
    print(f"burst of {args.burst} keys every {args.key_interval_ms} ms ({burst_total:.1f} s), pulls cancelled: "
          f"last key to fresh report {burst_fresh:.0f} ms")
    print(f"a no-op request's wait while the first analysis runs: {percentiles(waits_open)}; during the burst: {percentiles(waits_burst)}")
    print(f"server RSS with {args.documents + 1} open documents: {busy_memory:.0f} MiB while busy, "
          f"{idle_memory:.0f} MiB after a pause")


async def probe(client, waits: list[float], stop: asyncio.Event) -> None:
    """A request that needs no analysis, every 10 ms: the time it waits is the event loop's delay.
    (Stopped by ``stop``, not cancelled: pygls' client fails on a reply to a cancelled request.)"""
    nowhere = types.HoverParams(
        text_document=types.TextDocumentIdentifier(uri="file:///not-open.py"), position=types.Position(line=0, character=0)
    )
    while not stop.is_set():
        sent = time.perf_counter()
        await client.text_document_hover_async(nowhere)
        waits.append((time.perf_counter() - sent) * 1000)
        await asyncio.sleep(0.01)


async def timed_change(client, uri: str, version: int, line: int, column: int, text: str) -> float:
    """Milliseconds from sending one change to receiving the fresh pull report."""
    position = types.Position(line=line, character=column)
    client.text_document_did_change(types.DidChangeTextDocumentParams(
        text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
        content_changes=[types.TextDocumentContentChangePartial(range=types.Range(start=position, end=position), text=text)],
    ))
    sent = time.perf_counter()
    await pull(client, uri)
    return (time.perf_counter() - sent) * 1000


def percentiles(latencies: list[float]) -> str:
    if not latencies:
        return "none"
    ordered = sorted(latencies)
    p95 = ordered[min(len(ordered) - 1, int(round(0.95 * (len(ordered) - 1))))]
    return f"p50 {statistics.median(ordered):.0f} ms, p95 {p95:.0f} ms, max {ordered[-1]:.0f} ms"


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lines", type=int, default=3000)
    parser.add_argument("--edits", type=int, default=60)
    parser.add_argument("--documents", type=int, default=20)
    parser.add_argument("--script", action="append", help="a training script to open (repeat to concatenate)")
    parser.add_argument("--pauses", type=int, default=12, help="keys typed each after a pause of a second")
    parser.add_argument("--burst", type=int, default=300)
    parser.add_argument("--key-interval-ms", type=float, default=30, help="time between the burst's keys")
    parser.add_argument("--pin", action="store_true", help="the client on one CPU, the server on the others (Linux)")
    asyncio.run(main(parser.parse_args()))
