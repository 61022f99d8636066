"""Legacy clients on `sse` and `stdio` upstreams: a stateful bridge (issue 4).

A legacy client (2024-11-05 … 2025-11-25, Streamable HTTP) is relayed byte for byte to a Streamable HTTP
upstream (relay.py). An HTTP+SSE or stdio upstream speaks another transport, so for those the proxy plays
the legacy Streamable HTTP server itself, on a session of its own:

- **initialize** opens a dedicated upstream session (a stdio child, or an HTTP+SSE stream) — never pooled,
  never shared — declaring upstream exactly the capabilities the client declared and offering the client's
  protocol version first (then the older configured ones). The client gets the upstream's initialize result
  and an `Mcp-Session-Id`: a random token sealed with the upstream and the principal (session_ids.py), so
  another principal's requests with it are refused (404). The token names the session in a registry on
  *this replica*: **a legacy client of an sse/stdio upstream needs sticky routing to the replica it started
  on**, as any stateful legacy server does; elsewhere its session id is unknown (404: it re-initializes).
- **A request** (`tools/call`, `prompts/get`, `resources/read`) runs upstream as the session's receiving
  call. The upstream session takes one receiving call at a time (so that every server request on it belongs
  to that call): calls of one client session are serialized, and a call waits for the one before it (at most
  `calls.call_timeout_s`). The reply is an SSE stream with the call's server requests and notifications as
  they come, then the upstream's response under the client's own JSON-RPC id; a client that accepts JSON
  only gets the response as JSON, and the call's server requests on its GET stream. Other requests (lists,
  completion, ping, logging level, subscriptions) are plain upstream requests and run concurrently.
- **The client's answers** to server requests (POSTed responses) go upstream as they are → 202. Its
  notifications too → 202: `notifications/cancelled` only for the call in flight, its `requestId` mapped to
  the upstream call's id; `notifications/initialized` stops here (the upstream session is initialized).
- **GET** is the session's standalone stream: server requests that arrive with no call in flight (FastMCP
  asks for roots and samples on its standalone stream; server-everything asks for roots after initialized)
  and session-wide notifications. They are held (at most `max_held`) until a GET stream takes them; a server
  request that no GET stream took within `get_grace` gets the proxy's no-call answer (ping, static roots,
  else an error), as for a modern client.
- **DELETE** closes the upstream session (a stdio child stops) → 200. Sessions idle (no request, no GET
  stream) for `pool.idle_ttl_s` are closed; one whose upstream died is forgotten (404 → the client
  re-initializes). At most `pool.max_sessions` bridged sessions per upstream, counted apart from the pool.
- **A client that goes away mid-call** does not cancel the call (2025-11-25: disconnection is not
  cancellation). Without event ids its reply cannot be resumed, so: the server requests it was sent and did
  not answer get an error upstream, later ones go to the GET stream, and the response is dropped.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping, Sequence

import aiohttp
import structlog
from aiohttp import web

from proxy.calls.outcomes import too_many_calls
from proxy.calls.wording import unavailable_message
from proxy.config import UpstreamConfig
from proxy.front.address import TCP_PEER, AddressSource
from proxy.front.legacy.bridge.calls import BridgeCalls
from proxy.front.legacy.bridge.session import TICK, BridgedSession, BridgeSettings, RuntimeStateView
from proxy.front.legacy.bridge.streams import (
    BridgeReply,
    draining_response,
    error_response,
    serve_get_stream,
)
from proxy.front.legacy.bridge.wire import declared_capabilities, initialize_result, offered_versions
from proxy.front.legacy.quota import SessionQuota
from proxy.handle import HandleCodec, HandleError
from proxy.handle.session_ids import LegacySession, open_session, seal_session
from proxy.upstream.base import UpstreamAuthChallenge, UpstreamError
from proxy.upstream.connect import open_upstream_session
from proxy.upstream.propagation import detach_from_request
from proxy.upstream.router import NoCallAnswer
from proxy.wire import jsonrpc, mcp

log = structlog.get_logger("proxy.front.legacy_bridge")

BRIDGED = ("sse", "stdio")  # the upstream transports whose legacy clients the bridge serves


class LegacyBridge:
    """Serves legacy clients of the `sse` and `stdio` upstreams (see the module docstring)."""

    def __init__(
        self,
        http: aiohttp.ClientSession,
        codec: HandleCodec,
        upstreams: Mapping[str, UpstreamConfig],
        no_call: Callable[[UpstreamConfig], NoCallAnswer],
        *,
        settings: BridgeSettings | None = None,
        state: RuntimeStateView | None = None,
        clients: Mapping[str, aiohttp.ClientSession] | None = None,  # per upstream (TLS); default `http`
        quota: SessionQuota | None = None,
        addresses: AddressSource = TCP_PEER,
    ) -> None:
        self._http, self._codec, self._upstreams = http, codec, upstreams
        self._clients = clients or {}
        # Sessions per principal and client address (quota.py); without one, only pool.max_sessions.
        self._quota = quota if quota is not None else SessionQuota(per_principal=1 << 30, per_address=0)
        self._addresses = addresses
        self._no_call = no_call
        self._settings = settings or BridgeSettings()
        self._calls = BridgeCalls(self._settings)
        self._state = state
        self._sessions: dict[str, BridgedSession] = {}
        self._reaper: asyncio.Task[None] | None = None

    @property
    def sessions(self) -> int:
        return len(self._sessions)

    async def handle(
        self,
        request: web.Request,
        upstream: str,
        principal: str,
        msg: jsonrpc.Message | None,
        *,
        forwarded: Sequence[tuple[str, str]] | None = None,
        challenge: Callable[[str | None], str | None] | None = None,
    ) -> web.StreamResponse:
        """A legacy client's request, as the front parsed it (None for a GET or DELETE). `forwarded` and
        `challenge`: as for the pass-through (front/legacy/passthrough.py)."""
        if isinstance(msg, jsonrpc.Request) and msg.method == "initialize":
            config = self._upstreams[upstream]
            if forwarded is None:
                forwarded = [(n, request.headers[n]) for n in config.forward_headers if n in request.headers]
            return await self._initialize(
                request, config, principal, msg, headers=dict(forwarded), challenge=challenge
            )
        if mcp.SESSION_HEADER not in request.headers:
            return error_response(400, "Missing Mcp-Session-Id (a legacy client starts with initialize)")
        bridged = self._find(request.headers[mcp.SESSION_HEADER], upstream, principal)
        if bridged is None:
            return error_response(404, "Session not found")
        if not bridged.alive:  # its upstream is gone (a stdio child exited, an SSE stream ended)
            await self._forget(bridged, "upstream_lost")
            return error_response(404, "Session not found")
        bridged.busy += 1
        try:
            if request.method == "DELETE":
                await self._forget(bridged, "deleted")
                return web.Response(status=200)
            if request.method == "GET":
                return await serve_get_stream(request, bridged, self._settings, self._state)
            if isinstance(msg, jsonrpc.Request):
                return await self._calls.request(request, bridged, msg)
            assert bridged.session is not None and msg is not None
            if isinstance(msg, jsonrpc.Notification):
                if msg.method != mcp.INITIALIZED:
                    await self._calls.notification(bridged, bridged.session, msg)
            else:  # the client's answer to a server request
                if bridged.call is not None and msg.id is not None:
                    bridged.call.asked.discard(msg.id)
                await bridged.session.send(msg)
            return web.Response(status=202)
        except UpstreamError as exc:
            return error_response(502, unavailable_message(upstream, exc))
        finally:
            bridged.busy -= 1
            bridged.last_used = time.monotonic()

    async def close(self) -> None:
        if self._reaper is not None:
            self._reaper.cancel()
            await asyncio.gather(self._reaper, return_exceptions=True)
        doomed, self._sessions = list(self._sessions.values()), {}
        await asyncio.gather(*(b.close() for b in doomed), return_exceptions=True)

    # -- initialize ---------------------------------------------------------------------------------------

    async def _initialize(
        self,
        request: web.Request,
        config: UpstreamConfig,
        principal: str,
        msg: jsonrpc.Request,
        *,
        headers: Mapping[str, str],
        challenge: Callable[[str | None], str | None] | None,
    ) -> web.StreamResponse:
        if self._state is not None and self._state.draining:
            return draining_response("initialize again (another replica serves it)")
        address = self._addresses.of(request)
        refusal = self._quota.refusal(
            config.name, principal, address, config.pool.max_sessions, config.pool.max_sessions_per_principal
        )
        if refusal is not None:
            log.info("legacy_bridge.refused", upstream=config.name, reason=refusal)
            error = jsonrpc.Error(msg.id, too_many_calls(refusal))
            return await BridgeReply(request).finish(error)
        bridged = BridgedSession(config, principal, self._settings, self._no_call(config))
        self._quota.opened(bridged.token, config.name, principal, address, None)  # counted while opening
        try:
            return await self._open(request, config, msg, bridged, headers=headers, challenge=challenge)
        finally:
            if self._sessions.get(bridged.token) is not bridged:  # it did not open: its room is free again
                self._quota.closed(bridged.token)

    async def _open(
        self,
        request: web.Request,
        config: UpstreamConfig,
        msg: jsonrpc.Request,
        bridged: BridgedSession,
        *,
        headers: Mapping[str, str],
        challenge: Callable[[str | None], str | None] | None,
    ) -> web.StreamResponse:
        principal = bridged.principal
        if config.transport not in BRIDGED:  # the relay hands the bridge no other (relay.py)
            detail = f"transport {config.transport!r} is not bridged"
            return error_response(502, unavailable_message(config.name, detail))
        try:
            bridged.session = await open_upstream_session(
                self._clients.get(config.name, self._http),
                config,
                versions=offered_versions(msg.params.get("protocolVersion"), config.protocol_versions),
                capabilities=declared_capabilities(msg.params),
                headers=headers,
                no_call=bridged.no_call,
            )
        except UpstreamAuthChallenge as exc:  # the upstream refused the credentials: the client is told so
            response = error_response(exc.status, "Unauthorized" if exc.status == 401 else "Forbidden")
            relayed = challenge(exc.www_authenticate) if challenge is not None else exc.www_authenticate
            if relayed:
                response.headers["WWW-Authenticate"] = relayed
            return response
        except UpstreamError as exc:
            return error_response(502, unavailable_message(config.name, exc))
        bridged.session.watch(bridged.notify)
        self._sessions[bridged.token] = bridged
        if self._reaper is None or self._reaper.done():
            self._reaper = asyncio.ensure_future(self._reap())
        log.info("legacy_bridge.opened", upstream=config.name, session=bridged.session.session_id)
        sealed = seal_session(self._codec, LegacySession(config.name, bridged.token, principal))
        result = jsonrpc.Result(msg.id, initialize_result(bridged.session.info))
        return await BridgeReply(request).finish(result, {mcp.SESSION_HEADER: sealed})

    def _find(self, token: str, upstream: str, principal: str) -> BridgedSession | None:
        try:
            sealed = open_session(self._codec, token)
        except HandleError:
            return None
        bridged = self._sessions.get(sealed.upstream_session)
        if bridged is None or sealed.upstream != upstream or sealed.principal != principal:
            return None
        if bridged.config.name != upstream or bridged.principal != principal:
            return None
        return bridged

    async def _forget(self, bridged: BridgedSession, why: str) -> None:
        if self._sessions.get(bridged.token) is bridged:
            del self._sessions[bridged.token]
            self._quota.closed(bridged.token)
        log.info("legacy_bridge.closed", upstream=bridged.config.name, why=why)
        await bridged.close()

    async def _reap(self) -> None:
        """Close sessions idle for `pool.idle_ttl_s` and forget those whose upstream died, once a TICK."""
        detach_from_request()
        while True:
            await asyncio.sleep(TICK)
            now = time.monotonic()
            doomed = [
                (b, "idle" if b.alive else "upstream_lost")
                for b in list(self._sessions.values())
                if not b.alive
                or (not b.busy and b.call is None and now - b.last_used > b.config.pool.idle_ttl_s)
            ]
            await asyncio.gather(*(self._forget(b, why) for b, why in doomed), return_exceptions=True)


__all__ = ["BridgeSettings", "LegacyBridge"]
