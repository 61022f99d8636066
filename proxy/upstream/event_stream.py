"""A long-lived GET event stream on a plain asyncio protocol: the standalone stream of a legacy session.

Every pooled session (and every parked call's) holds one standalone GET stream open for as long as it lives.
On aiohttp's client each held stream cost ~14 KB of Python objects (request, response, stream reader,
response handler, timers, a reading task's coroutine stack); this protocol reads the response with the pure
`wire.http1.ResponseReader` and feeds the body straight to an `SSEDecoder`, calling `on_event` for each
event from `data_received`: no reader task, no buffer between the socket and the decoder. The POSTs stay on
aiohttp (pooled keep-alive connections, short-lived); only a stream that lives as long as its session
comes here. The connection is never reused: it ends with the stream.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import cast

import structlog

from proxy.wire.http1 import HttpError, ResponseHead, ResponseReader, request_head, split_target
from proxy.wire.sse import DEFAULT_MAX_EVENT_BYTES, SSEDecoder, SSEError, SSEEvent

log = structlog.get_logger(__name__)

EventHandler = Callable[[SSEEvent], None]


class StreamEnded(Exception):
    """The stream ended: the connection closed, or its bytes could not be read (the reason)."""


class EventStream(asyncio.Protocol):
    """One GET and its response, as the bytes arrive. `head` resolves to the response head once it is in (to
    None if the stream ended first; `open_event_stream` drops it once it has the head); `ended` to why the
    stream ended ("" when `close()` ended it). Neither future ever holds an exception, so nothing is left
    unretrieved whoever stops waiting."""

    __slots__ = ("_decoder", "_on_event", "_reader", "_request", "_transport", "ended", "head", "paused")

    def __init__(
        self,
        request: bytes,
        on_event: EventHandler,
        loop: asyncio.AbstractEventLoop,
        max_message_bytes: int = DEFAULT_MAX_EVENT_BYTES,
    ) -> None:
        self._request = request
        self._on_event = on_event
        self._reader = ResponseReader()
        self._decoder = SSEDecoder(max_event_bytes=max_message_bytes)
        self._transport: asyncio.Transport | None = None
        self.paused = False  # reading paused (`pause`): the session owes the server too many answers
        self.head: asyncio.Future[ResponseHead | None] | None = loop.create_future()
        self.ended: asyncio.Future[str] = loop.create_future()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # A stream transport (asyncio's or uvloop's, which does not derive from asyncio.Transport).
        self._transport = cast(asyncio.Transport, transport)
        self._transport.write(self._request)
        self._request = b""

    def data_received(self, data: bytes) -> None:
        try:
            head, body = self._reader.feed(data)
            if head is not None and self.head is not None and not self.head.done():
                self.head.set_result(head)
            if body:
                for event in self._decoder.feed(body):
                    self._on_event(event)
        except SSEError as exc:
            self._end(str(exc))
        except Exception as exc:  # a bug in what handles an event: the stream cannot go on consistently
            log.exception("upstream.event_stream_failed")
            self._end(f"{type(exc).__name__} handling an event")
        else:
            if self._reader.error is not None:  # after the events that came before it
                self._end(str(self._reader.error))
            elif self._reader.done:
                self._end("the server ended the response")

    def eof_received(self) -> bool:
        return False  # close the transport: a half-closed stream carries nothing more

    def connection_lost(self, exc: Exception | None) -> None:
        self._end(f"connection lost: {exc}" if exc else "the server closed the connection")

    def pause(self) -> None:
        """Read nothing more until `resume` (the events of the bytes already read are still handled)."""
        if self._transport is not None and not self.paused:
            self.paused = True
            self._transport.pause_reading()

    def resume(self) -> None:
        if self._transport is not None and self.paused:
            self._transport.resume_reading()
        self.paused = False

    def close(self) -> None:
        """End the stream from our side."""
        self._end("")

    def _end(self, why: str) -> None:
        if self.head is not None and not self.head.done():
            self.head.set_result(None)
        if not self.ended.done():
            self.ended.set_result(why)
        if self._transport is not None:
            self._transport.close()
            self._transport = None


@dataclass(slots=True)
class StreamPosition:
    """A stream's own last event id, for Last-Event-ID when it is opened again."""

    last_id: str | None = None

    def saw(self, event_id: str) -> None:
        self.last_id = event_id


def settle(ready: asyncio.Future[None] | None) -> None:
    """Mark `ready` done (once; None or already done: nothing to do)."""
    if ready is not None and not ready.done():
        ready.set_result(None)


async def open_event_stream(
    url: str,
    headers: Mapping[str, str],
    on_event: EventHandler,
    *,
    tls: ssl.SSLContext | None,
    connect_timeout: float,
    head_timeout: float,
    max_message_bytes: int = DEFAULT_MAX_EVENT_BYTES,
) -> tuple[EventStream, ResponseHead]:
    """GET `url` with `headers` and wait for the response head. The caller closes the stream (`close()`),
    whatever its status. `tls`: the upstream's own context for https (None: the default, verifying). A line
    or event over `max_message_bytes` ends the stream (its connection closed, what was read of it dropped).
    Raises OSError or TimeoutError (no connection, or no head in time), StreamEnded (no head at all)."""
    target = split_target(url)
    if target is None:
        raise StreamEnded(f"cannot open an event stream to {url!r}")
    wanted = {"Accept-Encoding": "identity", "User-Agent": "mrtr-proxy", **headers}
    try:
        request = request_head(target.path, target.host, wanted.items())
    except HttpError as exc:
        raise StreamEnded(str(exc)) from None
    loop = asyncio.get_running_loop()
    stream = EventStream(request, on_event, loop, max_message_bytes)
    pending = stream.head
    async with asyncio.timeout(connect_timeout):
        await loop.create_connection(
            lambda: stream,
            target.hostname,
            target.port,
            ssl=(tls or True) if target.secure else None,
            server_hostname=target.hostname if target.secure else None,
        )
    try:
        async with asyncio.timeout(head_timeout):
            head = await asyncio.shield(pending) if pending is not None else None
    except BaseException:
        stream.close()
        raise
    if head is None:
        raise StreamEnded(stream.ended.result() or "the stream ended before its response head")
    stream.head = None  # the caller has the head; a stream held for hours keeps none (nor a future for it)
    return stream, head


__all__ = ["EventHandler", "EventStream", "StreamEnded", "StreamPosition", "open_event_stream", "settle"]
