"""One pooled HTTP/1.1 connection of the lean client (lean_http.py) and the response it carries.

`Connection` is a plain asyncio protocol: no reader task, no stream object between the socket and the
response. While it carries a response, every byte goes to that response's `ResponseReader` (llhttp:
wire/http1.py), and the body's bytes to the response's buffer, which `readany` empties; past `HIGH_WATER`
buffered bytes the connection stops reading until the consumer has drained them (a parked call's SSE answer
stays open for minutes, its consumer waiting on the call's client). While idle in the pool, any byte from the
server, or its close, drops the connection at once: nothing was asked for.

A connection goes back to the pool only from `LeanResponse._done`: the response was read to its end, its
framing allowed another request (keep-alive, length or chunks, not a byte after it) and the connection is
still open. A response closed or released before its end (its consumer cancelled, a body too large) closes
its connection: what was left of it on the wire must never be read as the next request's answer.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Callable, Iterator, Mapping
from typing import cast

import aiohttp

from proxy.wire.http1 import ResponseHead, ResponseReader

HIGH_WATER = 256 * 1024  # body bytes buffered before the connection stops reading
PoolKey = tuple[str, ssl.SSLContext | None]  # scheme://host:port, and the SSL context (None: the default)


class LeanHttpError(aiohttp.ClientError):
    """A lean POST failed after its connection was made: the request may have reached the server. (An
    aiohttp.ClientError, so the transports' existing handlers word it as they word aiohttp's.)"""


class ServerDisconnected(LeanHttpError):
    """The server closed the connection, or it broke, before the response ended."""


class ResponseUnreadable(LeanHttpError):
    """The response's bytes cannot be read as HTTP/1.1 (llhttp's reason, or a bound of wire/http1.py)."""


class ResponseClosed(LeanHttpError):
    """Read after the response was closed (or released) before its end."""


class Headers(Mapping[str, str]):
    """A response's header fields, looked up without regard to case (a repeated field's values joined)."""

    __slots__ = ("_fields",)

    def __init__(self, fields: dict[str, str]) -> None:
        self._fields = fields  # names lowercased (ResponseHead)

    def __getitem__(self, name: str) -> str:
        return self._fields[name.lower()]

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name.lower() in self._fields

    def get(self, name: str, default: str | None = None) -> str | None:  # type: ignore[override]
        return self._fields.get(name.lower(), default)

    def __iter__(self) -> Iterator[str]:
        return iter(self._fields)

    def __len__(self) -> int:
        return len(self._fields)


class Connection(asyncio.Protocol):
    """One keep-alive connection to an upstream origin (see the module docstring). `on_gone` is told once,
    when the connection closes, so that the pool forgets it."""

    __slots__ = ("_on_gone", "idle_since", "key", "loop", "response", "transport")

    def __init__(self, key: PoolKey, on_gone: Callable[[Connection], None]) -> None:
        self.key = key
        self._on_gone = on_gone
        # Made inside the loop that connects it, and used only there: held, because each
        # asyncio.get_running_loop() is a getpid(2) (CPython's fork check), several per request otherwise.
        self.loop = asyncio.get_running_loop()
        self.transport: asyncio.Transport | None = None  # None once closed
        self.response: LeanResponse | None = None  # the response it carries; None while idle
        self.idle_since = 0.0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's does not derive from it

    @property
    def open(self) -> bool:
        return self.transport is not None and not self.transport.is_closing()

    def data_received(self, data: bytes) -> None:
        if self.response is None:  # idle: the server sent what nobody asked for
            self.close()
        else:
            self.response._data(data)

    def eof_received(self) -> bool:
        return False  # a half-closed connection carries nothing more: close it (`connection_lost` follows)

    def connection_lost(self, exc: Exception | None) -> None:
        self._gone()
        response, self.response = self.response, None
        if response is not None:
            response._lost(exc)

    def close(self) -> None:
        """Drop the connection (the response it carries, if any, ends with an error)."""
        transport = self.transport
        self._gone()
        if transport is not None:
            transport.close()

    def _gone(self) -> None:
        if self.transport is not None:
            self.transport = None
            self._on_gone(self)


class LeanResponse:
    """An upstream's response to a lean POST (satisfies response.UpstreamResponse; `content` is itself)."""

    __slots__ = (
        "_buffered",
        "_chunks",
        "_conn",
        "_eof",
        "_error",
        "_give_back",
        "_loop",
        "_paused",
        "_reader",
        "_waiter",
        "_watcher",
        "headers",
        "status",
    )

    def __init__(self, conn: Connection, give_back: Callable[[Connection], None], max_head: int) -> None:
        self._conn: Connection | None = conn  # None once the response no longer holds its connection
        self._loop = conn.loop
        self._give_back = give_back
        self._reader = ResponseReader(max_head=max_head)
        self._chunks: list[bytes] = []
        self._buffered = 0
        self._eof = False  # the body ended (what is buffered is all that is left)
        self._error: BaseException | None = None  # why the body cannot be read on (after what is buffered)
        self._paused = False
        self._waiter: asyncio.Future[None] | None = None
        self._watcher: Callable[[], None] | None = None  # told of every change instead (`watch`)
        self.status = 0  # 0 until the head is in
        self.headers = Headers({})

    # -- what the transports read (response.UpstreamResponse) -----------------------------------------------

    @property
    def content(self) -> LeanResponse:
        return self

    @property
    def content_type(self) -> str:
        value = self.headers.get("content-type") or "application/octet-stream"
        return value.partition(";")[0].strip().lower()

    @property
    def content_length(self) -> int | None:
        value = self.headers.get("content-length")
        return int(value) if value is not None else None  # llhttp accepted it: digits only

    def at_eof(self) -> bool:
        return self._eof and not self._chunks

    async def readany(self) -> bytes:
        while not self._chunks:
            if self._error is not None:
                raise self._error
            if self._eof:
                return b""
            await self._wait()
        return self.take()

    # -- read by callbacks, without a task waiting (upstream/call_reply.py) ---------------------------------

    def watch(self, watcher: Callable[[], None] | None) -> None:
        """Call `watcher` (from the connection's callbacks) whenever the head, body bytes, the body's end or
        an error came in, or the response was closed; None: stop."""
        self._watcher = watcher

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """The loop its connection reads in (held: no `get_running_loop`, see `Connection`)."""
        return self._loop

    @property
    def head_pending(self) -> bool:
        """No head yet, and one may still come."""
        return self._pending

    @property
    def error(self) -> BaseException | None:
        """Why the body (or the head) cannot be read on, after what is buffered; None: it can."""
        return self._error

    @property
    def ended(self) -> bool:
        """The whole body is in (what is buffered is all there is)."""
        return self._eof

    def take(self) -> bytes:
        """What is buffered of the body (b"": nothing now), as `readany` returns it."""
        chunks = self._chunks
        if not chunks:
            return b""
        data = chunks[0] if len(chunks) == 1 else b"".join(chunks)
        chunks.clear()
        self._buffered = 0
        if self._paused:
            self._paused = False
            if self._conn is not None and self._conn.transport is not None:
                self._conn.transport.resume_reading()
        return data

    async def read(self, n: int = -1) -> bytes:
        """Up to `n` bytes of the body (all of it with n < 0; b"" at its end)."""
        if n < 0:
            parts = []
            while chunk := await self.readany():
                parts.append(chunk)
            return b"".join(parts)
        data = await self.readany()
        if len(data) > n:
            self._chunks.insert(0, data[n:])
            self._buffered = len(data) - n
            data = data[:n]
        return data

    def close(self) -> None:
        """Drop the connection unless the response ended (then it is back in the pool already)."""
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.response = None
            conn.close()
            if self._error is None and not self._eof:
                self._error = ResponseClosed("the response was closed before its end")
        self._wake()

    def release(self) -> None:
        self.close()

    async def wait_for_close(self) -> None:
        return None  # closing is immediate

    # -- what the connection feeds ---------------------------------------------------------------------------

    def _data(self, data: bytes) -> None:
        reader = self._reader
        head, body = reader.feed(data)
        if head is not None:
            self._head(head)
        if body:
            self._chunks.append(body)
            self._buffered += len(body)
            conn = self._conn
            if self._buffered > HIGH_WATER and not self._paused and conn is not None and conn.transport:
                self._paused = True
                conn.transport.pause_reading()
        if reader.error is not None:
            self._fail(ResponseUnreadable(str(reader.error)))
        elif reader.done:
            self._done()
        self._wake()

    def _head(self, head: ResponseHead) -> None:
        self.status, self.headers = head.status, Headers(head.headers)

    def _done(self) -> None:
        self._eof = True
        conn, self._conn = self._conn, None
        if conn is None:
            return
        conn.response = None
        if not (self._reader.reusable and conn.open):
            conn.close()
            return
        if self._paused:  # (paused in this same read) an idle connection reads: a byte from it drops it
            self._paused = False
            assert conn.transport is not None
            conn.transport.resume_reading()
        self._give_back(conn)

    def _lost(self, exc: Exception | None) -> None:
        """The connection closed under the response (`Connection.connection_lost`)."""
        self._conn = None
        self._reader.end()
        if self._reader.done:  # a body that runs until the close
            self._eof = True
        elif (
            self._error is None
        ):  # e.g. "Server disconnected (the connection closed before the end of the body)"
            why = f"{exc or 'Server disconnected'} ({self._reader.error})"
            self._error = ServerDisconnected(why)
        self._wake()

    def _fail(self, error: BaseException) -> None:
        if self._error is None:
            self._error = error
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.response = None
            conn.close()

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)
        if self._watcher is not None:
            self._watcher()

    async def _wait(self) -> None:
        self._waiter = self._loop.create_future()
        try:
            await self._waiter
        finally:
            self._waiter = None

    @property
    def _pending(self) -> bool:
        """No head yet, and none can come."""
        return self.status == 0 and self._error is None and not self._eof

    async def _until_head(self) -> None:
        while self._pending:
            await self._wait()
        if self.status == 0:
            raise self._error or ServerDisconnected("Server disconnected before the response head")


__all__ = [
    "HIGH_WATER",
    "Connection",
    "Headers",
    "LeanHttpError",
    "LeanResponse",
    "PoolKey",
    "ResponseClosed",
    "ResponseUnreadable",
    "ServerDisconnected",
]
