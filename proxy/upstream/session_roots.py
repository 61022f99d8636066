"""A legacy session's roots: the `roots/list` its server sends with no call in flight, held for the next
call to ask its client (see proxy/calls/roots.py for the whole behaviour), and the roots the server was last
given on the session. `SessionRoots.answer` is the session's no-call answer (upstream/router.py).

A server that asks at start-up (right after `initialized`) is told apart from a tool that asks inside a call
by time: a new session's first call waits, before it is sent, for the upstream's start-up window
(`StartupWindow`, learned per upstream), so a start-up request arrives with no call in flight and is held;
what arrives once a call is under way is that call's own question, and teaches the session nothing.
"""

from __future__ import annotations

import asyncio
import time
import weakref
from typing import Any

import structlog

from proxy.translate.exchange import PROXY_ASKED
from proxy.upstream.base import UpstreamSession
from proxy.upstream.router import NoCallAnswer
from proxy.wire import jsonrpc, mcp

log = structlog.get_logger(__name__)

# Re-tell a server a held request's answer with list_changed when it waited this long: its own request may
# have timed out meanwhile (the TypeScript SDK gives up after 60 s).
STALE_AFTER = 30.0
# How long to wait for the server's re-fetch after list_changed before sending the call anyway.
REFETCH_WAIT = 2.0
# The start-up window: how long a new session's first call waits for the server's start-up roots/list.
FIRST_WINDOW = 0.5  # an upstream not learnt yet
MIN_WINDOW, MAX_WINDOW = 0.1, 2.0  # an upstream seen asking: 3 x its slowest start-up request, within these
QUIET_SESSIONS = 1  # sessions silent through their window (none ever asked): the upstream does not ask


class StartupWindow:
    """One upstream's start-up window, learnt from its sessions. Unknown: FIRST_WINDOW. Seen asking at
    start-up: three times the slowest such request (bounded; the wait ends as soon as the request comes, so
    a generous window costs nothing on a server that asks). QUIET_SESSIONS sessions in a row silent through
    their window and never one that asked: 0, the first call is sent at once."""

    def __init__(self) -> None:
        self._slowest: float | None = None  # seconds from the session's opening to its start-up request
        self._quiet = 0

    @property
    def seconds(self) -> float:
        if self._slowest is not None:
            return min(MAX_WINDOW, max(MIN_WINDOW, 3 * self._slowest))
        return 0.0 if self._quiet >= QUIET_SESSIONS else FIRST_WINDOW

    def asked(self, after_s: float) -> None:
        self._slowest = max(self._slowest or 0.0, after_s)
        self._quiet = 0

    def quiet(self) -> None:
        self._quiet += 1


class SessionRoots:
    """One upstream session's roots state. `answer` is the session's no-call answer (see router.py)."""

    def __init__(
        self,
        fallback: NoCallAnswer,
        *,
        hold: bool,
        window: StartupWindow | None = None,  # the upstream's start-up window; None: no wait
        clock: Any = time.monotonic,
    ) -> None:
        self._fallback = fallback
        self._hold = hold  # the client declared roots and no static roots are configured
        self._window = window
        self._clock = clock
        self._opened_at: float | None = None  # when the session was open (initialized sent)
        self._started: asyncio.Event | None = None  # set when a start-up request is held
        self._held: list[jsonrpc.Request] = []
        self._since: dict[jsonrpc.RequestId, float] = {}  # when each held request arrived
        self._refetched: asyncio.Future[None] | None = None  # while tell_changed waits for the re-fetch
        self.given: list[Any] | None = None  # the roots the server was last given on this session
        self.asks_unprompted = False  # the server asked for roots outside a call at least once
        self._calls = 0  # calls begun on the session

    def answer(self, req: jsonrpc.Request) -> jsonrpc.Response | None:
        if req.method != mcp.ROOTS or not self._hold:
            return self._fallback(req)
        self.asks_unprompted = True
        if self.given is not None:
            if self._refetched is not None and not self._refetched.done():
                self._refetched.set_result(None)
            return jsonrpc.Result(req.id, {"roots": self.given})
        self._held.append(req)
        self._since[req.id] = now = self._clock()
        log.info("upstream.roots_held", request=req.id)
        if self._calls == 0 and self._window is not None:  # a start-up request: the upstream's window learns
            self._window.asked(now - (self._opened_at or now))  # (no opening time yet: it came during it)
        if self._started is not None:
            self._started.set()
        return None

    def opened(self) -> None:
        """The session is open (`initialized` sent): its start-up window begins."""
        self._opened_at = self._clock()

    async def settle(self) -> None:
        """Before the session's first call is sent: wait out what is left of the upstream's start-up window,
        unless the server asked already (or asks meanwhile), so a start-up request is not taken for the
        call's own. Bounded by MAX_WINDOW."""
        window, opened = self._window, self._opened_at
        if not self._hold or window is None or opened is None or self._calls > 0 or self._held:
            return
        remaining = window.seconds - (self._clock() - opened)
        if remaining > 0:
            self._started = asyncio.Event()
            try:
                async with asyncio.timeout(min(remaining, MAX_WINDOW)):
                    await self._started.wait()
                    return
            except TimeoutError:
                pass
            finally:
                self._started = None
        if not self._held:
            window.quiet()

    def hold(self, req: jsonrpc.Request) -> None:
        """Hold a roots/list a call received but ended before its client was asked (it came too late): the
        next call asks it, once (it came inside a call: nothing learnt about the session)."""
        self._held.append(req)
        self._since.setdefault(req.id, self._clock())

    def begin_call(self) -> None:
        self._calls += 1

    @property
    def holding(self) -> bool:
        """Are server requests held for the next call?"""
        return bool(self._held)

    def take_held(self) -> list[jsonrpc.Request]:
        """The requests held so far, for a call to ask its client (their answers come to `answered`)."""
        held, self._held = self._held, []
        return held

    def answered(self, legacy_id: jsonrpc.RequestId, result: object) -> bool:
        """A client answered a roots/list (`legacy_id`: the server's request, or PROXY_ASKED) with
        `result`. True when the server must be told with list_changed: the proxy asked and the roots differ
        from what the server was last given, or the server's own request waited so long it may be gone."""
        roots = result.get("roots") if isinstance(result, dict) else None
        since = self._since.pop(legacy_id, None)
        if not isinstance(roots, list):
            return False
        before, self.given = self.given, list(roots)
        if legacy_id == PROXY_ASKED:
            return before != self.given
        # A request asked inside a call (since is None) is that call's tool's: it teaches nothing about the
        # session (the start-up window kept the server's start-up request out of the first call).
        return since is not None and self._clock() - since > STALE_AFTER

    async def tell_changed(self, session: UpstreamSession) -> None:
        """`notifications/roots/list_changed` upstream, then wait (bounded) for its re-fetch."""
        self._refetched = refetched = asyncio.get_running_loop().create_future()
        try:
            await session.send(jsonrpc.Notification(mcp.ROOTS_LIST_CHANGED, {}))
            async with asyncio.timeout(REFETCH_WAIT):
                await refetched
        except TimeoutError:
            log.info("upstream.roots_not_refetched", waited_s=REFETCH_WAIT)
        finally:
            self._refetched = None


class RootsBook:
    """The `SessionRoots` of every live pooled session (forgotten with the session)."""

    def __init__(self) -> None:
        self._by_session: weakref.WeakKeyDictionary[UpstreamSession, SessionRoots] = (
            weakref.WeakKeyDictionary()
        )

    def add(self, session: UpstreamSession, roots: SessionRoots) -> None:
        self._by_session[session] = roots

    def of(self, session: UpstreamSession) -> SessionRoots | None:
        return self._by_session.get(session)
