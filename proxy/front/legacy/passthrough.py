"""The pass-through job: a legacy client of a legacy Streamable HTTP upstream, relayed byte for byte.

A legacy client gets a legacy session, and the upstream's inline server requests reach it as they are (no
MRTR). The relay keeps no state: the `Mcp-Session-Id` it hands out is the upstream's session id sealed with
the principal (handle/session_ids.py), so any replica can relay any request of the session, and someone
else's session id is refused like an unknown one (404, which tells a legacy client to re-initialize).
Request and response bodies, SSE streams included, pass through byte for byte. A 400 refusal is looked at
first: an upstream replaced in place by a 2026-07-28-only server refuses that way (`_refused`).
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Mapping

import aiohttp
from aiohttp import web

from proxy.calls.outcomes import too_many_calls
from proxy.calls.wording import unavailable_message
from proxy.config import UpstreamConfig
from proxy.front.address import TCP_PEER, AddressSource
from proxy.front.legacy.caller import Legacy, error_response
from proxy.front.legacy.quota import SessionQuota
from proxy.front.plan import WrongEra
from proxy.handle import HandleCodec, HandleError
from proxy.handle.session_ids import LegacySession, open_session, seal_session
from proxy.upstream.era import EraBook, speaks_modern
from proxy.upstream.propagation import with_propagated
from proxy.wire import jsonrpc, mcp

_PASS_REQUEST = ("Accept", "Content-Type", "MCP-Protocol-Version", "Last-Event-ID")
_PASS_RESPONSE = ("Content-Type", "Cache-Control", "X-Accel-Buffering")
_MAX_REFUSAL = 64 * 1024  # a 400 refusal, read whole before it is relayed or acted on


def _token(upstream: str, upstream_session: str) -> str:
    return f"relay:{upstream}:{upstream_session}"


class PassThrough:
    def __init__(
        self,
        http: aiohttp.ClientSession,
        codec: HandleCodec,
        eras: EraBook,
        clients: Mapping[str, aiohttp.ClientSession] | None = None,  # per upstream (TLS); default `http`
        *,
        quota: SessionQuota | None = None,
        addresses: AddressSource = TCP_PEER,
        refusable: bool = False,  # a 400 refusal may mean a 2026-07-28 server now (the mirror can serve it)
    ) -> None:
        self._http = http
        self._codec = codec
        self._eras = eras
        self._clients = clients or {}
        self._quota = quota  # sessions per principal and client address (quota.py); None: none counted
        self._addresses = addresses
        self._refusable = refusable

    async def serve(self, caller: Legacy, config: UpstreamConfig) -> web.StreamResponse:
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
                return error_response(404, "Session not found")
            if session.upstream != upstream or session.principal != principal:
                return error_response(404, "Session not found")
            headers[mcp.SESSION_HEADER] = session.upstream_session
            if quota is not None:
                quota.touch(_token(upstream, session.upstream_session), ttl)
        elif not (isinstance(msg, jsonrpc.Request) and msg.method == "initialize"):
            return error_response(400, "Missing Mcp-Session-Id (a legacy client starts with initialize)")
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
                refusable=self._refusable and request.method == "POST",
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
        upstream, msg, eras = caller.upstream, caller.msg, self._eras
        reason = f"a relayed request was refused with 400: {refused[:200]!r}"
        eras.suspect(upstream, reason)
        if not speaks_modern(await eras.era(upstream, dict(caller.forwarded))):
            return web.Response(status=400, body=refused, content_type="application/json")
        if not (isinstance(msg, jsonrpc.Request) and msg.method == "initialize"):
            return error_response(404, "Session not found")
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
            return error_response(502, unavailable_message(upstream, exc))
        async with upstream_resp:
            if refusable and upstream_resp.status == 400 and upstream_resp.content_type == "application/json":
                refused = b""
                async for chunk in upstream_resp.content.iter_any():
                    refused += chunk
                    if len(refused) > _MAX_REFUSAL:
                        return error_response(502, unavailable_message(upstream, "a 400 refusal too large"))
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
