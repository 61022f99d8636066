"""Legacy clients of 2026-07-28 upstreams: the mirror of what the proxy does for modern clients of legacy
ones.

A legacy client (2024-11-05 … 2025-11-25, Streamable HTTP) cannot speak to a server that has dropped the
handshake, nor use a migrated server's native `input_required` tools. For an upstream whose era
(upstream/era.py) is modern, the proxy is the legacy server to the client and a stateless 2026-07-28 client
upstream (a `ModernSender`, upstream/senders.py: a POST per request, or a line on a stdio upstream's shared
2026-07-28 child):

- **initialize** is answered from the upstream's `server/discover` (translate/mirror.py): the client's own
  protocol version if the proxy knows it, the server's capabilities a legacy client knows, its serverInfo
  and instructions. The `Mcp-Session-Id` is a sealed mirror session (handle/mirror_ids.py, format 5) that
  carries what every later request needs — the upstream, the principal, the negotiated version, the
  client's info and the capabilities it declared — so no replica keeps anything of the session: any replica
  serves any request of it, another principal's requests with it get 404.
- **tools/call, prompts/get, resources/read** are driven round after round (mirror/calls.py): the
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
- **GET** opens the session's standalone stream (mirror/stream.py): a listen of the proxy's own modern
  front for every list_changed the upstream (or the route's members) offers, written as legacy
  notifications; 405 when this proxy serves no listen. **resources/subscribe** and `unsubscribe` are
  answered by the mirror: the URI joins that listen. **DELETE** 200 (and the stream here ends).

A session whose upstream turns out legacy after all (a modern request answered the legacy way, `NotModern`)
gets 404, so the client initializes again, and the era probed again sends it to the relay.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

import structlog
from aiohttp import web

from proxy.calls.wording import (
    credentials_refused,
    no_longer_modern,
    relayed_failure,
    timed_out,
    unavailable_message,
)
from proxy.config import Config, UpstreamConfig
from proxy.front.address import TCP_PEER, AddressSource
from proxy.front.legacy.bridge.session import RuntimeStateView
from proxy.front.legacy.bridge.streams import BridgeReply, draining_response, error_response
from proxy.front.legacy.mirror.answers import MIRROR_PEER_PATH, MirrorAnswers
from proxy.front.legacy.mirror.calls import Admission, End, MirrorCalls, MirrorSettings, Post
from proxy.front.legacy.mirror.paths import either, listed, two_era_tool
from proxy.front.legacy.mirror.stream import SUBSCRIBE, UNSUBSCRIBE, Listener, MirrorStreams
from proxy.front.peers import NOT_PROCESSED, Peers
from proxy.front.plan import WrongEra
from proxy.handle import HandleCodec, HandleError
from proxy.handle.mirror_ids import MirrorSession, open_mirror_session, seal_mirror_session
from proxy.migration.tally import MIRRORED_KEY, MigrationBook
from proxy.observe.line import RequestLine
from proxy.routes.policy import Grant
from proxy.routes.table import Route
from proxy.translate import mirror as tr
from proxy.upstream.base import UpstreamAuthChallenge, UpstreamError
from proxy.upstream.era import EraBook
from proxy.upstream.modern import Notify, NotModern
from proxy.upstream.senders import ModernSenders
from proxy.wire import jsonrpc, mcp

log = structlog.get_logger("proxy.front.mirror")

Challenge = Callable[[str | None], str | None]


class Inner(Listener, Protocol):
    """The modern front, asked in process (front/modern/inner.py): for a legacy client of an aggregated
    route, and for the `legacy_tools` of a two-era upstream."""

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
    ) -> jsonrpc.Response: ...

    async def end(self, request_state: str, *, principal: str, reason: str) -> None: ...


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
        senders: ModernSenders,
        eras: EraBook,
        codec: HandleCodec,
        peers: Peers | None,
        settings: MirrorSettings,
        call_timeout: float = 300.0,
        log_level: str = "debug",
        replicas: Callable[[], Awaitable[list[str]]] | None = None,  # the others, for a cancel
        state: RuntimeStateView | None = None,  # draining: no new calls
        inner: Inner | None = None,  # the modern front in process: aggregated routes, `legacy_tools`
        admission: Admission | None = None,  # the call limits mirrored calls count against
        addresses: AddressSource = TCP_PEER,  # the client's address, for its share
    ) -> None:
        self._replicas, self._state, self.inner = replicas, state, inner
        self.migration: MigrationBook | None = None  # told the tools an upstream lists (proxy/migration)
        self._upstreams, self._senders, self._eras = upstreams, senders, eras
        self._codec, self._peers, self._settings = codec, peers, settings
        self._call_timeout, self._log_level = call_timeout, log_level
        self._addresses = addresses
        self.calls = MirrorCalls(codec, settings, admission)
        self.answers = MirrorAnswers(codec, settings, self.calls, peers, replicas)
        self.streams = MirrorStreams(state)

    @classmethod
    def from_config(
        cls,
        config: Config,
        senders: ModernSenders,
        eras: EraBook,
        codec: HandleCodec,
        book: PeerBook,
        *,
        state: RuntimeStateView | None = None,
        admission: Admission | None = None,
        addresses: AddressSource = TCP_PEER,
    ) -> LegacyMirror:
        settings = MirrorSettings(
            config.calls.parked_ttl_s,
            config.front.keepalive_s,
            config.replica_address,
            config.front.mirror_session_ttl_s,
        )
        upstreams = {u.name: u for u in config.upstreams}
        return cls(
            upstreams=upstreams,
            senders=senders,
            eras=eras,
            codec=codec,
            peers=book.peers,
            settings=settings,
            call_timeout=config.calls.call_timeout_s,
            replicas=book.resolve if book.addresses else None,
            state=state,
            admission=admission,
            addresses=addresses,
        )

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
        upstream_headers: tuple[tuple[str, str], ...] | None = None,
        route: Route | None = None,
        grant: Grant | None = None,
    ) -> web.StreamResponse:
        """The answer to a legacy client's request (the mirror job of front/plan.py). Raises WrongEra when
        its `initialize` finds the upstream legacy after all (planned again: the relay or the bridge takes
        it). With `route`, `upstream` is an aggregated route's name and the modern front (`inner`) answers
        every request; `upstream_headers` and `grant` are the endpoint's, for it."""
        caller = Caller(request, principal, tuple(forwarded), upstream_headers, route, grant, challenge)
        if isinstance(msg, jsonrpc.Request) and msg.method == "initialize":
            return await self._initialize(caller, upstream, msg)
        try:
            session = open_mirror_session(self._codec, request.headers[mcp.SESSION_HEADER], time.time())
        except HandleError:  # expired too: the client initializes again
            return error_response(404, "Session not found")
        if session.upstream != upstream or session.principal != principal:
            return error_response(404, "Session not found")
        if request.method == "GET":
            meta = tr.modern_params(
                {}, client=session.client, capabilities=session.capabilities, log_level=None
            )
            return await self.streams.serve(
                self.inner,
                request,
                session,
                meta["_meta"],
                upstream_headers=upstream_headers,
                route=route,
                grant=grant,
            )
        if request.method == "DELETE" or msg is None:
            if request.method == "DELETE":
                self.streams.forget(session)
            return web.Response(status=200)
        if isinstance(msg, jsonrpc.Result | jsonrpc.Error):
            return await self.answers.answer(session, msg, body or b"")
        if isinstance(msg, jsonrpc.Notification):
            if msg.method == mcp.CANCELLED:
                await self.answers.cancel(session, msg)
            return web.Response(status=202)
        assert isinstance(msg, jsonrpc.Request)
        try:
            return await self._request(caller, session, msg)
        except NotModern as exc:
            self._eras.suspect(upstream, f"a mirrored request was answered the legacy way: {exc}")
            return error_response(404, "Session not found")

    def _sender(self, caller: Caller, upstream: str, method: str, name: object) -> tuple[Post, End | None]:
        """How one request goes upstream: to the modern front in process on an aggregated route and for a
        tool in the upstream's `legacy_tools` (or learned as such), else straight to the modern upstream. A
        two-era upstream's tool is called the legacy way first, as the client going direct would
        (mirror/paths.py)."""
        inner, paths = self.inner, self._eras.paths
        call, route = method == "tools/call", caller.route
        two_era = route is None and call and two_era_tool(self._eras, upstream, name)
        if inner is None or not (route is not None or two_era or (call and paths.legacy(upstream, name))):
            # Straight to the modern upstream, over HTTP or its stdio child (upstream/senders.py); a modern
            # upstream keeps nothing of a call between its rounds: nothing to end.
            return self._straight(caller, upstream), None

        async def within(req: jsonrpc.Request, note: Notify) -> jsonrpc.Response:
            return await inner(
                caller.request,
                upstream,
                req,
                principal=caller.principal,
                upstream_headers=caller.upstream_headers,
                route=caller.route,
                grant=caller.grant,
                notify=note,
                line=RequestLine(),
                legacy=two_era,
            )

        async def end(request_state: str, reason: str) -> None:
            await inner.end(request_state, principal=caller.principal, reason=reason)

        if two_era:
            return either(self._eras, upstream, str(name), within, self._straight(caller, upstream)), end
        return within, end

    def _straight(self, caller: Caller, upstream: str) -> Post:
        return self._senders.sender(upstream, timeout=self._call_timeout, headers=dict(caller.forwarded))

    async def _initialize(self, caller: Caller, upstream: str, msg: jsonrpc.Request) -> web.StreamResponse:
        version = tr.legacy_version(msg.params.get("protocolVersion"))
        client = tr.client_info(msg.params)
        caps = tr.modern_capabilities(msg.params.get("capabilities"))
        params = tr.modern_params({}, client=client, capabilities=caps, log_level=None)
        send, _ = self._sender(caller, upstream, "server/discover", None)
        try:
            answer = await send(jsonrpc.Request(msg.id, "server/discover", params), _ignored)
        except NotModern as exc:  # nothing of the session made yet: planned again (front/planner.py)
            raise WrongEra(upstream, f"server/discover was answered the legacy way: {exc}", exc) from None
        except UpstreamAuthChallenge as exc:
            return _challenged(exc, caller.challenge)
        except (UpstreamError, TimeoutError) as exc:
            return error_response(502, unavailable_message(upstream, exc))
        reply = BridgeReply(caller.request)
        if isinstance(answer, jsonrpc.Error):
            return await reply.finish(answer)
        token, expires = secrets.token_urlsafe(12), int(time.time() + self._settings.session_ttl)
        session = MirrorSession(upstream, caller.principal, token, version, client, caps, expires)
        sealed = seal_mirror_session(self._codec, session)
        log.info("mirror.session", upstream=upstream, client=client[0], version=version)
        result = jsonrpc.Result(msg.id, tr.initialize_result(answer.result, version))
        return await reply.finish(result, {mcp.SESSION_HEADER: sealed})

    async def _request(
        self, caller: Caller, session: MirrorSession, msg: jsonrpc.Request
    ) -> web.StreamResponse:
        reply = BridgeReply(caller.request)
        if msg.method in (mcp.SET_LOG_LEVEL, mcp.PING):  # neither exists at 2026-07-28: answered here
            return await reply.finish(jsonrpc.Result(msg.id, {}))
        if msg.method in (SUBSCRIBE, UNSUBSCRIBE) and self.inner is not None:  # the GET stream's listen
            return await reply.finish(await self.streams.subscription(session, msg))
        params = tr.modern_params(
            msg.params, client=session.client, capabilities=session.capabilities, log_level=self._log_level
        )
        upstream = session.upstream
        send, end = self._sender(caller, upstream, msg.method, msg.params.get("name"))
        if msg.method == "tools/call":  # the migration report's path (front/endpoint.py counts it)
            caller.request[MIRRORED_KEY] = "inline" if end is not None and caller.route is None else True
        answer: jsonrpc.Response | None
        if msg.method in mcp.MRTR_METHODS and self._state is not None and self._state.draining:
            response = draining_response("send the request again")
            response.headers.update({NOT_PROCESSED: "1", "Retry-After": "0"})
            return response
        try:
            if msg.method in mcp.MRTR_METHODS:
                address = self._addresses.of(caller.request)
                counted = end is not None and caller.route is None  # the legacy way: its call holds a place
                answer = await self.calls.run(
                    reply, session, msg, params, send, end=end, address=address, counted=counted
                )
            else:
                answer = await send(jsonrpc.Request(msg.id, msg.method, params), _notes_to(reply))
                if isinstance(answer, jsonrpc.Result):
                    routed = caller.route is not None  # a route's own list: its members told the paths
                    listed(
                        self._eras.paths, self.migration, upstream, msg.method, answer.result, routed=routed
                    )
                    answer = jsonrpc.Result(msg.id, tr.legacy_result(answer.result))
        except UpstreamAuthChallenge as exc:
            if not reply.started:
                return _challenged(exc, caller.challenge)
            answer = jsonrpc.Error(msg.id, credentials_refused(upstream, exc.status))
        except TimeoutError:
            answer = jsonrpc.Error(msg.id, timed_out(self._call_timeout, upstream))
        except NotModern:
            if not reply.started:
                raise
            answer = jsonrpc.Error(msg.id, no_longer_modern(upstream))
        except UpstreamError as exc:  # worded as the relay words it: "unavailable" only if it never ran
            answer = jsonrpc.Error(msg.id, relayed_failure(upstream, exc))
        return await reply.finish(answer)


@dataclass(frozen=True, slots=True)
class Caller:
    """Who asks, and what of their request the answer needs (the endpoint's, as it parsed it)."""

    request: web.Request
    principal: str
    forwarded: tuple[tuple[str, str], ...]  # the client headers that go straight upstream
    upstream_headers: tuple[tuple[str, str], ...] | None  # validate mode's, for the modern front
    route: Route | None  # an aggregated route the session is of
    grant: Grant | None  # what the validated token grants (validate mode)
    challenge: Challenge | None  # adapts an upstream's WWW-Authenticate


async def _ignored(note: jsonrpc.Notification) -> None:
    return None


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
    return await request.app[MIRROR].answers.peer_route(request)


__all__ = ["MIRROR", "MIRROR_PEER_PATH", "LegacyMirror", "MirrorSettings", "peer_route"]
