"""Noticing at once that a client hung up, without looking every so often.

aiohttp tells a handler that its client went away in two ways only: by cancelling its task (with
`handler_cancellation`, as `mrtr-proxy serve` runs it) or by failing its next write. A mirrored call may
wait minutes with nothing to write (its client answering an inline request, its upstream working), and an
app run by another runner is not cancelled, so the call watches the connection itself: while it waits, the
connection's protocol is wrapped by one that resolves a future when the connection is lost and hands every
callback on unchanged (asyncio's public `Transport.set_protocol`); when the wait is over the wrapping is
undone, so the keep-alive connection goes on as it was. No task, no timer.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from typing import cast

from aiohttp import web


class _Watch(asyncio.Protocol):
    """aiohttp's protocol (or the listener guard's wrapper of it), told everything as before."""

    def __init__(self, inner: asyncio.Protocol, lost: asyncio.Future[None]) -> None:
        self._inner = inner
        self._lost = lost

    def data_received(self, data: bytes) -> None:
        self._inner.data_received(data)

    def eof_received(self) -> bool | None:
        return self._inner.eof_received()

    def connection_lost(self, exc: Exception | None) -> None:
        if not self._lost.done():
            self._lost.set_result(None)
        self._inner.connection_lost(exc)

    def pause_writing(self) -> None:
        self._inner.pause_writing()

    def resume_writing(self) -> None:
        self._inner.resume_writing()


@contextmanager
def hangup(request: web.BaseRequest) -> Iterator[asyncio.Future[None]]:
    """A future done as soon as `request`'s connection is lost (at once if it already is), for the
    duration of the `with`."""
    lost: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    transport = request.transport
    if transport is None or transport.is_closing():
        lost.set_result(None)
        yield lost
        return
    inner = cast(asyncio.Protocol, transport.get_protocol())
    watch = _Watch(inner, lost)
    transport.set_protocol(watch)
    try:
        yield lost
    finally:
        if transport.get_protocol() is watch:
            transport.set_protocol(inner)
        if not lost.done():
            lost.cancel()
