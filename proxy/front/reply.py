"""Writes one answer to the client: a JSON body, or an SSE stream when notifications come first."""

from __future__ import annotations

import asyncio
import contextlib
import weakref
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


def status_of(answer: jsonrpc.Response) -> int:
    """The HTTP status that carries `answer` on the modern front: 404 for a method nobody serves here
    (-32601: docs/errors.md), else 200. The one place this is decided; every path of the front asks it."""
    return 404 if isinstance(answer, jsonrpc.Error) and answer.error.code == jsonrpc.METHOD_NOT_FOUND else 200


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
    # Nothing of it is the client's yet: the mirror writes what it is handed. A request found to need
    # another job (front/plan.py) is planned again, as over HTTP before the SSE stream began.
    written = False

    def __init__(self, send: Callable[[jsonrpc.Notification], Awaitable[None]]) -> None:
        self._send = send

    async def notify(self, note: jsonrpc.Notification) -> None:
        await self._send(note)

    async def kept_alive(self, work: Awaitable[T], interval: float) -> T:
        """`work`'s result: the mirror keeps its own client's stream alive (mirror/calls.py)."""
        return await work


class Replier:
    """Streams request-related notifications when the client accepts SSE; the final answer ends it."""

    def __init__(self, request: web.Request) -> None:
        self._request = request
        self._json, self._sse = wants(request)
        self._stream: web.StreamResponse | None = None
        self._writing: asyncio.Task[None] | None = None  # a keep-alive comment being written

    def adopt(self, stream: web.StreamResponse) -> None:
        """Go on with an SSE stream already started for this request (a relayed answer that was cut off)."""
        if self._stream is None:
            self._stream = stream

    @property
    def started(self) -> bool:
        """An SSE stream was started: the status (200) is sent and can no longer change."""
        return self._stream is not None

    @property
    def written(self) -> bool:
        """Something of the answer reached the client (its stream began): the request cannot change job."""
        return self._stream is not None

    async def notify(self, note: jsonrpc.Notification) -> None:
        if not self._sse:
            return  # a JSON-only client cannot receive notifications before the result
        if self._stream is None:
            self._stream = web.StreamResponse(status=200, headers=SSE_HEADERS)
            await self._stream.prepare(self._request)
        await self._stream.write(encode_event(jsonrpc.dumps(note).decode()))

    async def kept_alive(self, work: Awaitable[T], interval: float) -> T:
        """Await `work`, writing a keep-alive comment about every `interval` seconds (0: none) while it runs.

        No timer of its own: one ticker per interval serves every request in flight (`_Ticker`), as most
        requests finish long before their first comment is due, and a timer each (its handle, its place in
        the loop's heap, its cancellation) cost every request more than the ticker does."""
        if interval <= 0:
            return await work
        ticker = _ticker(interval)
        ticker.enter(self)
        try:
            return await work  # cancelled with the handler if the client goes away: so is the call
        finally:
            ticker.due.pop(self, None)
            if self._writing is not None:
                with contextlib.suppress(Exception):
                    await self._writing
                self._writing = None  # nothing of the request outlives it as cyclic garbage (mem31's test)

    def _keep_alive(self) -> None:
        """A tick found this request due for a comment: written by a task (awaited before the answer)."""
        if self._writing is None or self._writing.done():
            self._writing = asyncio.get_running_loop().create_task(self.keepalive())

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


# A request's first keep-alive comment is due this many ticks after it began, then every _EVERY ticks; a tick
# is interval / _EVERY, so the first comes between 1 and 1.25 intervals after the request began.
_EVERY = 4
_FIRST = _EVERY + 1


class _Ticker:
    """Keep-alive comments for every request in flight at one interval, from one timer that runs only while
    some request is registered (`due`: the tick each is next due at). A request is in `due` only while its
    work runs, and no closure refers to it, so it is freed by reference counting as soon as it is done."""

    def __init__(self, loop: asyncio.AbstractEventLoop, interval: float) -> None:
        self.loop = loop
        self.interval = interval
        self._step = interval / _EVERY
        self.due: dict[Replier, int] = {}
        self.ticks = 0
        self._timer: asyncio.TimerHandle | None = None

    def enter(self, replier: Replier) -> None:
        self.due[replier] = self.ticks + _FIRST
        if self._timer is None:
            self._timer = self.loop.call_later(self._step, self._tick)

    def _tick(self) -> None:
        self.ticks += 1
        for replier, due in list(self.due.items()):
            if due <= self.ticks:
                self.due[replier] = self.ticks + _EVERY
                replier._keep_alive()
        self._timer = self.loop.call_later(self._step, self._tick) if self.due else None


_TICKERS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[float, _Ticker]] = (
    weakref.WeakKeyDictionary()
)
_LAST: list[_Ticker | None] = [None]  # the one every request of a proxy finds: no weak dict look-up


def _ticker(interval: float) -> _Ticker:
    loop = asyncio.get_running_loop()
    ticker = _LAST[0]
    if ticker is not None and ticker.loop is loop and ticker.interval == interval:
        return ticker
    tickers = _TICKERS.setdefault(loop, {})
    ticker = tickers.get(interval)
    if ticker is None:
        ticker = tickers[interval] = _Ticker(loop, interval)
    _LAST[0] = ticker
    return ticker
