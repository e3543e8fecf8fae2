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
``Content-Length`` header. A body that is not JSON gets a parse error (id null); a request that
is not JSON-RPC 2.0 gets ``InvalidRequest`` (``_well_formed``), as does one that may not come at
this point of LSP's lifecycle (``Lifecycle``); a request pygls cannot read gets ``InvalidParams``
(or ``InvalidRequest``) with its own id.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import re
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, BinaryIO, Protocol, get_args

from lsprotocol import types
from pygls.exceptions import (
    JsonRpcException,
    JsonRpcInvalidParams,
    JsonRpcInvalidRequest,
    JsonRpcParseError,
    JsonRpcServerNotInitialized,
)
from pygls.protocol import JsonRPCProtocol

from . import timeline

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
    pieces), or nothing at all, which would read as the end of the input.

    Each trip to the worker thread takes whatever has arrived (``read1``), and lines and bodies are
    cut from that here: a message, and the messages written right behind it (Neovim writes a change,
    the cancel of the last pull and a new pull at each key), take one trip, not three each (a header
    line, the blank line, the body). Each trip is a hand-over of the interpreter between this loop's
    thread and the reading one, which waited for the analysis thread under load: 4 ms from Neovim's
    write to the body read, median, and 12–90 ms at the 95th percentile and worst, in Neovim with two
    busy processes on two cores (``benchmarks/nvim_typing.py --timeline``)."""

    CHUNK = 1 << 16

    def __init__(self, stream: BinaryIO, executor: ThreadPoolExecutor) -> None:
        self.stream = stream
        self.executor = executor
        self.buffer = bytearray()
        self.ended = False
        self.read_at = 0  # when the bytes of the last body read arrived, on the reading thread (``timeline``)
        self._arrived = 0
        with contextlib.suppress(AttributeError, OSError, ValueError):  # a stream without a descriptor is read as it is
            os.set_blocking(stream.fileno(), True)

    async def readline(self, limit: int) -> bytes:
        while True:
            end = self.buffer.find(b"\n", 0, limit)
            if end >= 0 or len(self.buffer) >= limit or self.ended:
                size = end + 1 if end >= 0 else min(limit, len(self.buffer))
                line = bytes(self.buffer[:size])
                del self.buffer[:size]
                return line
            await self._fill(self.CHUNK)

    async def read(self, size: int) -> bytes:
        while len(self.buffer) < size and not self.ended:
            await self._fill(max(self.CHUNK, size - len(self.buffer)))
        data = bytes(self.buffer[:size])
        del self.buffer[:size]
        self.read_at = self._arrived
        return data

    async def _fill(self, size: int) -> None:
        """Wait for more input: whatever has arrived, at most ``size`` bytes."""
        data = await asyncio.get_running_loop().run_in_executor(self.executor, self._read, size)
        if not data:
            self.ended = True
        self.buffer += data

    def _read(self, size: int) -> bytes:
        read1 = getattr(self.stream, "read1", None)
        data = read1(size) if read1 is not None else self.stream.read(size)
        self._arrived = time.monotonic_ns()
        return data


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
    lifecycle = Lifecycle()
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
        timeline.message("read", body, arrived=getattr(reader, "read_at", None))
        dispatch(protocol, body, lifecycle)
        # The request's handler starts before the next message is handed on, though both came in one
        # read: a pull cancelled right behind it is then cancelled while it waits, and answered
        # ServerCancelled with retriggerRequest, not cancelled before it began (RequestCancelled,
        # which Neovim drops without pulling again).
        await asyncio.sleep(0)


class Lifecycle:
    """Where the connection is in LSP's lifecycle, which decides what a message may do there.

    pygls answered a request before ``initialize`` with an internal error (its workspace did not
    exist yet), ran a second ``initialize`` (a new, empty workspace: every open document was
    forgotten, and a pull of one then failed looking for its text on disk), and after ``shutdown``
    dropped every request without a reply. LSP: before ``initialize`` a request gets
    ServerNotInitialized and a notification is dropped; ``initialize`` comes once; after
    ``shutdown`` a request gets InvalidRequest; ``exit`` (a notification) is obeyed whenever it
    comes."""

    def __init__(self) -> None:
        self.initialized = False  # an ``initialize`` request was read and handed to pygls

    def request_refusal(self, method: str, shut_down: bool) -> JsonRpcException | None:
        """The error for a request that may not come now; None when it may be handled."""
        if shut_down:
            return JsonRpcInvalidRequest(f"the server is shut down: {method} after shutdown (only exit is expected)")
        if method == types.INITIALIZE:
            return JsonRpcInvalidRequest("initialize was already received: it may be sent only once") if self.initialized else None
        if not self.initialized:
            return JsonRpcServerNotInitialized(f"the server is not initialized: {method} before initialize")
        return None

    def drops_notification(self, method: str, shut_down: bool) -> bool:
        return method != types.EXIT and (shut_down or not self.initialized)


def dispatch(protocol: JsonRPCProtocol, body: bytes, lifecycle: Lifecycle) -> None:
    """Hand one message to pygls; answer a request pygls cannot read, or that may not come now,
    with an error of its own."""
    try:
        raw: Any = json.loads(body)
    except (ValueError, RecursionError):
        _reply(protocol, None, JsonRpcParseError("the message is not JSON"))
        log.warning("a message that is not JSON was answered with a parse error")
        return
    if not _well_formed(protocol, raw):
        return
    method = raw.get("method")
    if method is not None and "id" in raw:
        refusal = lifecycle.request_refusal(method, protocol._shutdown)
        if refusal is not None:
            _reply(protocol, raw["id"], refusal)
            log.warning("answered %s with an error: %s", method, refusal.message)
            return
    elif method is not None and lifecycle.drops_notification(method, protocol._shutdown):
        log.warning("ignored a %s notification out of order (before initialize or after shutdown)", method)
        return
    if method is not None:
        raw.setdefault("params", None)  # optional in JSON-RPC; pygls' fallback for unknown methods requires it
    try:
        message: Any = protocol.structure_message(raw)  # pygls types it wider than handle_message takes
    except Exception as error:
        _answer_unreadable(protocol, raw, error)
        return
    if method == types.INITIALIZE:
        lifecycle.initialized = True
    try:
        protocol.handle_message(message)
    except Exception:  # pygls answers a request whose handler fails; this is pygls failing around it
        log.exception("could not handle a message")


def _well_formed(protocol: JsonRPCProtocol, raw: Any) -> bool:
    """Whether a message is a JSON-RPC 2.0 request, notification or response pygls can be handed.

    pygls drops a message whose ``jsonrpc`` is not "2.0" without a word, answers a request whose
    ``method`` is not a string, or whose id is a list or an object, with an internal error (its
    traceback included), runs a request whose id is ``true``, and runs a request for a
    notification's method (``textDocument/didOpen`` with an id) as that notification, unanswered.
    Each such request gets Invalid Request instead, with its id where the id is one (an integer or
    a string, as LSP has it), else null as JSON-RPC 2.0 says. A broken notification or response
    is only logged: nobody waits for an answer to it, and an error with a response's id would
    settle a request of the client's."""
    if not isinstance(raw, dict):
        _reply(protocol, None, JsonRpcInvalidRequest("a message must be a JSON object"))
        return False
    msg_id, method = raw.get("id"), raw.get("method")
    usable_id = _usable_id(msg_id)
    if "method" in raw and "id" in raw:  # a request
        problem = _version_problem(raw) or _request_problem(msg_id, method)
        if problem is not None:
            _reply(protocol, msg_id if usable_id else None, JsonRpcInvalidRequest(f"invalid request: {problem}"))
            log.warning("answered an invalid request with an error: %s", problem)
        return problem is None
    if "method" in raw:  # a notification
        problem = _version_problem(raw) or (None if isinstance(method, str) else f"its method is {_json_kind(method)}, not a string")
        if problem is not None:
            log.warning("ignored an invalid notification: %s", problem)
        return problem is None
    if "id" in raw and ("result" in raw or "error" in raw):  # a response to one of the server's requests
        problem = _version_problem(raw) or (None if usable_id else f"its id is {_json_kind(msg_id)}")
        if problem is not None:
            log.warning("ignored an invalid response: %s", problem)
        return problem is None
    if "id" in raw:  # a response without a result: answering with its id would settle a request of the client's
        log.warning("ignored a response without a result or an error")
        return False
    _reply(protocol, None, JsonRpcInvalidRequest("invalid request: neither a request, a notification nor a response"))
    log.warning("answered a message without a method or an id with an error")
    return False


# LSP's notifications: pygls runs a request for one of these (``textDocument/didOpen`` with an id)
# as the notification, and never answers it (the notification's type has no id).
_NOTIFICATIONS = frozenset(method for method, kinds in types.METHOD_TO_TYPES.items() if kinds[0] in get_args(types.NOTIFICATIONS))


def _request_problem(msg_id: Any, method: Any) -> str | None:
    """What makes a JSON-RPC 2.0 request no LSP request, if anything."""
    if not _usable_id(msg_id):
        return f"its id is {_json_kind(msg_id)}; an id is an integer or a string"
    if not isinstance(method, str):
        return f"its method is {_json_kind(method)}, not a string"
    if method in _NOTIFICATIONS:
        return f"{method} is a notification, sent without an id"
    return None


def _usable_id(msg_id: Any) -> bool:
    return isinstance(msg_id, (str, int)) and not isinstance(msg_id, bool)


def _version_problem(raw: dict[str, Any]) -> str | None:
    version = raw.get("jsonrpc")
    if version == "2.0":
        return None
    return "it has no \"jsonrpc\" member" if "jsonrpc" not in raw else f"its jsonrpc is {_json_kind(version)}, not \"2.0\""


def _json_kind(value: Any) -> str:
    """A JSON value as a message names it: a short one quoted, else its type."""
    if isinstance(value, (str, int, float)) and not isinstance(value, bool) and len(json.dumps(value)) <= 20:
        return json.dumps(value)
    kinds = {bool: "a boolean", type(None): "null", str: "a long string", int: "a number", float: "a number", list: "a list", dict: "an object"}
    return kinds.get(type(value), "not JSON")


def _answer_unreadable(protocol: JsonRPCProtocol, raw: dict[str, Any], error: Exception) -> None:
    """A well-formed message whose params (or result) pygls cannot read into its method's types."""
    method, msg_id = raw.get("method"), raw.get("id")
    if method is not None and msg_id is not None:  # a request (``_well_formed`` checked both)
        if isinstance(error, JsonRpcInvalidParams):
            cause = error.__cause__ or error
            _reply(protocol, msg_id, JsonRpcInvalidParams(f"invalid params for {method}: {_first_line(cause)}"))
        else:
            _reply(protocol, msg_id, JsonRpcInvalidRequest(f"unreadable {method} request: {_first_line(error)}"))
        log.warning("answered an unreadable %s request with an error", method)
    else:  # a notification or a response: nobody waits for an answer
        log.warning("ignored an unreadable %s: %s", f"{method} notification" if method else "message", _first_line(error))


def _reply(protocol: JsonRPCProtocol, msg_id: Any, error: JsonRpcException) -> None:
    """An error response; with ``"id": null`` where the id is unknown (pygls' own message types
    leave a null id out, and a response without an id is no response to JSON-RPC 2.0 or its clients)."""
    protocol._send_data({"jsonrpc": "2.0", "id": msg_id, "error": protocol._converter.unstructure(error.to_response_error())})


def _first_line(error: BaseException) -> str:
    text = str(error).strip() or type(error).__name__
    return text.split("\n")[0][:200]


class _QuietProtocolNoise(logging.Filter):
    """What pygls logs that is no news to the user: each message it cannot read, with a traceback at
    ERROR (``dispatch`` reports it in one line), and each cancel of a request already answered (a
    client's cancel crosses the answer on the way: with fast analyses, once per keystroke), and
    each pull answered ``ServerCancelled`` after the client cancelled it."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = str(record.msg)
        if record.exc_info and getattr(record.exc_info[1], "code", None) == types.LSPErrorCodes.ServerCancelled:
            return False  # a pull the client cancelled, answered so that it pulls again (``diagnostics``)
        return not (message.startswith("Unable to deserialize message") or message.startswith("Cancel notification for unknown message id"))


logging.getLogger("pygls.protocol.json_rpc").addFilter(_QuietProtocolNoise())


def log_message(protocol: JsonRPCProtocol, message: str) -> None:
    """Tell the editor about a bad frame too: its log shows the server's stderr, and window/logMessage."""
    log.error("%s", message)
    protocol.notify(types.WINDOW_LOG_MESSAGE, types.LogMessageParams(type=types.MessageType.Error, message=f"trainlint: {message}"))
