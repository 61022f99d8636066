"""The answers a session gives the upstream by itself: to a server request that arrives with no call to ask
(router.py's `NoCallAnswer`), and the refusals of requests past what a call may hold (`MAX_QUEUED`).

Sent a few at a time (`MAX_SENDING`), each within `SEND_WITHIN`, in order of arrival: a server that sends
thousands of requests gets its answers in turn, never thousands of POSTs at once. While `MAX_QUEUED` answers
are owed, the transport stops reading from the upstream (`room()`; its TCP window or pipe then pushes back
on the server) until they are sent; what one read already holds still gets its answers, up to twice
`MAX_QUEUED`, and anything past that is dropped (logged once per session).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, Final

import structlog

from proxy.upstream.base import UpstreamError
from proxy.upstream.router import MAX_QUEUED
from proxy.wire import jsonrpc

log = structlog.get_logger(__name__)

MAX_SENDING: Final = 8
SEND_WITHIN: Final = 10.0

Send = Callable[[jsonrpc.Response], Awaitable[None]]
Spawn = Callable[[Coroutine[Any, Any, None]], "asyncio.Task[None]"]


class AnswerQueue:
    __slots__ = ("_dropped", "_name", "_owed", "_room", "_send", "_senders", "_spawn")

    def __init__(self, send: Send, spawn: Spawn, name: Callable[[], str | None]) -> None:
        self._send = send
        self._spawn = spawn
        self._name = name  # the session's id, for the log
        self._owed: deque[jsonrpc.Response] | None = None  # made at the first answer (a deque is ~600 bytes)
        self._senders = 0
        self._room: asyncio.Event | None = None  # set once fewer than MAX_QUEUED are owed again
        self._dropped = False

    @property
    def backlogged(self) -> bool:
        """Are MAX_QUEUED answers owed? Then the transport reads nothing more until `room()`."""
        return self._owed is not None and len(self._owed) >= MAX_QUEUED

    async def room(self) -> None:
        """Wait while the session is backlogged (each answer is sent within SEND_WITHIN, so this ends)."""
        while self.backlogged:
            if self._room is None:
                self._room = asyncio.Event()
            await self._room.wait()

    def put(self, reply: jsonrpc.Response) -> None:
        if self._owed is None:
            self._owed = deque()
        if len(self._owed) >= 2 * MAX_QUEUED:
            if not self._dropped:
                self._dropped = True
                log.warning("upstream.answers_dropped", session=self._name(), limit=2 * MAX_QUEUED)
            return
        self._owed.append(reply)
        if self._senders < MAX_SENDING:
            self._senders += 1
            self._spawn(self._send_owed(self._owed))

    async def _send_owed(self, owed: deque[jsonrpc.Response]) -> None:
        try:
            while owed:
                reply = owed.popleft()
                if self._room is not None and not self.backlogged:
                    self._room.set()
                    self._room = None
                with contextlib.suppress(UpstreamError, TimeoutError):
                    async with asyncio.timeout(SEND_WITHIN):
                        await self._send(reply)
        finally:
            self._senders -= 1


__all__ = ["MAX_SENDING", "SEND_WITHIN", "AnswerQueue"]
