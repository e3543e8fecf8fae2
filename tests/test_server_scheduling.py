"""Scheduling as an editor types: keystrokes faster than an analysis, pulls cancelled by the next
key (as VS Code and Neovim do), an inlay-hint request with every change (Neovim never cancels
those). Each document has one analysis at a time, shared by every request: before, every pull
and every inlay-hint request queued an analysis of its own text, so diagnostics trailed the
typing by seconds and a client that did not cancel built an unbounded queue."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from lsp_pipe import RawServer, diagnostics_of, shown

from trainlint.analysis.engine import analyze_source

EXAMPLES = sorted((Path(__file__).resolve().parent.parent / "examples" / "buggy").glob("*.py"))
SERVER_CANCELLED = -32802
URI = "file:///project/train.py"


def long_training_file(lines: int) -> str:
    """The bundled examples one after another, their functions and classes renamed per copy."""
    parts: list[str] = []
    copy = 0
    while sum(part.count("\n") for part in parts) < lines:
        source = EXAMPLES[copy % len(EXAMPLES)].read_text(encoding="utf-8")
        parts.append(re.sub(r"^(\s*(?:def|class) )(\w+)", rf"\g<1>\g<2>_{copy}", source, flags=re.M))
        copy += 1
    return "\n".join(parts)


def analyses_run(server: RawServer) -> int:
    [count] = re.findall(r"(\d+) analyses", server.debug_info())
    return int(count)


def analyses_stopped(server: RawServer) -> int:
    [count] = re.findall(r"(\d+) stopped for a newer text", server.debug_info())
    return int(count)


@pytest.fixture
def server():
    raw = RawServer()
    raw.initialize({
        "textDocument": {"diagnostic": {}, "inlayHint": {}, "hover": {"contentFormat": ["markdown"]}},
        "workspace": {"inlayHint": {"refreshSupport": True}},
    })
    yield raw
    raw.close()


def type_keys(server: RawServer, text: str, keys: int, *, cancel: bool) -> tuple[str, list[int]]:
    """Types ``keys`` characters at the end of a line inside a function, without waiting for any
    reply: each key is a change, a pull (cancelling the previous one when ``cancel``) and an
    inlay-hint request. Returns the final text and the ids of the requests sent."""
    lines = text.split("\n")
    line = next(index for index, content in enumerate(lines) if content.startswith("def ")) + 2
    column = len(lines[line])
    sent: list[int] = []
    pull = None
    for key in range(keys):
        position = {"line": line, "character": column + key}
        server.change(URI, key + 2, [{"range": {"start": position, "end": position}, "text": "x"}])
        if cancel and pull is not None:
            server.notify("$/cancelRequest", {"id": pull})
        pull = server.request("textDocument/diagnostic", {"textDocument": {"uri": URI}})
        everything = {"start": {"line": 0, "character": 0}, "end": {"line": len(lines), "character": 0}}
        sent += [pull, server.request("textDocument/inlayHint", {"textDocument": {"uri": URI}, "range": everything})]
    lines[line] += "x" * keys
    return "\n".join(lines), sent


@pytest.mark.parametrize("cancel", [True, False], ids=["pulls-cancelled", "pulls-kept"])
def test_a_burst_of_keys_is_analysed_a_few_times_and_ends_fresh(server, cancel):
    text = long_training_file(1500)
    server.open(URI, text, version=1)
    final, sent = type_keys(server, text, 40, cancel=cancel)
    replies = server.replies(sent)
    for reply in replies.values():  # every request is answered: with a result, or cancelled with a request to pull again
        assert "result" in reply or (reply["error"]["code"], reply["error"]["data"]) == (SERVER_CANCELLED, {"retriggerRequest": True}), reply
    last_pull = replies[sent[-2]]
    assert "result" in last_pull
    expected = diagnostics_of(analyze_source(final, "/project/train.py"), final, "utf-16")
    assert shown(last_pull["result"]["items"]) == expected
    # 41 texts, one analysis at a time: the first text's, then one of the text as it was when that
    # finished or stopped, and so on; never one finished per key (the burst takes far less than an
    # analysis to send), and those that stopped for a newer text stopped early
    stopped = analyses_stopped(server)
    assert analyses_run(server) - stopped <= 6
    assert stopped <= 3 * (analyses_run(server) - stopped)


def test_inlay_hints_answer_from_the_last_analysis_and_are_refreshed_when_the_new_one_is_done(server):
    text = long_training_file(600)
    server.open(URI, text, version=1)
    assert server.diagnostics(URI) is not None  # the first analysis
    final, sent = type_keys(server, text, 5, cancel=True)
    replies = server.replies(sent)
    hints = [replies[msg_id] for msg_id in sent[1::2]]
    assert all("result" in reply for reply in hints)  # answered, from whichever analysis had finished
    expected = diagnostics_of(analyze_source(final, "/project/train.py"), final, "utf-16")
    assert shown(server.diagnostics(URI)) == expected
    assert "workspace/inlayHint/refresh" in server.server_requests


def test_an_analysis_stops_when_the_text_changes_and_the_pull_gets_the_new_texts_diagnostics(server):
    text = long_training_file(3000)
    server.open(URI, text, version=1)
    pull = server.request("textDocument/diagnostic", {"textDocument": {"uri": URI}})  # a fresh analysis starts
    server.debug_info()  # a round trip: the analysis has started (the change is not read in the same breath)
    lines = text.split("\n")
    line = next(index for index, content in enumerate(lines) if content.startswith("def ")) + 2
    end = {"line": line, "character": len(lines[line])}
    server.change(URI, 2, [{"range": {"start": end, "end": end}, "text": "  # edited"}])  # while it parses
    lines[line] += "  # edited"
    final = "\n".join(lines)
    reply = server.replies([pull])[pull]
    expected = diagnostics_of(analyze_source(final, "/project/train.py"), final, "utf-16")
    assert shown(reply["result"]["items"]) == expected  # the pull waited for the text as it is now
    assert analyses_stopped(server) == 1  # the first text's rules never ran to the end
    assert analyses_run(server) == 2


def test_typing_without_a_pause_still_finishes_an_analysis_every_few_keys(server):
    text = long_training_file(1500)
    server.open(URI, text, version=1)
    assert server.diagnostics(URI) is not None
    final, sent = type_keys(server, text, 40, cancel=False)
    replies = server.replies(sent)
    assert all("result" in reply for reply in replies.values())
    assert analyses_stopped(server) <= 3 * (analyses_run(server) - analyses_stopped(server))


def test_cancelling_a_pull_that_was_already_answered_logs_nothing(server):
    text = long_training_file(100)
    server.open(URI, text, version=1)
    pull = server.request("textDocument/diagnostic", {"textDocument": {"uri": URI}})
    assert "result" in server.replies([pull])[pull]
    server.notify("$/cancelRequest", {"id": pull})  # crossed the answer on the way: normal, every key
    assert server.diagnostics(URI) is not None  # the server has read the cancel by now
    assert not any(b"Cancel notification" in line for line in server.stderr), b"".join(server.stderr)
