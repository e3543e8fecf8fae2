"""Language-server latency: one-character edits in a large training file, timed end to end.

    .venv/bin/python benchmarks/lsp_latency.py [--lines 3000] [--edits 60] [--documents 20]

Starts the real `trainlint server`, opens a file of about ``--lines`` lines built from the
bundled examples (each copy's names suffixed so the file stays one valid program), then types
single characters inside one function, then presses Enter there (which moves every later
statement down a line): each ``didChange`` is followed by a pull of the diagnostics, and the
time from sending the change to receiving the report is recorded. It prints p50/p95/max of
those, the time of the first full analysis (open to first report), and the server's resident
memory after opening ``--documents`` documents of 1,000 lines each, while busy and after a pause.
Needs the dev extra (pytest-lsp provides the client).
"""

from __future__ import annotations

import argparse
import asyncio
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


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


async def main(args: argparse.Namespace) -> None:
    folder = Path(tempfile.mkdtemp(prefix="trainlint-latency-"))
    client = await ClientServerConfig(server_command=[sys.executable, "-m", "trainlint", "server"]).start()
    await client.initialize_session(types.InitializeParams(
        capabilities=client_capabilities("neovim@v0.11.0"), root_uri=folder.as_uri(),
        initialization_options={"settings": {"debounceMs": 0}},
    ))
    text = build_file(args.lines)
    uri = (folder / "big_train.py").as_uri()
    started = time.perf_counter()
    client.text_document_did_open(types.DidOpenTextDocumentParams(
        text_document=types.TextDocumentItem(uri=uri, language_id="python", version=1, text=text)))
    first = await pull(client, uri)
    full_analysis = time.perf_counter() - started

    lines = text.splitlines()
    target = next(i for i, line in enumerate(lines) if line.startswith("def ")) + 2
    column = len(lines[target])
    typed, entered = [], []
    version = 1
    for edit in range(args.edits):
        version += 1
        typed.append(await timed_change(client, uri, version, target, column, "x" if edit % 2 else " "))
        column += 1
    for edit in range(args.edits // 2):  # Enter, which moves every later statement down a line
        version += 1
        entered.append(await timed_change(client, uri, version, target, column, "\n    "))
        target, column = target + 1, 4

    one_thousand = "\n".join(build_file(1000).splitlines()[:1000]) + "\n"
    for index in range(args.documents):
        other = (folder / f"doc_{index}.py").as_uri()
        client.text_document_did_open(types.DidOpenTextDocumentParams(
            text_document=types.TextDocumentItem(uri=other, language_id="python", version=1, text=one_thousand)))
        await pull(client, other)
    busy_memory = rss_mib(client._server.pid)
    await asyncio.sleep(2.0)  # the server collects garbage once the user pauses
    idle_memory = rss_mib(client._server.pid)
    await client.shutdown_session()

    print(f"file: {len(lines)} lines, {len(first)} findings on open")
    print(f"full analysis (open to first report): {full_analysis * 1000:.0f} ms")
    print(f"one-character edit to fresh report, {len(typed)} edits: {percentiles(typed)}")
    print(f"Enter (later statements move down) to fresh report, {len(entered)} edits: {percentiles(entered)}")
    print(f"server RSS with {args.documents + 1} open documents: {busy_memory:.0f} MiB while busy, "
          f"{idle_memory:.0f} MiB after a pause")


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
    ordered = sorted(latencies)
    p95 = ordered[min(len(ordered) - 1, int(round(0.95 * (len(ordered) - 1))))]
    return f"p50 {statistics.median(ordered):.0f} ms, p95 {p95:.0f} ms, max {ordered[-1]:.0f} ms"


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lines", type=int, default=3000)
    parser.add_argument("--edits", type=int, default=60)
    parser.add_argument("--documents", type=int, default=20)
    asyncio.run(main(parser.parse_args()))
