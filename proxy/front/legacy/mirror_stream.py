"""A legacy client's standalone GET stream on a mirror session (front/legacy/mirror.py).

A 2026-07-28 server has no GET stream: what a legacy server sends there (`notifications/tools/list_changed`,
prompts and resources alike) it sends only on `subscriptions/listen` streams. So a mirror session's GET is
a listen of the proxy's own modern front, asked in process (front/modern/inner.py, the `Listener` here): for
every list_changed the session's upstream offers, or, on an aggregated route, every member offers (a legacy
member heard on a session of its own, a modern one on a listen of the proxy's). Its notifications reach the
client as a legacy server writes them: no acknowledgement, no subscription id, no final result; keep-alive
comments meanwhile. The stream ends when the client goes, when the replica drains (a clean end: the client
opens another GET, on another replica), or when the upstream's listen ends.

One GET per session per replica: a second GET of the same session replaces the first, which ends cleanly.
The legacy transport lets a client hold several streams but forbids sending one message on two, and a GET
again is how a client resumes after a broken connection: a stream the client can no longer read must not
lock it out (409 would, until the dead connection is noticed). Sessions are sealed and live in no replica,
so two GETs of one session on two replicas are two listens, each hearing every change: what a client asks
of two replicas it hears twice (list_changed is idempotent: the client lists again).
"""

from __future__ import annotations

import asyncio
from typing import Any, Protocol

import structlog
from aiohttp import web

from proxy.front.legacy.bridge_streams import error_response
from proxy.front.reply import wants
from proxy.handle.mirror_ids import MirrorSession
from proxy.routes.policy import Grant
from proxy.routes.table import Route

log = structlog.get_logger("proxy.front.mirror")


class Listener(Protocol):
    """The modern front's listen, asked in process (front/modern/inner.py `InnerFront.listen`)."""

    async def listen(
        self,
        request: web.Request,
        upstream: str,
        *,
        principal: str,
        upstream_headers: tuple[tuple[str, str], ...] | None,
        route: Route | None,
        grant: Grant | None,
        meta: dict[str, Any],
        ended: asyncio.Event,
    ) -> web.StreamResponse | None: ...


class Draining(Protocol):
    @property
    def draining(self) -> bool: ...


class MirrorStreams:
    """The GET streams of mirror sessions this replica serves, one per session."""

    def __init__(self, state: Draining | None) -> None:
        self._state = state
        self._open: dict[str, asyncio.Event] = {}  # session token: set to end that session's stream

    def __len__(self) -> int:
        return len(self._open)

    async def serve(
        self,
        listener: Listener | None,
        request: web.Request,
        session: MirrorSession,
        meta: dict[str, Any],
        *,
        upstream_headers: tuple[tuple[str, str], ...] | None,
        route: Route | None,
        grant: Grant | None,
    ) -> web.StreamResponse:
        """The session's GET stream (`meta`: the 2026-07-28 `_meta` its requests carry)."""
        if listener is None:
            return _no_stream()
        if not wants(request)[1]:
            return error_response(406, "The GET stream is text/event-stream; accept it")
        if self._state is not None and self._state.draining:
            refused = error_response(503, "This proxy replica is shutting down; open the stream again")
            refused.headers["Retry-After"] = "0"
            return refused
        previous = self._open.pop(session.token, None)
        if previous is not None:
            previous.set()  # that stream ends; this one takes its place
            log.info("mirror.stream_replaced", upstream=session.upstream)
        ended = asyncio.Event()
        self._open[session.token] = ended
        try:
            response = await listener.listen(
                request,
                session.upstream,
                principal=session.principal,
                upstream_headers=upstream_headers,
                route=route,
                grant=grant,
                meta=meta,
                ended=ended,
            )
        finally:
            if self._open.get(session.token) is ended:
                del self._open[session.token]
        return response if response is not None else _no_stream()


def _no_stream() -> web.Response:
    response = error_response(405, "No standalone stream: this server sends nothing outside a request")
    response.headers["Allow"] = "POST, DELETE"
    return response
