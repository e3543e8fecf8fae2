"""The server's protocol layer against a hostile or broken client: raw bytes on the real server
process's stdin, replies read from its stdout, every wait bounded.

Before the framing guard (server/framing.py), `Content-Length: 99999999999` killed the server
(MemoryError), a header section without a usable Content-Length or with LF-only line ends made it
stop answering for good, and a request with invalid params never got a reply."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lsp_pipe import TIMEOUT, RawServer, frame

# TL101: the stored outputs keep their graphs (nothing backwards them)
RETAINED = (
    "import torch\nfrom torchvision.models import resnet18\n\nencoder = resnet18()\nfeatures = []\n"
    "for images, _ in loader:\n    features.append(encoder(images.cuda()))\ntorch.save(features, 'feats.pt')\n"
)


@pytest.fixture(scope="module")
def raw():
    server = RawServer()
    server.initialize()
    yield server
    server.close()


def test_a_huge_content_length_is_skipped_not_allocated(raw):
    raw.send(b"Content-Length: 99999999999\r\n\r\n{}")
    assert raw.alive()
    assert raw.process.poll() is None
    assert any("99,999,999,999 bytes" in message for message in raw.log_messages())


@pytest.mark.parametrize("header", [
    b"Content-Type: application/vscode-jsonrpc\r\n\r\n",  # no Content-Length
    b"Content-Length: twelve\r\n\r\n",
    b"Content-Length: -12\r\n\r\n",
    b"Content-Length 12\r\n\r\n",  # not a header at all
    b"X" * 20_000 + b"\r\n\r\n",  # a header line past the limit
])
def test_a_broken_frame_is_skipped_and_the_next_one_is_answered(raw, header):
    raw.request("textDocument/hover", {"textDocument": {"uri": "file:///a.py"}, "position": {"line": 0, "character": 0}}, raw_header=header)
    assert raw.alive()
    assert raw.log_messages(), "the skipped frame is reported"


def test_lf_only_headers_are_read(raw):
    body = json.dumps({"jsonrpc": "2.0", "id": 99, "method": "textDocument/hover", "params": {
        "textDocument": {"uri": "file:///a.py"}, "position": {"line": 0, "character": 0}}}).encode()
    raw.send(b"content-length: %d\n\n" % len(body) + body)
    assert raw.reply(99)["result"] is None


@pytest.mark.parametrize("params, code", [
    ("a string", -32602),
    ({"textDocument": {"uri": "file:///a.py"}, "position": {"line": -1, "character": 0}}, -32602),
    ({"textDocument": {"uri": "file:///a.py"}, "position": {"line": 0, "character": -5}}, -32602),
    ({"textDocument": {"uri": "file:///a.py"}}, -32602),
    ({"textDocument": {"uri": "file:///a.py"}, "position": {"line": 2**40, "character": 0}}, -32602),
])
def test_requests_with_invalid_params_get_an_error(raw, params, code):
    reply = raw.reply(raw.request("textDocument/hover", params))
    assert reply["error"]["code"] == code
    assert "textDocument/hover" in reply["error"]["message"]
    assert raw.alive()


def test_bodies_that_are_not_requests_get_errors_or_are_ignored(raw):
    raw.send(frame(b"{not json"))
    assert raw.reply(None)["error"]["code"] == -32700
    raw.send(frame(b"[1, 2, 3]"))
    assert raw.reply(None)["error"]["code"] == -32600
    raw.send(frame({"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": "nonsense"}))  # a notification: no reply
    raw.send(frame({"jsonrpc": "2.0", "id": 5, "method": "textDocument/codeAction", "params": {"textDocument": 1}}))
    assert raw.reply(5)["error"]["code"] == -32602
    assert raw.alive()


HOVER = {"textDocument": {"uri": "file:///a.py"}, "position": {"line": 0, "character": 0}}


@pytest.mark.parametrize("message, answered_id", [
    ({"jsonrpc": "1.0", "id": 60, "method": "textDocument/hover", "params": HOVER}, 60),
    ({"jsonrpc": 2, "id": 61, "method": "textDocument/hover", "params": HOVER}, 61),
    ({"id": 62, "method": "textDocument/hover", "params": HOVER}, 62),
    ({"jsonrpc": "2.0", "id": 63, "method": 5, "params": HOVER}, 63),
    ({"jsonrpc": "2.0", "id": 64, "method": None}, 64),
    ({"jsonrpc": "2.0", "id": 68, "method": "textDocument/didOpen", "params": {"textDocument": {
        "uri": "file:///opened.py", "languageId": "python", "version": 1, "text": "x = 1\n"}}}, 68),
    # an id LSP does not allow: answered with id null, and the request is not run (no shutdown here)
    ({"jsonrpc": "2.0", "id": [1], "method": "textDocument/hover", "params": HOVER}, None),
    ({"jsonrpc": "2.0", "id": {"n": 1}, "method": "shutdown"}, None),
    ({"jsonrpc": "2.0", "id": True, "method": "shutdown"}, None),
    ({"jsonrpc": "2.0", "id": None, "method": "shutdown"}, None),
    ({"jsonrpc": "2.0", "id": 1.5, "method": "shutdown"}, None),
    ({"jsonrpc": "2.0", "params": {}}, None),  # neither a request, a notification nor a response
], ids=["jsonrpc-1.0", "jsonrpc-number", "no-jsonrpc", "method-number", "method-null", "notification-method",
        "id-list", "id-object", "id-true", "id-null", "id-fraction", "no-method-no-id"])
def test_a_malformed_request_gets_invalid_request(raw, message, answered_id):
    # Before: no reply at all (jsonrpc "1.0", id true, a method of null), an internal error with
    # pygls' traceback (a method of 5, an id that is a list or an object), or the request ran
    # (id true, null or 1.5: a shutdown, after which the server answered nothing; a didOpen with
    # an id: the document opened, and the request was never answered).
    raw.send(frame(message))
    reply = raw.reply(answered_id)
    assert reply["error"]["code"] == -32600, reply
    assert "id" in reply and reply["id"] == answered_id  # JSON-RPC 2.0: null where the id is unusable
    assert "traceback" not in json.dumps(reply)
    assert raw.alive()


def test_an_unknown_request_without_params_is_method_not_found(raw):
    # params may be left out (JSON-RPC 2.0); pygls' fallback type needed them: "Internal Error"
    raw.send(frame({"jsonrpc": "2.0", "id": 65, "method": "$/unknown"}))
    assert raw.reply(65)["error"]["code"] == -32601


def test_broken_notifications_and_responses_are_not_answered(raw):
    for message in (
        {"jsonrpc": "1.0", "method": "textDocument/didOpen", "params": {}},
        {"jsonrpc": "2.0", "method": 7},
        {"jsonrpc": "2.0", "id": [3], "result": None},
        {"jsonrpc": "2.0", "id": 66},  # a response without a result: an error with its id would settle the client's request 66
    ):
        raw.send(frame(message))
    raw.send(frame({"jsonrpc": "2.0", "id": 67, "method": "textDocument/hover", "params": HOVER}))
    before = []
    while (message := raw.messages.get(timeout=TIMEOUT)).get("id") != 67 or "method" in message:
        before.append(message)
    assert all("method" in message for message in before), before  # log messages at most, no response


def test_before_initialize_a_request_gets_server_not_initialized_and_a_notification_is_dropped(tmp_path):
    # Before: -32603 with pygls' traceback ("The workspace is not available"), and a
    # window/showMessage error for the notification.
    server = RawServer()
    try:
        uri = (tmp_path / "early.py").as_uri()
        server.open(uri, "import torch\n")
        reply = server.reply(server.request("textDocument/hover", HOVER))
        assert reply["error"]["code"] == -32002, reply
        assert server.reply(server.request("shutdown", None))["error"]["code"] == -32002
        server.initialize()
        assert uri not in server.debug_info()  # the didOpen before initialize was dropped
        assert not [m for m in server.notifications if m["method"] == "window/showMessage"]
    finally:
        server.close()


def test_a_second_initialize_is_refused_and_the_open_documents_stay(tmp_path):
    # Before: pygls made a new, empty workspace for it, so every open document was forgotten.
    server = RawServer()
    try:
        server.initialize()
        uri = (tmp_path / "train.py").as_uri()
        server.open(uri, RETAINED)
        first = server.diagnostics(uri)
        assert [d["code"] for d in first] == ["TL101"]
        again = server.reply(server.request("initialize", {"processId": None, "rootUri": None, "capabilities": {}}))
        assert again["error"]["code"] == -32600, again
        assert server.diagnostics(uri) == first
        assert "text 191 characters" in server.debug_info()
    finally:
        server.close()


def test_after_shutdown_a_request_gets_invalid_request_and_exit_ends_the_server():
    # Before: no reply at all to any request after shutdown; the client waited for ever.
    server = RawServer()
    server.initialize()
    assert server.result("shutdown", None) is None
    assert server.reply(server.request("textDocument/hover", HOVER))["error"]["code"] == -32600
    assert server.reply(server.request("shutdown", None))["error"]["code"] == -32600
    server.notify("exit", None)
    assert server.process.wait(timeout=TIMEOUT) == 0


def test_a_document_open_under_two_spellings_of_its_uri_survives_closing_one(raw, tmp_path):
    # pygls keeps one text per unquoted URI: closing "a%20b.py" dropped the text of "a b.py" too,
    # and a pull of that one then read the file from disk (here: -32603 FileNotFoundError).
    quoted, plain = (tmp_path / "a b.py").as_uri(), (tmp_path / "a b.py").as_uri().replace("%20", " ")
    raw.open(quoted, RETAINED)
    raw.open(plain, RETAINED)
    raw.close_document(quoted)
    reply = raw.reply(raw.request("textDocument/diagnostic", {"textDocument": {"uri": plain}}))
    assert "result" in reply, reply


def test_a_change_to_a_document_that_is_not_open_is_ignored_without_an_error_message(raw, tmp_path):
    # Before: pygls failed on it (KeyError) and the editor showed "Error in server: KeyError:
    # 'file:///...'" as an error message, for the client's mistake.
    raw.notifications.clear()
    raw.change((tmp_path / "never.py").as_uri(), 2, [{"text": "x = 1\n"}])
    raw.notify("notebookDocument/didChange", {
        "notebookDocument": {"uri": (tmp_path / "never.ipynb").as_uri(), "version": 2}, "change": {}})
    uri = (tmp_path / "open.ipynb").as_uri()
    raw.notify("notebookDocument/didOpen", {"notebookDocument": {"uri": uri, "notebookType": "jupyter-notebook", "version": 1, "cells": []}, "cellTextDocuments": []})
    raw.notify("notebookDocument/didChange", {"notebookDocument": {"uri": uri, "version": 2}, "change": {"cells": {"textContent": [
        {"document": {"uri": f"{uri}#never", "version": 2}, "changes": [{"text": "x = 1\n"}]}]}}})
    assert raw.alive()
    assert not [m for m in raw.notifications if m["method"] == "window/showMessage"], raw.notifications


def test_the_end_of_input_inside_a_message_ends_the_server_cleanly():
    server = RawServer()
    server.initialize()
    server.send(b"Content-Length: 500\r\n\r\n{\"jsonrpc\"")
    server.process.stdin.close()
    assert server.process.wait(timeout=TIMEOUT) is not None
    assert b"Traceback" not in b"".join(server.stderr)


def _did_open(server: RawServer, uri: str, text: str) -> None:
    server.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "python", "version": 1, "text": text}})


EXAMPLES = sorted((Path(__file__).resolve().parent.parent / "examples" / "buggy").glob("*.py"))


def _examples_until(done) -> str:
    """The bundled examples one after another, until ``done(text)``."""
    text = ""
    while not done(text):
        text += "".join(path.read_text(encoding="utf-8") for path in EXAMPLES)
    return text


def test_a_large_document_does_not_hold_up_the_others(tmp_path):
    from trainlint.server.documents import MAX_DOCUMENT_TOKENS, token_estimate

    large = _examples_until(lambda text: token_estimate(text) > MAX_DOCUMENT_TOKENS * 0.8)  # still analysed
    server = RawServer()
    try:
        server.initialize()
        _did_open(server, (tmp_path / "large.py").as_uri(), large)
        large_pull = server.request("textDocument/diagnostic", {"textDocument": {"uri": (tmp_path / "large.py").as_uri()}})
        _did_open(server, (tmp_path / "small.py").as_uri(), EXAMPLES[0].read_text(encoding="utf-8"))
        small_pull = server.request("textDocument/diagnostic", {"textDocument": {"uri": (tmp_path / "small.py").as_uri()}})
        replies = []
        while small_pull not in replies:  # the large one's analysis is still running; `exit` ends it
            message = server.messages.get(timeout=120)
            if message.get("id") in (large_pull, small_pull) and "method" not in message:
                replies.append(message["id"])
        assert replies == [small_pull]
    finally:
        started = time.monotonic()
        server.close()
        assert time.monotonic() - started < 10, "`exit` does not wait for a running analysis"


@pytest.mark.parametrize("shape", ["list-of-1.6-million-items", "100000-lines"])
def test_a_huge_document_is_answered_at_once_and_holds_up_nothing(tmp_path, shape):
    # Before: a 4.8 MB document holding one list of 1.6 million items had no diagnostics after 150 s,
    # and kept the other documents' pulls unanswered for 35 s more (LibCST holds the interpreter
    # while it reads a statement); a file of 100,000 lines got no reply in 150 s.
    if shape == "100000-lines":
        huge = _examples_until(lambda text: text.count("\n") >= 100_000)
    else:
        huge = "data = [" + "1, " * 1_600_000 + "]\n"
    small_uri, huge_uri = (tmp_path / "small.py").as_uri(), (tmp_path / "huge.py").as_uri()
    server = RawServer()
    try:
        server.initialize()
        _did_open(server, small_uri, RETAINED)
        small_items = server.diagnostics(small_uri)
        started = time.monotonic()
        _did_open(server, huge_uri, huge)
        huge_pull = server.request("textDocument/diagnostic", {"textDocument": {"uri": huge_uri}})
        small_pull = server.request("textDocument/diagnostic", {"textDocument": {"uri": small_uri}})
        replies = server.replies([huge_pull, small_pull], timeout=5)
        [note] = replies[huge_pull]["result"]["items"]
        assert note["code"] == "TL002" and "too large to check as you type" in note["message"], note
        assert replies[small_pull]["result"]["items"] == small_items
        end = {"line": huge.count("\n"), "character": 0}
        server.change(huge_uri, 2, [{"range": {"start": end, "end": end}, "text": "x = 1\n"}])  # typing in it
        [again] = server.reply(server.request("textDocument/diagnostic", {"textDocument": {"uri": huge_uri}}), timeout=5)["result"]["items"]
        assert again["code"] == "TL002"
        assert time.monotonic() - started < 5
    finally:
        server.close()


def test_a_document_over_its_budget_moves_to_the_expensive_lane(monkeypatch):
    from trainlint.analysis.settings import AnalysisSettings
    from trainlint.server import documents
    from trainlint.settings import EffectiveSettings

    settings = EffectiveSettings(AnalysisSettings())
    state = documents.DocumentState("file:///t.py", None)
    text = "x = 1\n"
    assert not state.expensive(text)
    assert state.expensive("x = 1\n" * (documents.LARGE_DOCUMENT_TOKENS // 2 + 1))
    monkeypatch.setattr(documents, "ANALYSIS_BUDGET_S", 0.0)
    state.analyse(text, 1, settings)
    assert state.expensive(text)


def test_every_request_gets_an_answer_whatever_its_params(raw):
    position = {"line": 0, "character": 0}
    span = {"start": position, "end": position}
    methods = [
        "textDocument/hover", "textDocument/diagnostic", "textDocument/codeAction", "textDocument/inlayHint",
        "codeAction/resolve", "workspace/executeCommand", "textDocument/definition", "trainlint/unknown",
    ]
    garbage = [
        None, 1, "x", [], {}, {"textDocument": None}, {"textDocument": {"uri": 5}, "position": position},
        {"textDocument": {"uri": "file:///nul\x00.py"}, "position": position, "range": span, "context": {"diagnostics": []}},
        {"textDocument": {"uri": "untitled:Untitled-1"}, "position": position, "range": span, "context": {"diagnostics": []}},
        {"command": "trainlint.fixAll", "arguments": [{"uri": 7}, None, ["x"]]},
        {"title": "t", "data": {"uri": "file:///never.py", "version": "x"}},
    ]
    for method in methods:
        for params in garbage:
            reply = raw.reply(raw.request(method, params))
            assert "result" in reply or reply["error"]["code"] < 0, (method, params)
    assert raw.alive()


_HEADERISH = st.one_of(
    st.sampled_from([
        b"Content-Length: -1", b"Content-Length: 1e3", b"Content-Length: 99999999999999", b"Content-Length:",
        b"content-length: twelve", b"Content-Type: application/vscode-jsonrpc; charset=utf-8", b"X-Other: 1",
        b"no colon here", b"", b"{\"jsonrpc\": \"2.0\", \"id\": 1, \"method\": \"shutdown\"}", b"\xff\xfe\x00",
    ]),
    st.binary(max_size=40).filter(lambda data: b"ength" not in data.lower()),
)


@settings(max_examples=40, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(lines=st.lists(st.tuples(_HEADERISH, st.sampled_from([b"\r\n", b"\n", b""])), max_size=8))
def test_garbage_between_messages_is_survived(raw, lines):
    # Each line of junk ends, and a blank line ends the junk, so the next frame starts on a line of its own.
    raw.send(b"".join(line + (end or b"\n") for line, end in lines) + b"\r\n\r\n")
    assert raw.alive()


@pytest.mark.parametrize("cut", [8, 16, 21])  # inside the name, after the colon, between the line breaks
def test_a_header_split_across_writes_is_read_whole_on_a_non_blocking_stdin(cut):
    # A client may hand the server a pipe whose read side it set non-blocking (the descriptor's mode
    # is shared). Reads there return whatever has arrived: the server took "Content-" for a whole
    # header line, skipped it, and dropped the frame; at start-up, with nothing yet to read, it
    # took the empty read for the end of its input and exited.
    server = RawServer(stdin_blocking=False)
    try:
        server.initialize()
        body = json.dumps({"jsonrpc": "2.0", "id": 77, "method": "textDocument/hover", "params": {
            "textDocument": {"uri": "file:///a.py"}, "position": {"line": 0, "character": 0}}}).encode()
        data = b"Content-Length: %d\r\n\r\n" % len(body) + body
        server.send(data[:cut])
        time.sleep(0.2)
        server.send(data[cut:])
        assert server.reply(77)["result"] is None
        assert not server.log_messages(), "nothing was skipped"
    finally:
        server.close()


def test_messages_written_together_are_read_in_one_trip_to_the_reading_thread():
    """Neovim writes a change, the cancel of the last pull and a new pull at each key; the reader
    takes them from the pipe in one trip to its thread (each trip hands the interpreter over twice,
    which waits for the analysis thread on a loaded machine), and cuts them apart whole, a body
    split across writes included."""
    import asyncio
    import os
    from concurrent.futures import ThreadPoolExecutor

    from trainlint.server.framing import BinaryReader

    messages = [{"jsonrpc": "2.0", "method": "m", "params": {"n": n, "pad": "x" * 300 * n}} for n in range(3)]
    read_side, write_side = os.pipe()
    with os.fdopen(read_side, "rb") as stream, ThreadPoolExecutor(1) as executor:
        reader = BinaryReader(stream, executor)
        trips = []
        read = reader._read
        reader._read = lambda size: trips.append(size) or read(size)

        async def three_frames() -> list[dict]:
            bodies = []
            for _ in range(3):
                length = int((await reader.readline(8192)).split(b":")[1])
                assert await reader.readline(8192) == b"\r\n"
                bodies.append(json.loads(await reader.read(length)))
            return bodies

        os.write(write_side, b"".join(frame(message) for message in messages))
        assert asyncio.run(three_frames()) == messages
        assert len(trips) == 1
        whole = frame(messages[2])
        os.write(write_side, whole[:40])  # a header and half a body, the rest later

        async def later() -> dict:
            reading = asyncio.ensure_future(one_frame())
            await asyncio.sleep(0.05)
            os.write(write_side, whole[40:])
            os.close(write_side)
            return await reading

        async def one_frame() -> dict:
            length = int((await reader.readline(8192)).split(b":")[1])
            await reader.readline(8192)
            return json.loads(await reader.read(length))

        assert asyncio.run(later()) == messages[2]
        assert asyncio.run(reader.readline(8192)) == b""  # the end of the input
