"""A record of when each message and analysis of the server happened, for finding where a key's
time goes (``benchmarks/nvim_typing.py --timeline``).

Off unless ``TRAINLINT_TIMELINE`` names a file when the server starts; then every message read
(when its bytes arrived on the reader thread, and when the event loop handed it to pygls), every
message written, and every analysis (queued, started on its lane, stopped or finished, with the
thread's CPU time) is appended to it as one JSON line, its time in ``CLOCK_MONOTONIC``
nanoseconds: the clock Neovim's ``vim.uv.hrtime()`` reads, so the two records line up.
"""

from __future__ import annotations

import json
import os
import threading
import time
from typing import Any

ENVIRONMENT_VARIABLE = "TRAINLINT_TIMELINE"

_lock = threading.Lock()
_file = None


def start() -> None:
    """Open the record named by ``TRAINLINT_TIMELINE``, if any (once, as the server starts)."""
    global _file
    path = os.environ.get(ENVIRONMENT_VARIABLE)
    if path:
        _file = open(path, "a", encoding="utf-8", buffering=1)  # open for the process' life


def mark(event: str, **fields: Any) -> None:
    """Record ``event`` now (nothing when the record is off)."""
    if _file is None:
        return
    line = json.dumps({"t": time.monotonic_ns(), "event": event, "thread": threading.current_thread().name, **fields})
    with _lock:
        _file.write(line + "\n")


def message(event: str, body: bytes, **fields: Any) -> None:
    """Record a JSON-RPC message read or written: its method, id, and what says which text it is of
    (a change's version, a cancel's id, a report's result id)."""
    if _file is None:
        return
    try:
        raw = json.loads(body)
    except ValueError:
        return
    if not isinstance(raw, dict):
        return
    params, result, error = (_object(raw.get(name)) for name in ("params", "result", "error"))
    document = _object(params.get("textDocument"))
    mark(event, method=raw.get("method"), id=raw.get("id"), version=document.get("version"),
         cancels=params.get("id") if raw.get("method") == "$/cancelRequest" else None,
         result_id=result.get("resultId"), kind=result.get("kind"), error=error.get("code"), **fields)


def _object(value: Any) -> dict:
    return value if isinstance(value, dict) else {}


def cpu_ns() -> int:
    """This thread's CPU time."""
    return time.thread_time_ns()


class _TimedWriter:
    """pygls' writer, recording each message as it is written."""

    def __init__(self, writer: Any) -> None:
        self.writer = writer

    def close(self) -> None:
        self.writer.close()

    def write(self, data: bytes) -> None:
        self.writer.write(data)
        message("written", data.partition(b"\r\n\r\n")[2])


def writer(inner: Any) -> Any:
    """``inner`` (pygls' writer), recording what it writes when the record is on."""
    return _TimedWriter(inner) if _file is not None else inner
