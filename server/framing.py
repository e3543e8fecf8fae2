"""Reading LSP's framed messages, in front of pygls: no input from the client can kill or wedge the server.

pygls' reader trusts its input: ``Content-Length: 99999999999`` makes it allocate the body
(MemoryError, the server dies); a header section without a valid ``Content-Length`` (missing,
non-numeric, negative) or with LF-only line ends is skipped line by line, so the body that
follows is read as headers and every later message with it: the server never answers again;
a request whose params do not match its method is dropped without a reply, and the client
waits for ever.

``serve`` reads instead, with bounds: header lines of at most ``MAX_HEADER_LINE`` bytes, bodies
of at most ``MAX_MESSAGE_BYTES``. Header names are case-insensitive and lines may end in LF
alone. A frame it cannot trust is reported (stderr, which editors show in the server's log,
and ``window/logMessage``) and skipped: the reader resynchronises at the next line holding a
``Content-Length`` header. A body that is not JSON gets a parse error (id null); a request pygls
cannot read gets ``InvalidParams`` (or ``InvalidRequest``) with its own id.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import re
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, BinaryIO, Protocol

from lsprotocol import types
from pygls.exceptions import JsonRpcException, JsonRpcInvalidParams, JsonRpcInvalidRequest, JsonRpcParseError
from pygls.protocol import JsonRPCProtocol

log = logging.getLogger("trainlint.server")

MAX_MESSAGE_BYTES = 64 << 20  # a 5-million-character document (the analysis limit) fits, escaped
MAX_HEADER_LINE = 8 << 10
_CONTENT_LENGTH = re.compile(rb"content-length\s*:", re.I)


class Reader(Protocol):
    async def readline(self, limit: int) -> bytes:
        """One line with its line break; ``limit`` bytes without one if it is longer; b"" at the end."""
        ...

    async def read(self, size: int) -> bytes:
        """``size`` bytes, fewer only at the end of the input."""
        ...


class BinaryReader:
    """A blocking binary stream (stdin), read on a worker thread.

    The descriptor is put in blocking mode first: a client may hand on a pipe whose read side it
    set non-blocking (the mode belongs to the open file description, which both processes share).
    There a read returns whatever has arrived: half a header line (a header written in two
    pieces), or nothing at all, which would read as the end of the input."""

    def __init__(self, stream: BinaryIO, executor: ThreadPoolExecutor) -> None:
        self.stream = stream
        self.executor = executor
        with contextlib.suppress(AttributeError, OSError, ValueError):  # a stream without a descriptor is read as it is
            os.set_blocking(stream.fileno(), True)

    async def readline(self, limit: int) -> bytes:
        return await asyncio.get_running_loop().run_in_executor(self.executor, self.stream.readline, limit)

    async def read(self, size: int) -> bytes:
        return await asyncio.get_running_loop().run_in_executor(self.executor, self.stream.read, size)


class StreamReader:
    """An asyncio stream (a TCP connection)."""

    def __init__(self, stream: asyncio.StreamReader) -> None:
        self.stream = stream

    async def readline(self, limit: int) -> bytes:
        try:
            return await self.stream.readuntil(b"\n")
        except asyncio.IncompleteReadError as error:
            return error.partial
        except asyncio.LimitOverrunError as error:
            return await self.stream.readexactly(min(max(error.consumed, 1), limit))

    async def read(self, size: int) -> bytes:
        try:
            return await self.stream.readexactly(size)
        except asyncio.IncompleteReadError as error:
            return error.partial


class FrameError(Exception):
    pass


def content_length(headers: dict[bytes, bytes]) -> int:
    """The body's size from a header section; FrameError when it is missing, malformed or too large."""
    raw = headers.get(b"content-length")
    if raw is None:
        raise FrameError("a message without a Content-Length header")
    if not raw.isdigit():
        raise FrameError(f"a message with an invalid Content-Length: {raw[:40].decode('ascii', 'replace')!r}")
    length = int(raw)
    if length > MAX_MESSAGE_BYTES:
        raise FrameError(f"a message of {length:,} bytes (the limit is {MAX_MESSAGE_BYTES:,})")
    return length


async def serve(
    stop: threading.Event, reader: Reader, protocol: JsonRPCProtocol, report: Callable[[str], None],
) -> None:
    """Read and dispatch messages until the input ends or ``stop`` is set."""
    headers: dict[bytes, bytes] = {}
    resynchronising = False
    while not stop.is_set():
        line = await reader.readline(MAX_HEADER_LINE)
        if not line:
            return
        if resynchronising:
            found = _CONTENT_LENGTH.search(line)
            if found is None:
                continue
            line, resynchronising = line[found.start():], False
        if not line.endswith(b"\n"):
            report(f"skipped a header line longer than {MAX_HEADER_LINE:,} bytes")
            headers, resynchronising = {}, True
            continue
        text = line.rstrip(b"\r\n")
        if text:
            name, colon, value = text.partition(b":")
            if not colon or not name.strip():
                report(f"skipped input that is not an LSP header: {text[:60].decode('utf-8', 'replace')!r}")
                headers, resynchronising = {}, True
                continue
            headers[name.strip().lower()] = value.strip()
            continue
        if not headers:
            continue  # a blank line between messages
        try:
            length = content_length(headers)
        except FrameError as error:
            report(f"skipped {error}")
            headers, resynchronising = {}, True
            continue
        headers = {}
        body = await reader.read(length)
        if len(body) < length:
            return  # the input ended inside a message
        dispatch(protocol, body)


def dispatch(protocol: JsonRPCProtocol, body: bytes) -> None:
    """Hand one message to pygls; answer a request pygls cannot read with an error of its own."""
    try:
        message = json.loads(body, object_hook=protocol.structure_message)
    except Exception as error:
        _answer_unreadable(protocol, body, error)
        return
    if not hasattr(message, "jsonrpc"):  # JSON, but no JSON-RPC message: pygls would fail on it
        _answer_unreadable(protocol, body, JsonRpcInvalidRequest("not a JSON-RPC 2.0 message"))
        return
    try:
        protocol.handle_message(message)
    except Exception:  # pygls answers a request whose handler fails; this is pygls failing around it
        log.exception("could not handle a message")


def _answer_unreadable(protocol: JsonRPCProtocol, body: bytes, error: Exception) -> None:
    try:
        raw: Any = json.loads(body)
    except (ValueError, RecursionError):
        _reply(protocol, None, JsonRpcParseError("the message is not JSON"))
        log.warning("a message that is not JSON was answered with a parse error")
        return
    if not isinstance(raw, dict):
        _reply(protocol, None, JsonRpcInvalidRequest("a message must be a JSON object"))
        return
    method = raw.get("method")
    msg_id = raw.get("id")
    valid_id = isinstance(msg_id, (str, int)) and not isinstance(msg_id, bool)
    if "id" in raw and isinstance(method, str):  # a request
        if isinstance(error, JsonRpcInvalidParams) and valid_id:
            cause = error.__cause__ or error
            _reply(protocol, msg_id, JsonRpcInvalidParams(f"invalid params for {method}: {_first_line(cause)}"))
        else:
            _reply(protocol, msg_id if valid_id else None, JsonRpcInvalidRequest(f"unreadable {method} request: {_first_line(error)}"))
        log.warning("answered an unreadable %s request with an error", method)
    else:  # a notification or a response: nobody waits for an answer
        log.warning("ignored an unreadable %s: %s", f"{method} notification" if method else "message", _first_line(error))


def _reply(protocol: JsonRPCProtocol, msg_id: Any, error: JsonRpcException) -> None:
    protocol._send_response(msg_id, error=error.to_response_error())


def _first_line(error: BaseException) -> str:
    text = str(error).strip() or type(error).__name__
    return text.split("\n")[0][:200]


class _QuietProtocolNoise(logging.Filter):
    """What pygls logs that is no news to the user: each message it cannot read, with a traceback at
    ERROR (``dispatch`` reports it in one line), and each cancel of a request already answered (a
    client's cancel crosses the answer on the way: with fast analyses, once per keystroke)."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = str(record.msg)
        return not (message.startswith("Unable to deserialize message") or message.startswith("Cancel notification for unknown message id"))


logging.getLogger("pygls.protocol.json_rpc").addFilter(_QuietProtocolNoise())


def log_message(protocol: JsonRPCProtocol, message: str) -> None:
    """Tell the editor about a bad frame too: its log shows the server's stderr, and window/logMessage."""
    log.error("%s", message)
    protocol.notify(types.WINDOW_LOG_MESSAGE, types.LogMessageParams(type=types.MessageType.Error, message=f"trainlint: {message}"))
