"""2026-07-28 requests the proxy makes of its own modern front: the rounds of the mirror
(front/legacy/mirror/front.py) for a legacy client whose answer only the modern front can give.

Two such clients: one on an aggregated route (proxy/routes/: the route's naming, merged lists and tool policy
live in the modern front), and one calling a tool a two-era upstream names in `legacy_tools` (the tool asks
with `ctx.elicit`, which such a server refuses at 2026-07-28: the proxy runs it on a legacy session and turns
its inline requests into `input_required` rounds, its own sealed handle as the `requestState`). The mirror
then asks the legacy client inline and retries, exactly as it does with a modern upstream.

It runs the modern front's own pipeline (pipeline.py) — the checks, the plan, the route, the native relay or
the proxy's MRTR over a legacy session, Tasks, the sealed handle, the draining refusal, the fallback when an
upstream is not modern after all — with another transport adapter: notifications go to the mirror's callback
(`InProcess`), a refusal is a JSON-RPC error, and a retry is never forwarded to another replica (the mirror's
call lives on the replica holding its client's stream, which sealed the handle; `local_only`). No rate
check: the endpoint counted the legacy request this runs for. Each round has its own canonical line, logged
as `request.mirrored` (with the legacy request's id) and counted in the request metrics, as a request over
HTTP is.

`listen` is the legacy client's standalone GET stream: a `subscriptions/listen` of the modern front
(listen.py) asking for every list_changed, on every member of a route or on the one upstream, written to
the GET response as the client's legacy server would write it (`LegacyStream`).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any

import structlog
from aiohttp import web
from multidict import CIMultiDict

from proxy.calls.outcomes import CallLink
from proxy.calls.service import CallService
from proxy.calls.wording import method_not_found
from proxy.front.checks import Refusal, check_modern
from proxy.front.modern.front import ModernFront
from proxy.front.modern.listen.filter import LIST_CHANGED, MAX_ITEMS
from proxy.front.modern.pipeline import Asker, Forwarded, Listening
from proxy.front.reply import InProcess, json_response
from proxy.front.standalone import LegacyStream
from proxy.observe.line import Outcome, RequestLine
from proxy.observe.logs import info_line
from proxy.observe.metrics import record_request
from proxy.routes.policy import Grant
from proxy.routes.table import Route
from proxy.upstream.modern import metadata_headers
from proxy.upstream.pool import PoolKey
from proxy.wire import jsonrpc, mcp

MAX_TOOL_NAME = 128  # characters of a tools/call's name the round's line keeps (as the endpoint's)
LISTEN_ID = "legacy-get"  # the id of the proxy's listen for a legacy GET stream (its members' too)
Notify = Callable[[jsonrpc.Notification], Awaitable[None]]
log = structlog.get_logger("proxy.front.mirror")


class InnerFront:
    def __init__(self, front: ModernFront, calls: CallService) -> None:
        self._front = front
        self._calls = calls

    async def end(self, request_state: str, *, principal: str, reason: str) -> None:
        """The legacy client will not go on with the call `request_state` (the modern front's answer) is of:
        a call the proxy parked for it ends now, upstream told (a native upstream's state: nothing to do)."""
        if await self._calls.end_parked(request_state, principal=principal, reason=reason):
            log.info("inner.call_ended", reason=reason)

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
    ) -> web.StreamResponse | None:
        """The legacy client's GET stream on `upstream` (or the route of that name): every list_changed
        its upstreams offer and the resources it subscribed (`feed.uris`, more as it subscribes), until the
        client goes, the replica drains, or `feed.ended` is set (another GET of the session took its place).
        None: this proxy serves no listen."""
        front = self._front
        if front.listener is None:
            return None
        wanted: dict[str, Any] = {flag: True for flag in LIST_CHANGED}
        if feed.uris:
            wanted["resourceSubscriptions"] = sorted(feed.uris)[:MAX_ITEMS]
        msg = jsonrpc.Request(LISTEN_ID, mcp.LISTEN, {"notifications": wanted, "_meta": meta})
        headers = CIMultiDict(request.headers)
        headers.update(metadata_headers(msg))
        try:
            req = check_modern(msg, headers, limits=front.limits)
        except Refusal as refusal:  # the mirror's own _meta: not expected
            return json_response(jsonrpc.Error(None, refusal.error), refusal.status)

        pipeline, who = front.pipeline, Asker(request, principal, upstream_headers, grant)

        def key_for(name: str) -> PoolKey:
            return pipeline.pool_key(name, req, who)

        line = RequestLine()
        if route is not None:  # a listen names nothing: the route's first upstream, and all are listened to
            upstream, req, _ = await pipeline.routed(
                route, req, principal=principal, grant=grant, key_for=key_for, line=line
            )
        key = key_for(upstream)
        return await front.listener.serve(
            request,
            upstream=upstream,
            req=req,
            key=key,
            principal=principal,
            line=line,
            route=route,
            key_for=key_for,
            legacy=feed,
        )

    async def __call__(
        self,
        request: web.Request,
        upstream: str,
        msg: jsonrpc.Request,
        *,
        principal: str,
        upstream_headers: tuple[tuple[str, str], ...] | None,
        route: Route | None,
        grant: Grant | None,
        notify: Notify,
        line: RequestLine,
        legacy: bool = False,
    ) -> jsonrpc.Response:
        """The modern front's answer to `msg` (its `_meta` the mirror's) for the legacy client's `request`,
        on `upstream` (or, with `route`, the aggregated route of that name); with `legacy`, the legacy way
        (the proxy's MRTR over a legacy session) even to a two-era upstream. Raises UpstreamAuthChallenge
        (the upstream's 401/403: the mirror relays it). `line`: the round's canonical line, logged and
        counted here."""
        started = time.perf_counter()
        line.upstream, line.method, line.id, line.era, line.via = (
            upstream,
            msg.method,
            msg.id,
            "modern",
            "mirror",
        )
        if route is not None:
            line.route = upstream
        name = msg.params.get("name")
        if msg.method == "tools/call" and isinstance(name, str):
            line.tool = name[:MAX_TOOL_NAME]
        try:
            answer = await self._answer(
                request, upstream, msg, principal, upstream_headers, route, grant, notify, line, legacy
            )
        finally:
            if line.outcome is None:  # an exception: the mirror words it
                line.set_outcome(Outcome.ERROR)
            line.duration_ms = round((time.perf_counter() - started) * 1000, 2)
            info_line(log, "request.mirrored", line.render(), owned=True)
            record_request(request.app, line)
        return answer

    async def _answer(  # noqa: PLR0917 (the call's own arguments, passed on)
        self,
        request: web.Request,
        upstream: str,
        msg: jsonrpc.Request,
        principal: str,
        upstream_headers: tuple[tuple[str, str], ...] | None,
        route: Route | None,
        grant: Grant | None,
        notify: Notify,
        line: RequestLine,
        legacy: bool,
    ) -> jsonrpc.Response:
        front = self._front
        headers = CIMultiDict(request.headers)
        headers.update(metadata_headers(msg))
        try:
            req = check_modern(msg, headers, limits=front.limits)
            answer = await front.pipeline.answer(
                upstream,
                req,
                Asker(request, principal, upstream_headers, grant),
                sink=InProcess(notify),
                line=line,
                link=CallLink(),
                route=route,
                local_only=True,
                legacy_way=legacy,
            )
        except Refusal as refusal:
            line.set_outcome(Outcome.REFUSED, refusal.error.code)
            return jsonrpc.Error(msg.id, refusal.error)
        if isinstance(answer, Listening):  # a long-lived stream: not a round of the mirror's
            line.set_outcome(Outcome.UNKNOWN_METHOD)
            return jsonrpc.Error(msg.id, method_not_found(msg.method))
        assert not isinstance(answer, Forwarded)  # local_only: never sent on to another replica
        return answer
