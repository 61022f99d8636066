"""One bridged legacy client's session (bridge/front.py): its upstream session, its call in flight,
and what waits for its GET stream; plus the bridge's settings."""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import time
from collections import deque
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Any, Protocol

from proxy.config import Config, UpstreamConfig
from proxy.upstream.base import Inbox, UpstreamError, UpstreamSession
from proxy.upstream.router import NoCallAnswer
from proxy.wire import jsonrpc

TICK = 1.0  # how often waits look at cancellation, shutdown and the upstream session


class RuntimeStateView(Protocol):
    @property
    def draining(self) -> bool: ...


@dataclass(frozen=True, slots=True)
class BridgeSettings:
    call_timeout: float = 300.0  # calls.call_timeout_s: longest upstream silence within a call
    answer_timeout: float = 600.0  # calls.parked_ttl_s: longest wait for the client's answer to the upstream
    keepalive: float = 15.0  # front.keepalive_s: SSE comment interval on quiet streams (0: none)
    get_grace: float = 5.0  # a held server request waits this long for a GET stream (then: no-call answer)
    cancel_grace: float = 2.0  # after the client cancels its call: wait this long for the upstream's answer
    max_held: int = 256  # messages held for the GET stream at most

    @classmethod
    def from_config(cls, config: Config) -> BridgeSettings:
        calls = config.calls
        return cls(calls.call_timeout_s, calls.parked_ttl_s, config.front.keepalive_s)


@dataclass(eq=False, slots=True)
class BridgedCall:
    client_id: jsonrpc.RequestId
    upstream_id: jsonrpc.RequestId
    inbox: Inbox
    asked: set[jsonrpc.RequestId] = field(default_factory=set)  # server requests the client has not answered
    cancelled_at: float | None = None


class BridgedSession:
    """One legacy client's session: its upstream session, its call in flight, what waits for a GET stream."""

    def __init__(
        self, config: UpstreamConfig, principal: str, settings: BridgeSettings, fallback: NoCallAnswer
    ) -> None:
        self.token = secrets.token_urlsafe(24)
        self.config, self.principal, self.settings = config, principal, settings
        self.session: UpstreamSession | None = None
        self.turn = asyncio.Lock()  # one receiving call at a time
        self.call: BridgedCall | None = None
        self.held: deque[jsonrpc.Message] = deque()
        self.arrived = asyncio.Event()
        self.streams = 0  # GET streams attached
        self.busy = 0  # HTTP requests being handled (GET streams included)
        self.last_used = time.monotonic()
        self.closed = False
        self._fallback = fallback
        self._grace: asyncio.TimerHandle | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def alive(self) -> bool:
        return not self.closed and self.session is not None and self.session.alive

    def no_call(self, req: jsonrpc.Request) -> jsonrpc.Response | None:
        """The upstream session's no-call handler: the request goes to the client's GET stream."""
        return self.hold(req)

    def notify(self, note: jsonrpc.Notification) -> None:
        """The upstream session's listener for session-wide notifications."""
        self.hold(note)

    def hold(self, msg: jsonrpc.Message) -> jsonrpc.Response | None:
        """Keep `msg` for the GET stream. Returns the no-call answer for a request that cannot be held."""
        if self.closed or len(self.held) >= self.settings.max_held:
            return self._fallback(msg) if isinstance(msg, jsonrpc.Request) else None
        self.held.append(msg)
        self.arrived.set()
        if self.streams == 0 and isinstance(msg, jsonrpc.Request):
            self._start_grace()
        return None

    def attach(self) -> None:
        self.streams += 1
        if self._grace is not None:
            self._grace.cancel()
            self._grace = None

    def detach(self) -> None:
        self.streams -= 1
        if self.streams == 0 and any(isinstance(m, jsonrpc.Request) for m in self.held):
            self._start_grace()

    def _start_grace(self) -> None:
        if self._grace is None and not self.closed:
            self._grace = asyncio.get_running_loop().call_later(self.settings.get_grace, self._grace_over)

    def _grace_over(self) -> None:
        """No GET stream took the held messages in time: requests get the no-call answer, the rest goes."""
        self._grace = None
        if self.streams or self.closed:
            return
        for msg in self.held:
            if isinstance(msg, jsonrpc.Request) and (answer := self._fallback(msg)) is not None:
                self.answer_later(answer)
        self.held.clear()

    def answer_later(self, answer: jsonrpc.Response) -> None:
        self.spawn(self.send_quietly(answer))

    async def send_quietly(self, message: jsonrpc.Response | jsonrpc.Notification) -> None:
        if self.session is not None:
            with contextlib.suppress(UpstreamError):
                await self.session.send(message)

    def spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        self.arrived.set()  # GET streams look up and end
        if self._grace is not None:
            self._grace.cancel()
        if self.session is not None:
            await self.session.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
