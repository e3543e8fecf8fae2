"""A synchronous LSP client on the real server's pipes, for tests that send raw bytes or run
under Hypothesis (which cannot drive pytest-lsp's asynchronous client). Every wait is bounded."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import queue
import re
import subprocess
import threading
import time

from cli_process import SERVER

# How long a reply may take. A long fuzz run at `nice -n 19` on a busy machine needs more.
TIMEOUT = float(os.environ.get("TRAINLINT_LSP_TIMEOUT", "20"))


def frame(message: dict | bytes, *, header: bytes | None = None) -> bytes:
    body = message if isinstance(message, bytes) else json.dumps(message).encode()
    return (header if header is not None else b"Content-Length: %d\r\n\r\n" % len(body)) + body


class RawServer:
    """The real server on pipes; a thread parses what it writes into messages."""

    def __init__(self, *, stdin_blocking: bool = True) -> None:
        """``stdin_blocking=False``: the server's stdin is a pipe whose read side is non-blocking, as
        when a client hands on a descriptor it set so (the open file description is shared)."""
        if stdin_blocking:
            self.process = subprocess.Popen(SERVER, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            self.stdin = self.process.stdin
        else:
            read_side, write_side = os.pipe()
            os.set_blocking(read_side, False)
            self.process = subprocess.Popen(SERVER, stdin=read_side, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            os.close(read_side)
            self.stdin = open(write_side, "wb")  # closed in `close`
        self.messages: queue.Queue = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self.stderr: list[bytes] = []
        threading.Thread(target=lambda: self.stderr.extend(self.process.stderr), daemon=True).start()
        self.next_id = 0
        self.notifications: list[dict] = []
        self.server_requests: list[str] = []  # methods of the requests the server sent us
        self.slowest = (0.0, "")  # the longest wait for a reply so far, and its request
        self._sent: dict = {}

    def _read(self) -> None:
        stream = self.process.stdout
        while True:
            length = None
            while True:
                line = stream.readline()
                if not line:
                    return
                if not line.strip():
                    break
                name, _, value = line.decode().partition(":")
                if name.lower() == "content-length":
                    length = int(value)
            self.messages.put(json.loads(stream.read(length)))

    def send(self, data: bytes) -> None:
        self.stdin.write(data)
        self.stdin.flush()

    def request(self, method: str, params, *, raw_header: bytes | None = None) -> int:
        self.next_id += 1
        self._sent = {"id": self.next_id, "method": method, "at": time.monotonic()}
        self.send(frame({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params}, header=raw_header))
        return self.next_id

    def notify(self, method: str, params) -> None:
        self.send(frame({"jsonrpc": "2.0", "method": method, "params": params}))

    def reply(self, msg_id, timeout: float = TIMEOUT) -> dict:
        """The response to one request; server-to-client requests are answered with null on the way."""
        return self.replies([msg_id], timeout)[msg_id]

    def replies(self, msg_ids, timeout: float = TIMEOUT) -> dict:
        """The responses to several requests, in whatever order they come, by id."""
        deadline = time.monotonic() + timeout
        wanted, found = set(msg_ids), {}
        while wanted - found.keys():
            remaining = deadline - time.monotonic()
            assert remaining > 0, f"no reply to requests {sorted(wanted - found.keys())} within {timeout} s"
            try:
                message = self.messages.get(timeout=remaining)
            except queue.Empty:
                continue
            if "method" in message and "id" in message:  # the server asks something (registration, configuration)
                self.server_requests.append(message["method"])
                self.send(frame({"jsonrpc": "2.0", "id": message["id"], "result": None}))
            elif "method" in message:
                self.notifications.append(message)
            elif message.get("id") in wanted:  # a reply to an unreadable request has the id null
                if self._sent.get("id") == message.get("id"):
                    waited = time.monotonic() - self._sent["at"]
                    self.slowest = max(self.slowest, (waited, self._sent["method"]))
                found[message.get("id")] = message
        return found

    def log_messages(self) -> list[str]:
        return [m["params"]["message"] for m in self.notifications if m["method"] == "window/logMessage"]

    def initialize(self, capabilities: dict | None = None, options: dict | None = None) -> dict:
        """The server's capabilities; by default the client pulls diagnostics."""
        if capabilities is None:
            capabilities = {"textDocument": {"diagnostic": {}, "hover": {"contentFormat": ["markdown"]}}}
        result = self.result("initialize", {
            "processId": None, "rootUri": None, "capabilities": capabilities, "initializationOptions": options,
        })
        self.notify("initialized", {})
        return result["capabilities"]

    def result(self, method: str, params):
        """Send a request and return its result; an error reply fails the test."""
        reply = self.reply(self.request(method, params))
        assert "error" not in reply, f"{method}: {reply['error']}"
        return reply["result"]

    def open(self, uri: str, text: str, version: int = 0) -> None:
        self.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "python", "version": version, "text": text}})

    def change(self, uri: str, version: int, changes: list[dict]) -> None:
        self.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": version}, "contentChanges": changes})

    def close_document(self, uri: str) -> None:
        self.notify("textDocument/didClose", {"textDocument": {"uri": uri}})

    def diagnostics(self, uri: str) -> list[dict]:
        return self.result("textDocument/diagnostic", {"textDocument": {"uri": uri}})["items"]

    def fix_all(self, uri: str) -> list[dict] | None:
        """The edits of the resolved `source.fixAll.trainlint` action; None when none is offered."""
        nowhere = {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 0}}
        actions = self.result("textDocument/codeAction", {
            "textDocument": {"uri": uri}, "range": nowhere, "context": {"diagnostics": [], "only": ["source.fixAll.trainlint"]},
        })
        if not actions:
            return None
        return self.result("codeAction/resolve", actions[0]).get("edit", {}).get("changes", {}).get(uri)

    def debug_info(self) -> str:
        return self.result("workspace/executeCommand", {"command": "trainlint.printDebugInfo", "arguments": []})

    def alive(self) -> bool:
        """A hover on a closed document is answered with null by a working server."""
        msg_id = self.request("textDocument/hover", {"textDocument": {"uri": "file:///nowhere.py"}, "position": {"line": 0, "character": 0}})
        return self.reply(msg_id)["result"] is None

    def close(self) -> None:
        try:
            msg_id = self.request("shutdown", None)
            self.reply(msg_id)
            self.notify("exit", None)
            self.process.wait(timeout=TIMEOUT)
        finally:
            if self.process.poll() is None:
                self.process.kill()
            self.process.wait(timeout=TIMEOUT)
            with contextlib.suppress(OSError):
                self.stdin.close()




# ---------------------------------------------------------------------- the client's side of positions
# Written apart from the server's code (server/text.py, server/positions.py), as an editor would: a
# line ends at \n, \r\n or \r; a character offset counts code units of the negotiated encoding.
_LINE_BREAK = re.compile(r"\r\n|\r|\n")
ENCODINGS = ("utf-16", "utf-8", "utf-32")


def client_lines(text: str) -> list[str]:
    return _LINE_BREAK.split(text)


def code_units(text: str, encoding: str) -> int:
    if encoding == "utf-8":
        return len(text.encode("utf-8"))
    if encoding == "utf-16":
        return len(text.encode("utf-16-le")) // 2
    return len(text)


def position_at(text: str, offset: int, encoding: str) -> dict:
    """The LSP position of an offset that does not fall between the \\r and \\n of a line break."""
    breaks = list(_LINE_BREAK.finditer(text, 0, offset))
    start = breaks[-1].end() if breaks else 0
    return {"line": len(breaks), "character": code_units(text[start:offset], encoding)}


def offset_at(text: str, position: dict, encoding: str) -> int:
    starts = [0] + [match.end() for match in _LINE_BREAK.finditer(text)]
    if position["line"] >= len(starts):
        return len(text)
    start = starts[position["line"]]
    line = client_lines(text[start:])[0]
    for index in range(len(line) + 1):
        if code_units(line[:index], encoding) >= position["character"]:
            return start + index
    return start + len(line)


def apply_edits(text: str, edits: list[dict], encoding: str) -> str:
    """Apply a list of LSP TextEdits (non-overlapping, all against the same text)."""
    spans = sorted(
        ((offset_at(text, e["range"]["start"], encoding), offset_at(text, e["range"]["end"], encoding), e["newText"]) for e in edits),
        reverse=True,
    )
    for start, end, new_text in spans:
        text = text[:start] + new_text + text[end:]
    return text


def diagnostics_of(findings, text: str, encoding: str) -> list[tuple]:
    """What a client shows for the engine's findings of a text: (range, code, first line of message).

    The engine's columns count code points of the text after a leading byte-order mark."""
    lines = client_lines(text)
    bom = 1 if text.startswith("\ufeff") else 0

    def point(line: int, column: int) -> dict:
        before = lines[line - 1][: column - 1 + (bom if line == 1 else 0)] if line - 1 < len(lines) else ""
        return {"line": line - 1, "character": code_units(before, encoding)}

    return [
        ({"start": point(f.line, f.column), "end": point(f.end_line, f.end_column)}, f.code, f.message.split("\n\n")[0])
        for f in findings
    ]


def shown(diagnostics: list[dict]) -> list[tuple]:
    return [(d["range"], d["code"], d["message"].split("\n\n")[0]) for d in diagnostics]


def text_digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def capabilities_for(encoding: str) -> dict:
    """A client that pulls diagnostics, resolves code actions and speaks one position encoding."""
    return {
        "general": {"positionEncodings": [encoding]},
        "textDocument": {
            "diagnostic": {},
            "hover": {"contentFormat": ["markdown"]},
            "codeAction": {
                "codeActionLiteralSupport": {"codeActionKind": {"valueSet": ["quickfix", "source", "source.fixAll"]}},
                "resolveSupport": {"properties": ["edit"]},
            },
        },
        "workspace": {"workspaceEdit": {"documentChanges": True}},
    }
