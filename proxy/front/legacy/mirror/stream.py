"""A legacy client's standalone GET stream on a mirror session (front/legacy/mirror/front.py).

A 2026-07-28 server has no GET stream: what a legacy server sends there (`notifications/tools/list_changed`,
prompts and resources alike) it sends only on `subscriptions/listen` streams. So a mirror session's GET is
a listen of the proxy's own modern front, asked in process (front/modern/inner.py, the `Listener` here): for
every list_changed the session's upstream offers, or, on an aggregated route, every member offers (a legacy
member heard on a session of its own, a modern one on a listen of the proxy's). Its notifications reach the
client as a legacy server writes them: no acknowledgement, no subscription id, no final result; keep-alive
comments meanwhile. The stream ends when the client goes, when the replica drains (a clean end: the client
opens another GET, on another replica), when the upstream's listen ends, or when the session expires.

One GET per session per replica: a second GET of the same session replaces the first, which ends cleanly.
The legacy transport lets a client hold several streams but forbids sending one message on two, and a GET
again is how a client resumes after a broken connection: a stream the client can no longer read must not
lock it out (409 would, until the dead connection is noticed). Sessions are sealed and live in no replica,
so two GETs of one session on two replicas are two listens, each hearing every change: what a client asks
of two replicas it hears twice (list_changed is idempotent: the client lists again).

`resources/subscribe` of a mirror session is the proxy's to answer (a 2026-07-28 server has no such
method: its resource updates go to listen streams): the URI joins the session's subscriptions on this
replica, and the session's GET stream here, open or opened later, asks for its updates (the listen's
`add`: on the member that listed the URI); with the stream open, `{}` once an upstream took it, `-32602`
when none would; with none open here yet, `{}` at once (the stream asks for it when it opens).
`resources/unsubscribe` takes it out: its updates are no longer written. A replica keeps the
subscriptions of at most `MAX_SESSIONS` sessions (the least recently used forgotten) and `MAX_URIS` per
session; they live in the replica that was asked, so behind a load balancer that spreads one session's
requests, a subscription made on one replica is heard only on a GET stream held by the same one.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from typing import Any, Protocol

import structlog
from aiohttp import web

from proxy.front.legacy.bridge.streams import draining_response, error_response
from proxy.front.reply import wants
from proxy.front.standalone import LegacyStream
from proxy.handle.mirror_ids import MirrorSession
from proxy.routes.policy import Grant
from proxy.routes.table import Route
from proxy.wire import jsonrpc

log = structlog.get_logger("proxy.front.mirror")

SUBSCRIBE, UNSUBSCRIBE = "resources/subscribe", "resources/unsubscribe"
MAX_SESSIONS = 4096  # sessions whose resource subscriptions a replica keeps
MAX_URIS = 256  # resource subscriptions per session (as a listen's resourceSubscriptions)


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
        feed: LegacyStream,
    ) -> web.StreamResponse | None: ...


class Draining(Protocol):
    @property
    def draining(self) -> bool: ...


class MirrorStreams:
    """The GET streams of mirror sessions this replica serves, one per session."""

    def __init__(self, state: Draining | None) -> None:
        self._state = state
        self._open: dict[str, LegacyStream] = {}  # session token: the session's stream here
        self._uris: OrderedDict[str, set[str]] = OrderedDict()  # session token: what it subscribed here

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
            refused = draining_response("open the stream again")
            refused.headers["Retry-After"] = "0"
            return refused
        previous = self._open.pop(session.token, None)
        if previous is not None:
            previous.ended.set()  # that stream ends; this one takes its place
            log.info("mirror.stream_replaced", upstream=session.upstream)
        feed = LegacyStream(self._uris.get(session.token, ()))
        self._open[session.token] = feed
        expiry = asyncio.get_running_loop().call_later(  # the session's absolute expiry ends its stream too
            max(0.0, session.expires_at - time.time()), feed.ended.set
        )
        try:
            response = await listener.listen(
                request,
                session.upstream,
                principal=session.principal,
                upstream_headers=upstream_headers,
                route=route,
                grant=grant,
                meta=meta,
                feed=feed,
            )
        finally:
            expiry.cancel()
            if self._open.get(session.token) is feed:
                del self._open[session.token]
        return response if response is not None else _no_stream()

    async def subscription(self, session: MirrorSession, msg: jsonrpc.Request) -> jsonrpc.Response:
        """The answer to a `resources/subscribe` or `unsubscribe` of the session."""
        uri = msg.params.get("uri")
        if not isinstance(uri, str) or not uri:
            return jsonrpc.error(msg.id, jsonrpc.INVALID_PARAMS, "params.uri must be a non-empty string")
        uris = self._uris.setdefault(session.token, set())
        self._uris.move_to_end(session.token)
        while len(self._uris) > MAX_SESSIONS:
            self._uris.popitem(last=False)
        feed = self._open.get(session.token)
        if msg.method == UNSUBSCRIBE:
            uris.discard(uri)
            if feed is not None:
                feed.unsubscribe(uri)
            return jsonrpc.Result(msg.id, {})
        if uri not in uris and len(uris) >= MAX_URIS:
            why = f"This session already subscribes to {MAX_URIS} resources; unsubscribe from one first"
            return jsonrpc.error(msg.id, jsonrpc.INVALID_PARAMS, why)
        uris.add(uri)
        if feed is not None and not await feed.subscribe(uri):
            uris.discard(uri)
            return jsonrpc.error(
                msg.id, jsonrpc.INVALID_PARAMS, f"No upstream takes a subscription to {uri!r}"
            )
        return jsonrpc.Result(msg.id, {})

    def forget(self, session: MirrorSession) -> None:
        """The session ended (DELETE): its subscriptions and its stream here."""
        self._uris.pop(session.token, None)
        feed = self._open.pop(session.token, None)
        if feed is not None:
            feed.ended.set()


def _no_stream() -> web.Response:
    response = error_response(405, "No standalone stream: this server sends nothing outside a request")
    response.headers["Allow"] = "POST, DELETE"
    return response
