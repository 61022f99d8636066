"""Legacy clients of 2026-07-28 upstreams: the mirror of what the proxy does for modern clients of legacy
ones.

A legacy client (2024-11-05 … 2025-11-25, Streamable HTTP) cannot speak to a server that has dropped the
handshake, nor use a migrated server's native `input_required` tools. For an upstream whose era
(upstream/era.py) is modern, the proxy is the legacy server to the client and a stateless 2026-07-28 client
upstream (upstream/modern.py):

- **initialize** is answered from the upstream's `server/discover` (translate/mirror.py): the client's own
  protocol version if the proxy knows it, the server's capabilities a legacy client knows, its serverInfo
  and instructions. The `Mcp-Session-Id` is a sealed mirror session (handle/mirror_ids.py, format 5) that
  carries what every later request needs — the upstream, the principal, the negotiated version, the
  client's info and the capabilities it declared — so no replica keeps anything of the session: any replica
  serves any request of it, another principal's requests with it get 404.
- **tools/call, prompts/get, resources/read** are driven round after round (mirror_calls.py): the
  upstream's `inputRequests` reach the client as inline requests on the POST's SSE stream, only those it
  declared; the answers go back in the retry with the server's `requestState`; the final result ends the
  stream. Progress and log notifications of each round reach the client as they come.
- **The client's answers** (POSTed JSON-RPC responses) may land on any replica: their ids are sealed ask ids
  naming the replica holding the call, so they are delivered there (signed, over the peer route
  `MIRROR_PEER_PATH`), 202. An answer for no waiting call (ended, timed out, another session's) is 404.
- **Everything else** (lists, completion, ...) is relayed upstream with the per-request `_meta`, its
  result stripped of what a legacy client does not know (`resultType`, caching hints). `ping` is answered
  `{}` by the proxy (2026-07-28 has no ping: a modern server answers it "Method not found").
  `logging/setLevel` is answered `{}`: there is no session upstream to hold a level, so every request asks
  for the server's logs at `log_level` (the session's level cannot change without a session id change).
- **Notifications**: `notifications/cancelled` ends the call it names when that call runs on this replica
  (its upstream stream is closed, nothing is retried); `notifications/roots/list_changed` is honoured as
  it is: roots are never cached, every `roots/list` the upstream asks is asked of the client afresh.
- **GET** is 405 (no standalone stream: a modern server sends nothing outside a request); **DELETE** 200.

A session whose upstream turns out legacy after all (a modern request answered the legacy way, `NotModern`)
gets 404, so the client initializes again, and the era probed again sends it to the relay.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Protocol

import aiohttp
import structlog
from aiohttp import web

from proxy.calls.wording import unavailable, unavailable_message
from proxy.config import Config, UpstreamConfig
from proxy.front.legacy.bridge_session import RuntimeStateView
from proxy.front.legacy.bridge_streams import BridgeReply, error_response
from proxy.front.legacy.mirror_calls import MirrorCalls, MirrorSettings
from proxy.front.peers import NOT_PROCESSED, Peers, PeerUnreachable
from proxy.handle import HandleCodec, HandleError
from proxy.handle.mirror_ids import MirrorSession, open_ask, open_mirror_session, seal_mirror_session
from proxy.handle.peer_auth import PeerAuthError
from proxy.translate import mirror as tr
from proxy.upstream.base import UpstreamAuthChallenge, UpstreamError
from proxy.upstream.era import EraBook
from proxy.upstream.modern import ModernTarget, Notify, NotModern, post
from proxy.wire import jsonrpc, mcp

log = structlog.get_logger("proxy.front.mirror")

MIRROR_PEER_PATH = "/_mrtr/peer/mirror"  # a client's answer or cancel, sent on to the replica of its call
NO_CALL = "No call waits for this answer (it ended, was cancelled, or its time ran out)"
Challenge = Callable[[str | None], str | None]
SESSION_PARAM = "mrtr-proxy/session"  # in a cancel sent on to the peers: the session's token


class PeerBook(Protocol):
    """The other replicas (cluster/agreement.py's PeerKeyCheck): how to reach them, and who they are."""

    peers: Peers
    addresses: tuple[str, ...]

    async def resolve(self) -> list[str]: ...


class LegacyMirror:
    def __init__(
        self,
        *,
        upstreams: Mapping[str, UpstreamConfig],
        clients: Mapping[str, aiohttp.ClientSession],
        eras: EraBook,
        codec: HandleCodec,
        peers: Peers | None,
        settings: MirrorSettings,
        call_timeout: float = 300.0,
        log_level: str = "debug",
        replicas: Callable[[], Awaitable[list[str]]] | None = None,  # the others, for a cancel
        state: RuntimeStateView | None = None,  # draining: no new calls
    ) -> None:
        self._replicas, self._state = replicas, state
        self._upstreams, self._clients, self._eras = upstreams, clients, eras
        self._codec, self._peers, self._settings = codec, peers, settings
        self._call_timeout, self._log_level = call_timeout, log_level
        self.calls = MirrorCalls(codec, settings)

    @classmethod
    def from_config(
        cls,
        config: Config,
        clients: Mapping[str, aiohttp.ClientSession],
        eras: EraBook,
        codec: HandleCodec,
        book: PeerBook,
        *,
        state: RuntimeStateView | None = None,
    ) -> LegacyMirror:
        settings = MirrorSettings(config.calls.parked_ttl_s, config.front.keepalive_s, config.replica_address)
        upstreams = {u.name: u for u in config.upstreams}
        return cls(
            upstreams=upstreams,
            clients=clients,
            eras=eras,
            codec=codec,
            peers=book.peers,
            settings=settings,
            call_timeout=config.calls.call_timeout_s,
            replicas=book.resolve if book.addresses else None,
            state=state,
        )

    async def takes(
        self, request: web.Request, upstream: str, msg: jsonrpc.Message | None, forwarded: Mapping[str, str]
    ) -> bool:
        """Whether the mirror serves this legacy request: a mirror session's, or an `initialize` for an
        upstream whose era is modern."""
        config = self._upstreams[upstream]
        if config.transport != "streamable-http" or config.url is None:
            return False
        if mcp.SESSION_HEADER in request.headers:
            try:
                open_mirror_session(self._codec, request.headers[mcp.SESSION_HEADER])
            except HandleError:
                return False
            return True
        if isinstance(msg, jsonrpc.Request) and msg.method == "initialize":
            return await self._eras.era(upstream, forwarded) == "modern"
        return False

    async def handle(
        self,
        request: web.Request,
        upstream: str,
        principal: str,
        body: bytes | None,
        msg: jsonrpc.Message | None,
        *,
        forwarded: Sequence[tuple[str, str]],
        challenge: Challenge | None,
    ) -> web.StreamResponse | None:
        """The answer to a legacy client's request (None: its `initialize` found the upstream legacy after
        all, and the relay takes it)."""
        target = self._target(upstream, forwarded)
        if isinstance(msg, jsonrpc.Request) and msg.method == "initialize":
            return await self._initialize(
                request, upstream=upstream, principal=principal, msg=msg, target=target, challenge=challenge
            )
        try:
            session = open_mirror_session(self._codec, request.headers[mcp.SESSION_HEADER])
        except HandleError:
            return error_response(404, "Session not found")
        if session.upstream != upstream or session.principal != principal:
            return error_response(404, "Session not found")
        if request.method == "GET":
            response = error_response(
                405, "No standalone stream: this server sends nothing outside a request"
            )
            response.headers["Allow"] = "POST, DELETE"
            return response
        if request.method == "DELETE" or msg is None:
            return web.Response(status=200)
        if isinstance(msg, jsonrpc.Result | jsonrpc.Error):
            return await self._answer(session, msg, body or b"")
        if isinstance(msg, jsonrpc.Notification):
            if msg.method == mcp.CANCELLED:
                await self._cancel(session, msg)
            return web.Response(status=202)
        assert isinstance(msg, jsonrpc.Request)
        try:
            return await self._request(request, session, msg, target, challenge)
        except NotModern as exc:
            self._eras.suspect(upstream, f"a mirrored request was answered the legacy way: {exc}")
            return error_response(404, "Session not found")

    async def peer_route(self, request: web.Request) -> web.Response:
        """The peer route: a client's answer, or its cancel, sent on by the replica it landed on (signed)."""
        body = await request.read()
        if self._peers is None:
            return web.Response(status=404)
        try:
            self._peers.authenticate(request.method, request.path, body, request.headers)
        except PeerAuthError as exc:
            log.warning("mirror.peer_auth_failed", reason=exc.reason, remote=request.remote)
            return web.Response(status=401)
        try:
            msg = jsonrpc.decode(body)
            if isinstance(msg, jsonrpc.Notification) and msg.method == mcp.CANCELLED:
                token = msg.params.get(SESSION_PARAM)
                found = isinstance(token, str) and self.calls.cancel(token, msg.params.get("requestId"))
                return web.Response(status=202 if found else 404)
            if not isinstance(msg, jsonrpc.Result | jsonrpc.Error):
                return web.Response(status=400)
            ask = open_ask(self._codec, msg.id, time.time())
        except (jsonrpc.InvalidMessage, HandleError):
            return web.Response(status=400)
        return web.Response(status=202 if self.calls.deliver(ask, msg) else 404)

    def _target(self, upstream: str, forwarded: Sequence[tuple[str, str]]) -> ModernTarget:
        config = self._upstreams[upstream]
        assert config.url is not None
        return ModernTarget(config.url, {**config.headers, **dict(forwarded)}, timeout=self._call_timeout)

    async def _initialize(
        self,
        request: web.Request,
        *,
        upstream: str,
        principal: str,
        msg: jsonrpc.Request,
        target: ModernTarget,
        challenge: Challenge | None,
    ) -> web.StreamResponse | None:
        version = tr.legacy_version(msg.params.get("protocolVersion"))
        client = tr.client_info(msg.params)
        caps = tr.modern_capabilities(msg.params.get("capabilities"))
        params = tr.modern_params({}, client=client, capabilities=caps, log_level=None)
        try:
            answer = await self._post(upstream, target, jsonrpc.Request(msg.id, "server/discover", params))
        except NotModern as exc:
            self._eras.suspect(upstream, f"server/discover was answered the legacy way: {exc}")
            return None
        except UpstreamAuthChallenge as exc:
            return _challenged(exc, challenge)
        except (UpstreamError, TimeoutError) as exc:
            return error_response(502, unavailable_message(upstream, exc))
        reply = BridgeReply(request)
        if isinstance(answer, jsonrpc.Error):
            return await reply.finish(answer)
        session = MirrorSession(upstream, principal, secrets.token_urlsafe(12), version, client, caps)
        sealed = seal_mirror_session(self._codec, session)
        log.info("mirror.session", upstream=upstream, client=client[0], version=version)
        result = jsonrpc.Result(msg.id, tr.initialize_result(answer.result, version))
        return await reply.finish(result, {mcp.SESSION_HEADER: sealed})

    async def _request(
        self,
        request: web.Request,
        session: MirrorSession,
        msg: jsonrpc.Request,
        target: ModernTarget,
        challenge: Challenge | None,
    ) -> web.StreamResponse:
        reply = BridgeReply(request)
        if msg.method in (mcp.SET_LOG_LEVEL, mcp.PING):  # neither exists at 2026-07-28: answered here
            return await reply.finish(jsonrpc.Result(msg.id, {}))
        params = tr.modern_params(
            msg.params, client=session.client, capabilities=session.capabilities, log_level=self._log_level
        )
        upstream = session.upstream

        async def send(req: jsonrpc.Request, note: Notify) -> jsonrpc.Response:
            return await self._post(upstream, target, req, note)

        answer: jsonrpc.Response | None
        if msg.method in mcp.MRTR_METHODS and self._state is not None and self._state.draining:
            response = error_response(503, "This proxy replica is shutting down; send the request again")
            response.headers.update({NOT_PROCESSED: "1", "Retry-After": "0"})
            return response
        try:
            if msg.method in mcp.MRTR_METHODS:
                answer = await self.calls.run(reply, session, msg, params, send)
            else:
                answer = await send(jsonrpc.Request(msg.id, msg.method, params), _notes_to(reply))
                if isinstance(answer, jsonrpc.Result):
                    answer = jsonrpc.Result(msg.id, tr.legacy_result(answer.result))
        except UpstreamAuthChallenge as exc:
            if not reply.started:
                return _challenged(exc, challenge)
            answer = jsonrpc.error(msg.id, jsonrpc.UPSTREAM_FAILED, "The upstream refused the credentials")
        except TimeoutError:
            why = f"Upstream {upstream!r} did not answer within {self._call_timeout:g}s"
            answer = jsonrpc.error(msg.id, jsonrpc.UPSTREAM_TIMEOUT, why)
        except NotModern:
            if not reply.started:
                raise
            answer = jsonrpc.error(
                msg.id, jsonrpc.UPSTREAM_FAILED, "The upstream no longer speaks 2026-07-28"
            )
        except UpstreamError as exc:
            answer = jsonrpc.Error(msg.id, unavailable(upstream, exc))
        return await reply.finish(answer)

    async def _answer(
        self, session: MirrorSession, msg: jsonrpc.Result | jsonrpc.Error, body: bytes
    ) -> web.Response:
        """A client's answer to an inline request: to its call, here or on the replica named in its id."""
        try:
            ask = open_ask(self._codec, msg.id, time.time())
        except HandleError as exc:
            log.info("mirror.answer_refused", reason=exc.reason)
            return error_response(404, NO_CALL)
        if ask.session != session.token:
            return error_response(404, NO_CALL)
        if ask.owner == self._settings.owner or self._peers is None:
            delivered = self.calls.deliver(ask, msg)
        else:
            try:
                delivered = await self._peers.deliver(ask.owner, MIRROR_PEER_PATH, body) == 202
                log.info("mirror.answer_forwarded", owner=ask.owner, delivered=delivered)
            except PeerUnreachable as exc:
                log.warning("mirror.owner_unreachable", owner=ask.owner, error=str(exc))
                delivered = False
        return web.Response(status=202) if delivered else error_response(404, NO_CALL)

    async def _cancel(self, session: MirrorSession, note: jsonrpc.Notification) -> None:
        """End the call the client's cancel names: here, or (with `replica.peers`) on whichever replica
        holds it; the cancel says nothing of where its call runs, so every peer is asked."""
        rid = note.params.get("requestId")
        if self.calls.cancel(session.token, rid) or self._replicas is None or self._peers is None:
            return
        peers = self._peers
        params = {"requestId": rid, SESSION_PARAM: session.token}
        body = json.dumps({"jsonrpc": "2.0", "method": mcp.CANCELLED, "params": params}).encode()
        addresses = await self._replicas()
        found = await asyncio.gather(
            *(peers.deliver(a, MIRROR_PEER_PATH, body) for a in addresses), return_exceptions=True
        )
        log.info("mirror.cancel_sent_on", peers=len(addresses), found=sum(1 for f in found if f == 202))

    async def _post(
        self, upstream: str, target: ModernTarget, req: jsonrpc.Request, note: Notify | None = None
    ) -> jsonrpc.Response:
        return await post(self._clients[upstream], target, req, on_note=note)


def _notes_to(reply: BridgeReply) -> Notify:
    async def note(item: jsonrpc.Notification) -> None:
        if reply.sse:
            await reply.send(item)

    return note


def _challenged(exc: UpstreamAuthChallenge, challenge: Challenge | None) -> web.Response:
    response = error_response(exc.status, "Unauthorized" if exc.status == 401 else "Forbidden")
    relayed = challenge(exc.www_authenticate) if challenge is not None else exc.www_authenticate
    if relayed:
        response.headers["WWW-Authenticate"] = relayed
    return response


MIRROR = web.AppKey("mirror", LegacyMirror)


async def peer_route(request: web.Request) -> web.StreamResponse:
    """The app's handler of MIRROR_PEER_PATH (the mirror is made once the app starts)."""
    return await request.app[MIRROR].peer_route(request)


__all__ = ["MIRROR", "MIRROR_PEER_PATH", "LegacyMirror", "MirrorSettings", "peer_route"]
