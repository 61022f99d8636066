"""Writes one answer to the client: a JSON body, or an SSE stream when notifications come first."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import Protocol, TypeVar

from aiohttp import web

from proxy.wire import jsonrpc
from proxy.wire.sse import encode_comment, encode_event

T = TypeVar("T")

SSE_HEADERS = {"Content-Type": "text/event-stream", "Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


def wants(request: web.Request) -> tuple[bool, bool]:
    """(accepts JSON, accepts SSE) from the Accept header; a missing header accepts both."""
    accept = request.headers.get("Accept", "")
    if not accept.strip() or "*/*" in accept:
        return True, True
    return "application/json" in accept, "text/event-stream" in accept


def json_response(msg: jsonrpc.Message | None, status: int = 200) -> web.Response:
    if msg is None:
        return web.Response(status=status)
    return web.Response(status=status, body=jsonrpc.dumps(msg), content_type="application/json")


class Notes(Protocol):
    """Where a request's notifications go while it runs (a Replier, or InProcess for the proxy's own)."""

    @property
    def started(self) -> bool: ...

    async def notify(self, note: jsonrpc.Notification) -> None: ...


class InProcess:
    """The notifications of a request the proxy makes of itself (front/modern/inner.py), to a callback.
    There is no HTTP status to give: an answer's refusal is a JSON-RPC error, as on a begun stream."""

    started = True

    def __init__(self, send: Callable[[jsonrpc.Notification], Awaitable[None]]) -> None:
        self._send = send

    async def notify(self, note: jsonrpc.Notification) -> None:
        await self._send(note)


class Replier:
    """Streams request-related notifications when the client accepts SSE; the final answer ends it."""

    def __init__(self, request: web.Request) -> None:
        self._request = request
        self._json, self._sse = wants(request)
        self._stream: web.StreamResponse | None = None
        self._ticks: asyncio.TimerHandle | None = None  # kept_alive's next keep-alive
        self._writes: set[asyncio.Task[None]] | None = None  # its keep-alive writes under way (from a tick)

    def adopt(self, stream: web.StreamResponse) -> None:
        """Go on with an SSE stream already started for this request (a relayed answer that was cut off)."""
        if self._stream is None:
            self._stream = stream

    @property
    def started(self) -> bool:
        """An SSE stream was started: the status (200) is sent and can no longer change."""
        return self._stream is not None

    async def notify(self, note: jsonrpc.Notification) -> None:
        if not self._sse:
            return  # a JSON-only client cannot receive notifications before the result
        if self._stream is None:
            self._stream = web.StreamResponse(status=200, headers=SSE_HEADERS)
            await self._stream.prepare(self._request)
        await self._stream.write(encode_event(jsonrpc.dumps(note).decode()))

    async def kept_alive(self, work: Awaitable[T], interval: float) -> T:
        """Await `work`, writing a keep-alive comment every `interval` seconds (0: none) while it runs.

        A timer, not a task: most requests finish long before the first tick, and this runs for each one
        (so nothing else is made for it until the first tick). Its callback is a bound method, never a
        closure that re-arms itself: such a closure refers to itself through its own cell, a cycle that kept
        the replier and its whole request (~5 KB) until the collector's next full pass; a cancelled timer
        drops its callback, so nothing here outlives the request."""
        if interval <= 0:
            return await work
        loop = asyncio.get_running_loop()
        self._ticks = loop.call_later(interval, self._tick, interval)
        try:
            return await work  # cancelled with the handler if the client goes away: so is the call
        finally:
            if self._ticks is not None:
                self._ticks.cancel()  # a cancelled timer lets go of its callback (this replier's method)
                self._ticks = None
            if self._writes:
                for write in list(self._writes):
                    with contextlib.suppress(Exception):
                        await write

    def _tick(self, interval: float) -> None:
        loop = asyncio.get_running_loop()
        if self._writes is None:
            self._writes = set()
        write = loop.create_task(self.keepalive())
        self._writes.add(write)
        write.add_done_callback(self._writes.discard)
        self._ticks = loop.call_later(interval, self._tick, interval)

    async def keepalive(self) -> None:
        """A comment line on the SSE stream (started now if need be), so idle intermediaries keep it open.
        A JSON-only client gets nothing: its answer comes in one piece."""
        if not self._sse:
            return
        if self._stream is None:
            self._stream = web.StreamResponse(status=200, headers=SSE_HEADERS)
            await self._stream.prepare(self._request)
        await self._stream.write(encode_comment(" keep-alive"))

    async def finish(self, msg: jsonrpc.Message, status: int = 200) -> web.StreamResponse:
        if self._stream is None and (self._json or status != 200):
            return json_response(msg, status)
        if self._stream is None:
            self._stream = web.StreamResponse(status=status, headers=SSE_HEADERS)
            await self._stream.prepare(self._request)
        await self._stream.write(encode_event(jsonrpc.dumps(msg).decode()))
        await self._stream.write_eof()
        return self._stream
