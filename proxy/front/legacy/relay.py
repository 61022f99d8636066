"""Legacy clients (2024-11-05 … 2025-11-25, Streamable HTTP) on the same endpoint: a transparent relay.

A legacy client gets a legacy session, and the upstream's inline server requests reach it as they are (no
MRTR). The relay keeps no state: the `Mcp-Session-Id` it hands out is the upstream's session id sealed with
the principal (handle/session_ids.py), so any replica can relay any request of the session, and someone
else's session id is refused like an unknown one (404, which tells a legacy client to re-initialize).
Request and response bodies, SSE streams included, pass through byte for byte.

An upstream whose era (upstream/era.py) is modern has no legacy session to relay to: its legacy clients go
to the mirror (mirror.py), which plays the legacy server for them; so do the requests of a session the
mirror opened (its session ids are of their own kind), and those of `sse` and `stdio` upstreams to the bridge
(bridge.py). `LegacyRelay.relay` is the legacy dispatcher: it plans the job (front/plan.py) once, runs it,
and plans once more if the job finds the upstream's era wrong before anything was processed (`WrongEra`).
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Mapping, Sequence
from typing import NamedTuple

import aiohttp
from aiohttp import web

from proxy.calls.outcomes import too_many_calls
from proxy.calls.wording import unavailable_message
from proxy.config import UpstreamConfig
from proxy.front.address import TCP_PEER, AddressSource
from proxy.front.legacy.bridge import LegacyBridge
from proxy.front.legacy.mirror import LegacyMirror
from proxy.front.legacy.quota import SessionQuota
from proxy.front.plan import Job, WrongEra, plan
from proxy.front.planner import Planner
from proxy.handle import HandleCodec, HandleError
from proxy.handle.session_ids import LegacySession, open_session, seal_session
from proxy.routes.policy import Grant
from proxy.routes.table import Route
from proxy.upstream.era import speaks_modern
from proxy.upstream.propagation import with_propagated
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


class LegacyRelay:
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
        mirror: LegacyMirror | None = None,  # legacy clients of 2026-07-28 upstreams (mirror.py)
        planner: Planner,  # which job serves a request (front/planner.py)
    ):
        self._planner = planner
        self._mirror = mirror
        self._http = http
        self._clients = clients or {}
        # Sessions per principal and client address (quota.py); without one, none are counted.
        self._quota = quota
        self._addresses = addresses
        self._codec = codec
        self._upstreams = upstreams
        self._bridge = bridge  # serves the legacy clients of `sse` and `stdio` upstreams (bridge.py)

    async def relay(
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
                return _error(502, unavailable_message(upstream, wrong.cause or wrong))
            return await self._serve(again, caller)

    async def _serve(self, job: Job, caller: Legacy) -> web.StreamResponse:
        """The legacy client's request, served by its planned job."""
        request, upstream, msg = caller.request, caller.upstream, caller.msg
        if job is Job.REFUSE:
            return _error(400, "Legacy clients are not served on aggregated routes here")
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
            return _error(
                400,
                f"Legacy clients are relayed to Streamable HTTP upstreams only; {upstream!r} is "
                f"{config.transport}. Use a 2026-07-28 client for this upstream.",
            )
        return await self._pass_through(caller, config)

    async def _pass_through(self, caller: Legacy, config: UpstreamConfig) -> web.StreamResponse:
        """The pass-through job: a legacy client relayed byte for byte to its legacy Streamable HTTP
        upstream."""
        request, upstream, principal, msg, forwarded = (
            caller.request, caller.upstream, caller.principal, caller.msg, caller.forwarded
        )  # fmt: skip
        body, challenge = caller.body, caller.challenge
        headers = {name: request.headers[name] for name in _PASS_REQUEST if name in request.headers}
        headers.update(config.headers)
        headers.update(forwarded)
        headers = with_propagated(headers)
        quota, ttl = self._quota, config.pool.idle_ttl_s
        reserved: str | None = None  # an initialize's room in the quota, held while it is relayed
        if mcp.SESSION_HEADER in request.headers:
            try:
                session = open_session(self._codec, request.headers[mcp.SESSION_HEADER])
            except HandleError:
                return _error(404, "Session not found")
            if session.upstream != upstream or session.principal != principal:
                return _error(404, "Session not found")
            headers[mcp.SESSION_HEADER] = session.upstream_session
            if quota is not None:
                quota.touch(_token(upstream, session.upstream_session), ttl)
        elif not (isinstance(msg, jsonrpc.Request) and msg.method == "initialize"):
            return _error(400, "Missing Mcp-Session-Id (a legacy client starts with initialize)")
        elif quota is not None:
            address = self._addresses.of(request)
            refusal = quota.refusal(
                upstream, principal, address, config.pool.max_sessions, config.pool.max_sessions_per_principal
            )
            if refusal is not None:
                error = jsonrpc.Error(msg.id, too_many_calls(refusal))
                return web.Response(body=jsonrpc.dumps(error), content_type="application/json")
            reserved = f"initializing:{secrets.token_hex(8)}"
            quota.opened(reserved, upstream, principal, address, ttl)
        try:
            sent = await self._send(
                request,
                config,
                principal,
                body,
                headers,
                reserved=reserved,
                challenge=challenge,
                refusable=self._mirror is not None and request.method == "POST",
            )
            if isinstance(sent, bytes):
                return await self._refused(sent, caller)
            return sent
        finally:
            if reserved is not None and quota is not None:
                quota.closed(reserved)

    async def _refused(self, refused: bytes, caller: Legacy) -> web.StreamResponse:
        """A request refused with a 400 JSON-RPC error before anything ran: perhaps the server behind the
        address changed (an in-place upgrade to a 2026-07-28-only server), so its era is looked at again. If
        it speaks 2026-07-28 now, an initialize is planned again (WrongEra: to the mirror), and a request on
        a session (the gone server's) is answered 404, which tells a legacy client to initialize again —
        what going direct gives a client whose server restarted. Else the refusal, as it came."""
        upstream, msg, eras = caller.upstream, caller.msg, self._planner.eras
        reason = f"a relayed request was refused with 400: {refused[:200]!r}"
        eras.suspect(upstream, reason)
        if not speaks_modern(await eras.era(upstream, dict(caller.forwarded))):
            return web.Response(status=400, body=refused, content_type="application/json")
        if not (isinstance(msg, jsonrpc.Request) and msg.method == "initialize"):
            return _error(404, "Session not found")
        raise WrongEra(upstream, reason)

    async def _send(
        self,
        request: web.Request,
        config: UpstreamConfig,
        principal: str,
        body: bytes | None,
        headers: dict[str, str],
        *,
        reserved: str | None,
        challenge: Callable[[str | None], str | None] | None,
        refusable: bool = False,
    ) -> web.StreamResponse | bytes:
        """The upstream's answer, relayed; with `refusable`, a 400 JSON-RPC error's body is returned instead,
        unrelayed, for the caller to plan again."""
        upstream, quota = config.name, self._quota
        assert config.url is not None
        try:
            upstream_resp = await self._clients.get(upstream, self._http).request(
                request.method,
                config.url,
                data=body,
                headers=headers,
                timeout=aiohttp.ClientTimeout(total=None, sock_connect=config.timeouts.connect_s),
            )
        except (aiohttp.ClientError, TimeoutError) as exc:
            return _error(502, unavailable_message(upstream, exc))
        async with upstream_resp:
            if refusable and upstream_resp.status == 400 and upstream_resp.content_type == "application/json":
                refused = b""
                async for chunk in upstream_resp.content.iter_any():
                    refused += chunk
                    if len(refused) > _MAX_REFUSAL:
                        return _error(502, unavailable_message(upstream, "a 400 refusal too large"))
                if b'"error"' in refused:
                    return refused
                return web.Response(status=400, body=refused, content_type="application/json")
            out_headers = {n: upstream_resp.headers[n] for n in _PASS_RESPONSE if n in upstream_resp.headers}
            if upstream_resp.status in (401, 403) and challenge is not None:
                relayed = challenge(upstream_resp.headers.get("WWW-Authenticate"))
                if relayed:
                    out_headers["WWW-Authenticate"] = relayed
            if mcp.SESSION_HEADER in upstream_resp.headers:
                upstream_session = upstream_resp.headers[mcp.SESSION_HEADER]
                out_headers[mcp.SESSION_HEADER] = seal_session(
                    self._codec, LegacySession(upstream, upstream_session, principal)
                )
                if quota is not None and reserved is not None:  # the new session takes the room
                    address = self._addresses.of(request)
                    token = _token(upstream, upstream_session)
                    quota.opened(token, upstream, principal, address, config.pool.idle_ttl_s)
            if request.method == "DELETE" and quota is not None and upstream_resp.status < 300:
                quota.closed(_token(upstream, headers[mcp.SESSION_HEADER]))
            out = web.StreamResponse(status=upstream_resp.status, headers=out_headers)
            await out.prepare(request)
            async for chunk in upstream_resp.content.iter_any():
                await out.write(chunk)
            await out.write_eof()
            return out


class Legacy(NamedTuple):
    """A legacy client's request, as the endpoint parsed it, and who sent it. (A named tuple: made for every
    request, in C.)"""

    request: web.Request
    upstream: str  # or an aggregated route's name (`route`)
    principal: str
    body: bytes | None
    msg: jsonrpc.Message | None
    forwarded: Sequence[tuple[str, str]]  # the client headers that go straight upstream
    gate: tuple[tuple[str, str], ...] | None  # validate mode's, for the modern front
    challenge: Callable[[str | None], str | None] | None
    route: Route | None
    grant: Grant | None


_MAX_REFUSAL = 64 * 1024  # a 400 refusal, read whole before it is relayed or acted on


def _token(upstream: str, upstream_session: str) -> str:
    return f"relay:{upstream}:{upstream_session}"


def _error(status: int, message: str) -> web.Response:
    body = jsonrpc.dumps(jsonrpc.error(None, jsonrpc.INVALID_REQUEST, message))
    return web.Response(status=status, body=body, content_type="application/json")
