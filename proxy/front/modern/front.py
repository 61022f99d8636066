"""The 2026-07-28 front over HTTP: one JSON-RPC request per POST, as the endpoint (front/endpoint.py) parsed
it.

Checks the request at the boundary (front/checks.py) and the principal's rate, then hands it to the modern
pipeline (pipeline.py, shared with the mirror's in-process front, inner.py), which plans its job and runs it.
What is HTTP's stays here: the answer streamed to the POST (a `Replier`) with its status, a listen's
long-lived stream (listen.py), a retry whose call another replica holds forwarded to that owner
(front/peers.py), and an upstream's 401/403 relayed as the client's own (front/oauth.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from aiohttp import web

from proxy.calls.outcomes import CallLink, Forward, OwnerGone
from proxy.calls.service import CallService
from proxy.calls.wording import credentials_refused, method_not_found
from proxy.config import FrontConfig, UpstreamConfig
from proxy.front.address import AddressSource
from proxy.front.checks import InputLimits, Refusal, check_modern
from proxy.front.modern.aggregate.front import AggregateFront
from proxy.front.modern.limits import RateGate
from proxy.front.modern.listen.front import ListenFront
from proxy.front.modern.peer_route import check_peer_request, owner_refused
from proxy.front.modern.pipeline import Asker, Forwarded, Listening, Pipeline
from proxy.front.modern.plain import PlainRequests
from proxy.front.modern.relay.native import NativeRelay
from proxy.front.oauth import OAuthFront
from proxy.front.peers import FORWARD_PREFIX, PeerLost, PeerRefused, Peers, PeerUnreachable
from proxy.front.planner import Planner
from proxy.front.principal import Resolver
from proxy.front.reply import Replier, status_of
from proxy.observe.line import Outcome, RequestLine
from proxy.routes.policy import Grant
from proxy.routes.table import Route as AggregatedRoute
from proxy.routes.table import RouteTable
from proxy.tasks.front import TaskFront
from proxy.upstream.base import UpstreamAuthChallenge
from proxy.upstream.pool import SessionPool
from proxy.wire import jsonrpc, mcp
from proxy.wire.jsonrpc import ErrorObject


class RuntimeStateView(Protocol):
    @property
    def draining(self) -> bool: ...
    @property
    def stopped(self) -> bool: ...

    forwarding: int


class ModernFront:
    def __init__(
        self,
        *,
        front: FrontConfig,
        upstreams: Mapping[str, UpstreamConfig],
        pools: Mapping[str, SessionPool],
        calls: CallService,
        principal: Resolver,
        peers: Peers,
        state: RuntimeStateView,
        planner: Planner,  # which job serves a request (front/planner.py)
        tasks: TaskFront | None = None,  # the Tasks extension (proxy/tasks); None: no tasks
        listen: ListenFront | None = None,  # subscriptions/listen (listen.py); None: not served
        oauth: OAuthFront | None = None,  # OAuth (front/oauth.py); None: upstream 401s are plain errors
        relay: NativeRelay | None = None,  # to 2026-07-28 upstreams (relay.py); None: all taken as legacy
        aggregate: AggregateFront | None = None,  # aggregated routes (aggregate.py); None: none configured
    ) -> None:
        self.relay = relay  # the migration report's (process/migration.py)
        self._oauth = oauth
        self.routes = aggregate.table if aggregate is not None else RouteTable({})  # the endpoint's to tell
        self._state = state
        self.listener = listen  # the endpoint's, and a legacy client's GET stream's (inner.py)
        self._peers = peers
        self._principal = principal
        self.rate = RateGate(front)  # the endpoint's legacy requests take from it too
        self.limits = InputLimits(front.max_input_responses, front.max_input_response_bytes)
        self.plain = PlainRequests(pools=pools, calls=calls, tasks=tasks, oauth=oauth)
        self.pipeline = Pipeline(
            upstreams=upstreams,
            calls=calls,
            peers=peers,
            state=state,
            planner=planner,
            plain=self.plain,
            keepalive_s=front.keepalive_s,
            addresses=AddressSource.from_config(front),
            tasks=tasks,
            relay=relay,
            aggregate=aggregate,
        )

    def check_peer(self, request: web.Request, body: bytes, line: RequestLine) -> None:
        check_peer_request(self._peers, self._state.stopped, request, body, line)  # signed, still serving

    async def handle(
        self,
        request: web.Request,
        upstream: str,
        msg: jsonrpc.Request,
        body: bytes,
        *,
        line: RequestLine,
        link: CallLink,
        principal: str | None = None,
        upstream_headers: tuple[tuple[str, str], ...] | None = None,
        route: AggregatedRoute | None = None,
        grant: Grant | None = None,
    ) -> web.StreamResponse:
        """A modern request the endpoint (front/endpoint.py) parsed: `body` as it came, `msg` parsed.
        `principal` (else resolved here) and `upstream_headers` (validate mode: the client headers and
        credentials that go upstream; else the upstream's `forward_headers`) are the endpoint's. On an
        aggregated `route` (`upstream` is its name) the request goes on to the upstream that owns its name,
        or the route answers it (aggregate.py); `grant`: the validated token's scopes and claims."""
        req = check_modern(msg, request.headers, limits=self.limits)
        if principal is None:
            principal = self._principal(request.headers)
        forwarded = request.path.startswith(FORWARD_PREFIX)  # the endpoint checked its signature
        if forwarded and req.request_state is None and msg.method not in mcp.TASK_METHODS:
            raise Refusal(400, ErrorObject(jsonrpc.INVALID_REQUEST, "The peer route only takes retries"))
        self.rate.check(principal)  # a forwarded retry counts here too: this replica does its work
        replier = Replier(request)
        try:
            answer = await self.pipeline.answer(
                upstream,
                req,
                Asker(request, principal, upstream_headers, grant),
                sink=replier,
                line=line,
                link=link,
                route=route,
                local_only=forwarded,
            )
        except UpstreamAuthChallenge as exc:  # the upstream refused the client's credentials
            answer = self._challenged(request, upstream, msg.id, exc, replier=replier, line=line)
        if isinstance(answer, Listening):
            if self.listener is None:  # no listen served here: the proxy knows no such method
                line.set_outcome(Outcome.UNKNOWN_METHOD)
                answer = jsonrpc.Error(msg.id, method_not_found(msg.method))
                return await replier.finish(answer, 404)
            return await self.listener.serve(
                request,
                upstream=answer.upstream,
                req=answer.req,
                key=answer.key,
                principal=principal,
                line=line,
                route=route,
                key_for=answer.key_for,
            )
        if isinstance(answer, Forwarded):
            return await self._forward_to_owner(answer, request, body, msg.id, line=line, replier=replier)
        return await replier.finish(answer, status_of(answer))

    async def _forward_to_owner(
        self,
        forwarded: Forwarded,
        request: web.Request,
        body: bytes,
        rid: jsonrpc.RequestId,
        *,
        line: RequestLine,
        replier: Replier,
    ) -> web.StreamResponse:
        """Send the retry to the call's owner; if it is gone, handle it here, saying what is known."""
        answer = forwarded.forward
        line.owner = answer.owner
        self._state.forwarding += 1  # the drain waits for it
        try:
            try:
                response = await self._peers.forward(answer.owner, request, body, rid)
            except PeerUnreachable as exc:  # nothing reached the owner: handle it here (takeover or lost)
                line.owner_unreachable = str(exc)
                local = await self._here(
                    forwarded, "unreachable", request=request, rid=rid, replier=replier, line=line
                )
            except PeerRefused as exc:  # another key ring at the owner's address: lost, never re-run
                return await replier.finish(owner_refused(rid, answer.owner, exc.reason, line))
            except PeerLost as exc:  # it took the retry and went away: take over if the upstream can resume
                line.owner_lost = str(exc)
                if exc.stream is not None:  # the owner's event stream was cut: the answer goes on there
                    replier.adopt(exc.stream)
                local = await self._here(
                    forwarded, "unknown", request=request, rid=rid, replier=replier, line=line
                )
            else:
                line.set_outcome(Outcome.FORWARDED, response.status)
                return response
            assert not isinstance(local, Forward)
            return await replier.finish(local, status_of(local))
        finally:
            self._state.forwarding -= 1

    async def _here(
        self,
        forwarded: Forwarded,
        owner_gone: OwnerGone,
        *,
        request: web.Request,
        rid: jsonrpc.RequestId,
        replier: Replier,
        line: RequestLine,
    ) -> jsonrpc.Response | Forward:
        """The retry handled here, its owner gone (a takeover, or the call said lost)."""
        try:
            return await forwarded.again(owner_gone)
        except UpstreamAuthChallenge as exc:
            return self._challenged(request, line.upstream or "", rid, exc, replier=replier, line=line)

    def _challenged(
        self,
        request: web.Request,
        upstream: str,
        rid: jsonrpc.RequestId,
        exc: UpstreamAuthChallenge,
        *,
        replier: Replier,
        line: RequestLine,
    ) -> jsonrpc.Response:
        """The upstream's 401/403 raised as the client's (AuthRefused); a JSON-RPC error once SSE began."""
        line.set_outcome(Outcome.UPSTREAM_UNAUTHORIZED, exc.status)
        if replier.started or self._oauth is None:
            return jsonrpc.Error(rid, credentials_refused(upstream, exc.status))
        raise self._oauth.relayed(request, upstream, exc)
