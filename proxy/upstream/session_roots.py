"""A legacy session's roots: the `roots/list` its server sends with no call in flight, held for the next
call to ask its client (see proxy/calls/roots.py for the whole behaviour), and the roots the server was last
given on the session. `SessionRoots.answer` is the session's no-call answer (upstream/router.py).
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


class SessionRoots:
    """One upstream session's roots state. `answer` is the session's no-call answer (see router.py)."""

    def __init__(self, fallback: NoCallAnswer, *, hold: bool, clock: Any = time.monotonic) -> None:
        self._fallback = fallback
        self._hold = hold  # the client declared roots and no static roots are configured
        self._clock = clock
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
        self._since[req.id] = self._clock()
        log.info("upstream.roots_held", request=req.id)
        return None

    def hold(self, req: jsonrpc.Request) -> None:
        """Hold a roots/list a call received but ended before its client was asked (it came too late)."""
        self.asks_unprompted = True
        self._held.append(req)
        self._since.setdefault(req.id, self._clock())

    def begin_call(self) -> None:
        self._calls += 1

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
        if since is None and self._calls <= 1:
            # Asked within the session's first call: most likely its start-up request, which happened to
            # arrive once that call had begun (server-filesystem and server-everything ask right after
            # initialized): the server keeps roots as session state like one that asked with no call.
            self.asks_unprompted = True
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
