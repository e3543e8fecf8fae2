"""Which of trainlint's modules one edit runs through, from its ``didChange`` to its ``publishDiagnostics``.

Run as a script (``python edit_trip.py FILE LINE CHARACTER``): it starts the language server in this
process, over pipes, as a push-only client's editor would talk to it (framed JSON-RPC, no pull
capability), opens FILE, waits for its diagnostics, then types one space at LINE:CHARACTER (0-based)
and records every function of trainlint that runs, on any thread, until the edited version's own
diagnostics arrive: a push-only client first gets the last report carried to the new text, then the
new text's. It prints JSON: the modules in the order they were first entered, how many distinct
functions ran, and the number of diagnostics in each of the three reports. A process of its own, because the profile hooks and the server's state are process-wide.
"""

from __future__ import annotations

import importlib.util
import json
import os
import pkgutil
import sys
import threading
from pathlib import Path
from typing import Any

import trainlint
import trainlint.server.server as entry


def _module_files() -> dict[str, str]:
    """The real path of each module's file -> its dotted name (the strict editable install runs the
    package's files through links)."""
    files = {os.path.realpath(trainlint.__file__): "trainlint"}
    for info in pkgutil.walk_packages(trainlint.__path__, "trainlint."):
        spec = importlib.util.find_spec(info.name)
        if spec is not None and spec.origin:
            files[os.path.realpath(spec.origin)] = info.name
    return files


class Recorder:
    def __init__(self) -> None:
        self.files = _module_files()
        self.names: dict[str, str] = {}  # a code object's file name -> its module ("" for another package's)
        self.recording = False
        self.modules: dict[str, int] = {}  # module -> order of first entry
        self.functions: set[tuple[str, str, int]] = set()

    def __call__(self, frame: Any, event: str, arg: Any) -> None:
        if event != "call" or not self.recording:
            return
        code = frame.f_code
        module = self.names.get(code.co_filename)
        if module is None:
            module = self.names[code.co_filename] = self.files.get(os.path.realpath(code.co_filename), "")
        if module:
            self.modules.setdefault(module, len(self.modules))
            self.functions.add((module, code.co_name, code.co_firstlineno))


class Client:
    """The editor's end of the pipes."""

    def __init__(self, to_server: Any, from_server: Any) -> None:
        self.to_server = to_server
        self.from_server = from_server

    def send(self, message: dict[str, Any]) -> None:
        body = json.dumps({"jsonrpc": "2.0", **message}).encode()
        self.to_server.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)

    def until(self, wanted: Any) -> dict[str, Any]:
        """Read messages until one ``wanted`` accepts."""
        while True:
            length = 0
            while (line := self.from_server.readline()) not in (b"\r\n", b"\n", b""):
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":", 1)[1])
            if not length:
                raise RuntimeError("the server closed its output")
            message = json.loads(self.from_server.read(length))
            if wanted(message):
                return message


def trip(path: Path, line: int, character: int) -> dict[str, Any]:
    recorder = Recorder()
    threading.setprofile(recorder)  # every thread the server starts from here on
    sys.setprofile(recorder)
    client_read, server_write = os.pipe()
    server_read, client_write = os.pipe()
    server = threading.Thread(
        target=entry.server.start_io, args=(os.fdopen(server_read, "rb"), os.fdopen(server_write, "wb")), daemon=True,
    )
    server.start()
    client = Client(os.fdopen(client_write, "wb", buffering=0), os.fdopen(client_read, "rb"))
    uri = path.as_uri()

    def diagnostics_of(version: int):
        return lambda message: (
            message.get("method") == "textDocument/publishDiagnostics" and message["params"].get("version") == version
        )

    client.send({"id": 1, "method": "initialize", "params": {
        "processId": None, "rootUri": path.parent.as_uri(), "capabilities": {},
    }})
    client.until(lambda message: message.get("id") == 1)
    client.send({"method": "initialized", "params": {}})
    client.send({"method": "textDocument/didOpen", "params": {"textDocument": {
        "uri": uri, "languageId": "python", "version": 1, "text": path.read_text(encoding="utf-8"),
    }}})
    opened = client.until(diagnostics_of(1))
    recorder.recording = True
    at = {"line": line, "character": character}
    client.send({"method": "textDocument/didChange", "params": {
        "textDocument": {"uri": uri, "version": 2}, "contentChanges": [{"range": {"start": at, "end": at}, "text": " "}],
    }})
    carried = client.until(diagnostics_of(2))
    edited = client.until(diagnostics_of(2))
    recorder.recording = False
    client.send({"id": 2, "method": "shutdown"})
    client.until(lambda message: message.get("id") == 2)
    client.send({"method": "exit"})
    server.join(timeout=30)
    return {
        "modules": sorted(recorder.modules, key=recorder.modules.__getitem__),
        "functions": len(recorder.functions),
        "findings": [len(report["params"]["diagnostics"]) for report in (opened, carried, edited)],
    }


if __name__ == "__main__":
    print(json.dumps(trip(Path(sys.argv[1]).resolve(), int(sys.argv[2]), int(sys.argv[3]))))
