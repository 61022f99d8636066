"""Legacy sessions to one upstream, pooled by the capability set (and forwarded credentials) they serve.

A receiving call takes a session for itself (`acquire` … `release`), so every server request on that session
belongs to that one call; plain requests (lists, completion) share any live session of the same key.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import structlog

from proxy.upstream.base import NotDelivered, ServerInfo, UpstreamError, UpstreamSession
from proxy.upstream.pool_keys import PoolKey, PoolKeys
from proxy.wire import jsonrpc

log = structlog.get_logger(__name__)


SessionFactory = Callable[[PoolKey], Awaitable[UpstreamSession]]
# Re-attaches to an existing legacy session by id, without initialize (takeover of another replica's call).
SessionAdopter = Callable[[PoolKey, str, ServerInfo], Awaitable[UpstreamSession]]


class PoolExhausted(Exception):
    """No session could be had within `acquire_timeout` (the pool is at pool.max_sessions): -31003."""


class SessionPool:
    def __init__(
        self,
        name: str,
        factory: SessionFactory,
        *,
        max_sessions: int,
        idle_ttl: float,
        clock: Callable[[], float] = time.monotonic,
        adopter: SessionAdopter | None = None,
        reuse: bool = True,
        acquire_timeout: float = 0.0,
        on_lost: Callable[[str], None] | None = None,
        max_per_principal: int = 0,
    ) -> None:
        self.name = name
        # Told when a session dies under the pool or cannot be opened: the upstream may have been replaced
        # (upgraded in place to another protocol era: upstream/era.py probes it again).
        self._on_lost = on_lost
        self._max_per_principal = max_per_principal  # 0: none (pool.max_sessions_per_principal)
        self._opening_by: Counter[str] = Counter()  # sessions opening, by principal
        self._acquire_timeout = acquire_timeout  # how long a request waits for room in a full pool
        self._room: list[asyncio.Future[None]] = []  # requests waiting for room
        self._plain: dict[UpstreamSession, int] = {}  # plain requests in flight on each session
        self._reuse = reuse
        self._factory = factory
        self._adopter = adopter
        self._max = max_sessions
        self._idle_ttl = idle_ttl
        self._clock = clock
        self._idle: dict[PoolKey, list[tuple[UpstreamSession, float]]] = {}
        self._busy: dict[PoolKey, set[UpstreamSession]] = {}
        self._opening = 0
        self._info: ServerInfo | None = None
        self._closing: set[asyncio.Task[None]] = set()

    @property
    def size(self) -> int:
        return self._opening + sum(map(len, self._idle.values())) + sum(map(len, self._busy.values()))

    @property
    def initialised(self) -> bool:
        """A session of this pool has answered `initialize` since the process started."""
        return self._info is not None

    @property
    def max_sessions(self) -> int:
        return self._max

    @property
    def in_use(self) -> int:
        """Sessions opening or taken by a receiving call (idle ones can always be closed for room)."""
        return self._opening + sum(map(len, self._busy.values()))

    async def acquire(self, key: PoolKey) -> UpstreamSession:
        """A live session of `key` for one receiving call, reused when one is idle."""
        idle = self._idle.get(key)
        while idle:
            session, _ = idle.pop()
            if session.alive:
                self._busy.setdefault(key, set()).add(session)
                return session
            self._close_later(session)
        session = await self._open(key)
        self._busy.setdefault(key, set()).add(session)
        return session

    @property
    def can_adopt(self) -> bool:
        return self._adopter is not None

    async def adopt(self, key: PoolKey, session_id: str) -> UpstreamSession:
        """Attach to the legacy session `session_id` that another replica opened, for one receiving call."""
        if self._adopter is None:
            raise UpstreamError(
                f"upstream {self.name!r}: its transport cannot resume another replica's session"
            )
        info = await self.server_info(key)
        await self._room_for(key.principal)
        self._reserve(key.principal)  # counted from here (no await since the room was found)
        try:
            session = await self._adopter(key, session_id, info)
        finally:
            self._unreserve(key.principal)
        self._busy.setdefault(key, set()).add(session)
        return session

    def release(self, key: PoolKey, session: UpstreamSession, *, reusable: bool) -> None:
        """Give back a session `acquire` handed out. Releasing it twice does nothing the second time (so it
        can never be handed out twice); checked in O(1), this runs once per call."""
        busy = self._busy.get(key)
        if busy is None or session not in busy:
            return
        busy.discard(session)
        if not busy:
            del self._busy[key]
        if reusable and self._reuse and session.alive:
            self._idle.setdefault(key, []).append((session, self._clock()))
        else:
            self._close_later(session)
        self._wake()

    async def request(
        self, key: PoolKey, method: str, params: Mapping[str, Any], timeout: float
    ) -> jsonrpc.Response:
        """A plain request on any live session of `key` (idle first, then a busy one, else a new one).
        Sent once more on another session if the first certainly never reached the upstream (it restarted)."""
        try:
            return await self._request_once(key, method, params, timeout)
        except NotDelivered:
            self.suspect_idle()  # any other one is of the same gone process: send it on a fresh one
            return await self._request_once(key, method, params, timeout, fresh=True)

    def suspect_idle(self) -> int:
        """The upstream forgot a session or refused a connection (it restarted): every idle session was
        opened on the process that is gone and would fail its next request the same way, so close them all;
        the next request opens a fresh one (busy ones find out on their own). Returns how many."""
        dropped = 0
        for key, entries in list(self._idle.items()):
            keep = [(s, t) for s, t in entries if s in self._plain]  # answering right now: left to finish
            for s, _ in entries:
                if s not in self._plain:
                    self._close_later(s)
                    dropped += 1
            if keep:
                self._idle[key] = keep
            else:
                del self._idle[key]
        if dropped:
            log.info("pool.idle_sessions_dropped", upstream=self.name, sessions=dropped)
        return dropped

    async def _request_once(
        self, key: PoolKey, method: str, params: Mapping[str, Any], timeout: float, fresh: bool = False
    ) -> jsonrpc.Response:
        session = None if fresh else next((s for s, _ in self._idle.get(key, ()) if s.alive), None)
        if session is None and not fresh:
            session = next((s for s in self._busy.get(key, ()) if s.alive), None)
        if session is None:
            session = await self._open(key)
            self._idle.setdefault(key, []).append((session, self._clock()))
        # While it answers, an idle session is not closed to make room, nor reaped.
        self._plain[session] = self._plain.get(session, 0) + 1
        served = False
        try:
            answer = await session.request(method, params, timeout)
            served = True
            return answer
        finally:
            if (left := self._plain[session] - 1) > 0:
                self._plain[session] = left
            else:
                del self._plain[session]
                if served:  # a failed request is no use: it must not keep a broken session from its reaping
                    self._touch(key, session)
                self._wake()

    def _touch(self, key: PoolKey, session: UpstreamSession) -> None:
        """An idle session just served a plain request: it was used now."""
        entries = self._idle.get(key)
        if entries:
            self._idle[key] = [(s, self._clock() if s is session else t) for s, t in entries]

    async def server_info(self, key: PoolKey) -> ServerInfo:
        """The upstream's initialize result (cached after the first session opens)."""
        if self._info is None:
            async with asyncio.timeout(60):
                session = await self.acquire(key)
                self.release(key, session, reusable=True)
        assert self._info is not None
        return self._info

    def forget(self, key: PoolKey, session: UpstreamSession) -> None:
        """Drop a session from the pool without closing it (it was detached for another replica)."""
        busy = self._busy.get(key)
        if busy is not None:
            busy.discard(session)
            if not busy:
                del self._busy[key]
        self._wake()

    def reap_idle(self) -> int:
        """Close sessions idle for longer than the TTL; returns how many."""
        cutoff = self._clock() - self._idle_ttl
        reaped = 0
        for key, entries in list(self._idle.items()):
            keep = [(s, t) for s, t in entries if (t > cutoff or s in self._plain) and s.alive]
            for s, t in entries:
                if (t <= cutoff and s not in self._plain) or not s.alive:
                    self._close_later(s)
                    reaped += 1
            if keep:
                self._idle[key] = keep
            else:
                del self._idle[key]
        if reaped:
            self._wake()
        return reaped

    async def close(self) -> None:
        sessions = [s for entries in self._idle.values() for s, _ in entries]
        sessions += [s for busy in self._busy.values() for s in busy]
        self._idle.clear()
        self._busy.clear()
        await asyncio.gather(*(s.close() for s in sessions), return_exceptions=True)
        if self._closing:
            await asyncio.gather(*self._closing, return_exceptions=True)

    def _evict_one_idle(self) -> bool:
        """Make room: close one idle session (a dead one first, else the least recently used)."""
        busy = self._plain  # idle sessions answering a plain request are not closed under it
        candidates = [(s.alive, t, k, s) for k, e in self._idle.items() for s, t in e if s not in busy]
        if not candidates:
            return False
        _, _, key, session = min(candidates, key=lambda c: (c[0], c[1]))
        self._idle[key] = [(s, t) for s, t in self._idle[key] if s is not session]
        if not self._idle[key]:
            del self._idle[key]
        self._close_later(session)
        return True

    async def _make_room(self) -> None:
        """Return once one more session fits (closing an idle one if need be), waiting at most
        `acquire_timeout` for a busy one to be given back. Raises PoolExhausted."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._acquire_timeout
        while self.size >= self._max and not self._evict_one_idle():
            remaining = deadline - loop.time()
            if remaining <= 0:
                waited = f"; waited {self._acquire_timeout:g}s (pool.acquire_timeout_s)"
                raise PoolExhausted(
                    f"upstream {self.name!r} has {self._max} sessions open (pool.max_sessions)"
                    + (waited if self._acquire_timeout > 0 else "")
                )
            room = loop.create_future()
            self._room.append(room)
            try:
                async with asyncio.timeout(remaining):
                    await room
            except TimeoutError:
                pass
            finally:
                if room in self._room:
                    self._room.remove(room)

    def _wake(self) -> None:
        """Room may have appeared: every waiter looks again (the first to find it takes it)."""
        waiters, self._room = self._room, []
        for room in waiters:
            if not room.done():
                room.set_result(None)

    def held_by(self, principal: str) -> int:
        """Sessions `principal` holds (opening, busy or idle): for a stdio upstream, its child processes."""
        idle = sum(len(e) for k, e in self._idle.items() if k.principal == principal)
        busy = sum(len(b) for k, b in self._busy.items() if k.principal == principal)
        return self._opening_by[principal] + idle + busy

    def _principal_room(self, principal: str) -> None:
        """One more session for `principal`, within pool.max_sessions_per_principal: an idle one of its
        own is closed for room, else PoolExhausted at once (waiting would not help: only it can free one)."""
        cap = self._max_per_principal
        while cap and self.held_by(principal) >= cap:
            mine = [(t, k, s) for k, e in self._idle.items() if k.principal == principal for s, t in e]
            mine = [(t, k, s) for t, k, s in mine if s not in self._plain]
            if not mine:
                raise PoolExhausted(
                    f"this client holds {cap} sessions of upstream {self.name!r} "
                    "(pool.max_sessions_per_principal); finish or abandon some calls first"
                )
            _, key, session = min(mine, key=lambda c: c[0])
            self._idle[key] = [(s, t) for s, t in self._idle[key] if s is not session]
            if not self._idle[key]:
                del self._idle[key]
            self._close_later(session)

    async def _room_for(self, principal: str) -> None:
        """Room for one more session of `principal` (its share, then the pool's): reserve it at once."""
        self._principal_room(principal)
        await self._make_room()
        self._principal_room(principal)  # others of its own may have opened while it waited

    def _reserve(self, principal: str) -> None:
        self._opening += 1
        self._opening_by[principal] += 1

    def _unreserve(self, principal: str) -> None:
        self._opening -= 1
        self._opening_by[principal] -= 1
        if self._opening_by[principal] <= 0:
            del self._opening_by[principal]
        self._wake()  # a failed open gave its room back

    async def _open(self, key: PoolKey) -> UpstreamSession:
        await self._room_for(key.principal)
        self._reserve(key.principal)
        try:
            session = await self._factory(key)
        except UpstreamError as exc:
            self._lost(f"could not open a session: {exc}")
            raise
        except Exception as exc:  # a factory bug must not leak as a 500
            raise UpstreamError(f"could not open a session: {type(exc).__name__}: {exc}") from exc
        finally:
            self._unreserve(key.principal)
        if self._info is None:
            self._info = session.info
        elif _another_server(self._info, session.info):  # replaced in place: the cheap signal of a new era
            self._lost(f"a new session's initialize shows another server ({_named(session.info)})")
            self._info = session.info
        log.debug(
            "pool.session_opened",
            upstream=self.name,
            session=session.session_id,
            capabilities=key.capabilities.describe(),
        )
        return session

    def _lost(self, reason: str) -> None:
        if self._on_lost is not None:
            self._on_lost(reason)

    def _close_later(self, session: UpstreamSession) -> None:
        if not session.alive:
            self._lost("a session died")
        task = asyncio.ensure_future(session.close())
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)


def _another_server(before: ServerInfo, now: ServerInfo) -> bool:
    """Whether two sessions' initialize results say the server behind the address changed (upgraded or
    downgraded in place): its name, version or protocol version."""
    return before.protocol_version != now.protocol_version or before.server_info != now.server_info


def _named(info: ServerInfo) -> str:
    return f"{info.server_info.get('name')} {info.server_info.get('version')}, {info.protocol_version}"


__all__ = [
    "PoolExhausted",
    "PoolKey",
    "PoolKeys",
    "SessionAdopter",
    "SessionFactory",
    "SessionPool",
]
