"""The legacy front: legacy clients (2024-11-05 … 2025-11-25, Streamable HTTP) on the same endpoint.

`LegacyFront.handle` is the legacy dispatcher: it plans the request's job once (front/plan.py), hands the
request to that job's room and plans once more only if the job finds the upstream's era wrong before
anything was processed (`WrongEra`). The jobs: pass-through to a legacy Streamable HTTP upstream
(passthrough.py), the mirror for a 2026-07-28 upstream or an aggregated route (mirror/: it plays the legacy
server), the bridge for `sse` and `stdio` upstreams (bridge/).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import aiohttp
from aiohttp import web

from proxy.calls.wording import unavailable_message
from proxy.config import UpstreamConfig
from proxy.front.address import TCP_PEER, AddressSource
from proxy.front.legacy.bridge.front import LegacyBridge
from proxy.front.legacy.caller import Legacy, error_response
from proxy.front.legacy.mirror.front import LegacyMirror
from proxy.front.legacy.passthrough import PassThrough
from proxy.front.legacy.quota import SessionQuota
from proxy.front.plan import Job, WrongEra, plan
from proxy.front.planner import Planner
from proxy.handle import HandleCodec
from proxy.routes.policy import Grant
from proxy.routes.table import Route
from proxy.wire import jsonrpc, mcp

_PASS_REQUEST = ("Accept", "Content-Type", "MCP-Protocol-Version", "Last-Event-ID")
_PASS_RESPONSE = ("Content-Type", "Cache-Control", "X-Accel-Buffering")


def is_legacy(request: web.Request, msg: jsonrpc.Message | None, modern_version: object) -> bool:
    """Told apart by what they carry: `initialize`, a client's response to a server request, or a session
    id without a modern `_meta` protocol version."""
    if isinstance(msg, jsonrpc.Request) and msg.method == "initialize":
        return True
    if isinstance(msg, jsonrpc.Result | jsonrpc.Error):
        return True
    return mcp.SESSION_HEADER in request.headers and not isinstance(modern_version, str)


class LegacyFront:
    def __init__(
        self,
        http: aiohttp.ClientSession,
        codec: HandleCodec,
        upstreams: Mapping[str, UpstreamConfig],
        bridge: LegacyBridge | None = None,
        clients: Mapping[str, aiohttp.ClientSession] | None = None,  # per upstream (TLS); default `http`
        *,
        quota: SessionQuota | None = None,
        addresses: AddressSource = TCP_PEER,
        mirror: LegacyMirror | None = None,  # legacy clients of 2026-07-28 upstreams (mirror/front.py)
        planner: Planner,  # which job serves a request (front/planner.py)
    ):
        self._planner = planner
        self._mirror = mirror
        self._upstreams = upstreams
        self._pass_through = PassThrough(
            http, codec, planner.eras, clients, quota=quota, addresses=addresses, refusable=mirror is not None
        )
        self._bridge = bridge  # serves the legacy clients of `sse` and `stdio` upstreams (bridge/front.py)

    async def handle(
        self,
        request: web.Request,
        upstream: str,
        principal: str,
        body: bytes | None,
        msg: jsonrpc.Message | None,
        *,
        forwarded: Sequence[tuple[str, str]] | None = None,
        challenge: Callable[[str | None], str | None] | None = None,
        route: Route | None = None,
        grant: Grant | None = None,
    ) -> web.StreamResponse:
        """Relay a legacy client's request: `body` as it came, `msg` as the front already parsed it
        (both None for a GET or DELETE). `forwarded`: the client headers that go upstream (validate mode
        decides them), else the upstream's `forward_headers`. `challenge`: adapts the upstream's
        `WWW-Authenticate` on a 401/403 (its `resource_metadata` becomes the proxy's). On an aggregated
        `route` (`upstream` is its name) the mirror is the legacy server, over the modern front; `grant`:
        what the validated token grants, for the route's tool policy."""
        gate = tuple(forwarded) if forwarded is not None else None  # validate mode's, for the modern front
        mirror = self._mirror
        if route is None and forwarded is None:
            names = self._upstreams[upstream].forward_headers
            forwarded = [(n, request.headers[n]) for n in names if n in request.headers]
        crosses = mirror is not None and (route is None or mirror.inner is not None)
        s = await self._planner.legacy(
            request.headers.get(mcp.SESSION_HEADER),
            upstream,
            msg,
            forwarded or (),
            routed=route is not None,
            mirror=crosses,
        )
        job = plan(s)
        caller = Legacy(
            request, upstream, principal, body, msg, forwarded or (), gate, challenge, route, grant
        )
        try:
            return await self._serve(job, caller)
        except WrongEra as wrong:  # found before anything was processed: planned once more
            again = await self._planner.again(s, wrong, forwarded or ())
            if again is job:  # asked again, the same: the failure is the answer
                return error_response(502, unavailable_message(upstream, wrong.cause or wrong))
            return await self._serve(again, caller)

    async def _serve(self, job: Job, caller: Legacy) -> web.StreamResponse:
        """The legacy client's request, served by its planned job."""
        request, upstream, msg = caller.request, caller.upstream, caller.msg
        if job is Job.REFUSE:
            return error_response(400, "Legacy clients are not served on aggregated routes here")
        if job is Job.MIRROR:
            assert self._mirror is not None  # planned only with the mirror
            return await self._mirror.handle(
                request,
                upstream,
                caller.principal,
                caller.body,
                msg,
                forwarded=() if caller.route is not None else caller.forwarded,
                challenge=caller.challenge,
                upstream_headers=caller.gate,
                route=caller.route,
                grant=caller.grant,
            )
        config = self._upstreams[upstream]
        if job is Job.BRIDGE or config.url is None:
            if self._bridge is not None:
                return await self._bridge.handle(
                    request,
                    upstream,
                    caller.principal,
                    msg,
                    forwarded=caller.forwarded,
                    challenge=caller.challenge,
                )
            return error_response(
                400,
                f"Legacy clients are relayed to Streamable HTTP upstreams only; {upstream!r} is "
                f"{config.transport}. Use a 2026-07-28 client for this upstream.",
            )
        return await self._pass_through.serve(caller, config)
