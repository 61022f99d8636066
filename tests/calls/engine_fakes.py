"""A scripted upstream session and a call service built on it, for unit tests of the call engine
(service.py, driver.py, takeover.py, drain.py): no servers, no sockets.

`ScriptedSession` implements `UpstreamSession` (upstream/base.py). The test pushes what the upstream sends
into the running call's inbox (`push`), reads what the engine sent (`sent`, `calls`), and can hold any of its
awaits at a gate (`hold("send")`: the next `send` waits until `release_gate("send")`), to hang the client
up exactly there.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from proxy.calls.outcomes import CallRequest, CallSettings
from proxy.calls.registry import CallRegistry
from proxy.calls.service import CallService
from proxy.handle import Claims, HandleCodec, KeyRing, target_digest
from proxy.translate.capabilities import ClientCapabilities
from proxy.upstream.base import Inbox, ServerInfo, SessionListener, UpstreamError
from proxy.upstream.pool import PoolKey, SessionPool
from proxy.wire import jsonrpc

INFO = ServerInfo("2025-11-25", {"tools": {}}, {"name": "scripted", "version": "1"}, None)
KEY = PoolKey(ClientCapabilities(elicitation_form=True, sampling=True), principal="alice")
UPSTREAM = "up"
ELICIT = {"message": "your name?", "requestedSchema": {"type": "object", "properties": {}}}
ACCEPT = {"action": "accept", "content": {}}


class ScriptedSession:
    """One fake legacy session; the engine's view of it is `UpstreamSession`."""

    def __init__(
        self, n: int, receiving: asyncio.Event, *, session_id: str | None = None, resumable: bool = True
    ) -> None:
        self._receiving = receiving  # set once a call receives on it (call or resume_call entered)
        self.session_id: str | None = session_id or f"s{n}"
        self.info = INFO
        self.alive = True
        self.last_event_id: str | None = "ev-1" if resumable else None
        self.inbox: Inbox | None = None
        self.calls: list[tuple[str, Mapping[str, Any]]] = []
        self.sent: list[jsonrpc.Response | jsonrpc.Notification] = []
        self.ended = 0
        self.closed = False
        self.detached = False
        self.resumed: tuple[jsonrpc.RequestId, str] | None = None
        self._gates: dict[str, asyncio.Event] = {}
        self._passes: dict[str, int] = {}
        self.waiting: dict[str, asyncio.Event] = {}  # set while an await is held at its gate
        self.done: defaultdict[str, asyncio.Event] = defaultdict(asyncio.Event)  # set as each await returns
        self._next_id = 100
        self.failing: set[str] = set()  # awaits that raise UpstreamError

    # -- scripting ------------------------------------------------------------------------------------

    def hold(self, what: str, *, after: int = 0) -> None:
        """The awaits of `what` ("call", "send", "resume_call", "request"), but for the next `after` ones,
        wait until released."""
        self._gates[what] = asyncio.Event()
        self._passes[what] = after
        self.waiting[what] = asyncio.Event()

    def release_gate(self, what: str) -> None:
        self._gates.pop(what).set()

    async def _gate(self, what: str) -> None:
        gate = self._gates.get(what)
        if gate is not None and self._passes[what] > 0:
            self._passes[what] -= 1
        elif gate is not None:
            self.waiting[what].set()
            await gate.wait()
        if what in self.failing:
            raise UpstreamError(f"scripted: {what} failed")

    def push(self, *messages: jsonrpc.Message) -> None:
        assert self.inbox is not None, "no call runs on this session"
        for message in messages:
            self.inbox.put_nowait(message)

    def ask(self, rid: int, method: str = "elicitation/create", params: Mapping[str, Any] = ELICIT) -> None:
        self.push(jsonrpc.Request(rid, method, params))

    def answer(self, result: Mapping[str, Any] | None = None) -> None:
        self.push(jsonrpc.Result(self._next_id - 1, dict(result or {"content": []})))

    # -- UpstreamSession ------------------------------------------------------------------------------

    async def call(self, method: str, params: Mapping[str, Any], inbox: Inbox) -> jsonrpc.RequestId:
        self.inbox = inbox
        self._receiving.set()
        await self._gate("call")
        self.calls.append((method, params))
        self.done["call"].set()
        self._next_id += 1
        return self._next_id - 1

    async def resume_call(self, inbox: Inbox, request_id: jsonrpc.RequestId, last_event_id: str) -> None:
        self.inbox = inbox
        self._receiving.set()
        await self._gate("resume_call")
        self.resumed = (request_id, last_event_id)
        self.done["resume_call"].set()
        self._next_id = int(request_id) + 1 if isinstance(request_id, int) else self._next_id

    def end_call(self) -> None:
        self.ended += 1
        self.inbox = None

    def watch(self, listener: SessionListener | None) -> None:
        pass

    def hear(self, heard: SessionListener) -> None:
        pass

    async def request(self, method: str, params: Mapping[str, Any], timeout: float) -> jsonrpc.Response:
        await self._gate("request")
        return jsonrpc.Result(0, {})

    async def send(self, message: jsonrpc.Response | jsonrpc.Notification) -> None:
        await self._gate("send")
        self.sent.append(message)
        self.done["send"].set()

    async def close(self) -> None:
        self.closed = True
        self.alive = False

    async def detach(self) -> None:
        self.detached = True
        self.alive = False


@dataclass
class Upstream:
    """The sessions the pool opened (`opened`) and adopted (`adopted`), in order."""

    opened: list[ScriptedSession] = field(default_factory=list)
    adopted: list[ScriptedSession] = field(default_factory=list)
    adopt_gate: asyncio.Event | None = None
    receiving: asyncio.Event = field(default_factory=asyncio.Event)
    adopting: asyncio.Event = field(default_factory=asyncio.Event)
    holding: tuple[str, ...] = ()  # what every new session holds (ScriptedSession.hold) from the start
    failing: tuple[str, ...] = ()  # what every new session fails with UpstreamError

    async def next_call(self) -> ScriptedSession:
        """The session of the next call to be sent (or resumed) upstream, once it is."""
        async with asyncio.timeout(5):
            await self.receiving.wait()
        self.receiving.clear()
        return self.last

    async def open(self, key: PoolKey) -> Any:
        session = ScriptedSession(len(self.opened) + 1, self.receiving)
        self._held(session)
        self.opened.append(session)
        return session

    async def adopt(self, key: PoolKey, session_id: str, info: ServerInfo) -> Any:
        self.adopting.set()
        if self.adopt_gate is not None:
            await self.adopt_gate.wait()
        session = ScriptedSession(100 + len(self.adopted), self.receiving, session_id=session_id)
        self._held(session)
        self.adopted.append(session)
        return session

    def _held(self, session: ScriptedSession) -> None:
        for what in self.holding:
            session.hold(what)
        session.failing = set(self.failing)

    @property
    def last(self) -> ScriptedSession:
        return (self.opened + self.adopted)[-1]


class WallClock:
    """The handles' clock (seconds since the epoch), moved by the test."""

    def __init__(self, now: float = 1_800_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@dataclass
class Engine:
    service: CallService
    pool: SessionPool
    registry: CallRegistry
    upstream: Upstream
    codec: HandleCodec
    wall: WallClock

    def request(
        self, *, principal: str = "alice", key: PoolKey = KEY, tool: str = "t", log_level: str | None = None
    ) -> CallRequest:
        return CallRequest(
            upstream=UPSTREAM,
            method="tools/call",
            params={"name": tool, "arguments": {}},
            key=key,
            principal=principal,
            log_level=log_level,
        )

    @property
    def leaked(self) -> tuple[int, int]:
        """(sessions held busy by the pool, calls in the registry): (0, 0) once everything ended."""
        return self.pool.in_use, len(self.registry)


def engine(
    *,
    gather_window: float = 0.0,
    parked_ttl: float = 60.0,
    call_timeout: float = 30.0,
    max_sessions: int = 4,
    max_calls: int = 100,
    owner: str = "http://me",
    parked_share: float = 1.0,
    **service_options: Any,
) -> Engine:
    upstream = Upstream()
    wall = WallClock()
    pool = SessionPool(
        UPSTREAM, upstream.open, max_sessions=max_sessions, idle_ttl=60.0, adopter=upstream.adopt
    )
    codec = HandleCodec(KeyRing.ephemeral(), clock=wall)
    registry = CallRegistry(max_calls=max_calls, max_per_principal=max_calls, clock=loop_time)
    settings = CallSettings(
        gather_window=gather_window,
        parked_ttl=parked_ttl,
        call_timeout=call_timeout,
        owner=owner,
        parked_share=parked_share,
    )
    service = CallService({UPSTREAM: pool}, codec, registry, settings, wall, **service_options)
    return Engine(service, pool, registry, upstream, codec, wall)


def loop_time() -> float:
    """The registry's clock in these tests: the running loop's (virtual under `virtual_time`)."""
    return asyncio.get_running_loop().time()


async def until_set(event: asyncio.Event) -> None:
    async with asyncio.timeout(5):
        await event.wait()


def foreign_handle(eng: Engine, *, owner: str = "http://gone", request: int = 7, **changes: Any) -> str:
    """A handle another replica (`owner`) sealed for a call parked on session `sid-1` of the upstream,
    waiting for one elicitation (`elicit-1`, upstream id 5), sealed with the keys `eng` shares."""
    req = eng.request()
    now = int(eng.wall())
    fields: dict[str, Any] = {
        "upstream": UPSTREAM,
        "session": "sid-1",
        "call": "c-foreign",
        "round": 1,
        "pending": {"elicit-1": 5},
        "owner": owner,
        "principal": req.principal,
        "target": target_digest(req.method, req.params),
        "issued_at": now - 10,
        "expires_at": now + 50,
        "last_event": "ev-9",
        "request": request,
    }
    fields.update(changes)
    return eng.codec.seal(Claims(**fields))
